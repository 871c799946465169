// SPDX-License-Identifier: GPL-2.0
/*
 * tern_fuzz - a hostile raw-TCP peer for tern listeners.
 *
 * Opens many short connections to a tern TCP listener and sends each a
 * few malformed frames: random bytes, truncated headers and fronts, bad
 * magic, version, CRC, type, flags and sequence numbers, oversized
 * lengths, frames out of handshake order, handshakes with impossible
 * parameters, and requests with bad tids or inconsistent directions after
 * a good handshake. Header CRCs are valid unless the case is about the
 * CRC, so the listener's deeper checks are reached.
 *
 * Remote data cases: a handshake offering TERN_FEAT_REMOTE_DATA, then
 * REQUESTs with TERN_WIRE_F_REMOTE carrying descriptor-shaped data,
 * well formed or not. TCP has no remote memory access, so the listener
 * must strip the feature from its HELLO_ACK, never answer such a request
 * and drop the connection: anything else is a violation and fails the
 * run.
 *
 * Authentication cases (protocol version 2, TERN_FEAT_AUTH): HELLOs with
 * a nonce or an identity but no TERN_FEAT_AUTH, or with a malformed
 * identity (empty, unterminated, a bad character, junk after the NUL),
 * and AUTH or AUTH_ACK frames no key made: first thing, several, of a
 * wrong length, with reserved fields set, behind a HELLO asking to
 * authenticate as an identity without a key. A HELLO_ACK with status 0
 * for a malformed one or without a challenge, or an AUTH_ACK with status
 * 0, is a violation. All other HELLOs are version 2 and plain: no
 * TERN_FEAT_AUTH, nonce, identity and reserved fields all zero.
 *
 * The listener must survive all of it and keep accepting: the run fails
 * if a connection is ever refused. Whether the kernel stayed clean is for
 * the test lane to judge from the console.
 *
 * Block probe (-b EXPORT [-r RO_EXPORT]): instead of fuzzing, one good
 * session with a tern_target port, then block requests a correct target
 * must refuse with a given status (unknown handle, range, alignment,
 * opcode, version, reserved and flag fields, an optional operation the
 * export lacks, a write to a read-only export, a handle after CLOSE) or
 * serve (OPEN, a READ, a WATCH answered at once for a stale capacity and
 * held for the current one until CLOSE). Every reply is checked. With
 * -k KEYFILE -i IDENTITY the session authenticates first.
 *
 * Authentication probe (-A -k KEYFILE -i IDENTITY [-o KEYFILE2 -O
 * IDENTITY2] [-M]): a connector that knows the key of IDENTITY (and of
 * IDENTITY2) against a tern_target port that knows them too, one
 * kselftest line per case, each status checked exactly: the good
 * handshake (the target's proof verified, a PING answered; its session
 * is kept), the good HELLO and AUTH replayed byte for byte on a new
 * connection (-EKEYREJECTED), a wrong key (-EKEYREJECTED), an unknown
 * (-ENOKEY) or malformed (-EINVAL) identity, a nonce or identity without
 * TERN_FEAT_AUTH (-EINVAL), a lane of the good session proven as
 * IDENTITY2 (-EPERM) or not proven at all (-EPERM, or -ENOKEY), a plain
 * HELLO (-ENOKEY if -M says the port requires authentication, else let
 * in), and AUTHs the acceptor must drop the lane for without an AUTH_ACK
 * of status 0: as the first frame, before the HELLO_ACK, with reserved
 * fields set, two of them, an AUTH_ACK from the connector. Then signed
 * lanes (TERN_FEAT_INTEGRITY), their keys and tags computed here from
 * protocol.rst: PONGs whose every tag must check out, and PINGs with a
 * wrong header, front or data tag, without tags, or replayed, each of
 * which must be dropped unanswered; integrity without authentication or
 * with the data CRC or encryption is refused (-EINVAL). Last, the good
 * session must still answer. A first line checks SHA-256, HMAC-SHA256,
 * ChaCha20, Poly1305, the key schedule and key strings against known
 * answers.
 *
 * Keys (-k, -o): a file holding a key string, "TERNKEY-1:", the base64
 * (RFC 4648) of the 32-byte secret and its little-endian CRC32C, ":".
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) are done here, so the
 * proofs are computed independently of the kernel's crypto API; the key
 * schedule and the proofs are the protocol's (net/auth.c).
 *
 * Flood (-F MODE): many well-formed connections, see "Flood modes" below.
 *
 * Hostile target (-T CASE -l PORT): the other way round, a tern acceptor
 * listening on ADDR:PORT that completes handshakes and serves a block
 * export, but misbehaves as CASE says, for the kernel's client side
 * (tern_blk, tern_bench). See its section below. For a client that
 * authenticates: "noauth" answers without TERN_FEAT_AUTH (a downgrade),
 * "badproof" challenges and then answers AUTH_ACK 0 with a random proof
 * (a target without the key); the client must refuse both. "goodauth
 * -k KEYFILE" proves the key and serves well: the client must accept it.
 * With -k, every case authenticates the clients that ask.
 *
 * Usage: tern_fuzz -a ADDR -p PORT [-n FRAMES] [-s SEED] [-c CASE]
 *                  [-x CASE]...  (-x: never that case)
 *        tern_fuzz -a ADDR -p PORT -b EXPORT [-r RO_EXPORT]
 *                  [-k KEYFILE -i IDENTITY]
 *        tern_fuzz -a ADDR -p PORT -A -k KEYFILE -i IDENTITY
 *                  [-o KEYFILE2 -O IDENTITY2] [-M]
 *        tern_fuzz -a ADDR -p PORT -F MODE [-N CONNS] [-L LANES] [-Q REQS]
 *                  [-S BYTES] [-H SECONDS] [-R RCVBUF] [-K MS]
 *        tern_fuzz -T CASE[=ARG] -l PORT [-a ADDR] [-N CONNS] [-s SEED]
 *                  [-k KEYFILE [-i IDENTITY]]
 * "tern_fuzz -h" lists the cases.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <endian.h>

#include <tern/tern_blk_proto.h>
#include <tern/tern_wire.h>

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define HDR_LEN		sizeof(struct tern_wire_hdr)
#define HDR_CRC_LEN	offsetof(struct tern_wire_hdr, hdr_crc)

static u32 crc32c_table[256];

static void crc32c_init(void)
{
	u32 c;
	int i, k;

	for (i = 0; i < 256; i++) {
		c = i;
		for (k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78 : c >> 1;
		crc32c_table[i] = c;
	}
}

/* CRC32C as the wire uses it: initial ~0, final inversion. */
static u32 crc32c(const void *buf, size_t len)
{
	const u8 *p = buf;
	u32 c = ~0U;

	while (len--)
		c = crc32c_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return ~c;
}

static u64 rng_state;

static u32 rnd(void)
{
	/* xorshift64*: reproducible from the seed */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (u32)((rng_state * 0x2545f4914f6cdd1dULL) >> 32);
}

static u32 rnd_below(u32 n)
{
	return n ? rnd() % n : 0;
}

/* ---- SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) ---- */

/*
 * Only the authentication cases hash, a few hundred bytes per handshake:
 * the plain FIPS 180-4 computation, one 64-byte block at a time.
 */
#define SHA256_BLOCK	64
#define SHA256_LEN	32

/*
 * 4.2.2: the first 32 bits of the fractional parts of the cube roots of
 * the first 64 primes
 */
static const u32 sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5,
	0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
	0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3,
	0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5,
	0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* 5.3.3: the same of the square roots of the first 8 primes */
