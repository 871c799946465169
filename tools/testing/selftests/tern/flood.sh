#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A listener flood: thousands of well-formed connections against the
# echo service over TCP (tern_fuzz -F). Connections that never finish a
# handshake, new sessions and lanes of a few sessions must stop at their
# caps (tern.max_handshakes, tern.max_sessions, tern.max_lanes, lowered
# here so the flood stays short), every refusal must be counted in the
# endpoint's debugfs stats, memory must stay bounded while the flood
# holds its connections, a verified benchmark started before the flood
# must finish without error, and everything must be freed and unload.
# Then one address (127.0.0.2) floods handshakes and sessions past its
# share (tern.max_handshakes_per_peer, tern.max_sessions_per_peer) while
# another (127.0.0.1) still connects and runs verified I/O, and every
# per-address count goes back to 0.
#
# FLOOD_SESSIONS (600) and FLOOD_LANES (640, 64 to a session) size the
# session and lane floods, three and one and a half times their caps;
# make soak raises them (SOAK_FLOOD_SESSIONS, SOAK_FLOOD_LANES).

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/stats_lib.sh"
dir=$(cd "$(dirname "$0")" && pwd)
ternadm=$TERN_SRC/tools/ternadm/ternadm
port=7621
uri=tcp://127.0.0.1:$port
cap_sessions=200
cap_lanes=400
nr_sessions=${FLOOD_SESSIONS:-600}
nr_lanes=${FLOOD_LANES:-640}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

field() {	# field FILE NAME: the number after NAME on the ready line
	sed -n "s/.* $2 \\(-\\?[0-9]*\\).*ready\$/\\1/p" "$1"
}

ktap_plan 17

sync
echo 3 > /proc/sys/vm/drop_caches
base=$(kmalloc_bytes)

modprobe tern_tcp && modprobe tern_bench
# the endpoint's own caps first: one address floods them all
setp tern max_handshakes_per_peer 0
setp tern max_sessions_per_peer 0
ktap_check "echo service listens on $uri" "$ternadm" bench serve "$uri"

# 1. connections that never say HELLO: at most max_handshakes wait
refused0=$(ep_stat refused_handshakes)
if flood_start handshakes 60 -F handshakes -N 1000 -H 1; then
	wait "$flood_pid"
	ktap_comment < "$tmp/handshakes"
	acc=$(field "$tmp/handshakes" accepted)
	clo=$(field "$tmp/handshakes" closed)
	refused1=$(ep_stat refused_handshakes)
	ktap_info "handshakes: $acc waiting, $clo closed, refused_handshakes $refused0 -> $refused1"
	if [ "$acc" -le 256 ] && [ "$clo" -ge 700 ] &&
	   [ $((refused1 - refused0)) -ge "$clo" ]; then
		ktap_pass "1000 silent connections: at most 256 in handshake, the rest refused and counted"
	else
		ktap_fail "1000 silent connections: at most 256 in handshake, the rest refused and counted"
	fi
else
	ktap_fail "handshake flood ran"
fi
# the waiting ones hit the handshake timeout or were closed by tern_fuzz
for ((i = 0; i < 100; i++)); do
	[ "$(ep_stat handshakes)" = 0 ] && break
	sleep 0.1
done

setp tern max_sessions $cap_sessions
setp tern max_lanes $cap_lanes

# a good client running through the floods below
"$ternadm" bench run "$uri" --time 12 --lanes 2 --depth 8 --size 16k \
	--dir both --verify > "$tmp/good" 2>&1 &
good_pid=$!
sleep 2

