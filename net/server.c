// SPDX-License-Identifier: GPL-2.0
/*
 * tern messenger core: the responder side.
 *
 * Accepted lanes present a HELLO; the core finds or creates the session it
 * names (session id + cookie), negotiates and answers HELLO_ACK. Requests
 * become struct tern_srv_req: the front is received into a core buffer,
 * TO_RESPONDER data into pages the ULP supplies from ->alloc_data() or the
 * core allocates. The ULP moves data with tern_pull()/tern_push() and
 * answers with tern_reply(); the reply goes out on the lane the request
 * came from. If that lane has died the reply is dropped: the requester
 * resends every request that was on a lane when it died, so a reply on
 * another lane would only race with the resent copy and pile up work.
 *
 * Locking: ep->lock (mutex) serialises session lookup and creation against
 * unlinking; sess->lock protects the lane slots. A reply is queued under
 * its lane's own lock, if the lane is still live (tern_lane_queue_live()):
 * no lock of the session per request. Responder requests held (in
 * progress or with a reply not yet sent) are bounded by four times the
 * negotiated queue depth, room for resent duplicates of requests whose
 * first copy is still held; so a peer cannot make us allocate without
 * limit. The count is an atomic of the session.
 *
 * Data pages the core allocates because the ULP supplied none are held
 * within byte budgets per session and per endpoint
 * (tern.max_core_data_mib_per_session, tern.max_core_data_mib), charged
 * when allocated and given back when the request is freed. A request
 * beyond them is not read into fresh pages: its data is discarded as if
 * ->alloc_data had refused it and the core answers -ENOMEM, the
 * target's "not now", which requesters retry.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/hardirq.h>
#include <linux/math64.h>
#include <linux/slab.h>
#include "tern_core.h"

/* tern_srv_req->state bits */
#define TERN_SREQ_ULP		0	/* the ULP has seen it: call ->release */
#define TERN_SREQ_REPLIED	1
#define TERN_SREQ_NO_ROOM	2	/* over the core data budget: -ENOMEM */

/* A request with its ULP's space behind it: see tern_srv_req_space(). */
static size_t tern_srv_req_size(const struct tern_endpoint *ep)
{
	return ALIGN(sizeof(struct tern_srv_req), ARCH_KMALLOC_MINALIGN) +
	       ep->req_space;
}

static void tern_srv_req_free_front(struct tern_srv_req *sreq)
{
	if (sreq->front_buf && sreq->front_buf != sreq->front_inline)
		kfree(sreq->front_buf);
}

static void tern_core_data_uncharge(struct tern_session *sess, u32 bytes)
{
	atomic64_sub(bytes, &sess->core_data_bytes);
	atomic64_sub(bytes, &sess->ep->core_data_bytes);
}

/*
 * Room in @sess's and its endpoint's budgets for @bytes more? One
 * request always fits where nothing is held, so a budget below a
 * request's size slows a session down instead of starving it.
 */
static bool tern_core_data_charge(struct tern_session *sess, u32 bytes)
{
	struct tern_endpoint *ep = sess->ep;
	u64 cap, held;

	cap = (u64)READ_ONCE(tern_max_core_data_mib_per_session) << 20;
	held = atomic64_add_return(bytes, &sess->core_data_bytes);
	if (cap && held > cap && held != bytes) {
		atomic64_sub(bytes, &sess->core_data_bytes);
		return false;
	}
	cap = (u64)READ_ONCE(tern_max_core_data_mib) << 20;
	held = atomic64_add_return(bytes, &ep->core_data_bytes);
	if (cap && held > cap && held != bytes) {
		tern_core_data_uncharge(sess, bytes);
		return false;
	}
	return true;
}

static void tern_srv_req_free(struct tern_srv_req *sreq)
{
	struct tern_session *sess = sreq->sess;
	unsigned int i;

	atomic_dec(&sess->nr_srv_reqs);
	/* I/O requests mostly hold none of these: no kfree(NULL) calls */
	if (sreq->core_nr_bvec) {
		for (i = 0; i < sreq->core_nr_bvec; i++)
			tern_data_page_free(sreq->core_bvec[i].bv_page);
		kfree(sreq->core_bvec);
	}
	if (sreq->core_charged)
		tern_core_data_uncharge(sess, sreq->core_charged);
	if (sreq->nr_rdesc)
		kfree(sreq->rdesc);
	tern_srv_req_free_front(sreq);
	if (sreq->frame.hdr.front_len)	/* set once reply_front_buf is */
		kfree(sreq->reply_front_buf);
	if (sreq->lane)
		tern_lane_put(to_core_lane(sreq->lane));
	tern_session_put(sess);
	kfree(sreq);
	tern_obj_dec(TERN_OBJ_SRV_REQ);
}

void tern_srv_req_finish(struct tern_srv_req *sreq)
{
	const struct tern_endpoint_ops *ops = sreq->sess->ep->ops;

	if (test_bit(TERN_SREQ_ULP, &sreq->state) && ops && ops->release)
		ops->release(sreq);
	tern_srv_req_free(sreq);
}

void tern_srv_req_tx_done(struct tern_srv_req *sreq)
{
	tern_srv_req_finish(sreq);
}

void tern_server_rx_abort(struct tern_core_lane *cl)
{
	struct tern_srv_req *sreq = cl->pub.rx.sreq;

	cl->pub.rx.sreq = NULL;
	if (sreq)
		tern_srv_req_finish(sreq);
}

/*
 * Refuse the handshake with @status and close the lane once it is sent:
 * in the HELLO_ACK, or in the AUTH_ACK once a challenge went out in the
 * HELLO_ACK (which the proofs cover, so it is never rewritten).
 */
static void tern_refuse_send(struct tern_core_lane *cl, int status)
{
	set_bit(TERN_LANE_F_CLOSE_TX, &cl->flags);
	if (cl->auth && cl->auth->challenged) {
		memset(&cl->auth_tx, 0, sizeof(cl->auth_tx));
		cl->auth_tx.status = cpu_to_le32((u32)status);
		tern_lane_queue_auth(cl);
		return;
	}
	memset(&cl->hello_tx, 0, sizeof(cl->hello_tx));
	cl->hello_tx.session_id = cl->hello_rx.session_id;
	cl->hello_tx.cookie = cl->hello_rx.cookie;
	cl->hello_tx.lane_idx = cl->hello_rx.lane_idx;
	cl->hello_tx.incarnation = cpu_to_le64(cl->ep->incarnation);
	cl->hello_tx.status = cpu_to_le32((u32)status);
	tern_lane_queue_hello(cl);
}

