#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tern block layer, end to end in one guest: tern_target exports a brd
# RAM disk and a file, tern_blk maps them through /dev/tern-blk-ctl, and
# the data path (fio crc32c verify from 4K to 1M, QD 1 to 64, several
# jobs on one device; ext4; data equal on the backing device both ways),
# DISCARD and WRITE_ZEROES with the target's counters, the limits,
# read-only exports, reconnects, the option parser and teardown are
# checked.
#
# The transport is a parameter (see blk_lib.sh): TRANSPORT=tcp (default)
# listens and maps on 127.0.0.1; TRANSPORT=rdma on $TERN_RDMA_ADDR0
# (blk_rdma.sh, tools/testing/vm/run --rdma). Over rdma the checks that
# do not depend on the transport are not planned: configfs validation,
# raw requests, echo into the control device, write zeroes, discard,
# stable pages, corruption caught by fio and read_only=1 run over tcp
# only. Bad map strings run over both, each otherwise a valid map for
# the transport at hand.

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/blk_lib.sh"

SVC=7447
WORK=/var/tmp/tern-blk
FILE0=$WORK/file0.img
ACL0=$WORK/acl0.img
# the start of every map string: transport, address, service
AT="transport=$TRANSPORT,address=$ADDR,service=$SVC"
# what a test leaves mapped, unmapped at the end
MAPPED=()

setup_modules() {
	blk_modprobe || return 1
	modprobe brd rd_nr=2 rd_size=65536 max_part=0 || return 1
	[ -d "$CFG/exports" ] && [ -c "$CTL" ] && [ -b /dev/ram0 ]
}

export_add() {	# NAME PATH RO [UUID]
	mkdir "$CFG/exports/$1" &&
		echo "$2" > "$CFG/exports/$1/device_path" &&
		echo "$3" > "$CFG/exports/$1/read_only" || return 1
	[ -z "${4:-}" ] || echo "$4" > "$CFG/exports/$1/uuid" || return 1
	echo 1 > "$CFG/exports/$1/enable"
}

setup_target() {	# [VOL0_UUID]: vol0 keeps its name across a restart
	mkdir -p "$WORK" || return 1
	truncate -s 64M "$FILE0" "$ACL0" || return 1
	export_add vol0 /dev/ram0 0 "${1:-}" || return 1
	export_add ro0 /dev/ram1 1 || return 1
	export_add file0 "$FILE0" 0 || return 1
	mkdir "$CFG/exports/acl0" && echo "$ACL0" > "$CFG/exports/acl0/device_path" &&
		echo "hostA, hostB" > "$CFG/exports/acl0/allowed_hosts" &&
		echo 1 > "$CFG/exports/acl0/enable" || return 1
	mkdir "$CFG/ports/p0" &&
		echo "$TRANSPORT" > "$CFG/ports/p0/transport" &&
		echo "$ADDR" > "$CFG/ports/p0/address" &&
		echo "$SVC" > "$CFG/ports/p0/service" || return 1
	local e
	for e in vol0 ro0 file0 acl0; do
		ln -s "$CFG/exports/$e" "$CFG/ports/p0/exports/$e" || return 1
	done
	echo 1 > "$CFG/ports/p0/enable" &&
		[ "$(cat "$CFG/ports/p0/enable")" = 1 ]
}

# must_fail DESCRIPTION COMMAND...: the command has to fail
must_fail() {
	local what=$1
	shift
	if "$@" 2>/dev/null; then
		echo "accepted: $what"
		return 1
	fi
}

configfs_validation() {
	local e=$CFG/exports/bad0 p=$CFG/ports/bad0 rc=0
	mkdir "$e" "$p" || return 1
	must_fail "relative device_path" sh -c "echo dev/ram0 > $e/device_path" || rc=1
	must_fail "read_only=2" sh -c "echo 2 > $e/read_only" || rc=1
	must_fail "enable=yes please" sh -c "echo 'yes please' > $e/enable" || rc=1
	must_fail "enable without device_path" sh -c "echo 1 > $e/enable" || rc=1
	must_fail "bad host id" sh -c "echo 'a/b' > $e/allowed_hosts" || rc=1
	# a list cut short at a NUL would be empty: every host allowed
	must_fail "allowed_hosts with a NUL" \
		sh -c "printf '\\0hostA' > $e/allowed_hosts" || rc=1
	[ -z "$(cat "$e/allowed_hosts")" ] || rc=1
	echo /nonexistent/dev > "$e/device_path" || rc=1
	must_fail "enable missing device" sh -c "echo 1 > $e/enable" || rc=1
	echo /dev/null > "$e/device_path" || rc=1
	must_fail "enable a character device" sh -c "echo 1 > $e/enable" || rc=1
	must_fail "transport udp" sh -c "echo udp > $p/transport" || rc=1
	must_fail "transport ../tcp" sh -c "echo ../tcp > $p/transport" || rc=1
	must_fail "address hostname" sh -c "echo localhost > $p/address" || rc=1
	must_fail "address 300.1.1.1" sh -c "echo 300.1.1.1 > $p/address" || rc=1
	must_fail "service 0" sh -c "echo 0 > $p/service" || rc=1
	must_fail "service 65536" sh -c "echo 65536 > $p/service" || rc=1
	must_fail "enable port without address" sh -c "echo 1 > $p/enable" || rc=1
	must_fail "max_lanes 65" sh -c "echo 65 > $p/max_lanes" || rc=1
	must_fail "max_lanes -1" sh -c "echo -1 > $p/max_lanes" || rc=1
	must_fail "max_queue_depth 257" sh -c "echo 257 > $p/max_queue_depth" || rc=1
	if [ "$(cat "$p/max_lanes")" != 0 ] ||
		[ "$(cat "$p/max_queue_depth")" != 0 ]; then
		echo "port caps: default not 0, or changed by a refused write"
		rc=1
	fi
	must_fail "link a port into exports" ln -s "$CFG/ports/p0" "$p/exports/x" || rc=1
	must_fail "bad export name" mkdir "$CFG/exports/bad name" || rc=1
	# configfs would list them, ls and ternadm's save would pass them by
	must_fail "export name starting with ." mkdir "$CFG/exports/.vol" || rc=1
	must_fail "port name starting with ." mkdir "$CFG/ports/.p" || rc=1
	must_fail "host name starting with ." mkdir "$CFG/hosts/.h" || rc=1
	must_fail "change device_path while enabled" \
		sh -c "echo /dev/ram1 > $CFG/exports/vol0/device_path" || rc=1
	must_fail "change address while enabled" \
		sh -c "echo 127.0.0.2 > $CFG/ports/p0/address" || rc=1
	must_fail "change max_lanes while enabled" \
		sh -c "echo 1 > $CFG/ports/p0/max_lanes" || rc=1
	must_fail "change max_queue_depth while enabled" \
		sh -c "echo 8 > $CFG/ports/p0/max_queue_depth" || rc=1
	[ "$(cat "$CFG/exports/vol0/device_path")" = /dev/ram0 ] || rc=1
	# kept as the client spells it, to compare and to show
	echo 0:0::1 > "$p/address" && [ "$(cat "$p/address")" = ::1 ] ||
		{ echo "address 0:0::1 reads back as $(cat "$p/address")"; rc=1; }
	rmdir "$e" "$p" || rc=1
	return $rc
}

