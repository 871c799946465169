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
 * The listener must survive all of it and keep accepting: the run fails
 * if a connection is ever refused. Whether the kernel stayed clean is for
 * the test lane to judge from the console.
 *
 * Usage: tern_fuzz -a ADDR -p PORT [-n FRAMES] [-s SEED]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <endian.h>

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
	CASE_COUNT
};

static const char *const case_names[CASE_COUNT] = {
	"random-bytes", "truncated-header", "bad-magic", "bad-version",
	"bad-hdr-crc", "bad-type", "bad-flags", "bad-seq", "oversized",
	"before-hello", "hello-bad-length", "hello-bad-fields",
	"truncated-front", "after-hello", "flipped-bits",
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

static int run_case(const struct peer *peer, enum fuzz_case c)
{
	size_t i, n;
	u32 seq;
	int fd;

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
	default:
		break;
	}
	finish_conn(fd);
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

static void die_usage(void)
{
	fprintf(stderr, "usage: tern_fuzz -a ADDR -p PORT [-n FRAMES] [-s SEED]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned long per_case[CASE_COUNT] = { 0 };
	const char *host = NULL, *port = NULL;
	unsigned long frames = 10000;
	struct peer peer;
	int opt, c;

	rng_state = (u64)time(NULL) | 1;
	while ((opt = getopt(argc, argv, "a:p:n:s:")) != -1) {
		switch (opt) {
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
		default:
			die_usage();
		}
	}
	if (!host || !port || !frames)
		die_usage();
	if (parse_peer(host, port, &peer))
		return 2;
	crc32c_init();
	printf("# seed %llu\n", (unsigned long long)rng_state);

	while (count.frames < frames) {
		c = rnd_below(CASE_COUNT);
		if (run_case(&peer, c) && count.refused)
			break;
		per_case[c]++;
	}
	for (c = 0; c < CASE_COUNT; c++)
		printf("# %-18s %lu connections\n", case_names[c], per_case[c]);
	printf("# frames %lu connections %lu closed-by-listener %lu refused %lu other-errors %lu\n",
	       count.frames, count.conns, count.closed_by_listener,
	       count.refused, count.other_errors);
	if (count.refused || count.frames < frames) {
		fprintf(stderr, "tern_fuzz: the listener stopped accepting\n");
		return 1;
	}
	return 0;
}
