#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# ternadm map, unmap, list and target, end to end in one guest: a brd RAM
# disk is exported and served with "ternadm target", mapped over
# tcp://127.0.0.1 with "ternadm map", checked, listed and unmapped; bad
# command lines exit 2 and change nothing; the target is torn down with
# ternadm too. Also what tern_blk does for ternadm: a second map of a
# mapped export gives its device (--new another), a read of the control
# device lists the options, remove refuses an open device without force,
# and the loss timeout (forever too) and keepalive change through sysfs.
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
		--host adm-host --loss-timeout 30 --inline-write 8192 \
		--inline-read 0) || return 1
	echo "$out" > "$WORK/dev"
	echo "printed: $out"
	case "$out" in /dev/tern[0-9]*) ;; *) return 1 ;; esac
	[ -b "$out" ] || { echo "$out is not a block device"; return 1; }
	# the inline limits reached the kernel (only RDMA paths use them)
	[ "$(cat "/sys/block/${out#/dev/}/tern/inline_write")" = 8192 ] &&
		[ "$(cat "/sys/block/${out#/dev/}/tern/inline_read")" = 0 ] ||
		{ echo "inline limits not as asked"; return 1; }
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
		"read_only": False, "crc": True, "inline_write": 8192,
		"inline_read": 0}
	for k, v in want.items():
	    assert d.get(k) == v, (k, d.get(k), v)
	assert d.get("auth") is False and d.get("encrypt") is False, d
	assert d.get("integrity") is False, d
	EOF
	# 32 MiB of brd, in units of 1024
	adm list | grep -q "^${DEV#/dev/} .* size 32.0M  *crc$"
}

# mapping the mapped export again gives its device; --new another one
map_again() {
	local d n rc=0
	d=$(adm map "tcp://$ADDR/vol0" --host adm-host) || return 1
	echo "again: $d"
	[ "$d" = "$DEV" ] || { echo "not $DEV"; rc=1; }
	[ "$(tern_devs | wc -l)" = 1 ] || { echo "a second device"; rc=1; }
	# through the control device too: the same answer
	n=$(map "transport=tcp,address=$ADDR,export=vol0,host=adm-host")
	[ "/dev/$n" = "$DEV" ] || { echo "ctl answered $n"; rc=1; }
	# asking for what the device lacks: EEXIST, not it, not another
	if d=$(adm map "tcp://$ADDR/vol0" --host adm-host --read-only 2>&1); then
		echo "a read-only map got $d"
		rc=1
	fi
	case "$d" in *"File exists"*) ;; *) echo "read-only map: $d"; rc=1 ;; esac
	[ "$(tern_devs | wc -l)" = 1 ] || { echo "a second device"; rc=1; }
	d=$(adm map "tcp://$ADDR/vol0" --host adm-host --new) || return 1
	echo "--new: $d"
	[ "$d" != "$DEV" ] && [ -b "$d" ] || rc=1
	[ "$(cat "/sys/block/${d#/dev/}/tern/export")" = vol0 ] || rc=1
	adm unmap "$d" || rc=1
	[ "$(tern_devs | wc -l)" = 1 ] || rc=1
	return $rc
}

# a read before any write lists every option of the add command
ctl_lists_options() {
	local line k
	line=$(head -n 1 "$CTL") || return 1
	echo "$line"
	for k in transport address service export host lanes queue_depth crc \
		read_only loss_timeout key encrypt integrity duplicate \
		inline_write inline_read; do
		[[ ,$line, == *",$k="* ]] || { echo "no $k"; return 1; }
	done
}

# remove=NAME refuses an open device and answers name=NAME otherwise;
# force=1 removes an open one
ctl_remove() {
	local d fd ans rc=0
	d=$(map "transport=tcp,address=$ADDR,export=vol0,host=other") ||
		return 1
	exec {fd}<"/dev/$d"
	if printf 'remove=%s' "$d" 2>/dev/null > "$CTL"; then
		echo "removed while open"
		rc=1
	fi
	dmesg | tail -n 3 | grep -q "$d is open" || { echo "no log line"; rc=1; }
	[ -e "/sys/block/$d" ] || return 1
	exec {fd}<&-
	exec {fd}<>"$CTL"
	printf 'remove=%s' "$d" >&"$fd" || rc=1
	read -r ans <&"$fd"
	exec {fd}>&-
	echo "answer: $ans"
	[ "$ans" = "name=$d" ] && [ ! -e "/sys/block/$d" ] || rc=1
	d=$(map "transport=tcp,address=$ADDR,export=vol0,host=other") ||
		return 1
	exec {fd}<"/dev/$d"
	printf 'remove=%s,force=1' "$d" > "$CTL" || rc=1
	exec {fd}<&-
	[ ! -e "/sys/block/$d" ] || rc=1
	return $rc
}

# sess_stat DEV KEY: KEY of DEV's session in debugfs
sess_stat() {
	awk -v k="$2" '$1 == k { print $2 }' \
		/sys/kernel/debug/tern/blk.*/"$(cat "/sys/block/$1/tern/session_id")"/stats
}

# --loss-timeout forever; loss_timeout_ms and keepalive_ms change live
live_timeouts() {
	local d t rc=0 bad
	d=$(adm map "tcp://$ADDR/vol0" --host other --loss-timeout forever) ||
		return 1
	t=/sys/block/${d#/dev/}/tern
	d=${d#/dev/}
	echo "loss $(cat "$t/loss_timeout_ms"), keepalive $(cat "$t/keepalive_ms")"
	[ "$(cat "$t/loss_timeout_ms")" = forever ] &&
		[ "$(sess_stat "$d" loss_timeout_ms)" = forever ] || rc=1
	[ "$(cat "$t/keepalive_ms")" = 5000 ] || rc=1
	echo 30000 > "$t/loss_timeout_ms" && echo 1000 > "$t/keepalive_ms" ||
		rc=1
	[ "$(cat "$t/loss_timeout_ms")" = 30000 ] &&
		[ "$(sess_stat "$d" loss_timeout_ms)" = 30000 ] &&
		[ "$(cat "$t/keepalive_ms")" = 1000 ] &&
		[ "$(sess_stat "$d" keepalive_ms)" = 1000 ] &&
		[ "$(sess_stat "$d" keepalive_timeout_ms)" = 3000 ] || rc=1
	for bad in 0 999 86400001 never -1 ""; do
		if echo "$bad" 2>/dev/null > "$t/loss_timeout_ms"; then
			echo "loss_timeout_ms '$bad' accepted"
			rc=1
		fi
	done
	for bad in 0 99 60001 x; do
		if echo "$bad" 2>/dev/null > "$t/keepalive_ms"; then
			echo "keepalive_ms '$bad' accepted"
			rc=1
		fi
	done
	echo forever > "$t/loss_timeout_ms" || rc=1
	[ "$(sess_stat "$d" loss_timeout_ms)" = forever ] || rc=1
	# pings every second keep the session live
	sleep 3
	[ "$(cat "$t/state")" = live ] || rc=1
	dd if="/dev/$d" of=/dev/null bs=4k count=1 iflag=direct status=none ||
		rc=1
	adm unmap "$d" || rc=1
	return $rc
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
	map tcp://$ADDR/vol0 --loss-timeout never
	map tcp://$ADDR/vol0 --new --new
	map tcp://$ADDR/vol0 --lanes 2 --lanes 2
	map tcp://$ADDR/vol0 --inline-read 16777217
	map tcp://$ADDR/vol0 --inline-write -1
	map tcp://$ADDR/vol0 --inline-write 0 --inline-write 0
	map tcp://$ADDR/vol0 --host a/b
	map tcp://$ADDR/vol0 --host .h
	map tcp://$ADDR/.vol0
	map -x tcp://$ADDR/vol0
	map tcp://$ADDR
	map tcp://$ADDR/
	map tcp://$ADDR/a/b
	map tcp://$ADDR/vol0 tcp://$ADDR/vol0
	unmap
	unmap sda
	unmap tern0 --now
	list --yaml
	target export add bad/name $BACK
	target export add .vol1 $BACK
	target export add vol1 $BACK --allowed-hosts .h
	target port add .p1 tcp://$ADDR:7448
	target export add vol1 relative/path
	target export add vol1 $BACK --allowed-hosts a,,b
	target export add vol1 $BACK --writable
	target export add vol1 $BACK --uuid nope
	target export add vol1 $BACK --uuid 00000000-0000-0000-0000-000000000000
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

ktap_plan 17

ktap_check "modules load (tern_tcp, tern_target, tern_blk, brd)" setup_modules
ktap_check "ternadm target: export vol0 on $BACK, port p0, link" setup_target
ktap_check "ternadm map prints the device; its size is the backing device's" \
	map_vol0
DEV=$(cat "$WORK/dev" 2>/dev/null)
ktap_check "random data through $DEV equals the backing device" data_matches
ktap_check "ternadm list and list --json show $DEV" list_shows
ktap_check "map of a mapped export gives its device, one asking for more EEXIST; --new another" \
	map_again
ktap_check "a read of $CTL lists every option" ctl_lists_options
ktap_check "remove= refuses an open device, force=1 not; answers name=" \
	ctl_remove
ktap_check "--loss-timeout forever; loss_timeout_ms, keepalive_ms change live" \
	live_timeouts
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