static const u32 sha256_h0[8] = {
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

struct sha256 {
	u32	h[8];			/* the intermediate hash value */
	u64	bytes;			/* message bytes so far */
	u8	block[SHA256_BLOCK];	/* the message block being filled */
	size_t	fill;
};

static u32 rotr32(u32 x, unsigned int n)
{
	return x >> n | x << (32 - n);
}

static void sha256_init(struct sha256 *s)
{
	memcpy(s->h, sha256_h0, sizeof(s->h));
	s->bytes = 0;
	s->fill = 0;
}

/* 6.2.2: one message block into the hash value. */
static void sha256_block(struct sha256 *s, const u8 *m)
{
	u32 w[64], a, b, c, d, e, f, g, h, t1, t2;
	int t;

	for (t = 0; t < 16; t++)
		w[t] = (u32)m[4 * t] << 24 | (u32)m[4 * t + 1] << 16 |
		       (u32)m[4 * t + 2] << 8 | m[4 * t + 3];
	for (t = 16; t < 64; t++)	/* with sigma1 (4.7), sigma0 (4.6) */
		w[t] = (rotr32(w[t - 2], 17) ^ rotr32(w[t - 2], 19) ^
			w[t - 2] >> 10) + w[t - 7] +
		       (rotr32(w[t - 15], 7) ^ rotr32(w[t - 15], 18) ^
			w[t - 15] >> 3) + w[t - 16];
	a = s->h[0];
	b = s->h[1];
	c = s->h[2];
	d = s->h[3];
	e = s->h[4];
	f = s->h[5];
	g = s->h[6];
	h = s->h[7];
	for (t = 0; t < 64; t++) {
		/* T1 = h + SIGMA1(e) + Ch(e, f, g) + K + W (4.5, 4.2) */
		t1 = h + (rotr32(e, 6) ^ rotr32(e, 11) ^ rotr32(e, 25)) +
		     ((e & f) ^ (~e & g)) + sha256_k[t] + w[t];
		/* T2 = SIGMA0(a) + Maj(a, b, c) (4.4, 4.3) */
		t2 = (rotr32(a, 2) ^ rotr32(a, 13) ^ rotr32(a, 22)) +
		     ((a & b) ^ (a & c) ^ (b & c));
		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	s->h[0] += a;
	s->h[1] += b;
	s->h[2] += c;
	s->h[3] += d;
	s->h[4] += e;
	s->h[5] += f;
	s->h[6] += g;
	s->h[7] += h;
}

/*
 * Of a hash fed in pieces: the next of *@len bytes at *@data into @block
 * (@size bytes, *@fill of them taken), as many as fit. True when full.
 */
static bool block_fill(u8 *block, size_t size, size_t *fill,
		       const u8 **data, size_t *len)
{
	size_t n = size - *fill;

	if (n > *len)
		n = *len;
	memcpy(block + *fill, *data, n);
	*fill += n;
	*data += n;
	*len -= n;
	return *fill == size;
}

static void sha256_update(struct sha256 *s, const void *data, size_t len)
{
	const u8 *p = data;

	s->bytes += len;
	while (len) {
		if (block_fill(s->block, SHA256_BLOCK, &s->fill, &p, &len)) {
			sha256_block(s, s->block);
			s->fill = 0;
		}
	}
}

/* 5.1.1 padding: a 1 bit, zeros, the message length in bits (64, BE). */
static void sha256_final(struct sha256 *s, u8 *out)
{
	u64 bits = s->bytes * 8;
	int i;

	s->block[s->fill++] = 0x80;
	if (s->fill > SHA256_BLOCK - 8) {
		memset(s->block + s->fill, 0, SHA256_BLOCK - s->fill);
		sha256_block(s, s->block);
		s->fill = 0;
	}
	memset(s->block + s->fill, 0, SHA256_BLOCK - 8 - s->fill);
	for (i = 0; i < 8; i++)
		s->block[SHA256_BLOCK - 1 - i] = bits >> (8 * i);
	sha256_block(s, s->block);
	for (i = 0; i < 32; i++)
		out[i] = s->h[i / 4] >> (24 - 8 * (i % 4));
	memset(s, 0, sizeof(*s));
}

static void sha256(const void *data, size_t len, u8 *out)
{
	struct sha256 s;

	sha256_init(&s);
	sha256_update(&s, data, len);
	sha256_final(&s, out);
}

/* HMAC (RFC 2104): H(K ^ opad, H(K ^ ipad, text)), K padded to a block. */
struct hmac {
	struct sha256	inner;
	struct sha256	outer;
};

static void hmac_init(struct hmac *m, const void *key, size_t len)
{
	u8 k[SHA256_BLOCK] = { 0 }, pad[SHA256_BLOCK];
	int i;

	if (len > SHA256_BLOCK)
		sha256(key, len, k);
	else
		memcpy(k, key, len);
	for (i = 0; i < SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x36;
	sha256_init(&m->inner);
	sha256_update(&m->inner, pad, sizeof(pad));
	for (i = 0; i < SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x5c;
	sha256_init(&m->outer);
	sha256_update(&m->outer, pad, sizeof(pad));
	memset(k, 0, sizeof(k));
	memset(pad, 0, sizeof(pad));
}

static void hmac_update(struct hmac *m, const void *data, size_t len)
{
	sha256_update(&m->inner, data, len);
}

static void hmac_final(struct hmac *m, u8 *out)
{
	u8 d[SHA256_LEN];

	sha256_final(&m->inner, d);
	sha256_update(&m->outer, d, sizeof(d));
	sha256_final(&m->outer, out);
}

static void hmac_sha256(const void *key, size_t key_len, const void *data,
			size_t len, u8 *out)
{
	struct hmac m;

	hmac_init(&m, key, key_len);
	hmac_update(&m, data, len);
	hmac_final(&m, out);
}

/* ---- ChaCha20 and Poly1305 (RFC 8439), the tags of signed lanes ---- */

#define CHACHA_KEY_LEN		32
#define CHACHA_BLOCK		64
#define POLY1305_KEY_LEN	32
#define POLY1305_TAG_LEN	16

static u32 le32_at(const u8 *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (u32)p[3] << 24;
}

static void le32_put(u8 *p, u32 v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static u32 rotl32(u32 v, int n)
{
	return v << n | v >> (32 - n);
}

static void chacha_quarter(u32 *x, int a, int b, int c, int d)
{
	x[a] += x[b];
	x[d] = rotl32(x[d] ^ x[a], 16);
	x[c] += x[d];
	x[b] = rotl32(x[b] ^ x[c], 12);
	x[a] += x[b];
	x[d] = rotl32(x[d] ^ x[a], 8);
	x[c] += x[d];
	x[b] = rotl32(x[b] ^ x[c], 7);
}

/* Key stream block @counter of ChaCha20 under @key and a 12-byte @nonce. */
static void chacha20_block(const u8 *key, u32 counter, const u8 *nonce,
			   u8 *out)
{
	static const u32 sigma[4] = {
		0x61707865, 0x3320646e, 0x79622d32, 0x6b206574,
	};
	u32 in[16], x[16];
	int i;

	for (i = 0; i < 4; i++)
		in[i] = sigma[i];
	for (i = 0; i < 8; i++)
		in[4 + i] = le32_at(key + 4 * i);
	in[12] = counter;
	for (i = 0; i < 3; i++)
		in[13 + i] = le32_at(nonce + 4 * i);
	memcpy(x, in, sizeof(x));
	for (i = 0; i < 10; i++) {	/* a column and a diagonal round */
		chacha_quarter(x, 0, 4, 8, 12);
		chacha_quarter(x, 1, 5, 9, 13);
		chacha_quarter(x, 2, 6, 10, 14);
		chacha_quarter(x, 3, 7, 11, 15);
		chacha_quarter(x, 0, 5, 10, 15);
		chacha_quarter(x, 1, 6, 11, 12);
		chacha_quarter(x, 2, 7, 8, 13);
		chacha_quarter(x, 3, 4, 9, 14);
	}
	for (i = 0; i < 16; i++)
		le32_put(out + 4 * i, x[i] + in[i]);
}

/*
 * Poly1305, in five 26-bit limbs so that every product fits 64 bits:
 * h = (h + block) * r mod 2^130 - 5, then tag = h + s mod 2^128.
 */
struct poly1305 {
	u32	r[5];
	u32	h[5];
	u32	s[4];
	u8	buf[16];
	size_t	used;
};

#define LIMB	0x3ffffff

static void poly1305_init(struct poly1305 *p, const u8 *key)
{
	u32 t0 = le32_at(key), t1 = le32_at(key + 4);
	u32 t2 = le32_at(key + 8), t3 = le32_at(key + 12);
	int i;

	memset(p, 0, sizeof(*p));
	/* r with RFC 8439's clamp folded into each limb's mask */
	p->r[0] = t0 & 0x3ffffff;
	p->r[1] = (t0 >> 26 | t1 << 6) & 0x3ffff03;
	p->r[2] = (t1 >> 20 | t2 << 12) & 0x3ffc0ff;
	p->r[3] = (t2 >> 14 | t3 << 18) & 0x3f03fff;
	p->r[4] = (t3 >> 8) & 0x00fffff;
	for (i = 0; i < 4; i++)
		p->s[i] = le32_at(key + 16 + 4 * i);
}

/* One 16-byte block; @top is 2^128 (1 << 24 in the last limb) or 0. */
static void poly1305_block(struct poly1305 *p, const u8 *m, u32 top)
{
	const u32 *r = p->r;
	u32 *h = p->h;
	u32 r5[5];
	u64 d[5], c;
	int i;

	for (i = 0; i < 5; i++)
		r5[i] = r[i] * 5;
	h[0] += le32_at(m) & LIMB;
	h[1] += le32_at(m + 3) >> 2 & LIMB;
	h[2] += le32_at(m + 6) >> 4 & LIMB;
	h[3] += le32_at(m + 9) >> 6 & LIMB;
	h[4] += le32_at(m + 12) >> 8 | top;
	/* limb products above 2^130 wrap around times 5 */
	d[0] = (u64)h[0] * r[0] + (u64)h[1] * r5[4] + (u64)h[2] * r5[3] +
	       (u64)h[3] * r5[2] + (u64)h[4] * r5[1];
	d[1] = (u64)h[0] * r[1] + (u64)h[1] * r[0] + (u64)h[2] * r5[4] +
	       (u64)h[3] * r5[3] + (u64)h[4] * r5[2];
	d[2] = (u64)h[0] * r[2] + (u64)h[1] * r[1] + (u64)h[2] * r[0] +
	       (u64)h[3] * r5[4] + (u64)h[4] * r5[3];
	d[3] = (u64)h[0] * r[3] + (u64)h[1] * r[2] + (u64)h[2] * r[1] +
	       (u64)h[3] * r[0] + (u64)h[4] * r5[4];
	d[4] = (u64)h[0] * r[4] + (u64)h[1] * r[3] + (u64)h[2] * r[2] +
	       (u64)h[3] * r[1] + (u64)h[4] * r[0];
	c = 0;
	for (i = 0; i < 5; i++) {
		d[i] += c;
		h[i] = d[i] & LIMB;
		c = d[i] >> 26;
	}
	h[0] += c * 5;
	h[1] += h[0] >> 26;
	h[0] &= LIMB;
}

static void poly1305_update(struct poly1305 *p, const void *data, size_t len)
{
	const u8 *m = data;

	while (len) {
		if (!p->used && len >= sizeof(p->buf)) {
			poly1305_block(p, m, 1U << 24);
			m += sizeof(p->buf);
			len -= sizeof(p->buf);
		} else if (block_fill(p->buf, sizeof(p->buf), &p->used, &m,
				      &len)) {
			poly1305_block(p, p->buf, 1U << 24);
			p->used = 0;
		}
	}
}

static void poly1305_final(struct poly1305 *p, u8 *tag)
{
	u32 *h = p->h, g[5], w[4], c, keep;
	u64 f;
	int i, pass;

	if (p->used) {		/* the short last block, 1 after its bytes */
		p->buf[p->used] = 1;
		memset(p->buf + p->used + 1, 0, sizeof(p->buf) - p->used - 1);
		poly1305_block(p, p->buf, 0);
	}
	/* every limb below 2^26: two carry passes are enough, a third is cheap */
	for (pass = 0; pass < 3; pass++) {
		c = 0;
		for (i = 0; i < 5; i++) {
			h[i] += c;
			c = h[i] >> 26;
			h[i] &= LIMB;
		}
		h[0] += c * 5;
	}
	/* h mod 2^130 - 5: take h + 5 - 2^130 unless that is negative */
	c = 5;
	for (i = 0; i < 5; i++) {
		g[i] = h[i] + c;
		c = g[i] >> 26;
		g[i] &= LIMB;
	}
	keep = c ? 0 : ~0U;	/* no carry out of 2^130: h was below p */
	for (i = 0; i < 5; i++)
		h[i] = (h[i] & keep) | (g[i] & ~keep);
	w[0] = h[0] | h[1] << 26;
	w[1] = h[1] >> 6 | h[2] << 20;
	w[2] = h[2] >> 12 | h[3] << 14;
	w[3] = h[3] >> 18 | h[4] << 8;
	f = 0;
	for (i = 0; i < 4; i++) {
		f = (u64)w[i] + p->s[i] + (f >> 32);
		le32_put(tag + 4 * i, f);
	}
	memset(p, 0, sizeof(*p));
}

/* ---- authentication keys and proofs (TERN_FEAT_AUTH) ---- */

#define AUTH_KEY_LEN		32
#define AUTH_SALT		"tern-v2 auth"
#define AUTH_HOST_LABEL		"tern-v2 host proof"
#define AUTH_TARGET_LABEL	"tern-v2 target proof"
#define AUTH_TRAFFIC_LABEL	"tern-v2 traffic"
#define KEY_PREFIX		"TERNKEY-1:"
/* "TERNKEY-1:" + base64 of the secret and its CRC32C (48) + ":" */
#define KEY_TEXT_LEN		(sizeof(KEY_PREFIX) - 1 + 48 + 1)

/* The proof keys of one identity. */
struct auth_keys {
	u8	host[SHA256_LEN];	/* the connector proves with */
	u8	target[SHA256_LEN];	/* the acceptor proves with */
	u8	traffic[SHA256_LEN];	/* lane keys derive from */
};

/* An identity and its secret, from -i and -k (or -O and -o). */
struct auth_id {
	const char	*identity;
	u8		secret[AUTH_KEY_LEN];
	struct auth_keys keys;
};

/* HMAC(PRK, label NUL identity 0x01): one HKDF-Expand block. */
static void auth_expand(const u8 *prk, const char *label,
			const char *identity, u8 *out)
{
	static const u8 one = 1;
	struct hmac m;

	hmac_init(&m, prk, SHA256_LEN);
	hmac_update(&m, label, strlen(label) + 1);
	hmac_update(&m, identity, strlen(identity));
	hmac_update(&m, &one, 1);
	hmac_final(&m, out);
}

/* The key schedule: PRK = HMAC("tern-v2 auth", S), then one key a side. */
static void auth_derive(const u8 *secret, const char *identity,
			struct auth_keys *k)
{
	u8 prk[SHA256_LEN];

	hmac_sha256(AUTH_SALT, sizeof(AUTH_SALT) - 1, secret, AUTH_KEY_LEN,
		    prk);
	auth_expand(prk, AUTH_HOST_LABEL, identity, k->host);
	auth_expand(prk, AUTH_TARGET_LABEL, identity, k->target);
	auth_expand(prk, AUTH_TRAFFIC_LABEL, identity, k->traffic);
	memset(prk, 0, sizeof(prk));
}

/*
 * Both proofs of a handshake: the connector's over both HELLO fronts,
 * the acceptor's over them and the connector's proof. Either may be NULL.
 */
static void auth_proofs(const struct auth_keys *k,
			const struct tern_wire_hello *hello,
			const struct tern_wire_hello *ack, u8 *host,
			u8 *target)
{
	u8 hp[SHA256_LEN];
	struct hmac m;

	hmac_init(&m, k->host, sizeof(k->host));
	hmac_update(&m, hello, sizeof(*hello));
	hmac_update(&m, ack, sizeof(*ack));
	hmac_final(&m, hp);
	if (host)
		memcpy(host, hp, sizeof(hp));
	if (target) {
		hmac_init(&m, k->target, sizeof(k->target));
		hmac_update(&m, hello, sizeof(*hello));
		hmac_update(&m, ack, sizeof(*ack));
		hmac_update(&m, hp, sizeof(hp));
		hmac_final(&m, target);
	}
}

/* An identity: 1-63 characters of [A-Za-z0-9._:-]. */
static bool identity_valid(const char *s)
{
	size_t len = strlen(s), i;

	if (!len || len >= TERN_WIRE_IDENTITY_LEN)
		return false;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr("._:-", s[i])))
			return false;
	return true;
}

/* A sextet of the RFC 4648 base64 alphabet, or -1. */
static int base64_sextet(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/*
 * RFC 4648 base64, standard alphabet, strictly: whole quanta, "=" only
 * as the padding of the last, no stray bits. The bytes written, or -1.
 */
static ssize_t base64_decode(const char *s, size_t len, u8 *out)
{
	size_t i, n = 0;
	int k, pad, v[4];
	u32 q;

	if (len % 4)
		return -1;
	for (i = 0; i < len; i += 4) {
		pad = 0;
		for (k = 0; k < 4; k++) {
			if (s[i + k] == '=' && i + 4 == len && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			v[k] = base64_sextet(s[i + k]);
			if (v[k] < 0 || pad)
				return -1;
		}
		q = (u32)v[0] << 18 | (u32)v[1] << 12 | (u32)v[2] << 6 | v[3];
		if ((pad == 2 && (q & 0xffff)) || (pad == 1 && (q & 0xff)))
			return -1;
		out[n++] = q >> 16;
		if (pad < 2)
			out[n++] = q >> 8;
		if (pad < 1)
			out[n++] = q;
	}
	return n;
}

/*
 * A key string: "TERNKEY-1:", the base64 of the secret and the LE
 * CRC32C of the secret, ":". 0, -EINVAL if it is none, -EBADMSG when
 * the checksum does not match (a key damaged in a copy).
 */
static int key_parse(const char *text, size_t len, u8 *secret)
{
	const size_t plen = sizeof(KEY_PREFIX) - 1;
	u8 raw[AUTH_KEY_LEN + 4];
	int err = 0;
	u32 crc;

	if (len != KEY_TEXT_LEN || memcmp(text, KEY_PREFIX, plen) ||
	    text[len - 1] != ':' ||
	    base64_decode(text + plen, len - plen - 1, raw) != sizeof(raw))
		return -EINVAL;
	crc = raw[32] | raw[33] << 8 | raw[34] << 16 | (u32)raw[35] << 24;
	if (crc != crc32c(raw, AUTH_KEY_LEN))
		err = -EBADMSG;
	else
		memcpy(secret, raw, AUTH_KEY_LEN);
	memset(raw, 0, sizeof(raw));
	return err;
}

/* The secret in KEYFILE: a key string, maybe with a line end. */
static int key_read(const char *path, u8 *secret)
{
	char text[256];
	size_t len;
	FILE *f;
	int err;

	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "tern_fuzz: %s: %s\n", path, strerror(errno));
		return -1;
	}
	len = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
		len--;
	err = key_parse(text, len, secret);
	memset(text, 0, sizeof(text));
	if (err)
		fprintf(stderr, "tern_fuzz: %s: %s\n", path, err == -EBADMSG ?
			"key checksum mismatch (a damaged copy?)" :
			"not a TERNKEY-1 key string");
	return err ? -1 : 0;
}

static int identity_check(const char *identity)
{
	if (identity_valid(identity))
		return 0;
	fprintf(stderr, "tern_fuzz: bad identity '%s': 1-63 of [A-Za-z0-9._:-]\n",
		identity);
	return -1;
}

/* -k/-o KEYFILE for -i/-O IDENTITY: its secret and proof keys. */
static int key_load(struct auth_id *id, const char *path,
		    const char *identity)
{
	if (identity_check(identity) || key_read(path, id->secret))
		return -1;
	id->identity = identity;
	auth_derive(id->secret, identity, &id->keys);
	return 0;
}

/* Fresh nonces and secrets: the kernel's random, not the seeded rnd(). */
static void random_bytes(void *buf, size_t len)
{
	u8 *p = buf;
	ssize_t n;

	while (len) {
		n = getrandom(p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		p += n;
		len -= n;
	}
	while (len--)		/* no getrandom(): still unlike the last */
		*p++ = rnd();
}

static bool all_zero(const void *buf, size_t len)
{
	const u8 *p = buf;

	while (len--)
		if (*p++)
			return false;
	return true;
}

struct peer {
	struct sockaddr_storage addr;
	socklen_t addrlen;
};

struct counters {
	unsigned long frames;
	unsigned long conns;
	unsigned long closed_by_listener;
	unsigned long refused;
	unsigned long other_errors;
	unsigned long remote_sent;	/* F_REMOTE requests after a good hello */
	unsigned long remote_dropped;	/* ... whose lane the listener dropped */
	unsigned long violations;
};

static struct counters count;

/* A frame under construction: header, then up to 64 KiB of body. */
struct frame {
	struct tern_wire_hdr hdr;
	u8 body[65536];
	size_t body_len;
};

static void frame_init(struct frame *f, u8 type, u32 seq)
{
	memset(&f->hdr, 0, sizeof(f->hdr));
	f->hdr.magic = htole32(TERN_WIRE_MAGIC);
	f->hdr.version = TERN_WIRE_VERSION;
	f->hdr.type = type;
	f->hdr.seq = htole32(seq);
	f->body_len = 0;
}

static void frame_seal(struct frame *f)
{
	f->hdr.hdr_crc = htole32(crc32c(&f->hdr, HDR_CRC_LEN));
}

static void hello_fill(struct tern_wire_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->session_id = htole64(((u64)rnd() << 32) | rnd());
	h->cookie = htole64(((u64)rnd() << 32) | rnd());
	h->incarnation = htole64(((u64)rnd() << 32) | rnd());
	h->max_data = htole32(1 << 20);
	h->max_front = htole32(4096);
	h->keepalive_ms = htole32(5000);
	h->nr_lanes = htole16(1);
	h->lane_idx = htole16(0);
	h->queue_depth = htole16(32);
}

/* A handshake frame whose front is a valid proposal (seq 1). */
static void frame_hello(struct frame *f)
{
	struct tern_wire_hello h;

	hello_fill(&h);
	frame_init(f, TERN_WIRE_HELLO, 1);
	memcpy(f->body, &h, sizeof(h));
	f->body_len = sizeof(h);
	f->hdr.front_len = htole32(sizeof(h));
	frame_seal(f);
}

static int send_all(int fd, const void *buf, size_t len)
{
	const u8 *p = buf;
	ssize_t n;

	while (len) {
		n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= n;
	}
	return 0;
}

static int send_frame(int fd, const struct frame *f, size_t hdr_bytes,
		      size_t body_bytes)
{
	count.frames++;
	if (send_all(fd, &f->hdr, hdr_bytes))
		return -1;
	if (body_bytes && send_all(fd, f->body, body_bytes))
		return -1;
	return 0;
}

static int peer_connect(const struct peer *peer)
{
	struct timeval tv = { .tv_sec = 2 };
	int fd, one = 1;

	fd = socket(peer->addr.ss_family, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)&peer->addr, peer->addrlen)) {
		if (errno == ECONNREFUSED)
			count.refused++;
		else
			count.other_errors++;
		close(fd);
		return -1;
	}
	count.conns++;
	return fd;
}

/* Half-close and read until the listener closes too (or 2 s pass). */
static void finish_conn(int fd)
{
	char buf[4096];
	ssize_t n;

	shutdown(fd, SHUT_WR);
	do {
		n = recv(fd, buf, sizeof(buf), 0);
	} while (n > 0);
	if (n == 0 || errno == ECONNRESET)
		count.closed_by_listener++;
	close(fd);
}

enum fuzz_case {
	CASE_RANDOM_BYTES,
	CASE_TRUNCATED_HEADER,
	CASE_BAD_MAGIC,
	CASE_BAD_VERSION,
	CASE_BAD_HDR_CRC,
	CASE_BAD_TYPE,
	CASE_BAD_FLAGS,
	CASE_BAD_SEQ,
	CASE_OVERSIZED,
	CASE_BEFORE_HELLO,
	CASE_HELLO_BAD_LENGTH,
	CASE_HELLO_BAD_FIELDS,
	CASE_TRUNCATED_FRONT,
	CASE_AFTER_HELLO,
	CASE_FLIPPED_BITS,
	CASE_REMOTE_REQUEST,
	CASE_REMOTE_BAD_DESC,
	CASE_AUTH_HELLO,
	CASE_AUTH_FRAMES,
	CASE_COUNT
};

static const char *const case_names[CASE_COUNT] = {
	"random-bytes", "truncated-header", "bad-magic", "bad-version",
	"bad-hdr-crc", "bad-type", "bad-flags", "bad-seq", "oversized",
	"before-hello", "hello-bad-length", "hello-bad-fields",
	"truncated-front", "after-hello", "flipped-bits", "remote-request",
	"remote-bad-desc", "auth-hello", "auth-frames",
};

static_assert(CASE_COUNT < 32, "tern_fuzz -x keeps the cases in a u32");

static struct frame fr;

/* A frame that is valid in form but makes no sense after a handshake. */
static void frame_nonsense(struct frame *f, u32 seq)
{
	static const u8 types[] = {
		TERN_WIRE_REQUEST, TERN_WIRE_REPLY, TERN_WIRE_HELLO,
		TERN_WIRE_HELLO_ACK, TERN_WIRE_PING, TERN_WIRE_PONG,
		TERN_WIRE_AUTH, TERN_WIRE_AUTH_ACK,
	};
	u32 front = rnd_below(3) ? rnd_below(64) : 0;

	frame_init(f, types[rnd_below(sizeof(types))], seq);
	f->hdr.tid = htole64(rnd_below(4) ? rnd() : ~0ULL);
	f->hdr.flags = htole16(rnd_below(TERN_WIRE_F_ALL + 1));
	f->hdr.ack = htole32(rnd());
	f->hdr.status = htole32(rnd());
	f->hdr.buf_len = htole32(rnd_below(2) ? rnd_below(1 << 16) : rnd());
	f->hdr.data_len = htole32(rnd_below(2) ? rnd_below(4096) : 0);
	f->hdr.front_len = htole32(front);
	for (f->body_len = 0; f->body_len < front; f->body_len++)
		f->body[f->body_len] = rnd();
	frame_seal(f);
}

static int recv_all(int fd, void *buf, size_t len)
{
	u8 *p = buf;
	ssize_t n;

	while (len) {
		n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

static void violation(const char *what, enum fuzz_case c)
{
	count.violations++;
	fprintf(stderr, "tern_fuzz: %s: %s\n", case_names[c], what);
}

/* A HELLO offering @features (seq 1); the HELLO_ACK's front in @ack. */
static int handshake(int fd, u32 features, struct tern_wire_hello *ack)
{
	struct tern_wire_hello h;
	struct tern_wire_hdr ah;

	hello_fill(&h);
	h.features = htole32(features);
	frame_init(&fr, TERN_WIRE_HELLO, 1);
	memcpy(fr.body, &h, sizeof(h));
	fr.body_len = sizeof(h);
	fr.hdr.front_len = htole32(sizeof(h));
	frame_seal(&fr);
	if (send_frame(fd, &fr, HDR_LEN, fr.body_len))
		return -1;
	if (recv_all(fd, &ah, sizeof(ah)) ||
	    ah.type != TERN_WIRE_HELLO_ACK ||
	    le32toh(ah.front_len) != sizeof(*ack) ||
	    recv_all(fd, ack, sizeof(*ack)))
		return -1;
	return 0;
}

/*
 * A handshake offering remote data; the HELLO_ACK is read and checked.
 * Return: 0 if the listener accepted it without remote data, -1 if not
 * (a refusal or a closed connection: the case ends there).
 */
static int remote_handshake(int fd, enum fuzz_case c)
{
	struct tern_wire_hello ack;

	if (handshake(fd, TERN_FEAT_REMOTE_DATA |
		      (rnd_below(2) ? TERN_FEAT_DATA_CRC : 0), &ack))
		return -1;
	if (le32toh(ack.features) & TERN_FEAT_REMOTE_DATA)
		violation("HELLO_ACK grants remote data over tcp", c);
	if (ack.status)
		return -1;
	/* the request must carry the data CRC flag iff it was negotiated */
	return le32toh(ack.features) & TERN_FEAT_DATA_CRC ? 1 : 0;
}

/*
 * A REQUEST with F_REMOTE whose descriptors describe buf_len exactly
 * (the form a remote data transport would accept), or with one thing
 * wrong: too many or no descriptors, a length that is not a multiple of
 * 16, a zero piece, pieces that do not add up, both or no direction.
 */
static void frame_remote_request(struct frame *f, u32 seq, bool crc,
				 bool bad)
{
	/* built here: at body + front they need not be aligned */
	struct tern_wire_rdesc d[2 * TERN_WIRE_MAX_RDESC];
	u32 n = 1 + rnd_below(TERN_WIRE_MAX_RDESC), i, len, total = 0;
	u32 front = rnd_below(2) ? rnd_below(64) : 0, data_len;
	u16 flags = TERN_WIRE_F_REMOTE;

	flags |= rnd_below(2) ? TERN_WIRE_F_DATA_TO_RESPONDER :
				TERN_WIRE_F_DATA_FROM_RESPONDER;
	if (crc)
		flags |= TERN_WIRE_F_DATA_CRC;
	if (bad && rnd_below(8) == 0)
		n = TERN_WIRE_MAX_RDESC + 1 + rnd_below(64);
	frame_init(f, TERN_WIRE_REQUEST, seq);
	f->hdr.tid = htole64(1 + rnd_below(1000));
	f->hdr.ack = htole32(1);	/* the HELLO_ACK */
	f->hdr.data_crc = htole32(crc ? rnd() : 0);
	for (i = 0; i < front; i++)
		f->body[i] = rnd();
	for (i = 0; i < n; i++) {
		len = 1 + rnd_below(1 << 13);	/* 64 fit max_data */
		d[i].addr = htole64(((u64)rnd() << 32) | (rnd() & ~0xfffu));
		d[i].len = htole32(len);
		d[i].rkey = htole32(rnd());
		total += len;
	}
	data_len = n * sizeof(*d);
	if (bad) {
		switch (rnd_below(6)) {
		case 0:		/* descriptors do not add up to buf_len */
			total += rnd_below(2) ? 1 + rnd_below(4096) : -1U;
			break;
		case 1:		/* a zero-length piece */
			total -= le32toh(d[n / 2].len);
			d[n / 2].len = 0;
			break;
		case 2:		/* not a whole number of descriptors */
			data_len -= 1 + rnd_below(15);
			break;
		case 3:		/* no descriptors at all */
			data_len = 0;
			break;
		case 4:		/* both directions, or none */
			flags |= TERN_WIRE_F_DATA_TO_RESPONDER |
				 TERN_WIRE_F_DATA_FROM_RESPONDER;
			if (rnd_below(2))
				flags &= ~(TERN_WIRE_F_DATA_TO_RESPONDER |
					   TERN_WIRE_F_DATA_FROM_RESPONDER);
			break;
		default:	/* no buffer */
			total = 0;
			break;
		}
	}
	memcpy(f->body + front, d, data_len);
	f->hdr.flags = htole16(flags);
	f->hdr.front_len = htole32(front);
	f->hdr.data_len = htole32(data_len);
	f->hdr.buf_len = htole32(total);
	f->body_len = front + data_len;
	frame_seal(f);
}

/*
 * After an F_REMOTE request the listener must close the connection and
 * send no REPLY first: read frames until it does (or 2 s pass).
 */
static void expect_drop(int fd, enum fuzz_case c)
{
	struct tern_wire_hdr h;
	u8 buf[4096];
	size_t skip;
	ssize_t n;

	shutdown(fd, SHUT_WR);
	for (;;) {
		n = recv(fd, &h, sizeof(h), MSG_WAITALL);
		if (n == 0 || (n < 0 && errno == ECONNRESET)) {
			count.closed_by_listener++;
			count.remote_dropped++;
			return;
		}
		if (n != sizeof(h)) {
			violation("the listener kept the connection open", c);
			return;
		}
		if (h.type == TERN_WIRE_REPLY) {
			violation("the listener answered a remote data request", c);
			return;
		}
		skip = (size_t)le32toh(h.front_len) + le32toh(h.data_len);
		while (skip) {
			n = recv(fd, buf, skip < sizeof(buf) ? skip : sizeof(buf), 0);
			if (n <= 0)
				break;
			skip -= n;
		}
	}
}

/* An identity no listener has a key for: "fuzz-" and 8 hex digits. */
static void fuzz_identity(struct tern_wire_hello *h)
{
	memset(h->identity, 0, sizeof(h->identity));
	snprintf(h->identity, sizeof(h->identity), "fuzz-%08x", rnd());
}

/*
 * Read what the listener sends until it closes the connection (or 2 s
 * pass). Only a challenge may let a HELLO asking to authenticate in (a
 * HELLO_ACK with status 0 and TERN_FEAT_AUTH), and nothing may prove an
 * identity of "fuzz-" (an AUTH_ACK with status 0): violations.
 */
static void auth_watch(int fd, enum fuzz_case c, bool challenge_ok)
{
	struct tern_wire_hello hello;
	struct tern_wire_auth auth;
	struct tern_wire_hdr h;
	u32 front, data, n;
	u8 buf[4096];
	ssize_t got;

	shutdown(fd, SHUT_WR);
	for (;;) {
		got = recv(fd, &h, sizeof(h), MSG_WAITALL);
		if (got == 0 || (got < 0 && errno == ECONNRESET))
			count.closed_by_listener++;
		if (got != (ssize_t)sizeof(h))
			return;
		front = le32toh(h.front_len);
		data = le32toh(h.data_len);
		if (front > TERN_WIRE_MAX_FRONT || data > TERN_WIRE_MAX_DATA)
			return;
		if (h.type == TERN_WIRE_HELLO_ACK && front == sizeof(hello)) {
			if (recv_all(fd, &hello, front))
				return;
			if (!hello.status && !challenge_ok)
				violation("HELLO_ACK status 0 for malformed authentication fields",
					  c);
			else if (!hello.status &&
				 !(le32toh(hello.features) & TERN_FEAT_AUTH))
				violation("HELLO_ACK let a lane in unauthenticated",
					  c);
			front = 0;
		} else if (h.type == TERN_WIRE_AUTH_ACK && front == sizeof(auth)) {
			if (recv_all(fd, &auth, front))
				return;
			if (!auth.status)
				violation("AUTH_ACK status 0 for a proof no key made",
					  c);
			front = 0;
		}
		for (data += front; data; data -= n) {
			n = data < sizeof(buf) ? data : sizeof(buf);
			if (recv_all(fd, buf, n))
				return;
		}
	}
}

/*
 * A HELLO whose authentication fields are malformed: a nonce or an
 * identity without TERN_FEAT_AUTH; an identity that is empty, 64
 * characters without a NUL, has a character outside [A-Za-z0-9._:-] or
 * junk after its NUL. Or a well-formed one for an identity without a
 * key. Only that last may get a HELLO_ACK with status 0: a challenge.
 */
static void fuzz_auth_hello(int fd, enum fuzz_case c)
{
	static const char bad[] = " /@\x01\x7f\x80\xff";
	struct tern_wire_hello *h = (struct tern_wire_hello *)fr.body;
	u32 kind = rnd_below(7), i;

	frame_hello(&fr);
	h->features = htole32(TERN_FEAT_AUTH |
			      (rnd_below(2) ? TERN_FEAT_DATA_CRC : 0));
	for (i = 0; i < sizeof(h->nonce); i++)
		h->nonce[i] = rnd();
	fuzz_identity(h);
	switch (kind) {
	case 0:		/* a nonce without authentication */
		h->features = 0;
		memset(h->identity, 0, sizeof(h->identity));
		break;
	case 1:		/* an identity without authentication */
		h->features = 0;
		if (rnd_below(2))
			memset(h->nonce, 0, sizeof(h->nonce));
		break;
	case 2:		/* empty */
		memset(h->identity, 0, sizeof(h->identity));
		break;
	case 3:		/* no NUL */
		memset(h->identity, 'a' + rnd_below(26), sizeof(h->identity));
		break;
	case 4:		/* a bad character */
		h->identity[rnd_below(13)] = bad[rnd_below(sizeof(bad) - 1)];
		break;
	case 5:		/* junk after the NUL */
		h->identity[14 + rnd_below(50)] = 1 + rnd_below(255);
		break;
	default:	/* well formed: this one may be challenged */
		break;
	}
	frame_seal(&fr);
	if (send_frame(fd, &fr, HDR_LEN, fr.body_len))
		return;
	auth_watch(fd, c, kind == 6);
}

/*
 * AUTH and AUTH_ACK frames no key made, where the listener awaits none
 * or as answers to a challenge for an identity without a key: first
 * thing, several, of a wrong length, with data, with reserved fields or
 * a wrong ack, an AUTH_ACK from the connector.
 */
static void fuzz_auth_frames(int fd, enum fuzz_case c)
{
	struct tern_wire_hello *h = (struct tern_wire_hello *)fr.body;
	u32 seq = 1, ack = 0, n, i, len, data;
	struct tern_wire_auth a;

	if (rnd_below(4)) {
		frame_hello(&fr);
		h->features = htole32(TERN_FEAT_AUTH);
		for (i = 0; i < sizeof(h->nonce); i++)
			h->nonce[i] = rnd();
		fuzz_identity(h);
		frame_seal(&fr);
		if (send_frame(fd, &fr, HDR_LEN, fr.body_len))
			return;
		seq++;
		ack = 1;	/* the HELLO_ACK */
	}
	for (n = 1 + rnd_below(3); n; n--) {
		for (i = 0; i < sizeof(a.proof); i++)
			a.proof[i] = rnd();
		a.status = htole32(rnd_below(4) ? 0 : rnd());
		a.reserved = htole32(rnd_below(4) ? 0 : rnd());
		frame_init(&fr, rnd_below(5) ? TERN_WIRE_AUTH :
					       TERN_WIRE_AUTH_ACK, seq++);
		fr.hdr.ack = htole32(rnd_below(4) ? ack : rnd());
		len = rnd_below(4) ? sizeof(a) : rnd_below(96);
		data = rnd_below(6) ? 0 : 1 + rnd_below(64);
		memcpy(fr.body, &a, sizeof(a));
		for (i = sizeof(a); i < len + data; i++)
			fr.body[i] = rnd();
		fr.body_len = len + data;
		fr.hdr.front_len = htole32(len);
		fr.hdr.data_len = htole32(data);
		frame_seal(&fr);
		if (send_frame(fd, &fr, HDR_LEN, fr.body_len))
			return;
	}
	auth_watch(fd, c, true);
}

static int run_case(const struct peer *peer, enum fuzz_case c)
{
	size_t i, n;
	u32 seq;
	int fd, crc;

	fd = peer_connect(peer);
	if (fd < 0)
		return -1;

	switch (c) {
	case CASE_RANDOM_BYTES:
		n = 1 + rnd_below(512);
		for (i = 0; i < n; i++)
			fr.body[i] = rnd();
		count.frames++;
		send_all(fd, fr.body, n);
		break;
	case CASE_TRUNCATED_HEADER:
		frame_hello(&fr);
		send_frame(fd, &fr, 1 + rnd_below(HDR_LEN - 1), 0);
		break;
	case CASE_BAD_MAGIC:
		frame_hello(&fr);
		fr.hdr.magic = htole32(rnd() | 1);
		frame_seal(&fr);
		send_frame(fd, &fr, HDR_LEN, fr.body_len);
		break;
	case CASE_BAD_VERSION:
		frame_hello(&fr);
		fr.hdr.version = TERN_WIRE_VERSION + 1 + rnd_below(200);
		frame_seal(&fr);
		send_frame(fd, &fr, HDR_LEN, fr.body_len);
		break;
	case CASE_BAD_HDR_CRC:
		frame_hello(&fr);
		fr.hdr.hdr_crc ^= htole32(1u << rnd_below(32));
		send_frame(fd, &fr, HDR_LEN, fr.body_len);
		break;
	case CASE_BAD_TYPE:
		frame_hello(&fr);
		fr.hdr.type = rnd_below(2) ? 0 : TERN_WIRE_TYPE_MAX + 1 + rnd_below(200);
		frame_seal(&fr);
		send_frame(fd, &fr, HDR_LEN, fr.body_len);
		break;
	case CASE_BAD_FLAGS:
		frame_hello(&fr);
		fr.hdr.flags = htole16((u16)(~TERN_WIRE_F_ALL) & (rnd() | 0x8000));
		frame_seal(&fr);
		send_frame(fd, &fr, HDR_LEN, fr.body_len);
		break;
	case CASE_BAD_SEQ:
		frame_hello(&fr);
		fr.hdr.seq = htole32(rnd_below(2) ? 0 : 2 + rnd());
		frame_seal(&fr);
		send_frame(fd, &fr, HDR_LEN, fr.body_len);
		break;
	case CASE_OVERSIZED:
		frame_hello(&fr);
		switch (rnd_below(3)) {
		case 0:
			fr.hdr.front_len = htole32(TERN_WIRE_MAX_FRONT + 1 + rnd_below(1 << 30));
			break;
		case 1:
			fr.hdr.data_len = htole32(TERN_WIRE_MAX_DATA + 1 + rnd_below(1 << 30));
			break;
		default:
			fr.hdr.buf_len = htole32(0xffffffff);
			break;
		}
		frame_seal(&fr);
		send_frame(fd, &fr, HDR_LEN, fr.body_len);
		break;
	case CASE_BEFORE_HELLO:
		frame_nonsense(&fr, 1);
		if (fr.hdr.type == TERN_WIRE_HELLO)
			fr.hdr.type = TERN_WIRE_REQUEST;
		frame_seal(&fr);
		send_frame(fd, &fr, HDR_LEN, fr.body_len);
		break;
	case CASE_HELLO_BAD_LENGTH:
		frame_hello(&fr);
		n = rnd_below(2) ? rnd_below(fr.body_len) : fr.body_len + 1 + rnd_below(64);
		fr.hdr.front_len = htole32(n);
		if (rnd_below(2))
			fr.hdr.data_len = htole32(1 + rnd_below(4096));
		frame_seal(&fr);
		for (i = fr.body_len; i < n; i++)
			fr.body[i] = rnd();
		send_frame(fd, &fr, HDR_LEN, n);
		break;
	case CASE_HELLO_BAD_FIELDS: {
		struct tern_wire_hello *h = (struct tern_wire_hello *)fr.body;

		frame_hello(&fr);
		switch (rnd_below(8)) {
		case 0:
			h->nr_lanes = htole16(rnd_below(2) ? 0 : TERN_WIRE_MAX_LANES + 1);
			break;
		case 1:
			h->lane_idx = htole16(1 + rnd_below(0xfffe));
			break;
		case 2:
			h->queue_depth = htole16(rnd_below(2) ? 0 : 0xffff);
			break;
		case 3:
			h->max_data = htole32(rnd_below(2) ? 0 : 0xffffffff);
			break;
		case 4:
			h->max_front = htole32(rnd_below(2) ? 0 : 0xffffffff);
			break;
		case 5:
			h->features = htole32(rnd() | 0x80000000u);
			break;
		case 6:
			h->status = htole32(rnd() | 1);
			h->reserved0 = htole16(rnd() | 1);
			h->reserved1 = htole32(rnd() | 1);
			break;
		default:
			h->session_id = 0;
			h->cookie = 0;
			break;
		}
		frame_seal(&fr);
		send_frame(fd, &fr, HDR_LEN, fr.body_len);
		break;
	}
	case CASE_TRUNCATED_FRONT:
		frame_hello(&fr);
		send_frame(fd, &fr, HDR_LEN, rnd_below(fr.body_len));
		break;
	case CASE_AFTER_HELLO:
		frame_hello(&fr);
		if (send_frame(fd, &fr, HDR_LEN, fr.body_len))
			break;
		n = 1 + rnd_below(8);
		for (seq = 2; seq < n + 2; seq++) {
			frame_nonsense(&fr, rnd_below(8) ? seq : rnd());
			if (send_frame(fd, &fr, HDR_LEN, fr.body_len))
				break;
		}
		break;
	case CASE_FLIPPED_BITS:
		frame_hello(&fr);
		n = 1 + rnd_below(4);
		for (i = 0; i < n; i++)
			((u8 *)&fr.hdr)[rnd_below(HDR_LEN)] ^= 1u << rnd_below(8);
		send_frame(fd, &fr, HDR_LEN, fr.body_len);
		break;
	case CASE_REMOTE_REQUEST:
	case CASE_REMOTE_BAD_DESC:
		crc = remote_handshake(fd, c);
		if (crc < 0)
			break;
		frame_remote_request(&fr, 2, crc, c == CASE_REMOTE_BAD_DESC);
		if (send_frame(fd, &fr, HDR_LEN, fr.body_len))
			break;
		count.remote_sent++;
		expect_drop(fd, c);
		close(fd);
		return 0;
	case CASE_AUTH_HELLO:
	case CASE_AUTH_FRAMES:
		if (c == CASE_AUTH_HELLO)
			fuzz_auth_hello(fd, c);
		else
			fuzz_auth_frames(fd, c);
		close(fd);
		return 0;
	default:
		break;
	}
	finish_conn(fd);
	return 0;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

/* ---- an authenticating connector (TERN_FEAT_AUTH) ---- */

/* What a read of the next frame found. */
enum got {
	GOT_FRAME,		/* a well-formed frame: al->rh, al->rfront */
	GOT_CLOSED,		/* the peer closed or reset the connection */
	GOT_TIMEOUT,		/* nothing in time */
	GOT_JUNK,		/* a frame we cannot follow */
};

static const char *const type_names[] = {
	[TERN_WIRE_HELLO] = "HELLO", [TERN_WIRE_HELLO_ACK] = "HELLO_ACK",
	[TERN_WIRE_REQUEST] = "REQUEST", [TERN_WIRE_REPLY] = "REPLY",
	[TERN_WIRE_PING] = "PING", [TERN_WIRE_PONG] = "PONG",
	[TERN_WIRE_AUTH] = "AUTH", [TERN_WIRE_AUTH_ACK] = "AUTH_ACK",
};

/*
 * One connection of a connector that authenticates, with what went over
 * it: the fronts the proofs cover, the HELLO and AUTH exactly as sent (to
 * replay them), and a transcript for the diagnostics.
 */
/* Integrity: one direction's MAC key and its frames so far. */
struct sign_dir {
	bool	on;
	u8	key[SHA256_LEN];
	u64	frames;
};

struct alane {
	int			fd;
	struct sign_dir		tx, rx;		/* TERN_FEAT_INTEGRITY */
	char			spoil;		/* al_send(): a tag to damage */
	u32			tx_seq;		/* last frame sent */
	u32			rx_seq;		/* last frame received */
	struct tern_wire_hello	hello;		/* HELLO front as sent */
	struct tern_wire_hello	ack;		/* HELLO_ACK front as received */
	struct tern_wire_auth	auth;		/* AUTH front to send */
	struct tern_wire_auth	auth_ack;	/* AUTH_ACK front as received */
	u8			target_proof[SHA256_LEN];	/* expected */
	struct tern_wire_hdr	rh;		/* the last frame received */
	u32			rfront_len;
	u8			rfront[TERN_WIRE_MAX_FRONT];
	u8			raw_hello[HDR_LEN + sizeof(struct tern_wire_hello)];
	u8			raw_auth[HDR_LEN + sizeof(struct tern_wire_auth)];
	char			log[512];	/* "> HELLO < HELLO_ACK 0 ..." */
};

/*
 * A part's tag (protocol.rst, "Integrity"): the first 8 bytes of the
 * Poly1305 MAC of the bytes under the part's one-time key, the frame's
 * ChaCha20 key stream from byte 0 ('H'), 32 ('F') or 64 ('D'); begun
 * here, ended by sign_end() after the bytes.
 */
static void sign_begin(struct poly1305 *m, const struct sign_dir *d,
		       char part)
{
	u8 nonce[12] = { 0 }, keys[2 * CHACHA_BLOCK];
	int i;

	for (i = 0; i < 8; i++)
		nonce[i] = d->frames >> (8 * i);
	chacha20_block(d->key, 0, nonce, keys);
	chacha20_block(d->key, 1, nonce, keys + CHACHA_BLOCK);
	poly1305_init(m, keys + (strchr("HFD", part) - "HFD") *
			 POLY1305_KEY_LEN);
	memset(keys, 0, sizeof(keys));
}

static void sign_end(struct poly1305 *m, u8 *tag)
{
	u8 t[POLY1305_TAG_LEN];

	poly1305_final(m, t);
	memcpy(tag, t, TERN_WIRE_PART_TAG_LEN);
}

static void sign_part(const struct sign_dir *d, char part, const void *buf,
		      size_t len, u8 *tag)
{
	struct poly1305 m;

	sign_begin(&m, d, part);
	poly1305_update(&m, buf, len);
	sign_end(&m, tag);
}

static void al_note(struct alane *al, const char *fmt, ...)
{
	size_t used = strlen(al->log);
	va_list ap;

	if (used + 1 >= sizeof(al->log))
		return;
	va_start(ap, fmt);
	vsnprintf(al->log + used, sizeof(al->log) - used, fmt, ap);
	va_end(ap);
}

static const char *type_name(u8 type)
{
	return type < ARRAY_SIZE(type_names) &&
	       type_names[type] ? type_names[type] : "type?";
}

static int al_connect(const struct peer *peer, struct alane *al)
{
	memset(al, 0, sizeof(*al));
	al->fd = peer_connect(peer);
	if (al->fd < 0)
		snprintf(al->log, sizeof(al->log), "cannot connect");
	return al->fd < 0 ? -1 : 0;
}

static void al_close(struct alane *al)
{
	if (al->fd >= 0)
		close(al->fd);
	al->fd = -1;
}

/*
 * A frame of @type with @front and no data; its bytes into @raw too. On
 * a signed lane, tagged (and the tag of part al->spoil, 'H', 'F' or 'D',
 * damaged).
 */
static int al_send(struct alane *al, u8 type, const void *front, u32 len,
		   void *raw)
{
	size_t tags = al->tx.on ? TERN_WIRE_TAG_LEN : 0;
	u8 *tag = fr.body;

	frame_init(&fr, type, ++al->tx_seq);
	fr.hdr.ack = htole32(al->rx_seq);
	if (len)
		memcpy(fr.body + tags, front, len);
	fr.body_len = tags + len;
	fr.hdr.front_len = htole32(len);
	if (!al->tx.on) {
		frame_seal(&fr);
	} else {
		sign_part(&al->tx, 'H', &fr.hdr, TERN_WIRE_HDR_TAG_OFF,
			  (u8 *)&fr.hdr + TERN_WIRE_HDR_TAG_OFF);
		sign_part(&al->tx, 'F', len ? front : "", len, tag);
		sign_part(&al->tx, 'D', "", 0, tag + TERN_WIRE_PART_TAG_LEN);
		al->tx.frames++;
		if (al->spoil == 'H')
			((u8 *)&fr.hdr)[TERN_WIRE_HDR_TAG_OFF] ^= 1;
		else if (al->spoil == 'F')
			tag[0] ^= 1;
		else if (al->spoil == 'D')
			tag[TERN_WIRE_PART_TAG_LEN] ^= 1;
	}
	if (raw) {
		memcpy(raw, &fr.hdr, HDR_LEN);
		memcpy((u8 *)raw + HDR_LEN, fr.body, fr.body_len);
	}
	al_note(al, "> %s ", type_name(type));
	return send_frame(al->fd, &fr, HDR_LEN, fr.body_len);
}

/* Bytes already framed (a replay), as @type for the transcript. */
static int al_send_raw(struct alane *al, u8 type, const void *raw,
		       size_t len)
{
	al->tx_seq++;
	al_note(al, "> %s (replayed) ", type_name(type));
	count.frames++;
	return send_all(al->fd, raw, len);
}

/*
 * The next frame, within @ms: its header in al->rh, front in al->rfront,
 * and a HELLO_ACK's or AUTH_ACK's front also in al->ack or al->auth_ack
 * (of any other length it is junk). Data is read and dropped.
 */
static enum got al_recv(struct alane *al, int ms)
{
	struct pollfd pfd = { .fd = al->fd, .events = POLLIN };
	struct tern_wire_hdr *h = &al->rh;
	u8 buf[4096], tags[TERN_WIRE_TAG_LEN], want[TERN_WIRE_PART_TAG_LEN];
	struct poly1305 m;
	u32 data, n;
	ssize_t got;

	if (poll(&pfd, 1, ms) == 0) {
		al_note(al, "< nothing in %d ms ", ms);
		return GOT_TIMEOUT;
	}
	got = recv(al->fd, h, HDR_LEN, MSG_WAITALL);
	if (got == 0 || (got < 0 && errno == ECONNRESET)) {
		al_note(al, "< closed");
		return GOT_CLOSED;
	}
	if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		al_note(al, "< nothing in time ");
		return GOT_TIMEOUT;
	}
	if (got != (ssize_t)HDR_LEN || le32toh(h->magic) != TERN_WIRE_MAGIC ||
	    h->version != TERN_WIRE_VERSION)
		goto junk;
	if (!al->rx.on) {
		if (crc32c(h, HDR_CRC_LEN) != le32toh(h->hdr_crc))
			goto junk;
	} else {
		sign_part(&al->rx, 'H', h, TERN_WIRE_HDR_TAG_OFF, want);
		if (memcmp(want, (u8 *)h + TERN_WIRE_HDR_TAG_OFF, sizeof(want)) ||
		    recv_all(al->fd, tags, sizeof(tags)))
			goto bad_tag;
	}
	al->rfront_len = le32toh(h->front_len);
	data = le32toh(h->data_len);
	if (al->rfront_len > sizeof(al->rfront) ||
	    recv_all(al->fd, al->rfront, al->rfront_len))
		goto junk;
	if (al->rx.on) {
		sign_part(&al->rx, 'F', al->rfront, al->rfront_len, want);
		if (memcmp(want, tags, sizeof(want)))
			goto bad_tag;
		sign_begin(&m, &al->rx, 'D');
	}
	while (data) {
		n = data < sizeof(buf) ? data : sizeof(buf);
		if (recv_all(al->fd, buf, n))
			goto junk;
		if (al->rx.on)
			poly1305_update(&m, buf, n);
		data -= n;
	}
	if (al->rx.on) {
		sign_end(&m, want);
		if (memcmp(want, tags + TERN_WIRE_PART_TAG_LEN, sizeof(want)))
			goto bad_tag;
		al->rx.frames++;
	}
	al->rx_seq = le32toh(h->seq);
	if (h->type == TERN_WIRE_HELLO_ACK) {
		if (al->rfront_len != sizeof(al->ack))
			goto junk;
		memcpy(&al->ack, al->rfront, sizeof(al->ack));
		al_note(al, "< HELLO_ACK %d ", (int)le32toh(al->ack.status));
	} else if (h->type == TERN_WIRE_AUTH_ACK) {
		if (al->rfront_len != sizeof(al->auth_ack))
			goto junk;
		memcpy(&al->auth_ack, al->rfront, sizeof(al->auth_ack));
		al_note(al, "< AUTH_ACK %d ", (int)le32toh(al->auth_ack.status));
	} else {
		al_note(al, "< %s ", type_name(h->type));
	}
	return GOT_FRAME;
bad_tag:
	al_note(al, "< a frame with a wrong tag");
	return GOT_JUNK;
junk:
	al_note(al, "< a malformed frame");
	return GOT_JUNK;
}

static bool al_got(const struct alane *al, enum got g, u8 type)
{
	return g == GOT_FRAME && al->rh.type == type;
}

/* HELLO_ACK and AUTH_ACK status, as the wire's negative errno. */
static int ack_status(const struct tern_wire_hello *ack)
{
	return (int)le32toh(ack->status);
}

static int auth_status(const struct tern_wire_auth *a)
{
	return (int)le32toh(a->status);
}

/* A HELLO proposal (two lanes); with @identity, asking to authenticate. */
static void auth_hello_fill(struct tern_wire_hello *h, const char *identity)
{
	hello_fill(h);
	h->nr_lanes = htole16(2);
	if (!identity)
		return;
	h->features = htole32(TERN_FEAT_AUTH);
	random_bytes(h->nonce, sizeof(h->nonce));
	memcpy(h->identity, identity, strlen(identity));
}

/* HELLO with @h (kept in al->hello), and the answer. */
static enum got al_hello(struct alane *al, const struct tern_wire_hello *h)
{
	al->hello = *h;
	if (al_send(al, TERN_WIRE_HELLO, h, sizeof(*h), al->raw_hello))
		return GOT_CLOSED;
	return al_recv(al, 3000);
}

/*
 * Is the HELLO_ACK a challenge the connector's side may answer: status
 * 0, TERN_FEAT_AUTH, a nonce, no identity, our ids echoed, reserved
 * fields zero? What is wrong into @why.
 */
static bool al_challenge_ok(const struct alane *al, char *why, size_t len)
{
	const struct tern_wire_hello *a = &al->ack, *h = &al->hello;
	const char *bad = NULL;

	if (a->status)
		bad = "a refusal";
	else if (!(le32toh(a->features) & TERN_FEAT_AUTH))
		bad = "no TERN_FEAT_AUTH in it (a downgrade)";
	else if (all_zero(a->nonce, sizeof(a->nonce)))
		bad = "no nonce in it";
	else if (!all_zero(a->identity, sizeof(a->identity)))
		bad = "an identity in it";
	else if (a->session_id != h->session_id || a->cookie != h->cookie ||
		 a->lane_idx != h->lane_idx)
		bad = "another session id, cookie or lane index in it";
	else if (a->reserved0 || a->reserved1)
		bad = "reserved fields set in it";
	if (bad)
		snprintf(why, len, "HELLO_ACK: %s", bad);
	return !bad;
}

/* The proofs of this lane's HELLO and HELLO_ACK with @k: AUTH in al->auth. */
static void al_prove(struct alane *al, const struct auth_keys *k)
{
	memset(&al->auth, 0, sizeof(al->auth));
	auth_proofs(k, &al->hello, &al->ack, al->auth.proof, al->target_proof);
}

static int al_send_auth(struct alane *al)
{
	return al_send(al, TERN_WIRE_AUTH, &al->auth, sizeof(al->auth),
		       al->raw_auth);
}

/*
 * A connector's whole handshake with proposal @h, as @k's identity:
 * HELLO, HELLO_ACK, AUTH, AUTH_ACK, the target's proof checked, as the
 * kernel's connector does. 0, or -1 with the reason in @why.
 */
static int al_handshake(struct alane *al, const struct auth_keys *k,
			const struct tern_wire_hello *h, char *why,
			size_t len)
{
	enum got g = al_hello(al, h);

	if (!al_got(al, g, TERN_WIRE_HELLO_ACK)) {
		snprintf(why, len, "no HELLO_ACK");
		return -1;
	}
	if (!al_challenge_ok(al, why, len))
		return -1;
	al_prove(al, k);
	if (al_send_auth(al)) {
		snprintf(why, len, "AUTH not sent");
		return -1;
	}
	g = al_recv(al, 3000);
	if (!al_got(al, g, TERN_WIRE_AUTH_ACK))
		snprintf(why, len, "no AUTH_ACK");
	else if (al->auth_ack.status)
		snprintf(why, len, "AUTH_ACK status %d",
			 auth_status(&al->auth_ack));
	else if (al->auth_ack.reserved)
		snprintf(why, len, "AUTH_ACK with reserved set");
	else if (memcmp(al->auth_ack.proof, al->target_proof, SHA256_LEN))
		snprintf(why, len, "the target's proof is wrong");
	else
		return 0;
	return -1;
}

/* A PING, and its PONG within 3 s. */
static int al_ping(struct alane *al)
{
	if (al_send(al, TERN_WIRE_PING, NULL, 0, NULL))
		return -1;
	return al_got(al, al_recv(al, 3000), TERN_WIRE_PONG) ? 0 : -1;
}

/*
 * Read until the acceptor closes the connection, at most @ms: how many
 * AUTH_ACKs came and how many of them said 0, and how many HELLO_ACKs.
 * 0 if it closed, -1 if not, -2 on a malformed frame.
 */
static int al_drain(struct alane *al, int ms, unsigned int *acks,
		    unsigned int *oks, unsigned int *hello_acks)
{
	double end = now_ms() + ms;
	enum got g;

	*acks = 0;
	*oks = 0;
	*hello_acks = 0;
	for (;;) {
		g = al_recv(al, end > now_ms() ? (int)(end - now_ms()) : 0);
		if (g == GOT_CLOSED)
			return 0;
		if (g != GOT_FRAME)
			return g == GOT_JUNK ? -2 : -1;
		if (al->rh.type == TERN_WIRE_AUTH_ACK) {
			(*acks)++;
			*oks += !al->auth_ack.status;
		}
		*hello_acks += al->rh.type == TERN_WIRE_HELLO_ACK;
	}
}

/* ---- block probe ---- */

struct probe {
	int fd;
	u32 tx_seq;		/* last frame sent */
	u32 rx_seq;		/* last frame received */
	u64 tid;		/* last tid used */
	unsigned long failed;
	const char *host;	/* host id for OPEN: the proven identity */
};

/* Send a block request; its tid, or 0 if the connection failed. */
static u64 probe_send(struct probe *p, const struct tern_blk_req *r,
		      size_t front_len, u16 dir, u32 buf_len)
{
	u32 data_len = dir == TERN_WIRE_F_DATA_TO_RESPONDER ? buf_len : 0;

	frame_init(&fr, TERN_WIRE_REQUEST, ++p->tx_seq);
	fr.hdr.tid = htole64(++p->tid);
	fr.hdr.ack = htole32(p->rx_seq);
	fr.hdr.flags = htole16(dir);
	fr.hdr.front_len = htole32(front_len);
	fr.hdr.buf_len = htole32(buf_len);
	fr.hdr.data_len = htole32(data_len);
	memcpy(fr.body, r, front_len);
	memset(fr.body + front_len, 0xa5, data_len);
	fr.body_len = front_len + data_len;
	frame_seal(&fr);
	return send_frame(p->fd, &fr, HDR_LEN, fr.body_len) ? 0 : p->tid;
}

/*
 * The next REPLY, within @ms milliseconds: header in @h, front (at most
 * a tern_blk_info) in @info; its data is read and dropped. 1 if none
 * came in time, -1 on a broken connection or a frame that is no REPLY.
 */
static int probe_recv(struct probe *p, struct tern_wire_hdr *h,
		      struct tern_blk_info *info, int ms)
{
	struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
	u32 front, data;
	u8 buf[4096];

	if (poll(&pfd, 1, ms) == 0)
		return 1;
	if (recv_all(p->fd, h, sizeof(*h)) || h->type != TERN_WIRE_REPLY)
		return -1;
	p->rx_seq = le32toh(h->seq);
	front = le32toh(h->front_len);
	data = le32toh(h->data_len);
	memset(info, 0, sizeof(*info));
	if (front > sizeof(*info) || (front && recv_all(p->fd, info, front)))
		return -1;
	while (data) {
		u32 n = data < sizeof(buf) ? data : sizeof(buf);

		if (recv_all(p->fd, buf, n))
			return -1;
		data -= n;
	}
	return 0;
}

static void probe_result(struct probe *p, const char *what, int status,
			 int want)
{
	printf("# %-40s status %d%s\n", what, status,
	       status == want ? "" : " (wrong)");
	if (status != want) {
		fprintf(stderr, "tern_fuzz: %s: status %d, expected %d\n",
			what, status, want);
		p->failed++;
	}
}

/* One request and its reply, which must carry status @want. */
static int probe(struct probe *p, const char *what,
		 const struct tern_blk_req *r, size_t front_len, u16 dir,
		 u32 buf_len, int want, struct tern_blk_info *info)
{
	struct tern_blk_info scratch;
	struct tern_wire_hdr h;
	u64 tid;

	tid = probe_send(p, r, front_len, dir, buf_len);
	if (!tid || probe_recv(p, &h, info ? info : &scratch, 5000) ||
	    le64toh(h.tid) != tid) {
		fprintf(stderr, "tern_fuzz: %s: no reply\n", what);
		p->failed++;
		return -1;
	}
	probe_result(p, what, (int)le32toh(h.status), want);
	return (int)le32toh(h.status) == want ? 0 : -1;
}

/* OPEN @export as @host; 0 when answered @status (and, if 0, sanely). */
static int probe_open_as(struct probe *p, const char *what,
			 const char *export, const char *host, int status,
			 struct tern_blk_info *info)
{
	struct {
		struct tern_blk_req r;
		struct tern_blk_open_args a;
	} open = { .r = { .opcode = TERN_BLK_OP_OPEN,
			  .version = TERN_BLK_PROTO_VERSION } };

	snprintf(open.a.export, sizeof(open.a.export), "%s", export);
	snprintf(open.a.host, sizeof(open.a.host), "%s", host);
	if (probe(p, what, &open.r, sizeof(open), 0, 0, status, info))
		return -1;
	return status || (info->handle && info->capacity) ? 0 : -1;
}

static int probe_open(struct probe *p, const char *export,
		      struct tern_blk_info *info)
{
	if (probe_open_as(p, "OPEN", export, p->host ?: "tern_fuzz", 0,
			  info)) {
		fprintf(stderr, "tern_fuzz: cannot open export %s\n", export);
		return -1;
	}
	return 0;
}

static struct tern_blk_req blk_req(u8 opcode, u64 handle, u64 sector,
				   u32 len)
{
	struct tern_blk_req r = {
		.opcode = opcode, .version = TERN_BLK_PROTO_VERSION,
		.length = htole32(len), .offset = htole64(sector),
		.handle = htole64(handle),
	};

	return r;
}

/* A session for the block probe in @p: as @id, or unauthenticated. */
static int probe_session(const struct peer *peer, const struct auth_id *id,
			 struct probe *p)
{
	struct tern_wire_hello ack;

	p->tx_seq = 1;
	p->rx_seq = 1;
	if (id) {
		/* the session of an identity: -k and -i */
		struct alane *al = calloc(1, sizeof(*al));
		char why[160];

		if (!al || al_connect(peer, al))
			return 1;
		auth_hello_fill(&ack, id->identity);
		ack.nr_lanes = htole16(1);
		if (al_handshake(al, &id->keys, &ack, why, sizeof(why))) {
			fprintf(stderr, "tern_fuzz: no session as '%s': %s [%s]\n",
				id->identity, why, al->log);
			return 1;
		}
		printf("# authenticated as '%s'\n", id->identity);
		p->host = id->identity;
		p->fd = al->fd;
		p->tx_seq = al->tx_seq;
		p->rx_seq = al->rx_seq;
		free(al);
		return 0;
	}
	p->fd = peer_connect(peer);
	if (p->fd < 0 || handshake(p->fd, 0, &ack) || ack.status) {
		fprintf(stderr, "tern_fuzz: no session with the target\n");
		return 1;
	}
	return 0;
}

static int block_probe(const struct peer *peer, const char *export,
		       const char *ro_export, const struct auth_id *id)
{
	const u16 from = TERN_WIRE_F_DATA_FROM_RESPONDER;
	struct probe p = { 0 }, other = { 0 };
	struct tern_blk_info info, ro;
	struct tern_wire_hdr h;
	struct tern_blk_req r;
	unsigned int optional = 0;
	u64 handle, cap, held, tid[2];
	u32 lbs;
	u16 flags;
	int i, n;

	if (probe_session(peer, id, &p))
		return 1;
	/* a proven session opens as the identity it proved, nothing else */
	if (id)
		probe_open_as(&p, "OPEN as a host id other than the proven",
			      export, "tern_fuzz", -EACCES, &info);
	if (probe_open(&p, export, &info))
		return 1;
	handle = le64toh(info.handle);
	cap = le64toh(info.capacity);
	lbs = le32toh(info.logical_block_size);
	flags = le16toh(info.flags);
	printf("# export %s: %llu sectors of %u bytes, flags 0x%x\n", export,
	       (unsigned long long)cap, lbs, flags);

	r = blk_req(TERN_BLK_OP_READ, handle, 0, 4096);
	probe(&p, "READ 4K at 0", &r, sizeof(r), from, 4096, 0, NULL);
	r.handle = htole64(handle ^ 1);
	probe(&p, "READ with an unknown handle", &r, sizeof(r), from, 4096,
	      -ESTALE, NULL);
	/* a handle is its session's: seen on the wire, it opens nothing */
	if (probe_session(peer, id, &other)) {
		p.failed++;
	} else {
		r = blk_req(TERN_BLK_OP_READ, handle, 0, 4096);
		probe(&other, "READ with another session's handle", &r,
		      sizeof(r), from, 4096, -ESTALE, NULL);
		p.failed += other.failed;
		close(other.fd);
	}
	r = blk_req(TERN_BLK_OP_READ, handle, cap, 4096);
	probe(&p, "READ past the capacity", &r, sizeof(r), from, 4096,
	      -ERANGE, NULL);
	r = blk_req(TERN_BLK_OP_READ, handle, 0, lbs + 100);
	probe(&p, "READ of a partial block", &r, sizeof(r), from, lbs + 100,
	      -EINVAL, NULL);
	r = blk_req(TERN_BLK_OP_READ, handle, 0, 4096);
	r.flags = htole16(TERN_BLK_F_FUA);
	probe(&p, "READ with FUA", &r, sizeof(r), from, 4096, -EINVAL, NULL);
	r = blk_req(TERN_BLK_OP_READ, handle, 0, 4096);
	r.version = TERN_BLK_PROTO_VERSION + 1;
	probe(&p, "READ of another protocol version", &r, sizeof(r), from,
	      4096, -EINVAL, NULL);
	r = blk_req(TERN_BLK_OP_READ, handle, 0, 4096);
	r.reserved1 = htole64(1);
	probe(&p, "READ with reserved1 set", &r, sizeof(r), from, 4096,
	      -EINVAL, NULL);
	r = blk_req(TERN_BLK_OP_MAX + 1, handle, 0, 0);
	probe(&p, "unknown opcode", &r, sizeof(r), 0, 0, -EINVAL, NULL);
	r = blk_req(TERN_BLK_OP_WATCH, handle, cap, 4096);
	probe(&p, "WATCH with a length", &r, sizeof(r), 0, 0, -EINVAL, NULL);
	if (!(flags & TERN_BLK_INFO_DISCARD)) {
		r = blk_req(TERN_BLK_OP_DISCARD, handle, 0, 4096);
		probe(&p, "DISCARD the export does not support", &r,
		      sizeof(r), 0, 0, -EOPNOTSUPP, NULL);
		optional++;
	}
	if (!(flags & TERN_BLK_INFO_WRITE_ZEROES)) {
		r = blk_req(TERN_BLK_OP_WRITE_ZEROES, handle, 0, 4096);
		probe(&p, "WRITE_ZEROES the export does not support", &r,
		      sizeof(r), 0, 0, -EOPNOTSUPP, NULL);
		optional++;
	}
	if (!optional) {
		fprintf(stderr, "tern_fuzz: export %s lacks no optional operation\n",
			export);
		p.failed++;
	}
	if (ro_export && !probe_open(&p, ro_export, &ro)) {
		r = blk_req(TERN_BLK_OP_WRITE, le64toh(ro.handle), 0, 4096);
		probe(&p, "WRITE to a read-only export", &r, sizeof(r),
		      TERN_WIRE_F_DATA_TO_RESPONDER, 4096, -EROFS, NULL);
	}

	/* a WATCH naming a stale capacity is answered at once ... */
	r = blk_req(TERN_BLK_OP_WATCH, handle, cap + 8, 0);
	if (!probe(&p, "WATCH of a stale capacity", &r, sizeof(r), 0, 0, 0,
		   &info) && le64toh(info.capacity) != cap) {
		fprintf(stderr, "tern_fuzz: WATCH answered capacity %llu\n",
			(unsigned long long)le64toh(info.capacity));
		p.failed++;
	}
	/* ... one naming the current capacity is held, until CLOSE */
	r = blk_req(TERN_BLK_OP_WATCH, handle, cap, 0);
	held = probe_send(&p, &r, sizeof(r), 0, 0);
	if (!held || probe_recv(&p, &h, &info, 500) != 1) {
		fprintf(stderr, "tern_fuzz: a WATCH of the current capacity was not held\n");
		p.failed++;
	} else {
		printf("# %-40s held\n", "WATCH of the current capacity");
	}
	r = blk_req(TERN_BLK_OP_CLOSE, handle, 0, 0);
	tid[0] = probe_send(&p, &r, sizeof(r), 0, 0);
	tid[1] = held;
	for (n = 0; tid[0] && n < 2; n++) {
		if (probe_recv(&p, &h, &info, 5000))
			break;
		for (i = 0; i < 2; i++)
			if (le64toh(h.tid) == tid[i])
				probe_result(&p, i ? "the held WATCH, at CLOSE" :
						      "CLOSE",
					     (int)le32toh(h.status),
					     i ? -ESTALE : 0);
	}
	if (n != 2) {
		fprintf(stderr, "tern_fuzz: CLOSE and the held WATCH: %d replies\n",
			n);
		p.failed++;
	}
	r = blk_req(TERN_BLK_OP_READ, handle, 0, 4096);
	probe(&p, "READ after CLOSE", &r, sizeof(r), from, 4096, -ESTALE,
	      NULL);
	close(p.fd);
	printf("# block probe: %lu wrong\n", p.failed);
	return p.failed ? 1 : 0;
}

/* ---- authentication probe (-A) ---- */

/*
 * Known answers: FIPS 180-4's examples, the empty message, every padding
 * case (the digest of the digests of 0 to 129 'a's), RFC 4231 test cases
 * 2 and 6, and this protocol's key string, key schedule and proofs for
 * the secret 00 01 .. 1f and identity "host-1" (computed independently).
 * The count of wrong answers.
 */
static int auth_selftest(char *why, size_t len)
{
	static const char *const digests[] = {
		"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
		"cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
		"60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
		"a7e04651bf7a6d73ade5b3532e4ac50114770a406cf0cc2bcf0ab4f54052c509",
		"017dc984f3595b88b4dfd20c4720cfd09221a7f96b40441852fdbfa7f0b0e8bc",
		"9243022b9c2da53e6eb874187665d56601b49d98999cd2c8581882527070b93f",
		"8dc436cb2d79a510e34924b3abbd70bbbc2b9e68dea3131ba4cc07c9e63a093f",
		"39a48225ae6069c68f7c9f867bf47f4a2e188c3903dd919926b8259a73ecada5",
	};
	static const char key_text[] =
		"TERNKEY-1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh9Oed1G:";
	u8 out[ARRAY_SIZE(digests)][SHA256_LEN], secret[AUTH_KEY_LEN];
	u8 big[1000], key[131], d[SHA256_LEN];
	struct tern_wire_hello hello, ack;
	struct auth_keys k;
	char text[sizeof(key_text)], hex[2 * SHA256_LEN + 1];
	struct sha256 s;
	int i, j, wrong = 0;

	sha256("abc", 3, out[0]);
	sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
	       out[1]);
	memset(big, 'a', sizeof(big));
	sha256_init(&s);
	for (i = 0; i < 1000; i++)	/* a million 'a', 1000 at a time */
		sha256_update(&s, big, sizeof(big));
	sha256_final(&s, out[2]);
	sha256("", 0, out[3]);
	hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, out[4]);
	memset(key, 0xaa, sizeof(key));
	hmac_sha256(key, sizeof(key),
		    "Test Using Larger Than Block-Size Key - Hash Key First",
		    54, out[5]);
	for (i = 0; i < AUTH_KEY_LEN; i++)
		secret[i] = i;
	auth_derive(secret, "host-1", &k);
	memcpy(out[6], k.host, SHA256_LEN);
	memcpy(out[7], k.target, SHA256_LEN);
	for (i = 0; i < (int)sizeof(hello); i++) {
		((u8 *)&hello)[i] = i;
		((u8 *)&ack)[i] = i * 7;
	}
	auth_proofs(&k, &hello, &ack, out[8], out[9]);
	sha256_init(&s);
	for (i = 0; i < 130; i++) {
		sha256(big, i, d);
		sha256_update(&s, d, sizeof(d));
	}
	sha256_final(&s, out[10]);

	why[0] = 0;
	for (i = 0; i < (int)ARRAY_SIZE(digests); i++) {
		for (j = 0; j < SHA256_LEN; j++)
			snprintf(hex + 2 * j, 3, "%02x", out[i][j]);
		if (strcmp(hex, digests[i])) {
			wrong++;
			snprintf(why + strlen(why), len - strlen(why),
				 "answer %d is %.16s..; ", i, hex);
		}
	}
	memset(secret, 0, sizeof(secret));
	if (key_parse(key_text, strlen(key_text), secret) ||
	    secret[0] != 0 || secret[31] != 31) {
		wrong++;
		snprintf(why + strlen(why), len - strlen(why),
			 "the key string does not parse; ");
	}
	memcpy(text, key_text, sizeof(text));
	/* a damaged copy: still base64, but of another secret */
	text[20] = text[20] == 'A' ? 'B' : 'A';
	if (key_parse(text, strlen(text), secret) != -EBADMSG) {
		wrong++;
		snprintf(why + strlen(why), len - strlen(why),
			 "a damaged key string passes its checksum; ");
	}
	return wrong;
}

static u8 nibble(char c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* @len bytes of @hex ("00ff.."), into @out. */
static void unhex(const char *hex, u8 *out, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		out[i] = nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]);
}

/*
 * Known answers for the tags of signed lanes: RFC 8439's ChaCha20 block
 * of the zero key (A.1 #1) and Poly1305 examples (2.5.2, A.3 #4 and the
 * final reduction's edge cases A.3 #5, #8 and #9, whose messages are
 * runs of one byte), the last also fed in uneven pieces. The count of
 * wrong answers.
 */
static int sign_selftest(char *why, size_t len)
{
	static const struct {
		const char	*key;
		const char	*msg;	/* or NULL: runs[] */
		const char	*tag;
		struct { u8 byte, n; } runs[4];
	} macs[] = {
		{ .key = "85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b",
		  .msg = "Cryptographic Forum Research Group",
		  .tag = "a8061dc1305136c6c22b8baf0c0127a9" },
		{ .key = "1c9240a5eb55d38af333888604f6b5f0473917c1402b80099dca5cbc207075c0",
		  .msg = "'Twas brillig, and the slithy toves\n"
			 "Did gyre and gimble in the wabe:\n"
			 "All mimsy were the borogoves,\n"
			 "And the mome raths outgrabe.",
		  .tag = "4541669a7eaaee61e708dc7cbcc5eb62" },
		{ .key = "0200000000000000000000000000000000000000000000000000000000000000",
		  .runs = { { 0xff, 16 } },
		  .tag = "03000000000000000000000000000000" },
		{ .key = "0100000000000000000000000000000000000000000000000000000000000000",
		  .runs = { { 0xff, 16 }, { 0xfb, 1 }, { 0xfe, 15 }, { 0x01, 16 } },
		  .tag = "00000000000000000000000000000000" },
		{ .key = "0200000000000000000000000000000000000000000000000000000000000000",
		  .runs = { { 0xfd, 1 }, { 0xff, 15 } },
		  .tag = "faffffffffffffffffffffffffffffff" },
	};
	static const char *const zero_block[2] = {
		"76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7",
		"da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586",
	};
	u8 key[POLY1305_KEY_LEN], msg[64], tag[POLY1305_TAG_LEN];
	u8 want[CHACHA_BLOCK], block[CHACHA_BLOCK], nonce[12] = { 0 };
	struct poly1305 m;
	const u8 *bytes;
	size_t i, j, n, at, step;
	int wrong = 0;

	memset(key, 0, sizeof(key));
	chacha20_block(key, 0, nonce, block);
	unhex(zero_block[0], want, CHACHA_BLOCK / 2);
	unhex(zero_block[1], want + CHACHA_BLOCK / 2, CHACHA_BLOCK / 2);
	if (memcmp(block, want, sizeof(block))) {
		wrong++;
		snprintf(why + strlen(why), len - strlen(why),
			 "the ChaCha20 block is wrong; ");
	}
	for (i = 0; i < ARRAY_SIZE(macs); i++) {
		unhex(macs[i].key, key, sizeof(key));
		bytes = (const u8 *)macs[i].msg;
		n = bytes ? strlen(macs[i].msg) : 0;
		for (j = 0; !bytes && j < ARRAY_SIZE(macs[i].runs); j++) {
			memset(msg + n, macs[i].runs[j].byte,
			       macs[i].runs[j].n);
			n += macs[i].runs[j].n;
		}
		if (!bytes)
			bytes = msg;
		poly1305_init(&m, key);
		/* the last one in pieces of 1, 2, 3.. bytes, across blocks */
		for (at = 0, step = 1; at < n; at += step, step++) {
			if (i + 1 < ARRAY_SIZE(macs) || step > n - at)
				step = n - at;
			poly1305_update(&m, bytes + at, step);
		}
		poly1305_final(&m, tag);
		unhex(macs[i].tag, want, sizeof(tag));
		if (memcmp(tag, want, sizeof(tag))) {
			wrong++;
			snprintf(why + strlen(why), len - strlen(why),
				 "Poly1305 answer %zu is wrong; ", i);
		}
	}
	return wrong;
}

/* The probe's state: its options, and the session of the good case. */
struct aprobe {
	const struct peer	*peer;
	const struct auth_id	*id;		/* -k, -i */
	const struct auth_id	*id2;		/* -o, -O, or NULL */
	bool			require;	/* -M: the port requires auth */
	struct alane		good;		/* case "good", kept open */
	bool			have_good;
	const char		*lost_after;	/* the good session died there */
	char			why[1024];
};

/* Results: 1 passed, 0 failed, -1 skipped; the details in p->why. */
#define AP_PASS		1
#define AP_FAIL		0
#define AP_SKIP		-1

static int ap_say(struct aprobe *p, int res, const struct alane *al,
		  const char *fmt, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
	n = strlen(p->why);
	if (al && al->log[0])
		snprintf(p->why + n, sizeof(p->why) - n, " [%s]", al->log);
	return res;
}

static int ap_selftest(struct aprobe *p)
{
	char why[512];
	int wrong;

	wrong = auth_selftest(why, sizeof(why));
	wrong += sign_selftest(why + strlen(why), sizeof(why) - strlen(why));
	if (wrong)
		return ap_say(p, AP_FAIL, NULL, "%s", why);
	return ap_say(p, AP_PASS, NULL,
		      "SHA-256, HMAC-SHA256, ChaCha20, Poly1305, key schedule, key strings");
}

/* a) The right key: the handshake completes, the target proves its key. */
static int ap_good(struct aprobe *p)
{
	struct alane *al = &p->good;
	struct tern_wire_hello h;
	char why[160];

	if (al_connect(p->peer, al))
		return ap_say(p, AP_FAIL, al, "no connection");
	auth_hello_fill(&h, p->id->identity);
	if (al_handshake(al, &p->id->keys, &h, why, sizeof(why)))
		return ap_say(p, AP_FAIL, al, "%s", why);
	if (al_ping(al))
		return ap_say(p, AP_FAIL, al, "authenticated, but no PONG");
	p->have_good = true;
	return ap_say(p, AP_PASS, al,
		      "'%s': features 0x%x, %u lanes, the target's proof verified",
		      p->id->identity, le32toh(al->ack.features),
		      le16toh(al->ack.nr_lanes));
}

/*
 * A refusal in the HELLO_ACK or (@auth) the AUTH_ACK with status @want
 * (or @also), then a close.
 */
static int ap_refused2(struct aprobe *p, struct alane *al, enum got g,
		       bool auth, int want, int also, const char *what)
{
	int status;

	if (!al_got(al, g, auth ? TERN_WIRE_AUTH_ACK : TERN_WIRE_HELLO_ACK))
		return ap_say(p, AP_FAIL, al, "%s: no %s", what,
			      auth ? "AUTH_ACK" : "HELLO_ACK");
	status = auth ? auth_status(&al->auth_ack) : ack_status(&al->ack);
	if (status != want && status != also)
		return ap_say(p, AP_FAIL, al, "%s: status %d, expected %d",
			      what, status, want);
	if (al_recv(al, 3000) != GOT_CLOSED)
		return ap_say(p, AP_FAIL, al, "%s: refused (%d), not closed",
			      what, status);
	return ap_say(p, AP_PASS, al, "%s: refused with %d, closed", what,
		      status);
}

static int ap_refused(struct aprobe *p, struct alane *al, enum got g,
		      bool auth, int want, const char *what)
{
	return ap_refused2(p, al, g, auth, want, want, what);
}

/* The HELLO_ACK a lane must get to go on: a challenge. */
static int ap_challenged(struct aprobe *p, struct alane *al, enum got g)
{
	char why[160];

	if (!al_got(al, g, TERN_WIRE_HELLO_ACK))
		return ap_say(p, AP_FAIL, al, "no HELLO_ACK");
	if (!al_challenge_ok(al, why, sizeof(why)))
		return ap_say(p, AP_FAIL, al, "%s", why);
	return AP_PASS;
}

/*
 * b) The HELLO and AUTH of the good handshake again, byte for byte, on a
 * new connection: the acceptor's fresh nonce must make the proof stale.
 */
static int ap_replay(struct aprobe *p)
{
	u8 raw[sizeof(p->good.raw_auth)];
	struct tern_wire_hdr h;
	struct alane al;
	enum got g;
	int res;

	if (!p->have_good)
		return ap_say(p, AP_SKIP, NULL, "no good handshake to replay");
	if (al_connect(p->peer, &al))
		return ap_say(p, AP_FAIL, &al, "no connection");
	al.hello = p->good.hello;
	if (al_send_raw(&al, TERN_WIRE_HELLO, p->good.raw_hello,
			sizeof(p->good.raw_hello)))
		return ap_say(p, AP_FAIL, &al, "HELLO not sent");
	g = al_recv(&al, 3000);
	res = ap_challenged(p, &al, g);
	if (res != AP_PASS)
		goto out;
	if (!memcmp(al.ack.nonce, p->good.ack.nonce, sizeof(al.ack.nonce))) {
		res = ap_say(p, AP_FAIL, &al, "the acceptor's nonce is the same again");
		goto out;
	}
	/* header seq is per connection, so the recorded bytes fit as they are */
	memcpy(raw, p->good.raw_auth, sizeof(raw));
	memcpy(&h, raw, HDR_LEN);
	if (le32toh(h.ack) != al.rx_seq) {
		h.ack = htole32(al.rx_seq);
		h.hdr_crc = htole32(crc32c(&h, HDR_CRC_LEN));
		memcpy(raw, &h, HDR_LEN);
		al_note(&al, "(ack resealed) ");
	}
	if (al_send_raw(&al, TERN_WIRE_AUTH, raw, sizeof(raw))) {
		res = ap_say(p, AP_FAIL, &al, "AUTH not sent");
		goto out;
	}
	res = ap_refused(p, &al, al_recv(&al, 3000), true, -EKEYREJECTED,
			 "the replayed AUTH");
out:
	al_close(&al);
	return res;
}

/* c) A connector with the identity but not its key. */
static int ap_wrong_key(struct aprobe *p)
{
	u8 secret[AUTH_KEY_LEN];
	struct tern_wire_hello h;
	struct auth_keys k;
	struct alane al;
	int res;

	random_bytes(secret, sizeof(secret));
	auth_derive(secret, p->id->identity, &k);
	if (al_connect(p->peer, &al))
		return ap_say(p, AP_FAIL, &al, "no connection");
	auth_hello_fill(&h, p->id->identity);
	res = ap_challenged(p, &al, al_hello(&al, &h));
	if (res == AP_PASS) {
		al_prove(&al, &k);
		al_send_auth(&al);
		res = ap_refused(p, &al, al_recv(&al, 3000), true,
				 -EKEYREJECTED, "a random key");
	}
	al_close(&al);
	return res;
}

/* An authenticating HELLO as @identity, refused with @want at once. */
static int ap_hello_refused(struct aprobe *p, const char *identity,
			    int want, const char *what)
{
	struct tern_wire_hello h;
	struct alane al;
	int res;

	if (al_connect(p->peer, &al))
		return ap_say(p, AP_FAIL, &al, "no connection");
	auth_hello_fill(&h, "x");
	memset(h.identity, 0, sizeof(h.identity));
	memcpy(h.identity, identity, strlen(identity));
	res = ap_refused(p, &al, al_hello(&al, &h), false, want, what);
	al_close(&al);
	return res;
}

/* d) An identity the acceptor has no key for. */
static int ap_unknown(struct aprobe *p)
{
	const char *nobody = "nobody-here";

	if (!strcmp(nobody, p->id->identity) ||
	    (p->id2 && !strcmp(nobody, p->id2->identity)))
		nobody = "nobody-here-either";
	return ap_hello_refused(p, nobody, -ENOKEY, nobody);
}

/* An identity outside [A-Za-z0-9._:-]: malformed, whatever the keys. */
static int ap_bad_identity(struct aprobe *p)
{
	return ap_hello_refused(p, "bad identity", -EINVAL,
				"identity 'bad identity'");
}

/* Without TERN_FEAT_AUTH, a nonce or an identity is malformed. */
static int ap_plain_fields(struct aprobe *p)
{
	struct tern_wire_hello h;
	struct alane al;
	int i, res = AP_PASS;

	for (i = 0; i < 2 && res == AP_PASS; i++) {
		if (al_connect(p->peer, &al))
			return ap_say(p, AP_FAIL, &al, "no connection");
		auth_hello_fill(&h, p->id->identity);
		h.features = 0;
		if (i)
			memset(h.nonce, 0, sizeof(h.nonce));
		else
			memset(h.identity, 0, sizeof(h.identity));
		res = ap_refused(p, &al, al_hello(&al, &h), false, -EINVAL,
				 i ? "an identity without TERN_FEAT_AUTH" :
				     "a nonce without TERN_FEAT_AUTH");
		al_close(&al);
	}
	return res;
}

/* A HELLO for a lane of the good session: its ids, another lane. */
static void ap_hijack_hello(struct aprobe *p, struct tern_wire_hello *h)
{
	*h = p->good.hello;
	if (le16toh(p->good.ack.nr_lanes) > 1)
		h->lane_idx = htole16(1);
	memset(h->nonce, 0, sizeof(h->nonce));
	memset(h->identity, 0, sizeof(h->identity));
}

/* e) The good session's lane, proven as another identity. */
static int ap_hijack_auth(struct aprobe *p)
{
	struct tern_wire_hello h;
	struct alane al;
	int res;

	if (!p->have_good)
		return ap_say(p, AP_SKIP, NULL, "no good session to join");
	if (!p->id2)
		return ap_say(p, AP_SKIP, NULL, "no second identity (-O, -o)");
	if (al_connect(p->peer, &al))
		return ap_say(p, AP_FAIL, &al, "no connection");
	ap_hijack_hello(p, &h);
	random_bytes(h.nonce, sizeof(h.nonce));
	memcpy(h.identity, p->id2->identity, strlen(p->id2->identity));
	res = ap_challenged(p, &al, al_hello(&al, &h));
	if (res == AP_PASS) {
		al_prove(&al, &p->id2->keys);
		al_send_auth(&al);
		res = ap_refused(p, &al, al_recv(&al, 3000), true, -EPERM,
				 p->id2->identity);
	} else if (al.ack.status == htole32((u32)-ENOKEY)) {
		snprintf(p->why + strlen(p->why),
			 sizeof(p->why) - strlen(p->why),
			 " (does the port know the key of '%s'?)",
			 p->id2->identity);
	}
	al_close(&al);
	return res;
}

/* e) The good session's lane, not authenticated at all. */
static int ap_hijack_plain(struct aprobe *p)
{
	struct tern_wire_hello h;
	struct alane al;
	int res;

	if (!p->have_good)
		return ap_say(p, AP_SKIP, NULL, "no good session to join");
	if (al_connect(p->peer, &al))
		return ap_say(p, AP_FAIL, &al, "no connection");
	ap_hijack_hello(p, &h);
	h.features &= ~htole32(TERN_FEAT_AUTH);
	/* either refusal will do: which the port checks first is its own */
	res = ap_refused2(p, &al, al_hello(&al, &h), false,
			  p->require ? -ENOKEY : -EPERM,
			  p->require ? -EPERM : -ENOKEY, "a plain lane");
	al_close(&al);
	return res;
}

/* f) A plain HELLO for a new session: only a port that requires auth refuses. */
static int ap_plain(struct aprobe *p)
{
	struct tern_wire_hello h;
	struct alane al;
	enum got g;
	int res;

	if (al_connect(p->peer, &al))
		return ap_say(p, AP_FAIL, &al, "no connection");
	auth_hello_fill(&h, NULL);
	g = al_hello(&al, &h);
	if (p->require) {
		res = ap_refused(p, &al, g, false, -ENOKEY,
				 "a port that requires authentication");
	} else if (!al_got(&al, g, TERN_WIRE_HELLO_ACK) || al.ack.status ||
		   (al.ack.features & htole32(TERN_FEAT_AUTH))) {
		res = ap_say(p, AP_FAIL, &al,
			     "a port without -M must let a plain lane in");
	} else {
		res = ap_say(p, AP_PASS, &al, "let in, as the port allows (no -M)");
	}
	al_close(&al);
	return res;
}

/*
 * g) After what an AUTH case sent, the acceptor must close the
 * connection and never say 0 in an AUTH_ACK, or (@one_ok) at most once,
 * to the one right AUTH; with @no_hello, send no HELLO_ACK either.
 */
static int ap_dropped_as(struct aprobe *p, struct alane *al, bool one_ok,
			 bool no_hello)
{
	unsigned int acks, oks, hello_acks;

	switch (al_drain(al, 3000, &acks, &oks, &hello_acks)) {
	case -1:
		return ap_say(p, AP_FAIL, al, "the connection stayed open");
	case -2:
		return ap_say(p, AP_FAIL, al, "a malformed frame");
	}
	if (oks > one_ok)
		return ap_say(p, AP_FAIL, al, "AUTH_ACK status 0");
	if (one_ok && acks > 1)
		return ap_say(p, AP_FAIL, al, "an AUTH answered twice");
	if (no_hello && hello_acks)
		return ap_say(p, AP_FAIL, al, "%u HELLOs answered", hello_acks);
	return ap_say(p, AP_PASS, al, "dropped");
}

static int ap_dropped(struct aprobe *p, struct alane *al, bool one_ok)
{
	return ap_dropped_as(p, al, one_ok, false);
}

/* A new lane of a new session as far as its challenge, as id. */
static int ap_challenge(struct aprobe *p, struct alane *al)
{
	struct tern_wire_hello h;
	int res;

	if (al_connect(p->peer, al))
		return ap_say(p, AP_FAIL, al, "no connection");
	auth_hello_fill(&h, p->id->identity);
	res = ap_challenged(p, al, al_hello(al, &h));
	if (res != AP_PASS)
		al_close(al);
	return res;
}

static int ap_auth_first(struct aprobe *p)
{
	struct alane al;
	int res;

	if (al_connect(p->peer, &al))
		return ap_say(p, AP_FAIL, &al, "no connection");
	random_bytes(al.auth.proof, sizeof(al.auth.proof));
	al_send_auth(&al);
	res = ap_dropped(p, &al, false);
	al_close(&al);
	return res;
}

/* AUTH right behind the HELLO: a proof over a HELLO_ACK not yet seen. */
static int ap_auth_early(struct aprobe *p)
{
	struct tern_wire_hello h;
	struct alane al;
	int res;

	if (al_connect(p->peer, &al))
		return ap_say(p, AP_FAIL, &al, "no connection");
	auth_hello_fill(&h, p->id->identity);
	al.hello = h;
	al_send(&al, TERN_WIRE_HELLO, &h, sizeof(h), NULL);
	al_prove(&al, &p->id->keys);	/* al.ack: all zero */
	al.rx_seq = 1;
	al_send_auth(&al);
	res = ap_dropped(p, &al, false);
	al_close(&al);
	return res;
}

/* The right proof in an AUTH with its status (@status) or reserved set. */
static int ap_auth_reserved(struct aprobe *p, bool status)
{
	struct alane al;
	int res;

	res = ap_challenge(p, &al);
	if (res != AP_PASS)
		return res;
	al_prove(&al, &p->id->keys);
	if (status)
		al.auth.status = htole32(1);
	else
		al.auth.reserved = htole32(1);
	al_send_auth(&al);
	res = ap_dropped(p, &al, false);
	al_close(&al);
	return res;
}

static int ap_auth_reserved1(struct aprobe *p)
{
	return ap_auth_reserved(p, false);
}

static int ap_auth_status(struct aprobe *p)
{
	return ap_auth_reserved(p, true);
}

/* Two AUTHs at once: a wrong proof then the right one, or the right twice. */
static int ap_auth_twice(struct aprobe *p, bool wrong_first)
{
	struct tern_wire_auth right;
	struct alane al;
	int res;

	res = ap_challenge(p, &al);
	if (res != AP_PASS)
		return res;
	al_prove(&al, &p->id->keys);
	right = al.auth;
	if (wrong_first)
		al.auth.proof[0] ^= 1;
	al_send_auth(&al);
	al.auth = right;
	al_send_auth(&al);
	res = ap_dropped(p, &al, !wrong_first);
	al_close(&al);
	return res;
}

static int ap_auth_wrong_right(struct aprobe *p)
{
	return ap_auth_twice(p, true);
}

static int ap_auth_right_twice(struct aprobe *p)
{
	return ap_auth_twice(p, false);
}

/*
 * A wrong proof, then HELLOs on the same connection, all at once: the
 * refusal ends the handshake, so none of them may be answered (each
 * answer would be a fresh challenge and its keys). The lane is dropped.
 */
static int ap_hello_again(struct aprobe *p)
{
	struct tern_wire_hello h;
	struct alane al;
	unsigned int i;
	int res;

	res = ap_challenge(p, &al);
	if (res != AP_PASS)
		return res;
	al_prove(&al, &p->id->keys);
	al.auth.proof[0] ^= 1;
	al_send_auth(&al);
	for (i = 0; i < 4; i++) {
		auth_hello_fill(&h, p->id->identity);
		al_send(&al, TERN_WIRE_HELLO, &h, sizeof(h), NULL);
	}
	res = ap_dropped_as(p, &al, false, true);
	al_close(&al);
	return res;
}

/* The connector's side of the frame types: an AUTH_ACK instead of AUTH. */
static int ap_auth_ack(struct aprobe *p)
{
	struct alane al;
	int res;

	res = ap_challenge(p, &al);
	if (res != AP_PASS)
		return res;
	al_prove(&al, &p->id->keys);
	al_send(&al, TERN_WIRE_AUTH_ACK, &al.auth, sizeof(al.auth), NULL);
	res = ap_dropped(p, &al, false);
	al_close(&al);
	return res;
}

/* ---- integrity (TERN_FEAT_INTEGRITY) ---- */

/*
 * The lane's MAC keys, derived here as protocol.rst says: L =
 * HMAC(K_traffic, T | host proof | target proof), then one expansion a
 * direction. Both directions signed from now on, from frame 0.
 */
static void al_sign(struct alane *al, const struct auth_keys *k)
{
	u8 l[SHA256_LEN];
	struct hmac m;

	hmac_init(&m, k->traffic, sizeof(k->traffic));
	hmac_update(&m, &al->hello, sizeof(al->hello));
	hmac_update(&m, &al->ack, sizeof(al->ack));
	hmac_update(&m, al->auth.proof, sizeof(al->auth.proof));
	hmac_update(&m, al->target_proof, sizeof(al->target_proof));
	hmac_final(&m, l);
	auth_expand(l, "tern-v2 c2a integrity", "", al->tx.key);
	auth_expand(l, "tern-v2 a2c integrity", "", al->rx.key);
	memset(l, 0, sizeof(l));
	al->tx.on = true;
	al->rx.on = true;
}

/* A lane of a new session, authenticated and signed both ways. */
static int ap_signed_lane(struct aprobe *p, struct alane *al)
{
	struct tern_wire_hello h;
	char why[160];

	if (al_connect(p->peer, al))
		return ap_say(p, AP_FAIL, al, "no connection");
	auth_hello_fill(&h, p->id->identity);
	h.features |= htole32(TERN_FEAT_INTEGRITY);
	if (al_handshake(al, &p->id->keys, &h, why, sizeof(why)))
		return ap_say(p, AP_FAIL, al, "%s", why);
	if (!(le32toh(al->ack.features) & TERN_FEAT_INTEGRITY))
		return ap_say(p, AP_FAIL, al, "the target does not sign");
	al_sign(al, &p->id->keys);
	return AP_PASS;
}

/* Two PINGs each answered by a PONG whose three tags check out here. */
static int ap_signed_good(struct aprobe *p)
{
	struct alane al;
	int res = ap_signed_lane(p, &al);

	if (res == AP_PASS && (al_ping(&al) || al_ping(&al)))
		res = ap_say(p, AP_FAIL, &al, "no PONG with the right tags");
	else if (res == AP_PASS)
		res = ap_say(p, AP_PASS, &al,
			     "frames 0 and 1 each way, every tag right");
	al_close(&al);
	return res;
}

/* After what was sent, the acceptor closes without a word. */
static int ap_signed_dropped(struct aprobe *p, struct alane *al)
{
	if (al_recv(al, 3000) != GOT_CLOSED)
		return ap_say(p, AP_FAIL, al, "not dropped");
	return ap_say(p, AP_PASS, al, "dropped");
}

/* A PING whose @part tag ('H', 'F', 'D') is damaged, or (0) unsigned. */
static int ap_signed_bad(struct aprobe *p, char part)
{
	struct alane al;
	int res = ap_signed_lane(p, &al);

	if (res == AP_PASS) {
		al.spoil = part;
		al.tx.on = part != 0;
		al_send(&al, TERN_WIRE_PING, NULL, 0, NULL);
		res = ap_signed_dropped(p, &al);
	}
	al_close(&al);
	return res;
}

static int ap_signed_bad_hdr(struct aprobe *p)
{
	return ap_signed_bad(p, 'H');
}

static int ap_signed_bad_front(struct aprobe *p)
{
	return ap_signed_bad(p, 'F');
}

static int ap_signed_bad_data(struct aprobe *p)
{
	return ap_signed_bad(p, 'D');
}

static int ap_signed_unsigned(struct aprobe *p)
{
	return ap_signed_bad(p, 0);
}

/* A signed PING answered, then the same bytes again. */
static int ap_signed_replay(struct aprobe *p)
{
	u8 raw[HDR_LEN + TERN_WIRE_TAG_LEN];
	struct alane al;
	int res = ap_signed_lane(p, &al);

	if (res == AP_PASS) {
		al_send(&al, TERN_WIRE_PING, NULL, 0, raw);
		if (!al_got(&al, al_recv(&al, 3000), TERN_WIRE_PONG))
			res = ap_say(p, AP_FAIL, &al, "no PONG");
		else if (al_send_raw(&al, TERN_WIRE_PING, raw, sizeof(raw)))
			res = ap_say(p, AP_FAIL, &al, "not sent");
		else
			res = ap_signed_dropped(p, &al);
	}
	al_close(&al);
	return res;
}

/* Integrity without authentication, or with the data CRC or encryption. */
static int ap_signed_refused(struct aprobe *p)
{
	static const u32 bad[] = {
		TERN_FEAT_INTEGRITY,
		TERN_FEAT_AUTH | TERN_FEAT_INTEGRITY | TERN_FEAT_DATA_CRC,
		TERN_FEAT_AUTH | TERN_FEAT_INTEGRITY | TERN_FEAT_ENCRYPT,
	};
	struct tern_wire_hello h;
	struct alane al;
	unsigned int i;
	int res = AP_PASS;

	for (i = 0; i < ARRAY_SIZE(bad) && res == AP_PASS; i++) {
		if (al_connect(p->peer, &al))
			return ap_say(p, AP_FAIL, &al, "no connection");
		auth_hello_fill(&h, bad[i] & TERN_FEAT_AUTH ?
				p->id->identity : NULL);
		h.features = htole32(bad[i]);
		res = ap_refused(p, &al, al_hello(&al, &h), false, -EINVAL,
				 "integrity with the wrong company");
		al_close(&al);
	}
	return res;
}

/* The good session lived through all of it. */
static int ap_survived(struct aprobe *p)
{
	if (!p->have_good)
		return ap_say(p, AP_SKIP, NULL, "no good session");
	if (p->lost_after)
		return ap_say(p, AP_FAIL, NULL, "its lane died during '%s'",
			      p->lost_after);
	if (al_ping(&p->good))
		return ap_say(p, AP_FAIL, &p->good, "no PONG");
	return ap_say(p, AP_PASS, NULL, "PING answered");
}

static const struct {
	const char	*name;
	int		(*run)(struct aprobe *p);
} ap_cases[] = {
	{ "crypto known answers", ap_selftest },
	{ "good: the right key, the target proves it, PING answered", ap_good },
	{ "replay: the good HELLO and AUTH again -> AUTH_ACK -EKEYREJECTED", ap_replay },
	{ "wrong key -> AUTH_ACK -EKEYREJECTED", ap_wrong_key },
	{ "unknown identity -> HELLO_ACK -ENOKEY", ap_unknown },
	{ "malformed identity -> HELLO_ACK -EINVAL", ap_bad_identity },
	{ "nonce or identity without TERN_FEAT_AUTH -> HELLO_ACK -EINVAL", ap_plain_fields },
	{ "hijack: the good session as another identity -> AUTH_ACK -EPERM", ap_hijack_auth },
	{ "hijack: the good session unauthenticated -> HELLO_ACK -EPERM/-ENOKEY", ap_hijack_plain },
	{ "downgrade: a plain HELLO -> -ENOKEY with -M, else let in", ap_plain },
	{ "AUTH as the first frame -> dropped", ap_auth_first },
	{ "AUTH before the HELLO_ACK -> dropped, never AUTH_ACK 0", ap_auth_early },
	{ "AUTH with reserved set -> dropped", ap_auth_reserved1 },
	{ "AUTH with status set -> dropped", ap_auth_status },
	{ "two AUTHs, wrong then right -> dropped, never AUTH_ACK 0", ap_auth_wrong_right },
	{ "two AUTHs, right twice -> one AUTH_ACK, dropped", ap_auth_right_twice },
	{ "AUTH_ACK from the connector -> dropped", ap_auth_ack },
	{ "HELLOs after a wrong proof -> none answered, dropped", ap_hello_again },
	{ "signed: PINGs answered, every tag of the PONGs right", ap_signed_good },
	{ "signed: a wrong header tag -> dropped", ap_signed_bad_hdr },
	{ "signed: a wrong front tag -> dropped", ap_signed_bad_front },
	{ "signed: a wrong data tag -> dropped", ap_signed_bad_data },
	{ "signed: a frame without tags -> dropped", ap_signed_unsigned },
	{ "signed: a frame replayed -> dropped", ap_signed_replay },
	{ "signed: without auth, with crc or encryption -> HELLO_ACK -EINVAL", ap_signed_refused },
	{ "the good session survived all of it", ap_survived },
};

#define AP_COUNT	ARRAY_SIZE(ap_cases)

/*
 * -A: the cases against an acceptor, a kselftest line each. 0 if all
 * passed or were skipped.
 */
static int auth_probe(const struct peer *peer, const struct auth_id *id,
		      const struct auth_id *id2, bool require)
{
	unsigned int i, pass = 0, fail = 0, skip = 0;
	struct aprobe *p = calloc(1, sizeof(*p));
	int res;

	if (!p)
		return 1;
	p->peer = peer;
	p->id = id;
	p->id2 = id2;
	p->require = require;
	p->good.fd = -1;
	printf("TAP version 13\n1..%zu\n", AP_COUNT);
	for (i = 0; i < AP_COUNT; i++) {
		p->why[0] = 0;
		res = ap_cases[i].run(p);
		if (p->why[0])
			printf("# %s\n", p->why);
		if (res == AP_SKIP) {
			skip++;
			printf("ok %u auth: %s # SKIP\n", i + 1, ap_cases[i].name);
		} else if (res == AP_PASS) {
			pass++;
			printf("ok %u auth: %s\n", i + 1, ap_cases[i].name);
		} else {
			fail++;
			printf("not ok %u auth: %s\n", i + 1, ap_cases[i].name);
		}
		fflush(stdout);
		/* the good session must live through every case: ask it */
		p->good.log[0] = 0;
		if (p->have_good && !p->lost_after && i + 1 < AP_COUNT &&
		    ap_cases[i].run != ap_good && al_ping(&p->good))
			p->lost_after = ap_cases[i].name;
	}
	printf("# Totals: pass:%u fail:%u xfail:0 xpass:0 skip:%u error:0\n",
	       pass, fail, skip);
	al_close(&p->good);
	free(p);
	return fail ? 1 : 0;
}

/*
 * Flood modes (-F MODE): resource exhaustion instead of malformed frames.
 * Every connection is well formed; the listener must hold its caps:
 *
 *  handshakes  -N connections that never say HELLO; counts those the
 *              listener closes at once (beyond tern.max_handshakes)
 *  sessions    -N connections, each a HELLO for a new session
 *  lanes       -N connections, sessions of -L lanes each (one lane per
 *              connection, indexes 0..L-1)
 *  noread      -N sessions, each sends -Q FROM_RESPONDER requests of -S
 *              bytes (echo front with the verify flag, so the echo fills
 *              fresh pages) and never reads a byte; PINGs keep the lane
 *              from a keepalive timeout; a small receive
 *              buffer (-R RCVBUF)
 *
 * The accepted connections are held open -H seconds (PINGs every second)
 * -K KEEPALIVE_MS proposes that PING interval in every HELLO. -B ADDR
 * connects from that local address (say 127.0.0.2: one more peer for
 * the listener's per-address caps). The
 * accepted connections are held open -H seconds (PINGs every second)
 * after "# flood ... ready" is printed, so a test can look at the
 * listener's counters and run a good client meanwhile. A send that fails
 * while holding is reported as "dropped" with the time since the flood.
 */
static void die_usage(void);

#define FLOOD_TB_MAGIC	0x48434e42	/* net/bench/bench.h: TB_FRONT_MAGIC */
#define FLOOD_TB_VERIFY	1U

struct flood_tb_front {		/* net/bench/bench.h: struct tb_front */
	__le32	magic;
	__le32	flags;
	__le64	seed;
	__le32	len;
	__le32	slot;
	__le64	reserved;
};

struct flood_conn {
	int fd;
	u32 seq;
	bool dropped;
};

struct flood_opts {
	const char *mode;
	unsigned long conns;
	unsigned int lanes;
	unsigned int reqs;
	u32 size;
	unsigned int hold;
	unsigned int keepalive_ms;
	int rcvbuf;
	bool bind;		/* -B: connect from src */
	struct peer src;
};

static void raise_nofile(unsigned long want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur >= want + 64)
		return;
	rl.rlim_cur = want + 64;
	if (rl.rlim_max < rl.rlim_cur)
		rl.rlim_max = rl.rlim_cur;
	setrlimit(RLIMIT_NOFILE, &rl);
}

