#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The block matrix of `make bench`, inside the guest (tools/testing/vm/run
# --rdma --no-debug): one memory-backed null_blk device exported at once
# by tern_target (TCP and RDMA ports) and by nvmet (TCP, RDMA and loop
# ports), mapped back over each, and fio run against every device, the
# local null_blk included as the ceiling. Rounds repeat the whole matrix
# and the device order rotates from round to round, so devices alternate
# instead of running back to back. Prints one JSON object per device
# ("BLK-DEV ") and per fio run ("BLK-RAW ").
#
# Environment (defaults in brackets):
#   BENCH_ROUNDS [3]        repetitions of the matrix
#   BENCH_RUNTIME [5]       measured seconds per fio run
#   BENCH_RAMP [1]          fio ramp_time seconds before the measurement
#   BENCH_QUEUES [CPUs]     tern lanes = nvme nr_io_queues = null_blk queues
#   BENCH_QUEUE_DEPTH [128] requests per hardware queue, every device
#   BENCH_GB [1]            size of the null_blk device, GiB
#   BENCH_DEVICES           subset, e.g. "tern-tcp nvme-tcp" [all eight]
#   BENCH_WORKLOADS         subset of workload names [all seven]
#   BENCH_PROFILE [0]       N > 0: after the measured rounds, one more
#                           run per device and workload under perf record
#                           (all CPUs, call graphs off), printing the N
#                           hottest symbols with their share and CPU
#                           microseconds per I/O ("BLK-PROFILE ");
#                           diagnostic, never mixed into the samples
#   BENCH_CALLS [0]         N > 0: after the measured rounds, two more
#                           runs per device and workload under the
#                           function tracer, of N/4 and 5N/4 I/Os per
#                           job, the first subtracted; printing every
#                           kernel function called at least 0.02 times
#                           per I/O with its calls per I/O ("BLK-CALLS ");
#                           exact counts, unlike the sampled profile;
#                           diagnostic, never mixed into the samples
#   BENCH_SWITCHES [0]      1: after the measured rounds, one more run
#                           per device and workload counting the
#                           scheduler's context switches by the task that
#                           left the CPU, its state (R+: preempted, R:
#                           yielded, S, D or I: went to sleep, I for an
#                           idle kworker) and the task that took it, per
#                           I/O ("BLK-SWITCHES "); diagnostic, never
#                           mixed into the samples
#   BENCH_FAILOVER [5]      with tern-mp: times to measure a failover, a
#                           device of two TCP paths under fio whose
#                           first path is cut (every packet dropped);
#                           "BLK-FAILOVER " lines, ms until the other
#                           path carries the I/O
#   BENCH_CIPHERS [1]       with tern-tcp-enc or tern-tcp-int: time their
#                           ciphers (and ChaCha20-Poly1305) alone after
#                           the rounds (the kernel's tcrypt, 4 KiB per
#                           operation): "BLK-CIPHER " lines, what they
#                           cost per I/O at the least
#   BENCH_PARAMS            tern module parameters to set before mapping,
#                           "MODULE.PARAM=VALUE ...", for A/B runs
#                           (e.g. "tern_tcp.direct_send=0") []
set -euo pipefail

