// SPDX-License-Identifier: GPL-2.0
/*
 * tern RDMA transport: connections. rdma_cm resolves, connects and
 * accepts; each lane gets its queue pair, completion queue, buffers and
 * MR pool here, and listeners come back after a device goes and
 * returns. See rdma.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "rdma.h"

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

static LIST_HEAD(tern_rdma_devs);
static DEFINE_MUTEX(tern_rdma_devs_lock);
/* lanes with a queue, for debugfs: their sizes */
static LIST_HEAD(tern_rdma_lane_list);
static DEFINE_MUTEX(tern_rdma_lanes_lock);

/* The shared PD of @ibdev, made on first use. Return: it, or an ERR_PTR. */
static struct tern_rdma_dev *tern_rdma_dev_get(struct ib_device *ibdev)
{
	struct tern_rdma_dev *rdev;

	mutex_lock(&tern_rdma_devs_lock);
	list_for_each_entry(rdev, &tern_rdma_devs, entry) {
		if (rdev->ibdev == ibdev && kref_get_unless_zero(&rdev->ref))
			goto out;
	}
	rdev = kzalloc(sizeof(*rdev), GFP_KERNEL);
	if (!rdev) {
		rdev = ERR_PTR(-ENOMEM);
		goto out;
	}
	rdev->pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(rdev->pd)) {
		struct ib_pd *pd = rdev->pd;

		kfree(rdev);
		rdev = ERR_CAST(pd);
		goto out;
	}
	rdev->ibdev = ibdev;
	kref_init(&rdev->ref);
	list_add(&rdev->entry, &tern_rdma_devs);
out:
	mutex_unlock(&tern_rdma_devs_lock);
	return rdev;
}

static void tern_rdma_dev_release(struct kref *ref)
{
	struct tern_rdma_dev *rdev = container_of(ref, struct tern_rdma_dev,
						  ref);

	list_del(&rdev->entry);
	mutex_unlock(&tern_rdma_devs_lock);
	ib_dealloc_pd(rdev->pd);
	kfree(rdev);
}

/* The lane's QP, MRs and buffers are gone: let go of the device's PD. */
static void tern_rdma_dev_put(struct tern_rdma_lane *tl)
{
	if (!tl->rdev)
		return;
	kref_put_mutex(&tl->rdev->ref, tern_rdma_dev_release,
		       &tern_rdma_devs_lock);
	tl->rdev = NULL;
	tl->pd = NULL;
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
	INIT_LIST_HEAD(&tl->node);
	tl->buf_size = clamp(READ_ONCE(tern_rdma_buf_size), TERN_RDMA_MIN_BUF,
			     TERN_RDMA_MAX_BUF);
	tl->nr_sbufs = clamp(READ_ONCE(tern_rdma_send_depth), 2U, TERN_RDMA_MAX_DEPTH);
	tl->tx_signal_every = max(1U, tl->nr_sbufs / 4);
	return tl;
}

/*
 * Receive buffers: for the replies to a requester's queue depth, or, on
 * a responder, as many as its requester posted for our replies (the same
 * depth seen from the other side); room beside for acknowledgements and
 * credit grants. Never more than tern_rdma.recv_depth, whatever a peer
 * asks: a client cannot make a target pin more memory per lane than the
 * target allows.
 */
static void tern_rdma_size_recv(struct tern_rdma_lane *tl, unsigned int want)
{
	unsigned int cap = clamp(READ_ONCE(tern_rdma_recv_depth),
				 TERN_RDMA_MIN_RECV, TERN_RDMA_MAX_DEPTH);

	tl->nr_rbufs = clamp(want, TERN_RDMA_MIN_RECV, cap);
	tl->grant_threshold = max(2U, tl->nr_rbufs / 4);
}

/*
 * A requester's MRs: one request of the session's largest data takes one
 * per tl->mr_max_pages pages (a buffer off page boundaries one page
 * more); enough for its whole queue depth, at most tern_rdma.mr_count.
 * Short of MRs a request sends its data inline; without FRWR all do.
 */
static unsigned int tern_rdma_mrs_wanted(struct tern_rdma_lane *tl)
{
	unsigned int cap = READ_ONCE(tern_rdma_mr_count), depth, per_req;
	u32 max_data;

	if (!tl->mr_max_pages ||
	    !(tl->dev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS))
		return 0;
	depth = tern_lane_queue_depth(tl->lane, &max_data);
	if (!depth)
		return cap;
	per_req = DIV_ROUND_UP(DIV_ROUND_UP(max_data, PAGE_SIZE) + 1,
			       tl->mr_max_pages);
	return min_t(u64, cap, (u64)depth * per_req);
}

