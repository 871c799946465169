#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tern block layer under stress, in one guest, for what blk.sh leaves
# out: FLUSH and FUA reaching the backing device, DISCARD and
# WRITE_ZEROES on a backing device without them, two ports with a
# session each under concurrent verify, a forced unmap under fio, and
# CYCLES map/unmap cycles without leaking kmalloc memory.
#
# The backing devices are memory-backed null_blk disks made through
# configfs, with a 32 MiB volatile write cache, FUA and no discard.
# /sys/block/nullbN/stat counts the flushes (field 16); the target's
# exports/X/stats counts what it sent to them, FUA writes included. That
# the FUA writes arrived as such is shown without tracing: null_blk
# writes FUA data past its cache, and powering it off drops the cache,
# so after a power cycle the FUA writes are there and plain writes made
# after them are gone.
#
# Environment:
#   TRANSPORT     tcp (default) or rdma; see blk_lib.sh. Over rdma port
#                 p0 listens on $TERN_RDMA_ADDR0, p1 on $TERN_RDMA_ADDR1.
#   TERNADM       the ternadm binary (default: the one built in the tree)
#   CYCLES        map/unmap cycles (default 40)

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/blk_lib.sh"

SVC0=7451
SVC1=7452
WORK=/var/tmp/tern-blk-stress
NULLB=/sys/kernel/config/nullb
CYCLES=${CYCLES:-40}
NFLUSH=32
NFUA=32

# nullb_make NAME: a 1 GiB memory-backed null_blk with a write cache
nullb_make() {
	local d=$NULLB/$1
	mkdir "$d" && echo 1024 > "$d/size" && echo 1 > "$d/memory_backed" &&
		echo 32 > "$d/cache_size" && echo 1 > "$d/fua" &&
		echo 0 > "$d/discard" && echo 1 > "$d/power" || return 1
	udevadm settle 2>/dev/null
	wait_bdev "$1"
}

# (kmalloc_settled just dropped the caches for the baseline)
setup_modules() {
	blk_modprobe && modprobe null_blk nr_devices=0 || return 1
	mkdir -p "$WORK" || return 1
	[ -x "$TERNADM" ] && [ -d "$CFG/exports" ] && [ -d "$NULLB" ] || return 1
	nullb_make nullb0 && nullb_make nullb1 || return 1
	# the properties the checks rely on
	grep -H . /sys/block/nullb0/queue/{write_cache,fua,discard_max_bytes}
	[ "$(cat /sys/block/nullb0/queue/write_cache)" = "write back" ] &&
		[ "$(cat /sys/block/nullb0/queue/fua)" = 1 ] &&
		[ "$(cat /sys/block/nullb0/queue/discard_max_bytes)" = 0 ]
}

setup_target() {
	adm target export add vol0 /dev/nullb0 &&
		adm target export add vol1 /dev/nullb1 &&
		adm target port add p0 "$TRANSPORT://$ADDR:$SVC0" &&
		adm target port add p1 "$TRANSPORT://$ADDR1:$SVC1" &&
		adm target link p0 vol0 && adm target link p1 vol1 || return 1
	adm target show
	[ -r "$CFG/exports/vol0/stats" ] && cat "$CFG/exports/vol0/stats"
}

map_vol0() {
	local q
	DEV=$(map_dev vol0 $SVC0 --lanes 2) || return 1
	echo "mapped /dev/$DEV"
	q=/sys/block/$DEV/queue
	grep -H . "$q"/{write_cache,fua,discard_max_bytes,write_zeroes_max_bytes}
	[ "$(cat "$q/write_cache")" = "write back" ] && [ "$(cat "$q/fua")" = 1 ]
}

# NFLUSH writes, each closed by an fsync: every fsync is one FLUSH on
# /dev/DEV (blkdev_fsync), sent to the target, which flushes nullb0.
flush_reaches_backing() {
	local b0 t0 s0 b1 t1 s1 i
	b0=$(stat_field nullb0 16)
	t0=$(stat_field "$DEV" 16)
	s0=$(export_stat vol0 flushes) || return 1
	for i in $(seq $NFLUSH); do
		dd if=/dev/zero of="/dev/$DEV" bs=4k count=1 seek="$i" \
			oflag=direct conv=fsync,notrunc status=none || return 1
	done
	b1=$(stat_field nullb0 16)
	t1=$(stat_field "$DEV" 16)
	s1=$(export_stat vol0 flushes) || return 1
	echo "$NFLUSH fsyncs: $DEV flushes $t0 -> $t1, target flushes $s0 -> $s1," \
		"nullb0 flushes $b0 -> $b1"
	[ $((t1 - t0)) -ge $NFLUSH ] && [ $((s1 - s0)) -ge $NFLUSH ] &&
		[ $((b1 - b0)) -ge $NFLUSH ]
}