src=${TERN_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
ternadm=$src/tools/ternadm/ternadm
rounds=${BENCH_ROUNDS:-3}
runtime=${BENCH_RUNTIME:-5}
ramp=${BENCH_RAMP:-1}
ncpu=$(nproc)
queues=${BENCH_QUEUES:-$ncpu}
qdepth=${BENCH_QUEUE_DEPTH:-128}
gb=${BENCH_GB:-1}
nqn=nqn.2014-08.org.tern:bench
hostid=7e2b5a6c-0b1e-4c55-9d2e-6f1d3c0a7b41
hostnqn=nqn.2014-08.org.nvmexpress:uuid:$hostid
nvmet=/sys/kernel/config/nvmet
tern_port=7447
nvme_port=4420
tmp=$(mktemp -d /tmp/tern-blk.XXXXXX)

# name rw bs iodepth numjobs
workloads=(
	"4k-randread-qd32-j1 randread 4k 32 1"
	"4k-randread-qd32-j2 randread 4k 32 2"
	"4k-randwrite-qd32-j1 randwrite 4k 32 1"
	"4k-randwrite-qd32-j2 randwrite 4k 32 2"
	"4k-randread-qd1-j1 randread 4k 1 1"
	"256k-randread-qd16-j1 randread 256k 16 1"
	"256k-randwrite-qd16-j1 randwrite 256k 16 1"
)
# tern-tcp-auth: authenticated; tern-tcp-enc: authenticated and encrypted;
# tern-tcp-int: authenticated and signed; tern-mp: two TCP paths (to
# 127.0.0.1 and 127.0.0.2), round-robin, as many lanes in all as tern-tcp
all_devices=(tern-tcp tern-tcp-auth tern-tcp-enc tern-tcp-int tern-mp
	     nvme-tcp tern-rdma nvme-rdma nvme-loop local)
mp_addr=127.0.0.2	# tern-mp's second path, which a failover cuts
cut_pref=10		# the rule that cuts it, before the local table's
local_pref=100		# where the local table's rule moves meanwhile
read -r -a devices <<< "${BENCH_DEVICES:-${all_devices[*]}}"
declare -A path
nvme_ctrls=()
tern_devs=()

log() {
	echo "blk-matrix: $*" >&2
}

die() {
	log "$*"
	exit 1
}

wanted() {
	local d
	for d in "${devices[@]}"; do
		[ "$d" = "$1" ] && return 0
	done
	return 1
}

rdma_addr() {
	[ -n "${TERN_RDMA_ADDR0:-}" ] || die "no TERN_RDMA_ADDR0: run the guest with --rdma"
	echo "$TERN_RDMA_ADDR0"
}

cleanup() {
	local c p
	set +e
	for p in "${tern_devs[@]}"; do
		"$ternadm" unmap "$p"
	done
	for c in "${nvme_ctrls[@]}"; do
		echo 1 > "/sys/class/nvme/$c/delete_controller"
	done
	if [ -d "$nvmet/subsystems/$nqn" ]; then
		for p in "$nvmet"/ports/*; do
			[ -d "$p" ] || continue
			rm -f "$p/subsystems/$nqn"
			rmdir "$p"
		done
		echo 0 > "$nvmet/subsystems/$nqn/namespaces/1/enable"
		rmdir "$nvmet/subsystems/$nqn/namespaces/1" "$nvmet/subsystems/$nqn"
	fi
	for p in tcp tcp2 rdma; do
		"$ternadm" target unlink "bench-$p" bench 2>/dev/null
		"$ternadm" target port del "bench-$p" 2>/dev/null
	done
	ip rule del pref "$cut_pref" 2>/dev/null
	if ip rule show pref "$local_pref" | grep -q local; then
		ip rule add pref 0 lookup local
		ip rule del pref "$local_pref"
	fi
	"$ternadm" target export del bench 2>/dev/null
	"$ternadm" target host del bench-host 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# The backend: null_blk in memory, completing in the submitter's context,
# one queue per CPU, written once in full so that reads find data, not
# holes, and writes replace pages instead of allocating them.
setup_backend() {
	modprobe null_blk nr_devices=1 queue_mode=2 memory_backed=1 gb="$gb" \
		bs=4096 irqmode=0 blocking=0 submit_queues="$queues" \
		poll_queues=0 hw_queue_depth="$qdepth" max_sectors=2048
	[ -b /dev/nullb0 ] || die "no /dev/nullb0"
	dd if=/dev/zero of=/dev/nullb0 bs=1M count=$((gb * 1024)) oflag=direct \
		status=none
	path[local]=/dev/nullb0
}

# tern_port NAME URI: a port of the target with the export, once
tern_port() {
	[ -d "/sys/kernel/config/tern/ports/$1" ] && return
	"$ternadm" target port add "$1" "$2"
	"$ternadm" target link "$1" bench
}

# tern_map TRANSPORT ADDRESS [NAME MAP-OPTIONS...]: a port for the
# transport, once, and the export mapped through it as device NAME
# (default tern-TRANSPORT), with $map_lanes lanes (default a queue each)
tern_map() {
	local t=$1 addr=$2 name=${3:-tern-$1} dev
	shift 3 || shift 2
	tern_port "bench-$t" "$t://$addr:$tern_port"
	dev=$("$ternadm" map "$t://$addr:$tern_port/bench" \
	      --lanes "${map_lanes:-$queues}" --queue-depth "$qdepth" "$@")
	tern_devs+=("$dev")
	path[$name]=$dev
}

# The lanes of each of two paths that make as many as tern-tcp has
mp_lanes() {
	echo $(((queues + 1) / 2))
}

# BENCH_PARAMS: MODULE.PARAM=VALUE words, written to sysfs.
set_params() {
	local p mod val
	for p in ${BENCH_PARAMS:-}; do
		mod=${p%%.*}
		val=${p#*=}
		p=${p#*.}
		p=${p%%=*}
		echo "$val" > "/sys/module/$mod/parameters/$p"
		echo "bench: $mod.$p=$(cat "/sys/module/$mod/parameters/$p")" >&2
	done
}

setup_tern() {
	# A host's udev loads the CPU's AES-NI and CLMUL ciphers at boot (by
	# the CPU's modalias); the guest has no coldplug, and without them
	# the kernel's TLS seals with the generic C AES
	modprobe -q aesni_intel || true
	modprobe -q ghash-clmulni-intel || true
	modprobe tern_tcp
	modprobe tern_target
	modprobe tern_blk
	if wanted tern-rdma; then
		modprobe tern_rdma
	fi
	set_params
	"$ternadm" target export add bench /dev/nullb0
	if wanted tern-tcp; then
		tern_map tcp 127.0.0.1
	fi
	# the same port and export, as a host that proves its key; one map
	# each (--new), which a second map of one identity needs
	if wanted tern-tcp-auth || wanted tern-tcp-enc ||
		wanted tern-tcp-int; then
		"$ternadm" key generate --out "$tmp/key"
		"$ternadm" target host add bench-host --key-file "$tmp/key"
	fi
	if wanted tern-tcp-auth; then
		tern_map tcp 127.0.0.1 tern-tcp-auth --host bench-host \
			--key-file "$tmp/key" --new
	fi
	if wanted tern-tcp-enc; then
		tern_map tcp 127.0.0.1 tern-tcp-enc --host bench-host \
			--key-file "$tmp/key" --encrypt --new
	fi
	if wanted tern-tcp-int; then
		tern_map tcp 127.0.0.1 tern-tcp-int --host bench-host \
			--key-file "$tmp/key" --integrity --new
	fi
	if wanted tern-rdma; then
		tern_map rdma "$(rdma_addr)"
	fi
	if wanted tern-mp; then
		tern_port bench-tcp2 "tcp://$mp_addr:$tern_port"
		map_lanes=$(mp_lanes) tern_map tcp 127.0.0.1 tern-mp \
			--path "tcp://$mp_addr:$tern_port" \
			--iopolicy round-robin --new
	fi
}

nvmet_port() {
	local trtype=$2 addr=${3:-} p=$nvmet/ports/$1
	mkdir "$p"
	echo "$trtype" > "$p/addr_trtype"
	if [ -n "$addr" ]; then
		echo ipv4 > "$p/addr_adrfam"
		echo "$addr" > "$p/addr_traddr"
		echo "$nvme_port" > "$p/addr_trsvcid"
	fi
	ln -s "$nvmet/subsystems/$nqn" "$p/subsystems/$nqn"
}

# Connect through /dev/nvme-fabrics with an explicit option string (one
# write, as the kernel wants it); the reply names the controller.
nvme_connect() {
	local name=$1 opts=$2 reply ctrl ns='' f i
	reply=$(python3 -c '
import os, sys
fd = os.open("/dev/nvme-fabrics", os.O_RDWR)
os.write(fd, sys.argv[1].encode())
print(os.read(fd, 4096).decode().strip())
os.close(fd)' "$opts") || die "$name: connect failed: $opts"
	ctrl=nvme$(echo "$reply" | sed -n 's/.*instance=\([0-9]*\).*/\1/p')
	[ "$ctrl" != nvme ] || die "$name: no instance in '$reply'"
	nvme_ctrls+=("$ctrl")
	# Namespaces are scanned after the connect returns.
	for i in $(seq 100); do
		for f in "/sys/class/nvme/$ctrl/${ctrl}"n*; do
			[ -b "/dev/${f##*/}" ] && ns=${f##*/} && break 2
		done
		sleep 0.1
	done
	[ -n "$ns" ] || die "$name: $ctrl has no namespace"
	path[$name]=/dev/$ns
}

setup_nvme() {
	local common

	# One block device per controller: no native multipath.
	modprobe nvme_core multipath=N
	[ "$(cat /sys/module/nvme_core/parameters/multipath)" = N ] ||
		die "nvme_core was loaded with multipath on"
	modprobe nvmet
	modprobe nvme_fabrics
	mkdir "$nvmet/subsystems/$nqn"
	echo 1 > "$nvmet/subsystems/$nqn/attr_allow_any_host"
	mkdir "$nvmet/subsystems/$nqn/namespaces/1"
	echo -n /dev/nullb0 > "$nvmet/subsystems/$nqn/namespaces/1/device_path"
	echo 1 > "$nvmet/subsystems/$nqn/namespaces/1/enable"

	common="nqn=$nqn,hostnqn=$hostnqn,hostid=$hostid,nr_io_queues=$queues,queue_size=$qdepth"
	if wanted nvme-tcp; then
		modprobe nvmet_tcp
		modprobe nvme_tcp
		nvmet_port 1 tcp 127.0.0.1
		nvme_connect nvme-tcp "transport=tcp,traddr=127.0.0.1,trsvcid=$nvme_port,$common"
	fi
	if wanted nvme-rdma; then
		modprobe nvmet_rdma
		modprobe nvme_rdma
		nvmet_port 2 rdma "$(rdma_addr)"
		nvme_connect nvme-rdma "transport=rdma,traddr=$(rdma_addr),trsvcid=$nvme_port,$common"
	fi
	if wanted nvme-loop; then
		modprobe nvme_loop
		nvmet_port 3 loop
		nvme_connect nvme-loop "transport=loop,$common"
	fi
}

# Every device gets the same block-layer settings: no I/O scheduler.
describe() {
	local name=$1 dev=${path[$1]##*/} q=/sys/block/${path[$1]##*/} hwq flags
	echo none > "$q/queue/scheduler"
	hwq=("$q"/mq/*)
	printf 'BLK-DEV {"device":"%s","path":"%s","hw_queues":%d,"nr_tags":%d,' \
		"$name" "/dev/$dev" "${#hwq[@]}" "$(cat "$q/mq/0/nr_tags")"
	printf '"nr_requests":%d,"max_sectors_kb":%d,"max_hw_sectors_kb":%d,' \
		"$(cat "$q/queue/nr_requests")" "$(cat "$q/queue/max_sectors_kb")" \
		"$(cat "$q/queue/max_hw_sectors_kb")"
	# blk-mq's debugfs: SHOULD_MERGE, TAG_HCTX_SHARED, BLOCKING...
	flags=$(sed -n 's/.*alloc_policy=[A-Z]* *//p' \
		"/sys/kernel/debug/block/$dev/hctx0/flags" 2>/dev/null |
		tr '|' ' ' || true)
	printf '"scheduler":"%s","mq_flags":"%s","cpus":%d}\n' \
		"$(sed 's/.*\[\(.*\)\].*/\1/' "$q/queue/scheduler")" \
		"${flags:-?}" "$ncpu"
}

# Sleep without forking a process: read on a pipe nobody writes.
exec {nap_fd}<> <(:)
nap() {
	read -r -t "$1" -u "$nap_fd" _ || true
}

# The packet counters a device's transport moves: both soft-RoCE ports
# for RDMA (host and target share the guest, so one I/O's packets are
# counted once, on the sending port), loopback for TCP, none otherwise.
packet_counters() {
	case $1 in
	*-rdma) echo /sys/class/infiniband/rxe[01]/ports/1/hw_counters/sent_pkts ;;
	*-tcp|tern-mp) echo /sys/class/net/lo/statistics/tx_packets ;;
	esac
}

# rxe_counters DEV: soft-RoCE's error and retry counters, "name=value"
# summed over both ports, for an RDMA device; nothing otherwise. A run
# logs the ones that moved: retries and RNR waits cost time the IOPS
# show but the profile does not name.
rxe_counters() {
	local f n v
	local -A sum=()
	case $1 in
	*-rdma) ;;
	*) return 0 ;;
	esac
	for f in /sys/class/infiniband/rxe[01]/ports/1/hw_counters/*; do
		[ -r "$f" ] || continue
		n=${f##*/}
		case $n in
		sent_pkts|rcvd_pkts|rdma_sends|rdma_recvs|ack_deferred) continue ;;
		esac
		read -r v < "$f"
		sum[$n]=$((${sum[$n]:-0} + v))
	done
	for n in "${!sum[@]}"; do
		echo "$n=${sum[$n]}"
	done | sort -t= -k1,1
}

