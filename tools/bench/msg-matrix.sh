#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The message matrix of `make bench`, inside the guest: ternadm bench at
# depth 50 with 4K and 64K payloads, CRC off and on, 1, 2 and 4 sessions,
# over every transport that is built. Rounds repeat the whole matrix, so
# configurations alternate instead of running back to back. Prints one
# JSON object per run, prefixed with "BENCH ". BENCH_ROUNDS [3] and
# BENCH_RUNTIME [5] (seconds per run) size it.
set -euo pipefail

src=${TERN_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
ternadm=$src/tools/ternadm/ternadm
rounds=${BENCH_ROUNDS:-3}
seconds=${BENCH_SECONDS:-${BENCH_RUNTIME:-5}}

modprobe tern_tcp
modprobe tern_bench
uris=("tcp://127.0.0.1:7700")
if modprobe tern_rdma 2>/dev/null && [ -n "${TERN_RDMA_ADDR0:-}" ]; then
	uris+=("rdma://$TERN_RDMA_ADDR0:7701")
fi
for uri in "${uris[@]}"; do
	"$ternadm" bench serve "$uri"
done

for round in $(seq "$rounds"); do
	for size in 4k 64k; do
		for crc in off on; do
			for sessions in 1 2 4; do
				for uri in "${uris[@]}"; do
					args=(--depth 50 --size "$size" --sessions "$sessions"
					      --dir to --time "$seconds" --json)
					[ "$crc" = on ] && args+=(--crc)
					out=$("$ternadm" bench run "$uri" "${args[@]}")
					echo "BENCH {\"round\":$round,\"transport\":\"${uri%%:*}\",${out#\{}"
				done
			done
		done
	done
done
"$ternadm" bench stop