static void tern_refuse(struct tern_core_lane *cl, int status, const char *why)
{
	pr_warn_ratelimited("%s: refusing handshake: %s (%d)\n", cl->name, why,
			    status);
	TERN_LANE_STAT(cl, proto_errors, 1);
	tern_refuse_send(cl, status);
}

/*
 * A well-formed handshake beyond one of the endpoint's caps: not a
 * protocol error, counted in the endpoint's @counter. Called and returns
 * with ep->lock held.
 */
static void tern_refuse_cap(struct tern_core_lane *cl, u64 *counter,
			    const char *what, unsigned int cap)
{
	(*counter)++;
	pr_warn_ratelimited("%s: refusing handshake: %u %s on this endpoint already (%d)\n",
			    cl->name, cap, what, -EUSERS);
	tern_refuse_send(cl, -EUSERS);
}

/*
 * The same for one remote address's share of the endpoint, naming the
 * address. Called and returns with ep->lock held; @cl->peer is set.
 */
static void tern_refuse_peer_cap(struct tern_core_lane *cl, u64 *counter,
				 const char *what, unsigned int cap)
{
	(*counter)++;
	pr_warn_ratelimited("%s: refusing handshake: %pISc has %u %s on this endpoint already (%d)\n",
			    cl->name, &cl->peer->addr, cap, what, -EUSERS);
	tern_refuse_send(cl, -EUSERS);
}

/* A connector that could not prove what it claims: not a protocol error. */
static void tern_refuse_auth(struct tern_core_lane *cl, int status,
			     const char *why)
{
	struct tern_endpoint *ep = cl->ep;

	mutex_lock(&ep->lock);
	ep->auth_failures++;
	mutex_unlock(&ep->lock);
	pr_warn_ratelimited("%s: refusing handshake of '%.63s': %s (%d)\n",
			    cl->name, cl->hello_rx.identity, why, status);
	tern_refuse_send(cl, status);
}

/*
 * The responder session @id names, with a reference: one of @ep's, or of
 * another endpoint of its group (a requester's other path).
 */
static struct tern_session *tern_server_find_locked(struct tern_endpoint *ep,
						    u64 id)
{
	struct tern_session *sess;

	lockdep_assert_held(&ep->lock);
	if (ep->group)
		return tern_group_find(ep, id);
	list_for_each_entry(sess, &ep->sessions, ep_entry)
		if (!sess->requester && sess->id == id) {
			kref_get(&sess->ref);
			return sess;
		}
	return NULL;
}

static bool tern_info_same(const struct tern_session_info *a,
			   const struct tern_session_info *b)
{
	return a->nr_lanes == b->nr_lanes &&
	       a->queue_depth == b->queue_depth &&
	       a->max_data == b->max_data && a->max_front == b->max_front &&
	       !tern_session_features_differ(a->features, b->features);
}

/*
 * Whether @cl may join @sess, the session its HELLO names: the same
 * cookie and incarnation, the identity it proved (none if it proved
 * none), the same negotiated values @v. Return: 0, or the status to
 * refuse it with and in @why the reason; @auth: the identity is the
 * misfit (tern_refuse_auth(), which takes ep->lock).
 */
static int tern_lane_misfit(const struct tern_core_lane *cl,
			    const struct tern_session *sess,
			    const struct tern_session_info *v,
			    const char **why, bool *auth)
{
	const struct tern_wire_hello *h = &cl->hello_rx;

	*auth = false;
	if (sess->cookie != le64_to_cpu(h->cookie) ||
	    sess->peer_incarnation != le64_to_cpu(h->incarnation)) {
		*why = "session cookie mismatch";
		return -EPERM;
	}
	if (strcmp(sess->identity, cl->auth ? h->identity : "")) {
		*why = "session of another identity";
		*auth = true;
		return -EPERM;
	}
	if (!tern_info_same(&sess->info, v)) {
		*why = "lane parameters differ from session";
		return -EINVAL;
	}
	return 0;
}

/*
 * A lane that arrived at its endpoint for a session of another endpoint
 * of the group: the ULP decides, without ep->lock (it may take its own
 * locks, which it holds around calls into the core), and only once the
 * lane fits the session (tern_lane_misfit()): it may record the path as
 * the session's, and a lane refused after would leave a path that never
 * joined (tern_target checks OPENs and unlinks against them). Return:
 * the session, referenced, if the lane may join one of another
 * endpoint; NULL if the session is not there or is the endpoint's own;
 * an ERR_PTR once the lane is refused.
 */
static struct tern_session *tern_server_join(struct tern_core_lane *cl,
					     u64 id,
					     const struct tern_session_info *v)
{
	const struct tern_endpoint_ops *ops = cl->ep->ops;
	struct tern_session *sess;
	const char *why;
	bool auth;
	int err;

	if (!cl->ep->group)
		return NULL;
	sess = tern_group_find(cl->ep, id);
	if (!sess || sess->ep == cl->ep) {
		if (sess)
			tern_session_put(sess);
		return NULL;
	}
	err = tern_lane_misfit(cl, sess, v, &why, &auth);
	if (err) {
		tern_session_put(sess);
		if (auth)
			tern_refuse_auth(cl, err, why);
		else
			tern_refuse(cl, err, why);
		return ERR_PTR(err);
	}
	err = ops && ops->lane_join ? ops->lane_join(sess, cl->ep) : -EPERM;
	if (!err)
		return sess;
	tern_session_put(sess);
	tern_refuse(cl, err, "the ULP refused a path into another port's session");
	return ERR_PTR(err);
}

/*
 * The values a HELLO asks for, bounded by ours, into @v; false (after a
 * refusal) when they are out of range.
 */
static bool tern_server_negotiate(struct tern_core_lane *cl,
				  struct tern_session_info *v)
{
	const struct tern_wire_hello *h = &cl->hello_rx;
	struct tern_endpoint *ep = cl->ep;
	unsigned int want_lanes = le16_to_cpu(h->nr_lanes);
	unsigned int ka_ms = le32_to_cpu(h->keepalive_ms);

