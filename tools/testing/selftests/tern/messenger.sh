#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Messenger tests through tern_bench.ko and "ternadm bench": echo round
# trips of many sizes, offsets, both directions, CRC on and off, over
# IPv4 and IPv6, every byte verified; 20k messages on 4 lanes with every
# reply matched exactly once; bad ioctl input refused with nothing
# created; a run interrupted by a signal; clean module unload.
#
# The transport is a parameter: TRANSPORT=tcp (default) or rdma. The URI
# scheme and hosts come from variables, so the same checks run on any
# transport:
#   TERN_SCHEME   URI scheme (default: $TRANSPORT)
#   TERN_HOST4    IPv4 host (tcp: 127.0.0.1, rdma: $TERN_RDMA_ADDR0)
#   TERN_HOST6    IPv6 host in brackets (tcp: [::1], rdma: [$TERN_RDMA_ADDR6_0])
#   TERN_BENCH_PORT  echo port (default 7500)
#   TERNADM       the ternadm binary (default: the one built in the tree)
#   FAULT_EVERY   1-in-N transport failures of the fault run (default 100)
#   FAULT_SECONDS length of the fault run (default 10)

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/stats_lib.sh"

dir=$(cd "$(dirname "$0")" && pwd)
TRANSPORT=${TRANSPORT:-tcp}
SCHEME=${TERN_SCHEME:-$TRANSPORT}
case "$TRANSPORT" in
rdma)
	HOST4=${TERN_HOST4:-${TERN_RDMA_ADDR0:-}}
	HOST6=${TERN_HOST6:-${TERN_RDMA_ADDR6_0:+[$TERN_RDMA_ADDR6_0]}}
	;;
*)
	HOST4=${TERN_HOST4:-127.0.0.1}
	HOST6=${TERN_HOST6:-[::1]}
	;;
esac
PORT=${TERN_BENCH_PORT:-7500}
TERNADM=${TERNADM:-$dir/../../../ternadm/ternadm}
[ -x "$TERNADM" ] || TERNADM=$(command -v ternadm)
URI4=$SCHEME://$HOST4:$PORT
URI6=$SCHEME://$HOST6:$PORT
DEV=/dev/tern-bench

SIZES="0 1 511 4096 4097 65536 1048576 16777216"

bench() {
	"$TERNADM" bench "$@"
}

# ktap_check, then how long the script has been running.
check() {
	ktap_check "$@"
	ktap_info "at ${SECONDS}s"
}

# The messenger's own view, when something went wrong.
dump_debugfs() {
	local f
	for f in /sys/kernel/debug/tern/*/stats /sys/kernel/debug/tern/*/*/stats; do
		[ -f "$f" ] && { echo "== $f"; grep -vE "^lane[0-9]+\.(tx|rx|crc|proto|inj)" "$f"; }
	done
}

# jcheck JSON EXPR: EXPR, a python expression over the object r, holds.
jcheck() {
	python3 - "$1" "$2" <<'PY'
import json, sys
try:
    r = json.loads(sys.argv[1])
except ValueError as e:
    print("not JSON (%s): %r" % (e, sys.argv[1][:200]))
    sys.exit(1)
if not eval("(" + sys.argv[2] + ")", {}, {"r": r}):
    print("failed: %s" % sys.argv[2])
    print("result: %s" % json.dumps(r, sort_keys=True))
    sys.exit(1)
PY
}

# jget JSON KEY: the value of KEY in ternadm's flat JSON object. A tiny
# parser in bash: starting python3 for each of ~80 runs costs minutes
# under emulation.
jget() {
	local re="\"$2\":(\"[^\"]*\"|[^,}]*)"
	[[ $1 =~ $re ]] || { echo "no key $2 in: $1" >&2; return 1; }
	echo "${BASH_REMATCH[1]}"
}