/*
 * Each lane polls its own CQ from a work item on tern_rdma_cq_wq, which
 * runs at normal priority and on any CPU. ib_core's CQ work items
 * (IB_POLL_WORKQUEUE) run at high priority: with soft-RoCE, whose
 * worker posts the completions, every completion woke one that preempted
 * that worker and switched back, twice per batch. A normal-priority
 * worker waits its turn or takes the other CPU, and finds more
 * completions when it runs (performance.rst, item 19).
 *
 * The device calls this with its CQ's lock held and interrupts off.
 */
static void tern_rdma_cq_comp(struct ib_cq *cq, void *ctx)
{
	struct tern_rdma_lane *tl = ctx;

	queue_work(tern_rdma_cq_wq, &tl->cq_work);
}

/* A CQ error (an overrun) loses completions: the lane cannot go on. */
static void tern_rdma_cq_event(struct ib_event *ev, void *ctx)
{
	struct tern_rdma_lane *tl = ctx;

	TERN_RDMA_STAT(qp_fatal_events, 1);
	pr_warn_ratelimited("%s: CQ event %s (%d)\n", tern_lane_name(tl->lane),
			    ib_event_msg(ev->event), ev->event);
	queue_work(tern_rdma_wq, &tl->qp_err_work);
}

/*
 * Hand each completion to its work request's handler, run the lane's
 * I/O once for the batch if a handler had news, then ask for the next
 * notification. Completions that came between the last poll and
 * the request, or past the budget, run the work again.
 */
static void tern_rdma_cq_work(struct work_struct *work)
{
	struct tern_rdma_lane *tl = container_of(work, struct tern_rdma_lane,
						 cq_work);
	unsigned int polled = 0;
	struct ib_wc *wc;
	int n, i;

	do {
		n = ib_poll_cq(tl->cq, TERN_RDMA_CQ_BATCH, tl->cq_wc);
		for (i = 0; i < n; i++) {
			wc = &tl->cq_wc[i];
			/* every request we post has one; a flush may not */
			if (wc->wr_cqe)
				wc->wr_cqe->done(tl->cq, wc);
			else
				WARN_ON_ONCE(wc->status == IB_WC_SUCCESS);
		}
		polled += max(n, 0);
		if (tl->cq_news) {
			tl->cq_news = false;
			tern_rdma_wake_now(tl);
		}
	} while (n == TERN_RDMA_CQ_BATCH && polled < TERN_RDMA_CQ_BUDGET);
	if (polled >= TERN_RDMA_CQ_BUDGET ||
	    ib_req_notify_cq(tl->cq, IB_CQ_NEXT_COMP |
				     IB_CQ_REPORT_MISSED_EVENTS) > 0)
		queue_work(tern_rdma_cq_wq, &tl->cq_work);
}

/*
 * The completion vector: a requester's lane i takes vector i (as
 * nvme-rdma's queues do), other lanes go round.
 */
static int tern_rdma_comp_vector(struct tern_rdma_lane *tl)
{
	static atomic_t next = ATOMIC_INIT(0);
	int idx = READ_ONCE(tern_rdma_cq_by_lane) ?
		  tern_lane_index(tl->lane) : -1;

	if (idx < 0)
		idx = atomic_inc_return(&next);
	return (unsigned int)idx % max(tl->dev->num_comp_vectors, 1);
}

static int tern_rdma_create_cq(struct tern_rdma_lane *tl)
{
	struct ib_cq_init_attr attr = {
		.cqe = tl->cq_size,
		.comp_vector = tern_rdma_comp_vector(tl),
	};
	struct ib_cq *cq;

	INIT_WORK(&tl->cq_work, tern_rdma_cq_work);
	cq = ib_create_cq(tl->dev, tern_rdma_cq_comp, tern_rdma_cq_event, tl,
			  &attr);
	if (IS_ERR(cq))
		return PTR_ERR(cq);
	tl->cq = cq;
	ib_req_notify_cq(cq, IB_CQ_NEXT_COMP);
	return 0;
}

/* After the QP is gone: no completion comes any more. */
static void tern_rdma_destroy_cq(struct tern_rdma_lane *tl)
{
	if (!tl->cq)
		return;
	cancel_work_sync(&tl->cq_work);
	ib_destroy_cq(tl->cq);
	tl->cq = NULL;
	/* nor, now, a CQ event */
	cancel_work_sync(&tl->qp_err_work);
}

