/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tern messenger: the interface between the core and a transport.
 *
 * A transport moves frames (header, front, data) over one connection per
 * lane. The core owns framing, validation, CRC, sessions and resends; the
 * transport owns its connection and worker. Contract:
 *
 *  - Receive: copy the stream's bytes into the iterator
 *    tern_lane_rx_next() returns, at most what it wants, and ask again:
 *    the core walks the frame's parts (header, tag, front, data) and
 *    checks each as it fills. When it returns NULL the frame is whole:
 *    call tern_lane_rx_done(). A transport that received into data pages
 *    of its own may offer one with tern_lane_rx_swap_page() instead of
 *    copying it. An error (ERR_PTR or negative return)
 *    means: stop and call tern_lane_error(). Call tern_lane_rx_progress()
 *    whenever bytes of a frame arrive: a lane is alive while they do.
 *  - Transmit: tern_lane_tx_next() hands out the next frame; send header,
 *    frame->tag_len bytes of frame->tag, front and data, then call
 *    tern_lane_tx_done(). The core pokes the
 *    transport with ->kick() when frames are queued.
 *  - All these calls come from one context per lane at a time, in process
 *    context: the lane's worker (or whatever the transport runs it in);
 *    for transmitting only, also a submitter in ->push, which may be
 *    atomic.
 *  - ->shutdown() is synchronous: once it returns the transport makes no
 *    further calls for that lane.
 *
 * Data of TO_RESPONDER requests and FROM_RESPONDER replies travels inline
 * after the front (stream transports). A transport with remote memory
 * access sets ->pull, which makes the core offer TERN_FEAT_REMOTE_DATA.
 * On a lane where it was negotiated (tern_lane_remote_data()):
 *
 *  - Requester: the transport may send a REQUEST frame's data as remote
 *    descriptors instead (TERN_WIRE_F_REMOTE, see tern_wire.h): it
 *    registers the buffer of tern_frame_request(), rewrites the header it
 *    puts on the wire (tern_wire_hdr_seal()) and holds the frame, calling
 *    tern_lane_tx_done() only once the peer can no longer reach the
 *    buffer (after the reply invalidated it, or after ->shutdown drained
 *    the connection). The request completes no earlier.
 *  - Responder, TO_RESPONDER: the core calls ->pull to read the described
 *    buffer into local pages before &tern_endpoint_ops.request, so the ULP
 *    sees the data where inline data would be; the transport reports with
 *    tern_srv_req_pulled() from its worker, also for pulls cut short by
 *    ->shutdown (with an error, before ->shutdown returns).
 *  - Responder, FROM_RESPONDER: a REPLY frame with ->rdesc set answers a
 *    request with remote data. With TERN_WIRE_F_REMOTE in its flags the
 *    transport first writes hdr.buf_len bytes of frame->bvec into the
 *    descriptors; either way it invalidates rdesc[0] with the reply if it
 *    can. Frame and pages stay valid until tern_lane_tx_done().
 */
#ifndef _TERN_TRANSPORT_H
#define _TERN_TRANSPORT_H

#include <linux/bitops.h>
#include <linux/module.h>
#include <linux/socket.h>
#include <linux/uio.h>
#include <tern/tern.h>

/* Receive state of a lane, filled by the core for the transport. */
struct tern_lane_rx {
	struct tern_wire_hdr	hdr;
	u8			part;		/* enum tern_rx_part */
	struct iov_iter		*filling;	/* the part's, not yet full */
	u32			front_len;
	struct iov_iter		front_iter;
	u32			data_len;
	struct iov_iter		data_iter;
	struct iov_iter		tag_iter;	/* empty unless signed */
	/* core private */
	u8			tag[TERN_WIRE_TAG_LEN];
	struct iov_iter		hdr_iter;
	struct kvec		hdr_kvec;
	struct kvec		tag_kvec;
	struct kvec		front_kvec;
	struct kvec		data_kvec;	/* remote data descriptors */
	struct tern_request	*req;		/* reply being received */
	struct tern_srv_req	*sreq;		/* request being received */
	bool			discard;	/* late duplicate reply */
};

