// SPDX-License-Identifier: GPL-2.0
/*
 * tern messenger core: sessions and the requester side.
 *
 * A session owns its lane slots, its requests in flight (in shards, each
 * with a table of pending requests by tid and a backlog of requests
 * waiting for a live lane) and the in-flight throttle. Requests are
 * at-least-once: a request without a reply when its lane dies is resent,
 * flagged TERN_WIRE_F_RESENT, on another live lane or on the first lane
 * that comes back. If no lane is live for the loss timeout, every pending
 * request fails with -ETIMEDOUT.
 *
 * Locking: sess->lock (spinlock, bh) protects state, slots and paths.
 * Requests in flight are in shards (struct tern_req_shard), each with its
 * own lock for its pending table, its backlog and its requests' lanes; the
 * in-flight limits are atomic. sess->lock nests outside a shard's lock,
 * which nests outside lane->tx_lock. ULP callbacks (done, events) run
 * without locks held, in process context.
 *
 * Request lifetime: req->ref is one for "pending" plus one while a lane
 * transmits it; done() runs when both are gone, so a reply racing with
 * the end of a transmission never frees pages under the transport.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/random.h>
#include <linux/sched/mm.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include "tern_core.h"

static void tern_session_free_work(struct work_struct *work)
{
	struct tern_session *sess = container_of(work, struct tern_session,
						 free_work);
	struct tern_endpoint *ep = sess->ep;
	struct tern_peer *peer = sess->peer;
	bool counted = sess->counted;

	cancel_work_sync(&sess->event_work);
	if (!sess->requester && ep->ops && ep->ops->session_event)
		ep->ops->session_event(sess, TERN_SESSION_GONE);
	debugfs_remove_recursive(sess->dbg);
	free_percpu(sess->counts);
	kvfree(sess->shards);
	kfree(sess->slots);
	kfree_sensitive(sess->auth_keys);
	kfree(sess);
	tern_obj_dec(TERN_OBJ_SESSION);

	if (!counted)
		return;
	mutex_lock(&ep->lock);
	ep->nr_sessions--;
	if (peer && !WARN_ON_ONCE(!peer->sessions)) {
		peer->sessions--;
		tern_peer_put_locked(ep, peer);
	}
	wake_up_all(&ep->wait);
	mutex_unlock(&ep->lock);
}

static void tern_session_release(struct kref *ref)
{
	struct tern_session *sess = container_of(ref, struct tern_session,
						 ref);

	queue_work(tern_wq, &sess->free_work);
}

void tern_session_put(struct tern_session *sess)
{
	kref_put(&sess->ref, tern_session_release);
}

/* The event that tells what @sess is now, or -1 for none. */
static int tern_session_state_event(struct tern_session *sess)
{
	switch (READ_ONCE(sess->state)) {
	case TERN_SESS_LIVE:
		return TERN_SESSION_UP;
	case TERN_SESS_RECONNECTING:
		return TERN_SESSION_DOWN;
	case TERN_SESS_FAILED:
		return TERN_SESSION_FAILED;
	default:
		return -1;
	}
}

/*
 * Pending events are bits, which keep no order: a lane lost and found
 * again before this work runs leaves DOWN and UP. The one that tells the
 * session's state goes last, so that a ULP keeping a state from them (as
 * tern_blk does) ends with the right one. Every move sets its bit under
 * sess->lock with the move, and the state is read after the bits are
 * taken: a later move sets its bit again and runs this again.
 */
static void tern_session_event_work(struct work_struct *work)
{
	struct tern_session *sess = container_of(work, struct tern_session,
						 event_work);
	const struct tern_endpoint_ops *ops = sess->ep->ops;
	unsigned long events;
	int ev, last;

	events = xchg(&sess->events, 0);
	last = tern_session_state_event(sess);
	if (!ops || !ops->session_event)
		return;
	if (last >= 0 && !(events & BIT(last)))
		last = -1;
	for (ev = TERN_SESSION_UP; ev <= TERN_SESSION_FAILED; ev++)
		if ((events & BIT(ev)) && ev != last)
			ops->session_event(sess, ev);
	if (last >= 0)
		ops->session_event(sess, last);
}

void tern_session_event(struct tern_session *sess,
			enum tern_session_event ev)
{
	set_bit(ev, &sess->events);
	queue_work(tern_wq, &sess->event_work);
}

static void tern_slot_connect_work(struct work_struct *work);
static void tern_session_loss_work(struct work_struct *work);

static const char *const tern_sess_state_names[] = {
	[TERN_SESS_CONNECTING]	 = "connecting",
	[TERN_SESS_LIVE]	 = "live",
	[TERN_SESS_RECONNECTING] = "reconnecting",
	[TERN_SESS_FAILED]	 = "failed",
	[TERN_SESS_DEAD]	 = "dead",
};

/*
 * The moves a session makes (design.rst, "Lane and session states").
 * Only a requester's session reconnects, fails and dies by
 * tern_session_destroy(); a responder's goes from CONNECTING to LIVE
 * and is freed when its last lane has gone.
 */
static const u8 tern_session_moves[] = {
	[TERN_SESS_CONNECTING]	 = BIT(TERN_SESS_LIVE) | BIT(TERN_SESS_DEAD),
	[TERN_SESS_LIVE]	 = BIT(TERN_SESS_RECONNECTING) |
				   BIT(TERN_SESS_DEAD),
	[TERN_SESS_RECONNECTING] = BIT(TERN_SESS_LIVE) | BIT(TERN_SESS_FAILED) |
				   BIT(TERN_SESS_DEAD),
	[TERN_SESS_FAILED]	 = BIT(TERN_SESS_LIVE) | BIT(TERN_SESS_DEAD),
	[TERN_SESS_DEAD]	 = 0,
};

void tern_session_moves_show(struct seq_file *m)
{
	tern_moves_show(m, "session", tern_session_moves,
			tern_sess_state_names, ARRAY_SIZE(tern_session_moves));
}

/*
 * The one place a session changes state, if tern_move_ok() agrees (a
 * lane admitted while the session is destroyed finds it DEAD, and leaves
 * it so). Return: whether the session made the move.
 */
static bool tern_session_move_locked(struct tern_session *sess,
				     enum tern_session_state new)
{
	char who[32];

	lockdep_assert_held(&sess->lock);
	snprintf(who, sizeof(who), "tern: session %llx", sess->id);
	if (!tern_move_ok(tern_session_moves, tern_sess_state_names,
			  TERN_SESS_DEAD, sess->state, new, who))
		return false;
	WRITE_ONCE(sess->state, new);
	return true;
}

struct tern_session *tern_session_alloc(struct tern_endpoint *ep,
					bool requester, unsigned int nr_slots)
{
	struct tern_session *sess;
	unsigned int i;

	sess = kzalloc(sizeof(*sess), GFP_KERNEL);
	if (!sess)
		return NULL;
	sess->slots = kcalloc(nr_slots, sizeof(*sess->slots), GFP_KERNEL);
	sess->counts = alloc_percpu(struct tern_sess_counts);
	if (requester)
		sess->shards = kvcalloc(nr_slots, sizeof(*sess->shards),
					GFP_KERNEL);
	if (!sess->slots || !sess->counts || (requester && !sess->shards)) {
		free_percpu(sess->counts);
		kvfree(sess->shards);
		kfree(sess->slots);
		kfree(sess);
		return NULL;
	}
	if (requester)
		sess->nr_shards = nr_slots;
	for (i = 0; i < sess->nr_shards; i++) {
		spin_lock_init(&sess->shards[i].lock);
		INIT_LIST_HEAD(&sess->shards[i].backlog);
		hash_init(sess->shards[i].pending);
	}
	tern_obj_inc(TERN_OBJ_SESSION);
	kref_init(&sess->ref);
	sess->ep = ep;
	sess->requester = requester;
	sess->state = TERN_SESS_CONNECTING;
	sess->nr_slots = nr_slots;
	spin_lock_init(&sess->lock);
	INIT_LIST_HEAD(&sess->ep_entry);
	INIT_HLIST_NODE(&sess->group_node);
	init_waitqueue_head(&sess->wait);
	INIT_DELAYED_WORK(&sess->loss_work, tern_session_loss_work);
	INIT_WORK(&sess->event_work, tern_session_event_work);
	INIT_WORK(&sess->free_work, tern_session_free_work);
	for (i = 0; i < nr_slots; i++) {
		sess->slots[i].sess = sess;
		sess->slots[i].idx = i;
		INIT_DELAYED_WORK(&sess->slots[i].connect_work,
				  tern_slot_connect_work);
	}
	return sess;
}

/* The next pick starts after @p; unchanged, the shared line stays clean. */
static void tern_path_rr_set(struct tern_session *sess, struct tern_path *p)
{
	if (READ_ONCE(sess->path_rr) != p->idx + 1)
		WRITE_ONCE(sess->path_rr, p->idx + 1);
}

/*
 * The path the session's I/O policy picks among the live ones, or NULL.
 * Called under a shard's lock, or sess->lock (the top of tern_core.h).
 */
static struct tern_path *tern_pick_path(struct tern_session *sess)
{
	unsigned int n = sess->nr_paths, i, rr = READ_ONCE(sess->path_rr);
	struct tern_path *p, *best = NULL;

	switch (READ_ONCE(sess->iopolicy)) {
	case TERN_IOPOLICY_ROUND_ROBIN:
		for (i = 0; i < n; i++) {
			p = &sess->paths[(rr + i) % n];
			if (READ_ONCE(p->nr_live)) {
				tern_path_rr_set(sess, p);
				return p;
			}
		}
		return NULL;
	case TERN_IOPOLICY_MIN_INFLIGHT:
		/* ties go round, so that equal paths share the load */
		for (i = 0; i < n; i++) {
			p = &sess->paths[(rr + i) % n];
			if (READ_ONCE(p->nr_live) &&
			    (!best || atomic_read(&p->inflight) <
				      atomic_read(&best->inflight)))
				best = p;
		}
		if (best)
			tern_path_rr_set(sess, best);
		return best;
	default:	/* failover: the first live path in order of preference */
		for (i = 0; i < n; i++)
			if (READ_ONCE(sess->paths[i].nr_live))
				return &sess->paths[i];
		return NULL;
	}
}

/*
 * A live lane of the path the policy picks: the one @hint names among the
 * path's lanes, else the next live one. Called as tern_pick_path() is; a
 * lane seen live here may be going down, and its teardown's sweep takes
 * the request back (tern_session_lane_down()).
 */
static struct tern_core_lane *tern_pick_lane(struct tern_session *sess,
					     unsigned int hint)
{
	struct tern_path *path;
	struct tern_core_lane *cl;
	unsigned int i;

	if (!READ_ONCE(sess->nr_live))
		return NULL;
	path = tern_pick_path(sess);
	if (!path)
		return NULL;
	for (i = 0; i < path->lanes; i++) {
		cl = READ_ONCE(sess->slots[path->idx + (hint + i) %
					   path->lanes * sess->nr_paths].lane);
		if (cl && READ_ONCE(cl->state) == TERN_LANE_LIVE)
			return cl;
	}
	return NULL;
}

