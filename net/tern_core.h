/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tern messenger core: private definitions shared by the core sources.
 *
 * Locking (outer to inner):
 *   tern_registry_lock (mutex)	transport list
 *   ep->lock (mutex)		endpoint session, listener and lane lists
 *   sess->lock (spinlock)	session state, lane slots, paths, server
 *				requests
 *   shard->lock (spinlock)	a requester's requests of one shard: their
 *				pending table, backlog, lanes
 *   lane->tx_lock (spinlock)	a lane's transmit queue and current frame
 *
 * The hot path takes the lock of its request's shard three times per
 * request (to queue it, to find it when its reply's header arrives, to
 * unlink it once the reply is in) and lane->tx_lock once per frame; the
 * in-flight limits are atomic counters. Nothing of the session is locked
 * per request: submitters on different lanes use different shards. Process
 * context only: transports call in from their per-lane workers. A function
 * named *_locked asserts the lock it needs (lockdep_assert_held()).
 */
#ifndef _TERN_CORE_H
#define _TERN_CORE_H

#include <linux/atomic.h>
#include <linux/hashtable.h>
#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/sizes.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

struct seq_file;
#include <tern/compat.h>
#include <tern/tern.h>
#include <tern/transport.h>

#define TERN_DEF_LANES			1
#define TERN_DEF_QUEUE_DEPTH		128
#define TERN_DEF_INFLIGHT_BYTES		((u64)SZ_64M)
#define TERN_DEF_MAX_DATA		SZ_1M
#define TERN_DEF_KEEPALIVE_MS		5000
#define TERN_DEF_KEEPALIVE_TMO_MS	15000
#define TERN_DEF_RECONNECT_MIN_MS	100
#define TERN_DEF_RECONNECT_MAX_MS	10000
#define TERN_DEF_LOSS_TMO_MS		60000
#define TERN_DEF_CONNECT_TMO_MS		10000

enum tern_frame_kind {
	TERN_FRAME_CTRL,	/* owned by the lane */
	TERN_FRAME_REQUEST,	/* embedded in struct tern_request */
	TERN_FRAME_REPLY,	/* embedded in struct tern_srv_req */
};

enum tern_lane_state {
	TERN_LANE_CONNECTING,
	TERN_LANE_HANDSHAKE,
	TERN_LANE_LIVE,
	TERN_LANE_DEAD,
};

/* Where a lane's receive stream is in its frame (tern_lane_rx_next()). */
enum tern_rx_part {
	TERN_RX_IDLE,		/* between frames: zero, a new lane's */
	TERN_RX_HDR,
	TERN_RX_FRONT,		/* the tag, then the front */
	TERN_RX_DATA,
	TERN_RX_WHOLE,		/* tern_lane_rx_done() is due */
};

enum tern_session_state {
	TERN_SESS_CONNECTING,
	TERN_SESS_LIVE,
	TERN_SESS_RECONNECTING,	/* no live lane, within loss timeout */
	TERN_SESS_FAILED,	/* loss timeout passed; still reconnecting */
	TERN_SESS_DEAD,		/* being destroyed */
};

/*
 * Counters; atomic64 so debugfs can read them without locks. A lane slot
 * has its own; the module total and an endpoint's unbound lanes, which
 * every lane would share, are per-CPU copies added to with this_cpu ops
 * (tern_lane_stat_add()) and summed when read (tern_stats_add_pcpu()).
 */
struct tern_stats {
	atomic64_t	tx_msgs;
	atomic64_t	tx_bytes;
	atomic64_t	rx_msgs;
	atomic64_t	rx_bytes;
	atomic64_t	resends;
	atomic64_t	reconnects;
	atomic64_t	crc_errors;
	atomic64_t	proto_errors;
	atomic64_t	injected;
	atomic64_t	remote_pulls;	/* responder: data read remotely */
	atomic64_t	remote_pushes;	/* responder: data written remotely */
	atomic64_t	submitter_sends; /* sent in a ->push caller's context */
	atomic64_t	mac_errors;	/* integrity: frames with a wrong tag */
};

struct tern_core_lane;

/*
 * A remote address (no port) and what it holds on one endpoint, for the
 * per-address caps; in ep->peers under ep->lock, freed when it holds
 * nothing. IPv4-mapped IPv6 addresses are kept as IPv4.
 */
struct tern_peer {
	struct hlist_node	node;
	struct sockaddr_storage	addr;
	unsigned int		handshakes;	/* accepted lanes in handshake */
	unsigned int		sessions;	/* responder sessions created */
};

