#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Persistent names: each export's uuid (configfs, generated once, set
# only while disabled, kept across disable/enable), the client's uuid,
# serial and wwid in sysfs, and tools/udev/60-tern.rules under a real
# systemd-udevd: /dev/tern/HOST/EXPORT and /dev/disk/by-id/tern-UUID,
# with -partN for a partition, that follow the export to whichever ternN
# maps it and go away with the unmap.
#
# Environment:
#   TERNADM       the ternadm binary (default: the one built in the tree)
#   UDEVD         systemd-udevd (default: /lib/systemd/systemd-udevd)

# names do not depend on the transport: tcp only
TRANSPORT=tcp
. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/blk_lib.sh"

WORK=/var/tmp/tern-names
RULE=$(cd "$(dirname "$0")/../../../udev" && pwd)/60-tern.rules
UDEVD=${UDEVD:-/lib/systemd/systemd-udevd}
BACK=/dev/ram0
UUID_RE='^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
STARTED_UDEVD=0
DEV=

setup() {
	blk_modprobe && modprobe brd rd_nr=1 rd_size=32768 max_part=0 ||
		return 1
	mkdir -p "$WORK" && truncate -s 16M "$WORK/file1" || return 1
	adm target export add vol0 "$BACK" &&
		adm target export add vol1 "$WORK/file1" &&
		adm target port add p0 "tcp://$ADDR" &&
		adm target link p0 vol0 && adm target link p0 vol1
}

# our rule in /run/udev/rules.d (the guest's /run is a tmpfs), and a
# udevd: the one running, or one we start and stop
udev_start() {
	[ -x "$UDEVD" ] || { echo "no $UDEVD"; return 1; }
	mkdir -p /run/udev/rules.d && cp "$RULE" /run/udev/rules.d/ || return 1
	if udevadm control --ping 2>/dev/null; then
		udevadm control --reload || return 1
	else
		"$UDEVD" --daemon || return 1
		STARTED_UDEVD=1
	fi
	udevadm trigger --action=add --subsystem-match=block &&
		udevadm settle --timeout=30
}

udev_stop() {
	rm -f /run/udev/rules.d/60-tern.rules
	if [ "$STARTED_UDEVD" = 1 ]; then
		udevadm control --exit || return 1
		STARTED_UDEVD=0
	else
		udevadm control --reload
	fi
}

cfg_uuid() {
	cat "$CFG/exports/$1/uuid"
}

# a new export has a random uuid, shown by target show (and --json)
export_uuid() {
	local u0 u1
	u0=$(cfg_uuid vol0) && u1=$(cfg_uuid vol1) || return 1
	echo "vol0 $u0, vol1 $u1"
	[[ $u0 =~ $UUID_RE ]] && [[ $u1 =~ $UUID_RE ]] && [ "$u0" != "$u1" ] ||
		return 1
	# version 4, RFC variant
	[ "${u0:14:1}" = 4 ] && [[ ${u0:19:1} == [89ab] ]] || return 1
	adm target show | grep -q "^export vol0 .* uuid $u0$" || return 1
	adm target show --json | grep -q "\"uuid\":\"$u0\""
}

# uuid changes only while disabled, and only to a well-formed non-nil one
uuid_settable() {
	local u f=$CFG/exports/vol1 rc=0 bad
	u=$(cfg_uuid vol1)
	if echo 11111111-2222-4333-8444-555555555555 2>/dev/null > "$f/uuid"; then
		echo "uuid changed while enabled"
		rc=1
	fi
	echo 0 > "$f/enable" || return 1
	for bad in 00000000-0000-0000-0000-000000000000 nope \
		11111111-2222-4333-8444-55555555555 \
		11111111-2222-4333-8444-5555555555555 \
		11111111x2222-4333-8444-555555555555; do
		if echo "$bad" 2>/dev/null > "$f/uuid"; then
			echo "uuid '$bad' accepted"
			rc=1
		fi
	done
	[ "$(cfg_uuid vol1)" = "$u" ] || { echo "uuid changed"; rc=1; }
	echo 11111111-2222-4333-8444-555555555555 > "$f/uuid" || rc=1
	[ "$(cfg_uuid vol1)" = 11111111-2222-4333-8444-555555555555 ] || rc=1
	echo 1 > "$f/enable" || return 1
	[ "$(cfg_uuid vol1)" = 11111111-2222-4333-8444-555555555555 ] || rc=1
	return $rc
}

# the uuid is the export's: a disable and enable keep it
uuid_kept() {
	local u
	u=$(cfg_uuid vol0)
	echo 0 > "$CFG/exports/vol0/enable" &&
		echo 1 > "$CFG/exports/vol0/enable" || return 1
	[ "$(cfg_uuid vol0)" = "$u" ]
}

# DEV=ternN for EXPORT; its uuid, serial and wwid are the export's
map_named() {
	local u d
	d=$(map_dev "$1" 7447) || return 1
	u=$(cfg_uuid "$1")
	echo "$d: $(cat "/sys/block/$d/wwid")"
	[ "$(cat "/sys/block/$d/uuid")" = "$u" ] &&
		[ "$(cat "/sys/block/$d/tern/uuid")" = "$u" ] &&
		[ "$(cat "/sys/block/$d/serial")" = "$u" ] &&
		[ "$(cat "/sys/block/$d/tern/serial")" = "$u" ] &&
		[ "$(cat "/sys/block/$d/wwid")" = "tern.$u" ] &&
		[ "$(cat "/sys/block/$d/tern/wwid")" = "tern.$u" ] || return 1
	adm list --json | grep -q "\"uuid\":\"$u\"" || return 1
	echo "$d" > "$WORK/dev"
}