/*
 * A receive buffer is a head and pages, one receive SGE each: as many
 * pages as buf_size takes, fewer (and so a smaller buf_size) on a
 * device with fewer receive SGEs. buf_size is what we announce, so the
 * peer's SENDs shrink with it; an accepted lane, which knows the peer's
 * size already, cuts its own SENDs (tx_chunk) to ours too, its send
 * buffers being buf_size bytes.
 */
static int tern_rdma_size_bufs(struct tern_rdma_lane *tl)
{
	u32 sges = min_t(u32, tl->dev->attrs.max_recv_sge,
			 1 + TERN_RDMA_RX_PAGES);

	if (sges < 2) {
		pr_warn_ratelimited("%s: device %s has %u receive SGEs, tern needs 2\n",
				    tern_lane_name(tl->lane),
				    dev_name(&tl->dev->dev),
				    tl->dev->attrs.max_recv_sge);
		return -EOPNOTSUPP;
	}
	tl->rx_pages = min_t(u32, sges - 1,
			     DIV_ROUND_UP(tl->buf_size - TERN_RDMA_RX_HEAD,
					  PAGE_SIZE));
	tl->buf_size = min(tl->buf_size,
			   TERN_RDMA_RX_HEAD + tl->rx_pages * (u32)PAGE_SIZE);
	if (tl->tx_chunk)
		tl->tx_chunk = min(tl->tx_chunk, tl->buf_size);
	return 0;
}

/*
 * The device's PD, then CQ, QP and buffers on the device the cm_id is
 * bound to; receive buffers posted. On failure everything taken here is
 * released again.
 */
static int tern_rdma_create_queue(struct tern_rdma_lane *tl)
{
	struct rdma_cm_id *id = tl->cm_id;
	struct ib_qp_init_attr attr = {};
	unsigned int i, nr_mrs, rw_ctxs, pre;
	int err;

	tl->dev = id->device;
	tl->port_num = id->port_num;
	err = tern_rdma_size_bufs(tl);
	if (err)
		return err;
	tl->mr_max_pages = min_t(u32, READ_ONCE(tern_rdma_mr_pages),
				 tl->dev->attrs.max_fast_reg_page_list_len);
	/*
	 * A responder READs and WRITEs through rdma_rw and never registers;
	 * a requester registers and never READs or WRITEs. The send queue
	 * holds a REG_MR and a LOCAL_INV per MR, or the rdma_rw contexts'
	 * work requests.
	 */
	if (tl->accepted) {
		nr_mrs = 0;
		rw_ctxs = clamp(READ_ONCE(tern_rdma_rw_ctxs), 16U, 4096U);
	} else {
		nr_mrs = tern_rdma_mrs_wanted(tl);
		rw_ctxs = 0;
	}
	tl->sq_size = 2 * nr_mrs + rw_ctxs;
	tl->sq_free = tl->sq_size;
	/* sends + receives, and one of each for ib_drain_qp() */
	tl->cq_size = tl->nr_sbufs + tl->sq_size + tl->nr_rbufs + 2;

	tl->rdev = tern_rdma_dev_get(tl->dev);
	if (IS_ERR(tl->rdev)) {
		err = PTR_ERR(tl->rdev);
		tl->rdev = NULL;
		return err;
	}
	tl->pd = tl->rdev->pd;
	/*
	 * Polled in process context: the lane's I/O runs in the CQ's
	 * work item (tern_rdma_wake()), which may sleep on the responder
	 * side.
	 */
	err = tern_rdma_create_cq(tl);
	if (err)
		goto out_pd;

	attr.event_handler = tern_rdma_qp_event;
	attr.qp_context = tl;
	attr.send_cq = tl->cq;
	attr.recv_cq = tl->cq;
	/* rdma_rw adds one WR per context to max_send_wr */
	attr.cap.max_send_wr = tl->nr_sbufs + 1 + 2 * nr_mrs;
	attr.cap.max_rdma_ctxs = rw_ctxs;
	attr.port_num = tl->port_num;
	attr.cap.max_recv_wr = tl->nr_rbufs + 1;
	attr.cap.max_send_sge = min_t(u32, tl->dev->attrs.max_send_sge, 32);
	attr.cap.max_recv_sge = 1 + tl->rx_pages;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	err = rdma_create_qp(id, tl->pd, &attr);
	if (err)
		goto out_cq;
	tl->qp_created = true;
	tl->tx_max_sge = min_t(u32, attr.cap.max_send_sge, TERN_RDMA_SEND_SGE);

	/* FRWR for our own buffers; without it requests carry data inline */
	if (nr_mrs) {
		err = ib_mr_pool_init(id->qp, &tl->mrs, nr_mrs,
				      IB_MR_TYPE_MEM_REG, tl->mr_max_pages, 0);
		if (err)
			goto out_qp;
		tl->nr_mrs = nr_mrs;
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
	mutex_lock(&tern_rdma_lanes_lock);
	list_add_tail(&tl->node, &tern_rdma_lane_list);
	mutex_unlock(&tern_rdma_lanes_lock);
	return 0;

out_qp:
	/* Flush what was posted before the buffers go away. */
	ib_drain_qp(id->qp);
	if (tl->nr_mrs)
		ib_mr_pool_destroy(id->qp, &tl->mrs);
	tl->nr_mrs = 0;
	rdma_destroy_qp(id);
	tl->qp_created = false;
	tern_rdma_free_bufs(tl, tl->sbufs, tl->nr_sbufs, DMA_TO_DEVICE);
	tern_rdma_free_bufs(tl, tl->rbufs, tl->nr_rbufs, DMA_FROM_DEVICE);
	tl->sbufs = NULL;
	tl->rbufs = NULL;
out_cq:
	tern_rdma_destroy_cq(tl);
out_pd:
	tern_rdma_dev_put(tl);
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

	mutex_lock(&tern_rdma_lanes_lock);
	list_del_init(&tl->node);
	mutex_unlock(&tern_rdma_lanes_lock);
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
		if (tl->nr_mrs)
			ib_mr_pool_destroy(tl->cm_id->qp, &tl->mrs);
		tl->nr_mrs = 0;
		rdma_destroy_qp(tl->cm_id);
		tl->qp_created = false;
	}
	/* no QP, no more completions: the CQ's work is over before we free */
	tern_rdma_destroy_cq(tl);
	/* no more events: a fatal one may still be reported */
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
	tern_rdma_dev_put(tl);
}

