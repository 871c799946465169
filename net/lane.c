// SPDX-License-Identifier: GPL-2.0
/*
 * tern messenger core: lanes, framing and frame validation.
 *
 * A lane is one transport connection. The transport's per-lane worker
 * drives both directions through tern_lane_rx_*() and tern_lane_tx_*();
 * the core validates every header field before it is used, sizes the
 * receive buffers and dispatches complete frames.
 *
 * Locking: lane->tx_lock protects tx_queue, the *_queued flags and
 * tx_closed. tx_cur belongs to the transport's sender while the lane runs
 * (set under the lock, cleared without it) and to teardown after
 * ->shutdown. Receive state (lane->pub.rx, rx_seq,
 * pub.last_rx) belongs to the transport worker. Teardown runs from a core
 * work item: it closes the transmit side, has the transport stop
 * synchronously, cancels the keepalive work and only then hands queued
 * frames back to the session.
 * Lifetime: kref; the creator's reference is dropped by teardown, the
 * teardown work, server requests and session slots-in-use hold others.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/highmem.h>
#include <linux/jiffies.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <linux/wait_bit.h>
#include "tern_core.h"

static void tern_lane_teardown_work(struct work_struct *work);
static void tern_lane_ka_work(struct work_struct *work);

static void tern_frame_init(struct tern_frame *f, u8 kind)
{
	memset(f, 0, sizeof(*f));
	INIT_LIST_HEAD(&f->entry);
	f->kind = kind;
}

static void tern_ctrl_frame_init(struct tern_frame *f, u8 type)
{
	tern_frame_init(f, TERN_FRAME_CTRL);
	f->hdr.magic = cpu_to_le32(TERN_WIRE_MAGIC);
	f->hdr.version = TERN_WIRE_VERSION;
	f->hdr.type = type;
}

struct tern_core_lane *tern_lane_alloc(struct tern_endpoint *ep,
				       const struct tern_transport_ops *tops,
				       bool requester)
{
	struct tern_core_lane *cl;

	cl = kzalloc(sizeof(*cl), GFP_KERNEL);
	if (!cl)
		return NULL;
	kref_init(&cl->ref);
	cl->ep = ep;
	cl->pub.tops = tops;
	cl->requester = requester;
	cl->state = TERN_LANE_CONNECTING;
	cl->max_front = sizeof(struct tern_wire_hello);
	cl->max_data = 0;
	spin_lock_init(&cl->tx_lock);
	INIT_LIST_HEAD(&cl->pub.tx_queue);
	INIT_LIST_HEAD(&cl->ep_entry);
	INIT_DELAYED_WORK(&cl->ka_work, tern_lane_ka_work);
	INIT_WORK(&cl->teardown_work, tern_lane_teardown_work);
	tern_ctrl_frame_init(&cl->hello_frame, requester ? TERN_WIRE_HELLO :
			     TERN_WIRE_HELLO_ACK);
	cl->hello_frame.front = &cl->hello_tx;
	cl->hello_frame.hdr.front_len = cpu_to_le32(sizeof(cl->hello_tx));
	tern_ctrl_frame_init(&cl->auth_frame, requester ? TERN_WIRE_AUTH :
			     TERN_WIRE_AUTH_ACK);
	cl->auth_frame.front = &cl->auth_tx;
	cl->auth_frame.hdr.front_len = cpu_to_le32(sizeof(cl->auth_tx));
	tern_ctrl_frame_init(&cl->ping_frame, TERN_WIRE_PING);
	tern_ctrl_frame_init(&cl->pong_frame, TERN_WIRE_PONG);
	cl->born = jiffies;
	cl->pub.last_rx = jiffies;
	strscpy(cl->name, "?", sizeof(cl->name));

	mutex_lock(&ep->lock);
	if (ep->dying) {
		mutex_unlock(&ep->lock);
		kfree(cl);
		return NULL;
	}
	list_add_tail(&cl->ep_entry, &ep->lanes);
	ep->nr_lanes++;
	mutex_unlock(&ep->lock);

	__module_get(tops->owner);
	tern_obj_inc(TERN_OBJ_LANE);
	return cl;
}

void tern_lane_release(struct kref *ref)
{
	struct tern_core_lane *cl = container_of(ref, struct tern_core_lane,
						 ref);

	module_put(cl->pub.tops->owner);
	tern_lane_auth_free(cl);
	kfree_sensitive(cl->tx_keys);
	tern_mac_free(cl->tx_mac_next);
	tern_mac_free(cl->tx_mac);
	tern_mac_free(cl->rx_mac);
	kfree(cl);
	tern_obj_dec(TERN_OBJ_LANE);
}

const char *tern_lane_name(struct tern_lane *lane)
{
	return to_core_lane(lane)->name;
}
EXPORT_SYMBOL_GPL(tern_lane_name);

/**
 * tern_lane_index - the lane's position in its session
 * @lane: a lane
 *
 * Known from the start on the requester, where lane i serves the ULP's
 * queue i (tern_blk: hardware queue i). An accepted lane learns it only
 * from the handshake, after its transport set the connection up.
 * Return: the index of a requester lane, -1 for an accepted one.
 */
int tern_lane_index(struct tern_lane *lane)
{
	struct tern_core_lane *cl = to_core_lane(lane);

	return cl->requester && cl->slot ? cl->slot->idx : -1;
}
EXPORT_SYMBOL_GPL(tern_lane_index);

/*
 * The counter at @off of this CPU's copy: nothing shared between CPUs.
 * One instruction, inline: the frame counters add four per I/O.
 */
static __always_inline void
tern_pcpu_stat_add(struct tern_stats __percpu *st, size_t off, u64 val)
{
	this_cpu_add(*(s64 __percpu *)((char __percpu *)st + off), val);
}

static __always_inline void __tern_lane_stat_add(struct tern_core_lane *cl,
						 size_t off, u64 val)
{
	/* one load: teardown clears cl->slot under sess->lock, not ours */
	struct tern_lane_slot *slot = READ_ONCE(cl->slot);

	if (slot)
		atomic64_add(val, (atomic64_t *)((char *)&slot->stats + off));
	else
		tern_pcpu_stat_add(cl->ep->stats, off, val);
	/* sessions come and go; the module-wide sum stays for tests */
	tern_pcpu_stat_add(tern_total_stats, off, val);
}

void tern_lane_stat_add(struct tern_core_lane *cl, size_t off, u64 val)
{
	__tern_lane_stat_add(cl, off, val);
}