	v->session_id = le64_to_cpu(h->session_id);
	v->nr_lanes = min(want_lanes, ep->max_lanes);
	v->queue_depth = min_t(unsigned int, le16_to_cpu(h->queue_depth),
			       ep->max_queue_depth);
	v->max_data = min(le32_to_cpu(h->max_data), ep->max_data);
	v->max_front = min_t(u32, le32_to_cpu(h->max_front),
			     TERN_WIRE_MAX_FRONT);
	v->features = le32_to_cpu(h->features) & TERN_FEAT_ALL;
	if (!cl->pub.tops->pull)
		v->features &= ~TERN_FEAT_REMOTE_DATA;
	/* keys come from the authentication: none without it */
	if ((v->features & (TERN_FEAT_ENCRYPT | TERN_FEAT_INTEGRITY)) &&
	    !(v->features & TERN_FEAT_AUTH)) {
		tern_refuse(cl, -EINVAL, "encryption or integrity without authentication");
		return false;
	}
	/* the tags replace the crc; encryption already covers every byte */
	if ((v->features & TERN_FEAT_INTEGRITY) &&
	    (v->features & (TERN_FEAT_ENCRYPT | TERN_FEAT_DATA_CRC))) {
		tern_refuse(cl, -EINVAL, "integrity with encryption or data crc");
		return false;
	}
	if (!cl->pub.tops->encrypt)
		v->features &= ~TERN_FEAT_ENCRYPT;
	if (!cl->pub.tops->frame_tags)
		v->features &= ~TERN_FEAT_INTEGRITY;
	/* data moved by remote access would bypass the tags */
	if (v->features & TERN_FEAT_INTEGRITY)
		v->features &= ~TERN_FEAT_REMOTE_DATA;
	/* what the ULP can hold: let the requester's throttle wait instead */
	if (ep->max_session_bytes && v->max_data)
		v->queue_depth = clamp_t(u64, div64_u64(ep->max_session_bytes,
							v->max_data),
					 1, v->queue_depth);

	if (!want_lanes || want_lanes > TERN_WIRE_MAX_LANES ||
	    le16_to_cpu(h->lane_idx) >= v->nr_lanes || !v->queue_depth ||
	    v->max_data < TERN_MIN_MAX_DATA || v->max_front < 64 ||
	    ka_ms < 100 || ka_ms > 3600 * 1000 || h->reserved0 ||
	    h->reserved1) {
		tern_refuse(cl, -EINVAL, "parameters out of range");
		return false;
	}
	/* The lane lives three intervals after the peer went quiet. */
	if (ka_ms > READ_ONCE(tern_max_peer_keepalive_ms)) {
		tern_refuse(cl, -EINVAL, "keepalive interval above tern.max_peer_keepalive_ms");
		return false;
	}
	/* without authentication, nonce and identity mean nothing: zero */
	if (!(v->features & TERN_FEAT_AUTH) &&
	    (memchr_inv(h->nonce, 0, sizeof(h->nonce)) ||
	     memchr_inv(h->identity, 0, sizeof(h->identity)))) {
		tern_refuse(cl, -EINVAL, "nonce or identity without authentication");
		return false;
	}
	return true;
}

/* The HELLO_ACK that lets the lane in, or challenges it, into hello_tx. */
static void tern_server_fill_ack(struct tern_core_lane *cl,
				 const struct tern_session_info *v)
{
	const struct tern_wire_hello *h = &cl->hello_rx;
	struct tern_wire_hello *a = &cl->hello_tx;

	memset(a, 0, sizeof(*a));
	a->session_id = h->session_id;
	a->cookie = h->cookie;
	a->incarnation = cpu_to_le64(cl->ep->incarnation);
	a->features = cpu_to_le32(v->features);
	a->max_data = cpu_to_le32(v->max_data);
	a->max_front = cpu_to_le32(v->max_front);
	a->keepalive_ms = h->keepalive_ms;
	a->nr_lanes = cpu_to_le16(v->nr_lanes);
	a->lane_idx = h->lane_idx;
	a->queue_depth = cpu_to_le16(v->queue_depth);
	if (v->features & TERN_FEAT_AUTH)
		get_random_bytes(a->nonce, sizeof(a->nonce));
}

/*
 * Find or create the session the HELLO names and put the lane in its
 * slot; answer with the HELLO_ACK, or with the AUTH_ACK and our proof
 * when the lane authenticated. @v: the negotiated values.
 */
