// SPDX-License-Identifier: GPL-2.0
/*
 * tern RDMA transport: one RC queue pair per lane, set up with rdma_cm.
 *
 * Message transport with inline data (Documentation/protocol.rst, "RDMA
 * framing"): the frames a lane sends form one byte stream, exactly as on
 * TCP, cut into SEND messages of at most the peer's receive buffer size.
 * Each SEND starts with a struct tern_rdma_msg_hdr carrying a credit
 * grant; the receiver feeds the bytes after it to the core's receive
 * iterators in order (RC delivers in order), so a frame may span many
 * SENDs and one SEND may carry the tails and heads of several frames.
 *
 * Credits: each side pre-posts recv_count receive buffers and announces
 * the count and their size in the rdma_cm private data. A sender spends
 * one credit per SEND and never posts without one, so a SEND always finds
 * a posted buffer (the QP is set up with rnr_retry 0: a receiver-not-ready
 * NAK would be a bug and fails the lane). Every SEND returns the credits
 * for the buffers the receiver reposted since its last SEND; when there is
 * nothing to send and a quarter of the buffers wait to be granted, a
 * header-only CREDIT message goes out. The last credit is only spent on a
 * SEND that grants credits too, so two peers can never both wait.
 *
 * Contexts: completions run in a work item (IB_POLL_WORKQUEUE on a CQ from
 * the device's CQ pool): they move receive buffers to a list and count
 * send completions, then run the lane's I/O right there, in process
 * context as the core requires: parse the received bytes, repost receive
 * buffers, copy queued frames into the send ring and post them. Only when
 * someone else runs it (TERN_OWN_BUSY) do they queue the lane's
 * io_work, which also serves kicks from the core. A plain SEND completing
 * is news only when sending stalled on the send ring. Submitters post
 * their own requests (->push). A frame is copied into registered send buffers
 * and handed back to the core at once (tern_lane_tx_done()), so the core's
 * frames never wait for the wire; except that inline data above
 * inline_copy_max goes from its own pages as a piece of the SEND's
 * gather list (tern_rdma_ref_frame()), and then the send buffer holds
 * the frame until that SEND completes.
 *
 * Locking: tl->lock (bh) guards the receive-completion list, the send
 * completion count and the ready/stopped flags; all other lane state is
 * io_work's. rdma_cm events are serialised per cm_id by rdma_cm; the lane
 * handler only completes the connect wait or reports an error. Shutdown
 * stops io_work from being queued, drains the QP (every posted work
 * request completes, flushed), cancels io_work and only then frees the QP,
 * CQ, buffers and the cm_id; rdma_destroy_id() waits out a running event
 * handler.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bits.h>
#include <linux/completion.h>
#include <linux/debugfs.h>
#include <linux/inet.h>
#include <linux/llist.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/random.h>
#include <linux/scatterlist.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/mr_pool.h>
#include <rdma/rdma_cm.h>
#include <rdma/rw.h>
#include <net/net_namespace.h>
#include <tern/transport.h>
#include <uapi/tern/tern_rdma_wire.h>

static unsigned int resolve_timeout_ms = 2000;
module_param(resolve_timeout_ms, uint, 0644);
MODULE_PARM_DESC(resolve_timeout_ms,
		 "Address and route resolution timeout in ms (default 2000)");

static unsigned int connect_timeout_ms = 5000;
module_param(connect_timeout_ms, uint, 0644);
MODULE_PARM_DESC(connect_timeout_ms,
		 "Give up a connection attempt after this many ms in total (default 5000)");

static unsigned int relisten_ms = 1000;
module_param(relisten_ms, uint, 0644);
MODULE_PARM_DESC(relisten_ms,
		 "After a device removal, try to listen again every this many ms, at least 100 (default 1000)");

static unsigned int buf_size = 16384;
module_param(buf_size, uint, 0444);
MODULE_PARM_DESC(buf_size,
		 "Bytes per send and receive buffer, 4096..65536 (default 16384)");

static unsigned int recv_depth = 64;
module_param(recv_depth, uint, 0444);
MODULE_PARM_DESC(recv_depth,
		 "Receive buffers posted per lane: the peer's credits, 8..1024 (default 64)");

static unsigned int send_depth = 32;
module_param(send_depth, uint, 0444);
MODULE_PARM_DESC(send_depth,
		 "Send buffers (and send queue entries) per lane, 2..1024 (default 32)");

static unsigned int io_budget = 64;
module_param(io_budget, uint, 0644);
MODULE_PARM_DESC(io_budget,
		 "Messages per io_work run before yielding (default 64)");

static unsigned int inline_max = 4096;
module_param(inline_max, uint, 0644);
MODULE_PARM_DESC(inline_max,
		 "Request data above this many bytes is moved by RDMA READ, not copied into SENDs (default 4096)");

static unsigned int inline_read_max = 4096;
module_param(inline_read_max, uint, 0644);
MODULE_PARM_DESC(inline_read_max,
		 "Reply data above this many bytes is moved by RDMA WRITE, not copied into SENDs (default 4096)");

static unsigned int inline_copy_max = 1024;
module_param(inline_copy_max, uint, 0644);
MODULE_PARM_DESC(inline_copy_max,
		 "Inline data above this many bytes goes into the SEND from its own pages when it fits one SEND, not copied (default 1024)");

static unsigned int mr_count = 128;
module_param(mr_count, uint, 0444);
MODULE_PARM_DESC(mr_count,
		 "Fast registration MRs per lane, 0 disables zero-copy sends (default 128)");

static unsigned int mr_pages = 256;
module_param(mr_pages, uint, 0444);
MODULE_PARM_DESC(mr_pages,
		 "Pages per MR, capped by the device (default 256)");

static unsigned int rw_ctxs = 256;
module_param(rw_ctxs, uint, 0444);
MODULE_PARM_DESC(rw_ctxs,
		 "Send queue room per lane for RDMA READ/WRITE work requests (default 256)");

static bool cq_by_lane = true;
module_param(cq_by_lane, bool, 0644);
MODULE_PARM_DESC(cq_by_lane,
		 "Requester lane i takes its CQ on completion vector i (default on)");

static unsigned int inject_bad_rkey_every;
module_param(inject_bad_rkey_every, uint, 0644);
MODULE_PARM_DESC(inject_bad_rkey_every,
		 "Send a remote data descriptor with a wrong rkey with a chance of one in N requests (0 = off; testing only)");

static unsigned int inject_bad_len_every;
module_param(inject_bad_len_every, uint, 0644);
MODULE_PARM_DESC(inject_bad_len_every,
		 "Send a remote data descriptor with a wrong length with a chance of one in N requests (0 = off; testing only)");

static unsigned int inject_bad_reply_every;
module_param(inject_bad_reply_every, uint, 0644);
MODULE_PARM_DESC(inject_bad_reply_every,
		 "Send a reply with a tid never sent, tid 0 or an unknown flag with a chance of one in N replies (0 = off; testing only)");

static unsigned int inject_long_reply_every;
module_param(inject_long_reply_every, uint, 0644);
MODULE_PARM_DESC(inject_long_reply_every,
		 "Send a reply of remotely written data claiming more than the requester's buffer with a chance of one in N (0 = off; testing only)");

#define TERN_RDMA_MIN_BUF	4096U
#define TERN_RDMA_MAX_BUF	65536U
#define TERN_RDMA_MIN_RECV	8U
#define TERN_RDMA_PRE_BUFS	2U	/* accepted lane, before the handshake */
#define TERN_RDMA_MAX_DEPTH	1024U
/* a SEND: its buffer and, between pieces of it, up to 3 frames' data */
#define TERN_RDMA_SEND_SGE	8U
#define TERN_RDMA_SEND_REFS	3U

static struct workqueue_struct *tern_rdma_wq;

/* The rdma_cm context of a cm_id is either a listener or a lane. */
enum tern_rdma_ctx_kind {
	TERN_RDMA_CTX_LISTENER = 1,
	TERN_RDMA_CTX_LANE,
};

enum tern_rdma_rx_state {
	TERN_RDMA_RX_HDR,
	TERN_RDMA_RX_FRONT,
	TERN_RDMA_RX_DATA,
};

struct tern_rdma_lane;
struct tern_rdma_op;

/* A frame whose data a SEND takes from the frame's own pages. */
struct tern_rdma_ref {
	struct tern_frame	*frame;
	unsigned int		first_sge;	/* its data in the SEND's sge[] */
	unsigned int		nr_sge;
};

struct tern_rdma_buf {
	struct ib_cqe		cqe;
	struct tern_rdma_lane	*tl;
	struct list_head	entry;	/* tl->rx_ready */
	struct llist_node	rx_node;	/* tl->rx_done */
	void			*addr;
	u64			dma;
	u32			len;	/* receive: bytes received */
	bool			mapped;
	bool			inv;	/* receive: peer invalidated inv_rkey */
	u32			inv_rkey;
	unsigned int		wrs;	/* send: SQ entries freed on completion */
	struct tern_rdma_op	*op;	/* send: finished by this SEND */
	unsigned int		seq;	/* send: tx_posted when posted */
	/* send: the SEND's pieces; sge_open: the last is ours and may grow */
	unsigned int		nr_sge;
	bool			sge_open;
	struct ib_sge		sge[TERN_RDMA_SEND_SGE];
	/* send: frames held until the SEND completes, pages mapped */
	unsigned int		nr_refs;
	struct tern_rdma_ref	refs[TERN_RDMA_SEND_REFS];
};

enum tern_rdma_op_kind {
	TERN_RDMA_OP_REG,	/* requester: a request's registered buffer */
	TERN_RDMA_OP_PULL,	/* responder: RDMA READ of request data */
	TERN_RDMA_OP_PUSH,	/* responder: RDMA WRITE of reply data */
};

struct tern_rdma_rwc {
	struct rdma_rw_ctx	ctx;
	struct sg_table		sgt;
	bool			live;
};

/*
 * One zero-copy operation. All are on tl->ops until freed, so shutdown
 * finds them; completions move them to tl->op_done for io_work.
 */
struct tern_rdma_op {
	struct ib_cqe		cqe;
	struct tern_rdma_lane	*tl;
	struct list_head	entry;		/* tl->ops */
	struct list_head	wait;		/* tl->regs, tl->pull_wait */
	struct list_head	done;		/* tl->op_done */
	enum tern_rdma_op_kind	kind;
	int			status;
	unsigned int		wrs;		/* SQ entries of the chain */
	struct tern_frame	*frame;		/* REG, PUSH */
	bool			held;		/* we owe tern_lane_tx_done() */
	struct tern_srv_req	*sreq;		/* PULL */
	u64			tid;
	u32			len;
	enum dma_data_direction	dir;
	/* REG */
	struct sg_table		sgt;
	int			sg_mapped;
	unsigned int		nr_mr;
	struct ib_mr		*mr[TERN_WIRE_MAX_RDESC];
	struct tern_wire_rdesc	desc[TERN_WIRE_MAX_RDESC];
	/* PULL, PUSH */
	unsigned int		nr_rwc;
	struct tern_rdma_rwc	*rwc;
};

/*
 * Counters, module wide (debugfs tern_rdma/stats), kept per CPU so that
 * lanes never share a cache line for them; summed when read.
 */
struct tern_rdma_counters {
	u64		registrations;		/* MRs registered */
	u64		zc_requests;		/* requests sent with descriptors */
	u64		inline_fallbacks;	/* big data sent inline anyway */
	u64		inline_refs;		/* inline data sent from its pages */
	u64		inline_ref_bytes;
	u64		local_invalidates;
	u64		remote_invalidates;
	u64		rdma_reads;
	u64		rdma_read_bytes;
	u64		rdma_writes;
	u64		rdma_write_bytes;
	u64		credit_stalls;
	u64		sq_stalls;
	u64		handler_runs;		/* lane I/O in a CQ handler */
	u64		unsignaled_sends;	/* SENDs without a completion */
	u64		injected_bad_rkeys;
	u64		injected_bad_lens;
	u64		injected_bad_replies;
	u64		injected_long_replies;
	u64		qp_fatal_events;	/* fatal QP async events */
	u64		addr_changes;		/* ADDR_CHANGE on a lane's cm_id */
};

static DEFINE_PER_CPU(struct tern_rdma_counters, tern_rdma_stats);

#define TERN_RDMA_STAT(f, v)	this_cpu_add(tern_rdma_stats.f, v)

/*
 * tl->io_flags: the lane's I/O runs under TERN_OWN_BUSY (<tern/transport.h>),
 * taken by io_work, by a completion handler or by a submitter, whoever
 * comes first. One that finds it taken leaves a note; the holder looks
 * for it after letting go, so the work is never lost: a full runner takes
 * the bit back and runs again, a submitter (which only sends) queues
 * io_work.
 */

struct tern_rdma_lane {
	enum tern_rdma_ctx_kind	kind;
	struct tern_lane	*lane;
	struct rdma_cm_id	*cm_id;
	struct ib_device	*dev;
	struct ib_pd		*pd;
	struct ib_cq		*cq;
	unsigned int		cq_size;
	bool			qp_created;
	struct work_struct	io_work;

	/* completed receive buffers, newest first: handlers add locklessly */
	struct llist_head	rx_done;

