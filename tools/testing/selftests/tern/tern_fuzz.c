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
 * held for the current one until CLOSE). Every reply is checked.
 *
 * Flood (-F MODE): many well-formed connections, see "Flood modes" below.
 *
 * Hostile target (-T CASE -l PORT): the other way round, a tern acceptor
 * listening on ADDR:PORT that completes handshakes and serves a block
 * export, but misbehaves as CASE says, for the kernel's client side
 * (tern_blk, tern_bench). See its section below.
 *
 * Usage: tern_fuzz -a ADDR -p PORT [-n FRAMES] [-s SEED] [-c CASE]
 *        tern_fuzz -a ADDR -p PORT -b EXPORT [-r RO_EXPORT]
 *        tern_fuzz -a ADDR -p PORT -F MODE [-N CONNS] [-L LANES] [-Q REQS]
 *                  [-S BYTES] [-H SECONDS] [-R RCVBUF] [-K MS]
 *        tern_fuzz -T CASE[=ARG] -l PORT [-a ADDR] [-N CONNS] [-s SEED]
 */
#include <arpa/inet.h>
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
#include <sys/prctl.h>
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
	CASE_COUNT
};

static const char *const case_names[CASE_COUNT] = {
	"random-bytes", "truncated-header", "bad-magic", "bad-version",
	"bad-hdr-crc", "bad-type", "bad-flags", "bad-seq", "oversized",
	"before-hello", "hello-bad-length", "hello-bad-fields",
	"truncated-front", "after-hello", "flipped-bits", "remote-request",
	"remote-bad-desc",
};

static struct frame fr;

/* A frame that is valid in form but makes no sense after a handshake. */
static void frame_nonsense(struct frame *f, u32 seq)
{
	static const u8 types[] = {
		TERN_WIRE_REQUEST, TERN_WIRE_REPLY, TERN_WIRE_HELLO,
		TERN_WIRE_HELLO_ACK, TERN_WIRE_PING, TERN_WIRE_PONG,
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
	default:
		break;
	}
	finish_conn(fd);
	return 0;
}

/* ---- block probe ---- */

struct probe {
	int fd;
	u32 tx_seq;		/* last frame sent */
	u32 rx_seq;		/* last frame received */
	u64 tid;		/* last tid used */
	unsigned long failed;
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

static int probe_open(struct probe *p, const char *export,
		      struct tern_blk_info *info)
{
	struct {
		struct tern_blk_req r;
		struct tern_blk_open_args a;
	} open = { .r = { .opcode = TERN_BLK_OP_OPEN,
			  .version = TERN_BLK_PROTO_VERSION } };

