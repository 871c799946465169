// SPDX-License-Identifier: GPL-2.0
/*
 * tern_bench: the load generator behind TERN_BENCH_IOC_RUN.
 *
 * A run opens @sessions sessions of @lanes lanes on a private requester
 * endpoint. Each session has @depth slots (a tern_request, its front and
 * a data buffer) and one submitter kthread, "tern-bench/N", that keeps
 * every slot in flight: it takes a completed slot, checks it (status,
 * reply front, and in verify mode the data), and sends it again until the
 * message count or the duration is used up. Completions (done(), in the
 * messenger's workers) only timestamp, account and hand the slot back,
 * so checking costs the submitter, not the receive path.
 *
 * Exactly-once accounting: a slot's BUSY bit is set before tern_send()
 * and cleared by done(); done() finding it clear is a duplicate
 * completion. After the sessions are destroyed (which completes anything
 * pending) sent - completed is the number of lost completions. The ioctl
 * caller waits interruptibly; a signal stops the submitters, destroys the
 * sessions and returns -EINTR with everything freed.
 *
 * Locking: cs->lock protects a session's ready list, in-flight count,
 * generation and the counters that done() updates; the submitter's own
 * counters are private to it until the run is over, when the kthreads
 * have been stopped and the sessions destroyed.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel_stat.h>
#include <linux/kthread.h>
#include <linux/math64.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include "bench.h"

#define TB_SLOT_BUSY	0

/*
 * A session whose requests make no progress for this long has its
 * requests cancelled (they complete with -ECANCELED and count as
 * errors): a reply the messenger lost must not hang the run. Dead lanes
 * are the messenger's business (its loss timeout), so this is longer.
 */
#define TB_STALL_NS	(90ULL * NSEC_PER_SEC)

struct tb_csess;

struct tb_slot {
	struct tern_request	req;
	struct tb_csess		*cs;
	struct tb_front		front;
	struct tb_front		reply;
	struct tb_buf		buf;
	u64			start_ns;
	unsigned int		idx;
	enum tern_data_dir	dir;	/* of the last request */
	bool			used;	/* sent since last checked */
	unsigned long		flags;	/* TB_SLOT_BUSY */
	struct list_head	entry;	/* cs->ready */
};

struct tb_run;

struct tb_csess {
	struct tb_run		*run;
	struct tern_session	*sess;
	struct task_struct	*task;
	unsigned int		idx;
	struct tb_slot		*slots;
	unsigned int		nr_slots;

	spinlock_t		lock;	/* see top of file */
	struct list_head	ready;
	unsigned int		inflight;
	u64			gen;	/* completions so far */
	bool			finished;
	u64			completed;
	u64			dup_completions;
	u64			lat_sum;
	u64			lat_min;
	u64			lat_max;
	u64			*hist;
	wait_queue_head_t	wq;

	/* submitter private */
	u64			quota;	/* count mode: left to send */
	u64			seq;
	u64			sent;
	u64			messages;
	u64			bytes;
	u64			errors;
	u64			mismatches;
	u64			resends;
	int			first_err;
};

struct tb_run {
	struct tern_bench_run		*p;
	struct tern_endpoint		*ep;
	struct tb_csess			*cs;
	unsigned int			nr_cs;
	bool				stop;
	u64				deadline_ns;	/* duration mode */
	wait_queue_head_t		wq;
};

static bool tb_slot_more(struct tb_csess *cs)
{
	struct tb_run *run = cs->run;

	if (READ_ONCE(run->stop))
		return false;
	if (run->p->count)
		return cs->quota > 0;
	return ktime_get_ns() < run->deadline_ns;
}

static void tb_req_done(struct tern_request *req)
{
	struct tb_slot *s = container_of(req, struct tb_slot, req);
	struct tb_csess *cs = s->cs;
	u64 lat = ktime_get_ns() - s->start_ns;
	bool dup = !test_and_clear_bit(TB_SLOT_BUSY, &s->flags);
	bool settled;

	spin_lock_bh(&cs->lock);
	if (dup) {
		cs->dup_completions++;
	} else {
		cs->completed++;
		cs->inflight--;
		cs->gen++;
		cs->lat_sum += lat;
		cs->lat_min = min(cs->lat_min, lat);
		cs->lat_max = max(cs->lat_max, lat);
		tb_hist_add(cs->hist, lat);
		list_add_tail(&s->entry, &cs->ready);
	}
	settled = cs->finished && !cs->inflight;
	spin_unlock_bh(&cs->lock);
	wake_up(&cs->wq);
	if (settled)
		wake_up(&cs->run->wq);
}