/* The part of a lane visible to transports. */
struct tern_lane {
	void				*tpriv;	/* transport private */
	const struct tern_transport_ops	*tops;
	struct tern_lane_rx		rx;
	/* core private: frames to send, under its tx_lock */
	struct list_head		tx_queue;
	/* core's: jiffies when the stream last moved (keepalive) */
	unsigned long			last_rx;
	/* the rest is private to the core, see net/tern_core.h */
};

struct tern_listener {
	void				*tpriv;
	const struct tern_transport_ops	*tops;
	struct sockaddr_storage		addr;
	/* core private */
	struct tern_endpoint		*ep;
	struct list_head		entry;
};

/* One direction's traffic keys: AES-128-GCM, nonce = salt | iv ^ seq. */
struct tern_lane_keys {
	u8	key[16];
	u8	salt[4];
	u8	iv[8];
};

/**
 * struct tern_transport_ops - a transport registered with the core
 * @entry: the core's registry list
 * @name: URI scheme ("tcp", "rdma"); the module should carry
 *	MODULE_ALIAS("tern-transport-<name>") so the core can load it
 * @owner: THIS_MODULE; the core holds a module reference per lane and
 *	per listener, so the transport cannot unload under them.
 * @listen: start accepting on @lis->addr. Accepted connections become
 *	lanes through tern_lane_accept().
 * @stop_listen: stop accepting; synchronous.
 * @connect: connect @lane to @addr; may sleep (called from a work item).
 *	On success the lane's I/O is running.
 * @kick: frames were queued on @lane; any context.
 * @push: optional: a submitter queued frames on @lane and did not kick;
 *	transmit them now from its context if the lane's worker is not
 *	sending, else kick. @can_sleep says whether that context may sleep;
 *	without it, ->push must not. Never concurrent with or after
 *	->shutdown. Saves the wakeup of the worker per request burst.
 * @push_sleeps: ->push sends only when @can_sleep (a socket transport):
 *	submitters that want it to must be able to sleep.
 * @shutdown: stop the lane's I/O and free transport state; synchronous,
 *	process context.
 * @pull: optional, remote data: read @req->data_len bytes described by
 *	@req->rdesc into @bvec; report with tern_srv_req_pulled(). Called
 *	from the lane's worker. Return: 0, or a negative errno (no report;
 *	the core drops the lane).
 * @encrypt: optional: from now on seal what @lane sends (@tx) or open
 *	what it receives (!@tx) with AES-128-GCM under @keys, records
 *	numbered from 0. The core calls it for receive from the lane's
 *	receive path between two frames, and for transmit between two
 *	frames with nothing queued behind. Return: 0 or a negative errno
 *	(the core drops the lane). Without it the transport cannot encrypt.
 * @frame_tags: the transport sends and receives the tags of signed
 *	frames (see the contract above), so the core may offer
 *	TERN_FEAT_INTEGRITY.
 */
struct tern_transport_ops {
	struct list_head	entry;
	const char		*name;
	struct module		*owner;
	int	(*listen)(struct tern_listener *lis);
	void	(*stop_listen)(struct tern_listener *lis);
	int	(*connect)(struct tern_lane *lane,
			   const struct sockaddr_storage *addr);
	void	(*kick)(struct tern_lane *lane);
	void	(*push)(struct tern_lane *lane, bool can_sleep);
	bool	push_sleeps;
	void	(*shutdown)(struct tern_lane *lane);
	int	(*pull)(struct tern_lane *lane, struct tern_srv_req *req,
			const struct bio_vec *bvec, unsigned int nr_bvec);
	int	(*encrypt)(struct tern_lane *lane,
			   const struct tern_lane_keys *keys, bool tx);
	bool	frame_tags;
};

