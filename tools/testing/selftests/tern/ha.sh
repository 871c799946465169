#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# High availability with the engines users already run (issue 21, "more
# than one machine"), over TCP. Two ports of this target, each with its
# own backend, stand for two targets; stopping a port is losing one.
#  - md RAID1 across two tern devices from the two targets: one target
#    stopped under fio verify, the array goes on degraded and fio finds
#    no mismatch; the target back, mdadm --re-add catches the leg up
#    through the write-intent bitmap, md's check counts 0 mismatches, and
#    the array reads the same from the re-added leg alone;
#  - dm-multipath (a table loaded with dmsetup) over two tern devices of
#    one export, one through each port: a port stopped under fio verify,
#    the path fails, the I/O moves to the other, fio finds no mismatch;
#    the port back, the path reinstated serves reads again.
# Both rely on tern failing I/O once its loss timeout passes (2 s here),
# which is what tells md and dm-multipath that a leg or path is gone.

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/blk_lib.sh"

WORK=/var/tmp/tern-ha
SVC_A=7494		# port pa: "target A", vol0 (ram0) and volmp (ram2)
SVC_B=7495		# port pb: "target B", vol1 (ram1) and volmp
MD=/dev/md/tern-ha
MP=tern-ha-mp
LOSS=2
declare -A DEV		# export@port -> ternN