/* Check a completed request; the submitter's counters only. */
static void tb_slot_check(struct tb_csess *cs, struct tb_slot *s)
{
	const struct tern_bench_run *p = cs->run->p;
	struct tern_request *req = &s->req;
	u32 len = p->msg_size;

	cs->resends += req->resends;
	if (req->status || (req->reply_status && req->reply_status != -EILSEQ)) {
		cs->errors++;
		if (!cs->first_err)
			cs->first_err = req->status ?: req->reply_status;
		return;
	}
	if (req->reply_status == -EILSEQ ||
	    req->reply_front_len != sizeof(s->front) ||
	    memcmp(&s->reply, &s->front, sizeof(s->front))) {
		cs->mismatches++;
		return;
	}
	if (s->dir == TERN_DATA_FROM_RESPONDER) {
		if (req->reply_data_len != len ||
		    ((p->flags & TERN_BENCH_RUN_VERIFY) &&
		     !tb_pattern_check(s->buf.bvec, s->buf.nr, len,
				       le64_to_cpu(s->front.seed)))) {
			cs->mismatches++;
			return;
		}
	} else if (req->reply_data_len) {
		cs->mismatches++;
		return;
	}
	cs->messages++;
	cs->bytes += s->dir == TERN_DATA_NONE ? 0 : len;
}

static int tb_slot_send(struct tb_csess *cs, struct tb_slot *s)
{
	const struct tern_bench_run *p = cs->run->p;
	bool verify = p->flags & TERN_BENCH_RUN_VERIFY;
	u64 seed = (u64)cs->idx << 48 | cs->seq;
	u32 len = p->msg_size;
	int err;

	if (!len)
		s->dir = TERN_DATA_NONE;
	else if (p->dir == TERN_BENCH_DIR_BOTH)
		s->dir = cs->seq & 1 ? TERN_DATA_FROM_RESPONDER :
				       TERN_DATA_TO_RESPONDER;
	else if (p->dir == TERN_BENCH_DIR_FROM)
		s->dir = TERN_DATA_FROM_RESPONDER;
	else
		s->dir = TERN_DATA_TO_RESPONDER;

	memset(&s->front, 0, sizeof(s->front));
	s->front.magic = cpu_to_le32(TB_FRONT_MAGIC);
	s->front.flags = cpu_to_le32(verify ? TB_FRONT_VERIFY : 0);
	s->front.seed = cpu_to_le64(seed);
	s->front.len = cpu_to_le32(len);
	s->front.slot = cpu_to_le32(s->idx);
	memset(&s->reply, 0, sizeof(s->reply));
	if (verify && s->dir == TERN_DATA_TO_RESPONDER)
		tb_pattern_fill(s->buf.bvec, s->buf.nr, len, seed);
	else if (verify && s->dir == TERN_DATA_FROM_RESPONDER)
		tb_pattern_fill(s->buf.bvec, s->buf.nr, len, ~seed);

	tern_request_init(&s->req);
	s->req.front = &s->front;
	s->req.front_len = sizeof(s->front);
	s->req.dir = s->dir;
	if (s->dir != TERN_DATA_NONE) {
		s->req.bvec = s->buf.bvec;
		s->req.nr_bvec = s->buf.nr;
		s->req.data_len = len;
	}
	s->req.reply_front = &s->reply;
	s->req.reply_front_max = sizeof(s->reply);
	s->req.lane_hint = s->idx;
	s->req.done = tb_req_done;
	s->req.priv = s;

	set_bit(TB_SLOT_BUSY, &s->flags);
	s->used = true;
	spin_lock_bh(&cs->lock);
	cs->inflight++;
	spin_unlock_bh(&cs->lock);
	s->start_ns = ktime_get_ns();
	err = tern_send(cs->sess, &s->req, TERN_SEND_NOWAIT);
	if (err) {
		clear_bit(TB_SLOT_BUSY, &s->flags);
		s->used = false;
		spin_lock_bh(&cs->lock);
		cs->inflight--;
		spin_unlock_bh(&cs->lock);
		return err;
	}
	cs->seq++;
	cs->sent++;
	if (p->count)
		cs->quota--;
	return 0;
}