#define TERN_PEER_HASH_BITS	8

/* CRC32C as the wire uses it: initial ~0, final inversion. */
static inline u32 tern_crc(const void *buf, size_t len)
{
	return ~crc32c(~0U, buf, len);
}

/* The proof keys of one identity, from its secret (auth.c). */
struct tern_auth_keys {
	u8	host[TERN_WIRE_PROOF_LEN];	/* the connector proves with */
	u8	target[TERN_WIRE_PROOF_LEN];	/* the acceptor proves with */
	u8	traffic[TERN_WIRE_PROOF_LEN];	/* lane keys derive from */
};

/* One direction's traffic keys, for whichever protection it gets. */
struct tern_dir_keys {
	struct tern_lane_keys	aead;			/* TERN_FEAT_ENCRYPT */
	u8			mac[TERN_WIRE_PROOF_LEN]; /* TERN_FEAT_INTEGRITY */
};

/* A lane's authentication in progress: freed when its handshake ends. */
struct tern_lane_auth {
	struct tern_auth_keys	keys;
	u8			host_proof[TERN_WIRE_PROOF_LEN];
	u8			target_proof[TERN_WIRE_PROOF_LEN];
	bool			awaiting;	/* the peer's AUTH or AUTH_ACK */
	bool			challenged;	/* responder: HELLO_ACK is out */
	struct tern_session_info info;		/* responder: negotiated */
	struct tern_dir_keys	tx;
	struct tern_dir_keys	rx;
};

/* A session's per-request counters, per CPU: its lanes run on many. */
struct tern_sess_counts {
	u64	requests;
	u64	replies;
};

/*
 * A requester's way to its peer: a transport and an address, with its
 * own lanes, the slots whose index modulo the session's path count is
 * @idx. Lane counts under sess->lock; request counts are atomic, as
 * requests of every shard move on and off the path.
 */
struct tern_path {
	const struct tern_transport_ops	*tops;
	struct sockaddr_storage		addr;
	unsigned int			idx;
	unsigned int			lanes;		/* once negotiated */
	unsigned int			nr_live;	/* live lanes */
	atomic_t			inflight;	/* requests on its lanes */
	atomic64_t			requests;	/* sent on it, resends too */
};

/*
 * A requester's requests in flight, sharded by the lane the submitter
 * asks for (tern_request.lane_hint), so that submitters on different lanes
 * share no lock. A request stays in its shard for life, however often it
 * is resent on other lanes: its tid names the shard in its low bits. The
 * lock covers the pending table, the backlog (requests waiting for a live
 * lane) and each of its requests' lane, path, rx_lane and lane_faults.
 *
 * What the hot path reads of the session under a shard's lock (session
 * and lane states, the lane slots) changes under sess->lock, and every
 * such change that matters to requests is followed by a sweep that takes
 * each shard's lock in turn: a submitter either finished before the sweep
 * reached its shard, and the sweep finds its request, or starts after it,
 * and sees the change.
 */
#define TERN_TID_SHARD_BITS	6
#define TERN_TID_SHARD_MASK	(BIT(TERN_TID_SHARD_BITS) - 1)
#define TERN_SHARD_PENDING_BITS	7

struct tern_req_shard {
	spinlock_t		lock;		/* see above */
	u64			last_seq;	/* of the last tid given out */
	struct list_head	backlog;
	DECLARE_HASHTABLE(pending, TERN_SHARD_PENDING_BITS);
} ____cacheline_aligned_in_smp;

/* A lane position in a session; survives the connections that fill it. */
struct tern_lane_slot {
	struct tern_session	*sess;
	unsigned int		idx;
	struct tern_path	*path;		/* requester only */
	struct tern_core_lane	*lane;		/* current connection */
	struct delayed_work	connect_work;	/* requester only */
	unsigned int		backoff_ms;
	unsigned long		live_since;	/* jiffies; requester only */
	int			last_err;
	bool			ever_live;
	struct tern_stats	stats;
};

/* Lane flags */
#define TERN_LANE_F_DYING	0	/* teardown queued */
#define TERN_LANE_F_CLOSE_TX	1	/* close once the queue drains */
#define TERN_LANE_F_TX_CLOSED	2	/* teardown started: no more kicks */

