#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A smoke run on a kernel other than the guest's: make smoke-stock boots
# Debian's stock kernel (6.1 on Debian 12) with the modules built for it
# (tools/testing/kernel-tree). The modules load; one RAM disk is exported
# on a TCP port and an RDMA port; a device mapped over each passes fio
# crc32c verify at 4k and 64k; what one wrote reads back identical
# through the other; both unmap, a messenger benchmark runs verified over
# both transports, and everything unloads. make check runs it after its
# 6.12 guest: see Documentation/dev-guide.rst.
# Needs tools/testing/vm/run --rdma.

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/blk_lib.sh"

WORK=/var/tmp/tern-smoke
RADDR=${TERN_RDMA_ADDR0:-}
SVC=7460
BENCH_PORT=7461

setup() {
	echo "kernel $(uname -r)"
	blk_modprobe && modprobe tern_rdma && modprobe tern_bench &&
		modprobe brd rd_nr=1 rd_size=65536 max_part=0 || return 1
	grep -H . /sys/module/tern*/version
}

target() {
	adm target export add vol0 /dev/ram0 &&
		adm target port add t0 "tcp://127.0.0.1:$SVC" &&
		adm target port add r0 "rdma://$RADDR:$SVC" &&
		adm target link t0 vol0 && adm target link r0 vol0
}

# map_on TRANSPORT ADDR: map vol0 there, as another device if need be;
# checks run in subshells, so the name is kept in $WORK/TRANSPORT.dev
map_on() {
	local d
	d=$(map_uri "$1://$2:$SVC/vol0" --new --lanes 2) && wait_bdev "$d" ||
		return 1
	echo "$d" > "$WORK/$1.dev"
	echo "$1: /dev/$d, $(cat "/sys/block/$d/size") sectors"
}

dev_of() {	# TRANSPORT: the device mapped over it
	cat "$WORK/$1.dev"
}

# verify_on TRANSPORT: fio crc32c verify at 4k QD16 and 64k QD8
verify_on() {
	fio_verify "$(dev_of "$1")" 4k 16 4M && fio_verify "$(dev_of "$1")" 64k 8 8M
}

# the RDMA device's first 16 MiB read back through the TCP one
same_data() {
	local t
	for t in tcp rdma; do
		dd if="/dev/$(dev_of "$t")" of="$WORK/$t.data" bs=1M count=16 \
			iflag=direct status=none || return 1
	done
	cmp "$WORK/tcp.data" "$WORK/rdma.data"
}

unmap_both() {
	adm unmap "$(dev_of tcp)" && adm unmap "$(dev_of rdma)" &&
		[ -z "$(tern_devs)" ]
}

bench_both() {
	local t rc=0
	for t in "tcp://127.0.0.1" "rdma://$RADDR"; do
		adm bench serve "$t:$BENCH_PORT" &&
			adm bench run "$t:$BENCH_PORT" --time 3 --depth 8 --lanes 2 \
				--size 64k --dir both --verify --crc &&
			adm bench stop "$t:$BENCH_PORT" || rc=1
	done
	return $rc
}

teardown() {
	adm target port del t0 && adm target port del r0 &&
		adm target export del vol0 || return 1
	modprobe -r tern_bench tern_rdma && blk_unload brd
}

ktap_plan 10
if [ -z "$RADDR" ]; then
	for _ in $(seq 10); do
		ktap_skip "no soft-RoCE (tools/testing/vm/run --rdma)"
	done
	ktap_finish
fi
rm -rf "$WORK"
mkdir -p "$WORK"
check "modules load on $(uname -r), brd" setup
check "vol0 exported on tcp://127.0.0.1:$SVC and rdma://$RADDR:$SVC" target
check "vol0 mapped over tcp" map_on tcp 127.0.0.1
check "vol0 mapped over rdma" map_on rdma "$RADDR"
check "fio crc32c verify over tcp, 4k QD16 and 64k QD8" verify_on tcp
check "fio crc32c verify over rdma, 4k QD16 and 64k QD8" verify_on rdma
check "what one transport wrote reads back identical through the other" same_data
check "both devices unmap" unmap_both
check "verified 64k benchmarks with crc over tcp and rdma" bench_both
check "target torn down, modules unload" teardown
rm -rf "$WORK"
ktap_finish