/* HELLO from @h (seq 1); 0 and the status if a HELLO_ACK came, else -1. */
static int flood_hello(int fd, struct tern_wire_hello *h, int *status)
{
	struct tern_wire_hello ack;
	struct tern_wire_hdr ah;

	frame_init(&fr, TERN_WIRE_HELLO, 1);
	memcpy(fr.body, h, sizeof(*h));
	fr.body_len = sizeof(*h);
	fr.hdr.front_len = htole32(sizeof(*h));
	frame_seal(&fr);
	if (send_frame(fd, &fr, HDR_LEN, fr.body_len))
		return -1;
	if (recv_all(fd, &ah, sizeof(ah)) ||
	    ah.type != TERN_WIRE_HELLO_ACK ||
	    le32toh(ah.front_len) != sizeof(ack) ||
	    recv_all(fd, &ack, sizeof(ack)))
		return -1;
	*status = (int32_t)le32toh(ack.status);
	return 0;
}

static int flood_ping(struct flood_conn *c)
{
	frame_init(&fr, TERN_WIRE_PING, ++c->seq);
	frame_seal(&fr);
	return send_all(c->fd, &fr.hdr, HDR_LEN);
}

static int flood_noread_requests(struct flood_conn *c,
				 const struct flood_opts *o)
{
	struct flood_tb_front tf = {
		.magic = htole32(FLOOD_TB_MAGIC),
		.flags = htole32(FLOOD_TB_VERIFY),
		.len = htole32(o->size),
	};
	unsigned int i;

	for (i = 0; i < o->reqs; i++) {
		frame_init(&fr, TERN_WIRE_REQUEST, ++c->seq);
		fr.hdr.tid = htole64(i + 1);
		fr.hdr.ack = htole32(1);
		fr.hdr.flags = htole16(TERN_WIRE_F_DATA_FROM_RESPONDER);
		fr.hdr.buf_len = htole32(o->size);
		fr.hdr.front_len = htole32(sizeof(tf));
		tf.seed = htole64(i);
		memcpy(fr.body, &tf, sizeof(tf));
		fr.body_len = sizeof(tf);
		frame_seal(&fr);
		if (send_frame(c->fd, &fr, HDR_LEN, fr.body_len))
			return -1;
	}
	return 0;
}