struct tern_core_lane {
	struct tern_lane	pub;
	struct kref		ref;
	struct tern_endpoint	*ep;
	struct list_head	ep_entry;	/* ep->lanes */
	struct tern_session	*sess;		/* NULL until bound */
	struct tern_lane_slot	*slot;
	bool			requester;
	bool			bound;		/* counted in sess->nr_lanes */
	/* acceptor: bound as hello_rx.identity, proven; under ep->lock */
	bool			proven;
	bool			counted_handshake; /* in ep->nr_handshakes */
	struct tern_peer	*peer;		/* its handshake counted there */
	enum tern_lane_state	state;		/* tern_lane_move() */
	unsigned long		flags;
	int			error;
	char			name[80];

	u32			max_front;	/* receive limits in force */
	u32			max_data;
	bool			data_crc;
	bool			remote_data;	/* TERN_FEAT_REMOTE_DATA */

	/* pub.tx_queue, *_queued; see lane.c */
	spinlock_t		tx_lock;
	struct tern_frame	*tx_cur;
	atomic_t		pushers;	/* in ->push: tern_lane_push() */
	u32			tx_seq;		/* transmit worker only */
	u32			rx_seq;		/* receive worker writes */

	unsigned long		born;		/* jiffies */
	unsigned long		last_tx_done;	/* jiffies: a frame was sent */
	unsigned long		tx_wait_since;	/* keepalive work only */
	unsigned int		ka_interval_ms;
	unsigned int		ka_timeout_ms;
	struct delayed_work	ka_work;
	struct work_struct	teardown_work;

	struct tern_frame	hello_frame;
	struct tern_wire_hello	hello_tx;
	struct tern_wire_hello	hello_rx;
	struct tern_frame	ping_frame;
	struct tern_frame	pong_frame;
	bool			ping_queued;	/* under tx_lock */
	bool			pong_queued;
	bool			hello_queued;

	/* authentication: NULL unless this lane authenticates (auth.c) */
	struct tern_lane_auth	*auth;
	struct tern_frame	auth_frame;	/* AUTH or AUTH_ACK */
	struct tern_wire_auth	auth_tx;
	struct tern_wire_auth	auth_rx;
	bool			auth_queued;	/* under tx_lock */
	/* responder: transmit keys, installed once the AUTH_ACK is sent */
	struct tern_lane_keys	*tx_keys;
	struct tern_lane_mac	*tx_mac_next;
	/* integrity: what signs our frames and checks the peer's, or NULL */
	struct tern_lane_mac	*tx_mac;	/* the sender's */
	struct tern_lane_mac	*rx_mac;	/* the receive path's */
};

static inline struct tern_core_lane *to_core_lane(struct tern_lane *lane)
{
	return container_of(lane, struct tern_core_lane, pub);
}

struct tern_session {
	struct kref			ref;
	struct tern_endpoint		*ep;
	struct list_head		ep_entry;
	bool				requester;
	bool				linked;		/* on ep->sessions */
	/* responder, of a grouped endpoint: in the group table (endpoint.c) */
	struct hlist_node		group_node;
	bool				counted;	/* in ep->nr_sessions */
	struct tern_peer		*peer;		/* counted there, or NULL */
	u64				id;
	u64				cookie;
	u64				peer_incarnation;
	/* the connector's identity, proven when auth_keys / FEAT_AUTH */
	char				identity[TERN_WIRE_IDENTITY_LEN];
	struct tern_auth_keys		*auth_keys;	/* requester only */
	/* requester only: the paths, in order of preference */
	struct tern_path		paths[TERN_MAX_PATHS];
	unsigned int			nr_paths;
	enum tern_iopolicy		iopolicy;	/* under lock */
	unsigned int			path_rr;	/* round robin */
	struct tern_session_opts	opts;
	struct tern_session_info	info;
	void				*priv;

	spinlock_t			lock;		/* see top of file */
	enum tern_session_state		state;		/* tern_session_move_locked() */
	bool				destroying;
	bool				negotiated;
	int				fatal_err;	/* handshake refused */
	unsigned int			nr_slots;
	struct tern_lane_slot		*slots;
	unsigned int			nr_lanes;	/* bound lanes */
	unsigned int			nr_live;

	/* requester only: nr_slots of them, and the in-flight limits */
	struct tern_req_shard		*shards;
	unsigned int			nr_shards;
	atomic_t			inflight ____cacheline_aligned_in_smp;
	atomic_t			reserved_inflight;
	atomic64_t			inflight_bytes;
	wait_queue_head_t		wait;
	struct delayed_work		loss_work;
	unsigned long			down_since;	/* jiffies: RECONNECTING */

