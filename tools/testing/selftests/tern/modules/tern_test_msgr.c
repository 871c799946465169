// SPDX-License-Identifier: GPL-2.0
/*
 * tern_test_msgr: self-test of the tern messenger, for the VM test lane.
 *
 * Loading it runs the tests (module init fails with -EIO if one fails):
 * an echo responder listens on 127.0.0.1 and [::1], requester sessions
 * send requests of many sizes and buffer offsets in both directions and
 * verify every byte, then a burst exercises the throttle. The responder
 * stays up until rmmod so a shell script can throw junk at it, then run
 * everything again with "echo 1 > /sys/module/tern_test_msgr/parameters/rerun".
 * With rdma_addr= it runs instead the reply status checks over tern_rdma.
 * "echo N > .../hold" sends N writes of 1 MiB into pages the core
 * allocates, which the responder holds unanswered until "echo 0 > .../hold"
 * (reading it says how many were held and refused): the core's data
 * budget is checked from debugfs meanwhile.
 *
 * Locking: the test runs single-threaded except for completions, which
 * only signal a struct completion; counters are atomics.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/highmem.h>
#include <linux/hrtimer.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <tern/compat.h>
#include <tern/tern.h>
#include <tern/transport.h>	/* tern_lane_error(): TT_OP_DROP */

static unsigned int port = 7447;
module_param(port, uint, 0444);
MODULE_PARM_DESC(port, "TCP port of the echo responder (default 7447)");

static unsigned int wait_secs = 120;
module_param(wait_secs, uint, 0644);
MODULE_PARM_DESC(wait_secs,
		 "A request not completed after this many seconds fails its check (default 120)");

static unsigned long tt_wait_jiffies(void)
{
	return msecs_to_jiffies(max(READ_ONCE(wait_secs), 1U) * 1000);
}

static char *rdma_addr;
module_param(rdma_addr, charp, 0444);
MODULE_PARM_DESC(rdma_addr,
		 "An IPv4 address of an RDMA device: the reply status checks run over tern_rdma, and only they (default: none, every check over TCP)");

static unsigned int burst = 256;
module_param(burst, uint, 0644);
MODULE_PARM_DESC(burst, "Requests in the concurrent burst test (default 256)");

enum tt_op {
	TT_OP_PING = 1,		/* front echoed back */
	TT_OP_WRITE,		/* requester data pulled and verified */
	TT_OP_READ,		/* responder data pushed */
	TT_OP_STALL,		/* first copy blocks the responder's lane */
	TT_OP_HARDIRQ,		/* answered from a hard interrupt */
	TT_OP_STATUS,		/* answered with status (s32)len, any value */
	TT_OP_HOLD,		/* a write held unanswered until "hold" is 0 */
	TT_OP_DROP,		/* first copy closes the lane it came on */
	TT_OP_EMPTY_BVEC,	/* tern_pull()/tern_push() of an empty entry */
};

#define TT_HOLD_MAX	256
#define TT_HOLD_SIZE	SZ_1M

struct tt_front {
	__le32	op;
	__le32	len;
	__le32	seed;
	__le32	split;		/* pull in two pieces at this offset */
	u8	pad[16];
};

struct tt_buf {
	unsigned int	nr;
	struct page	**pages;
	struct bio_vec	*bvec;
	u32		len;
};

static struct tern_endpoint *tt_srv, *tt_cli;
static struct tern_session *tt_keep;	/* left open for the stats check */
static struct tern_listener *tt_lis4, *tt_lis6, *tt_lis_rdma;
static atomic_t tt_srv_requests = ATOMIC_INIT(0);
static atomic_t tt_srv_resent = ATOMIC_INIT(0);
static atomic_t tt_srv_bad = ATOMIC_INIT(0);
static DEFINE_MUTEX(tt_run_lock);
static bool tt_ran;	/* tt_run() ran once: what follows are reruns */

/* responder: TT_OP_HOLD requests not answered yet */
static DEFINE_SPINLOCK(tt_held_lock);
static struct tern_srv_req *tt_held[TT_HOLD_MAX];
static unsigned int tt_nr_held;

static u8 tt_pattern(u32 seed, u32 i)
{
	return (seed * 131 + i * 7 + (i >> 9)) & 0xff;
}

static void tt_buf_free(struct tt_buf *b)
{
	unsigned int i;

	for (i = 0; i < b->nr; i++)
		if (b->pages[i])
			__free_page(b->pages[i]);
	kfree(b->pages);
	kfree(b->bvec);
	memset(b, 0, sizeof(*b));
}

/* A buffer of @len bytes starting @offset bytes into its first page. */
static int tt_buf_alloc(struct tt_buf *b, u32 len, u32 offset, gfp_t gfp)
{
	unsigned int i;
	u32 left = len;

	memset(b, 0, sizeof(*b));
	b->len = len;
	if (!len)
		return 0;
	b->nr = DIV_ROUND_UP(offset + len, PAGE_SIZE);
	b->pages = kcalloc(b->nr, sizeof(*b->pages), gfp);
	b->bvec = kcalloc(b->nr, sizeof(*b->bvec), gfp);
	if (!b->pages || !b->bvec)
		goto fail;
	for (i = 0; i < b->nr; i++) {
		u32 start = i ? 0 : offset;
		u32 n = min_t(u32, left, PAGE_SIZE - start);

		b->pages[i] = alloc_page(gfp | __GFP_ZERO);
		if (!b->pages[i])
			goto fail;
		bvec_set_page(&b->bvec[i], b->pages[i], n, start);
		left -= n;
	}
	return 0;
fail:
	tt_buf_free(b);
	return -ENOMEM;
}

/* Fill (@check false) or verify (@check true) the pattern. */
static int tt_buf_pattern(const struct bio_vec *bv, unsigned int nr, u32 len,
			  u32 seed, u32 first, bool check)
{
	u32 pos = first, i, j;

	for (i = 0; i < nr && len; i++) {
		u32 n = min(bv[i].bv_len, len);
		u8 *p = kmap_local_page(bv[i].bv_page);

		for (j = 0; j < n; j++, pos++) {
			u8 *c = p + bv[i].bv_offset + j;

			if (!check) {
				*c = tt_pattern(seed, pos);
			} else if (*c != tt_pattern(seed, pos)) {
				kunmap_local(p);
				return -EILSEQ;
			}
		}
		kunmap_local(p);
		len -= n;
	}
	return 0;
}

/* ---- responder ---- */

static void tt_xfer_done(struct tern_srv_req *sreq, int status)
{
	if (status)
		atomic_inc(&tt_srv_bad);
}

static int tt_alloc_data(struct tern_srv_req *sreq)
{
	const struct tt_front *f = sreq->front;
	struct tt_buf *b;

	/* Even seeds receive straight into our pages; odd ones are copied. */
	if (sreq->front_len != sizeof(*f) || le32_to_cpu(f->seed) & 1)
		return 0;
	b = kzalloc(sizeof(*b), GFP_NOIO);
	if (!b)
		return -ENOMEM;
	if (tt_buf_alloc(b, sreq->data_len, 0, GFP_NOIO)) {
		kfree(b);
		return -ENOMEM;
	}
	sreq->priv = b;
	sreq->rx_bvec = b->bvec;
	sreq->rx_nr_bvec = b->nr;
	return 0;
}

static void tt_release(struct tern_srv_req *sreq)
{
	struct tt_buf *b = sreq->priv;

	if (b) {
		tt_buf_free(b);
		kfree(b);
	}
}

static int tt_handle_write(struct tern_srv_req *sreq, const struct tt_front *f)
{
	u32 len = sreq->data_len, split = le32_to_cpu(f->split);
	struct tt_buf *b = sreq->priv;
	int err;

	if (!len)
		return sreq->dir == TERN_DATA_NONE ? 0 : -EINVAL;
	if (!b) {
		b = kzalloc(sizeof(*b), GFP_NOIO);
		if (!b || tt_buf_alloc(b, len, 0, GFP_NOIO)) {
			kfree(b);
			return -ENOMEM;
		}
		sreq->priv = b;
	}
	if (split && split < len && !sreq->rx_bvec) {
		/* Two pulls: the tail into a second buffer, then the head. */
		struct tt_buf tail;

		if (tt_buf_alloc(&tail, len - split, 0, GFP_NOIO))
			return -ENOMEM;
		err = tern_pull(sreq, tail.bvec, tail.nr, split, len - split,
				tt_xfer_done);
		if (!err)
			err = tt_buf_pattern(tail.bvec, tail.nr, len - split,
					     le32_to_cpu(f->seed), split, true);
		tt_buf_free(&tail);
		if (err)
			return err;
		err = tern_pull(sreq, b->bvec, b->nr, 0, split, tt_xfer_done);
		if (!err)
			err = tt_buf_pattern(b->bvec, b->nr, split,
					     le32_to_cpu(f->seed), 0, true);
		return err;
	}
	err = tern_pull(sreq, b->bvec, b->nr, 0, len, tt_xfer_done);
	if (err)
		return err;
	return tt_buf_pattern(b->bvec, b->nr, len, le32_to_cpu(f->seed), 0,
			      true);
}