static bool tb_cs_ready(struct tb_csess *cs)
{
	bool ready;

	spin_lock_bh(&cs->lock);
	ready = !list_empty(&cs->ready) || !cs->inflight;
	spin_unlock_bh(&cs->lock);
	return ready || READ_ONCE(cs->run->stop);
}

static bool tb_cs_moved(struct tb_csess *cs, u64 gen)
{
	bool moved;

	spin_lock_bh(&cs->lock);
	moved = cs->gen != gen;
	spin_unlock_bh(&cs->lock);
	return moved || READ_ONCE(cs->run->stop);
}

/* Nothing completed for TB_STALL_NS: cancel what is in flight. */
static void tb_cs_cancel_stalled(struct tb_csess *cs)
{
	unsigned int i, n = 0;

	for (i = 0; i < cs->nr_slots; i++) {
		struct tb_slot *s = &cs->slots[i];

		if (test_bit(TB_SLOT_BUSY, &s->flags) && !tern_cancel(&s->req))
			n++;
	}
	pr_warn_ratelimited("run: session %u made no progress for %llu s, cancelled %u requests\n",
			    cs->idx, TB_STALL_NS / NSEC_PER_SEC, n);
}

static void tb_submit_loop(struct tb_csess *cs)
{
	struct tb_run *run = cs->run;
	u64 last_gen = 0, last_ns = ktime_get_ns();
	int err;

	while (!READ_ONCE(run->stop)) {
		bool more = tb_slot_more(cs), idle;
		struct tb_slot *s;
		u64 gen;

		spin_lock_bh(&cs->lock);
		s = list_first_entry_or_null(&cs->ready, struct tb_slot,
					     entry);
		if (s)
			list_del_init(&s->entry);
		gen = cs->gen;
		idle = !cs->inflight;
		spin_unlock_bh(&cs->lock);

		if (gen != last_gen) {
			last_gen = gen;
			last_ns = ktime_get_ns();
		}
		if (!s) {
			if (!more && idle)
				return;
			if (ktime_get_ns() - last_ns > TB_STALL_NS) {
				tb_cs_cancel_stalled(cs);
				last_ns = ktime_get_ns();
			}
			wait_event_interruptible_timeout(cs->wq, tb_cs_ready(cs),
							 HZ);
			continue;
		}
		if (s->used) {
			tb_slot_check(cs, s);
			s->used = false;
		}
		if (!more)
			continue;	/* the slot rests */
		err = tb_slot_send(cs, s);
		if (err == -EAGAIN) {
			/* The peer negotiated a smaller depth: wait for room. */
			spin_lock_bh(&cs->lock);
			list_add(&s->entry, &cs->ready);
			spin_unlock_bh(&cs->lock);
			wait_event_interruptible_timeout(cs->wq,
							 tb_cs_moved(cs, gen),
							 HZ);
		} else if (err) {
			cs->errors++;
			if (!cs->first_err)
				cs->first_err = err;
			return;
		}
	}
}

static int tb_submitter(void *arg)
{
	struct tb_csess *cs = arg;
	bool settled;

	tb_submit_loop(cs);
	spin_lock_bh(&cs->lock);
	cs->finished = true;
	settled = !cs->inflight;
	spin_unlock_bh(&cs->lock);
	if (settled)
		wake_up(&cs->run->wq);

	/* Stay around for kthread_stop(). */
	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop())
			break;
		schedule();
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

static bool tb_run_settled(struct tb_run *run)
{
	unsigned int i;
	bool settled = true;

	for (i = 0; i < run->nr_cs && settled; i++) {
		struct tb_csess *cs = &run->cs[i];

		spin_lock_bh(&cs->lock);
		settled = cs->finished && !cs->inflight;
		spin_unlock_bh(&cs->lock);
	}
	return settled;
}

/* Non-idle time of all online CPUs, from kcpustat. */
static u64 tb_cpu_busy_ns(unsigned int *nr_cpus)
{
	struct kernel_cpustat kcs;
	unsigned int n = 0;
	u64 sum = 0;
	int cpu;

	for_each_online_cpu(cpu) {
		kcpustat_cpu_fetch(&kcs, cpu);
		sum += kcs.cpustat[CPUTIME_USER] + kcs.cpustat[CPUTIME_NICE] +
		       kcs.cpustat[CPUTIME_SYSTEM] + kcs.cpustat[CPUTIME_IRQ] +
		       kcs.cpustat[CPUTIME_SOFTIRQ] +
		       kcs.cpustat[CPUTIME_STEAL];
		n++;
	}
	*nr_cpus = n;
	return sum;
}

