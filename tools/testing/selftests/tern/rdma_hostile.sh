#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tern_rdma.ko against a userspace RDMA peer that breaks the RDMA
# framing (tern_rdma_wire.h), which tern_fuzz and tamper_proxy.py, TCP
# only, cannot reach. tern_rdma_relay carries each lane's stream between
# RDMA and TCP, so the kernel's echo service on tcp:// stands behind a
# userspace RDMA responder, and the kernel's tcp:// requester behind a
# userspace RDMA requester:
#  - clean, both ways: a verified run through the relay, no protocol
#    error, no reconnect (the relay frames as tern_rdma does);
#  - a hostile responder: the relay spoils one connection after the
#    other, the accept's private data (bad magic, version 0, 4 receive
#    buffers, 1k buffers, a head as large as the buffer, a reserved
#    field set) or one message (bad magic, flags, an unknown
#    type, 65535 credits, a CREDIT with data or with no credit, a DATA
#    with nothing, padding from inside the message header, a SEND longer
#    than the receive buffer, a SEND_WITH_INV of a key nobody named). Each is a failed connect ("bad accept") or
#    a protocol error or failed receive with its reason logged; the lane
#    reconnects, requests are resent and the verified run ends clean;
#  - a hostile requester: the same against tern_rdma's listener ("bad
#    connect request") and responder lanes; the kernel's TCP requester
#    behind the relay reconnects and its verified run ends clean;
#  - a requester that stops granting credits: the responder lane is
#    closed for want of transmit progress (tern.tx_stall_timeout_ms),
#    the run behind it ends clean.
# The guest console is checked for oopses by make check.
# Needs tools/testing/vm/run --rdma (TERN_RDMA_ADDR0); skipped without.

. "$(dirname "$0")/ktap.sh"
# TERNADM; total_of, relay_bg, json_field, bench_clean, log_mark,
# log_since: stats_lib.sh
. "$(dirname "$0")/blk_lib.sh"

dir=$(cd "$(dirname "$0")" && pwd)
RELAY=$dir/tern_rdma_relay
ADDR0=${TERN_RDMA_ADDR0:-}
ECHO_RDMA=rdma://$ADDR0:7540
ECHO_TCP=tcp://127.0.0.1:7541
RELAY_RDMA=rdma://$ADDR0:7542
RELAY_TCP=tcp://127.0.0.1:7543
# every relay started, for the exit trap: checks run in subshells
RELAY_PIDS=$(mktemp)

# The relay's faults: of the private data, and of a message as
# FAULT:LOG, LOG (grep -E) what the kernel logs for that fault alone
# (the last two are refused by the RC receive itself, rdma_rxe's
# statuses).
PRIV_FAULTS="priv-magic priv-version priv-recv priv-buf priv-head
priv-reserved"
MSG_FAULTS="magic:bad message header 74 72
flags:bad message header 54 52 0[12] 80
type:message type 7
credits:65535 credits granted
credit-data:credit message of (9|[0-9]{2,}) bytes
credit-zero:credit message of 8 bytes granting 0
empty:empty data message
pad:padding from 4 in
long:receive completion failed: local QP operation error
inv:receive completion failed: remote invalid request error"

setup() {
	modprobe tern_tcp && modprobe tern_rdma && modprobe tern_bench ||
		return 1
	"$TERNADM" bench serve "$ECHO_RDMA" &&
		"$TERNADM" bench serve "$ECHO_TCP"
}

# relay_start ACCEPT CONNECT [OPTIONS]: the relay in the background,
# its output in $relay_log
relay_start() {
	relay_log=$(mktemp)
	relay_bg "$relay_log" "$RELAY_PIDS" "$@"
}

relay_stop() {
	[ -n "${relay_pid:-}" ] || return 0
	kill "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null
	sed -i "/^$relay_pid\$/d" "$RELAY_PIDS"
	relay_pid=
}

