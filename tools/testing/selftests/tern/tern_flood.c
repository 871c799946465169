// SPDX-License-Identifier: GPL-2.0
/*
 * tern_flood - a hostile block client at scale, against a tern_target
 * TCP port.
 *
 * Forks PROCS processes; each opens CONNS sessions one after the other
 * (one lane each), shakes hands properly and then, by MODE:
 *
 *   open     REQS OPENs of a valid export (binding spam)
 *   openbad  REQS OPENs of an export that does not exist
 *   watch    one OPEN, then REQS WATCHes naming the current capacity
 *            (the target may hold a few; the rest must be refused)
 *   write    REQS 1 MiB WRITEs naming a handle nobody was given
 *
 * Requests go out in windows of the negotiated queue depth; replies are
 * read and their statuses counted. Each session is kept HOLD seconds,
 * then closed. Prints "key value" lines: sessions, sent, replies, then
 * one "status_N count" per reply status seen.
 *
 * Usage: tern_flood -a ADDR -p PORT -m MODE -e EXPORT [-P PROCS]
 *                   [-C CONNS] [-n REQS] [-H HOLD]
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern_blk_proto.h>
#include <tern/tern_wire.h>

#define QD		32
#define WRITE_LEN	(1024U * 1024)
#define NSTATUS		160

struct sess {
	int fd;
	uint32_t seq, peer_seq;
	uint64_t tid;
	uint64_t sent, replies;
	uint64_t status[NSTATUS];
};

static const char *mode, *export;
static unsigned int reqs = 64, hold;
static unsigned char *wbuf;

/* crc32c, bit by bit over a table built once */
static uint32_t ctab[256];

static uint32_t crc32c(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint32_t c = ~0U;

	while (n--)
		c = ctab[(c ^ *b++) & 0xff] ^ (c >> 8);
	return ~c;
}

static void crc_setup(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t v = i;

		for (int k = 0; k < 8; k++)
			v = v & 1 ? 0x82f63b78 ^ (v >> 1) : v >> 1;
		ctab[i] = v;
	}
}

static uint64_t rnd64(void)
{
	return ((uint64_t)random() << 40) ^ ((uint64_t)random() << 20) ^
	       random();
}

static int xsend(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			return -1;
		}
		p = (const char *)p + r;
		n -= r;
	}
	return 0;
}

/* all of @n bytes in (@out 0) or out: sockets, and the children's pipe */
static int xpipe_io(int fd, void *p, size_t n, int out)
{
	while (n) {
		ssize_t r = out ? write(fd, p, n) : read(fd, p, n);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			return -1;
		}
		p = (char *)p + r;
		n -= r;
	}
	return 0;
}

static int xrecv(int fd, void *p, size_t n)
{
	return xpipe_io(fd, p, n, 0);
}

/* One frame: header, @front, then @data (TO_RESPONDER) bytes. */
static int send_msg(struct sess *s, uint8_t type, uint16_t flags,
		    const void *front, uint32_t flen, const void *data,
		    uint32_t dlen, uint32_t buf_len)
{
	struct tern_wire_hdr h = {
		.magic = htole32(TERN_WIRE_MAGIC),
		.version = TERN_WIRE_VERSION,
		.type = type,
		.flags = htole16(flags),
		.tid = htole64(type == TERN_WIRE_REQUEST ? ++s->tid : 0),
		.seq = htole32(++s->seq),
		.ack = htole32(s->peer_seq),
		.front_len = htole32(flen),
		.data_len = htole32(dlen),
		.buf_len = htole32(buf_len),
	};

	h.hdr_crc = htole32(crc32c(&h, offsetof(struct tern_wire_hdr, hdr_crc)));
	if (xsend(s->fd, &h, sizeof(h)) || (flen && xsend(s->fd, front, flen)))
		return -1;
	if (dlen && xsend(s->fd, data, dlen))
		return -1;
	if (type == TERN_WIRE_REQUEST)
		s->sent++;
	return 0;
}