	spinlock_t		lock;		/* the seven below */
	unsigned int		tx_completed;
	bool			tx_stalled;	/* io_work waits for the SQ */
	bool			ready;		/* io_work may run */
	bool			stopped;	/* shutdown started */
	int			early_err;	/* error before ready */
	/* a fatal QP event, reported from process context */
	struct work_struct	qp_err_work;

	/* connect: the event handler reports the outcome of each step */
	struct completion	cm_done;
	int			cm_status;

	struct list_head	op_done;	/* completed ops */
	unsigned int		sq_free;	/* send queue entries */

	u32			port_num;
	struct ib_cqe		err_cqe;	/* unsignaled work requests */
	struct list_head	mrs;		/* MR pool */
	bool			mr_pool;
	/*
	 * Accepted lanes: no MR pool (only requesters register memory), and
	 * before the handshake only TERN_RDMA_PRE_BUFS buffers each way hold
	 * memory; the rest come with the HELLO_ACK (tern_rdma_grow()).
	 */
	bool			accepted;
	bool			grown;
	unsigned int		mr_max_pages;
	unsigned int		sq_size;
	/* the owner of TERN_OWN_BUSY: io_work, or a submitter (push) */
	unsigned long		io_flags;
	struct list_head	ops;		/* every live op */
	struct list_head	regs;		/* REG ops awaiting their reply */
	struct list_head	pull_wait;	/* PULL ops waiting for the SQ */
	struct tern_rdma_op	*tx_op;		/* op of tx_frame */
	bool			tx_prepared;
	struct tern_wire_hdr	tx_hdr;		/* header as transmitted */
	struct kvec		tx_kvec;
	bool			rx_inv;		/* current message invalidated */
	u32			rx_inv_rkey;
	bool			rx_msg_end;	/* fed the message's last byte */

	struct tern_rdma_buf	*rbufs;
	unsigned int		nr_rbufs;
	struct tern_rdma_buf	*sbufs;
	unsigned int		nr_sbufs;
	u32			buf_size;	/* ours, both rings */
	u32			tx_chunk;	/* bytes per SEND, header included */
	u32			peer_recv;	/* the peer's receive buffers */

	/* the owner of TERN_OWN_BUSY only */
	bool			io_atomic;	/* not io_work: must not sleep */
	bool			failed;
	struct list_head	rx_ready;	/* taken from rx_done, in order */
	unsigned int		tx_posted;
	unsigned int		tx_released;	/* SENDs whose refs are let go */
	unsigned int		tx_max_sge;
	unsigned int		tx_unsignaled;	/* SENDs since the last signaled */
	unsigned int		tx_signal_every;
	u32			tx_credits;
	u32			grant_pending;
	u32			grant_threshold;
	enum tern_rdma_rx_state	rx_state;
	size_t			rx_hdr_off;
	struct tern_frame	*tx_frame;
	size_t			tx_off;		/* header+front bytes copied */
	struct iov_iter		tx_data;
	/* tx_frame's data goes from its pages: in this many pieces */
	bool			tx_ref;
	unsigned int		tx_ref_sges;
};

struct tern_rdma_listener {
	enum tern_rdma_ctx_kind	kind;
	struct tern_listener	*lis;
	struct mutex		lock;		/* the two below */
	struct rdma_cm_id	*cm_id;		/* NULL once rdma_cm took it */
	bool			stopping;
	/* listen again once the device comes back */
	struct delayed_work	relisten;
};

/*
 * Fail the lane from a completion or a work item: at once when it is
 * live, else when tern_rdma_lane_go() makes it so.
 */
static void tern_rdma_lane_fail(struct tern_rdma_lane *tl, int err)
{
	bool report = false;

	spin_lock_bh(&tl->lock);
	if (tl->ready)
		report = !tl->stopped;
	else if (!tl->early_err)
		tl->early_err = err;
	spin_unlock_bh(&tl->lock);
	if (report)
		tern_lane_error(tl->lane, err);
}

static void tern_rdma_wc_error(struct tern_rdma_lane *tl, struct ib_wc *wc,
			       const char *op)
{
	if (wc->status != IB_WC_WR_FLUSH_ERR)
		pr_warn_ratelimited("%s: %s completion failed: %s (%d)\n",
				    tern_lane_name(tl->lane), op,
				    ib_wc_status_msg(wc->status), wc->status);
	tern_rdma_lane_fail(tl, wc->status == IB_WC_WR_FLUSH_ERR ?
			    -ECONNRESET : -EIO);
}

static void tern_rdma_kick_locked(struct tern_rdma_lane *tl)
{
	lockdep_assert_held(&tl->lock);
	if (tl->ready && !tl->stopped)
		queue_work(tern_rdma_wq, &tl->io_work);
}

static void tern_rdma_kick_tl(struct tern_rdma_lane *tl)
{
	spin_lock_bh(&tl->lock);
	tern_rdma_kick_locked(tl);
	spin_unlock_bh(&tl->lock);
}

static void tern_rdma_wake(struct tern_rdma_lane *tl);

static __printf(2, 3)
int tern_rdma_proto_err(struct tern_rdma_lane *tl, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	tern_lane_proto_error(tl->lane, "%pV", &vaf);
	va_end(args);
	return -EPROTO;
}

static void tern_rdma_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct tern_rdma_buf *buf = container_of(wc->wr_cqe,
						 struct tern_rdma_buf, cqe);
	struct tern_rdma_lane *tl = buf->tl;
	int err;

	if (unlikely(wc->status != IB_WC_SUCCESS)) {
		tern_rdma_wc_error(tl, wc, "receive");
		return;
	}
	/*
	 * The peer only SENDs to us, never with immediate data: anything
	 * else (a RECV_RDMA_WITH_IMM, a SEND_WITH_IMM) is not our protocol,
	 * and the buffer is not reposted.
	 */
	if (unlikely(wc->opcode != IB_WC_RECV ||
		     (wc->wc_flags & IB_WC_WITH_IMM))) {
		err = tern_rdma_proto_err(tl, "receive completion opcode %d flags 0x%x",
					  wc->opcode, wc->wc_flags);
		tern_rdma_lane_fail(tl, err);
		return;
	}
	buf->len = wc->byte_len;
	buf->inv = wc->wc_flags & IB_WC_WITH_INVALIDATE;
	buf->inv_rkey = buf->inv ? wc->ex.invalidate_rkey : 0;
	llist_add(&buf->rx_node, &tl->rx_done);
	tern_rdma_wake(tl);
}

static void tern_rdma_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct tern_rdma_buf *buf = container_of(wc->wr_cqe,
						 struct tern_rdma_buf, cqe);
	struct tern_rdma_lane *tl = buf->tl;
	struct tern_rdma_buf *b;
	bool wake = false;
	unsigned int n;

	if (unlikely(wc->status != IB_WC_SUCCESS)) {
		tern_rdma_wc_error(tl, wc, "send");
		return;
	}
	spin_lock_bh(&tl->lock);
	/* the unsignaled SENDs before this one completed with it */
	n = buf->seq + 1 - tl->tx_completed;
	if (WARN_ON_ONCE(!n || n > tl->nr_sbufs)) {
		spin_unlock_bh(&tl->lock);
		tern_rdma_lane_fail(tl, -EIO);
		return;
	}
	while (n--) {
		b = &tl->sbufs[tl->tx_completed % tl->nr_sbufs];
		tl->sq_free += b->wrs;
		if (b->nr_refs)
			wake = true;	/* frames to give back */
		if (b->op) {
			list_add_tail(&b->op->done, &tl->op_done);
			wake = true;
		}
		/* done with b: tern_rdma_tx_free() may hand it out */
		smp_store_release(&tl->tx_completed, tl->tx_completed + 1);
	}
	/*
	 * A SEND completing is news to io_work only if it finishes an op
	 * or io_work stopped for want of send buffers or queue entries:
	 * waking it for every SEND costs a context switch per message.
	 */
	wake |= tl->tx_stalled;
	tl->tx_stalled = false;
	spin_unlock_bh(&tl->lock);
	if (wake)
		tern_rdma_wake(tl);
}

static int tern_rdma_post_recv(struct tern_rdma_lane *tl,
			       struct tern_rdma_buf *buf)
{
	struct ib_sge sge = {
		.addr = buf->dma,
		.length = tl->buf_size,
		.lkey = tl->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = {
		.wr_cqe = &buf->cqe,
		.sg_list = &sge,
		.num_sge = 1,
	};

	ib_dma_sync_single_for_device(tl->dev, buf->dma, tl->buf_size,
				      DMA_FROM_DEVICE);
	return ib_post_recv(tl->cm_id->qp, &wr, NULL);
}

static void tern_rdma_err_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct tern_rdma_lane *tl = container_of(wc->wr_cqe,
						 struct tern_rdma_lane,
						 err_cqe);

	/* unsignaled work requests only complete here when they fail */
	tern_rdma_wc_error(tl, wc, "memory registration");
}

/* A signaled READ, WRITE or LOCAL_INV chain completed. */
static void tern_rdma_op_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct tern_rdma_op *op = container_of(wc->wr_cqe,
					       struct tern_rdma_op, cqe);
	struct tern_rdma_lane *tl = op->tl;

	if (unlikely(wc->status != IB_WC_SUCCESS)) {
		op->status = -EIO;
		tern_rdma_wc_error(tl, wc, "rdma");
	}
	spin_lock_bh(&tl->lock);
	tl->sq_free += op->wrs;
	op->wrs = 0;
	/* a PUSH op finishes with the SEND after its WRITEs */
	if (op->kind != TERN_RDMA_OP_PUSH)
		list_add_tail(&op->done, &tl->op_done);
	tl->tx_stalled = false;
	spin_unlock_bh(&tl->lock);
	tern_rdma_wake(tl);
}

static bool tern_rdma_sq_take(struct tern_rdma_lane *tl, unsigned int n)
{
	bool ok;

	spin_lock_bh(&tl->lock);
	ok = tl->sq_free >= n;
	if (ok)
		tl->sq_free -= n;
	else
		tl->tx_stalled = true;	/* wake on the next completion */
	spin_unlock_bh(&tl->lock);
	if (!ok)
		TERN_RDMA_STAT(sq_stalls, 1);
	return ok;
}

static void tern_rdma_sq_return(struct tern_rdma_lane *tl, unsigned int n)
{
	spin_lock_bh(&tl->lock);
	tl->sq_free += n;
	spin_unlock_bh(&tl->lock);
}

/* Allocations of the lane's I/O: a failed one on a requester goes inline. */
static gfp_t tern_rdma_gfp(struct tern_rdma_lane *tl)
{
	return tl->io_atomic ? GFP_NOWAIT : GFP_NOIO;
}

static struct tern_rdma_op *tern_rdma_op_alloc(struct tern_rdma_lane *tl,
					       enum tern_rdma_op_kind kind,
					       gfp_t gfp)
{
	struct tern_rdma_op *op;

	op = kzalloc(sizeof(*op), gfp);
	if (!op)
		return NULL;
	op->tl = tl;
	op->kind = kind;
	op->cqe.done = tern_rdma_op_done;
	INIT_LIST_HEAD(&op->wait);
	INIT_LIST_HEAD(&op->done);
	list_add_tail(&op->entry, &tl->ops);
	return op;
}

/* Give back the op's verbs resources; the QP still exists. */
static void tern_rdma_op_unmap(struct tern_rdma_lane *tl,
			       struct tern_rdma_op *op)
{
	struct ib_qp *qp = tl->cm_id->qp;
	unsigned int i;

	for (i = 0; i < op->nr_mr; i++)
		ib_mr_pool_put(qp, &tl->mrs, op->mr[i]);
	op->nr_mr = 0;
	if (op->sg_mapped)
		ib_dma_unmap_sg(tl->dev, op->sgt.sgl, op->sgt.orig_nents,
				op->dir);
	op->sg_mapped = 0;
	sg_free_table(&op->sgt);
	for (i = 0; i < op->nr_rwc; i++) {
		struct tern_rdma_rwc *rwc = &op->rwc[i];

		if (rwc->live)
			rdma_rw_ctx_destroy(&rwc->ctx, qp, tl->port_num,
					    rwc->sgt.sgl, rwc->sgt.orig_nents,
					    op->dir);
		sg_free_table(&rwc->sgt);
	}
	kfree(op->rwc);
	op->rwc = NULL;
	op->nr_rwc = 0;
}

static void tern_rdma_op_free(struct tern_rdma_lane *tl,
			      struct tern_rdma_op *op)
{
	tern_rdma_op_unmap(tl, op);
	list_del_init(&op->wait);
	list_del(&op->entry);
	kfree(op);
}