static int tt_handle_read(struct tern_srv_req *sreq, const struct tt_front *f)
{
	u32 len = le32_to_cpu(f->len);
	struct tt_buf *b;
	int err;

	if (len > sreq->data_len)
		return -EINVAL;
	if (!len)
		return 0;
	b = kzalloc(sizeof(*b), GFP_NOIO);
	if (!b || tt_buf_alloc(b, len, 0, GFP_NOIO)) {
		kfree(b);
		return -ENOMEM;
	}
	sreq->priv = b;
	tt_buf_pattern(b->bvec, b->nr, len, le32_to_cpu(f->seed), 0, false);
	err = tern_push(sreq, b->bvec, b->nr, len, tt_xfer_done);
	return err;
}

/*
 * The responder's calls refuse an empty bio_vec among the entries that
 * hold the data, as tern_send() does: -EIO when tern_pull() or
 * tern_push() took it; else the same call with the entries whole gives
 * the answer, so a refusal of everything fails too.
 */
static int tt_handle_empty_bvec(struct tern_srv_req *sreq)
{
	struct tt_empty {
		struct tt_buf	buf;	/* first: tt_release() frees it all */
		struct bio_vec	bv[3];	/* tern_push() keeps them */
	} *e;
	u32 len = sreq->data_len;
	int err;

	/* with an even seed tt_alloc_data() took sreq->priv */
	if (len <= PAGE_SIZE || len > 2 * PAGE_SIZE || sreq->priv)
		return -EINVAL;
	e = kzalloc(sizeof(*e), GFP_NOIO);
	if (!e || tt_buf_alloc(&e->buf, len, 0, GFP_NOIO)) {
		kfree(e);
		return -ENOMEM;
	}
	sreq->priv = &e->buf;
	e->bv[0] = e->buf.bvec[0];
	bvec_set_page(&e->bv[1], e->buf.pages[0], 0, 0);
	e->bv[2] = e->buf.bvec[1];
	if (sreq->dir == TERN_DATA_TO_RESPONDER) {
		err = tern_pull(sreq, e->bv, ARRAY_SIZE(e->bv), 0, len,
				tt_xfer_done);
		if (err == -EINVAL)
			err = tern_pull(sreq, e->buf.bvec, e->buf.nr, 0, len,
					tt_xfer_done);
	} else {
		err = tern_push(sreq, e->bv, ARRAY_SIZE(e->bv), len,
				tt_xfer_done);
		if (err == -EINVAL)
			err = tern_push(sreq, e->buf.bvec, e->buf.nr, len,
					tt_xfer_done);
	}
	return err == -EINVAL ? -EIO : err;
}

struct tt_irq_reply {
	struct hrtimer		timer;
	struct tern_srv_req	*sreq;
};

static enum hrtimer_restart tt_irq_reply_fn(struct hrtimer *timer)
{
	struct tt_irq_reply *r = container_of(timer, struct tt_irq_reply,
					      timer);
	struct tern_srv_req *sreq = r->sreq;

	kfree(r);
	if (tern_reply(sreq, 0, sreq->front, sreq->front_len))
		atomic_inc(&tt_srv_bad);
	return HRTIMER_NORESTART;
}

/* Answer from hard interrupt context, as a block target's end_io may. */
static int tt_reply_from_irq(struct tern_srv_req *sreq)
{
	struct tt_irq_reply *r = kzalloc(sizeof(*r), GFP_NOIO);

	if (!r)
		return -ENOMEM;
	r->sreq = sreq;
	tern_hrtimer_setup(&r->timer, tt_irq_reply_fn, CLOCK_MONOTONIC,
			   HRTIMER_MODE_REL_HARD);
	hrtimer_start(&r->timer, ms_to_ktime(1), HRTIMER_MODE_REL_HARD);
	return 0;
}

static bool tt_hold_keep(struct tern_srv_req *sreq)
{
	bool kept = false;

	spin_lock(&tt_held_lock);
	if (tt_nr_held < TT_HOLD_MAX) {
		tt_held[tt_nr_held++] = sreq;
		kept = true;
	}
	spin_unlock(&tt_held_lock);
	return kept;
}

/* Check the data of every held request, then answer it. */
static int tt_hold_answer(void)
{
	unsigned int i, n;
	int err = 0;

	spin_lock(&tt_held_lock);
	n = tt_nr_held;
	tt_nr_held = 0;
	spin_unlock(&tt_held_lock);
	for (i = 0; i < n; i++) {
		struct tern_srv_req *sreq = tt_held[i];
		int status = tt_handle_write(sreq, sreq->front);

		if (status) {
			pr_err("hold: request %llu: data check %d\n", sreq->tid,
			       status);
			err = -EIO;
		}
		if (tern_reply(sreq, status, sreq->front, sreq->front_len))
			err = -EIO;
	}
	return err;
}

static void tt_request(struct tern_srv_req *sreq)
{
	const struct tt_front *f = sreq->front;
	int status = -EINVAL;

	atomic_inc(&tt_srv_requests);
	if (sreq->resent)
		atomic_inc(&tt_srv_resent);
	if (sreq->front_len == sizeof(*f)) {
		switch (le32_to_cpu(f->op)) {
		case TT_OP_PING:
			status = 0;
			break;
		case TT_OP_WRITE:
			status = tt_handle_write(sreq, f);
			break;
		case TT_OP_READ:
			status = tt_handle_read(sreq, f);
			break;
		case TT_OP_HARDIRQ:
			if (!tt_reply_from_irq(sreq))
				return;
			status = -ENOMEM;
			break;
		case TT_OP_STATUS:
			/* what a broken or hostile responder could send */
			if (tern_reply(sreq, (s32)le32_to_cpu(f->len), NULL, 0))
				atomic_inc(&tt_srv_bad);
			return;
		case TT_OP_HOLD:
			if (tt_hold_keep(sreq))
				return;
			status = -ENOSPC;
			break;
		case TT_OP_DROP:
			/* a transport's call, from a ULP: a test's shortcut */
			if (!sreq->resent)
				tern_lane_error(sreq->lane, -ECONNRESET);
			status = 0;
			break;
		case TT_OP_EMPTY_BVEC:
			status = tt_handle_empty_bvec(sreq);
			break;
		case TT_OP_STALL:
			/* Starve the requester's keepalive: it must resend. */
			if (!sreq->resent)
				msleep(le32_to_cpu(f->len));
			status = 0;
			break;
		}
	}
	if (status)
		atomic_inc(&tt_srv_bad);
	if (tern_reply(sreq, status, sreq->front, sreq->front_len))
		atomic_inc(&tt_srv_bad);
}

static const struct tern_endpoint_ops tt_srv_ops = {
	.request	= tt_request,
	.alloc_data	= tt_alloc_data,
	.release	= tt_release,
};

/* ---- requester ---- */

struct tt_req {
	struct tern_request	req;
	struct completion	done;
	atomic_t		dones;	/* done() calls: one, or a bug */
	struct tt_front		front;
	struct tt_front		reply;
	struct tt_buf		buf;
};

static void tt_req_done(struct tern_request *req)
{
	struct tt_req *r = container_of(req, struct tt_req, req);

	atomic_inc(&r->dones);
	complete(&r->done);
}

/*
 * Wait for @r, at most @tmo jiffies: a messenger bug must fail the check,
 * not hang the test. The wait is killable, so waits longer than the
 * guest's hung-task timeout are not reported as hangs.
 * Return: 0 when it completed in time, -ETIMEDOUT when it had to be
 * cancelled.
 */
static int tt_req_wait(struct tt_req *r, unsigned long tmo, const char *what)
{
	if (wait_for_completion_killable_timeout(&r->done, tmo) > 0)
		return 0;
	pr_err("%s: no completion after %u ms, cancelling\n", what,
	       jiffies_to_msecs(tmo));
	tern_cancel(&r->req);
	wait_for_completion(&r->done);
	return -ETIMEDOUT;
}

