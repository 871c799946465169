#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The messenger API driven from inside the kernel by tern_test_msgr:
# loading it runs its checks (sizes 0..1 MiB at offsets 0/1/513/4095 both
# ways over IPv4 and IPv6, 1..4 lanes, CRC on and off, replies from hard
# interrupt context, a burst above the queue depth, the exact in-flight
# limits (depth, bytes, reserved requests), session events that pile up
# ending with the state's, concurrent senders,
# bad URIs, fast failure on a closed port, reply statuses that are no
# errno (seen as -EREMOTEIO), loss timeout and reconnection
# to a restarted peer, keepalive timeout and resend), and fails to load
# if one fails. Then the same checks again under transport fault
# injection and under data CRC failures, the debugfs statistics, the
# refusal to unload a transport in use, the core's byte budget for data
# pages it allocates for a responder (writes the responder holds
# unanswered: at most the budget is held, the rest is refused with
# -ENOMEM and counted, and all of it is given back), and no objects left
# behind. Also: the lane and session state moves the code holds
# (debugfs tern/moves) are design.rst's, every pair of states
# (state_moves.py).

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/stats_lib.sh"

PARAMS=/sys/module/tern/parameters
RERUN=/sys/module/tern_test_msgr/parameters/rerun
HOLD=/sys/module/tern_test_msgr/parameters/hold
MIB=1048576
DBG=/sys/kernel/debug/tern

stat_has() {	# FILE LINE...
	local f=$1 want
	shift
	for want in "$@"; do
		grep -qx "$want" "$f" || { echo "$f lacks '$want'"; return 1; }
	done
}

session_stats() {
	local cli srv
	cli=$(ls -d "$DBG"/msgr_test_cli.*/[0-9a-f]*/ 2>/dev/null | head -n1)
	srv=$(ls -d "$DBG"/msgr_test_srv.*/r-*/ 2>/dev/null | head -n1)
	[ -n "$cli" ] && [ -n "$srv" ] || { echo "no session in $DBG"; return 1; }
	# the session the module keeps open: two live lanes, CRC on, one
	# request of 8 KiB each way
	stat_has "$cli/stats" "state live" "live_lanes 2" "data_crc 1" \
		"lane0.state live" "lane1.state live" "role requester" \
		"replies 1" || return 1
	stat_has "$srv/stats" "state live" "live_lanes 2" "data_crc 1" \
		"lane0.state live" "lane1.state live" "role responder" \
		"requests 1"
}

counter_sum() {	# NAME: since the module loaded, over every lane
	awk -v k="$1" '$1 == k { print $2 }' "$DBG/stats"
}

srv_stat() {	# NAME: a counter of the responder's endpoint, -1 if absent
	cat "$DBG"/msgr_test_srv.*/stats 2>/dev/null |
		awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print -1 }'
}

# hold_budget N CAP_MIB: N writes of 1 MiB into core pages, held by the
# responder; at most CAP_MIB of them are held, the rest refused and
# counted; then all are answered, their data checked, and given back.
hold_budget() {
	local n=$1 cap=$2 refused0 refused1 held refused bytes i
	refused0=$(srv_stat refused_core_data)
	echo "$n" > "$HOLD" || return 1
	read -r _ held _ refused < "$HOLD"
	bytes=$(srv_stat core_data_bytes)
	refused1=$(srv_stat refused_core_data)
	echo "held $held refused $refused core_data_bytes $bytes refused_core_data $refused0 -> $refused1"
	echo 0 > "$HOLD" || { echo "held writes failed"; return 1; }
	for ((i = 0; i < 50; i++)); do
		[ "$(srv_stat core_data_bytes)" = 0 ] && break
		sleep 0.1
	done
	echo "after the answers: core_data_bytes $(srv_stat core_data_bytes)"
	[ "$bytes" -ge 0 ] && [ "$bytes" -le $((cap * MIB)) ] &&
		[ "$bytes" = $((held * MIB)) ] && [ "$held" -ge 1 ] &&
		[ "$refused" = $((n - held)) ] && [ "$refused" -gt 0 ] &&
		[ $((refused1 - refused0)) -ge "$refused" ] &&
		[ "$(srv_stat core_data_bytes)" = 0 ]
}

no_objects_left() {
	local i
	for i in $(seq 50); do
		grep -q " [1-9]" "$DBG/objects" || return 0
		sleep 0.1
	done
	cat "$DBG/objects"
	return 1
}

ktap_plan 12

modprobe tern_tcp
ktap_check "in-kernel messenger checks pass (tern_test_msgr loads)" \
	modprobe tern_test_msgr
ktap_check "the lane and session state moves are design.rst's, legal and illegal" \
	python3 "$(dirname "$0")/state_moves.py" \
	"$(dirname "$0")/../../../../Documentation/design.rst" "$DBG/moves"

# 1 in 100 injects over a hundred failures in the checks' 10 s; at 1 in
# 40 a burst of 256 on 3 lanes spent 20 to 60 s reconnecting lanes that
# failed again before their first reply
echo 100 > "$PARAMS/inject_fail_every"
ktap_check "the checks pass again with 1 in 100 transport operations failing" \
	sh -c "echo 1 > $RERUN"
echo 0 > "$PARAMS/inject_fail_every"
injected=$(counter_sum injected)
reconnects=$(counter_sum reconnects)
ktap_info "injected $injected failures, $reconnects reconnects"
ktap_check "injected failures were counted and lanes reconnected" \
	test "$injected" -gt 0 -a "$reconnects" -gt 0

crc_before=$(counter_sum crc_errors)
# A request fails once max_lane_faults (8) of its replies in a row came
# damaged: at 1 in 5 that happened to one request in some hundred
# thousand, at 1 in 8 to one in some ten million.
echo 8 > "$PARAMS/inject_crc_every"
ktap_check "the checks pass again with 1 in 8 data CRCs failing" \
	sh -c "echo 1 > $RERUN"
echo 0 > "$PARAMS/inject_crc_every"
crc_after=$(counter_sum crc_errors)
ktap_check "data CRC mismatches were counted ($crc_before -> $crc_after)" \
	test "$crc_after" -gt "$crc_before"

ktap_check "debugfs shows the open session on both sides" session_stats

# an io_budget beyond int once stopped every send: taken as 4096 now
setp tern_tcp io_budget 4294967295
ktap_check "the checks pass again with tern_tcp.io_budget at 4294967295" \
	sh -c "echo 1 > $RERUN"
setp tern_tcp io_budget 64

setp tern max_core_data_mib_per_session 8
ktap_check "core data budget per session: of 32 held 1 MiB writes at most 8 MiB held, the rest refused with -ENOMEM and counted, all given back" \
	hold_budget 32 8
setp tern max_core_data_mib_per_session 256
setp tern max_core_data_mib 4
ktap_check "core data budget per endpoint: of 16 held 1 MiB writes at most 4 MiB held, the rest refused and counted, all given back" \
	hold_budget 16 4
setp tern max_core_data_mib 1024

if rmmod tern_tcp 2>/dev/null; then
	ktap_fail "rmmod tern_tcp is refused while a listener uses it"
else
	ktap_pass "rmmod tern_tcp is refused while a listener uses it"
fi

ktap_check "after rmmod tern_test_msgr no endpoint, session, lane or request is left; modules unload" \
	sh -c "rmmod tern_test_msgr && $(declare -f no_objects_left); DBG=$DBG no_objects_left && rmmod tern_tcp && rmmod tern"
ktap_finish
