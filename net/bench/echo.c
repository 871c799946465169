// SPDX-License-Identifier: GPL-2.0
/*
 * tern_bench: the echo service.
 *
 * One responder endpoint, created by the first SERVE and destroyed when
 * the last listener stops, answers every request with a copy of its
 * front:
 *  - TO_RESPONDER: the data lands in pages we supply from ->alloc_data
 *    (data pages the messenger may swap for those it received into),
 *    tern_pull() then copies nothing; with TB_FRONT_VERIFY in the front
 *    every byte is checked against the pattern (reply status -EILSEQ on a
 *    mismatch).
 *  - FROM_RESPONDER: with TB_FRONT_VERIFY, fresh pages filled with the
 *    request's pattern are pushed; without, a shared read-only page
 *    repeated as often as needed (no per-request allocation).
 *
 * Memory: data pages the echo holds (received data, verify replies) are
 * charged to the session and to the service, within echo_session_bytes
 * and echo_max_bytes (read when the service starts; one request is
 * admitted whatever its size when nothing else is held). The session cap
 * is also given to the messenger (max_session_bytes), which grants a
 * session a queue depth that fits it, so a well-behaved requester waits
 * in its throttle instead. Beyond a cap a reply that would need fresh
 * pages is answered -ENOBUFS; received data, already on its way, drops
 * the lane (alloc_data cannot decline it otherwise).
 *
 * Duplicates: the messenger is at-least-once; a request resent after a
 * lane died may already have been executed. Each responder session keeps
 * the tids of its last TB_TID_RING answered requests; a resent request
 * whose tid is among them is counted as a duplicate.
 *
 * Locking: tb_echo.lock (mutex) serialises SERVE/STOP_SERVE and guards the
 * endpoint and listener list. Request upcalls run in the messenger's lane
 * workers and touch only atomics and their session's tb_echo_sess, whose
 * ring has its own spinlock; tb_echo.sess_lock makes the lazy creation of
 * tb_echo_sess race-free between lanes of one session.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include "bench.h"

#define TB_TID_RING	4096
#define TB_SRC_BVECS	(TERN_BENCH_MAX_SIZE / PAGE_SIZE)

static unsigned long echo_session_bytes = 256UL << 20;
module_param(echo_session_bytes, ulong, 0644);
MODULE_PARM_DESC(echo_session_bytes,
		 "Data bytes the echo holds per session, read when it starts (default 256 MiB)");

static unsigned long echo_max_bytes = 1024UL << 20;
module_param(echo_max_bytes, ulong, 0644);
MODULE_PARM_DESC(echo_max_bytes,
		 "Data bytes the echo holds in all, read when it starts (default 1 GiB)");

struct tb_echo_sess {
	atomic64_t	held;		/* data bytes charged */
	spinlock_t	lock;		/* ring */
	unsigned int	head;
	unsigned int	count;
	u64		tids[TB_TID_RING];
};

struct tb_echo_listener {
	struct list_head	entry;
	struct tern_listener	*lis;
	char			uri[TERN_BENCH_URI_MAX];
};

static struct {
	struct mutex		lock;	/* see top of file */
	struct tern_endpoint	*ep;
	struct list_head	listeners;
	unsigned int		nr_listeners;
	u64			session_bytes;	/* caps in force */
	u64			max_bytes;
	atomic64_t		held;		/* data bytes charged, all sessions */
	struct page		*src_page;	/* constant data for pushes */
	struct bio_vec		*src_bvec;	/* TB_SRC_BVECS x src_page */
	spinlock_t		sess_lock;

	atomic64_t		requests;
	atomic64_t		bytes_in;
	atomic64_t		bytes_out;
	atomic64_t		resent;
	atomic64_t		duplicates;
	atomic64_t		verify_errors;
	atomic64_t		errors;
	atomic64_t		sessions;
	atomic64_t		sessions_total;
} tb_echo = {
	.lock		= __MUTEX_INITIALIZER(tb_echo.lock),
	.listeners	= LIST_HEAD_INIT(tb_echo.listeners),
	.sess_lock	= __SPIN_LOCK_UNLOCKED(tb_echo.sess_lock),
};

/* The session's duplicate tracker, created on first use; may be NULL. */
static struct tb_echo_sess *tb_echo_sess_get(struct tern_session *sess)
{
	struct tb_echo_sess *es = tern_session_priv(sess), *cur;
	unsigned int noio;

	if (es)
		return es;
	noio = memalloc_noio_save();
	es = kvzalloc(sizeof(*es), GFP_KERNEL);
	memalloc_noio_restore(noio);
	if (!es)
		return NULL;
	spin_lock_init(&es->lock);

