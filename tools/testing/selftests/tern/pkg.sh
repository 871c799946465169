#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The Debian packages as a user gets them, in the guest: dpkg -i installs
# tern-dkms and ternadm into the guest's overlay (its root is the host's,
# read-only, under a tmpfs: nothing reaches the host), DKMS builds and
# installs the modules for the guest's kernel, and those load, not the
# tree's. depmod over the whole Debian module tree takes over two
# minutes under emulation, so DKMS runs with --no-depmod and the modules
# are loaded from where DKMS put them, after the in-tree modules they
# depend on; what is loaded is checked to be DKMS's build (srcversion). Then what the packages are for: the units pass
# systemd-analyze verify; ternadm target restore makes a target from a
# JSON file, save after clear and restore gives the same JSON, and a
# restore that fails leaves nothing behind; map --all maps a maps file,
# again changes nothing, unmap --all unmaps it; and the command lines of
# tern-target.service and tern-map.service do their job.
#
# DKMS: make check lets DKMS build the package on the host for the
# guest's kernel (tools/packaging/dkms-prebuild), since compiling under
# emulation takes minutes; this loads that build as "dkms ldtarball"
# does and runs dkms install. With PKG_DKMS_IN_GUEST=1 dkms build
# compiles here, as on a user's machine (the postinst found no
# headers: the guest's module tree has no build link until this adds it).
#
# Needs make deb (and, for the fast path, dkms-prebuild) first; skips
# when there are no packages. Leaves nothing installed.

export TRANSPORT=tcp
. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/blk_lib.sh"

SRC=$(cd "$(dirname "$0")/../../../.." && pwd)
BUILD=${TERN_BUILD:-$SRC/build}
DEBS=$BUILD/deb
KVER=$(uname -r)
VERSION=$(cat "$SRC/VERSION")
PREBUILT=$DEBS/dkms-$KVER/tern-$VERSION.dkms.tar.gz
MODS=/lib/modules/$KVER
HIDDEN=/var/tmp/tern-pkg-tree-modules
WORK=/var/tmp/tern-pkg
KEYS=$WORK/keys
MODULES="tern tern_tcp tern_rdma tern_bench tern_target tern_blk"
UNITS="tern-map.service tern-target.service"
# the packaged ternadm, not the tree's
TERNADM=/usr/sbin/ternadm
export DEBIAN_FRONTEND=noninteractive

ktap_plan 21

if ! ls "$DEBS"/tern-dkms_"$VERSION"_all.deb "$DEBS"/ternadm_"$VERSION"_*.deb \
	> /dev/null 2>&1; then
	ktap_info "no packages in $DEBS: run make deb first"
	for _ in $(seq 18); do
		ktap_skip "no packages"
	done
	ktap_finish
fi

unload_ours() {
	local m
	for m in tern_bench tern_blk tern_target tern_rdma tern_tcp tern; do
		grep -q "^$m " /proc/modules && modprobe -r "$m"
	done
	! grep -q '^tern' /proc/modules
}

