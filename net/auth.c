// SPDX-License-Identifier: GPL-2.0
/*
 * tern messenger core: mutual authentication of a lane's two ends.
 *
 * Both ends hold the connector identity's 32-byte secret; it never
 * crosses the wire. HKDF (RFC 5869) over HMAC-SHA256 turns it into one
 * proof key per direction, bound to the identity, and each side proves
 * its key with an HMAC over the whole handshake transcript: both HELLO
 * fronts as sent, each with a fresh nonce of its sender. A replayed
 * HELLO or AUTH therefore fails against a new nonce, the acceptor's
 * proof cannot be reflected as the connector's, and a peer that altered
 * the feature bits or the negotiated values in flight fails the proofs.
 * Documentation/protocol.rst, "Authentication", is the normative text.
 *
 * Only handshakes authenticate, so the cost is a few HMACs per lane
 * connection and nothing per request.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <crypto/hash.h>
#include <crypto/sha2.h>
#include <linux/base64.h>
#include <linux/ctype.h>
#include <linux/random.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <tern/compat.h>
#include "tern_core.h"

#define TERN_AUTH_SALT		"tern-v2 auth"
#define TERN_AUTH_HOST_LABEL	"tern-v2 host proof"
#define TERN_AUTH_TARGET_LABEL	"tern-v2 target proof"
#define TERN_AUTH_TRAFFIC_LABEL	"tern-v2 traffic"
#define TERN_AUTH_C2A_LABEL	"tern-v2 c2a"
#define TERN_AUTH_A2C_LABEL	"tern-v2 a2c"
#define TERN_AUTH_C2A_MAC_LABEL	"tern-v2 c2a integrity"
#define TERN_AUTH_A2C_MAC_LABEL	"tern-v2 a2c integrity"

/* HMAC-SHA256 of the concatenation of @nr pieces. */
static int tern_hmac(const u8 *key, unsigned int key_len,
		     const struct kvec *vec, unsigned int nr, u8 *out)
{
	struct crypto_shash *tfm;
	unsigned int noio, i;
	int err;

	/* a reconnect may be what memory reclaim waits for */
	noio = memalloc_noio_save();
	tfm = crypto_alloc_shash("hmac(sha256)", 0, 0);
	memalloc_noio_restore(noio);
	if (IS_ERR(tfm))
		return PTR_ERR(tfm);
	err = crypto_shash_setkey(tfm, key, key_len);
	if (!err) {
		SHASH_DESC_ON_STACK(desc, tfm);

		desc->tfm = tfm;
		err = crypto_shash_init(desc);
		for (i = 0; i < nr && !err; i++)
			err = crypto_shash_update(desc, vec[i].iov_base,
						  vec[i].iov_len);
		if (!err)
			err = crypto_shash_final(desc, out);
		shash_desc_zero(desc);
	}
	crypto_free_shash(tfm);
	return err;
}

/*
 * HKDF-Expand for one block (32 bytes): HMAC(prk, label NUL identity 1).
 * The NUL keeps every label/identity pair distinct.
 */
static int tern_hkdf_expand(const u8 *prk, const char *label,
			    const char *identity, u8 *out)
{
	static const u8 one = 1;
	struct kvec vec[3] = {
		{ .iov_base = (void *)label, .iov_len = strlen(label) + 1 },
		{ .iov_base = (void *)identity, .iov_len = strlen(identity) },
		{ .iov_base = (void *)&one, .iov_len = 1 },
	};

	return tern_hmac(prk, SHA256_DIGEST_SIZE, vec, ARRAY_SIZE(vec), out);
}

/**
 * tern_auth_derive - the proof keys of an identity
 * @key: TERN_AUTH_KEY_LEN bytes of secret
 * @identity: the connector's identity
 * @keys: filled in
 *
 * Return: 0, or a crypto API error.
 */
int tern_auth_derive(const u8 *key, const char *identity,
		     struct tern_auth_keys *keys)
{
	struct kvec ikm = { .iov_base = (void *)key,
			    .iov_len = TERN_AUTH_KEY_LEN };
	u8 prk[SHA256_DIGEST_SIZE];
	int err;

	/* HKDF-Extract with a fixed salt: the secret is already uniform */
	err = tern_hmac(TERN_AUTH_SALT, sizeof(TERN_AUTH_SALT) - 1, &ikm, 1,
			prk);
	if (!err)
		err = tern_hkdf_expand(prk, TERN_AUTH_HOST_LABEL, identity,
				       keys->host);
	if (!err)
		err = tern_hkdf_expand(prk, TERN_AUTH_TARGET_LABEL, identity,
				       keys->target);
	if (!err)
		err = tern_hkdf_expand(prk, TERN_AUTH_TRAFFIC_LABEL, identity,
				       keys->traffic);
	memzero_explicit(prk, sizeof(prk));
	return err;
}

/**
 * tern_auth_proofs - both proofs of a handshake
 * @keys: the identity's proof keys
 * @hello: the HELLO front as the connector sent it
 * @ack: the HELLO_ACK front as the acceptor sent it
 * @host: out: the connector's proof, HMAC(host key, hello | ack)
 * @target: out: the acceptor's, HMAC(target key, hello | ack | @host)
 *
 * Return: 0, or a crypto API error.
 */