static int tern_server_bind(struct tern_core_lane *cl,
			    const struct tern_session_info *v)
{
	const struct tern_wire_hello *h = &cl->hello_rx;
	const char *identity = cl->auth ? h->identity : "";
	struct tern_endpoint *ep = cl->ep;
	struct tern_core_lane *old = NULL;
	unsigned int lane_idx, ka_ms, cap;
	bool rejoin = false, dying, auth;
	struct tern_session *sess, *joined;
	u64 id, cookie, inc;
	const char *why;
	int err;

	id = le64_to_cpu(h->session_id);
	cookie = le64_to_cpu(h->cookie);
	inc = le64_to_cpu(h->incarnation);
	lane_idx = le16_to_cpu(h->lane_idx);
	ka_ms = le32_to_cpu(h->keepalive_ms);

	/*
	 * Encrypted: the connector seals everything after our AUTH_ACK, and
	 * we are between its frames now; we seal once the AUTH_ACK is out
	 * (tern_lane_tx_done()). A refusal below closes the lane anyway.
	 */
	if (v->features & TERN_FEAT_ENCRYPT) {
		int err = cl->pub.tops->encrypt(&cl->pub, &cl->auth->rx.aead,
						false);

		if (err)
			return err;
		cl->tx_keys = kmemdup(&cl->auth->tx.aead,
				      sizeof(cl->auth->tx.aead), GFP_NOIO);
		if (!cl->tx_keys)
			return -ENOMEM;
	}
	/* Signed: at the same points */
	if (v->features & TERN_FEAT_INTEGRITY) {
		int err = tern_lane_sign(cl, true);

		if (err)
			return err;
	}

	joined = tern_server_join(cl, id, v);
	if (IS_ERR(joined))
		return 0;
	mutex_lock(&ep->lock);
	if (ep->dying) {
		mutex_unlock(&ep->lock);
		tern_refuse(cl, -ESHUTDOWN, "endpoint going away");
		goto out;
	}
	sess = tern_server_find_locked(ep, id);
	/* the ULP agreed to another port's session: that one, or none */
	if (sess && sess->ep != ep && sess != joined) {
		tern_refuse(cl, -EAGAIN, "session changed under a path's join");
		goto refused;
	}
	err = sess ? tern_lane_misfit(cl, sess, v, &why, &auth) : 0;
	if (err && auth) {
		mutex_unlock(&ep->lock);	/* tern_refuse_auth() takes it */
		tern_session_put(sess);
		tern_refuse_auth(cl, err, why);
		goto out;
	}
	if (err) {
		tern_refuse(cl, err, why);
		goto refused;
	}
	/*
	 * Caps on what a peer can make us hold: lanes past their handshake
	 * (this one still counts as in handshake) unless it replaces the
	 * connection in its slot, and sessions.
	 */
	if (sess) {
		spin_lock_bh(&sess->lock);
		rejoin = sess->slots[lane_idx].lane;
		spin_unlock_bh(&sess->lock);
	}
	cap = READ_ONCE(tern_max_lanes);
	if (!rejoin && tern_ep_bound_lanes(ep) >= cap) {
		tern_refuse_cap(cl, &ep->refused_lanes, "lanes", cap);
		goto refused;
	}
	cap = READ_ONCE(tern_max_sessions);
	if (!sess && ep->nr_sessions >= cap) {
		tern_refuse_cap(cl, &ep->refused_sessions, "sessions", cap);
		goto refused;
	}
	/* cl->peer: this lane's handshake still counts there, so it lives */
	cap = READ_ONCE(tern_max_sessions_per_peer);
	if (!sess && cl->peer && cap && cl->peer->sessions >= cap) {
		tern_refuse_peer_cap(cl, &ep->refused_peer_sessions, "sessions",
				     cap);
		goto refused;
	}
	if (!sess) {
		sess = tern_session_alloc(ep, false, v->nr_lanes);
		if (!sess) {
			mutex_unlock(&ep->lock);
			if (joined)
				tern_session_put(joined);
			return -ENOMEM;
		}
		sess->id = id;
		sess->cookie = cookie;
		sess->peer_incarnation = inc;
		strscpy(sess->identity, identity, sizeof(sess->identity));
		sess->info = *v;
		sess->negotiated = true;
		sess->opts.keepalive_ms = ka_ms;
		/* another path created it meanwhile: this lane tries again */
		err = tern_group_add(sess);
		if (err) {
			mutex_unlock(&ep->lock);
			tern_session_put(sess);
			tern_refuse(cl, err, "session being created by another path");
			goto out;
		}
		kref_get(&sess->ref);	/* as a found one has */
		list_add_tail(&sess->ep_entry, &ep->sessions);
		sess->linked = true;	/* the list holds the initial ref */
		ep->nr_sessions++;
		sess->counted = true;
		/* given back with nr_sessions, when the session is freed */
		sess->peer = cl->peer;
		if (sess->peer)
			sess->peer->sessions++;
		tern_session_debugfs(sess);
		/*
		 * Before the HELLO_ACK goes: the requester's other paths
		 * join right after it, and the ULP judges them by its state.
		 */
		if (ep->ops && ep->ops->session_event)
			ep->ops->session_event(sess, TERN_SESSION_UP);
	}

	snprintf(cl->name, sizeof(cl->name), "%s/r-%016llx/%u", ep->name, id,
		 lane_idx);
	cl->max_front = v->max_front;
	cl->max_data = v->max_data;
	cl->data_crc = v->features & TERN_FEAT_DATA_CRC;
	WRITE_ONCE(cl->remote_data, v->features & TERN_FEAT_REMOTE_DATA);
	cl->ka_interval_ms = ka_ms;
	cl->ka_timeout_ms = 3 * ka_ms;
	if (cl->auth) {
		memset(&cl->auth_tx, 0, sizeof(cl->auth_tx));
		memcpy(cl->auth_tx.proof, cl->auth->target_proof,
		       sizeof(cl->auth_tx.proof));
	} else {
		tern_server_fill_ack(cl, v);
	}

	spin_lock_bh(&sess->lock);
	/*
	 * Another endpoint's session may have lost its last lane and left
	 * its endpoint since we found it: build it again instead.
	 */
	if (!sess->linked) {
		spin_unlock_bh(&sess->lock);
		tern_refuse(cl, -EAGAIN, "session closed under a path's join");
		goto refused;
	}
	/* its endpoint is going: this lane goes too (after the others) */
	dying = sess->destroying;
	old = sess->slots[lane_idx].lane;
	if (old) {
		/* The peer reconnected before we noticed the old lane die. */
		kref_get(&old->ref);
		old->bound = false;
		sess->nr_lanes--;
	}
	kref_get(&sess->ref);
	cl->sess = sess;
	WRITE_ONCE(cl->slot, &sess->slots[lane_idx]);
	cl->slot->lane = cl;
	cl->bound = true;
	cl->proven = !!cl->auth;
	sess->nr_lanes++;
	if (cl->slot->ever_live)
		TERN_LANE_STAT(cl, reconnects, 1);
	cl->slot->ever_live = true;
	if (cl->auth)
		tern_lane_queue_auth(cl);
	else
		tern_lane_queue_hello(cl);
	tern_session_lane_live_locked(sess, cl);
	spin_unlock_bh(&sess->lock);
	tern_lane_handshake_uncount_locked(cl);
	mutex_unlock(&ep->lock);
	tern_lane_auth_free(cl);

	if (old) {
		tern_lane_kill(old, -ECONNRESET);
		tern_lane_put(old);
	}
	tern_session_put(sess);
	if (joined)
		tern_session_put(joined);
	if (dying)
		return -ESHUTDOWN;
	tern_lane_arm_keepalive(cl, ka_ms);
	return 0;

refused:
	mutex_unlock(&ep->lock);
	if (sess)
		tern_session_put(sess);
out:
	if (joined)
		tern_session_put(joined);
	return 0;
}

/*
 * A HELLO with TERN_FEAT_AUTH: look up the key of the identity it claims
 * and answer with our nonce; the lane waits for the connector's proof.
 * Nothing of a session is created before that proof.
 */