cleanup() {
	local d
	for d in /sys/block/tern*; do
		[ -e "$d" ] && echo "remove=${d##*/}" > "$CTL" 2>/dev/null
	done
	[ -x "$TERNADM" ] && "$TERNADM" target clear 2>/dev/null
	unload_ours 2>/dev/null
	dkms_remove 2>/dev/null
	dpkg --purge ternadm tern-dkms > /dev/null 2>&1
	# the tree's modules back, for whatever runs after this
	if [ -d "$HIDDEN" ]; then
		mv "$HIDDEN"/* "$MODS/extra/" 2>/dev/null
		rmdir "$HIDDEN"
	fi
	rm -rf "$WORK" /etc/tern
}
trap cleanup EXIT

# The guest's module tree holds the tree's modules in extra/, at the same
# version: DKMS would not replace them. Put them aside (modules.dep is
# left as it is: nothing here loads by it).
hide_tree_modules() {
	mkdir -p "$HIDDEN" || return 1
	if ls "$MODS"/extra/tern*.ko* > /dev/null 2>&1; then
		mv "$MODS"/extra/tern*.ko* "$HIDDEN/" || return 1
	fi
}

# what the tern-dkms prerm would do, without its depmod (see the top);
# DKMS's tree for the version tells without a slow "dkms status"
dkms_remove() {
	[ -d "/var/lib/dkms/tern/$VERSION" ] || return 0
	dkms remove -m tern -v "$VERSION" --all --no-depmod
}

install_debs() {
	local debs
	debs=$(ls "$DEBS"/tern-dkms_"$VERSION"_all.deb "$DEBS"/ternadm_"$VERSION"_*.deb)
	# man-db's trigger would index every man page over 9p: not ours
	# shellcheck disable=SC2086
	dpkg -i --no-triggers $debs || return 1
	dpkg -s tern-dkms ternadm | grep -E '^(Package|Status|Version):'
	[ "$(dpkg-query -W -f='${Status} ${Version}' tern-dkms)" = "install ok installed $VERSION" ] &&
		[ "$(dpkg-query -W -f='${Status} ${Version}' ternadm)" = "install ok installed $VERSION" ]
}

# Only production files: no test module, no test.
no_test_files() {
	local bad
	bad=$(dpkg -L tern-dkms ternadm | grep -E 'selftests|tern_test|testing|/debian/')
	[ -z "$bad" ] || { echo "packaged: $bad"; return 1; }
	[ -f "/usr/src/tern-$VERSION/dkms.conf" ] && [ -x "$TERNADM" ] &&
		[ -f /lib/systemd/system/tern-map.service ] &&
		[ -f /lib/systemd/system/tern-target.service ] &&
		[ -f /etc/tern/maps ]
}

verify_units() {
	local u out rc=0
	for u in $UNITS; do
		out=$(systemd-analyze verify --man=no "/lib/systemd/system/$u" 2>&1) || rc=1
		# verify also reports other units it reads: only ours matter
		echo "$out"
		echo "$out" | grep -q "^$u:" && rc=1
	done
	return $rc
}

# DKMS builds for this kernel and installs into updates/dkms.
dkms_install() {
	local tmp i built m f
	# the headers, as linux-headers-$KVER would link them
	[ -e "$MODS/build" ] || ln -s "/usr/src/linux-headers-$KVER" "$MODS/build" ||
		return 1
	if [ "${PKG_DKMS_IN_GUEST:-0}" = 1 ]; then
		echo "building in the guest"
		dkms build -m tern -v "$VERSION" -k "$KVER" || {
			cat "/var/lib/dkms/tern/$VERSION/build/make.log"
			return 1
		}
	else
		# make check builds it beside the guest: wait for that (the
		# root is 9p with cache=loose, so forget what was seen of it)
		for ((i = 0; i < 600; i++)); do
			echo 2 > /proc/sys/vm/drop_caches
			[ -e "$(dirname "$PREBUILT")/building" ] || break
			sleep 1
		done
		if [ ! -f "$PREBUILT" ]; then
			echo "no $PREBUILT: run tools/packaging/dkms-prebuild $KVER (make check does), or set PKG_DKMS_IN_GUEST=1"
			return 1
		fi
		# what dkms ldtarball does; 3.0.10's exits 3 on an added module
		echo "loading the host's DKMS build, $PREBUILT"
		tmp=$(mktemp -d)
		tar -xzf "$PREBUILT" -C "$tmp" &&
			cp -a "$tmp/dkms_main_tree/$KVER" "/var/lib/dkms/tern/$VERSION/" ||
			return 1
		rm -rf "$tmp"
	fi
	dkms install -m tern -v "$VERSION" -k "$KVER" --no-depmod || return 1
	# installed is what "dkms status" would say, by what it compares:
	# each module of DKMS's build is the one in updates/dkms (the
	# command itself takes over 10 s here)
	built=/var/lib/dkms/tern/$VERSION/$KVER/$(uname -m)/module
	for m in $MODULES; do
		f=$(ls "$built/$m".ko* 2>/dev/null) && [ -n "$f" ] ||
			{ echo "DKMS built no $m"; return 1; }
		cmp "$f" "$MODS/updates/dkms/${f##*/}" ||
			{ echo "$m: updates/dkms does not hold DKMS's build"; return 1; }
		echo "installed: $MODS/updates/dkms/${f##*/}"
	done
}

