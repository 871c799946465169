// SPDX-License-Identifier: GPL-2.0
/*
 * tern messenger core: integrity without secrecy (TERN_FEAT_INTEGRITY).
 *
 * Once a direction of an authenticated lane is signed, each frame carries
 * three tags, each the first 8 bytes of a Poly1305 MAC of one part of the
 * frame under a one-time key of its own:
 *
 *   header tag	in data_crc and hdr_crc: the first 40 header bytes
 *   front tag	first 8 bytes after the header: the front
 *   data tag	next 8 bytes: the data
 *
 * The one-time keys are the first 96 bytes of ChaCha20 under the
 * direction's key (auth.c derives it from the handshake), with the
 * frame's number in that direction as the nonce: bytes 0-31 sign the
 * header, 32-63 the front, 64-95 the data. Poly1305 is what a stream
 * cipher's AEAD spends on authenticity (RFC 8439); here it runs without
 * the encryption, and costs a fraction of an HMAC-SHA256 per byte.
 *
 * Each part is checked as soon as it is in, before anything acts on it:
 * the header before its lengths and ids choose buffers, the front before
 * the ULP reads it, the data before the request or reply completes. A
 * part the receiver throws away unread (a late duplicate reply, a
 * request refused for room) is not checked; its header was.
 *
 * The frame number is 64 bits and never repeats under one key, so no
 * one-time key is used twice, and a frame cannot be replayed, reordered
 * or moved to another lane. A wrong tag is a broken lane: the next
 * connection has fresh keys, so a forger gets one 2^-64 guess per
 * handshake. Documentation/protocol.rst, "Integrity", is the normative
 * text.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <crypto/algapi.h>
#include <crypto/chacha.h>
#include <crypto/poly1305.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <tern/compat.h>
#include "tern_core.h"

/* Which one-time key signs which part of a frame. */
enum tern_mac_part {
	TERN_MAC_HDR,
	TERN_MAC_FRONT,
	TERN_MAC_DATA,
	TERN_MAC_PARTS,
};

/* A frame's one-time keys, as ChaCha20 gives them, whole blocks of it. */
struct tern_mac_keys {
	u8 key[TERN_MAC_PARTS][POLY1305_KEY_SIZE];
	u8 unused[2 * CHACHA_BLOCK_SIZE - TERN_MAC_PARTS * POLY1305_KEY_SIZE];
};

/*
 * One direction of one lane: the key, how many frames it has seen and,
 * receiving, the keys of the frame whose header passed last.
 */
struct tern_lane_mac {
	u32			key[CHACHA_KEY_SIZE / sizeof(u32)];
	u64			frames;
	struct tern_mac_keys	next;
};

/**
 * tern_mac_alloc - a direction's MAC state
 * @key: TERN_WIRE_PROOF_LEN bytes, from tern_auth_lane_keys()
 *
 * Return: the state, frames counted from 0, or an ERR_PTR().
 */
struct tern_lane_mac *tern_mac_alloc(const u8 *key)
{
	struct tern_lane_mac *mac;
	int i;

	BUILD_BUG_ON(TERN_WIRE_PROOF_LEN != CHACHA_KEY_SIZE);
	BUILD_BUG_ON(TERN_WIRE_PART_TAG_LEN > POLY1305_DIGEST_SIZE);
	mac = kzalloc(sizeof(*mac), GFP_NOIO);
	if (!mac)
		return ERR_PTR(-ENOMEM);
	for (i = 0; i < ARRAY_SIZE(mac->key); i++)
		mac->key[i] = get_unaligned_le32(key + i * sizeof(u32));
	return mac;
}

void tern_mac_free(struct tern_lane_mac *mac)
{
	if (!IS_ERR_OR_NULL(mac))
		kfree_sensitive(mac);
}

/* The one-time keys of frame @nr: ChaCha20 blocks 0 and 1, nonce @nr. */
static void tern_mac_frame_keys(const struct tern_lane_mac *mac, u64 nr,
				struct tern_mac_keys *keys)
{
	u32 state[CHACHA_STATE_WORDS];
	u8 iv[CHACHA_IV_SIZE] = {};

	BUILD_BUG_ON(sizeof(*keys) != 2 * CHACHA_BLOCK_SIZE);
	put_unaligned_le64(nr, iv + sizeof(u32));
	chacha_init_generic(state, mac->key, iv);
	chacha20_block(state, (u8 *)keys);
	chacha20_block(state, (u8 *)keys + CHACHA_BLOCK_SIZE);
	memzero_explicit(state, sizeof(state));
}