# link_is LINK DEV: LINK resolves to /dev/DEV
link_is() {
	local got
	got=$(readlink -f "$1" 2>/dev/null)
	echo "$1 -> ${got:-nothing} (want /dev/$2)"
	[ -L "$1" ] && [ "$got" = "/dev/$2" ]
}

# the links of EXPORT (and of its first partition) lead to DEV
links_are() {
	local u
	u=$(cfg_uuid "$1")
	udevadm settle --timeout=30
	link_is "/dev/tern/$ADDR/$1" "$2" &&
		link_is "/dev/disk/by-id/tern-$u" "$2" || return 1
	[ -z "$3" ] || {
		link_is "/dev/tern/$ADDR/$1-part1" "${2}p1" &&
			link_is "/dev/disk/by-id/tern-$u-part1" "${2}p1"
	}
}

# one MBR partition, sectors 2048 to the end of the 32 MiB disk, written
# through the device; the kernel reads the table again
partition() {
	local dev=/dev/$1
	printf '\x00\x00\x02\x00\x83\xff\xff\xff\x00\x08\x00\x00\x00\xf8\x00\x00' |
		dd of="$dev" bs=1 seek=446 conv=notrunc status=none &&
		printf '\x55\xaa' |
		dd of="$dev" bs=1 seek=510 conv=notrunc status=none &&
		sync || return 1
	# udevd's watch of the disk may read the table again first
	udevadm settle --timeout=30
	[ -b "/dev/${1}p1" ] || blockdev --rereadpt "$dev" || return 1
	udevadm settle --timeout=30
	[ -b "/dev/${1}p1" ] || { echo "no /dev/${1}p1"; return 1; }
}

first_map() {
	local props
	map_named vol0 || return 1
	DEV=$(cat "$WORK/dev")
	partition "$DEV" && links_are vol0 "$DEV" part || return 1
	props=$(udevadm info --query=property "/dev/$DEV")
	echo "$props" | grep -qx "ID_SERIAL=$(cfg_uuid vol0)" &&
		echo "$props" | grep -qx "ID_WWN=tern.$(cfg_uuid vol0)" ||
		{ echo "$props"; return 1; }
}

# unmap: the links go; vol1 mapped first, vol0 gets another ternN and
# its links, the same ones, lead there
remap() {
	local u old=$DEV links
	u=$(cfg_uuid vol0)
	udevadm settle --timeout=30
	unmap "$old" || return 1
	udevadm settle --timeout=30
	links=$(ls "/dev/tern/$ADDR/vol0"* "/dev/disk/by-id/tern-$u"* 2>/dev/null)
	[ -z "$links" ] || { echo "left behind: $links"; return 1; }
	map_named vol1 || return 1
	map_named vol0 || return 1
	DEV=$(cat "$WORK/dev")
	[ "$DEV" != "$old" ] || { echo "vol0 got $old again"; return 1; }
	links_are vol0 "$DEV" part &&
		links_are vol1 "$(tern_devs | grep -vx "$DEV")"
}

# a new uuid (set while disabled) is what the next map sees, and its link
uuid_changed() {
	local old new=22222222-3333-4444-8555-666666666666 d
	old=$(cfg_uuid vol1)
	d=$(tern_devs | grep -vx "$DEV")
	udevadm settle --timeout=30
	unmap "$d" || return 1
	echo 0 > "$CFG/exports/vol1/enable" &&
		echo "$new" > "$CFG/exports/vol1/uuid" &&
		echo 1 > "$CFG/exports/vol1/enable" || return 1
	map_named vol1 || return 1
	d=$(cat "$WORK/dev")
	links_are vol1 "$d" || return 1
	[ ! -e "/dev/disk/by-id/tern-$old" ] || { echo "old link left"; return 1; }
}

unmap_all() {
	local d
	udevadm settle --timeout=30
	for d in $(tern_devs); do
		unmap "$d" || { echo "cannot unmap $d"; return 1; }
	done
	udevadm settle --timeout=30
	[ -z "$(ls -A /dev/tern 2>/dev/null)" ] ||
		{ echo "left in /dev/tern: $(find /dev/tern)"; return 1; }
	! ls /dev/disk/by-id/tern-* 2>/dev/null
}

teardown() {
	udev_stop || return 1
	adm target port del p0 && adm target export del vol0 &&
		adm target export del vol1 && rm -rf "$WORK" &&
		blk_unload brd
}

# a udevd of ours must not outlive the test, whatever stops it
trap '[ "$STARTED_UDEVD" = 1 ] && udevadm control --exit' EXIT

ktap_plan 10
ktap_check "modules load; exports vol0 (brd) and vol1 (file), port p0" setup
ktap_check "each new export has its own random v4 uuid, shown by target show" \
	export_uuid
ktap_check "uuid: refused while enabled or malformed, set while disabled" \
	uuid_settable
ktap_check "uuid: kept across disable and enable" uuid_kept
failed=$KTAP_FAIL
ktap_check "systemd-udevd with tools/udev/60-tern.rules" udev_start
if [ "$KTAP_FAIL" = "$failed" ] && [ -e "$CFG/exports/vol0" ]; then
	ktap_check "map: uuid, serial, wwid; /dev/tern/$ADDR/vol0 and by-id links, -part1" \
		first_map
	ktap_check "unmap removes the links; mapped as another ternN, the same links follow" \
		remap
	ktap_check "a uuid set while disabled reaches the next map and its link" \
		uuid_changed
	ktap_check "unmap of every device leaves no tern link" unmap_all
else
	for t in first_map remap uuid_changed unmap_all; do
		ktap_skip "$t: no udevd or an earlier failure"
	done
	for d in $(tern_devs); do
		unmap "$d"
	done
fi
ktap_check "teardown: udevd stopped, target empty, modules unload" teardown
ktap_finish