# rxe_moved BEFORE AFTER: the counters of AFTER that differ from BEFORE,
# as "name +delta"
rxe_moved() {
	join -t= -j1 <(echo "$1") <(echo "$2") |
		awk -F= '$3 != $2 { printf " %s +%d", $1, $3 - $2 }'
}

# While fio runs, in the background: every quarter second, one
# "[uptime,busy-jiffies,ios,ctxt,packets]," line: the guest's busy CPU
# time (user, nice, system, irq, softirq, steal; /proc/stat counts in
# USER_HZ), the I/Os the device completed (/sys/block/DEV/stat), the
# context switches since boot (/proc/stat ctxt) and the packets sent on
# the device's transport, read with shell builtins only so that sampling
# costs next to nothing. report.py takes the CPU, context switch and
# packet window out of this timeline.
sampler() {
	local st=/sys/block/$1/stat up rest ci=0 f v pkts
	local -a io stat counters
	read -r -a counters <<< "$(packet_counters "$2")"
	mapfile -t stat < /proc/stat
	for ci in "${!stat[@]}"; do
		[[ ${stat[ci]} == "ctxt "* ]] && break
	done
	while :; do
		mapfile -t stat < /proc/stat
		# cpu user nice system idle iowait irq softirq steal ...
		set -- ${stat[0]}
		read -r -a io < "$st"
		read -r up rest < /proc/uptime
		pkts=0
		for f in "${counters[@]}"; do
			read -r v < "$f"
			pkts=$((pkts + v))
		done
		echo "[$up,$(($2 + $3 + $4 + $7 + $8 + $9)),$((io[0] + io[4])),${stat[ci]#ctxt },$pkts],"
		nap 0.25
	done
}