/* A frame of @bytes went out (@tx) or came in: both its counters, inline. */
static __always_inline void
tern_lane_count_frame(struct tern_core_lane *cl, bool tx, u64 bytes)
{
	__tern_lane_stat_add(cl, tx ? offsetof(struct tern_stats, tx_msgs) :
			     offsetof(struct tern_stats, rx_msgs), 1);
	__tern_lane_stat_add(cl, tx ? offsetof(struct tern_stats, tx_bytes) :
			     offsetof(struct tern_stats, rx_bytes), bytes);
}

void tern_wire_hdr_seal(struct tern_wire_hdr *hdr)
{
	hdr->hdr_crc = cpu_to_le32(tern_crc(hdr, offsetof(struct tern_wire_hdr,
							  hdr_crc)));
}
EXPORT_SYMBOL_GPL(tern_wire_hdr_seal);

void tern_frame_seal(struct tern_frame *f)
{
	tern_wire_hdr_seal(&f->hdr);
}

bool tern_lane_remote_data(struct tern_lane *lane)
{
	return READ_ONCE(to_core_lane(lane)->remote_data);
}
EXPORT_SYMBOL_GPL(tern_lane_remote_data);

/**
 * tern_lane_inline_max - the most data a request's frames carry inline
 * @lane: a lane with remote data access
 * @to_responder: for the data a request carries (true) or its reply
 * @dflt: the transport's default
 *
 * Return: in bytes, what the requester's session asked for
 * (&tern_session_opts.inline_to_max, inline_from_max), else @dflt.
 * Larger data moves by remote access.
 */
u32 tern_lane_inline_max(struct tern_lane *lane, bool to_responder, u32 dflt)
{
	struct tern_core_lane *cl = to_core_lane(lane);
	u32 max;

	if (!cl->requester)
		return dflt;
	max = to_responder ? cl->sess->opts.inline_to_max :
			     cl->sess->opts.inline_from_max;
	if (!max)
		return dflt;
	return max == TERN_INLINE_NONE ? 0 : max;
}
EXPORT_SYMBOL_GPL(tern_lane_inline_max);

/**
 * tern_lane_queue_depth - how much a requester lane may have in flight
 * @lane: the lane
 * @max_data: if not NULL, set to the most data one request or reply
 *	carries, in bytes
 *
 * What the session asked for (&tern_session_opts.queue_depth, max_data);
 * the responder may grant less, never more. Known from before
 * ->connect(), for the transport to size its queues by.
 *
 * Return: requests in flight at most, over all the session's lanes; 0 on
 * an accepted lane (and @max_data 0), whose session is not known yet.
 */
unsigned int tern_lane_queue_depth(struct tern_lane *lane, u32 *max_data)
{
	struct tern_core_lane *cl = to_core_lane(lane);

	if (!cl->requester || !cl->sess) {
		if (max_data)
			*max_data = 0;
		return 0;
	}
	if (max_data)
		*max_data = cl->sess->opts.max_data;
	return cl->sess->opts.queue_depth;
}
EXPORT_SYMBOL_GPL(tern_lane_queue_depth);

/* Visit @len bytes of a bio_vec array after skipping @skip, page by page. */
void tern_bvec_walk(const struct bio_vec *bv, unsigned int nr, u32 skip,
		    u32 len, tern_chunk_fn fn, void *arg)
{
	unsigned int i;

	for (i = 0; i < nr && len; i++) {
		size_t off, avail;

		if (skip >= bv[i].bv_len) {
			skip -= bv[i].bv_len;
			continue;
		}
		off = bv[i].bv_offset + skip;
		avail = bv[i].bv_len - skip;
		skip = 0;
		while (avail && len) {
			struct page *page = bv[i].bv_page + (off >> PAGE_SHIFT);
			size_t poff = offset_in_page(off);
			size_t n = min3(PAGE_SIZE - poff, avail, (size_t)len);
			void *addr = kmap_local_page(page);

			fn(addr + poff, n, arg);
			kunmap_local(addr);
			off += n;
			avail -= n;
			len -= n;
		}
	}
}

static void tern_crc_chunk(void *addr, size_t len, void *arg)
{
	u32 *crc = arg;

	*crc = crc32c(*crc, addr, len);
}

u32 tern_crc_front_data(const void *front, u32 front_len,
			const struct bio_vec *bvec, unsigned int nr_bvec,
			u32 data_len)
{
	u32 crc = ~0U;

	if (front_len)
		crc = crc32c(crc, front, front_len);
	if (data_len)
		tern_bvec_walk(bvec, nr_bvec, 0, data_len, tern_crc_chunk,
			       &crc);
	return ~crc;
}

static void tern_copy_chunk(void *addr, size_t len, void *arg)
{
	/* The destination was checked to be long enough. */
	if (copy_to_iter(addr, len, arg) != len)
		WARN_ON_ONCE(1);
}

void tern_bvec_copy(const struct bio_vec *dst, unsigned int dst_nr,
		    const struct bio_vec *src, unsigned int src_nr,
		    u32 src_off, u32 len)
{
	struct iov_iter iter;

	iov_iter_bvec(&iter, ITER_DEST, dst, dst_nr, len);
	tern_bvec_walk(src, src_nr, src_off, len, tern_copy_chunk, &iter);
}

/*
 * Queue @f for transmission. Frames may land on a lane whose teardown has
 * started; teardown hands them back to the session, so nothing is lost.
 * Without @kick the caller must tern_lane_push() the lane afterwards.
 */
static __always_inline void
tern_lane_enqueue_locked(struct tern_core_lane *cl, struct tern_frame *f,
			 bool kick)
{
	lockdep_assert_held(&cl->tx_lock);
	list_add_tail(&f->entry, &cl->pub.tx_queue);
	if (kick && !test_bit(TERN_LANE_F_TX_CLOSED, &cl->flags))
		cl->pub.tops->kick(&cl->pub);
}

void tern_lane_queue_frame(struct tern_core_lane *cl, struct tern_frame *f,
			   bool kick)
{
	spin_lock_bh(&cl->tx_lock);
	tern_lane_enqueue_locked(cl, f, kick);
	spin_unlock_bh(&cl->tx_lock);
}

/*
 * Queue @f on @cl if the lane is still live. The look is under the lane's
 * lock, which tern_session_lane_down() takes after the lane is DEAD to
 * hand its frames back: a frame is queued before and handed back, or sees
 * the lane dead. Return: whether @f was queued.
 */
