#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# ternadm map, unmap, list and target, end to end in one guest: a brd RAM
# disk is exported and served with "ternadm target", mapped over
# tcp://127.0.0.1 with "ternadm map", checked, listed and unmapped; bad
# command lines exit 2 and change nothing; the target is torn down with
# ternadm too.
#
# Environment:
#   TERNADM       the ternadm binary (default: the one built in the tree)

# ternadm's command line does not depend on the transport: tcp only.
TRANSPORT=tcp
. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/blk_lib.sh"

WORK=/var/tmp/tern-adm
BACK=/dev/ram0
DEV=

# what ternadm can change: devices, exports, ports and links
state() {
	tern_devs
	(cd "$CFG" && find exports ports 2>/dev/null | sort)
}

setup_modules() {
	blk_modprobe && modprobe brd rd_nr=1 rd_size=32768 max_part=0 || return 1
	mkdir -p "$WORK" || return 1
	[ -x "$TERNADM" ] && [ -d "$CFG/exports" ] && [ -b "$BACK" ]
}

setup_target() {
	adm target export add vol0 "$BACK" --allowed-hosts adm-host,other &&
		adm target port add p0 "tcp://$ADDR" &&
		adm target link p0 vol0 || return 1
	adm target show
	adm target show --json > "$WORK/show.json" || return 1
	python3 - "$WORK/show.json" "$BACK" <<-'EOF'
	import json, sys
	t = json.load(open(sys.argv[1]))
	e, p = t["exports"], t["ports"]
	assert len(e) == 1 and len(p) == 1, t
	assert e[0]["name"] == "vol0" and e[0]["device_path"] == sys.argv[2], e
	assert e[0]["enabled"] and not e[0]["read_only"], e
	assert e[0]["allowed_hosts"] == ["adm-host", "other"], e
	assert p[0]["name"] == "p0" and p[0]["enabled"], p
	assert p[0]["transport"] == "tcp" and p[0]["address"] == "127.0.0.1", p
	assert p[0]["service"] == 7447 and p[0]["exports"] == ["vol0"], p
	assert p[0]["max_lanes"] == 0 and p[0]["max_queue_depth"] == 0, p
	EOF
}

map_vol0() {
	local out
	out=$(adm map "tcp://$ADDR/vol0" --lanes 2 --queue-depth 32 --crc \
		--host adm-host --loss-timeout 30) || return 1
	echo "$out" > "$WORK/dev"
	echo "printed: $out"
	case "$out" in /dev/tern[0-9]*) ;; *) return 1 ;; esac
	[ -b "$out" ] || { echo "$out is not a block device"; return 1; }
	[ "$(blockdev --getsize64 "$out")" = "$(blockdev --getsize64 "$BACK")" ]
}

data_matches() {
	dd if=/dev/urandom of="$WORK/data" bs=1M count=4 status=none &&
		dd if="$WORK/data" of="$DEV" bs=1M seek=3 oflag=direct status=none ||
		return 1
	local a b c
	a=$(sha256sum < "$WORK/data")
	b=$(dd if="$BACK" bs=1M skip=3 count=4 iflag=direct status=none | sha256sum)
	c=$(dd if="$DEV" bs=1M skip=3 count=4 iflag=direct status=none | sha256sum)
	echo "written $a"
	echo "backing $b"
	echo "device  $c"
	[ "$a" = "$b" ] && [ "$a" = "$c" ]
}

list_shows() {
	adm list || return 1
	adm list | grep -q "^${DEV#/dev/} .*tcp://$ADDR:7447/vol0 .*live" ||
		return 1
	adm list --json > "$WORK/list.json" || return 1
	python3 - "$WORK/list.json" "${DEV#/dev/}" \
		"$(blockdev --getsize64 "$BACK")" <<-'EOF'
	import json, sys
	devs = json.load(open(sys.argv[1]))
	assert isinstance(devs, list) and len(devs) == 1, devs
	d = devs[0]
	want = {"name": sys.argv[2], "device": "/dev/" + sys.argv[2],
		"transport": "tcp", "address": "127.0.0.1", "service": 7447,
		"export": "vol0", "host": "adm-host", "state": "live",
		"lanes": 2, "queue_depth": 32, "size": int(sys.argv[3]),
		"read_only": False, "crc": True}
	for k, v in want.items():
	    assert d.get(k) == v, (k, d.get(k), v)
	EOF
}