# 2. new sessions
mem0=$(mem_avail_kb)
refused0=$(ep_stat refused_sessions)
# a keepalive of 20 s (timeout 60 s): on a slow guest the flood takes
# longer than the default 15 s timeout, and sessions closed early would
# make room for more than the cap
if flood_start sessions 120 -F sessions -N "$nr_sessions" -H 4 -K 20000; then
	mem1=$(mem_avail_kb)
	acc=$(field "$tmp/sessions" accepted)
	ref=$(field "$tmp/sessions" refused)
	st=$(field "$tmp/sessions" status)
	sess=$(ep_stat sessions)
	refused1=$(ep_stat refused_sessions)
	wait "$flood_pid"
	ktap_comment < "$tmp/sessions"
	ktap_info "sessions: accepted $acc refused $ref (status $st), endpoint sessions $sess, refused_sessions $refused0 -> $refused1, MemAvailable -$((mem0 - mem1)) KiB"
	if [ "$acc" -le $cap_sessions ] && [ "$sess" -le $((cap_sessions + 1)) ] &&
	   [ "$ref" -ge $((nr_sessions - cap_sessions)) ] && [ "$st" = -87 ]; then
		ktap_pass "$nr_sessions new sessions: at most $cap_sessions accepted, the rest refused with -EUSERS"
	else
		ktap_fail "$nr_sessions new sessions: at most $cap_sessions accepted, the rest refused with -EUSERS"
	fi
	if [ $((refused1 - refused0)) -ge "$ref" ] && [ "$ref" -gt 0 ]; then
		ktap_pass "session refusals counted in the endpoint's stats"
	else
		ktap_fail "session refusals counted in the endpoint's stats"
	fi
	# bounded: both ends of a session (sockets, lanes, the echo's tid
	# ring) cost about 125 KiB under slab debugging; allow 200 KiB for
	# each session the cap lets in
	if [ $((mem0 - mem1)) -lt $((cap_sessions * 200)) ]; then
		ktap_pass "memory bounded during the session flood (-$((mem0 - mem1)) KiB)"
	else
		ktap_fail "memory bounded during the session flood (-$((mem0 - mem1)) KiB)"
	fi
else
	ktap_fail "session flood ran"
	ktap_fail "session refusals counted"
	ktap_fail "memory bounded during the session flood"
fi

# the flood's sessions go before the next flood, which is about lanes
for ((i = 0; i < 100; i++)); do
	[ "$(ep_stat sessions)" -le 1 ] && break
	sleep 0.1
done

# 3. lanes of a few sessions (64 lanes each)
refused0=$(ep_stat refused_lanes)
if flood_start lanes 120 -F lanes -N "$nr_lanes" -L 64 -H 4 -K 20000; then
	acc=$(field "$tmp/lanes" accepted)
	ref=$(field "$tmp/lanes" refused)
	st=$(field "$tmp/lanes" status)
	lanes=$(ep_stat bound_lanes)
	refused1=$(ep_stat refused_lanes)
	wait "$flood_pid"
	ktap_comment < "$tmp/lanes"
	ktap_info "lanes: accepted $acc refused $ref (status $st), bound $lanes, refused_lanes $refused0 -> $refused1"
	if [ "$acc" -le $cap_lanes ] && [ "$lanes" -le $cap_lanes ] &&
	   [ "$ref" -ge $((nr_lanes - cap_lanes)) ] && [ "$st" = -87 ] &&
	   [ $((refused1 - refused0)) -ge "$ref" ]; then
		ktap_pass "$nr_lanes lanes of $((nr_lanes / 64)) sessions: at most $cap_lanes bound, the rest refused and counted"
	else
		ktap_fail "$nr_lanes lanes of $((nr_lanes / 64)) sessions: at most $cap_lanes bound, the rest refused and counted"
	fi
else
	ktap_fail "lane flood ran"
fi

if wait "$good_pid"; then
	ktap_pass "a verified benchmark ran through the floods without error"
else
	ktap_comment < "$tmp/good"
	ktap_fail "a verified benchmark ran through the floods without error"
fi

# the flood's lanes are closed: sessions and lanes go away
for ((i = 0; i < 100; i++)); do
	[ "$(ep_stat sessions)" = 0 ] && [ "$(ep_stat lanes)" = 0 ] && break
	sleep 0.1
done
ktap_info "after the floods: sessions $(ep_stat sessions) lanes $(ep_stat lanes) bound $(ep_stat bound_lanes)"
ktap_check "every flood session and lane is gone" \
	test "$(ep_stat sessions)" = 0 -a "$(ep_stat lanes)" = 0

ktap_check "a new client is served after the floods, verified" \
	"$ternadm" bench run "$uri" --count 500 --size 64k --dir both --verify --crc

# 4. one address past its share, another served meanwhile. The endpoint
# caps are lowered so that without per-address caps the flood alone
# would fill them; the flood's handshakes outlive the checks.
setp tern max_handshakes 64
setp tern max_sessions 100
setp tern handshake_timeout_ms 30000
setp tern max_handshakes_per_peer 16
setp tern max_sessions_per_peer 64
peers_file() {
	cat /sys/kernel/debug/tern/bench_echo.*/peers 2>/dev/null
}
good_run() {
	"$ternadm" bench run "$uri" --count 200 --lanes 2 --depth 8 --size 16k \
		--dir both --verify
}