bool tern_lane_queue_live(struct tern_core_lane *cl, struct tern_frame *f,
			  bool kick)
{
	bool live;

	spin_lock_bh(&cl->tx_lock);
	live = READ_ONCE(cl->state) == TERN_LANE_LIVE;
	if (live)
		tern_lane_enqueue_locked(cl, f, kick);
	spin_unlock_bh(&cl->tx_lock);
	return live;
}

/**
 * tern_lane_push - transmit queued frames from the caller's context
 * @cl: a lane the caller holds a reference on, with a transport that has
 *	->push; no core lock held
 * @can_sleep: the caller may sleep
 *
 * Teardown waits for running pushes before it stops the transport, so
 * ->push never races with ->shutdown.
 */
void tern_lane_push(struct tern_core_lane *cl, bool can_sleep)
{
	atomic_inc(&cl->pushers);
	/*
	 * Counted before the look at TX_CLOSED; teardown sets TX_CLOSED
	 * before it looks at the count: one of the two sees the other.
	 */
	smp_mb__after_atomic();
	if (!test_bit(TERN_LANE_F_TX_CLOSED, &cl->flags))
		cl->pub.tops->push(&cl->pub, can_sleep);
	/* fully ordered: ->push is over before teardown can see zero */
	if (atomic_dec_and_test(&cl->pushers) &&
	    test_bit(TERN_LANE_F_TX_CLOSED, &cl->flags))
		wake_up_var(&cl->pushers);
}

/* Remove @f from the queue if it is still waiting there. */
bool tern_lane_dequeue_frame(struct tern_core_lane *cl, struct tern_frame *f)
{
	bool queued;

	spin_lock_bh(&cl->tx_lock);
	queued = !list_empty(&f->entry);
	list_del_init(&f->entry);
	spin_unlock_bh(&cl->tx_lock);
	return queued;
}

static void tern_lane_queue_ctrl(struct tern_core_lane *cl,
				 struct tern_frame *f, bool *queued)
{
	spin_lock_bh(&cl->tx_lock);
	if (*queued) {
		spin_unlock_bh(&cl->tx_lock);
		return;
	}
	*queued = true;
	list_add_tail(&f->entry, &cl->pub.tx_queue);
	if (!test_bit(TERN_LANE_F_TX_CLOSED, &cl->flags))
		cl->pub.tops->kick(&cl->pub);
	spin_unlock_bh(&cl->tx_lock);
}

void tern_lane_queue_hello(struct tern_core_lane *cl)
{
	tern_lane_queue_ctrl(cl, &cl->hello_frame, &cl->hello_queued);
}

void tern_lane_queue_auth(struct tern_core_lane *cl)
{
	tern_lane_queue_ctrl(cl, &cl->auth_frame, &cl->auth_queued);
}

/**
 * tern_lane_sign - sign and check @cl's frames from now on
 * @cl: an authenticated lane between two frames of its receive path,
 *	with its traffic keys in @cl->auth
 * @after_ack: the acceptor: sign only what follows its AUTH_ACK, from
 *	tern_lane_tx_done(); else from the next frame (nothing is queued)
 *
 * Return: 0, or a negative errno (the lane must go).
 */
int tern_lane_sign(struct tern_core_lane *cl, bool after_ack)
{
	struct tern_lane_mac *mac;

	mac = tern_mac_alloc(cl->auth->rx.mac);
	if (IS_ERR(mac))
		return PTR_ERR(mac);
	cl->rx_mac = mac;
	mac = tern_mac_alloc(cl->auth->tx.mac);
	if (IS_ERR(mac))
		return PTR_ERR(mac);
	if (after_ack)
		cl->tx_mac_next = mac;
	else
		cl->tx_mac = mac;
	return 0;
}

/* The handshake is over (or the lane is): its keys go. */
void tern_lane_auth_free(struct tern_core_lane *cl)
{
	kfree_sensitive(cl->auth);
	cl->auth = NULL;
}

void tern_lane_kill(struct tern_core_lane *cl, int err)
{
	if (test_and_set_bit(TERN_LANE_F_DYING, &cl->flags))
		return;
	cl->error = err;
	kref_get(&cl->ref);
	queue_work(tern_wq, &cl->teardown_work);
}

/**
 * tern_lane_error - a transport reports that a lane's connection is gone
 * @lane: the lane
 * @err: negative errno, or 0 for an orderly close by the peer
 *
 * Any context. Teardown runs later from a core work item.
 */
void tern_lane_error(struct tern_lane *lane, int err)
{
	tern_lane_kill(to_core_lane(lane), err);
}
EXPORT_SYMBOL_GPL(tern_lane_error);

/* Fail a live lane's frame by tern.inject_fail_every; no call when off. */
static inline bool tern_lane_inject(struct tern_core_lane *cl)
{
	if (likely(!READ_ONCE(tern_inject_fail_every)) ||
	    READ_ONCE(cl->state) != TERN_LANE_LIVE || !tern_inject_fault())
		return false;
	TERN_LANE_STAT(cl, injected, 1);
	pr_info_ratelimited("%s: injected failure\n", cl->name);
	tern_lane_kill(cl, -EIO);
	return true;
}

/**
 * tern_lane_tx_next - next frame to transmit on @lane
 * @lane: the lane
 *
 * The frame stays owned by the core; the transport must call
 * tern_lane_tx_done() once all of it has been handed to the network.
 * Return: a frame with seq, ack and hdr_crc filled in, or NULL.
 */
struct tern_frame *tern_lane_tx_next(struct tern_lane *lane)
{
	struct tern_core_lane *cl = to_core_lane(lane);
	struct tern_frame *f;

	/*
	 * Transports poll here more often than frames come: an empty queue
	 * is answered without the lock. A frame queued right after this
	 * look is not lost: its queuer kicks or pushes the transport after
	 * it queued.
	 */
	if (!tern_lane_tx_pending(lane) ||
	    test_bit(TERN_LANE_F_DYING, &cl->flags))
		return NULL;
	/* Fault injection counts frames, not idle polls; off, it costs a load */
	if (unlikely(READ_ONCE(tern_inject_fail_every)) && tern_lane_inject(cl))
		return NULL;

