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
 * A receive buffer is a small head and pages: a request whose inline
 * data leads a SEND is padded so that the data starts the receiver's
 * first page, which the receiver's core may take for the request
 * instead of copying it (tern_lane_rx_swap_page()).
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
 * Contexts: completions run in a work item (each lane's own CQ, polled by
 * its cq_work on tern_rdma_cq_wq): they move receive buffers to a list and
 * count send completions, then run the lane's I/O right there, in process
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
 * Locking: received buffers go on a lockless list (tl->rx_done); tl->lock
 * (bh) guards the send completion count, the completed ops, the free send
 * queue entries and the ready/stopped flags; all other lane state is
 * io_work's. rdma_cm events are serialised per cm_id by rdma_cm; the lane
 * handler only completes the connect wait or reports an error. Shutdown
 * stops io_work from being queued, drains the QP (every posted work
 * request completes, flushed), cancels io_work and only then frees the QP,
 * CQ, buffers and the cm_id; rdma_destroy_id() waits out a running event
 * handler.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "rdma.h"

unsigned int tern_rdma_resolve_timeout_ms = 2000;
module_param_named(resolve_timeout_ms, tern_rdma_resolve_timeout_ms, uint, 0644);
MODULE_PARM_DESC(resolve_timeout_ms,
		 "Address and route resolution timeout in ms (default 2000)");

unsigned int tern_rdma_connect_timeout_ms = 5000;
module_param_named(connect_timeout_ms, tern_rdma_connect_timeout_ms, uint, 0644);
MODULE_PARM_DESC(connect_timeout_ms,
		 "Give up a connection attempt after this many ms in total, at least 1000 (default 5000)");

unsigned int tern_rdma_relisten_ms = 1000;
module_param_named(relisten_ms, tern_rdma_relisten_ms, uint, 0644);
MODULE_PARM_DESC(relisten_ms,
		 "After a device removal, try to listen again every this many ms, at least 100 (default 1000)");

unsigned int tern_rdma_buf_size = 16384;
module_param_named(buf_size, tern_rdma_buf_size, uint, 0444);
MODULE_PARM_DESC(buf_size,
		 "Bytes per send and receive buffer, 4096..65536, fewer on a device with few receive SGEs (default 16384)");

unsigned int tern_rdma_recv_depth = 64;
module_param_named(recv_depth, tern_rdma_recv_depth, uint, 0444);
MODULE_PARM_DESC(recv_depth,
		 "Most receive buffers a lane posts, the peer's credits; fewer where its session's queue depth needs fewer, 8..1024 (default 64)");

unsigned int tern_rdma_send_depth = 32;
module_param_named(send_depth, tern_rdma_send_depth, uint, 0444);
MODULE_PARM_DESC(send_depth,
		 "Send buffers (and send queue entries) per lane, 2..1024 (default 32)");

unsigned int tern_rdma_io_budget = 64;
module_param_named(io_budget, tern_rdma_io_budget, uint, 0644);
MODULE_PARM_DESC(io_budget,
		 "Messages per io_work run before yielding, 1..4096 (default 64)");

unsigned int tern_rdma_inline_max = 4096;
module_param_named(inline_max, tern_rdma_inline_max, uint, 0644);
MODULE_PARM_DESC(inline_max,
		 "Request data above this many bytes is moved by RDMA READ, not copied into SENDs, in sessions that do not choose (default 4096)");

unsigned int tern_rdma_inline_read_max = 4096;
module_param_named(inline_read_max, tern_rdma_inline_read_max, uint, 0644);
MODULE_PARM_DESC(inline_read_max,
		 "Reply data above this many bytes is moved by RDMA WRITE, not copied into SENDs, in sessions that do not choose (default 4096)");

unsigned int tern_rdma_inline_copy_max = 1024;
module_param_named(inline_copy_max, tern_rdma_inline_copy_max, uint, 0644);
MODULE_PARM_DESC(inline_copy_max,
		 "Inline data above this many bytes goes into the SEND from its own pages when it fits one SEND, not copied (default 1024)");

unsigned int tern_rdma_mr_count = 128;
module_param_named(mr_count, tern_rdma_mr_count, uint, 0444);
MODULE_PARM_DESC(mr_count,
		 "Most fast registration MRs a requester lane keeps; fewer where its session's queue depth needs fewer, 0 disables zero-copy sends (default 128)");

