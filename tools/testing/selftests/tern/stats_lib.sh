#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tern.ko's counters for the shell selftests (sourced).

# total_of NAME: a lane counter summed over every lane since tern loaded
total_of() {
	awk -v k="$1" '$1 == k { print $2 }' /sys/kernel/debug/tern/stats
}
