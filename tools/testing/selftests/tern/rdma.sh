#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The RDMA transport (tern_rdma.ko) over soft-RoCE: the whole messenger
# suite (messenger.sh with TRANSPORT=rdma, IPv4 and IPv6), then what only
# RDMA has:
#  - a connect to an address without listener is refused at once (< 3 s);
#  - a connect to an unreachable address (no ARP answer on the RoCE
#    subnet) fails within the transport's connect bound: resolution gives
#    up after tern_rdma.resolve_timeout_ms (2 s), a whole attempt after
#    tern_rdma.connect_timeout_ms (5 s); the test allows 8 s;
#  - a connect to an address without a route fails at once (< 3 s);
#  - "rdma link delete" of the device under a verified benchmark run, and
#    the link re-created 3 s later: the listener listens again, the lanes
#    reconnect, the requests are resent, and the run ends with every
#    request answered once and no error;
#  - an address on an active-backup bond that takes its active port's MAC:
#    a failover under a verified run changes the MAC under the cm_ids,
#    rdma_cm reports ADDR_CHANGE, the lanes connect anew and resend, the
#    run ends clean and a new session connects;
#  - one lane carrying 4k reads and 64k reads and writes at once:
#    replies to inline and to zero-copy requests share SENDs without a
#    protocol error or reconnect;
#  - the same device loss under a block device with loss_timeout=5: I/O
#    fails with an error after the loss timeout (not before, no D state),
#    and works again once the link is back;
#  - zero-copy under four faults at once, in one verified 64k run (one
#    request in 25 spoilt): the requester sends descriptors with a
#    wrong rkey (tern_rdma.inject_bad_rkey_every: the responder's RDMA
#    READ/WRITE fails with a remote access error) or a wrong length
#    (inject_bad_len_every: a protocol error at the responder); and, as a
#    hostile responder, which tern_rdma_relay (rdma_hostile.sh) cannot
#    play for zero-copy requests,
#    tern_rdma spoils the replies it sends (inject_bad_reply_every: a
#    tid never sent, tid 0, an unknown flag) or claims a page more
#    remote data than the requester's buffer (inject_long_reply_every:
#    beyond the session's max_data, the frame is refused); the
#    requester resets the lane, reconnects and resends, no error;
#  - zero-copy short of MRs (tern_rdma reloaded with mr_count=6
#    mr_pages=4): a 64k request takes four MRs, the rest falls back to
#    inline data, all verified;
#  - small rings (send_depth=8 recv_depth=8) at depth 32: senders stall
#    on buffers and credits, unsignaled SENDs are reaped, all verified;
#    then send_depth=2 rw_ctxs=16: RDMA READs and WRITEs wait for send
#    queue entries (sq_stalls), all verified;
#  - the queues follow the session's depth: a one-lane run at depth 4
#    posts 4 + 8 receive buffers on each side (the responder mirrors
#    the requester's) and keeps 4 MRs (8 for 1M requests); at depth 128
#    recv_depth (64) and mr_count (128) cap them; the send queue has room
#    for two work requests per MR on the requester, for rw_ctxs rdma_rw
#    contexts on the responder only;
#  - in the two runs above, in the TCP+RDMA and in the mixed replies
#    runs: no reconnect, no protocol error and, where soft-RoCE counts
#    them, no RNR NAK (no RNR retry storm behind a passing run);
#  - inline data above tern_rdma.inline_copy_max goes into SENDs from its
#    own pages: counted at 4k (4096 bytes per frame), not at 1k or with
#    the limit raised, all verified;
#  - the replies to a batch of requests share SENDs: fewer than three
#    soft-RoCE packets per 64-byte message at depth 8 (requests,
#    replies and acknowledgements), and tern_rdma.rx_batch=0 still
#    verifies;
#  - one export served over TCP and RDMA at once: a client on each
#    transport writes and verifies its half with fio, and each half
#    reads back identical through the other transport and from the
#    backing device; the RDMA half moved its data by RDMA READ (writes)
#    and RDMA WRITE (reads);
#  - the modules unload and tern_rdma leaves no verbs resource behind.
# Needs tools/testing/vm/run --rdma (TERN_RDMA_ADDR0, TERN_RDMA_DEV0).

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/blk_lib.sh"

dir=$(cd "$(dirname "$0")" && pwd)
ADDR0=${TERN_RDMA_ADDR0:-}
DEV0=${TERN_RDMA_DEV0:-rxe0}
NETDEV0=${TERN_RDMA_NETDEV0:-tern0}
PORT=7510
URI=rdma://$ADDR0:$PORT
# TERNADM, CFG, map, unmap, wait_bdev: blk_lib.sh

# fails_within MAX_S COMMAND...: COMMAND fails, within MAX_S seconds.
fails_within() {
	local max=$1 t0 t1 rc
	shift
	t0=$(date +%s%N)
	"$@" 2>&1
	rc=$?
	t1=$(date +%s%N)
	echo "exit $rc after $(((t1 - t0) / 1000000)) ms"
	[ "$rc" != 0 ] && [ $((t1 - t0)) -lt $((max * 1000000000)) ]
}

# Fewer injected faults than over TCP: every fault costs a QP teardown
# and a new connection, and under that churn soft-RoCE itself (rdma_rxe
# in 6.12) once spun on a freed lock in its send path (slab poison in
# rxe_sched_task from rxe_xmit_packet), wedging the guest.
messenger() {
	TRANSPORT=rdma FAULT_EVERY=${FAULT_EVERY:-500} \
		FAULT_SECONDS=${FAULT_SECONDS:-8} "$dir/messenger.sh"
}

setup() {
	modprobe tern_rdma && modprobe tern_bench &&
		"$TERNADM" bench serve "$URI"
}

restore_device() {
	rdma link show "$DEV0" >/dev/null 2>&1 && return 0
	rdma link add "$DEV0" type rxe netdev "$NETDEV0"
}