	spin_lock(&tb_echo.sess_lock);
	cur = tern_session_priv(sess);
	if (!cur)
		tern_session_set_priv(sess, es);
	spin_unlock(&tb_echo.sess_lock);
	if (cur) {
		kvfree(es);
		return cur;
	}
	atomic64_inc(&tb_echo.sessions);
	atomic64_inc(&tb_echo.sessions_total);
	return es;
}

static bool tb_echo_tid_seen(struct tb_echo_sess *es, u64 tid)
{
	unsigned int i;
	bool seen = false;

	spin_lock(&es->lock);
	for (i = 0; i < es->count && !seen; i++)
		seen = es->tids[i] == tid;
	spin_unlock(&es->lock);
	return seen;
}

static void tb_echo_tid_record(struct tb_echo_sess *es, u64 tid)
{
	spin_lock(&es->lock);
	es->tids[es->head] = tid;
	es->head = (es->head + 1) % TB_TID_RING;
	if (es->count < TB_TID_RING)
		es->count++;
	spin_unlock(&es->lock);
}

static void tb_echo_session_event(struct tern_session *sess,
				  enum tern_session_event ev)
{
	struct tb_echo_sess *es;

	switch (ev) {
	case TERN_SESSION_UP:
		tb_echo_sess_get(sess);
		break;
	case TERN_SESSION_GONE:
		/* No request of the session is left: nobody else looks. */
		es = tern_session_priv(sess);
		if (es) {
			tern_session_set_priv(sess, NULL);
			kvfree(es);
			atomic64_dec(&tb_echo.sessions);
		}
		break;
	default:
		break;
	}
}

/* Data pages of one request, charged to its session and the service. */
struct tb_echo_data {
	struct tb_buf		buf;
	struct tb_echo_sess	*es;
	u32			bytes;
};

static void tb_echo_uncharge(struct tb_echo_sess *es, u32 len)
{
	atomic64_sub(len, &es->held);
	atomic64_sub(len, &tb_echo.held);
}

/* Room for @len more bytes? One request always fits when nothing is held. */
static bool tb_echo_charge(struct tern_srv_req *sreq, struct tb_echo_sess *es,
			   u32 len)
{
	u64 held;

	if (!es)
		return false;
	held = atomic64_add_return(len, &es->held);
	if (held > tb_echo.session_bytes && held != len) {
		atomic64_sub(len, &es->held);
		pr_warn_ratelimited("request %llu: %u more bytes would pass the echo's %llu per session; refused\n",
				    sreq->tid, len, tb_echo.session_bytes);
		return false;
	}
	held = atomic64_add_return(len, &tb_echo.held);
	if (held > tb_echo.max_bytes && held != len) {
		tb_echo_uncharge(es, len);
		pr_warn_ratelimited("request %llu: %u more bytes would pass the echo's %llu in all; refused\n",
				    sreq->tid, len, tb_echo.max_bytes);
		return false;
	}
	return true;
}

/* Charged pages for @len bytes in sreq->priv, or NULL. */
static struct tb_echo_data *tb_echo_data_alloc(struct tern_srv_req *sreq,
					       u32 len)
{
	struct tb_echo_sess *es = tb_echo_sess_get(sreq->sess);
	struct tb_echo_data *d;

	if (!tb_echo_charge(sreq, es, len))
		return NULL;
	d = kzalloc(sizeof(*d), GFP_NOIO);
	if (d && tb_buf_alloc_data(&d->buf, len, GFP_NOIO)) {
		kfree(d);
		d = NULL;
	}
	if (!d) {
		tb_echo_uncharge(es, len);
		return NULL;
	}
	d->es = es;
	d->bytes = len;
	sreq->priv = d;		/* freed by ->release */
	return d;
}

static bool tb_front_ok(const struct tern_srv_req *sreq)
{
	const struct tb_front *f = sreq->front;
	u32 want = sreq->dir == TERN_DATA_NONE ? 0 : sreq->data_len;

	return sreq->front_len == sizeof(*f) &&
	       le32_to_cpu(f->magic) == TB_FRONT_MAGIC &&
	       !(le32_to_cpu(f->flags) & ~TB_FRONT_VERIFY) &&
	       le32_to_cpu(f->len) == want;
}

/*
 * Whatever the front says: data the core buffered for us would be held
 * outside our caps (a bad front fails the request after the data came).
 */
static int tb_echo_alloc_data(struct tern_srv_req *sreq)
{
	struct tb_echo_data *d;

	d = tb_echo_data_alloc(sreq, sreq->data_len);
	if (!d)
		return -ENOBUFS;
	sreq->rx_bvec = d->buf.bvec;
	sreq->rx_nr_bvec = d->buf.nr;
	sreq->rx_swappable = true;	/* data pages: tb_buf_alloc_data() */
	return 0;
}