/* A scatterlist over @len bytes of a bio_vec array after @skip. */
static int tern_rdma_bvec_sgt(struct sg_table *sgt, const struct bio_vec *bv,
			      unsigned int nr, u32 skip, u32 len, gfp_t gfp)
{
	struct scatterlist *sg;
	unsigned int i, n = 0;
	u32 left = len, sk = skip, l, off;

	for (i = 0; i < nr && left; i++) {
		if (sk >= bv[i].bv_len) {
			sk -= bv[i].bv_len;
			continue;
		}
		left -= min(left, bv[i].bv_len - sk);
		sk = 0;
		n++;
	}
	if (left || !n)
		return -EINVAL;
	if (sg_alloc_table(sgt, n, gfp))
		return -ENOMEM;
	sg = sgt->sgl;
	left = len;
	sk = skip;
	for (i = 0; i < nr && left; i++) {
		if (sk >= bv[i].bv_len) {
			sk -= bv[i].bv_len;
			continue;
		}
		off = bv[i].bv_offset + sk;
		l = min(left, bv[i].bv_len - sk);
		sg_set_page(sg, bv[i].bv_page + (off >> PAGE_SHIFT), l,
			    offset_in_page(off));
		sg = sg_next(sg);
		left -= l;
		sk = 0;
	}
	return 0;
}

static bool tern_rdma_one_in(unsigned int n)
{
	return n && get_random_u32_below(n) == 0;
}

/*
 * Fault injection: spoil one descriptor of a registered request as it
 * goes on the wire (the MR itself is left alone). A key of the same MR
 * with another key byte is never valid, so the responder's RDMA READ or
 * WRITE fails with a remote access error and both QPs go to the error
 * state; a length that no longer adds up to buf_len is a protocol error
 * at the responder. Either way the lane drops, reconnects and the
 * request is resent with a fresh registration.
 */
static void tern_rdma_inject_desc(struct tern_rdma_op *op)
{
	struct tern_wire_rdesc *d;

	if (tern_rdma_one_in(READ_ONCE(inject_bad_rkey_every))) {
		d = &op->desc[get_random_u32_below(op->nr_mr)];
		d->rkey ^= cpu_to_le32(0xff);
		TERN_RDMA_STAT(injected_bad_rkeys, 1);
	}
	if (tern_rdma_one_in(READ_ONCE(inject_bad_len_every))) {
		d = &op->desc[get_random_u32_below(op->nr_mr)];
		d->len ^= cpu_to_le32(BIT(get_random_u32_below(32)));
		TERN_RDMA_STAT(injected_bad_lens, 1);
	}
}

/*
 * Fault injection on the responder: a hostile target over RDMA, which a
 * userspace peer cannot play. Only the header as transmitted is spoilt,
 * after the data moved, so this side sends exactly what it would have.
 * A reply to a tid never sent or to tid 0, or with an unknown flag, is a
 * protocol error that resets the requester's lane: the request is resent.
 * Remote data claiming more than the requester's buffer fails the
 * request with -EPROTO (protocol.rst) or, beyond the session's max_data,
 * is refused with its frame like the faults above.
 */
static void tern_rdma_inject_reply(struct tern_rdma_lane *tl)
{
	struct tern_wire_hdr *hdr = &tl->tx_hdr;
	u16 flags = le16_to_cpu(hdr->flags);

	if ((flags & TERN_WIRE_F_REMOTE) &&
	    tern_rdma_one_in(READ_ONCE(inject_long_reply_every))) {
		le32_add_cpu(&hdr->buf_len, PAGE_SIZE);
		TERN_RDMA_STAT(injected_long_replies, 1);
	} else if (tern_rdma_one_in(READ_ONCE(inject_bad_reply_every))) {
		switch (get_random_u32_below(3)) {
		case 0:
			le64_add_cpu(&hdr->tid, 1ULL << 40);
			break;
		case 1:
			hdr->tid = 0;
			break;
		default:
			hdr->flags = cpu_to_le16(flags | BIT(14));
			break;
		}
		TERN_RDMA_STAT(injected_bad_replies, 1);
	} else {
		return;
	}
	tern_wire_hdr_seal(hdr);
}

/*
 * Requester: register the buffer of a REQUEST frame in FRWR MRs, one
 * descriptor each. Return: the op; NULL to send the data inline (small,
 * not negotiated, or out of MRs); ERR_PTR(-EAGAIN) to retry when the send
 * queue has room; another ERR_PTR fails the lane.
 */
static struct tern_rdma_op *tern_rdma_reg_prepare(struct tern_rdma_lane *tl,
						  struct tern_frame *f)
{
	struct tern_request *req = tern_frame_request(f);
	u16 flags = le16_to_cpu(f->hdr.flags);
	u32 len = le32_to_cpu(f->hdr.buf_len);
	struct ib_qp *qp = tl->cm_id->qp;
	unsigned int off = 0, i;
	struct scatterlist *sg;
	struct tern_rdma_op *op;
	int left, n, err;

	if (!req || !tl->mr_pool || !tern_lane_remote_data(tl->lane) ||
	    !(flags & (TERN_WIRE_F_DATA_TO_RESPONDER |
		       TERN_WIRE_F_DATA_FROM_RESPONDER)) ||
	    len <= (flags & TERN_WIRE_F_DATA_TO_RESPONDER ?
		    READ_ONCE(inline_max) : READ_ONCE(inline_read_max)))
		return NULL;
	op = tern_rdma_op_alloc(tl, TERN_RDMA_OP_REG, tern_rdma_gfp(tl));
	if (!op)
		goto inline_data;
	op->frame = f;
	op->tid = le64_to_cpu(f->hdr.tid);
	op->len = len;
	op->dir = flags & TERN_WIRE_F_DATA_TO_RESPONDER ? DMA_TO_DEVICE :
							   DMA_FROM_DEVICE;
	if (tern_rdma_bvec_sgt(&op->sgt, req->bvec, req->nr_bvec, 0, len,
			       tern_rdma_gfp(tl)))
		goto inline_data;
	op->sg_mapped = ib_dma_map_sg(tl->dev, op->sgt.sgl,
				      op->sgt.orig_nents, op->dir);
	if (!op->sg_mapped)
		goto inline_data;

	sg = op->sgt.sgl;
	left = op->sg_mapped;
	while (left > 0) {
		struct ib_mr *mr;

		if (op->nr_mr == TERN_WIRE_MAX_RDESC)
			goto inline_data;
		mr = ib_mr_pool_get(qp, &tl->mrs);
		if (!mr)
			goto inline_data;
		op->mr[op->nr_mr++] = mr;
		ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
		n = ib_map_mr_sg(mr, sg, left, &off, PAGE_SIZE);
		if (n < 0 || !mr->length)
			goto inline_data;
		op->desc[op->nr_mr - 1].addr = cpu_to_le64(mr->iova);
		op->desc[op->nr_mr - 1].len = cpu_to_le32(mr->length);
		op->desc[op->nr_mr - 1].rkey = cpu_to_le32(mr->rkey);
		left -= n;
		while (n--)
			sg = sg_next(sg);
	}

	/* REG_MR now, LOCAL_INV later: room for both */
	if (!tern_rdma_sq_take(tl, 2 * op->nr_mr)) {
		tern_rdma_op_free(tl, op);
		return ERR_PTR(-EAGAIN);
	}
	for (i = 0; i < op->nr_mr; i++) {
		struct ib_reg_wr wr = {};

		wr.wr.opcode = IB_WR_REG_MR;
		wr.wr.wr_cqe = &tl->err_cqe;
		wr.mr = op->mr[i];
		wr.key = op->mr[i]->rkey;
		wr.access = op->dir == DMA_TO_DEVICE ? IB_ACCESS_REMOTE_READ :
			    IB_ACCESS_REMOTE_WRITE | IB_ACCESS_LOCAL_WRITE;
		err = ib_post_send(qp, &wr.wr, NULL);
		if (err)
			return ERR_PTR(err);	/* shutdown frees the op */
	}
	tern_rdma_inject_desc(op);
	TERN_RDMA_STAT(registrations, op->nr_mr);
	TERN_RDMA_STAT(zc_requests, 1);
	return op;

inline_data:
	if (op)
		tern_rdma_op_free(tl, op);
	TERN_RDMA_STAT(inline_fallbacks, 1);
	return NULL;
}

/* rdma_rw contexts moving @len bytes between @bv and the descriptors. */
static int tern_rdma_rw_build(struct tern_rdma_lane *tl,
			      struct tern_rdma_op *op,
			      const struct tern_wire_rdesc *rd,
			      unsigned int nr_rd, const struct bio_vec *bv,
			      unsigned int nr_bv, u32 len)
{
	u32 off = 0, n;
	unsigned int i;
	int ret;

	op->rwc = kcalloc(nr_rd, sizeof(*op->rwc), GFP_NOIO);
	if (!op->rwc)
		return -ENOMEM;
	op->len = len;
	op->wrs = 0;
	for (i = 0; i < nr_rd && off < len; i++) {
		struct tern_rdma_rwc *rwc = &op->rwc[i];

		n = min(le32_to_cpu(rd[i].len), len - off);
		op->nr_rwc = i + 1;
		ret = tern_rdma_bvec_sgt(&rwc->sgt, bv, nr_bv, off, n,
					 GFP_NOIO);
		if (ret)
			return ret;
		ret = rdma_rw_ctx_init(&rwc->ctx, tl->cm_id->qp, tl->port_num,
				       rwc->sgt.sgl, rwc->sgt.orig_nents, 0,
				       le64_to_cpu(rd[i].addr),
				       le32_to_cpu(rd[i].rkey), op->dir);
		if (ret < 0)
			return ret;
		rwc->live = true;
		op->wrs += ret;
		off += n;
	}
	if (off != len || op->wrs > tl->sq_size)
		return -E2BIG;
	return 0;
}

/* Post the op's contexts as one chain, the last WR signaled. */
static int tern_rdma_rw_post(struct tern_rdma_lane *tl,
			     struct tern_rdma_op *op)
{
	struct ib_qp *qp = tl->cm_id->qp;
	struct ib_send_wr *first = NULL;
	unsigned int i;

	for (i = op->nr_rwc; i-- > 0;)
		first = rdma_rw_ctx_wrs(&op->rwc[i].ctx, qp, tl->port_num,
					first ? NULL : &op->cqe, first);
	return ib_post_send(qp, first, NULL);
}

/* Responder: RDMA WRITE the pushed data of a REPLY frame. */
static struct tern_rdma_op *tern_rdma_push_prepare(struct tern_rdma_lane *tl,
						   struct tern_frame *f)
{
	u32 len = le32_to_cpu(f->hdr.buf_len);
	struct tern_rdma_op *op;
	int err;

	op = tern_rdma_op_alloc(tl, TERN_RDMA_OP_PUSH, GFP_NOIO);
	if (!op)
		return ERR_PTR(-ENOMEM);
	op->frame = f;
	op->dir = DMA_TO_DEVICE;
	err = tern_rdma_rw_build(tl, op, f->rdesc, f->nr_rdesc, f->bvec,
				 f->nr_bvec, len);
	if (!err && !tern_rdma_sq_take(tl, op->wrs))
		err = -EAGAIN;
	if (err) {
		tern_rdma_op_free(tl, op);
		return ERR_PTR(err);
	}
	err = tern_rdma_rw_post(tl, op);
	if (err)
		return ERR_PTR(err);	/* shutdown frees the op */
	TERN_RDMA_STAT(rdma_writes, 1);
	TERN_RDMA_STAT(rdma_write_bytes, len);
	return op;
}

/* Post the READs of waiting pulls while the send queue has room. */
static int tern_rdma_pull_post_waiting(struct tern_rdma_lane *tl)
{
	struct tern_rdma_op *op, *tmp;
	int err;

	list_for_each_entry_safe(op, tmp, &tl->pull_wait, wait) {
		if (!tern_rdma_sq_take(tl, op->wrs))
			return 0;
		list_del_init(&op->wait);
		err = tern_rdma_rw_post(tl, op);
		if (err)
			return err;
		TERN_RDMA_STAT(rdma_reads, 1);
		TERN_RDMA_STAT(rdma_read_bytes, op->len);
	}
	return 0;
}

static int tern_rdma_pull(struct tern_lane *lane, struct tern_srv_req *sreq,
			  const struct bio_vec *bvec, unsigned int nr_bvec)
{
	struct tern_rdma_lane *tl = lane->tpriv;
	struct tern_rdma_op *op;
	int err;

	op = tern_rdma_op_alloc(tl, TERN_RDMA_OP_PULL, GFP_NOIO);
	if (!op)
		return -ENOMEM;
	op->dir = DMA_FROM_DEVICE;
	err = tern_rdma_rw_build(tl, op, sreq->rdesc, sreq->nr_rdesc, bvec,
				 nr_bvec, sreq->data_len);
	if (err) {
		tern_rdma_op_free(tl, op);
		return err;
	}
	op->sreq = sreq;	/* ours from here on */
	list_add_tail(&op->wait, &tl->pull_wait);
	err = tern_rdma_pull_post_waiting(tl);
	if (err)
		tern_lane_error(lane, err);
	return 0;
}