# survived RC FILE: a verified bench run that lived through a fault exited
# RC 0, its JSON in FILE shows every request answered once without error,
# and some were resent
survived() {
	local v bad=0
	[ "$1" = 0 ] || bad=1
	bench_clean "$2" || bad=1
	v=$(json_field resends "$2")
	[ "${v:-0}" -gt 0 ] || { echo "no request was resent"; bad=1; }
	return $bad
}

# The device goes away under a verified run and comes back 3 s later:
# the run must end by itself with every request answered, once. 64k
# requests move their data by RDMA READ and WRITE, which keeps them in
# flight long enough that some are cut off and resent: with small
# inline ones a lane's teardown could find every request sent already
# answered in its CQ.
device_bounce() {
	local pid out rc t0 mark n bad=0
	out=$(mktemp)
	mark=$(log_mark)
	"$TERNADM" bench run "$URI" --json --time 16 --depth 16 --lanes 2 \
		--size 64k --dir both --verify > "$out" 2>&1 &
	pid=$!
	sleep 4
	kill -0 $pid 2>/dev/null || { cat "$out"; rm -f "$out"; return 1; }
	rdma link delete "$DEV0" || bad=1
	sleep 3
	restore_device || bad=1
	t0=$SECONDS
	for _ in $(seq 90); do
		kill -0 $pid 2>/dev/null || break
		sleep 1
	done
	if kill -0 $pid 2>/dev/null; then
		echo "run still going 90 s after the device came back"
		kill -TERM $pid
		bad=1
	fi
	wait $pid
	rc=$?
	echo "run exit $rc, ended $((SECONDS - t0)) s after the device came back"
	survived "$rc" "$out" || bad=1
	rm -f "$out"
	# the tries while the device was gone were logged, with their step
	n=$(log_count "$mark" ": connect failed (-[0-9]*), next try in")
	echo "reconnects failed: $n logged"
	[ "${n:-0}" -gt 0 ] || bad=1
	log_since "$mark" | grep ": connect to $ADDR0:$PORT failed in " | head -n 3
	n=$(log_count "$mark" ": connect to $ADDR0:$PORT failed in [a-z]")
	[ "${n:-0}" -gt 0 ] || bad=1
	# a new session finds the listener again
	"$TERNADM" bench run "$URI" --count 100 --verify >/dev/null || bad=1
	return $bad
}

# An RDMA device on a bond of two veths, active-backup, the bond's MAC
# always its active port's (fail_over_mac=active): a failover changes the
# MAC of the netdev every cm_id on it resolved, the one way to make 6.12's
# rdma_cm send ADDR_CHANGE (cma_netdev_change(), on NETDEV_BONDING_FAILOVER).
BOND=ternbond0
BOND_ADDR=10.78.0.1
BOND_URI=rdma://$BOND_ADDR:$PORT

bond_setup() {
	local i
	modprobe bonding max_bonds=0 &&
		ip link add "$BOND" type bond mode active-backup miimon 100 \
			fail_over_mac active || return 1
	for i in 1 2; do
		ip link add "ternbp$i" type veth peer name "ternbq$i" &&
			ip link set "ternbp$i" master "$BOND" &&
			ip link set "ternbq$i" up || return 1
	done
	ip link set "$BOND" mtu 9000 up &&
		ip addr add "$BOND_ADDR/24" dev "$BOND" &&
		rdma link add rxebond0 type rxe netdev "$BOND" || return 1
	# the first port must carry before it can be failed over from
	for _ in $(seq 50); do
		[ "$(cat "/sys/class/net/$BOND/bonding/active_slave")" = ternbp1 ] &&
			[ "$(cat "/sys/class/net/$BOND/operstate")" = up ] && break
		sleep 0.1
	done
	"$TERNADM" bench serve "$BOND_URI"
}

bond_teardown() {
	local rc=0
	"$TERNADM" bench stop "$BOND_URI" || rc=1
	rdma link delete rxebond0 || rc=1
	ip link delete "$BOND" || rc=1
	ip link delete ternbp1 && ip link delete ternbp2 || rc=1
	modprobe -r bonding || rc=1
	return $rc
}