static int flood_run(const struct peer *peer, const struct flood_opts *o)
{
	unsigned long i, accepted = 0, refused = 0, closed = 0, failed = 0;
	unsigned long dropped = 0;
	int last_status = 0, status, one = 1;
	struct tern_wire_hello h;
	struct flood_conn *conns;
	double t0, first_drop = -1;
	bool noread = !strcmp(o->mode, "noread");
	bool lanes = !strcmp(o->mode, "lanes");
	bool quiet = !strcmp(o->mode, "handshakes");
	unsigned int s;

	if (!noread && !lanes && !quiet && strcmp(o->mode, "sessions"))
		die_usage();
	raise_nofile(o->conns);
	conns = calloc(o->conns, sizeof(*conns));
	if (!conns)
		return 2;
	hello_fill(&h);
	for (i = 0; i < o->conns; i++) {
		struct flood_conn *c = &conns[i];

		c->fd = socket(peer->addr.ss_family, SOCK_STREAM, 0);
		if (c->fd < 0) {
			failed++;
			continue;
		}
		if (o->rcvbuf)
			setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &o->rcvbuf,
				   sizeof(o->rcvbuf));
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if ((o->bind &&
		     bind(c->fd, (const struct sockaddr *)&o->src.addr,
			  o->src.addrlen)) ||
		    connect(c->fd, (const struct sockaddr *)&peer->addr,
			    peer->addrlen)) {
			failed++;
			close(c->fd);
			c->fd = -1;
			continue;
		}
		{
			struct timeval tv = { .tv_sec = 5 };

			setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
				   sizeof(tv));
			setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv,
				   sizeof(tv));
		}
		if (quiet)
			continue;
		if (!lanes || i % o->lanes == 0)
			hello_fill(&h);
		if (lanes) {
			h.nr_lanes = htole16(o->lanes);
			h.lane_idx = htole16(i % o->lanes);
		}
		if (o->keepalive_ms)
			h.keepalive_ms = htole32(o->keepalive_ms);
		if (noread) {
			h.max_data = htole32(TERN_WIRE_MAX_DATA);
			h.queue_depth = htole16(TERN_WIRE_MAX_QDEPTH);
		}
		if (flood_hello(c->fd, &h, &status)) {
			closed++;
		} else if (status) {
			refused++;
			last_status = status;
		} else {
			accepted++;
			c->seq = 1;
			if (!noread || !flood_noread_requests(c, o))
				continue;
			failed++;
		}
		close(c->fd);
		c->fd = -1;
	}
	if (quiet) {
		/* refused ones are closed at once; the rest wait in handshake */
		for (s = 0; s < 30; s++) {
			usleep(100 * 1000);
			for (i = 0; i < o->conns; i++) {
				char b;

				if (conns[i].fd < 0 ||
				    (recv(conns[i].fd, &b, 1, MSG_DONTWAIT) &&
				     errno != ECONNRESET))
					continue;
				closed++;
				close(conns[i].fd);
				conns[i].fd = -1;
			}
		}
		for (i = 0; i < o->conns; i++)
			accepted += conns[i].fd >= 0;
	}
	printf("# flood %s connections %lu accepted %lu refused %lu ",
	       o->mode, o->conns, accepted, refused);
	printf("status %d closed %lu failed %lu ready\n", last_status, closed,
	       failed);
	fflush(stdout);

	t0 = now_ms();
	for (s = 0; s < o->hold; s++) {
		sleep(1);
		for (i = 0; i < o->conns && !quiet; i++) {
			struct flood_conn *c = &conns[i];

			if (c->fd < 0 || c->dropped || !flood_ping(c))
				continue;
			c->dropped = true;
			dropped++;
			if (first_drop < 0)
				first_drop = now_ms() - t0;
		}
	}
	for (i = 0; i < o->conns; i++)
		if (conns[i].fd >= 0)
			close(conns[i].fd);
	free(conns);
	printf("# flood %s held %u s dropped %lu first-drop-ms %.0f\n",
	       o->mode, o->hold, dropped, first_drop);
	return 0;
}

