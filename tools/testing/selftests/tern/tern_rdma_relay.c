// SPDX-License-Identifier: GPL-2.0
/*
 * tern_rdma_relay: a userspace tern RDMA peer for the selftests.
 *
 * tern_fuzz and tamper_proxy.py play hostile peers over TCP only; the
 * RDMA framing of tern_rdma.ko (tern_rdma_wire.h: connect private data,
 * message headers, credits, padding) had no peer but itself. This tool
 * carries each lane's byte stream between an RDMA connection, framed as
 * Documentation/protocol.rst "RDMA framing and credits" says, and a TCP
 * connection, so that a kernel tern peer meets a userspace one on the
 * RDMA wire while the tern frames come from, or go to, any TCP peer
 * (the kernel's own tcp:// side, tern_fuzz). On request it breaks the
 * framing once per connection, as a hostile peer would.
 *
 *   tern_rdma_relay -a rdma://ADDR:PORT -c tcp://HOST:PORT [fault]
 *	accept RDMA connections; one TCP connection to HOST:PORT each
 *   tern_rdma_relay -a tcp://HOST:PORT -c rdma://ADDR:PORT [fault]
 *	accept TCP connections; one RDMA connection to ADDR:PORT each
 *
 *   -f FAULT,...  spoil the N-th connection with the N-th FAULT, the
 *             ones after the list are clean: none; priv-magic,
 *             priv-version, priv-recv, priv-buf, priv-head,
 *             priv-reserved (our private data; not its length, which
 *             the CM pads on IB and RoCE); magic, flags, type,
 *             credits, credit-data, credit-zero, empty, pad, long, inv
 *             (our message number -m); hold-credits (from message -m
 *             on, no credit granted: the peer's sends stall)
 *   -m M      the message spoilt (3): the M-th DATA message the relay
 *             sends on the connection
 *
 * It prints one line per connection and per fault, flushed, and runs
 * until killed.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <endian.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rdma_cma.h>
#include <infiniband/verbs.h>

#include <tern/tern_rdma_wire.h>

typedef __u8 u8;
typedef __u32 u32;

/* what the relay posts and announces */
#define RECV_COUNT	16
#define RECV_SIZE	8192
#define SEND_COUNT	16
/* room for the "long" fault: past the largest buffer a peer may have */
#define SEND_SIZE	(65536 + 256)
#define MAX_CONNS	64

#define HDR_LEN		((u32)sizeof(struct tern_rdma_msg_hdr))

enum fault {
	F_NONE, F_PRIV_MAGIC, F_PRIV_VERSION, F_PRIV_RECV, F_PRIV_BUF,
	F_PRIV_HEAD, F_PRIV_RESERVED, F_MAGIC, F_FLAGS,
	F_TYPE, F_CREDITS, F_CREDIT_DATA, F_CREDIT_ZERO, F_EMPTY, F_PAD,
	F_LONG, F_INV, F_HOLD_CREDITS, F_COUNT
};

static const char *const fault_names[F_COUNT] = {
	"none", "priv-magic", "priv-version", "priv-recv", "priv-buf",
	"priv-head", "priv-reserved", "magic", "flags",
	"type", "credits", "credit-data", "credit-zero", "empty", "pad",
	"long", "inv", "hold-credits",
};

struct conn {
	bool used;
	unsigned int nr;		/* 1, 2, ... in order of arrival */
	int tcp;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	u8 *mem;			/* receive buffers, then send buffers */
	bool ready;			/* established: stream flows */
	bool hold;			/* hold-credits: grant nothing */
	bool tcp_eof;			/* TCP said all: close once sent */
	long long eof_ms;		/* when it did */
	enum fault fault;		/* still to do on this connection */
	unsigned int sent;		/* DATA messages sent */
	/* the peer's receive side, from its private data */
	u32 peer_buf, peer_recv;
	u32 tx_credits;		/* SENDs we may post */
	u32 grant;			/* buffers reposted, not granted yet */
	u32 free_send;		/* bitmap of free send buffers */
};

