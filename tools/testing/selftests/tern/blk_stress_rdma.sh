#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# blk_stress.sh over RDMA (soft-RoCE): TRANSPORT=rdma, port p0 listening
# on $TERN_RDMA_ADDR0 and p1 on $TERN_RDMA_ADDR1 (rxe0 and rxe1), the
# same 100 map/unmap cycles (CYCLES overrides).
# Needs tools/testing/vm/run --rdma; skipped (exit 4) without it.

TRANSPORT=rdma exec "$(dirname "$0")/blk_stress.sh" "$@"
