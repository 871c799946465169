// SPDX-License-Identifier: GPL-2.0
/*
 * tern RDMA transport: the byte stream of SEND messages. Frames are cut
 * into SENDs of at most the peer's receive buffer, each led by a header
 * granting credits; received messages are fed to the core's receive
 * iterators in order. See rdma.c for the whole.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "rdma.h"

/*
 * The stream's iterators are the core's kvecs and bvecs, never user
 * memory: copy_to_iter()'s usercopy hardening (a look up of the kernel
 * object behind the buffer, on every call) guards nothing here.
 */
static size_t tern_rdma_copy_to_kiter(const void *p, size_t n,
				      struct iov_iter *iter)
{
	if (WARN_ON_ONCE(user_backed_iter(iter)))
		return 0;
	return _copy_to_iter(p, n, iter);
}

static size_t tern_rdma_copy_from_kiter(void *p, size_t n,
					struct iov_iter *iter)
{
	if (WARN_ON_ONCE(user_backed_iter(iter)))
		return 0;
	return _copy_from_iter(p, n, iter);
}

void tern_rdma_recv_done(struct ib_cq *cq, struct ib_wc *wc)
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

void tern_rdma_send_done(struct ib_cq *cq, struct ib_wc *wc)
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

int tern_rdma_post_recv(struct tern_rdma_lane *tl,
			struct tern_rdma_buf *buf)
{
	struct ib_sge sge[1 + TERN_RDMA_RX_PAGES];
	u32 left = tl->buf_size - TERN_RDMA_RX_HEAD;
	struct ib_recv_wr wr = {
		.wr_cqe = &buf->cqe,
		.sg_list = sge,
		.num_sge = 1 + tl->rx_pages,
	};
	unsigned int i;

	sge[0].addr = buf->dma;
	sge[0].length = TERN_RDMA_RX_HEAD;
	sge[0].lkey = tl->pd->local_dma_lkey;
	ib_dma_sync_single_for_device(tl->dev, buf->dma, TERN_RDMA_RX_HEAD,
				      DMA_FROM_DEVICE);
	for (i = 0; i < tl->rx_pages; i++) {
		sge[i + 1].addr = buf->page_dma[i];
		sge[i + 1].length = min_t(u32, left, PAGE_SIZE);
		sge[i + 1].lkey = tl->pd->local_dma_lkey;
		left -= sge[i + 1].length;
		ib_dma_sync_single_for_device(tl->dev, buf->page_dma[i],
					      PAGE_SIZE, DMA_FROM_DEVICE);
	}
	return ib_post_recv(tl->cm_id->qp, &wr, NULL);
}

/* The CPU reads the @len bytes received into @buf. */
static void tern_rdma_rx_sync(struct tern_rdma_lane *tl,
			      struct tern_rdma_buf *buf, u32 len)
{
	unsigned int i;

	ib_dma_sync_single_for_cpu(tl->dev, buf->dma, TERN_RDMA_RX_HEAD,
				   DMA_FROM_DEVICE);
	len -= min(len, TERN_RDMA_RX_HEAD);
	for (i = 0; len; i++) {
		ib_dma_sync_single_for_cpu(tl->dev, buf->page_dma[i],
					   PAGE_SIZE, DMA_FROM_DEVICE);
		len -= min_t(u32, len, PAGE_SIZE);
	}
}

/* A frame is whole: its reply may end a registration, then it takes effect. */
static int tern_rdma_rx_frame(struct tern_rdma_lane *tl)
{
	int ret;

	if (tl->lane->rx.hdr.type == TERN_WIRE_REPLY) {
		ret = tern_rdma_reply_seen(tl);
		if (ret)
			return ret;
	}
	return tern_lane_rx_done(tl->lane);
}

/*
 * Page @i of @buf holds @len stream bytes that the core may take whole
 * (tern_lane_rx_swap_page()); the page it gives back is mapped in its
 * place. Return: 1 if taken, 0 if not, <0 (the page is then unmapped
 * and not posted again).
 */