check_attrs() {
	local d=/sys/block/$1/tern
	grep -H . "$d"/* | sed "s|$d/||"
	[ "$(cat "$d/state")" = live ] && [ "$(cat "$d/lanes")" = 2 ] &&
		[ "$(cat "$d/queue_depth")" = 64 ] &&
		[ "$(cat "$d/export")" = vol0 ] &&
		[ "$(cat "$d/transport")" = "$TRANSPORT" ] &&
		[ "$(cat "$d/address")" = "$ADDR" ] &&
		[ "$(cat "/sys/block/$1/size")" = $((64 * 2048)) ] &&
		[ "$(cat "/sys/block/$1/ro")" = 0 ]
}

# lanes_are DEV N [QD]: DEV negotiated N lanes, has a hardware queue per
# lane (blk-mq keeps no more than there are CPUs) and, when given, queue
# depth QD
lanes_are() {
	local d=/sys/block/$1 hw ncpu want
	hw=$(find "$d/mq" -mindepth 1 -maxdepth 1 -type d | wc -l)
	ncpu=$(nproc --all)
	want=$(($2 < ncpu ? $2 : ncpu))
	echo "$1: lanes $(cat "$d/tern/lanes"), $hw hardware queues," \
		"queue_depth $(cat "$d/tern/queue_depth")"
	[ "$(cat "$d/tern/lanes")" = "$2" ] && [ "$hw" = "$want" ] &&
		{ [ -z "$3" ] || [ "$(cat "$d/tern/queue_depth")" = "$3" ]; }
}

# tern_fuzz's block probe speaks the protocol itself over TCP, so that
# the target's refusals the client never provokes (an optional operation
# the export lacks, bad fields, stale handles) are checked too: vol0 is
# a brd disk, which has no WRITE_ZEROES.
block_probe() {
	"$(dirname "$0")/tern_fuzz" -a "$ADDR" -p "$SVC" -b vol0 -r ro0
}

# maps_with_lanes OPTS N [QD]: a device mapped with OPTS gets N lanes
# (and queue depth QD, when given); unmapped again either way. vol0 is
# mapped already: duplicate=1 asks for a device of its own.
maps_with_lanes() {
	local d rc=0
	d=$(map "$1,duplicate=1") && wait_bdev "$d" || return 1
	lanes_are "$d" "$2" "${3:-}" || { echo "$1: want $2 lanes"; rc=1; }
	unmap "$d" || rc=1
	return $rc
}

# A port's max_lanes and max_queue_depth cap what its sessions negotiate;
# without lanes= a device asks for one lane per online CPU.
port_caps() {
	local p=$CFG/ports/p1 cpus rc=0
	cpus=$(nproc)
	maps_with_lanes "$AT,export=vol0" $((cpus < 64 ? cpus : 64)) 128 ||
		return 1

	mkdir "$p" && echo "$TRANSPORT" > "$p/transport" &&
		echo "$ADDR" > "$p/address" &&
		echo $((SVC + 2)) > "$p/service" &&
		echo 1 > "$p/max_lanes" && echo 16 > "$p/max_queue_depth" &&
		ln -s "$CFG/exports/vol0" "$p/exports/vol0" &&
		echo 1 > "$p/enable" || return 1
	local at="transport=$TRANSPORT,address=$ADDR,service=$((SVC + 2))"
	maps_with_lanes "$at,export=vol0,lanes=4,queue_depth=64" 1 16 || rc=1
	maps_with_lanes "$at,export=vol0" 1 16 || rc=1

	# a cap of 2 over the CPU count: one lane per CPU, at most 2
	echo 0 > "$p/enable" && echo 2 > "$p/max_lanes" &&
		echo 0 > "$p/max_queue_depth" && echo 1 > "$p/enable" || rc=1
	maps_with_lanes "$at,export=vol0,lanes=4" 2 128 || rc=1
	maps_with_lanes "$at,export=vol0" $((cpus < 2 ? cpus : 2)) || rc=1
	echo 0 > "$p/enable" && rm "$p/exports/vol0" && rmdir "$p" || rc=1
	return $rc
}

# stable_writes CRC_DEV PLAIN_DEV: pages under a data crc must not change
# in flight, so only the crc=1 device asks for stable writes
stable_writes() {
	local a b
	a=$(cat "/sys/block/$1/queue/stable_writes")
	b=$(cat "/sys/block/$2/queue/stable_writes")
	echo "$1 (crc=1): $a, $2 (crc=0): $b"
	[ "$a" = 1 ] && [ "$b" = 0 ]
}

# fio_verify (blk_lib.sh) can fail: blocks written through DEV with crc32c
# headers pass fio's verify_only pass, and fail it once one block was
# overwritten on the backing device underneath.
fio_catches_corruption() {	# DEV BACKING
	local job=(--name=seq --filename="/dev/$1" --direct=1 --ioengine=libaio
		--rw=write --bs=4k --iodepth=8 --offset=48M --size=1M
		--verify=crc32c --verify_fatal=1)
	fio "${job[@]}" --do_verify=0 >"$WORK/fio.out" 2>&1 ||
		{ tail -n 20 "$WORK/fio.out"; return 1; }
	fio "${job[@]}" --verify_only >"$WORK/fio.out" 2>&1 ||
		{ echo "verify_only failed on intact data"; tail -n 20 "$WORK/fio.out"; return 1; }
	dd if=/dev/urandom of="$2" bs=4k count=1 seek=$(((48 << 20) / 4096 + 77)) \
		oflag=direct status=none || return 1
	if fio "${job[@]}" --verify_only >"$WORK/fio.out" 2>&1; then
		echo "verify_only passed over a corrupted block"
		return 1
	fi
	grep -m1 -iE "verify|crc|bad" "$WORK/fio.out"
	return 0
}

through_to_backing() {	# DEV: ternN -> ram0, and ram0 -> ternN
	local t=/dev/$1
	head -c 4M /dev/urandom > "$WORK/a" || return 1
	head -c 4M /dev/urandom > "$WORK/b" || return 1
	dd if="$WORK/a" of="$t" bs=1M seek=8 oflag=direct status=none || return 1
	dd if=/dev/ram0 of="$WORK/a2" bs=1M skip=8 count=4 iflag=direct status=none ||
		return 1
	cmp "$WORK/a" "$WORK/a2" || return 1
	dd if="$WORK/b" of=/dev/ram0 bs=1M seek=20 oflag=direct status=none || return 1
	dd if="$t" of="$WORK/b2" bs=1M skip=20 count=4 iflag=direct status=none ||
		return 1
	cmp "$WORK/b" "$WORK/b2"
}

# The target's data pages go back to tern's stash and out again: some
# were reused (the fio runs above verified what went through them), and
# none is left in use once the I/O is over.
data_pages_recycled() {
	local f=/sys/kernel/debug/tern/data_pages i
	for i in $(seq 50); do
		grep -qx 'in_use 0' "$f" && break
		sleep 0.1
	done
	cat "$f"
	grep -qx 'in_use 0' "$f" &&
		[ "$(awk '$1 == "reused" { print $2 }' "$f")" -gt 0 ]
}

# Requests leave from the submitter's context (queue_rq), not from the
# transport's worker: the core counts those sends. Over TCP that needs
# a submitter that may sleep, so tern_blk's queues are BLOCKING there.
submitter_sends() {	# DEV
	local n flags
	n=$(total_of submitter_sends)
	flags=$(cat "/sys/kernel/debug/block/$1/hctx0/flags") || return 1
	echo "submitter_sends ${n:-none}; hctx0 $flags"
	[ "${n:-0}" -gt 0 ] || return 1
	if [ "$TRANSPORT" = tcp ]; then
		[[ $flags == *BLOCKING* ]]
	else
		[[ $flags != *BLOCKING* ]]
	fi
}

# inline_limits_move WRITE READ WANT_READS WANT_WRITES: map vol0 with
# inline_write=WRITE and inline_read=READ ("" leaves one out), write 16
# random 64K blocks and read them back as 256 4K reads, direct: the
# data is the same, and the target's RDMA READs (of the writes) and
# RDMA WRITEs (of the reads) moved by at least WANT_*, or not at all
# where WANT_* is 0.
inline_limits_move() {
	local opts="$AT,export=vol0,lanes=1,duplicate=1" d r0 w0 r1 w1 rc=0
	local stats=/sys/kernel/debug/tern_rdma/stats
	[ -n "$1" ] && opts+=",inline_write=$1"
	[ -n "$2" ] && opts+=",inline_read=$2"
	d=$(map "$opts") || return 1
	wait_bdev "$d" || return 1
	echo "$opts: inline_write $(cat "/sys/block/$d/tern/inline_write")," \
		"inline_read $(cat "/sys/block/$d/tern/inline_read")"
	[ "$(cat "/sys/block/$d/tern/inline_write")" = "${1:-default}" ] &&
		[ "$(cat "/sys/block/$d/tern/inline_read")" = "${2:-default}" ] ||
		rc=1
	head -c 1M /dev/urandom > "$WORK/inline.in"
	r0=$(awk '$1 == "rdma_reads" { print $2 }' "$stats")
	w0=$(awk '$1 == "rdma_writes" { print $2 }' "$stats")
	dd if="$WORK/inline.in" of="/dev/$d" bs=64k seek=768 oflag=direct \
		status=none || rc=1
	r1=$(awk '$1 == "rdma_reads" { print $2 }' "$stats")
	dd if="/dev/$d" of="$WORK/inline.out" bs=4k skip=12288 count=256 \
		iflag=direct status=none || rc=1
	w1=$(awk '$1 == "rdma_writes" { print $2 }' "$stats")
	unmap "$d" || rc=1
	echo "RDMA READs $r0 -> $r1 (want $3), RDMA WRITEs $w0 -> $w1 (want $4)"
	cmp -s "$WORK/inline.in" "$WORK/inline.out" ||
		{ echo "data read back differs"; rc=1; }
	if [ "$3" = 0 ]; then
		[ "$r1" = "$r0" ] || rc=1
	else
		[ $((r1 - r0)) -ge "$3" ] || rc=1
	fi
	if [ "$4" = 0 ]; then
		[ "$w1" = "$w0" ] || rc=1
	else
		[ $((w1 - w0)) -ge "$4" ] || rc=1
	fi
	return $rc
}

block_softirqs() {
	awk '$1 == "BLOCK:" { for (i = 2; i <= NF; i++) n += $i; print n }' \
		/proc/softirqs
}

# A device of one hardware queue (lanes=1) finishes its requests where
# their replies are taken, in a task, not in the block softirq, which
# raised from a task wakes ksoftirqd (two more context switches per I/O;
# once per read before): 2000 direct 4K reads, the BLOCK softirq runs
# for under a quarter of them (brd, the backend, completes without it).
one_queue_completes_inline() {
	local d b0 b1 hw rc=0
	d=$(map "$AT,export=vol0,lanes=1,duplicate=1") || return 1
	wait_bdev "$d" || { unmap "$d"; return 1; }
	hw=$(find "/sys/block/$d/mq" -mindepth 1 -maxdepth 1 | wc -l)
	b0=$(block_softirqs)
	dd if="/dev/$d" of=/dev/null bs=4k count=2000 iflag=direct \
		status=none || rc=1
	b1=$(block_softirqs)
	unmap "$d" || rc=1
	echo "$d: $hw hardware queue(s), BLOCK softirqs $((b1 - b0)) for 2000 reads"
	[ $rc = 0 ] && [ "$hw" = 1 ] && [ $((b1 - b0)) -lt 500 ]
}

# RDMA: the map's inline limits, not only the module's defaults, decide
# which data the target moves by RDMA READ and WRITE
inline_limits() {
	inline_limits_move "" "" 16 0 &&
		inline_limits_move 65536 0 0 256
}

# write_zeroes DEV EXPORT: BLKZEROOUT reads back zeroes; when DEV
# advertises WRITE_ZEROES the target counts one, else DEV wrote zeroes
write_zeroes() {
	local t=/dev/$1 wz0 wz1 w0 w1
	head -c 1M /dev/urandom | dd of="$t" bs=1M seek=2 oflag=direct status=none ||
		return 1
	wz0=$(export_stat "$2" write_zeroes) && w0=$(export_stat "$2" writes) ||
		return 1
	blkdiscard -f -z -o $((2 << 20)) -l $((1 << 20)) "$t" || return 1
	wz1=$(export_stat "$2" write_zeroes) && w1=$(export_stat "$2" writes) ||
		return 1
	echo "write_zeroes_max_bytes $(cat "/sys/block/$1/queue/write_zeroes_max_bytes"):" \
		"target write_zeroes $wz0 -> $wz1, writes $w0 -> $w1"
	if [ "$(cat "/sys/block/$1/queue/write_zeroes_max_bytes")" -gt 0 ]; then
		[ "$wz1" -gt "$wz0" ] || return 1
	else
		[ "$w1" -gt "$w0" ] || return 1
	fi
	cmp -n $((1 << 20)) <(dd if="$t" bs=1M skip=2 count=1 iflag=direct status=none) \
		/dev/zero
}

ext4_roundtrip() {	# DEV
	local t=/dev/$1 mnt=$WORK/mnt i
	mkdir -p "$mnt" || return 1
	mkfs.ext4 -q -F "$t" || return 1
	mount "$t" "$mnt" || return 1
	for i in 1 2 3 4; do
		head -c $((i * 700000)) /dev/urandom > "$mnt/f$i" || return 1
	done
	cp -r /usr/share/doc/fio "$mnt/" 2>/dev/null
	(cd "$mnt" && find . -type f -exec md5sum {} + | sort -k2) > "$WORK/sums1"
	sync || return 1
	umount "$mnt" || return 1
	echo 3 > /proc/sys/vm/drop_caches
	mount "$t" "$mnt" || return 1
	(cd "$mnt" && find . -type f -exec md5sum {} + | sort -k2) > "$WORK/sums2"
	umount "$mnt" || return 1
	fsck.ext4 -n -f "$t" >/dev/null || return 1
	[ -s "$WORK/sums1" ] && cmp "$WORK/sums1" "$WORK/sums2"
}

discard_file() {	# DEV on a file export: punch a hole, read zeroes
	local t=/dev/$1 before after d0 d1
	[ "$(cat "/sys/block/$1/queue/discard_max_bytes")" -gt 0 ] || {
		echo "no discard"; return 1; }
	dd if=/dev/urandom of="$t" bs=1M seek=40 count=4 oflag=direct status=none ||
		return 1
	sync
	before=$(du -k "$FILE0" | cut -f1)
	d0=$(export_stat file0 discards) || return 1
	blkdiscard -f -o $((40 << 20)) -l $((4 << 20)) "$t" || return 1
	d1=$(export_stat file0 discards) || return 1
	after=$(du -k "$FILE0" | cut -f1)
	echo "file blocks ${before}K -> ${after}K, target discards $d0 -> $d1"
	[ "$after" -lt "$before" ] && [ "$d1" -gt "$d0" ] || return 1
	cmp -n $((4 << 20)) <(dd if="$t" bs=1M skip=40 count=4 iflag=direct status=none) \
		/dev/zero
}

# dm_write_refused DEV: a kernel user that opens DEV by its number may
# write to it whatever the disk's read-only flag says (the block layer
# only warns): a linear device-mapper table over DEV, written through,
# must fail and leave DEV's first block as it was
dm_write_refused() {
	local d=$1 name=tern-ro-$1 before after dm rc=0
	modprobe dm-mod 2>/dev/null
	before=$(dd if="/dev/$d" bs=4k count=1 iflag=direct status=none | md5sum)
	dmsetup create --noudevsync "$name" \
		--table "0 $(cat "/sys/block/$d/size") linear $(cat "/sys/block/$d/dev") 0" ||
		return 1
	dm=$(grep -lx "$name" /sys/block/dm-*/dm/name)
	dm=${dm%/dm/name}
	if dd if=/dev/urandom of="/dev/${dm##*/}" bs=4k count=1 oflag=direct \
		status=none 2>/dev/null; then
		echo "a write through ${dm##*/} over read-only $d succeeded"
		rc=1
	fi
	# udev may still be probing the new device: wait, and retry if busy
	udevadm settle --timeout=10 2>/dev/null
	dmsetup remove --retry --noudevsync "$name" || rc=1
	after=$(dd if="/dev/$d" bs=4k count=1 iflag=direct status=none | md5sum)
	[ "$before" = "$after" ] || { echo "$d changed"; rc=1; }
	return $rc
}