/* A run's inline limit as the session takes it: 0 is its default. */
static u32 tb_inline_max(const struct tern_bench_run *p, u32 flag, u32 v)
{
	if (!(p->flags & flag))
		return 0;
	return v ?: TERN_INLINE_NONE;
}

static int tb_cs_setup(struct tb_run *run, struct tb_csess *cs)
{
	const struct tern_bench_run *p = run->p;
	struct tern_session_opts o = {
		.nr_lanes	    = p->lanes,
		.queue_depth	    = p->depth,
		.max_inflight_bytes = max_t(u64, (u64)p->depth * p->msg_size,
					    SZ_64M),
		.max_data	    = max_t(u32, p->msg_size, SZ_4K),
		.data_crc	    = p->flags & TERN_BENCH_RUN_CRC,
		.inline_to_max	    = tb_inline_max(p, TERN_BENCH_RUN_INLINE_WRITE,
						    p->inline_write),
		.inline_from_max    = tb_inline_max(p, TERN_BENCH_RUN_INLINE_READ,
						    p->inline_read),
	};
	struct tern_session_info info;
	struct tern_session *sess;
	unsigned int i;
	int err;

	cs->hist = kvcalloc(TB_HIST_BUCKETS, sizeof(*cs->hist), GFP_KERNEL);
	cs->slots = kvcalloc(p->depth, sizeof(*cs->slots), GFP_KERNEL);
	if (!cs->hist || !cs->slots)
		return -ENOMEM;
	cs->nr_slots = p->depth;
	for (i = 0; i < cs->nr_slots; i++) {
		struct tb_slot *s = &cs->slots[i];

		s->cs = cs;
		s->idx = i;
		INIT_LIST_HEAD(&s->entry);
		err = tb_buf_alloc(&s->buf, p->msg_size, p->data_offset,
				   GFP_KERNEL);
		if (err)
			return err;
		list_add_tail(&s->entry, &cs->ready);
	}

	sess = tern_connect(run->ep, p->uri, &o);
	if (IS_ERR(sess)) {
		pr_info_ratelimited("RUN: connect %s: %ld\n", p->uri,
				    PTR_ERR(sess));
		return PTR_ERR(sess);
	}
	cs->sess = sess;
	tern_session_get_info(sess, &info);
	if (info.max_data < p->msg_size) {
		pr_info_ratelimited("RUN: %s accepts %u data bytes, not %u\n",
				    p->uri, info.max_data, p->msg_size);
		return -EMSGSIZE;
	}
	if (!!(info.features & TERN_FEAT_DATA_CRC) !=
	    !!(p->flags & TERN_BENCH_RUN_CRC)) {
		pr_info_ratelimited("RUN: %s refused data crc\n", p->uri);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* Stop the submitters and close the sessions: no done() after this. */
static void tb_run_quiesce(struct tb_run *run)
{
	unsigned int i;

	WRITE_ONCE(run->stop, true);
	for (i = 0; i < run->nr_cs; i++)
		wake_up(&run->cs[i].wq);
	for (i = 0; i < run->nr_cs; i++) {
		if (run->cs[i].task)
			kthread_stop(run->cs[i].task);
		run->cs[i].task = NULL;
	}
	for (i = 0; i < run->nr_cs; i++) {
		if (run->cs[i].sess)
			tern_session_destroy(run->cs[i].sess);
		run->cs[i].sess = NULL;
	}
}

static void tb_run_free(struct tb_run *run)
{
	unsigned int i, j;

	for (i = 0; i < run->nr_cs; i++) {
		struct tb_csess *cs = &run->cs[i];

		for (j = 0; cs->slots && j < cs->nr_slots; j++)
			tb_buf_free(&cs->slots[j].buf);
		kvfree(cs->slots);
		kvfree(cs->hist);
	}
	kfree(run->cs);
	if (run->ep)
		tern_endpoint_destroy(run->ep);
	kfree(run);
}

static void tb_run_results(struct tb_run *run, u64 elapsed, u64 cpu_ns,
			   unsigned int nr_cpus)
{
	struct tern_bench_result *r = &run->p->result;
	u64 *hist = run->cs[0].hist, lat_sum = 0;
	unsigned int i, j;

	memset(r, 0, sizeof(*r));
	r->lat_min_ns = U64_MAX;
	for (i = 0; i < run->nr_cs; i++) {
		struct tb_csess *cs = &run->cs[i];

		/* Merge into session 0's histogram. */
		for (j = 0; i && j < TB_HIST_BUCKETS; j++)
			hist[j] += cs->hist[j];
		r->messages += cs->messages;
		r->bytes += cs->bytes;
		r->sent += cs->sent;
		r->completed += cs->completed;
		r->errors += cs->errors;
		r->mismatches += cs->mismatches;
		r->resends += cs->resends;
		r->dup_completions += cs->dup_completions;
		lat_sum += cs->lat_sum;
		r->lat_min_ns = min(r->lat_min_ns, cs->lat_min);
		r->lat_max_ns = max(r->lat_max_ns, cs->lat_max);
	}
	if (!r->completed)
		r->lat_min_ns = 0;
	else
		r->lat_avg_ns = div64_u64(lat_sum, r->completed);
	r->lost = r->sent - min(r->sent, r->completed);
	r->lat_p50_ns = tb_hist_percentile(hist, r->completed, 5000);
	r->lat_p99_ns = tb_hist_percentile(hist, r->completed, 9900);
	r->lat_p999_ns = tb_hist_percentile(hist, r->completed, 9990);
	r->elapsed_ns = elapsed;
	if (elapsed) {
		r->msgs_per_sec = mul_u64_u64_div_u64(r->messages,
						      NSEC_PER_SEC, elapsed);
		r->bytes_per_sec = mul_u64_u64_div_u64(r->bytes,
						       NSEC_PER_SEC, elapsed);
	}
	r->cpu_busy_ns = cpu_ns;
	r->nr_cpus = nr_cpus;
}

/**
 * tb_run - run the load generator
 * @p: validated parameters; @p->result is filled on success
 *
 * Return: 0 (look at the result's error counters), -EINTR on a signal, or
 * the error that kept the run from starting (connect, memory).
 */
int tb_run(struct tern_bench_run *p)
{
	struct tern_endpoint_conf conf = { .name = "bench_run" };
	unsigned int i, nr_cpus = 0;
	u64 cpu0 = 0, cpu1 = 0, t0 = 0, t1 = 0;
	struct tb_run *run;
	int err = 0;
	long ret;
	u32 rem;

	run = kzalloc(sizeof(*run), GFP_KERNEL);
	if (!run)
		return -ENOMEM;
	run->p = p;
	init_waitqueue_head(&run->wq);
	run->cs = kcalloc(p->sessions, sizeof(*run->cs), GFP_KERNEL);
	if (!run->cs) {
		kfree(run);
		return -ENOMEM;
	}
	run->nr_cs = p->sessions;
	for (i = 0; i < run->nr_cs; i++) {
		struct tb_csess *cs = &run->cs[i];

		cs->run = run;
		cs->idx = i;
		spin_lock_init(&cs->lock);
		INIT_LIST_HEAD(&cs->ready);
		init_waitqueue_head(&cs->wq);
		cs->lat_min = U64_MAX;
		cs->quota = div_u64_rem(p->count, p->sessions, &rem);
		cs->quota += i < rem;
	}

	run->ep = tern_endpoint_create(&conf);
	if (IS_ERR(run->ep)) {
		err = PTR_ERR(run->ep);
		run->ep = NULL;
		goto out;
	}
	for (i = 0; i < run->nr_cs && !err; i++) {
		err = tb_cs_setup(run, &run->cs[i]);
		if (!err && signal_pending(current))
			err = -EINTR;
	}
	for (i = 0; i < run->nr_cs && !err; i++) {
		struct task_struct *t;

		t = kthread_create(tb_submitter, &run->cs[i], "tern-bench/%u",
				   i);
		if (IS_ERR(t))
			err = PTR_ERR(t);
		else
			run->cs[i].task = t;
	}
	if (err)
		goto out;

	cpu0 = tb_cpu_busy_ns(&nr_cpus);
	t0 = ktime_get_ns();
	run->deadline_ns = t0 + (u64)p->duration_ms * NSEC_PER_MSEC;
	for (i = 0; i < run->nr_cs; i++)
		wake_up_process(run->cs[i].task);
	ret = wait_event_interruptible(run->wq, tb_run_settled(run));
	t1 = ktime_get_ns();
	cpu1 = tb_cpu_busy_ns(&nr_cpus);
	if (ret)
		err = -EINTR;
out:
	tb_run_quiesce(run);
	if (!err)
		tb_run_results(run, t1 - t0, cpu1 - cpu0, nr_cpus);
	tb_run_free(run);
	return err;
}