# clean JSON COUNT: a run came out with every request accounted for:
# COUNT messages sent, completed and matched exactly once, nothing lost,
# no error or mismatch, the right byte count.
clean() {
	local j=$1 count=$2 k v size
	for k in errors mismatches dup_completions lost; do
		v=$(jget "$j" $k) || return 1
		[ "$v" = 0 ] || { echo "$k = $v"; echo "$j"; return 1; }
	done
	[ "$(jget "$j" ok)" = true ] || { echo "not ok: $j"; return 1; }
	for k in sent completed messages; do
		v=$(jget "$j" $k) || return 1
		[ "$v" = "$count" ] || { echo "$k = $v, want $count"; echo "$j"; return 1; }
	done
	size=$(jget "$j" size) || return 1
	v=$(jget "$j" bytes) || return 1
	[ "$v" = $((count * size)) ] || { echo "bytes = $v, want $((count * size))"; return 1; }
}

# run_ok URI COUNT EXTRA...: a --count run that must come out clean.
run_ok() {
	local uri=$1 count=$2 out rc
	shift 2
	out=$(bench run "$uri" --json --count "$count" "$@")
	rc=$?
	if [ $rc != 0 ]; then
		echo "ternadm bench run $uri --count $count $*: exit $rc"
		echo "$out"
		return 1
	fi
	clean "$out" "$count" || { echo "args: $uri --count $count $*"; return 1; }
}

# The size matrix on one URI: both directions alternate, every byte
# verified; the big ones run fewer messages at lower depth.
matrix() {
	local uri=$1 s count depth
	shift
	for s in $SIZES; do
		if [ "$s" -ge 16777216 ]; then
			count=2 depth=1
		elif [ "$s" -ge 1048576 ]; then
			count=4 depth=2
		else
			count=16 depth=4
		fi
		run_ok "$uri" $count --size "$s" --depth $depth --dir both \
			--verify "$@" || return 1
	done
}

# One direction at a time, a few sizes.
one_way() {
	local uri=$1 d s
	for d in to from; do
		for s in 1 4097 65536; do
			run_ok "$uri" 8 --size "$s" --depth 2 --dir "$d" \
				--verify --unaligned || return 1
		done
	done
}

# A handshake or connect timeout of 0 once failed every handshake or
# connect; both are taken as 1 s now
zero_timeouts() {
	local rc=0
	setp tern handshake_timeout_ms 0 &&
		setp "tern_$TRANSPORT" connect_timeout_ms 0 || rc=1
	run_ok "$URI4" 200 --lanes 2 --size 4096 --dir both --verify || rc=1
	setp tern handshake_timeout_ms 10000
	setp "tern_$TRANSPORT" connect_timeout_ms 5000
	return $rc
}

stat_of() {
	local j
	j=$(bench stats --json) || return 1
	jget "$j" "$1"
}

many_messages() {
	local before after out dups0 dups1
	before=$(stat_of requests) || return 1
	dups0=$(stat_of duplicates) || return 1
	out=$(timeout -s TERM 150 "$TERNADM" bench run "$URI4" --json --lanes 4 \
		--depth 64 --size 64 --dir both --count 20000)
	echo "$out"
	clean "$out" 20000 || { dump_debugfs; return 1; }
	[ "$(jget "$out" lanes)" = 4 ] || return 1
	after=$(stat_of requests) || return 1
	dups1=$(stat_of duplicates) || return 1
	echo "echo requests $before -> $after, duplicates $dups0 -> $dups1"
	[ $((after - before)) -ge 20000 ] && [ "$dups1" = "$dups0" ]
}

sessions_and_timed() {
	local out
	run_ok "$URI4" 2000 --sessions 4 --lanes 2 --depth 16 --size 4k \
		--dir both --verify --crc || return 1
	out=$(bench run "$URI4" --json --time 2 --depth 32 --size 4k)
	echo "$out"
	clean "$out" "$(jget "$out" sent)" || return 1
	jcheck "$out" "r['messages'] > 0 and r['msgs_per_sec'] > 0 and
0 < r['lat_min_us'] <= r['lat_p50_us'] <= r['lat_p99_us'] <=
r['lat_p999_us'] and r['lat_p50_us'] <= r['lat_max_us'] * 1.04 and
r['nr_cpus'] > 0 and r['cpu_busy_ns'] > 0 and
1.9e9 < r['elapsed_ns'] < 30e9"
}