read_only_export() {
	local d
	d=$(map "$AT,export=ro0") || return 1
	MAPPED+=("$d")
	wait_bdev "$d" || return 1
	[ "$(cat "/sys/block/$d/ro")" = 1 ] || { echo "$d not read-only"; return 1; }
	dd if="/dev/$d" of=/dev/null bs=1M count=4 iflag=direct status=none || return 1
	if dd if=/dev/zero of="/dev/$d" bs=4k count=1 oflag=direct status=none 2>/dev/null; then
		echo "write to read-only $d succeeded"
		return 1
	fi
	dm_write_refused "$d" || return 1
	dmesg | grep -q "BUG\|WARNING" && return 1
	return 0
}

# a writable export mapped read-only: only the client stands in the way
read_only_option() {
	local d
	d=$(map "$AT,export=vol0,read_only=1,duplicate=1") || return 1
	MAPPED+=("$d")
	wait_bdev "$d" || return 1
	[ "$(cat "/sys/block/$d/ro")" = 1 ] && dm_write_refused "$d"
}

allowed_hosts() {
	local d
	if d=$(map "$AT,export=acl0,host=hostC"); then
		echo "hostC was let in as $d"
		MAPPED+=("$d")
		return 1
	fi
	d=$(map "$AT,export=acl0,host=hostB") || return 1
	MAPPED+=("$d")
	wait_bdev "$d"
}

