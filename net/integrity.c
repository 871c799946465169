// SPDX-License-Identifier: GPL-2.0
/*
 * tern messenger core: integrity without secrecy (TERN_FEAT_INTEGRITY).
 *
 * Once a direction of an authenticated lane is signed, each frame carries
 * three tags, each the first 8 bytes of HMAC-SHA256 under the direction's
 * key (auth.c derives it from the handshake) over the frame's number in
 * that direction, a letter naming the part, and the part:
 *
 *   header tag	in data_crc and hdr_crc: 'H' and the first 40 header bytes
 *   front tag	first 8 bytes after the header: 'F' and the front
 *   data tag	next 8 bytes: 'D' and the data
 *
 * Each part is checked as soon as it is in, before anything acts on it:
 * the header before its lengths and ids choose buffers, the front before
 * the ULP reads it, the data before the request or reply completes. A
 * part the receiver throws away unread (a late duplicate reply, a
 * request refused for room) is not checked; its header was.
 *
 * The frame number is 64 bits and never repeats under one key, so a
 * frame cannot be replayed, reordered or moved to another lane. A
 * wrong tag is a broken lane: the next connection has fresh keys, so a
 * forger gets one 2^-64 guess per handshake. Documentation/protocol.rst,
 * "Integrity", is the normative text.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <crypto/hash.h>
#include <crypto/sha2.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <tern/compat.h>
#include "tern_core.h"

/* One direction of one lane: the key, and how many frames it has seen. */
struct tern_lane_mac {
	struct crypto_shash	*tfm;
	u64			frames;
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
	unsigned int noio;
	int err;

	mac = kzalloc(sizeof(*mac), GFP_NOIO);
	if (!mac)
		return ERR_PTR(-ENOMEM);
	/* a reconnect may be what memory reclaim waits for */
	noio = memalloc_noio_save();
	mac->tfm = crypto_alloc_shash("hmac(sha256)", 0, 0);
	memalloc_noio_restore(noio);
	if (IS_ERR(mac->tfm)) {
		err = PTR_ERR(mac->tfm);
		kfree(mac);
		return ERR_PTR(err);
	}
	err = crypto_shash_setkey(mac->tfm, key, TERN_WIRE_PROOF_LEN);
	if (err) {
		tern_mac_free(mac);
		return ERR_PTR(err);
	}
	return mac;
}

void tern_mac_free(struct tern_lane_mac *mac)
{
	if (IS_ERR_OR_NULL(mac))
		return;
	crypto_free_shash(mac->tfm);
	kfree(mac);
}

/* A tag being computed: the running HMAC and its first error. */
struct tern_mac_run {
	struct shash_desc	*desc;
	int			err;
};

static void tern_mac_update(struct tern_mac_run *run, const void *buf,
			    size_t len)
{
	if (!run->err && len)
		run->err = crypto_shash_update(run->desc, buf, len);
}

static void tern_mac_chunk(void *addr, size_t len, void *arg)
{
	tern_mac_update(arg, addr, len);
}

/*
 * The tag of one part of frame @nr: @buf (@len bytes), or @len bytes of
 * @bvec when @buf is NULL.
 */
static int tern_mac_part(struct tern_lane_mac *mac, u64 nr, u8 part,
			 const void *buf, const struct bio_vec *bvec,
			 unsigned int nr_bvec, u32 len, u8 *tag)
{
	SHASH_DESC_ON_STACK(desc, mac->tfm);
	struct tern_mac_run run = { .desc = desc };
	u8 digest[SHA256_DIGEST_SIZE];
	__le64 nr_le = cpu_to_le64(nr);

	desc->tfm = mac->tfm;
	run.err = crypto_shash_init(desc);
	tern_mac_update(&run, &nr_le, sizeof(nr_le));
	tern_mac_update(&run, &part, 1);
	if (buf)
		tern_mac_update(&run, buf, len);
	else if (len)
		tern_bvec_walk(bvec, nr_bvec, 0, len, tern_mac_chunk, &run);
	if (!run.err)
		run.err = crypto_shash_final(desc, digest);
	shash_desc_zero(desc);
	if (!run.err)
		memcpy(tag, digest, TERN_WIRE_PART_TAG_LEN);
	memzero_explicit(digest, sizeof(digest));
	return run.err;
}

/**
 * tern_mac_sign - sign @f as the next frame of its direction
 * @mac: the direction's state
 * @f: a frame with its header complete but for the tag
 *
 * Writes the header tag over data_crc and hdr_crc, and the front and
 * data tags into @f->tag.
 * Return: 0, or a crypto API error (the lane must go).
 */
int tern_mac_sign(struct tern_lane_mac *mac, struct tern_frame *f)
{
	u64 nr = mac->frames++;
	int err;

	err = tern_mac_part(mac, nr, 'H', &f->hdr, NULL, 0,
			    TERN_WIRE_HDR_TAG_OFF,
			    (u8 *)&f->hdr + TERN_WIRE_HDR_TAG_OFF);
	if (!err)
		err = tern_mac_part(mac, nr, 'F', f->front ?: "", NULL, 0,
				    tern_frame_front_len(f), f->tag);
	if (!err)
		err = tern_mac_part(mac, nr, 'D', NULL, f->bvec, f->nr_bvec,
				    tern_frame_data_len(f),
				    f->tag + TERN_WIRE_PART_TAG_LEN);
	f->tag_len = TERN_WIRE_TAG_LEN;
	return err;
}

static bool tern_mac_part_ok(struct tern_lane_mac *mac, u64 nr, u8 part,
			     const void *buf, const struct bio_vec *bvec,
			     unsigned int nr_bvec, u32 len, const u8 *tag)
{
	u8 want[TERN_WIRE_PART_TAG_LEN];
	bool ok;

	ok = !tern_mac_part(mac, nr, part, buf, bvec, nr_bvec, len, want) &&
	     !crypto_memneq(want, tag, sizeof(want));
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
	if (!tern_mac_part_ok(mac, mac->frames, 'H', hdr, NULL, 0,
			      TERN_WIRE_HDR_TAG_OFF,
			      (const u8 *)hdr + TERN_WIRE_HDR_TAG_OFF))
		return false;
	mac->frames++;
	return true;
}

/* The front's tag @tag, of the frame whose header passed last. */
bool tern_mac_check_front(struct tern_lane_mac *mac, const void *front,
			  u32 len, const u8 *tag)
{
	return tern_mac_part_ok(mac, mac->frames - 1, 'F', front ?: "", NULL,
				0, len, tag);
}

/* The data's tag @tag, of the frame whose header passed last. */
bool tern_mac_check_data(struct tern_lane_mac *mac,
			 const struct bio_vec *bvec, unsigned int nr_bvec,
			 u32 len, const u8 *tag)
{
	return tern_mac_part_ok(mac, mac->frames - 1, 'D', NULL, bvec,
				nr_bvec, len, tag);
}