static int tern_server_challenge(struct tern_core_lane *cl,
				 const struct tern_session_info *v)
{
	const struct tern_wire_hello *h = &cl->hello_rx;
	const struct tern_endpoint_ops *ops = cl->ep->ops;
	char identity[TERN_WIRE_IDENTITY_LEN];
	u8 key[TERN_AUTH_KEY_LEN];
	size_t len;
	int err;

	len = strnlen(h->identity, sizeof(h->identity));
	if (!tern_identity_valid(h->identity, sizeof(h->identity)) ||
	    memchr_inv(h->identity + len, 0, sizeof(h->identity) - len)) {
		tern_refuse(cl, -EINVAL, "malformed identity");
		return 0;
	}
	memcpy(identity, h->identity, len + 1);
	/*
	 * cl->auth before the key: a revocation that changes the key after
	 * our lookup then finds the lane (tern_endpoint_close_identity()),
	 * one before it has us look up the new key.
	 */
	WRITE_ONCE(cl->auth, kzalloc(sizeof(*cl->auth), GFP_NOIO));
	if (!cl->auth)
		return -ENOMEM;
	err = ops && ops->auth_key ? ops->auth_key(cl->ep, identity, key) :
				     -ENOKEY;
	if (err) {
		tern_lane_auth_free(cl);
		tern_refuse_auth(cl, -ENOKEY, "no key for this identity");
		return 0;
	}
	err = tern_auth_derive(key, identity, &cl->auth->keys);
	memzero_explicit(key, sizeof(key));
	if (err)
		return err;
	cl->auth->info = *v;
	tern_server_fill_ack(cl, v);
	cl->auth->challenged = true;
	cl->auth->awaiting = true;
	tern_lane_queue_hello(cl);
	return 0;
}

int tern_server_rx_hello(struct tern_core_lane *cl)
{
	struct tern_session_info v = {};

	if (!tern_server_negotiate(cl, &v))
		return 0;
	if (cl->ep->require_encrypt && !(v.features & TERN_FEAT_ENCRYPT)) {
		tern_refuse_auth(cl, -EACCES, "this port requires encryption");
		return 0;
	}
	if (cl->ep->require_integrity &&
	    !(v.features & (TERN_FEAT_ENCRYPT | TERN_FEAT_INTEGRITY))) {
		tern_refuse_auth(cl, -EACCES, "this port requires integrity or encryption");
		return 0;
	}
	if (v.features & TERN_FEAT_AUTH)
		return tern_server_challenge(cl, &v);
	if (cl->ep->require_auth) {
		tern_refuse_auth(cl, -ENOKEY, "this port requires authentication");
		return 0;
	}
	return tern_server_bind(cl, &v);
}

/* The connector's proof: check it, then let the lane in. */
int tern_server_rx_auth(struct tern_core_lane *cl)
{
	struct tern_lane_auth *a = cl->auth;
	int err;

	a->awaiting = false;
	if (cl->auth_rx.status || cl->auth_rx.reserved) {
		tern_lane_proto_err(cl, "reserved fields set in AUTH");
		return -EPROTO;
	}
	err = tern_auth_proofs(&a->keys, &cl->hello_rx, &cl->hello_tx,
			       a->host_proof, a->target_proof);
	if (err)
		return err;
	if (!tern_auth_proof_ok(cl->auth_rx.proof, a->host_proof)) {
		tern_refuse_auth(cl, -EKEYREJECTED, "wrong proof of the key");
		return 0;
	}
	if (a->info.features & (TERN_FEAT_ENCRYPT | TERN_FEAT_INTEGRITY)) {
		err = tern_auth_lane_keys(&a->keys, &cl->hello_rx,
					  &cl->hello_tx, a->host_proof,
					  a->target_proof, &a->rx, &a->tx);
		if (err)
			return err;
	}
	return tern_server_bind(cl, &a->info);
}

int tern_server_rx_request_hdr(struct tern_core_lane *cl)
{
	struct tern_lane_rx *rx = &cl->pub.rx;
	struct tern_session *sess = cl->sess;
	u16 flags = le16_to_cpu(rx->hdr.flags);
	u32 buf_len = le32_to_cpu(rx->hdr.buf_len);
	u16 dir = flags & (TERN_WIRE_F_DATA_TO_RESPONDER |
			   TERN_WIRE_F_DATA_FROM_RESPONDER);
	bool remote = flags & TERN_WIRE_F_REMOTE;
	struct tern_srv_req *sreq;

	if (remote) {
		/* descriptors instead of data, see tern_wire.h */
		if (!cl->remote_data || !dir || !buf_len || !rx->data_len ||
		    rx->data_len % sizeof(struct tern_wire_rdesc) ||
		    rx->data_len > TERN_WIRE_MAX_RDESC *
				   sizeof(struct tern_wire_rdesc)) {
			tern_lane_proto_err(cl, "bad remote data request: dir 0x%x data %u buf %u",
					    dir, rx->data_len, buf_len);
			return -EPROTO;
		}
	} else if ((dir == TERN_WIRE_F_DATA_TO_RESPONDER &&
		    (!buf_len || rx->data_len != buf_len)) ||
		   (dir == TERN_WIRE_F_DATA_FROM_RESPONDER &&
		    (!buf_len || rx->data_len)) ||
	    (!dir && (buf_len || rx->data_len)) ||
	    dir == (TERN_WIRE_F_DATA_TO_RESPONDER |
		    TERN_WIRE_F_DATA_FROM_RESPONDER)) {
		tern_lane_proto_err(cl, "inconsistent request direction 0x%x data %u buf %u",
				    dir, rx->data_len, buf_len);
		return -EPROTO;
	}
	if (!(flags & TERN_WIRE_F_DATA_CRC) != !cl->data_crc) {
		tern_lane_proto_err(cl, "request data crc flag does not match session");
		return -EPROTO;
	}

	if (!atomic_add_unless(&sess->nr_srv_reqs, 1,
			       4 * (sess->info.queue_depth +
				    TERN_RESERVED_REQS))) {
		tern_lane_proto_err(cl, "peer exceeds queue depth %u",
				    sess->info.queue_depth);
		return -EPROTO;
	}

	/* a block request's front, and the ULP's state: one allocation */
	sreq = kzalloc(tern_srv_req_size(sess->ep), GFP_NOIO);
	if (sreq && rx->front_len > sizeof(sreq->front_inline)) {
		sreq->front_buf = kmalloc(rx->front_len, GFP_NOIO);
		if (!sreq->front_buf) {
			kfree(sreq);
			sreq = NULL;
		}
	} else if (sreq && rx->front_len) {
		sreq->front_buf = sreq->front_inline;
	}
	if (sreq && remote) {
		sreq->rdesc = kmalloc(rx->data_len, GFP_NOIO);
		if (!sreq->rdesc) {
			tern_srv_req_free_front(sreq);
			kfree(sreq);
			sreq = NULL;
		}
	}
	if (!sreq) {
		atomic_dec(&sess->nr_srv_reqs);
		return -ENOMEM;
	}
	tern_obj_inc(TERN_OBJ_SRV_REQ);
	INIT_LIST_HEAD(&sreq->frame.entry);
	sreq->frame.kind = TERN_FRAME_REPLY;
	kref_get(&sess->ref);
	sreq->sess = sess;
	kref_get(&cl->ref);
	sreq->lane = &cl->pub;
	sreq->tid = le64_to_cpu(rx->hdr.tid);
	sreq->resent = flags & TERN_WIRE_F_RESENT;
	sreq->front = sreq->front_buf;
	sreq->front_len = rx->front_len;
	sreq->data_len = buf_len;
	if (dir == TERN_WIRE_F_DATA_TO_RESPONDER)
		sreq->dir = TERN_DATA_TO_RESPONDER;
	else if (dir == TERN_WIRE_F_DATA_FROM_RESPONDER)
		sreq->dir = TERN_DATA_FROM_RESPONDER;
	rx->sreq = sreq;
	tern_rx_setup(cl, sreq->front_buf, NULL, 0);
	if (remote) {
		sreq->nr_rdesc = rx->data_len / sizeof(*sreq->rdesc);
		rx->data_kvec.iov_base = sreq->rdesc;
		rx->data_kvec.iov_len = rx->data_len;
		iov_iter_kvec(&rx->data_iter, ITER_DEST, &rx->data_kvec, 1,
			      rx->data_len);
	}
	return 0;
}