# fio_wl DEV WORKLOAD OPTION...: fio on DEV running WORKLOAD ("name rw
# bs qd jobs"), with OPTIONs added; output where they say. Under the
# command in the caller's fio_wrap, if it sets one (perf record).
fio_wrap=()
fio_wl() {
	local dev=$1 name rw bs qd jobs
	read -r name rw bs qd jobs <<< "$2"
	shift 2
	"${fio_wrap[@]}" fio --name="$name" --filename="${path[$dev]}" --ioengine=libaio \
		--direct=1 --rw="$rw" --bs="$bs" --iodepth="$qd" \
		--numjobs="$jobs" --norandommap --randrepeat=0 "$@"
}

# dev_ios DEV: reads and writes DEV has completed so far
dev_ios() {
	local -a x
	read -r -a x < "/sys/block/${path[$1]##*/}/stat"
	echo $((x[0] + x[4]))
}

# One fio run, printed raw on one line: which run, fio's exit status, the
# CPU timeline and fio's JSON report. report.py makes the sample of it.
run_one() {
	local round=$1 dev=$2 wl=$3 name rw bs qd jobs spid rc=0 fio tl
	local rxe0 moved
	read -r name rw bs qd jobs <<< "$wl"
	rm -f "$tmp/fio.json"
	rxe0=$(rxe_counters "$dev")
	sampler "${path[$dev]##*/}" "$dev" > "$tmp/timeline" &
	spid=$!
	fio_wl "$dev" "$wl" --group_reporting --time_based \
		--runtime="$runtime" --ramp_time="$ramp" --lat_percentiles=1 \
		--output-format=json --output="$tmp/fio.json" \
		> "$tmp/fio.err" 2>&1 || rc=$?
	kill "$spid"
	wait "$spid" 2>/dev/null || true
	moved=$(rxe_moved "$rxe0" "$(rxe_counters "$dev")")
	[ -z "$moved" ] || log "$dev $name round $round: soft-RoCE counters:$moved"
	fio=$(tr -d '\n\t' < "$tmp/fio.json" 2>/dev/null)
	[ -n "$fio" ] || fio=null
	tl=$(tr -d '\n' < "$tmp/timeline")
	printf 'BLK-RAW {"round":%d,"device":"%s","workload":"%s","rw":"%s",' \
		"$round" "$dev" "$name" "$rw"
	printf '"bs":"%s","iodepth":%d,"numjobs":%d,"cpus":%d,"ramp_s":%s,' \
		"$bs" "$qd" "$jobs" "$ncpu" "$ramp"
	printf '"fio_rc":%d,"timeline":[%s],"fio":%s}\n' "$rc" "${tl%,}" "$fio"
	if [ "$rc" != 0 ]; then
		log "$dev $name: fio exit $rc"
		cat "$tmp/fio.err" >&2
		return 1
	fi
}