static void tt_req_prep(struct tt_req *r, enum tt_op op, u32 len, u32 seed,
			u32 split)
{
	tern_request_init(&r->req);
	init_completion(&r->done);
	atomic_set(&r->dones, 0);
	memset(&r->front, 0, sizeof(r->front));
	r->front.op = cpu_to_le32(op);
	r->front.len = cpu_to_le32(len);
	r->front.seed = cpu_to_le32(seed);
	r->front.split = cpu_to_le32(split);
	r->req.front = &r->front;
	r->req.front_len = sizeof(r->front);
	r->req.reply_front = &r->reply;
	r->req.reply_front_max = sizeof(r->reply);
	r->req.done = tt_req_done;
	r->req.lane_hint = seed;
	if (op != TT_OP_WRITE && op != TT_OP_READ)
		return;
	r->req.dir = op == TT_OP_WRITE ? TERN_DATA_TO_RESPONDER :
					 TERN_DATA_FROM_RESPONDER;
	r->req.bvec = r->buf.bvec;
	r->req.nr_bvec = r->buf.nr;
	r->req.data_len = len;
}

static int tt_req_check(struct tt_req *r, const char *what)
{
	u32 len = le32_to_cpu(r->front.len);

	if (r->req.status || r->req.reply_status) {
		pr_err("%s: status %d reply_status %d\n", what, r->req.status,
		       r->req.reply_status);
		return -EIO;
	}
	if (r->req.reply_front_len != sizeof(r->reply) ||
	    memcmp(&r->reply, &r->front, sizeof(r->reply))) {
		pr_err("%s: reply front mismatch\n", what);
		return -EIO;
	}
	if (le32_to_cpu(r->front.op) == TT_OP_READ) {
		if (r->req.reply_data_len != len) {
			pr_err("%s: got %u data bytes, want %u\n", what,
			       r->req.reply_data_len, len);
			return -EIO;
		}
		if (tt_buf_pattern(r->buf.bvec, r->buf.nr, len,
				   le32_to_cpu(r->front.seed), 0, true)) {
			pr_err("%s: read data mismatch\n", what);
			return -EIO;
		}
	}
	return 0;
}

static int tt_one(struct tern_session *sess, enum tt_op op, u32 len,
		  u32 offset, u32 seed, u32 split)
{
	struct tt_req *r;
	char what[64];
	int err;

	snprintf(what, sizeof(what), "op %d len %u offset %u seed %u", op,
		 len, offset, seed);
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	err = tt_buf_alloc(&r->buf, op == TT_OP_PING ? 0 : len, offset,
			   GFP_KERNEL);
	if (err)
		goto out;
	if (op == TT_OP_WRITE)
		tt_buf_pattern(r->buf.bvec, r->buf.nr, len, seed, 0, false);
	tt_req_prep(r, op, op == TT_OP_PING ? 0 : len, seed, split);
	err = tern_send(sess, &r->req, 0);
	if (err) {
		pr_err("%s: tern_send: %d\n", what, err);
		goto out;
	}
	err = tt_req_wait(r, tt_wait_jiffies(), what) ?: tt_req_check(r, what);
out:
	tt_buf_free(&r->buf);
	kfree(r);
	return err;
}

/*
 * A reply status reaches the requester only as an errno tern knows; any
 * other value from the wire (positive, below -MAX_ERRNO, or one the core
 * keeps for local events) arrives as -EREMOTEIO.
 */
static int tt_statuses(struct tern_session *sess, const char *name)
{
	static const struct {
		s32 sent;
		int seen;
	} cases[] = {
		{ 0, 0 }, { -EIO, -EIO }, { -ESTALE, -ESTALE },
		{ -ENOMEM, -ENOMEM }, { -EREMOTEIO, -EREMOTEIO },
		{ -ECANCELED, -EREMOTEIO }, { -ENOTSUPP, -EREMOTEIO },
		{ -MAX_ERRNO, -EREMOTEIO }, { -5000, -EREMOTEIO },
		{ 7, -EREMOTEIO }, { S32_MIN, -EREMOTEIO },
	};
	unsigned int i;
	struct tt_req *r;
	int err = 0;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	for (i = 0; i < ARRAY_SIZE(cases) && !err; i++) {
		tt_req_prep(r, TT_OP_STATUS, (u32)cases[i].sent, i, 0);
		err = tern_send(sess, &r->req, 0) ?:
		      tt_req_wait(r, tt_wait_jiffies(), "status");
		if (err)
			break;
		if (r->req.status || r->req.reply_status != cases[i].seen) {
			pr_err("%s: status %d sent, %d/%d seen, want 0/%d\n",
			       name, cases[i].sent, r->req.status,
			       r->req.reply_status, cases[i].seen);
			err = -EIO;
		}
	}
	kfree(r);
	return err;
}

/*
 * The status rule is the core's, whatever the transport: check it over
 * RDMA too when asked (rdma.sh), where a userspace peer cannot play a
 * responder.
 */
static int tt_rdma_statuses(void)
{
	struct tern_session *sess;
	char uri[64];
	int err;

	snprintf(uri, sizeof(uri), "rdma://%s:%u", rdma_addr, port);
	if (!tt_lis_rdma)
		tt_lis_rdma = tern_listen(tt_srv, uri);
	if (IS_ERR(tt_lis_rdma)) {
		err = PTR_ERR(tt_lis_rdma);
		tt_lis_rdma = NULL;
		pr_err("listen %s: %d\n", uri, err);
		return err;
	}
	sess = tern_connect(tt_cli, uri, NULL);
	if (IS_ERR(sess)) {
		pr_err("%s: connect: %ld\n", uri, PTR_ERR(sess));
		return PTR_ERR(sess);
	}
	err = tt_statuses(sess, uri);
	tern_session_destroy(sess);
	return err;
}

static int tt_sizes(struct tern_session *sess, const char *name)
{
	static const u32 sizes[] = { 0, 1, 511, 4096, 4097, 65536, 1 << 20 };
	static const u32 offsets[] = { 0, 1, 513, 4095 };
	unsigned int i, j, seed = 0;
	int err;

	err = tt_one(sess, TT_OP_PING, 0, 0, seed++, 0);
	for (i = 0; !err && i < 16; i++)
		err = tt_one(sess, TT_OP_HARDIRQ, 0, 0, seed++, 0);
	for (i = 0; !err && i < ARRAY_SIZE(sizes); i++) {
		for (j = 0; !err && j < ARRAY_SIZE(offsets); j++) {
			u32 len = sizes[i], off = offsets[j];

			if (len + off > (1 << 20))
				continue;
			err = tt_one(sess, TT_OP_WRITE, len, off, seed++, 0);
			if (!err)
				err = tt_one(sess, TT_OP_WRITE, len, off, seed++,
					     len / 3);
			if (!err)
				err = tt_one(sess, TT_OP_READ, len, off, seed++,
					     0);
		}
	}
	pr_info("%s: size/offset matrix %s\n", name, err ? "FAILED" : "ok");
	return err;
}

/*
 * An empty bio_vec among the entries that hold a request's data is refused
 * by tern_send() (the transports' page walks would make no progress on
 * it), and by the responder's tern_pull() and tern_push(); empty entries
 * past the data are never looked at.
 */