	atomic_t			nr_srv_reqs;
	atomic64_t			core_data_bytes; /* see server.c */

	struct tern_sess_counts __percpu *counts; /* lanes share them */
	atomic64_t			failed;
	atomic64_t			peer_restarts;
	atomic64_t			duplicates;	/* resent requests seen */
	atomic64_t			replies_dropped; /* lane died first */
	atomic64_t			cancel_resets;	/* lanes reset by tern_cancel() */

	struct dentry			*dbg;
	struct work_struct		event_work;
	unsigned long			events;		/* pending event bits */
	struct work_struct		free_work;
};

/* A tid names its shard: every lane slot may be one. */
static_assert(BIT(TERN_TID_SHARD_BITS) >= TERN_WIRE_MAX_LANES);

static inline struct tern_req_shard *
tern_req_shard(const struct tern_request *req)
{
	return &req->sess->shards[READ_ONCE(req->tid) & TERN_TID_SHARD_MASK];
}

struct tern_endpoint {
	char				name[32];
	unsigned int			id;
	const struct tern_endpoint_ops	*ops;
	void				*priv;
	u64				incarnation;
	unsigned int			max_lanes;
	unsigned int			max_queue_depth;
	u32				max_data;
	u64				max_session_bytes;

	struct mutex			lock;		/* lists, counters, dying */
	bool				dying;
	struct list_head		sessions;
	struct list_head		listeners;
	struct list_head		lanes;
	unsigned int			nr_lanes;
	unsigned int			nr_sessions;
	unsigned int			nr_handshakes;	/* accepted, unbound */
	/* refusals of the caps below, and stalled lanes killed (ep->lock) */
	u64				refused_handshakes;
	u64				refused_sessions;
	u64				refused_lanes;
	u64				refused_peer_handshakes;
	u64				refused_peer_sessions;
	DECLARE_HASHTABLE(peers, TERN_PEER_HASH_BITS);	/* struct tern_peer */
	unsigned int			nr_peers;
	u32				peer_seed;
	u64				auth_failures;	/* bad or missing proofs */
	bool				require_auth;
	bool				require_encrypt;
	bool				require_integrity;
	u32				req_space;	/* conf's */
	atomic64_t			tx_stalls;
	/* request data the core allocated for the ULP, and refusals of it */
	atomic64_t			core_data_bytes;
	atomic64_t			refused_core_data;
	wait_queue_head_t		wait;
	struct dentry			*dbg;
	struct tern_stats __percpu	*stats;		/* unbound lanes */
	/* endpoints of one group share their responder sessions (server.c) */
	const void			*group;
};

/*
 * Lanes of @ep past their handshake (bound, or requesters), under
 * ep->lock. tern_lane_accept() counts a handshake just before its lane,
 * so there may be one handshake more than lanes for a moment.
 */
static inline unsigned int tern_ep_bound_lanes(const struct tern_endpoint *ep)
{
	return ep->nr_lanes > ep->nr_handshakes ?
	       ep->nr_lanes - ep->nr_handshakes : 0;
}

extern struct workqueue_struct *tern_wq;
extern struct dentry *tern_debugfs_root;
extern unsigned int tern_handshake_timeout_ms;
extern unsigned int tern_max_handshakes;

static inline unsigned int tern_handshake_ms(void)
{
	return tern_timeout_ms(READ_ONCE(tern_handshake_timeout_ms));
}

extern unsigned int tern_max_lane_faults;
extern unsigned int tern_max_sessions;
extern unsigned int tern_max_lanes;
extern unsigned int tern_max_peer_keepalive_ms;
extern unsigned int tern_max_handshakes_per_peer;
extern unsigned int tern_max_sessions_per_peer;
extern unsigned int tern_max_core_data_mib_per_session;
extern unsigned int tern_max_core_data_mib;
extern unsigned int tern_tx_stall_timeout_ms;

/* Live objects, checked at module unload: a cheap leak detector. */
enum tern_obj {
	TERN_OBJ_ENDPOINT,
	TERN_OBJ_SESSION,
	TERN_OBJ_LANE,
	TERN_OBJ_SRV_REQ,
	TERN_OBJ_MAX,
};

/* per CPU: responder requests come and go on every lane's CPU */
struct tern_live_objects {
	int	n[TERN_OBJ_MAX];
};