# --max-lanes and --max-queue-depth cap what a mapping negotiates
port_caps() {
	local d rc=0 l q
	adm target port add p2 "tcp://$ADDR:7449" --max-lanes 1 \
		--max-queue-depth 16 && adm target link p2 vol0 || return 1
	[ "$(cat "$CFG/ports/p2/max_lanes")" = 1 ] &&
		[ "$(cat "$CFG/ports/p2/max_queue_depth")" = 16 ] || rc=1
	adm target show --json | grep -q '"max_lanes":1' || rc=1
	if d=$(adm map "tcp://$ADDR:7449/vol0" --lanes 4 --host adm-host); then
		l=$(cat "/sys/block/${d#/dev/}/tern/lanes")
		q=$(cat "/sys/block/${d#/dev/}/tern/queue_depth")
		echo "$d: lanes $l, queue_depth $q"
		[ "$l" = 1 ] && [ "$q" = 16 ] || rc=1
		adm unmap "$d" || rc=1
	else
		rc=1
	fi
	adm target port del p2 || rc=1
	return $rc
}

# IPv6 in brackets, on both sides; a read-only mapping
ipv6_read_only() {
	local d rc=0
	adm target port add p6 "tcp://[::1]:7448" &&
		adm target link p6 vol0 || return 1
	adm target show | grep -q "^port   p6 .*tcp://\[::1\]:7448 .*enabled" || rc=1
	d=$(adm map "tcp://[::1]:7448/vol0" --read-only --host other) || rc=1
	if [ -n "$d" ]; then
		adm list | grep "^${d#/dev/} "
		adm list | grep -q "^${d#/dev/} .*tcp://\[::1\]:7448/vol0 .* ro$" ||
			rc=1
		[ "$(cat "/sys/block/${d#/dev/}/ro")" = 1 ] || rc=1
		adm unmap "$d" || rc=1
	fi
	adm target port del p6 || rc=1
	return $rc
}

# unmap refuses a mounted or open device, then unmaps it after umount
unmap_busy() {
	local name=${DEV#/dev/} rc=0 fd
	mkfs.ext4 -q -F "$DEV" || return 1
	mkdir -p "$WORK/mnt" && mount "$DEV" "$WORK/mnt" || return 1
	if adm unmap "$DEV"; then
		echo "unmapped while mounted"
		rc=1
	fi
	[ -e "/sys/block/$name" ] || rc=1
	umount "$WORK/mnt" || return 1
	exec {fd}<"$DEV"
	if adm unmap "$name"; then
		echo "unmapped while open"
		rc=1
	fi
	exec {fd}<&-
	[ -e "/sys/block/$name" ] || return 1
	adm unmap "$name" || return 1
	[ ! -e "/sys/block/$name" ] || { echo "$name still there"; return 1; }
	[ -z "$(tern_devs)" ] && [ "$(adm list --json)" = "[]" ] && return $rc
	return 1
}

# --force unmaps a device that is mounted (read-only here, so the dead
# device's filesystem has nothing to write back)
unmap_force() {
	local d
	d=$(adm map "tcp://$ADDR:7447/vol0" --host other) || return 1
	mount -o ro "$d" "$WORK/mnt" || return 1
	if adm unmap "$d" 2>/dev/null; then
		echo "unmapped while mounted"
		return 1
	fi
	adm unmap --force "$d" || return 1
	[ ! -e "/sys/block/${d#/dev/}" ] || { echo "$d still there"; return 1; }
	umount "$WORK/mnt" && [ -z "$(tern_devs)" ]
}

# must_exit CODE ARGS...: ternadm exits CODE and says why on stderr
must_exit() {
	local want=$1 rc err
	shift
	err=$(adm "$@" 2>&1 >/dev/null)
	rc=$?
	[ "$want" = 1 ] && echo "$err"
	if [ "$rc" != "$want" ] || [ -z "$err" ]; then
		echo "ternadm $* exited $rc, not $want (${err:-no message})"
		return 1
	fi
}

bad_usage() {
	local before rc=0 a
	before=$(state)
	while read -r -a a; do
		must_exit 2 "${a[@]}" || rc=1
	done <<-EOF
	map
	map tcp://localhost/vol0
	map udp://$ADDR/vol0
	map tcp://::1/vol0
	map tcp://$ADDR:70000/vol0
	map tcp://$ADDR:/vol0
	map tcp://$ADDR/vol0 --colour blue
	map tcp://$ADDR/vol0 --lanes 0
	map tcp://$ADDR/vol0 --lanes 65
	map tcp://$ADDR/vol0 --queue-depth 0
	map tcp://$ADDR/vol0 --loss-timeout 0
	map tcp://$ADDR/vol0 --lanes 2 --lanes 2
	map tcp://$ADDR/vol0 --host a/b
	map tcp://$ADDR
	map tcp://$ADDR/
	map tcp://$ADDR/a/b
	map tcp://$ADDR/vol0 tcp://$ADDR/vol0
	unmap
	unmap sda
	unmap tern0 --now
	list --yaml
	target export add bad/name $BACK
	target export add vol1 relative/path
	target export add vol1 $BACK --allowed-hosts a,,b
	target export add vol1 $BACK --writable
	target port add p1 tcp://$ADDR/vol0
	target port add p1 $ADDR
	target port add p1 tcp://$ADDR:7448 --max-lanes 0
	target port add p1 tcp://$ADDR:7448 --max-lanes 65
	target port add p1 tcp://$ADDR:7448 --max-queue-depth 257
	target port add p1 tcp://$ADDR:7448 --max-lanes 2 --max-lanes 2
	target port add p1 tcp://$ADDR:7448 --max-lanes
	target port del
	target link p0
	target export resize
	target export resize vol0 vol0
	target export resize a/b
	target frobnicate
	EOF
	[ "$before" = "$(state)" ] || { echo "state changed"; rc=1; }
	return $rc
}

# the kernel or the target refuses: exit 1, nothing made or half made
op_failures() {
	local before rc=0
	before=$(state)
	must_exit 1 map "tcp://$ADDR/nosuch" || rc=1
	must_exit 1 map "tcp://$ADDR:7499/vol0" || rc=1
	must_exit 1 map "tcp://$ADDR/vol0" --host intruder || rc=1
	must_exit 1 map "rdma://$ADDR/vol0" || rc=1
	must_exit 1 unmap tern99 || rc=1
	must_exit 1 target export add vol1 /nonexistent || rc=1
	must_exit 1 target export add vol0 "$BACK" || rc=1
	must_exit 1 target port add p1 tcp://192.0.2.1:7447 || rc=1
	must_exit 1 target port add p0 tcp://127.0.0.1:7448 || rc=1
	must_exit 1 target export del vol0 || rc=1
	must_exit 1 target export resize nosuch || rc=1
	must_exit 1 target link p0 vol0 || rc=1
	must_exit 1 target link p0 nosuch || rc=1
	must_exit 1 target unlink p0 nosuch || rc=1
	[ "$before" = "$(state)" ] || { echo "state changed"; rc=1; }
	return $rc
}

teardown_target() {
	adm target unlink p0 vol0 && adm target link p0 vol0 &&
		adm target port del p0 && adm target export del vol0 || return 1
	adm target show
	[ -z "$(ls -A "$CFG/exports")" ] && [ -z "$(ls -A "$CFG/ports")" ] &&
		[ "$(adm target show --json | tr -d '\n')" = '{"exports":[],"ports":[],"hosts":[]}' ]
}

unload() {
	# rdma:// above may have loaded the RDMA transport on demand
	if grep -q '^tern_rdma ' /proc/modules; then
		modprobe -r tern_rdma || return 1
	fi
	blk_unload brd
}

ktap_plan 13

ktap_check "modules load (tern_tcp, tern_target, tern_blk, brd)" setup_modules
ktap_check "ternadm target: export vol0 on $BACK, port p0, link" setup_target
ktap_check "ternadm map prints the device; its size is the backing device's" \
	map_vol0
DEV=$(cat "$WORK/dev" 2>/dev/null)
ktap_check "random data through $DEV equals the backing device" data_matches
ktap_check "ternadm list and list --json show $DEV" list_shows
if ip -6 addr show dev lo 2>/dev/null | grep -q "inet6 ::1/"; then
	ktap_check "IPv6 URIs in brackets; --read-only maps read-only" \
		ipv6_read_only
else
	ktap_skip "IPv6 URIs: no ::1 in the guest"
fi
ktap_check "target port add --max-lanes 1 --max-queue-depth 16 caps a map" \
	port_caps
ktap_check "bad command lines exit 2 and change nothing" bad_usage
ktap_check "refused operations exit 1 and leave nothing half made" op_failures
ktap_check "unmap refuses $DEV mounted or open, unmaps it after" unmap_busy
ktap_check "unmap --force unmaps a mounted device" unmap_force
ktap_check "ternadm target teardown leaves exports and ports empty" \
	teardown_target
ktap_check "modules unload" unload
rm -rf "$WORK"
ktap_finish
