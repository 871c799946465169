#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Authentication and authorization (issue 19), over TRANSPORT (tcp by
# default; auth_rdma.sh runs it over soft-RoCE):
#  - the right key maps, both ends prove it (sysfs auth=1), and data
#    written is read back with the same checksum;
#  - a wrong key, no key for a host that has one, a key for an identity
#    the target does not know, an expired and a revoked keyring key are
#    refused at map with their own errors, and nothing is created;
#  - an export with require_auth and a port with require_auth refuse a
#    host that did not authenticate;
#  - a target that does not prove the key (tern_fuzz -T badproof) and one
#    that drops the authentication bit (-T noauth, a downgrade) are
#    refused by the client; one that proves it (-T goodauth) is not;
#  - captured handshakes replayed, a lane joining another identity's
#    session with its id and cookie, a wrong proof, an unknown identity
#    and out-of-order authentication frames are refused by the target
#    (tern_fuzz -A), and a handle seen on the wire is worthless from
#    another session (tern_fuzz -b, as h1);
#  - revoking a host's key on the target closes its sessions and ends
#    its bindings: I/O fails within the loss timeout, unmap works; a
#    first key for a host ends the bindings it made without one;
#  - encrypted (TCP): a capture of the loopback shows a known pattern the
#    device writes without --encrypt and never with it; a port with
#    require_encrypt refuses a client that does not encrypt; a byte
#    flipped on the wire (tamper_proxy.py) resets the lane and no damaged
#    data reaches the device, where without encryption it does;
#  - signed (--integrity, TCP): crc off, data intact, and the capture does
#    show the pattern (nothing is hidden); a byte flipped either way
#    resets the lane (mac_errors move) and the data stays intact; a port
#    with require_integrity refuses a client that neither signs nor
#    encrypts, and a target that does not sign is refused (a downgrade).
# The keyring, hostile-target, probe and encryption cases run over TCP
# only.

. "$(dirname "$0")/ktap.sh"
. "$(dirname "$0")/blk_lib.sh"
dir=$(cd "$(dirname "$0")" && pwd)
FUZZ=$dir/tern_fuzz
WORK=/var/tmp/tern-auth
SVC=7470		# port p0: authentication optional
SVC_REQ=7471		# port p1: require_auth
SVC_ENC=7472		# port p2: require_encrypt
SVC_INT=7473		# port p3: require_integrity
SVC_PROXY=7475		# tamper_proxy.py in front of p0
HT_PORT=7480		# the hostile targets
DEVF=$WORK/dev

# expect_fail ERRNO_TEXT COMMAND...: the command fails, says ERRNO_TEXT,
# and no device is left
expect_fail() {
	local want=$1 out
	shift
	if out=$("$@" 2>&1); then
		echo "succeeded: $*: $out"
		return 1
	fi
	echo "refused: $out"
	case "$out" in
	*"$want"*) ;;
	*) echo "expected \"$want\""; return 1 ;;
	esac
	[ -z "$(tern_devs)" ] || { echo "a device was left: $(tern_devs)"; return 1; }
}

setup() {
	mkdir -p "$WORK" && rm -f "$WORK"/* || return 1
	blk_modprobe brd || return 1
	[ "$TRANSPORT" = tcp ] || modprobe tern_tcp || return 1
	adm key generate --out "$WORK/k1" && adm key generate --out "$WORK/k2" &&
		adm key generate --out "$WORK/kbad" || return 1
	adm target export add vol0 /dev/ram0 &&
		adm target export add vol1 /dev/ram1 --require-auth &&
		adm target port add p0 "$TRANSPORT://$ADDR:$SVC" &&
		adm target port add p1 "$TRANSPORT://$ADDR:$SVC_REQ" --require-auth &&
		adm target link p0 vol0 && adm target link p0 vol1 &&
		adm target link p1 vol0 || return 1
	adm target host add h1 --key-file "$WORK/k1" &&
		adm target host add h2 --key-file "$WORK/k2" || return 1
	[ "$(cat "$CFG/hosts/h1/key")" = set ] || { echo "key not set"; return 1; }
	# the secret is never shown
	! grep -rq TERNKEY "$CFG/hosts" || { echo "a key is readable"; return 1; }
}

right_key() {
	local dev sum
	dev=$(map_dev vol0 "$SVC" --lanes 2 --host h1 --key-file "$WORK/k1") ||
		return 1
	echo "$dev" > "$DEVF"
	[ "$(cat "/sys/block/$dev/tern/auth")" = 1 ] ||
		{ echo "not authenticated"; return 1; }
	head -c 4M /dev/urandom > "$WORK/data"
	dd if="$WORK/data" of="/dev/$dev" bs=1M oflag=direct status=none &&
		sum=$(dd if="/dev/$dev" bs=1M count=4 iflag=direct status=none |
		      md5sum) || return 1
	[ "$sum" = "$(md5sum < "$WORK/data")" ] || { echo "data differs"; return 1; }
	# no key crossed into any place a user can read
	! grep -q "$(cut -c11-40 "$WORK/k1")" "/proc/$$/cmdline" \
		/sys/block/"$dev"/tern/* 2>/dev/null
}

unmap_right() {
	adm unmap "$(cat "$DEVF")" && rm -f "$DEVF"
}

# the target's authentication failures, all ports
auth_failures() {
	cat /sys/kernel/debug/tern/target.*/stats 2>/dev/null |
		awk '$1 == "auth_failures" { n += $2 } END { print n + 0 }'
}