int tern_transport_register(struct tern_transport_ops *ops);
void tern_transport_unregister(struct tern_transport_ops *ops);

/* Accept path: create a lane for a new connection on @lis. */
struct tern_lane *tern_lane_accept(struct tern_listener *lis,
				   const struct sockaddr_storage *peer);
/* The transport's state is set up (tpriv valid): start the handshake. */
void tern_lane_start(struct tern_lane *lane);
/* Accept path failed after tern_lane_accept(): free the lane. */
void tern_lane_abort(struct tern_lane *lane);

struct iov_iter *tern_lane_rx_step(struct tern_lane *lane);

/**
 * tern_lane_rx_next - where the next bytes of the stream go
 * @lane: the lane
 *
 * A transport copies what it receives into the iterator returned, as
 * much as the iterator wants and no more, and asks again. The core walks
 * the frame's parts, the header, the tag (signed frames), the front and
 * the data, and checks each part as it fills: the header before it says
 * where the rest goes (for replies: into the requester's pages), the
 * front before the ULP sees it. A part not yet full is answered here,
 * inline; the core's walk runs once per part.
 *
 * Return: the iterator; NULL when the frame is whole and
 * tern_lane_rx_done() is due; or an ERR_PTR: the transport must close
 * the lane.
 */
static inline struct iov_iter *tern_lane_rx_next(struct tern_lane *lane)
{
	struct iov_iter *iter = lane->rx.filling;

	if (iter && iov_iter_count(iter))
		return iter;
	return tern_lane_rx_step(lane);
}

struct page *tern_lane_rx_swap_page(struct tern_lane *lane, struct page *page,
				    u32 len);
u32 tern_lane_inline_max(struct tern_lane *lane, bool to_responder,
			 u32 dflt);
unsigned int tern_lane_queue_depth(struct tern_lane *lane, u32 *max_data);
int tern_lane_rx_done(struct tern_lane *lane);

/**
 * tern_lane_rx_progress - bytes of a frame arrived on @lane
 * @lane: the lane
 *
 * A large frame on a slow path carries no header for a while: what
 * arrives of its body keeps the keepalive timer from killing the lane.
 * A peer that trickles a reply for ever is stopped by the requester's own
 * timeouts (tern_cancel() resets the receiving lane) and by
 * tern.max_lane_faults. Inline: transports call it on every read.
 */
static inline void tern_lane_rx_progress(struct tern_lane *lane)
{
	WRITE_ONCE(lane->last_rx, jiffies);
}

struct tern_frame *tern_lane_tx_next(struct tern_lane *lane);
void tern_lane_tx_done(struct tern_lane *lane, struct tern_frame *frame);

/*
 * Does @lane have frames waiting, that tern_lane_tx_next() would hand
 * out? A lockless hint, stale as soon as it is returned: for batching and
 * to skip a send step with nothing to send. Inline, as transports ask it
 * several times per frame.
 */
static inline bool tern_lane_tx_pending(struct tern_lane *lane)
{
	return !list_empty(&lane->tx_queue);
}

/*
 * A transport's io_budget module parameter as one io_work run's budget:
 * at least 1, and small enough for the signed counts that spend it.
 */
#define TERN_IO_BUDGET_MAX	4096U
static inline unsigned int tern_io_budget(unsigned int param)
{
	return clamp(param, 1U, TERN_IO_BUDGET_MAX);
}

/*
 * A connect or handshake timeout module parameter as used: at least 1 s,
 * since 0 would fail every attempt before it could succeed.
 */
#define TERN_MIN_TIMEOUT_MS	1000U
static inline unsigned int tern_timeout_ms(unsigned int param)
{
	return max(param, TERN_MIN_TIMEOUT_MS);
}

void tern_lane_count_submitter_sends(struct tern_lane *lane,
				     unsigned int sends);