static int tt_empty_bvecs(struct tern_session *sess, const char *name)
{
	static const struct {
		enum tt_op op;
		u32 len;
		u8 empty;	/* index of the empty entry in the 3 */
		int want;
	} cases[] = {
		{ TT_OP_WRITE, 2 * PAGE_SIZE, 1, -EINVAL },
		{ TT_OP_READ, 2 * PAGE_SIZE, 0, -EINVAL },
		{ TT_OP_WRITE, PAGE_SIZE, 1, 0 },
		{ TT_OP_READ, PAGE_SIZE, 1, 0 },
	};
	unsigned int i, j, k, seed;
	struct bio_vec bv[3];
	struct tt_req *r;
	int err = 0;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	err = tt_buf_alloc(&r->buf, 2 * PAGE_SIZE, 0, GFP_KERNEL);
	for (i = 0; !err && i < ARRAY_SIZE(cases); i++) {
		for (j = 0, k = 0; j < ARRAY_SIZE(bv); j++) {
			if (j == cases[i].empty)
				bvec_set_page(&bv[j], r->buf.pages[0], 0, 0);
			else
				bv[j] = r->buf.bvec[k++];
		}
		/* a read must overwrite another seed's pattern */
		seed = i;
		if (cases[i].op == TT_OP_READ)
			seed += 100;
		tt_buf_pattern(r->buf.bvec, r->buf.nr, cases[i].len, seed, 0,
			       false);
		tt_req_prep(r, cases[i].op, cases[i].len, i, 0);
		r->req.bvec = bv;
		r->req.nr_bvec = ARRAY_SIZE(bv);
		err = tern_send(sess, &r->req, 0);
		if (err != cases[i].want) {
			pr_err("%s: empty bio_vec %u of 3, op %d len %u: tern_send %d, want %d\n",
			       name, cases[i].empty, cases[i].op, cases[i].len,
			       err, cases[i].want);
			if (!err)
				tt_req_wait(r, tt_wait_jiffies(), "empty bvec");
			err = -EIO;
			break;
		}
		if (err) {
			err = atomic_read(&r->dones) ? -EIO : 0;
			continue;
		}
		err = tt_req_wait(r, tt_wait_jiffies(), "empty bvec") ?:
		      tt_req_check(r, "empty bvec");
	}
	/*
	 * The responder's tern_pull() and tern_push() refuse them too (an
	 * odd seed: tt_alloc_data() supplies no pages of its own).
	 */
	for (i = 0; !err && i < 2; i++) {
		tt_req_prep(r, TT_OP_EMPTY_BVEC, 2 * PAGE_SIZE, 1001, 0);
		r->req.dir = i ? TERN_DATA_FROM_RESPONDER :
				 TERN_DATA_TO_RESPONDER;
		r->req.bvec = r->buf.bvec;
		r->req.nr_bvec = r->buf.nr;
		r->req.data_len = 2 * PAGE_SIZE;
		err = tern_send(sess, &r->req, 0) ?:
		      tt_req_wait(r, tt_wait_jiffies(), "empty bvec");
		if (!err && (r->req.status || r->req.reply_status ||
			     r->req.reply_data_len != (i ? 2 * PAGE_SIZE : 0))) {
			pr_err("%s: the responder's tern_%s() with an empty bio_vec: status %d/%d, %u bytes back\n",
			       name, i ? "push" : "pull", r->req.status,
			       r->req.reply_status, r->req.reply_data_len);
			err = -EIO;
		}
	}
	tt_buf_free(&r->buf);
	kfree(r);
	pr_info("%s: empty bio_vecs %s\n", name, err ? "FAILED" : "ok");
	return err;
}

/* Many requests at once, more than the queue depth: the throttle waits. */
static int tt_burst(struct tern_session *sess, const char *name)
{
	unsigned int i, n = burst;
	struct tt_req *rs;
	int err = 0;

	rs = kvcalloc(n, sizeof(*rs), GFP_KERNEL);
	if (!rs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		struct tt_req *r = &rs[i];
		enum tt_op op = i % 3 == 0 ? TT_OP_WRITE :
				i % 3 == 1 ? TT_OP_READ : TT_OP_PING;
		u32 len = op == TT_OP_PING ? 0 : 16384 + i * 3;

		if (tt_buf_alloc(&r->buf, len, i % 7, GFP_KERNEL)) {
			err = -ENOMEM;
			break;
		}
		if (op == TT_OP_WRITE)
			tt_buf_pattern(r->buf.bvec, r->buf.nr, len, i, 0, false);
		tt_req_prep(r, op, len, i, 0);
		err = tern_send(sess, &r->req, 0);
		if (err) {
			tt_buf_free(&r->buf);
			pr_err("%s: burst send %u: %d\n", name, i, err);
			break;
		}
	}
	n = i;
	for (i = 0; i < n; i++) {
		int werr = tt_req_wait(&rs[i], tt_wait_jiffies(), "burst");

		if (!err)
			err = werr ?: tt_req_check(&rs[i], "burst");
		tt_buf_free(&rs[i].buf);
	}
	kvfree(rs);
	pr_info("%s: burst of %u %s\n", name, n, err ? "FAILED" : "ok");
	return err;
}

/*
 * Cancel @r until tern_cancel() stops answering -EBUSY (its reply was
 * coming in: that lane is reset, and the next try finds it resent or
 * parked). Bounded: the check fails rather than spins.
 */
static int tt_cancel(struct tt_req *r)
{
	unsigned int tries;

	for (tries = 0; tries < 200; tries++) {
		int err = tern_cancel(&r->req);

		if (err != -EBUSY)
			return err == -ENOENT ? 0 : err;
		usleep_range(10000, 20000);
	}
	return -EBUSY;
}

/*
 * Requests cancelled while queued, being sent, being answered or
 * completing, in batches on all lanes: each ends exactly once, with its
 * verified reply or -ECANCELED, and the session goes on. A transmit
 * reference taken after the frame left its queue, or a reply completing
 * a request being cancelled, shows here as a refcount warning (the
 * guest panics on WARN), a second done() or a wrong status.
 */
static int tt_cancels(struct tern_session *sess, const char *name)
{
	unsigned int i, b, end, sent = 0, n = 256, batch = 8, cancelled = 0;
	struct tt_req *rs;
	int err = 0;

	rs = kvcalloc(n, sizeof(*rs), GFP_KERNEL);
	if (!rs)
		return -ENOMEM;
	for (b = 0; b < n && !err; b += batch) {
		for (i = b; i < b + batch; i++) {
			struct tt_req *r = &rs[i];
			enum tt_op op = i % 3 == 0 ? TT_OP_WRITE :
					i % 3 == 1 ? TT_OP_READ : TT_OP_PING;
			u32 len = op == TT_OP_PING ? 0 : 4096U << (i % 5);

			err = tt_buf_alloc(&r->buf, len, i % 3, GFP_KERNEL);
			if (err)
				break;
			if (op == TT_OP_WRITE)
				tt_buf_pattern(r->buf.bvec, r->buf.nr, len, i,
					       0, false);
			tt_req_prep(r, op, len, i, 0);
			err = tern_send(sess, &r->req, 0);
			if (err) {
				pr_err("%s: cancel batch send %u: %d\n", name,
				       i, err);
				break;
			}
		}
		end = i;
		sent = end;
		/* at once, or up to about a loopback round trip later */
		for (i = b; i < end && !err; i++) {
			if (i % 4)
				udelay(get_random_u32_below(300));
			err = tt_cancel(&rs[i]);
			if (err)
				pr_err("%s: cancel %u: %d\n", name, i, err);
		}
		for (i = b; i < end; i++) {
			struct tt_req *r = &rs[i];

			if (tt_req_wait(r, tt_wait_jiffies(), "cancel"))
				err = err ?: -EIO;
			else if (r->req.status == -ECANCELED)
				cancelled++;
			else if (tt_req_check(r, "cancelled request"))
				err = err ?: -EIO;
		}
	}
	/* a late second done() would come from a lane's work: let it run */
	msleep(100);
	for (i = 0; i < n; i++) {
		if (i < sent && atomic_read(&rs[i].dones) != 1) {
			pr_err("%s: request %u: done() ran %d times\n", name,
			       i, atomic_read(&rs[i].dones));
			err = err ?: -EIO;
		}
		tt_buf_free(&rs[i].buf);
	}
	kvfree(rs);
	err = err ?: tt_one(sess, TT_OP_READ, 65536, 0, 7, 0);
	pr_info("%s: %u requests cancelled in flight (%u of them before their reply) %s\n",
		name, n, cancelled, err ? "FAILED" : "ok");
	return err;
}

struct tt_thread {
	struct tern_session	*sess;
	unsigned int		idx;
	int			err;
	struct completion	exited;
};

/* One of several threads sending on the same session at once. */
static int tt_thread_fn(void *arg)
{
	struct tt_thread *t = arg;
	unsigned int i;

	for (i = 0; i < 64 && !t->err; i++) {
		u32 seed = t->idx * 100000 + i;
		u32 len = (seed * 2654435761U) % (128 * 1024);
		enum tt_op op = i & 1 ? TT_OP_READ : TT_OP_WRITE;

		t->err = tt_one(t->sess, op, len, seed % 4096, seed,
				i % 5 ? 0 : len / 2);
	}
	complete(&t->exited);
	return 0;
}