refusals() {
	local rc=0 f0

	f0=$(auth_failures)
	expect_fail "rejected" map_dev vol0 "$SVC" --host h1 \
		--key-file "$WORK/kbad" || rc=1
	expect_fail "ermission denied" map_dev vol0 "$SVC" --host h1 || rc=1
	expect_fail "key not available" map_dev vol0 "$SVC" --host h3 \
		--key-file "$WORK/k1" || rc=1
	expect_fail "ermission denied" map_dev vol1 "$SVC" --host h3 || rc=1
	expect_fail "key not available" map_dev vol0 "$SVC_REQ" --host h3 ||
		rc=1
	# the same proven host through the port that requires it: fine
	dev=$(map_dev vol0 "$SVC_REQ" --host h2 --key-file "$WORK/k2") &&
		adm unmap "$dev" || rc=1
	# wrong key, unknown identity, no key on p1: three at least
	echo "auth_failures $f0 -> $(auth_failures)"
	[ "$(auth_failures)" -ge $((f0 + 3)) ] || rc=1
	return $rc
}

# keyring keys that cannot be used: expired, revoked
keyring_refusals() {
	local id rc=0
	id=$(keyctl add logon tern:exp "$(cat "$WORK/k1")" @u) &&
		keyctl timeout "$id" 1 || return 1
	sleep 2
	# a search skips expired keys: not found
	expect_fail "not available" map_dev vol0 "$SVC" --host h1 \
		--key tern:exp || rc=1
	id=$(keyctl add logon tern:rev "$(cat "$WORK/k1")" @u) &&
		keyctl revoke "$id" || return 1
	expect_fail "revoked" map_dev vol0 "$SVC" --host h1 --key tern:rev ||
		rc=1
	expect_fail "not available" map_dev vol0 "$SVC" --host h1 \
		--key tern:none || rc=1
	# through the raw option string too: a loaded key works
	keyctl add logon tern:ok "$(cat "$WORK/k1")" @u >/dev/null || return 1
	dev=$(map "transport=$TRANSPORT,address=$ADDR,service=$SVC,export=vol0,host=h1,key=tern:ok") &&
		unmap "$dev" || rc=1
	return $rc
}

# hostile targets: one proves nothing, one drops the bit, one is honest
fake_targets() {
	local c out rc=0 uri

	for c in badproof noauth goodauth; do
		HT_PORT=$((HT_PORT + 1))
		uri=tcp://127.0.0.1:$HT_PORT/vol0
		"$FUZZ" -T $c -l "$HT_PORT" -k "$WORK/k1" -i h1 \
			> "$WORK/ht.$c" 2>&1 &
		for _ in $(seq 50); do
			grep -q listening "$WORK/ht.$c" && break
			sleep 0.1
		done
		if [ $c = goodauth ]; then
			out=$(map_uri "$uri" --lanes 1 --host h1 \
				--key-file "$WORK/k1") && adm unmap "$out" ||
				{ echo "goodauth refused"; rc=1; }
			# it proves the key but cannot encrypt or sign: a
			# downgrade
			expect_fail "rejected" map_uri "$uri" --lanes 1 \
				--host h1 --key-file "$WORK/k1" --encrypt || rc=1
			expect_fail "rejected" map_uri "$uri" --lanes 1 \
				--host h1 --key-file "$WORK/k1" --integrity ||
				rc=1
		else
			expect_fail "rejected" map_uri "$uri" --lanes 1 \
				--host h1 --key-file "$WORK/k1" || rc=1
		fi
		kill $! 2>/dev/null
		wait $! 2>/dev/null
		! grep ACCEPTED "$WORK/ht.$c" || rc=1
	done
	dmesg | grep "failed to prove the key\|does not authenticate\|does not encrypt\|does not sign"
	return $rc
}

