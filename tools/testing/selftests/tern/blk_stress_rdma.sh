#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# blk_stress.sh over RDMA (soft-RoCE): TRANSPORT=rdma, port p0 listening
# on $TERN_RDMA_ADDR0 and p1 on $TERN_RDMA_ADDR1 (rxe0 and rxe1), with 20
# map/unmap cycles (CYCLES overrides): an RDMA cycle costs half as much
# again as a TCP one, and the TCP pass already makes 40.
# Needs tools/testing/vm/run --rdma; skipped (exit 4) without it.

TRANSPORT=rdma CYCLES=${CYCLES:-20} exec "$(dirname "$0")/blk_stress.sh" "$@"