/* Finish completed ops and start waiting ones. Return: 1 if any, 0, <0. */
static int tern_rdma_ops_step(struct tern_rdma_lane *tl)
{
	struct tern_rdma_op *op, *tmp;
	struct tern_srv_req *sreq;
	LIST_HEAD(done);
	int status, ret;

	/* a completion adding one after this look leaves a note: see wake */
	if (!list_empty(&tl->op_done)) {
		spin_lock_bh(&tl->lock);
		list_splice_init(&tl->op_done, &done);
		spin_unlock_bh(&tl->lock);
	}
	list_for_each_entry_safe(op, tmp, &done, done) {
		list_del_init(&op->done);
		if (op->kind == TERN_RDMA_OP_PULL) {
			sreq = op->sreq;
			status = op->status;
			tern_rdma_op_free(tl, op);
			tern_srv_req_pulled(sreq, status);
			continue;
		}
		/* REG after its LOCAL_INV, PUSH after its SEND */
		if (op->held)
			tern_lane_tx_done(tl->lane, op->frame);
		tern_rdma_op_free(tl, op);
	}
	ret = tern_rdma_pull_post_waiting(tl);
	if (ret)
		return ret;
	return !list_empty(&done);
}

/*
 * Requester: the reply to a request is complete. If we registered its
 * buffer, it must die before the request completes: the peer invalidated
 * the first MR with its SEND (checked to be ours), LOCAL_INV the rest.
 * A SEND_WITH_INV ends with the reply it invalidates for (the sender
 * stops filling the SEND there), so the invalidation is that reply's
 * only if the reply ends the message: replies to inline requests may
 * come before it in the same SEND.
 */
static int tern_rdma_reply_seen(struct tern_rdma_lane *tl)
{
	struct tern_lane_rx *rx = &tl->lane->rx;
	bool remote = le16_to_cpu(rx->hdr.flags) & TERN_WIRE_F_REMOTE;
	bool inv = tl->rx_inv && tl->rx_msg_end;
	u64 tid = le64_to_cpu(rx->hdr.tid);
	struct tern_rdma_op *op = NULL, *it;
	unsigned int i, first = 0, n;
	int err;

	list_for_each_entry(it, &tl->regs, wait) {
		if (it->tid == tid) {
			op = it;
			break;
		}
	}
	if (!op) {
		if (remote || inv)
			return tern_rdma_proto_err(tl, "reply to tid %llu: buffer not ours",
						   tid);
		return 0;
	}
	if (remote ? op->dir != DMA_FROM_DEVICE :
		     op->dir == DMA_FROM_DEVICE && rx->data_len)
		return tern_rdma_proto_err(tl, "reply to tid %llu does not match its registration",
					   tid);
	if (inv) {
		if (tl->rx_inv_rkey != op->mr[0]->rkey)
			return tern_rdma_proto_err(tl, "rkey 0x%x invalidated, not tid %llu's",
						   tl->rx_inv_rkey, tid);
		tl->rx_inv = false;
		first = 1;
		TERN_RDMA_STAT(remote_invalidates, 1);
	}
	list_del_init(&op->wait);
	n = op->nr_mr - first;
	tern_rdma_sq_return(tl, op->nr_mr - n);	/* reserved, not needed */
	if (!n) {
		tern_lane_tx_done(tl->lane, op->frame);
		tern_rdma_op_free(tl, op);
		return 0;
	}
	op->wrs = n;
	for (i = first; i < op->nr_mr; i++) {
		struct ib_send_wr wr = {};
		bool last = i == op->nr_mr - 1;

		wr.opcode = IB_WR_LOCAL_INV;
		wr.ex.invalidate_rkey = op->mr[i]->rkey;
		wr.wr_cqe = last ? &op->cqe : &tl->err_cqe;
		wr.send_flags = last ? IB_SEND_SIGNALED : 0;
		err = ib_post_send(tl->cm_id->qp, &wr, NULL);
		if (err)
			return err;
	}
	TERN_RDMA_STAT(local_invalidates, n);
	return 0;
}

/* Run the core through every frame part that needs no more bytes. */
static int tern_rdma_rx_settle(struct tern_rdma_lane *tl)
{
	struct tern_lane_rx *rx = &tl->lane->rx;
	int ret;

	for (;;) {
		switch (tl->rx_state) {
		case TERN_RDMA_RX_HDR:
			return 0;
		case TERN_RDMA_RX_FRONT:
			if (iov_iter_count(&rx->front_iter))
				return 0;
			ret = tern_lane_rx_front(tl->lane);
			if (ret)
				return ret;
			tl->rx_state = TERN_RDMA_RX_DATA;
			break;
		case TERN_RDMA_RX_DATA:
			if (iov_iter_count(&rx->data_iter))
				return 0;
			tl->rx_state = TERN_RDMA_RX_HDR;
			if (rx->hdr.type == TERN_WIRE_REPLY) {
				ret = tern_rdma_reply_seen(tl);
				if (ret)
					return ret;
			}
			return tern_lane_rx_done(tl->lane);
		}
	}
}

/* Feed @len stream bytes at @p to the core, in order. */
static int tern_rdma_rx_feed(struct tern_rdma_lane *tl, const u8 *p,
			     size_t len)
{
	struct tern_lane_rx *rx = &tl->lane->rx;
	struct iov_iter *iter;
	size_t n;
	int ret;

	while (len) {
		if (tl->rx_state == TERN_RDMA_RX_HDR) {
			n = min(len, sizeof(rx->hdr) - tl->rx_hdr_off);
			memcpy((u8 *)&rx->hdr + tl->rx_hdr_off, p, n);
			tl->rx_hdr_off += n;
			if (tl->rx_hdr_off == sizeof(rx->hdr)) {
				tl->rx_hdr_off = 0;
				ret = tern_lane_rx_header(tl->lane);
				if (ret)
					return ret;
				tl->rx_state = TERN_RDMA_RX_FRONT;
			}
		} else {
			iter = tl->rx_state == TERN_RDMA_RX_FRONT ?
			       &rx->front_iter : &rx->data_iter;
			n = min(len, iov_iter_count(iter));
			if (copy_to_iter(p, n, iter) != n)
				return -EFAULT;
		}
		p += n;
		len -= n;
		tl->rx_msg_end = !len;
		ret = tern_rdma_rx_settle(tl);
		if (ret)
			return ret;
	}
	return 0;
}

/* Validate one received message, take its credits, feed its payload. */
static int tern_rdma_rx_msg(struct tern_rdma_lane *tl,
			    struct tern_rdma_buf *buf)
{
	const struct tern_rdma_msg_hdr *h = buf->addr;
	u32 credits;

	if (buf->len < sizeof(*h) || buf->len > tl->buf_size)
		return tern_rdma_proto_err(tl, "message of %u bytes", buf->len);
	if (le16_to_cpu(h->magic) != TERN_RDMA_MSG_MAGIC || h->flags ||
	    h->reserved)
		return tern_rdma_proto_err(tl, "bad message header %*ph",
					   (int)sizeof(*h), h);
	credits = le16_to_cpu(h->credits);
	if (credits > tl->peer_recv - tl->tx_credits)
		return tern_rdma_proto_err(tl, "%u credits granted, %u held of %u",
					   credits, tl->tx_credits,
					   tl->peer_recv);
	tl->tx_credits += credits;

	switch (h->type) {
	case TERN_RDMA_MSG_CREDIT:
		if (buf->len != sizeof(*h) || !credits)
			return tern_rdma_proto_err(tl, "bad credit message");
		return 0;
	case TERN_RDMA_MSG_DATA:
		if (buf->len == sizeof(*h))
			return tern_rdma_proto_err(tl, "empty data message");
		tern_lane_rx_progress(tl->lane);
		return tern_rdma_rx_feed(tl, (const u8 *)(h + 1),
					 buf->len - sizeof(*h));
	}
	return tern_rdma_proto_err(tl, "message type %u", h->type);
}

/* Return: 1 if a message was consumed, 0 if none is waiting, <0. */
static int tern_rdma_recv_step(struct tern_rdma_lane *tl)
{
	struct tern_rdma_buf *buf, *next;
	struct llist_node *done;
	int ret;

	/* every message that arrived since the last look, oldest first */
	if (list_empty(&tl->rx_ready) && !llist_empty(&tl->rx_done)) {
		done = llist_reverse_order(llist_del_all(&tl->rx_done));
		llist_for_each_entry_safe(buf, next, done, rx_node)
			list_add_tail(&buf->entry, &tl->rx_ready);
	}
	buf = list_first_entry_or_null(&tl->rx_ready, struct tern_rdma_buf,
				       entry);
	if (!buf)
		return 0;
	list_del_init(&buf->entry);

	ib_dma_sync_single_for_cpu(tl->dev, buf->dma, tl->buf_size,
				   DMA_FROM_DEVICE);
	tl->rx_inv = buf->inv;
	tl->rx_inv_rkey = buf->inv_rkey;
	ret = tern_rdma_rx_msg(tl, buf);
	if (ret)
		return ret;
	/* SEND_WITH_INV comes only with the end of a reply */
	if (tl->rx_inv)
		return tern_rdma_proto_err(tl, "rkey 0x%x invalidated without a reply",
					   tl->rx_inv_rkey);
	ret = tern_rdma_post_recv(tl, buf);
	if (ret)
		return ret;
	tl->grant_pending++;
	return 1;
}

static bool tern_rdma_frame_sent(struct tern_rdma_lane *tl)
{
	struct tern_frame *f = tl->tx_frame;

	return tl->tx_off == sizeof(f->hdr) + tern_frame_front_len(f) &&
	       !iov_iter_count(&tl->tx_data);
}

/* Copy up to @room bytes of the current frame to @dst. Return: copied. */
static ssize_t tern_rdma_copy_frame(struct tern_rdma_lane *tl, u8 *dst,
				    size_t room)
{
	struct tern_frame *f = tl->tx_frame;
	size_t hlen = sizeof(f->hdr);
	size_t head = hlen + tern_frame_front_len(f);
	size_t copied = 0, n;
	const u8 *src;

	while (tl->tx_off < head && copied < room) {
		if (tl->tx_off < hlen) {
			src = (const u8 *)&tl->tx_hdr + tl->tx_off;
			n = hlen - tl->tx_off;
		} else {
			src = (const u8 *)f->front + (tl->tx_off - hlen);
			n = head - tl->tx_off;
		}
		n = min(n, room - copied);
		memcpy(dst + copied, src, n);
		tl->tx_off += n;
		copied += n;
	}
	n = min(room - copied, iov_iter_count(&tl->tx_data));
	if (n) {
		if (copy_from_iter(dst + copied, n, &tl->tx_data) != n)
			return -EFAULT;
		copied += n;
	}
	return copied;
}

/*
 * The SEND in @buf is over (completed, flushed or never posted): unmap
 * the pages it took data from and give their frames back to the core.
 */
static void tern_rdma_refs_put(struct tern_rdma_lane *tl,
			       struct tern_rdma_buf *buf)
{
	const struct tern_rdma_ref *ref;
	unsigned int i, j;

	for (i = 0; i < buf->nr_refs; i++) {
		ref = &buf->refs[i];
		for (j = ref->first_sge; j < ref->first_sge + ref->nr_sge; j++)
			ib_dma_unmap_page(tl->dev, buf->sge[j].addr,
					  buf->sge[j].length, DMA_TO_DEVICE);
		tern_lane_tx_done(tl->lane, ref->frame);
	}
	buf->nr_refs = 0;
}

/* Let go of the frames of every SEND completed since the last look. */
static void tern_rdma_tx_release(struct tern_rdma_lane *tl)
{
	/* acquire pairs with the release in tern_rdma_send_done() */
	unsigned int completed = smp_load_acquire(&tl->tx_completed);

	while (tl->tx_released != completed)
		tern_rdma_refs_put(tl, &tl->sbufs[tl->tx_released++ %
						  tl->nr_sbufs]);
}

/* Send buffers free: their SEND completed and its frames are let go. */
static unsigned int tern_rdma_tx_free(struct tern_rdma_lane *tl)
{
	bool stalled;

	tern_rdma_tx_release(tl);
	if (tl->tx_posted - tl->tx_released < tl->nr_sbufs)
		return tl->nr_sbufs - (tl->tx_posted - tl->tx_released);
	/* a stale count is low, never high: lock only to stall */
	spin_lock_bh(&tl->lock);
	stalled = tl->tx_completed == tl->tx_released;
	if (stalled)
		tl->tx_stalled = true;	/* wake on the next completion */
	spin_unlock_bh(&tl->lock);
	if (stalled)
		return 0;
	tern_rdma_tx_release(tl);
	return tl->nr_sbufs - (tl->tx_posted - tl->tx_released);
}

/*
 * Should tl->tx_frame's inline data go into the SEND from its own pages
 * rather than be copied? Only if it is big enough to be worth mapping,
 * and the whole frame fits one SEND: then the frame goes in one piece
 * and is held until that SEND completes.
 */
static void tern_rdma_ref_plan(struct tern_rdma_lane *tl,
			       const struct tern_frame *f)
{
	size_t head = sizeof(f->hdr) + tern_frame_front_len(f);
	u32 len = tern_frame_data_len(f), left = len;
	unsigned int i, sges = 0;

	tl->tx_ref = false;
	if (len <= READ_ONCE(inline_copy_max) ||
	    head + len > tl->tx_chunk - sizeof(struct tern_rdma_msg_hdr))
		return;
	for (i = 0; i < f->nr_bvec && left; i++) {
		if (!f->bvec[i].bv_len)
			continue;
		left -= min(left, f->bvec[i].bv_len);
		sges++;
	}
	/* and the buffer's pieces: message header, head, what follows */
	if (left || sges + 3 > tl->tx_max_sge)
		return;
	tl->tx_ref = true;
	tl->tx_ref_sges = sges;
}