probe() {
	"$FUZZ" -a "$ADDR" -p "$1" -A -k "$WORK/k1" -i h1 -o "$WORK/k2" \
		-O h2 ${2:+-M} || return 1
	[ -n "$2" ] && return 0
	# block requests as h1, and h1's handle from another session
	"$FUZZ" -a "$ADDR" -p "$1" -b vol0 -k "$WORK/k1" -i h1
}

# wire_canaries PORT DEV: capture PORT on lo while DEV gets the canary
# pattern and gives it back intact; print how often the capture shows it
wire_canaries() {
	local pid n

	tcpdump -i lo -U -w "$WORK/cap" "tcp port $1" 2> "$WORK/tcpdump.log" &
	pid=$!
	for _ in $(seq 50); do
		grep -q "listening on" "$WORK/tcpdump.log" && break
		sleep 0.1
	done
	dd if="$WORK/canary" of="/dev/$2" bs=1M oflag=direct status=none &&
		cmp <(dd if="/dev/$2" bs=1M count=4 iflag=direct status=none) \
			"$WORK/canary" >&2 || n=-1
	sleep 0.5
	kill "$pid"
	wait "$pid"
	echo "${n:-$(grep -a -c CANARY "$WORK/cap")}"
}

encrypt_capture() {
	local dev n

	yes TERN-PLAINTEXT-CANARY-0123456789 | head -c 4M > "$WORK/canary"
	dev=$(map_dev vol0 "$SVC" --lanes 1 --host h1 --key-file "$WORK/k1") ||
		return 1
	n=$(wire_canaries "$SVC" "$dev")
	adm unmap "$dev" || return 1
	echo "authenticated only: $n captured segments show the pattern"
	[ "$n" -gt 0 ] || return 1
	dev=$(map_dev vol0 "$SVC" --lanes 2 --host h1 --key-file "$WORK/k1" \
		--encrypt) || return 1
	[ "$(cat "/sys/block/$dev/tern/encrypt")" = 1 ] ||
		{ echo "not encrypted"; return 1; }
	n=$(wire_canaries "$SVC" "$dev")
	adm unmap "$dev" || return 1
	echo "encrypted: $n"
	[ "$n" = 0 ]
}

# port_policy PORT SVC FLAG OPTION...: a port with FLAG refuses a client
# that authenticates without any OPTION, and one without a key; it takes
# one with each OPTION
port_policy() {
	local port=$1 svc=$2 flag=$3 dev opt rc=0

	shift 3
	adm target port add "$port" "tcp://$ADDR:$svc" "$flag" &&
		adm target link "$port" vol0 || return 1
	expect_fail "ermission denied" map_dev vol0 "$svc" --host h1 \
		--key-file "$WORK/k1" || rc=1
	expect_fail "ermission denied" map_dev vol0 "$svc" --host h3 || rc=1
	for opt in "$@"; do
		dev=$(map_dev vol0 "$svc" --host h1 --key-file "$WORK/k1" \
			"$opt") && adm unmap "$dev" || rc=1
	done
	return $rc
}

# RDMA can neither encrypt nor sign: the client says so at once, nothing
# is made
rdma_no_encrypt() {
	expect_fail "not supported" map_dev vol0 "$SVC" --host h1 \
		--key-file "$WORK/k1" --encrypt &&
		expect_fail "not supported" map_dev vol0 "$SVC" --host h1 \
			--key-file "$WORK/k1" --integrity
}