static int parse_peer(const char *host, const char *port, struct peer *peer)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *res;
	int err;

	err = getaddrinfo(host, port, &hints, &res);
	if (err) {
		fprintf(stderr, "tern_fuzz: bad address %s port %s: %s\n",
			host, port, gai_strerror(err));
		return -1;
	}
	memcpy(&peer->addr, res->ai_addr, res->ai_addrlen);
	peer->addrlen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* ---- hostile target (-T CASE -l PORT) ---- */

/*
 * A tern acceptor that misbehaves, for the client side of the kernel
 * (tern_blk, tern_bench). It listens on ADDR:PORT, answers HELLOs as a
 * tern_target port would and serves a 64 MiB export: READs return
 * ht_pattern_byte() of their device offset, WRITEs are accepted and
 * dropped, WATCHes are held. CASE says how it misbehaves; a case with
 * "=ARG" takes a number or a name. Each connection is served by a child
 * process, which dies with the listener. -N COUNT confines the
 * misbehaviour to the first COUNT connections, so that a request resent
 * after a lane reset may be served well. The I/O cases only hit READs at
 * or past HT_HOSTILE_SECTOR, far from what a partition scan reads.
 * "-T check=SECTOR" does not listen: it checks that stdin holds the
 * export's data from SECTOR on.
 *
 * Authentication: with -k KEYFILE (for the identity -i, or for any) a
 * HELLO asking to authenticate is challenged and its AUTH checked as a
 * tern_target port would, in every case; without, it is refused with
 * -ENOKEY. Three cases are about it: "noauth" answers such a HELLO
 * without TERN_FEAT_AUTH and nonce (a downgrade), "badproof" challenges
 * it and answers its AUTH with status 0 and a random proof (a target
 * without the key), both without needing a key; the client must refuse
 * either, and if it sends anything after, "ACCEPTED" is logged.
 * "goodauth" (needs -k) misbehaves in nothing and, as a port that
 * requires authentication, refuses a plain HELLO with -ENOKEY.
 */
