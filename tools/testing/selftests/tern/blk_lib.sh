#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Helpers shared by the block layer selftests (blk.sh, blk_stress.sh,
# ternadm.sh, the block part of rdma.sh): the transport and its
# addresses, mapping and unmapping through /dev/tern-blk-ctl or ternadm,
# waiting for devices, block and target counters, fio verify (its output
# in the caller's $WORK); with stats_lib.sh's counters and kmalloc usage.
# Sourced after ktap.sh.
#
# Environment:
#   TRANSPORT     tcp (default) or rdma
#   TERN_RDMA_ADDR0/1  the soft-RoCE addresses (tools/testing/vm/run --rdma);
#                 over rdma ports listen on these, over tcp on 127.0.0.1
#   TERNADM       the ternadm binary (default: the one built in the tree)

CFG=/sys/kernel/config/tern
CTL=/dev/tern-blk-ctl
TRANSPORT=${TRANSPORT:-tcp}
case "$TRANSPORT" in
rdma)
	ADDR=${TERN_RDMA_ADDR0:-}
	ADDR1=${TERN_RDMA_ADDR1:-}
	;;
*)
	ADDR=127.0.0.1
	ADDR1=127.0.0.1
	;;
esac

_blk_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=stats_lib.sh
. "$_blk_lib_dir/stats_lib.sh"
TERNADM=${TERNADM:-$_blk_lib_dir/../../../ternadm/ternadm}
[ -x "$TERNADM" ] || TERNADM=$(command -v ternadm)

# check DESCRIPTION COMMAND...: ktap_check, then the seconds it took
check() {
	local t0=$SECONDS
	ktap_check "$@"
	ktap_info "$((SECONDS - t0)) s"
}

adm() {
	"$TERNADM" "$@"
}

# blk_transport_ready: the transport can run here; says why not
blk_transport_ready() {
	case "$TRANSPORT" in
	tcp) return 0 ;;
	rdma)
		[ -n "$ADDR" ] && [ -n "$ADDR1" ] && return 0
		echo "no soft-RoCE addresses (run with tools/testing/vm/run --rdma)"
		;;
	*) echo "unknown TRANSPORT=$TRANSPORT" ;;
	esac
	return 1
}

# blk_modprobe MODULE...: the transport module, the target, the client
blk_modprobe() {
	local m
	for m in "tern_$TRANSPORT" tern_target tern_blk "$@"; do
		modprobe "$m" || return 1
	done
}

# blk_unload MODULE...: unload the block modules, the transport module
# and the named ones; no module of ours is left
blk_unload() {
	local m
	for m in tern_blk tern_target "$@" "tern_$TRANSPORT"; do
		modprobe -r "$m" || { echo "cannot unload $m"; return 1; }
	done
	! grep -q '^tern' /proc/modules
}

# map OPTIONS: map through the control device, print the new device name;
# fail as the write fails
map() {
	local fd name
	exec {fd}<>"$CTL" || return 1
	if ! printf '%s' "$1" 2>/dev/null 1>&"$fd"; then
		exec {fd}>&-
		return 1
	fi
	read -r name <&"$fd"
	exec {fd}>&-
	[ -b "/dev/$name" ] || udevadm settle 2>/dev/null
	[ -n "$name" ] && echo "$name"
}

# unmap DEV: through the control device. udev probes a device just
# mapped, holding it open meanwhile: a remove then fails with EBUSY, so
# wait for udev, and ask again for a second before giving up.
unmap() {
	udevadm settle 2>/dev/null
	for _ in $(seq 10); do
		printf 'remove=%s' "$1" 2>/dev/null > "$CTL" && return 0
		sleep 0.1
	done
	printf 'remove=%s' "$1" > "$CTL"
}

# map_dev EXPORT SERVICE [OPTIONS...]: map ADDR:SERVICE/EXPORT with
# ternadm, print ternN
map_dev() {
	local exp=$1 svc=$2
	shift 2
	map_uri "$TRANSPORT://$ADDR:$svc/$exp" "$@"
}

# map_uri URI [OPTIONS...]: map with ternadm, print ternN
map_uri() {
	local out
	out=$(adm map "$@") || return 1
	case "$out" in /dev/tern[0-9]*) ;; *) return 1 ;; esac
	[ -b "$out" ] || udevadm settle 2>/dev/null
	[ -b "$out" ] && [ -d "/sys/block/${out#/dev/}" ] || return 1
	echo "${out#/dev/}"
}

# the mapped devices, one name a line
tern_devs() {
	local d
	for d in /sys/block/tern*; do
		[ -e "$d" ] && echo "${d##*/}"
	done
}

# wait_bdev NAME: /dev/NAME appears within 5 s
wait_bdev() {
	for _ in $(seq 50); do
		[ -b "/dev/$1" ] && return 0
		sleep 0.1
	done
	echo "/dev/$1 did not appear"
	return 1
}

# stat_field DEV N: field N of /sys/block/DEV/stat (5: write I/Os,
# 12: discard I/Os, 16: flush I/Os)
stat_field() {
	awk -v n="$2" '{ print $n }' "/sys/block/$1/stat"
}

