// SPDX-License-Identifier: GPL-2.0
/*
 * tern TCP transport: one kernel TCP socket per lane.
 *
 * Each lane has one work item (io_work) that does all socket I/O for that
 * lane, both directions, with MSG_DONTWAIT: the socket callbacks
 * (sk_data_ready, sk_write_space, sk_state_change) only queue it; it
 * receives a batch of frames, then sends what is queued. A submitter
 * that may sleep sends its own frames (->push), unless io_work is
 * sending at that moment. Frames
 * are received header first; the core then says where the front and data
 * go (for replies: straight into the requester's pages found by tid), and
 * ->read_sock copies from the skbs into them with no intermediate buffer,
 * a frame per socket lock (recvmsg() on encrypted lanes). Data pages are
 * sent with MSG_SPLICE_PAGES when sendpages_ok() allows (all of a frame's
 * data in one call when every page does), page by page with a copy for the
 * pages that do not; MSG_MORE batches header, front, data and queued
 * frames. Kernels before 6.5 splice by ->sendpage, a page per call
 * (tern_sock_sendmsg_splice() in <tern/compat.h>).
 *
 * Locking: nothing global on the data path. sk->sk_callback_lock guards
 * sk_user_data against shutdown; receive state of a lane is touched only
 * by its io_work (a work item never runs concurrently with itself),
 * transmit state only by the holder of its TERN_OWN_BUSY. Shutdown
 * restores the original callbacks, then cancels io_work synchronously,
 * then releases the socket (the core has waited for ->push callers).
 * Listeners accept from a work item queued by the listening socket's
 * sk_data_ready.
 *
 * Encryption (->encrypt) is the kernel's TLS record layer (the "tls"
 * ULP, TLS 1.3 records with AES-128-GCM) with keys the core derived from
 * its authentication: no TLS handshake, no user space, and NIC kTLS
 * offload applies where the device offers it. Spliced pages stay
 * zero-copy up to the record layer, which seals them into its own
 * buffers.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/net.h>
#include <linux/slab.h>
#include <linux/tcp.h>
#include <linux/tls.h>
#include <linux/workqueue.h>
#include <net/ipv6.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <tern/compat.h>
#include <tern/transport.h>

static unsigned int connect_timeout_ms = 5000;
module_param(connect_timeout_ms, uint, 0644);
MODULE_PARM_DESC(connect_timeout_ms,
		 "Give up a TCP connection attempt after this many ms, at least 1000 (default 5000)");

static unsigned int io_budget = 64;
module_param(io_budget, uint, 0644);
MODULE_PARM_DESC(io_budget,
		 "Socket operations per io_work run before yielding, 1..4096 (default 64)");

static unsigned int rx_batch = 8;
module_param(rx_batch, uint, 0644);
MODULE_PARM_DESC(rx_batch,
		 "Frames io_work receives before it sends what is queued (default 8; 0: one receive step)");

static bool direct_send = true;
module_param(direct_send, bool, 0644);
MODULE_PARM_DESC(direct_send,
		 "Submitters that may sleep send their own frames (default on)");

/*
 * Bytes sent and not acknowledged, or a zero window probed without the
 * peer opening it, for this long fail the connection: a peer that stops
 * reading cannot keep our replies queued for good. 0 leaves TCP's own
 * retries (about 15 minutes) in charge.
 */
static unsigned int user_timeout_ms = 30000;
module_param(user_timeout_ms, uint, 0644);
MODULE_PARM_DESC(user_timeout_ms,
		 "TCP_USER_TIMEOUT of every lane's socket in ms, read when it is set up (0 = off; default 30000)");

/*
 * io_work runs at normal priority unless asked: a high-priority worker
 * preempts the task that woke it at once, so each request is received
 * and answered alone, where at normal priority work gathers and one run
 * takes several (Documentation/performance.rst, item 20). Ceph's
 * messenger runs at normal priority too; nvme-tcp at high.
 */
static bool highpri;
module_param(highpri, bool, 0644);
MODULE_PARM_DESC(highpri,
		 "Lanes set up from now on run io_work at high priority (default off)");

static struct workqueue_struct *tern_tcp_wq;	/* and listeners' accepts */
static struct workqueue_struct *tern_tcp_highpri_wq;