setup_backend
setup_tern
setup_nvme
for d in "${devices[@]}"; do
	[ -n "${path[$d]:-}" ] || die "unknown or missing device $d"
	describe "$d"
done
if [ -n "${BENCH_WORKLOADS:-}" ]; then
	sel=()
	for wl in "${workloads[@]}"; do
		case " $BENCH_WORKLOADS " in
		*" ${wl%% *} "*) sel+=("$wl") ;;
		esac
	done
	workloads=("${sel[@]}")
fi

# Where the CPU goes during one run: perf's software clock on every CPU
# (TCG has no PMU), symbols of the kernel and modules included. Each
# symbol's share of all samples becomes microseconds of CPU per I/O with
# the run's own IOPS, so that devices compare per unit of work
# (tools/bench/profile-diff).
profile_one() {
	local dev=$1 wl=$2 name iops
	local -a fio_wrap=(perf record -a -F 999 -o "$tmp/perf.data" --)
	name=${wl%% *}
	fio_wl "$dev" "$wl" --group_reporting --time_based \
		--runtime="$runtime" --output-format=terse --terse-version=3 \
		--output="$tmp/perf.fio" > "$tmp/perf.err" 2>&1 ||
		{ log "$dev $name: perf record failed"; cat "$tmp/perf.err" >&2; return 1; }
	# terse v3: field 8 is read IOPS, field 49 write IOPS
	iops=$(awk -F';' '{ print $8 + $49 }' "$tmp/perf.fio")
	perf report -i "$tmp/perf.data" --stdio --no-children --sort sym \
		2> /dev/null | awk -v dev="$dev" -v wl="$name" -v n="$profile" \
		-v iops="$iops" -v ncpu="$ncpu" '
		/^ *[0-9.]+%/ && shown < n && iops > 0 {
			pct = $1 + 0
			printf "BLK-PROFILE %s %s %.2f %.3f", dev, wl, pct,
				pct / 100 * ncpu * 1e6 / iops
			for (i = 3; i <= NF; i++) printf " %s", $i
			printf "\n"; shown++
		}'
}