DECLARE_PER_CPU(struct tern_live_objects, tern_live_objects);
extern struct tern_stats __percpu *tern_total_stats;

static inline void tern_obj_inc(enum tern_obj obj)
{
	this_cpu_inc(tern_live_objects.n[obj]);
}

static inline void tern_obj_dec(enum tern_obj obj)
{
	this_cpu_dec(tern_live_objects.n[obj]);
}

/* main.c */
const struct tern_transport_ops *tern_transport_get(const char *name);
void tern_transport_put(const struct tern_transport_ops *tops);
bool tern_move_ok(const u8 *moves, const char *const *names, unsigned int dead,
		  unsigned int old, unsigned int new, const char *who);
void tern_lane_move(struct tern_core_lane *cl, enum tern_lane_state new);
void tern_moves_show(struct seq_file *m, const char *kind, const u8 *moves,
		     const char *const *names, unsigned int nr);
void tern_lane_moves_show(struct seq_file *m);
void tern_session_moves_show(struct seq_file *m);
extern const char *const tern_lane_state_names[];
bool tern_scheme_valid(const char *name, size_t len);
extern unsigned int tern_inject_fail_every;
bool tern_inject_fault(void);
bool tern_inject_crc(void);

/* auth.c */
int tern_auth_derive(const u8 *key, const char *identity,
		     struct tern_auth_keys *keys);
int tern_auth_proofs(const struct tern_auth_keys *keys,
		     const struct tern_wire_hello *hello,
		     const struct tern_wire_hello *ack, u8 *host, u8 *target);
bool tern_auth_proof_ok(const u8 *got, const u8 *want);
int tern_auth_lane_keys(const struct tern_auth_keys *keys,
			const struct tern_wire_hello *hello,
			const struct tern_wire_hello *ack, const u8 *host,
			const u8 *target, struct tern_dir_keys *c2a,
			struct tern_dir_keys *a2c);

/* Integrity: a direction's frame MACs (integrity.c). */
struct tern_lane_mac;
int tern_lane_sign(struct tern_core_lane *cl, bool after_ack);
struct tern_lane_mac *tern_mac_alloc(const u8 *key);
void tern_mac_free(struct tern_lane_mac *mac);
void tern_mac_sign(struct tern_lane_mac *mac, struct tern_frame *f);
bool tern_mac_check_hdr(struct tern_lane_mac *mac,
			const struct tern_wire_hdr *hdr);
bool tern_mac_check_front(struct tern_lane_mac *mac, const void *front,
			  u32 len, const u8 *tag);
bool tern_mac_check_data(struct tern_lane_mac *mac,
			 const struct bio_vec *bvec, unsigned int nr_bvec,
			 u32 len, const u8 *tag);

typedef void (*tern_chunk_fn)(void *addr, size_t len, void *arg);
void tern_bvec_walk(const struct bio_vec *bv, unsigned int nr, u32 skip,
		    u32 len, tern_chunk_fn fn, void *arg);

/* pages.c */
void tern_pages_init(void);
void tern_pages_exit(void);

/* lane.c */
struct tern_core_lane *tern_lane_alloc(struct tern_endpoint *ep,
				       const struct tern_transport_ops *tops,
				       bool requester);
void tern_lane_release(struct kref *ref);

/* inline: three puts per I/O, each rarely the last */
static inline void tern_lane_put(struct tern_core_lane *cl)
{
	kref_put(&cl->ref, tern_lane_release);
}

void tern_lane_queue_frame(struct tern_core_lane *cl, struct tern_frame *f,
			   bool kick);
bool tern_lane_queue_live(struct tern_core_lane *cl, struct tern_frame *f,
			  bool kick);
void tern_lane_push(struct tern_core_lane *cl, bool can_sleep);
bool tern_lane_dequeue_frame(struct tern_core_lane *cl, struct tern_frame *f);
void tern_lane_kill(struct tern_core_lane *cl, int err);
void tern_lane_arm_keepalive(struct tern_core_lane *cl, unsigned int ms);
void tern_frame_seal(struct tern_frame *f);
u32 tern_crc_front_data(const void *front, u32 front_len,
			const struct bio_vec *bvec, unsigned int nr_bvec,
			u32 data_len);

/*
 * Do @nr entries of @bvec hold @len bytes, none of those used empty? The
 * transports walk data a bio_vec at a time and take an empty one for no
 * progress. Inline: three checks per I/O.
 */