static void tb_echo_release(struct tern_srv_req *sreq)
{
	struct tb_echo_data *d = sreq->priv;

	if (d) {
		tb_buf_free(&d->buf);
		tb_echo_uncharge(d->es, d->bytes);
		kfree(d);
		sreq->priv = NULL;
	}
}

static int tb_echo_to(struct tern_srv_req *sreq, const struct tb_front *f)
{
	struct tb_echo_data *d = sreq->priv;
	struct tb_buf *b = d ? &d->buf : NULL;
	int err;

	if (!b)
		return -EINVAL;
	err = tern_pull(sreq, b->bvec, b->nr, 0, sreq->data_len, NULL);
	if (err)
		return err;
	atomic64_add(sreq->data_len, &tb_echo.bytes_in);
	if ((le32_to_cpu(f->flags) & TB_FRONT_VERIFY) &&
	    !tb_pattern_check(b->bvec, b->nr, sreq->data_len,
			      le64_to_cpu(f->seed))) {
		atomic64_inc(&tb_echo.verify_errors);
		return -EILSEQ;
	}
	return 0;
}

static int tb_echo_from(struct tern_srv_req *sreq, const struct tb_front *f)
{
	u32 len = sreq->data_len;
	struct tb_echo_data *d;
	int err;

	if (!(le32_to_cpu(f->flags) & TB_FRONT_VERIFY)) {
		err = tern_push(sreq, tb_echo.src_bvec,
				DIV_ROUND_UP(len, PAGE_SIZE), len, NULL);
		goto out;
	}
	d = tb_echo_data_alloc(sreq, len);
	if (!d)
		return -ENOBUFS;
	tb_pattern_fill(d->buf.bvec, d->buf.nr, len, le64_to_cpu(f->seed));
	err = tern_push(sreq, d->buf.bvec, d->buf.nr, len, NULL);
out:
	if (!err)
		atomic64_add(len, &tb_echo.bytes_out);
	return err;
}

static void tb_echo_request(struct tern_srv_req *sreq)
{
	const struct tb_front *f = sreq->front;
	struct tb_echo_sess *es;
	int status = 0;

	atomic64_inc(&tb_echo.requests);
	es = tb_echo_sess_get(sreq->sess);
	if (sreq->resent) {
		atomic64_inc(&tb_echo.resent);
		if (es && tb_echo_tid_seen(es, sreq->tid))
			atomic64_inc(&tb_echo.duplicates);
	}

	if (!tb_front_ok(sreq))
		status = -EINVAL;
	else if (sreq->dir == TERN_DATA_TO_RESPONDER)
		status = tb_echo_to(sreq, f);
	else if (sreq->dir == TERN_DATA_FROM_RESPONDER)
		status = tb_echo_from(sreq, f);
	if (status && status != -EILSEQ)
		atomic64_inc(&tb_echo.errors);

	/* Recorded first: @sreq may be gone once tern_reply() returns. */
	if (es)
		tb_echo_tid_record(es, sreq->tid);
	if (!tern_reply(sreq, status, sreq->front, sreq->front_len))
		return;
	/* Only the front copy can fail (-ENOMEM): answer without it. */
	atomic64_inc(&tb_echo.errors);
	if (tern_reply(sreq, -ENOMEM, NULL, 0))
		pr_err_ratelimited("cannot answer request %llu\n", sreq->tid);
}

static const struct tern_endpoint_ops tb_echo_ops = {
	.request	= tb_echo_request,
	.alloc_data	= tb_echo_alloc_data,
	.release	= tb_echo_release,
	.session_event	= tb_echo_session_event,
};

/* Caller holds tb_echo.lock. */
static void tb_echo_src_free(void)
{
	kvfree(tb_echo.src_bvec);
	tb_echo.src_bvec = NULL;
	if (tb_echo.src_page)
		__free_page(tb_echo.src_page);
	tb_echo.src_page = NULL;
}