static struct conn conns[MAX_CONNS];
static struct rdma_event_channel *ec;
static struct rdma_cm_id *listen_id;
static int listen_tcp = -1;
static struct sockaddr_storage rdma_addr, tcp_addr;
static socklen_t tcp_addr_len;
static bool accept_rdma;
static enum fault faults[MAX_CONNS];
static unsigned int nr_faults, fault_msg = 3, nr_conns;

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void die(const char *what)
{
	fprintf(stderr, "tern_rdma_relay: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void bad_usage(void)
{
	fprintf(stderr,
		"usage: tern_rdma_relay -a rdma://ADDR:PORT -c tcp://HOST:PORT [-f FAULT,...] [-m M]\n"
		"       tern_rdma_relay -a tcp://HOST:PORT -c rdma://ADDR:PORT [-f FAULT,...] [-m M]\n");
	exit(2);
}

/* "rdma://HOST:PORT" or "tcp://HOST:PORT" (IPv6 as [ADDR]:PORT) */
static bool parse_uri(const char *uri, bool *rdma, struct sockaddr_storage *ss,
		      socklen_t *len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	char host[256], *port;
	struct addrinfo *ai;
	const char *p;

	if (!strncmp(uri, "rdma://", 7)) {
		*rdma = true;
		p = uri + 7;
	} else if (!strncmp(uri, "tcp://", 6)) {
		*rdma = false;
		p = uri + 6;
	} else {
		return false;
	}
	if (snprintf(host, sizeof(host), "%s", p) >= (int)sizeof(host))
		return false;
	port = strrchr(host, ':');
	if (!port)
		return false;
	*port++ = '\0';
	if (host[0] == '[' && port[-2] == ']') {
		port[-2] = '\0';
		memmove(host, host + 1, strlen(host));
	}
	if (getaddrinfo(host, port, &hints, &ai))
		return false;
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return true;
}

static u8 *recv_buf(struct conn *c, unsigned int i)
{
	return c->mem + (size_t)i * RECV_SIZE;
}

static u8 *send_buf(struct conn *c, unsigned int i)
{
	return c->mem + (size_t)RECV_COUNT * RECV_SIZE + (size_t)i * SEND_SIZE;
}

/* work request ids: receive buffers 0.., send buffers 1000.. */
#define WR_SEND 1000

static int post_recv(struct conn *c, unsigned int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)recv_buf(c, i),
		.length = RECV_SIZE,
		.lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(c->id->qp, &wr, &bad);
}

static void fill_priv(struct conn *c, struct tern_rdma_cm_priv *priv)
{
	memset(priv, 0, sizeof(*priv));
	priv->magic = htole32(TERN_RDMA_CM_MAGIC);
	priv->version = htole16(TERN_RDMA_VERSION);
	priv->recv_count = htole16(RECV_COUNT);
	priv->buf_size = htole32(RECV_SIZE);
	priv->head_size = 0;		/* no padding towards us */
	switch (c->fault) {
	case F_PRIV_MAGIC:
		priv->magic = htole32(TERN_RDMA_CM_MAGIC ^ 1);
		break;
	case F_PRIV_VERSION:
		priv->version = 0;
		break;
	case F_PRIV_RECV:
		priv->recv_count = htole16(4);
		break;
	case F_PRIV_BUF:
		priv->buf_size = htole32(1024);
		break;
	case F_PRIV_HEAD:
		priv->head_size = htole16(RECV_SIZE);
		break;
	case F_PRIV_RESERVED:
		priv->reserved = htole16(1);
		break;
	default:
		return;
	}
	say("conn %u: fault %s", c->nr, fault_names[c->fault]);
	c->fault = F_NONE;
}

static void conn_param(struct conn *c, struct rdma_conn_param *param,
		       struct tern_rdma_cm_priv *priv)
{
	fill_priv(c, priv);
	memset(param, 0, sizeof(*param));
	param->private_data = priv;
	param->private_data_len = sizeof(*priv);
	/* tern peers want RDMA READ both ways, even when none will come */
	param->responder_resources = 1;
	param->initiator_depth = 1;
	param->retry_count = 7;
	param->rnr_retry_count = 0;	/* credits: never a missing buffer */
}

static bool take_priv(struct conn *c, const void *data, u8 len)
{
	const struct tern_rdma_cm_priv *priv = data;

	if (!data || len < sizeof(*priv) ||
	    le32toh(priv->magic) != TERN_RDMA_CM_MAGIC) {
		say("conn %u: bad private data from the peer", c->nr);
		return false;
	}
	c->peer_buf = le32toh(priv->buf_size);
	c->peer_recv = le16toh(priv->recv_count);
	if (c->peer_buf < 4096 || c->peer_buf > 65536 || !c->peer_recv) {
		say("conn %u: peer buffers %u x %u", c->nr, c->peer_recv,
		    c->peer_buf);
		return false;
	}
	c->tx_credits = c->peer_recv;
	return true;
}

static struct conn *conn_new(void)
{
	unsigned int i;

	for (i = 0; i < MAX_CONNS; i++) {
		if (conns[i].used)
			continue;
		memset(&conns[i], 0, sizeof(conns[i]));
		conns[i].used = true;
		conns[i].tcp = -1;
		conns[i].nr = ++nr_conns;
		conns[i].free_send = (1U << SEND_COUNT) - 1;
		if (conns[i].nr <= nr_faults)
			conns[i].fault = faults[conns[i].nr - 1];
		return &conns[i];
	}
	return NULL;
}

static void conn_close(struct conn *c, const char *why)
{
	say("conn %u: closed (%s)", c->nr, why);
	if (c->tcp >= 0)
		close(c->tcp);
	if (c->id) {
		rdma_disconnect(c->id);
		if (c->id->qp)
			rdma_destroy_qp(c->id);
	}
	if (c->mr)
		ibv_dereg_mr(c->mr);
	free(c->mem);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->ch)
		ibv_destroy_comp_channel(c->ch);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	c->used = false;
}

