#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Multipath sessions (issue 21): one tern device whose session has two
# paths, through two ports of the target.
#  - two TCP paths, the first to an address on a dummy link: each I/O
#    policy moves requests as it claims (the per-path counters of
#    /sys/block/ternN/tern/paths); the first path cut under fio verify
#    moves the I/O to the second within 2 s, fio finds no error and no
#    mismatch; the path back, it rejoins and failover goes back to it.
#    Target and client share a network namespace, where a link set down
#    still carries local traffic: the cut is a blackhole rule for the
#    address instead, which drops every packet both ways, as a pulled
#    cable does (the local table's rule moves behind it for the test);
#  - a device that authenticates has both paths up, every lane proven;
#  - the port the session was opened on disabled under fio verify: the
#    session is rebuilt through the other port, the device rebinds, no
#    error;
#  - an RDMA path and a TCP path: "rdma link delete" under fio verify
#    moves the I/O to TCP within 2 s, no error, no mismatch; the device
#    back, the RDMA path rejoins and takes the I/O again;
#  - every path lost: I/O fails with EIO once the loss timeout passes
#    (3 s here), within 5 s more, no task in D state, and unmap works;
#  - the target's rules hold on every path: a path through a port the
#    export is not linked to makes the map fail (EACCES) and leaves
#    nothing; unlinking the export from a path's port ends the device's
#    binding (EIO, state removed) although it was opened on another;
#    a path whose lanes the target refuses is not one of the session's,
#    and unlinking the export from its port ends nothing.
# Keepalives of 300 ms: a silent path is given up after 900 ms.

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/blk_lib.sh"

WORK=/var/tmp/tern-mp
LINK=ternmp0		# dummy link holding the first TCP path's address
CUT_PREF=10		# the blackhole rule's priority, before the local table
LOCAL_PREF=100		# the local table's rule, moved for the test
ADDR_A=10.79.0.1
SVC_A=7480		# port pa: $ADDR_A, on $LINK
SVC_B=7481		# port pb: 127.0.0.1
SVC_R=7482		# port pr: rdma on the first soft-RoCE address
SVC_C=7483		# port pc: 127.0.0.1, the export not linked
SVC_Q=7484		# port pq: 127.0.0.1, queue depth capped at 16
KA_MS=300
MOVE_MS=2000		# the issue's bound on moving I/O to another path
RDMA_DEV=${TERN_RDMA_DEV0:-rxe0}

# path_field DEV IDX KEY: KEY=value of path IDX (0 first) of DEV
path_field() {
	awk -v i="$(($2 + 1))" -v k="$3" 'NR == i {
		for (f = 3; f <= NF; f++) {
			split($f, kv, "=")
			if (kv[1] == k) print kv[2]
		}
	}' "/sys/block/$1/tern/paths"
}

# path_state DEV IDX: live or down
path_state() {
	awk -v i="$(($2 + 1))" 'NR == i { print $2 }' "/sys/block/$1/tern/paths"
}

# wait_path DEV IDX STATE SECONDS
wait_path() {
	for _ in $(seq $(($4 * 10))); do
		[ "$(path_state "$1" "$2")" = "$3" ] && return 0
		sleep 0.1
	done
	echo "path $2 of $1 is $(path_state "$1" "$2"), not $3, after $4 s"
	cat "/sys/block/$1/tern/paths"
	return 1
}

port_add() {
	adm target port add "$1" "$2" && adm target link "$1" mp0
}

