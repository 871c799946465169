/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tern RDMA transport: what its parts share. rdma.c has the module, its
 * parameters and a lane's I/O loop; rdma_stream.c the SEND/RECV byte
 * stream and its credits; rdma_rw.c registration and RDMA READ/WRITE;
 * rdma_cm.c rdma_cm, queue pairs and listeners. rdma.c's top comment
 * describes the whole.
 */
#ifndef _TERN_RDMA_H
#define _TERN_RDMA_H

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

/* Module parameters (rdma.c) */
extern unsigned int tern_rdma_resolve_timeout_ms;
extern unsigned int tern_rdma_connect_timeout_ms;
extern unsigned int tern_rdma_relisten_ms;
extern unsigned int tern_rdma_buf_size;
extern unsigned int tern_rdma_recv_depth;
extern unsigned int tern_rdma_send_depth;
extern unsigned int tern_rdma_io_budget;
extern unsigned int tern_rdma_inline_max;
extern unsigned int tern_rdma_inline_read_max;
extern unsigned int tern_rdma_inline_copy_max;
extern unsigned int tern_rdma_mr_count;
extern unsigned int tern_rdma_mr_pages;
extern unsigned int tern_rdma_rw_ctxs;
extern bool tern_rdma_cq_by_lane;
extern unsigned int tern_rdma_inject_bad_rkey_every;
extern unsigned int tern_rdma_inject_bad_len_every;
extern unsigned int tern_rdma_inject_bad_reply_every;
extern unsigned int tern_rdma_inject_long_reply_every;
extern unsigned int tern_rdma_inject_bad_pad_every;

#define TERN_RDMA_MIN_BUF	4096U
#define TERN_RDMA_MAX_BUF	65536U
#define TERN_RDMA_MIN_RECV	8U
#define TERN_RDMA_PRE_BUFS	2U	/* accepted lane, before the handshake */
/* receive buffers beyond the queue depth: acknowledgements, grants */
#define TERN_RDMA_RECV_SLACK	8U
#define TERN_RDMA_CQ_BATCH	16	/* completions polled at once */
#define TERN_RDMA_CQ_BUDGET	256	/* ... per run of the CQ's work */
#define TERN_RDMA_MAX_DEPTH	1024U
/*
 * A receive buffer is a head of TERN_RDMA_RX_HEAD bytes and then pages:
 * the head holds a message header and a request frame's header and
 * front (72 bytes of front; 56 if frames carry tags), so that a sender
 * that pads a request to the head's end has its data start a page,
 * which the core may take in place of copying it.
 */
#define TERN_RDMA_RX_HEAD	128U
#define TERN_RDMA_RX_PAGES	DIV_ROUND_UP(TERN_RDMA_MAX_BUF, PAGE_SIZE)
static_assert(TERN_RDMA_RX_PAGES <= BITS_PER_LONG);	/* pages_mapped */
/* a SEND: its buffer and, between pieces of it, up to 3 frames' data */
#define TERN_RDMA_SEND_SGE	8U
#define TERN_RDMA_SEND_REFS	3U

extern struct workqueue_struct *tern_rdma_wq;
extern struct workqueue_struct *tern_rdma_cq_wq;

/* The rdma_cm context of a cm_id is either a listener or a lane. */
enum tern_rdma_ctx_kind {
	TERN_RDMA_CTX_LISTENER = 1,
	TERN_RDMA_CTX_LANE,
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
	void			*addr;	/* send: the buffer; receive: the head */
	u64			dma;
	u32			len;	/* receive: bytes received */
	bool			mapped;
	/* receive: the pages after the head, page_dma[i] mapped if bit i */
	unsigned long		pages_mapped;
	struct page		*pages[TERN_RDMA_RX_PAGES];
	u64			page_dma[TERN_RDMA_RX_PAGES];
	/* send: the message pads from here (pad_from), or 0 */
	u16			pad_from;
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
	u64		padded_sends;		/* SENDs padding a request */
	u64		rx_pages_taken;		/* received pages the core took */
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
	u64		injected_bad_pads;
	u64		qp_fatal_events;	/* fatal QP async events */
	u64		addr_changes;		/* ADDR_CHANGE on a lane's cm_id */
};