/* @n more bytes of the SEND come from its buffer, at @off. */
static void tern_rdma_sge_buf(struct tern_rdma_lane *tl,
			      struct tern_rdma_buf *buf, size_t off, size_t n)
{
	struct ib_sge *sge;

	if (!n)
		return;
	if (buf->sge_open) {
		buf->sge[buf->nr_sge - 1].length += n;
		return;
	}
	sge = &buf->sge[buf->nr_sge++];
	sge->addr = buf->dma + off;
	sge->length = n;
	sge->lkey = tl->pd->local_dma_lkey;
	buf->sge_open = true;
}

/*
 * Put all of tl->tx_frame into the SEND of @buf, its header and front
 * copied at *@off, its data as SEND pieces of its own pages; *@len is the
 * message length so far. The frame is held in buf->refs. If a page will
 * not map, the data is left for copying (tl->tx_ref cleared). Return: 1
 * when the frame is in, 0 when it does not fit beside what is there.
 */
static int tern_rdma_ref_frame(struct tern_rdma_lane *tl,
			       struct tern_rdma_buf *buf, size_t *off,
			       size_t *len)
{
	struct tern_frame *f = tl->tx_frame;
	size_t head = sizeof(f->hdr) + tern_frame_front_len(f);
	u32 data = iov_iter_count(&tl->tx_data), left = data;
	const struct bio_vec *bv;
	struct tern_rdma_ref *ref;
	unsigned int i, first;
	struct ib_sge *sge;
	u32 l, pos;
	u64 dma;

	if (head + data > tl->tx_chunk - *len ||
	    buf->nr_sge + tl->tx_ref_sges + 2 > tl->tx_max_sge ||
	    buf->nr_refs == TERN_RDMA_SEND_REFS)
		return 0;
	/* room for exactly the head: nothing of the data is copied */
	tern_rdma_copy_frame(tl, (u8 *)buf->addr + *off, head);
	tern_rdma_sge_buf(tl, buf, *off, head);
	*off += head;
	*len += head;

	first = buf->nr_sge;
	for (i = 0; i < f->nr_bvec && left; i++) {
		bv = &f->bvec[i];
		l = min(left, bv->bv_len);
		if (!l)
			continue;
		pos = bv->bv_offset;
		dma = ib_dma_map_page(tl->dev, bv->bv_page + (pos >> PAGE_SHIFT),
				      offset_in_page(pos), l, DMA_TO_DEVICE);
		if (ib_dma_mapping_error(tl->dev, dma))
			goto unmap;
		sge = &buf->sge[buf->nr_sge++];
		sge->addr = dma;
		sge->length = l;
		sge->lkey = tl->pd->local_dma_lkey;
		left -= l;
	}
	buf->sge_open = false;
	iov_iter_advance(&tl->tx_data, data);
	*len += data;
	ref = &buf->refs[buf->nr_refs++];
	ref->frame = f;
	ref->first_sge = first;
	ref->nr_sge = buf->nr_sge - first;
	TERN_RDMA_STAT(inline_refs, 1);
	TERN_RDMA_STAT(inline_ref_bytes, data);
	return 1;

unmap:
	while (buf->nr_sge > first) {
		sge = &buf->sge[--buf->nr_sge];
		ib_dma_unmap_page(tl->dev, sge->addr, sge->length,
				  DMA_TO_DEVICE);
	}
	tl->tx_ref = false;
	return 1;
}

/*
 * Set up the transmission of tl->tx_frame: the header as it goes on the
 * wire and the data iterator; register a request's buffer or write a
 * reply's data first when they move by RDMA. Return: 0, -EAGAIN (send
 * queue full, try again later) or another negative errno.
 */
static int tern_rdma_tx_prepare(struct tern_rdma_lane *tl, unsigned int *wrs)
{
	struct tern_frame *f = tl->tx_frame;
	struct tern_rdma_op *op = NULL;
	size_t len;

	if (f->hdr.type == TERN_WIRE_REQUEST) {
		op = tern_rdma_reg_prepare(tl, f);
	} else if (f->nr_rdesc &&
		   (le16_to_cpu(f->hdr.flags) & TERN_WIRE_F_REMOTE)) {
		/* rdma_rw_ctx_init() may sleep: io_work writes the data */
		if (tl->io_atomic) {
			/* a note: the submitter's leaving kicks io_work */
			set_bit(TERN_OWN_MISSED, &tl->io_flags);
			return -EAGAIN;
		}
		op = tern_rdma_push_prepare(tl, f);
	}
	if (IS_ERR(op))
		return PTR_ERR(op);

	tl->tx_off = 0;
	tl->tx_op = op;
	tl->tx_hdr = f->hdr;
	if (f->hdr.type == TERN_WIRE_REPLY &&
	    unlikely(READ_ONCE(inject_bad_reply_every) ||
		     READ_ONCE(inject_long_reply_every)))
		tern_rdma_inject_reply(tl);
	if (op && op->kind == TERN_RDMA_OP_REG) {
		*wrs += op->nr_mr;
		len = op->nr_mr * sizeof(op->desc[0]);
		tl->tx_hdr.flags |= cpu_to_le16(TERN_WIRE_F_REMOTE);
		tl->tx_hdr.data_len = cpu_to_le32(len);
		tern_wire_hdr_seal(&tl->tx_hdr);
		tl->tx_kvec.iov_base = op->desc;
		tl->tx_kvec.iov_len = len;
		iov_iter_kvec(&tl->tx_data, ITER_SOURCE, &tl->tx_kvec, 1, len);
	} else {
		iov_iter_bvec(&tl->tx_data, ITER_SOURCE, f->bvec, f->nr_bvec,
			      tern_frame_data_len(f));
	}
	tl->tx_ref = false;
	if (!op)
		tern_rdma_ref_plan(tl, f);
	tl->tx_prepared = true;
	return 0;
}

/* Memory for buffers @from to @to - 1 of @bufs; false if out of it. */
static bool tern_rdma_fill_bufs(struct tern_rdma_lane *tl,
				struct tern_rdma_buf *bufs, unsigned int from,
				unsigned int to, enum dma_data_direction dir,
				gfp_t gfp)
{
	unsigned int i;

	for (i = from; i < to; i++) {
		struct tern_rdma_buf *buf = &bufs[i];

		buf->addr = kmalloc(tl->buf_size, gfp);
		if (!buf->addr)
			return false;
		buf->dma = ib_dma_map_single(tl->dev, buf->addr, tl->buf_size,
					     dir);
		if (ib_dma_mapping_error(tl->dev, buf->dma))
			return false;
		buf->mapped = true;
	}
	return true;
}

/*
 * An accepted lane in handshake holds TERN_RDMA_PRE_BUFS buffers each way,
 * enough for the HELLO and its answer, though the peer was promised
 * recv_depth: it sends nothing else before the HELLO_ACK arrives. When
 * the core answers with a HELLO_ACK that lets the lane in, the lane gets
 * the rest, and the receive buffers are posted before that answer is.
 * With authentication the lane is let in by the AUTH_ACK, and the two
 * buffers carry HELLO and AUTH one way, HELLO_ACK and AUTH_ACK the other.
 * A refusal goes out of the buffers there are.
 */
static int tern_rdma_grow(struct tern_rdma_lane *tl, const struct tern_frame *f)
{
	gfp_t gfp = tern_rdma_gfp(tl);
	unsigned int i;
	int err;

	if (!tern_frame_admits(f))
		return 0;
	if (!tern_rdma_fill_bufs(tl, tl->sbufs, TERN_RDMA_PRE_BUFS,
				 tl->nr_sbufs, DMA_TO_DEVICE, gfp) ||
	    !tern_rdma_fill_bufs(tl, tl->rbufs, TERN_RDMA_PRE_BUFS,
				 tl->nr_rbufs, DMA_FROM_DEVICE, gfp))
		return -ENOMEM;
	for (i = TERN_RDMA_PRE_BUFS; i < tl->nr_rbufs; i++) {
		err = tern_rdma_post_recv(tl, &tl->rbufs[i]);
		if (err)
			return err;
	}
	tl->grown = true;
	return 0;
}

/* Return: 1 if a message was posted, 0 if nothing can be sent now, <0. */
static int tern_rdma_send_step(struct tern_rdma_lane *tl)
{
	struct tern_rdma_buf *buf;
	struct tern_rdma_msg_hdr *h;
	struct tern_rdma_op *op;
	struct tern_frame *f;
	size_t off = sizeof(*h);	/* bytes in the buffer */
	size_t len = sizeof(*h);	/* bytes in the message */
	struct ib_send_wr wr = {};
	unsigned int free;
	bool inv = false;
	bool signal;
	u32 inv_rkey = 0;
	ssize_t n;
	int ret;

	/* before anything else: requests may wait for their frames */
	tern_rdma_tx_release(tl);
	/* The last credit only goes with a grant: see the top comment. */
	if (!tl->tx_credits || (tl->tx_credits == 1 && !tl->grant_pending)) {
		if (tl->tx_frame || tern_lane_tx_pending(tl->lane))
			TERN_RDMA_STAT(credit_stalls, 1);
		return 0;
	}
	free = tern_rdma_tx_free(tl);
	if (!free)
		return 0;

	buf = &tl->sbufs[tl->tx_posted % tl->nr_sbufs];
	if (unlikely(!buf->addr))
		return 0;	/* accepted, in handshake: see tern_rdma_grow() */
	buf->wrs = 0;
	buf->op = NULL;
	buf->sge[0].addr = buf->dma;
	buf->sge[0].length = sizeof(*h);
	buf->sge[0].lkey = tl->pd->local_dma_lkey;
	buf->nr_sge = 1;
	buf->sge_open = true;
	h = buf->addr;
	while (len < tl->tx_chunk) {
		if (!tl->tx_frame) {
			f = tern_lane_tx_next(tl->lane);
			if (!f)
				break;
			tl->tx_frame = f;
			tl->tx_prepared = false;
			if (unlikely(!tl->grown)) {
				ret = tern_rdma_grow(tl, f);
				if (ret)
					goto unposted;
			}
		}
		if (!tl->tx_prepared) {
			ret = tern_rdma_tx_prepare(tl, &buf->wrs);
			if (ret == -EAGAIN)
				break;
			if (ret)
				goto unposted;
		}
		if (tl->tx_ref && !tl->tx_off &&
		    !tern_rdma_ref_frame(tl, buf, &off, &len)) {
			if (len > sizeof(*h))
				break;	/* the next SEND takes it whole */
			tl->tx_ref = false;
		}
		if (!tl->tx_ref) {
			n = tern_rdma_copy_frame(tl, (u8 *)buf->addr + off,
						 tl->tx_chunk - len);
			if (n < 0) {
				ret = n;
				goto unposted;
			}
			tern_rdma_sge_buf(tl, buf, off, n);
			off += n;
			len += n;
		}
		if (!tern_rdma_frame_sent(tl))
			continue;
		f = tl->tx_frame;
		op = tl->tx_op;
		tl->tx_frame = NULL;
		tl->tx_op = NULL;
		if (f->nr_rdesc) {
			/* the reply kills the requester's rkey */
			inv = true;
			inv_rkey = le32_to_cpu(f->rdesc[0].rkey);
		}
		if (tl->tx_ref) {
			/* buf->refs holds it until the SEND completes */
		} else if (!op) {
			tern_lane_tx_done(tl->lane, f);
		} else {
			op->held = true;
			if (op->kind == TERN_RDMA_OP_REG)
				list_add_tail(&op->wait, &tl->regs);
			else
				buf->op = op;	/* done with this SEND */
		}
		if (inv)
			break;	/* one invalidation per SEND */
	}

	if (len == sizeof(*h)) {
		if (tl->grant_pending < tl->grant_threshold)
			return 0;
		h->type = TERN_RDMA_MSG_CREDIT;
	} else {
		h->type = TERN_RDMA_MSG_DATA;
	}
	h->magic = cpu_to_le16(TERN_RDMA_MSG_MAGIC);
	h->flags = 0;
	h->credits = cpu_to_le16(tl->grant_pending);
	h->reserved = 0;

	wr.wr_cqe = &buf->cqe;
	wr.sg_list = buf->sge;
	wr.num_sge = buf->nr_sge;
	wr.opcode = inv ? IB_WR_SEND_WITH_INV : IB_WR_SEND;
	wr.ex.invalidate_rkey = inv_rkey;
	/*
	 * Most SENDs go unsignaled: the next signaled one reaps them. Signal
	 * the ones with something to finish (an op, registration WRs whose
	 * queue entries come back) and, every tx_signal_every SENDs or once
	 * few send buffers are left, one more, so that whatever stalls for
	 * want of buffers or entries has a completion coming.
	 */
	signal = buf->op || buf->wrs || buf->nr_refs ||
		 free <= tl->tx_signal_every ||
		 tl->tx_unsignaled + 1 >= tl->tx_signal_every;
	wr.send_flags = signal ? IB_SEND_SIGNALED : 0;
	buf->seq = tl->tx_posted;
	ib_dma_sync_single_for_device(tl->dev, buf->dma, off, DMA_TO_DEVICE);
	ret = ib_post_send(tl->cm_id->qp, &wr, NULL);
	if (ret)
		goto unposted;
	if (signal) {
		tl->tx_unsignaled = 0;
	} else {
		tl->tx_unsignaled++;
		TERN_RDMA_STAT(unsignaled_sends, 1);
	}
	tl->tx_posted++;
	tl->tx_credits--;
	tl->grant_pending = 0;
	return 1;

unposted:
	tern_rdma_refs_put(tl, buf);
	return ret;
}

