#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tern block layer under stress, in one guest, for what blk.sh leaves
# out: FLUSH and FUA reaching the backing device, DISCARD and
# WRITE_ZEROES on a backing device without them, two ports with a
# session each under concurrent verify, a forced unmap under fio, and
# 100 map/unmap cycles without leaking kmalloc memory.
#
# The backing devices are memory-backed null_blk disks with a write
# cache and FUA but no discard; their /sys/block/nullbN/stat counts the
# flushes (field 16), and the block_rq_issue trace event shows the FUA
# writes (rwbs "WF...").
#
# Environment:
#   TERNADM       the ternadm binary (default: the one built in the tree)
#   CYCLES        map/unmap cycles (default 100)

. "$(dirname "$0")/ktap.sh"

dir=$(cd "$(dirname "$0")" && pwd)
TERNADM=${TERNADM:-$dir/../../../ternadm/ternadm}
[ -x "$TERNADM" ] || TERNADM=$(command -v ternadm)

CFG=/sys/kernel/config/tern
ADDR=127.0.0.1
SVC0=7451
SVC1=7452
WORK=/var/tmp/tern-blk-stress
TRACE=/sys/kernel/tracing
INST=$TRACE/instances/tern_blk_stress
CYCLES=${CYCLES:-100}
NFLUSH=32
NFUA=32

adm() {
	"$TERNADM" "$@"
}

# Bytes held by the generic kmalloc caches (as fuzz.sh counts them).
kmalloc_bytes() {
	awk '$1 ~ /^kmalloc-[0-9kr]/ { b += $2 * $4 } END { print b + 0 }' /proc/slabinfo
}

# kmalloc bytes once delayed frees settled: the lowest of a few samples
kmalloc_settled() {
	local i b min=
	sync
	echo 3 > /proc/sys/vm/drop_caches
	for i in 1 2 3; do
		sleep 0.5
		b=$(kmalloc_bytes)
		[ -z "$min" ] || [ "$b" -lt "$min" ] && min=$b
	done
	echo "$min"
}

# stat_field DEV N: field N of /sys/block/DEV/stat (16: flush I/Os)
stat_field() {
	awk -v n="$2" '{ print $n }' "/sys/block/$1/stat"
}

tern_devs() {
	local d
	for d in /sys/block/tern*; do
		[ -e "$d" ] && echo "${d##*/}"
	done
}

# map_dev EXPORT SERVICE [OPTIONS...]: map with ternadm, print ternN
map_dev() {
	local exp=$1 svc=$2 out
	shift 2
	out=$(adm map "tcp://$ADDR:$svc/$exp" "$@") || return 1
	case "$out" in /dev/tern[0-9]*) ;; *) return 1 ;; esac
	[ -b "$out" ] || udevadm settle 2>/dev/null
	[ -b "$out" ] && [ -d "/sys/block/${out#/dev/}" ] || return 1
	echo "${out#/dev/}"
}

setup_modules() {
	sync
	echo 3 > /proc/sys/vm/drop_caches
	modprobe tern_tcp && modprobe tern_target && modprobe tern_blk &&
		modprobe null_blk nr_devices=2 gb=1 memory_backed=1 \
			cache_size=32 fua=1 discard=0 || return 1
	mkdir -p "$WORK" || return 1
	[ -x "$TERNADM" ] && [ -d "$CFG/exports" ] && [ -b /dev/nullb0 ] &&
		[ -b /dev/nullb1 ] || return 1
	# the properties the checks rely on
	grep -H . /sys/block/nullb0/queue/{write_cache,fua,discard_max_bytes}
	[ "$(cat /sys/block/nullb0/queue/write_cache)" = "write back" ] &&
		[ "$(cat /sys/block/nullb0/queue/fua)" = 1 ] &&
		[ "$(cat /sys/block/nullb0/queue/discard_max_bytes)" = 0 ]
}