/*
 * One line per lane: what its queue was sized to (requesters by their
 * session's depth, responders by their requester's receive buffers), the
 * pages after each receive buffer's head, the peer's head (we pad
 * requests to it), the send queue entries kept for MRs or rdma_rw, and
 * the peer's receive buffers, our credits.
 */
int tern_rdma_lanes_show(struct seq_file *m, void *v)
{
	struct tern_rdma_lane *tl;

	mutex_lock(&tern_rdma_lanes_lock);
	list_for_each_entry(tl, &tern_rdma_lane_list, node)
		seq_printf(m, "%s %s recv %u send %u buf_size %u pages %u peer_head %u sq %u mrs %u peer_recv %u\n",
			   tern_lane_name(tl->lane),
			   tl->accepted ? "responder" : "requester",
			   tl->nr_rbufs, tl->nr_sbufs, tl->buf_size,
			   tl->rx_pages, READ_ONCE(tl->peer_head),
			   tl->sq_size, tl->nr_mrs, READ_ONCE(tl->peer_recv));
	mutex_unlock(&tern_rdma_lanes_lock);
	return 0;
}

static void tern_rdma_fill_priv(struct tern_rdma_lane *tl,
				struct tern_rdma_cm_priv *priv)
{
	memset(priv, 0, sizeof(*priv));
	priv->magic = cpu_to_le32(TERN_RDMA_CM_MAGIC);
	/* a responder answers in the requester's version */
	priv->version = cpu_to_le16(tl->accepted ? tl->version :
				    TERN_RDMA_VERSION);
	priv->recv_count = cpu_to_le16(tl->nr_rbufs);
	priv->buf_size = cpu_to_le32(tl->buf_size);
	if (le16_to_cpu(priv->version) >= 2)
		priv->head_size = cpu_to_le16(TERN_RDMA_RX_HEAD);
}