/* The connection failed (@err < 0) or closed (@err == 0). */
void tern_lane_error(struct tern_lane *lane, int err);
/*
 * The transport found the peer breaking its own part of the protocol:
 * counted in the lane's proto_errors and logged, rate-limited, with the
 * lane's name. The lane is not failed; the transport goes on to return
 * an error that ends in tern_lane_error().
 */
__printf(2, 3)
void tern_lane_proto_error(struct tern_lane *lane, const char *fmt, ...);

/* Frame helpers for transports. */
static inline u32 tern_frame_front_len(const struct tern_frame *f)
{
	return le32_to_cpu(f->hdr.front_len);
}

static inline u32 tern_frame_data_len(const struct tern_frame *f)
{
	return le32_to_cpu(f->hdr.data_len);
}

const char *tern_lane_name(struct tern_lane *lane);
int tern_lane_index(struct tern_lane *lane);

/* Remote data (TERN_FEAT_REMOTE_DATA) was negotiated on @lane. */
bool tern_lane_remote_data(struct tern_lane *lane);
/* Recompute hdr_crc after a transport changed a header it transmits. */
void tern_wire_hdr_seal(struct tern_wire_hdr *hdr);
/* A ->pull finished: @status 0 or a negative errno. Lane worker only. */
void tern_srv_req_pulled(struct tern_srv_req *req, int status);

/* The request a REQUEST frame belongs to, or NULL for other frames. */
static inline struct tern_request *tern_frame_request(struct tern_frame *f)
{
	if (f->hdr.type != TERN_WIRE_REQUEST)
		return NULL;
	return container_of(f, struct tern_request, frame);
}

/*
 * A responder's answer that lets its lane in: a HELLO_ACK without a
 * challenge, or the AUTH_ACK after one, with status 0. A transport that
 * keeps accepted lanes small until then may give them their room now.
 */
static inline bool tern_frame_admits(const struct tern_frame *f)
{
	const struct tern_wire_hello *h = f->front;
	const struct tern_wire_auth *a = f->front;

	if (f->hdr.type == TERN_WIRE_HELLO_ACK)
		return h && !h->status &&
		       !(le32_to_cpu(h->features) & TERN_FEAT_AUTH);
	return f->hdr.type == TERN_WIRE_AUTH_ACK && a && !a->status;
}

/*
 * Owning a lane's I/O state without waiting: a bit lock (TERN_OWN_BUSY in
 * a transport's flags word) taken by its worker, a completion handler or
 * a submitter, whoever comes first. One that finds it taken leaves a
 * note (TERN_OWN_MISSED); the holder looks for notes after letting go,
 * and the paired barriers make sure that either the holder sees the note
 * or the note's writer gets the bit on its retry: no kick is lost.
 */
#define TERN_OWN_BUSY		0
#define TERN_OWN_MISSED		1

static inline bool tern_own_trylock(unsigned long *flags)
{
	return !test_and_set_bit_lock(TERN_OWN_BUSY, flags);
}

/* Take the bit, or leave a note for its holder and return false. */
static inline bool tern_own_enter(unsigned long *flags)
{
	if (tern_own_trylock(flags))
		return true;
	set_bit(TERN_OWN_MISSED, flags);
	/* MISSED before the retry; pairs with tern_own_leave() */
	smp_mb__after_atomic();
	return tern_own_trylock(flags);
}

/* Let go of the bit. Return: whether a note is waiting. */
static inline bool tern_own_leave(unsigned long *flags)
{
	clear_bit_unlock(TERN_OWN_BUSY, flags);
	/* pairs with the barrier in tern_own_enter() */
	smp_mb__after_atomic();
	return test_bit(TERN_OWN_MISSED, flags);
}

/* Take the note: whoever does gives the work it stands for a run. */
static inline bool tern_own_take_note(unsigned long *flags)
{
	return test_and_clear_bit(TERN_OWN_MISSED, flags);
}

#endif /* _TERN_TRANSPORT_H */