/* Take the lane's I/O, or leave a note for its holder. */
static bool tern_rdma_io_enter(struct tern_rdma_lane *tl, bool full)
{
	if (!tern_own_enter(&tl->io_flags))
		return false;
	/* a full run does whatever any note was for */
	if (full)
		tern_own_take_note(&tl->io_flags);
	return true;
}

/*
 * Let go of the lane's I/O. Return: true when a full runner (@full)
 * holds it again because someone left a note: run again.
 */
static bool tern_rdma_io_leave(struct tern_rdma_lane *tl, bool full)
{
	if (!tern_own_leave(&tl->io_flags))
		return false;
	if (full)
		return tern_rdma_io_enter(tl, true);
	if (tern_own_take_note(&tl->io_flags))
		tern_rdma_kick_tl(tl);
	return false;
}

static void tern_rdma_fail(struct tern_rdma_lane *tl, int err)
{
	tl->failed = true;
	tern_lane_error(tl->lane, err);
}

static void tern_rdma_io_steps(struct tern_rdma_lane *tl)
{
	unsigned int budget = READ_ONCE(io_budget) ?: 1;
	int received, sent;

	if (tl->failed)
		return;
	do {
		int done = tern_rdma_ops_step(tl);

		if (done < 0) {
			sent = done;
			goto fail;
		}
		received = tern_rdma_recv_step(tl);
		if (received < 0) {
			sent = received;
			goto fail;
		}
		sent = tern_rdma_send_step(tl);
		if (sent < 0)
			goto fail;
		if (!sent && !received && !done)
			return;
	} while (--budget);
	/* yield, then go on */
	tern_rdma_kick_tl(tl);
	return;

fail:
	tern_rdma_fail(tl, sent);
}

/*
 * With TERN_OWN_BUSY held: run the lane's I/O, and again for the notes
 * left meanwhile, but a few times at most: then io_work goes on, so a
 * completion handler cannot be kept from the CQ's other lanes.
 */
static void tern_rdma_io_run(struct tern_rdma_lane *tl)
{
	unsigned int rounds = 4;

	do {
		tern_rdma_io_steps(tl);
		if (!--rounds) {
			clear_bit_unlock(TERN_OWN_BUSY, &tl->io_flags);
			tern_rdma_kick_tl(tl);
			return;
		}
	} while (tern_rdma_io_leave(tl, true));
}

static void tern_rdma_io_work(struct work_struct *work)
{
	struct tern_rdma_lane *tl = container_of(work, struct tern_rdma_lane,
						 io_work);

	if (tern_rdma_io_enter(tl, true))
		tern_rdma_io_run(tl);
}

/*
 * Both flags change under tl->lock but are read here without it: a
 * handler serialises with teardown through the CQ (ib_drain_qp() waits
 * for it), a submitter through the core's count of pushers.
 */
static bool tern_rdma_io_live(struct tern_rdma_lane *tl)
{
	return READ_ONCE(tl->ready) && !READ_ONCE(tl->stopped);
}

/*
 * Completion handlers (a work item of the CQ, process context) call this
 * when their completion is news for the lane: they run the lane's I/O
 * themselves, as nvmet-rdma handles commands in its CQ's work item, which
 * saves waking io_work and a context switch per batch of completions.
 * Handlers run one completion at a time, so what a handler sends goes
 * out at once rather than in batches: RDMA's order needs no more.
 */
static void tern_rdma_wake(struct tern_rdma_lane *tl)
{
	if (!tern_rdma_io_live(tl) || !tern_rdma_io_enter(tl, true))
		return;
	TERN_RDMA_STAT(handler_runs, 1);
	tern_rdma_io_run(tl);
}

/*
 * A submitter queued frames: post them from its context, which may be
 * atomic (queue_rq), unless someone else runs the lane's I/O: saves a
 * wakeup of io_work, and the context switch into it, per burst of
 * requests. Only sending happens here and allocations may not sleep: a
 * registration without memory sends its data inline, and a reply whose
 * data goes by RDMA WRITE (rdma_rw_ctx_init() may sleep) waits for
 * io_work.
 */
static void tern_rdma_push(struct tern_lane *lane, bool can_sleep)
{
	struct tern_rdma_lane *tl = lane->tpriv;
	unsigned int sends = 0;
	int ret;

	if (!tern_rdma_io_live(tl))
		return;
	if (!tern_rdma_io_enter(tl, false))
		return;
	if (!tl->failed) {
		tl->io_atomic = true;
		while ((ret = tern_rdma_send_step(tl)) > 0)
			sends++;
		tl->io_atomic = false;
		if (sends)
			tern_lane_count_submitter_sends(lane, sends);
		if (ret < 0)
			tern_rdma_fail(tl, ret);
	}
	tern_rdma_io_leave(tl, false);
}

static void tern_rdma_free_bufs(struct tern_rdma_lane *tl,
				struct tern_rdma_buf *bufs, unsigned int nr,
				enum dma_data_direction dir)
{
	unsigned int i;

	if (!bufs)
		return;
	for (i = 0; i < nr; i++) {
		if (bufs[i].mapped)
			ib_dma_unmap_single(tl->dev, bufs[i].dma, tl->buf_size,
					    dir);
		kfree(bufs[i].addr);
	}
	kfree(bufs);
}

/* @nr buffers, of which the first @fill have memory. */
static struct tern_rdma_buf *tern_rdma_alloc_bufs(struct tern_rdma_lane *tl,
						  unsigned int nr,
						  unsigned int fill,
						  enum dma_data_direction dir,
						  void (*done)(struct ib_cq *,
							       struct ib_wc *))
{
	struct tern_rdma_buf *bufs;
	unsigned int i;

	bufs = kcalloc(nr, sizeof(*bufs), GFP_KERNEL);
	if (!bufs)
		return NULL;
	for (i = 0; i < nr; i++) {
		bufs[i].tl = tl;
		bufs[i].cqe.done = done;
		INIT_LIST_HEAD(&bufs[i].entry);
	}
	if (tern_rdma_fill_bufs(tl, bufs, 0, fill, dir, GFP_KERNEL))
		return bufs;
	tern_rdma_free_bufs(tl, bufs, nr, dir);
	return NULL;
}

/*
 * A fatal QP event, in process context: the lane's lock may be taken
 * here, not in the event handler.
 */
static void tern_rdma_qp_err_work(struct work_struct *work)
{
	tern_rdma_lane_fail(container_of(work, struct tern_rdma_lane,
					 qp_err_work), -EIO);
}

/*
 * QP async events. Drivers may call this in atomic context, even from
 * hard interrupts (an event queue's handler), where tl->lock, a _bh lock,
 * must not be taken: fatal events are handed to qp_err_work. Its queue
 * entries also complete as flushed, but not necessarily soon, and the
 * event says why.
 */
static void tern_rdma_qp_event(struct ib_event *ev, void *context)
{
	struct tern_rdma_lane *tl = context;

	switch (ev->event) {
	case IB_EVENT_COMM_EST:
		/*
		 * Data arrived before the RTU, which may be lost: tell the CM
		 * the connection is up, as nvmet-rdma and iser do, or the
		 * passive side times out a working connection.
		 */
		rdma_notify(tl->cm_id, ev->event);
		break;
	case IB_EVENT_QP_FATAL:
	case IB_EVENT_QP_REQ_ERR:
	case IB_EVENT_QP_ACCESS_ERR:
	case IB_EVENT_PATH_MIG_ERR:
		TERN_RDMA_STAT(qp_fatal_events, 1);
		pr_warn_ratelimited("%s: QP event %s (%d)\n",
				    tern_lane_name(tl->lane),
				    ib_event_msg(ev->event), ev->event);
		queue_work(tern_rdma_wq, &tl->qp_err_work);
		break;
	default:
		pr_debug("%s: QP event %s (%d)\n", tern_lane_name(tl->lane),
			 ib_event_msg(ev->event), ev->event);
		break;
	}
}

static struct tern_rdma_lane *tern_rdma_lane_alloc(void)
{
	struct tern_rdma_lane *tl;

	tl = kzalloc(sizeof(*tl), GFP_KERNEL);
	if (!tl)
		return NULL;
	tl->kind = TERN_RDMA_CTX_LANE;
	spin_lock_init(&tl->lock);
	init_llist_head(&tl->rx_done);
	INIT_LIST_HEAD(&tl->rx_ready);
	INIT_LIST_HEAD(&tl->op_done);
	INIT_LIST_HEAD(&tl->mrs);
	INIT_LIST_HEAD(&tl->ops);
	INIT_LIST_HEAD(&tl->regs);
	INIT_LIST_HEAD(&tl->pull_wait);
	tl->err_cqe.done = tern_rdma_err_done;
	INIT_WORK(&tl->io_work, tern_rdma_io_work);
	INIT_WORK(&tl->qp_err_work, tern_rdma_qp_err_work);
	init_completion(&tl->cm_done);
	tl->rx_state = TERN_RDMA_RX_HDR;
	tl->buf_size = clamp(READ_ONCE(buf_size), TERN_RDMA_MIN_BUF,
			     TERN_RDMA_MAX_BUF);
	tl->nr_rbufs = clamp(READ_ONCE(recv_depth), TERN_RDMA_MIN_RECV,
			     TERN_RDMA_MAX_DEPTH);
	tl->nr_sbufs = clamp(READ_ONCE(send_depth), 2U, TERN_RDMA_MAX_DEPTH);
	tl->tx_signal_every = max(1U, tl->nr_sbufs / 4);
	return tl;
}

/*
 * PD, CQ, QP and buffers on the device the cm_id is bound to; receive
 * buffers posted. On failure everything created here is released again.
 */
static int tern_rdma_create_queue(struct tern_rdma_lane *tl)
{
	struct rdma_cm_id *id = tl->cm_id;
	struct ib_qp_init_attr attr = {};
	unsigned int i, nr_mrs, pre;
	int err;

	tl->dev = id->device;
	tl->port_num = id->port_num;
	/* a responder READs and WRITEs through rdma_rw, never registers */
	nr_mrs = tl->accepted ? 0 : READ_ONCE(mr_count);
	/* REG_MR + LOCAL_INV per MR, and READ/WRITE work requests */
	tl->sq_size = 2 * nr_mrs + clamp(READ_ONCE(rw_ctxs), 16U, 4096U);
	tl->sq_free = tl->sq_size;
	/* sends + receives, and one of each for ib_drain_qp() */
	tl->cq_size = tl->nr_sbufs + tl->sq_size + tl->nr_rbufs + 2;

	tl->pd = ib_alloc_pd(tl->dev, 0);
	if (IS_ERR(tl->pd)) {
		err = PTR_ERR(tl->pd);
		tl->pd = NULL;
		return err;
	}
	/*
	 * Workqueue polling: the handlers run the lane's I/O themselves
	 * (tern_rdma_wake()), which may sleep on the responder side.
	 */
	tl->cq = ib_cq_pool_get(tl->dev, tl->cq_size,
				READ_ONCE(cq_by_lane) ?
				tern_lane_index(tl->lane) : -1,
				IB_POLL_WORKQUEUE);
	if (IS_ERR(tl->cq)) {
		err = PTR_ERR(tl->cq);
		tl->cq = NULL;
		goto out_pd;
	}

	attr.event_handler = tern_rdma_qp_event;
	attr.qp_context = tl;
	attr.send_cq = tl->cq;
	attr.recv_cq = tl->cq;
	/* rdma_rw adds one WR per context to max_send_wr */
	attr.cap.max_send_wr = tl->nr_sbufs + 1 + 2 * nr_mrs;
	attr.cap.max_rdma_ctxs = tl->sq_size - 2 * nr_mrs;
	attr.port_num = tl->port_num;
	attr.cap.max_recv_wr = tl->nr_rbufs + 1;
	attr.cap.max_send_sge = min_t(u32, tl->dev->attrs.max_send_sge, 32);
	attr.cap.max_recv_sge = 1;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	err = rdma_create_qp(id, tl->pd, &attr);
	if (err)
		goto out_cq;
	tl->qp_created = true;
	tl->tx_max_sge = min_t(u32, attr.cap.max_send_sge, TERN_RDMA_SEND_SGE);

	/* FRWR for our own buffers; without it requests carry data inline */
	tl->mr_max_pages = min_t(u32, READ_ONCE(mr_pages),
				 tl->dev->attrs.max_fast_reg_page_list_len);
	if (nr_mrs && tl->mr_max_pages &&
	    (tl->dev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS)) {
		err = ib_mr_pool_init(id->qp, &tl->mrs, nr_mrs,
				      IB_MR_TYPE_MEM_REG, tl->mr_max_pages, 0);
		if (err)
			goto out_qp;
		tl->mr_pool = true;
	}

	err = -ENOMEM;
	tl->grown = !tl->accepted;
	pre = tl->accepted ? TERN_RDMA_PRE_BUFS : tl->nr_rbufs;
	tl->rbufs = tern_rdma_alloc_bufs(tl, tl->nr_rbufs, pre,
					 DMA_FROM_DEVICE, tern_rdma_recv_done);
	if (!tl->rbufs)
		goto out_qp;
	tl->sbufs = tern_rdma_alloc_bufs(tl, tl->nr_sbufs,
					 tl->accepted ? TERN_RDMA_PRE_BUFS :
							tl->nr_sbufs,
					 DMA_TO_DEVICE, tern_rdma_send_done);
	if (!tl->sbufs)
		goto out_qp;
	for (i = 0; i < pre; i++) {
		err = tern_rdma_post_recv(tl, &tl->rbufs[i]);
		if (err)
			goto out_qp;
	}
	return 0;

out_qp:
	/* Flush what was posted before the buffers go away. */
	ib_drain_qp(id->qp);
	if (tl->mr_pool)
		ib_mr_pool_destroy(id->qp, &tl->mrs);
	tl->mr_pool = false;
	rdma_destroy_qp(id);
	tl->qp_created = false;
	tern_rdma_free_bufs(tl, tl->sbufs, tl->nr_sbufs, DMA_TO_DEVICE);
	tern_rdma_free_bufs(tl, tl->rbufs, tl->nr_rbufs, DMA_FROM_DEVICE);
	tl->sbufs = NULL;
	tl->rbufs = NULL;
out_cq:
	ib_cq_pool_put(tl->cq, tl->cq_size);
	tl->cq = NULL;
out_pd:
	ib_dealloc_pd(tl->pd);
	tl->pd = NULL;
	return err;
}

