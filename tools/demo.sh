#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`, run inside the guest by tools/testing/vm/run --rdma: show
# what tern can do today. Grows with the block device.
set -euo pipefail

echo "== tern demo on $(uname -r)"
echo "== soft-RoCE devices"
rdma link show
echo "== tern modules"
for ko in /lib/modules/"$(uname -r)"/extra/*.ko; do
	m=$(basename "$ko" .ko)
	case "$m" in tern_test_*) continue ;; esac
	modprobe "$m"
	printf '%-16s loaded: %s\n' "$m" "$(modinfo -F description "$m")"
done
lsmod | grep -E '^tern' || true
for ko in /lib/modules/"$(uname -r)"/extra/*.ko; do
	m=$(basename "$ko" .ko)
	case "$m" in tern_test_*) continue ;; esac
	modprobe -r "$m" 2>/dev/null || true
done
echo "== done"