/*
 * Point @req at @cl (or at no lane), keeping the paths' counts. Reserved
 * requests, which the responder may hold for long, are not in a path's
 * inflight: they would keep min-inflight off their path.
 */
static void tern_req_set_lane_locked(struct tern_request *req,
				     struct tern_core_lane *cl)
{
	lockdep_assert_held(&tern_req_shard(req)->lock);
	if (req->path && !req->reserved)
		atomic_dec(&req->path->inflight);
	req->lane = cl ? &cl->pub : NULL;
	req->path = cl && cl->slot ? cl->slot->path : NULL;
	if (req->path) {
		if (!req->reserved)
			atomic_inc(&req->path->inflight);
		atomic64_inc(&req->path->requests);
	}
}

/*
 * Send @req on a live lane, or park it in its shard's backlog. With @push,
 * a lane whose transport can send from the caller's context is returned
 * with a reference, to be handed to tern_lane_push() once the shard's lock
 * is dropped.
 */
static struct tern_core_lane *tern_req_queue_locked(struct tern_request *req,
						    bool push)
{
	struct tern_core_lane *cl = tern_pick_lane(req->sess, req->lane_hint);

	tern_req_set_lane_locked(req, cl);
	if (!cl) {
		list_add_tail(&req->backlog, &tern_req_shard(req)->backlog);
		return NULL;
	}
	push = push && cl->pub.tops->push;
	tern_lane_queue_frame(cl, &req->frame, !push);
	if (!push)
		return NULL;
	kref_get(&cl->ref);
	return cl;
}

/* Give back what tern_throttle_take() took for @req. */
static void tern_throttle_give(struct tern_session *sess,
			       const struct tern_request *req)
{
	if (req->reserved) {
		atomic_dec(&sess->reserved_inflight);
	} else {
		atomic64_sub(req->data_len, &sess->inflight_bytes);
		atomic_dec(&sess->inflight);
	}
}

/*
 * Take @req off every queue and give its throttle room back; caller holds
 * its shard's lock. The final tern_req_put() wakes throttled senders.
 */
static void tern_req_unlink_locked(struct tern_request *req)
{
	lockdep_assert_held(&tern_req_shard(req)->lock);
	if (!hlist_unhashed(&req->hash))
		tern_throttle_give(req->sess, req);
	hash_del(&req->hash);
	list_del_init(&req->backlog);
	/*
	 * Most frames left their queue long ago. Only a holder of the
	 * shard's lock queues a request, so one seen off its queue here stays
	 * off: no need for the lane's lock. tern_lane_tx_next() takes its
	 * transmit reference before it takes the frame off the queue; the
	 * read barrier pairs with its write barrier, so the caller's put
	 * sees that reference.
	 */
	if (req->lane) {
		if (!list_empty(&req->frame.entry))
			tern_lane_dequeue_frame(to_core_lane(req->lane),
						&req->frame);
		else	/* pairs with tern_lane_tx_next()'s smp_wmb() */
			smp_rmb();
	}
	tern_req_set_lane_locked(req, NULL);
}

void tern_req_put(struct tern_request *req)
{
	struct tern_session *sess = req->sess;

	if (!refcount_dec_and_test(&req->ref))
		return;
	/* full barrier: the unlink's room before the look for sleepers */
	if (wq_has_sleeper(&sess->wait))
		wake_up_all(&sess->wait);
	req->done(req);
}

void tern_request_tx_done(struct tern_request *req)
{
	tern_req_put(req);
}

static void tern_req_fail_list(struct list_head *list, int status,
			       atomic64_t *counter)
{
	struct tern_request *req, *tmp;

	list_for_each_entry_safe(req, tmp, list, backlog) {
		list_del_init(&req->backlog);
		req->status = status;
		if (counter)
			atomic64_inc(counter);
		tern_req_put(req);
	}
}

/*
 * Move every pending request whose reply is not coming in to @out. After
 * a move to FAILED or DEAD, which tern_send() checks under the shard's
 * lock: no request comes after the sweep.
 */
static void tern_session_collect(struct tern_session *sess,
				 struct list_head *out)
{
	struct tern_request *req;
	struct tern_req_shard *sh;
	struct hlist_node *tmp;
	unsigned int i, bkt;

	for (i = 0; i < sess->nr_shards; i++) {
		sh = &sess->shards[i];
		spin_lock_bh(&sh->lock);
		hash_for_each_safe(sh->pending, bkt, tmp, req, hash) {
			if (req->rx_lane)
				continue;	/* the receiving lane completes it */
			tern_req_unlink_locked(req);
			list_add_tail(&req->backlog, out);
		}
		spin_unlock_bh(&sh->lock);
	}
}

/**
 * tern_request_init - prepare a request for tern_send()
 * @req: the request; call before filling in its fields
 */
void tern_request_init(struct tern_request *req)
{
	memset(req, 0, sizeof(*req));
	INIT_LIST_HEAD(&req->frame.entry);
	INIT_HLIST_NODE(&req->hash);
	INIT_LIST_HEAD(&req->backlog);
	req->frame.kind = TERN_FRAME_REQUEST;
}
EXPORT_SYMBOL_GPL(tern_request_init);

/* The session takes no more requests: they would wait for ever. */
static bool tern_session_closed(struct tern_session *sess)
{
	enum tern_session_state state = READ_ONCE(sess->state);

	return state == TERN_SESS_FAILED || state == TERN_SESS_DEAD;
}

/*
 * Take room for @req in the session's in-flight limits, without a lock:
 * the queue depth (or TERN_RESERVED_REQS for reserved requests, which
 * carry no data) and the bytes in flight, which one request alone may
 * exceed. Return: 0, or -EAGAIN when the limits are reached.
 */
static int tern_throttle_take(struct tern_session *sess,
			      const struct tern_request *req)
{
	u64 bytes;

	if (req->reserved)
		return atomic_add_unless(&sess->reserved_inflight, 1,
					 TERN_RESERVED_REQS) ? 0 : -EAGAIN;
	if (!atomic_add_unless(&sess->inflight, 1, sess->info.queue_depth))
		return -EAGAIN;
	bytes = atomic64_add_return(req->data_len, &sess->inflight_bytes);
	if (bytes <= sess->opts.max_inflight_bytes || bytes == req->data_len)
		return 0;
	tern_throttle_give(sess, req);
	/* a sender that saw our share may be asleep now */
	if (wq_has_sleeper(&sess->wait))
		wake_up_all(&sess->wait);
	return -EAGAIN;
}

/* Wait condition of a throttled tern_send(): room, or no more hope. */
static bool tern_throttle_open(struct tern_session *sess,
			       const struct tern_request *req)
{
	u64 bytes;

	if (tern_session_closed(sess))
		return true;
	if (req->reserved)
		return atomic_read(&sess->reserved_inflight) <
		       TERN_RESERVED_REQS;
	if (atomic_read(&sess->inflight) >= sess->info.queue_depth)
		return false;
	bytes = atomic64_read(&sess->inflight_bytes);
	return !bytes || bytes + req->data_len <= sess->opts.max_inflight_bytes;
}