# DKMS's modules load (in-tree dependencies first, by modprobe), and
# what is loaded is DKMS's build at the project's version.
dkms_modules_load() {
	local m f dep
	for m in $MODULES; do
		f=$(ls "$MODS"/updates/dkms/"$m".ko* 2>/dev/null) && [ -n "$f" ] ||
			{ echo "DKMS installed no $m"; return 1; }
		for dep in $(modinfo -F depends "$f" | tr , ' '); do
			case " $MODULES " in
			*" $dep "*) ;;
			*) modprobe "$dep" || return 1 ;;
			esac
		done
		insmod "$f" || return 1
		echo "$m: $f, version $(cat "/sys/module/$m/version")"
		[ "$(cat "/sys/module/$m/srcversion")" = "$(modinfo -F srcversion "$f")" ] ||
			{ echo "$m: the loaded module is not $f"; return 1; }
		[ "$(cat "/sys/module/$m/version")" = "$VERSION" ] || return 1
	done
	# and no test module came with them
	! find "$MODS/updates" -name 'tern_test*' | grep -q .
}

setup_backing() {
	mkdir -p "$KEYS" || return 1
	modprobe brd rd_nr=2 rd_size=16384 max_part=0 || return 1
	truncate -s 8M "$WORK/file0" || return 1
	"$TERNADM" key generate --out "$KEYS/pkg-host.key" > /dev/null &&
		chmod 600 "$KEYS/pkg-host.key"
}

# A key file someone else could have written is no key: one writable by
# group, one of another user, a FIFO (whose open would wait) are refused;
# one readable by group is used, with a warning.
key_files_checked() {
	local k=$KEYS/pkg-host.key err
	cp "$k" "$WORK/gw.key" && chmod 620 "$WORK/gw.key" &&
		cp "$k" "$WORK/other.key" && chown 65534 "$WORK/other.key" &&
		cp "$k" "$WORK/gr.key" && chmod 640 "$WORK/gr.key" &&
		mkfifo "$WORK/fifo.key" || return 1
	adm key check "$WORK/gw.key" && return 1
	adm key check "$WORK/other.key" && return 1
	timeout 10 "$TERNADM" key check "$WORK/fifo.key"
	[ $? = 1 ] || return 1
	err=$(adm key check "$WORK/gr.key" 2>&1 >/dev/null) || return 1
	echo "$err"
	[[ $err == *"readable by group or others"* ]]
}

# A configuration as target save writes it, by hand: two exports, two
# ports, a host with a key.
write_config() {
	cat > "$WORK/target.json" <<-EOF
	{"exports":[
	{"name":"vol0","device_path":"/dev/ram0","read_only":false,"require_auth":false,"enabled":true,"allowed_hosts":[]},
	{"name":"vol1","device_path":"$WORK/file0","read_only":true,"require_auth":true,"enabled":true,"allowed_hosts":["pkg-host","other"]}
	],
	"ports":[
	{"name":"p0","transport":"tcp","address":"127.0.0.1","service":7447,"max_lanes":2,"max_queue_depth":0,"require_auth":false,"require_encrypt":false,"require_integrity":false,"enabled":true,"exports":["vol1","vol0"]},
	{"name":"p1","transport":"tcp","address":"::1","service":7448,"max_lanes":0,"max_queue_depth":64,"require_auth":true,"require_encrypt":false,"require_integrity":false,"enabled":true,"exports":["vol1"]}
	],
	"hosts":[
	{"name":"pkg-host","key_set":true}
	]}
	EOF
}

cfg_state() {
	(cd "$CFG" && find exports ports hosts 2>/dev/null | sort)
}

restore_creates() {
	write_config
	adm target restore "$WORK/target.json" --keys "$KEYS" || return 1
	adm target show
	[ -L "$CFG/ports/p0/exports/vol0" ] && [ -L "$CFG/ports/p1/exports/vol1" ] &&
		[ "$(cat "$CFG/exports/vol1/read_only")" = 1 ] &&
		[ "$(cat "$CFG/ports/p0/enable")" = 1 ] &&
		[ "$(cat "$CFG/hosts/pkg-host/key")" = set ]
}

save_clear_restore() {
	adm target save "$WORK/saved1.json" --keys "$KEYS" || return 1
	adm target clear || return 1
	[ -z "$(cfg_state | grep -v -x -e exports -e ports -e hosts)" ] ||
		{ echo "clear left:"; cfg_state; return 1; }
	adm target restore "$WORK/saved1.json" --keys "$KEYS" || return 1
	adm target save "$WORK/saved2.json" --keys "$KEYS" || return 1
	cat "$WORK/saved1.json"
	cmp "$WORK/saved1.json" "$WORK/saved2.json"
}