DECLARE_PER_CPU(struct tern_rdma_counters, tern_rdma_stats);

#define TERN_RDMA_STAT(f, v)	this_cpu_add(tern_rdma_stats.f, v)

/*
 * tl->io_flags: the lane's I/O runs under TERN_OWN_BUSY (<tern/transport.h>),
 * taken by io_work, by a completion handler or by a submitter, whoever
 * comes first. One that finds it taken leaves a note; the holder looks
 * for it after letting go, so the work is never lost: a full runner takes
 * the bit back and runs again, a submitter (which only sends) queues
 * io_work.
 */

/*
 * A device's protection domain, shared by every lane on the device (as
 * nvme-rdma and rtrs share theirs): one PD for the lanes' QPs, MRs and
 * DMA lkeys. Found or made by tern_rdma_dev_get(); the last lane's put
 * frees it, before its cm_id lets the device go.
 */
struct tern_rdma_dev {
	struct list_head	entry;		/* tern_rdma_devs */
	struct kref		ref;
	struct ib_device	*ibdev;
	struct ib_pd		*pd;
};

struct tern_rdma_lane {
	enum tern_rdma_ctx_kind	kind;
	struct tern_lane	*lane;
	struct rdma_cm_id	*cm_id;
	struct ib_device	*dev;
	struct tern_rdma_dev	*rdev;
	struct ib_pd		*pd;		/* rdev's */
	struct ib_cq		*cq;		/* the lane's own */
	unsigned int		cq_size;
	struct work_struct	cq_work;	/* polls it, tern_rdma_cq_wq */
	struct ib_wc		cq_wc[TERN_RDMA_CQ_BATCH];
	bool			cq_news;	/* tern_rdma_wake() in cq_work */
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
	unsigned int		nr_mrs;		/* in it; 0: no pool */
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
	unsigned int		rx_pages;	/* after a receive buffer's head */
	u32			tx_chunk;	/* bytes per SEND, header included */
	u32			peer_recv;	/* the peer's receive buffers */
	u16			version;	/* of the framing: both ends' */
	u16			peer_head;	/* its head_size: we may pad to it */
	struct list_head	node;		/* tern_rdma_lane_list, with a queue */

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
	struct mutex		lock;		/* the three below */
	struct rdma_cm_id	*cm_id;		/* NULL once rdma_cm took it */
	bool			stopping;
	bool			addr_changed;	/* cm_id to be replaced */
	/* listen again once the device comes back or the address moved */
	struct delayed_work	relisten;
};

/* Fault injection: true with a chance of one in @n (never for 0). */
static inline bool tern_rdma_one_in(unsigned int n)
{
	return n && get_random_u32_below(n) == 0;
}

/* rdma.c */
__printf(2, 3)
int tern_rdma_proto_err(struct tern_rdma_lane *tl, const char *fmt, ...);
void tern_rdma_lane_fail(struct tern_rdma_lane *tl, int err);
void tern_rdma_wc_error(struct tern_rdma_lane *tl, struct ib_wc *wc,
			const char *op);
void tern_rdma_kick_locked(struct tern_rdma_lane *tl);
void tern_rdma_io_work(struct work_struct *work);
void tern_rdma_wake_now(struct tern_rdma_lane *tl);

/*
 * Completion handlers call this when their completion is news for the
 * lane. They run only in the lane's CQ work item, the CQ's one poller
 * (ib_drain_qp() waits for it: the CQ is not IB_POLL_DIRECT), so they
 * leave a note, and the work item runs the lane's I/O itself after each
 * batch it polled (tern_rdma_wake_now()), as nvmet-rdma handles
 * commands in its CQ's work item: that saves waking io_work and a
 * context switch, and the replies to a batch of requests share SENDs.
 */
