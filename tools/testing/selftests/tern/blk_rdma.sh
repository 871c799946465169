#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# blk.sh over RDMA (soft-RoCE): TRANSPORT=rdma, port p0 listening on
# $TERN_RDMA_ADDR0. The checks that do not depend on the transport
# (blk.sh lists them) are not planned there; bad map strings are, with
# transport=rdma.
# Needs tools/testing/vm/run --rdma; skipped (exit 4) without it.

TRANSPORT=rdma exec "$(dirname "$0")/blk.sh" "$@"