# the exit trap: relays a failed check left, the parameters it changed
cleanup() {
	local p
	while read -r p; do
		kill "$p" 2>/dev/null
	done < "$RELAY_PIDS"
	rm -f "$RELAY_PIDS"
	# tern may be unloaded by now
	{ echo 8 > /sys/module/tern/parameters/max_lane_faults; } 2>/dev/null
	{ echo 30000 > /sys/module/tern/parameters/tx_stall_timeout_ms; } 2>/dev/null
}

# is_count VALUE...: each is a number (a counter that was read)
is_count() {
	local v
	for v in "$@"; do
		[[ $v =~ ^[0-9]+$ ]] || { echo "not a counter: '$v'"; return 1; }
	done
}

# relay_run URI SECONDS: a verified 4k run both ways through the relay
# at URI, one lane; its JSON in $run_out
relay_run() {
	run_out=$(mktemp)
	"$TERNADM" bench run "$1" --json --time "$2" --depth 4 --lanes 1 \
		--size 4k --dir both --verify > "$run_out" 2>&1
}

# relay_clean ACCEPT CONNECT URI: an unspoilt relay carries a verified
# run, no protocol error, no reconnect
relay_clean() {
	local rc bad=0 e0 r0 e1 r1
	e0=$(total_of proto_errors) r0=$(total_of reconnects)
	relay_start "$1" "$2" || return 1
	relay_run "$3" 2
	rc=$?
	relay_stop
	e1=$(total_of proto_errors) r1=$(total_of reconnects)
	cat "$relay_log"
	is_count "$e0" "$r0" "$e1" "$r1" || bad=1
	echo "run exit $rc, proto_errors +$((e1 - e0)), reconnects +$((r1 - r0))"
	[ "$rc" = 0 ] || bad=1
	bench_clean "$run_out" || bad=1
	grep -q "established" "$relay_log" || bad=1
	[ "$e1" = "$e0" ] && [ "$r1" = "$r0" ] || bad=1
	rm -f "$relay_log" "$run_out"
	return $bad
}

