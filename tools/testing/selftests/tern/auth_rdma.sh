#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# auth.sh over RDMA (soft-RoCE): TRANSPORT=rdma, ports listening on
# $TERN_RDMA_ADDR0. The keyring, hostile-target and handshake-probe
# checks, which do not depend on the transport, run over TCP only.
# Needs tools/testing/vm/run --rdma; skipped (exit 4) without it.

TRANSPORT=rdma exec "$(dirname "$0")/auth.sh" "$@"