unsigned int tern_rdma_mr_pages = 256;
module_param_named(mr_pages, tern_rdma_mr_pages, uint, 0444);
MODULE_PARM_DESC(mr_pages,
		 "Pages per MR, capped by the device (default 256)");

unsigned int tern_rdma_rw_ctxs = 256;
module_param_named(rw_ctxs, tern_rdma_rw_ctxs, uint, 0444);
MODULE_PARM_DESC(rw_ctxs,
		 "Send queue room per accepted lane for RDMA READ/WRITE work requests (default 256)");

static unsigned int tern_rdma_rx_batch = 8;
module_param_named(rx_batch, tern_rdma_rx_batch, uint, 0644);
MODULE_PARM_DESC(rx_batch,
		 "Messages the lane's I/O receives before it sends what is queued (default 8; 0: one receive step)");

bool tern_rdma_cq_by_lane = true;
module_param_named(cq_by_lane, tern_rdma_cq_by_lane, bool, 0644);
MODULE_PARM_DESC(cq_by_lane,
		 "Requester lane i takes its CQ on completion vector i (default on)");

unsigned int tern_rdma_inject_bad_rkey_every;
module_param_named(inject_bad_rkey_every, tern_rdma_inject_bad_rkey_every, uint, 0644);
MODULE_PARM_DESC(inject_bad_rkey_every,
		 "Send a remote data descriptor with a wrong rkey with a chance of one in N requests (0 = off; testing only)");

unsigned int tern_rdma_inject_bad_len_every;
module_param_named(inject_bad_len_every, tern_rdma_inject_bad_len_every, uint, 0644);
MODULE_PARM_DESC(inject_bad_len_every,
		 "Send a remote data descriptor with a wrong length with a chance of one in N requests (0 = off; testing only)");

unsigned int tern_rdma_inject_bad_reply_every;
module_param_named(inject_bad_reply_every, tern_rdma_inject_bad_reply_every, uint, 0644);
MODULE_PARM_DESC(inject_bad_reply_every,
		 "Send a reply with a tid never sent, tid 0 or an unknown flag with a chance of one in N replies (0 = off; testing only)");

unsigned int tern_rdma_inject_long_reply_every;
module_param_named(inject_long_reply_every, tern_rdma_inject_long_reply_every, uint, 0644);
MODULE_PARM_DESC(inject_long_reply_every,
		 "Send a reply of remotely written data claiming more than the requester's buffer with a chance of one in N (0 = off; testing only)");

unsigned int tern_rdma_inject_bad_pad_every;
module_param_named(inject_bad_pad_every, tern_rdma_inject_bad_pad_every, uint, 0644);
MODULE_PARM_DESC(inject_bad_pad_every,
		 "Send a padded request with padding outside the peer's head with a chance of one in N (0 = off; testing only)");

struct workqueue_struct *tern_rdma_wq;
struct workqueue_struct *tern_rdma_cq_wq;
DEFINE_PER_CPU(struct tern_rdma_counters, tern_rdma_stats);

/*
 * Fail the lane from a completion or a work item: at once when it is
 * live, else when tern_rdma_lane_go() makes it so.
 */
void tern_rdma_lane_fail(struct tern_rdma_lane *tl, int err)
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

void tern_rdma_wc_error(struct tern_rdma_lane *tl, struct ib_wc *wc,
			const char *op)
{
	if (wc->status != IB_WC_WR_FLUSH_ERR)
		pr_warn_ratelimited("%s: %s completion failed: %s (%d)\n",
				    tern_lane_name(tl->lane), op,
				    ib_wc_status_msg(wc->status), wc->status);
	tern_rdma_lane_fail(tl, wc->status == IB_WC_WR_FLUSH_ERR ?
			    -ECONNRESET : -EIO);
}

void tern_rdma_kick_locked(struct tern_rdma_lane *tl)
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

__printf(2, 3)
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

/*
 * Take the lane's I/O, or leave a note for its holder. Inline, as is
 * its pair: both run several times per I/O.
 */
static __always_inline bool tern_rdma_io_enter(struct tern_rdma_lane *tl, bool full)
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
static __always_inline bool tern_rdma_io_leave(struct tern_rdma_lane *tl, bool full)
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

/*
 * The send phase of the lane's I/O: what is queued, until nothing is
 * left, buffers or credits run out, or @budget is spent. Return: 1 if
 * something was sent, 0 if nothing, <0.
 */