# relay_faults ACCEPT CONNECT URI PRIV_LOG: connection after connection
# spoilt through the relay, a message fault and a private data fault
# in turn (a lane that did I/O reconnects at once, one whose connect
# failed backs off: the turns keep the backoff short), then clean ones.
# Every fault must have been done and logged by the kernel, the
# verified run must end clean with requests resent.
relay_faults() {
	local priv_log=$4 faults='' f m p logged mark e0 e1 v rc bad=0
	local -a msg priv
	mapfile -t msg <<< "$MSG_FAULTS"
	read -r -a priv <<< "$(echo $PRIV_FAULTS)"
	for ((n = 0; n < ${#msg[@]}; n++)); do
		f=${msg[$n]%%:*}
		p=${priv[$n]:-}
		faults=$faults${faults:+,}$f${p:+,$p}
	done
	# a request may ride many of the spoilt lanes
	echo 0 > /sys/module/tern/parameters/max_lane_faults
	mark=$(log_mark)
	e0=$(total_of proto_errors)
	relay_start "$1" "$2" -f "$faults" ||
		{ echo 8 > /sys/module/tern/parameters/max_lane_faults; return 1; }
	relay_run "$3" 6
	rc=$?
	relay_stop
	echo 8 > /sys/module/tern/parameters/max_lane_faults
	e1=$(total_of proto_errors)
	logged=$(log_since "$mark") || bad=1
	is_count "$e0" "$e1" || { e0=0 e1=0 bad=1; }
	echo "run exit $rc, proto_errors +$((e1 - e0))"
	[ "$rc" = 0 ] || bad=1
	bench_clean "$run_out" || bad=1
	v=$(json_field resends "$run_out")
	[ "${v:-0}" -gt 0 ] || { echo "no request was resent"; bad=1; }
	for m in "${msg[@]}"; do
		f=${m%%:*}
		grep -q "fault $f at message" "$relay_log" ||
			{ echo "relay did not do $f"; bad=1; }
		grep -qE -- "${m#*:}" <<< "$logged" ||
			{ echo "$f: no \"${m#*:}\" logged"; bad=1; }
	done
	for p in "${priv[@]}"; do
		grep -q "fault $p\$" "$relay_log" ||
			{ echo "relay did not do $p"; bad=1; }
	done
	v=$(grep -c -- "$priv_log" <<< "$logged")
	echo "$v x \"$priv_log\""
	[ "$v" -ge "${#priv[@]}" ] || bad=1
	# the eight faults the header check sees, not the two RC itself stops
	[ $((e1 - e0)) -ge 8 ] || bad=1
	grep "^conn" "$relay_log" | tail -n 4
	[ "$bad" = 0 ] || cat "$relay_log"
	rm -f "$relay_log" "$run_out"
	return $bad
}

# A hostile requester that stops granting credits and goes on sending
# (the kernel's TCP requester behind it pings): the echo's replies wait
# on its responder lane, tern.tx_stall_timeout_ms (3 s here) closes it
# ("no transmit progress" logged for the echo's lane; the bound, the
# timeout plus two keepalive intervals, is stall.sh's to check) within
# the 16 s run, in which the requester reconnects, resends, verified.
held_credits() {
	local logged mark v rc bad=0 tmo=/sys/module/tern/parameters/tx_stall_timeout_ms
	echo 3000 > "$tmo"
	mark=$(log_mark)
	relay_start "$RELAY_TCP" "$ECHO_RDMA" -f hold-credits ||
		{ echo 30000 > "$tmo"; return 1; }
	relay_run "$RELAY_TCP" 16
	rc=$?
	relay_stop
	echo 30000 > "$tmo"
	logged=$(log_since "$mark") || bad=1
	cat "$relay_log"
	echo "run exit $rc"
	[ "$rc" = 0 ] || bad=1
	bench_clean "$run_out" || bad=1
	v=$(json_field resends "$run_out")
	[ "${v:-0}" -gt 0 ] || { echo "no request was resent"; bad=1; }
	grep -q "fault hold-credits at message" "$relay_log" || bad=1
	# the echo's responder lane, not the requester's behind the relay
	grep -m1 "bench_echo/.*no transmit progress" <<< "$logged" || bad=1
	rm -f "$relay_log" "$run_out"
	return $bad
}

unload() {
	"$TERNADM" bench stop || return 1
	rmmod tern_bench tern_rdma tern_tcp tern || return 1
	! grep -qE "^(tern|tern_bench|tern_rdma|tern_tcp) " /proc/modules
}

ktap_plan 7
trap cleanup EXIT

if [ -z "$ADDR0" ] || [ ! -x "$TERNADM" ] || [ ! -x "$RELAY" ]; then
	ktap_info "no soft-RoCE (run with tools/testing/vm/run --rdma), ternadm or tern_rdma_relay"
	for _ in $(seq 7); do ktap_skip "no RDMA setup"; done
	ktap_finish
fi

ktap_check "modules load, echo serves $ECHO_RDMA and $ECHO_TCP" setup
ktap_check "a userspace RDMA responder (relay to $ECHO_TCP): verified 4k run both ways, no protocol error, no reconnect" \
	relay_clean "$RELAY_RDMA" "$ECHO_TCP" "$RELAY_RDMA"
ktap_check "a userspace RDMA requester (tcp:// relayed to $ECHO_RDMA): verified, no protocol error, no reconnect" \
	relay_clean "$RELAY_TCP" "$ECHO_RDMA" "$RELAY_TCP"
ktap_check "a hostile RDMA responder: 6 bad accepts, 10 bad messages, one per connection: each failed or closed with its reason logged, lanes reconnect, resent, verified" \
	relay_faults "$RELAY_RDMA" "$ECHO_TCP" "$RELAY_RDMA" "bad accept"
ktap_check "a hostile RDMA requester: 6 bad connect requests, 10 bad messages: each rejected or closed with its reason logged, the requester behind it reconnects, verified" \
	relay_faults "$RELAY_TCP" "$ECHO_RDMA" "$RELAY_TCP" "bad connect request"
ktap_check "a hostile RDMA requester that stops granting credits: the responder lane closes on tern.tx_stall_timeout_ms, the requester behind it reconnects, verified" \
	held_credits
ktap_check "bench stop, modules unload" unload
ktap_finish