# bond_state: what to look at when a failover went wrong: the RoCE GIDs
# of the bond's device, tern_rdma's cm_ids and lanes, the kernel's last
# words
bond_state() {
	local f dir=/sys/class/infiniband/rxebond0/ports/1
	for f in "$dir"/gids/*; do
		case $(cat "$f" 2>/dev/null) in
		"" | 0000:0000:0000:0000:0000:0000:0000:0000) continue ;;
		esac
		echo "gid ${f##*/} $(cat "$f") $(cat "$dir/gid_attrs/ndevs/${f##*/}" 2>/dev/null)"
	done
	rdma res show cm_id
	rdma res show qp
	cat "$ZC_LANES"
	# did connect requests go out, come in, get answered?
	for f in /sys/class/infiniband_cm/rxebond0/1/cm_{tx,rx}_msgs/{req,rep,rej}; do
		echo "${f#*/1/} $(cat "$f" 2>/dev/null)"
	done
	grep -H . /sys/class/infiniband/rxebond0/ports/1/hw_counters/* 2>/dev/null |
		grep -v ':0$'
	dmesg | tail -40
}

# The bond fails over to its other port under a verified run; lanes and
# the listener get ADDR_CHANGE, the listener listens anew. Twice in 7
# clean-clone CI runs while the listener kept its cm_id (never in 76 runs
# of the check alone, under load or after device_bounce) the lanes found
# no way back for a minute after the failover, nor did a new session:
# bond_state shows why if it happens again, and the check runs once
# more on a new bond before it fails.
addr_change() {
	addr_change_once && return 0
	ktap_info "bond failover failed once: again on a new bond (see rdma.sh)"
	addr_change_once
}

addr_change_once() {
	local pid out rc mac0 mac1 mark n bad=0
	bond_setup || { bond_teardown; return 1; }
	out=$(mktemp)
	zc_snap
	mark=$(log_mark)
	# a healthy run ends ~8 s in; one that lost its lanes would wait out
	# the 60 s loss timeout before the retry: cut it at 30
	timeout 30 "$TERNADM" bench run "$BOND_URI" --json --time 8 --depth 8 \
		--lanes 2 --size 16k --dir both --verify > "$out" 2>&1 &
	pid=$!
	sleep 3
	mac0=$(cat "/sys/class/net/$BOND/address")
	echo ternbp2 > "/sys/class/net/$BOND/bonding/active_slave" || bad=1
	mac1=$(cat "/sys/class/net/$BOND/address")
	echo "bond MAC $mac0 -> $mac1"
	[ "$mac0" != "$mac1" ] || { echo "the failover kept the MAC"; bad=1; }
	wait $pid
	rc=$?
	echo "run exit $rc"
	survived "$rc" "$out" || { bond_state; bad=1; }
	rm -f "$out"
	# ADDR_CHANGE came and lanes reconnected. How many ends count one
	# depends on the order of events: an end whose peer heard it first
	# may be torn down before its own arrives (one of 2 lanes, once)
	zc_moved addr_changes core_reconnects || bad=1
	# the listener let go of the old address and listens anew
	n=$(log_count "$mark" "listening again on $BOND_ADDR:$PORT")
	echo "listener back $n times"
	[ "${n:-0}" = 1 ] || bad=1
	# a new session resolves the new MAC
	timeout 15 "$TERNADM" bench run "$BOND_URI" --count 100 --verify \
		>/dev/null || { bond_state; bad=1; }
	bond_teardown || bad=1
	return $bad
}

BLK_PORT=7511
BLK_WORK=/var/tmp/tern-rdma-blk

# One RAM disk exported on a TCP port and an RDMA port.
blk_setup() {
	modprobe tern_tcp && modprobe tern_target && modprobe tern_blk &&
		modprobe brd rd_nr=1 rd_size=65536 max_part=0 || return 1
	mkdir -p "$BLK_WORK" "$CFG/exports/rvol0" "$CFG/ports/rp0" \
		"$CFG/ports/tp0" || return 1
	echo /dev/ram0 > "$CFG/exports/rvol0/device_path" &&
		echo 1 > "$CFG/exports/rvol0/enable" || return 1
	echo rdma > "$CFG/ports/rp0/transport" &&
		echo "$ADDR0" > "$CFG/ports/rp0/address" &&
		echo tcp > "$CFG/ports/tp0/transport" &&
		echo 127.0.0.1 > "$CFG/ports/tp0/address" || return 1
	for p in rp0 tp0; do
		echo $BLK_PORT > "$CFG/ports/$p/service" &&
			ln -s "$CFG/exports/rvol0" "$CFG/ports/$p/exports/rvol0" &&
			echo 1 > "$CFG/ports/$p/enable" || return 1
	done
}

# blk_map OPTIONS: map (blk_lib.sh), wait for /dev/ternN, print ternN
blk_map() {
	local name
	name=$(map "$1") && wait_bdev "$name" >&2 || return 1
	echo "$name"
}

# fio_half DEV HALF: write and crc32c-verify half HALF (0, 1) of 64 MiB
fio_half() {
	fio --name=half$2 --filename="/dev/$1" --rw=randwrite --bs=4k-128k \
		--iodepth=16 --ioengine=libaio --direct=1 --offset=$(($2 * 32))M \
		--size=32M --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--output=/dev/null
}

# "DEV COUNT" for each RDMA device tern_rdma holds PDs on
tern_pds() {
	rdma resource show pd 2>/dev/null | awk '/tern_rdma/ {
		for (i = 1; i < NF; i++)
			if ($i == "dev")
				n[$(i + 1)]++
	} END { for (d in n) print d, n[d] }'
}

# A client per transport on one export, at once; halves cross-checked.
# The rdma client's two lanes and the target's two share one PD per
# device.
both_transports() {
	local r t rc=0 pr pt pds
	r=$(blk_map "transport=rdma,address=$ADDR0,service=$BLK_PORT,export=rvol0,lanes=2,queue_depth=32") ||
		return 1
	# no lanes= here: the default is a lane per online CPU
	t=$(blk_map "transport=tcp,address=127.0.0.1,service=$BLK_PORT,export=rvol0,queue_depth=32") ||
		{ unmap "$r"; return 1; }
	echo "rdma: $r ($(cat /sys/block/$r/tern/transport)), tcp: $t ($(cat /sys/block/$t/tern/transport), $(cat /sys/block/$t/tern/lanes) lanes)"
	[ "$(cat /sys/block/$t/tern/lanes)" = "$(nproc)" ] || rc=1
	zc_snap
	fio_half "$r" 0 & pr=$!
	fio_half "$t" 1 & pt=$!
	wait $pr || { echo "fio over rdma failed"; rc=1; }
	wait $pt || { echo "fio over tcp failed"; rc=1; }
	pds=$(tern_pds)
	echo "tern_rdma PDs per device: ${pds:-none}"
	if [ -z "$pds" ] ||
		! echo "$pds" | awk '$2 != 1 { bad = 1 } END { exit bad }'; then
		rc=1
	fi
	# block writes above inline_max: the target READs the client's
	# pages; reads: the target WRITEs them (fio's bs goes to 128k)
	# and requests go out from queue_rq, completion handlers do the rest
	zc_moved rdma_reads rdma_read_bytes rdma_writes rdma_write_bytes \
		zc_requests remote_invalidates core_submitter_sends handler_runs \
		unsignaled_sends ||
		rc=1
	# mixed sizes: replies to inline and to zero-copy requests share
	# SENDs, and none of that may look like a protocol error
	zc_quiet || rc=1
	# what one transport wrote, the other reads, and so does ram0
	dd if="/dev/$r" of="$BLK_WORK/r" bs=1M count=64 iflag=direct status=none &&
		dd if="/dev/$t" of="$BLK_WORK/t" bs=1M count=64 iflag=direct status=none &&
		dd if=/dev/ram0 of="$BLK_WORK/b" bs=1M count=64 status=none || rc=1
	cmp "$BLK_WORK/r" "$BLK_WORK/t" || rc=1
	cmp "$BLK_WORK/r" "$BLK_WORK/b" || rc=1
	rm -f "$BLK_WORK/r" "$BLK_WORK/t" "$BLK_WORK/b"
	unmap "$r" || rc=1
	unmap "$t" || rc=1
	return $rc
}

# 4k block writes over rdma go padded and the target's bios take the
# pages they were received into: 1024 writes at QD1, each padded and its
# page taken (but RX_SLACK, see rx_pages), read back verified (crc32c),
# no reconnect.
blk_rx_pages() {
	local d rc=0 p t
	d=$(blk_map "transport=rdma,address=$ADDR0,service=$BLK_PORT,export=rvol0,lanes=1,queue_depth=8") ||
		return 1
	zc_snap
	fio --name=rxp --filename="/dev/$d" --rw=randwrite --bs=4k --iodepth=1 \
		--ioengine=libaio --direct=1 --size=4M --verify=crc32c \
		--do_verify=1 --verify_fatal=1 --output=/dev/null || rc=1
	p=$(zc_delta padded_sends) t=$(zc_delta rx_pages_taken)
	echo "1024 writes: padded $p, pages taken $t"
	[ "$p" -ge $((1024 - RX_SLACK)) ] && [ "$t" -ge $((p - RX_SLACK)) ] ||
		rc=1
	zc_quiet || rc=1
	unmap "$d" || rc=1
	return $rc
}

# One lane, 4k reads (inline replies) and 64k reads and writes (replies
# sent as SEND_WITH_INV) at once: the target packs replies of both kinds
# into one SEND, and the invalidation belongs only to the reply that
# ends it. Once taken for the earlier inline reply's: "buffer not ours",
# a protocol error and a reconnect every few hundred I/Os.
mixed_replies() {
	local d rc=0 v
	d=$(blk_map "transport=rdma,address=$ADDR0,service=$BLK_PORT,export=rvol0,lanes=1,queue_depth=64") ||
		return 1
	zc_snap
	fio --name=small --filename="/dev/$d" --rw=randread --bs=4k --iodepth=32 \
		--ioengine=libaio --direct=1 --time_based --runtime=8 \
		--output=/dev/null & v=$!
	fio --name=big --filename="/dev/$d" --rw=randrw --bs=64k --iodepth=32 \
		--ioengine=libaio --direct=1 --time_based --runtime=8 \
		--output=/dev/null || rc=1
	wait $v || rc=1
	zc_moved remote_invalidates rdma_writes rdma_reads || rc=1
	zc_quiet || rc=1
	unmap "$d" || rc=1
	return $rc
}

# processes in D state, in three samples a second apart
in_d_state() {
	local i
	for i in 1 2 3; do
		ps -eo stat= | grep -q '^D' || return 1
		sleep 1
	done
}

# The device goes away under a block device with a 5 s loss timeout.
blk_device_loss() {
	local d st t0 el rc=0
	d=$(blk_map "transport=rdma,address=$ADDR0,service=$BLK_PORT,export=rvol0,loss_timeout=5") ||
		return 1
	st=/sys/block/$d/tern/state
	rdma link delete "$DEV0" || { unmap "$d"; return 1; }
	t0=$(date +%s%N)
	if dd if="/dev/$d" of=/dev/null bs=4k count=1 skip=33 iflag=direct \
		status=none 2>/dev/null; then
		echo "read succeeded without a device"
		rc=1
	fi
	el=$((($(date +%s%N) - t0) / 1000000))
	echo "read failed after $el ms, state $(cat "$st")"
	[ "$el" -ge 4000 ] || { echo "failed before the loss timeout"; rc=1; }
	[ "$el" -le 30000 ] || { echo "failed too late"; rc=1; }
	[ "$(cat "$st")" = failed ] || rc=1
	in_d_state && { echo "a task is stuck in D state"; rc=1; }
	restore_device || rc=1
	for _ in $(seq 300); do
		[ "$(cat "$st")" = live ] && break
		sleep 0.1
	done
	echo "state $(cat "$st") after the device came back"
	dd if="/dev/$d" of=/dev/null bs=4k count=1 skip=34 iflag=direct \
		status=none || rc=1
	unmap "$d" || rc=1
	return $rc
}

blk_teardown() {
	local p rc=0
	for p in rp0 tp0; do
		echo 0 > "$CFG/ports/$p/enable" &&
			rm "$CFG/ports/$p/exports/rvol0" &&
			rmdir "$CFG/ports/$p" || rc=1
	done
	rmdir "$CFG/exports/rvol0" || rc=1
	rm -rf "$BLK_WORK"
	modprobe -r tern_blk && modprobe -r tern_target &&
		modprobe -r tern_tcp && modprobe -r brd || rc=1
	return $rc
}

unload() {
	"$TERNADM" bench stop || return 1
	rmmod tern_bench tern_rdma tern || return 1
	! grep -qE "^(tern|tern_bench|tern_rdma) " /proc/modules
}

# Kernel users show up by module name in the resource tracker.
no_resources() {
	local r left=0
	for r in cm_id qp cq pd; do
		if rdma resource show $r 2>/dev/null | grep "tern_rdma"; then
			left=1
		fi
	done
	[ $left = 0 ]
}

# --- zero-copy data path under faults and with few MRs ---------------
ZC_STATS=/sys/kernel/debug/tern_rdma/stats
ZC_LANES=/sys/kernel/debug/tern_rdma/lanes
ZC_PARAMS=/sys/module/tern_rdma/parameters
declare -A zc_base

zc_stat() {
	awk -v k="$1" '$1 == k { print $2 }' "$ZC_STATS"
}

# Soft-RoCE's counters of RNR NAKs sent and received, and of QPs that
# gave up after them (rdma_rxe hw_counters, where the kernel has them).
RXE_RNR_COUNTERS="rcvd_rnr_err send_rnr_err retry_rnr_exceeded_err"

# rxe_counter NAME: hw counter NAME summed over every port of every RDMA
# device; empty when no device has it
rxe_counter() {
	local f sum=
	for f in /sys/class/infiniband/*/ports/*/hw_counters/"$1"; do
		[ -r "$f" ] || continue
		sum=$((${sum:-0} + $(cat "$f")))
	done
	echo "$sum"
}

# zc_snap: remember every tern_rdma counter, the core's totals and the
# soft-RoCE RNR counters that exist
zc_snap() {
	local k v
	zc_base=()
	while read -r k v; do
		zc_base[$k]=$v
	done < "$ZC_STATS"
	for k in reconnects resends proto_errors remote_pulls remote_pushes \
		submitter_sends; do
		zc_base[core_$k]=$(total_of $k)
	done
	for k in $RXE_RNR_COUNTERS; do
		v=$(rxe_counter $k)
		[ -n "$v" ] && zc_base[hw_$k]=$v
	done
}

# zc_delta NAME: growth of a counter since zc_snap (core_NAME: the core's,
# hw_NAME: soft-RoCE's)
zc_delta() {
	local now
	case $1 in
	core_*) now=$(total_of "${1#core_}") ;;
	hw_*) now=$(rxe_counter "${1#hw_}") ;;
	*) now=$(zc_stat "$1") ;;
	esac
	echo $((${now:-0} - ${zc_base[$1]:-0}))
}

# zc_quiet: since zc_snap no lane reconnected, no protocol error, and no
# RNR NAK on soft-RoCE (the counters it has). Credits keep every SEND
# to a posted buffer and rnr_retry_count is 0, so a missing buffer would
# be an RNR NAK, a QP error and a reconnect, never a silent retry storm.
zc_quiet() {
	local k d bad=0 names="core_proto_errors core_reconnects"
	for k in $RXE_RNR_COUNTERS; do
		[ -n "${zc_base[hw_$k]:-}" ] && names="$names hw_$k"
	done
	for k in $names; do
		d=$(zc_delta $k)
		echo "$k +$d"
		[ "$d" = 0 ] || bad=1
	done
	return $bad
}

# zc_moved NAME...: every named counter grew since zc_snap
zc_moved() {
	local k d bad=0
	for k in "$@"; do
		d=$(zc_delta "$k")
		echo "$k +$d"
		[ "$d" -gt 0 ] || bad=1
	done
	return $bad
}

# The faults zc_inject turns on at once, PARAM:COUNTER: requests with a
# bad rkey or a bad descriptor length; replies to a tid never sent, to
# tid 0 or with an unknown flag, or claiming a page more data than the
# buffer holds.
ZC_FAULTS="inject_bad_rkey_every:injected_bad_rkeys
inject_bad_len_every:injected_bad_lens
inject_bad_reply_every:injected_bad_replies
inject_long_reply_every:injected_long_replies"

# zc_inject: a verified run of 64k requests both ways with each fault of
# ZC_FAULTS in ZC_EVERY requests: the run must end clean, every fault
# must have happened, and the lanes must have reconnected and resent,
# the data still moving by RDMA. One run for the four: together they
# fail one request in 25, each alone would prove the same recovery.
zc_inject() {
	local f out rc bad=0 counters=
	out=$(mktemp)
	zc_snap
	for f in $ZC_FAULTS; do
		echo "${ZC_EVERY:-100}" > "$ZC_PARAMS/${f%:*}" || bad=1
		counters="$counters ${f#*:}"
	done
	"$TERNADM" bench run "$URI" --json --time "${ZC_SECONDS:-6}" \
		--depth 8 --lanes 2 --size 64k --dir both --verify > "$out" 2>&1
	rc=$?
	for f in $ZC_FAULTS; do
		echo 0 > "$ZC_PARAMS/${f%:*}"
	done
	echo "run exit $rc"
	[ "$rc" = 0 ] || bad=1
	bench_clean "$out" || bad=1
	# shellcheck disable=SC2086
	zc_moved $counters core_proto_errors core_reconnects core_resends \
		rdma_reads rdma_writes zc_requests || bad=1
	rm -f "$out"
	return $bad
}

# zc_reload PARAMS...: tern_rdma again with PARAMS, echo serving
zc_reload() {
	"$TERNADM" bench stop && rmmod tern_bench tern_rdma &&
		modprobe tern_rdma "$@" && modprobe tern_bench &&
		"$TERNADM" bench serve "$URI"
}

# zc_verified SIZE OPTIONS...: one verified bench run of SIZE both ways
# with OPTIONS; it must exit 0 and end clean
zc_verified() {
	local size=$1 out rc bad=0
	shift
	out=$(mktemp)
	"$TERNADM" bench run "$URI" --json --size "$size" --dir both \
		--verify "$@" > "$out" 2>&1
	rc=$?
	echo "size $size: run exit $rc"
	[ "$rc" = 0 ] || bad=1
	bench_clean "$out" || bad=1
	rm -f "$out"
	return $bad
}

# Six MRs of four pages per lane: a 64k request needs four, so at depth
# 8 most requests find the pool empty and go inline, while some go by
# several MRs; a 2M request would need 128 MRs, more than 64
# descriptors: inline. Everything verifies, with data CRCs.
zc_few_mrs() {
	local s bad=0 regs zc
	zc_reload mr_count=6 mr_pages=4 || return 1
	zc_snap
	for s in 64k:200 2m:16; do
		zc_verified "${s%:*}" --count "${s#*:}" --depth 8 --crc || bad=1
	done
	zc_moved zc_requests inline_fallbacks rdma_reads rdma_writes || bad=1
	regs=$(zc_delta registrations) zc=$(zc_delta zc_requests)
	echo "registrations +$regs for $zc zero-copy requests"
	[ "$regs" -ge $((4 * zc)) ] || { echo "fewer than 4 MRs per request"; bad=1; }
	zc_quiet || bad=1
	zc_reload || bad=1
	return $bad
}

# zc_refs_run SIZE: a verified 2 s bench run of SIZE both ways; echo how
# many frames' inline data went from their own pages, and bytes per frame
zc_refs_run() {
	local refs bytes
	zc_snap
	zc_verified "$1" --time 2 --depth 16 --lanes 2 >&2 || return 1
	refs=$(zc_delta inline_refs) bytes=$(zc_delta inline_ref_bytes)
	echo "$refs $((refs ? bytes / refs : 0))"
}

# Inline data above inline_copy_max (1024) goes into SENDs from its own
# pages: at 4k every write request and every read reply does, 4096 bytes
# each; at 1k none does, and none once inline_copy_max is raised past
# the SEND size. Everything verifies, with data CRCs too.
zc_inline_refs() {
	local r bad=0
	r=$(zc_refs_run 4k) || bad=1
	echo "4k: $r (frames, bytes each)"
	[ "${r% *}" -gt 0 ] && [ "${r#* }" = 4096 ] || bad=1
	r=$(zc_refs_run 1k) || bad=1
	echo "1k: $r"
	[ "${r% *}" = 0 ] || bad=1
	echo 65536 > "$ZC_PARAMS/inline_copy_max" || return 1
	r=$(zc_refs_run 4k) || bad=1
	echo 1024 > "$ZC_PARAMS/inline_copy_max"
	echo "4k, inline_copy_max=65536: $r"
	[ "${r% *}" = 0 ] || bad=1
	zc_verified 4k --time 2 --depth 16 --lanes 2 --crc || bad=1
	return $bad
}

# rx_pages_run SIZE OPTIONS...: a verified bench run of SIZE, requester
# to responder unless OPTIONS give another --dir; echo how many SENDs
# were padded and how many received pages the responder's core took
rx_pages_run() {
	local size=$1 out rc
	shift
	out=$(mktemp)
	zc_snap
	"$TERNADM" bench run "$URI" --json --size "$size" --verify \
		"$@" > "$out" 2>&1
	rc=$?
	bench_clean "$out" >&2 || rc=1
	rm -f "$out"
	echo "$(zc_delta padded_sends) $(zc_delta rx_pages_taken)"
	return $rc
}

# Write data of 1k..4k goes inline, padded so that it starts a page of
# the responder's receive buffer, which the responder's core takes in
# place of copying the data: at depth 1 every 4k and 2k request is
# padded and each one's page taken; at depth 16 on two lanes, with data
# CRCs, every padded one still is; both ways at 3k some are. 1k data is
# copied into the SEND and 8k goes by RDMA READ: neither is padded. All
# verified, no reconnect.
# A keepalive PING may share a SEND with a request (before it: not
# padded; after 2k of data: the page is not the data's alone), so a
# few may miss (RX_SLACK).
RX_SLACK=3
rx_pages() {
	local r s bad=0
	zc_snap
	for s in 4k 2k; do
		r=$(rx_pages_run $s --count 200 --depth 1) || bad=1
		echo "$s depth 1: $r (padded, taken)"
		[ "${r% *}" -ge $((200 - RX_SLACK)) ] &&
			[ "${r#* }" -ge $((${r% *} - RX_SLACK)) ] || bad=1
	done
	r=$(rx_pages_run 4k --time 2 --depth 16 --lanes 2 --crc) || bad=1
	echo "4k depth 16 crc: $r"
	[ "${r% *}" -gt 0 ] && [ "${r#* }" -ge $((${r% *} - RX_SLACK)) ] ||
		bad=1
	# both ways, 3k: replies share the requests' pages, which are then
	# not taken, and a page that starts with a frame header never is
	r=$(rx_pages_run 3k --time 2 --depth 16 --lanes 2 --dir both) || bad=1
	echo "3k both ways depth 16: $r"
	[ "${r#* }" -gt 0 ] || bad=1
	for s in 1k 8k; do
		r=$(rx_pages_run $s --count 200 --depth 4) || bad=1
		echo "$s: $r"
		[ "${r% *}" = 0 ] || bad=1
	done
	zc_quiet || bad=1
	return $bad
}

# One padded request in N with its padding starting inside the message
# header or past the responder's head: each is a protocol error, the
# lane reconnects and resends, the run ends verified.
rx_bad_pads() {
	local out rc bad=0
	out=$(mktemp)
	zc_snap
	echo 20 > "$ZC_PARAMS/inject_bad_pad_every" || return 1
	"$TERNADM" bench run "$URI" --json --size 4k --dir to --verify \
		--time 4 --depth 4 > "$out" 2>&1
	rc=$?
	echo 0 > "$ZC_PARAMS/inject_bad_pad_every"
	echo "run exit $rc"
	[ "$rc" = 0 ] || bad=1
	bench_clean "$out" || bad=1
	zc_moved injected_bad_pads core_proto_errors core_reconnects \
		core_resends || bad=1
	dmesg | grep -m1 "padding from" || bad=1
	rm -f "$out"
	return $bad
}

# zc_inline_run [--inline-write 0 --inline-read 0]: 200 verified 4k
# requests both ways; prints the echo service's RDMA READs and WRITEs
# since zc_snap, which the caller takes (this runs in a subshell)
zc_inline_run() {
	local out rc
	out=$(mktemp)
	"$TERNADM" bench run "$URI" --json --count 200 --size 4k --dir both \
		--depth 8 --verify "$@" > "$out" 2>&1
	rc=$?
	cat "$out" >&2
	if [ "$rc" != 0 ] || ! bench_clean "$out" >/dev/null ||
		{ [ $# -gt 0 ] && { [ "$(json_field inline_write "$out")" != 0 ] ||
			[ "$(json_field inline_read "$out")" != 0 ]; }; }; then
		echo "run $* exit $rc" >&2
		rm -f "$out"
		return 1
	fi
	rm -f "$out"
	echo "$(zc_delta rdma_reads) $(zc_delta rdma_writes)"
}

# bench run --inline-write/--inline-read choose, per session, what the
# echo service moves by RDMA: 200 4k requests both ways (100 each way)
# ride inline with the defaults (4096), none by RDMA READ or WRITE; with
# both limits 0 each moves by one (100 READs, 100 WRITEs); the JSON
# shows the limits given. Everything verifies, no lane reconnects.
zc_bench_inline() {
	local r bad=0
	zc_snap
	r=$(zc_inline_run) || bad=1
	echo "defaults: $r (READs WRITEs)"
	[ "$r" = "0 0" ] || bad=1
	zc_quiet || bad=1
	zc_snap
	r=$(zc_inline_run --inline-write 0 --inline-read 0) || bad=1
	echo "--inline-write 0 --inline-read 0: $r"
	[ "${r% *}" -ge 100 ] 2>/dev/null &&
		[ "${r#* }" -ge 100 ] 2>/dev/null || bad=1
	zc_quiet || bad=1
	return $bad
}

# Eight send and eight receive buffers per lane at depth 32: senders run
# short of buffers and of credits all the time, and most SENDs go
# unsignaled, so a stalled sender waits for the signaled SEND that reaps
# the ones before it. Inline and zero-copy sizes, everything verifies.
# Then two send buffers and the least send queue (rw_ctxs=16): a 1 MiB
# RDMA READ or WRITE takes 8 work requests (32 pages each), so two fill
# the queue and the responder, with 16 of them to serve, waits for
# queue entries (sq_stalls) as for buffers; everything still verifies.
zc_small_rings() {
	local s bad=0
	zc_reload send_depth=8 recv_depth=8 || return 1
	zc_snap
	for s in 4k 64k; do
		zc_verified "$s" --time 3 --depth 32 --lanes 2 || bad=1
	done
	zc_moved unsignaled_sends credit_stalls || bad=1
	zc_quiet || bad=1
	zc_reload send_depth=2 rw_ctxs=16 || return 1
	zc_snap
	zc_verified 1m --time 3 --depth 16 || bad=1
	zc_moved sq_stalls rdma_reads rdma_writes || bad=1
	zc_quiet || bad=1
	zc_reload || bad=1
	return $bad
}

# ring_sizes DEPTH SIZE REQUESTER RESPONDER: during a verified one-lane
# run at DEPTH of SIZE requests, the lanes' sizes in ZC_LANES read
# "requester REQUESTER" and "responder RESPONDER" (each "recv N sq N
# mrs N peer_recv N")
ring_sizes() {
	local pid got want bad=0
	want=$(printf 'requester %s\nresponder %s' "$3" "$4")
	# the lanes of the run before are gone
	for _ in $(seq 50); do
		[ -z "$(cat "$ZC_LANES")" ] && break
		sleep 0.1
	done
	"$TERNADM" bench run "$URI" --time 3 --depth "$1" --lanes 1 \
		--size "$2" --dir both --verify >/dev/null &
	pid=$!
	# a requester lane is listed from before it connects: wait for the
	# peer's numbers
	for _ in $(seq 50); do
		got=$(sed -n 's/.* \(re[a-z]*\) recv \([0-9]*\) .* sq \([0-9]*\) mrs \([0-9]*\) peer_recv \([0-9]*\)$/\1 recv \2 sq \3 mrs \4 peer_recv \5/p' "$ZC_LANES" | sort)
		[ "$got" = "$want" ] && break
		sleep 0.1
	done
	wait $pid || bad=1
	echo "depth $1 size $2: $(echo "$got" | tr '\n' ';')"
	[ "$got" = "$want" ] || { echo "want $(echo "$want" | tr '\n' ';')"; bad=1; }
	return $bad
}

# The queues follow the session's depth Q: the requester posts Q + 8
# receive buffers and keeps Q MRs per request of the session's largest
# data (one per 256 pages, one page more off page boundaries); its
# responder posts as many receive buffers as the requester announced.
# At the default depth (128) both stop at recv_depth (64) and the
# requester at mr_count (128). The send queue keeps two entries per MR
# on the requester, rw_ctxs (256) for RDMA READ/WRITE on the responder.
rings_by_depth() {
	local bad=0
	zc_reload || return 1	# the default limits
	zc_snap
	ring_sizes 4 64k "recv 12 sq 8 mrs 4 peer_recv 12" \
		"recv 12 sq 256 mrs 0 peer_recv 12" || bad=1
	ring_sizes 4 1m "recv 12 sq 16 mrs 8 peer_recv 12" \
		"recv 12 sq 256 mrs 0 peer_recv 12" || bad=1
	ring_sizes 128 4k "recv 64 sq 256 mrs 128 peer_recv 64" \
		"recv 64 sq 256 mrs 0 peer_recv 64" || bad=1
	zc_quiet || bad=1
	return $bad
}

# sent_pkts_per_100: soft-RoCE's packets, both devices, per 100 messages
# of a closed loop of 5000 64-byte requests at depth 8 on one lane
sent_pkts_per_100() {
	local p0 p1 out
	p0=$(rxe_counter sent_pkts)
	[ -n "$p0" ] || { echo "no sent_pkts hw counter" >&2; return 1; }
	out=$(mktemp)
	"$TERNADM" bench run "$URI" --json --count 5000 --depth 8 --size 64 \
		--dir to > "$out" 2>&1 || { cat "$out" >&2; rm -f "$out"; return 1; }
	p1=$(rxe_counter sent_pkts)
	bench_clean "$out" >&2 || { rm -f "$out"; return 1; }
	rm -f "$out"
	echo $(((p1 - p0) * 100 / 5000))
}

# The CQ's work item runs the lane's I/O once per batch of completions,
# and the I/O receives up to rx_batch messages before it sends, so the
# replies to a batch of requests share SENDs: under 3 packets per
# message, requests, replies and acknowledgements of both peers counted
# (2.4 measured; 3.9 with rx_batch=0 or with the I/O run per
# completion). rx_batch=0 still verifies, inline and zero-copy.
gathered_replies() {
	local pkts bad=0
	zc_snap
	pkts=$(sent_pkts_per_100) || bad=1
	echo "$pkts packets per 100 messages"
	[ "$bad" = 0 ] && [ "$pkts" -lt 300 ] || bad=1
	echo 0 > "$ZC_PARAMS/rx_batch" || bad=1
	zc_verified 4k --count 2000 --depth 16 || bad=1
	zc_verified 64k --count 500 --depth 16 || bad=1
	echo 8 > "$ZC_PARAMS/rx_batch" || bad=1
	zc_quiet || bad=1
	return $bad
}

ktap_plan 25

if [ -z "$ADDR0" ] || [ ! -x "$TERNADM" ] || ! command -v rdma >/dev/null; then
	ktap_info "no soft-RoCE (run with tools/testing/vm/run --rdma) or no ternadm"
	for _ in $(seq 25); do ktap_skip "no RDMA setup"; done
	ktap_finish
fi

ktap_check "messenger.sh passes with TRANSPORT=rdma" messenger
ktap_check "modules load, echo serves $URI" setup
ktap_check "connect to $ADDR0:7599 without listener is refused within 3 s" \
	fails_within 3 "$TERNADM" bench run "rdma://$ADDR0:7599" --count 1
ktap_check "connect to unreachable 10.77.0.99 fails within 8 s" \
	fails_within 8 "$TERNADM" bench run "rdma://10.77.0.99:$PORT" --count 1
ktap_check "connect to unroutable 192.0.2.1 fails within 3 s" \
	fails_within 3 "$TERNADM" bench run "rdma://192.0.2.1:$PORT" --count 1
ktap_check "rdma link delete $DEV0 under a verified run, back 3 s later: listener back, lanes reconnect, failed tries logged with their step, requests resent, no error" \
	device_bounce
ktap_check "bond failover under a verified run: ADDR_CHANGE, lanes reconnect, the listener listens anew, no error, new sessions connect" \
	addr_change
ktap_check "zero-copy, 1 in ${ZC_EVERY:-100} requests each with a bad rkey, a bad descriptor length, a reply to a tid never sent (or tid 0, or an unknown flag), a reply claiming a page more than the buffer: remote access and protocol errors, lanes reconnect, resent, verified, no error" \
	zc_inject
ktap_check "zero-copy with 6 MRs of 4 pages per lane: several MRs per request, inline fallback when out of MRs or descriptors, verified, no reconnect or RNR" \
	zc_few_mrs
ktap_check "8 send and 8 receive buffers per lane at depth 32: SENDs reaped by later signaled ones, credit stalls; 2 send buffers and a 16-entry send queue: RDMA READ/WRITE wait for queue entries; verified, no reconnect or RNR" \
	zc_small_rings
ktap_check "queues by session depth: depth 4 posts 12 receive buffers each side, 4 MRs (8 for 1M requests); depth 128 stops at recv_depth 64 and mr_count 128; send queue room for MRs on the requester, for rdma_rw on the responder only" \
	rings_by_depth
ktap_check "inline data above inline_copy_max sent from its pages: 4k yes (4096 bytes each), 1k and inline_copy_max=65536 no, verified" \
	zc_inline_refs
ktap_check "write data of 2k and 4k padded to start a page of the responder's receive buffer, the page taken instead of copied (each one at depth 1, each padded one at depth 16 with CRCs, some both ways at 3k); 1k and 8k not padded; verified, no reconnect" \
	rx_pages
ktap_check "1 in 20 padded requests with padding in the message header or past the head: protocol error, lane reconnects, resent, verified" \
	rx_bad_pads
ktap_check "bench run --inline-write 0 --inline-read 0: 4k data both ways by RDMA READ and WRITE (100 each), none with the defaults, verified, no reconnect" \
	zc_bench_inline
ktap_check "replies gathered: under 3 packets per 64-byte message at depth 8; rx_batch=0 verified, no reconnect" \
	gathered_replies
ktap_check "one RAM disk exported on a TCP port and an RDMA port" blk_setup
ktap_check "a client over rdma and one over tcp on one export at once: fio verify, halves identical across transports and on the disk, rdma half moved by RDMA READ/WRITE, one tern_rdma PD per device" \
	both_transports
ktap_check "4k block writes over rdma: each padded, the target's bio takes the received page, read back verified, no reconnect" \
	blk_rx_pages
ktap_check "one rdma lane, inline and zero-copy replies mixed in SENDs: no protocol error, no reconnect" \
	mixed_replies
ktap_check "rdma link delete under a block device: I/O fails after loss_timeout=5, no D state; works again when the link is back" \
	blk_device_loss
ktap_check "block modules unload" blk_teardown
ktap_check "reply statuses that are no errno arrive as -EREMOTEIO over rdma too (tern_test_msgr)" \
	sh -c "modprobe tern_test_msgr rdma_addr=$ADDR0 && rmmod tern_test_msgr && modprobe -r tern_tcp"
ktap_check "bench stop, rmmod tern_bench tern_rdma tern" unload
ktap_check "no cm_id, QP, CQ or PD of tern_rdma left (rdma resource)" \
	no_resources
ktap_finish