# bad_maps: map strings with one fault each fail and create no device.
# Apart from that fault each names this pass's transport and its port
# p0 ($AT), so none fails only for going to the wrong transport; the
# last three reach the network: an export the target does not have, a
# port nobody listens on, an address with no route (TEST-NET-1).
bad_maps() {
	local before after rc=0 s long t="transport=$TRANSPORT"
	before=$(tern_devs | sort)
	long="$AT,export=$(head -c 1100 /dev/zero | tr '\0' x)"
	for s in \
		"$AT,export=vol0,colour=blue" \
		"$AT,export=vol0,export=vol0" \
		"$AT" \
		"$t,address=127.0.0.300,service=$SVC,export=vol0" \
		"$t,address=localhost,service=$SVC,export=vol0" \
		"$t,address=$ADDR,service=0,export=vol0" \
		"$AT,export=vol0,lanes=0" \
		"$AT,export=vol0,lanes=65" \
		"$AT,export=vol0,queue_depth=99999" \
		"$AT,export=vol0,crc=2" \
		"$AT,export=vol0,inline_read=16777217" \
		"$AT,export=vol0,inline_write=-1" \
		"$AT,export=vol0,inline_write=none" \
		"address=$ADDR,service=$SVC,export=vol0,transport=udp" \
		"address=$ADDR,service=$SVC,export=vol0,transport=../tcp" \
		"$AT,export=vol0,,lanes=1" \
		"$AT,export=" \
		"$AT,export=a/b" \
		"$AT,export=.vol0" \
		"$AT,export=vol0,host=.h" \
		"remove=tern999" \
		"$long" \
		"$AT,export=nosuch" \
		"$t,address=$ADDR,service=$((SVC + 1)),export=vol0" \
		"$t,address=192.0.2.1,service=$SVC,export=vol0"; do
		if map "$s" >/dev/null 2>&1; then
			echo "accepted: ${s:0:80}"
			rc=1
		fi
	done
	after=$(tern_devs | sort)
	if [ "$before" != "$after" ]; then
		echo "devices changed: [$before] -> [$after]"
		rc=1
	fi
	return $rc
}