static int tern_request_check(struct tern_session *sess,
			      struct tern_request *req)
{
	if (!req->done || req->front_len > sess->info.max_front ||
	    (req->front_len && !req->front) ||
	    (req->reply_front_max && !req->reply_front) ||
	    req->data_len > sess->info.max_data)
		return -EINVAL;
	switch (req->dir) {
	case TERN_DATA_NONE:
		if (req->data_len)
			return -EINVAL;
		break;
	case TERN_DATA_TO_RESPONDER:
	case TERN_DATA_FROM_RESPONDER:
		if (!req->data_len)
			req->dir = TERN_DATA_NONE;
		else if (tern_bvec_len_ok(req->bvec, req->nr_bvec,
					  req->data_len))
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

/**
 * tern_send - start a request
 * @sess: a session from tern_connect()
 * @req: initialised request
 * @flags: TERN_SEND_NOWAIT to fail with -EAGAIN rather than sleep when
 *	the session's in-flight limits are reached; TERN_SEND_MAY_SLEEP
 *	with it when the caller may sleep all the same, so a transport with
 *	&tern_transport_ops.push_sleeps may transmit from here;
 *	TERN_SEND_RESERVED for a request without data that counts against
 *	TERN_RESERVED_REQS rather than the queue depth
 *
 * On success @req->done will be called exactly once. Without
 * TERN_SEND_NOWAIT this may sleep (process context only). A transport
 * with ->push transmits from the caller's context, where the ->done of a
 * request that was cancelled meanwhile may run: hold no lock a ->done
 * callback takes.
 * Return: 0; -EINVAL for a malformed request; -EAGAIN (NOWAIT, throttled);
 * -ENOTCONN when the session has failed or is being destroyed; -EINTR.
 */
int tern_send(struct tern_session *sess, struct tern_request *req,
	      unsigned int flags)
{
	struct tern_wire_hdr *hdr = &req->frame.hdr;
	struct tern_core_lane *cl;
	struct tern_req_shard *sh;
	u16 wflags = 0;
	u32 crc;
	u64 tid;
	int err;

	if (!sess->requester ||
	    (flags & ~(TERN_SEND_NOWAIT | TERN_SEND_MAY_SLEEP |
		       TERN_SEND_RESERVED)))
		return -EINVAL;
	err = tern_request_check(sess, req);
	if (err)
		return err;
	req->reserved = flags & TERN_SEND_RESERVED;
	if (req->reserved && req->data_len)
		return -EINVAL;

	refcount_set(&req->ref, 1);
	req->sess = sess;
	/* the shard before the tid: tern_cancel() finds it from here on */
	WRITE_ONCE(req->tid, req->lane_hint % sess->nr_shards);
	sh = tern_req_shard(req);
	req->status = 0;
	req->reply_status = 0;
	req->reply_front_len = 0;
	req->reply_data_len = 0;
	req->resends = 0;
	req->lane_faults = 0;
	req->lane = NULL;
	req->path = NULL;
	req->rx_lane = NULL;

	memset(hdr, 0, sizeof(*hdr));
	hdr->magic = cpu_to_le32(TERN_WIRE_MAGIC);
	hdr->version = TERN_WIRE_VERSION;
	hdr->type = TERN_WIRE_REQUEST;
	hdr->front_len = cpu_to_le32(req->front_len);
	hdr->buf_len = cpu_to_le32(req->data_len);
	req->frame.front = req->front;
	req->frame.bvec = NULL;
	req->frame.nr_bvec = 0;
	if (req->dir == TERN_DATA_TO_RESPONDER) {
		wflags |= TERN_WIRE_F_DATA_TO_RESPONDER;
		hdr->data_len = cpu_to_le32(req->data_len);
		req->frame.bvec = req->bvec;
		req->frame.nr_bvec = req->nr_bvec;
	} else if (req->dir == TERN_DATA_FROM_RESPONDER) {
		wflags |= TERN_WIRE_F_DATA_FROM_RESPONDER;
	}
	if (sess->info.features & TERN_FEAT_DATA_CRC) {
		wflags |= TERN_WIRE_F_DATA_CRC;
		crc = tern_crc_front_data(req->front, req->front_len,
					  req->frame.bvec, req->frame.nr_bvec,
					  le32_to_cpu(hdr->data_len));
		hdr->data_crc = cpu_to_le32(crc);
	}
	hdr->flags = cpu_to_le16(wflags);

	for (;;) {
		if (tern_session_closed(sess))
			return -ENOTCONN;
		err = tern_throttle_take(sess, req);
		if (err != -EAGAIN)
			break;
		if (flags & TERN_SEND_NOWAIT)
			return err;
		if (wait_event_killable(sess->wait,
					tern_throttle_open(sess, req)))
			return -EINTR;
	}

	/* one critical section: state, tid, pending table, lane queue */
	spin_lock_bh(&sh->lock);
	if (tern_session_closed(sess)) {
		spin_unlock_bh(&sh->lock);
		tern_throttle_give(sess, req);
		return -ENOTCONN;
	}
	tid = (++sh->last_seq << TERN_TID_SHARD_BITS) | req->tid;
	WRITE_ONCE(req->tid, tid);
	hdr->tid = cpu_to_le64(req->tid);
	hash_add(sh->pending, &req->hash, req->tid);
	cl = tern_req_queue_locked(req, true);
	spin_unlock_bh(&sh->lock);
	this_cpu_inc(sess->counts->requests);
	if (cl) {
		tern_lane_push(cl, !(flags & TERN_SEND_NOWAIT) ||
			       (flags & TERN_SEND_MAY_SLEEP));
		tern_lane_put(cl);
	}
	return 0;
}
EXPORT_SYMBOL_GPL(tern_send);

/**
 * tern_cancel - give up on a request
 * @req: a request passed to tern_send() whose done() has not run
 *
 * A request whose buffer the transport registered for the peer (RDMA)
 * stays held by its lane until the peer's reply invalidates the buffer;
 * the peer may still write into it. Rather than wait for a reply that
 * may never come, the lane is reset, as nvme resets a queue on a
 * timeout: the transport's teardown revokes the registration, done()
 * follows, and the lane's other requests are resent.
 * Return: 0 if cancelled (done() runs with status -ECANCELED, possibly
 * before this returns, or once the lane is reset); -EBUSY if its reply
 * was being received: that lane is reset, and a later call cancels the
 * request; -ENOENT if it is already completing.
 */
int tern_cancel(struct tern_request *req)
{
	struct tern_session *sess = req->sess;
	struct tern_core_lane *reset = NULL;
	struct tern_req_shard *sh;

	if (!sess)
		return -ENOENT;	/* never sent */
	sh = tern_req_shard(req);
	spin_lock_bh(&sh->lock);
	if (hlist_unhashed(&req->hash)) {
		spin_unlock_bh(&sh->lock);
		return -ENOENT;
	}
	if (req->rx_lane) {
		/*
		 * Its reply is coming in, maybe a byte at a time: cut it off
		 * so the caller's next try finds the request resent (and
		 * cancels it) in bounded time.
		 */
		reset = to_core_lane(req->rx_lane);
		kref_get(&reset->ref);
		spin_unlock_bh(&sh->lock);
		atomic64_inc(&sess->cancel_resets);
		tern_lane_kill(reset, -ETIMEDOUT);
		tern_lane_put(reset);
		return -EBUSY;
	}
	if (req->lane && READ_ONCE(to_core_lane(req->lane)->remote_data)) {
		reset = to_core_lane(req->lane);
		kref_get(&reset->ref);
	}
	tern_req_unlink_locked(req);
	spin_unlock_bh(&sh->lock);
	req->status = -ECANCELED;
	/* off the lane's queue now: a reference beyond ours is the lane's */
	if (reset) {
		if (refcount_read(&req->ref) > 1) {
			atomic64_inc(&sess->cancel_resets);
			tern_lane_kill(reset, -ETIMEDOUT);
		}
		tern_lane_put(reset);
	}
	tern_req_put(req);
	return 0;
}
EXPORT_SYMBOL_GPL(tern_cancel);

static struct tern_request *tern_pending_find_locked(struct tern_req_shard *sh,
						     u64 tid)
{
	struct tern_request *req;

	lockdep_assert_held(&sh->lock);
	hash_for_each_possible(sh->pending, req, hash, tid)
		if (req->tid == tid)
			return req;
	return NULL;
}

/*
 * A status from the wire becomes an errno only if it is one a tern
 * responder gives. Anything else (positive, below -MAX_ERRNO, or an errno
 * a ULP gives its own meaning, such as -ECANCELED) is the peer's fault and
 * becomes @fallback: a ULP never sees a value it could take for a pointer
 * or a count, or mistake for a local event.
 */
static const u8 tern_wire_errnos[] = {
	EPERM, ENOENT, EIO, ENXIO, E2BIG, EAGAIN, ENOMEM, EACCES, EBUSY,
	EEXIST, ENODEV, EINVAL, EFBIG, ENOSPC, EROFS, ERANGE, ENODATA, EPROTO,
	EBADMSG, EOVERFLOW, EILSEQ, EMSGSIZE, EPROTONOSUPPORT, EOPNOTSUPP,
	ECONNRESET, ESHUTDOWN, ETIMEDOUT, ECONNREFUSED, ESTALE, EREMOTEIO,
	EKEYREJECTED, EUSERS, ENOBUFS, ENOKEY, EKEYREVOKED, EKEYEXPIRED,
};

static int tern_wire_errno(struct tern_core_lane *cl, u32 raw, int fallback)
{
	s32 status = raw;
	unsigned int i;

	if (!status)
		return 0;
	for (i = 0; status < 0 && i < ARRAY_SIZE(tern_wire_errnos); i++)
		if (status == -tern_wire_errnos[i])
			return status;
	TERN_LANE_STAT(cl, proto_errors, 1);
	pr_warn_ratelimited("%s: peer sent status %d, which is no errno tern knows; taken as %d\n",
			    cl->name, status, fallback);
	return fallback;
}

/* A reply doesn't match its request: fail the request, close the lane. */
static int tern_reply_mismatch(struct tern_core_lane *cl,
			       struct tern_request *req, const char *what)
{
	struct tern_session *sess = cl->sess;
	struct tern_req_shard *sh = tern_req_shard(req);

	tern_lane_proto_err(cl, "reply to tid %llu: %s", req->tid, what);
	spin_lock_bh(&sh->lock);
	req->rx_lane = NULL;
	tern_req_unlink_locked(req);
	spin_unlock_bh(&sh->lock);
	cl->pub.rx.req = NULL;
	req->status = -EPROTO;
	atomic64_inc(&sess->failed);
	tern_req_put(req);
	return -EPROTO;
}

int tern_session_rx_reply_hdr(struct tern_core_lane *cl)
{
	struct tern_lane_rx *rx = &cl->pub.rx;
	struct tern_session *sess = cl->sess;
	u16 flags = le16_to_cpu(rx->hdr.flags);
	u64 tid = le64_to_cpu(rx->hdr.tid);
	u64 seq = tid >> TERN_TID_SHARD_BITS;
	unsigned int idx = tid & TERN_TID_SHARD_MASK;
	struct tern_request *req = NULL;
	struct tern_req_shard *sh;
	bool sent = false, wrong_lane = false;

	if ((flags & ~(TERN_WIRE_F_DATA_CRC | TERN_WIRE_F_REMOTE)) ||
	    ((flags & TERN_WIRE_F_REMOTE) &&
	     (!cl->remote_data || rx->data_len || !rx->hdr.buf_len))) {
		tern_lane_proto_err(cl, "bad reply flags 0x%x", flags);
		return -EPROTO;
	}
	if (!(flags & TERN_WIRE_F_DATA_CRC) != !cl->data_crc) {
		tern_lane_proto_err(cl, "reply data crc flag does not match session");
		return -EPROTO;
	}

	if (idx < sess->nr_shards) {
		sh = &sess->shards[idx];
		spin_lock_bh(&sh->lock);
		req = tern_pending_find_locked(sh, tid);
		/*
		 * A reply comes on the lane its request went out on; on any
		 * other it would complete a request whose lane, alive, may
		 * still hold it (an RDMA registration) for ever.
		 */
		wrong_lane = req && req->lane != &cl->pub;
		if (req && !req->rx_lane && !wrong_lane)
			req->rx_lane = &cl->pub;
		else
			req = NULL;
		sent = seq && seq <= sh->last_seq;
		spin_unlock_bh(&sh->lock);
	}

	if (!sent) {
		tern_lane_proto_err(cl, "reply to tid %llu, never sent", tid);
		return -EPROTO;
	}
	if (wrong_lane) {
		tern_lane_proto_err(cl, "reply to tid %llu, sent on another lane",
				    tid);
		return -EPROTO;
	}
	if (!req) {
		/*
		 * A reply to a request already completed: a duplicate, or an
		 * answer to a resent request whose first reply won. Both are
		 * legal; the data goes nowhere.
		 */
		rx->discard = true;
		tern_rx_setup(cl, NULL, NULL, 0);
		return 0;
	}
	rx->req = req;
	if (rx->data_len && (req->dir != TERN_DATA_FROM_RESPONDER ||
			     rx->data_len > req->data_len))
		return tern_reply_mismatch(cl, req, "data length or direction");
	if ((flags & TERN_WIRE_F_REMOTE) &&
	    (req->dir != TERN_DATA_FROM_RESPONDER ||
	     le32_to_cpu(rx->hdr.buf_len) > req->data_len))
		return tern_reply_mismatch(cl, req, "remote data length");
	if (rx->front_len > req->reply_front_max)
		return tern_reply_mismatch(cl, req, "front too long");
	tern_rx_setup(cl, req->reply_front, req->bvec, req->nr_bvec);
	return 0;
}

int tern_session_rx_reply_done(struct tern_core_lane *cl)
{
	struct tern_lane_rx *rx = &cl->pub.rx;
	struct tern_session *sess = cl->sess;
	struct tern_request *req = rx->req;
	u32 data_len = rx->data_len;
	struct tern_req_shard *sh;

	if (!req)
		return 0;
	sh = tern_req_shard(req);
	/* remote data was written into the buffer before the reply */
	if (le16_to_cpu(rx->hdr.flags) & TERN_WIRE_F_REMOTE)
		data_len = le32_to_cpu(rx->hdr.buf_len);
	if (cl->data_crc) {
		u32 crc = tern_crc_front_data(req->reply_front, rx->front_len,
					      req->bvec, req->nr_bvec,
					      data_len);

		if (crc != le32_to_cpu(rx->hdr.data_crc) || tern_inject_crc()) {
			TERN_LANE_STAT(cl, crc_errors, 1);
			pr_warn_ratelimited("%s: data crc mismatch on reply to tid %llu\n",
					    cl->name, req->tid);
			spin_lock_bh(&sh->lock);
			req->rx_lane = NULL;
			/* a peer that damages every reply meets max_lane_faults */
			req->lane_faults++;
			spin_unlock_bh(&sh->lock);
			rx->req = NULL;
			return -EBADMSG;
		}
	}

	spin_lock_bh(&sh->lock);
	req->rx_lane = NULL;
	tern_req_unlink_locked(req);
	spin_unlock_bh(&sh->lock);
	rx->req = NULL;

	req->reply_status = tern_wire_errno(cl, le32_to_cpu(rx->hdr.status),
					    -EREMOTEIO);
	req->reply_front_len = rx->front_len;
	req->reply_data_len = data_len;
	this_cpu_inc(sess->counts->replies);
	tern_req_put(req);
	return 0;
}

/* Caller holds sess->lock. */
static void tern_slot_schedule_locked(struct tern_lane_slot *slot)
{
	struct tern_session *sess = slot->sess;
	unsigned int delay = slot->backoff_ms;

	lockdep_assert_held(&sess->lock);
	if (sess->destroying)
		return;
	slot->backoff_ms = clamp(delay * 2, sess->opts.reconnect_min_ms,
				 sess->opts.reconnect_max_ms);
	mod_delayed_work(tern_wq, &slot->connect_work,
			 msecs_to_jiffies(delay));
}

/* Send what @sh parked, if a lane is live now. */
static void tern_shard_drain_locked(struct tern_req_shard *sh)
{
	struct tern_request *req, *tmp;
	LIST_HEAD(backlog);

	lockdep_assert_held(&sh->lock);
	list_splice_init(&sh->backlog, &backlog);
	list_for_each_entry_safe(req, tmp, &backlog, backlog) {
		list_del_init(&req->backlog);
		tern_req_queue_locked(req, false);
	}
}

/* The lane finished its handshake; caller holds sess->lock. */
void tern_session_lane_live_locked(struct tern_session *sess,
				   struct tern_core_lane *cl)
{
	struct tern_req_shard *sh;
	unsigned int i;

	lockdep_assert_held(&sess->lock);
	tern_lane_move(cl, TERN_LANE_LIVE);
	WRITE_ONCE(sess->nr_live, sess->nr_live + 1);
	if (cl->slot->path)
		WRITE_ONCE(cl->slot->path->nr_live, cl->slot->path->nr_live + 1);
	if (sess->state != TERN_SESS_LIVE &&
	    tern_session_move_locked(sess, TERN_SESS_LIVE)) {
		cancel_delayed_work(&sess->loss_work);
		/* Responders get UP once, synchronously, at creation. */
		if (sess->requester)
			tern_session_event(sess, TERN_SESSION_UP);
	}
	/* the sweep: a request parked before the move goes now */
	for (i = 0; i < sess->nr_shards; i++) {
		sh = &sess->shards[i];
		spin_lock(&sh->lock);
		tern_shard_drain_locked(sh);
		spin_unlock(&sh->lock);
	}
}

static void tern_fill_hello(struct tern_session *sess, struct tern_core_lane *cl)
{
	struct tern_wire_hello *h = &cl->hello_tx;
	const struct tern_session_opts *o = &sess->opts;
	bool neg = sess->negotiated;

	memset(h, 0, sizeof(*h));
	h->session_id = cpu_to_le64(sess->id);
	h->cookie = cpu_to_le64(sess->cookie);
	h->incarnation = cpu_to_le64(sess->ep->incarnation);
	h->features = cpu_to_le32(neg ? sess->info.features :
				  (o->data_crc && !o->integrity ?
				   TERN_FEAT_DATA_CRC : 0) |
				  0);
	/* each lane its own: a session's paths may be of other transports */
	h->features &= cpu_to_le32(~TERN_FEAT_REMOTE_DATA);
	if (cl->pub.tops->pull && !o->integrity)
		h->features |= cpu_to_le32(TERN_FEAT_REMOTE_DATA);
	h->max_data = cpu_to_le32(neg ? sess->info.max_data : o->max_data);
	h->max_front = cpu_to_le32(neg ? sess->info.max_front :
				   TERN_WIRE_MAX_FRONT);
	/* tern_session_set_timeouts() may change it meanwhile */
	h->keepalive_ms = cpu_to_le32(READ_ONCE(o->keepalive_ms));
	/* o->nr_lanes for each path */
	h->nr_lanes = cpu_to_le16(neg ? sess->info.nr_lanes : sess->nr_slots);
	h->lane_idx = cpu_to_le16(cl->slot->idx);
	h->queue_depth = cpu_to_le16(neg ? sess->info.queue_depth :
				     o->queue_depth);
	if (sess->auth_keys) {
		h->features |= cpu_to_le32(TERN_FEAT_AUTH |
					   (o->encrypt ? TERN_FEAT_ENCRYPT : 0) |
					   (o->integrity ?
					    TERN_FEAT_INTEGRITY : 0));
		get_random_bytes(h->nonce, sizeof(h->nonce));
		strscpy_pad(h->identity, sess->identity, sizeof(h->identity));
	}
}

static void tern_slot_connect(struct tern_lane_slot *slot);

static void tern_slot_connect_work(struct work_struct *work)
{
	struct tern_lane_slot *slot = container_of(to_delayed_work(work),
						   struct tern_lane_slot,
						   connect_work);
	struct tern_session *sess = slot->sess;
	unsigned int noio;
	bool abandon;

	spin_lock_bh(&sess->lock);
	abandon = sess->destroying || slot->lane;
	spin_unlock_bh(&sess->lock);
	if (abandon)
		return;

	/* Reconnecting may be what memory reclaim waits for: no I/O here. */
	noio = memalloc_noio_save();
	tern_slot_connect(slot);
	memalloc_noio_restore(noio);
}

/* The name of the lanes of @slot: ENDPOINT/SESSION/INDEX */
static void tern_slot_name(const struct tern_lane_slot *slot, char *buf,
			   size_t size)
{
	snprintf(buf, size, "%s/%016llx/%u", slot->sess->ep->name,
		 slot->sess->id, slot->idx);
}

static void tern_slot_connect(struct tern_lane_slot *slot)
{
	struct tern_session *sess = slot->sess;
	struct tern_path *path = slot->path;
	unsigned int next_ms = 0;
	struct tern_core_lane *cl;
	bool bound, again = false;
	char name[sizeof_field(struct tern_core_lane, name)];
	int err;

	cl = tern_lane_alloc(sess->ep, path->tops, true);
	if (!cl) {
		err = -ENOMEM;
		goto retry;
	}
	tern_slot_name(slot, cl->name, sizeof(cl->name));
	WRITE_ONCE(cl->slot, slot);
	cl->sess = sess;
	kref_get(&sess->ref);
	/*
	 * Once connected the transport may fail the lane at any time, and
	 * its teardown drops the creator's reference: hold our own.
	 */
	kref_get(&cl->ref);

	err = path->tops->connect(&cl->pub, &path->addr);
	if (err) {
		cl->sess = NULL;
		WRITE_ONCE(cl->slot, NULL);
		tern_session_put(sess);
		tern_endpoint_lane_gone(cl->ep, cl);
		tern_lane_put(cl);
		tern_lane_put(cl);
		goto retry;
	}

	tern_fill_hello(sess, cl);
	spin_lock_bh(&sess->lock);
	bound = !sess->destroying && !test_bit(TERN_LANE_F_DYING, &cl->flags);
	if (bound) {
		cl->bound = true;
		tern_lane_move(cl, TERN_LANE_HANDSHAKE);
		slot->lane = cl;
		sess->nr_lanes++;
		tern_lane_queue_hello(cl);
		tern_lane_arm_keepalive(cl, tern_handshake_ms());
	} else {
		tern_slot_schedule_locked(slot);
	}
	spin_unlock_bh(&sess->lock);
	if (!bound)
		tern_lane_kill(cl, -ESHUTDOWN);
	tern_lane_put(cl);
	return;

retry:
	spin_lock_bh(&sess->lock);
	slot->last_err = err;
	if (!sess->negotiated && !slot->idx && !sess->fatal_err) {
		sess->fatal_err = err;	/* first connect fails fast */
	} else if (!sess->destroying) {
		next_ms = slot->backoff_ms;	/* the delay scheduled now */
		tern_slot_schedule_locked(slot);
		again = true;
	}
	spin_unlock_bh(&sess->lock);
	wake_up_all(&sess->wait);
	/* a session's first connect reports its error to tern_connect() */
	if (again) {
		tern_slot_name(slot, name, sizeof(name));
		pr_info_ratelimited("%s: connect failed (%d), next try in %u ms\n",
				    name, err, next_ms);
	}
}

/* The handshake of the session's first lane failed: tern_connect() too. */
static int tern_session_refused(struct tern_core_lane *cl, int err)
{
	struct tern_session *sess = cl->sess;

	spin_lock_bh(&sess->lock);
	if (!sess->negotiated)
		sess->fatal_err = err;
	spin_unlock_bh(&sess->lock);
	wake_up_all(&sess->wait);
	return err;
}

static void tern_hello_values(const struct tern_wire_hello *h,
			      struct tern_session_info *v)
{
	v->nr_lanes = le16_to_cpu(h->nr_lanes);
	v->queue_depth = le16_to_cpu(h->queue_depth);
	v->max_data = le32_to_cpu(h->max_data);
	v->max_front = le32_to_cpu(h->max_front);
	v->features = le32_to_cpu(h->features);
}

/* The handshake is complete: the lane goes live with the answer's values. */
static int tern_session_lane_admit(struct tern_core_lane *cl)
{
	const struct tern_wire_hello *h = &cl->hello_rx;
	struct tern_session *sess = cl->sess;
	struct tern_session_info v = {};
	unsigned int i;
	u64 inc;

	tern_lane_auth_free(cl);
	tern_hello_values(h, &v);
	inc = le64_to_cpu(h->incarnation);

	spin_lock_bh(&sess->lock);
	if (!sess->negotiated) {
		v.session_id = sess->id;
		v.requester = true;
		sess->info = v;
		sess->negotiated = true;
		for (i = 0; i < sess->nr_paths; i++)
			sess->paths[i].lanes = v.nr_lanes > i ?
				DIV_ROUND_UP(v.nr_lanes - i, sess->nr_paths) : 0;
		for (i = 1; i < v.nr_lanes && !sess->destroying; i++)
			mod_delayed_work(tern_wq, &sess->slots[i].connect_work,
					 0);
	} else if (v.nr_lanes != sess->info.nr_lanes ||
		   v.queue_depth != sess->info.queue_depth ||
		   v.max_data != sess->info.max_data ||
		   v.max_front != sess->info.max_front ||
		   tern_session_features_differ(v.features,
						sess->info.features)) {
		spin_unlock_bh(&sess->lock);
		tern_lane_proto_err(cl, "peer changed session parameters");
		return -EPROTO;
	}
	if (sess->peer_incarnation && sess->peer_incarnation != inc) {
		atomic64_inc(&sess->peer_restarts);
		pr_info_ratelimited("%s: peer restarted; pending requests will be resent\n",
				    cl->name);
	}
	sess->peer_incarnation = inc;
	cl->max_front = v.max_front;
	cl->max_data = v.max_data;
	cl->data_crc = v.features & TERN_FEAT_DATA_CRC;
	WRITE_ONCE(cl->remote_data, v.features & TERN_FEAT_REMOTE_DATA);
	cl->ka_interval_ms = sess->opts.keepalive_ms;
	cl->ka_timeout_ms = sess->opts.keepalive_timeout_ms;
	if (cl->slot->ever_live)
		TERN_LANE_STAT(cl, reconnects, 1);
	cl->slot->ever_live = true;
	cl->slot->live_since = jiffies;
	tern_session_lane_live_locked(sess, cl);
	spin_unlock_bh(&sess->lock);

	wake_up_all(&sess->wait);
	tern_lane_arm_keepalive(cl, cl->ka_interval_ms);
	return 0;
}

/*
 * The acceptor's answer to our proposal; with authentication also its
 * challenge, which we answer with our proof (AUTH).
 */
int tern_session_rx_hello_ack(struct tern_core_lane *cl)
{
	const struct tern_wire_hello *h = &cl->hello_rx;
	const struct tern_wire_hello *mine = &cl->hello_tx;
	struct tern_session *sess = cl->sess;
	struct tern_session_info v = {};
	int status = tern_wire_errno(cl, le32_to_cpu(h->status),
				     -ECONNREFUSED);
	int err;

	if (status) {
		pr_warn_ratelimited("%s: peer refused the handshake (%d)\n",
				    cl->name, status);
		tern_session_refused(cl, status);
		return -ECONNREFUSED;
	}

	tern_hello_values(h, &v);
	if (h->session_id != mine->session_id || h->cookie != mine->cookie ||
	    h->lane_idx != mine->lane_idx ||
	    !v.nr_lanes || v.nr_lanes > le16_to_cpu(mine->nr_lanes) ||
	    cl->slot->idx >= v.nr_lanes ||
	    !v.queue_depth || v.queue_depth > le16_to_cpu(mine->queue_depth) ||
	    v.max_data < TERN_MIN_MAX_DATA ||
	    v.max_data > le32_to_cpu(mine->max_data) ||
	    v.max_front < 64 || v.max_front > le32_to_cpu(mine->max_front) ||
	    (v.features & ~le32_to_cpu(mine->features)) ||
	    h->reserved0 || h->reserved1 ||
	    memchr_inv(h->identity, 0, sizeof(h->identity)) ||
	    (!(v.features & TERN_FEAT_AUTH) &&
	     memchr_inv(h->nonce, 0, sizeof(h->nonce)))) {
		tern_lane_proto_err(cl, "handshake answer out of bounds");
		/* a peer that answers this way will again: fail fast */
		return tern_session_refused(cl, -EPROTO);
	}
	if (!sess->auth_keys)
		return tern_session_lane_admit(cl);

	/* we insist: a peer that drops the bit is a downgrade, or a fake */
	if (!(v.features & TERN_FEAT_AUTH)) {
		TERN_LANE_STAT(cl, proto_errors, 1);
		pr_warn_ratelimited("%s: peer does not authenticate; refusing (%d)\n",
				    cl->name, -EKEYREJECTED);
		return tern_session_refused(cl, -EKEYREJECTED);
	}
	if (sess->opts.encrypt && !(v.features & TERN_FEAT_ENCRYPT)) {
		TERN_LANE_STAT(cl, proto_errors, 1);
		pr_warn_ratelimited("%s: peer does not encrypt; refusing (%d)\n",
				    cl->name, -EKEYREJECTED);
		return tern_session_refused(cl, -EKEYREJECTED);
	}
	if (sess->opts.integrity && !(v.features & TERN_FEAT_INTEGRITY)) {
		TERN_LANE_STAT(cl, proto_errors, 1);
		pr_warn_ratelimited("%s: peer does not sign; refusing (%d)\n",
				    cl->name, -EKEYREJECTED);
		return tern_session_refused(cl, -EKEYREJECTED);
	}
	cl->auth = kzalloc(sizeof(*cl->auth), GFP_NOIO);
	if (!cl->auth)
		return -ENOMEM;
	cl->auth->keys = *sess->auth_keys;
	err = tern_auth_proofs(&cl->auth->keys, mine, h, cl->auth->host_proof,
			       cl->auth->target_proof);
	if (err)
		return err;
	memset(&cl->auth_tx, 0, sizeof(cl->auth_tx));
	memcpy(cl->auth_tx.proof, cl->auth->host_proof,
	       sizeof(cl->auth_tx.proof));
	cl->auth->awaiting = true;
	tern_lane_queue_auth(cl);
	return 0;
}

static int tern_session_encrypt(struct tern_core_lane *cl)
{
	int err = cl->pub.tops->encrypt(&cl->pub, &cl->auth->rx.aead, false);

	return err ?: cl->pub.tops->encrypt(&cl->pub, &cl->auth->tx.aead,
					    true);
}

/* The acceptor's verdict on our proof, and its own proof. */
int tern_session_rx_auth_ack(struct tern_core_lane *cl)
{
	u32 features = le32_to_cpu(cl->hello_rx.features);
	const struct tern_wire_auth *a = &cl->auth_rx;
	int status = tern_wire_errno(cl, le32_to_cpu(a->status),
				     -ECONNREFUSED);

	cl->auth->awaiting = false;
	if (status) {
		pr_warn_ratelimited("%s: peer refused our authentication (%d)\n",
				    cl->name, status);
		tern_session_refused(cl, status);
		return -ECONNREFUSED;
	}
	if (a->reserved) {
		tern_lane_proto_err(cl, "reserved fields set in AUTH_ACK");
		return tern_session_refused(cl, -EPROTO);
	}
	if (!tern_auth_proof_ok(a->proof, cl->auth->target_proof)) {
		TERN_LANE_STAT(cl, proto_errors, 1);
		pr_warn_ratelimited("%s: peer failed to prove the key; refusing (%d)\n",
				    cl->name, -EKEYREJECTED);
		return tern_session_refused(cl, -EKEYREJECTED);
	}
	/* the acceptor seals or signs what follows its AUTH_ACK, as do we */
	if (features & (TERN_FEAT_ENCRYPT | TERN_FEAT_INTEGRITY)) {
		struct tern_lane_auth *la = cl->auth;
		int err;

		err = tern_auth_lane_keys(&la->keys, &cl->hello_tx,
					  &cl->hello_rx, la->host_proof,
					  la->target_proof, &la->tx, &la->rx);
		if (!err && (features & TERN_FEAT_ENCRYPT))
			err = tern_session_encrypt(cl);
		if (!err && (features & TERN_FEAT_INTEGRITY))
			err = tern_lane_sign(cl, false);
		if (err)
			return err;
	}
	return tern_session_lane_admit(cl);
}

static void tern_session_loss_work(struct work_struct *work)
{
	struct tern_session *sess = container_of(to_delayed_work(work),
						 struct tern_session,
						 loss_work);
	LIST_HEAD(failed);

	spin_lock_bh(&sess->lock);
	/* the loss timeout may have become "never" since it was armed */
	if (sess->nr_live || sess->destroying ||
	    sess->state != TERN_SESS_RECONNECTING ||
	    sess->opts.loss_timeout_ms == TERN_LOSS_TIMEOUT_NEVER) {
		spin_unlock_bh(&sess->lock);
		return;
	}
	tern_session_move_locked(sess, TERN_SESS_FAILED);
	/* with the move, as every move's event: see tern_session_event_work() */
	tern_session_event(sess, TERN_SESSION_FAILED);
	tern_session_collect(sess, &failed);
	spin_unlock_bh(&sess->lock);

	pr_warn_ratelimited("%s/%016llx: no live lane for %u ms, failing pending requests\n",
			    sess->ep->name, sess->id,
			    sess->opts.loss_timeout_ms);
	wake_up_all(&sess->wait);
	tern_req_fail_list(&failed, -ETIMEDOUT, &sess->failed);
}

/*
 * The sweep of a lane that went down, in one shard: its requests are
 * moved elsewhere (those still on its queue, which never left this
 * host) or resent; those whose frames died with @max_faults lanes go to
 * @exhausted. @cur is the request the lane was sending, or NULL. Caller
 * holds sess->lock.
 */
static void tern_shard_lane_down(struct tern_req_shard *sh,
				 struct tern_core_lane *cl,
				 struct tern_request *cur,
				 unsigned int max_faults,
				 struct list_head *exhausted)
{
	struct tern_request *req;
	unsigned int bkt;
	struct hlist_node *tmp;

	spin_lock(&sh->lock);
	hash_for_each_safe(sh->pending, bkt, tmp, req, hash) {
		if (req->lane != &cl->pub)
			continue;
		if (tern_lane_dequeue_frame(cl, &req->frame)) {
			tern_req_set_lane_locked(req, NULL);
			tern_req_queue_locked(req, false);
			continue;
		}
		if (req == cur)
			req->lane_faults++;
		if (max_faults && req->lane_faults >= max_faults &&
		    !req->rx_lane) {
			tern_req_unlink_locked(req);
			list_add_tail(&req->backlog, exhausted);
			continue;
		}
		tern_req_set_lane_locked(req, NULL);
		req->resends++;
		req->frame.hdr.flags |= cpu_to_le16(TERN_WIRE_F_RESENT);
		if (cl->slot)
			TERN_LANE_STAT(cl, resends, 1);
		tern_req_queue_locked(req, false);
	}
	/*
	 * A submitter that found the lane dead after it chose its path, on
	 * counts from before the move, parked its request though another
	 * path may be live: send it, if one is.
	 */
	if (cl->sess->nr_live)
		tern_shard_drain_locked(sh);
	spin_unlock(&sh->lock);
}

/*
 * A lane of @sess is gone (its transport has stopped). Hand its frames
 * back: requests are resent elsewhere or parked; replies and control
 * frames die with the lane (the requester resends what they answered).
 */
void tern_session_lane_down(struct tern_session *sess,
			    struct tern_core_lane *cl)
{
	struct tern_request *put_req = NULL;
	struct tern_frame *f, *ftmp, *cur;
	struct tern_lane_slot *slot = cl->slot;
	unsigned int i, max_faults;
	LIST_HEAD(drop_sreqs);
	LIST_HEAD(exhausted);
	LIST_HEAD(frames);
	bool was_live, in_slot, unlink = false;

	spin_lock_bh(&sess->lock);
	was_live = cl->state == TERN_LANE_LIVE;
	/*
	 * The first lane of a session never negotiated, lost during its
	 * handshake: the peer closed or timed out on us, as it would again.
	 * tern_connect() fails now, as for a refused connection; unless we
	 * are failing transport operations on purpose (tern.inject_fail_every),
	 * which says nothing of the peer.
	 */
	if (sess->requester && !sess->negotiated && !sess->fatal_err &&
	    slot && !slot->idx && cl->state == TERN_LANE_HANDSHAKE &&
	    !READ_ONCE(tern_inject_fail_every))
		sess->fatal_err = -ECONNRESET;
	tern_lane_move(cl, TERN_LANE_DEAD);
	if (was_live) {
		WRITE_ONCE(sess->nr_live, sess->nr_live - 1);
		if (slot && slot->path)
			WRITE_ONCE(slot->path->nr_live, slot->path->nr_live - 1);
	}

	/*
	 * Replies and control frames leave with the lane. Requests stay on
	 * its queue for the sweep below, under their shards' locks: a
	 * submitter that saw the lane live a moment ago may queue one more.
	 */
	spin_lock(&cl->tx_lock);
	list_for_each_entry_safe(f, ftmp, &cl->pub.tx_queue, entry)
		if (f->kind != TERN_FRAME_REQUEST)
			list_move_tail(&f->entry, &frames);
	cur = cl->tx_cur;
	cl->tx_cur = NULL;
	cl->ping_queued = false;
	cl->pong_queued = false;
	cl->hello_queued = false;
	spin_unlock(&cl->tx_lock);

	if (cur) {
		if (cur->kind == TERN_FRAME_REQUEST)
			put_req = container_of(cur, struct tern_request, frame);
		else
			list_add(&cur->entry, &frames);
	}
	list_for_each_entry_safe(f, ftmp, &frames, entry) {
		list_del_init(&f->entry);
		if (f->kind == TERN_FRAME_REPLY)
			list_add_tail(&f->entry, &drop_sreqs);
	}

	in_slot = cl->bound && slot && slot->lane == cl;
	if (in_slot)
		WRITE_ONCE(slot->lane, NULL);
	/*
	 * Queued on this lane and never sent: move. Sent, or partly sent:
	 * resend. A request whose own frames keep dying with their lanes (a
	 * reply the peer trickles until it is cut off or sends with a bad
	 * data CRC, a request the peer drops the lane for) fails once
	 * max_lane_faults lanes died in the middle of it, instead of going
	 * round for ever; requests that merely waited on a lane that failed
	 * are resent however often that happens.
	 */
	max_faults = READ_ONCE(tern_max_lane_faults);
	for (i = 0; i < sess->nr_shards; i++)
		tern_shard_lane_down(&sess->shards[i], cl, put_req, max_faults,
				     &exhausted);

	if (cl->bound) {
		cl->bound = false;
		sess->nr_lanes--;
		if (in_slot) {
			/*
			 * Only a lane that was of use, one that received a
			 * frame after its HELLO_ACK or stayed up longer than
			 * the backoff it would now get, earns an immediate
			 * reconnect: a peer that accepts, answers the
			 * handshake and closes meets a backoff growing to the
			 * cap.
			 */
			if (sess->requester && was_live &&
			    (cl->rx_seq > 1 ||
			     time_after(jiffies, slot->live_since +
					msecs_to_jiffies(max(slot->backoff_ms,
							     sess->opts.reconnect_min_ms)))))
				slot->backoff_ms = 0;
			if (sess->requester)
				tern_slot_schedule_locked(slot);
		}
	}
	if (sess->requester && !sess->nr_live && !sess->destroying &&
	    sess->state == TERN_SESS_LIVE) {
		tern_session_move_locked(sess, TERN_SESS_RECONNECTING);
		sess->down_since = jiffies;
		if (sess->opts.loss_timeout_ms != TERN_LOSS_TIMEOUT_NEVER)
			mod_delayed_work(tern_wq, &sess->loss_work,
					 msecs_to_jiffies(sess->opts.loss_timeout_ms));
		tern_session_event(sess, TERN_SESSION_DOWN);
	}
	if (!sess->requester && !sess->nr_lanes)
		unlink = true;
	cl->sess = NULL;
	WRITE_ONCE(cl->slot, NULL);
	spin_unlock_bh(&sess->lock);

	wake_up_all(&sess->wait);
	if (!list_empty(&exhausted)) {
		pr_warn_ratelimited("%s: failing requests whose frames %u lanes died in the middle of\n",
				    cl->name, max_faults);
		tern_req_fail_list(&exhausted, -EIO, &sess->failed);
	}
	list_for_each_entry_safe(f, ftmp, &drop_sreqs, entry) {
		list_del_init(&f->entry);
		atomic64_inc(&sess->replies_dropped);
		tern_srv_req_finish(container_of(f, struct tern_srv_req, frame));
	}
	if (put_req)
		tern_req_put(put_req);
	if (unlink)
		tern_endpoint_unlink_session(sess);
	tern_session_put(sess);	/* the lane's reference */
}

#define TERN_MAX_LOSS_TMO_MS	(24 * 3600 * 1000)

static bool tern_timeouts_valid(unsigned int ka, unsigned int ka_tmo,
				unsigned int loss)
{
	return ka >= 100 && ka_tmo > ka &&
	       (loss <= TERN_MAX_LOSS_TMO_MS || loss == TERN_LOSS_TIMEOUT_NEVER);
}

/* Paths @o asks for: the first, and those of @o->paths up to a NULL. */
static unsigned int tern_opts_nr_paths(const struct tern_session_opts *o)
{
	unsigned int n = 1;

	while (n < TERN_MAX_PATHS && o->paths[n - 1])
		n++;
	return n;
}

static int tern_opts_fill(struct tern_session_opts *o,
			  const struct tern_session_opts *in)
{
	if (in)
		*o = *in;
	else
		memset(o, 0, sizeof(*o));
	if (!o->nr_lanes)
		o->nr_lanes = TERN_DEF_LANES;
	if (!o->queue_depth)
		o->queue_depth = TERN_DEF_QUEUE_DEPTH;
	if (!o->max_inflight_bytes)
		o->max_inflight_bytes = TERN_DEF_INFLIGHT_BYTES;
	if (!o->max_data)
		o->max_data = TERN_DEF_MAX_DATA;
	if (!o->keepalive_ms)
		o->keepalive_ms = TERN_DEF_KEEPALIVE_MS;
	if (!o->keepalive_timeout_ms)
		o->keepalive_timeout_ms = TERN_DEF_KEEPALIVE_TMO_MS;
	if (!o->reconnect_min_ms)
		o->reconnect_min_ms = TERN_DEF_RECONNECT_MIN_MS;
	if (!o->reconnect_max_ms)
		o->reconnect_max_ms = TERN_DEF_RECONNECT_MAX_MS;
	if (!o->loss_timeout_ms)
		o->loss_timeout_ms = TERN_DEF_LOSS_TMO_MS;
	if (!o->connect_timeout_ms)
		o->connect_timeout_ms = TERN_DEF_CONNECT_TMO_MS;

	if (o->nr_lanes > TERN_WIRE_MAX_LANES ||
	    o->queue_depth > TERN_WIRE_MAX_QDEPTH ||
	    o->max_data < TERN_MIN_MAX_DATA || o->max_data > TERN_WIRE_MAX_DATA ||
	    !tern_timeouts_valid(o->keepalive_ms, o->keepalive_timeout_ms,
				 o->loss_timeout_ms) ||
	    o->reconnect_min_ms > o->reconnect_max_ms ||
	    o->reconnect_max_ms > 3600 * 1000 ||
	    o->connect_timeout_ms > 3600 * 1000 ||
	    (o->auth_key && (!o->auth_identity ||
			     !tern_identity_valid(o->auth_identity,
						  TERN_WIRE_IDENTITY_LEN))) ||
	    ((o->encrypt || o->integrity) && !o->auth_key) ||
	    (o->encrypt && o->integrity) ||
	    o->nr_lanes * tern_opts_nr_paths(o) > TERN_WIRE_MAX_LANES ||
	    o->iopolicy >= TERN_NR_IOPOLICIES)
		return -EINVAL;
	/* the session copies what it needs of them: nothing dangles */
	o->auth_identity = NULL;
	o->auth_key = NULL;
	return 0;
}

/*
 * Every lane is live; or, with several paths, every lane is live or has
 * failed to connect once: a path that is down now does not hold up the
 * others, and comes up on its own later. Caller holds sess->lock.
 */
static bool tern_connect_done_locked(struct tern_session *sess)
{
	unsigned int i;

	if (!sess->negotiated)
		return false;
	if (sess->nr_live == sess->info.nr_lanes)
		return true;
	if (sess->nr_paths < 2 || !sess->nr_live)
		return false;
	for (i = 0; i < sess->info.nr_lanes; i++) {
		struct tern_core_lane *cl = sess->slots[i].lane;

		if (!(cl && cl->state == TERN_LANE_LIVE) &&
		    !sess->slots[i].last_err)
			return false;
	}
	return true;
}

static bool tern_connect_settled(struct tern_session *sess)
{
	bool done;

	spin_lock_bh(&sess->lock);
	done = sess->fatal_err || tern_connect_done_locked(sess);
	spin_unlock_bh(&sess->lock);
	return done;
}

/* Format @path as "transport://address:port" into @buf. */
static void tern_path_uri(const struct tern_path *path, char *buf,
			  size_t size)
{
	snprintf(buf, size, "%s://%pISpc", path->tops->name, &path->addr);
}

/*
 * tern_connect() succeeded with a path that has no live lane, or no lane
 * at all (the peer granted fewer lanes than there are paths): say so.
 */
static void tern_session_path_warn(struct tern_session *sess,
				   struct tern_path *path)
{
	char uri[80];

	if (READ_ONCE(path->nr_live))
		return;
	tern_path_uri(path, uri, sizeof(uri));
	if (!path->lanes)
		pr_warn("%s/%016llx: path %s has no lane: the peer granted %u lanes for %u paths\n",
			sess->ep->name, sess->id, uri, sess->info.nr_lanes,
			sess->nr_paths);
	else
		pr_warn("%s/%016llx: path %s is down for now (%d); it keeps trying\n",
			sess->ep->name, sess->id, uri,
			sess->slots[path->idx].last_err);
}

/* Put the transports of the paths set up so far. */
static void tern_session_put_paths(struct tern_session *sess)
{
	while (sess->nr_paths)
		tern_transport_put(sess->paths[--sess->nr_paths].tops);
}

/* Set up a path to @uri, the next of @sess; -errno if it cannot be. */
static int tern_session_add_path(struct tern_session *sess, const char *uri)
{
	struct tern_path *path = &sess->paths[sess->nr_paths];
	const struct tern_session_opts *o = &sess->opts;
	char scheme[TERN_SCHEME_MAX];
	int err;

	err = tern_parse_uri(uri, scheme, sizeof(scheme), &path->addr);
	if (err)
		return err;
	path->tops = tern_transport_get(scheme);
	if (!path->tops)
		return -EPROTONOSUPPORT;
	if ((o->encrypt && !path->tops->encrypt) ||
	    (o->integrity && !path->tops->frame_tags)) {
		pr_err("%s: transport %s cannot %s\n", sess->ep->name, scheme,
		       o->encrypt ? "encrypt" : "sign frames");
		tern_transport_put(path->tops);
		return -EPROTONOSUPPORT;
	}
	path->idx = sess->nr_paths++;
	return 0;
}

/**
 * tern_connect - open a session to a remote endpoint
 * @ep: local endpoint
 * @uri: "tcp://HOST[:PORT]" or "rdma://HOST[:PORT]": the first path
 * @opts: options, or NULL for defaults; @opts->paths names further paths
 *
 * Sleeps until every negotiated lane is live, the peer refuses, or the
 * connect timeout passes. The first path negotiates the session and
 * must answer; with several paths, once every lane is live or has failed
 * to connect once, the session is up if any lane is: lanes of a path
 * that is down keep trying on their own.
 * Return: the session, or ERR_PTR: -EINVAL (bad URI or options),
 * -EPROTONOSUPPORT (no such transport), a connect error, -ECONNREFUSED
 * (handshake refused), -ETIMEDOUT, -EINTR.
 */
struct tern_session *tern_connect(struct tern_endpoint *ep, const char *uri,
				  const struct tern_session_opts *opts)
{
	struct tern_session_opts o;
	struct tern_session *sess;
	unsigned int i, nr_paths;
	long left;
	int err;

	err = tern_opts_fill(&o, opts);
	if (err)
		return ERR_PTR(err);
	nr_paths = tern_opts_nr_paths(&o);
	sess = tern_session_alloc(ep, true, o.nr_lanes * nr_paths);
	if (!sess)
		return ERR_PTR(-ENOMEM);
	sess->opts = o;
	sess->priv = o.priv;
	sess->iopolicy = o.iopolicy;
	for (i = 0; i < nr_paths && !err; i++)
		err = tern_session_add_path(sess, i ? o.paths[i - 1] : uri);
	for (i = 0; i < sess->nr_slots; i++)
		sess->slots[i].path = &sess->paths[i % nr_paths];
	if (err) {
		tern_session_put_paths(sess);
		tern_session_put(sess);
		return ERR_PTR(err);
	}
	/* the URIs are the caller's: nothing dangles */
	memset(sess->opts.paths, 0, sizeof(sess->opts.paths));
	sess->id = get_random_u64();
	sess->cookie = get_random_u64();
	sess->info.nr_lanes = 0;
	if (opts && opts->auth_key) {
		sess->auth_keys = kzalloc(sizeof(*sess->auth_keys), GFP_KERNEL);
		err = sess->auth_keys ? 0 : -ENOMEM;
		if (!err) {
			strscpy(sess->identity, opts->auth_identity,
				sizeof(sess->identity));
			err = tern_auth_derive(opts->auth_key, sess->identity,
					       sess->auth_keys);
		}
		if (err) {
			tern_session_put_paths(sess);
			tern_session_put(sess);
			return ERR_PTR(err);
		}
	}
	err = tern_endpoint_link_session(ep, sess);
	if (err) {
		tern_session_put_paths(sess);
		tern_session_put(sess);
		return ERR_PTR(err);
	}

	mod_delayed_work(tern_wq, &sess->slots[0].connect_work, 0);
	left = wait_event_killable_timeout(sess->wait,
					   tern_connect_settled(sess),
					   msecs_to_jiffies(o.connect_timeout_ms));
	spin_lock_bh(&sess->lock);
	if (tern_connect_done_locked(sess))
		err = 0;
	else if (sess->fatal_err)
		err = sess->fatal_err;
	else if (left < 0)
		err = -EINTR;
	else if (sess->nr_paths > 1 && sess->nr_live)
		err = 0;	/* a path still connecting: it goes on alone */
	else
		err = sess->slots[0].last_err ?: -ETIMEDOUT;
	spin_unlock_bh(&sess->lock);
	if (err) {
		tern_session_destroy(sess);
		return ERR_PTR(err);
	}
	for (i = 0; i < sess->nr_paths; i++)
		tern_session_path_warn(sess, &sess->paths[i]);
	return sess;
}
EXPORT_SYMBOL_GPL(tern_connect);

/**
 * tern_session_destroy - close a session opened with tern_connect()
 * @sess: the session
 *
 * Stops reconnecting, closes every lane and completes every pending
 * request with -ESHUTDOWN before returning. Process context.
 */
void tern_session_destroy(struct tern_session *sess)
{
	struct tern_core_lane *lanes[TERN_WIRE_MAX_LANES];
	unsigned int i, n = 0;
	LIST_HEAD(failed);

	if (WARN_ON_ONCE(!sess->requester))
		return;

	spin_lock_bh(&sess->lock);
	sess->destroying = true;
	tern_session_move_locked(sess, TERN_SESS_DEAD);
	spin_unlock_bh(&sess->lock);
	wake_up_all(&sess->wait);

	for (i = 0; i < sess->nr_slots; i++)
		cancel_delayed_work_sync(&sess->slots[i].connect_work);
	cancel_delayed_work_sync(&sess->loss_work);

	spin_lock_bh(&sess->lock);
	for (i = 0; i < sess->nr_slots; i++) {
		struct tern_core_lane *cl = sess->slots[i].lane;

		if (cl) {
			kref_get(&cl->ref);
			lanes[n++] = cl;
		}
	}
	spin_unlock_bh(&sess->lock);
	for (i = 0; i < n; i++) {
		tern_lane_kill(lanes[i], -ESHUTDOWN);
		tern_lane_put(lanes[i]);
	}
	wait_event(sess->wait, !READ_ONCE(sess->nr_lanes));

	tern_session_collect(sess, &failed);
	tern_req_fail_list(&failed, -ESHUTDOWN, NULL);

	tern_endpoint_unlink_session(sess);
	cancel_work_sync(&sess->event_work);
	tern_session_put_paths(sess);
	tern_session_put(sess);
}
EXPORT_SYMBOL_GPL(tern_session_destroy);

/**
 * tern_session_identity - the identity the connector proved
 * @sess: a session
 *
 * Return: the identity, or NULL when the session did not authenticate.
 * It never changes during the session's life.
 */
const char *tern_session_identity(struct tern_session *sess)
{
	return sess->info.features & TERN_FEAT_AUTH ? sess->identity : NULL;
}
EXPORT_SYMBOL_GPL(tern_session_identity);

/**
 * tern_session_get_info - negotiated parameters of a session
 * @sess: the session
 * @info: filled in
 */
void tern_session_get_info(struct tern_session *sess,
			   struct tern_session_info *info)
{
	spin_lock_bh(&sess->lock);
	*info = sess->info;
	spin_unlock_bh(&sess->lock);
}
EXPORT_SYMBOL_GPL(tern_session_get_info);

/**
 * tern_session_get_timeouts - the current timeouts of a requester session
 * @sess: the session
 * @t: receives them
 */
void tern_session_get_timeouts(struct tern_session *sess,
			       struct tern_session_timeouts *t)
{
	spin_lock_bh(&sess->lock);
	t->keepalive_ms = sess->opts.keepalive_ms;
	t->keepalive_timeout_ms = sess->opts.keepalive_timeout_ms;
	t->loss_timeout_ms = sess->opts.loss_timeout_ms;
	spin_unlock_bh(&sess->lock);
}
EXPORT_SYMBOL_GPL(tern_session_get_timeouts);

/**
 * tern_session_set_timeouts - change the timeouts of a running session
 * @sess: a requester session
 * @t: the new values, 0 to keep one, as struct tern_session_opts has them
 *
 * Live lanes take the keepalive timeout at once, and the interval too
 * when it shrinks; a longer interval waits for each lane's next
 * handshake, because the peer expects pings as often as that handshake
 * said. An outage under way gets the new loss timeout counted from its
 * start: one already longer than it fails pending requests now.
 *
 * Return: 0, or -EINVAL (a responder session, or values that
 * tern_connect() would refuse) and nothing changes.
 */
int tern_session_set_timeouts(struct tern_session *sess,
			      const struct tern_session_timeouts *t)
{
	struct tern_session_opts *o = &sess->opts;
	unsigned int ka, ka_tmo, loss, i;
	unsigned long delay, deadline;

	spin_lock_bh(&sess->lock);
	ka = t->keepalive_ms ?: o->keepalive_ms;
	ka_tmo = t->keepalive_timeout_ms ?: o->keepalive_timeout_ms;
	loss = t->loss_timeout_ms ?: o->loss_timeout_ms;
	if (!sess->requester || !tern_timeouts_valid(ka, ka_tmo, loss)) {
		spin_unlock_bh(&sess->lock);
		return -EINVAL;
	}
	WRITE_ONCE(o->keepalive_ms, ka);
	o->keepalive_timeout_ms = ka_tmo;
	o->loss_timeout_ms = loss;
	for (i = 0; i < sess->nr_slots; i++) {
		struct tern_core_lane *cl = sess->slots[i].lane;
		unsigned int told;

		if (!cl || cl->state != TERN_LANE_LIVE ||
		    test_bit(TERN_LANE_F_DYING, &cl->flags))
			continue;
		told = le32_to_cpu(cl->hello_tx.keepalive_ms);
		WRITE_ONCE(cl->ka_interval_ms, min(ka, told));
		WRITE_ONCE(cl->ka_timeout_ms, ka_tmo);
		tern_lane_arm_keepalive(cl, min(ka, told));
	}
	if (sess->state == TERN_SESS_RECONNECTING) {
		if (loss == TERN_LOSS_TIMEOUT_NEVER) {
			cancel_delayed_work(&sess->loss_work);
		} else {
			deadline = sess->down_since + msecs_to_jiffies(loss);
			delay = time_after(deadline, jiffies) ?
				deadline - jiffies : 0;
			mod_delayed_work(tern_wq, &sess->loss_work, delay);
		}
	}
	spin_unlock_bh(&sess->lock);
	return 0;
}
EXPORT_SYMBOL_GPL(tern_session_set_timeouts);

/**
 * tern_session_send_sleeps - does sending from the caller need sleep?
 * @sess: a requester session
 *
 * Return: true when the session's transport transmits from the caller's
 * context only if the caller may sleep (TERN_SEND_MAY_SLEEP); a block
 * driver then sets BLK_MQ_F_BLOCKING to let it.
 */
bool tern_session_send_sleeps(struct tern_session *sess)
{
	unsigned int i;

	for (i = 0; i < sess->nr_paths; i++)
		if (sess->paths[i].tops->push &&
		    sess->paths[i].tops->push_sleeps)
			return true;
	return false;
}
EXPORT_SYMBOL_GPL(tern_session_send_sleeps);

/**
 * tern_session_nr_paths - paths of a requester session
 * @sess: the session
 *
 * Return: 1 and more for a requester session, 0 for a responder's.
 */
unsigned int tern_session_nr_paths(struct tern_session *sess)
{
	return sess->nr_paths;
}
EXPORT_SYMBOL_GPL(tern_session_nr_paths);

/**
 * tern_session_get_path - the state and counters of a path
 * @sess: a requester session
 * @idx: the path, 0 for the URI given to tern_connect()
 * @info: filled in
 *
 * Return: 0, or -ENOENT when there is no such path.
 */
int tern_session_get_path(struct tern_session *sess, unsigned int idx,
			  struct tern_path_info *info)
{
	struct tern_path *path;
	unsigned int i;

	if (idx >= sess->nr_paths)
		return -ENOENT;
	path = &sess->paths[idx];
	memset(info, 0, sizeof(*info));
	tern_path_uri(path, info->uri, sizeof(info->uri));
	spin_lock_bh(&sess->lock);
	info->lanes = path->lanes;
	info->live_lanes = path->nr_live;
	info->inflight = atomic_read(&path->inflight);
	info->requests = atomic64_read(&path->requests);
	for (i = idx; i < sess->nr_slots; i += sess->nr_paths) {
		struct tern_lane_slot *slot = &sess->slots[i];

		info->resends += atomic64_read(&slot->stats.resends);
		info->reconnects += atomic64_read(&slot->stats.reconnects);
		if (slot->last_err)
			info->last_err = slot->last_err;
	}
	spin_unlock_bh(&sess->lock);
	return 0;
}
EXPORT_SYMBOL_GPL(tern_session_get_path);

static const char *const tern_iopolicy_names[TERN_NR_IOPOLICIES] = {
	[TERN_IOPOLICY_FAILOVER]	= "failover",
	[TERN_IOPOLICY_ROUND_ROBIN]	= "round-robin",
	[TERN_IOPOLICY_MIN_INFLIGHT]	= "min-inflight",
};

/* The name of @policy, as tern_iopolicy_parse() takes it; NULL if none */
const char *tern_iopolicy_name(enum tern_iopolicy policy)
{
	return policy < TERN_NR_IOPOLICIES ? tern_iopolicy_names[policy] :
					     NULL;
}
EXPORT_SYMBOL_GPL(tern_iopolicy_name);

/* The policy @name names (a trailing newline allowed), or -EINVAL */
int tern_iopolicy_parse(const char *name)
{
	int i = sysfs_match_string(tern_iopolicy_names, name);

	return i < 0 ? -EINVAL : i;
}
EXPORT_SYMBOL_GPL(tern_iopolicy_parse);

enum tern_iopolicy tern_session_iopolicy(struct tern_session *sess)
{
	return READ_ONCE(sess->iopolicy);
}
EXPORT_SYMBOL_GPL(tern_session_iopolicy);

/**
 * tern_session_set_iopolicy - change how requests spread over the paths
 * @sess: a requester session
 * @policy: the new policy; requests sent from now on follow it
 *
 * Return: 0, or -EINVAL for an unknown policy or a responder session.
 */
int tern_session_set_iopolicy(struct tern_session *sess,
			      enum tern_iopolicy policy)
{
	if (policy >= TERN_NR_IOPOLICIES || !sess->requester)
		return -EINVAL;
	spin_lock_bh(&sess->lock);
	WRITE_ONCE(sess->iopolicy, policy);
	spin_unlock_bh(&sess->lock);
	return 0;
}
EXPORT_SYMBOL_GPL(tern_session_set_iopolicy);

/**
 * tern_session_live - does the session have a live lane right now?
 * @sess: the session
 *
 * Return: true if a request sent now would go out at once.
 */
bool tern_session_live(struct tern_session *sess)
{
	return READ_ONCE(sess->nr_live) > 0;
}
EXPORT_SYMBOL_GPL(tern_session_live);

void tern_session_set_priv(struct tern_session *sess, void *priv)
{
	WRITE_ONCE(sess->priv, priv);
}
EXPORT_SYMBOL_GPL(tern_session_set_priv);

void *tern_session_priv(struct tern_session *sess)
{
	return READ_ONCE(sess->priv);
}
EXPORT_SYMBOL_GPL(tern_session_priv);

/* The endpoint a session belongs to: the listener's, or the connector's. */
struct tern_endpoint *tern_session_endpoint(struct tern_session *sess)
{
	return sess->ep;
}
EXPORT_SYMBOL_GPL(tern_session_endpoint);

static const struct {
	const char	*name;
	size_t		offset;
} tern_stat_fields[] = {
	{ "tx_msgs",	  offsetof(struct tern_stats, tx_msgs) },
	{ "tx_bytes",	  offsetof(struct tern_stats, tx_bytes) },
	{ "rx_msgs",	  offsetof(struct tern_stats, rx_msgs) },
	{ "rx_bytes",	  offsetof(struct tern_stats, rx_bytes) },
	{ "resends",	  offsetof(struct tern_stats, resends) },
	{ "reconnects",	  offsetof(struct tern_stats, reconnects) },
	{ "crc_errors",	  offsetof(struct tern_stats, crc_errors) },
	{ "proto_errors", offsetof(struct tern_stats, proto_errors) },
	{ "injected",	  offsetof(struct tern_stats, injected) },
	{ "remote_pulls", offsetof(struct tern_stats, remote_pulls) },
	{ "remote_pushes", offsetof(struct tern_stats, remote_pushes) },
	{ "submitter_sends", offsetof(struct tern_stats, submitter_sends) },
	{ "mac_errors",	  offsetof(struct tern_stats, mac_errors) },
};

static atomic64_t *tern_stat_field(struct tern_stats *st, unsigned int i)
{
	return (atomic64_t *)((char *)st + tern_stat_fields[i].offset);
}

/* Add every counter of @st to @sum. */
void tern_stats_add(struct tern_stats *sum, struct tern_stats *st)
{
	unsigned int f;

	for (f = 0; f < ARRAY_SIZE(tern_stat_fields); f++)
		atomic64_add(atomic64_read(tern_stat_field(st, f)),
			     tern_stat_field(sum, f));
}

/* Add every CPU's copy of per-CPU counters to @sum. */
void tern_stats_add_pcpu(struct tern_stats *sum,
			 struct tern_stats __percpu *pcpu)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu)
		tern_stats_add(sum, per_cpu_ptr(pcpu, cpu));
}