struct tern_tcp_lane {
	struct tern_lane	*lane;
	struct socket		*sock;
	struct work_struct	io_work;
	struct task_struct	*io_task;	/* running io_work, or NULL */
	struct workqueue_struct	*wq;		/* io_work's */
	bool			stopped;	/* under sk_callback_lock */
	bool			failed;
	unsigned long		tx_flags;	/* TERN_OWN_* */

	void			(*saved_data_ready)(struct sock *sk);
	void			(*saved_write_space)(struct sock *sk);
	void			(*saved_state_change)(struct sock *sk);

	bool			tls;		/* the tls ULP is on the socket */
	bool			rx_sealed;	/* records are opened by it */
	unsigned int		rx_frames;	/* received, for rx_batch */

	struct tern_frame	*tx_frame;
	size_t			tx_off;	/* header, tag and front bytes sent */
	struct iov_iter		tx_data;
	bool			tx_splice_all;	/* every data page splices */
	bool			tx_corked;	/* last frame ended with MSG_MORE */
};

struct tern_tcp_listener {
	struct tern_listener	*lis;
	struct socket		*sock;
	struct work_struct	accept_work;
	bool			stopped;	/* under sk_callback_lock */
	void			(*saved_data_ready)(struct sock *sk);
};

static void tern_tcp_data_ready(struct sock *sk)
{
	struct tern_tcp_lane *tl;

	read_lock_bh(&sk->sk_callback_lock);
	tl = sk->sk_user_data;
	if (tl && !tl->stopped)
		queue_work(tl->wq, &tl->io_work);
	read_unlock_bh(&sk->sk_callback_lock);
}