/*
 * Pages for the data, charged to the core's budgets (in whole pages:
 * what they hold); -ENOSPC when over them, -ENOMEM when out of memory.
 */
static int tern_srv_req_alloc_pages(struct tern_srv_req *sreq)
{
	unsigned int i, n = DIV_ROUND_UP(sreq->data_len, PAGE_SIZE);
	u32 left = sreq->data_len;

	if (!tern_core_data_charge(sreq->sess, n * PAGE_SIZE))
		return -ENOSPC;
	sreq->core_charged = n * PAGE_SIZE;	/* given back when freed */
	sreq->core_bvec = kcalloc(n, sizeof(*sreq->core_bvec), GFP_NOIO);
	if (!sreq->core_bvec)
		return -ENOMEM;
	sreq->core_nr_bvec = n;
	for (i = 0; i < n; i++) {
		struct page *page = tern_data_page_alloc(GFP_NOIO);
		u32 len = min_t(u32, left, PAGE_SIZE);

		if (!page)
			return -ENOMEM;
		bvec_set_page(&sreq->core_bvec[i], page, len, 0);
		left -= len;
	}
	return 0;
}

/* A refused request's data: remote stays there, stream is skipped. */
static void tern_srv_req_discard(struct tern_lane_rx *rx,
				 struct tern_srv_req *sreq)
{
	sreq->rx_bvec = NULL;
	sreq->rx_nr_bvec = 0;
	if (!sreq->nr_rdesc)
		iov_iter_discard(&rx->data_iter, ITER_DEST, rx->data_len);
}

/*
 * A request is its session's: the session's endpoint (not the lane's,
 * which a group may differ) has its ULP, space and data budget.
 */
int tern_server_rx_request_front(struct tern_core_lane *cl)
{
	struct tern_lane_rx *rx = &cl->pub.rx;
	struct tern_srv_req *sreq = rx->sreq;
	struct tern_endpoint *ep = sreq->sess->ep;
	const struct tern_endpoint_ops *ops = ep->ops;
	int err;

	if (sreq->dir != TERN_DATA_TO_RESPONDER)
		return 0;
	if (ops && ops->alloc_data) {
		set_bit(TERN_SREQ_ULP, &sreq->state);
		err = ops->alloc_data(sreq);
		if (err)
			return err;
		if (sreq->rx_discard) {
			tern_srv_req_discard(rx, sreq);
			return 0;
		}
		if (sreq->rx_bvec &&
		    tern_bvec_len_ok(sreq->rx_bvec, sreq->rx_nr_bvec,
				     sreq->data_len)) {
			pr_warn_ratelimited("%s: alloc_data supplied a short buffer or an empty bio_vec\n",
					    cl->name);
			return -EINVAL;
		}
	}
	if (!sreq->rx_bvec) {
		err = tern_srv_req_alloc_pages(sreq);
		if (err == -ENOSPC) {
			atomic64_inc(&ep->refused_core_data);
			pr_warn_ratelimited("%s: request %llu: %u data bytes would pass the core's budget (tern.max_core_data_mib_per_session %u, tern.max_core_data_mib %u), answering -ENOMEM\n",
					    cl->name, sreq->tid, sreq->data_len,
					    READ_ONCE(tern_max_core_data_mib_per_session),
					    READ_ONCE(tern_max_core_data_mib));
			set_bit(TERN_SREQ_NO_ROOM, &sreq->state);
			sreq->rx_discard = true;
			tern_srv_req_discard(rx, sreq);
			return 0;
		}
		if (err)
			return err;
		if (sreq->nr_rdesc)
			return 0;	/* pulled later, see rx_request_done */
		iov_iter_bvec(&rx->data_iter, ITER_DEST, sreq->core_bvec,
			      sreq->core_nr_bvec, rx->data_len);
	} else if (!sreq->nr_rdesc) {
		iov_iter_bvec(&rx->data_iter, ITER_DEST, sreq->rx_bvec,
			      sreq->rx_nr_bvec, rx->data_len);
	}
	return 0;
}

/**
 * tern_lane_rx_swap_page - take a received page instead of copying it
 * @lane: the lane; tern_lane_rx_next() just returned the data iterator
 * @page: a page of tern_data_page_alloc() whose first @len bytes are the
 *	stream's next bytes, and nothing after them that the caller needs
 * @len: those bytes
 *
 * When the next @len bytes are exactly one entry of a request's data
 * pages, at offset 0, and those pages are the core's or a swappable
 * ULP's (&tern_srv_req.rx_swappable), @page takes the place of that
 * entry's page and the data iterator moves past it. Whoever frees the
 * request's pages then frees @page.
 *
 * Return: the page replaced, now the caller's (a data page of undefined
 * content); NULL when the bytes must be copied as usual.
 */