/*
 * Tear down the queue; the cm_id stays. Nothing may be queued meanwhile.
 * Once the QP is drained the peer cannot reach our MRs any more: they go
 * back to the pool, and then the frames and requests of unfinished ops
 * go back to the core.
 */
static void tern_rdma_destroy_queue(struct tern_rdma_lane *tl)
{
	struct tern_rdma_op *op, *tmp;

	/* io_work posts; with ->stopped set nothing queues it again. */
	cancel_work_sync(&tl->io_work);
	if (tl->qp_created) {
		ib_drain_qp(tl->cm_id->qp);
		/* completed or flushed: the pages of every SEND are free */
		while (tl->tx_released != tl->tx_posted)
			tern_rdma_refs_put(tl, &tl->sbufs[tl->tx_released++ %
							  tl->nr_sbufs]);
		list_for_each_entry(op, &tl->ops, entry)
			tern_rdma_op_unmap(tl, op);
		if (tl->mr_pool)
			ib_mr_pool_destroy(tl->cm_id->qp, &tl->mrs);
		tl->mr_pool = false;
		rdma_destroy_qp(tl->cm_id);
		tl->qp_created = false;
	}
	/* no QP, no more events: a fatal one may still be reported */
	cancel_work_sync(&tl->qp_err_work);
	INIT_LIST_HEAD(&tl->op_done);
	INIT_LIST_HEAD(&tl->regs);
	INIT_LIST_HEAD(&tl->pull_wait);
	tl->tx_op = NULL;
	list_for_each_entry_safe(op, tmp, &tl->ops, entry) {
		list_del(&op->entry);
		if (op->kind == TERN_RDMA_OP_PULL)
			tern_srv_req_pulled(op->sreq, -ECONNRESET);
		else if (op->held)
			tern_lane_tx_done(tl->lane, op->frame);
		kfree(op);
	}
	tern_rdma_free_bufs(tl, tl->sbufs, tl->nr_sbufs, DMA_TO_DEVICE);
	tern_rdma_free_bufs(tl, tl->rbufs, tl->nr_rbufs, DMA_FROM_DEVICE);
	tl->sbufs = NULL;
	tl->rbufs = NULL;
	if (tl->cq)
		ib_cq_pool_put(tl->cq, tl->cq_size);
	tl->cq = NULL;
	if (tl->pd)
		ib_dealloc_pd(tl->pd);
	tl->pd = NULL;
}

static void tern_rdma_fill_priv(struct tern_rdma_lane *tl,
				struct tern_rdma_cm_priv *priv)
{
	memset(priv, 0, sizeof(*priv));
	priv->magic = cpu_to_le32(TERN_RDMA_CM_MAGIC);
	priv->version = cpu_to_le16(TERN_RDMA_VERSION);
	priv->recv_count = cpu_to_le16(tl->nr_rbufs);
	priv->buf_size = cpu_to_le32(tl->buf_size);
}

/* Check the peer's private data and set up credits and the SEND size. */
static int tern_rdma_take_priv(struct tern_rdma_lane *tl, const void *data,
			       u8 len)
{
	const struct tern_rdma_cm_priv *priv = data;
	u32 size, count;

	if (!data || len < sizeof(*priv))
		return -EPROTO;
	if (le32_to_cpu(priv->magic) != TERN_RDMA_CM_MAGIC || priv->reserved)
		return -EPROTO;
	if (le16_to_cpu(priv->version) != TERN_RDMA_VERSION)
		return -EPROTONOSUPPORT;
	size = le32_to_cpu(priv->buf_size);
	count = le16_to_cpu(priv->recv_count);
	if (size < TERN_RDMA_MIN_BUF || size > TERN_RDMA_MAX_BUF ||
	    count < TERN_RDMA_MIN_RECV || count > TERN_RDMA_MAX_DEPTH)
		return -EPROTO;
	tl->peer_recv = count;
	tl->tx_credits = count;
	tl->tx_chunk = min(size, tl->buf_size);
	tl->grant_threshold = max(2U, tl->nr_rbufs / 4);
	return 0;
}

/*
 * RDMA READ depths. Only the responder, the accepting side, issues READs
 * (request data from the requester's MRs); both sides offer both depths
 * anyway. Connection event parameters are from our side's view, the CM
 * swaps them: on a connect request @peer->initiator_depth is how many
 * READs the peer serves for us, @peer->responder_resources how many it
 * issues to us; on ESTABLISHED alike.
 */
static u32 tern_rdma_init_depth(struct ib_device *dev,
				const struct rdma_conn_param *peer)
{
	u32 init = min_t(u32, dev->attrs.max_qp_init_rd_atom, 16);

	return peer ? min_t(u32, init, peer->initiator_depth) : init;
}

static void tern_rdma_conn_param(struct tern_rdma_lane *tl,
				 struct rdma_conn_param *param,
				 const struct tern_rdma_cm_priv *priv,
				 const struct rdma_conn_param *peer)
{
	u32 resp = min_t(u32, tl->dev->attrs.max_qp_rd_atom, 16);

	memset(param, 0, sizeof(*param));
	param->private_data = priv;
	param->private_data_len = sizeof(*priv);
	if (peer)
		resp = min_t(u32, resp, peer->responder_resources);
	param->responder_resources = resp;
	param->initiator_depth = tern_rdma_init_depth(tl->dev, peer);
	param->flow_control = 1;
	param->retry_count = 7;
	/* Credits guarantee a posted buffer: an RNR NAK is a bug. */
	param->rnr_retry_count = 0;
}

/* Make the lane's io_work live; a cm error seen meanwhile fails it. */
static void tern_rdma_lane_go(struct tern_rdma_lane *tl)
{
	int err;

	spin_lock_bh(&tl->lock);
	WRITE_ONCE(tl->ready, true);
	err = tl->early_err;
	tern_rdma_kick_locked(tl);	/* receives may already be waiting */
	spin_unlock_bh(&tl->lock);
	if (err)
		tern_lane_error(tl->lane, err);
}

/* The outcome of one connect step, for the waiting tern_rdma_connect(). */
static void tern_rdma_step_done(struct tern_rdma_lane *tl, int status)
{
	tl->cm_status = status;
	complete(&tl->cm_done);
}

static int tern_rdma_lane_event(struct tern_rdma_lane *tl,
				struct rdma_cm_event *ev)
{
	bool ready, report = false;
	int err;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		tern_rdma_step_done(tl, 0);
		return 0;
	case RDMA_CM_EVENT_ESTABLISHED:
		spin_lock_bh(&tl->lock);
		ready = tl->ready;	/* accepted lanes are ready already */
		spin_unlock_bh(&tl->lock);
		if (ready)
			return 0;
		err = tern_rdma_take_priv(tl, ev->param.conn.private_data,
					  ev->param.conn.private_data_len);
		/*
		 * The peer READs the data of our zero-copy requests: with no
		 * responder resources granted every such READ would fail
		 * and the lane reconnect forever. Fail the connect clearly
		 * instead; without an MR pool we never send descriptors.
		 */
		if (!err && tl->mr_pool && !ev->param.conn.responder_resources) {
			pr_warn_ratelimited("%s: peer issues no RDMA READs, zero-copy requests impossible\n",
					    tern_lane_name(tl->lane));
			err = -EPROTO;
		}
		tern_rdma_step_done(tl, err);
		return 0;
	case RDMA_CM_EVENT_REJECTED:
		err = -ECONNREFUSED;
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		err = ev->status < 0 ? ev->status : -EHOSTUNREACH;
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		err = -EHOSTUNREACH;
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		err = -ECONNRESET;
		break;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		/* the netdev's MAC moved (bond failover): connect anew */
		TERN_RDMA_STAT(addr_changes, 1);
		fallthrough;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		err = -ENODEV;
		break;
	default:
		return 0;
	}

	spin_lock_bh(&tl->lock);
	if (tl->ready)
		report = !tl->stopped;
	else if (!tl->early_err)
		tl->early_err = err;	/* tern_rdma_lane_go() reports it */
	ready = tl->ready;
	spin_unlock_bh(&tl->lock);
	if (report) {
		if (err != -ECONNRESET)
			pr_info_ratelimited("%s: %s\n", tern_lane_name(tl->lane),
					    rdma_event_msg(ev->event));
		/* a disconnect is the peer's orderly close */
		tern_lane_error(tl->lane, err == -ECONNRESET ? 0 : err);
	} else if (!ready) {
		tern_rdma_step_done(tl, err);
	}
	/* The lane's teardown destroys the cm_id, never rdma_cm. */
	return 0;
}

/* Wait for the handler's verdict on one connect step. */
static int tern_rdma_wait(struct tern_rdma_lane *tl, unsigned long deadline)
{
	long left = (long)(deadline - jiffies);

	if (left <= 0 || !wait_for_completion_timeout(&tl->cm_done, left))
		return -ETIMEDOUT;
	reinit_completion(&tl->cm_done);
	return tl->cm_status;
}

static void tern_rdma_lane_free(struct tern_rdma_lane *tl)
{
	tern_rdma_destroy_queue(tl);
	if (tl->cm_id)
		rdma_destroy_id(tl->cm_id);
	kfree(tl);
}

static int tern_rdma_addrlen(const struct sockaddr_storage *addr)
{
	return addr->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					     sizeof(struct sockaddr_in);
}

static int tern_rdma_cm_handler(struct rdma_cm_id *id,
				struct rdma_cm_event *ev);

static int tern_rdma_connect(struct tern_lane *lane,
			     const struct sockaddr_storage *addr)
{
	unsigned long deadline = jiffies +
		msecs_to_jiffies(READ_ONCE(connect_timeout_ms));
	unsigned int resolve_ms = READ_ONCE(resolve_timeout_ms) ?: 1;
	struct tern_rdma_cm_priv priv;
	struct rdma_conn_param param;
	struct sockaddr_storage dst;
	struct tern_rdma_lane *tl;
	int err;

	tl = tern_rdma_lane_alloc();
	if (!tl)
		return -ENOMEM;
	tl->lane = lane;
	tl->cm_id = rdma_create_id(&init_net, tern_rdma_cm_handler, tl,
				   RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(tl->cm_id)) {
		err = PTR_ERR(tl->cm_id);
		tl->cm_id = NULL;
		goto fail;
	}

	memcpy(&dst, addr, tern_rdma_addrlen(addr));
	err = rdma_resolve_addr(tl->cm_id, NULL, (struct sockaddr *)&dst,
				resolve_ms);
	if (!err)
		err = tern_rdma_wait(tl, deadline);
	if (err)
		goto fail;
	err = rdma_resolve_route(tl->cm_id, resolve_ms);
	if (!err)
		err = tern_rdma_wait(tl, deadline);
	if (err)
		goto fail;

	err = tern_rdma_create_queue(tl);
	if (err)
		goto fail;
	tern_rdma_fill_priv(tl, &priv);
	tern_rdma_conn_param(tl, &param, &priv, NULL);
	err = rdma_connect(tl->cm_id, &param);
	if (!err)
		err = tern_rdma_wait(tl, deadline);
	if (err)
		goto fail;

	lane->tpriv = tl;
	tern_rdma_lane_go(tl);
	return 0;

fail:
	pr_debug("connect to %pISpc failed (%d)\n", addr, err);
	/*
	 * rdma_destroy_id() waits for a running handler; the completion is
	 * only looked at by us, so a late event is harmless.
	 */
	tern_rdma_lane_free(tl);
	return err;
}

