/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tern messenger: kernel API for upper-layer protocols (ULPs).
 *
 * A ULP creates an endpoint, listens and/or connects sessions, and
 * exchanges request/reply transactions. Data buffers live on the
 * requester; the responder moves them with tern_pull() and tern_push().
 * See Documentation/design.rst.
 *
 * Requester, in short:
 *
 *	ep = tern_endpoint_create(&(struct tern_endpoint_conf){ .name = "x" });
 *	sess = tern_connect(ep, "tcp://[::1]:7447", &opts);
 *	tern_request_init(&r->req);
 *	r->req.front = &cmd;  r->req.front_len = sizeof(cmd);
 *	r->req.dir = TERN_DATA_FROM_RESPONDER;
 *	r->req.bvec = bv;  r->req.nr_bvec = n;  r->req.data_len = len;
 *	r->req.reply_front = &rsp;  r->req.reply_front_max = sizeof(rsp);
 *	r->req.done = my_done;	// status, reply_status, reply_*_len set
 *	err = tern_send(sess, &r->req, 0);
 *
 * Responder: tern_endpoint_create() with ops, tern_listen(ep, uri); in
 * ops->request(): tern_pull() (TO_RESPONDER) or tern_push()
 * (FROM_RESPONDER), then tern_reply(); free pages in ops->release().
 * Sessions are requester-to-responder only: a responder does not send
 * requests on a session it accepted.
 */
#ifndef _TERN_TERN_H
#define _TERN_TERN_H

#include <linux/bits.h>
#include <linux/types.h>
#include <linux/bvec.h>
#include <linux/list.h>
#include <linux/refcount.h>
#include <linux/socket.h>
#include <linux/uio.h>
#include <linux/workqueue.h>
#include <uapi/tern/tern_wire.h>

struct tern_endpoint;
struct tern_session;
struct tern_listener;
struct tern_lane;
struct tern_path;

/* Frame as queued on a lane; embedded in requests, replies and lanes. */
struct tern_frame {
	struct list_head	entry;
	struct tern_wire_hdr	hdr;	/* seq/ack/hdr_crc filled at dequeue */
	const void		*front;
	const struct bio_vec	*bvec;	/* data, iterated from bvec[0] */
	unsigned int		nr_bvec;
	/* REPLY to a request with remote data: the requester's buffer */
	const struct tern_wire_rdesc *rdesc;
	unsigned int		nr_rdesc;
	u8			kind;	/* core private: TERN_FRAME_* */
	/* integrity: sent between header and front, filled at dequeue */
	u8			tag_len;
	u8			tag[TERN_WIRE_TAG_LEN];
};

enum tern_data_dir {
	TERN_DATA_NONE = 0,
	TERN_DATA_TO_RESPONDER,		/* responder pulls (block write) */
	TERN_DATA_FROM_RESPONDER,	/* responder pushes (block read) */
};

struct tern_request;
typedef void (*tern_request_done_t)(struct tern_request *req);

/**
 * struct tern_request - a requester-side transaction
 * @front: inline request payload (kernel virtual), or NULL
 * @front_len: bytes at @front, at most the session's max_front
 * @dir: direction of the data buffer
 * @bvec: the requester's data buffer, iterated from bvec[0].bv_offset;
 *	no entry holding part of @data_len may be empty (tern_send() says
 *	-EINVAL)
 * @nr_bvec: entries in @bvec
 * @data_len: bytes of the buffer, at most the session's max_data
 * @reply_front: where the reply's front is stored
 * @reply_front_max: room at @reply_front
 * @lane_hint: preferred lane, e.g. the blk-mq hardware queue index
 * @done: completion callback
 * @priv: ULP private
 * @status: out: 0, or the messenger's error (-ETIMEDOUT after the loss
 *	timeout, -ECANCELED, -ESHUTDOWN, -EPROTO, -ENOTCONN)
 * @reply_status: out: the status the responder gave tern_reply()
 * @reply_front_len: out: bytes stored at @reply_front
 * @reply_data_len: out: bytes the responder pushed into the buffer
 * @resends: out: times the request was sent again after a lane failure
 *
 * Embedded in ULP memory and initialised with tern_request_init(). The ULP
 * fills the fields above @status, calls tern_send() and must keep @front,
 * @bvec, the pages and @reply_front valid until @done has been called.
 * @done runs exactly once, in process context (a lane's worker or a
 * transport's completion handler, a submitter in tern_send(), or inside
 * tern_cancel() or tern_session_destroy()), maybe atomic, must not block
 * (call tern_send() from it only with TERN_SEND_NOWAIT), and the core
 * never touches the request after it returns.
 */