struct page *tern_lane_rx_swap_page(struct tern_lane *lane, struct page *page,
				    u32 len)
{
	struct tern_lane_rx *rx = &lane->rx;
	struct iov_iter *iter = &rx->data_iter;
	struct tern_srv_req *sreq = rx->sreq;
	struct bio_vec *base, *bv;
	struct page *old;
	unsigned int nr;

	if (rx->filling != iter || rx->hdr.type != TERN_WIRE_REQUEST ||
	    !sreq || sreq->rx_discard || sreq->nr_rdesc ||
	    !iov_iter_is_bvec(iter) || iter->iov_offset)
		return NULL;
	if (sreq->rx_bvec) {
		if (!sreq->rx_swappable)
			return NULL;
		base = sreq->rx_bvec;
		nr = sreq->rx_nr_bvec;
	} else {
		base = sreq->core_bvec;
		nr = sreq->core_nr_bvec;
	}
	/* the iterator walks @base: find its entry there, writable */
	if (iter->bvec < base || iter->bvec >= base + nr)
		return NULL;
	bv = &base[iter->bvec - base];
	/* the old page goes to a device to receive into: nobody else's */
	if (bv->bv_offset || bv->bv_len != len || len > PAGE_SIZE ||
	    len > iov_iter_count(iter) || page_count(bv->bv_page) != 1)
		return NULL;
	old = bv->bv_page;
	bv->bv_page = page;
	iov_iter_advance(iter, len);
	return old;
}
EXPORT_SYMBOL_GPL(tern_lane_rx_swap_page);

/* The request and its data are complete: hand it to the ULP. */
static void tern_srv_req_deliver(struct tern_srv_req *sreq)
{
	const struct tern_endpoint_ops *ops = sreq->sess->ep->ops;
	struct tern_session *sess = sreq->sess;

	this_cpu_inc(sess->counts->requests);
	if (sreq->resent)
		atomic64_inc(&sess->duplicates);

	/* no front to copy: cannot fail; ->request never sees it */
	if (test_bit(TERN_SREQ_NO_ROOM, &sreq->state)) {
		tern_reply(sreq, -ENOMEM, NULL, 0);
		return;
	}
	set_bit(TERN_SREQ_ULP, &sreq->state);
	if (ops && ops->request)
		ops->request(sreq);
	else
		tern_reply(sreq, -EOPNOTSUPP, NULL, 0);
}

static int tern_srv_req_check_crc(struct tern_core_lane *cl,
				  struct tern_srv_req *sreq, u32 data_len,
				  u32 want)
{
	const struct bio_vec *bv = sreq->rx_bvec ?: sreq->core_bvec;
	unsigned int nr = sreq->rx_bvec ? sreq->rx_nr_bvec :
					  sreq->core_nr_bvec;
	u32 crc = tern_crc_front_data(sreq->front_buf, sreq->front_len, bv,
				      nr, data_len);

	if (crc == want && !tern_inject_crc())
		return 0;
	TERN_LANE_STAT(cl, crc_errors, 1);
	pr_warn_ratelimited("%s: data crc mismatch on request tid %llu\n",
			    cl->name, sreq->tid);
	return -EBADMSG;
}

/* Descriptors must describe exactly the buffer the header announced. */
static int tern_srv_req_check_rdesc(struct tern_core_lane *cl,
				    struct tern_srv_req *sreq)
{
	u64 total = 0;
	unsigned int i;

	for (i = 0; i < sreq->nr_rdesc; i++) {
		u32 len = le32_to_cpu(sreq->rdesc[i].len);

		if (!len)
			break;
		total += len;
	}
	if (i == sreq->nr_rdesc && total == sreq->data_len)
		return 0;
	tern_lane_proto_err(cl, "remote descriptors of tid %llu do not cover %u bytes",
			    sreq->tid, sreq->data_len);
	return -EPROTO;
}

/**
 * tern_srv_req_pulled - a transport's ->pull finished
 * @req: the request
 * @status: 0, or a negative errno (the lane is then dropped)
 */
void tern_srv_req_pulled(struct tern_srv_req *req, int status)
{
	struct tern_core_lane *cl = to_core_lane(req->lane);

	if (!status && cl->data_crc)
		status = tern_srv_req_check_crc(cl, req, req->data_len,
						le32_to_cpu(req->frame.hdr.data_crc));
	if (status) {
		tern_lane_error(&cl->pub, status);
		tern_srv_req_finish(req);
		return;
	}
	TERN_LANE_STAT(cl, remote_pulls, 1);
	tern_srv_req_deliver(req);
}
EXPORT_SYMBOL_GPL(tern_srv_req_pulled);

int tern_server_rx_request_done(struct tern_core_lane *cl)
{
	struct tern_lane_rx *rx = &cl->pub.rx;
	struct tern_srv_req *sreq = rx->sreq;
	u32 crc = le32_to_cpu(rx->hdr.data_crc);
	int err;

	if (sreq->nr_rdesc) {
		err = tern_srv_req_check_rdesc(cl, sreq);
		if (err)
			return err;
		if (sreq->dir == TERN_DATA_TO_RESPONDER && !sreq->rx_discard) {
			const struct bio_vec *bv = sreq->rx_bvec ?:
						   sreq->core_bvec;
			unsigned int nr = sreq->rx_bvec ? sreq->rx_nr_bvec :
							  sreq->core_nr_bvec;

			/* the CRC is checked once the data is here */
			sreq->frame.hdr.data_crc = rx->hdr.data_crc;
			err = cl->pub.tops->pull(&cl->pub, sreq, bv, nr);
			if (err)
				return err;
			rx->sreq = NULL;	/* the transport's now */
			return 0;
		}
		if (cl->data_crc && !sreq->rx_discard) {
			err = tern_srv_req_check_crc(cl, sreq, 0, crc);
			if (err)
				return err;
		}
	} else if (cl->data_crc && !sreq->rx_discard) {
		err = tern_srv_req_check_crc(cl, sreq, rx->data_len, crc);
		if (err)
			return err;
	}
	rx->sreq = NULL;
	tern_srv_req_deliver(sreq);
	return 0;
}