static inline void tern_rdma_wake(struct tern_rdma_lane *tl)
{
	tl->cq_news = true;
}

/* rdma_stream.c */
void tern_rdma_recv_done(struct ib_cq *cq, struct ib_wc *wc);
void tern_rdma_send_done(struct ib_cq *cq, struct ib_wc *wc);
int tern_rdma_post_recv(struct tern_rdma_lane *tl,
			struct tern_rdma_buf *buf);
int tern_rdma_recv_step(struct tern_rdma_lane *tl);
void tern_rdma_refs_put(struct tern_rdma_lane *tl,
			struct tern_rdma_buf *buf);
int tern_rdma_send_step(struct tern_rdma_lane *tl);
void tern_rdma_free_bufs(struct tern_rdma_lane *tl,
			 struct tern_rdma_buf *bufs, unsigned int nr,
			 enum dma_data_direction dir);
struct tern_rdma_buf *tern_rdma_alloc_bufs(struct tern_rdma_lane *tl,
					   unsigned int nr,
					   unsigned int fill,
					   enum dma_data_direction dir,
					   void (*done)(struct ib_cq *cq,
							struct ib_wc *wc));

/* rdma_rw.c */
void tern_rdma_err_done(struct ib_cq *cq, struct ib_wc *wc);
gfp_t tern_rdma_gfp(struct tern_rdma_lane *tl);
void tern_rdma_op_unmap(struct tern_rdma_lane *tl,
			struct tern_rdma_op *op);
void tern_rdma_inject_reply(struct tern_rdma_lane *tl);
struct tern_rdma_op *tern_rdma_reg_prepare(struct tern_rdma_lane *tl,
					   struct tern_frame *f);
struct tern_rdma_op *tern_rdma_push_prepare(struct tern_rdma_lane *tl,
					    struct tern_frame *f);
int tern_rdma_pull(struct tern_lane *lane, struct tern_srv_req *sreq,
		   const struct bio_vec *bvec, unsigned int nr_bvec);
int tern_rdma_ops_step(struct tern_rdma_lane *tl);
int tern_rdma_reply_seen(struct tern_rdma_lane *tl);

/*
 * Would a step of the lane's I/O find work? Lockless looks at what each
 * step works on, inline: the I/O loop asks after every message, and a
 * step with nothing to do would only return 0. Work that
 * comes after a look leaves a note for the I/O's owner (tern_rdma_wake(),
 * ->push), which runs the steps again.
 */
static inline bool tern_rdma_ops_waiting(struct tern_rdma_lane *tl)
{
	return !list_empty(&tl->op_done) || !list_empty(&tl->pull_wait);
}

static inline bool tern_rdma_rx_waiting(struct tern_rdma_lane *tl)
{
	return !list_empty(&tl->rx_ready) || !llist_empty(&tl->rx_done);
}

/* frames to send, a grant due, or completed SENDs' frames to give back */
static inline bool tern_rdma_tx_waiting(struct tern_rdma_lane *tl)
{
	return tl->tx_frame || tern_lane_tx_pending(tl->lane) ||
	       tl->grant_pending >= tl->grant_threshold ||
	       READ_ONCE(tl->tx_completed) != tl->tx_released;
}

/* rdma_cm.c */
void tern_rdma_lane_go(struct tern_rdma_lane *tl);
void tern_rdma_lane_free(struct tern_rdma_lane *tl);
int tern_rdma_lanes_show(struct seq_file *m, void *v);
int tern_rdma_connect(struct tern_lane *lane,
		      const struct sockaddr_storage *addr);
int tern_rdma_listen(struct tern_listener *lis);
void tern_rdma_stop_listen(struct tern_listener *lis);

#endif /* _TERN_RDMA_H */