static int tern_rdma_rx_give_page(struct tern_rdma_lane *tl,
				  struct tern_rdma_buf *buf, unsigned int i,
				  u32 len)
{
	struct page *page;
	u64 dma;

	page = tern_lane_rx_swap_page(tl->lane, buf->pages[i], len);
	if (!page)
		return 0;
	ib_dma_unmap_page(tl->dev, buf->page_dma[i], PAGE_SIZE,
			  DMA_FROM_DEVICE);
	__clear_bit(i, &buf->pages_mapped);
	buf->pages[i] = page;
	dma = ib_dma_map_page(tl->dev, page, 0, PAGE_SIZE, DMA_FROM_DEVICE);
	/* the core has the data: only this buffer (and the lane) is lost */
	if (ib_dma_mapping_error(tl->dev, dma))
		return -ENOMEM;
	buf->page_dma[i] = dma;
	__set_bit(i, &buf->pages_mapped);
	TERN_RDMA_STAT(rx_pages_taken, 1);
	return 1;
}

/*
 * Feed @len stream bytes at @p to the core, in order; @last: the
 * message's last. When @p starts page @page of @buf (else -1), the core
 * may take the page instead.
 */
static int tern_rdma_rx_feed(struct tern_rdma_lane *tl, const u8 *p,
			     size_t len, bool last, struct tern_rdma_buf *buf,
			     int page)
{
	struct iov_iter *iter;
	size_t n;
	int ret;

	for (;;) {
		iter = tern_lane_rx_next(tl->lane);
		if (IS_ERR(iter))
			return PTR_ERR(iter);
		if (!iter) {
			tl->rx_msg_end = last && !len;
			ret = tern_rdma_rx_frame(tl);
			if (ret)
				return ret;
			continue;
		}
		if (!len)
			return 0;
		/*
		 * Only at the page's start, and only request data may be
		 * taken: no call for anything else.
		 */
		if (page >= 0 && iter == &tl->lane->rx.data_iter) {
			ret = tern_rdma_rx_give_page(tl, buf, page, len);
			if (ret < 0)
				return ret;
			if (ret) {
				len = 0;	/* a frame may be whole now */
				continue;
			}
		}
		page = -1;
		n = min(len, iov_iter_count(iter));
		if (tern_rdma_copy_to_kiter(p, n, iter) != n)
			return -EFAULT;
		p += n;
		len -= n;
	}
}

/*
 * A DATA message's stream bytes: those in the head (up to pad_from if
 * the sender padded), then those in each page. One call site of
 * tern_rdma_rx_feed(), which the compiler then inlines.
 */
static int tern_rdma_rx_payload(struct tern_rdma_lane *tl,
				struct tern_rdma_buf *buf, u32 pad_from)
{
	u32 in_head = min(buf->len, TERN_RDMA_RX_HEAD);
	u32 left = buf->len - in_head;
	const u8 *p = (const u8 *)buf->addr + sizeof(struct tern_rdma_msg_hdr);
	size_t n = (pad_from ?: in_head) - sizeof(struct tern_rdma_msg_hdr);
	int page = -1;
	int ret;

	for (;;) {
		ret = tern_rdma_rx_feed(tl, p, n, !left, buf, page);
		if (ret || !left)
			return ret;
		page++;
		n = min_t(u32, left, PAGE_SIZE);
		left -= n;
		p = page_address(buf->pages[page]);
	}
}

/* Validate one received message, take its credits, feed its payload. */
static int tern_rdma_rx_msg(struct tern_rdma_lane *tl,
			    struct tern_rdma_buf *buf)
{
	const struct tern_rdma_msg_hdr *h = buf->addr;
	u32 credits, pad_from;

	if (buf->len < sizeof(*h) || buf->len > tl->buf_size)
		return tern_rdma_proto_err(tl, "message of %u bytes", buf->len);
	if (le16_to_cpu(h->magic) != TERN_RDMA_MSG_MAGIC || h->flags)
		return tern_rdma_proto_err(tl, "bad message header %*ph",
					   (int)sizeof(*h), h);
	/* padding: only if we announced a head, inside it, data after it */
	pad_from = le16_to_cpu(h->pad_from);
	if (pad_from && (tl->version < 2 || h->type != TERN_RDMA_MSG_DATA ||
			 pad_from <= sizeof(*h) ||
			 pad_from > TERN_RDMA_RX_HEAD ||
			 buf->len <= TERN_RDMA_RX_HEAD))
		return tern_rdma_proto_err(tl, "padding from %u in a message of %u bytes",
					   pad_from, buf->len);
	credits = le16_to_cpu(h->credits);
	if (credits > tl->peer_recv - tl->tx_credits)
		return tern_rdma_proto_err(tl, "%u credits granted, %u held of %u",
					   credits, tl->tx_credits,
					   tl->peer_recv);
	tl->tx_credits += credits;

