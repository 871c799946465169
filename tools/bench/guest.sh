#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# What `make bench` runs inside the guest: the message matrix, then the
# block matrix, or only one of them (BENCH_ONLY=msg or blk). A matrix that
# fails does not stop the other; the exit status says whether any failed.
set -uo pipefail

src=${TERN_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
only=${BENCH_ONLY:-all}
status=0

case "$only" in
all|msg|blk) ;;
*) echo "bench: BENCH_ONLY must be msg, blk or empty, not $only" >&2; exit 2 ;;
esac
echo "bench: guest $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ { print $2 }' /proc/meminfo) kB"
if [ "$only" != blk ]; then
	"$src/tools/bench/msg-matrix.sh" || { echo "bench: message matrix failed"; status=1; }
fi
if [ "$only" != msg ]; then
	"$src/tools/bench/blk-matrix.sh" || { echo "bench: block matrix failed"; status=1; }
fi
exit "$status"