struct tern_request {
	const void		*front;
	u32			front_len;
	enum tern_data_dir	dir;
	const struct bio_vec	*bvec;
	unsigned int		nr_bvec;
	u32			data_len;
	void			*reply_front;
	u32			reply_front_max;
	unsigned int		lane_hint;
	tern_request_done_t	done;
	void			*priv;

	int			status;
	int			reply_status;
	u32			reply_front_len;
	u32			reply_data_len;
	unsigned int		resends;

	/* private: the core's */
	struct tern_frame	frame;
	struct hlist_node	hash;
	struct list_head	backlog;
	struct tern_session	*sess;
	struct tern_lane	*lane;		/* lane it was last queued on */
	struct tern_path	*path;		/* the path of @lane */
	struct tern_lane	*rx_lane;	/* lane receiving its reply */
	refcount_t		ref;
	u64			tid;
	unsigned int		lane_faults;	/* lanes lost mid-frame of it */
	bool			reserved;	/* TERN_SEND_RESERVED */
};

/**
 * struct tern_srv_req - a responder-side transaction
 * @sess: the session it arrived on
 * @tid: transaction id, unique in the session; resent copies share it
 * @resent: the requester sent this tid before (at-least-once delivery)
 * @front: the request's front
 * @front_len: bytes at @front
 * @dir: direction of the requester's data buffer
 * @data_len: size of the requester's data buffer
 * @rx_bvec: &tern_endpoint_ops.alloc_data may point this at ULP pages
 *	that receive TO_RESPONDER data directly (no copy in tern_pull())
 * @rx_nr_bvec: entries in @rx_bvec, none of those holding data empty
 * @rx_swappable: @rx_bvec's pages come from tern_data_page_alloc(), a
 *	page per entry, and go back with tern_data_page_free() from
 *	@rx_bvec: a transport that received the data into pages of its own
 *	may put one of those in an entry's @bv_page (whole entries at offset
 *	0 only), saving the copy. The ULP keeps no other pointer to those
 *	pages (no bio built before &tern_endpoint_ops.request)
 * @rx_discard: &tern_endpoint_ops.alloc_data sets it for a request it
 *	will refuse: the TO_RESPONDER data is then received into nothing
 *	(remote data is never pulled), no pages are allocated for it, its
 *	data CRC is not checked, tern_pull() fails with -ENODATA, and
 *	&tern_endpoint_ops.request is still called, to reply with the error
 * @priv: ULP private
 *
 * Allocated by the core and handed to &tern_endpoint_ops.request. The ULP
 * moves data with tern_pull()/tern_push() and finishes with tern_reply().
 * Fields other than @rx_bvec, @rx_nr_bvec, @rx_swappable, @rx_discard and
 * @priv are read-only.
 */
struct tern_srv_req {
	struct tern_session	*sess;
	u64			tid;
	bool			resent;
	const void		*front;
	u32			front_len;
	enum tern_data_dir	dir;
	u32			data_len;
	struct bio_vec		*rx_bvec;
	unsigned int		rx_nr_bvec;
	bool			rx_swappable;
	bool			rx_discard;
	void			*priv;

	/* private: the core's */
	struct tern_frame	frame;
	struct tern_lane	*lane;
	void			*front_buf;	/* front_inline or kmalloc'ed */
	u64			front_inline[8];	/* fronts up to 64 bytes */
	void			*reply_front_buf;
	struct bio_vec		*core_bvec;	/* core allocated rx pages */
	unsigned int		core_nr_bvec;
	u32			core_charged;	/* bytes of it in the budgets */
	struct tern_wire_rdesc	*rdesc;		/* remote data descriptors */
	unsigned int		nr_rdesc;
	u32			pushed_len;
	unsigned long		state;
	struct work_struct	work;
	/* then &tern_endpoint_conf.req_space bytes: tern_srv_req_space() */
};