int tern_auth_proofs(const struct tern_auth_keys *keys,
		     const struct tern_wire_hello *hello,
		     const struct tern_wire_hello *ack, u8 *host, u8 *target)
{
	struct kvec vec[3] = {
		{ .iov_base = (void *)hello, .iov_len = sizeof(*hello) },
		{ .iov_base = (void *)ack, .iov_len = sizeof(*ack) },
		{ .iov_base = host, .iov_len = TERN_WIRE_PROOF_LEN },
	};
	int err;

	err = tern_hmac(keys->host, sizeof(keys->host), vec, 2, host);
	if (!err)
		err = tern_hmac(keys->target, sizeof(keys->target), vec, 3,
				target);
	return err;
}

/*
 * One direction's keys from the lane's secret: the AEAD's are the first
 * 28 bytes of one expansion, the MAC key all of another.
 */
static int tern_auth_direction(const u8 *prk, const char *label,
			       const char *mac_label, struct tern_dir_keys *out)
{
	u8 okm[SHA256_DIGEST_SIZE];
	int err;

	BUILD_BUG_ON(sizeof(out->aead) > sizeof(okm));
	BUILD_BUG_ON(sizeof(out->mac) != sizeof(okm));
	err = tern_hkdf_expand(prk, label, "", okm);
	if (!err)
		memcpy(&out->aead, okm, sizeof(out->aead));
	memzero_explicit(okm, sizeof(okm));
	if (!err)
		err = tern_hkdf_expand(prk, mac_label, "", out->mac);
	return err;
}

/**
 * tern_auth_lane_keys - the traffic keys of an authenticated lane
 * @keys: the identity's keys
 * @hello: the HELLO front as sent
 * @ack: the HELLO_ACK front as sent
 * @host: the connector's proof
 * @target: the acceptor's proof
 * @c2a: out: keys of what the connector sends
 * @a2c: out: keys of what the acceptor sends
 *
 * HKDF-Extract of the whole exchange under the identity's traffic key,
 * then expansions per direction: fresh keys for every lane, which both
 * ends know and nobody who saw the exchange does.
 * Return: 0, or a crypto API error.
 */
int tern_auth_lane_keys(const struct tern_auth_keys *keys,
			const struct tern_wire_hello *hello,
			const struct tern_wire_hello *ack, const u8 *host,
			const u8 *target, struct tern_dir_keys *c2a,
			struct tern_dir_keys *a2c)
{
	struct kvec vec[4] = {
		{ .iov_base = (void *)hello, .iov_len = sizeof(*hello) },
		{ .iov_base = (void *)ack, .iov_len = sizeof(*ack) },
		{ .iov_base = (void *)host, .iov_len = TERN_WIRE_PROOF_LEN },
		{ .iov_base = (void *)target, .iov_len = TERN_WIRE_PROOF_LEN },
	};
	u8 prk[SHA256_DIGEST_SIZE];
	int err;

	err = tern_hmac(keys->traffic, sizeof(keys->traffic), vec,
			ARRAY_SIZE(vec), prk);
	if (!err)
		err = tern_auth_direction(prk, TERN_AUTH_C2A_LABEL,
					  TERN_AUTH_C2A_MAC_LABEL, c2a);
	if (!err)
		err = tern_auth_direction(prk, TERN_AUTH_A2C_LABEL,
					  TERN_AUTH_A2C_MAC_LABEL, a2c);
	memzero_explicit(prk, sizeof(prk));
	return err;
}

/* A proof from the wire against the expected one, in constant time. */
bool tern_auth_proof_ok(const u8 *got, const u8 *want)
{
	return !crypto_memneq(got, want, TERN_WIRE_PROOF_LEN);
}

/**
 * tern_identity_valid - is @s a well-formed identity
 * @s: the string; need not be terminated within @size
 * @size: bytes at @s
 *
 * An identity (a host id) is TERN_NAME_RULE, terminated within @size.
 */
bool tern_identity_valid(const char *s, size_t size)
{
	size_t len = strnlen(s, size), i;

	if (!len || len >= size || len >= TERN_WIRE_IDENTITY_LEN ||
	    s[0] == '.')
		return false;
	for (i = 0; i < len; i++)
		if (!isalnum(s[i]) && !strchr("._:-", s[i]))
			return false;
	return true;
}
EXPORT_SYMBOL_GPL(tern_identity_valid);

/**
 * tern_key_parse - decode a key string
 * @text: "TERNKEY-1:" then the base64 (RFC 4648) of the 32-byte secret
 *	followed by its CRC32C (little-endian), then ":"
 * @len: bytes at @text, without a trailing newline
 * @key: out: TERN_AUTH_KEY_LEN bytes
 *
 * Return: 0, -EINVAL for anything but a key string, -EBADMSG when the
 * checksum does not match (a key damaged in a copy).
 */
int tern_key_parse(const char *text, size_t len, u8 *key)
{
	const size_t plen = sizeof(TERN_KEY_PREFIX) - 1;
	u8 raw[TERN_AUTH_KEY_LEN + sizeof(__le32)];
	__le32 crc;
	int err = 0;

	if (len != TERN_KEY_TEXT_LEN || memcmp(text, TERN_KEY_PREFIX, plen) ||
	    text[len - 1] != ':')
		return -EINVAL;
	if (base64_decode(text + plen, len - plen - 1, raw) != sizeof(raw)) {
		/* stopped at a bad character, part of the secret decoded */
		err = -EINVAL;
	} else {
		memcpy(&crc, raw + TERN_AUTH_KEY_LEN, sizeof(crc));
		if (le32_to_cpu(crc) != tern_crc(raw, TERN_AUTH_KEY_LEN))
			err = -EBADMSG;
		else
			memcpy(key, raw, TERN_AUTH_KEY_LEN);
	}
	memzero_explicit(raw, sizeof(raw));
	return err;
}
EXPORT_SYMBOL_GPL(tern_key_parse);
