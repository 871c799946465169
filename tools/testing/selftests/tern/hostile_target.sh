#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The client side of the kernel against a hostile target: "tern_fuzz -T
# CASE" listens on 127.0.0.1, completes handshakes as a tern acceptor
# would and then misbehaves. tern_blk (ternadm map) and tern_bench
# (ternadm bench run) must cope:
#
#  1  HELLO_ACK status -5000, INT_MIN, +7, -4095
#  2  HELLO_ACK limits out of range: lanes, queue depth, max_data,
#     max_front, features not offered, session id, cookie, lane index
#  3  OPEN answered with status -5000, +1, INT_MIN
#  4  OPEN and INFO answered with absurd geometry
#  5  replies to tid 0, to tids not yet sent or of no shard, duplicates,
#     a READ answered on another lane (connection) of the session
#  6  READ replies with too little or too much data, a front, a front
#     above max_front; statuses no disk gives (-EAGAIN, -EBUSY, a zone's
#     -EOVERFLOW, INT_MIN, +5): the READ fails with EIO, not with an
#     errno that tells the reader to try again, and the device reads on
#  7  READ data trickled a byte every 200-500 ms; the OPEN reply a byte
#     a second, past the OPEN timeout (tern_blk.ctrl_timeout_ms, 5 s
#     here), on every connection or on the first only
#  8  every WATCH answered at once with a new capacity
#  9  wrong data CRCs with crc negotiated (READ, OPEN)
# 10  a HELLO never answered, half a HELLO_ACK
# 11  every connection closed at once
# 12  ternadm bench run against cases 1 and 2
#
# A map against a target that fails the handshake, the OPEN or its
# geometry must exit non-zero with a message within its bound and leave
# no device (geometry: "malformed geometry" logged). Once mapped (5-9)
# the target misbehaves only on READs at 1 MiB and beyond, on its first
# connection: such a READ must fail or return the export's data, never
# other bytes, within its bound, the lane's protocol or crc errors must
# be counted where the reply is malformed, and unmap must work in time.
# The WATCH storm must change the capacity at most 15 times in 10 s and
# leave the device usable. At the end the modules unload. The lane fails
# the run on any oops, WARN or hung task.
#
# With TRANSPORT=rdma (hostile_target_rdma.sh) the client maps over
# soft-RoCE and tern_rdma_relay carries each of its connections to
# tern_fuzz over TCP, so the same hostile target meets tern_rdma's
# requester side.
#
# Environment:
#   HOSTILE_CASES  the cases to run, by number (default: 1 to 12)
#   TERNADM        the ternadm binary (default: the one built in the tree)
#   TRANSPORT      tcp (default) or rdma

TRANSPORT=${TRANSPORT:-tcp}
. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/blk_lib.sh"
dir=$(cd "$(dirname "$0")" && pwd)
FUZZ=$dir/tern_fuzz
RELAY=$dir/tern_rdma_relay
WORK=/var/tmp/tern-hostile
CASES=${HOSTILE_CASES:-1 2 3 4 5 6 7 8 9 10 11 12}
# the target misbehaves on READs from this sector on (tern_fuzz.c)
HOSTILE_SECTOR=2048
PORT=7620
HT_PID=
# one lane, so each connection is one lane; a short loss timeout
MAP_OPTS=(--lanes 1 --queue-depth 32 --loss-timeout 5)

# the values today's kernel survives first
C1=(7 -4095 -5000 -2147483648)
C2=(ack-lanes=0 ack-lanes=2 ack-qdepth=0 ack-qdepth=64 ack-max-data=512
    ack-max-data=16777216 ack-max-front=16 ack-features=1 ack-features=2
    ack-session ack-cookie ack-lane-idx)
C3=(-5000 1 -2147483648)
C4=(capacity-0 capacity-huge capacity-unaligned lbs-npow2 lbs-big
    discard-gran max-transfer-small max-segments-0 flags-unknown reserved
    short-front)