	switch (h->type) {
	case TERN_RDMA_MSG_CREDIT:
		if (buf->len != sizeof(*h) || !credits)
			return tern_rdma_proto_err(tl, "credit message of %u bytes granting %u",
						   buf->len, credits);
		return 0;
	case TERN_RDMA_MSG_DATA:
		if (buf->len == sizeof(*h))
			return tern_rdma_proto_err(tl, "empty data message");
		tern_lane_rx_progress(tl->lane);
		return tern_rdma_rx_payload(tl, buf, pad_from);
	}
	return tern_rdma_proto_err(tl, "message type %u", h->type);
}

/* Return: 1 if a message was consumed, 0 if none is waiting, <0. */
int tern_rdma_recv_step(struct tern_rdma_lane *tl)
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

	tern_rdma_rx_sync(tl, buf, min(buf->len, tl->buf_size));
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
		if (tern_rdma_copy_from_kiter(dst + copied, n,
					      &tl->tx_data) != n)
			return -EFAULT;
		copied += n;
	}
	return copied;
}

/*
 * The SEND in @buf is over (completed, flushed or never posted): unmap
 * the pages it took data from and give their frames back to the core.
 */
void tern_rdma_refs_put(struct tern_rdma_lane *tl,
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
	if (len <= READ_ONCE(tern_rdma_inline_copy_max) ||
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
 * Padding that puts a request's data where the peer's receive buffer
 * pages start (its head_size), so that the peer's core may take the
 * pages instead of copying the data: only for a request first in its
 * SEND, whose head fits the peer's head and whose data fits after it.
 */
static u32 tern_rdma_pad(struct tern_rdma_lane *tl,
			 const struct tern_frame *f, size_t len, size_t head,
			 u32 data)
{
	if (!tl->peer_head || f->hdr.type != TERN_WIRE_REQUEST ||
	    len != sizeof(struct tern_rdma_msg_hdr) ||
	    len + head > tl->peer_head ||
	    tl->peer_head + data > tl->tx_chunk)
		return 0;
	return tl->peer_head - (len + head);
}

/*
 * Put all of tl->tx_frame into the SEND of @buf, its header and front
 * copied at *@off (then padding, see tern_rdma_pad()), its data as SEND
 * pieces of its own pages; *@len is the message length so far. The frame
 * is held in buf->refs. If a page will not map, the data is left for
 * copying (tl->tx_ref cleared). Return: 1 when the frame is in, 0 when
 * it does not fit beside what is there.
 */
static int tern_rdma_ref_frame(struct tern_rdma_lane *tl,
			       struct tern_rdma_buf *buf, size_t *off,
			       size_t *len)
{
	struct tern_frame *f = tl->tx_frame;
	size_t head = sizeof(f->hdr) + tern_frame_front_len(f);
	u32 data = iov_iter_count(&tl->tx_data), left = data;
	u32 pad = tern_rdma_pad(tl, f, *len, head, data);
	const struct bio_vec *bv;
	struct tern_rdma_ref *ref;
	unsigned int i, first;
	struct ib_sge *sge;
	u32 l, pos;
	u64 dma;

	if (head + pad + data > tl->tx_chunk - *len ||
	    buf->nr_sge + tl->tx_ref_sges + 2 > tl->tx_max_sge ||
	    buf->nr_refs == TERN_RDMA_SEND_REFS)
		return 0;
	/* room for exactly the head: nothing of the data is copied */
	tern_rdma_copy_frame(tl, (u8 *)buf->addr + *off, head);
	if (pad) {
		/* zeros, not what the buffer held before */
		memset((u8 *)buf->addr + *off + head, 0, pad);
		buf->pad_from = *len + head;
		TERN_RDMA_STAT(padded_sends, 1);
	}
	tern_rdma_sge_buf(tl, buf, *off, head + pad);
	*off += head + pad;
	*len += head + pad;

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
	    unlikely(READ_ONCE(tern_rdma_inject_bad_reply_every) ||
		     READ_ONCE(tern_rdma_inject_long_reply_every)))
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

/* The kmalloc()ed part of a buffer: a send buffer's all, a receive head */
static u32 tern_rdma_buf_bytes(struct tern_rdma_lane *tl,
			       enum dma_data_direction dir)
{
	return dir == DMA_FROM_DEVICE ? TERN_RDMA_RX_HEAD : tl->buf_size;
}

/* A receive buffer's pages after its head, mapped. */
static bool tern_rdma_fill_pages(struct tern_rdma_lane *tl,
				 struct tern_rdma_buf *buf, gfp_t gfp)
{
	unsigned int i;
	u64 dma;

	for (i = 0; i < tl->rx_pages; i++) {
		buf->pages[i] = tern_data_page_alloc(gfp);
		if (!buf->pages[i])
			return false;
		tern_data_pages_posted(1);
		dma = ib_dma_map_page(tl->dev, buf->pages[i], 0, PAGE_SIZE,
				      DMA_FROM_DEVICE);
		if (ib_dma_mapping_error(tl->dev, dma))
			return false;
		buf->page_dma[i] = dma;
		__set_bit(i, &buf->pages_mapped);
	}
	return true;
}

/*
 * Memory for buffers @from to @to - 1 of @bufs; false if out of it. A
 * send buffer is buf_size bytes in one piece, a receive buffer a head
 * and pages (TERN_RDMA_RX_HEAD).
 */
static bool tern_rdma_fill_bufs(struct tern_rdma_lane *tl,
				struct tern_rdma_buf *bufs, unsigned int from,
				unsigned int to, enum dma_data_direction dir,
				gfp_t gfp)
{
	u32 size = tern_rdma_buf_bytes(tl, dir);
	unsigned int i;

	for (i = from; i < to; i++) {
		struct tern_rdma_buf *buf = &bufs[i];

		buf->addr = kmalloc(size, gfp);
		if (!buf->addr)
			return false;
		buf->dma = ib_dma_map_single(tl->dev, buf->addr, size, dir);
		if (ib_dma_mapping_error(tl->dev, buf->dma))
			return false;
		buf->mapped = true;
		if (dir == DMA_FROM_DEVICE && !tern_rdma_fill_pages(tl, buf, gfp))
			return false;
	}
	return true;
}

/*
 * An accepted lane in handshake holds TERN_RDMA_PRE_BUFS buffers each way,
 * enough for the HELLO and its answer, though the peer was promised
 * nr_rbufs: it sends nothing else before the HELLO_ACK arrives. When
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
int tern_rdma_send_step(struct tern_rdma_lane *tl)
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
	buf->pad_from = 0;
	buf->sge[0].addr = buf->dma;
	buf->sge[0].length = sizeof(*h);
	buf->sge[0].lkey = tl->pd->local_dma_lkey;
	buf->nr_sge = 1;
	buf->sge_open = true;
	h = buf->addr;
	while (len < tl->tx_chunk) {
		if (!tl->tx_frame) {
			/* its own first look, without the call */
			if (!tern_lane_tx_pending(tl->lane))
				break;
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
	h->pad_from = cpu_to_le16(buf->pad_from);
	if (buf->pad_from &&
	    unlikely(tern_rdma_one_in(READ_ONCE(tern_rdma_inject_bad_pad_every)))) {
		/* inside our message header or past the peer's head */
		h->pad_from = cpu_to_le16(get_random_u32_below(2) ?
					  1 + get_random_u32_below(sizeof(*h)) :
					  tl->peer_head + 1);
		TERN_RDMA_STAT(injected_bad_pads, 1);
	}

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

void tern_rdma_free_bufs(struct tern_rdma_lane *tl,
			 struct tern_rdma_buf *bufs, unsigned int nr,
			 enum dma_data_direction dir)
{
	u32 size = tern_rdma_buf_bytes(tl, dir);
	struct tern_rdma_buf *buf;
	unsigned int i, j;

	if (!bufs)
		return;
	for (i = 0; i < nr; i++) {
		buf = &bufs[i];
		if (buf->mapped)
			ib_dma_unmap_single(tl->dev, buf->dma, size, dir);
		kfree(buf->addr);
		for (j = 0; j < ARRAY_SIZE(buf->pages) && buf->pages[j]; j++) {
			if (test_bit(j, &buf->pages_mapped))
				ib_dma_unmap_page(tl->dev, buf->page_dma[j],
						  PAGE_SIZE, DMA_FROM_DEVICE);
			tern_data_page_free(buf->pages[j]);
			tern_data_pages_posted(-1);
		}
	}
	kvfree(bufs);
}

/* @nr buffers, of which the first @fill have memory. */
struct tern_rdma_buf *tern_rdma_alloc_bufs(struct tern_rdma_lane *tl,
					   unsigned int nr,
					   unsigned int fill,
					   enum dma_data_direction dir,
					   void (*done)(struct ib_cq *cq,
							struct ib_wc *wc))
{
	struct tern_rdma_buf *bufs;
	unsigned int i;

	bufs = kvcalloc(nr, sizeof(*bufs), GFP_KERNEL);
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