# NFUA writes through libaio on a file opened O_SYNC are REQ_FUA on
# /dev/DEV with no flush after them (block/fops.c: only synchronous
# writes are followed by an fsync); DEV advertises FUA, so they reach
# tern_blk as such, and the target must send them to nullb0 with REQ_FUA
# (its fua counter). Then NFUA plain writes, which stay in nullb0's
# cache. No flush may happen until nullb0 is powered off and on again;
# then the FUA writes must read back (fio verify_only), and the plain
# ones must be gone, which shows the cache really was volatile.
fua_reaches_backing() {
	local nb=$NULLB/nullb0 plain=$(((2 << 20) / 4096)) rc=0
	local f0 f1 w0 w1 s0 s1 b0 b1 t0 t1
	local job=(--name=fua --ioengine=libaio --direct=1 --rw=write --bs=4k
		--iodepth=4 --offset=1M --size=$((NFUA * 4))k --verify=crc32c
		--verify_fatal=1)

	f0=$(export_stat vol0 fua) && w0=$(export_stat vol0 writes) &&
		s0=$(export_stat vol0 flushes) || return 1
	b0=$(stat_field nullb0 16)
	t0=$(stat_field "$DEV" 16)
	fio "${job[@]}" --filename="/dev/$DEV" --sync=1 --do_verify=0 \
		>"$WORK/fua.out" 2>&1 || { tail -n 20 "$WORK/fua.out"; return 1; }
	dd if=/dev/urandom of="/dev/$DEV" bs=4k count=$NFUA seek=$plain \
		oflag=direct status=none || return 1
	f1=$(export_stat vol0 fua) && w1=$(export_stat vol0 writes) &&
		s1=$(export_stat vol0 flushes) || return 1
	t1=$(stat_field "$DEV" 16)
	echo "$NFUA O_SYNC aio writes, $NFUA plain: target fua $f0 -> $f1," \
		"writes $w0 -> $w1, flushes $s0 -> $s1; $DEV flushes $t0 -> $t1"
	[ $((f1 - f0)) = $NFUA ] && [ $((w1 - w0)) = $((2 * NFUA)) ] || rc=1
	[ "$s0" = "$s1" ] && [ "$t0" = "$t1" ] || { echo "a flush was sent"; rc=1; }

	adm unmap "$DEV" || rc=1
	echo 0 > "$CFG/exports/vol0/enable" || rc=1
	b1=$(stat_field nullb0 16)
	echo "nullb0 flushes $b0 -> $b1 before the power cycle"
	[ "$b0" = "$b1" ] || rc=1
	echo 0 > "$nb/power" && echo 1 > "$nb/power" || return 1
	udevadm settle 2>/dev/null
	wait_bdev nullb0 || return 1
	if ! fio "${job[@]}" --filename=/dev/nullb0 --verify_only \
		>"$WORK/fua.out" 2>&1; then
		echo "FUA writes lost in the power cycle:"
		grep -m3 -iE "verify|crc|bad" "$WORK/fua.out"
		rc=1
	fi
	if ! cmp -n $((NFUA * 4096)) /dev/zero <(dd if=/dev/nullb0 bs=4k \
		skip=$plain count=$NFUA iflag=direct status=none) >/dev/null; then
		echo "plain writes survived the power cycle: nothing was proven"
		rc=1
	fi
	echo 1 > "$CFG/exports/vol0/enable" || rc=1
	return $rc
}

# nullb0 has no discard: neither has the tern device, and blkdiscard
# fails at once with EOPNOTSUPP, sending nothing to the backing device.
discard_refused() {
	local q=/sys/block/$DEV/queue d0 d1 s0 s1 out rc
	[ "$(cat "$q/discard_max_bytes")" = 0 ] || {
		echo "discard_max_bytes $(cat "$q/discard_max_bytes")"; return 1; }
	s0=$(export_stat vol0 discards) || return 1
	d0=$(stat_field nullb0 12)
	out=$(timeout 20 blkdiscard -f "/dev/$DEV" 2>&1)
	rc=$?
	echo "blkdiscard: exit $rc: $out"
	[ $rc = 124 ] && { echo "blkdiscard hung"; return 1; }
	[ $rc != 0 ] || { echo "blkdiscard succeeded"; return 1; }
	echo "$out" | grep -q "not supported" || return 1
	d1=$(stat_field nullb0 12)
	s1=$(export_stat vol0 discards) || return 1
	[ "$d0" = "$d1" ] && [ "$s0" = "$s1" ] || {
		echo "nullb0 discards $d0 -> $d1, target discards $s0 -> $s1"; return 1; }
	[ "$(cat "/sys/block/$DEV/tern/state")" = live ]
}

