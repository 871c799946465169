#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The RDMA transport (tern_rdma.ko) over soft-RoCE: the whole messenger
# suite (messenger.sh with TRANSPORT=rdma), then what only RDMA has:
#  - a connect to an address without listener is refused at once (< 3 s);
#  - a connect to an unreachable address (no ARP answer on the RoCE
#    subnet) fails within the transport's connect bound: resolution gives
#    up after tern_rdma.resolve_timeout_ms (2 s), a whole attempt after
#    tern_rdma.connect_timeout_ms (5 s); the test allows 8 s;
#  - a connect to an address without a route fails at once (< 3 s);
#  - "rdma link delete" of the device under a running benchmark: the lanes
#    fail, the session keeps trying to reconnect, the requests wait and
#    then complete with an error after the messenger's loss timeout (60 s
#    by default); no hang, no leak; the device comes back afterwards;
#  - the block device over rdma://: tern_target exports a RAM disk, tern_blk
#    maps it with transport=rdma on 2 lanes, data written through it at
#    QD 1 and QD 16 reads back identical, both through it and from the
#    backing device;
#  - the modules unload and tern_rdma leaves no verbs resource behind.
# Needs tools/testing/vm/run --rdma (TERN_RDMA_ADDR0/1, TERN_RDMA_DEV0).

. "$(dirname "$0")/ktap.sh"

dir=$(cd "$(dirname "$0")" && pwd)
ADDR0=${TERN_RDMA_ADDR0:-}
DEV0=${TERN_RDMA_DEV0:-rxe0}
NETDEV0=${TERN_RDMA_NETDEV0:-tern0}
PORT=7510
URI=rdma://$ADDR0:$PORT
TERNADM=${TERNADM:-$dir/../../../ternadm/ternadm}
[ -x "$TERNADM" ] || TERNADM=$(command -v ternadm)
LOSS_S=60

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

messenger() {
	TRANSPORT=rdma "$dir/messenger.sh"
}

setup() {
	modprobe tern_rdma && modprobe tern_bench &&
		"$TERNADM" bench serve "$URI"
}

# Remove the device under a running benchmark.
device_loss() {
	local pid out rc t0 t1 errors
	out=$(mktemp)
	"$TERNADM" bench run "$URI" --json --count 100000000 --depth 8 \
		--size 4k --dir both > "$out" 2>&1 &
	pid=$!
	sleep 5
	if ! kill -0 $pid 2>/dev/null; then
		echo "the run ended before the device went away:"
		cat "$out"
		rm -f "$out"
		return 1
	fi
	t0=$(date +%s)
	rdma link delete "$DEV0" || { kill $pid; wait $pid; rm -f "$out"; return 1; }
	echo "deleted $DEV0"
	# The run must end by itself: past the loss timeout, well before
	# the bench's own stall timeout would cancel it.
	for _ in $(seq $((LOSS_S + 60))); do
		kill -0 $pid 2>/dev/null || break
		sleep 1
	done
	t1=$(date +%s)
	if kill -0 $pid 2>/dev/null; then
		echo "run still going $((t1 - t0)) s after the device loss"
		kill -TERM $pid
		wait $pid
		rm -f "$out"
		return 1
	fi
	wait $pid
	rc=$?
	cat "$out"
	echo "run ended $((t1 - t0)) s after the device loss, exit $rc"
	errors=$(sed -n 's/.*"errors":\([0-9]*\).*/\1/p' "$out")
	rm -f "$out"
	[ "$rc" != 0 ] || [ "${errors:-0}" -gt 0 ] ||
		{ echo "no error reported"; return 1; }
	[ $((t1 - t0)) -ge $((LOSS_S - 5)) ] ||
		{ echo "failed before the loss timeout"; return 1; }
}

restore_device() {
	rdma link show "$DEV0" >/dev/null 2>&1 && return 0
	rdma link add "$DEV0" type rxe netdev "$NETDEV0"
}

CFG=/sys/kernel/config/tern
BLK_PORT=7511

# The block ULP over RDMA, unchanged: export /dev/ram0, map, verify.
block() {
	local fd name rc=0 w=/var/tmp/tern-rdma-blk
	modprobe tern_target && modprobe tern_blk &&
		modprobe brd rd_nr=1 rd_size=32768 max_part=0 || return 1
	mkdir -p "$w" "$CFG/exports/rvol0" "$CFG/ports/rp0" || return 1
	echo /dev/ram0 > "$CFG/exports/rvol0/device_path" &&
		echo 1 > "$CFG/exports/rvol0/enable" &&
		echo rdma > "$CFG/ports/rp0/transport" &&
		echo "$ADDR0" > "$CFG/ports/rp0/address" &&
		echo $BLK_PORT > "$CFG/ports/rp0/service" &&
		ln -s "$CFG/exports/rvol0" "$CFG/ports/rp0/exports/rvol0" &&
		echo 1 > "$CFG/ports/rp0/enable" || return 1
	exec {fd}<>/dev/tern-blk-ctl || return 1
	printf 'transport=rdma,address=%s,service=%s,export=rvol0,lanes=2,queue_depth=16' \
		"$ADDR0" $BLK_PORT >&"$fd" && read -r name <&"$fd"
	exec {fd}>&-
	echo "mapped /dev/$name"
	udevadm settle 2>/dev/null
	[ -n "$name" ] && [ -b "/dev/$name" ] || return 1
	head -c 16M /dev/urandom > "$w/data" || rc=1
	# QD 1 with 1 MiB writes, then QD 16 with 4 KiB ones
	dd if="$w/data" of="/dev/$name" bs=1M oflag=direct status=none || rc=1
	dd if="/dev/$name" of="$w/back" bs=64k count=256 iflag=direct \
		status=none || rc=1
	cmp "$w/data" "$w/back" || rc=1
	cmp "$w/data" <(head -c 16M /dev/ram0) || rc=1
	if command -v fio >/dev/null; then
		fio --name=w --filename="/dev/$name" --rw=write --bs=4k \
			--iodepth=16 --ioengine=libaio --direct=1 --size=16M \
			--verify=crc32c --do_verify=1 --output=/dev/null || rc=1
	fi
	printf 'remove=%s' "$name" > /dev/tern-blk-ctl || rc=1
	echo 0 > "$CFG/ports/rp0/enable" &&
		rm "$CFG/ports/rp0/exports/rvol0" &&
		rmdir "$CFG/ports/rp0" "$CFG/exports/rvol0" || rc=1
	rm -rf "$w"
	modprobe -r tern_blk && modprobe -r tern_target && modprobe -r brd ||
		rc=1
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

ktap_plan 10

if [ -z "$ADDR0" ] || [ ! -x "$TERNADM" ] || ! command -v rdma >/dev/null; then
	ktap_info "no soft-RoCE (run with tools/testing/vm/run --rdma) or no ternadm"
	for _ in $(seq 10); do ktap_skip "no RDMA setup"; done
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
ktap_check "block device over rdma: 16 MiB written, read back, equals the RAM disk; fio verify QD16" \
	block
ktap_check "rdma link delete $DEV0 under a run: requests fail after the loss timeout, no hang" \
	device_loss
ktap_check "$DEV0 comes back" restore_device
ktap_check "bench stop, rmmod tern_bench tern_rdma tern" unload
ktap_check "no cm_id, QP, CQ or PD of tern_rdma left (rdma resource)" \
	no_resources
ktap_finish