# Raw ioctls, below ternadm's own checks: each must fail with EINVAL and
# leave no listener, no session and no run endpoint behind.
bad_ioctls() {
	local listeners0 sessions0
	listeners0=$(stat_of listeners) || return 1
	sessions0=$(stat_of sessions) || return 1
	python3 - "$DEV" "$URI4" <<'PY' || return 1
import errno, fcntl, os, struct, sys

dev, uri = sys.argv[1], sys.argv[2].encode()
def IOC(d, nr, size):
    return (d << 30) | (size << 16) | (0xE8 << 8) | nr
SERVE = IOC(1, 1, 168)
RUN = IOC(3, 3, 448)
STATS = IOC(3, 4, 152)

def serve(u, size=168, flags=0, res=0):
    return struct.pack("<II128s4Q", size, flags, u, res, 0, 0, 0)

def run(u=uri, sessions=1, lanes=1, depth=4, d=1, msg=4096, off=0,
        dur=0, count=10, size=448, flags=0, res=0, iw=0, ir=0):
    b = struct.pack("<II128s8IQ2I5Q", size, flags, u, sessions, lanes,
                    depth, d, msg, off, dur, 0, count, iw, ir, 0, 0, 0, 0,
                    res)
    return b + b"\0" * (448 - len(b))

fd = os.open(dev, os.O_RDWR)
cases = [
    ("serve: bad uri", SERVE, serve(b"tcp://1.2.3")),
    ("serve: unknown scheme", SERVE, serve(b"nope://127.0.0.1:7501")),
    ("serve: uri not NUL-terminated", SERVE, serve(b"t" * 128)),
    ("serve: empty uri", SERVE, serve(b"")),
    ("serve: bad size", SERVE, serve(b"tcp://127.0.0.1:7502", size=100)),
    ("serve: flags", SERVE, serve(b"tcp://127.0.0.1:7502", flags=1)),
    ("serve: reserved", SERVE, serve(b"tcp://127.0.0.1:7502", res=1)),
    ("run: depth 0", RUN, run(depth=0)),
    ("run: depth 4097", RUN, run(depth=4097)),
    ("run: oversized payload", RUN, run(msg=(16 << 20) + 1)),
    ("run: sessions 0", RUN, run(sessions=0)),
    ("run: sessions 65", RUN, run(sessions=65)),
    ("run: lanes 0", RUN, run(lanes=0)),
    ("run: lanes 65", RUN, run(lanes=65)),
    ("run: dir 9", RUN, run(d=9)),
    ("run: offset 4096", RUN, run(off=4096)),
    ("run: count and duration", RUN, run(dur=1000)),
    ("run: neither count nor duration", RUN, run(count=0)),
    ("run: duration too long", RUN, run(dur=3600 * 1000 + 1, count=0)),
    ("run: bad uri", RUN, run(u=b"tcp://[::1")),
    ("run: uri not NUL-terminated", RUN, run(u=b"x" * 128)),
    ("run: unknown flags", RUN, run(flags=16)),
    ("run: inline_write above 16 MiB", RUN,
     run(flags=4, iw=(16 << 20) + 1)),
    ("run: inline_read above 16 MiB", RUN, run(flags=8, ir=(16 << 20) + 1)),
    ("run: inline_write without its flag", RUN, run(iw=4096)),
    ("run: inline_read without its flag", RUN, run(flags=4, ir=4096)),
    ("run: bad size", RUN, run(size=447)),
    ("run: reserved", RUN, run(res=1)),
    ("run: too much memory", RUN, run(sessions=64, depth=4096, msg=1 << 20)),
    ("stats: bad size", STATS, struct.pack("<II", 8, 0) + b"\0" * 144),
]
bad = 0
for name, cmd, arg in cases:
    try:
        fcntl.ioctl(fd, cmd, bytearray(arg))
        print("%s: accepted" % name)
        bad += 1
    except OSError as e:
        want = errno.EPROTONOSUPPORT if "scheme" in name else errno.EINVAL
        if e.errno != want:
            print("%s: errno %d, want %d" % (name, e.errno, want))
            bad += 1
try:
    fcntl.ioctl(fd, IOC(3, 0x7f, 8), bytearray(8))
    print("unknown ioctl accepted")
    bad += 1
except OSError as e:
    if e.errno != errno.ENOTTY:
        print("unknown ioctl: errno %d" % e.errno)
        bad += 1
print("%d bad inputs checked, %d wrongly handled" % (len(cases) + 1, bad))
sys.exit(1 if bad else 0)
PY
	# The CLI refuses too, with exit 2, before reaching the kernel.
	bench run "$URI4" --depth 0 --count 1 2>/dev/null; [ $? = 2 ] || return 1
	bench run "$URI4" --size 17m --count 1 2>/dev/null; [ $? = 2 ] || return 1
	bench run "$URI4" --inline-write 17m --count 1 2>/dev/null
	[ $? = 2 ] || return 1
	bench run "$URI4" --inline-read x --count 1 2>/dev/null
	[ $? = 2 ] || return 1
	bench run "$URI4" --depth 2 --depth 3 --count 1 2>/dev/null
	[ $? = 2 ] || return 1
	bench serve "tcp://1.2.3" 2>/dev/null; [ $? = 1 ] || return 1
	[ "$(stat_of listeners)" = "$listeners0" ] || return 1
	[ "$(stat_of sessions)" = "$sessions0" ] || return 1
	if ls -d /sys/kernel/debug/tern/bench_run.* 2>/dev/null; then
		echo "a run endpoint was left behind"
		return 1
	fi
	# good limits are taken (over TCP all data rides in the messages)
	bench run "$URI4" --inline-write 0 --inline-read 4k --count 10 \
		--json | grep -q '"inline_write":0,"inline_read":4096'
}