# No WRITE_ZEROES either: BLKZEROOUT falls back to writing zero pages,
# which must zero the range, and nothing hangs.
write_zeroes_fallback() {
	local q=/sys/block/$DEV/queue rc
	[ "$(cat "$q/write_zeroes_max_bytes")" = 0 ] || {
		echo "write_zeroes_max_bytes $(cat "$q/write_zeroes_max_bytes")"
		return 1; }
	dd if=/dev/urandom of="/dev/$DEV" bs=1M seek=3 count=1 oflag=direct \
		status=none || return 1
	timeout 20 blkdiscard -f -z -o $((3 << 20)) -l $((1 << 20)) "/dev/$DEV"
	rc=$?
	[ $rc = 0 ] || { echo "blkdiscard -z: exit $rc"; return 1; }
	cmp -n $((1 << 20)) /dev/zero \
		<(dd if=/dev/nullb0 bs=1M skip=3 count=1 iflag=direct status=none)
}

fio_verify() {	# DEV OUT
	fio --name=verify --filename="/dev/$1" --direct=1 --ioengine=libaio \
		--rw=randwrite --bs=4k --iodepth=16 --size=2M \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 \
		--output-format=terse --terse-version=3 >"$2" 2>&1
}

# Two exports on two ports, a session each, verified at once.
two_ports_concurrent() {
	local a b d pa pb ra rb rc=0
	a=$(map_dev vol0 $SVC0 --lanes 2 --new) || return 1
	b=$(map_uri "$TRANSPORT://$ADDR1:$SVC1/vol1" --lanes 2) ||
		{ adm unmap "$a"; return 1; }
	for d in "$a" "$b"; do
		echo "$d: $(cat "/sys/block/$d/tern/transport")://$(cat "/sys/block/$d/tern/address"):$(cat "/sys/block/$d/tern/service")/$(cat "/sys/block/$d/tern/export")"
	done
	[ "$(cat "/sys/block/$a/tern/service")" = $SVC0 ] &&
		[ "$(cat "/sys/block/$b/tern/service")" = $SVC1 ] &&
		[ "$(cat "/sys/block/$b/tern/address")" = "$ADDR1" ] &&
		[ "$(cat "/sys/block/$b/tern/transport")" = "$TRANSPORT" ] &&
		[ "$(cat "/sys/block/$b/tern/export")" = vol1 ] || rc=1
	fio_verify "$a" "$WORK/va.out" &
	pa=$!
	fio_verify "$b" "$WORK/vb.out" &
	pb=$!
	wait $pa
	ra=$?
	wait $pb
	rb=$?
	echo "fio on $a: exit $ra, on $b: exit $rb"
	[ $ra = 0 ] || { tail -n 5 "$WORK/va.out"; rc=1; }
	[ $rb = 0 ] || { tail -n 5 "$WORK/vb.out"; rc=1; }
	adm unmap "$a" || rc=1
	adm unmap "$b" || rc=1
	[ -z "$(tern_devs)" ] || rc=1
	return $rc
}

# fio randwrite QD32 for 20 s; a forced unmap after 3 s must end it
# with errors within 15 s, leaving nothing stuck.
unmap_under_fio() {
	local d pid i t0 rc=0 frc stuck
	d=$(map_dev vol0 $SVC0 --lanes 2 --queue-depth 64 --new) || return 1
	fio_busy "$d" "$WORK/unmap.out" 5 100 --name=unmap --rw=randwrite \
		--bs=4k --iodepth=32 --size=64M --runtime=20
	pid=$FIO_PID
	sleep 1
	kill -0 $pid 2>/dev/null || { echo "fio ended before the unmap"; return 1; }
	echo "writes completed before the unmap: $(stat_field "$d" 5)"
	t0=$SECONDS
	timeout 30 "$TERNADM" unmap "$d" --force || { echo "unmap failed"; rc=1; }
	echo "unmap took $((SECONDS - t0)) s"
	for i in $(seq 150); do
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 $pid 2>/dev/null; then
		echo "fio still running $((SECONDS - t0)) s after the unmap"
		ps -o stat,pid,wchan:32,comm -p $pid
		kill -9 $pid
		rc=1
	fi
	wait $pid
	frc=$?
	echo "fio ended $((SECONDS - t0)) s after the unmap, exit $frc"
	echo "$(grep -c "io_u error" "$WORK/unmap.out") I/O errors reported by fio"
	grep -E "err= *[0-9]" "$WORK/unmap.out" | head -n 1
	if [ $frc = 0 ] && ! grep -qE "err= *[1-9]" "$WORK/unmap.out"; then
		echo "fio reported no error"
		rc=1
	fi
	stuck=$(stuck_in_d)
	[ -z "$stuck" ] || { echo "in D state: $stuck"; rc=1; }
	if [ -e "/sys/block/$d" ] || [ -b "/dev/$d" ]; then
		echo "$d still present"
		rc=1
	fi
	return $rc
}