# echo(1) into the control device, as admin-guide.rst shows: the write
# of "OPTIONS\n" is taken whole, so the shell sees no short write and
# sends no stray "\n" of its own; bash's builtin echo and /bin/echo both.
echo_map() {
	local before after d e rc=0
	for e in echo /bin/echo; do
		before=$(tern_devs | sort)
		if ! $e "$AT,export=vol0,lanes=1,duplicate=1" > "$CTL"; then
			echo "$e: map write failed"
			return 1
		fi
		after=$(tern_devs | sort)
		d=$(comm -13 <(echo "$before") <(echo "$after"))
		if [ -z "$d" ] || [ "$(echo "$d" | wc -l)" != 1 ]; then
			echo "$e: expected one new device, got [$d]"
			return 1
		fi
		wait_bdev "$d" || rc=1
		if ! $e "remove=$d" > "$CTL"; then
			echo "$e: remove=$d write failed"
			rc=1
		fi
		if [ -e "/sys/block/$d" ]; then
			echo "$e: $d still there"
			MAPPED+=("$d")
			return 1
		fi
	done
	return $rc
}

# Lanes die every N transport operations while fio verifies: requests
# are resent on reconnect, the target finds their binding again from the
# handle, and not one byte or I/O is lost.
fault_injection() {	# DEV
	local p=/sys/module/tern/parameters/inject_fail_every rc
	[ -w "$p" ] || { echo "no $p"; return 1; }
	echo 150 > "$p"
	fio_verify "$1" 4k 8 2M
	rc=$?
	echo 0 > "$p"
	echo "$(dmesg | grep -c 'injected failure') injected lane failures"
	dmesg | grep -q 'injected failure' || rc=1
	# a lane may have failed just before injection stopped: it comes back
	wait_live "$1" || rc=1
	return $rc
}

# dev_of EXPORT: the mapped device of an export
dev_of() {
	local d
	for d in $(tern_devs); do
		[ "$(cat "/sys/block/$d/tern/export")" = "$1" ] && { echo "$d"; return 0; }
	done
	return 1
}

# size_within DEV MIB SECONDS: DEV reaches MIB MiB within SECONDS
size_within() {
	local i
	for i in $(seq $(($3 * 10))); do
		[ "$(cat "/sys/block/$1/size")" = $(($2 * 2048)) ] && return 0
		sleep 0.1
	done
	echo "$1: $(cat "/sys/block/$1/size") sectors after $3 s, not $2 MiB"
	return 1
}

# The file behind an export grows. The device's WATCH follows on its own:
# at once when the target is told (ternadm target export resize), within
# watch_hold when it is not; rescan still asks at once. Idle, the WATCH
# is held, not answered in a loop.
resize() {	# DEV mapped on file0
	local t=/dev/$1 rc=0 stats n0 n1
	local hold=/sys/module/tern_target/parameters/watch_hold
	stats=$(echo /sys/kernel/debug/tern/blk.*/"$(cat "/sys/block/$1/tern/session_id")"/stats)
	# the check before this one fails lanes: the WATCH may be on its way
	# again after a reconnect
	for _ in $(seq 50); do
		grep -qx "reserved_inflight 1" "$stats" && break
		sleep 0.1
	done
	grep -qx "reserved_inflight 1" "$stats" ||
		{ echo "no WATCH held within 5 s: $(grep reserved "$stats")"; rc=1; }
	echo 2 > "$hold" || return 1
	truncate -s 80M "$FILE0" && adm target export resize file0 &&
		size_within "$1" 80 3 || rc=1
	truncate -s 96M "$FILE0" && size_within "$1" 96 8 || rc=1
	n0=$(awk '$1 == "requests" { print $2 }' "$stats")
	sleep 4
	n1=$(awk '$1 == "requests" { print $2 }' "$stats")
	echo "idle for 4 s with watch_hold 2: $((n1 - n0)) requests"
	[ $((n1 - n0)) -le 4 ] || rc=1
	echo 30 > "$hold"
	truncate -s 112M "$FILE0" && echo 1 > "/sys/block/$1/tern/rescan" &&
		size_within "$1" 112 1 || rc=1
	head -c 1M /dev/urandom > "$WORK/c" || return 1
	dd if="$WORK/c" of="$t" bs=1M seek=100 oflag=direct status=none || return 1
	cmp <(dd if="$t" bs=1M skip=100 count=1 iflag=direct status=none) "$WORK/c" ||
		rc=1
	return $rc
}