setup() {
	mkdir -p "$WORK" && rm -f "$WORK"/* || return 1
	modprobe brd rd_nr=3 rd_size=32768 max_part=0 &&
		blk_modprobe raid1 dm_multipath || return 1
	adm target export add vol0 /dev/ram0 &&
		adm target export add vol1 /dev/ram1 &&
		adm target export add volmp /dev/ram2 &&
		adm target port add pa "tcp://127.0.0.1:$SVC_A" &&
		adm target port add pb "tcp://127.0.0.1:$SVC_B" &&
		adm target link pa vol0 && adm target link pb vol1 &&
		adm target link pa volmp && adm target link pb volmp || return 1
	DEV[vol0@a]=$(map_dev vol0 "$SVC_A" --lanes 2 --loss-timeout "$LOSS") &&
		DEV[vol1@b]=$(map_dev vol1 "$SVC_B" --lanes 2 \
			--loss-timeout "$LOSS") &&
		DEV[volmp@a]=$(map_dev volmp "$SVC_A" --lanes 2 \
			--loss-timeout "$LOSS") &&
		DEV[volmp@b]=$(map_dev volmp "$SVC_B" --lanes 2 \
			--loss-timeout "$LOSS") || return 1
	# global when sourced back in a function (checks run in subshells)
	declare -p DEV | sed 's/^declare -A/declare -gA/' > "$WORK/devs"
	echo "vol0@A ${DEV[vol0@a]}, vol1@B ${DEV[vol1@b]}, volmp@A ${DEV[volmp@a]}, volmp@B ${DEV[volmp@b]}"
}

load_devs() {
	# shellcheck disable=SC1091
	. "$WORK/devs"
}

# port_enable NAME 0|1: a target lost or back
port_enable() {
	echo "$2" > "$CFG/ports/$1/enable"
}

# under_loss PORT DEV: fio_verify_live on DEV, PORT stopped once the writes flow
# (it stays down); fio must still be running then
under_loss() {
	local port=$1 dev=$2 rc

	fio_verify_live_start "$dev" 6 || return 1
	port_enable "$port" 0
	wait "$FIO_PID"
	rc=$?
	echo "fio across the loss of port $port: exit $rc"
	return $rc
}

md_degraded() {
	local d rc=0

	load_devs
	mdadm --create "$MD" --quiet --run --level=1 --raid-devices=2 \
		--metadata=1.2 --bitmap=internal --assume-clean \
		"/dev/${DEV[vol0@a]}" "/dev/${DEV[vol1@b]}" 2>&1 || return 1
	d=$(basename "$(readlink -f "$MD")")
	echo "$d over ${DEV[vol0@a]} and ${DEV[vol1@b]}"
	under_loss pb "$d" || rc=1
	[ "$(cat "/sys/block/$d/md/degraded")" = 1 ] ||
		{ echo "$d is not degraded"; rc=1; }
	mdadm --detail "$MD" | grep -E "State :|faulty|active sync"
	return $rc
}

md_readd() {
	local d sum_both sum_b rc=0

	load_devs
	d=$(basename "$(readlink -f "$MD")")
	port_enable pb 1 && wait_live "${DEV[vol1@b]}" || return 1
	mdadm "$MD" --quiet --remove failed 2>&1 &&
		mdadm "$MD" --quiet --re-add "/dev/${DEV[vol1@b]}" 2>&1 ||
		return 1
	mdadm --wait "$MD"
	[ "$(cat "/sys/block/$d/md/degraded")" = 0 ] ||
		{ echo "$d still degraded"; return 1; }
	echo check > "/sys/block/$d/md/sync_action" && mdadm --wait "$MD"
	echo "after the re-add: mismatch_cnt $(cat "/sys/block/$d/md/mismatch_cnt")"
	[ "$(cat "/sys/block/$d/md/mismatch_cnt")" = 0 ] || rc=1
	# the re-added leg alone gives what both gave
	sum_both=$(dd if="/dev/$d" bs=1M iflag=direct status=none | md5sum)
	mdadm "$MD" --quiet --fail "/dev/${DEV[vol0@a]}" 2>&1 || return 1
	sum_b=$(dd if="/dev/$d" bs=1M iflag=direct status=none | md5sum)
	echo "md5 with both legs ${sum_both%% *}, with the re-added one ${sum_b%% *}"
	[ "$sum_both" = "$sum_b" ] || rc=1
	return $rc
}

# mp_dev: the multipath device's name, dm-N (/dev/mapper/ has its node,
# made by dmsetup, not a link)
mp_dev() {
	echo "dm-$(dmsetup info -c --noheadings -o minor "$MP" | tr -d ' ')"
}

# one priority group, round-robin over the two paths, a request each
mp_create() {
	local sectors

	load_devs
	sectors=$(blockdev --getsz "/dev/${DEV[volmp@a]}") || return 1
	dmsetup create "$MP" --table "0 $sectors multipath 0 0 1 1 round-robin 0 2 1 /dev/${DEV[volmp@a]} 1 /dev/${DEV[volmp@b]} 1" ||
		return 1
	dmsetup status "$MP"
}

# mp_paths: the state of each path in dmsetup status ("MAJ:MIN A|F
# fail_count"), "A A ", "A F "...
mp_paths() {
	dmsetup status "$MP" |
		awk '{ for (i = 1; i < NF; i++) if ($i ~ /^[0-9]+:[0-9]+$/) printf "%s ", $(i + 1) }'
}

mp_failover() {
	local a0 rc=0

	load_devs
	mp_create || return 1
	a0=$(stat_field "${DEV[volmp@a]}" 5)
	under_loss pb "$(mp_dev)" || rc=1
	echo "paths: $(mp_paths); writes through A: +$(($(stat_field "${DEV[volmp@a]}" 5) - a0))"
	[ "$(mp_paths)" = "A F " ] || rc=1
	return $rc
}

mp_reinstate() {
	local dm b0 b1

	load_devs
	port_enable pb 1 && wait_live "${DEV[volmp@b]}" || return 1
	dmsetup message "$MP" 0 "reinstate_path /dev/${DEV[volmp@b]}" ||
		return 1
	dm=$(mp_dev)
	b0=$(stat_field "${DEV[volmp@b]}" 1)
	dd if="/dev/$dm" of=/dev/null bs=64k count=256 iflag=direct \
		status=none || return 1
	b1=$(stat_field "${DEV[volmp@b]}" 1)
	echo "paths: $(mp_paths); reads through B: +$((b1 - b0))"
	[ "$(mp_paths)" = "A A " ] && [ "$b1" -gt "$b0" ]
}

teardown() {
	local d rc=0

	[ -f "$WORK/devs" ] && load_devs
	udevadm settle 2>/dev/null
	if dmsetup info "$MP" > /dev/null 2>&1; then
		dmsetup remove --retry "$MP" || rc=1
	fi
	[ -e "$MD" ] && { mdadm --stop "$MD" --quiet || rc=1; }
	for d in "${DEV[@]}"; do
		mdadm --zero-superblock --quiet "/dev/$d" 2>/dev/null
		adm unmap "$d" || rc=1
	done
	for d in pa pb; do
		[ -d "$CFG/ports/$d" ] || continue
		echo 0 > "$CFG/ports/$d/enable"
		rm -f "$CFG/ports/$d"/exports/*
		rmdir "$CFG/ports/$d" || rc=1
	done
	for d in "$CFG"/exports/*; do
		[ -d "$d" ] && { rmdir "$d" || rc=1; }
	done
	# the table loaded the path selector, which holds dm_multipath
	modprobe -r dm_round_robin dm_multipath raid1 || rc=1
	blk_unload brd || rc=1
	return $rc
}

if [ "$TRANSPORT" != tcp ]; then
	ktap_plan 1
	ktap_skip "TCP only: the engines above do not care which transport"
	ktap_finish
fi
for t in mdadm dmsetup fio; do
	if ! command -v "$t" > /dev/null; then
		ktap_plan 1
		ktap_skip "$t is not installed (make deps)"
		ktap_finish
	fi
done
ktap_plan 6
check "setup: two ports (targets A, B), vol0 on A, vol1 on B, volmp on both, mapped" \
	setup
check "md RAID1 over A and B: B lost under fio verify, degraded, 0 mismatches" \
	md_degraded
check "B back: --re-add resyncs, check finds 0 mismatches, B alone reads the same" \
	md_readd
check "dm-multipath over A and B: B lost under fio verify, path failed, 0 mismatches" \
	mp_failover
check "B back: the path reinstated serves reads" mp_reinstate
check "teardown, modules unload" teardown
ktap_finish
