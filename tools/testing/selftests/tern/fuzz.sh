#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A hostile peer against a tern TCP listener: tern_fuzz sends >= 4k
# malformed frames over many connections. The listener must count the
# protocol errors, keep accepting, still serve a good client with its
# data intact, free what the junk allocated, and let the modules unload.
# Then requests with remote data descriptors (TERN_WIRE_F_REMOTE), well
# formed and not, after handshakes offering TERN_FEAT_REMOTE_DATA: TCP
# has no remote memory access, so the feature is never granted, no such
# request is answered, and every one drops its lane with a protocol
# error counted. The lane fails the run on any oops or WARN.
#
# With TRANSPORT=rdma (fuzz_rdma.sh) the listener is tern_rdma's on
# soft-RoCE and tern_fuzz reaches it through tern_rdma_relay: fewer
# frames (each connection is a queue pair), and no F_REMOTE cases, as
# RDMA grants remote data (rdma.sh injects bad keys and lengths there).

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/stats_lib.sh"
dir=$(cd "$(dirname "$0")" && pwd)
ternadm=$TERN_SRC/tools/ternadm/ternadm
port=7611
TRANSPORT=${TRANSPORT:-tcp}
if [ "$TRANSPORT" = rdma ]; then
	frames=${FUZZ_FRAMES:-250}
	uri=rdma://${TERN_RDMA_ADDR0:-}:$port
	# tern_fuzz speaks TCP: to the relay in front of the listener
	fuzz_port=$((port + 1))
	fuzz_opts=(-x remote-request -x remote-bad-desc)
else
	frames=${FUZZ_FRAMES:-4000}
	uri=tcp://127.0.0.1:$port
	fuzz_port=$port
	fuzz_opts=()
fi

# Sum a counter over every endpoint's and session's stats in debugfs.
tern_counter() {
	cat /sys/kernel/debug/tern/*/stats /sys/kernel/debug/tern/*/*/stats 2>/dev/null |
		awk -v k="$1" '$1 ~ ("(^|\\.)" k "$") { n += $2 } END { print n + 0 }'
}


# remote_case CASE: tern_fuzz runs only CASE; each F_REMOTE request must
# have been refused (tern_fuzz checks the HELLO_ACK and the drop) and
# counted as a protocol error.
remote_case() {
	local out rc p0 p1 sent
	p0=$(total_of proto_errors)
	out=$("$dir/tern_fuzz" -a 127.0.0.1 -p "$fuzz_port" -n 600 -c "$1" 2>&1)
	rc=$?
	p1=$(total_of proto_errors)
	echo "$out"
	sent=$(echo "$out" | sed -n 's/.*remote-data requests \([0-9]*\) .*/\1/p')
	echo "F_REMOTE requests $sent, proto_errors $p0 -> $p1"
	[ "$rc" = 0 ] && [ "${sent:-0}" -ge 100 ] &&
		[ $((p1 - p0)) -ge "$sent" ]
}

if [ "$TRANSPORT" = rdma ]; then
	ktap_plan 9
	if [ -z "${TERN_RDMA_ADDR0:-}" ] || [ ! -x "$dir/tern_rdma_relay" ]; then
		ktap_info "no soft-RoCE (run with tools/testing/vm/run --rdma) or no tern_rdma_relay"
		for _ in $(seq 9); do ktap_skip "no RDMA setup"; done
		ktap_finish
	fi
else
	ktap_plan 10
fi

sync
echo 3 > /proc/sys/vm/drop_caches
base=$(kmalloc_bytes)

modprobe "tern_$TRANSPORT" && modprobe tern_bench
ktap_check "echo service listens on $uri" "$ternadm" bench serve "$uri"
if [ "$TRANSPORT" = rdma ]; then
	relay_log=$(mktemp)
	# not in ktap_check: its subshell would keep relay_pid
	if relay_bg "$relay_log" /dev/null "tcp://127.0.0.1:$fuzz_port" "$uri"; then
		ktap_pass "tern_rdma_relay carries tcp://127.0.0.1:$fuzz_port to $uri"
	else
		ktap_fail "tern_rdma_relay carries tcp://127.0.0.1:$fuzz_port to $uri"
	fi
fi

out=$("$dir/tern_fuzz" -a 127.0.0.1 -p "$fuzz_port" -n "$frames" \
	"${fuzz_opts[@]}" 2>&1)
rc=$?
echo "$out" | ktap_comment
sent=$(echo "$out" | sed -n 's/.*frames \([0-9]*\) connections \([0-9]*\).*/\1/p')
conns=$(echo "$out" | sed -n 's/.*frames \([0-9]*\) connections \([0-9]*\).*/\2/p')
if [ "$TRANSPORT" = rdma ]; then
	# each of tern_fuzz's connections became an RDMA connection the
	# listener accepted: else the relay, not the listener, took them.
	# A lane the listener closed on its junk before its CM saw the
	# relay's RTU ends with a reject, not a disconnect: counted only.
	relayed=$(grep -c ": established$" "$relay_log")
	late=$(grep -c ": closed (rejected)$" "$relay_log")
	ktap_info "relayed: $relayed connections established, $late of them ended by a reject"
	[ "$relayed" -ge "${conns:-1}" ] || rc=1
fi
if [ "$rc" = 0 ] && [ "${sent:-0}" -ge "$frames" ]; then
	ktap_pass "listener kept accepting through $sent malformed frames on $conns connections"
else
	ktap_fail "listener kept accepting through the malformed frames (exit $rc)"
fi

errors=$(( $(tern_counter proto_errors) + $(tern_counter crc_errors) ))
ktap_info "protocol+crc errors counted: $errors"
if [ "$errors" -ge $((conns / 4)) ]; then
	ktap_pass "protocol errors were counted ($errors for $conns connections)"
else
	ktap_fail "protocol errors were counted ($errors for $conns connections)"
fi

ktap_check "a good client is served afterwards, data verified" \
	"$ternadm" bench run "$uri" --count 2000 --size 4k \
	--dir both --verify --crc

if [ "$TRANSPORT" = rdma ]; then
	kill "$relay_pid"
	wait "$relay_pid" 2>/dev/null
	rm -f "$relay_log"
else
	ktap_check "well-formed F_REMOTE requests over tcp: feature never granted, never answered, lane dropped, counted" \
		remote_case remote-request
	ktap_check "malformed F_REMOTE requests over tcp: never answered, lane dropped, counted" \
		remote_case remote-bad-desc
fi
ktap_check "a good client is still served, 64k both ways with crc, verified" \
	"$ternadm" bench run "$uri" --count 500 --size 64k \
	--dir both --verify --crc

ktap_check "echo service stops" "$ternadm" bench stop
ktap_check "modules unload" modprobe -r tern_bench "tern_$TRANSPORT" tern

kmalloc_back_to "$base"
ktap_finish
