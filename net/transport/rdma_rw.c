// SPDX-License-Identifier: GPL-2.0
/*
 * tern RDMA transport: zero-copy data. A requester registers a request's
 * buffer (FRWR) and sends descriptors; the responder pulls request data
 * with RDMA READ and pushes reply data with RDMA WRITE (rdma_rw), and
 * the registrations are invalidated with the reply. See rdma.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "rdma.h"

void tern_rdma_err_done(struct ib_cq *cq, struct ib_wc *wc)
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
gfp_t tern_rdma_gfp(struct tern_rdma_lane *tl)
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
void tern_rdma_op_unmap(struct tern_rdma_lane *tl,
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

	if (tern_rdma_one_in(READ_ONCE(tern_rdma_inject_bad_rkey_every))) {
		d = &op->desc[get_random_u32_below(op->nr_mr)];
		d->rkey ^= cpu_to_le32(0xff);
		TERN_RDMA_STAT(injected_bad_rkeys, 1);
	}
	if (tern_rdma_one_in(READ_ONCE(tern_rdma_inject_bad_len_every))) {
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
void tern_rdma_inject_reply(struct tern_rdma_lane *tl)
{
	struct tern_wire_hdr *hdr = &tl->tx_hdr;
	u16 flags = le16_to_cpu(hdr->flags);

	if ((flags & TERN_WIRE_F_REMOTE) &&
	    tern_rdma_one_in(READ_ONCE(tern_rdma_inject_long_reply_every))) {
		le32_add_cpu(&hdr->buf_len, PAGE_SIZE);
		TERN_RDMA_STAT(injected_long_replies, 1);
	} else if (tern_rdma_one_in(READ_ONCE(tern_rdma_inject_bad_reply_every))) {
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
struct tern_rdma_op *tern_rdma_reg_prepare(struct tern_rdma_lane *tl,
					   struct tern_frame *f)
{
	struct tern_request *req = tern_frame_request(f);
	u16 flags = le16_to_cpu(f->hdr.flags);
	u32 len = le32_to_cpu(f->hdr.buf_len);
	struct ib_qp *qp = tl->cm_id->qp;
	unsigned int off = 0, i;
	struct scatterlist *sg;
	struct tern_rdma_op *op;
	bool to_responder;
	int left, n, err;

	if (!req || !tl->nr_mrs || !tern_lane_remote_data(tl->lane) ||
	    !(flags & (TERN_WIRE_F_DATA_TO_RESPONDER |
		       TERN_WIRE_F_DATA_FROM_RESPONDER)))
		return NULL;
	to_responder = flags & TERN_WIRE_F_DATA_TO_RESPONDER;
	if (len <= tern_lane_inline_max(tl->lane, to_responder, to_responder ?
					READ_ONCE(tern_rdma_inline_max) :
					READ_ONCE(tern_rdma_inline_read_max)))
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
struct tern_rdma_op *tern_rdma_push_prepare(struct tern_rdma_lane *tl,
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

int tern_rdma_pull(struct tern_lane *lane, struct tern_srv_req *sreq,
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
int tern_rdma_ops_step(struct tern_rdma_lane *tl)
{
	struct tern_rdma_op *op, *tmp;
	struct tern_srv_req *sreq;
	struct tern_frame *frame;
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
		/*
		 * REG after its LOCAL_INV, PUSH after its SEND; unmapped
		 * first, so the request never completes on pages still
		 * mapped for the device.
		 */
		frame = op->held ? op->frame : NULL;
		tern_rdma_op_free(tl, op);
		if (frame)
			tern_lane_tx_done(tl->lane, frame);
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
int tern_rdma_reply_seen(struct tern_rdma_lane *tl)
{
	struct tern_lane_rx *rx = &tl->lane->rx;
	bool remote = le16_to_cpu(rx->hdr.flags) & TERN_WIRE_F_REMOTE;
	bool inv = tl->rx_inv && tl->rx_msg_end;
	u64 tid = le64_to_cpu(rx->hdr.tid);
	struct tern_rdma_op *op = NULL, *it;
	unsigned int i, first = 0, n;
	struct tern_frame *frame;
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
		/* unmapped before the frame goes back, as in ops_step */
		frame = op->frame;
		tern_rdma_op_free(tl, op);
		tern_lane_tx_done(tl->lane, frame);
		return 0;
	}
	/*
	 * The data is all there (RC: the peer's WRITEs before its SEND),
	 * but the pages stay mapped until the LOCAL_INVs complete: the
	 * core checks its CRC now, so it must see what the device wrote.
	 */
	if (op->dir == DMA_FROM_DEVICE && op->sg_mapped &&
	    !ib_uses_virt_dma(tl->dev))
		dma_sync_sg_for_cpu(tl->dev->dma_device, op->sgt.sgl,
				    op->sgt.orig_nents, DMA_FROM_DEVICE);
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
