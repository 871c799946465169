#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# fuzz.sh against tern_rdma's listener (soft-RoCE): tern_fuzz's
# malformed frames reach it through tern_rdma_relay, one queue pair per
# connection, then a good client over rdma:// is served, data verified.
# Needs tools/testing/vm/run --rdma; its checks are skipped without it.

TRANSPORT=rdma exec "$(dirname "$0")/fuzz.sh" "$@"