# export_stat EXPORT COUNTER: one counter of the target's
# exports/EXPORT/stats (reads, writes, fua, flushes, discards,
# write_zeroes, errors)
export_stat() {
	awk -v k="$2" '$1 == k { print $2; f = 1 } END { exit !f }' \
		"$CFG/exports/$1/stats"
}

# fio_busy DEV OUT FIELD MIN FIO_ARGS...: a time-based fio on /dev/DEV
# in the background (its pid in FIO_PID, its output in OUT), back once
# stat field FIELD of DEV passed MIN, so that I/O is known to flow, or
# after 10 s; callers check the job is still running
fio_busy() {
	local dev=$1 out=$2 field=$3 min=$4
	shift 4
	fio --filename="/dev/$dev" --direct=1 --ioengine=libaio --time_based \
		"$@" >"$out" 2>&1 &
	FIO_PID=$!
	for _ in $(seq 50); do
		[ "$(stat_field "$dev" "$field")" -gt "$min" ] && return 0
		sleep 0.2
	done
}

# read_fails_in DEV SKIP BOUND WHY: a 4 KiB direct read of DEV at block SKIP
# fails, within BOUND seconds (WHY: when it should have, for the log)
read_fails_in() {
	local t0=$SECONDS
	if dd if="/dev/$1" of=/dev/null bs=4k count=1 skip="$2" \
		iflag=direct status=none; then
		echo "a read succeeded $4"
		return 1
	fi
	echo "the read failed after $((SECONDS - t0)) s"
	[ $((SECONDS - t0)) -le "$3" ] || { echo "too slow"; return 1; }
}

# D-state tasks in each of three samples half a second apart
stuck_in_d() {
	local i s all=
	for i in 1 2 3; do
		s=$(ps -eo stat=,pid=,comm= | awk '$1 ~ /^D/ { print $2, $3 }' | sort)
		if [ "$i" = 1 ]; then
			all=$s
		else
			all=$(comm -12 <(echo "$all") <(echo "$s"))
		fi
		sleep 0.5
	done
	echo "$all" | sed '/^$/d'
}

# fio_verify_live DEV SECONDS: random writes of 4-64 KiB for SECONDS,
# each read back and its crc32c checked while the writes go on
# (verify_backlog) and at the end; a mismatch or an I/O error ends fio
# with an error. For I/O across a fault: its output in $WORK/fio.out.
fio_verify_live() {
	local rc

	fio --name=live --filename="/dev/$1" --direct=1 --ioengine=libaio \
		--rw=randwrite --bsrange=4k-64k --iodepth=8 --size=16M \
		--time_based --runtime="$2" --verify=crc32c --verify_backlog=64 \
		--do_verify=1 --verify_fatal=1 --randrepeat=0 \
		--output-format=terse --terse-version=3 >"$WORK/fio.out" 2>&1
	rc=$?
	[ $rc = 0 ] || tail -n 20 "$WORK/fio.out"
	return $rc
}

# fio_verify_live_start DEV SECONDS: fio_verify_live in the background
# (its pid in FIO_PID), back once 100 writes went through, so that a
# fault made next lands under I/O; fails, with fio reaped, if fio ended
# before
fio_verify_live_start() {
	local w0
	w0=$(stat_field "$1" 5)
	fio_verify_live "$1" "$2" &
	FIO_PID=$!
	for _ in $(seq 50); do
		[ "$(stat_field "$1" 5)" -gt $((w0 + 100)) ] && break
		sleep 0.1
	done
	kill -0 "$FIO_PID" 2>/dev/null && return 0
	echo "fio ended before the fault"
	wait "$FIO_PID"
	return 1
}

# wait_live DEV: the device's session is live within 10 s (bound again
# after its port came back, reconnected after a lane failure)
wait_live() {
	for _ in $(seq 100); do
		[ "$(cat "/sys/block/$1/tern/state")" = live ] && return 0
		sleep 0.1
	done
	echo "$1 is $(cat "/sys/block/$1/tern/state"), not live"
	return 1
}

# fio_verify DEV BS IODEPTH SIZE [JOBS]: random writes of BS (a size or
# a range, 4k-1m), then every block read back and its crc32c checked; a
# mismatch ends fio with an error. JOBS jobs share SIZE, each on its own
# slice of the device, so no job overwrites another's blocks.
fio_verify() {
	local jobs=${5:-1} bs=--bs size rc
	case "$2" in *-*) bs=--bsrange ;; esac
	size=$(($(numfmt --from=iec "$4") / jobs))
	fio --name=verify --filename="/dev/$1" --direct=1 --ioengine=libaio \
		--rw=randwrite "$bs=$2" --iodepth="$3" --size="$size" \
		--numjobs="$jobs" --offset_increment="$size" \
		--verify=crc32c --do_verify=1 --verify_fatal=1 \
		--randrepeat=0 --group_reporting \
		--output-format=terse --terse-version=3 >"$WORK/fio.out" 2>&1
	rc=$?
	[ $rc = 0 ] || tail -n 20 "$WORK/fio.out"
	return $rc
}