/* Caller holds tb_echo.lock. */
static int tb_echo_start(void)
{
	struct tern_endpoint_conf conf = {
		.name		 = "bench_echo",
		.ops		 = &tb_echo_ops,
		.max_lanes	 = TERN_WIRE_MAX_LANES,
		.max_queue_depth = TERN_WIRE_MAX_QDEPTH,
		.max_data	 = TERN_WIRE_MAX_DATA,
		.max_session_bytes = READ_ONCE(echo_session_bytes),
	};
	struct tern_endpoint *ep;
	unsigned int i;

	tb_echo.src_page = alloc_page(GFP_KERNEL);
	tb_echo.src_bvec = kvcalloc(TB_SRC_BVECS, sizeof(*tb_echo.src_bvec),
				    GFP_KERNEL);
	if (!tb_echo.src_page || !tb_echo.src_bvec) {
		tb_echo_src_free();
		return -ENOMEM;
	}
	memset(page_address(tb_echo.src_page), 0x5a, PAGE_SIZE);
	tb_echo.session_bytes = conf.max_session_bytes;
	tb_echo.max_bytes = READ_ONCE(echo_max_bytes);
	for (i = 0; i < TB_SRC_BVECS; i++)
		bvec_set_page(&tb_echo.src_bvec[i], tb_echo.src_page,
			      PAGE_SIZE, 0);

	ep = tern_endpoint_create(&conf);
	if (IS_ERR(ep)) {
		tb_echo_src_free();
		return PTR_ERR(ep);
	}
	tb_echo.ep = ep;
	return 0;
}

/* Caller holds tb_echo.lock; no listener is left. */
static void tb_echo_shutdown(void)
{
	if (!tb_echo.ep)
		return;
	tern_endpoint_destroy(tb_echo.ep);	/* waits for every session */
	tb_echo.ep = NULL;
	tb_echo_src_free();
}

/**
 * tb_echo_serve - start answering on @uri
 * @uri: NUL-terminated, validated for length by the caller
 *
 * Return: 0; -EEXIST if already listening on @uri; -ENOSPC past
 * TERN_BENCH_MAX_LISTENERS; tern_listen()'s errors.
 */
int tb_echo_serve(const char *uri)
{
	struct tb_echo_listener *l, *it;
	int err;

	l = kzalloc(sizeof(*l), GFP_KERNEL);
	if (!l)
		return -ENOMEM;
	strscpy(l->uri, uri, sizeof(l->uri));

	mutex_lock(&tb_echo.lock);
	list_for_each_entry(it, &tb_echo.listeners, entry) {
		if (!strcmp(it->uri, uri)) {
			err = -EEXIST;
			goto out_unlock;
		}
	}
	if (tb_echo.nr_listeners >= TERN_BENCH_MAX_LISTENERS) {
		err = -ENOSPC;
		goto out_unlock;
	}
	if (!tb_echo.ep) {
		err = tb_echo_start();
		if (err)
			goto out_unlock;
	}
	l->lis = tern_listen(tb_echo.ep, uri);
	if (IS_ERR(l->lis)) {
		err = PTR_ERR(l->lis);
		if (!tb_echo.nr_listeners)
			tb_echo_shutdown();
		goto out_unlock;
	}
	list_add_tail(&l->entry, &tb_echo.listeners);
	tb_echo.nr_listeners++;
	mutex_unlock(&tb_echo.lock);
	pr_info("echo listening on %s\n", uri);
	return 0;

out_unlock:
	mutex_unlock(&tb_echo.lock);
	kfree(l);
	return err;
}

/**
 * tb_echo_stop - stop one listener, or all
 * @uri: a URI given to tb_echo_serve(), or "" for every listener
 *
 * When no listener is left the echo endpoint is destroyed, which closes
 * its sessions.
 * Return: 0, or -ENOENT when @uri is not being served.
 */
int tb_echo_stop(const char *uri)
{
	struct tb_echo_listener *l, *tmp;
	int err = uri[0] ? -ENOENT : 0;

	mutex_lock(&tb_echo.lock);
	list_for_each_entry_safe(l, tmp, &tb_echo.listeners, entry) {
		if (uri[0] && strcmp(l->uri, uri))
			continue;
		list_del(&l->entry);
		tb_echo.nr_listeners--;
		tern_listener_stop(l->lis);
		pr_info("echo stopped on %s\n", l->uri);
		kfree(l);
		err = 0;
	}
	if (!tb_echo.nr_listeners)
		tb_echo_shutdown();
	mutex_unlock(&tb_echo.lock);
	return err;
}

void tb_echo_stats(struct tern_bench_echo_stats *st)
{
	st->requests = atomic64_read(&tb_echo.requests);
	st->bytes_in = atomic64_read(&tb_echo.bytes_in);
	st->bytes_out = atomic64_read(&tb_echo.bytes_out);
	st->resent = atomic64_read(&tb_echo.resent);
	st->duplicates = atomic64_read(&tb_echo.duplicates);
	st->verify_errors = atomic64_read(&tb_echo.verify_errors);
	st->errors = atomic64_read(&tb_echo.errors);
	st->sessions = atomic64_read(&tb_echo.sessions);
	st->sessions_total = atomic64_read(&tb_echo.sessions_total);
	mutex_lock(&tb_echo.lock);
	st->listeners = tb_echo.nr_listeners;
	mutex_unlock(&tb_echo.lock);
}

void tb_echo_exit(void)
{
	tb_echo_stop("");
}