/**
 * tern_srv_req_space - the ULP's space of a responder request
 * @req: a request of an endpoint with &tern_endpoint_conf.req_space
 *
 * Return: req_space zeroed bytes, aligned as kmalloc() aligns, that live
 * as long as @req: until &tern_endpoint_ops.release has returned.
 */
static inline void *tern_srv_req_space(struct tern_srv_req *req)
{
	return PTR_ALIGN((void *)(req + 1), ARCH_KMALLOC_MINALIGN);
}

/*
 * Requester sessions see UP, DOWN and FAILED from a work item (coalesced
 * if they follow each other quickly). Responder sessions see UP once,
 * before their first request, and GONE when the session is freed (after
 * its last lane and last responder request): drop session priv there.
 */
enum tern_session_event {
	TERN_SESSION_UP,	/* a lane became live */
	TERN_SESSION_DOWN,	/* the last live lane went away */
	TERN_SESSION_FAILED,	/* loss timeout: pending requests failed */
	TERN_SESSION_GONE,	/* responder side session freed */
};

/* Bytes of an authentication key (the secret a "TERNKEY-1:" string holds) */
#define TERN_AUTH_KEY_LEN	32

/**
 * struct tern_endpoint_ops - upcalls into the ULP
 * @request: responder: a request arrived. Process context; may sleep
 *	briefly but should hand long work off. Must lead to tern_reply().
 * @alloc_data: responder, optional: called once the front is in (its
 *	data CRC not yet checked) for TO_RESPONDER data. Check the request
 *	first; then supply @rx_bvec/@rx_nr_bvec covering @data_len bytes,
 *	or set @rx_discard for a request that will be refused, so a peer
 *	cannot make the responder hold pages for bad requests. Return 0
 *	(with pages, without them: the core allocates, or with
 *	@rx_discard) or a negative errno to drop the lane. Pages the core
 *	allocates are within its budgets (tern.max_core_data_mib and
 *	tern.max_core_data_mib_per_session): beyond them it discards the
 *	data and answers -ENOMEM itself, without calling @request.
 * @release: responder, optional: the core is done with @req (reply sent
 *	or dropped); pushed pages may be freed now.
 * @session_event: optional: session state changes, process context; a
 *	responder's UP comes with the endpoint's lock held (do not call
 *	tern_endpoint_close_identity() or tern_endpoint_destroy() from it).
 *	Changes faster than their delivery are merged, each event at most
 *	once per delivery; the one that tells the session's state then
 *	comes last.
 * @auth_key: responder, optional: a connector claims @identity (validated:
 *	TERN_NAME_RULE); copy its TERN_AUTH_KEY_LEN byte key to
 *	@key and return 0, or return -ENOKEY if it has none. Process
 *	context, may sleep. Without it no connector can authenticate.
 * @lane_join: responder, optional: a lane that arrived at endpoint @ep
 *	joins @sess, a session of another endpoint of the same group
 *	(another path of a multipath requester). Return 0 to let it, or a
 *	negative errno to refuse the lane. Without it such lanes are
 *	refused. Process context, may sleep; @sess is referenced.
 */
struct tern_endpoint_ops {
	void	(*request)(struct tern_srv_req *req);
	int	(*alloc_data)(struct tern_srv_req *req);
	void	(*release)(struct tern_srv_req *req);
	void	(*session_event)(struct tern_session *sess,
				 enum tern_session_event ev);
	int	(*auth_key)(struct tern_endpoint *ep, const char *identity,
			    u8 *key);
	int	(*lane_join)(struct tern_session *sess,
			     struct tern_endpoint *ep);
};