	spin_lock_bh(&cl->tx_lock);
	f = list_first_entry_or_null(&cl->pub.tx_queue, struct tern_frame, entry);
	if (f) {
		if (f->kind == TERN_FRAME_REQUEST) {
			struct tern_request *req;

			req = container_of(f, struct tern_request, frame);
			refcount_inc(&req->ref);
			/*
			 * The reference before the frame leaves the queue:
			 * tern_req_unlink_locked() looks at the entry without
			 * this lock, and a frame it sees off the queue must
			 * already hold the transmit reference.
			 */
			smp_wmb();
		}
		list_del_init(&f->entry);
		cl->tx_cur = f;
	}
	spin_unlock_bh(&cl->tx_lock);
	if (!f)
		return NULL;

	WRITE_ONCE(cl->tx_seq, cl->tx_seq + 1);
	f->hdr.seq = cpu_to_le32(cl->tx_seq);
	f->hdr.ack = cpu_to_le32(READ_ONCE(cl->rx_seq));
	if (!cl->tx_mac) {
		f->tag_len = 0;
		tern_frame_seal(f);
	} else {
		tern_mac_sign(cl->tx_mac, f);
	}
	return f;
}
EXPORT_SYMBOL_GPL(tern_lane_tx_next);

/**
 * tern_lane_count_submitter_sends - count sends made by ->push
 * @lane: the lane
 * @sends: transmissions (a sendmsg, a SEND) made in the submitter's context
 *
 * The counter shows whether requests leave without a worker's wakeup.
 */
void tern_lane_count_submitter_sends(struct tern_lane *lane,
				     unsigned int sends)
{
	TERN_LANE_STAT(to_core_lane(lane), submitter_sends, sends);
}
EXPORT_SYMBOL_GPL(tern_lane_count_submitter_sends);

/**
 * tern_lane_tx_done - the transport finished sending @frame
 * @lane: the lane
 * @frame: the frame returned by the last tern_lane_tx_next()
 */
void tern_lane_tx_done(struct tern_lane *lane, struct tern_frame *frame)
{
	struct tern_core_lane *cl = to_core_lane(lane);
	struct tern_lane_keys *keys = NULL;
	bool close = false;

	/*
	 * A transport holding frames may finish them out of order. tx_cur
	 * is the sender's (see the top of this file): no lock for it, so a
	 * request or reply needs none; control frames' queued flags and a
	 * refusal's close do.
	 */
	if (cl->tx_cur == frame)
		cl->tx_cur = NULL;
	if ((frame->kind == TERN_FRAME_REQUEST ||
	     frame->kind == TERN_FRAME_REPLY) &&
	    !test_bit(TERN_LANE_F_CLOSE_TX, &cl->flags))
		goto done;
	spin_lock_bh(&cl->tx_lock);
	if (frame == &cl->ping_frame) {
		cl->ping_queued = false;
	} else if (frame == &cl->pong_frame) {
		cl->pong_queued = false;
	} else if (frame == &cl->hello_frame) {
		cl->hello_queued = false;
	} else if (frame == &cl->auth_frame) {
		cl->auth_queued = false;
		keys = cl->tx_keys;	/* what follows the AUTH_ACK is sealed */
		cl->tx_keys = NULL;
		/* or signed; the sender's own field, set before it sends more */
		if (cl->tx_mac_next) {
			cl->tx_mac = cl->tx_mac_next;
			cl->tx_mac_next = NULL;
		}
	}
	if (test_bit(TERN_LANE_F_CLOSE_TX, &cl->flags) &&
	    list_empty(&cl->pub.tx_queue))
		close = true;
	spin_unlock_bh(&cl->tx_lock);
	if (keys) {
		int err = cl->pub.tops->encrypt(&cl->pub, keys, true);

		kfree_sensitive(keys);
		if (err)
			tern_lane_kill(cl, err);
	}
done:
	WRITE_ONCE(cl->last_tx_done, jiffies);
	tern_lane_count_frame(cl, true, sizeof(frame->hdr) +
			      tern_frame_front_len(frame) +
			      tern_frame_data_len(frame));

	if (frame->kind == TERN_FRAME_REQUEST)
		tern_request_tx_done(container_of(frame, struct tern_request,
						  frame));
	else if (frame->kind == TERN_FRAME_REPLY)
		tern_srv_req_tx_done(container_of(frame, struct tern_srv_req,
						  frame));
	if (close)
		tern_lane_kill(cl, -ECONNREFUSED);
}
EXPORT_SYMBOL_GPL(tern_lane_tx_done);

__printf(2, 3)
void tern_lane_proto_error(struct tern_lane *lane, const char *fmt, ...)
{
	struct tern_core_lane *cl = to_core_lane(lane);
	struct va_format vaf;
	va_list args;

	TERN_LANE_STAT(cl, proto_errors, 1);
	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_warn_ratelimited("%s: protocol error: %pV\n", cl->name, &vaf);
	va_end(args);
}
EXPORT_SYMBOL_GPL(tern_lane_proto_error);

static void tern_rx_set_front(struct tern_core_lane *cl, void *buf)
{
	struct tern_lane_rx *rx = &cl->pub.rx;

	/* NULL: a front thrown away unread, which integrity does not check */
	rx->front_kvec.iov_base = buf;
	if (!rx->front_len) {
		iov_iter_kvec(&rx->front_iter, ITER_DEST, NULL, 0, 0);
		return;
	}
	if (!buf) {
		iov_iter_discard(&rx->front_iter, ITER_DEST, rx->front_len);
		return;
	}
	rx->front_kvec.iov_len = rx->front_len;
	iov_iter_kvec(&rx->front_iter, ITER_DEST, &rx->front_kvec, 1,
		      rx->front_len);
}

void tern_rx_setup(struct tern_core_lane *cl, void *front,
		   const struct bio_vec *bvec, unsigned int nr_bvec)
{
	struct tern_lane_rx *rx = &cl->pub.rx;

	tern_rx_set_front(cl, front);
	if (!rx->data_len)
		iov_iter_kvec(&rx->data_iter, ITER_DEST, NULL, 0, 0);
	else if (!bvec)
		iov_iter_discard(&rx->data_iter, ITER_DEST, rx->data_len);
	else
		iov_iter_bvec(&rx->data_iter, ITER_DEST, bvec, nr_bvec,
			      rx->data_len);
}

/*
 * Handshake frames come only to the side and at the step that awaits
 * them: HELLO and HELLO_ACK before authentication starts, AUTH and
 * AUTH_ACK as the answer it awaits; each at its fixed size, into @buf.
 */