#define HT_CAPACITY		(64ULL << 11)	/* sectors: 64 MiB */
#define HT_MAX_TRANSFER		(32U << 10)
#define HT_MAX_DATA		(4U << 20)
#define HT_MAX_QDEPTH		1024
#define HT_HOSTILE_SECTOR	2048
#define HT_JUNK			0xee

enum ht_case {
	HT_ACK_STATUS,		/* =N: HELLO_ACK status N, then close */
	HT_ACK_LANES,		/* =N: HELLO_ACK nr_lanes N */
	HT_ACK_QDEPTH,		/* =N: queue_depth N */
	HT_ACK_MAX_DATA,	/* =N: max_data N */
	HT_ACK_MAX_FRONT,	/* =N: max_front N */
	HT_ACK_FEATURES,	/* =N: features N */
	HT_ACK_SESSION,		/* another session id */
	HT_ACK_COOKIE,		/* another cookie */
	HT_ACK_LANE_IDX,	/* another lane index */
	HT_OPEN_STATUS,		/* =N: OPEN answered with status N */
	HT_GEOM,		/* =WHAT: OPEN answered with bad geometry */
	HT_INFO_GEOM,		/* =WHAT: INFO answered with bad geometry */
	HT_TID_ZERO,		/* a READ reply to tid 0 first */
	HT_TID_FUTURE,		/* a READ reply to a tid not yet sent first */
	HT_TID_SHARD,		/* ... to a tid of a shard the session lacks */
	HT_TID_DUP,		/* the READ reply, then again with junk */
	HT_OTHER_LANE,		/* the READ answered on another connection */
	HT_READ_SHORT,		/* half the READ data */
	HT_READ_LONG,		/* 4 KiB more READ data than the buffer */
	HT_READ_FRONT,		/* a front on a READ reply */
	HT_FRONT_BIG,		/* a front above the negotiated max_front */
	HT_READ_STATUS,		/* =N: the READ answered with status N */
	HT_TRICKLE_READ,	/* READ data one byte every 200-500 ms */
	HT_TRICKLE_OPEN,	/* the OPEN reply's front a byte a second,
				 * past the client's 30 s OPEN timeout
				 */
	HT_WATCH_STORM,		/* every WATCH answered at once, grown */
	HT_BAD_CRC_READ,	/* READ replies with a wrong data CRC */
	HT_BAD_CRC_OPEN,	/* OPEN replies with a wrong data CRC */
	HT_SLOWLORIS,		/* read the HELLO, never answer */
	HT_HALF_ACK,		/* half a HELLO_ACK, then nothing */
	HT_ACCEPT_CLOSE,	/* close every connection at once */
	HT_NOAUTH,		/* asked to authenticate: a plain HELLO_ACK */
	HT_BADPROOF,		/* a challenge, then AUTH_ACK 0, a random proof */
	HT_GOODAUTH,		/* none: authenticates with -k, requires it */
	HT_CHECK,		/* =SECTOR: check stdin, do not listen */
	HT_CASE_COUNT
};