# Signed: every frame carries tags, the data CRC is off, nothing is
# hidden; keepalives every 200 ms pass as well as I/O does: no protocol
# or tag error (under emulation a 600 ms keepalive timeout may still
# reconnect a lane, which says nothing of the tags)
integrity_capture() {
	local dev n e0 p0 r0 t0

	e0=$(total_of mac_errors)
	p0=$(total_of proto_errors)
	r0=$(total_of reconnects)
	t0=$(total_of tx_msgs)
	dev=$(map_dev vol0 "$SVC" --lanes 2 --host h1 --key-file "$WORK/k1" \
		--integrity) || return 1
	echo "sysfs: integrity $(cat "/sys/block/$dev/tern/integrity") encrypt $(cat "/sys/block/$dev/tern/encrypt") crc $(cat "/sys/block/$dev/tern/crc")"
	# the data tag holds only if pages do not change under it
	echo "queue/stable_writes $(cat "/sys/block/$dev/queue/stable_writes")"
	[ "$(cat "/sys/block/$dev/tern/integrity")" = 1 ] &&
		[ "$(cat "/sys/block/$dev/tern/encrypt")" = 0 ] &&
		[ "$(cat "/sys/block/$dev/tern/crc")" = 0 ] &&
		[ "$(cat "/sys/block/$dev/queue/stable_writes")" = 1 ] || return 1
	n=$(wire_canaries "$SVC" "$dev")
	echo 200 > "/sys/block/$dev/tern/keepalive_ms" && sleep 2 || return 1
	adm unmap "$dev" || return 1
	echo "signed: $n captured segments show the pattern; mac_errors +$(($(total_of mac_errors) - e0)), proto_errors +$(($(total_of proto_errors) - p0)), reconnects +$(($(total_of reconnects) - r0)), frames +$(($(total_of tx_msgs) - t0))"
	[ "$n" -gt 0 ] && [ "$(total_of mac_errors)" = "$e0" ] &&
		[ "$(total_of proto_errors)" = "$p0" ]
}

# encryption covers every byte too; the two exclude each other
integrity_policy() {
	port_policy p3 "$SVC_INT" --require-integrity --integrity --encrypt &&
		expect_fail "exclude each other" map_dev vol0 "$SVC_INT" \
			--host h1 --key-file "$WORK/k1" --integrity --encrypt
}

# tamper_run [back] OPTIONS...: map through a proxy that flips one byte
# of the first 1 MiB write's data (with "back": of the data read back),
# write the canary, print "intact" or "damaged"
tamper_run() {
	local dev pid out=damaged back=

	[ "$1" = back ] && { back=back; shift; }
	python3 "$dir/tamper_proxy.py" "$SVC_PROXY" "$SVC" 300000 $back \
		> "$WORK/proxy.log" 2>&1 &
	pid=$!
	for _ in $(seq 50); do
		grep -q listening "$WORK/proxy.log" && break
		sleep 0.1
	done
	dev=$(map_dev vol0 "$SVC_PROXY" --lanes 1 --host h1 \
		--key-file "$WORK/k1" "$@")
	if [ -n "$dev" ]; then
		dd if="$WORK/canary" of="/dev/$dev" bs=1M oflag=direct \
			status=none &&
			cmp -s <(dd if="/dev/$dev" bs=1M count=4 iflag=direct \
				 status=none) "$WORK/canary" && out=intact
		adm unmap "$dev" >&2
	fi
	kill "$pid"
	wait "$pid" 2>/dev/null
	grep -q flipped "$WORK/proxy.log" || out="not flipped"
	echo "$out"
}

tamper() {
	local r resets mark

	r=$(tamper_run)
	echo "authenticated only: $r"
	[ "$r" = damaged ] || return 1
	mark=$(log_mark)
	r=$(tamper_run --encrypt)
	resets=$(log_count "$mark" "lane down (-74)")
	echo "encrypted: $r, lanes reset for a bad record: $resets"
	[ "$r" = intact ] && [ "$resets" -gt 0 ]
}

# tamper_signed [back]: a flipped byte breaks a tag; the lane resets
tamper_signed() {
	local r resets e0 mark

	e0=$(total_of mac_errors)
	mark=$(log_mark)
	r=$(tamper_run $1 --integrity)
	resets=$(log_count "$mark" "lane down (-74)")
	echo "signed${1:+, flipped on the way back}: $r, lanes reset: $resets, mac_errors +$(($(total_of mac_errors) - e0))"
	[ "$r" = intact ] && [ "$resets" -gt 0 ] &&
		[ "$(total_of mac_errors)" -gt "$e0" ]
}