# A long run stopped by a signal returns quickly; while it runs the module
# refuses to unload. (SIGTERM: background jobs of a script ignore SIGINT.)
interrupt() {
	local pid t0 t1 rc
	[ "$(stat_of sessions)" = 0 ] ||
		{ echo "echo sessions open before the run"; dump_debugfs; return 1; }
	# ternadm itself, not a subshell running the bench() function.
	"$TERNADM" bench run "$URI4" --time 60 --depth 8 --size 4k \
		>/dev/null 2>&1 &
	pid=$!
	sleep 3
	if rmmod tern_bench 2>/dev/null; then
		echo "rmmod tern_bench succeeded during a run"
		return 1
	fi
	t0=$(date +%s)
	kill -TERM $pid
	wait $pid
	rc=$?
	t1=$(date +%s)
	echo "interrupted run: exit $rc after $((t1 - t0)) s"
	[ $rc != 0 ] && [ $((t1 - t0)) -lt 15 ] || return 1
	# Its session closes on the echo side too.
	for _ in $(seq 50); do
		[ "$(stat_of sessions)" = 0 ] && return 0
		sleep 0.2
	done
	echo "echo sessions still open: $(stat_of sessions)"
	dump_debugfs
	return 1
}

echo_clean() {
	local k v
	bench stats
	for k in verify_errors errors duplicates; do
		v=$(stat_of $k) || return 1
		[ "$v" = 0 ] || { echo "echo $k = $v"; return 1; }
	done
}


# One in 100 transport operations fails for a minute of verified echo:
# lanes break and reconnect, requests are resent, and every one of them
# still completes exactly once with its data intact.
faults() {
	local out rc r0 r1 i0 i1 s0 s1
	r0=$(total_of reconnects) i0=$(total_of injected) s0=$(total_of resends)
	echo "${FAULT_EVERY:-100}" > /sys/module/tern/parameters/inject_fail_every
	out=$(bench run "$URI4" --json --time "${FAULT_SECONDS:-10}" --lanes 2 \
		--depth 16 --size 4k --dir both --verify)
	rc=$?
	echo 0 > /sys/module/tern/parameters/inject_fail_every
	r1=$(total_of reconnects) i1=$(total_of injected) s1=$(total_of resends)
	echo "$out"
	echo "injected $i0 -> $i1, reconnects $r0 -> $r1, resends $s0 -> $s1"
	[ $rc = 0 ] || { dump_debugfs; return 1; }
	clean "$out" "$(jget "$out" sent)" || return 1
	[ "$(jget "$out" sent)" -gt 0 ] && [ "$i1" -gt "$i0" ] && [ "$r1" -gt "$r0" ]
}