/**
 * struct tern_endpoint_conf - endpoint configuration
 * @name: short name, used in debugfs and logs
 * @ops: upcalls; may be NULL for a pure requester
 * @priv: ULP private, see tern_endpoint_priv()
 * @max_lanes: responder cap on lanes per session [64]
 * @max_queue_depth: responder cap on queue depth [1024]
 * @max_data: responder cap on data per request, at least
 *	TERN_MIN_MAX_DATA [4 MiB]
 * @max_session_bytes: responder: the queue depth a session is granted is
 *	lowered to at least 1 so that queue depth times the negotiated
 *	@max_data stays within this, which lets the requester's throttle
 *	hold back what the ULP could not take [0: no bound]
 * @require_auth: responder: refuse connectors that do not authenticate
 * @require_encrypt: responder: refuse connectors that do not encrypt
 * @require_integrity: responder: refuse connectors that neither sign
 *	(TERN_FEAT_INTEGRITY) nor encrypt
 * @group: responder: endpoints with the same non-NULL group share their
 *	sessions, so that a requester's paths (tern_session_opts.paths)
 *	may arrive at any of them; see &tern_endpoint_ops.lane_join
 * @req_space: responder: bytes of zeroed ULP space the core allocates
 *	with each request, at tern_srv_req_space(), so that the ULP's own
 *	per-request state costs no allocation of its own, as blk-mq's
 *	cmd_size; the same for every endpoint of a @group, which share
 *	sessions [0, at most TERN_MAX_REQ_SPACE]
 *
 * The caps apply during negotiation; 0 selects the default in brackets.
 */
struct tern_endpoint_conf {
	const char			*name;
	const struct tern_endpoint_ops	*ops;
	void				*priv;
	unsigned int			max_lanes;
	unsigned int			max_queue_depth;
	u32				max_data;
	u64				max_session_bytes;
	bool				require_auth;
	bool				require_encrypt;
	bool				require_integrity;
	const void			*group;
	u32				req_space;
};

#define TERN_MAX_REQ_SPACE	2048

/* The least max_data an endpoint or a session may ask for: one page */
#define TERN_MIN_MAX_DATA	4096

/* Paths of a session: the first tern_connect()'s URI, the others opts.paths */
#define TERN_MAX_PATHS		4

/**
 * enum tern_iopolicy - how a multipath session spreads its requests
 * @TERN_IOPOLICY_FAILOVER: all on the first path in order that has a live
 *	lane; back on a preferred path as soon as one of its lanes is live
 * @TERN_IOPOLICY_ROUND_ROBIN: each request on the next live path
 * @TERN_IOPOLICY_MIN_INFLIGHT: on the live path with the fewest requests
 *	queued or awaiting their reply
 */
enum tern_iopolicy {
	TERN_IOPOLICY_FAILOVER,
	TERN_IOPOLICY_ROUND_ROBIN,
	TERN_IOPOLICY_MIN_INFLIGHT,
	TERN_NR_IOPOLICIES,
};

/**
 * struct tern_session_opts - requester-side session options
 *
 * Zero selects the default given in brackets.
 * @nr_lanes: lanes (connections) [1], at most TERN_WIRE_MAX_LANES
 * @queue_depth: requests in flight per session [128]
 * @max_inflight_bytes: data bytes in flight per session [64 MiB]
 * @max_data: largest data buffer per request, at least TERN_MIN_MAX_DATA
 *	[1 MiB]
 * @data_crc: ask for crc32c over front and data
 * @keepalive_ms: ping interval [5000]
 * @keepalive_timeout_ms: lane dead after this much silence [15000]
 * @reconnect_min_ms: first reconnect backoff after an immediate retry [100]
 * @reconnect_max_ms: backoff cap [10000]
 * @loss_timeout_ms: pending requests fail after this long without any
 *	live lane [60000]; TERN_LOSS_TIMEOUT_NEVER: they wait for a lane
 *	for ever (tern_cancel() and tern_session_destroy() still end them)
 * @connect_timeout_ms: tern_connect() gives up after [10000]
 * @auth_identity: with @auth_key: the identity to authenticate as
 *	(TERN_NAME_RULE)
 * @auth_key: NULL, or TERN_AUTH_KEY_LEN bytes: every lane then proves
 *	@auth_identity's key to the peer and makes the peer prove it back,
 *	and a peer that does not is refused. Both are copied.
 * @encrypt: with @auth_key: encrypt every lane after its handshake, with
 *	keys both ends derive from it, and refuse a peer that will not
 * @integrity: with @auth_key and without @encrypt: sign every frame of
 *	every lane after its handshake (keyed MACs, in place of @data_crc),
 *	and refuse a peer that will not
 * @paths: URIs of further paths to the same peer (other addresses, other
 *	transports), NULL-terminated when fewer than TERN_MAX_PATHS - 1;
 *	each path has @nr_lanes lanes of its own, all of one session
 * @iopolicy: how requests spread over the paths [failover]
 * @inline_to_max: on lanes with remote data access (RDMA): request data
 *	of at most this many bytes rides in the request's frames, larger
 *	data the responder reads from the requester's pages [0: the
 *	transport's default]; TERN_INLINE_NONE: none rides inline
 * @inline_from_max: the same for reply data, which the responder
 *	writes into the requester's pages when it is larger
 * @priv: the session's ULP private (tern_session_priv()) from its
 *	creation: events delivered while tern_connect() waits find it set
 */