/* PD, CQ, QP and buffers on c->id, every receive buffer posted */
static int conn_queue(struct conn *c)
{
	struct ibv_qp_init_attr attr = {};
	size_t size = (size_t)RECV_COUNT * RECV_SIZE +
		      (size_t)SEND_COUNT * SEND_SIZE;
	unsigned int i;

	c->pd = ibv_alloc_pd(c->id->verbs);
	c->ch = c->pd ? ibv_create_comp_channel(c->id->verbs) : NULL;
	c->cq = c->ch ? ibv_create_cq(c->id->verbs,
				      2 * (RECV_COUNT + SEND_COUNT), c,
				      c->ch, 0) : NULL;
	if (!c->cq || ibv_req_notify_cq(c->cq, 0))
		return -1;
	fcntl(c->ch->fd, F_SETFL, fcntl(c->ch->fd, F_GETFL) | O_NONBLOCK);
	attr.send_cq = c->cq;
	attr.recv_cq = c->cq;
	attr.qp_type = IBV_QPT_RC;
	attr.cap.max_send_wr = SEND_COUNT;
	attr.cap.max_recv_wr = RECV_COUNT;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	if (rdma_create_qp(c->id, c->pd, &attr))
		return -1;
	c->mem = calloc(1, size);
	if (!c->mem)
		return -1;
	c->mr = ibv_reg_mr(c->pd, c->mem, size, IBV_ACCESS_LOCAL_WRITE);
	if (!c->mr)
		return -1;
	for (i = 0; i < RECV_COUNT; i++)
		if (post_recv(c, i))
			return -1;
	return 0;
}

static int tcp_connect(void)
{
	int fd = socket(tcp_addr.ss_family, SOCK_STREAM, 0), one = 1;

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&tcp_addr, tcp_addr_len)) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

