#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Minimal KTAP/TAP 13 helpers for tern's shell selftests. A test sources
# this, calls ktap_plan N, reports each check, then ktap_finish, which
# exits non-zero when any check failed.

KTAP_PASS=0
KTAP_FAIL=0
KTAP_SKIP=0
KTAP_NUM=0
KTAP_PLANNED=0
KTAP_LAST=$SECONDS

ktap_plan() {
	KTAP_PLANNED=$1
	echo "TAP version 13"
	echo "1..$1"
}

ktap_info() {
	echo "# $*"
}

# Where the suite's time goes: checks that took a while say so.
ktap_time() {
	local took=$((SECONDS - KTAP_LAST))

	KTAP_LAST=$SECONDS
	[ "$took" -lt 5 ] || echo "# took ${took} s"
}

ktap_pass() {
	ktap_time
	KTAP_NUM=$((KTAP_NUM + 1))
	KTAP_PASS=$((KTAP_PASS + 1))
	echo "ok $KTAP_NUM $*"
}

ktap_fail() {
	ktap_time
	KTAP_NUM=$((KTAP_NUM + 1))
	KTAP_FAIL=$((KTAP_FAIL + 1))
	echo "not ok $KTAP_NUM $*"
}

ktap_skip() {
	ktap_time
	KTAP_NUM=$((KTAP_NUM + 1))
	KTAP_SKIP=$((KTAP_SKIP + 1))
	echo "ok $KTAP_NUM # SKIP $*"
}

# ktap_comment: stdin as TAP comment lines; in bash, as under emulation
# every process started costs tens of milliseconds
ktap_comment() {
	local line
	while IFS= read -r line || [ -n "$line" ]; do
		echo "# $line"
	done
}

# ktap_check DESCRIPTION COMMAND...: one result from a command's status;
# the command's output is kept as diagnostics.
ktap_check() {
	local desc=$1 out rc
	shift
	out=$("$@" 2>&1)
	rc=$?
	[ -n "$out" ] && ktap_comment <<< "$out"
	if [ "$rc" = 0 ]; then
		ktap_pass "$desc"
	else
		ktap_fail "$desc (exit $rc)"
	fi
}

ktap_finish() {
	if [ "$KTAP_NUM" != "$KTAP_PLANNED" ]; then
		ktap_info "planned $KTAP_PLANNED checks but ran $KTAP_NUM"
		KTAP_FAIL=$((KTAP_FAIL + 1))
	fi
	echo "# Totals: pass:$KTAP_PASS fail:$KTAP_FAIL xfail:0 xpass:0 skip:$KTAP_SKIP error:0"
	[ "$KTAP_FAIL" = 0 ]
	exit
}