static inline int tern_bvec_len_ok(const struct bio_vec *bvec,
				   unsigned int nr, u32 len)
{
	u64 total = 0;
	unsigned int i;

	if (len && !bvec)
		return -EINVAL;
	for (i = 0; i < nr && total < len; i++) {
		if (!bvec[i].bv_len)
			return -EINVAL;
		total += bvec[i].bv_len;
	}
	return total >= len ? 0 : -EINVAL;
}

void tern_bvec_copy(const struct bio_vec *dst, unsigned int dst_nr,
		    const struct bio_vec *src, unsigned int src_nr,
		    u32 src_off, u32 len);
void tern_lane_stat_add(struct tern_core_lane *cl, size_t off, u64 val);
void tern_lane_queue_hello(struct tern_core_lane *cl);
void tern_lane_queue_auth(struct tern_core_lane *cl);
void tern_lane_auth_free(struct tern_core_lane *cl);
bool tern_lane_tx_stalled(struct tern_core_lane *cl, unsigned long now);
/* The core's own checks: tern_lane_proto_error() on the core lane. */
#define tern_lane_proto_err(cl, fmt, ...) \
	tern_lane_proto_error(&(cl)->pub, fmt, ##__VA_ARGS__)
void tern_rx_setup(struct tern_core_lane *cl, void *front,
		   const struct bio_vec *bvec, unsigned int nr_bvec);

#define TERN_LANE_STAT(cl, field, val) \
	tern_lane_stat_add(cl, offsetof(struct tern_stats, field), val)

/* session.c */
struct tern_session *tern_session_alloc(struct tern_endpoint *ep,
					bool requester, unsigned int nr_slots);
void tern_session_put(struct tern_session *sess);
void tern_session_lane_down(struct tern_session *sess,
			    struct tern_core_lane *cl);
void tern_session_lane_live_locked(struct tern_session *sess,
				   struct tern_core_lane *cl);
void tern_stats_show(struct seq_file *m, const char *prefix,
		     struct tern_stats *st);
void tern_stats_add(struct tern_stats *sum, struct tern_stats *st);
void tern_stats_add_pcpu(struct tern_stats *sum,
			 struct tern_stats __percpu *pcpu);
int tern_session_rx_hello_ack(struct tern_core_lane *cl);
int tern_session_rx_auth_ack(struct tern_core_lane *cl);
int tern_session_rx_reply_hdr(struct tern_core_lane *cl);
int tern_session_rx_reply_done(struct tern_core_lane *cl);
void tern_session_debugfs(struct tern_session *sess);
void tern_session_event(struct tern_session *sess,
			enum tern_session_event ev);
void tern_request_tx_done(struct tern_request *req);
void tern_req_put(struct tern_request *req);

/* server.c */
int tern_server_rx_hello(struct tern_core_lane *cl);
int tern_server_rx_auth(struct tern_core_lane *cl);
int tern_server_rx_request_hdr(struct tern_core_lane *cl);
int tern_server_rx_request_front(struct tern_core_lane *cl);
int tern_server_rx_request_done(struct tern_core_lane *cl);
void tern_server_rx_abort(struct tern_core_lane *cl);
void tern_srv_req_tx_done(struct tern_srv_req *sreq);
void tern_srv_req_finish(struct tern_srv_req *sreq);

/* endpoint.c */
void tern_endpoint_lane_gone(struct tern_endpoint *ep,
			     struct tern_core_lane *cl);
struct tern_peer *tern_peer_get_locked(struct tern_endpoint *ep,
				       const struct sockaddr_storage *addr);
void tern_peer_put_locked(struct tern_endpoint *ep, struct tern_peer *peer);
void tern_endpoint_handshake_done(struct tern_endpoint *ep,
				  struct tern_peer *peer);
void tern_lane_handshake_uncount_locked(struct tern_core_lane *cl);
int tern_endpoint_link_session(struct tern_endpoint *ep,
			       struct tern_session *sess);
void tern_endpoint_unlink_session(struct tern_session *sess);

/* Features every lane of a session agrees on; remote data is per lane. */
static inline bool tern_session_features_differ(u32 a, u32 b)
{
	return (a ^ b) & ~TERN_FEAT_REMOTE_DATA;
}

/* endpoint.c: the responder sessions of grouped endpoints */
struct tern_session *tern_group_find(struct tern_endpoint *ep, u64 id);
int tern_group_add(struct tern_session *sess);
void tern_group_del(struct tern_session *sess);

#endif /* _TERN_CORE_H */