static int tt_threads(struct tern_session *sess, const char *name)
{
	struct tt_thread t[4];
	struct task_struct *task;
	unsigned int i, n = 0;
	int err = 0;

	for (i = 0; i < ARRAY_SIZE(t); i++) {
		t[i].sess = sess;
		t[i].idx = i;
		t[i].err = 0;
		init_completion(&t[i].exited);
		task = kthread_run(tt_thread_fn, &t[i], "tt_msgr/%u", i);
		if (IS_ERR(task)) {
			err = PTR_ERR(task);
			break;
		}
		n++;
	}
	for (i = 0; i < n; i++) {
		/* bounded: every request of the thread is (tt_req_wait) */
		wait_for_completion_state(&t[i].exited, TASK_IDLE);
		err = err ?: t[i].err;
	}
	pr_info("%s: %u threads %s\n", name, n, err ? "FAILED" : "ok");
	return err;
}

static int tt_uri_checks(void)
{
	static const char *const bad[] = {
		"", "tcp", "tcp://", "tcp:/1.2.3.4", "tcp://1.2.3",
		"tcp://1.2.3.4.5", "tcp://256.1.1.1", "tcp://[::1",
		"tcp://::1", "tcp://[::1]x", "tcp://[::1]:", "tcp://1.2.3.4:",
		"tcp://1.2.3.4:0", "tcp://1.2.3.4:65536", "tcp://1.2.3.4:12a",
		"tcp://1.2.3.4:+12", "tcp://host:80", "TCP://1.2.3.4",
		"tcp://1.2.3.4/x", "tcp://[fe80::1%eth0]", "://1.2.3.4",
	};
	static const char *const good[] = {
		"tcp://1.2.3.4", "tcp://127.0.0.1:4420", "tcp://[::1]",
		"tcp://[::1]:4420", "rdma://10.0.0.1:1",
		"tcp://[2001:db8::1]:65535",
	};
	struct sockaddr_storage ss;
	char scheme[16];
	unsigned int i;
	int err = 0;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		if (tern_parse_uri(bad[i], scheme, sizeof(scheme), &ss) !=
		    -EINVAL) {
			pr_err("uri \"%s\" accepted\n", bad[i]);
			err = -EIO;
		}
	}
	for (i = 0; i < ARRAY_SIZE(good); i++) {
		if (tern_parse_uri(good[i], scheme, sizeof(scheme), &ss)) {
			pr_err("uri \"%s\" refused\n", good[i]);
			err = -EIO;
		}
	}
	pr_info("uri parsing %s\n", err ? "FAILED" : "ok");
	return err;
}

/*
 * tern_endpoint_create() takes a ULP's configuration: every bound refuses
 * with -EINVAL and creates nothing, and each bound's edge is accepted.
 */
static int tt_conf_checks(void)
{
	static const struct tern_endpoint_conf bad[] = {
		{ .name = "" },
		{ .name = "a/b" },
		{ .name = "msgr_test_conf_name_longer_than_an_endpoint_keeps" },
		{ .name = "c", .max_lanes = TERN_WIRE_MAX_LANES + 1 },
		{ .name = "c", .max_queue_depth = TERN_WIRE_MAX_QDEPTH + 1 },
		{ .name = "c", .max_data = TERN_WIRE_MAX_DATA + 1 },
		{ .name = "c", .max_data = TERN_MIN_MAX_DATA - 1 },
		{ .name = "c", .req_space = TERN_MAX_REQ_SPACE + 1 },
	};
	static const struct tern_endpoint_conf good[] = {
		{ .name = "c", .max_lanes = TERN_WIRE_MAX_LANES },
		{ .name = "c", .max_queue_depth = TERN_WIRE_MAX_QDEPTH },
		{ .name = "c", .max_data = TERN_MIN_MAX_DATA },
		{ .name = "c", .req_space = TERN_MAX_REQ_SPACE },
	};
	struct tern_endpoint *ep;
	unsigned int i;
	int err = 0;

	if (!IS_ERR(tern_endpoint_create(NULL))) {
		pr_err("conf: NULL accepted\n");
		return -EIO;
	}
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		ep = tern_endpoint_create(&bad[i]);
		if (!IS_ERR(ep)) {
			pr_err("conf: bad[%u] accepted\n", i);
			tern_endpoint_destroy(ep);
			err = -EIO;
		} else if (PTR_ERR(ep) != -EINVAL) {
			pr_err("conf: bad[%u] gave %ld, want -EINVAL\n", i,
			       PTR_ERR(ep));
			err = -EIO;
		}
	}
	for (i = 0; i < ARRAY_SIZE(good); i++) {
		ep = tern_endpoint_create(&good[i]);
		if (IS_ERR(ep)) {
			pr_err("conf: good[%u] refused: %ld\n", i, PTR_ERR(ep));
			err = -EIO;
			continue;
		}
		tern_endpoint_destroy(ep);
	}
	pr_info("endpoint configuration bounds %s\n", err ? "FAILED" : "ok");
	return err;
}

static int tt_session(const char *uri, unsigned int lanes, bool crc,
		      unsigned int qd)
{
	struct tern_session_opts o = {
		.nr_lanes = lanes,
		.data_crc = crc,
		.queue_depth = qd,
		.keepalive_ms = 1000,
		.keepalive_timeout_ms = 5000,
		.reconnect_min_ms = 50,
		.reconnect_max_ms = 1000,
	};
	struct tern_session_info info;
	struct tern_session *sess;
	char name[96];
	int err;

	snprintf(name, sizeof(name), "%s lanes=%u crc=%d qd=%u", uri, lanes,
		 crc, qd);
	sess = tern_connect(tt_cli, uri, &o);
	if (IS_ERR(sess)) {
		pr_err("%s: connect: %ld\n", name, PTR_ERR(sess));
		return PTR_ERR(sess);
	}
	tern_session_get_info(sess, &info);
	if (info.nr_lanes != lanes || info.queue_depth != qd ||
	    !(info.features & TERN_FEAT_DATA_CRC) != !crc) {
		pr_err("%s: negotiated lanes %u qd %u features %x\n", name,
		       info.nr_lanes, info.queue_depth, info.features);
		err = -EIO;
	} else {
		err = tt_sizes(sess, name);
		if (!err)
			err = tt_empty_bvecs(sess, name);
		if (!err)
			err = tt_statuses(sess, name);
		if (!err)
			err = tt_burst(sess, name);
		if (!err)
			err = tt_threads(sess, name);
		if (!err)
			err = tt_cancels(sess, name);
	}
	tern_session_destroy(sess);
	return err;
}

/* Send a ping; return the request's status (not a verdict). */
static int tt_ping_status(struct tern_session *sess, unsigned long tmo)
{
	struct tt_req *r;
	int err;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	tt_req_prep(r, TT_OP_PING, 0, 1, 0);
	err = tern_send(sess, &r->req, TERN_SEND_NOWAIT);
	if (!err) {
		/* A timeout must not happen: the loss timeout bounds it. */
		err = tt_req_wait(r, tmo, "ping") ? -EIO :
			r->req.status ?: r->req.reply_status;
	}
	kfree(r);
	return err;
}

static struct tern_endpoint *tt_peer_start(const char *uri,
					   struct tern_listener **lis)
{
	struct tern_endpoint_conf conf = {
		.name = "msgr_test_peer",
		.ops = &tt_srv_ops,
	};
	struct tern_endpoint *ep = tern_endpoint_create(&conf);

	if (IS_ERR(ep))
		return ep;
	*lis = tern_listen(ep, uri);
	if (IS_ERR(*lis)) {
		tern_endpoint_destroy(ep);
		return ERR_CAST(*lis);
	}
	return ep;
}

/*
 * The responder goes away: pending requests fail after the loss timeout,
 * new ones fail fast; it comes back as a new incarnation: the session
 * reconnects by itself and works again.
 */