C4I=(capacity-0 capacity-huge short-front)
C5=(tid-zero tid-future tid-shard tid-dup)
C6=(read-short read-long read-front front-big)
C6S=(-11 -16 -75 -2147483648 5)
C12=(ack-status=7 ack-lanes=2 ack-session ack-status=-5000
     ack-status=-2147483648)

# checks in case $1
case_checks() {
	case $1 in
	1) echo ${#C1[@]} ;;
	2) echo ${#C2[@]} ;;
	3) echo ${#C3[@]} ;;
	4) echo $((${#C4[@]} + ${#C4I[@]})) ;;
	5) echo $((${#C5[@]} + 1)) ;;
	6) echo $((${#C6[@]} + ${#C6S[@]})) ;;
	9|10) echo 2 ;;
	7) echo 3 ;;
	8|11) echo 1 ;;
	12) echo ${#C12[@]} ;;
	*) echo 0 ;;
	esac
}

# ht_start SPEC [ARGS...]: tern_fuzz -T SPEC on a fresh port, HT_PORT
# (counted in a file: the checks run in subshells), reached at HT_URI:
# directly over TCP, through tern_rdma_relay on HT_PORT + 100 over RDMA
ht_start() {
	PORT=$(($(cat "$WORK/port" 2>/dev/null || echo "$PORT") + 1))
	echo "$PORT" > "$WORK/port"
	HT_PORT=$PORT
	HT_URI=tcp://127.0.0.1:$HT_PORT
	HT_LOG=$WORK/hostile.$PORT.log
	bg_ready listening 5 "$HT_LOG" "$FUZZ" -T "$@" -l "$HT_PORT"
	HT_RC=$?
	# shellcheck disable=SC2154 # bg_ready sets bg_pid
	HT_PID=$bg_pid
	echo "$HT_PID" >> "$WORK/pids"
	if [ "$HT_RC" != 0 ]; then
		echo "the hostile target did not start"
		return 1
	fi
	[ "$TRANSPORT" = rdma ] || return 0
	HT_URI=rdma://$ADDR:$((HT_PORT + 100))
	relay_bg "$WORK/relay.$PORT.log" "$WORK/pids" "$HT_URI" \
		"tcp://127.0.0.1:$HT_PORT"
	HT_RC=$?
	# shellcheck disable=SC2154 # relay_bg sets relay_pid
	HT_RELAY_PID=$relay_pid
	return $HT_RC
}

# ht_stop: the target, its children and the relay go; the first of the
# target's log lines
ht_stop() {
	[ -n "$HT_PID" ] || return 0
	kill "$HT_PID" ${HT_RELAY_PID:-} 2>/dev/null
	wait "$HT_PID" ${HT_RELAY_PID:-} 2>/dev/null
	HT_PID='' HT_RELAY_PID=''
	echo "target log ($(wc -l < "$HT_LOG") lines):"
	head -n 12 "$HT_LOG" | sed 's/^/  /'
}

# no_devices: no tern device is left, in sysfs, /dev or ternadm list
no_devices() {
	local left
	left="$(tern_devs) $(ls /dev/tern[0-9]* 2>/dev/null) $(adm list)"
	[ -z "${left// /}" ] && return 0
	echo "left behind: $left"
	return 1
}

# cleanup: stop the targets and unmap whatever a failed check left (the
# checks run in subshells), so that the next one starts clean
cleanup() {
	local d p
	ht_stop > /dev/null
	if [ -f "$WORK/pids" ]; then
		while read -r p; do
			kill "$p" 2>/dev/null
		done < "$WORK/pids"
		rm -f "$WORK/pids"
	fi
	for d in $(tern_devs); do
		timeout -k 5 60 "$TERNADM" unmap "$d" > /dev/null 2>&1
	done
}

# timed BOUND COMMAND...: run COMMAND under a hard limit (the bound plus
# a margin: the bound itself is for the caller to check); its output in
# T_OUT, its status in T_RC, the seconds it took in T_TOOK
timed() {
	local bound=$1 t0=$SECONDS
	shift
	T_OUT=$(timeout -k 5 $((bound + 30)) "$@" 2>&1)
	T_RC=$?
	T_TOOK=$((SECONDS - t0))
}

# expect_fail WHAT BOUND COMMAND...: COMMAND exits non-zero with a
# message within BOUND seconds and no device is left
expect_fail() {
	local what=$1 bound=$2 ok=0
	shift 2
	timed "$bound" "$@"
	echo "$what: exit $T_RC after $T_TOOK s (bound $bound s): $T_OUT"
	if [ "$T_RC" = 0 ]; then
		echo "$what succeeded"
		case "$T_OUT" in /dev/tern*)
			timeout -k 5 60 "$TERNADM" unmap "${T_OUT#/dev/}" ;;
		esac
		ok=1
	fi
	[ -n "$T_OUT" ] || { echo "no error message"; ok=1; }
	[ "$T_TOOK" -le "$bound" ] || { echo "took too long"; ok=1; }
	no_devices || ok=1
	return "$ok"
}

# map_fails SPEC BOUND [LOGTEXT [MAP OPTION...]]: a map against "-T
# SPEC" fails (expect_fail); LOGTEXT, when not empty, is logged
map_fails() {
	local spec=$1 bound=$2 text=${3:-} ok=0 mark
	shift 3 2>/dev/null || shift $#
	mark=$(log_mark)
	ht_start "$spec" || return 1
	expect_fail "map" "$bound" "$TERNADM" map \
		"$HT_URI/vol0" "${MAP_OPTS[@]}" "$@" || ok=1
	if [ -n "$text" ] &&
	   ! [ "$(log_count "$mark" "$text")" -gt 0 ] 2>/dev/null; then
		echo "the kernel did not log '$text'"
		ok=1
	fi
	ht_stop
	[ "$ok" = 0 ] || dmesg | grep -i tern | tail -n 8
	return "$ok"
}

# bench_fails SPEC BOUND: ternadm bench run against "-T SPEC" fails
bench_fails() {
	local ok=0
	ht_start "$1" || return 1
	expect_fail "bench run" "$2" "$TERNADM" bench run \
		"$HT_URI" --count 100 || ok=1
	ht_stop
	[ "$ok" = 0 ] || dmesg | grep -i tern | tail -n 8
	return "$ok"
}

# map_ok SPEC [ARGS -- MAP OPTION...]: map against "-T SPEC ARGS", DEV
map_ok() {
	local args=() o
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		args+=("$1")
		shift
	done
	shift
	ht_start "${args[@]}" || return 1
	DEV=$(map_uri "$HT_URI/vol0" "${MAP_OPTS[@]}" "$@")
	o=$?
	[ "$o" = 0 ] && [ -n "$DEV" ] && return 0
	echo "map against ${args[*]} failed"
	return 1
}

# unmap_ok BOUND: DEV unmaps within BOUND seconds, nothing is left
unmap_ok() {
	timed "$1" "$TERNADM" unmap "$DEV"
	echo "unmap $DEV: exit $T_RC after $T_TOOK s (bound $1 s) $T_OUT"
	[ "$T_RC" = 0 ] && [ "$T_TOOK" -le "$1" ] && no_devices
}

# read_checked BOUND: a 16 KiB direct READ at HOSTILE_SECTOR of DEV ends
# within BOUND seconds, failed or with the export's data
read_checked() {
	local bound=$1 f=$WORK/read
	rm -f "$f"
	timed "$bound" dd if="/dev/$DEV" of="$f" bs=16k count=1 \
		skip=$((HOSTILE_SECTOR / 32)) iflag=direct status=none
	echo "read: exit $T_RC after $T_TOOK s (bound $bound s) $T_OUT"
	[ "$T_TOOK" -le "$bound" ] || { echo "the read took too long"; return 1; }
	[ "$T_RC" = 124 ] || [ "$T_RC" = 137 ] && { echo "the read hung"; return 1; }
	if [ "$T_RC" = 0 ]; then
		"$FUZZ" -T check="$HOSTILE_SECTOR" < "$f" || return 1
		[ "$(stat -c %s "$f")" = 16384 ] || { echo "short read"; return 1; }
		echo "the read returned the export's data"
	else
		echo "the read failed cleanly"
	fi
}

# io_case SPEC COUNTER READ_BOUND [MAP OPTION...]: map against "-T SPEC
# -N 1", a READ the first connection answers wrongly is read: it fails or
# is right; COUNTER (when not "-") moves; unmap works. IO_TIMEOUT, when
# set, is the device's queue/io_timeout in ms; HT_BAD, when set, the
# connections that misbehave (-N, 0 for all).
io_case() {
	local spec=$1 counter=$2 bound=$3 ok=0 c0=0 c1=0
	shift 3
	map_ok "$spec" -N "${HT_BAD:-1}" -- "$@" || { ht_stop; return 1; }
	# every lane up first: "other-lane" needs the second to answer
	for _ in $(seq 50); do
		grep -q "live_lanes=$(cat "/sys/block/$DEV/tern/lanes") " \
			"/sys/block/$DEV/tern/paths" && break
		sleep 0.1
	done
	if [ -n "${IO_TIMEOUT:-}" ]; then
		echo "$IO_TIMEOUT" > "/sys/block/$DEV/queue/io_timeout" || ok=1
	fi
	[ "$counter" = - ] || c0=$(total_of "$counter")
	read_checked "$bound" || ok=1
	if [ "$counter" != - ]; then
		c1=$(total_of "$counter")
		echo "$counter: $c0 -> $c1"
		[ "$c1" -gt "$c0" ] || { echo "$counter did not move"; ok=1; }
	fi
	unmap_ok 15 || ok=1
	ht_stop
	[ "$ok" = 0 ] || dmesg | grep -i tern | tail -n 8
	return "$ok"
}

# status_case N: every READ at HOSTILE_SECTOR is answered with status N;
# the read fails with EIO within 20 s, one below it still reads right
status_case() {
	local ok=0 f=$WORK/read
	map_ok read-status="$1" -- || { ht_stop; return 1; }
	timed 20 dd if="/dev/$DEV" of=/dev/null bs=16k count=1 \
		skip=$((HOSTILE_SECTOR / 32)) iflag=direct status=none
	echo "read: exit $T_RC after $T_TOOK s (bound 20 s): $T_OUT"
	[ "$T_RC" != 0 ] && [ "$T_TOOK" -le 20 ] &&
		[[ $T_OUT == *"Input/output error"* ]] ||
		{ echo "expected EIO within 20 s"; ok=1; }
	rm -f "$f"
	dd if="/dev/$DEV" of="$f" bs=16k count=1 iflag=direct status=none &&
		"$FUZZ" -T check=0 < "$f" || { echo "the device reads no more"; ok=1; }
	unmap_ok 15 || ok=1
	ht_stop
	return "$ok"
}

# info_case WHAT: mapped, a rescan answered with geometry WHAT fails,
# the size stays, "malformed geometry" is logged
info_case() {
	local ok=0 mark s0 s1
	map_ok info-geom="$1" -- || { ht_stop; return 1; }
	mark=$(log_mark)
	s0=$(cat "/sys/block/$DEV/size")
	if echo 1 2>/dev/null > "/sys/block/$DEV/tern/rescan"; then
		echo "the rescan succeeded"
		ok=1
	fi
	s1=$(cat "/sys/block/$DEV/size")
	echo "size $s0 -> $s1"
	[ "$s0" = "$s1" ] || ok=1
	[ "$(log_count "$mark" "malformed geometry")" -gt 0 ] ||
		{ echo "no 'malformed geometry' logged"; ok=1; }
	unmap_ok 15 || ok=1
	ht_stop
	return "$ok"
}

# trickle_open WANT [ARGS...]: the OPEN reply trickles past the OPEN
# timeout, 5 s here (on the connections "-T trickle-open ARGS" says); the
# map ends within 20 s, with a device that works and unmaps (WANT=ok) or
# with an error and no device (WANT=fail)
trickle_open() {
	local want=$1 ok=0 tmo=/sys/module/tern_blk/parameters/ctrl_timeout_ms
	shift
	ht_start trickle-open "$@" || return 1
	echo 5000 > "$tmo"
	timed 20 "$TERNADM" map "$HT_URI/vol0" "${MAP_OPTS[@]}"
	echo 30000 > "$tmo"
	echo "map: exit $T_RC after $T_TOOK s (bound 20 s): $T_OUT"
	[ "$T_TOOK" -le 20 ] || ok=1
	if [ "$T_RC" = 0 ]; then
		DEV=${T_OUT#/dev/}
		[ "$want" = ok ] || { echo "the map should have failed"; ok=1; }
		read_checked 20 || ok=1
		unmap_ok 15 || ok=1
	else
		[ "$want" = fail ] || { echo "the map should have worked"; ok=1; }
		[ -n "$T_OUT" ] || ok=1
		no_devices || ok=1
	fi
	ht_stop
	return "$ok"
}

# watch_storm: every WATCH answered at once; at most 15 capacity changes
# in 10 s, reads stay right, unmap works
watch_storm() {
	local ok=0 mark n text
	text="detected capacity change"
	mark=$(log_mark)
	map_ok watch-storm -- || { ht_stop; return 1; }
	sleep 5
	read_checked 20 || ok=1
	sleep 5
	n=$(log_count "$mark" "$text")
	echo "capacity changes logged in 10 s: $n; size now $(cat "/sys/block/$DEV/size")"
	[ "$n" -le 15 ] || { echo "resizes are not rate limited"; ok=1; }
	unmap_ok 15 || ok=1
	ht_stop
	return "$ok"
}

run_case() {
	local v
	case $1 in
	1)
		for v in "${C1[@]}"; do
			check "1: HELLO_ACK status $v: map fails within 10 s, no device" \
				map_fails "ack-status=$v" 10
		done
		;;
	2)
		for v in "${C2[@]}"; do
			check "2: HELLO_ACK $v: map fails within 3 s, no device" \
				map_fails "$v" 3
		done
		;;
	3)
		for v in "${C3[@]}"; do
			check "3: OPEN status $v: map fails within 10 s, no device" \
				map_fails "open-status=$v" 10
		done
		;;
	4)
		for v in "${C4[@]}"; do
			check "4: OPEN geometry $v: map fails within 10 s, malformed geometry logged, no device" \
				map_fails "geom=$v" 10 "malformed geometry"
		done
		for v in "${C4I[@]}"; do
			check "4: INFO geometry $v: rescan fails, size kept, malformed geometry logged" \
				info_case "$v"
		done
		;;
	5)
		check "5: a reply to tid 0 first: the lane resets, proto_errors move, the READ fails or is right" \
			io_case tid-zero proto_errors 20
		check "5: a reply to a tid not yet sent first: the lane resets, proto_errors move, the READ fails or is right" \
			io_case tid-future proto_errors 20
		check "5: a reply to a tid of a shard the session lacks first: the lane resets, proto_errors move, the READ fails or is right" \
			io_case tid-shard proto_errors 20
		check "5: a duplicate reply with junk data: discarded, the READ is right" \
			io_case tid-dup - 20
		# two lanes; on whichever the READ comes, the other answers
		MAP_OPTS[1]=2
		HT_BAD=0 IO_TIMEOUT=2000 check "5: a READ answered on the session's other lane: proto_errors move, the READ fails or is right within 45 s" \
			io_case other-lane proto_errors 45
		MAP_OPTS[1]=1
		;;
	6)
		# the messenger takes up to buf_len bytes (protocol.rst): only
		# tern_blk knows a READ wants them all, so no counter here
		check "6: READ reply with half the data: the READ fails or is right" \
			io_case read-short - 20
		check "6: READ reply with data beyond the buffer: proto_errors move, the READ fails or is right" \
			io_case read-long proto_errors 20
		check "6: READ reply with a front: proto_errors move, the READ fails or is right" \
			io_case read-front proto_errors 20
		check "6: READ reply with a front above max_front: proto_errors move, the READ fails or is right" \
			io_case front-big proto_errors 20
		for v in "${C6S[@]}"; do
			check "6: READ answered with status $v: EIO within 20 s, the device reads on" \
				status_case "$v"
		done
		;;
	7)
		IO_TIMEOUT=2000 check "7: READ data trickled, io_timeout 2 s: the lane resets, the READ fails or is right within 45 s" \
			io_case trickle-read reconnects 45
		check "7: OPEN reply trickled on every connection, OPEN timeout 5 s: the map fails within 20 s, no device" \
			trickle_open fail
		check "7: OPEN reply trickled on the first connection, OPEN timeout 5 s: the map works within 20 s after the lane reset" \
			trickle_open ok -N 1
		;;
	8)
		check "8: WATCH storm: at most 15 capacity changes in 10 s, reads right, unmap works" \
			watch_storm
		;;
	9)
		check "9: READ reply with a bad data crc: crc_errors move, the READ fails or is right" \
			io_case bad-crc-read crc_errors 20 --crc
		# each bad reply costs a lane: the OPEN fails once
		# tern.max_lane_faults lanes died under it, 3 here (8 by default)
		echo 3 > /sys/module/tern/parameters/max_lane_faults
		check "9: OPEN reply with a bad data crc: map fails within 20 s (max_lane_faults 3), no device" \
			map_fails bad-crc-open 20 "" --crc
		echo 8 > /sys/module/tern/parameters/max_lane_faults
		;;
	10)
		# the bound is the client's handshake deadline: a short one
		echo 3000 > /sys/module/tern/parameters/handshake_timeout_ms
		check "10: HELLO never answered: map fails within 8 s (handshake_timeout_ms 3 s), no device" \
			map_fails slowloris 8
		check "10: half a HELLO_ACK: map fails within 8 s (handshake_timeout_ms 3 s), no device" \
			map_fails half-ack 8
		echo 10000 > /sys/module/tern/parameters/handshake_timeout_ms
		;;
	11)
		check "11: every connection closed at once: map fails within 3 s, no device" \
			map_fails accept-close 3
		;;
	12)
		for v in "${C12[@]}"; do
			check "12: bench run against HELLO_ACK $v fails within 3 s" \
				bench_fails "$v" 3
		done
		;;
	esac
	cleanup
}

plan=2
for c in $CASES; do
	plan=$((plan + $(case_checks "$c")))
done
ktap_plan "$plan"

mkdir -p "$WORK"
rm -f "$WORK/port" "$WORK/pids"
trap cleanup EXIT
if [ "$TRANSPORT" = rdma ] && { [ -z "$ADDR" ] || [ ! -x "$RELAY" ]; }; then
	ktap_info "no soft-RoCE (run with tools/testing/vm/run --rdma) or no tern_rdma_relay"
	for _ in $(seq "$plan"); do ktap_skip "no RDMA setup"; done
	ktap_finish
fi
check "modules load, the fuzzer is built" \
	bash -c "modprobe tern_$TRANSPORT && modprobe tern_blk && modprobe tern_bench && [ -x '$FUZZ' ]"

for c in $CASES; do
	ktap_info "case $c"
	run_case "$c"
done

check "modules unload" rmmod tern_blk tern_bench "tern_$TRANSPORT" tern
ktap_finish
