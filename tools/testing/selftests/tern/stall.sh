#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Clients that stop reading, against the echo service over TCP
# (tern_fuzz -F noread: handshake, requests whose replies carry data,
# PINGs so the keepalive stays happy, never a byte read):
#  - a keepalive above tern.max_peer_keepalive_ms is refused;
#  - the lane is killed within tern.tx_stall_timeout_ms plus two
#    keepalive intervals (lowered here to 5 s, with tern_tcp's
#    user_timeout_ms), and its requests and pages are freed; and so
#    without TCP_USER_TIMEOUT, by the core's check alone;
#  - a flood of 16 MiB replies from three sessions stays under the echo's
#    byte caps (tern_bench.echo_session_bytes, echo_max_bytes, lowered
#    here), while a verified 16 MiB benchmark still runs;
#  - everything unloads and the kmalloc caches are back to baseline.

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/stats_lib.sh"
dir=$(cd "$(dirname "$0")" && pwd)
ternadm=$TERN_SRC/tools/ternadm/ternadm
port=7623
uri=tcp://127.0.0.1:$port
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

srv_reqs() {
	awk '$1 == "srv_reqs" { print $2 }' /sys/kernel/debug/tern/objects
}

ktap_plan 11

sync
echo 3 > /proc/sys/vm/drop_caches
base=$(kmalloc_bytes)

modprobe tern_tcp && modprobe tern_bench
ktap_check "echo service listens on $uri" "$ternadm" bench serve "$uri"

# 1. a keepalive of an hour would keep a dead peer's lane for three
out=$("$dir/tern_fuzz" -a 127.0.0.1 -p "$port" -F sessions -N 1 -H 0 \
	-K 3600000 2>&1)
echo "$out" | ktap_comment
if echo "$out" | grep -q 'accepted 0 refused 1 status -22 '; then
	ktap_pass "a HELLO proposing a 3600 s keepalive is refused with -EINVAL"
else
	ktap_fail "a HELLO proposing a 3600 s keepalive is refused with -EINVAL"
fi

# 2. a lane that makes no transmit progress is killed
setp tern tx_stall_timeout_ms 5000
setp tern_tcp user_timeout_ms 5000
mem0=$(mem_avail_kb)
if flood_start noread 60 -F noread -N 1 -Q 16 -S 4194304 -R 4096 -H 30; then
	t0=$SECONDS
	sleep 1
	held=$(srv_reqs)
	mem1=$(mem_avail_kb)
	while [ $((SECONDS - t0)) -lt 30 ] && [ "$(ep_stat lanes)" != 0 ]; do
		sleep 0.5
	done
	took=$((SECONDS - t0))
	left=$(ep_stat lanes)
	# freed pages may sit in per-CPU lists for a while: look a few times
	for ((i = 0; i < 10; i++)); do
		sleep 1
		sync
		echo 3 > /proc/sys/vm/drop_caches
		mem2=$(mem_avail_kb)
		[ $((mem0 - mem2)) -lt $(((mem0 - mem1) / 2)) ] && break
	done
	ktap_info "stalled lane: $held requests held, MemAvailable -$((mem0 - mem1)) KiB; lanes $left after $took s; srv_reqs $(srv_reqs), MemAvailable -$((mem0 - mem2)) KiB"
	# 5 s without progress plus up to two keepalive intervals (5 s)
	if [ "$left" = 0 ] && [ "$took" -le 17 ]; then
		ktap_pass "a lane whose peer never reads is killed within 17 s ($took s)"
	else
		ktap_fail "a lane whose peer never reads is killed within 17 s (lanes $left after $took s)"
	fi
	if [ "$(srv_reqs)" = 0 ] && [ $((mem0 - mem1)) -gt $((32 * 1024)) ] &&
	   [ $((mem0 - mem2)) -lt $(((mem0 - mem1) / 2)) ]; then
		ktap_pass "its requests and pages are freed (-$((mem0 - mem1)) KiB held, -$((mem0 - mem2)) KiB after)"
	else
		ktap_fail "its requests and pages are freed (srv_reqs $(srv_reqs), -$((mem0 - mem2)) KiB)"
	fi
	kill "$flood_pid" 2>/dev/null
	wait "$flood_pid"
	ktap_comment < "$tmp/noread"
