#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# hostile_target.sh over RDMA (soft-RoCE): tern_blk and tern_bench map
# rdma:// URIs, tern_rdma_relay carries each connection to tern_fuzz's
# hostile target over TCP. The cases where tern_rdma's requester side
# does work of its own (replies to the wrong tid or lane, reply data too
# short or long, bad data CRCs, half handshakes, closed connections);
# the handshake and geometry checks (1-4, 8, 12) are the core's and
# tern_blk's alike on every transport, and case 2 offers remote data,
# which an RDMA client takes. Case 7 (trickled bytes, one RDMA message
# each) passes too but costs half a minute: HOSTILE_CASES=7 runs it.
# Needs tools/testing/vm/run --rdma; its checks are skipped without it.

TRANSPORT=rdma HOSTILE_CASES=${HOSTILE_CASES:-5 6 9 10 11} \
	exec "$(dirname "$0")/hostile_target.sh" "$@"