static void tern_tcp_write_space(struct sock *sk)
{
	struct tern_tcp_lane *tl;

	read_lock_bh(&sk->sk_callback_lock);
	tl = sk->sk_user_data;
	if (tl && !tl->stopped && sk_stream_is_writeable(sk)) {
		clear_bit(SOCK_NOSPACE, &sk->sk_socket->flags);
		queue_work(tl->wq, &tl->io_work);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

static void tern_tcp_state_change(struct sock *sk)
{
	struct tern_tcp_lane *tl;

	/* io_work sees the EOF or error on its next receive. */
	read_lock_bh(&sk->sk_callback_lock);
	tl = sk->sk_user_data;
	if (tl && !tl->stopped)
		queue_work(tl->wq, &tl->io_work);
	read_unlock_bh(&sk->sk_callback_lock);
}

/* The frame is whole (tern_lane_rx_next() said so): let it take effect. */
static int tern_tcp_rx_done(struct tern_tcp_lane *tl)
{
	int ret = tern_lane_rx_done(tl->lane);

	tl->rx_frames++;
	return ret ? ret : 1;
}

/*
 * Encrypted lanes: recvmsg() opens the TLS records, one call per frame
 * part. Return: 1 if bytes came or a frame completed, 0 if the socket is
 * drained, or a negative errno.
 */
static int tern_tcp_recv_step(struct tern_tcp_lane *tl)
{
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	struct iov_iter *iter = tern_lane_rx_next(tl->lane);
	int ret;

	if (IS_ERR(iter))
		return PTR_ERR(iter);
	if (!iter)
		return tern_tcp_rx_done(tl);
	msg.msg_iter = *iter;
	ret = sock_recvmsg(tl->sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (ret == -EAGAIN)
		return 0;
	if (ret == 0)
		return -EPIPE;	/* orderly close by the peer */
	if (ret > 0) {
		*iter = msg.msg_iter;
		tern_lane_rx_progress(tl->lane);
		return 1;
	}
	return ret;
}

/*
 * ->read_sock actor: copy from @skb what the frame in progress still
 * wants, straight into the core's buffers, and no byte past its end.
 */
static int tern_tcp_rx_actor(read_descriptor_t *desc, struct sk_buff *skb,
			     unsigned int offset, size_t len)
{
	struct tern_tcp_lane *tl = desc->arg.data;
	struct iov_iter *iter;
	size_t used = 0, n;
	int err;

	while (used < len) {
		iter = tern_lane_rx_next(tl->lane);
		if (!iter)
			break;		/* the frame is whole */
		if (IS_ERR(iter)) {
			err = PTR_ERR(iter);
			goto fail;
		}
		n = min(len - used, iov_iter_count(iter));
		err = skb_copy_datagram_iter(skb, offset + used, iter, n);
		if (err)
			goto fail;
		used += n;
	}
	return used;

fail:
	desc->error = err;
	desc->count = 0;
	return 0;	/* the lane fails; what was read is moot */
}

/*
 * Receive by ->read_sock, as nvme-tcp's host does: one socket lock per
 * frame where recvmsg() took one per frame part, and copies straight from
 * the skbs. A read stops at the end of a frame, so the core finishes the
 * frame (replies complete, ULP callbacks run, TLS may be switched on)
 * with the socket unlocked. Return: as tern_tcp_recv_step().
 */
static int tern_tcp_read_step(struct tern_tcp_lane *tl)
{
	read_descriptor_t desc = { .arg.data = tl, .count = 1 };
	struct iov_iter *iter = tern_lane_rx_next(tl->lane);
	struct socket *sock = tl->sock;
	struct sock *sk = sock->sk;
	int ret;

	if (IS_ERR(iter))
		return PTR_ERR(iter);
	if (!iter)
		return tern_tcp_rx_done(tl);
	/*
	 * Between messages the queue is mostly empty: say so without the
	 * socket lock. Bytes queued after this look wake io_work through
	 * sk_data_ready, and EOF or errors are found on that run.
	 */
	if (skb_queue_empty_lockless(&sk->sk_receive_queue) &&
	    !READ_ONCE(sk->sk_err) &&
	    !(READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN))
		return 0;
	lock_sock(sk);
	ret = sock->ops->read_sock(sk, &desc, tern_tcp_rx_actor);
	release_sock(sk);
	if (desc.error)
		return desc.error;
	if (ret > 0) {
		tern_lane_rx_progress(tl->lane);
		return 1;
	}
	if (ret < 0)
		return ret;
	ret = sock_error(sk);
	if (ret)
		return ret;
	if (READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN)
		return -EPIPE;	/* orderly close by the peer */
	return 0;
}

/* Header, tag (signed frames) and front: what precedes the data. */
static size_t tern_tcp_head_len(const struct tern_frame *f)
{
	return sizeof(f->hdr) + f->tag_len + tern_frame_front_len(f);
}

static int tern_tcp_send_head(struct tern_tcp_lane *tl, struct tern_frame *f,
			      bool more)
{
	const struct kvec parts[] = {
		{ .iov_base = &f->hdr, .iov_len = sizeof(f->hdr) },
		{ .iov_base = f->tag, .iov_len = f->tag_len },
		{ .iov_base = (void *)f->front,
		  .iov_len = tern_frame_front_len(f) },
	};
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	size_t off = tl->tx_off;
	struct kvec kv[ARRAY_SIZE(parts)];
	unsigned int i;
	int n = 0, ret;

	for (i = 0; i < ARRAY_SIZE(parts); i++) {
		if (off >= parts[i].iov_len) {
			off -= parts[i].iov_len;
			continue;
		}
		kv[n].iov_base = (u8 *)parts[i].iov_base + off;
		kv[n++].iov_len = parts[i].iov_len - off;
		off = 0;
	}
	if (more)
		msg.msg_flags |= MSG_MORE;
	ret = kernel_sendmsg(tl->sock, &msg, kv, n,
			     tern_tcp_head_len(f) - tl->tx_off);
	if (ret > 0)
		tl->tx_off += ret;
	return ret;
}

/* Can every page of the frame's data be spliced (not slab, refcounted)? */
static bool tern_tcp_frame_splices(const struct tern_frame *f)
{
	u32 left = tern_frame_data_len(f);
	unsigned int i;

	for (i = 0; i < f->nr_bvec && left; i++) {
		u32 len = min(f->bvec[i].bv_len, left);

		if (!tern_sendpages_ok(f->bvec[i].bv_page, len,
				       f->bvec[i].bv_offset))
			return false;
		left -= len;
	}
	return true;
}

/* Hand all remaining data to TCP in one call, zero copy. */
static int tern_tcp_send_data_spliced(struct tern_tcp_lane *tl, bool more)
{
	struct msghdr msg = {
		.msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL | TERN_MSG_SPLICE_PAGES,
	};
	int ret;

	if (more)
		msg.msg_flags |= MSG_MORE;
	msg.msg_iter = tl->tx_data;
	ret = sock_sendmsg(tl->sock, &msg);
	if (ret > 0)
		iov_iter_advance(&tl->tx_data, ret);
	return ret;
}

/* One page at a time, splicing the pages that allow it. */
static int tern_tcp_send_data(struct tern_tcp_lane *tl, bool more)
{
	const struct bio_vec *bv = tl->tx_data.bvec;
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	size_t off = bv->bv_offset + tl->tx_data.iov_offset;
	struct page *page = bv->bv_page + (off >> PAGE_SHIFT);
	size_t len = bv->bv_len - tl->tx_data.iov_offset;
	struct bio_vec seg;
	int ret;

	off = offset_in_page(off);
	len = min3(len, PAGE_SIZE - off, iov_iter_count(&tl->tx_data));
	if (more || len < iov_iter_count(&tl->tx_data))
		msg.msg_flags |= MSG_MORE;
	bvec_set_page(&seg, page, len, off);
	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, &seg, 1, len);
	if (tern_sendpages_ok(page, len, off))
		ret = tern_sock_sendmsg_splice(tl->sock, &msg);
	else
		ret = sock_sendmsg(tl->sock, &msg);
	if (ret > 0)
		iov_iter_advance(&tl->tx_data, ret);
	return ret;
}

/*
 * Transmit state is owned by whoever holds TERN_OWN_BUSY in tx_flags
 * (<tern/transport.h>): io_work, or a submitter in ->push. io_work that
 * finds it taken leaves a note, and the holder requeues it on release.
 */
static void tern_tcp_tx_unlock(struct tern_tcp_lane *tl)
{
	if (tern_own_leave(&tl->tx_flags) && tern_own_take_note(&tl->tx_flags))
		queue_work(tl->wq, &tl->io_work);
}

static void tern_tcp_fail(struct tern_tcp_lane *tl, int err)
{
	WRITE_ONCE(tl->failed, true);
	tern_lane_error(tl->lane, err == -EPIPE ? 0 : err);
}

/* Return: 1 if progress was made, 0 if nothing (more) can be sent, <0. */
static int tern_tcp_send_step(struct tern_tcp_lane *tl)
{
	struct tern_frame *f = tl->tx_frame;
	size_t head;
	bool more;
	int ret;

	if (!f) {
		f = tern_lane_tx_next(tl->lane);
		if (!f) {
			/*
			 * The frame that made us say MSG_MORE went away
			 * (cancelled, or the lane is dying): push the tail
			 * rather than leave it to the next send or ACK.
			 */
			if (tl->tx_corked) {
				tl->tx_corked = false;
				tcp_sock_set_cork(tl->sock->sk, false);
			}
			return 0;
		}
		tl->tx_frame = f;
		tl->tx_off = 0;
		iov_iter_bvec(&tl->tx_data, ITER_SOURCE, f->bvec, f->nr_bvec,
			      tern_frame_data_len(f));
		tl->tx_splice_all = TERN_SPLICES_ITER &&
				    tern_tcp_frame_splices(f);
	}

	head = tern_tcp_head_len(f);
	more = tern_lane_tx_pending(tl->lane);
	if (tl->tx_off < head) {
		ret = tern_tcp_send_head(tl, f,
					 more || iov_iter_count(&tl->tx_data));
		if (ret == -EAGAIN)
			return 0;
		if (ret < 0)
			return ret;
		if (tl->tx_off < head)
			return 1;
	}
	if (iov_iter_count(&tl->tx_data)) {
		if (tl->tx_splice_all)
			ret = tern_tcp_send_data_spliced(tl, more);
		else
			ret = tern_tcp_send_data(tl, more);
		if (ret == -EAGAIN)
			return 0;
		if (ret < 0)
			return ret;
		if (iov_iter_count(&tl->tx_data))
			return 1;
	}
	tl->tx_frame = NULL;
	tl->tx_corked = more;
	tern_lane_tx_done(tl->lane, f);
	return 1;
}

/* io_work's send step: skipped while a submitter sends. */
static int tern_tcp_send_some(struct tern_tcp_lane *tl)
{
	int ret;

	if (!tern_own_enter(&tl->tx_flags))
		return 0;
	/* this is the run any note asked for */
	tern_own_take_note(&tl->tx_flags);
	ret = tern_tcp_send_step(tl);
	tern_tcp_tx_unlock(tl);
	return ret;
}

/*
 * io_work's send phase: what is queued, until nothing is left, the
 * socket is full, a submitter sends, or @budget is spent. Return: 1 if
 * something was sent, 0 if nothing, <0.
 */
static int tern_tcp_send_phase(struct tern_tcp_lane *tl, int *budget)
{
	int ret, sent = 0;

	/*
	 * Nothing to send most rounds: skip the TX_BUSY handshake then. A
	 * frame queued after this look is pushed or kicked by its queuer;
	 * a cork left by a cancelled frame is undone by the send step.
	 */
	while (*budget > 0 &&
	       (READ_ONCE(tl->tx_frame) || READ_ONCE(tl->tx_corked) ||
		tern_lane_tx_pending(tl->lane))) {
		ret = tern_tcp_send_some(tl);
		if (ret <= 0)
			return ret ?: sent;
		sent = 1;
		--*budget;
	}
	return sent;
}

static void tern_tcp_io_run(struct tern_tcp_lane *tl)
{
	int budget = tern_io_budget(READ_ONCE(io_budget));
	unsigned int batch = READ_ONCE(rx_batch), end;
	int sent, received;

	if (READ_ONCE(tl->failed))
		return;
	for (;;) {
		/*
		 * Receive up to rx_batch frames, or until the socket is
		 * drained, then send: the replies to a batch of requests
		 * leave together, MSG_MORE on all but the last.
		 */
		end = tl->rx_frames + batch;
		do {
			received = tl->rx_sealed ? tern_tcp_recv_step(tl) :
						   tern_tcp_read_step(tl);
		} while (received > 0 && --budget > 0 &&
			 (int)(end - tl->rx_frames) > 0);
		/*
		 * Even when receiving failed: the replies already made
		 * leave before the lane closes, so that one bad frame does
		 * not cost the peer the answers to the good ones before it.
		 */
		sent = tern_tcp_send_phase(tl, &budget);
		if (received < 0 || sent < 0) {
			tern_tcp_fail(tl, received < 0 ? received : sent);
			return;
		}
		if (!sent && !received)
			return;
		if (budget <= 0)
			break;
	}
	queue_work(tl->wq, &tl->io_work);	/* yield, then go on */
}

/*
 * io_task tells tern_tcp_push() that io_work itself queued the frame: a
 * work item never runs twice at once, so only io_work's own task finds
 * itself there (current_work() costs two calls per push).
 */
static void tern_tcp_io_work(struct work_struct *work)
{
	struct tern_tcp_lane *tl = container_of(work, struct tern_tcp_lane,
						io_work);

	WRITE_ONCE(tl->io_task, current);
	tern_tcp_io_run(tl);
	WRITE_ONCE(tl->io_task, NULL);
}

/*
 * Send from the submitter's context, as nvme-tcp does from queue_rq: the
 * socket lock may sleep, so only when the submitter may. Socket full:
 * sk_write_space queues io_work.
 *
 * A frame queued by io_work itself (a reply made while it received the
 * request, the backend completing in the submitter's context) is sent by
 * the send phase that follows every receive and every send in io_work:
 * queueing io_work again would only cost it an empty run.
 */
static void tern_tcp_push(struct tern_lane *lane, bool can_sleep)
{
	struct tern_tcp_lane *tl = lane->tpriv;
	unsigned int budget = tern_io_budget(READ_ONCE(io_budget));
	unsigned int sends = 0;
	int ret = 0;

	if (READ_ONCE(tl->io_task) == current)
		return;
	if (!can_sleep || !READ_ONCE(direct_send) ||
	    !tern_own_trylock(&tl->tx_flags)) {
		queue_work(tl->wq, &tl->io_work);
		return;
	}
	if (!READ_ONCE(tl->failed)) {
		while ((ret = tern_tcp_send_step(tl)) > 0) {
			sends++;
			if (!--budget)
				break;
		}
		if (ret < 0)
			tern_tcp_fail(tl, ret);
	}
	tern_tcp_tx_unlock(tl);
	if (sends)
		tern_lane_count_submitter_sends(lane, sends);
	if (ret > 0)	/* more to send: not on the submitter's time */
		queue_work(tl->wq, &tl->io_work);
}

static void tern_tcp_sock_setup(struct socket *sock)
{
	struct sock *sk = sock->sk;

	tcp_sock_set_nodelay(sk);
	tcp_sock_set_user_timeout(sk, min_t(unsigned int, INT_MAX,
					    READ_ONCE(user_timeout_ms)));
	lock_sock(sk);
	/* We may run in memory reclaim: no task frags, no sleeping allocs. */
	sk->sk_allocation = GFP_ATOMIC;
	sk->sk_use_task_frag = false;
	release_sock(sk);
}

static struct tern_tcp_lane *tern_tcp_lane_alloc(struct tern_lane *lane,
						 struct socket *sock)
{
	struct tern_tcp_lane *tl;

	tl = kzalloc(sizeof(*tl), GFP_KERNEL);
	if (!tl)
		return NULL;
	tl->lane = lane;
	tl->sock = sock;
	INIT_WORK(&tl->io_work, tern_tcp_io_work);
	tl->wq = READ_ONCE(highpri) ? tern_tcp_highpri_wq : tern_tcp_wq;
	lane->tpriv = tl;
	return tl;
}

static void tern_tcp_lane_start(struct tern_tcp_lane *tl)
{
	struct sock *sk = tl->sock->sk;

	write_lock_bh(&sk->sk_callback_lock);
	if (!tl->stopped) {
		sk->sk_user_data = tl;
		tl->saved_data_ready = sk->sk_data_ready;
		tl->saved_write_space = sk->sk_write_space;
		tl->saved_state_change = sk->sk_state_change;
		sk->sk_data_ready = tern_tcp_data_ready;
		sk->sk_write_space = tern_tcp_write_space;
		sk->sk_state_change = tern_tcp_state_change;
		/* Data may have arrived before the callbacks were set. */
		queue_work(tl->wq, &tl->io_work);
	}
	write_unlock_bh(&sk->sk_callback_lock);
}

static void tern_tcp_shutdown(struct tern_lane *lane)
{
	struct tern_tcp_lane *tl = lane->tpriv;
	struct sock *sk;

	if (!tl)
		return;
	sk = tl->sock->sk;
	write_lock_bh(&sk->sk_callback_lock);
	if (sk->sk_user_data == tl) {
		sk->sk_user_data = NULL;
		sk->sk_data_ready = tl->saved_data_ready;
		sk->sk_write_space = tl->saved_write_space;
		sk->sk_state_change = tl->saved_state_change;
	}
	tl->stopped = true;
	write_unlock_bh(&sk->sk_callback_lock);

	kernel_sock_shutdown(tl->sock, SHUT_RDWR);
	cancel_work_sync(&tl->io_work);
	sock_release(tl->sock);
	lane->tpriv = NULL;
	kfree(tl);
}

static void tern_tcp_kick(struct tern_lane *lane)
{
	struct tern_tcp_lane *tl = lane->tpriv;

	if (tl)
		queue_work(tl->wq, &tl->io_work);
}

static int tern_tcp_addrlen(const struct sockaddr_storage *addr)
{
	return addr->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					     sizeof(struct sockaddr_in);
}

static int tern_tcp_connect(struct tern_lane *lane,
			    const struct sockaddr_storage *addr)
{
	struct tern_tcp_lane *tl;
	struct socket *sock;
	int err;

	err = sock_create_kern(&init_net, addr->ss_family, SOCK_STREAM,
			       IPPROTO_TCP, &sock);
	if (err)
		return err;
	tern_tcp_sock_setup(sock);

	lock_sock(sock->sk);
	/* a send timeout of 0 would also make the connect nonblocking */
	sock->sk->sk_sndtimeo =
		msecs_to_jiffies(tern_timeout_ms(READ_ONCE(connect_timeout_ms)));
	release_sock(sock->sk);
	err = kernel_connect(sock, (struct sockaddr *)addr,
			     tern_tcp_addrlen(addr), 0);
	if (err) {
		sock_release(sock);
		return err == -EINPROGRESS ? -ETIMEDOUT : err;
	}
	lock_sock(sock->sk);
	sock->sk->sk_sndtimeo = MAX_SCHEDULE_TIMEOUT;
	release_sock(sock->sk);

	tl = tern_tcp_lane_alloc(lane, sock);
	if (!tl) {
		sock_release(sock);
		return -ENOMEM;
	}
	tern_tcp_lane_start(tl);
	return 0;
}

static void tern_tcp_accept_one(struct tern_tcp_listener *tll,
				struct socket *sock)
{
	struct sockaddr_storage peer = {};
	struct tern_tcp_lane *tl;
	struct tern_lane *lane;

	if (kernel_getpeername(sock, (struct sockaddr *)&peer) < 0) {
		sock_release(sock);
		return;
	}
	lane = tern_lane_accept(tll->lis, &peer);
	if (!lane) {
		sock_release(sock);
		return;
	}
	tern_tcp_sock_setup(sock);
	tl = tern_tcp_lane_alloc(lane, sock);
	if (!tl) {
		sock_release(sock);
		tern_lane_abort(lane);
		return;
	}
	tern_lane_start(lane);
	tern_tcp_lane_start(tl);
}

static void tern_tcp_accept_work(struct work_struct *work)
{
	struct tern_tcp_listener *tll = container_of(work,
						     struct tern_tcp_listener,
						     accept_work);
	struct socket *sock;
	int err;

	for (;;) {
		err = kernel_accept(tll->sock, &sock, O_NONBLOCK);
		if (err == -EAGAIN)
			return;
		if (err) {
			pr_warn_ratelimited("accept on %pISpc failed (%d)\n",
					    &tll->lis->addr, err);
			return;
		}
		tern_tcp_accept_one(tll, sock);
	}
}

static void tern_tcp_listen_data_ready(struct sock *sk)
{
	struct tern_tcp_listener *tll;

	read_lock_bh(&sk->sk_callback_lock);
	tll = __locked_read_sk_user_data_with_flags(sk, SK_USER_DATA_NOCOPY);
	if (tll && !tll->stopped)
		queue_work(tern_tcp_wq, &tll->accept_work);
	read_unlock_bh(&sk->sk_callback_lock);
}

static int tern_tcp_listen(struct tern_listener *lis)
{
	struct tern_tcp_listener *tll;
	struct sock *sk;
	int err;

	tll = kzalloc(sizeof(*tll), GFP_KERNEL);
	if (!tll)
		return -ENOMEM;
	tll->lis = lis;
	INIT_WORK(&tll->accept_work, tern_tcp_accept_work);

	err = sock_create_kern(&init_net, lis->addr.ss_family, SOCK_STREAM,
			       IPPROTO_TCP, &tll->sock);
	if (err)
		goto out_free;
	sk = tll->sock->sk;
	sock_set_reuseaddr(sk);
	/* "[::]" means IPv6 only, so "0.0.0.0" can listen beside it. */
	if (lis->addr.ss_family == AF_INET6)
		ip6_sock_set_v6only(sk);
	err = kernel_bind(tll->sock, (struct sockaddr *)&lis->addr,
			  tern_tcp_addrlen(&lis->addr));
	if (err) {
		pr_warn("cannot bind %pISpc (%d)\n", &lis->addr, err);
		goto out_release;
	}
	err = kernel_listen(tll->sock, 128);
	if (err)
		goto out_release;

	/* NOCOPY: accepted children must not inherit a pointer to us. */
	write_lock_bh(&sk->sk_callback_lock);
	__rcu_assign_sk_user_data_with_flags(sk, tll, SK_USER_DATA_NOCOPY);
	tll->saved_data_ready = sk->sk_data_ready;
	sk->sk_data_ready = tern_tcp_listen_data_ready;
	write_unlock_bh(&sk->sk_callback_lock);
	lis->tpriv = tll;
	queue_work(tern_tcp_wq, &tll->accept_work);
	pr_info("listening on %pISpc\n", &lis->addr);
	return 0;

out_release:
	sock_release(tll->sock);
out_free:
	kfree(tll);
	return err;
}

static void tern_tcp_stop_listen(struct tern_listener *lis)
{
	struct tern_tcp_listener *tll = lis->tpriv;
	struct sock *sk = tll->sock->sk;

	write_lock_bh(&sk->sk_callback_lock);
	rcu_assign_sk_user_data(sk, NULL);
	sk->sk_data_ready = tll->saved_data_ready;
	tll->stopped = true;
	write_unlock_bh(&sk->sk_callback_lock);

	cancel_work_sync(&tll->accept_work);
	kernel_sock_shutdown(tll->sock, SHUT_RDWR);
	sock_release(tll->sock);
	lis->tpriv = NULL;
	kfree(tll);
}

/*
 * Seal (@tx) or open what crosses the lane from now on, TLS 1.3 records
 * with AES-128-GCM under @keys, numbered from 0. Called between frames;
 * the first call puts the tls ULP on the socket (tls.ko, loaded on
 * demand by the kernel).
 */
static int tern_tcp_encrypt(struct tern_lane *lane,
			    const struct tern_lane_keys *keys, bool tx)
{
	struct tern_tcp_lane *tl = lane->tpriv;
	struct tls12_crypto_info_aes_gcm_128 ci = {
		.info.version = TLS_1_3_VERSION,
		.info.cipher_type = TLS_CIPHER_AES_GCM_128,
	};
	struct socket *sock = tl->sock;
	int err;

	BUILD_BUG_ON(sizeof(ci.key) != sizeof(keys->key) ||
		     sizeof(ci.salt) != sizeof(keys->salt) ||
		     sizeof(ci.iv) != sizeof(keys->iv));
	if (!tl->tls) {
		err = sock->ops->setsockopt(sock, SOL_TCP, TCP_ULP,
					    KERNEL_SOCKPTR("tls"), 3);
		if (err) {
			pr_warn_ratelimited("%s: cannot put the tls ULP on the socket, is tls.ko there? (%d)\n",
					    tern_lane_name(lane), err);
			return err;
		}
		tl->tls = true;
	}
	memcpy(ci.key, keys->key, sizeof(ci.key));
	memcpy(ci.salt, keys->salt, sizeof(ci.salt));
	memcpy(ci.iv, keys->iv, sizeof(ci.iv));
	err = sock->ops->setsockopt(sock, SOL_TLS, tx ? TLS_TX : TLS_RX,
				    KERNEL_SOCKPTR(&ci), sizeof(ci));
	memzero_explicit(&ci, sizeof(ci));
	if (err)
		pr_warn_ratelimited("%s: cannot install the %s keys (%d)\n",
				    tern_lane_name(lane), tx ? "transmit" :
				    "receive", err);
	else if (!tx)
		tl->rx_sealed = true;
	return err;
}

static struct tern_transport_ops tern_tcp_ops = {
	.name		= "tcp",
	.owner		= THIS_MODULE,
	.listen		= tern_tcp_listen,
	.stop_listen	= tern_tcp_stop_listen,
	.connect	= tern_tcp_connect,
	.kick		= tern_tcp_kick,
	.push		= tern_tcp_push,
	.push_sleeps	= true,
	.shutdown	= tern_tcp_shutdown,
	.encrypt	= tern_tcp_encrypt,
	.frame_tags	= true,
};

static int __init tern_tcp_init(void)
{
	int err;

	tern_tcp_wq = alloc_workqueue("tern_tcp", WQ_MEM_RECLAIM, 0);
	if (!tern_tcp_wq)
		return -ENOMEM;
	tern_tcp_highpri_wq = alloc_workqueue("tern_tcp_highpri",
					      WQ_MEM_RECLAIM | WQ_HIGHPRI, 0);
	if (!tern_tcp_highpri_wq) {
		err = -ENOMEM;
		goto out_wq;
	}
	err = tern_transport_register(&tern_tcp_ops);
	if (err)
		goto out_highpri_wq;
	return 0;

out_highpri_wq:
	destroy_workqueue(tern_tcp_highpri_wq);
out_wq:
	destroy_workqueue(tern_tcp_wq);
	return err;
}

static void __exit tern_tcp_exit(void)
{
	tern_transport_unregister(&tern_tcp_ops);
	destroy_workqueue(tern_tcp_highpri_wq);
	destroy_workqueue(tern_tcp_wq);
}

module_init(tern_tcp_init);
module_exit(tern_tcp_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("tern messenger TCP transport");
MODULE_VERSION(TERN_VERSION);
MODULE_ALIAS("tern-transport-tcp");