else
	ktap_fail "a lane whose peer never reads is killed"
	ktap_fail "its requests and pages are freed"
fi
# the same without TCP_USER_TIMEOUT: the core's own check closes it
setp tern_tcp user_timeout_ms 0
stalls0=$(ep_stat tx_stalls)
if flood_start noread2 60 -F noread -N 1 -Q 16 -S 4194304 -R 4096 -H 30; then
	t0=$SECONDS
	while [ $((SECONDS - t0)) -lt 30 ] && [ "$(ep_stat lanes)" != 0 ]; do
		sleep 0.5
	done
	took=$((SECONDS - t0))
	left=$(ep_stat lanes)
	stalls1=$(ep_stat tx_stalls)
	ktap_info "without TCP_USER_TIMEOUT: lanes $left after $took s, tx_stalls $stalls0 -> $stalls1, srv_reqs $(srv_reqs)"
	if [ "$left" = 0 ] && [ "$took" -le 17 ] &&
	   [ $((stalls1 - stalls0)) = 1 ] && [ "$(srv_reqs)" = 0 ]; then
		ktap_pass "without TCP_USER_TIMEOUT tern.tx_stall_timeout_ms closes it within 17 s ($took s), counted, requests freed"
	else
		ktap_fail "without TCP_USER_TIMEOUT tern.tx_stall_timeout_ms closes it within 17 s, counted, requests freed"
	fi
	kill "$flood_pid" 2>/dev/null
	wait "$flood_pid"
else
	ktap_fail "without TCP_USER_TIMEOUT tern.tx_stall_timeout_ms closes it"
fi
setp tern tx_stall_timeout_ms 30000
setp tern_tcp user_timeout_ms 30000

# 3. the echo's byte caps; the caps are read when the service starts
"$ternadm" bench stop
setp tern_bench echo_session_bytes $((64 << 20))
setp tern_bench echo_max_bytes $((128 << 20))
ktap_check "echo service restarts with 64 MiB per session, 128 MiB in all" \
	"$ternadm" bench serve "$uri"
sync
echo 3 > /proc/sys/vm/drop_caches
mem0=$(mem_avail_kb)
if flood_start echo 60 -F noread -N 3 -Q 12 -S 16777216 -R 4096 -H 10; then
	sleep 3
	mem1=$(mem_avail_kb)
	ktap_info "3 sessions x 12 replies of 16 MiB, unread: MemAvailable -$((mem0 - mem1)) KiB, $(srv_reqs) requests held"
	if [ $((mem0 - mem1)) -lt $(((128 + 64) * 1024)) ]; then
		ktap_pass "576 MiB of unread replies hold less than the 128 MiB cap (+64 MiB for socket buffers)"
	else
		ktap_fail "576 MiB of unread replies hold less than the 128 MiB cap (+64 MiB for socket buffers): -$((mem0 - mem1)) KiB"
	fi
	kill "$flood_pid" 2>/dev/null
	wait "$flood_pid"
	ktap_comment < "$tmp/echo"
else
	ktap_fail "576 MiB of unread replies stay under the echo's cap"
fi
for ((i = 0; i < 100; i++)); do
	[ "$(ep_stat lanes)" = 0 ] && break
	sleep 0.2
done
ktap_check "a verified 16 MiB benchmark runs within the caps" \
	"$ternadm" bench run "$uri" --count 4 --size 16m --depth 2 \
	--dir both --verify

setp tern_bench echo_session_bytes $((256 << 20))
setp tern_bench echo_max_bytes $((1024 << 20))
ktap_check "echo service stops" "$ternadm" bench stop
ktap_check "modules unload" modprobe -r tern_bench tern_tcp tern
kmalloc_back_to "$base"
ktap_finish