# A restore that cannot be done changes nothing: onto a configured
# target, and one the kernel refuses half way: the last export's device
# is mounted, which enable refuses after the host and the other exports
# were made.
restore_refuses() {
	local before after rc
	before=$(cfg_state)
	adm target restore "$WORK/saved1.json" --keys "$KEYS" && return 1
	[ "$(cfg_state)" = "$before" ] || return 1
	adm target clear || return 1
	before=$(cfg_state)
	python3 - "$WORK/saved1.json" "$WORK/busy.json" <<-'EOF'
	import json, sys
	c = json.load(open(sys.argv[1]))
	c["exports"].append({"name": "zbusy", "device_path": "/dev/ram1"})
	json.dump(c, open(sys.argv[2], "w"))
	EOF
	mkdir -p "$WORK/mnt" && mkfs.ext4 -q -F /dev/ram1 &&
		mount /dev/ram1 "$WORK/mnt" || return 1
	adm target restore "$WORK/busy.json" --keys "$KEYS"
	rc=$?
	umount "$WORK/mnt"
	after=$(cfg_state)
	[ "$rc" = 1 ] && [ "$after" = "$before" ] ||
		{ echo "exit $rc, left behind: $after"; return 1; }
	adm target restore "$WORK/saved1.json" --keys "$KEYS"
}

# Save refuses what restore would: an export made and never given a
# device, and leaves the file it would have replaced as it was.
save_refuses_half_made() {
	local rc
	echo old > "$WORK/half.json" && mkdir "$CFG/exports/half" || return 1
	adm target save "$WORK/half.json"
	rc=$?
	rmdir "$CFG/exports/half" || return 1
	[ "$rc" = 1 ] && [ "$(cat "$WORK/half.json")" = old ] &&
		[ ! -e "$WORK/half.json.tmp" ]
}

write_maps() {
	cat > "$1" <<-EOF
	# tern devices for the package test

	tcp://127.0.0.1/vol0 --lanes 2 --queue-depth 16
	  tcp://[::1]:7448/vol1	--host pkg-host --key-file $KEYS/pkg-host.key
	EOF
}

map_all() {
	local out
	write_maps "$WORK/maps"
	out=$(adm map --all --file "$WORK/maps") || return 1
	echo "$out"
	[ "$(echo "$out" | grep -c 'mapped as /dev/tern')" = 2 ] &&
		[ "$(tern_devs | wc -l)" = 2 ] || return 1
	tern_devs > "$WORK/devs"
	grep -l '^vol1$' /sys/block/tern*/tern/export > /dev/null
}

map_all_again() {
	local out
	out=$(adm map --all --file "$WORK/maps") || return 1
	echo "$out"
	[ "$(echo "$out" | grep -c 'already mapped as /dev/tern')" = 2 ] &&
		[ "$(tern_devs)" = "$(cat "$WORK/devs")" ]
}

# A line is read as map reads it: an abbreviated --host names the host
# the device is mapped as, a CRLF line end is a line end, and --new is
# refused however it is spelled.
map_all_spellings() {
	local out
	printf 'tcp://[::1]:7448/vol1 --hos pkg-host --key-f %s\r\n' \
		"$KEYS/pkg-host.key" > "$WORK/maps.abbr"
	out=$(adm map --all --file "$WORK/maps.abbr") || return 1
	echo "$out"
	[[ $out == *"already mapped as /dev/tern"* ]] || return 1
	echo "tcp://127.0.0.1/vol0 --ne --hos=other" > "$WORK/maps.new"
	adm map --all --file "$WORK/maps.new" && return 1
	[ "$(tern_devs)" = "$(cat "$WORK/devs")" ]
}

# A line that cannot be mapped fails the run, not the other lines.
map_all_bad_line() {
	local rc
	{ cat "$WORK/maps"; echo "tcp://127.0.0.1/novol"; echo "tcp://300.1.1.1/x"; } \
		> "$WORK/maps.bad"
	adm map --all --file "$WORK/maps.bad"
	rc=$?
	[ "$rc" = 1 ] && [ "$(tern_devs)" = "$(cat "$WORK/devs")" ]
}