struct tern_session_opts {
	unsigned int	nr_lanes;
	unsigned int	queue_depth;
	u64		max_inflight_bytes;
	u32		max_data;
	bool		data_crc;
	unsigned int	keepalive_ms;
	unsigned int	keepalive_timeout_ms;
	unsigned int	reconnect_min_ms;
	unsigned int	reconnect_max_ms;
	unsigned int	loss_timeout_ms;
	unsigned int	connect_timeout_ms;
	const char	*auth_identity;
	const u8	*auth_key;
	bool		encrypt;
	bool		integrity;
	const char	*paths[TERN_MAX_PATHS - 1];
	enum tern_iopolicy iopolicy;
	u32		inline_to_max;
	u32		inline_from_max;
	void		*priv;
};

/**
 * struct tern_path_info - a path of a requester session, as it is now
 * @uri: "transport://address:port"
 * @lanes: lanes of the path
 * @live_lanes: those of them live
 * @inflight: requests queued on its lanes or awaiting their reply there
 * @requests: requests sent on it, resends included
 * @resends: requests resent after one of its lanes failed
 * @reconnects: times a lane of it came back
 * @last_err: the last error connecting one of its lanes, or 0
 */
struct tern_path_info {
	char		uri[80];
	unsigned int	lanes;
	unsigned int	live_lanes;
	unsigned int	inflight;
	u64		requests;
	u64		resends;
	u64		reconnects;
	int		last_err;
};

#define TERN_LOSS_TIMEOUT_NEVER	UINT_MAX
/* &tern_session_opts.inline_to_max, inline_from_max: no data inline */
#define TERN_INLINE_NONE	U32_MAX

/*
 * The timeouts of a requester session that may change while it runs
 * (tern_session_set_timeouts()); as in struct tern_session_opts.
 */
struct tern_session_timeouts {
	unsigned int	keepalive_ms;
	unsigned int	keepalive_timeout_ms;
	unsigned int	loss_timeout_ms;
};

/* Values negotiated with the peer. */
struct tern_session_info {
	u64		session_id;
	unsigned int	nr_lanes;
	unsigned int	queue_depth;
	u32		max_data;
	u32		max_front;
	u32		features;	/* TERN_FEAT_* */
	bool		requester;	/* we connected it */
};

/* tern_send() flags */
#define TERN_SEND_NOWAIT	BIT(0)	/* -EAGAIN instead of waiting */
#define TERN_SEND_MAY_SLEEP	BIT(1)	/* NOWAIT, but the caller may sleep */
#define TERN_SEND_RESERVED	BIT(2)	/* one of the reserved requests */

/*
 * Requests a session may have in flight with TERN_SEND_RESERVED, on top
 * of its queue depth: for control requests a responder holds for long
 * (e.g. until something changes), which must not take the room of I/O.
 */
#define TERN_RESERVED_REQS	2

struct tern_endpoint *tern_endpoint_create(const struct tern_endpoint_conf *conf);
void tern_endpoint_destroy(struct tern_endpoint *ep);
void *tern_endpoint_priv(struct tern_endpoint *ep);

struct tern_listener *tern_listen(struct tern_endpoint *ep, const char *uri);
void tern_listener_stop(struct tern_listener *lis);

struct tern_session *tern_connect(struct tern_endpoint *ep, const char *uri,
				  const struct tern_session_opts *opts);
void tern_session_destroy(struct tern_session *sess);
void tern_session_get_info(struct tern_session *sess,
			   struct tern_session_info *info);
