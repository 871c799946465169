#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A hostile block client at scale against tern_target over TCP:
# tern_flood floods a port with OPENs of a valid and of an unknown
# export, WATCHes, and 1 MiB WRITEs naming handles nobody was given,
# from many sessions, while a legitimate client (ternadm map + fio
# crc32c verify) keeps doing I/O. The target must stay within its
# budgets (debugfs tern_target/limits, /proc/meminfo, /proc/slabinfo),
# count what it refused, keep the legitimate I/O free of errors, give
# its memory back afterwards and unload.
#
# FLOOD_SCALE (1) multiplies the flood for a long run (make soak sets
# SOAK_FLOOD_SCALE, 4).

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/blk_lib.sh"

dir=$(cd "$(dirname "$0")" && pwd)
SVC=7450
WORK=/var/tmp/tern-flood
SCALE=${FLOOD_SCALE:-1}
LIM=/sys/kernel/debug/tern_target/limits
FIO_PID=
DEV=

lim() {	# KEY: a counter of debugfs tern_target/limits, 0 if absent
	awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' \
		"$LIM" 2>/dev/null || echo 0
}

slab_kib() {
	awk '$1 == "Slab:" { print $2 }' /proc/meminfo
}

avail_kib() {
	awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo
}

setup() {
	blk_modprobe || return 1
	modprobe brd rd_nr=1 rd_size=65536 max_part=0 || return 1
	mkdir -p "$WORK" &&
		mkdir "$CFG/exports/vol0" &&
		echo /dev/ram0 > "$CFG/exports/vol0/device_path" &&
		echo 1 > "$CFG/exports/vol0/enable" &&
		mkdir "$CFG/ports/p0" &&
		echo tcp > "$CFG/ports/p0/transport" &&
		echo 127.0.0.1 > "$CFG/ports/p0/address" &&
		echo "$SVC" > "$CFG/ports/p0/service" &&
		ln -s "$CFG/exports/vol0" "$CFG/ports/p0/exports/vol0" &&
		echo 1 > "$CFG/ports/p0/enable"
}

# the legitimate client: fio crc32c verify passes until told to stop;
# run outside check (its subshell), as it leaves fio running
legit_start() {
	DEV=$(map_uri "tcp://127.0.0.1:$SVC/vol0") || return 1
	(
		exec >/dev/null 2>&1
		n=0
		while [ ! -e "$WORK/stop" ]; do
			fio --name=legit --filename="/dev/$DEV" --direct=1 \
				--ioengine=libaio --rw=randwrite --bs=4k-128k \
				--iodepth=8 --size=16M --verify=crc32c \
				--do_verify=1 --verify_fatal=1 --randrepeat=0 \
				>"$WORK/fio.$n.out" 2>&1 || { echo fail > "$WORK/fio.failed"; break; }
			n=$((n + 1))
		done
		echo "$n" > "$WORK/fio.passes"
	) &
	FIO_PID=$!
}

legit_stop() {
	echo "fio passes $(cat "$WORK/fio.passes" 2>/dev/null)"
	[ ! -e "$WORK/fio.failed" ] || { tail -n 15 "$WORK"/fio.*.out; return 1; }
	[ "$(cat "$WORK/fio.passes")" -gt 0 ]
}

# flood MODE PROCS CONNS REQS [HOLD]: run tern_flood, sampling memory
flood() {
	local out pid peak_slab=0 min_avail s a
	timeout 60 "$dir/tern_flood" -a 127.0.0.1 -p "$SVC" -e vol0 -m "$1" \
		-P "$2" -C "$(($3 * SCALE))" -n "$4" -H "${5:-0}" \
		>"$WORK/flood.out" 2>&1 &
	pid=$!
	min_avail=$(avail_kib)
	while kill -0 "$pid" 2>/dev/null; do
		s=$(slab_kib)
		a=$(avail_kib)
		[ "$s" -gt "$peak_slab" ] && peak_slab=$s
		[ "$a" -lt "$min_avail" ] && min_avail=$a
		[ "$(lim binds)" -gt "$peak_binds" ] && peak_binds=$(lim binds)
		[ "$(lim watches)" -gt "$peak_watches" ] && peak_watches=$(lim watches)
		[ "$(lim data_bytes)" -gt "$peak_data" ] && peak_data=$(lim data_bytes)
		sleep 0.2
	done
	wait "$pid"
	echo "$1: $(tr '\n' ' ' < "$WORK/flood.out")"
	echo "$1: slab peak $((peak_slab - SLAB0)) KiB over baseline, MemAvailable dipped $((AVAIL0 - min_avail)) KiB"
	[ $((peak_slab - SLAB0)) -gt "$SLAB_MAX" ] && { echo "slab over $SLAB_MAX KiB"; return 1; }
	[ $((AVAIL0 - min_avail)) -gt "$AVAIL_MAX" ] && { echo "memory use over $AVAIL_MAX KiB"; return 1; }
	grep -q "^sessions [1-9]" "$WORK/flood.out"
}