setup_target() {
	adm target export add vol0 /dev/nullb0 &&
		adm target export add vol1 /dev/nullb1 &&
		adm target port add p0 "tcp://$ADDR:$SVC0" &&
		adm target port add p1 "tcp://$ADDR:$SVC1" &&
		adm target link p0 vol0 && adm target link p1 vol1 || return 1
	adm target show
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
	local b0 t0 b1 t1 i
	b0=$(stat_field nullb0 16)
	t0=$(stat_field "$DEV" 16)
	for i in $(seq $NFLUSH); do
		dd if=/dev/zero of="/dev/$DEV" bs=4k count=1 seek="$i" \
			oflag=direct conv=fsync,notrunc status=none || return 1
	done
	b1=$(stat_field nullb0 16)
	t1=$(stat_field "$DEV" 16)
	echo "$NFLUSH fsyncs: $DEV flushes $t0 -> $t1, nullb0 flushes $b0 -> $b1"
	[ $((t1 - t0)) -ge $NFLUSH ] && [ $((b1 - b0)) -ge $NFLUSH ]
}

# count_fua DEV: FUA writes issued to DEV's driver since tracing began
count_fua() {
	local mm
	mm=$(tr ':' ',' < "/sys/block/$1/dev")
	grep -cE " $mm F?WF" "$INST/trace"
}

# NFUA O_DIRECT|O_DSYNC writes are REQ_FUA on /dev/DEV (block/fops.c);
# the target must write them to nullb0 with REQ_FUA too.
fua_reaches_backing() {
	local b t rc=0
	mkdir "$INST" || return 1
	echo 1 > "$INST/events/block/block_rq_issue/enable" || rc=1
	if [ $rc = 0 ]; then
		dd if=/dev/urandom of="/dev/$DEV" bs=4k count=$NFUA seek=100 \
			oflag=direct,dsync status=none || rc=1
		echo 0 > "$INST/events/block/block_rq_issue/enable"
		t=$(count_fua "$DEV")
		b=$(count_fua nullb0)
		echo "$NFUA dsync writes: FUA writes issued to $DEV $t, to nullb0 $b"
		[ "$t" -ge $NFUA ] && [ "$b" -ge $NFUA ] || rc=1
	fi
	rmdir "$INST" || rc=1
	return $rc
}

