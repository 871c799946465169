#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Install what building and testing tern needs, idempotently:
#  - Debian packages (apt-get), only when one is missing;
#  - the guest kernel (linux-image-VERSION-unsigned), unpacked into the
#    cache, never installed on the host, with depmod run on it;
#  - checkpatch.pl and its data files, taken from linux-source-6.12;
#  - the headers of Debian's stock kernel (linux-headers-amd64, 6.1 on
#    Debian 12), which `make check` builds for too; no kernel image.
#
# Writes $TERN_CACHE/kver (the guest kernel) and $TERN_CACHE/kvers (every
# kernel to build for, one a line, the guest's first).
#
# Usage: deps.sh [--if-missing | --print-kver | --stock-kernel]
#   --if-missing    do nothing, quickly, when everything is already there
#   --stock-kernel  also fetch the stock kernel's image (make smoke-stock
#                   boots it); print its version
set -euo pipefail

TERN_CACHE=${TERN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tern}
KSERIES=${KSERIES:-6.12}
# Debian's default kernel headers: tern must build for that kernel too
STOCK_HEADERS=linux-headers-amd64

packages=(
	"linux-headers-$KSERIES-amd64" "linux-source-$KSERIES" "$STOCK_HEADERS"
	gcc make perl python3 sparse xz-utils
	qemu-system-x86 busybox-static kmod cpio iproute2
	fio e2fsprogs nvme-cli util-linux procps gnuplot-nox linux-perf
	keyutils tcpdump mdadm dmsetup
	libibverbs-dev librdmacm-dev ibverbs-providers
	udev
	dpkg-dev build-essential debhelper dh-dkms dkms systemd lintian
)

log() { echo "deps: $*" >&2; }

missing_packages() {
	local p st
	for p in "${packages[@]}"; do
		st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
		[ "$st" = "install ok installed" ] || echo "$p"
	done
}

# kmod and busybox trigger a rebuild of the host's own initramfs, which
# nothing here boots: on a fresh machine that alone took about 1.5 of the
# 4 minutes of this script. Switch it off for our install only.
initramfs_conf=/etc/initramfs-tools/update-initramfs.conf

initramfs_restore() {
	[ -f "$initramfs_conf.tern-saved" ] &&
		mv -f "$initramfs_conf.tern-saved" "$initramfs_conf"
	return 0
}

initramfs_hold() {
	grep -q '^update_initramfs=yes' "$initramfs_conf" 2>/dev/null || return 0
	cp -p "$initramfs_conf" "$initramfs_conf.tern-saved" || return 0
	trap initramfs_restore EXIT
	sed -i 's/^update_initramfs=yes/update_initramfs=no/' "$initramfs_conf"
}

install_packages() {
	local missing
	missing=$(missing_packages)
	[ -n "$missing" ] || return 0
	log "installing:" $missing
	export DEBIAN_FRONTEND=noninteractive
	# linux-headers pulls in the image of its kernel: its postinst hook
	# would build an initramfs (and, on a machine without
	# initramfs-tools, there is no update-initramfs.conf to hold yet)
	export INITRD=No
	apt-get update -qq
	initramfs_hold
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >&2
	initramfs_restore
}

# The versioned kernel a headers meta-package points at, e.g.
# 6.12.117+deb12-amd64 for linux-headers-6.12-amd64, 6.1.0-57-amd64 for
# linux-headers-amd64.
resolve_headers() {
	local meta=$1 dep
	dep=$(dpkg-query -W -f='${Depends}' "$meta" 2>/dev/null |
	      grep -o "linux-headers-[0-9][^ ,]*" | head -n1)
	if [ -z "$dep" ] || [ ! -f "/usr/src/$dep/Makefile" ]; then
		log "cannot resolve the $meta version"
		return 1
	fi
	echo "${dep#linux-headers-}"
}

resolve_kver() {
	resolve_headers "linux-headers-$KSERIES-amd64"
}

# The guest's kernel, then the stock one unless it is the same.
resolve_kvers() {
	local guest stock
	guest=$(resolve_kver) || return 1
	stock=$(resolve_headers "$STOCK_HEADERS") || return 1
	echo "$guest"
	[ "$stock" = "$guest" ] || echo "$stock"
}

fetch_guest_kernel() {
	local kver=$1 root="$TERN_CACHE/$1/root" tmp deb
	if [ -f "$root/boot/vmlinuz-$kver" ] && [ -f "$root/lib/modules/$kver/modules.dep" ]; then
		return 0
	fi
	log "fetching linux-image-$kver-unsigned into $TERN_CACHE/$kver"
	tmp=$(mktemp -d)
	# apt's download user must be able to write there
	chown _apt "$tmp" 2>/dev/null || true
	(cd "$tmp" && apt-get download -qq "linux-image-$kver-unsigned" >&2)
	deb=$(ls "$tmp"/linux-image-*.deb)
	rm -rf "$root"
	mkdir -p "$root"
	dpkg-deb -x "$deb" "$root"
	rm -rf "$tmp"
	depmod -b "$root" "$kver"
}

fetch_checkpatch() {
	local dir="$TERN_CACHE/checkpatch" src="/usr/src/linux-source-$KSERIES.tar.xz"
	[ -f "$dir/scripts/checkpatch.pl" ] && return 0
	log "extracting checkpatch.pl from $src"
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	tar -xJf "$src" -C "$dir.tmp" --strip-components=1 --wildcards \
		"linux-source-$KSERIES/scripts/checkpatch.pl" \
		"linux-source-$KSERIES/scripts/spelling.txt" \
		"linux-source-$KSERIES/scripts/const_structs.checkpatch"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
}

everything_present() {
	local kver
	[ -z "$(missing_packages)" ] || return 1
	kver=$(cat "$TERN_CACHE/kver" 2>/dev/null) || return 1
	[ -f "$TERN_CACHE/$kver/root/boot/vmlinuz-$kver" ] &&
	[ -f "$TERN_CACHE/checkpatch/scripts/checkpatch.pl" ] &&
	[ "$(resolve_kver)" = "$kver" ] &&
	[ "$(resolve_kvers)" = "$(cat "$TERN_CACHE/kvers" 2>/dev/null)" ]
}

main() {
	local kver
	if [ "${1:-}" = "--if-missing" ] && everything_present; then
		return 0
	fi
	install_packages
	kver=$(resolve_kver)
	if [ "${1:-}" = "--print-kver" ]; then
		echo "$kver"
		return 0
	fi
	fetch_guest_kernel "$kver"
	fetch_checkpatch
	mkdir -p "$TERN_CACHE"
	echo "$kver" > "$TERN_CACHE/kver"
	resolve_kvers > "$TERN_CACHE/kvers"
	log "ready: guest kernel $kver in $TERN_CACHE/$kver"
	if [ "${1:-}" = "--stock-kernel" ]; then
		kver=$(resolve_headers "$STOCK_HEADERS")
		fetch_guest_kernel "$kver"
		echo "$kver"
	fi
}

main "$@"