static int tern_rx_check_handshake(struct tern_core_lane *cl,
				   bool want_requester, bool auth, void *buf,
				   u32 size)
{
	const char *what = auth ? "authentication" : "handshake";
	struct tern_lane_rx *rx = &cl->pub.rx;
	bool awaiting = cl->auth && cl->auth->awaiting;

	/*
	 * Once a refusal is queued (CLOSE_TX) the handshake is over: a
	 * HELLO after it would be answered again, with a new challenge and
	 * its keys each time.
	 */
	if (cl->requester != want_requester ||
	    READ_ONCE(cl->state) != TERN_LANE_HANDSHAKE || awaiting != auth ||
	    test_bit(TERN_LANE_F_CLOSE_TX, &cl->flags)) {
		tern_lane_proto_err(cl, "unexpected %s frame type %u", what,
				    rx->hdr.type);
		return -EPROTO;
	}
	if (rx->front_len != size || rx->data_len) {
		tern_lane_proto_err(cl, "bad %s frame length %u/%u", what,
				    rx->front_len, rx->data_len);
		return -EPROTO;
	}
	tern_rx_setup(cl, buf, NULL, 0);
	return 0;
}

static int tern_rx_check_ping(struct tern_core_lane *cl, bool want_requester)
{
	struct tern_lane_rx *rx = &cl->pub.rx;

	if (cl->requester != want_requester ||
	    READ_ONCE(cl->state) != TERN_LANE_LIVE ||
	    rx->front_len || rx->data_len) {
		tern_lane_proto_err(cl, "unexpected keepalive frame type %u",
				    rx->hdr.type);
		return -EPROTO;
	}
	tern_rx_setup(cl, NULL, NULL, 0);
	return 0;
}

/* Fields a frame type does not use must be zero; @tagged: data_crc is. */
static bool tern_rx_reserved_set(const struct tern_wire_hdr *hdr,
				 bool tagged)
{
	switch (hdr->type) {
	case TERN_WIRE_REQUEST:
		return hdr->status;
	case TERN_WIRE_REPLY:
		return hdr->buf_len &&
		       !(le16_to_cpu(hdr->flags) & TERN_WIRE_F_REMOTE);
	default:
		return hdr->tid || hdr->buf_len || hdr->status ||
		       (hdr->data_crc && !tagged) || hdr->flags;
	}
}

/* A signed frame's part does not match its tag: the lane goes. */
static int tern_rx_bad_tag(struct tern_core_lane *cl, const char *part)
{
	TERN_LANE_STAT(cl, mac_errors, 1);
	pr_warn_ratelimited("%s: %s of a signed frame does not match its tag\n",
			    cl->name, part);
	return -EBADMSG;
}

/*
 * Where the data of the frame being received went: false if it was
 * thrown away unread (or read remotely, which integrity does not cover).
 */
static bool tern_rx_data_kept(struct tern_core_lane *cl,
			      const struct bio_vec **bvec, unsigned int *nr)
{
	struct tern_lane_rx *rx = &cl->pub.rx;
	struct tern_srv_req *sreq = rx->sreq;

	*bvec = NULL;
	*nr = 0;
	if (!rx->data_len)
		return true;
	if (rx->hdr.type == TERN_WIRE_REPLY && rx->req) {
		*bvec = rx->req->bvec;
		*nr = rx->req->nr_bvec;
		return true;
	}
	if (rx->hdr.type == TERN_WIRE_REQUEST && sreq && !sreq->rx_discard &&
	    !sreq->nr_rdesc) {
		*bvec = sreq->rx_bvec ?: sreq->core_bvec;
		*nr = sreq->rx_bvec ? sreq->rx_nr_bvec : sreq->core_nr_bvec;
		return true;
	}
	return false;
}

/*
 * Validate a received header (@lane->rx.hdr holds its 48 bytes) and set
 * up the receive buffers. Return: 0 with lane->rx.{front,data}_{len,iter}
 * set, or a negative errno: the lane closes.
 */