static void tern_rdma_reject(struct rdma_cm_id *id)
{
	rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
}

/* A connect request on a listener; nonzero: rdma_cm destroys @id. */
static int tern_rdma_accept(struct tern_rdma_listener *tll,
			    struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct sockaddr_storage peer = {};
	struct tern_rdma_cm_priv priv;
	struct rdma_conn_param param;
	struct tern_rdma_lane *tl;
	struct tern_lane *lane;
	int err;

	memcpy(&peer, &id->route.addr.dst_addr, sizeof(peer));

	/*
	 * We READ the data of the peer's zero-copy requests. A tern peer
	 * always grants READs; one that grants none would see each such
	 * request fail with a remote access error and reconnect forever,
	 * so refuse it now, with a reason, rather than clamp to nothing.
	 */
	if (!tern_rdma_init_depth(id->device, &ev->param.conn)) {
		pr_warn_ratelimited("connect request from %pISpc: no RDMA READ depth (peer %u, device %u)\n",
				    &peer, ev->param.conn.initiator_depth,
				    id->device->attrs.max_qp_init_rd_atom);
		goto reject;
	}

	tl = tern_rdma_lane_alloc();
	if (!tl)
		goto reject;
	err = tern_rdma_take_priv(tl, ev->param.conn.private_data,
				  ev->param.conn.private_data_len);
	if (err) {
		pr_warn_ratelimited("bad connect request from %pISpc (%d)\n",
				    &peer, err);
		kfree(tl);
		goto reject;
	}
	/*
	 * Counted against tern.max_handshakes before anything of the queue
	 * exists; past the cap the request is rejected.
	 */
	lane = tern_lane_accept(tll->lis, &peer);
	if (!lane) {
		kfree(tl);
		goto reject;
	}
	tl->accepted = true;
	tl->lane = lane;
	tl->cm_id = id;
	id->context = tl;
	err = tern_rdma_create_queue(tl);
	if (err)
		goto abort;

	tern_rdma_fill_priv(tl, &priv);
	tern_rdma_conn_param(tl, &param, &priv, &ev->param.conn);
	err = rdma_accept(id, &param);
	if (err)
		goto abort;

	lane->tpriv = tl;
	tern_lane_start(lane);
	tern_rdma_lane_go(tl);
	return 0;

abort:
	tern_rdma_reject(id);
	tern_rdma_destroy_queue(tl);
	kfree(tl);
	id->context = NULL;
	tern_lane_abort(lane);
	return 1;

reject:
	tern_rdma_reject(id);
	return 1;
}

static unsigned long tern_rdma_relisten_delay(void)
{
	return msecs_to_jiffies(max(READ_ONCE(relisten_ms), 100U));
}

static int tern_rdma_listener_event(struct tern_rdma_listener *tll,
				    struct rdma_cm_id *id,
				    struct rdma_cm_event *ev)
{
	bool ours;

	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return tern_rdma_accept(tll, id, ev);
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		/*
		 * The device cannot go while we hold the id: let rdma_cm
		 * destroy it, unless stop_listen is already doing that, and
		 * try to listen again until the address has a device again
		 * (soft-RoCE re-created, a NIC back), as nvmet-rdma does.
		 */
		mutex_lock(&tll->lock);
		ours = tll->cm_id == id;
		if (ours) {
			tll->cm_id = NULL;
			if (!tll->stopping)
				queue_delayed_work(tern_rdma_wq, &tll->relisten,
						   tern_rdma_relisten_delay());
		}
		mutex_unlock(&tll->lock);
		if (ours)
			pr_info("device removed: no longer listening on %pISpc, will retry\n",
				&tll->lis->addr);
		return ours;
	default:
		return 0;
	}
}

static int tern_rdma_cm_handler(struct rdma_cm_id *id,
				struct rdma_cm_event *ev)
{
	enum tern_rdma_ctx_kind *kind = id->context;

	if (!kind)
		return 0;
	if (*kind == TERN_RDMA_CTX_LISTENER)
		return tern_rdma_listener_event(container_of(kind,
					struct tern_rdma_listener, kind), id, ev);
	return tern_rdma_lane_event(container_of(kind, struct tern_rdma_lane,
						 kind), ev);
}

static void tern_rdma_kick(struct tern_lane *lane)
{
	struct tern_rdma_lane *tl = lane->tpriv;

	if (!tl)
		return;
	tern_rdma_kick_tl(tl);
}

/*
 * An accepted lane closed in its handshake was refused, and the refusal
 * (a HELLO_ACK or AUTH_ACK with a status) is the last frame the core gave
 * us: it may still be on its way to the send queue when the core's
 * teardown starts. Let its runner post it, then give the SEND a moment
 * to complete (sends there are all signaled), so the peer learns why
 * instead of seeing a bare disconnect flush it.
 */
static void tern_rdma_flush_refusal(struct tern_rdma_lane *tl)
{
	unsigned long end = jiffies + msecs_to_jiffies(200);

	if (!tl->accepted || tl->grown || !tl->qp_created)
		return;
	while (test_bit(TERN_OWN_BUSY, &tl->io_flags) &&
	       time_before(jiffies, end))
		usleep_range(100, 200);
	/* acquire pairs with the release in tern_rdma_send_done() */
	while (smp_load_acquire(&tl->tx_completed) != READ_ONCE(tl->tx_posted) &&
	       time_before(jiffies, end))
		usleep_range(100, 200);
}

static void tern_rdma_shutdown(struct tern_lane *lane)
{
	struct tern_rdma_lane *tl = lane->tpriv;

	if (!tl)
		return;
	spin_lock_bh(&tl->lock);
	WRITE_ONCE(tl->stopped, true);
	spin_unlock_bh(&tl->lock);
	tern_rdma_flush_refusal(tl);
	rdma_disconnect(tl->cm_id);
	tern_rdma_lane_free(tl);
	lane->tpriv = NULL;
}

/* A bound, listening cm_id for @tll's address, or an ERR_PTR. */
static struct rdma_cm_id *tern_rdma_listen_id(struct tern_rdma_listener *tll,
					      bool quiet)
{
	const struct sockaddr_storage *where = &tll->lis->addr;
	struct sockaddr_storage addr;
	struct rdma_cm_id *id;
	int err;

	id = rdma_create_id(&init_net, tern_rdma_cm_handler, tll, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return id;
	/* "[::]" means IPv6 only, as on TCP. */
	if (where->ss_family == AF_INET6) {
		err = rdma_set_afonly(id, 1);
		if (err)
			goto out_destroy;
	}
	memcpy(&addr, where, sizeof(addr));
	err = rdma_bind_addr(id, (struct sockaddr *)&addr);
	if (err) {
		if (!quiet)
			pr_warn("cannot bind %pISpc (%d)\n", where, err);
		goto out_destroy;
	}
	err = rdma_listen(id, 128);
	if (err) {
		if (!quiet)
			pr_warn("cannot listen on %pISpc (%d)\n", where, err);
		goto out_destroy;
	}
	return id;

out_destroy:
	rdma_destroy_id(id);
	return ERR_PTR(err);
}

static void tern_rdma_relisten(struct work_struct *work)
{
	struct tern_rdma_listener *tll = container_of(to_delayed_work(work),
					struct tern_rdma_listener, relisten);
	struct rdma_cm_id *id;

	mutex_lock(&tll->lock);
	if (tll->stopping || tll->cm_id) {
		mutex_unlock(&tll->lock);
		return;
	}
	id = tern_rdma_listen_id(tll, true);
	if (IS_ERR(id)) {
		queue_delayed_work(tern_rdma_wq, &tll->relisten,
				   tern_rdma_relisten_delay());
	} else {
		tll->cm_id = id;
		pr_info("listening again on %pISpc\n", &tll->lis->addr);
	}
	mutex_unlock(&tll->lock);
}

static int tern_rdma_listen(struct tern_listener *lis)
{
	struct tern_rdma_listener *tll;
	struct rdma_cm_id *id;

	tll = kzalloc(sizeof(*tll), GFP_KERNEL);
	if (!tll)
		return -ENOMEM;
	tll->kind = TERN_RDMA_CTX_LISTENER;
	tll->lis = lis;
	mutex_init(&tll->lock);
	INIT_DELAYED_WORK(&tll->relisten, tern_rdma_relisten);

	/* Connect requests may arrive before this returns: publish first. */
	lis->tpriv = tll;
	mutex_lock(&tll->lock);
	id = tern_rdma_listen_id(tll, false);
	if (!IS_ERR(id))
		tll->cm_id = id;
	mutex_unlock(&tll->lock);
	if (IS_ERR(id)) {
		lis->tpriv = NULL;
		mutex_destroy(&tll->lock);
		kfree(tll);
		return PTR_ERR(id);
	}
	pr_info("listening on %pISpc\n", &lis->addr);
	return 0;
}

static void tern_rdma_stop_listen(struct tern_listener *lis)
{
	struct tern_rdma_listener *tll = lis->tpriv;
	struct rdma_cm_id *id;

	mutex_lock(&tll->lock);
	tll->stopping = true;
	id = tll->cm_id;
	tll->cm_id = NULL;
	mutex_unlock(&tll->lock);
	cancel_delayed_work_sync(&tll->relisten);
	/* Waits for connect request handlers of this listener. */
	if (id)
		rdma_destroy_id(id);
	lis->tpriv = NULL;
	mutex_destroy(&tll->lock);
	kfree(tll);
}

static struct tern_transport_ops tern_rdma_ops = {
	.name		= "rdma",
	.owner		= THIS_MODULE,
	.listen		= tern_rdma_listen,
	.stop_listen	= tern_rdma_stop_listen,
	.connect	= tern_rdma_connect,
	.kick		= tern_rdma_kick,
	.push		= tern_rdma_push,
	.shutdown	= tern_rdma_shutdown,
	.pull		= tern_rdma_pull,
};

static struct dentry *tern_rdma_dbg;

static int tern_rdma_stats_show(struct seq_file *m, void *v)
{
#define TERN_RDMA_COUNTER(f) { #f, offsetof(struct tern_rdma_counters, f) }
	static const struct {
		const char	*name;
		size_t		off;
	} f[] = {
		TERN_RDMA_COUNTER(registrations),
		TERN_RDMA_COUNTER(zc_requests),
		TERN_RDMA_COUNTER(inline_fallbacks),
		TERN_RDMA_COUNTER(inline_refs),
		TERN_RDMA_COUNTER(inline_ref_bytes),
		TERN_RDMA_COUNTER(local_invalidates),
		TERN_RDMA_COUNTER(remote_invalidates),
		TERN_RDMA_COUNTER(rdma_reads),
		TERN_RDMA_COUNTER(rdma_read_bytes),
		TERN_RDMA_COUNTER(rdma_writes),
		TERN_RDMA_COUNTER(rdma_write_bytes),
		TERN_RDMA_COUNTER(credit_stalls),
		TERN_RDMA_COUNTER(sq_stalls),
		TERN_RDMA_COUNTER(handler_runs),
		TERN_RDMA_COUNTER(unsignaled_sends),
		TERN_RDMA_COUNTER(injected_bad_rkeys),
		TERN_RDMA_COUNTER(injected_bad_lens),
		TERN_RDMA_COUNTER(injected_bad_replies),
		TERN_RDMA_COUNTER(injected_long_replies),
		TERN_RDMA_COUNTER(qp_fatal_events),
		TERN_RDMA_COUNTER(addr_changes),
	};
#undef TERN_RDMA_COUNTER
	const u8 *counters;
	unsigned int i, cpu;
	u64 sum;

	for (i = 0; i < ARRAY_SIZE(f); i++) {
		sum = 0;
		for_each_possible_cpu(cpu) {
			counters = (const u8 *)per_cpu_ptr(&tern_rdma_stats, cpu);
			sum += READ_ONCE(*(const u64 *)(counters + f[i].off));
		}
		seq_printf(m, "%s %llu\n", f[i].name, sum);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tern_rdma_stats);

static int __init tern_rdma_init(void)
{
	int err;

	tern_rdma_wq = alloc_workqueue("tern_rdma", WQ_MEM_RECLAIM | WQ_HIGHPRI,
				       0);
	if (!tern_rdma_wq)
		return -ENOMEM;
	tern_rdma_dbg = debugfs_create_dir("tern_rdma", NULL);
	debugfs_create_file("stats", 0400, tern_rdma_dbg, NULL,
			    &tern_rdma_stats_fops);
	err = tern_transport_register(&tern_rdma_ops);
	if (err) {
		debugfs_remove_recursive(tern_rdma_dbg);
		destroy_workqueue(tern_rdma_wq);
	}
	return err;
}

static void __exit tern_rdma_exit(void)
{
	tern_transport_unregister(&tern_rdma_ops);
	debugfs_remove_recursive(tern_rdma_dbg);
	destroy_workqueue(tern_rdma_wq);
}

module_init(tern_rdma_init);
module_exit(tern_rdma_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("tern messenger RDMA transport");
MODULE_VERSION(TERN_VERSION);
MODULE_ALIAS("tern-transport-rdma");