static int tt_reconnect(void)
{
	struct tern_session_opts o = {
		.nr_lanes = 2,
		.keepalive_ms = 500,
		.keepalive_timeout_ms = 2000,
		.reconnect_min_ms = 50,
		.reconnect_max_ms = 400,
		.loss_timeout_ms = 1500,
	};
	struct tern_session *sess;
	struct tern_listener *lis;
	struct tern_endpoint *ep;
	unsigned long until;
	char uri[64];
	int err, st;

	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port + 2);
	ep = tt_peer_start(uri, &lis);
	if (IS_ERR(ep))
		return PTR_ERR(ep);
	sess = tern_connect(tt_cli, uri, &o);
	if (IS_ERR(sess)) {
		tern_listener_stop(lis);
		tern_endpoint_destroy(ep);
		return PTR_ERR(sess);
	}
	err = tt_ping_status(sess, 5 * HZ);
	if (err)
		pr_err("reconnect: first ping %d\n", err);

	tern_listener_stop(lis);
	tern_endpoint_destroy(ep);
	st = tt_ping_status(sess, 10 * HZ);
	if (st != -ETIMEDOUT && st != -ENOTCONN) {
		pr_err("reconnect: ping with the peer gone: %d\n", st);
		err = err ?: -EIO;
	}
	st = tt_ping_status(sess, 10 * HZ);
	if (st != -ENOTCONN) {
		pr_err("reconnect: ping after loss timeout: %d\n", st);
		err = err ?: -EIO;
	}

	ep = tt_peer_start(uri, &lis);
	if (IS_ERR(ep)) {
		tern_session_destroy(sess);
		return PTR_ERR(ep);
	}
	until = jiffies + 10 * HZ;
	do {
		msleep(100);
		st = tt_ping_status(sess, 5 * HZ);
	} while (st == -ENOTCONN && time_before(jiffies, until));
	if (st) {
		pr_err("reconnect: ping after the peer came back: %d\n", st);
		err = err ?: -EIO;
	}
	if (!err)
		err = tt_one(sess, TT_OP_WRITE, 65536, 3, 42, 0);
	if (!err)
		err = tt_one(sess, TT_OP_READ, 65536, 5, 43, 0);
	tern_session_destroy(sess);
	tern_listener_stop(lis);
	tern_endpoint_destroy(ep);
	pr_info("reconnect and loss timeout %s\n", err ? "FAILED" : "ok");
	return err;
}

/*
 * The responder stops answering anything, pings included, for longer
 * than the keepalive timeout: the requester must drop the lane, reconnect
 * and resend, and the resent copy must carry the resent flag.
 */
static int tt_keepalive(void)
{
	struct tern_session_opts o = {
		.keepalive_ms = 300,
		.keepalive_timeout_ms = 1000,
		.reconnect_min_ms = 50,
		.reconnect_max_ms = 200,
	};
	int resent_before = atomic_read(&tt_srv_resent);
	struct tern_session *sess;
	struct tt_req *r;
	char uri[64];
	int err = 0;

	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
	sess = tern_connect(tt_cli, uri, &o);
	if (IS_ERR(sess))
		return PTR_ERR(sess);
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r) {
		tern_session_destroy(sess);
		return -ENOMEM;
	}
	tt_req_prep(r, TT_OP_STALL, 0, 5, 0);
	r->front.len = cpu_to_le32(2500);	/* ms */
	err = tern_send(sess, &r->req, 0);
	if (!err)
		err = tt_req_wait(r, tt_wait_jiffies(), "keepalive");
	if (!err) {
		if (r->req.status || r->req.reply_status || !r->req.resends) {
			pr_err("keepalive: status %d/%d resends %u\n",
			       r->req.status, r->req.reply_status,
			       r->req.resends);
			err = -EIO;
		}
	}
	if (!err && atomic_read(&tt_srv_resent) == resent_before) {
		pr_err("keepalive: responder saw no resent request\n");
		err = -EIO;
	}
	kfree(r);
	tern_session_destroy(sess);
	pr_info("keepalive timeout and resend %s\n", err ? "FAILED" : "ok");
	return err;
}

#define TT_THR_DEPTH	6
#define TT_THR_SIZE	4096
#define TT_THR_BYTES	(4 * TT_THR_SIZE)
#define TT_THR_REQS	ARRAY_SIZE(tt_throttle_steps)

/* Send @r as a write of @len the responder holds, without waiting. */
static int tt_throttle_send(struct tern_session *sess, struct tt_req *r,
			    u32 len, u32 seed, unsigned int lane,
			    unsigned int flags)
{
	int err = tt_buf_alloc(&r->buf, len, 0, GFP_KERNEL);

	if (err)
		return err;
	tt_buf_pattern(r->buf.bvec, r->buf.nr, len, seed, 0, false);
	tt_req_prep(r, TT_OP_WRITE, len, seed, 0);
	r->req.lane_hint = lane;	/* every shard in turn */
	r->front.op = cpu_to_le32(TT_OP_HOLD);
	err = tern_send(sess, &r->req, flags | TERN_SEND_NOWAIT);
	if (err)
		tt_buf_free(&r->buf);
	return err;
}

/* What each send of tt_throttle() should get, in order. */
static const struct tt_throttle_step {
	u32		len;
	unsigned int	flags;
	int		want;
} tt_throttle_steps[] = {
	{ TT_THR_SIZE, 0, 0 },
	{ TT_THR_SIZE, 0, 0 },
	{ TT_THR_SIZE, 0, 0 },
	{ TT_THR_SIZE, 0, 0 },
	{ TT_THR_SIZE, 0, -EAGAIN },		/* bytes */
	{ 0, 0, 0 },
	{ 0, 0, 0 },
	{ 0, 0, -EAGAIN },			/* depth */
	{ 0, TERN_SEND_RESERVED, 0 },
	{ 0, TERN_SEND_RESERVED, 0 },
	{ 0, TERN_SEND_RESERVED, -EAGAIN },	/* reserved */
};

/* the table's depth, and its reserved requests */
static_assert(TT_THR_DEPTH == 6 && TERN_RESERVED_REQS == 2);

/*
 * The session's in-flight limits hold exactly, lock-free as they are and
 * whichever lanes (and so request shards) the submitters name. On 4
 * lanes with queue depth TT_THR_DEPTH and TT_THR_BYTES in flight, writes
 * the responder holds: 4 of 4 KiB go and a fifth is refused (-EAGAIN,
 * bytes) while the depth has room; writes without data fill the depth
 * and one more is refused (-EAGAIN, depth); TERN_RESERVED_REQS reserved
 * requests go beyond it and one more is refused. Answered, every one
 * completes once with its data checked; then a write larger than the
 * byte limit goes, as nothing else is in flight.
 */
static int tt_throttle(const char *uri)
{
	struct tern_session_opts o = {
		.nr_lanes = 4,
		.queue_depth = TT_THR_DEPTH,
		.max_inflight_bytes = TT_THR_BYTES,
	};
	unsigned int i, n = 0, seed = 2;
	struct tern_session_info info;
	struct tern_session *sess;
	unsigned long until;
	struct tt_req *rs;
	int err = 0, got;

	rs = kvcalloc(TT_THR_REQS, sizeof(*rs), GFP_KERNEL);
	if (!rs)
		return -ENOMEM;
	sess = tern_connect(tt_cli, uri, &o);
	if (IS_ERR(sess)) {
		kvfree(rs);
		return PTR_ERR(sess);
	}
	tern_session_get_info(sess, &info);
	if (info.queue_depth != TT_THR_DEPTH) {
		pr_err("throttle: queue depth %u, asked for %u\n",
		       info.queue_depth, TT_THR_DEPTH);
		err = -EIO;
	}
	/* even seeds: the responder's own pages, so no core data budget */
	for (i = 0; !err && i < ARRAY_SIZE(tt_throttle_steps); i++) {
		const struct tt_throttle_step *st = &tt_throttle_steps[i];

		seed += 2;
		got = tt_throttle_send(sess, &rs[n], st->len, seed, i,
				       st->flags);
		if (!got)
			n++;
		if (got != st->want) {
			pr_err("throttle: step %u: %d, expected %d\n", i, got,
			       st->want);
			err = -EIO;
			break;
		}
	}

	/* every held request has arrived: then answer them all */
	until = jiffies + tt_wait_jiffies();
	while (READ_ONCE(tt_nr_held) < n && time_before(jiffies, until))
		msleep(20);
	if (READ_ONCE(tt_nr_held) < n) {
		pr_err("throttle: %u of %u requests arrived\n",
		       READ_ONCE(tt_nr_held), n);
		err = err ?: -ETIMEDOUT;
	}
	if (tt_hold_answer())
		err = err ?: -EIO;
	for (i = 0; i < n; i++) {
		int werr = tt_req_wait(&rs[i], tt_wait_jiffies(), "throttle");

		if (!err && (werr || rs[i].req.status ||
			     rs[i].req.reply_status ||
			     atomic_read(&rs[i].dones) != 1)) {
			pr_err("throttle: request %u: wait %d status %d/%d dones %d\n",
			       i, werr, rs[i].req.status,
			       rs[i].req.reply_status,
			       atomic_read(&rs[i].dones));
			err = -EIO;
		}
		tt_buf_free(&rs[i].buf);
	}

	if (!err) {
		struct tt_req *r = &rs[0];

		memset(r, 0, sizeof(*r));
		err = tt_buf_alloc(&r->buf, 2 * TT_THR_BYTES, 0, GFP_KERNEL);
		if (!err) {
			tt_buf_pattern(r->buf.bvec, r->buf.nr, 2 * TT_THR_BYTES,
				       seed, 0, false);
			tt_req_prep(r, TT_OP_WRITE, 2 * TT_THR_BYTES, seed, 0);
			err = tern_send(sess, &r->req, TERN_SEND_NOWAIT);
			if (err)
				pr_err("throttle: a lone write above the byte limit: %d\n",
				       err);
			else
				err = tt_req_wait(r, tt_wait_jiffies(),
						  "throttle") ?:
				      tt_req_check(r, "throttle");
			tt_buf_free(&r->buf);
		}
	}
	tern_session_destroy(sess);
	kvfree(rs);
	pr_info("throttle: limits of depth, bytes and reserved requests %s\n",
		err ? "FAILED" : "ok");
	return err;
}