static void tern_mac_chunk(void *addr, size_t len, void *arg)
{
	poly1305_update(arg, addr, len);
}

/*
 * The tag of one part under one-time @key: @buf (@len bytes), or @len
 * bytes of @bvec when @buf is NULL.
 */
static void tern_mac_part(const u8 *key, const void *buf,
			  const struct bio_vec *bvec, unsigned int nr_bvec,
			  u32 len, u8 *tag)
{
	struct poly1305_desc_ctx desc;
	u8 digest[POLY1305_DIGEST_SIZE];

	poly1305_init(&desc, key);
	if (buf)
		poly1305_update(&desc, buf, len);
	else if (len)
		tern_bvec_walk(bvec, nr_bvec, 0, len, tern_mac_chunk, &desc);
	poly1305_final(&desc, digest);
	memcpy(tag, digest, TERN_WIRE_PART_TAG_LEN);
	memzero_explicit(digest, sizeof(digest));
}

/**
 * tern_mac_sign - sign @f as the next frame of its direction
 * @mac: the direction's state
 * @f: a frame with its header complete but for the tag
 *
 * Writes the header tag over data_crc and hdr_crc, and the front and
 * data tags into @f->tag.
 */
void tern_mac_sign(struct tern_lane_mac *mac, struct tern_frame *f)
{
	struct tern_mac_keys keys;

	tern_mac_frame_keys(mac, mac->frames++, &keys);
	tern_mac_part(keys.key[TERN_MAC_HDR], &f->hdr, NULL, 0,
		      TERN_WIRE_HDR_TAG_OFF,
		      (u8 *)&f->hdr + TERN_WIRE_HDR_TAG_OFF);
	tern_mac_part(keys.key[TERN_MAC_FRONT], f->front ?: "", NULL, 0,
		      tern_frame_front_len(f), f->tag);
	tern_mac_part(keys.key[TERN_MAC_DATA], NULL, f->bvec, f->nr_bvec,
		      tern_frame_data_len(f), f->tag + TERN_WIRE_PART_TAG_LEN);
	memzero_explicit(&keys, sizeof(keys));
	f->tag_len = TERN_WIRE_TAG_LEN;
}

static bool tern_mac_part_ok(const u8 *key, const void *buf,
			     const struct bio_vec *bvec, unsigned int nr_bvec,
			     u32 len, const u8 *tag)
{
	u8 want[TERN_WIRE_PART_TAG_LEN];
	bool ok;

	tern_mac_part(key, buf, bvec, nr_bvec, len, want);
	ok = !crypto_memneq(want, tag, sizeof(want));
	memzero_explicit(want, sizeof(want));
	return ok;
}

/**
 * tern_mac_check_hdr - check a received header's tag
 * @mac: the direction's state
 * @hdr: the header as received
 *
 * A header that passes makes its frame the direction's next: the front
 * and data checks that follow are against it.
 * Return: true if the tag is right.
 */
bool tern_mac_check_hdr(struct tern_lane_mac *mac,
			const struct tern_wire_hdr *hdr)
{
	tern_mac_frame_keys(mac, mac->frames, &mac->next);
	if (!tern_mac_part_ok(mac->next.key[TERN_MAC_HDR], hdr, NULL, 0,
			      TERN_WIRE_HDR_TAG_OFF,
			      (const u8 *)hdr + TERN_WIRE_HDR_TAG_OFF)) {
		memzero_explicit(&mac->next, sizeof(mac->next));
		return false;
	}
	mac->frames++;
	return true;
}

/* The front's tag @tag, of the frame whose header passed last. */
bool tern_mac_check_front(struct tern_lane_mac *mac, const void *front,
			  u32 len, const u8 *tag)
{
	return tern_mac_part_ok(mac->next.key[TERN_MAC_FRONT], front ?: "",
				NULL, 0, len, tag);
}

/* The data's tag @tag, of the frame whose header passed last. */
bool tern_mac_check_data(struct tern_lane_mac *mac,
			 const struct bio_vec *bvec, unsigned int nr_bvec,
			 u32 len, const u8 *tag)
{
	return tern_mac_part_ok(mac->next.key[TERN_MAC_DATA], NULL, bvec,
				nr_bvec, len, tag);
}