static bool can_send(const struct conn *c, bool grants)
{
	/* the last credit only on a message that grants credits */
	return c->free_send && (c->tx_credits > 1 ||
				(c->tx_credits == 1 && grants));
}

/* whether our next message grants credits */
static bool grants(const struct conn *c)
{
	return !c->hold && c->grant > 0;
}

/*
 * Post one message of @len bytes (header included) from send buffer
 * @i, @type in its header; the connection's fault is applied when its
 * number comes. Return: 0; 1 if the fault took the message, whose data
 * is still to go; -1 (close).
 */
static int post_send(struct conn *c, unsigned int i, u8 type,
		     u32 len)
{
	struct tern_rdma_msg_hdr *h = (void *)send_buf(c, i);
	struct ibv_sge sge = {
		.addr = (uintptr_t)h,
		.lkey = c->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = WR_SEND + i,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;
	enum fault f = F_NONE;

	memset(h, 0, sizeof(*h));
	h->magic = htole16(TERN_RDMA_MSG_MAGIC);
	h->type = type;
	h->credits = htole16(c->hold ? 0 : c->grant);
	/* a lone grant is not counted: "empty" would make it a good one */
	if (type == TERN_RDMA_MSG_DATA && ++c->sent == fault_msg &&
	    c->fault >= F_MAGIC)
		f = c->fault;
	switch (f) {
	case F_MAGIC:
		h->magic = htole16(0x7274);
		break;
	case F_FLAGS:
		h->flags = 0x80;
		break;
	case F_TYPE:
		h->type = 7;
		break;
	case F_CREDITS:
		h->credits = htole16(0xffff);
		break;
	case F_CREDIT_DATA:
		h->type = TERN_RDMA_MSG_CREDIT;
		break;
	case F_CREDIT_ZERO:
		/* a message of its own, the stream's bytes come after it */
		h->type = TERN_RDMA_MSG_CREDIT;
		h->credits = 0;
		len = HDR_LEN;
		break;
	case F_EMPTY:
		len = HDR_LEN;
		break;
	case F_PAD:
		/* padding that starts inside the header */
		h->pad_from = htole16(4);
		break;
	case F_LONG:
		/* more than the peer's receive buffer holds */
		len = c->peer_buf + 64;
		break;
	case F_INV:
		/* an invalidation of a key nobody named, without a reply */
		wr.opcode = IBV_WR_SEND_WITH_INV;
		wr.invalidate_rkey = 0x5a5a5a00;
		break;
	case F_HOLD_CREDITS:
		c->hold = true;
		h->credits = 0;
		break;
	default:
		break;
	}
	if (f != F_NONE) {
		say("conn %u: fault %s at message %u", c->nr, fault_names[f],
		    c->sent);
		c->fault = F_NONE;
	}
	sge.length = len;
	if (ibv_post_send(c->id->qp, &wr, &bad))
		return -1;
	c->free_send &= ~(1U << i);
	c->tx_credits--;
	c->grant = 0;
	/* the two faults sent as messages of their own leave the data */
	return f == F_CREDIT_ZERO || f == F_EMPTY ? 1 : 0;
}

static unsigned int free_send_buf(const struct conn *c)
{
	return __builtin_ctz(c->free_send);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static bool all_sent(const struct conn *c)
{
	return c->free_send == (1U << SEND_COUNT) - 1;
}

/*
 * A TCP peer that sent its last and closed (tern_fuzz) still gets what
 * the kernel answers in the next LINGER_MS; then the RDMA side closes,
 * which the kernel sees as the TCP close it would have seen directly.
 */
#define LINGER_MS	300

static bool lingered(const struct conn *c)
{
	return c->tcp_eof && all_sent(c) && now_ms() - c->eof_ms > LINGER_MS;
}

/* TCP to RDMA: as much of the stream as credits and buffers allow */
static int pump_tcp(struct conn *c)
{
	unsigned int i, j;
	ssize_t n;
	int ret;

	while (c->ready && !c->tcp_eof && can_send(c, grants(c))) {
		i = free_send_buf(c);
		n = read(c->tcp, send_buf(c, i) + HDR_LEN,
			 c->peer_buf - HDR_LEN);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n < 0)
			return -1;
		if (!n) {
			/* what was read must arrive before the disconnect */
			c->tcp_eof = true;
			c->eof_ms = now_ms();
			return 0;
		}
		ret = post_send(c, i, TERN_RDMA_MSG_DATA, HDR_LEN + n);
		if (ret < 0)
			return -1;
		if (ret) {
			/* the fault was a message of its own: data next */
			j = i;
			if (!can_send(c, grants(c))) {
				/* let the fault arrive before the close */
				say("conn %u: no credit left after the fault",
				    c->nr);
				c->tcp_eof = true;
				c->eof_ms = now_ms();
				return 0;
			}
			i = free_send_buf(c);
			memcpy(send_buf(c, i) + HDR_LEN,
			       send_buf(c, j) + HDR_LEN, n);
			if (post_send(c, i, TERN_RDMA_MSG_DATA, HDR_LEN + n))
				return -1;
		}
	}
	return 0;
}

/* A grant of its own when nothing else goes and enough is owed. */
static int send_credits(struct conn *c)
{
	if (!c->ready || c->hold || c->grant < RECV_COUNT / 4 ||
	    !can_send(c, true))
		return 0;
	return post_send(c, free_send_buf(c), TERN_RDMA_MSG_CREDIT,
			 HDR_LEN) < 0 ? -1 : 0;
}

/*
 * Blocks the relay while the TCP peer does not read: the kernel's
 * sockets and tern_fuzz read what they are sent, which is all this
 * test tool meets.
 */
static int write_all(int fd, const u8 *p, size_t len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	ssize_t n;

	while (len) {
		n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EAGAIN) {
			poll(&pfd, 1, 1000);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

/* RDMA to TCP: one received message; the relay trusts the kernel */
static int take_msg(struct conn *c, unsigned int i, u32 len)
{
	const struct tern_rdma_msg_hdr *h = (void *)recv_buf(c, i);

	if (len < HDR_LEN || le16toh(h->magic) != TERN_RDMA_MSG_MAGIC ||
	    h->pad_from) {
		say("conn %u: bad message from the peer", c->nr);
		return -1;
	}
	c->tx_credits += le16toh(h->credits);
	if (h->type == TERN_RDMA_MSG_DATA &&
	    write_all(c->tcp, recv_buf(c, i) + HDR_LEN, len - HDR_LEN))
		return -1;
	if (post_recv(c, i))
		return -1;
	c->grant++;
	return 0;
}

/*
 * Every completion waiting: received messages go to TCP, sent buffers
 * are free again.
 */
static int drain_cq(struct conn *c)
{
	struct ibv_wc wc[16];
	int n, k;

	while ((n = ibv_poll_cq(c->cq, 16, wc)) > 0) {
		for (k = 0; k < n; k++) {
			if (wc[k].status != IBV_WC_SUCCESS) {
				say("conn %u: completion %s", c->nr,
				    ibv_wc_status_str(wc[k].status));
				return -1;
			}
			if (wc[k].wr_id >= WR_SEND) {
				c->free_send |= 1U << (wc[k].wr_id - WR_SEND);
				continue;
			}
			if (take_msg(c, wc[k].wr_id, wc[k].byte_len))
				return -1;
		}
	}
	return n < 0 ? -1 : 0;
}

static int conn_cq(struct conn *c)
{
	struct ibv_cq *cq;
	void *ctx;

	if (ibv_get_cq_event(c->ch, &cq, &ctx))
		return errno == EAGAIN ? 0 : -1;
	ibv_ack_cq_events(cq, 1);
	if (ibv_req_notify_cq(cq, 0))
		return -1;
	return drain_cq(c);
}

static void on_connect_request(struct rdma_cm_id *id,
			       const struct rdma_conn_param *peer)
{
	struct tern_rdma_cm_priv priv;
	struct rdma_conn_param param;
	struct conn *c = conn_new();

	if (!c) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	c->id = id;
	id->context = c;
	say("conn %u: rdma connect request", c->nr);
	if (take_priv(c, peer->private_data, peer->private_data_len) &&
	    !conn_queue(c))
		c->tcp = tcp_connect();
	if (c->tcp < 0) {
		rdma_reject(id, NULL, 0);
		conn_close(c, "cannot accept");
		return;
	}
	conn_param(c, &param, &priv);
	if (rdma_accept(id, &param))
		conn_close(c, "accept failed");
}

static void on_route(struct conn *c)
{
	struct tern_rdma_cm_priv priv;
	struct rdma_conn_param param;

	if (conn_queue(c)) {
		conn_close(c, "no queue");
		return;
	}
	conn_param(c, &param, &priv);
	if (rdma_connect(c->id, &param))
		conn_close(c, "connect failed");
}

static void cm_event(void)
{
	struct rdma_conn_param peer;
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type type;
	struct rdma_cm_id *id;
	u8 pdata[256];	/* private_data_len is a u8 */
	struct conn *c;
	int status;

	if (rdma_get_cm_event(ec, &ev))
		return;
	type = ev->event;
	id = ev->id;
	status = ev->status;
	peer = ev->param.conn;
	if (peer.private_data)
		memcpy(pdata, peer.private_data, peer.private_data_len);
	peer.private_data = peer.private_data ? pdata : NULL;
	rdma_ack_cm_event(ev);

	if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		on_connect_request(id, &peer);
		return;
	}
	c = id->context;
	if (!c || !c->used || c->id != id)
		return;
	switch (type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(id, 2000))
			conn_close(c, "route");
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		on_route(c);
		return;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (!accept_rdma &&
		    !take_priv(c, peer.private_data, peer.private_data_len)) {
			conn_close(c, "bad accept");
			return;
		}
		c->ready = true;
		say("conn %u: established", c->nr);
		if (pump_tcp(c))
			conn_close(c, "tcp");
		return;
	case RDMA_CM_EVENT_DISCONNECTED:
		/* what arrived before the disconnect still goes to TCP */
		if (c->cq)
			drain_cq(c);
		conn_close(c, "disconnected");
		return;
	case RDMA_CM_EVENT_REJECTED:
		conn_close(c, "rejected");
		return;
	default:
		say("conn %u: %s (%d)", c->nr, rdma_event_str(type), status);
		conn_close(c, "cm event");
		return;
	}
}

static void on_tcp_accept(void)
{
	struct conn *c;
	int fd, one = 1;

	fd = accept(listen_tcp, NULL, NULL);
	if (fd < 0)
		return;
	c = conn_new();
	if (!c) {
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	c->tcp = fd;
	say("conn %u: tcp connection", c->nr);
	if (rdma_create_id(ec, &c->id, c, RDMA_PS_TCP) ||
	    rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&rdma_addr,
			      2000)) {
		conn_close(c, "resolve");
		return;
	}
}

int main(int argc, char **argv)
{
	const char *acc = NULL, *con = NULL;
	char *name;
	struct pollfd pfd[2 + 2 * MAX_CONNS];
	struct conn *owner[2 + 2 * MAX_CONNS];
	/* the owner's number then: a slot closed and taken again is not it */
	unsigned int owner_nr[2 + 2 * MAX_CONNS];
	bool lingering = false;
	struct sockaddr_storage ss;
	bool rdma_a, rdma_c;
	socklen_t len;
	int opt, one = 1;
	unsigned int i, n;

	while ((opt = getopt(argc, argv, "a:c:f:m:")) != -1) {
		switch (opt) {
		case 'a':
			acc = optarg;
			break;
		case 'c':
			con = optarg;
			break;
		case 'f':
			for (name = strtok(optarg, ","); name;
			     name = strtok(NULL, ",")) {
				for (i = 0; i < F_COUNT; i++)
					if (!strcmp(name, fault_names[i]))
						break;
				if (i == F_COUNT || nr_faults == MAX_CONNS)
					bad_usage();
				faults[nr_faults++] = i;
			}
			break;
		case 'm':
			fault_msg = atoi(optarg);
			break;
		default:
			bad_usage();
		}
	}
	if (!acc || !con || !parse_uri(acc, &rdma_a, &ss, &len))
		bad_usage();
	if (rdma_a) {
		rdma_addr = ss;
		if (!parse_uri(con, &rdma_c, &tcp_addr, &tcp_addr_len) ||
		    rdma_c)
			bad_usage();
	} else {
		tcp_addr = ss;
		tcp_addr_len = len;
		if (!parse_uri(con, &rdma_c, &rdma_addr, &len) || !rdma_c)
			bad_usage();
	}
	accept_rdma = rdma_a;
	setvbuf(stdout, NULL, _IOLBF, 0);

	ec = rdma_create_event_channel();
	if (!ec)
		die("rdma_create_event_channel");
	fcntl(ec->fd, F_SETFL, fcntl(ec->fd, F_GETFL) | O_NONBLOCK);
	if (accept_rdma) {
		if (rdma_create_id(ec, &listen_id, NULL, RDMA_PS_TCP) ||
		    rdma_bind_addr(listen_id, (struct sockaddr *)&rdma_addr) ||
		    rdma_listen(listen_id, 16))
			die(acc);
	} else {
		listen_tcp = socket(tcp_addr.ss_family, SOCK_STREAM, 0);
		if (listen_tcp < 0 ||
		    setsockopt(listen_tcp, SOL_SOCKET, SO_REUSEADDR, &one,
			       sizeof(one)) ||
		    bind(listen_tcp, (struct sockaddr *)&tcp_addr,
			 tcp_addr_len) || listen(listen_tcp, 16))
			die(acc);
	}
	say("relay: %s -> %s, %u connection(s) spoilt, messages at %u",
	    acc, con, nr_faults, fault_msg);

	for (;;) {
		n = 0;
		pfd[n].fd = ec->fd;
		pfd[n].events = POLLIN;
		owner[n++] = NULL;
		if (listen_tcp >= 0) {
			pfd[n].fd = listen_tcp;
			pfd[n].events = POLLIN;
			owner[n++] = NULL;
		}
		for (i = 0; i < MAX_CONNS; i++) {
			struct conn *c = &conns[i];

			if (!c->used)
				continue;
			if (c->ch) {
				pfd[n].fd = c->ch->fd;
				pfd[n].events = POLLIN;
				owner_nr[n] = c->nr;
				owner[n++] = c;
			}
			if (c->tcp >= 0 && c->ready && !c->tcp_eof &&
			    can_send(c, grants(c))) {
				pfd[n].fd = c->tcp;
				pfd[n].events = POLLIN;
				owner_nr[n] = c->nr;
				owner[n++] = c;
			}
		}
		if (poll(pfd, n, lingering ? LINGER_MS / 3 : 1000) < 0 &&
		    errno != EINTR)
			die("poll");
		for (i = 0; i < n; i++) {
			struct conn *c = owner[i];

			if (!pfd[i].revents)
				continue;
			if (!c) {
				if (pfd[i].fd == ec->fd)
					cm_event();
				else
					on_tcp_accept();
				continue;
			}
			if (!c->used || c->nr != owner_nr[i])
				continue;
			if (pfd[i].fd == c->ch->fd ? conn_cq(c) : pump_tcp(c))
				conn_close(c, "stream");
		}
		/* after the completions: data first, then a lone grant */
		lingering = false;
		for (i = 0; i < MAX_CONNS; i++) {
			struct conn *c = &conns[i];

			if (!c->used || !c->ready)
				continue;
			if (lingered(c))
				conn_close(c, "tcp closed");
			else if (pump_tcp(c) || send_credits(c))
				conn_close(c, "stream");
			else
				lingering |= c->tcp_eof;
		}
	}
}