static int tern_rdma_send_phase(struct tern_rdma_lane *tl, int *budget)
{
	int ret, sent = 0;

	while (*budget > 0 && tern_rdma_tx_waiting(tl)) {
		ret = tern_rdma_send_step(tl);
		if (ret <= 0)
			return ret ?: sent;
		sent = 1;
		--*budget;
	}
	return sent;
}

/* Steps of the lane's I/O until none has work, or the budget is spent. */
static void tern_rdma_io_steps(struct tern_rdma_lane *tl)
{
	int budget = tern_io_budget(READ_ONCE(tern_rdma_io_budget));
	unsigned int batch = READ_ONCE(tern_rdma_rx_batch), n;
	int ops, received, sent;

	if (tl->failed)
		return;
	for (;;) {
		ops = tern_rdma_ops_waiting(tl) ? tern_rdma_ops_step(tl) : 0;
		if (ops < 0) {
			tern_rdma_fail(tl, ops);
			return;
		}
		/*
		 * Receive up to rx_batch messages, then send: the replies to
		 * a batch of requests share SENDs, one per send buffer.
		 */
		n = 0;
		do {
			received = tern_rdma_rx_waiting(tl) ?
				   tern_rdma_recv_step(tl) : 0;
		} while (received > 0 && --budget > 0 && ++n < batch);
		/* even when receiving failed: replies made before it leave */
		sent = tern_rdma_send_phase(tl, &budget);
		if (received < 0 || sent < 0) {
			tern_rdma_fail(tl, received < 0 ? received : sent);
			return;
		}
		if (!ops && !received && !sent)
			return;
		if (budget <= 0)
			break;
	}
	/* yield, then go on */
	tern_rdma_kick_tl(tl);
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

void tern_rdma_io_work(struct work_struct *work)
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

void tern_rdma_wake_now(struct tern_rdma_lane *tl)
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
	int ret = 0;

	if (!tern_rdma_io_live(tl))
		return;
	if (!tern_rdma_io_enter(tl, false))
		return;
	if (!tl->failed) {
		tl->io_atomic = true;
		while (tern_rdma_tx_waiting(tl)) {
			ret = tern_rdma_send_step(tl);
			if (ret <= 0)
				break;
			sends++;
		}
		tl->io_atomic = false;
		if (sends)
			tern_lane_count_submitter_sends(lane, sends);
		if (ret < 0)
			tern_rdma_fail(tl, ret);
	}
	tern_rdma_io_leave(tl, false);
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
		TERN_RDMA_COUNTER(padded_sends),
		TERN_RDMA_COUNTER(rx_pages_taken),
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
		TERN_RDMA_COUNTER(injected_bad_pads),
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
DEFINE_SHOW_ATTRIBUTE(tern_rdma_lanes);

static int __init tern_rdma_init(void)
{
	int err;

	tern_rdma_wq = alloc_workqueue("tern_rdma", WQ_MEM_RECLAIM | WQ_HIGHPRI,
				       0);
	if (!tern_rdma_wq)
		return -ENOMEM;
	/* normal priority, on purpose: see tern_rdma_cq_comp() */
	tern_rdma_cq_wq = alloc_workqueue("tern_rdma_cq", WQ_MEM_RECLAIM |
					  WQ_UNBOUND | WQ_SYSFS, 0);
	if (!tern_rdma_cq_wq) {
		destroy_workqueue(tern_rdma_wq);
		return -ENOMEM;
	}
	tern_rdma_dbg = debugfs_create_dir("tern_rdma", NULL);
	debugfs_create_file("stats", 0400, tern_rdma_dbg, NULL,
			    &tern_rdma_stats_fops);
	debugfs_create_file("lanes", 0400, tern_rdma_dbg, NULL,
			    &tern_rdma_lanes_fops);
	err = tern_transport_register(&tern_rdma_ops);
	if (err) {
		debugfs_remove_recursive(tern_rdma_dbg);
		destroy_workqueue(tern_rdma_cq_wq);
		destroy_workqueue(tern_rdma_wq);
	}
	return err;
}

static void __exit tern_rdma_exit(void)
{
	tern_transport_unregister(&tern_rdma_ops);
	debugfs_remove_recursive(tern_rdma_dbg);
	destroy_workqueue(tern_rdma_cq_wq);
	destroy_workqueue(tern_rdma_wq);
}

module_init(tern_rdma_init);
module_exit(tern_rdma_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("tern messenger RDMA transport");
MODULE_VERSION(TERN_VERSION);
MODULE_ALIAS("tern-transport-rdma");