void tern_stats_show(struct seq_file *m, const char *prefix,
		     struct tern_stats *st)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(tern_stat_fields); i++)
		seq_printf(m, "%s%s %lld\n", prefix, tern_stat_fields[i].name,
			   (long long)atomic64_read(tern_stat_field(st, i)));
}

static int tern_session_stats_show(struct seq_file *m, void *v)
{
	struct tern_session *sess = m->private;
	struct tern_stats sum = {};
	unsigned int i, state, nr_live, inflight, reserved;
	u64 inflight_bytes, requests = 0, replies = 0;
	char prefix[16];
	int cpu;

	spin_lock_bh(&sess->lock);
	state = sess->state;
	nr_live = sess->nr_live;
	spin_unlock_bh(&sess->lock);
	inflight = atomic_read(&sess->inflight);
	reserved = atomic_read(&sess->reserved_inflight);
	inflight_bytes = atomic64_read(&sess->inflight_bytes);

	for_each_possible_cpu(cpu) {
		const struct tern_sess_counts *c = per_cpu_ptr(sess->counts,
							       cpu);

		requests += READ_ONCE(c->requests);
		replies += READ_ONCE(c->replies);
	}
	seq_printf(m, "session_id %016llx\n", sess->id);
	seq_printf(m, "role %s\n", sess->requester ? "requester" : "responder");
	seq_printf(m, "state %s\n", tern_sess_state_names[state]);
	seq_printf(m, "lanes %u\n", sess->info.nr_lanes);
	seq_printf(m, "live_lanes %u\n", nr_live);
	seq_printf(m, "queue_depth %u\n", sess->info.queue_depth);
	seq_printf(m, "max_data %u\n", sess->info.max_data);
	seq_printf(m, "data_crc %u\n",
		   !!(sess->info.features & TERN_FEAT_DATA_CRC));
	seq_printf(m, "keepalive_ms %u\n", READ_ONCE(sess->opts.keepalive_ms));
	seq_printf(m, "keepalive_timeout_ms %u\n",
		   READ_ONCE(sess->opts.keepalive_timeout_ms));
	if (READ_ONCE(sess->opts.loss_timeout_ms) == TERN_LOSS_TIMEOUT_NEVER)
		seq_puts(m, "loss_timeout_ms forever\n");
	else
		seq_printf(m, "loss_timeout_ms %u\n",
			   READ_ONCE(sess->opts.loss_timeout_ms));
	seq_printf(m, "inflight %u\n", inflight);
	seq_printf(m, "reserved_inflight %u\n", reserved);
	seq_printf(m, "inflight_bytes %llu\n", inflight_bytes);
	seq_printf(m, "requests %llu\n", requests);
	seq_printf(m, "replies %llu\n", replies);
	seq_printf(m, "failed %lld\n", (long long)atomic64_read(&sess->failed));
	seq_printf(m, "duplicates %lld\n",
		   (long long)atomic64_read(&sess->duplicates));
	seq_printf(m, "replies_dropped %lld\n",
		   (long long)atomic64_read(&sess->replies_dropped));
	if (!sess->requester)
		seq_printf(m, "core_data_bytes %lld\n",
			   (long long)atomic64_read(&sess->core_data_bytes));
	seq_printf(m, "peer_restarts %lld\n",
		   (long long)atomic64_read(&sess->peer_restarts));
	seq_printf(m, "cancel_resets %lld\n",
		   (long long)atomic64_read(&sess->cancel_resets));

	for (i = 0; i < sess->nr_slots; i++)
		tern_stats_add(&sum, &sess->slots[i].stats);
	tern_stats_show(m, "", &sum);

	if (sess->nr_paths)
		seq_printf(m, "iopolicy %s\n",
			   tern_iopolicy_name(READ_ONCE(sess->iopolicy)));
	for (i = 0; i < sess->nr_paths; i++) {
		struct tern_path_info pi;

		tern_session_get_path(sess, i, &pi);
		seq_printf(m, "path%u.uri %s\n", i, pi.uri);
		seq_printf(m, "path%u.lanes %u\n", i, pi.lanes);
		seq_printf(m, "path%u.live_lanes %u\n", i, pi.live_lanes);
		seq_printf(m, "path%u.inflight %u\n", i, pi.inflight);
		seq_printf(m, "path%u.requests %llu\n", i, pi.requests);
		seq_printf(m, "path%u.resends %llu\n", i, pi.resends);
		seq_printf(m, "path%u.reconnects %llu\n", i, pi.reconnects);
	}

	for (i = 0; i < sess->nr_slots; i++) {
		struct tern_core_lane *cl;
		unsigned int lstate = TERN_LANE_DEAD;

		spin_lock_bh(&sess->lock);
		cl = sess->slots[i].lane;
		if (cl)
			lstate = cl->state;
		spin_unlock_bh(&sess->lock);
		snprintf(prefix, sizeof(prefix), "lane%u.", i);
		seq_printf(m, "%sstate %s\n", prefix,
			   cl ? tern_lane_state_names[lstate] : "down");
		tern_stats_show(m, prefix, &sess->slots[i].stats);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tern_session_stats);

void tern_session_debugfs(struct tern_session *sess)
{
	char name[24];

	snprintf(name, sizeof(name), "%s%016llx",
		 sess->requester ? "" : "r-", sess->id);
	sess->dbg = debugfs_create_dir(name, sess->ep->dbg);
	debugfs_create_file("stats", 0400, sess->dbg, sess,
			    &tern_session_stats_fops);
}
