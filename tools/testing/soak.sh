#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make soak`, run inside the guest by tools/testing/vm/run --rdma: long
# fio crc32c verify on two devices at once, one over TCP and one over
# RDMA, while the messenger injects lane failures, and between rounds the
# things a long-lived mapping meets: a port that goes away and comes
# back, an export that grows, devices mapped and unmapped next to the
# busy ones. Every round must end with the data verified, no task in D
# state and both devices live; the kmalloc caches must not grow from
# the first round to the last (a leak per request or per reconnect
# shows there), and at the end everything unmaps and unloads. Not part
# of `make check`: it runs for SOAK_MINUTES.
#
# Environment:
#   SOAK_MINUTES  total run time (default 60)
#   SOAK_ROUND    seconds of fio per round (default 120)
#   SOAK_FAIL_EVERY  tern.inject_fail_every during the rounds (default
#                 2000: one transport operation in N fails; 0 = off)

src=${TERN_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
sel=$src/tools/testing/selftests/tern
. "$sel/ktap.sh"
. "$sel/blk_lib.sh"

minutes=${SOAK_MINUTES:-60}
round=${SOAK_ROUND:-120}
fail_every=${SOAK_FAIL_EVERY:-2000}
rounds=$(( (minutes * 60 + round - 1) / round ))
work=/var/tmp/tern-soak
file=$work/file0.img
inject=/sys/module/tern/parameters/inject_fail_every
rdma_addr=${TERN_RDMA_ADDR0:-}
declare -A dev

setup() {
	[ -n "$rdma_addr" ] || { echo "no soft-RoCE (vm/run --rdma)"; return 1; }
	mkdir -p "$work" && truncate -s 256M "$file" || return 1
	for m in tern_tcp tern_rdma tern_target tern_blk; do
		modprobe "$m" || return 1
	done
	modprobe brd rd_nr=1 rd_size=262144 max_part=0 || return 1
	adm target export add vol0 /dev/ram0 &&
		adm target export add file0 "$file" &&
		adm target port add ptcp tcp://127.0.0.1 &&
		adm target port add prdma "rdma://$rdma_addr" &&
		adm target link ptcp file0 && adm target link prdma vol0 &&
		adm target link ptcp vol0 || return 1
	map_uri tcp://127.0.0.1/file0 --lanes 2 --crc > /dev/null &&
		map_uri "rdma://$rdma_addr/vol0" --lanes 2 > /dev/null || return 1
	find_devs && echo "tcp: /dev/${dev[tcp]} (file0, crc), rdma: /dev/${dev[rdma]} (vol0)"
}

# dev[tcp], dev[rdma]: the soak's devices, from sysfs (checks run in
# subshells, so setup cannot hand them over in variables)
find_devs() {
	local d
	for d in $(tern_devs); do
		case "$(cat "/sys/block/$d/tern/transport"):$(cat "/sys/block/$d/tern/export")" in
		tcp:file0) dev[tcp]=$d ;;
		rdma:vol0) dev[rdma]=$d ;;
		esac
	done
	[ -n "${dev[tcp]}" ] && [ -n "${dev[rdma]}" ]
}

# verify_until DEV DEADLINE: write-then-verify passes until DEADLINE
verify_until() {
	local n=0
	while [ "$SECONDS" -lt "$2" ]; do
		fio --name=soak --filename="/dev/$1" --direct=1 --ioengine=libaio \
			--rw=randwrite --bsrange=4k-256k --iodepth=16 --numjobs=2 \
			--size=64M --offset_increment=64M --verify=crc32c \
			--do_verify=1 --verify_fatal=1 --randrepeat=0 \
			--group_reporting --output-format=terse --terse-version=3 \
			> "$work/fio-$1.out" 2>&1 ||
			{ tail -n 20 "$work/fio-$1.out"; return 1; }
		n=$((n + 1))
	done
	echo "$1: $n write-and-verify passes"
}

# the disturbance of round N, while both devices are busy
disturb() {
	local d i
	case $(($1 % 3)) in
	0)	# the TCP port goes away for 3 s: its device waits, reconnects
		echo "port ptcp disabled for 3 s"
		echo 0 > "$CFG/ports/ptcp/enable" && sleep 3 &&
			echo 1 > "$CFG/ports/ptcp/enable"
		;;
	1)	# the file export grows; the TCP device follows by itself
		truncate -s "$((256 + 8 * $1))M" "$file" &&
			adm target export resize file0 || return 1
		for i in $(seq 50); do
			[ "$(cat "/sys/block/${dev[tcp]}/size")" = \
			  $(((256 + 8 * $1) * 2048)) ] && { echo "file0 grew"; return 0; }
			sleep 0.1
		done
		echo "/dev/${dev[tcp]} did not grow"
		return 1
		;;
	2)	# devices come and go next to the busy ones
		for i in $(seq 10); do
			d=$(map_uri tcp://127.0.0.1/vol0 --read-only) &&
				adm unmap "/dev/$d" > /dev/null || return 1
		done
		echo "10 map/unmap cycles"
		;;
	esac
}

one_round() {
	local deadline=$((SECONDS + round)) pids=() k rc=0 stuck
	echo "$fail_every" > "$inject" || return 1
	for k in tcp rdma; do
		verify_until "${dev[$k]}" "$deadline" & pids+=($!)
	done
	sleep $((round / 2))
	disturb "$1" || rc=1
	for k in "${pids[@]}"; do
		wait "$k" || rc=1
	done
	echo 0 > "$inject"
	stuck=$(stuck_in_d)
	[ -z "$stuck" ] || { echo "in D state: $stuck"; rc=1; }
	for k in tcp rdma; do
		for _ in $(seq 100); do
			[ "$(cat "/sys/block/${dev[$k]}/tern/state")" = live ] && break
			sleep 0.1
		done
		[ "$(cat "/sys/block/${dev[$k]}/tern/state")" = live ] ||
			{ echo "$k device not live"; rc=1; }
	done
	echo "lane failures injected so far: $(dmesg | grep -c 'injected failure')"
	kmalloc_settled >> "$work/kmalloc"
	echo "kmalloc bytes: $(tail -n 1 "$work/kmalloc")"
	return $rc
}

# the kmalloc caches after the last round against after the first
no_growth() {
	local first last
	first=$(head -n 1 "$work/kmalloc")
	last=$(tail -n 1 "$work/kmalloc")
	echo "kmalloc after round 1: $first bytes, after round $rounds: $last"
	[ $((last - first)) -lt $((256 * 1024)) ]
}

teardown() {
	adm unmap "/dev/${dev[tcp]}" && adm unmap "/dev/${dev[rdma]}" &&
		adm target port del ptcp && adm target port del prdma &&
		adm target export del vol0 && adm target export del file0 || return 1
	for m in tern_blk tern_target tern_rdma tern_tcp brd; do
		modprobe -r "$m" || { echo "cannot unload $m"; return 1; }
	done
	! grep -q '^tern' /proc/modules
}

ktap_plan $((rounds + 3))
rm -f "$work/kmalloc"
ktap_check "two devices, tcp (file0, crc) and rdma (vol0)" setup
find_devs
for r in $(seq "$rounds"); do
	ktap_check "round $r/$rounds: fio verify on both for ${round} s, lane failures 1 in $fail_every, disturbance $((r % 3))" \
		one_round "$r"
done
if [ "$rounds" -ge 2 ]; then
	ktap_check "kmalloc caches grow by less than 256 KiB from round 1 to $rounds" \
		no_growth
else
	ktap_skip "kmalloc growth needs two rounds"
fi
ktap_check "unmapped, target torn down, modules unloaded" teardown
ktap_finish