# awk, for the counting passes: print TAG lines of COUNT[key] per I/O
# (of ios, for device dev and workload wl), the total ALL first as
# LABEL, then every key counted at least MIN times per I/O, with its
# share of ALL
per_io_awk='
function per_io(tag, label, count, min,   k) {
	printf "%s %s %s 100.00 %.3f %s\n", tag, dev, wl, all / ios, label
	for (k in count)
		if (count[k] / ios >= min)
			printf "%s %s %s %.2f %.3f %s\n", tag, dev, wl,
				100 * count[k] / all, count[k] / ios, k
}'

# Which kernel functions one I/O calls, counted exactly: the function
# tracer on every CPU over runs of a fixed number of I/Os, each call
# divided by the I/Os the device completed. Counts do not depend on how
# fast the host is, so two devices compare even where timings scatter
# (tools/bench/profile-diff --calls). The tracer slows the guest many
# times over: the counts are of work, never of time. fio's disk
# statistics thread is off: its sysfs reads come per second, not per I/O.
# What fio does once per run (start, map its libraries and buffers,
# fault them in, exit and unmap them) is no I/O's work: two runs of a
# quarter and of five quarters of N I/Os are counted, and the shorter
# one subtracted from the longer, which leaves N I/Os' calls and no
# start or exit. Counted over one whole run, that fixed part was nearly
# half of the calls per 4K I/O at N=800, about the same for every
# device, which pulled the ratios between devices towards 1
# (performance.rst, item 26).
calls_setup() {
	local t=/sys/kernel/tracing
	[ -d $t/options ] || mount -t tracefs nodev $t
	echo 0 > $t/tracing_on
	echo 131072 > $t/buffer_size_kb
	echo > $t/set_ftrace_filter
	echo function > $t/current_tracer
}

# One traced run of N I/Os per job: "ios N" then "function count" and
# "function caller count" lines on stdout.
calls_trace() {
	local dev=$1 wl=$2 n=$3 ios lost t=/sys/kernel/tracing
	echo > $t/trace
	ios=$(dev_ios "$dev")
	echo 1 > $t/tracing_on
	fio_wl "$dev" "$wl" --number_ios="$n" --disk_util=0 \
		--output=/dev/null > "$tmp/calls.err" 2>&1 ||
		{ echo 0 > $t/tracing_on; cat "$tmp/calls.err" >&2; return 1; }
	echo 0 > $t/tracing_on
	ios=$(($(dev_ios "$dev") - ios))
	lost=$(cat $t/per_cpu/cpu*/stats | awk '/^overrun:/ { n += $2 } END { print n + 0 }')
	[ "$lost" = 0 ] || { echo "the trace lost $lost events" >&2; return 1; }
	echo "ios $ios"
	awk '
		/^#/ { next }
		{
			for (i = 1; i <= NF; i++)
				if ($i ~ /^[0-9]+\.[0-9]+:$/) {
					calls[$(i + 1)]++
					callers[$(i + 1) " " $(i + 2)]++
					break
				}
		}
		END {
			for (k in calls)
				print "f", calls[k], k
			for (k in callers)
				print "c", callers[k], k
		}' $t/trace
}

calls_one() {
	local dev=$1 wl=$2 name short=$((calls / 4)) t=/sys/kernel/tracing
	name=${wl%% *}
	# untraced first: fio's pages and the device's paths warm
	fio_wl "$dev" "$wl" --runtime=1 --time_based --output=/dev/null \
		> "$tmp/calls.err" 2>&1 ||
		{ log "$dev $name: fio failed"; cat "$tmp/calls.err" >&2; return 1; }
	calls_trace "$dev" "$wl" "$short" > "$tmp/calls.short" &&
		calls_trace "$dev" "$wl" $((short + calls)) > "$tmp/calls.long" ||
		{ log "$dev $name: traced run failed"; return 1; }
	awk -v dev="$dev" -v wl="$name" '
		FNR == 1 { sign = FILENAME ~ /short$/ ? -1 : 1 }
		$1 == "ios" { ios += sign * $2; next }
		{
			n = sign * $2
			$1 = $1 == "f" ? "F" : "C"
			$2 = ""
			key = substr($0, 4)
			if ($1 == "F") {
				calls[key] += n
				all += n
			} else {
				callers[key] += n
			}
		}
		END {
			if (ios <= 0 || all <= 0)
				exit 1
			per_io("BLK-CALLS", "(all functions)", calls, 0.02)
			per_io("BLK-CALLERS", "(all functions)", callers, 0.05)
		}'"$per_io_awk" "$tmp/calls.short" "$tmp/calls.long" ||
		{ log "$dev $name: nothing traced"; return 1; }
}