/* requester: the events of tt_event_order()'s endpoint, as they came */
static DEFINE_SPINLOCK(tt_ev_lock);
static struct {
	bool			hold;	/* the next event waits for @release */
	struct completion	held;	/* ... and says it does */
	struct completion	release;
	unsigned int		nr;
	u8			ev[64];
} tt_ev;

static void tt_ev_event(struct tern_session *sess, enum tern_session_event ev)
{
	bool hold;

	spin_lock(&tt_ev_lock);
	if (tt_ev.nr < ARRAY_SIZE(tt_ev.ev))
		tt_ev.ev[tt_ev.nr++] = ev;
	hold = tt_ev.hold;
	tt_ev.hold = false;
	spin_unlock(&tt_ev_lock);
	if (hold) {
		complete(&tt_ev.held);
		/* bounded: a test that failed to release does not hang */
		wait_for_completion_timeout(&tt_ev.release, 30 * HZ);
	}
}

static const struct tern_endpoint_ops tt_ev_ops = {
	.session_event	= tt_ev_event,
};

/* The events so far, as "UP DOWN ..." in @buf. */
static void tt_ev_show(char *buf, size_t size)
{
	static const char *const names[] = { "UP", "DOWN", "FAILED", "GONE" };
	unsigned int i, len = 0;

	buf[0] = 0;
	spin_lock(&tt_ev_lock);
	for (i = 0; i < tt_ev.nr && len < size; i++)
		len += scnprintf(buf + len, size - len, "%s%s", i ? " " : "",
				 tt_ev.ev[i] < ARRAY_SIZE(names) ?
				 names[tt_ev.ev[i]] : "?");
	spin_unlock(&tt_ev_lock);
}

/*
 * Have the responder close the lane a request came on, and wait until the
 * lane is back: the path's reconnect count passes @*reconnects.
 */
static int tt_ev_drop(struct tern_session *sess, u64 *reconnects, u32 seed)
{
	unsigned long until = jiffies + tt_wait_jiffies();
	struct tern_path_info pi;
	int err;

	err = tt_one(sess, TT_OP_DROP, 0, 0, seed, 0);
	while (!err) {
		err = tern_session_get_path(sess, 0, &pi);
		if (err || (pi.reconnects > *reconnects && pi.live_lanes == 1))
			break;
		if (time_after(jiffies, until)) {
			pr_err("events: the lane did not come back\n");
			return -ETIMEDOUT;
		}
		msleep(20);
	}
	if (!err)
		*reconnects = pi.reconnects;
	return err;
}

/*
 * Session events end with the one that tells the session's state, even
 * when they pile up. The connect's UP holds the event work (nothing else
 * is pending then: the lane is dropped only once it is held) while the
 * responder closes the lane a request came on and the lane comes back:
 * the work then has DOWN and UP pending, both in one run. Delivered in
 * the wrong order, a ULP that keeps a state (tern_blk) says
 * "reconnecting" of a live session until its next event. Exactly
 * UP DOWN UP must come.
 */
static int tt_event_order(const char *uri)
{
	static const u8 want[] = {
		TERN_SESSION_UP, TERN_SESSION_DOWN, TERN_SESSION_UP,
	};
	struct tern_endpoint_conf conf = {
		.name = "msgr_test_ev",
		.ops = &tt_ev_ops,
	};
	struct tern_session_opts o = {
		.reconnect_min_ms = 10,
		.reconnect_max_ms = 100,
	};
	struct tern_endpoint *ep;
	struct tern_session *sess;
	u64 reconnects = 0;
	unsigned int i;
	char seen[96];
	int err = 0;

	memset(&tt_ev, 0, sizeof(tt_ev));
	init_completion(&tt_ev.held);
	init_completion(&tt_ev.release);
	tt_ev.hold = true;
	ep = tern_endpoint_create(&conf);
	if (IS_ERR(ep))
		return PTR_ERR(ep);
	sess = tern_connect(ep, uri, &o);
	if (IS_ERR(sess)) {
		tern_endpoint_destroy(ep);
		return PTR_ERR(sess);
	}
	if (!wait_for_completion_timeout(&tt_ev.held, tt_wait_jiffies()))
		err = -ETIMEDOUT;
	spin_lock(&tt_ev_lock);
	if (!err && (tt_ev.nr != 1 || tt_ev.ev[0] != TERN_SESSION_UP))
		err = -EIO;
	spin_unlock(&tt_ev_lock);

	/* UP is held; the lane goes (DOWN pending) and comes back (UP) */
	if (!err)
		err = tt_ev_drop(sess, &reconnects, 7);
	complete(&tt_ev.release);
	for (i = 0; !err && i < 250 && READ_ONCE(tt_ev.nr) < ARRAY_SIZE(want);
	     i++)
		msleep(20);
	msleep(100);	/* nothing more comes */
	tt_ev_show(seen, sizeof(seen));
	if (!err && (tt_ev.nr != ARRAY_SIZE(want) ||
		     memcmp(tt_ev.ev, want, sizeof(want)))) {
		pr_err("events: %s, want UP DOWN UP\n", seen);
		err = -EIO;
	}
	if (!err)
		err = tt_one(sess, TT_OP_PING, 0, 0, 11, 0);
	tern_session_destroy(sess);
	tern_endpoint_destroy(ep);
	pr_info("session events end with the state's (%s) %s\n", seen,
		err ? "FAILED" : "ok");
	return err;
}

/* requester: the writes of the last "hold" (tt_run_lock) */
static struct {
	struct tern_session	*sess;
	struct tt_req		*reqs;
	unsigned int		nr;
	unsigned int		held;
	unsigned int		refused;
} tt_hold;

/* Answer what is held, wait for every write of the hold, free them. */
static int tt_hold_release(void)
{
	unsigned int i, ok = 0, refused = 0;
	int err;

	if (!tt_hold.sess)
		return 0;
	err = tt_hold_answer();
	for (i = 0; i < tt_hold.nr; i++) {
		struct tt_req *r = &tt_hold.reqs[i];

		if (tt_req_wait(r, tt_wait_jiffies(), "hold")) {
			err = -EIO;
		} else if (!r->req.status && !r->req.reply_status) {
			ok++;
		} else if (!r->req.status && r->req.reply_status == -ENOMEM) {
			refused++;
		} else {
			pr_err("hold: write %u: status %d reply_status %d\n", i,
			       r->req.status, r->req.reply_status);
			err = -EIO;
		}
		tt_buf_free(&r->buf);
	}
	pr_info("hold: %u writes answered after being held, %u refused with -ENOMEM\n",
		ok, refused);
	if (ok != tt_hold.held || refused != tt_hold.refused)
		err = -EIO;
	tern_session_destroy(tt_hold.sess);
	kvfree(tt_hold.reqs);
	memset(&tt_hold, 0, sizeof(tt_hold));
	return err;
}

/*
 * Send @n writes of TT_HOLD_SIZE at once, with odd seeds so that the
 * core allocates their pages, and wait until each is held by the
 * responder or answered (refused) by the core.
 */