/* Check the peer's private data and set up credits and the SEND size. */
static int tern_rdma_take_priv(struct tern_rdma_lane *tl, const void *data,
			       u8 len)
{
	const struct tern_rdma_cm_priv *priv = data;
	u32 size, count, head, version;

	if (!data || len < sizeof(*priv))
		return -EPROTO;
	if (le32_to_cpu(priv->magic) != TERN_RDMA_CM_MAGIC || priv->reserved)
		return -EPROTO;
	version = le16_to_cpu(priv->version);
	/*
	 * A responder answers a newer requester in its own version; a
	 * requester takes an answer in its version or an older one.
	 */
	if (tl->accepted)
		version = min_t(u32, version, TERN_RDMA_VERSION);
	if (version < TERN_RDMA_VERSION_MIN || version > TERN_RDMA_VERSION)
		return -EPROTONOSUPPORT;
	size = le32_to_cpu(priv->buf_size);
	count = le16_to_cpu(priv->recv_count);
	head = le16_to_cpu(priv->head_size);
	if (size < TERN_RDMA_MIN_BUF || size > TERN_RDMA_MAX_BUF ||
	    count < TERN_RDMA_MIN_RECV || count > TERN_RDMA_MAX_DEPTH ||
	    (head && (version < 2 ||
		      head <= sizeof(struct tern_rdma_msg_hdr) ||
		      head > TERN_RDMA_MIN_BUF || head >= size)))
		return -EPROTO;
	WRITE_ONCE(tl->peer_recv, count);	/* debugfs reads it */
	tl->version = version;
	WRITE_ONCE(tl->peer_head, head);
	tl->tx_credits = count;
	tl->tx_chunk = min(size, tl->buf_size);
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
void tern_rdma_lane_go(struct tern_rdma_lane *tl)
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
		if (err)
			pr_warn_ratelimited("%s: bad accept (%d)\n",
					    tern_lane_name(tl->lane), err);
		/*
		 * The peer READs the data of our zero-copy requests: with no
		 * responder resources granted every such READ would fail
		 * and the lane reconnect forever. Fail the connect clearly
		 * instead; without an MR pool we never send descriptors.
		 */
		if (!err && tl->nr_mrs && !ev->param.conn.responder_resources) {
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

void tern_rdma_lane_free(struct tern_rdma_lane *tl)
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

int tern_rdma_connect(struct tern_lane *lane,
		      const struct sockaddr_storage *addr)
{
	unsigned int timeout_ms =
		tern_timeout_ms(READ_ONCE(tern_rdma_connect_timeout_ms));
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	unsigned int resolve_ms = READ_ONCE(tern_rdma_resolve_timeout_ms) ?: 1;
	struct tern_rdma_cm_priv priv;
	struct rdma_conn_param param;
	const char *step = "cm_id creation";
	struct sockaddr_storage dst;
	struct tern_rdma_lane *tl;
	int err;

	tl = tern_rdma_lane_alloc();
	if (!tl)
		return -ENOMEM;
	tl->lane = lane;
	tern_rdma_size_recv(tl, tern_lane_queue_depth(lane, NULL) +
			    TERN_RDMA_RECV_SLACK);
	tl->cm_id = rdma_create_id(&init_net, tern_rdma_cm_handler, tl,
				   RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(tl->cm_id)) {
		err = PTR_ERR(tl->cm_id);
		tl->cm_id = NULL;
		goto fail;
	}

	memcpy(&dst, addr, tern_rdma_addrlen(addr));
	step = "address resolution";
	err = rdma_resolve_addr(tl->cm_id, NULL, (struct sockaddr *)&dst,
				resolve_ms);
	if (!err)
		err = tern_rdma_wait(tl, deadline);
	if (err)
		goto fail;
	step = "route resolution";
	err = rdma_resolve_route(tl->cm_id, resolve_ms);
	if (!err)
		err = tern_rdma_wait(tl, deadline);
	if (err)
		goto fail;

	step = "queue setup";
	err = tern_rdma_create_queue(tl);
	if (err)
		goto fail;
	tern_rdma_fill_priv(tl, &priv);
	tern_rdma_conn_param(tl, &param, &priv, NULL);
	step = "connect";
	err = rdma_connect(tl->cm_id, &param);
	if (!err)
		err = tern_rdma_wait(tl, deadline);
	if (err)
		goto fail;

	lane->tpriv = tl;
	tern_rdma_lane_go(tl);
	return 0;

fail:
	/* which step failed says where to look */
	pr_info_ratelimited("%s: connect to %pISpc failed in %s (%d)\n",
			    tern_lane_name(lane), addr, step, err);
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
	tl->accepted = true;
	err = tern_rdma_take_priv(tl, ev->param.conn.private_data,
				  ev->param.conn.private_data_len);
	if (err) {
		pr_warn_ratelimited("bad connect request from %pISpc (%d)\n",
				    &peer, err);
		kfree(tl);
		goto reject;
	}
	tern_rdma_size_recv(tl, tl->peer_recv);
	/*
	 * Counted against tern.max_handshakes before anything of the queue
	 * exists; past the cap the request is rejected.
	 */
	lane = tern_lane_accept(tll->lis, &peer);
	if (!lane) {
		kfree(tl);
		goto reject;
	}
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
	return msecs_to_jiffies(max(READ_ONCE(tern_rdma_relisten_ms), 100U));
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
			/* under the lock: stop_listen frees tll once it has it */
			pr_info("device removed: no longer listening on %pISpc, will retry\n",
				&tll->lis->addr);
		}
		mutex_unlock(&tll->lock);
		return ours;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		/*
		 * The netdev's MAC moved (bond failover): the cm_id keeps
		 * the old L2 address and GID entry, so listen anew, as
		 * nvmet-rdma does; not from here, where destroying the
		 * cm_id would deadlock, but in the relisten work.
		 */
		mutex_lock(&tll->lock);
		if (tll->cm_id == id && !tll->stopping) {
			tll->addr_changed = true;
			mod_delayed_work(tern_rdma_wq, &tll->relisten, 0);
			pr_info("address change: listening anew on %pISpc\n",
				&tll->lis->addr);
		}
		mutex_unlock(&tll->lock);
		return 0;
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

/*
 * A cm_id bound to @tll's address and listening, in *@idp; on an error
 * *@idp may hold one the caller must destroy once it has dropped
 * tll->lock: a DEVICE_REMOVAL handler of that id may be waiting for the
 * lock, and rdma_destroy_id() waits for the id's handlers.
 */
static int tern_rdma_listen_id(struct tern_rdma_listener *tll, bool quiet,
			       struct rdma_cm_id **idp)
{
	const struct sockaddr_storage *where = &tll->lis->addr;
	struct sockaddr_storage addr;
	struct rdma_cm_id *id;
	int err;

	lockdep_assert_held(&tll->lock);
	*idp = NULL;
	id = rdma_create_id(&init_net, tern_rdma_cm_handler, tll, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	*idp = id;
	/* "[::]" means IPv6 only, as on TCP. */
	if (where->ss_family == AF_INET6) {
		err = rdma_set_afonly(id, 1);
		if (err)
			return err;
	}
	memcpy(&addr, where, sizeof(addr));
	err = rdma_bind_addr(id, (struct sockaddr *)&addr);
	if (err) {
		if (!quiet)
			pr_warn("cannot bind %pISpc (%d)\n", where, err);
		return err;
	}
	err = rdma_listen(id, 128);
	if (err && !quiet)
		pr_warn("cannot listen on %pISpc (%d)\n", where, err);
	return err;
}

static void tern_rdma_relisten(struct work_struct *work)
{
	struct tern_rdma_listener *tll = container_of(to_delayed_work(work),
					struct tern_rdma_listener, relisten);
	struct rdma_cm_id *id;
	int err;

	mutex_lock(&tll->lock);
	if (tll->addr_changed && !tll->stopping) {
		id = tll->cm_id;
		tll->cm_id = NULL;
		tll->addr_changed = false;
		/* its handlers take the lock: destroy it without */
		mutex_unlock(&tll->lock);
		if (id)
			rdma_destroy_id(id);
		mutex_lock(&tll->lock);
	}
	if (tll->stopping || tll->cm_id) {
		mutex_unlock(&tll->lock);
		return;
	}
	err = tern_rdma_listen_id(tll, true, &id);
	if (err) {
		queue_delayed_work(tern_rdma_wq, &tll->relisten,
				   tern_rdma_relisten_delay());
	} else {
		tll->cm_id = id;
		pr_info("listening again on %pISpc\n", &tll->lis->addr);
	}
	mutex_unlock(&tll->lock);
	if (err && id)
		rdma_destroy_id(id);
}

int tern_rdma_listen(struct tern_listener *lis)
{
	struct tern_rdma_listener *tll;
	struct rdma_cm_id *id;
	int err;

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
	err = tern_rdma_listen_id(tll, false, &id);
	if (!err)
		tll->cm_id = id;
	mutex_unlock(&tll->lock);
	if (err) {
		if (id)
			rdma_destroy_id(id);
		lis->tpriv = NULL;
		mutex_destroy(&tll->lock);
		kfree(tll);
		return err;
	}
	pr_info("listening on %pISpc\n", &lis->addr);
	return 0;
}

void tern_rdma_stop_listen(struct tern_listener *lis)
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