# The port goes away under a mapped device: I/O waits, the client
# reconnects when the port is back, and the I/O completes.
port_bounce() {
	local d pid state rc=0
	d=$(dev_of acl0) || { echo "acl0 not mapped"; return 1; }
	head -c 1M /dev/urandom > "$WORK/p" || return 1
	echo 0 > "$CFG/ports/p0/enable" || return 1
	sleep 1
	state=$(cat "/sys/block/$d/tern/state")
	echo "state with the port disabled: $state"
	[ "$state" = reconnecting ] || rc=1
	dd if="$WORK/p" of="/dev/$d" bs=64k oflag=direct status=none &
	pid=$!
	sleep 2
	if ! kill -0 $pid 2>/dev/null; then
		echo "I/O finished while the port was disabled"
		rc=1
	fi
	echo 1 > "$CFG/ports/p0/enable" || rc=1
	wait $pid || { echo "I/O failed after the port came back"; rc=1; }
	cmp <(dd if="/dev/$d" bs=1M count=1 iflag=direct status=none) "$WORK/p" ||
		rc=1
	state=$(cat "/sys/block/$d/tern/state")
	echo "state after: $state"
	[ "$state" = live ] || rc=1
	return $rc
}

# Past its loss timeout a device fails I/O with EIO instead of hanging,
# and works again once the target is back.
loss_timeout() {
	local d st i rc=0 t0
	d=$(map "$AT,export=vol0,loss_timeout=2,duplicate=1") || return 1
	wait_bdev "$d" || return 1
	st=/sys/block/$d/tern/state
	echo 0 > "$CFG/ports/p0/enable" || return 1
	t0=$SECONDS
	if dd if="/dev/$d" of=/dev/null bs=4k count=1 skip=77 iflag=direct status=none 2>/dev/null; then
		echo "read succeeded with the target gone"
		rc=1
	fi
	echo "I/O failed after $((SECONDS - t0)) s, state $(cat "$st")"
	[ "$(cat "$st")" = failed ] || rc=1
	echo 1 > "$CFG/ports/p0/enable" || return 1
	for i in $(seq 200); do
		[ "$(cat "$st")" = live ] && break
		sleep 0.1
	done
	echo "state $(cat "$st") after the port came back"
	dd if="/dev/$d" of=/dev/null bs=4k count=1 skip=78 iflag=direct status=none ||
		rc=1
	unmap "$d" || rc=1
	return $rc
}

# A target that stops answering over a live session (tern_target's
# inject_stall_ms holds every request 9 s): a read fails with ETIMEDOUT
# after max_timeouts=2 expiries of a 1 s io_timeout, not after the stall,
# nothing waits in D state, and the device serves I/O again once the
# target answers, the late reply to the cancelled request dropped.
# stalled_read_times_out DEV BS SKIP: a direct read of BS fails with
# ETIMEDOUT before the stall ends
stalled_read_times_out() {
	local t0=$SECONDS el
	if dd if="/dev/$1" of=/dev/null bs="$2" count=1 skip="$3" iflag=direct \
		status=none 2>"$WORK/timeout.err"; then
		echo "$2 read succeeded with the target stalled"
		return 1
	fi
	el=$((SECONDS - t0))
	echo "$2 read failed after $el s: $(cat "$WORK/timeout.err")"
	[ "$el" -le 8 ] || { echo "not before the 9 s stall ended"; return 1; }
	grep -q "timed out" "$WORK/timeout.err" || { echo "not ETIMEDOUT"; return 1; }
}

# Over RDMA a 64K read is registered for the target to WRITE into: the
# timed-out request resets its lane (cancel_resets) rather than wait for
# the target. Over TCP nothing is registered, nothing is reset.
request_timeout() {
	local d t0 st stuck resets want i rc=0
	local mt=/sys/module/tern_blk/parameters/max_timeouts
	local stall=/sys/module/tern_target/parameters/inject_stall_ms
	d=$(map "$AT,export=vol0,lanes=1,duplicate=1") || return 1
	wait_bdev "$d" || return 1
	udevadm settle 2>/dev/null
	echo 1000 > "/sys/block/$d/queue/io_timeout" && echo 2 > "$mt" &&
		echo 9000 > "$stall" || return 1
	t0=$SECONDS
	stalled_read_times_out "$d" 4k 33 || rc=1
	stalled_read_times_out "$d" 64k 3 || rc=1
	echo 0 > "$stall"
	echo 4 > "$mt"
	resets=$(awk '$1 == "cancel_resets" { print $2 }' \
		/sys/kernel/debug/tern/blk.*/"$(cat "/sys/block/$d/tern/session_id")"/stats)
	want=0
	[ "$TRANSPORT" = rdma ] && want=1
	echo "cancel_resets $resets, expected $want"
	[ "$resets" = "$want" ] || rc=1
	for i in $(seq 50); do	# a reset lane reconnects at once
		st=$(cat "/sys/block/$d/tern/state")
		[ "$st" = live ] && break
		sleep 0.1
	done
	[ "$st" = live ] || { echo "state $st"; rc=1; }
	stuck=$(ps -eo stat=,pid=,comm= | awk '$1 ~ /^D/ { print $2, $3 }')
	[ -z "$stuck" ] || { echo "in D state: $stuck"; rc=1; }
	dd if="/dev/$d" of=/dev/null bs=4k count=1 skip=34 iflag=direct \
		status=none || { echo "read failed once the stall was off"; rc=1; }
	# the held requests are answered at last; their replies go nowhere
	while [ $((SECONDS - t0)) -le 15 ]; do
		sleep 1
	done
	dd if="/dev/$d" of=/dev/null bs=64k count=16 iflag=direct status=none ||
		{ echo "read failed after the late reply"; rc=1; }
	unmap "$d" || rc=1
	return $rc
}