setup() {
	mkdir -p "$WORK" && rm -f "$WORK"/* || return 1
	modprobe brd rd_nr=1 rd_size=65536 max_part=0 && modprobe dummy &&
		modprobe tern_tcp && blk_modprobe || return 1
	ip link add "$LINK" type dummy && ip addr add "$ADDR_A/32" dev "$LINK" &&
		ip link set "$LINK" up || return 1
	ip rule add pref "$LOCAL_PREF" lookup local &&
		ip rule del pref 0 lookup local || return 1
	adm target export add mp0 /dev/ram0 &&
		port_add pa "tcp://$ADDR_A:$SVC_A" &&
		port_add pb "tcp://127.0.0.1:$SVC_B"
}

# map_mp URI PATH_URI: a device of two paths, keepalives of KA_MS
map_mp() {
	local d
	d=$(map_uri "$1" --path "$2" --lanes 2 --loss-timeout 30) || return 1
	echo "$KA_MS" > "/sys/block/$d/tern/keepalive_ms" || return 1
	echo "$d"
}

map_tcp() {
	local d
	d=$(map_mp "tcp://$ADDR_A:$SVC_A/mp0" "tcp://127.0.0.1:$SVC_B") ||
		return 1
	echo "$d" > "$WORK/dev"
	cat "/sys/block/$d/tern/paths"
	adm list | grep -A3 "^$d "
	[ "$(wc -l < "/sys/block/$d/tern/paths")" = 2 ] &&
		[ "$(path_state "$d" 0)" = live ] &&
		[ "$(path_state "$d" 1)" = live ] &&
		[ "$(cat "/sys/block/$d/tern/iopolicy")" = failover ] &&
		adm list --json | grep -q "\"paths\":\[{\"uri\":\"tcp://$ADDR_A:$SVC_A\""
}

# A second device, of host mph, which proves its key on every lane of
# both paths: both live, auth=1, it reads; its key cleared, the lanes of
# both paths close (one came in by the other port) and reads fail
auth_paths() {
	local d rc=0
	adm key generate --out "$WORK/key" &&
		adm target host add mph --key-file "$WORK/key" || return 1
	d=$(map_uri "tcp://$ADDR_A:$SVC_A/mp0" --path "tcp://127.0.0.1:$SVC_B" \
		--lanes 1 --host mph --key-file "$WORK/key" --loss-timeout 3) ||
		return 1
	cat "/sys/block/$d/tern/paths"
	[ "$(path_state "$d" 0)" = live ] && [ "$(path_state "$d" 1)" = live ] &&
		[ "$(cat "/sys/block/$d/tern/auth")" = 1 ] &&
		dd if="/dev/$d" of=/dev/null bs=64k count=16 iflag=direct \
			status=none || rc=1
	echo > "$CFG/hosts/mph/key" || rc=1
	dmesg | grep "host mph: key revoked" | tail -n 1 |
		grep ", 2 lanes closed" || { echo "not both paths' lanes closed"; rc=1; }
	read_fails_in "$d" 99 40 "after the key was revoked" || rc=1
	adm unmap "$d" && adm target host del mph || rc=1
	return $rc
}

# load DEV: 2 s of 4 KiB random reads, 16 in flight
load() {
	fio --name=load --filename="/dev/$1" --direct=1 --ioengine=libaio \
		--rw=randread --bs=4k --iodepth=16 --size=16M --time_based \
		--runtime=2 --output-format=terse >/dev/null 2>&1
}

# policy POLICY: DEV under load with POLICY; the requests each path got
# are as POLICY says: failover all on the first, round-robin about
# half each, min-inflight some on each
policy() {
	local d r0 r1 d0 d1 all
	d=$(cat "$WORK/dev")
	echo "$1" > "/sys/block/$d/tern/iopolicy" || return 1
	[ "$(cat "/sys/block/$d/tern/iopolicy")" = "$1" ] || return 1
	r0=$(path_field "$d" 0 requests)
	r1=$(path_field "$d" 1 requests)
	load "$d" || return 1
	d0=$(($(path_field "$d" 0 requests) - r0))
	d1=$(($(path_field "$d" 1 requests) - r1))
	all=$((d0 + d1))
	echo "$1: path 0 got $d0 requests, path 1 $d1"
	[ "$all" -gt 200 ] || { echo "too few requests"; return 1; }
	case "$1" in
	failover) [ "$d1" = 0 ] ;;
	round-robin) [ "$d0" -ge $((all * 4 / 10)) ] &&
		[ "$d1" -ge $((all * 4 / 10)) ] ;;
	min-inflight) [ "$d0" -ge $((all / 10)) ] &&
		[ "$d1" -ge $((all / 10)) ] ;;
	esac
}

# lose_first DEV CMD...: 8 s of fio_verify_live on DEV with failover; once writes flow,
# CMD cuts the first path; the second must see requests within MOVE_MS
# and fio must end without error
lose_first() {
	local d=$1 pid r1 t0 el moved=0 rc
	shift
	echo failover > "/sys/block/$d/tern/iopolicy" || return 1
	fio_verify_live_start "$d" 8 || return 1
	pid=$FIO_PID
	r1=$(path_field "$d" 1 requests)
	t0=$(date +%s%N)
	"$@" || { wait $pid; return 1; }
	for _ in $(seq 100); do
		if [ "$(path_field "$d" 1 requests)" -gt $((r1 + 20)) ]; then
			moved=1
			break
		fi
		sleep 0.05
	done
	el=$((($(date +%s%N) - t0) / 1000000))
	echo "I/O on the second path $el ms after the first was cut"
	wait $pid
	rc=$?
	echo "fio across the loss: exit $rc"
	cat "/sys/block/$d/tern/paths"
	[ "$moved" = 1 ] && [ "$el" -le "$MOVE_MS" ] && [ "$rc" = 0 ] &&
		[ "$(path_state "$d" 0)" = down ]
}

# back_first DEV CMD...: CMD restores the first path; it must be live
# within 30 s and, with failover, take every request again
back_first() {
	local d=$1 r0 r1
	shift
	"$@" || return 1
	wait_path "$d" 0 live 30 || return 1
	r0=$(path_field "$d" 0 requests)
	r1=$(path_field "$d" 1 requests)
	load "$d" || return 1
	echo "after failback: path 0 +$(($(path_field "$d" 0 requests) - r0)), path 1 +$(($(path_field "$d" 1 requests) - r1))"
	[ "$(path_field "$d" 0 requests)" -gt $((r0 + 200)) ] &&
		[ "$(path_field "$d" 1 requests)" = "$r1" ]
}

tcp_lose() {
	lose_first "$(cat "$WORK/dev")" \
		ip rule add pref "$CUT_PREF" to "$ADDR_A" blackhole
}

tcp_back() {
	back_first "$(cat "$WORK/dev")" ip rule del pref "$CUT_PREF"
}

# The port the session was opened on (the first path's) disabled under
# fio verify: the session ends there, the second path builds it again
# through its port, the device opens the export again (rebinds), and
# fio finds no error; the port back, the first path rejoins
owner_port() {
	local d pid rc r0
	d=$(cat "$WORK/dev")
	echo failover > "/sys/block/$d/tern/iopolicy" || return 1
	r0=$(cat "/sys/block/$d/tern/rebinds")
	fio_verify_live_start "$d" 8 || return 1
	pid=$FIO_PID
	echo 0 > "$CFG/ports/pa/enable" || { wait $pid; return 1; }
	wait $pid
	rc=$?
	echo "fio across the owner port's loss: exit $rc, rebinds $r0 -> $(cat "/sys/block/$d/tern/rebinds")"
	cat "/sys/block/$d/tern/paths"
	echo 1 > "$CFG/ports/pa/enable" || return 1
	[ "$rc" = 0 ] && [ "$(cat "/sys/block/$d/tern/rebinds")" -gt "$r0" ] &&
		wait_path "$d" 0 live 30
}

rdma_ready() {
	[ -n "${TERN_RDMA_ADDR0:-}" ] && modprobe tern_rdma
}

rdma_restore() {
	[ -e "/sys/class/infiniband/$RDMA_DEV" ] && return 0
	rdma link add "$RDMA_DEV" type rxe netdev "${TERN_RDMA_NETDEV0:-tern0}"
}

rdma_map() {
	local d
	port_add pr "rdma://$TERN_RDMA_ADDR0:$SVC_R" || return 1
	d=$(map_mp "rdma://$TERN_RDMA_ADDR0:$SVC_R/mp0" \
		"tcp://127.0.0.1:$SVC_B") || return 1
	echo "$d" > "$WORK/rdev"
	cat "/sys/block/$d/tern/paths"
	[ "$(path_state "$d" 0)" = live ] && [ "$(path_state "$d" 1)" = live ]
}

rdma_lose() {
	lose_first "$(cat "$WORK/rdev")" rdma link delete "$RDMA_DEV"
}

rdma_back() {
	local d rc
	d=$(cat "$WORK/rdev")
	back_first "$d" rdma_restore
	rc=$?
	adm unmap "$d" || rc=1
	return $rc
}

# Both ports stopped: the next read fails with EIO once the loss timeout
# (3 s) has passed, within 5 s more; nothing hangs; unmap works
all_lost() {
	local d t0 el rc=0
	d=$(cat "$WORK/dev")
	echo 3000 > "/sys/block/$d/tern/loss_timeout_ms" || return 1
	echo 0 > "$CFG/ports/pa/enable" && echo 0 > "$CFG/ports/pb/enable" ||
		return 1
	t0=$(date +%s%N)
	if dd if="/dev/$d" of=/dev/null bs=4k count=1 skip=77 iflag=direct \
		status=none 2>/dev/null; then
		echo "read succeeded with no path"
		rc=1
	fi
	el=$((($(date +%s%N) - t0) / 1000000))
	echo "read failed after $el ms, state $(cat "/sys/block/$d/tern/state")"
	[ "$el" -le 8000 ] || { echo "later than the loss timeout + 5 s"; rc=1; }
	[ -z "$(stuck_in_d)" ] || { echo "tasks in D state"; rc=1; }
	adm unmap "$d" || rc=1
	rm -f "$WORK/dev"
	return $rc
}

# Ports pa and pb back; a path through port pc, which does not have the
# export: the map fails with EACCES and leaves no device
unlinked_port() {
	local before out
	echo 1 > "$CFG/ports/pa/enable" && echo 1 > "$CFG/ports/pb/enable" ||
		return 1
	adm target port add pc "tcp://127.0.0.1:$SVC_C" || return 1
	before=$(tern_devs | wc -l)
	out=$(adm map "tcp://$ADDR_A:$SVC_A/mp0" --path "tcp://127.0.0.1:$SVC_C" \
		--lanes 1 2>&1) && { echo "mapped: $out"; return 1; }
	echo "$out"
	case "$out" in *"Permission denied"*) ;; *) return 1 ;; esac
	[ "$(tern_devs | wc -l)" = "$before" ]
}

# A device of two paths; the export unlinked from the second path's
# port: the binding, made through the first, ends
unlink_second() {
	local d rc=0
	d=$(map_mp "tcp://$ADDR_A:$SVC_A/mp0" "tcp://127.0.0.1:$SVC_B") ||
		return 1
	echo "$d" > "$WORK/dev"
	dd if="/dev/$d" of=/dev/null bs=4k count=1 iflag=direct status=none ||
		return 1
	adm target unlink pb mp0 || return 1
	if dd if="/dev/$d" of=/dev/null bs=4k count=1 skip=9 iflag=direct \
		status=none 2>/dev/null; then
		echo "read succeeded after the unlink"
		rc=1
	fi
	echo "state $(cat "/sys/block/$d/tern/state")"
	[ "$(cat "/sys/block/$d/tern/state")" = removed ] || rc=1
	adm unmap "$d" || rc=1
	rm -f "$WORK/dev"
	return $rc
}

# A path whose every lane is refused (its port caps the queue depth
# below the session's: "lane parameters differ") never joins, so its port
# is none of the session's: the export unlinked from it leaves the
# binding, made through the first path, alone
refused_path() {
	local d mark n=0 rc=0
	adm target port add pq "tcp://127.0.0.1:$SVC_Q" --max-queue-depth 16 &&
		adm target link pq mp0 || return 1
	mark=$(log_mark)
	d=$(map_mp "tcp://$ADDR_A:$SVC_A/mp0" "tcp://127.0.0.1:$SVC_Q") ||
		return 1
	echo "$d" > "$WORK/dev"
	for _ in $(seq 100); do
		n=$(log_count "$mark" "lane parameters differ from session")
		[ "$n" -gt 0 ] && break
		sleep 0.1
	done
	echo "refused lanes logged: $n"
	[ "$n" -gt 0 ] || rc=1
	adm target unlink pq mp0 || rc=1
	dd if="/dev/$d" of=/dev/null bs=4k count=1 skip=9 iflag=direct \
		status=none || { echo "the read failed after the unlink"; rc=1; }
	echo "state $(cat "/sys/block/$d/tern/state")"
	[ "$(cat "/sys/block/$d/tern/state")" != removed ] || rc=1
	adm unmap "$d" || rc=1
	rm -f "$WORK/dev"
	return $rc
}

teardown() {
	local d p rc=0
	for d in "$WORK/dev" "$WORK/rdev"; do
		[ -f "$d" ] && [ -d "/sys/block/$(cat "$d")" ] &&
			{ adm unmap "$(cat "$d")" || rc=1; }
	done
	rdma_ready 2>/dev/null && rdma_restore
	for p in pa pb pr pc pq; do
		[ -d "$CFG/ports/$p" ] || continue
		echo 0 > "$CFG/ports/$p/enable"
		rm -f "$CFG/ports/$p"/exports/*
		rmdir "$CFG/ports/$p" || rc=1
	done
	[ -d "$CFG/exports/mp0" ] && { rmdir "$CFG/exports/mp0" || rc=1; }
	adm target host del mph 2>/dev/null
	ip rule del pref "$CUT_PREF" 2>/dev/null
	if ip rule show pref "$LOCAL_PREF" | grep -q local; then
		ip rule add pref 0 lookup local &&
			ip rule del pref "$LOCAL_PREF" || rc=1
	fi
	ip link delete "$LINK" 2>/dev/null
	modprobe -r tern_rdma 2>/dev/null
	blk_unload brd dummy || rc=1
	return $rc
}

if [ "$TRANSPORT" != tcp ]; then
	ktap_plan 1
	ktap_skip "runs its own mix of transports"
	ktap_finish
fi
if ! command -v fio > /dev/null; then
	ktap_plan 1
	ktap_skip "fio is not installed (make deps)"
	ktap_finish
fi
ktap_plan 17
check "setup: an export on two TCP ports, one on a dummy link" setup
check "map with two TCP paths: both live, failover, ternadm list shows them" \
	map_tcp
check "authenticated, two paths: every lane proves the key, both live; revoked, both close" \
	auth_paths
check "failover: every request on the first path" policy failover
check "round-robin: about half the requests on each path" policy round-robin
check "min-inflight: requests on both paths" policy min-inflight
check "first path cut under fio verify: I/O moves within 2 s, 0 errors, 0 mismatches" \
	tcp_lose
check "first path back: it rejoins, failover goes back to it" tcp_back
check "the session's own port disabled under fio verify: rebuilt through the other, rebound, 0 errors" \
	owner_port
if rdma_ready; then
	check "map with an RDMA path and a TCP path: both live" rdma_map
	check "rdma link delete under fio verify: I/O moves to TCP within 2 s, 0 errors, 0 mismatches" \
		rdma_lose
	check "RDMA device back: the path rejoins and takes the I/O again" \
		rdma_back
else
	ktap_skip "RDMA + TCP: no soft-RoCE here (tools/testing/vm/run --rdma)"
	ktap_skip "rdma link delete: no soft-RoCE"
	ktap_skip "RDMA back: no soft-RoCE"
fi
check "every path lost: EIO within loss timeout + 5 s, no D state, unmap works" \
	all_lost
check "a path through a port without the export: map refused (EACCES), nothing created" \
	unlinked_port
check "export unlinked from the second path's port: the binding ends (EIO, removed)" \
	unlink_second
check "a path whose lanes are refused never joins: an unlink from its port ends nothing" \
	refused_path
check "teardown, modules unload" teardown
ktap_finish