# nullb0 has no discard: neither has the tern device, and blkdiscard
# fails at once with EOPNOTSUPP, sending nothing to the backing device.
discard_refused() {
	local q=/sys/block/$DEV/queue d0 d1 out rc
	[ "$(cat "$q/discard_max_bytes")" = 0 ] || {
		echo "discard_max_bytes $(cat "$q/discard_max_bytes")"; return 1; }
	d0=$(stat_field nullb0 12)
	out=$(timeout 20 blkdiscard -f "/dev/$DEV" 2>&1)
	rc=$?
	echo "blkdiscard: exit $rc: $out"
	[ $rc = 124 ] && { echo "blkdiscard hung"; return 1; }
	[ $rc != 0 ] || { echo "blkdiscard succeeded"; return 1; }
	echo "$out" | grep -q "not supported" || return 1
	d1=$(stat_field nullb0 12)
	[ "$d0" = "$d1" ] || { echo "nullb0 discards $d0 -> $d1"; return 1; }
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
	local a b pa pb ra rb rc=0
	a=$(map_dev vol0 $SVC0 --lanes 2) || return 1
	b=$(map_dev vol1 $SVC1 --lanes 2) || { adm unmap "$a"; return 1; }
	echo "$a: $(cat "/sys/block/$a/tern/service")/$(cat "/sys/block/$a/tern/export")," \
		"$b: $(cat "/sys/block/$b/tern/service")/$(cat "/sys/block/$b/tern/export")"
	[ "$(cat "/sys/block/$a/tern/service")" = $SVC0 ] &&
		[ "$(cat "/sys/block/$b/tern/service")" = $SVC1 ] &&
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

# processes in D state in each of three samples
stuck_in_d() {
	local i s all=
	for i in 1 2 3; do
		s=$(ps -eo stat=,pid=,comm= | awk '$1 ~ /^D/ { print $2, $3 }' | sort)
		if [ $i = 1 ]; then
			all=$s
		else
			all=$(comm -12 <(echo "$all") <(echo "$s"))
		fi
		sleep 0.5
	done
	echo "$all" | sed '/^$/d'
}

# fio randwrite QD32 for 20 s; a forced unmap after 3 s must end it
# with errors within 15 s, leaving nothing stuck.
unmap_under_fio() {
	local d pid i t0 rc=0 frc stuck
	d=$(map_dev vol0 $SVC0 --lanes 2 --queue-depth 64) || return 1
	fio --name=unmap --filename="/dev/$d" --direct=1 --ioengine=libaio \
		--rw=randwrite --bs=4k --iodepth=32 --size=64M --time_based \
		--runtime=20 >"$WORK/unmap.out" 2>&1 &
	pid=$!
	for i in $(seq 50); do
		[ "$(stat_field "$d" 5)" -gt 100 ] && break
		sleep 0.2
	done
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
		d=$(map_dev vol0 $SVC0) || { echo "cycle $i: map failed"; return 1; }
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
	adm target port del p0 && adm target port del p1 &&
		adm target export del vol0 && adm target export del vol1 || return 1
	modprobe -r tern_blk && modprobe -r tern_target && modprobe -r null_blk &&
		modprobe -r tern_tcp || return 1
	! grep -q '^tern' /proc/modules
}

ktap_plan 14

BASE=$(kmalloc_settled)
ktap_check "modules load; nullb0/1: memory-backed, write cache, FUA, no discard" \
	setup_modules
ktap_check "two exports (nullb0, nullb1) on two ports ($SVC0, $SVC1)" setup_target

DEV=
if map_vol0 > "$WORK/map.out" 2>&1; then
	sed 's/^/# /' "$WORK/map.out"
	ktap_pass "map vol0 as /dev/$DEV: write back cache and FUA advertised"
else
	sed 's/^/# /' "$WORK/map.out"
	ktap_fail "map vol0: write back cache and FUA advertised"
fi

if [ -z "$DEV" ]; then
	for t in "FLUSH" "FUA" "discard" "write zeroes"; do
		ktap_fail "$t: vol0 is not mapped"
	done
else
	ktap_check "FLUSH: $NFLUSH fsyncs reach nullb0 (stat flush I/Os)" \
		flush_reaches_backing
	# Enabling a trace event patches static keys with int3; under QEMU
	# TCG with 2 vCPUs that once oopsed in __schedule (seen in make
	# check), so the lane only traces when asked to.
	if [ "${TERN_TRACE_FUA:-0}" != 1 ]; then
		ktap_skip "FUA: tracing off under emulation (TERN_TRACE_FUA=1 turns it on)"
	elif [ -d "$TRACE/instances" ] ||
		mount -t tracefs nodev "$TRACE" 2>/dev/null; then
		ktap_check "FUA: $NFUA dsync writes reach nullb0 as REQ_FUA (block_rq_issue)" \
			fua_reaches_backing
	else
		ktap_skip "FUA: no tracefs to see REQ_FUA at nullb0"
	fi
	ktap_check "discard without backing support: refused, no hang, none sent" \
		discard_refused
	ktap_check "write zeroes without backing support: zero-page fallback zeroes" \
		write_zeroes_fallback
	adm unmap "$DEV" || ktap_info "cannot unmap $DEV"
fi

ktap_check "two ports, two sessions, concurrent fio crc32c verify" \
	two_ports_concurrent
ktap_check "forced unmap under fio QD32: fio fails within 15 s, no D state" \
	unmap_under_fio
ktap_check "tern_blk unloads and loads again after the forced unmap" \
	reload_tern_blk

# two cycles first, so one-time allocations are not counted as a leak
CYCLES=2 map_unmap_cycles >/dev/null
CYC0=$(kmalloc_settled)
ktap_check "$CYCLES map/unmap cycles with ternadm, device appears and goes" \
	map_unmap_cycles
CYC1=$(kmalloc_settled)
ktap_info "kmalloc caches: $CYC0 bytes before the cycles, $CYC1 after"
if [ $((CYC1 - CYC0)) -lt $((64 * 1024)) ]; then
	ktap_pass "kmalloc usage after $CYCLES cycles near baseline (+$((CYC1 - CYC0)) bytes)"
else
	ktap_fail "kmalloc usage after $CYCLES cycles near baseline (+$((CYC1 - CYC0)) bytes)"
fi

ktap_check "target torn down, modules unload" teardown
END=$(kmalloc_settled)
ktap_info "kmalloc caches: $BASE bytes before loading, $END after unloading"
if [ $((END - BASE)) -lt $((1024 * 1024)) ]; then
	ktap_pass "kmalloc usage back to baseline after unload (+$((END - BASE)) bytes)"
else
	ktap_fail "kmalloc usage back to baseline after unload (+$((END - BASE)) bytes)"
fi
rm -rf "$WORK"
ktap_finish