static int tt_hold_start(unsigned int n)
{
	struct tern_session_opts o = {
		.queue_depth = n,
		.max_data = TT_HOLD_SIZE,
		.max_inflight_bytes = (u64)n * TT_HOLD_SIZE,
	};
	unsigned long deadline = jiffies + tt_wait_jiffies();
	unsigned int i, done, held;
	char uri[64];
	int err = 0;

	if (tt_hold.sess)
		return -EBUSY;
	if (n > TT_HOLD_MAX)
		return -EINVAL;
	tt_hold.reqs = kvcalloc(n, sizeof(*tt_hold.reqs), GFP_KERNEL);
	if (!tt_hold.reqs)
		return -ENOMEM;
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
	tt_hold.sess = tern_connect(tt_cli, uri, &o);
	if (IS_ERR(tt_hold.sess)) {
		err = PTR_ERR(tt_hold.sess);
		tt_hold.sess = NULL;
		kvfree(tt_hold.reqs);
		tt_hold.reqs = NULL;
		return err;
	}
	for (i = 0; i < n && !err; i++) {
		struct tt_req *r = &tt_hold.reqs[i];

		err = tt_buf_alloc(&r->buf, TT_HOLD_SIZE, 0, GFP_KERNEL);
		if (err)
			break;
		tt_buf_pattern(r->buf.bvec, r->buf.nr, TT_HOLD_SIZE, 2 * i + 1,
			       0, false);
		tt_req_prep(r, TT_OP_WRITE, TT_HOLD_SIZE, 2 * i + 1, 0);
		r->front.op = cpu_to_le32(TT_OP_HOLD);
		err = tern_send(tt_hold.sess, &r->req, 0);
		if (err)
			tt_buf_free(&r->buf);
		else
			tt_hold.nr++;
	}
	/* each write is either held or refused (completed) */
	do {
		msleep(20);
		for (i = 0, done = 0; i < tt_hold.nr; i++)
			done += completion_done(&tt_hold.reqs[i].done);
		spin_lock(&tt_held_lock);
		held = tt_nr_held;
		spin_unlock(&tt_held_lock);
	} while (done + held < tt_hold.nr && time_before(jiffies, deadline));
	tt_hold.held = held;
	tt_hold.refused = done;
	pr_info("hold: %u of %u writes held, %u answered\n", held, n, done);
	if (err || done + held != n) {
		tt_hold_release();
		return err ?: -ETIMEDOUT;
	}
	return 0;
}

static int tt_hold_set(const char *val, const struct kernel_param *kp)
{
	unsigned int n;
	int err = kstrtouint(val, 0, &n);

	if (err)
		return err;
	mutex_lock(&tt_run_lock);
	err = n ? tt_hold_start(n) : tt_hold_release();
	mutex_unlock(&tt_run_lock);
	return err;
}

static int tt_hold_get(char *buf, const struct kernel_param *kp)
{
	int n;

	mutex_lock(&tt_run_lock);
	n = sysfs_emit(buf, "held %u refused %u\n", tt_hold.held,
		       tt_hold.refused);
	mutex_unlock(&tt_run_lock);
	return n;
}

static const struct kernel_param_ops tt_hold_ops = {
	.set = tt_hold_set,
	.get = tt_hold_get,
};
module_param_cb(hold, &tt_hold_ops, NULL, 0600);
MODULE_PARM_DESC(hold,
		 "Write N to send N writes of 1 MiB the responder holds, 0 to answer them; read: held and refused");

static int tt_run(void)
{
	char uri[64];
	struct tern_session *sess;
	int err;

	mutex_lock(&tt_run_lock);
	/*
	 * Over RDMA only what a userspace peer cannot check (rdma.sh): the
	 * rest is the core's, and msgr_core.sh ran it over TCP.
	 */
	if (rdma_addr) {
		err = tt_rdma_statuses();
		goto out;
	}
	err = tt_uri_checks();
	if (!err)
		err = tt_conf_checks();

	/* Nobody listens on port + 1: connect must fail, and fast. */
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port + 1);
	sess = tern_connect(tt_cli, uri, NULL);
	if (!IS_ERR(sess)) {
		pr_err("connect to a closed port succeeded\n");
		tern_session_destroy(sess);
		err = -EIO;
	} else {
		pr_info("connect to closed port: %ld (expected)\n",
			PTR_ERR(sess));
	}

	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
	if (!err)
		err = tt_session(uri, 1, false, 32);
	if (!err)
		err = tt_session(uri, 4, true, 64);
	snprintf(uri, sizeof(uri), "tcp://[::1]:%u", port);
	if (!err)
		err = tt_session(uri, 2, true, 16);
	if (!err)
		err = tt_session(uri, 3, false, 128);
	/* exact counts: not while lanes fail on purpose (the reruns) */
	if (!err && !tt_ran)
		err = tt_throttle(uri);
	if (!err && !tt_ran)
		err = tt_event_order(uri);
	if (!err)
		err = tt_reconnect();
	if (!err)
		err = tt_keepalive();
out:
	if (!err && atomic_read(&tt_srv_bad)) {
		pr_err("responder saw %d bad requests\n",
		       atomic_read(&tt_srv_bad));
		err = -EIO;
	}
	pr_info("responder: %d requests, %d flagged as resent\n",
		atomic_read(&tt_srv_requests), atomic_read(&tt_srv_resent));
	pr_info("RESULT: %s\n", err ? "FAIL" : "PASS");
	tt_ran = true;
	mutex_unlock(&tt_run_lock);
	return err ? -EIO : 0;
}

static int tt_rerun_set(const char *val, const struct kernel_param *kp)
{
	return tt_run();
}

static const struct kernel_param_ops tt_rerun_ops = {
	.set = tt_rerun_set,
};
module_param_cb(rerun, &tt_rerun_ops, NULL, 0200);
MODULE_PARM_DESC(rerun, "Write anything to run the requester tests again");

static void tt_teardown(void)
{
	mutex_lock(&tt_run_lock);
	tt_hold_release();
	mutex_unlock(&tt_run_lock);
	if (tt_keep)
		tern_session_destroy(tt_keep);
	tt_keep = NULL;
	if (tt_lis4)
		tern_listener_stop(tt_lis4);
	if (tt_lis6)
		tern_listener_stop(tt_lis6);
	if (tt_lis_rdma)
		tern_listener_stop(tt_lis_rdma);
	tt_lis_rdma = NULL;
	if (tt_cli)
		tern_endpoint_destroy(tt_cli);
	if (tt_srv)
		tern_endpoint_destroy(tt_srv);
	tt_lis4 = NULL;
	tt_lis6 = NULL;
	tt_cli = NULL;
	tt_srv = NULL;
}

static int __init tt_init(void)
{
	struct tern_endpoint_conf srv_conf = {
		.name = "msgr_test_srv",
		.ops = &tt_srv_ops,
	};
	struct tern_endpoint_conf cli_conf = { .name = "msgr_test_cli" };
	char uri[64];
	int err;

	tt_srv = tern_endpoint_create(&srv_conf);
	if (IS_ERR(tt_srv)) {
		err = PTR_ERR(tt_srv);
		tt_srv = NULL;
		return err;
	}
	tt_cli = tern_endpoint_create(&cli_conf);
	if (IS_ERR(tt_cli)) {
		err = PTR_ERR(tt_cli);
		tt_cli = NULL;
		goto fail;
	}
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
	tt_lis4 = tern_listen(tt_srv, uri);
	if (IS_ERR(tt_lis4)) {
		err = PTR_ERR(tt_lis4);
		tt_lis4 = NULL;
		pr_err("listen %s: %d\n", uri, err);
		goto fail;
	}
	snprintf(uri, sizeof(uri), "tcp://[::1]:%u", port);
	tt_lis6 = tern_listen(tt_srv, uri);
	if (IS_ERR(tt_lis6)) {
		err = PTR_ERR(tt_lis6);
		tt_lis6 = NULL;
		pr_err("listen %s: %d\n", uri, err);
		goto fail;
	}
	err = tt_run();
	if (err)
		goto fail;

	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", port);
	tt_keep = tern_connect(tt_cli, uri, &(struct tern_session_opts){
				.nr_lanes = 2, .data_crc = true });
	if (IS_ERR(tt_keep)) {
		err = PTR_ERR(tt_keep);
		tt_keep = NULL;
		goto fail;
	}
	err = tt_one(tt_keep, TT_OP_WRITE, 8192, 0, 7, 0);
	if (err)
		goto fail;
	return 0;
fail:
	tt_teardown();
	return err;
}

static void __exit tt_exit(void)
{
	tt_teardown();
}

module_init(tt_init);
module_exit(tt_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("tern messenger self-test: echo responder and requester checks");
