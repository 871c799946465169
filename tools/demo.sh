#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`, run inside the guest by tools/testing/vm/run --rdma: a RAM
# disk exported by tern_target, mapped back as /dev/ternN over every
# transport that is built, an ext4 filesystem made, files written and
# verified after a remount, a short fio run, and a table of the results.
set -euo pipefail

src=${TERN_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
ternadm=$src/tools/ternadm/ternadm
work=/var/tmp/tern-demo
mnt=$work/mnt
declare -A results

say() {
	printf '\n== %s\n' "$*"
}

transports() {
	echo tcp
	if modinfo tern_rdma >/dev/null 2>&1 && [ -n "${TERN_RDMA_ADDR0:-}" ]; then
		echo rdma
	fi
}

address_of() {
	case "$1" in
	tcp) echo 127.0.0.1 ;;
	rdma) echo "$TERN_RDMA_ADDR0" ;;
	esac
}

# fio's IOPS for one job description, from its JSON output.
fio_iops() {
	fio --output-format=json "$@" | python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]
print(int(j["read"]["iops"] + j["write"]["iops"]))'
}

demo_one() {
	local t=$1 addr dev sum1 sum2 iops_r iops_w
	addr=$(address_of "$t")
	say "$t: export ram$2 on $t://$addr:7447/demo-$t"
	"$ternadm" target export add "demo-$t" "/dev/ram$2"
	"$ternadm" target port add "port-$t" "$t://$addr:7447"
	"$ternadm" target link "port-$t" "demo-$t"
	dev=$("$ternadm" map "$t://$addr:7447/demo-$t" --lanes 2)
	echo "mapped $dev"
	"$ternadm" list

	say "$t: mkfs.ext4, write files, remount, verify"
	mkfs.ext4 -q -F "$dev"
	mkdir -p "$mnt"
	mount "$dev" "$mnt"
	for i in 1 2 3 4; do
		head -c $((i * 3))M /dev/urandom > "$mnt/file$i"
	done
	sum1=$(cd "$mnt" && sha256sum file* | sha256sum)
	umount "$mnt"
	mount "$dev" "$mnt"
	sum2=$(cd "$mnt" && sha256sum file* | sha256sum)
	umount "$mnt"
	[ "$sum1" = "$sum2" ] && results[$t,files]=verified || results[$t,files]=MISMATCH
	echo "files: ${results[$t,files]}"

	say "$t: fio 4K random read and write, QD32, 5 s each"
	iops_r=$(fio_iops --name=rr --filename="$dev" --direct=1 --ioengine=libaio \
		--rw=randread --bs=4k --iodepth=32 --runtime=5 --time_based)
	iops_w=$(fio_iops --name=rw --filename="$dev" --direct=1 --ioengine=libaio \
		--rw=randwrite --bs=4k --iodepth=32 --runtime=5 --time_based)
	results[$t,randread]=$iops_r
	results[$t,randwrite]=$iops_w

	"$ternadm" unmap "$dev"
	"$ternadm" target unlink "port-$t" "demo-$t"
	"$ternadm" target port del "port-$t"
	"$ternadm" target export del "demo-$t"
}

say "tern demo on $(uname -r)"
modprobe brd rd_nr=2 rd_size=131072 max_part=0
modprobe tern_tcp
modprobe tern_target
modprobe tern_blk
modprobe tern_rdma 2>/dev/null || true
mkdir -p "$work"

n=0
mapfile -t ts < <(transports)
for t in "${ts[@]}"; do
	demo_one "$t" "$n"
	n=$((n + 1))
done

say "results (QEMU guest, software emulation: compare rows, not absolutes)"
printf '%-10s %-10s %14s %14s\n' transport files "4K rr IOPS" "4K rw IOPS"
for t in "${ts[@]}"; do
	printf '%-10s %-10s %14s %14s\n' "$t" "${results[$t,files]}" \
		"${results[$t,randread]}" "${results[$t,randwrite]}"
done
for t in "${ts[@]}"; do
	[ "${results[$t,files]}" = verified ] || exit 1
done