# read_fails DEV SKIP: a direct 4K read fails with EIO within 5 s
read_fails() {
	if timeout 5 dd if="/dev/$1" of=/dev/null bs=4k count=1 skip="$2" \
		iflag=direct status=none 2>"$WORK/read.err"; then
		echo "read from /dev/$1 succeeded"
		return 1
	fi
	grep -q "Input/output error" "$WORK/read.err" ||
		{ echo "read: $(cat "$WORK/read.err")"; return 1; }
}

# the device reads and writes 1M at SEEK (MiB)
rw_ok() {	# DEV SEEK
	head -c 1M /dev/urandom > "$WORK/x" &&
		dd if="$WORK/x" of="/dev/$1" bs=1M seek="$2" oflag=direct status=none &&
		cmp <(dd if="/dev/$1" bs=1M skip="$2" count=1 iflag=direct status=none) \
			"$WORK/x"
}

# An export goes away under I/O, as an nvme namespace can: unlinked from
# its port and removed while fio runs, the device's I/O fails with EIO
# instead of hanging, its state says removed and later I/O fails at once;
# nothing is left in D state. The export made again under its name maps
# again; disabling and enabling it fails that device the same way, for
# good, while a new map works.
export_disable_while_mapped() {	# DEV mapped on file0
	local d=$1 pid i t0 frc stuck st d2 d3 rc=0
	fio_busy "$d" "$WORK/removed.out" 1 1000 --name=removed --rw=randrw \
		--bs=4k --iodepth=16 --size=32M --runtime=30
	pid=$FIO_PID
	kill -0 "$pid" 2>/dev/null ||
		{ echo "fio ended early"; tail -n 5 "$WORK/removed.out"; return 1; }
	t0=$SECONDS
	rm "$CFG/ports/p0/exports/file0" || { echo "cannot unlink file0"; rc=1; }
	rmdir "$CFG/exports/file0" || { echo "cannot remove file0"; rc=1; }
	echo "unlink and rmdir under fio took $((SECONDS - t0)) s"
	for i in $(seq 150); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "fio still running $((SECONDS - t0)) s after the removal"
		ps -o stat,pid,wchan:32,comm -p "$pid"
		kill -9 "$pid"
		rc=1
	fi
	wait "$pid"
	frc=$?
	echo "fio ended $((SECONDS - t0)) s after the removal, exit $frc"
	grep -m1 -E "err= *[0-9]" "$WORK/removed.out"
	grep -q "Input/output error" "$WORK/removed.out" ||
		{ echo "fio saw no EIO"; rc=1; }
	st=$(cat "/sys/block/$d/tern/state")
	echo "state $st"
	[ "$st" = removed ] || rc=1
	read_fails "$d" 100 || rc=1
	stuck=$(stuck_in_d)
	[ -z "$stuck" ] || { echo "in D state: $stuck"; rc=1; }

	# made again (blk.sh goes on with file0): new maps work
	if ! export_add file0 "$FILE0" 0 ||
		! ln -s "$CFG/exports/file0" "$CFG/ports/p0/exports/file0"; then
		echo "cannot make file0 again"
		return 1
	fi
	read_fails "$d" 101 || rc=1
	if ! d2=$(map "$AT,export=file0,lanes=1,duplicate=1") || ! wait_bdev "$d2"; then
		echo "file0 made again does not map"
		return 1
	fi
	rw_ok "$d2" 3 || { echo "I/O through the new map failed"; rc=1; }

	# disabled and enabled again: the binding stays stale, cleanly
	echo 0 > "$CFG/exports/file0/enable" || rc=1
	read_fails "$d2" 200 || rc=1
	echo 1 > "$CFG/exports/file0/enable" || rc=1
	read_fails "$d2" 201 || rc=1
	[ "$(cat "/sys/block/$d2/tern/state")" = removed ] || rc=1
	if ! d3=$(map "$AT,export=file0,lanes=1,duplicate=1") || ! wait_bdev "$d3"; then
		echo "file0 enabled again does not map"
		return 1
	fi
	rw_ok "$d3" 4 || { echo "I/O after enabling again failed"; rc=1; }
	unmap "$d2" || rc=1
	unmap "$d3" || rc=1
	return $rc
}

# Unload the target and configure it again under a mapped device while
# fio verify runs on it (issue 21): the bindings the target held are gone
# and requests come back -ESTALE. The device binds again, fio goes on
# through the restart with no error and no mismatch, and data written
# before it reads back intact.
target_restart() {	# DEV mapped on vol0
	local d=$1 st=/sys/block/$1/tern before after pid uuid w0 rc=0
	before=$(cat "$st/rebinds") || return 1
	# restarted as a saved configuration restores it: the same uuid (a
	# client refuses to bind its device to another export's uuid)
	uuid=$(cat "$CFG/exports/vol0/uuid") || return 1
	head -c 2M /dev/urandom > "$WORK/r1" || return 1
	dd if="$WORK/r1" of="/dev/$d" bs=64k oflag=direct status=none ||
		return 1
	# the next 4 MiB: written and read back, each block checked, for 8 s
	w0=$(stat_field "$d" 5)
	fio --name=restart --filename="/dev/$d" --direct=1 --ioengine=libaio \
		--rw=randwrite --bsrange=4k-64k --iodepth=8 --offset=2M \
		--size=4M --time_based --runtime=8 --verify=crc32c \
		--verify_backlog=32 --do_verify=1 --verify_fatal=1 \
		--randrepeat=0 --output-format=terse --terse-version=3 \
		> "$WORK/fio-restart.out" 2>&1 &
	pid=$!
	for _ in $(seq 50); do
		[ "$(stat_field "$d" 5)" -gt $((w0 + 50)) ] && break
		sleep 0.1
	done
	kill -0 $pid 2>/dev/null || { echo "fio ended before the restart"; rc=1; }
	target_down || return 1
	modprobe -r tern_target && modprobe tern_target || return 1
	setup_target "$uuid" ||
		{ echo "cannot configure the target again"; rc=1; }
	if ! wait $pid; then
		echo "fio across the restart failed:"
		tail -n 20 "$WORK/fio-restart.out"
		rc=1
	fi
	cmp <(dd if="/dev/$d" bs=1M count=2 iflag=direct status=none) \
		"$WORK/r1" || rc=1
	after=$(cat "$st/rebinds")
	echo "rebinds $before -> $after, state $(cat "$st/state"), fio writes $(($(stat_field "$d" 5) - w0))"
	[ "$after" -gt "$before" ] && [ "$(cat "$st/state")" = live ] || rc=1
	return $rc
}