stop_all() {
	bench stop || return 1
	[ "$(stat_of listeners)" = 0 ] && [ "$(stat_of sessions)" = 0 ] ||
		return 1
	# Nothing listens any more: a run fails to connect, exit 1.
	bench run "$URI4" --count 1 2>&1
	[ $? = 1 ]
}

unload() {
	local m
	for m in tern_bench "tern_$TRANSPORT" tern; do
		rmmod "$m" || return 1
	done
	! grep -qE "^(tern|tern_bench|tern_$TRANSPORT) " /proc/modules
}

# Zero-copy counters, so that a silent fallback to inline data fails: over
# RDMA the size matrix above the inline threshold registered MRs, the
# echo READ and WROTE the data and the replies invalidated the requester's
# rkeys; over TCP the core never moved data remotely.
zero_copy() {
	local f=/sys/kernel/debug/tern_rdma/stats k v pulls pushes
	pulls=$(total_of remote_pulls) pushes=$(total_of remote_pushes)
	echo "core: remote_pulls $pulls, remote_pushes $pushes"
	if [ "$TRANSPORT" != rdma ]; then
		[ "$pulls" = 0 ] && [ "$pushes" = 0 ]
		return
	fi
	cat "$f" || return 1
	for k in registrations zc_requests local_invalidates \
		remote_invalidates rdma_reads rdma_read_bytes rdma_writes \
		rdma_write_bytes; do
		v=$(awk -v k=$k '$1 == k { print $2 }' "$f")
		[ "${v:-0}" -gt 0 ] || { echo "$k = ${v:-missing}"; return 1; }
	done
	[ "$pulls" -gt 0 ] && [ "$pushes" -gt 0 ]
}

# Packets on the loopback per message of a closed loop of 64-byte
# requests at depth 64 (TCP only: every lane is on lo).
lo_packets_per_msg() {
	local p0 p1 out
	p0=$(cat /sys/class/net/lo/statistics/tx_packets) || return 1
	out=$(bench run "$URI4" --json --count 5000 --depth 64 --size 64 \
		--dir to) || { echo "$out"; return 1; }
	clean "$out" 5000 >&2 || return 1
	p1=$(cat /sys/class/net/lo/statistics/tx_packets) || return 1
	echo $(((p1 - p0) * 100 / 5000))
}

# io_work receives a batch of frames (tern_tcp.rx_batch) before it
# sends, so the replies to a batch leave together: under one packet per
# message (0.33 measured; 1.3 to 1.4 with rx_batch=0, a send step after
# each receive step), at both io_work priorities, the high one's run
# verified.
gathered_replies() {
	local p=/sys/module/tern_tcp/parameters pkts hp rc=0
	for hp in 0 1; do
		echo $hp > $p/highpri || rc=1
		pkts=$(lo_packets_per_msg) || rc=1
		echo "highpri=$hp: $pkts packets per 100 messages"
		[ $rc = 0 ] && [ "$pkts" -lt 100 ] || rc=1
	done
	run_ok "$URI4" 64 --size 4097 --depth 8 --dir both --verify || rc=1
	echo 0 > $p/highpri
	return $rc
}

# A reply made in io_work (the echo answers in its receive callback)
# leaves in that run's send phase without queueing io_work again. At
# depth 1 io_work is queued three times per message: by each side's
# sk_data_ready and by the bench's sender, which cannot sleep (four
# when the reply queued it again, as measured before).
io_work_queued() {
	local t=/sys/kernel/tracing ev n rc=0
	[ -d $t/events ] || mount -t tracefs nodev $t || return 1
	ev=$t/events/workqueue/workqueue_queue_work
	echo 'workqueue ~ "tern_tcp*"' > $ev/filter || return 1
	echo > $t/trace
	echo 1 > $ev/enable || return 1
	run_ok "$URI4" 2000 --depth 1 --size 64 || rc=1
	echo 0 > $ev/enable
	n=$(grep -c workqueue_queue_work $t/trace)
	echo 0 > $ev/filter
	echo > $t/trace
	echo "io_work queued $n times for 2000 messages"
	[ $rc = 0 ] && [ "$n" -ge 4000 ] && [ "$n" -lt 7000 ]
}

slab_kb() {
	sed -n 's/^Slab: *\([0-9]*\) kB/\1/p' /proc/meminfo
}

