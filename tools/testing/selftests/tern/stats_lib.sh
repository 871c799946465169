#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tern.ko's counters and memory checks for the shell selftests (sourced,
# after ktap.sh).

_stats_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# total_of NAME: a lane counter summed over every lane since tern loaded
total_of() {
	awk -v k="$1" '$1 == k { print $2 }' /sys/kernel/debug/tern/stats
}

# Bytes held by the generic kmalloc caches: a leak shows here once the
# modules are gone.
kmalloc_bytes() {
	awk '$1 ~ /^kmalloc-[0-9kr]/ { b += $2 * $4 } END { print b + 0 }' /proc/slabinfo
}

# kmalloc bytes once delayed frees settled: the lowest of a few samples
kmalloc_settled() {
	local b min=
	sync
	echo 3 > /proc/sys/vm/drop_caches
	for _ in 1 2 3; do
		sleep 0.5
		b=$(kmalloc_bytes)
		[ -z "$min" ] || [ "$b" -lt "$min" ] && min=$b
	done
	echo "$min"
}

mem_avail_kb() {
	awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo
}

# ep_stat NAME: a counter of the bench echo's endpoint, -1 if absent
ep_stat() {
	cat /sys/kernel/debug/tern/bench_echo.*/stats 2>/dev/null |
		awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print -1 }'
}

# setp MODULE PARAM VALUE: set a module parameter, or say it is missing
setp() {
	if ! { echo "$3" > "/sys/module/$1/parameters/$2"; } 2>/dev/null; then
		ktap_info "no parameter $1.$2"
		return 1
	fi
}

# kmalloc_back_to BASE: a check that the kmalloc caches, caches dropped,
# hold less than 512 KiB more than BASE (from kmalloc_bytes)
kmalloc_back_to() {
	local base=$1 after

	sync
	echo 3 > /proc/sys/vm/drop_caches
	sleep 1
	after=$(kmalloc_bytes)
	ktap_info "kmalloc caches: $base bytes before, $after after"
	if [ $((after - base)) -lt $((512 * 1024)) ]; then
		ktap_pass "kmalloc usage back to baseline (+$((after - base)) bytes)"
	else
		ktap_fail "kmalloc usage back to baseline (+$((after - base)) bytes)"
	fi
}

# bg_ready PATTERN SECONDS FILE COMMAND...: COMMAND in the background
# (pid in bg_pid), its output in FILE; waits at most SECONDS for a line
# that matches PATTERN (grep), fails at once if COMMAND exits first.
bg_ready() {
	local pat=$1 t=$2 file=$3 i
	shift 3
	"$@" > "$file" 2>&1 &
	bg_pid=$!
	for ((i = 0; i < t * 10; i++)); do
		grep -q -- "$pat" "$file" && return 0
		kill -0 "$bg_pid" 2>/dev/null || break
		sleep 0.1
	done
	cat "$file"
	return 1
}

# flood_start NAME SECONDS ARGS...: tern_fuzz ARGS against 127.0.0.1:$port
# in the background (pid in flood_pid), output in $tmp/NAME; waits at most
# SECONDS for its "ready" line. Uses the caller's $dir, $port and $tmp.
flood_start() {
	local name=$1 t=$2 rc
	shift 2
	bg_ready ' ready$' "$t" "$tmp/$name" \
		"$dir/tern_fuzz" -a 127.0.0.1 -p "$port" "$@"
	rc=$?
	flood_pid=$bg_pid
	return $rc
}

# relay_bg LOG PIDS ACCEPT CONNECT [OPTION...]: tern_rdma_relay -a
# ACCEPT -c CONNECT OPTION... in the background, its output in LOG, its
# pid in relay_pid and added to the file PIDS (for an exit trap: checks
# run in subshells); waits until it listens. Loads the modules that
# give userspace its verbs first.
relay_bg() {
	local log=$1 pids=$2 rc
	shift 2
	modprobe rdma_ucm && modprobe ib_uverbs || return 1
	bg_ready "^relay:" 5 "$log" "$_stats_lib_dir/tern_rdma_relay" \
		-a "$1" -c "$2" "${@:3}"
	rc=$?
	relay_pid=$bg_pid
	echo "$relay_pid" >> "$pids"
	return $rc
}

# json_field NAME FILE: a number from ternadm's one-line JSON
json_field() {
	sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$2"
}

# bench_clean FILE: a verified bench run's JSON (printed) shows every
# request answered once and nothing failed
bench_clean() {
	local f v bad=0
	cat "$1"
	for f in errors mismatches lost dup_completions; do
		v=$(json_field $f "$1")
		[ "${v:-x}" = 0 ] || { echo "$f: ${v:-missing}"; bad=1; }
	done
	v=$(json_field completed "$1")
	[ "${v:-0}" -gt 0 ] || { echo "nothing completed"; bad=1; }
	return $bad
}

# log_mark: write a line to read from into the kernel log, and print it:
# checks read the log from a mark, not from a line count or a total, as
# the log ring drops its oldest lines
log_mark() {
	local m="tern selftest ${0##*/} mark $BASHPID $SECONDS $RANDOM"
	echo "$m" > /dev/kmsg
	echo "$m"
}

# log_since MARK: the kernel log from MARK on; fails, saying so, when
# the ring dropped the mark (nothing would look logged)
log_since() {
	local out
	out=$(dmesg | sed -n "/$1/,\$p")
	[ -n "$out" ] || { echo "the kernel log lost the mark '$1'" >&2; return 1; }
	echo "$out"
}

# log_count MARK TEXT: kernel log lines holding TEXT since MARK; prints
# nothing when the mark is lost, which no comparison takes for a count
log_count() {
	local out
	out=$(log_since "$1") || return 1
	grep -c -- "$2" <<< "$out"
}