/* Next REPLY within @ms; its front (if any) into @info. 1: none. */
static int recv_reply(struct sess *s, struct tern_blk_info *info, int ms)
{
	struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
	struct tern_wire_hdr h;
	char junk[4096];
	uint32_t flen, dlen;
	int st;

	for (;;) {
		if (poll(&pfd, 1, ms) <= 0)
			return 1;
		if (xrecv(s->fd, &h, sizeof(h)))
			return -1;
		s->peer_seq = le32toh(h.seq);
		flen = le32toh(h.front_len);
		dlen = le32toh(h.data_len);
		if (flen > sizeof(junk) || (flen && xrecv(s->fd, junk, flen)))
			return -1;
		while (dlen) {
			uint32_t n = dlen < sizeof(junk) ? dlen : sizeof(junk);

			if (xrecv(s->fd, junk, n))
				return -1;
			dlen -= n;
		}
		if (h.type == TERN_WIRE_PING) {
			send_msg(s, TERN_WIRE_PONG, 0, NULL, 0, NULL, 0, 0);
			continue;
		}
		if (h.type != TERN_WIRE_REPLY)
			continue;
		break;
	}
	s->replies++;
	st = -(int)le32toh(h.status);
	s->status[st >= 0 && st < NSTATUS ? st : NSTATUS - 1]++;
	if (info && flen >= sizeof(*info))
		memcpy(info, junk, sizeof(*info));
	return 0;
}

static int hello(struct sess *s, const struct sockaddr_in *sa)
{
	struct tern_wire_hello h = {
		.session_id = htole64(rnd64()),
		.cookie = htole64(rnd64()),
		.incarnation = htole64(rnd64()),
		.max_data = htole32(WRITE_LEN),
		.max_front = htole32(4096),
		.keepalive_ms = htole32(5000),
		.nr_lanes = htole16(1),
		.queue_depth = htole16(QD),
	}, ack;
	struct tern_wire_hdr ah;
	int one = 1;

	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (s->fd < 0)
		return -1;
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(s->fd, (const struct sockaddr *)sa, sizeof(*sa)))
		return -1;
	if (send_msg(s, TERN_WIRE_HELLO, 0, &h, sizeof(h), NULL, 0, 0) ||
	    xrecv(s->fd, &ah, sizeof(ah)) || ah.type != TERN_WIRE_HELLO_ACK ||
	    le32toh(ah.front_len) != sizeof(ack) ||
	    xrecv(s->fd, &ack, sizeof(ack)) || ack.status)
		return -1;
	s->peer_seq = le32toh(ah.seq);
	return 0;
}

static int send_open(struct sess *s, const char *name)
{
	struct {
		struct tern_blk_req r;
		struct tern_blk_open_args a;
	} o = { .r = { .opcode = TERN_BLK_OP_OPEN,
		       .version = TERN_BLK_PROTO_VERSION } };

	snprintf(o.a.export, sizeof(o.a.export), "%s", name);
	snprintf(o.a.host, sizeof(o.a.host), "tern_flood");
	return send_msg(s, TERN_WIRE_REQUEST, 0, &o, sizeof(o), NULL, 0, 0);
}

static int send_req(struct sess *s, uint8_t op, uint64_t handle,
		    uint64_t off, uint32_t len)
{
	struct tern_blk_req r = {
		.opcode = op, .version = TERN_BLK_PROTO_VERSION,
		.handle = htole64(handle), .offset = htole64(off),
		.length = htole32(op == TERN_BLK_OP_WATCH ? 0 : len),
	};
	uint16_t f = op == TERN_BLK_OP_WRITE ? TERN_WIRE_F_DATA_TO_RESPONDER : 0;

	return send_msg(s, TERN_WIRE_REQUEST, f, &r, sizeof(r),
			op == TERN_BLK_OP_WRITE ? wbuf : NULL,
			op == TERN_BLK_OP_WRITE ? len : 0,
			op == TERN_BLK_OP_WRITE ? len : 0);
}