	snprintf(open.a.export, sizeof(open.a.export), "%s", export);
	snprintf(open.a.host, sizeof(open.a.host), "tern_fuzz");
	if (probe(p, "OPEN", &open.r, sizeof(open), 0, 0, 0, info) ||
	    !info->handle || !info->capacity) {
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

static int block_probe(const struct peer *peer, const char *export,
		       const char *ro_export)
{
	const u16 from = TERN_WIRE_F_DATA_FROM_RESPONDER;
	struct probe p = { .tx_seq = 1, .rx_seq = 1 };
	struct tern_blk_info info, ro;
	struct tern_wire_hello ack;
	struct tern_wire_hdr h;
	struct tern_blk_req r;
	unsigned int optional = 0;
	u64 handle, cap, held, tid[2];
	u32 lbs;
	u16 flags;
	int i, n;

	p.fd = peer_connect(peer);
	if (p.fd < 0 || handshake(p.fd, 0, &ack) || ack.status) {
		fprintf(stderr, "tern_fuzz: no session with the target\n");
		return 1;
	}
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
 * -K KEEPALIVE_MS proposes that PING interval in every HELLO. The
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
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

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
		if (connect(c->fd, (const struct sockaddr *)&peer->addr,
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
	HT_TID_DUP,		/* the READ reply, then again with junk */
	HT_READ_SHORT,		/* half the READ data */
	HT_READ_LONG,		/* 4 KiB more READ data than the buffer */
	HT_READ_FRONT,		/* a front on a READ reply */
	HT_FRONT_BIG,		/* a front above the negotiated max_front */
	HT_TRICKLE_READ,	/* READ data one byte every 200-500 ms */
	HT_TRICKLE_OPEN,	/* the OPEN reply's front likewise */
	HT_WATCH_STORM,		/* every WATCH answered at once, grown */
	HT_BAD_CRC_READ,	/* READ replies with a wrong data CRC */
	HT_BAD_CRC_OPEN,	/* OPEN replies with a wrong data CRC */
	HT_SLOWLORIS,		/* read the HELLO, never answer */
	HT_HALF_ACK,		/* half a HELLO_ACK, then nothing */
	HT_ACCEPT_CLOSE,	/* close every connection at once */
	HT_CHECK,		/* =SECTOR: check stdin, do not listen */
	HT_CASE_COUNT
};

static const char *const ht_case_names[HT_CASE_COUNT] = {
	"ack-status", "ack-lanes", "ack-qdepth", "ack-max-data",
	"ack-max-front", "ack-features", "ack-session", "ack-cookie",
	"ack-lane-idx", "open-status", "geom", "info-geom", "tid-zero",
	"tid-future", "tid-dup", "read-short", "read-long", "read-front",
	"front-big", "trickle-read", "trickle-open", "watch-storm",
	"bad-crc-read", "bad-crc-open", "slowloris", "half-ack",
	"accept-close", "check",
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
} ht;

/* One accepted connection, in its own process. */
struct ht_conn {
	int			fd;
	unsigned int		nr;	/* accepted as the nr-th, from 1 */
	bool			bad;	/* misbehave on this one */
	bool			crc;	/* data CRC negotiated */
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

/* The frame in fr: header at once, then its body a byte at a time. */
static int ht_trickle(struct ht_conn *c)
{
	size_t i;

	ht_log(c, "trickling a %zu-byte body", fr.body_len);
	if (send_frame(c->fd, &fr, HDR_LEN, 0))
		return -1;
	for (i = 0; i < fr.body_len; i++) {
		usleep((200 + rnd_below(301)) * 1000);
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

static int ht_handshake(struct ht_conn *c)
{
	struct tern_wire_hello h, ack;
	u32 max_data, max_front;
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
	ack = h;
	ack.incarnation = htole64(ht.incarnation);
	ack.features = h.features & htole32(TERN_FEAT_DATA_CRC);
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
		default:
			break;
		}
	}
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
		i->reserved[4] = htole32(1);
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
		return ht_trickle(c);
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

static int ht_read(struct ht_conn *c, u64 tid, const struct tern_blk_req *r)
{
	u64 sector = le64toh(r->offset);
	u32 len = le32toh(r->length);

	if (len != le32toh(c->hdr.buf_len) || !len || len > HT_MAX_TRANSFER)
		return ht_status_reply(c, tid, -EINVAL);
	if (!c->bad || sector < HT_HOSTILE_SECTOR)
		return ht_data_reply(c, tid, sector, len, 0, false);

	switch (ht.kase) {
	case HT_TID_ZERO:
	case HT_TID_FUTURE:
		ht_log(c, "READ tid %llu: a junk reply to tid %llu first",
		       (unsigned long long)tid,
		       ht.kase == HT_TID_ZERO ? 0ULL :
		       (unsigned long long)tid + 1000);
		if (ht_data_reply(c, ht.kase == HT_TID_ZERO ? 0 : tid + 1000,
				  sector, len, 0, true))
			return -1;
		return ht_data_reply(c, tid, sector, len, 0, false);
	case HT_TID_DUP:
		ht_log(c, "READ tid %llu: answered, then again with junk",
		       (unsigned long long)tid);
		if (ht_data_reply(c, tid, sector, len, 0, false))
			return -1;
		return ht_data_reply(c, tid, sector, len, 0, true);
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
	case HT_TRICKLE_READ:
		ht_begin(c, TERN_WIRE_REPLY, tid, 0);
		ht_put_data(sector, len, false);
		ht_seal(c, 0);
		return ht_trickle(c);
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
		return ht_data_reply(c, tid, sector, len, 0, false);
	}
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

	if (!c)
		return 1;
	c->fd = fd;
	c->nr = nr;
	c->bad = !ht.bad_conns || nr <= ht.bad_conns;
	c->handle = ((u64)rnd() << 32 | rnd()) | 1;
	if (ht_handshake(c))
		return 0;
	for (;;) {
		if (ht_recv(c, -1))
			return 0;
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
	want_arg = c <= HT_ACK_FEATURES || c == HT_OPEN_STATUS ||
		   c == HT_GEOM || c == HT_INFO_GEOM || c == HT_CHECK;
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
 * -T CASE -l PORT [-a ADDR] [-N CONNS] [-s SEED]: serve until killed; a
 * child per connection, which dies with us. 2 on bad arguments.
 */
static int hostile_target(const char *spec, const char *host,
			  const char *port, unsigned long bad_conns)
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
	if (!port || parse_peer(host ?: "127.0.0.1", port, &self))
		return 2;
	ht.bad_conns = bad_conns;
	ht.incarnation = ((u64)rnd() << 32) | rnd();
	lfd = socket(self.addr.ss_family, SOCK_STREAM, 0);
	if (lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&self.addr, self.addrlen) ||
	    listen(lfd, 64)) {
		perror("tern_fuzz: listen");
		return 1;
	}
	signal(SIGCHLD, SIG_IGN);	/* children reap themselves */
	printf("# hostile target %s listening on port %s\n", spec, port);
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

static void die_usage(void)
{
	fprintf(stderr, "usage: tern_fuzz -a ADDR -p PORT [-n FRAMES] [-s SEED] [-c CASE]\n"
			"       tern_fuzz -a ADDR -p PORT -b EXPORT [-r RO_EXPORT]\n"
			"       tern_fuzz -a ADDR -p PORT -F MODE [-N CONNS] [-L LANES] [-Q REQS] [-S BYTES] [-H SECONDS] [-R RCVBUF] [-K MS]\n"
			"       tern_fuzz -T CASE[=ARG] -l PORT [-a ADDR] [-N CONNS] [-s SEED]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned long per_case[CASE_COUNT] = { 0 };
	const char *host = NULL, *port = NULL, *export = NULL, *ro = NULL;
	const char *hostile = NULL, *lport = NULL;
	unsigned long bad_conns = 0;
	unsigned long frames = 10000;
	struct flood_opts fo = { .conns = 1000, .lanes = 64, .reqs = 16,
				 .size = 1 << 20, .hold = 5 };
	int only = -1;
	struct peer peer;
	int opt, c;

	rng_state = (u64)time(NULL) | 1;
	while ((opt = getopt(argc, argv,
			     "a:p:n:s:c:b:r:F:N:L:Q:S:H:R:K:T:l:")) != -1) {
		switch (opt) {
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
			for (c = 0; c < CASE_COUNT; c++)
				if (!strcmp(optarg, case_names[c]))
					only = c;
			if (only < 0)
				die_usage();
			break;
		default:
			die_usage();
		}
	}
	if (hostile) {
		c = hostile_target(hostile, host, lport, bad_conns);
		if (c == 2)
			die_usage();
		return c;
	}
	if (!host || !port || !frames)
		die_usage();
	if (parse_peer(host, port, &peer))
		return 2;
	crc32c_init();
	if (export)
		return block_probe(&peer, export, ro);
	if (fo.mode)
		return fo.lanes ? flood_run(&peer, &fo) : 2;
	printf("# seed %llu\n", (unsigned long long)rng_state);

	while (count.frames < frames) {
		c = only >= 0 ? only : (int)rnd_below(CASE_COUNT);
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
		fprintf(stderr, "tern_fuzz: the listener mishandled remote data\n");
		return 1;
	}
	if ((only == CASE_REMOTE_REQUEST || only == CASE_REMOTE_BAD_DESC) &&
	    count.remote_dropped != count.remote_sent) {
		fprintf(stderr, "tern_fuzz: no remote data request got through a handshake\n");
		return 1;
	}
	return 0;
}