unmap_all() {
	adm unmap --all --file "$WORK/maps" || return 1
	[ -z "$(tern_devs)" ] || return 1
	adm unmap --all --file "$WORK/maps"
}

# Run a unit's Exec line(s) of @key as systemd would: a leading '-' lets
# the command fail.
unit_exec() {
	local unit=/lib/systemd/system/$1 key=$2 line ignore words
	while IFS= read -r line; do
		ignore=0
		case "$line" in -*) ignore=1; line=${line#-} ;; esac
		read -r -a words <<< "$line"
		echo "$key: ${words[*]}"
		"${words[@]}" || [ "$ignore" = 1 ] || return 1
	done < <(sed -n "s/^$key=//p" "$unit")
}

target_unit_runs() {
	mkdir -p /etc/tern/keys &&
		cp "$KEYS/pkg-host.key" /etc/tern/keys/ &&
		chmod 600 /etc/tern/keys/pkg-host.key &&
		cp "$WORK/saved1.json" /etc/tern/target.json || return 1
	adm target clear || return 1
	unit_exec tern-target.service ExecStartPre &&
		unit_exec tern-target.service ExecStart || return 1
	adm target save "$WORK/unit.json" || return 1
	cmp "$WORK/saved1.json" "$WORK/unit.json" || return 1
	# stopped later, after tern-map.service, as shutdown orders them
}

map_unit_runs() {
	write_maps /etc/tern/maps
	unit_exec tern-map.service ExecStartPre &&
		unit_exec tern-map.service ExecStart || return 1
	[ "$(tern_devs | wc -l)" = 2 ] || return 1
	unit_exec tern-map.service ExecStart || return 1
	[ "$(tern_devs | wc -l)" = 2 ] || return 1
	unit_exec tern-map.service ExecStop || return 1
	[ -z "$(tern_devs)" ] || return 1
	unit_exec tern-target.service ExecStop || return 1
	[ -z "$(cfg_state | grep -v -x -e exports -e ports -e hosts)" ]
}

purge_removes() {
	adm target clear
	unload_ours && dkms_remove || return 1
	dpkg --purge ternadm tern-dkms || return 1
	! dpkg -s tern-dkms > /dev/null 2>&1 && [ ! -e "$TERNADM" ] &&
		! ls "$MODS"/updates/dkms/tern* > /dev/null 2>&1 &&
		[ ! -e "/usr/src/tern-$VERSION" ]
}

rm -rf "$WORK"
mkdir -p "$WORK"
ktap_info "packages: $(cd "$DEBS" && echo ./*.deb)"
check "no module of ours loaded; the tree's modules put aside" \
	eval 'unload_ours && hide_tree_modules'
check "dpkg -i installs tern-dkms and ternadm $VERSION" install_debs
check "the packages hold no test module and no test" no_test_files
check "systemd-analyze verify passes both units" verify_units
check "DKMS builds and installs the modules for $KVER" dkms_install
check "DKMS's modules load, the loaded ones are its build at $VERSION" \
	dkms_modules_load
check "the packaged ternadm says version $VERSION" \
	eval '[ "$("$TERNADM" --version)" = "ternadm $VERSION" ]'
check "set up: a RAM disk, a file and a key" setup_backing
check "key files writable by others, of another user, or no regular file are refused" \
	key_files_checked
check "target restore creates exports, ports, links and a host from JSON" \
	restore_creates
check "target save, clear, restore, save: the same JSON" save_clear_restore
check "target restore onto a configuration, or failing half way, changes nothing" \
	restore_refuses
check "target save refuses an export restore would refuse; the old file stays" \
	save_refuses_half_made
check "map --all maps each line of a maps file" map_all
check "map --all again maps nothing new" map_all_again
check "map --all reads abbreviated options and CRLF as map does; --ne refused" \
	map_all_spellings
check "map --all maps what it can, reports the rest, exits 1" map_all_bad_line
check "unmap --all unmaps them, and again is a no-op" unmap_all
check "tern-target.service's commands restore the target" target_unit_runs
check "tern-map.service's commands map and unmap; tern-target's stop clears" \
	map_unit_runs
check "dpkg --purge removes both packages and DKMS's modules" purge_removes
ktap_finish