static void one_session(struct sess *s, const struct sockaddr_in *sa)
{
	struct tern_blk_info info = { 0 };
	uint64_t handle = rnd64() | 1;
	unsigned int i;

	if (hello(s, sa))
		goto out;
	if (!strcmp(mode, "watch")) {
		if (send_open(s, export) || recv_reply(s, &info, 5000))
			goto out;
		handle = le64toh(info.handle);
	}
	for (i = 0; i < reqs; i++) {
		int err;

		if (!strcmp(mode, "open"))
			err = send_open(s, export);
		else if (!strcmp(mode, "openbad"))
			err = send_open(s, "no-such-export");
		else if (!strcmp(mode, "watch"))
			err = send_req(s, TERN_BLK_OP_WATCH, handle,
				       le64toh(info.capacity), 0);
		else
			err = send_req(s, TERN_BLK_OP_WRITE, handle, 0,
				       WRITE_LEN);
		if (err)
			goto out;
		/* a window of QD; watches may be held, so do not wait long */
		if (s->sent - s->replies >= QD - 4 &&
		    recv_reply(s, NULL, strcmp(mode, "watch") ? 5000 : 200) < 0)
			goto out;
	}
	while (s->replies < s->sent)
		if (recv_reply(s, NULL, strcmp(mode, "watch") ? 5000 : 500))
			break;
	if (hold)
		sleep(hold);
out:
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	unsigned int procs = 1, conns = 1, p, c, i;
	uint64_t tot[NSTATUS] = { 0 }, sent = 0, replies = 0, nsess = 0;
	int opt, pipefd[2];

	while ((opt = getopt(argc, argv, "a:p:m:e:P:C:n:H:")) != -1) {
		switch (opt) {
		case 'a':
			inet_pton(AF_INET, optarg, &sa.sin_addr);
			break;
		case 'p':
			sa.sin_port = htons(atoi(optarg));
			break;
		case 'm':
			mode = optarg;
			break;
		case 'e':
			export = optarg;
			break;
		case 'P':
			procs = atoi(optarg);
			break;
		case 'C':
			conns = atoi(optarg);
			break;
		case 'n':
			reqs = atoi(optarg);
			break;
		case 'H':
			hold = atoi(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (!mode || !export || !sa.sin_port)
		goto usage;
	crc_setup();
	wbuf = calloc(1, WRITE_LEN);
	if (!wbuf || pipe(pipefd))
		return 1;
	for (p = 0; p < procs; p++) {
		if (fork())
			continue;
		struct sess s = { .fd = -1 }, all = { 0 };

		srandom(time(NULL) ^ getpid());
		close(pipefd[0]);
		for (c = 0; c < conns; c++) {
			memset(&s, 0, sizeof(s));
			s.fd = -1;
			one_session(&s, &sa);
			all.sent += s.sent;
			all.replies += s.replies;
			all.tid += s.seq > 1;	/* sessions that got going */
			for (i = 0; i < NSTATUS; i++)
				all.status[i] += s.status[i];
		}
		if (xpipe_io(pipefd[1], &all, sizeof(all), 1))
			_exit(1);
		_exit(0);
	}
	close(pipefd[1]);
	for (p = 0; p < procs; p++) {
		struct sess all;

		if (xpipe_io(pipefd[0], &all, sizeof(all), 0))
			break;
		sent += all.sent;
		replies += all.replies;
		nsess += all.tid;
		for (i = 0; i < NSTATUS; i++)
			tot[i] += all.status[i];
	}
	while (wait(NULL) > 0)
		;
	printf("sessions %llu\nsent %llu\nreplies %llu\n",
	       (unsigned long long)nsess, (unsigned long long)sent,
	       (unsigned long long)replies);
	for (i = 0; i < NSTATUS; i++)
		if (tot[i])
			printf("status_%u %llu\n", i, (unsigned long long)tot[i]);
	return 0;
usage:
	fprintf(stderr, "usage: tern_flood -a ADDR -p PORT -m open|openbad|watch|write -e EXPORT\n"
			"                  [-P PROCS] [-C CONNS] [-n REQS] [-H HOLD]\n");
	return 2;
}