void tern_session_get_timeouts(struct tern_session *sess,
			       struct tern_session_timeouts *t);
int tern_session_set_timeouts(struct tern_session *sess,
			      const struct tern_session_timeouts *t);
bool tern_session_live(struct tern_session *sess);
bool tern_session_send_sleeps(struct tern_session *sess);
void tern_session_set_priv(struct tern_session *sess, void *priv);
void *tern_session_priv(struct tern_session *sess);
struct tern_endpoint *tern_session_endpoint(struct tern_session *sess);
unsigned int tern_session_nr_paths(struct tern_session *sess);
int tern_session_get_path(struct tern_session *sess, unsigned int idx,
			  struct tern_path_info *info);
enum tern_iopolicy tern_session_iopolicy(struct tern_session *sess);
int tern_session_set_iopolicy(struct tern_session *sess,
			      enum tern_iopolicy policy);
const char *tern_iopolicy_name(enum tern_iopolicy policy);
int tern_iopolicy_parse(const char *name);

void tern_request_init(struct tern_request *req);

/**
 * tern_request_set_data - describe the data buffer with a bvec iov_iter
 * @req: initialised request
 * @iter: an ITER_BVEC iterator positioned at the start of a segment
 * @dir: direction of the data
 *
 * Return: 0, or -EINVAL for other iterator types or a mid-segment start
 * (the messenger iterates the array from bvec[0].bv_offset).
 */
static inline int tern_request_set_data(struct tern_request *req,
					const struct iov_iter *iter,
					enum tern_data_dir dir)
{
	if (!iov_iter_is_bvec(iter) || iter->iov_offset)
		return -EINVAL;
	req->bvec = iter->bvec;
	req->nr_bvec = iter->nr_segs;
	req->data_len = iov_iter_count(iter);
	req->dir = dir;
	return 0;
}

int tern_send(struct tern_session *sess, struct tern_request *req,
	      unsigned int flags);
int tern_cancel(struct tern_request *req);

typedef void (*tern_xfer_done_t)(struct tern_srv_req *req, int status);
int tern_pull(struct tern_srv_req *req, const struct bio_vec *bvec,
	      unsigned int nr_bvec, u32 offset, u32 len, tern_xfer_done_t done);
int tern_push(struct tern_srv_req *req, const struct bio_vec *bvec,
	      unsigned int nr_bvec, u32 len, tern_xfer_done_t done);
int tern_reply(struct tern_srv_req *req, int status, const void *front,
	       u32 front_len);

/* Responder data pages, recycled uncleared: overwrite what others read. */
struct page *tern_data_page_alloc(gfp_t gfp);
void tern_data_page_free(struct page *page);
void tern_data_pages_posted(long delta);

int tern_parse_uri(const char *uri, char *scheme, size_t scheme_len,
		   struct sockaddr_storage *addr);
int tern_addr_canon(const char *text, char *out, size_t size);

/* What a transport can do, for a ULP that checks its settings early. */
#define TERN_TRANSPORT_ENCRYPTS	BIT(0)	/* encrypt= and require_encrypt */
#define TERN_TRANSPORT_SIGNS	BIT(1)	/* integrity= */
#define TERN_SCHEME_MAX		16	/* with its NUL */
int tern_transport_query(const char *name, unsigned int *caps);

/* Authentication, Documentation/protocol.rst "Authentication" */
#define TERN_KEY_PREFIX		"TERNKEY-1:"
/* "TERNKEY-1:" + base64 of key and CRC32C (48) + ":" */
#define TERN_KEY_TEXT_LEN	(sizeof(TERN_KEY_PREFIX) - 1 + 48 + 1)

int tern_key_parse(const char *text, size_t len, u8 *key);
/*
 * What tern_identity_valid() takes, for messages: names become configfs
 * directories, where a leading '.' hides one from listings (and "." and
 * ".." are none).
 */
#define TERN_NAME_RULE	"1-63 of [A-Za-z0-9._:-], not starting with '.'"
bool tern_identity_valid(const char *s, size_t size);
const char *tern_session_identity(struct tern_session *sess);
unsigned int tern_endpoint_close_identity(struct tern_endpoint *ep,
					  const char *identity);

#endif /* _TERN_TERN_H */