reload_tern_blk() {
	modprobe -r tern_blk || return 1
	grep -q '^tern_blk ' /proc/modules && return 1
	modprobe tern_blk && [ -c /dev/tern-blk-ctl ]
}

map_unmap_cycles() {
	local i d n=0
	for i in $(seq "$CYCLES"); do
		d=$(map_dev vol0 $SVC0 --new) || { echo "cycle $i: map failed"; return 1; }
		adm unmap "$d" || { echo "cycle $i: unmap $d failed"; return 1; }
		if [ -e "/sys/block/$d" ] || [ -b "/dev/$d" ]; then
			echo "cycle $i: $d still present after unmap"
			return 1
		fi
		n=$((n + 1))
	done
	echo "$n cycles"
	[ -z "$(tern_devs)" ]
}

teardown() {
	local n
	adm target port del p0 && adm target port del p1 &&
		adm target export del vol0 && adm target export del vol1 || return 1
	for n in nullb0 nullb1; do
		echo 0 > "$NULLB/$n/power" && rmdir "$NULLB/$n" || return 1
	done
	blk_unload null_blk
}

if ! why=$(blk_transport_ready); then
	echo "TAP version 13"
	echo "1..0 # SKIP $why"
	exit 4
fi
ktap_plan 14

BASE=$(kmalloc_settled)
check "modules load; nullb0/1: memory-backed, write cache, FUA, no discard" \
	setup_modules
check "two exports (nullb0, nullb1) on two ports ($TRANSPORT://$ADDR:$SVC0, $TRANSPORT://$ADDR1:$SVC1)" \
	setup_target

DEV=
if map_vol0 > "$WORK/map.out" 2>&1; then
	ktap_comment < "$WORK/map.out"
	ktap_pass "map vol0 as /dev/$DEV: write back cache and FUA advertised"
else
	ktap_comment < "$WORK/map.out"
	ktap_fail "map vol0: write back cache and FUA advertised"
fi

if [ -z "$DEV" ]; then
	for t in "FLUSH" "discard" "write zeroes" "FUA"; do
		ktap_fail "$t: vol0 is not mapped"
	done
else
	check "FLUSH: $NFLUSH fsyncs reach nullb0 (target and nullb0 flush counts)" \
		flush_reaches_backing
	check "discard without backing support: refused, no hang, none sent" \
		discard_refused
	check "write zeroes without backing support: zero-page fallback zeroes" \
		write_zeroes_fallback
	# unmaps $DEV
	check "FUA: $NFUA writes sent REQ_FUA to nullb0, survive its power cycle" \
		fua_reaches_backing
	if [ -e "/sys/block/$DEV" ]; then
		adm unmap "$DEV" || ktap_info "cannot unmap $DEV"
	fi
fi

check "two ports, two sessions, concurrent fio crc32c verify" \
	two_ports_concurrent
check "forced unmap under fio QD32: fio fails within 15 s, no D state" \
	unmap_under_fio
check "tern_blk unloads and loads again after the forced unmap" \
	reload_tern_blk

# two cycles first, so one-time allocations are not counted as a leak
CYCLES=2 map_unmap_cycles >/dev/null
CYC0=$(kmalloc_settled)
check "$CYCLES map/unmap cycles with ternadm, device appears and goes" \
	map_unmap_cycles
CYC1=$(kmalloc_settled)
ktap_info "kmalloc caches: $CYC0 bytes before the cycles, $CYC1 after"
if [ $((CYC1 - CYC0)) -lt $((64 * 1024)) ]; then
	ktap_pass "kmalloc usage after $CYCLES cycles near baseline ($(printf %+d $((CYC1 - CYC0))) bytes)"
else
	ktap_fail "kmalloc usage after $CYCLES cycles near baseline ($(printf %+d $((CYC1 - CYC0))) bytes)"
fi

check "target torn down, modules unload" teardown
END=$(kmalloc_settled)
ktap_info "kmalloc caches: $BASE bytes before loading, $END after unloading"
if [ $((END - BASE)) -lt $((1024 * 1024)) ]; then
	ktap_pass "kmalloc usage back to baseline after unload ($(printf %+d $((END - BASE))) bytes)"
else
	ktap_fail "kmalloc usage back to baseline after unload ($(printf %+d $((END - BASE))) bytes)"
fi
rm -rf "$WORK"
ktap_info "$TRANSPORT: ${SECONDS} s"
ktap_finish