static const char *const ht_case_names[HT_CASE_COUNT] = {
	"ack-status", "ack-lanes", "ack-qdepth", "ack-max-data",
	"ack-max-front", "ack-features", "ack-session", "ack-cookie",
	"ack-lane-idx", "open-status", "geom", "info-geom", "tid-zero",
	"tid-future", "tid-shard", "tid-dup", "other-lane", "read-short",
	"read-long", "read-front", "front-big", "read-status", "trickle-read",
	"trickle-open", "watch-storm",
	"bad-crc-read", "bad-crc-open", "slowloris", "half-ack",
	"accept-close", "noauth", "badproof", "goodauth", "check",
};

/* Geometry faults of HT_GEOM and HT_INFO_GEOM. */
enum ht_geom {
	HT_G_CAPACITY_0,
	HT_G_CAPACITY_HUGE,
	HT_G_CAPACITY_UNALIGNED,
	HT_G_LBS_NPOW2,
	HT_G_LBS_BIG,
	HT_G_DISCARD_GRAN,
	HT_G_MAX_TRANSFER_SMALL,
	HT_G_MAX_SEGMENTS_0,
	HT_G_FLAGS_UNKNOWN,
	HT_G_RESERVED,
	HT_G_SHORT_FRONT,
	HT_G_COUNT
};

static const char *const ht_geom_names[HT_G_COUNT] = {
	"capacity-0", "capacity-huge", "capacity-unaligned", "lbs-npow2",
	"lbs-big", "discard-gran", "max-transfer-small", "max-segments-0",
	"flags-unknown", "reserved", "short-front",
};

static struct {
	enum ht_case	kase;
	long long	arg;
	unsigned long	bad_conns;	/* misbehave on these first; 0: all */
	u64		incarnation;
	bool		have_key;	/* -k: connectors may authenticate */
	const char	*identity;	/* -i: only this one; NULL: any */
	u8		secret[AUTH_KEY_LEN];
} ht;

/*
 * HT_OTHER_LANE: a READ one connection's process leaves here, for the
 * process of another connection (of the same session: a lane of the
 * client's) to answer on its own. Shared memory, made before the first
 * fork; state 0 empty, 1 being filled, 2 full, 3 being taken.
 */
struct ht_mailbox {
	int		state;
	unsigned int	from;		/* the connection that left it */
	u64		tid;
	u64		sector;
	u32		len;
};

static struct ht_mailbox *ht_mbox;

/* One accepted connection, in its own process. */
struct ht_conn {
	int			fd;
	unsigned int		nr;	/* accepted as the nr-th, from 1 */
	bool			bad;	/* misbehave on this one */
	bool			crc;	/* data CRC negotiated */
	bool			fake;	/* let in without proving the key */
	u32			tx_seq;
	u32			rx_seq;
	u32			max_front;
	u64			handle;
	unsigned long		storm;	/* WATCHes answered */
	struct tern_wire_hdr	hdr;	/* the last frame received */
	u32			front_len;
	u8			front[TERN_WIRE_MAX_FRONT];
};

static void ht_log(const struct ht_conn *c, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "# hostile: conn %u: ", c->nr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Byte @b of the export: words of a multiplicative sequence. */
static u8 ht_pattern_byte(u64 b)
{
	u64 w = (b / 8 + 1) * 0x9e3779b97f4a7c15ULL;

	return w >> (8 * (b % 8));
}

/*
 * The next frame, within @ms milliseconds (-1: no limit): header in
 * c->hdr, front in c->front, data read and dropped. 1 on timeout, -1 on
 * a closed connection or a frame we cannot follow.
 */
static int ht_recv(struct ht_conn *c, int ms)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	u8 buf[4096];
	u32 data, n;

	if (ms >= 0 && poll(&pfd, 1, ms) == 0)
		return 1;
	if (recv_all(c->fd, &c->hdr, HDR_LEN))
		return -1;
	if (le32toh(c->hdr.magic) != TERN_WIRE_MAGIC ||
	    crc32c(&c->hdr, HDR_CRC_LEN) != le32toh(c->hdr.hdr_crc)) {
		ht_log(c, "bad frame header from the client");
		return -1;
	}
	c->rx_seq = le32toh(c->hdr.seq);
	c->front_len = le32toh(c->hdr.front_len);
	data = le32toh(c->hdr.data_len);
	if (c->front_len > sizeof(c->front) ||
	    recv_all(c->fd, c->front, c->front_len))
		return -1;
	while (data) {
		n = data < sizeof(buf) ? data : sizeof(buf);
		if (recv_all(c->fd, buf, n))
			return -1;
		data -= n;
	}
	return 0;
}

/* Start a frame in fr: the next seq, our ack, an empty body. */
static void ht_begin(struct ht_conn *c, u8 type, u64 tid, int status)
{
	frame_init(&fr, type, ++c->tx_seq);
	fr.hdr.tid = htole64(tid);
	fr.hdr.ack = htole32(c->rx_seq);
	fr.hdr.status = htole32((u32)status);
}

static void ht_put(const void *p, size_t len)
{
	memcpy(fr.body + fr.body_len, p, len);
	fr.body_len += len;
}

static void ht_put_data(u64 sector, u32 len, bool junk)
{
	u64 b = sector * 512;
	u32 i;

	for (i = 0; i < len; i++)
		fr.body[fr.body_len + i] = junk ? HT_JUNK : ht_pattern_byte(b + i);
	fr.body_len += len;
}

/* Lengths, data CRC of a REPLY when negotiated, header CRC. */
static void ht_seal(struct ht_conn *c, u32 front_len)
{
	fr.hdr.front_len = htole32(front_len);
	fr.hdr.data_len = htole32(fr.body_len - front_len);
	if (c->crc && fr.hdr.type == TERN_WIRE_REPLY) {
		fr.hdr.flags = htole16(TERN_WIRE_F_DATA_CRC);
		fr.hdr.data_crc = htole32(crc32c(fr.body, fr.body_len));
	}
	frame_seal(&fr);
}

static int ht_send(struct ht_conn *c, u32 front_len)
{
	ht_seal(c, front_len);
	return send_frame(c->fd, &fr, HDR_LEN, fr.body_len);
}

/*
 * The frame in fr: header at once, then its body a byte at a time, one
 * every @min_ms to @min_ms + @spread_ms.
 */
static int ht_trickle(struct ht_conn *c, unsigned int min_ms,
		      unsigned int spread_ms)
{
	size_t i;

	ht_log(c, "trickling a %zu-byte body", fr.body_len);
	if (send_frame(c->fd, &fr, HDR_LEN, 0))
		return -1;
	for (i = 0; i < fr.body_len; i++) {
		usleep((min_ms + rnd_below(spread_ms + 1)) * 1000);
		if (send_all(c->fd, fr.body + i, 1)) {
			ht_log(c, "trickle cut after %zu bytes", i);
			return -1;
		}
	}
	return 0;
}

/* Sit on the connection until the client closes it. */
static int ht_idle(struct ht_conn *c)
{
	char buf[4096];

	while (recv(c->fd, buf, sizeof(buf), 0) > 0)
		;
	return 0;
}

/*
 * What an acceptor with our key (-k: for -i, or for any identity) says to
 * a HELLO before it misbehaves: 0; -EINVAL for a nonce or identity
 * without TERN_FEAT_AUTH or a malformed identity; -ENOKEY for an identity
 * it has no key for, or for a plain HELLO if it requires authentication
 * (goodauth). noauth and badproof need no key to lie.
 */
static int ht_auth_check(const struct ht_conn *c,
			 const struct tern_wire_hello *h)
{
	const char *id = h->identity;
	size_t len = strnlen(id, sizeof(h->identity));

	if (!(le32toh(h->features) & TERN_FEAT_AUTH)) {
		if (!all_zero(h->nonce, sizeof(h->nonce)) ||
		    !all_zero(id, sizeof(h->identity)))
			return -EINVAL;
		return ht.kase == HT_GOODAUTH ? -ENOKEY : 0;
	}
	if (len == sizeof(h->identity) || !identity_valid(id) ||
	    !all_zero(id + len, sizeof(h->identity) - len))
		return -EINVAL;
	if (c->bad && (ht.kase == HT_NOAUTH || ht.kase == HT_BADPROOF))
		return 0;
	if (!ht.have_key || (ht.identity && strcmp(id, ht.identity))) {
		ht_log(c, "no key for '%s'", id);
		return -ENOKEY;
	}
	return 0;
}

/*
 * Our challenge is out: the connector's AUTH, and our AUTH_ACK. With the
 * key, a wrong proof is refused and a right one answered with our proof;
 * badproof answers 0 with a random proof, as a target without the key
 * would have to. 0 if the lane is in, else -1 (close).
 */
static int ht_authenticate(struct ht_conn *c, const struct tern_wire_hello *h,
			   const struct tern_wire_hello *ack)
{
	u8 host[SHA256_LEN], target[SHA256_LEN];
	struct tern_wire_auth a, reply;
	struct auth_keys k;

	if (ht_recv(c, 10000) || c->hdr.type != TERN_WIRE_AUTH ||
	    c->front_len != sizeof(a) || c->hdr.data_len) {
		ht_log(c, "no AUTH after our challenge");
		return -1;
	}
	memcpy(&a, c->front, sizeof(a));
	if (a.status || a.reserved) {
		ht_log(c, "reserved fields set in AUTH");
		return -1;
	}
	memset(&reply, 0, sizeof(reply));
	if (c->bad && ht.kase == HT_BADPROOF) {
		random_bytes(reply.proof, sizeof(reply.proof));
		ht_log(c, "AUTH of '%.63s' read: AUTH_ACK 0 with a random proof",
		       h->identity);
		c->fake = true;
	} else if (!ht.have_key) {	/* ack-features made us challenge */
		reply.status = htole32((u32)-ENOKEY);
	} else {
		auth_derive(ht.secret, h->identity, &k);
		auth_proofs(&k, h, ack, host, target);
		if (memcmp(a.proof, host, sizeof(host))) {
			reply.status = htole32((u32)-EKEYREJECTED);
			ht_log(c, "'%.63s' failed to prove the key", h->identity);
		} else {
			memcpy(reply.proof, target, sizeof(target));
			ht_log(c, "'%.63s' authenticated; our proof sent",
			       h->identity);
		}
	}
	ht_begin(c, TERN_WIRE_AUTH_ACK, 0, 0);
	ht_put(&reply, sizeof(reply));
	if (ht_send(c, sizeof(reply)))
		return -1;
	if (reply.status) {
		usleep(200 * 1000);
		return -1;
	}
	return 0;
}

static int ht_handshake(struct ht_conn *c)
{
	struct tern_wire_hello h, ack;
	u32 max_data, max_front;
	int refuse;
	u16 qd;

	if (ht_recv(c, 10000) || c->hdr.type != TERN_WIRE_HELLO ||
	    c->front_len != sizeof(h)) {
		ht_log(c, "no HELLO");
		return -1;
	}
	memcpy(&h, c->front, sizeof(h));
	if (c->bad && ht.kase == HT_SLOWLORIS) {
		ht_log(c, "HELLO read, never answered");
		return ht_idle(c) ?: -1;
	}
	refuse = ht_auth_check(c, &h);
	if (refuse) {
		/* as a tern acceptor refuses: our ids and the status only */
		memset(&ack, 0, sizeof(ack));
		ack.session_id = h.session_id;
		ack.cookie = h.cookie;
		ack.lane_idx = h.lane_idx;
		ack.incarnation = htole64(ht.incarnation);
		ack.status = htole32((u32)refuse);
		goto send;
	}
	ack = h;
	memset(ack.nonce, 0, sizeof(ack.nonce));
	memset(ack.identity, 0, sizeof(ack.identity));
	ack.incarnation = htole64(ht.incarnation);
	ack.features = h.features & htole32(TERN_FEAT_DATA_CRC |
					    TERN_FEAT_AUTH);
	max_data = le32toh(h.max_data);
	ack.max_data = htole32(max_data < HT_MAX_DATA ? max_data : HT_MAX_DATA);
	max_front = le32toh(h.max_front);
	if (max_front > TERN_WIRE_MAX_FRONT)
		max_front = TERN_WIRE_MAX_FRONT;
	ack.max_front = htole32(max_front);
	qd = le16toh(h.queue_depth);
	ack.queue_depth = htole16(qd < HT_MAX_QDEPTH ? qd : HT_MAX_QDEPTH);
	ack.reserved0 = 0;
	ack.status = 0;
	ack.reserved1 = 0;
	if (c->bad) {
		switch (ht.kase) {
		case HT_ACK_STATUS:
			ack.status = htole32((u32)ht.arg);
			break;
		case HT_ACK_LANES:
			ack.nr_lanes = htole16(ht.arg);
			break;
		case HT_ACK_QDEPTH:
			ack.queue_depth = htole16(ht.arg);
			break;
		case HT_ACK_MAX_DATA:
			ack.max_data = htole32(ht.arg);
			break;
		case HT_ACK_MAX_FRONT:
			ack.max_front = htole32(ht.arg);
			break;
		case HT_ACK_FEATURES:
			ack.features = htole32(ht.arg);
			break;
		case HT_ACK_SESSION:
			ack.session_id ^= htole64(1);
			break;
		case HT_ACK_COOKIE:
			ack.cookie ^= htole64(1);
			break;
		case HT_ACK_LANE_IDX:
			ack.lane_idx = htole16(le16toh(h.lane_idx) + 1);
			break;
		case HT_NOAUTH:
			if (!(ack.features & htole32(TERN_FEAT_AUTH)))
				break;
			ack.features &= ~htole32(TERN_FEAT_AUTH);
			ht_log(c, "'%.63s' asks to authenticate: HELLO_ACK without it",
			       h.identity);
			c->fake = true;
			break;
		default:
			break;
		}
	}
	if (ack.features & htole32(TERN_FEAT_AUTH))
		random_bytes(ack.nonce, sizeof(ack.nonce));
send:
	c->crc = le32toh(ack.features) & TERN_FEAT_DATA_CRC;
	c->max_front = le32toh(ack.max_front);
	ht_begin(c, TERN_WIRE_HELLO_ACK, 0, 0);
	ht_put(&ack, sizeof(ack));
	if (c->bad && ht.kase == HT_HALF_ACK) {
		ht_seal(c, sizeof(ack));
		ht_log(c, "half a HELLO_ACK, then nothing");
		if (send_frame(c->fd, &fr, HDR_LEN, sizeof(ack) / 2))
			return -1;
		return ht_idle(c) ?: -1;
	}
	if (ht_send(c, sizeof(ack)))
		return -1;
	ht_log(c, "ack: lanes %u/%u qd %u/%u data %u front %u feat 0x%x status %d",
	       le16toh(ack.nr_lanes), le16toh(h.nr_lanes),
	       le16toh(ack.queue_depth), le16toh(h.queue_depth),
	       le32toh(ack.max_data), le32toh(ack.max_front),
	       le32toh(ack.features), (int)le32toh(ack.status));
	if (ack.status) {
		/* as an acceptor does: refuse, then close */
		usleep(200 * 1000);
		return -1;
	}
	if (ack.features & htole32(TERN_FEAT_AUTH))
		return ht_authenticate(c, &h, &ack);
	if (c->bad && (ht.kase == HT_NOAUTH || ht.kase == HT_BADPROOF) &&
	    !c->fake)
		ht_log(c, "the HELLO did not ask to authenticate");
	return 0;
}

static void ht_info(struct ht_conn *c, struct tern_blk_info *i, u64 capacity)
{
	memset(i, 0, sizeof(*i));
	i->handle = htole64(c->handle);
	i->capacity = htole64(capacity);
	i->logical_block_size = htole32(512);
	i->physical_block_size = htole32(4096);
	i->max_transfer = htole32(HT_MAX_TRANSFER);
	i->max_segments = htole16(128);
	i->flags = htole16(TERN_BLK_INFO_WRITE_CACHE | TERN_BLK_INFO_DISCARD);
	i->max_discard_sectors = htole32(8192);
	i->discard_granularity = htole32(4096);
}

/* Spoil @i as ht.arg says; the front length to send. */
static u32 ht_geom_spoil(struct tern_blk_info *i)
{
	switch (ht.arg) {
	case HT_G_CAPACITY_0:
		i->capacity = 0;
		break;
	case HT_G_CAPACITY_HUGE:
		i->capacity = htole64(1ULL << 60);
		break;
	case HT_G_CAPACITY_UNALIGNED:
		i->logical_block_size = htole32(4096);
		i->capacity = htole64(HT_CAPACITY + 1);
		break;
	case HT_G_LBS_NPOW2:
		i->logical_block_size = htole32(1000);
		break;
	case HT_G_LBS_BIG:
		i->logical_block_size = htole32(8192);
		i->physical_block_size = htole32(8192);
		break;
	case HT_G_DISCARD_GRAN:
		i->discard_granularity = htole32(3000);
		break;
	case HT_G_MAX_TRANSFER_SMALL:
		i->max_transfer = htole32(2048);
		break;
	case HT_G_MAX_SEGMENTS_0:
		i->max_segments = 0;
		break;
	case HT_G_FLAGS_UNKNOWN:
		i->flags |= htole16(0x8000);
		break;
	case HT_G_RESERVED:
		i->reserved = htole32(1);
		break;
	case HT_G_SHORT_FRONT:
		return offsetof(struct tern_blk_info, max_discard_sectors);
	}
	return sizeof(*i);
}

/* OPEN, INFO or WATCH: a struct tern_blk_info, spoilt as the case says. */
static int ht_info_reply(struct ht_conn *c, u64 tid, u8 opcode, u64 known)
{
	bool bad_open = c->bad && opcode == TERN_BLK_OP_OPEN;
	struct tern_blk_info info;
	u32 len = sizeof(info);
	int status = 0;

	ht_info(c, &info, opcode == TERN_BLK_OP_WATCH ? known + 8 : HT_CAPACITY);
	if ((bad_open && ht.kase == HT_GEOM) ||
	    (c->bad && opcode == TERN_BLK_OP_INFO && ht.kase == HT_INFO_GEOM)) {
		len = ht_geom_spoil(&info);
		ht_log(c, "%s answered with geometry %s",
		       opcode == TERN_BLK_OP_OPEN ? "OPEN" : "INFO",
		       ht_geom_names[ht.arg]);
	}
	if (bad_open && ht.kase == HT_OPEN_STATUS) {
		status = (int)ht.arg;
		ht_log(c, "OPEN answered with status %d", status);
	}
	ht_begin(c, TERN_WIRE_REPLY, tid, status);
	ht_put(&info, len);
	if (bad_open && ht.kase == HT_TRICKLE_OPEN) {
		ht_seal(c, len);
		return ht_trickle(c, 1000, 0);
	}
	if (bad_open && ht.kase == HT_BAD_CRC_OPEN) {
		ht_seal(c, len);
		fr.hdr.data_crc ^= htole32(1);
		frame_seal(&fr);
		ht_log(c, "OPEN answered with a bad data crc%s",
		       c->crc ? "" : " (crc not negotiated)");
		return send_frame(c->fd, &fr, HDR_LEN, fr.body_len);
	}
	return ht_send(c, len);
}