# Over another transport the ioctl checks, which stop before any
# transport, are not planned, nor two of the six size matrices: CRC on
# aligned buffers (rdma.sh's zero-copy runs check CRCs on them), and IPv6
# with CRC (the address family and the CRC meet in no transport code).
PLANNED=24
[ "$TRANSPORT" = tcp ] || PLANNED=19
ktap_plan $PLANNED

if [ -z "$HOST4" ] || [ ! -x "$TERNADM" ]; then
	ktap_info "no host for $TRANSPORT or no ternadm ($TERNADM)"
	for _ in $(seq $PLANNED); do ktap_skip "setup missing"; done
	ktap_finish
fi

slab0=$(slab_kb)
check "modules tern, tern_$TRANSPORT, tern_bench load; $DEV exists" \
	bash -c "modprobe tern && modprobe tern_$TRANSPORT && modprobe tern_bench && [ -c $DEV ]"
check "echo serves $URI4" bench serve "$URI4"
if [ -n "$HOST6" ]; then
	check "echo serves $URI6" bench serve "$URI6"
else
	ktap_skip "no IPv6 host for $TRANSPORT"
fi
check "serving the same URI twice is refused" \
	bash -c "! '$TERNADM' bench serve '$URI4' 2>&1"
[ "$TRANSPORT" = tcp ] &&
	check "bad ioctl input is refused and creates nothing; good inline limits are taken" \
		bad_ioctls

# IPv4: CRC off and on, aligned and not. IPv6, the same paths with
# another address family: two of the four, to keep the script short.
check "IPv4 sizes 0..16M both ways, verified, crc off, aligned" \
	matrix "$URI4"
[ "$TRANSPORT" = tcp ] &&
	check "IPv4 sizes 0..16M both ways, verified, crc on, aligned" \
		matrix "$URI4" --crc
check "IPv4 sizes 0..16M both ways, verified, crc off, offset 513" \
	matrix "$URI4" --unaligned
check "IPv4 sizes 0..16M both ways, verified, crc on, offset 1" \
	matrix "$URI4" --crc --offset 1
if [ -n "$HOST6" ]; then
	check "IPv6 sizes 0..16M both ways, verified, crc off, aligned" \
		matrix "$URI6"
	[ "$TRANSPORT" = tcp ] &&
		check "IPv6 sizes 0..16M both ways, verified, crc on, offset 513" \
			matrix "$URI6" --crc --unaligned
else
	ktap_skip "no IPv6 host for $TRANSPORT"
	[ "$TRANSPORT" = tcp ] && ktap_skip "no IPv6 host for $TRANSPORT"
fi
check "one direction at a time (to, from), unaligned, verified" \
	one_way "$URI4"
check "tern.handshake_timeout_ms and tern_$TRANSPORT.connect_timeout_ms at 0 (taken as 1 s): a new session connects, verified" \
	zero_timeouts
check "data moved zero-copy over rdma (counters), never over tcp" zero_copy
check "20k messages on 4 lanes: all matched once, echo saw >= 20k, no duplicates" \
	many_messages
check "4 sessions x 2 lanes with crc, verified; a timed run reports sane numbers" \
	sessions_and_timed
[ "$TRANSPORT" = tcp ] &&
	check "replies leave together: under 1 packet per message at depth 64, io_work at normal and high priority" \
		gathered_replies
[ "$TRANSPORT" = tcp ] &&
	check "a reply made in io_work leaves in that run: io_work queued under 3.5 times per message at depth 1" \
		io_work_queued
check "a run interrupted by a signal ends cleanly; rmmod refused meanwhile" \
	interrupt
check "echo counters: no verify errors, no errors, no duplicates" \
	echo_clean
check "1 in ${FAULT_EVERY:-100} transport operations failing for ${FAULT_SECONDS:-10}s: all requests complete once, verified, lanes reconnected" \
	faults
check "bench stop closes every listener and session" stop_all
check "rmmod tern_bench tern_$TRANSPORT tern" unload
slab1=$(slab_kb)
ktap_info "Slab: ${slab0} kB before loading, ${slab1} kB after unloading"
check "slab usage back near its baseline (within 8 MiB)" \
	test $((slab1 - slab0)) -lt 8192
ktap_finish