refused0=$(ep_stat refused_peer_handshakes)
if flood_start peer_hs 60 -F handshakes -N 100 -H 30 -B 127.0.0.2; then
	acc=$(field "$tmp/peer_hs" accepted)
	clo=$(field "$tmp/peer_hs" closed)
	refused1=$(ep_stat refused_peer_handshakes)
	peers_file | ktap_comment
	ktap_info "handshakes from 127.0.0.2: $acc waiting, $clo closed, endpoint handshakes $(ep_stat handshakes), refused_peer_handshakes $refused0 -> $refused1"
	if [ "$acc" -le 16 ] && [ "$clo" -ge 84 ] &&
	   [ $((refused1 - refused0)) -ge "$clo" ]; then
		ktap_pass "100 silent connections from 127.0.0.2: at most 16 in handshake, the rest refused and counted"
	else
		ktap_fail "100 silent connections from 127.0.0.2: at most 16 in handshake, the rest refused and counted"
	fi
	ktap_check "127.0.0.1 connects and runs verified I/O while 127.0.0.2 holds its handshakes" \
		good_run
	kill "$flood_pid" 2>/dev/null
	wait "$flood_pid" 2>/dev/null
else
	ktap_fail "handshake flood from 127.0.0.2 ran"
	ktap_fail "127.0.0.1 served during the handshake flood"
fi
# its handshakes must not count against the session flood below
for ((i = 0; i < 100; i++)); do
	[ "$(ep_stat handshakes)" = 0 ] && break
	sleep 0.1
done

refused0=$(ep_stat refused_peer_sessions)
if flood_start peer_sess 60 -F sessions -N 150 -H 30 -B 127.0.0.2; then
	acc=$(field "$tmp/peer_sess" accepted)
	ref=$(field "$tmp/peer_sess" refused)
	st=$(field "$tmp/peer_sess" status)
	clo=$(field "$tmp/peer_sess" closed)
	refused1=$(ep_stat refused_peer_sessions)
	peers_file | ktap_comment
	ktap_info "sessions from 127.0.0.2: accepted $acc refused $ref (status $st) closed $clo, endpoint sessions $(ep_stat sessions), refused_peer_sessions $refused0 -> $refused1"
	# closed: refused at accept while refused lanes were still going
	if [ "$acc" -le 64 ] && [ $((ref + clo)) -ge 86 ] && [ "$ref" -gt 0 ] &&
	   [ "$st" = -87 ] && [ $((refused1 - refused0)) -ge "$ref" ]; then
		ktap_pass "150 new sessions from 127.0.0.2: at most 64 accepted, the rest refused with -EUSERS and counted"
	else
		ktap_fail "150 new sessions from 127.0.0.2: at most 64 accepted, the rest refused with -EUSERS and counted"
	fi
	ktap_check "127.0.0.1 opens a session and runs verified I/O while 127.0.0.2 holds its sessions" \
		good_run
	kill "$flood_pid" 2>/dev/null
	wait "$flood_pid" 2>/dev/null
else
	ktap_fail "session flood from 127.0.0.2 ran"
	ktap_fail "127.0.0.1 served during the session flood"
fi

for ((i = 0; i < 100; i++)); do
	[ "$(ep_stat peers)" = 0 ] && [ "$(ep_stat handshakes)" = 0 ] &&
		[ "$(ep_stat sessions)" = 0 ] && break
	sleep 0.1
done
ktap_info "after: peers $(ep_stat peers) handshakes $(ep_stat handshakes) sessions $(ep_stat sessions)"
peers_file | ktap_comment
ktap_check "every per-address count is back to 0 (no address left in the table)" \
	test "$(ep_stat peers)" = 0 -a "$(ep_stat handshakes)" = 0 -a \
	"$(ep_stat sessions)" = 0 -a -z "$(peers_file)"

setp tern handshake_timeout_ms 10000
setp tern max_handshakes 256
setp tern max_handshakes_per_peer 32
setp tern max_sessions_per_peer 128
setp tern max_sessions 1024
setp tern max_lanes 4096
ktap_check "echo service stops" "$ternadm" bench stop
ktap_check "modules unload" modprobe -r tern_bench tern_tcp tern
kmalloc_back_to "$base"
ktap_finish