# Who switches, and to whom: a histogram of sched_switch over one run,
# keyed by the task leaving the CPU, its state and the task taking it,
# each divided by the I/Os the device completed. ctxsw/IO in the results
# says how many; this says which hop of the I/O path they are
# (tools/bench/profile-diff --switches). Task names lose their numbers
# (kworker/1:1H is kworker/N:NH), so that runs compare. The histogram
# is set up once and cleared per run: turning the event on and off
# patches kernel text, which under TCG once met a vCPU still running
# the old bytes (an oops on a stray int3).
switches_trigger=/sys/kernel/tracing/events/sched/sched_switch/trigger
switches_spec="hist:keys=prev_comm,prev_state,next_comm:size=8192"

switches_setup() {
	[ -f "$switches_trigger" ] || mount -t tracefs nodev /sys/kernel/tracing
	echo "$switches_spec" >> "$switches_trigger"
}

switches_done() {
	echo "!$switches_spec" >> "$switches_trigger"
}

switches_one() {
	local dev=$1 wl=$2 name ios
	name=${wl%% *}
	echo "$switches_spec:clear" >> "$switches_trigger"
	ios=$(dev_ios "$dev")
	fio_wl "$dev" "$wl" --time_based --runtime="$runtime" --disk_util=0 \
		--output=/dev/null > "$tmp/switches.err" 2>&1 ||
		{ log "$dev $name: fio failed"; cat "$tmp/switches.err" >&2; return 1; }
	cat "${switches_trigger%/trigger}/hist" > "$tmp/switches.hist"
	ios=$(($(dev_ios "$dev") - ios))
	awk -v dev="$dev" -v wl="$name" -v ios="$ios" '
		function task(s) {
			sub(/^ +/, "", s); sub(/ +$/, "", s)
			gsub(/[0-9]+/, "N", s)
			return s
		}
		/^{ *prev_comm:/ {
			line = $0
			sub(/^{ *prev_comm: */, "", line)
			prev = task(substr(line, 1, index(line, ",") - 1))
			sub(/^[^,]*, *prev_state: */, "", line)
			state = substr(line, 1, index(line, ",") - 1) + 0
			# sched_switch: 256 preempted, else the state bit
			if (state == 256)
				state = "R+"
			else if (state == 0)
				state = "R"
			else if (state == 1)
				state = "S"
			else if (state == 2)
				state = "D"
			else if (state == 128)
				state = "I"
			sub(/^[^,]*, *next_comm: */, "", line)
			next_task = task(substr(line, 1, index(line, "}") - 1))
			sub(/.*hitcount: */, "", line)
			n[prev ":" state ">" next_task] += line
			all += line
		}
		END {
			if (!ios || !all)
				exit 1
			per_io("BLK-SWITCHES", "(all switches)", n, 0.01)
		}'"$per_io_awk" "$tmp/switches.hist" || { log "$dev $name: no switches seen"; return 1; }
}

# requests path IDX of DEV has sent (/sys/block/DEV/tern/paths)
path_requests() {
	local line f i=0
	while read -r line; do
		if [ "$i" = "$2" ]; then
			for f in $line; do
				case $f in requests=*) echo "${f#requests=}" ;; esac
			done
			return
		fi
		i=$((i + 1))
	done < "/sys/block/$1/tern/paths"
}

# One failover, timed: a device of two TCP paths, failover, keepalives
# of 300 ms (a silent path is given up after 900 ms), under 4K random
# reads; its first path cut by a blackhole rule (target and client
# share the guest's network namespace, where only a rule cuts local
# traffic), the time until its second path has carried 20 requests.
failover_one() {
	local run=$1 dev r1 t0 t1 fpid ms=-1
	dev=$("$ternadm" map "tcp://$mp_addr:$tern_port/bench" \
	      --path "tcp://127.0.0.1:$tern_port" --lanes "$(mp_lanes)" \
	      --iopolicy failover --new) || return 1
	dev=${dev#/dev/}
	echo 300 > "/sys/block/$dev/tern/keepalive_ms"
	fio --name=failover --filename="/dev/$dev" --ioengine=libaio \
		--direct=1 --rw=randread --bs=4k --iodepth=16 --time_based \
		--runtime=8 --norandommap --randrepeat=0 \
		--output=/dev/null > "$tmp/failover.err" 2>&1 &
	fpid=$!
	nap 2
	r1=$(path_requests "$dev" 1)
	t0=$(date +%s%N)
	ip rule add pref "$cut_pref" to "$mp_addr" blackhole
	for _ in $(seq 500); do
		if [ "$(path_requests "$dev" 1)" -gt $((r1 + 20)) ]; then
			t1=$(date +%s%N)
			ms=$(((t1 - t0) / 1000000))
			break
		fi
		nap 0.01
	done
	wait "$fpid" || { log "failover $run: fio failed"; cat "$tmp/failover.err" >&2; ms=-1; }
	ip rule del pref "$cut_pref"
	"$ternadm" unmap "$dev"
	printf 'BLK-FAILOVER {"run":%d,"ms":%d,"keepalive_ms":300,"cpus":%d}\n' \
		"$run" "$ms" "$ncpu"
	[ "$ms" -ge 0 ]
}

failover_runs() {
	local i rc=0
	ip rule add pref "$local_pref" lookup local
	ip rule del pref 0 lookup local
	for i in $(seq "${BENCH_FAILOVER:-5}"); do
		failover_one "$i" || rc=1
	done
	ip rule add pref 0 lookup local
	ip rule del pref "$local_pref"
	return $rc
}

# The ciphers of tern-tcp-enc (the TLS layer's gcm(aes), 128-bit key)
# and tern-tcp-int (Poly1305) alone, and ChaCha20-Poly1305, the TLS
# layer's other AEAD, as the kernel's tcrypt times them: one second of
# 4 KiB operations each. tcrypt runs its tests at load and then refuses
# to stay (-EAGAIN); its report is in the kernel log.
cipher_speeds() {
	local mode
	for mode in 211 213 321; do
		dmesg -C
		modprobe tcrypt mode=$mode sec=1 2>/dev/null || true
		dmesg | awk -v cpus="$ncpu" '
		/testing speed of/ {
			sub(/.*testing speed of (async )?/, "")
			alg = $1; driver = $2; op = $3
			sub(/^\(/, "", driver)
			sub(/\)$/, "", driver)
			next
		}
		alg == "gcm(aes)" && /128 bit key, 4096 byte blocks/ ||
		alg ~ /chacha20/ && /4096 byte blocks/ {
			sub(/.*: /, ""); ops = $1
		}
		alg == "poly1305" && /4128 byte blocks, 4128 bytes per update/ {
			sub(/.*: +/, ""); ops = $1; op = "mac"
		}
		ops != "" {
			printf "BLK-CIPHER {\"alg\":\"%s\",\"driver\":\"%s\"," \
				"\"op\":\"%s\",\"bytes\":4096,\"ops_per_s\":%d," \
				"\"cpus\":%d}\n", alg, driver, op, ops, cpus
			ops = ""
		}'
	done
}

failed=0
n=${#devices[@]}
for round in $(seq "$rounds"); do
	for wl in "${workloads[@]}"; do
		for i in $(seq 0 $((n - 1))); do
			d=${devices[$(((i + round - 1) % n))]}
			run_one "$round" "$d" "$wl" || failed=1
		done
	done
done
if wanted tern-mp && [ "${BENCH_FAILOVER:-5}" -gt 0 ]; then
	failover_runs || failed=1
fi
if { wanted tern-tcp-enc || wanted tern-tcp-int; } &&
	[ "${BENCH_CIPHERS:-1}" -gt 0 ]; then
	cipher_speeds
fi
profile=${BENCH_PROFILE:-0}
if [ "$profile" -gt 0 ]; then
	for wl in "${workloads[@]}"; do
		for d in "${devices[@]}"; do
			profile_one "$d" "$wl" || failed=1
		done
	done
fi
if [ "${BENCH_SWITCHES:-0}" -gt 0 ]; then
	switches_setup
	for wl in "${workloads[@]}"; do
		for d in "${devices[@]}"; do
			switches_one "$d" "$wl" || failed=1
		done
	done
	switches_done
fi
calls=${BENCH_CALLS:-0}
if [ "$calls" -gt 0 ]; then
	calls_setup
	for wl in "${workloads[@]}"; do
		for d in "${devices[@]}"; do
			calls_one "$d" "$wl" || failed=1
		done
	done
	# The tracer stays in place, not tracing, until the guest ends:
	# taking it away patches every function's entry again, which under
	# TCG has met a vCPU still running the old bytes (an oops on a stray
	# int3 at the end of a run).
fi
exit "$failed"