ktap_plan 8
peak_binds=0 peak_watches=0 peak_data=0
out=$(setup 2>&1)
ktap_check "setup: a port and an export" [ $? = 0 ]
[ -n "$out" ] && echo "$out" | ktap_comment
SLAB0=$(slab_kib)
AVAIL0=$(avail_kib)
# bindings and watches are small; data is bounded by max_data_mib
SLAB_MAX=$((64 * 1024))
AVAIL_MAX=$((256 * 1024))
legit_start
ktap_check "legitimate client maps and starts fio" [ -n "$DEV" ]

flood_open() {
	local r0 e0
	r0=$(lim refused_opens)
	e0=$(lim evicted_binds)
	flood openbad 4 4 300 || return 1
	flood open 4 8 300 || return 1
	echo "binds peak $peak_binds (max $(lim binds_max)), evicted $(($(lim evicted_binds) - e0)), refused $(($(lim refused_opens) - r0))"
	[ "$(lim binds)" -le $((32 * SCALE * 8 + 64)) ] || return 1
	[ $(($(lim evicted_binds) - e0 + $(lim refused_opens) - r0)) -gt 0 ]
}
check "OPEN floods: bindings bounded per session and in all" flood_open

flood_watch() {
	local w0
	w0=$(lim refused_watches)
	flood watch 4 4 64 2 || return 1
	echo "watches peak $peak_watches, refused $(($(lim refused_watches) - w0))"
	grep -q "^status_16 " "$WORK/flood.out" || { echo "no -EBUSY"; return 1; }
	[ $(($(lim refused_watches) - w0)) -gt 0 ] &&
		[ "$peak_watches" -le $((16 * SCALE * 4 + 8)) ]
}
check "WATCH flood: watches bounded per session, refused with -EBUSY" flood_watch

flood_write() {
	local d0
	d0=$(lim discarded)
	flood write 4 4 64 || return 1
	echo "discarded $(($(lim discarded) - d0)), data held peak $peak_data"
	grep -q "^status_116 " "$WORK/flood.out" || { echo "no -ESTALE"; return 1; }
	[ $(($(lim discarded) - d0)) -gt 0 ]
}
check "1 MiB WRITEs with bogus handles: -ESTALE, data discarded" flood_write

touch "$WORK/stop"
[ -n "$FIO_PID" ] && wait "$FIO_PID"
check "the legitimate client's fio verified with 0 errors" legit_stop

settle() {
	local s
	[ -z "$DEV" ] || unmap "$DEV" || return 1
	echo 0 > "$CFG/ports/p0/enable" || return 1
	sleep 2
	s=$(slab_kib)
	echo "slab $((s - SLAB0)) KiB over baseline; $(tr '\n' ' ' < "$LIM" 2>/dev/null)"
	[ $((s - SLAB0)) -lt 8192 ] && [ "$(lim data_bytes)" = 0 ] &&
		[ "$(lim watches)" = 0 ]
}
check "after the flood: memory back to baseline" settle

teardown() {
	rm -f "$CFG/ports/p0/exports/vol0" &&
		rmdir "$CFG/ports/p0" &&
		echo 0 > "$CFG/exports/vol0/enable" &&
		rmdir "$CFG/exports/vol0" &&
		blk_unload brd
}
check "rmmod tern_target works" teardown
rm -rf "$WORK"
ktap_finish