static int ht_status_reply(struct ht_conn *c, u64 tid, int status)
{
	ht_begin(c, TERN_WIRE_REPLY, tid, status);
	return ht_send(c, 0);
}

/* A READ reply of @len bytes at @sector, junk or not, after @front_len. */
static int ht_data_reply(struct ht_conn *c, u64 tid, u64 sector, u32 len,
			 u32 front_len, bool junk)
{
	ht_begin(c, TERN_WIRE_REPLY, tid, 0);
	memset(fr.body, 0, front_len);
	fr.body_len = front_len;
	ht_put_data(sector, len, junk);
	return ht_send(c, front_len);
}

/*
 * The tid a junk reply names instead of @tid. Tids are opaque on the wire;
 * tern's requester keeps the shard of a request in a tid's low 6 bits
 * (Documentation/design.rst), so "not yet sent" stays in @tid's shard and
 * "no such shard" names shard 63, which a session of fewer lanes lacks.
 */
static u64 ht_junk_tid(u64 tid)
{
	switch (ht.kase) {
	case HT_TID_FUTURE:
		return tid + (1000 << 6);
	case HT_TID_SHARD:
		return tid | 63;
	default:
		return 0;
	}
}

/* Leave a READ for another connection; false if one is there already. */
static bool ht_mbox_post(const struct ht_conn *c, u64 tid, u64 sector,
			 u32 len)
{
	int empty = 0;

	if (!__atomic_compare_exchange_n(&ht_mbox->state, &empty, 1, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return false;
	ht_mbox->from = c->nr;
	ht_mbox->tid = tid;
	ht_mbox->sector = sector;
	ht_mbox->len = len;
	__atomic_store_n(&ht_mbox->state, 2, __ATOMIC_RELEASE);
	return true;
}

/* Answer a READ another connection left, if any. 0, or -1 if closed. */
static int ht_mbox_take(struct ht_conn *c)
{
	int full = 2;
	u64 tid, sector;
	u32 len;

	if (__atomic_load_n(&ht_mbox->state, __ATOMIC_ACQUIRE) != 2 ||
	    ht_mbox->from == c->nr ||
	    !__atomic_compare_exchange_n(&ht_mbox->state, &full, 3, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return 0;
	tid = ht_mbox->tid;
	sector = ht_mbox->sector;
	len = ht_mbox->len;
	ht_log(c, "READ tid %llu of conn %u: answered here",
	       (unsigned long long)tid, ht_mbox->from);
	__atomic_store_n(&ht_mbox->state, 0, __ATOMIC_RELEASE);
	return ht_data_reply(c, tid, sector, len, 0, false);
}

static int ht_read(struct ht_conn *c, u64 tid, const struct tern_blk_req *r)
{
	u64 sector = le64toh(r->offset);
	u32 len = le32toh(r->length);
	u64 junk;

	if (len != le32toh(c->hdr.buf_len) || !len || len > HT_MAX_TRANSFER)
		return ht_status_reply(c, tid, -EINVAL);
	if (!c->bad || sector < HT_HOSTILE_SECTOR)
		return ht_data_reply(c, tid, sector, len, 0, false);

	switch (ht.kase) {
	case HT_TID_ZERO:
	case HT_TID_FUTURE:
	case HT_TID_SHARD:
		junk = ht_junk_tid(tid);
		ht_log(c, "READ tid %llu: a junk reply to tid %llu first",
		       (unsigned long long)tid, (unsigned long long)junk);
		if (ht_data_reply(c, junk, sector, len, 0, true))
			return -1;
		return ht_data_reply(c, tid, sector, len, 0, false);
	case HT_TID_DUP:
		ht_log(c, "READ tid %llu: answered, then again with junk",
		       (unsigned long long)tid);
		if (ht_data_reply(c, tid, sector, len, 0, false))
			return -1;
		return ht_data_reply(c, tid, sector, len, 0, true);
	case HT_OTHER_LANE:
		if (!ht_mbox_post(c, tid, sector, len))
			break;
		ht_log(c, "READ tid %llu: left for another connection",
		       (unsigned long long)tid);
		return 0;
	case HT_READ_SHORT:
		ht_log(c, "READ tid %llu: %u of %u bytes", (unsigned long long)tid,
		       len / 2, len);
		return ht_data_reply(c, tid, sector, len / 2, 0, false);
	case HT_READ_LONG:
		ht_log(c, "READ tid %llu: %u bytes for a %u-byte buffer",
		       (unsigned long long)tid, len + 4096, len);
		return ht_data_reply(c, tid, sector, len + 4096, 0, false);
	case HT_READ_FRONT:
		ht_log(c, "READ tid %llu: with a 16-byte front",
		       (unsigned long long)tid);
		return ht_data_reply(c, tid, sector, len, 16, false);
	case HT_FRONT_BIG:
		ht_log(c, "READ tid %llu: with a %u-byte front, max_front %u",
		       (unsigned long long)tid, c->max_front + 1, c->max_front);
		return ht_data_reply(c, tid, sector, len, c->max_front + 1,
				     false);
	case HT_READ_STATUS:
		ht_log(c, "READ tid %llu: status %d", (unsigned long long)tid,
		       (int)ht.arg);
		return ht_status_reply(c, tid, (int)ht.arg);
	case HT_TRICKLE_READ:
		ht_begin(c, TERN_WIRE_REPLY, tid, 0);
		ht_put_data(sector, len, false);
		ht_seal(c, 0);
		return ht_trickle(c, 200, 300);
	case HT_BAD_CRC_READ:
		ht_begin(c, TERN_WIRE_REPLY, tid, 0);
		ht_put_data(sector, len, false);
		ht_seal(c, 0);
		fr.hdr.data_crc ^= htole32(1);
		frame_seal(&fr);
		ht_log(c, "READ tid %llu: a bad data crc%s",
		       (unsigned long long)tid,
		       c->crc ? "" : " (crc not negotiated)");
		return send_frame(c->fd, &fr, HDR_LEN, fr.body_len);
	default:
		break;
	}
	return ht_data_reply(c, tid, sector, len, 0, false);
}

static int ht_request(struct ht_conn *c)
{
	u64 tid = le64toh(c->hdr.tid);
	struct tern_blk_req r;

	if (c->front_len < sizeof(r))
		return ht_status_reply(c, tid, -EINVAL);
	memcpy(&r, c->front, sizeof(r));
	switch (r.opcode) {
	case TERN_BLK_OP_OPEN:
	case TERN_BLK_OP_INFO:
		return ht_info_reply(c, tid, r.opcode, 0);
	case TERN_BLK_OP_WATCH:
		if (!c->bad || ht.kase != HT_WATCH_STORM)
			return 0;	/* held: the capacity never changes */
		if (c->storm++ % 1000 == 0)
			ht_log(c, "%lu WATCHes answered at once", c->storm);
		return ht_info_reply(c, tid, r.opcode, le64toh(r.offset));
	case TERN_BLK_OP_READ:
		return ht_read(c, tid, &r);
	case TERN_BLK_OP_WRITE:
	case TERN_BLK_OP_FLUSH:
	case TERN_BLK_OP_DISCARD:
	case TERN_BLK_OP_WRITE_ZEROES:
	case TERN_BLK_OP_CLOSE:
		return ht_status_reply(c, tid, 0);
	default:
		return ht_status_reply(c, tid, -EINVAL);
	}
}

static int ht_conn_run(int fd, unsigned int nr)
{
	struct ht_conn *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return 1;
	c->fd = fd;
	c->nr = nr;
	c->bad = !ht.bad_conns || nr <= ht.bad_conns;
	c->handle = ((u64)rnd() << 32 | rnd()) | 1;
	if (ht_handshake(c))
		return 0;
	for (;;) {
		/* with a mailbox, a look at it every 50 ms */
		ret = ht_recv(c, ht_mbox ? 50 : -1);
		if (ret > 0) {
			if (ht_mbox_take(c))
				return 0;
			continue;
		}
		if (ret)
			return 0;
		if (c->fake) {
			ht_log(c, "ACCEPTED: the client went on without our proof (%s)",
			       ht_case_names[ht.kase]);
			c->fake = false;
		}
		switch (c->hdr.type) {
		case TERN_WIRE_PING:
			ht_begin(c, TERN_WIRE_PONG, 0, 0);
			if (ht_send(c, 0))
				return 0;
			break;
		case TERN_WIRE_REQUEST:
			if (ht_request(c))
				return 0;
			break;
		default:
			ht_log(c, "unexpected frame type %u", c->hdr.type);
			return 0;
		}
	}
}

/* -T check=SECTOR: stdin must hold the export's bytes from SECTOR on. */
static int ht_check(u64 sector)
{
	u64 b = sector * 512, n = 0;
	u8 buf[65536];
	ssize_t got, i;

	while ((got = read(0, buf, sizeof(buf))) > 0) {
		for (i = 0; i < got; i++, n++) {
			if (buf[i] != ht_pattern_byte(b + n)) {
				fprintf(stderr, "tern_fuzz: byte %llu: 0x%02x, expected 0x%02x\n",
					(unsigned long long)(b + n), buf[i],
					ht_pattern_byte(b + n));
				return 1;
			}
		}
	}
	if (got < 0 || !n) {
		fprintf(stderr, "tern_fuzz: nothing to check\n");
		return 1;
	}
	printf("# %llu bytes from sector %llu are the export's\n",
	       (unsigned long long)n, (unsigned long long)sector);
	return 0;
}

/* What "=ARG" case @c takes, or NULL. */
static const char *ht_case_arg(int c)
{
	if (c <= HT_ACK_FEATURES || c == HT_OPEN_STATUS || c == HT_READ_STATUS)
		return "N";
	if (c == HT_GEOM || c == HT_INFO_GEOM)
		return "WHAT";
	return c == HT_CHECK ? "SECTOR" : NULL;
}

static int ht_parse(const char *spec)
{
	const char *eq = strchr(spec, '=');
	size_t len = eq ? (size_t)(eq - spec) : strlen(spec);
	bool want_arg;
	char *end;
	int c, g;

	for (c = 0; c < HT_CASE_COUNT; c++)
		if (strlen(ht_case_names[c]) == len &&
		    !strncmp(spec, ht_case_names[c], len))
			break;
	if (c == HT_CASE_COUNT)
		return -1;
	ht.kase = c;
	want_arg = ht_case_arg(c);
	if (!want_arg != !eq || (eq && !eq[1]))
		return -1;
	if (!eq)
		return 0;
	if (c == HT_GEOM || c == HT_INFO_GEOM) {
		for (g = 0; g < HT_G_COUNT; g++)
			if (!strcmp(eq + 1, ht_geom_names[g]))
				break;
		ht.arg = g;
		return g < HT_G_COUNT ? 0 : -1;
	}
	errno = 0;
	ht.arg = strtoll(eq + 1, &end, 0);
	return errno || *end ? -1 : 0;
}

/*
 * -T CASE -l PORT [-a ADDR] [-N CONNS] [-s SEED] [-k KEYFILE [-i ID]]:
 * serve until killed; a child per connection, which dies with us. 2 on
 * bad arguments.
 */
static int hostile_target(const char *spec, const char *host,
			  const char *port, unsigned long bad_conns,
			  const char *keyfile, const char *identity)
{
	struct peer self;
	unsigned int nr;
	int lfd, fd, one = 1;
	pid_t pid;

	if (ht_parse(spec))
		return 2;
	crc32c_init();
	if (ht.kase == HT_CHECK)
		return ht_check(ht.arg);
	if ((identity && !keyfile) || (ht.kase == HT_GOODAUTH && !keyfile))
		return 2;
	if (keyfile) {
		if ((identity && identity_check(identity)) ||
		    key_read(keyfile, ht.secret))
			return 1;
		ht.have_key = true;
		ht.identity = identity;
	}
	if (!port || parse_peer(host ?: "127.0.0.1", port, &self))
		return 2;
	ht.bad_conns = bad_conns;
	ht.incarnation = ((u64)rnd() << 32) | rnd();
	if (ht.kase == HT_OTHER_LANE) {
		ht_mbox = mmap(NULL, sizeof(*ht_mbox), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (ht_mbox == MAP_FAILED) {
			perror("tern_fuzz: mmap");
			return 1;
		}
	}
	lfd = socket(self.addr.ss_family, SOCK_STREAM, 0);
	if (lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&self.addr, self.addrlen) ||
	    listen(lfd, 64)) {
		perror("tern_fuzz: listen");
		return 1;
	}
	signal(SIGCHLD, SIG_IGN);	/* children reap themselves */
	printf("# hostile target %s listening on port %s%s%s\n", spec, port,
	       !keyfile ? "" : ", with a key for ",
	       !keyfile ? "" : identity ?: "any identity");
	fflush(stdout);
	for (nr = 1;; nr++) {
		fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED) {
				nr--;
				continue;
			}
			perror("tern_fuzz: accept");
			return 1;
		}
		if (ht.kase == HT_ACCEPT_CLOSE &&
		    (!ht.bad_conns || nr <= ht.bad_conns)) {
			if (nr % 100 == 1)
				fprintf(stderr, "# hostile: conn %u: closed at once\n",
					nr);
			close(fd);
			continue;
		}
		fflush(stderr);
		pid = fork();
		if (pid == 0) {
			close(lfd);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() == 1)
				_exit(0);
			rng_state ^= (u64)nr << 32 | (u64)getpid();
			rnd();
			_exit(ht_conn_run(fd, nr));
		}
		if (pid < 0)
			perror("tern_fuzz: fork");
		close(fd);
	}
}

/* The case called @name; a bad name ends the run with the usage. */
static int fuzz_case_named(const char *name)
{
	int c;

	for (c = 0; c < CASE_COUNT; c++)
		if (!strcmp(name, case_names[c]))
			return c;
	die_usage();
	return -1;
}

static void die_usage(void)
{
	int c;

	fprintf(stderr, "usage: tern_fuzz -a ADDR -p PORT [-n FRAMES] [-s SEED] [-c CASE]\n"
			"                 [-x CASE]...\n"
			"       tern_fuzz -a ADDR -p PORT -b EXPORT [-r RO_EXPORT] [-k KEYFILE -i IDENTITY]\n"
			"       tern_fuzz -a ADDR -p PORT -A -k KEYFILE -i IDENTITY [-o KEYFILE2 -O IDENTITY2] [-M]\n"
			"       tern_fuzz -a ADDR -p PORT -F MODE [-N CONNS] [-L LANES] [-Q REQS] [-S BYTES] [-H SECONDS] [-R RCVBUF] [-K MS] [-B SRC_ADDR]\n"
			"       tern_fuzz -T CASE[=ARG] -l PORT [-a ADDR] [-N CONNS] [-s SEED] [-k KEYFILE [-i IDENTITY]]\n"
			"\n"
			"-A: the authentication probe; -M: the port requires authentication\n"
			"-c CASE:");
	for (c = 0; c < CASE_COUNT; c++)
		fprintf(stderr, "%s%s", c % 6 ? " " : "\n  ", case_names[c]);
	fprintf(stderr, "\n-F MODE:\n  handshakes sessions lanes noread\n-T CASE:");
	for (c = 0; c < HT_CASE_COUNT; c++)
		fprintf(stderr, "%s%s%s%s", c % 6 ? " " : "\n  ",
			ht_case_names[c], ht_case_arg(c) ? "=" : "",
			ht_case_arg(c) ?: "");
	fprintf(stderr, "\n  WHAT:");
	for (c = 0; c < HT_G_COUNT; c++)
		fprintf(stderr, " %s", ht_geom_names[c]);
	fprintf(stderr, "\n  goodauth needs -k; with -k, every case authenticates\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned long per_case[CASE_COUNT] = { 0 };
	const char *host = NULL, *port = NULL, *export = NULL, *ro = NULL;
	const char *hostile = NULL, *lport = NULL;
	const char *keyfile = NULL, *identity = NULL;
	const char *keyfile2 = NULL, *identity2 = NULL;
	bool auth = false, require = false;
	unsigned long bad_conns = 0;
	unsigned long frames = 10000;
	struct flood_opts fo = { .conns = 1000, .lanes = 64, .reqs = 16,
				 .size = 1 << 20, .hold = 5 };
	struct auth_id id, id2;
	int only = -1;
	u32 skip = 0;		/* cases -x leaves out */
	struct peer peer;
	int opt, c;

	rng_state = (u64)time(NULL) | 1;
	while ((opt = getopt(argc, argv,
			     "a:p:n:s:c:x:b:r:F:N:L:Q:S:H:R:K:B:T:l:Ak:i:o:O:Mh")) != -1) {
		switch (opt) {
		case 'A':
			auth = true;
			break;
		case 'k':
			keyfile = optarg;
			break;
		case 'i':
			identity = optarg;
			break;
		case 'o':
			keyfile2 = optarg;
			break;
		case 'O':
			identity2 = optarg;
			break;
		case 'M':
			require = true;
			break;
		case 'F':
			fo.mode = optarg;
			break;
		case 'N':	/* flood: connections; -T: bad ones */
			fo.conns = strtoul(optarg, NULL, 0);
			bad_conns = fo.conns;
			break;
		case 'L':
			fo.lanes = strtoul(optarg, NULL, 0);
			break;
		case 'Q':
			fo.reqs = strtoul(optarg, NULL, 0);
			break;
		case 'S':
			fo.size = strtoul(optarg, NULL, 0);
			break;
		case 'H':
			fo.hold = strtoul(optarg, NULL, 0);
			break;
		case 'R':
			fo.rcvbuf = strtol(optarg, NULL, 0);
			break;
		case 'K':
			fo.keepalive_ms = strtoul(optarg, NULL, 0);
			break;
		case 'B':
			if (parse_peer(optarg, "0", &fo.src))
				return 2;
			fo.bind = true;
			break;
		case 'b':
			export = optarg;
			break;
		case 'T':
			hostile = optarg;
			break;
		case 'l':
			lport = optarg;
			break;
		case 'r':
			ro = optarg;
			break;
		case 'a':
			host = optarg;
			break;
		case 'p':
			port = optarg;
			break;
		case 'n':
			frames = strtoul(optarg, NULL, 0);
			break;
		case 's':
			rng_state = strtoull(optarg, NULL, 0) | 1;
			break;
		case 'c':
			only = fuzz_case_named(optarg);
			break;
		case 'x':
			skip |= 1U << fuzz_case_named(optarg);
			break;
		default:
			die_usage();
		}
	}
	if (hostile) {
		c = hostile_target(hostile, host, lport, bad_conns, keyfile,
				   identity);
		if (c == 2)
			die_usage();
		return c;
	}
	if (!host || !port || !frames || !keyfile != !identity ||
	    !keyfile2 != !identity2 || (auth && !keyfile) ||
	    (keyfile2 && !auth) || (keyfile && !auth && !export))
		die_usage();
	if (parse_peer(host, port, &peer))
		return 2;
	crc32c_init();
	if ((keyfile && key_load(&id, keyfile, identity)) ||
	    (keyfile2 && key_load(&id2, keyfile2, identity2)))
		return 2;
	if (auth)
		return auth_probe(&peer, &id, keyfile2 ? &id2 : NULL, require);
	if (export)
		return block_probe(&peer, export, ro, keyfile ? &id : NULL);
	if (fo.mode)
		return fo.lanes ? flood_run(&peer, &fo) : 2;
	printf("# seed %llu\n", (unsigned long long)rng_state);

	/* -x leaves no case to pick, or the one -c asks for */
	if (skip == (1U << CASE_COUNT) - 1 ||
	    (only >= 0 && (skip & (1U << only))))
		die_usage();
	while (count.frames < frames) {
		do
			c = only >= 0 ? only : (int)rnd_below(CASE_COUNT);
		while (only < 0 && (skip & (1U << c)));
		if (run_case(&peer, c) && count.refused)
			break;
		per_case[c]++;
	}
	for (c = 0; c < CASE_COUNT; c++)
		printf("# %-18s %lu connections\n", case_names[c], per_case[c]);
	printf("# frames %lu connections %lu closed-by-listener %lu refused %lu other-errors %lu\n",
	       count.frames, count.conns, count.closed_by_listener,
	       count.refused, count.other_errors);
	printf("# remote-data requests %lu dropped %lu violations %lu\n",
	       count.remote_sent, count.remote_dropped, count.violations);
	if (count.refused || count.frames < frames) {
		fprintf(stderr, "tern_fuzz: the listener stopped accepting\n");
		return 1;
	}
	if (count.violations) {
		fprintf(stderr, "tern_fuzz: the listener broke the protocol (violations above)\n");
		return 1;
	}
	if ((only == CASE_REMOTE_REQUEST || only == CASE_REMOTE_BAD_DESC) &&
	    count.remote_dropped != count.remote_sent) {
		fprintf(stderr, "tern_fuzz: no remote data request got through a handshake\n");
		return 1;
	}
	return 0;
}