static void tern_srv_req_send(struct tern_srv_req *sreq)
{
	struct tern_session *sess = sreq->sess;
	struct tern_core_lane *cl = to_core_lane(sreq->lane);
	bool live, push = cl->pub.tops->push;

	/*
	 * Once queued, the frame may be sent and @sreq freed, or the lane
	 * torn down and the session with it: count first, hold the lane.
	 */
	this_cpu_inc(sess->counts->replies);
	if (push)
		kref_get(&cl->ref);
	live = tern_lane_queue_live(cl, &sreq->frame, !push);
	if (live && push)	/* tern_reply(): any context */
		tern_lane_push(cl, false);
	if (push)
		tern_lane_put(cl);
	if (!live) {
		this_cpu_dec(sess->counts->replies);
		atomic64_inc(&sess->replies_dropped);
		tern_srv_req_finish(sreq);	/* the requester resends */
	}
}

static void tern_srv_req_send_work(struct work_struct *work)
{
	tern_srv_req_send(container_of(work, struct tern_srv_req, work));
}

/**
 * tern_reply - answer a request
 * @req: the request from &tern_endpoint_ops.request
 * @status: status for the requester (&tern_request.reply_status)
 * @front: reply front, copied; may be NULL when @front_len is 0
 * @front_len: at most the session's max_front
 *
 * Data pushed with tern_push() follows the reply. Any context. On success
 * @req belongs to the core (it may be freed before this returns): the
 * core calls &tern_endpoint_ops.release once the reply has left, or has
 * been dropped because the request's lane died (the requester resends).
 * Return: 0; -EMSGSIZE; -ENOMEM (the request stays unanswered: retry);
 * -EINVAL if already answered.
 */
int tern_reply(struct tern_srv_req *req, int status, const void *front,
	       u32 front_len)
{
	struct tern_session *sess = req->sess;
	struct tern_wire_hdr *hdr = &req->frame.hdr;
	bool atomic = in_hardirq() || irqs_disabled();
	u16 flags = 0;
	u32 data_len = req->frame.bvec ? req->pushed_len : 0;
	u32 crc;

	if (front_len > sess->info.max_front)
		return -EMSGSIZE;
	if (test_and_set_bit(TERN_SREQ_REPLIED, &req->state))
		return -EINVAL;
	if (front_len) {
		req->reply_front_buf = kmemdup(front, front_len,
					       atomic ? GFP_ATOMIC : GFP_NOIO);
		if (!req->reply_front_buf) {
			clear_bit(TERN_SREQ_REPLIED, &req->state);
			return -ENOMEM;
		}
	}

	memset(hdr, 0, sizeof(*hdr));
	hdr->magic = cpu_to_le32(TERN_WIRE_MAGIC);
	hdr->version = TERN_WIRE_VERSION;
	hdr->type = TERN_WIRE_REPLY;
	hdr->tid = cpu_to_le64(req->tid);
	hdr->status = cpu_to_le32((u32)status);
	hdr->front_len = cpu_to_le32(front_len);
	hdr->data_len = cpu_to_le32(data_len);
	if (req->nr_rdesc) {
		/* the transport writes the data, then sends the reply */
		req->frame.rdesc = req->rdesc;
		req->frame.nr_rdesc = req->nr_rdesc;
		hdr->data_len = 0;
		if (data_len) {
			flags |= TERN_WIRE_F_REMOTE;
			hdr->buf_len = cpu_to_le32(data_len);
			TERN_LANE_STAT(to_core_lane(req->lane), remote_pushes,
				       1);
		}
	}
	req->frame.front = req->reply_front_buf;
	if (sess->info.features & TERN_FEAT_DATA_CRC) {
		flags |= TERN_WIRE_F_DATA_CRC;
		crc = tern_crc_front_data(req->reply_front_buf, front_len,
					  req->frame.bvec, req->frame.nr_bvec,
					  data_len);
		hdr->data_crc = cpu_to_le32(crc);
	}
	hdr->flags = cpu_to_le16(flags);

	if (atomic) {
		INIT_WORK(&req->work, tern_srv_req_send_work);
		queue_work(tern_wq, &req->work);
	} else {
		tern_srv_req_send(req);
	}
	return 0;
}
EXPORT_SYMBOL_GPL(tern_reply);

/**
 * tern_push - send local pages to the requester's buffer
 * @req: a FROM_RESPONDER request
 * @bvec: local data
 * @nr_bvec: entries in @bvec
 * @len: bytes, at most @req->data_len
 * @done: called with the result, possibly before tern_push() returns
 *
 * On stream transports the data follows the reply, so @bvec and its pages
 * must stay valid until &tern_endpoint_ops.release. One push per request.
 * Return: 0 (then @done is called) or -EINVAL.
 */
int tern_push(struct tern_srv_req *req, const struct bio_vec *bvec,
	      unsigned int nr_bvec, u32 len, tern_xfer_done_t done)
{
	if (req->dir != TERN_DATA_FROM_RESPONDER || !len ||
	    len > req->data_len || req->frame.bvec ||
	    tern_bvec_len_ok(bvec, nr_bvec, len))
		return -EINVAL;
	req->frame.bvec = bvec;
	req->frame.nr_bvec = nr_bvec;
	req->pushed_len = len;
	if (done)
		done(req, 0);
	return 0;
}
EXPORT_SYMBOL_GPL(tern_push);

/**
 * tern_pull - copy the requester's data into local pages
 * @req: a TO_RESPONDER request
 * @bvec: local destination
 * @nr_bvec: entries in @bvec
 * @offset: offset into the requester's buffer
 * @len: bytes to move
 * @done: called with the result, possibly before tern_pull() returns
 *
 * When @bvec is the buffer the ULP supplied from ->alloc_data and @offset
 * is 0, the data is already there and nothing is copied.
 * Return: 0 (then @done is called), -ENODATA when ->alloc_data had the
 * data discarded, or -EINVAL.
 */
int tern_pull(struct tern_srv_req *req, const struct bio_vec *bvec,
	      unsigned int nr_bvec, u32 offset, u32 len, tern_xfer_done_t done)
{
	const struct bio_vec *src = req->rx_bvec ?: req->core_bvec;
	unsigned int src_nr = req->rx_bvec ? req->rx_nr_bvec :
					     req->core_nr_bvec;

	if (req->rx_discard)
		return -ENODATA;
	if (req->dir != TERN_DATA_TO_RESPONDER || offset > req->data_len ||
	    len > req->data_len - offset ||
	    tern_bvec_len_ok(bvec, nr_bvec, len))
		return -EINVAL;
	if (len && !(src == bvec && !offset))
		tern_bvec_copy(bvec, nr_bvec, src, src_nr, offset, len);
	if (done)
		done(req, 0);
	return 0;
}
EXPORT_SYMBOL_GPL(tern_pull);