static int tern_lane_rx_header(struct tern_lane *lane)
{
	struct tern_core_lane *cl = to_core_lane(lane);
	struct tern_lane_rx *rx = &lane->rx;
	const struct tern_wire_hdr *hdr = &rx->hdr;
	u32 crc, seq, flags;

	rx->req = NULL;
	rx->sreq = NULL;
	rx->discard = false;
	rx->front_len = 0;
	rx->data_len = 0;
	iov_iter_kvec(&rx->tag_iter, ITER_DEST, NULL, 0, 0);

	if (le32_to_cpu(hdr->magic) != TERN_WIRE_MAGIC) {
		tern_lane_proto_err(cl, "bad magic 0x%08x",
				    le32_to_cpu(hdr->magic));
		return -EPROTO;
	}
	if (hdr->version != TERN_WIRE_VERSION) {
		TERN_LANE_STAT(cl, proto_errors, 1);
		pr_warn_ratelimited("%s: peer speaks protocol version %u, we speak %u; refusing\n",
				    cl->name, hdr->version, TERN_WIRE_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (cl->rx_mac) {
		if (!tern_mac_check_hdr(cl->rx_mac, hdr))
			return tern_rx_bad_tag(cl, "header");
		rx->tag_kvec.iov_base = rx->tag;
		rx->tag_kvec.iov_len = sizeof(rx->tag);
		iov_iter_kvec(&rx->tag_iter, ITER_DEST, &rx->tag_kvec, 1,
			      sizeof(rx->tag));
	} else {
		crc = tern_crc(hdr, offsetof(struct tern_wire_hdr, hdr_crc));
		if (crc != le32_to_cpu(hdr->hdr_crc)) {
			TERN_LANE_STAT(cl, crc_errors, 1);
			pr_warn_ratelimited("%s: header crc mismatch\n",
					    cl->name);
			return -EBADMSG;
		}
	}
	flags = le16_to_cpu(hdr->flags);
	if (!hdr->type || hdr->type > TERN_WIRE_TYPE_MAX ||
	    (flags & ~TERN_WIRE_F_ALL)) {
		tern_lane_proto_err(cl, "bad type %u flags 0x%x", hdr->type,
				    flags);
		return -EPROTO;
	}
	seq = le32_to_cpu(hdr->seq);
	if (seq != cl->rx_seq + 1) {
		tern_lane_proto_err(cl, "sequence %u, expected %u", seq,
				    cl->rx_seq + 1);
		return -EPROTO;
	}
	if ((s32)(le32_to_cpu(hdr->ack) - READ_ONCE(cl->tx_seq)) > 0) {
		tern_lane_proto_err(cl, "ack %u of frame %u never sent",
				    le32_to_cpu(hdr->ack), READ_ONCE(cl->tx_seq));
		return -EPROTO;
	}
	if (tern_rx_reserved_set(hdr, cl->rx_mac)) {
		tern_lane_proto_err(cl, "reserved fields set in frame type %u",
				    hdr->type);
		return -EPROTO;
	}
	rx->front_len = le32_to_cpu(hdr->front_len);
	rx->data_len = le32_to_cpu(hdr->data_len);
	if (rx->front_len > cl->max_front || rx->data_len > cl->max_data ||
	    le32_to_cpu(hdr->buf_len) > cl->max_data) {
		tern_lane_proto_err(cl, "oversized frame front %u data %u buf %u",
				    rx->front_len, rx->data_len,
				    le32_to_cpu(hdr->buf_len));
		return -EMSGSIZE;
	}
	WRITE_ONCE(cl->rx_seq, seq);
	WRITE_ONCE(cl->pub.last_rx, jiffies);
	if (tern_lane_inject(cl))
		return -EIO;

	switch (hdr->type) {
	case TERN_WIRE_HELLO:
	case TERN_WIRE_HELLO_ACK:
		return tern_rx_check_handshake(cl,
					       hdr->type == TERN_WIRE_HELLO_ACK,
					       false, &cl->hello_rx,
					       sizeof(cl->hello_rx));
	case TERN_WIRE_AUTH:
	case TERN_WIRE_AUTH_ACK:
		return tern_rx_check_handshake(cl,
					       hdr->type == TERN_WIRE_AUTH_ACK,
					       true, &cl->auth_rx,
					       sizeof(cl->auth_rx));
	case TERN_WIRE_PING:
		return tern_rx_check_ping(cl, false);
	case TERN_WIRE_PONG:
		return tern_rx_check_ping(cl, true);
	case TERN_WIRE_REQUEST:
		if (cl->requester || READ_ONCE(cl->state) != TERN_LANE_LIVE) {
			tern_lane_proto_err(cl, "unexpected request");
			return -EPROTO;
		}
		return tern_server_rx_request_hdr(cl);
	case TERN_WIRE_REPLY:
		if (!cl->requester || READ_ONCE(cl->state) != TERN_LANE_LIVE) {
			tern_lane_proto_err(cl, "unexpected reply");
			return -EPROTO;
		}
		return tern_session_rx_reply_hdr(cl);
	}
	return -EPROTO;
}

/* The front has been received. Return: 0 with data_iter set, or <0. */
static int tern_lane_rx_front(struct tern_lane *lane)
{
	struct tern_core_lane *cl = to_core_lane(lane);
	struct tern_lane_rx *rx = &lane->rx;

	/* before the ULP reads it */
	if (cl->rx_mac && (rx->front_kvec.iov_base || !rx->front_len) &&
	    !tern_mac_check_front(cl->rx_mac, rx->front_kvec.iov_base,
				  rx->front_len, rx->tag))
		return tern_rx_bad_tag(cl, "front");
	if (rx->hdr.type == TERN_WIRE_REQUEST)
		return tern_server_rx_request_front(cl);
	return 0;
}

/* The next bytes are a frame's header. */
static void tern_rx_expect_hdr(struct tern_lane_rx *rx)
{
	rx->hdr_kvec.iov_base = &rx->hdr;
	rx->hdr_kvec.iov_len = sizeof(rx->hdr);
	iov_iter_kvec(&rx->hdr_iter, ITER_DEST, &rx->hdr_kvec, 1,
		      sizeof(rx->hdr));
	rx->part = TERN_RX_HDR;
}

/* tern_lane_rx_next()'s walk through the parts of a frame */
static struct iov_iter *tern_lane_rx_walk(struct tern_lane *lane)
{
	struct tern_lane_rx *rx = &lane->rx;
	int ret;

	for (;;) {
		switch (rx->part) {
		case TERN_RX_IDLE:
			tern_rx_expect_hdr(rx);
			return &rx->hdr_iter;
		case TERN_RX_HDR:
			if (iov_iter_count(&rx->hdr_iter))
				return &rx->hdr_iter;
			ret = tern_lane_rx_header(lane);
			if (ret)
				return ERR_PTR(ret);
			rx->part = TERN_RX_FRONT;
			break;
		case TERN_RX_FRONT:
			if (iov_iter_count(&rx->tag_iter))
				return &rx->tag_iter;
			if (iov_iter_count(&rx->front_iter))
				return &rx->front_iter;
			ret = tern_lane_rx_front(lane);
			if (ret)
				return ERR_PTR(ret);
			rx->part = TERN_RX_DATA;
			break;
		case TERN_RX_DATA:
			if (iov_iter_count(&rx->data_iter))
				return &rx->data_iter;
			rx->part = TERN_RX_WHOLE;
			return NULL;
		default:
			return NULL;
		}
	}
}

/* tern_lane_rx_next() when the part being filled is full */
struct iov_iter *tern_lane_rx_step(struct tern_lane *lane)
{
	struct iov_iter *iter = tern_lane_rx_walk(lane);

	lane->rx.filling = IS_ERR(iter) ? NULL : iter;
	return iter;
}
EXPORT_SYMBOL_GPL(tern_lane_rx_step);

/**
 * tern_lane_rx_done - the whole frame has been received
 * @lane: the lane; tern_lane_rx_next() returned NULL
 *
 * Return: 0, or a negative errno: the transport must close the lane.
 */
int tern_lane_rx_done(struct tern_lane *lane)
{
	struct tern_core_lane *cl = to_core_lane(lane);
	struct tern_lane_rx *rx = &lane->rx;

	if (WARN_ON_ONCE(rx->part != TERN_RX_WHOLE))
		return -EINVAL;
	/*
	 * The next bytes start a frame: ready for them here, so that the
	 * transport's next tern_lane_rx_next() is answered inline. The
	 * header is only written when they come, after the switch below.
	 */
	tern_rx_expect_hdr(rx);
	rx->filling = &rx->hdr_iter;

	if (cl->rx_mac) {
		const struct bio_vec *bvec;
		unsigned int nr;

		/* before the request or the reply takes effect */
		if (tern_rx_data_kept(cl, &bvec, &nr) &&
		    !tern_mac_check_data(cl->rx_mac, bvec, nr, rx->data_len,
					 rx->tag + TERN_WIRE_PART_TAG_LEN))
			return tern_rx_bad_tag(cl, "data");
	}
	tern_lane_count_frame(cl, false, sizeof(rx->hdr) + rx->front_len +
			      rx->data_len);

	switch (rx->hdr.type) {
	case TERN_WIRE_HELLO:
		return tern_server_rx_hello(cl);
	case TERN_WIRE_HELLO_ACK:
		return tern_session_rx_hello_ack(cl);
	case TERN_WIRE_AUTH:
		return tern_server_rx_auth(cl);
	case TERN_WIRE_AUTH_ACK:
		return tern_session_rx_auth_ack(cl);
	case TERN_WIRE_PING:
		tern_lane_queue_ctrl(cl, &cl->pong_frame, &cl->pong_queued);
		return 0;
	case TERN_WIRE_PONG:
		return 0;
	case TERN_WIRE_REQUEST:
		return tern_server_rx_request_done(cl);
	case TERN_WIRE_REPLY:
		return tern_session_rx_reply_done(cl);
	}
	return -EPROTO;
}
EXPORT_SYMBOL_GPL(tern_lane_rx_done);

void tern_lane_arm_keepalive(struct tern_core_lane *cl, unsigned int ms)
{
	mod_delayed_work(tern_wq, &cl->ka_work, msecs_to_jiffies(ms));
}

/* Handshake deadline before the lane is live, keepalive after. */
static void tern_lane_ka_work(struct work_struct *work)
{
	struct tern_core_lane *cl = container_of(to_delayed_work(work),
						 struct tern_core_lane,
						 ka_work);
	unsigned int ka_interval, ka_timeout;
	unsigned long now = jiffies;

	if (test_bit(TERN_LANE_F_DYING, &cl->flags))
		return;

	if (READ_ONCE(cl->state) != TERN_LANE_LIVE) {
		unsigned long deadline = cl->born +
			msecs_to_jiffies(tern_handshake_ms());

		if (time_after_eq(now, deadline)) {
			pr_info_ratelimited("%s: handshake timeout\n",
					    cl->name);
			tern_lane_kill(cl, -ETIMEDOUT);
			return;
		}
		mod_delayed_work(tern_wq, &cl->ka_work, deadline - now);
		return;
	}

	/* tern_session_set_timeouts() may change them on a live lane */
	ka_timeout = READ_ONCE(cl->ka_timeout_ms);
	ka_interval = READ_ONCE(cl->ka_interval_ms);
	if (ka_timeout &&
	    time_after(now, READ_ONCE(cl->pub.last_rx) +
		       msecs_to_jiffies(ka_timeout))) {
		pr_warn_ratelimited("%s: keepalive timeout after %u ms\n",
				    cl->name, ka_timeout);
		tern_lane_kill(cl, -ETIMEDOUT);
		return;
	}
	if (tern_lane_tx_stalled(cl, now)) {
		tern_lane_kill(cl, -ETIMEDOUT);
		return;
	}
	if (cl->requester)
		tern_lane_queue_ctrl(cl, &cl->ping_frame, &cl->ping_queued);
	if (ka_interval)
		mod_delayed_work(tern_wq, &cl->ka_work,
				 msecs_to_jiffies(ka_interval));
}

const char *const tern_lane_state_names[] = {
	[TERN_LANE_CONNECTING]	= "connecting",
	[TERN_LANE_HANDSHAKE]	= "handshake",
	[TERN_LANE_LIVE]	= "live",
	[TERN_LANE_DEAD]	= "dead",
};

/* The moves a lane makes (design.rst, "Lane and session states"). */
static const u8 tern_lane_moves[] = {
	[TERN_LANE_CONNECTING]	= BIT(TERN_LANE_HANDSHAKE) | BIT(TERN_LANE_DEAD),
	[TERN_LANE_HANDSHAKE]	= BIT(TERN_LANE_LIVE) | BIT(TERN_LANE_DEAD),
	[TERN_LANE_LIVE]	= BIT(TERN_LANE_DEAD),
	[TERN_LANE_DEAD]	= 0,
};

/**
 * tern_move_ok - may an object go from one state to another
 * @moves: for each state, a bit for each state it may move to
 * @names: each state's name
 * @dead: the final state
 * @old: the state it is in
 * @new: the state it is asked to go to
 * @who: names the object in a warning
 *
 * A late move out of @dead is refused without a word (an object raced
 * with its own end); any other move not in @moves is a bug, refused with
 * a warning.
 */
bool tern_move_ok(const u8 *moves, const char *const *names, unsigned int dead,
		  unsigned int old, unsigned int new, const char *who)
{
	if (old == dead)
		return false;
	return !WARN_ONCE(!(moves[old] & BIT(new)), "%s: %s -> %s is no move\n",
			  who, names[old], names[new]);
}

/*
 * Print @moves to @m, a line per state: "@kind STATE: NEXT NEXT...", for
 * debugfs "moves", which the selftests compare with design.rst.
 */
void tern_moves_show(struct seq_file *m, const char *kind, const u8 *moves,
		     const char *const *names, unsigned int nr)
{
	unsigned int from, to;

	for (from = 0; from < nr; from++) {
		seq_printf(m, "%s %s:", kind, names[from]);
		for (to = 0; to < nr; to++)
			if (moves[from] & BIT(to))
				seq_printf(m, " %s", names[to]);
		seq_putc(m, '\n');
	}
}

void tern_lane_moves_show(struct seq_file *m)
{
	tern_moves_show(m, "lane", tern_lane_moves, tern_lane_state_names,
			ARRAY_SIZE(tern_lane_moves));
}

/**
 * tern_lane_move - the one place a lane changes state
 * @cl: the lane, held by whoever owns it at this stage (its creator, its
 *	transport's accept, sess->lock once bound, its teardown)
 * @new: the state it moves to, if tern_move_ok() agrees
 */
void tern_lane_move(struct tern_core_lane *cl, enum tern_lane_state new)
{
	if (tern_move_ok(tern_lane_moves, tern_lane_state_names, TERN_LANE_DEAD,
			 READ_ONCE(cl->state), new, cl->name))
		WRITE_ONCE(cl->state, new);
}

static void tern_lane_rx_cleanup(struct tern_core_lane *cl)
{
	struct tern_lane_rx *rx = &cl->pub.rx;
	struct tern_session *sess = cl->sess;

	if (rx->sreq)
		tern_server_rx_abort(cl);
	if (rx->req && sess) {
		struct tern_req_shard *sh = tern_req_shard(rx->req);

		spin_lock_bh(&sh->lock);
		if (rx->req->rx_lane == &cl->pub) {
			rx->req->rx_lane = NULL;
			rx->req->lane_faults++;	/* its reply was cut off */
		}
		spin_unlock_bh(&sh->lock);
	}
	rx->req = NULL;
}

static void tern_lane_teardown_work(struct work_struct *work)
{
	struct tern_core_lane *cl = container_of(work, struct tern_core_lane,
						 teardown_work);

	spin_lock_bh(&cl->tx_lock);
	set_bit(TERN_LANE_F_TX_CLOSED, &cl->flags);
	spin_unlock_bh(&cl->tx_lock);
	/* TX_CLOSED before the count: tern_lane_push() */
	smp_mb();
	wait_var_event(&cl->pushers, !atomic_read(&cl->pushers));

	cl->pub.tops->shutdown(&cl->pub);
	cancel_delayed_work_sync(&cl->ka_work);

	if (cl->error && cl->error != -ESHUTDOWN)
		pr_info_ratelimited("%s: lane down (%d)\n", cl->name,
				    cl->error);

	tern_lane_rx_cleanup(cl);
	if (cl->sess) {
		tern_session_lane_down(cl->sess, cl);
	} else {
		/* dead first, as tern_lane_queue_live() expects */
		tern_lane_move(cl, TERN_LANE_DEAD);
		spin_lock_bh(&cl->tx_lock);
		INIT_LIST_HEAD(&cl->pub.tx_queue);
		cl->tx_cur = NULL;
		spin_unlock_bh(&cl->tx_lock);
	}
	/*
	 * Again, now that it is dead: until its move under sess->lock a
	 * timeouts change (tern_session_set_timeouts()) may have armed it.
	 */
	cancel_delayed_work_sync(&cl->ka_work);
	tern_endpoint_lane_gone(cl->ep, cl);
	tern_lane_put(cl);	/* the creator's reference */
	tern_lane_put(cl);	/* the teardown work's reference */
}

/*
 * A peer that sends (PINGs, requests) but never reads keeps the keepalive
 * happy while its replies, and the requests and pages behind them, wait
 * in our queue for as long as it likes. So a responder lane with frames
 * waiting of which none was sent for tern.tx_stall_timeout_ms is closed.
 * The clock starts when the keepalive work first sees frames waiting, or
 * at the last frame sent since: the lane goes within the timeout plus
 * two keepalive intervals. Requesters need no such check: their peer's
 * silence is their keepalive timeout. Called from the keepalive work.
 */
bool tern_lane_tx_stalled(struct tern_core_lane *cl, unsigned long now)
{
	unsigned int ms = READ_ONCE(tern_tx_stall_timeout_ms);
	unsigned long last = READ_ONCE(cl->last_tx_done);

	if (!ms || cl->requester)
		return false;
	if (!tern_lane_tx_pending(&cl->pub) && !READ_ONCE(cl->tx_cur)) {
		cl->tx_wait_since = 0;
		return false;
	}
	if (!cl->tx_wait_since)
		cl->tx_wait_since = now;
	if (time_after(last, cl->tx_wait_since))
		cl->tx_wait_since = last;
	if (time_before(now, cl->tx_wait_since + msecs_to_jiffies(ms)))
		return false;
	atomic64_inc(&cl->ep->tx_stalls);
	pr_warn_ratelimited("%s: no transmit progress for %u ms with frames queued (peer not reading?), closing\n",
			    cl->name, jiffies_to_msecs(now - cl->tx_wait_since));
	return true;
}

/**
 * tern_lane_accept - create a lane for a connection accepted on @lis
 * @lis: the listener
 * @peer: the peer's address, for logs and the per-address caps
 *
 * Return: the lane, or NULL (endpoint going away or no memory).
 */
struct tern_lane *tern_lane_accept(struct tern_listener *lis,
				   const struct sockaddr_storage *peer)
{
	struct tern_endpoint *ep = lis->ep;
	unsigned int cap, peer_cap;
	struct tern_core_lane *cl;
	struct tern_peer *p;

	/*
	 * Bound the memory strangers can make us spend before a handshake,
	 * and what one address takes of it, so a flood from one host
	 * leaves room for the others.
	 */
	mutex_lock(&ep->lock);
	cap = READ_ONCE(tern_max_handshakes);
	if (ep->nr_handshakes >= cap) {
		ep->refused_handshakes++;
		mutex_unlock(&ep->lock);
		pr_warn_ratelimited("%s: too many connections in handshake, refusing %pISpc\n",
				    ep->name, peer);
		return NULL;
	}
	p = tern_peer_get_locked(ep, peer);
	if (IS_ERR(p)) {
		mutex_unlock(&ep->lock);
		return NULL;
	}
	peer_cap = READ_ONCE(tern_max_handshakes_per_peer);
	if (p && peer_cap && p->handshakes >= peer_cap) {
		ep->refused_peer_handshakes++;
		tern_peer_put_locked(ep, p);
		mutex_unlock(&ep->lock);
		pr_warn_ratelimited("%s: %pISc has %u connections in handshake already, refusing %pISpc\n",
				    ep->name, peer, peer_cap, peer);
		return NULL;
	}
	ep->nr_handshakes++;
	if (p)
		p->handshakes++;
	mutex_unlock(&ep->lock);

	cl = tern_lane_alloc(ep, lis->tops, false);
	if (!cl) {
		tern_endpoint_handshake_done(ep, p);
		return NULL;
	}
	cl->peer = p;
	cl->counted_handshake = true;
	snprintf(cl->name, sizeof(cl->name), "%s/accept/%pISpc", lis->ep->name,
		 peer);
	return &cl->pub;
}
EXPORT_SYMBOL_GPL(tern_lane_accept);

/**
 * tern_lane_start - start the handshake clock of an accepted lane
 * @lane: the lane, with its transport state set up
 */
void tern_lane_start(struct tern_lane *lane)
{
	struct tern_core_lane *cl = to_core_lane(lane);

	tern_lane_move(cl, TERN_LANE_HANDSHAKE);
	tern_lane_arm_keepalive(cl, tern_handshake_ms());
}
EXPORT_SYMBOL_GPL(tern_lane_start);

/**
 * tern_lane_abort - drop a lane from tern_lane_accept() that never started
 * @lane: the lane; the transport has already freed its state
 */
void tern_lane_abort(struct tern_lane *lane)
{
	struct tern_core_lane *cl = to_core_lane(lane);

	tern_endpoint_lane_gone(cl->ep, cl);
	tern_lane_put(cl);
}
EXPORT_SYMBOL_GPL(tern_lane_abort);
