#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# What the target refuses to let a client or an administrator's mistake
# reach (issue 18, target backend and ports):
#  - a block device that is mounted cannot be exported (exclusive open),
#    and once unmounted it can;
#  - an export is reachable only through the ports it is linked to: a
#    map through another enabled port of the same target fails;
#  - unlinking the export from its port ends the bindings made through
#    it: I/O on the mapped device fails with EIO, no D state, and the
#    device unmaps;
#  - an export disabled and enabled again and again under reads (its
#    geometry is rewritten at each enable) leaves no oops, a device that
#    unmaps, and maps again.
# TCP only; the rules live in the transport-independent target core.

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/blk_lib.sh"

MNT=/var/tmp/tern-trust-mnt
DEVF=/var/tmp/tern-trust-dev	# the mapped device (checks run in subshells)
SVC0=7456
SVC1=7457

port_add() {	# NAME SERVICE
	mkdir "$CFG/ports/$1" &&
		echo tcp > "$CFG/ports/$1/transport" &&
		echo 127.0.0.1 > "$CFG/ports/$1/address" &&
		echo "$2" > "$CFG/ports/$1/service"
}

mounted_refused() {
	mkfs.ext4 -q -F /dev/ram0 && mkdir -p "$MNT" &&
		mount /dev/ram0 "$MNT" || return 1
	mkdir "$CFG/exports/vol0" &&
		echo /dev/ram0 > "$CFG/exports/vol0/device_path" || return 1
	if echo 1 2>/dev/null > "$CFG/exports/vol0/enable"; then
		echo "a mounted device was exported"
		return 1
	fi
	dmesg | tail -n 20 | grep -i "in use"
	umount "$MNT" && echo 1 > "$CFG/exports/vol0/enable"
}

other_port_refused() {
	port_add p0 "$SVC0" && port_add p1 "$SVC1" &&
		ln -s "$CFG/exports/vol0" "$CFG/ports/p0/exports/vol0" &&
		echo 1 > "$CFG/ports/p0/enable" &&
		echo 1 > "$CFG/ports/p1/enable" || return 1
	if map_dev vol0 "$SVC1" --lanes 1; then
		echo "vol0 mapped through p1, which it is not linked to"
		return 1
	fi
	[ -z "$(tern_devs)" ] || { echo "a device was left"; return 1; }
	map_dev vol0 "$SVC0" --lanes 1 > "$DEVF" && [ -s "$DEVF" ] &&
		dd if="/dev/$(cat "$DEVF")" of=/dev/null bs=4k count=16 \
			iflag=direct status=none
}

# Reads all the time while the export is disabled and enabled 20 times:
# every request lands before, during or after a re-enable, which once
# rewrote the export's geometry under the I/O path's range check (a
# remote divide by zero). Reads fail once the client saw the export
# gone (the device is then "removed", by design); no oops, the device
# unmaps, and a new map reads.
reenable_under_io() {
	local dev i pid rc=0

	dev=$(cat "$DEVF") && [ -n "$dev" ] || return 1
	rm -f "$DEVF.stop"
	(
		i=0
		until [ -e "$DEVF.stop" ]; do
			dd if="/dev/$dev" of=/dev/null bs=4k count=8 \
				skip=$((i % 64 * 8)) iflag=direct status=none \
				2>/dev/null
			i=$((i + 1))
		done
		echo "$i reads"
	) &
	pid=$!
	for i in $(seq 20); do
		echo 0 > "$CFG/exports/vol0/enable" &&
			echo 1 > "$CFG/exports/vol0/enable" || rc=1
		sleep 0.1
	done
	touch "$DEVF.stop"
	wait "$pid"
	rm -f "$DEVF.stop"
	echo "$dev: state $(cat "/sys/block/$dev/tern/state")"
	adm unmap "$dev" || rc=1
	map_dev vol0 "$SVC0" --lanes 1 > "$DEVF" && [ -s "$DEVF" ] &&
		dd if="/dev/$(cat "$DEVF")" of=/dev/null bs=4k count=16 \
			iflag=direct status=none || rc=1
	return $rc
}

unlink_ends_binding() {
	local rc=0 dev

	dev=$(cat "$DEVF") && [ -n "$dev" ] || return 1
	rm "$CFG/ports/p0/exports/vol0" || return 1
	read_fails_in "$dev" 100 30 "through an unlinked binding" || rc=1
	adm unmap "$dev" && rm -f "$DEVF" || rc=1
	return $rc
}

teardown() {
	local p

	[ -s "$DEVF" ] && adm unmap "$(cat "$DEVF")"
	rm -f "$DEVF"
	for p in "$CFG"/ports/*; do
		[ -d "$p" ] || continue
		echo 0 > "$p/enable"
		rm -f "$p"/exports/*
		rmdir "$p" || return 1
	done
	[ -d "$CFG/exports/vol0" ] && { rmdir "$CFG/exports/vol0" || return 1; }
	mountpoint -q "$MNT" && umount "$MNT"
	blk_unload brd
}

ktap_plan 6
check "modules load (tern_tcp, tern_target, tern_blk, brd)" \
	sh -c "modprobe brd rd_nr=1 rd_size=65536 max_part=0 && modprobe tern_tcp &&
		modprobe tern_target && modprobe tern_blk"
check "a mounted block device is refused at enable, taken once unmounted" \
	mounted_refused
check "an export is reachable only through the ports it is linked to" \
	other_port_refused
check "export disabled and enabled 20 times under reads: no oops, unmaps, maps again and reads" \
	reenable_under_io
check "unlinking the export from its port ends the binding: EIO, unmap works" \
	unlink_ends_binding
check "teardown, modules unload" teardown
ktap_finish