tamper_integrity() {
	local r

	r=$(tamper_run back)
	echo "authenticated only, flipped on the way back: $r"
	[ "$r" = damaged ] || return 1
	tamper_signed && tamper_signed back
}

revoke() {
	local dev rc=0
	dev=$(map_dev vol0 "$SVC" --lanes 2 --host h1 --key-file "$WORK/k1" \
		--loss-timeout 3) || return 1
	dd if="/dev/$dev" of=/dev/null bs=4k count=1 iflag=direct status=none ||
		return 1
	echo > "$CFG/hosts/h1/key" || return 1
	dmesg | grep "host h1: key revoked" | tail -n 1
	read_fails_in "$dev" 77 40 "after the key was revoked" || rc=1
	[ -z "$(stuck_in_d)" ] || { echo "tasks in D state"; rc=1; }
	adm unmap "$dev" || rc=1
	return $rc
}

# a host that opened without a key, then given one: its binding ends,
# and without a proof it cannot open again
first_key() {
	local dev rc=0
	dev=$(map_dev vol0 "$SVC" --lanes 1 --host h4) || return 1
	if ! dd if="/dev/$dev" of=/dev/null bs=4k count=1 iflag=direct \
		status=none; then
		echo "no read before the key"
		adm unmap "$dev"
		return 1
	fi
	adm target host add h4 --key-file "$WORK/k2" || rc=1
	dmesg | grep "host h4: key set" | tail -n 1
	read_fails_in "$dev" 78 40 "without a proof after h4 got a key" || rc=1
	adm unmap "$dev" || rc=1
	return $rc
}

teardown() {
	local h
	[ -s "$DEVF" ] && adm unmap "$(cat "$DEVF")"
	keyctl clear @u 2>/dev/null
	for h in p0 p1 p2 p3; do
		[ -d "$CFG/ports/$h" ] || continue
		echo 0 > "$CFG/ports/$h/enable"
		rm -f "$CFG/ports/$h"/exports/*
		rmdir "$CFG/ports/$h" || return 1
	done
	for h in "$CFG"/exports/* "$CFG"/hosts/*; do
		[ -d "$h" ] && { rmdir "$h" || return 1; }
	done
	blk_unload brd $([ "$TRANSPORT" = tcp ] || echo tern_tcp)
}

if ! blk_transport_ready; then
	ktap_plan 1
	ktap_skip "transport $TRANSPORT not available"
	ktap_finish
fi
if [ "$TRANSPORT" = tcp ]; then
	ktap_plan 17
else
	ktap_plan 8
fi
check "setup: keys, hosts h1 h2, exports vol0 vol1 (require_auth), ports p0 p1 (require_auth)" \
	setup
check "the right key maps, auth=1, 4 MiB read back with the same md5" right_key
check "unmap" unmap_right
check "wrong key, no key, unknown identity, require_auth export and port: refused" \
	refusals
if [ "$TRANSPORT" = tcp ]; then
	check "expired, revoked and missing keyring keys: refused; key= works" \
		keyring_refusals
	check "a target without the key and a downgrade are refused, an honest one is not" \
		fake_targets
	check "target: replays, hijacks, wrong proofs, bad frames, stolen handles refused" \
		probe "$SVC"
	check "target: the same on a port that requires authentication (p1)" \
		probe "$SVC_REQ" req
	check "encrypted: the capture shows no plaintext (and does without it)" \
		encrypt_capture
	check "require_encrypt refuses clients that do not encrypt" \
		port_policy p2 "$SVC_ENC" --require-encrypt --encrypt
	check "a flipped byte resets the encrypted lane, data intact (damaged without)" \
		tamper
	check "signed: integrity=1, crc=0, stable pages, data intact, the capture shows it" \
		integrity_capture
	check "require_integrity refuses clients that neither sign nor encrypt" \
		integrity_policy
	check "a byte flipped either way resets the signed lane, data intact (damaged without)" \
		tamper_integrity
else
	check "--encrypt and --integrity over $TRANSPORT: refused, the transport cannot" \
		rdma_no_encrypt
fi
check "revoking the key ends the session: I/O fails in time, unmap works" revoke
check "a first key for a host ends its bindings made without one: I/O fails in time" \
	first_key
check "teardown, modules unload" teardown
ktap_finish
