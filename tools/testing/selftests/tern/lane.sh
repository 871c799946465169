#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Tests of the test lane itself: the guest runs with the debugging the
# lane promises, every tern module loads and unloads cleanly, and
# soft-RoCE is up when the run asked for it.

. "$(dirname "$0")/ktap.sh"

kver=$(uname -r)
extra=/lib/modules/$kver/extra

# Our modules, the test-only ones excepted, in dependency order as
# modprobe resolves them.
tern_modules() {
	local ko
	for ko in "$extra"/*.ko; do
		[ -e "$ko" ] || continue
		ko=${ko##*/}
		ko=${ko%.ko}
		case "$ko" in tern_test_*) continue ;; esac
		echo "$ko"
	done
}

check_debug_options() {
	local c
	c=$(cat /proc/cmdline)
	for opt in slab_debug=FZP panic_on_warn=1 hung_task_panic=1; do
		case " $c " in *" $opt "*) ;; *) echo "missing $opt"; return 1 ;; esac
	done
	[ "$(cat /proc/sys/kernel/panic_on_warn)" = 1 ] || return 1
	[ "$(cat /sys/module/kfence/parameters/sample_interval)" -gt 0 ] || return 1
	# slab_debug=FZP turns sanity checks, red zones and poisoning on in
	# every cache
	[ "$(cat /sys/kernel/slab/kmalloc-64/sanity_checks)" = 1 ] &&
		[ "$(cat /sys/kernel/slab/kmalloc-64/red_zone)" = 1 ] &&
		[ "$(cat /sys/kernel/slab/kmalloc-64/poison)" = 1 ]
}

load_unload() {
	local m
	m=$1
	modprobe "$m" || return 1
	grep -q "^$m " /proc/modules || { echo "$m not in /proc/modules"; return 1; }
	modprobe -r "$m" || return 1
	if grep -q "^$m " /proc/modules; then
		echo "$m still loaded"
		return 1
	fi
}

# Each .ko the build left in the source tree must be in extra/, the test
# lane's own tern_test_warn included, so a stale or empty stage fails.
staged_all() {
	local ko n=0
	while read -r ko; do
		n=$((n + 1))
		cmp -s "$ko" "$extra/${ko##*/}" || { echo "not staged: $ko"; return 1; }
	done < <(find "$TERN_SRC" -path "$TERN_BUILD" -prune -o -name '*.ko' -print)
	echo "$n modules staged"
	[ "$n" -gt 0 ] && [ -f "$extra/tern_test_warn.ko" ]
}

rxe_active() {
	local dev=$1 state
	state=$(cat "/sys/class/infiniband/$dev/ports/1/state" 2>/dev/null)
	echo "$dev: ${state:-absent}"
	case "$state" in *ACTIVE*) return 0 ;; esac
	return 1
}

mapfile -t mods < <(tern_modules)
ktap_plan $((3 + ${#mods[@]} + 2))

ktap_check "guest boots with slab_debug, kfence, panic_on_warn, hung-task panic" \
	check_debug_options
ktap_check "the root is writable (tmpfs overlay on the 9p host root)" \
	bash -c 'echo x > /var/tmp/tern-lane && rm /var/tmp/tern-lane'
ktap_check "every module kbuild built is staged for modprobe" staged_all
for m in "${mods[@]}"; do
	ktap_check "module $m loads and unloads cleanly" load_unload "$m"
done
if [ "${TERN_RDMA:-0}" = 1 ]; then
	ktap_check "soft-RoCE $TERN_RDMA_DEV0 is ACTIVE" rxe_active "$TERN_RDMA_DEV0"
	ktap_check "soft-RoCE $TERN_RDMA_DEV1 is ACTIVE" rxe_active "$TERN_RDMA_DEV1"
else
	ktap_skip "soft-RoCE not requested (--rdma)"
	ktap_skip "soft-RoCE not requested (--rdma)"
fi
ktap_finish