unmap_all() {
	local d rc=0
	for d in $(tern_devs); do
		unmap "$d" || { echo "cannot unmap $d"; rc=1; }
	done
	[ -z "$(tern_devs)" ] || rc=1
	return $rc
}

# Remove the port and every export from configfs.
target_down() {
	local e
	echo 0 > "$CFG/ports/p0/enable" || return 1
	for e in "$CFG"/ports/p0/exports/*; do
		[ -L "$e" ] && { rm "$e" || return 1; }
	done
	rmdir "$CFG/ports/p0" || return 1
	for e in "$CFG"/exports/*; do
		rmdir "$e" || return 1
	done
}

teardown() {
	target_down && blk_unload brd
}

if ! why=$(blk_transport_ready); then
	echo "TAP version 13"
	echo "1..0 # SKIP $why"
	exit 4
fi
# Over rdma the checks of what the target or tern_blk do alike on every
# transport are not planned: configfs, raw requests, zeroes, discard,
# stable pages, corruption caught, read-only maps.
ALL=0
[ "$TRANSPORT" = tcp ] && ALL=1
ktap_plan $((ALL ? 39 : 31))

check "modules load (tern_$TRANSPORT, tern_target, tern_blk, brd)" setup_modules
check "target configured through configfs (4 exports, port p0 on $TRANSPORT://$ADDR:$SVC)" \
	setup_target
[ $ALL = 1 ] &&
	check "configfs refuses malformed or untimely settings" configfs_validation
[ $ALL = 1 ] &&
	check "raw block requests: bad ones refused with the right status, WATCH held" \
		block_probe

VOL=$(map "$AT,export=vol0,lanes=2,queue_depth=64")
if [ -n "$VOL" ] && wait_bdev "$VOL"; then
	ktap_pass "map vol0 (brd) over $TRANSPORT as /dev/$VOL"
else
	ktap_fail "map vol0 (brd) over $TRANSPORT"
fi
check "sysfs attributes of /dev/$VOL" check_attrs "$VOL"
check "port max_lanes and max_queue_depth cap lanes, hardware queues, depth" \
	port_caps
check "fio crc32c verify, 4K QD1" fio_verify "$VOL" 4k 1 2M
check "fio crc32c verify, 4K QD16" fio_verify "$VOL" 4k 16 4M
check "fio crc32c verify, 4K QD64, 4 jobs on disjoint slices" \
	fio_verify "$VOL" 4k 64 4M 4
check "fio crc32c verify, 4K-1M mixed sizes QD8, 4 jobs" \
	fio_verify "$VOL" 4k-1m 8 16M 4
check "fio crc32c verify, 1M QD1" fio_verify "$VOL" 1M 1 8M
check "fio crc32c verify, 1M QD32" fio_verify "$VOL" 1M 32 16M
[ $ALL = 1 ] &&
	check "fio verify fails on a block corrupted on the backing device" \
		fio_catches_corruption "$VOL" /dev/ram0
check "data through /dev/$VOL equals the backing device, both ways" \
	through_to_backing "$VOL"
check "target data pages reused from the stash, none left in use" \
	data_pages_recycled
check "requests sent from the submitter's context" submitter_sends "$VOL"
check "one hardware queue: requests finish where replies are taken, not in the block softirq" \
	one_queue_completes_inline
[ "$TRANSPORT" = rdma ] &&
	check "inline_write= and inline_read= choose what moves by RDMA READ and WRITE" \
		inline_limits
[ $ALL = 1 ] &&
	check "write zeroes through /dev/$VOL reads back zeroes" \
		write_zeroes "$VOL" vol0

FD=$(map "$AT,export=file0,crc=1,lanes=1")
if [ -n "$FD" ] && wait_bdev "$FD"; then
	ktap_pass "map file0 (file, crc=1) as /dev/$FD"
else
	ktap_fail "map file0 (file, crc=1)"
fi
[ $ALL = 1 ] &&
	check "queue/stable_writes is 1 on /dev/$FD (crc=1), 0 on /dev/$VOL" \
		stable_writes "$FD" "$VOL"
check "ext4: mkfs, write, sync, remount, checksums equal, fsck" \
	ext4_roundtrip "$FD"
[ $ALL = 1 ] &&
	check "discard on a file export punches a hole; the target counts it" \
		discard_file "$FD"
[ $ALL = 1 ] &&
	check "WRITE_ZEROES on a file export: counted by the target, reads zeroes" \
		write_zeroes "$FD" file0
check "fio crc32c verify with data crc, 64K QD8" fio_verify "$FD" 64k 8 4M
check "fio verify survives injected lane failures (lanes=1)" \
	fault_injection "$FD"
check "the exported file grows: WATCH resizes the device, told or not; rescan" \
	resize "$FD"
check "read-only export: reads work, writes fail, through dm too" read_only_export
[ $ALL = 1 ] &&
	check "read_only=1 maps a writable export read-only; a write through dm is refused" read_only_option
# maps acl0, which port_bounce uses next
check "allowed_hosts: other hosts refused, listed host mapped" allowed_hosts
check "port disabled under I/O: the device reconnects, I/O completes" \
	port_bounce
check "past loss_timeout I/O fails with EIO; the device recovers" \
	loss_timeout
check "a request the target never answers fails after max_timeouts, no D state" \
	request_timeout
check "bad option strings fail and create no device" bad_maps
[ $ALL = 1 ] &&
	check "echo OPTIONS > $CTL maps, echo remove=ternN unmaps" echo_map
check "export removed under fio, or disabled: EIO, no D state; made again, it maps" \
	export_disable_while_mapped "$FD"
check "target restarted under fio verify on /dev/$VOL: bound again, 0 errors, data intact" \
	target_restart "$VOL"
check "unmap every device" unmap_all
check "target torn down, modules unload" teardown
rm -rf "$WORK"
ktap_info "$TRANSPORT: ${SECONDS} s"
ktap_finish
