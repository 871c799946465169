// SPDX-License-Identifier: GPL-2.0
/*
 * tern_target: WATCH, the requests held until an export is resized.
 *
 * A client keeps one WATCH outstanding per mapping, naming the capacity
 * it knows. The target answers it with the export's geometry as soon as
 * the capacity differs: at once if it already does, when the export is
 * revalidated (exports/NAME/revalidate_size, or an INFO from any client),
 * or at the latest after watch_hold seconds, when the target looks at the
 * backend's size itself. The bounded hold is what makes the resize
 * automatic for a backend that grows without anyone telling the target,
 * and it bounds how long a held request keeps a dead session in memory.
 *
 * Watches also end when their export is disabled (-ENODEV), their binding
 * is closed (-ESTALE) or their port is disabled (-ESHUTDOWN): the
 * messenger waits for every request of a session before freeing it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include "target.h"

static unsigned int watch_hold = 30;
module_param(watch_hold, uint, 0644);
MODULE_PARM_DESC(watch_hold,
		 "seconds a WATCH is held before the backend's size is checked and it is answered, 1..3600 (default 30)");

static unsigned int max_session_watches = 4;
module_param(max_session_watches, uint, 0644);
MODULE_PARM_DESC(max_session_watches,
		 "WATCHes one session may have held; more are answered -EBUSY (default 4)");

static unsigned int max_watches = 4096;
module_param(max_watches, uint, 0644);
MODULE_PARM_DESC(max_watches,
		 "WATCHes the target holds in all; more are answered -EBUSY (default 4096)");

/*
 * Held watches live on their export's list, oldest first, under its
 * watch_lock: a resize, a closed binding or a disabled export only looks
 * at the watches of that export, and the tick looks at each held watch
 * once, refreshing each watched export's size once.
 */
struct tern_tgt_watch {
	struct list_head	entry;		/* exp->watches */
	struct tern_srv_req	*sreq;
	struct tern_tgt_bind	*bind;		/* a reference */
	struct tern_tgt_port	*port;
	struct tern_tgt_sess	*ts;		/* counted in nr_watches */
	u64			known;		/* the requester's capacity */
	unsigned long		deadline;	/* jiffies */
};

static atomic_t tern_tgt_nr_watches = ATOMIC_INIT(0);
static atomic_long_t tern_tgt_refused_watches = ATOMIC_LONG_INIT(0);
static struct delayed_work tern_tgt_watch_work;

static unsigned long tern_tgt_watch_hold(void)
{
	return clamp(READ_ONCE(watch_hold), 1U, 3600U) * HZ;
}

void tern_tgt_watch_export_init(struct tern_tgt_export *exp)
{
	spin_lock_init(&exp->watch_lock);
	INIT_LIST_HEAD(&exp->watches);
}

void tern_tgt_watch_show(struct seq_file *m)
{
	seq_printf(m, "watches %d\n", atomic_read(&tern_tgt_nr_watches));
	seq_printf(m, "watches_max %u\n", READ_ONCE(max_watches));
	seq_printf(m, "refused_watches %ld\n",
		   atomic_long_read(&tern_tgt_refused_watches));
}

/* Answer @sreq: the binding's geometry, or the error that ends it. */
static void tern_tgt_watch_reply(struct tern_srv_req *sreq,
				 struct tern_tgt_bind *b, int status)
{
	struct tern_blk_info info;

	if (!status)
		status = tern_tgt_bind_info(b, &info);
	if (tern_reply(sreq, status, &info, status ? 0 : sizeof(info)))
		pr_warn_ratelimited("could not answer WATCH %llu\n", sreq->tid);
}

static void tern_tgt_watch_end(struct tern_tgt_watch *w, int status)
{
	/* the session lives until its last request is answered */
	atomic_dec(&w->ts->nr_watches);
	atomic_dec(&tern_tgt_nr_watches);
	tern_tgt_watch_reply(w->sreq, w->bind, status);
	tern_tgt_bind_put(w->bind);
	kfree(w);
}

/* Answer, with @status, the watches of @exp that @match picks. */
static void tern_tgt_watch_end_if(struct tern_tgt_export *exp,
				  bool (*match)(struct tern_tgt_watch *w,
						const void *arg),
				  const void *arg, int status)
{
	struct tern_tgt_watch *w, *tmp;
	LIST_HEAD(done);

	spin_lock(&exp->watch_lock);
	list_for_each_entry_safe(w, tmp, &exp->watches, entry)
		if (!match || match(w, arg))
			list_move_tail(&w->entry, &done);
	spin_unlock(&exp->watch_lock);
	list_for_each_entry_safe(w, tmp, &done, entry)
		tern_tgt_watch_end(w, status);
}

static bool tern_tgt_watch_resized(struct tern_tgt_watch *w, const void *arg)
{
	const u64 *cap = arg;

	return w->known != *cap;
}

static bool tern_tgt_watch_of_bind(struct tern_tgt_watch *w, const void *arg)
{
	return w->bind == arg;
}

static bool tern_tgt_watch_of_port(struct tern_tgt_watch *w, const void *arg)
{
	return w->port == arg;
}

/* @exp's capacity was refreshed: tell the watchers who know another. */
void tern_tgt_watch_resize(struct tern_tgt_export *exp)
{
	u64 cap = tern_tgt_capacity(exp);

	tern_tgt_watch_end_if(exp, tern_tgt_watch_resized, &cap, 0);
}

void tern_tgt_watch_export_gone(struct tern_tgt_export *exp)
{
	tern_tgt_watch_end_if(exp, NULL, NULL, -ENODEV);
}

void tern_tgt_watch_bind_closed(struct tern_tgt_bind *b)
{
	tern_tgt_watch_end_if(b->exp, tern_tgt_watch_of_bind, b, -ESTALE);
}

void tern_tgt_watch_bind_ended(struct tern_tgt_bind *b)
{
	tern_tgt_watch_end_if(b->exp, tern_tgt_watch_of_bind, b, -ENODEV);
}

/* @port->enabled is already false: no watch is held for it after this. */
void tern_tgt_watch_port_gone(struct tern_tgt_port *port)
{
	struct tern_tgt_export *exp;

	mutex_lock(&tern_tgt_mutex);
	list_for_each_entry(exp, &tern_tgt_exports, entry)
		tern_tgt_watch_end_if(exp, tern_tgt_watch_of_port, port,
				      -ESHUTDOWN);
	mutex_unlock(&tern_tgt_mutex);
}

/*
 * Once a second while watches are held: an export with a watch past its
 * hold time has its backend's size read once, which answers every
 * watcher of it that knows another size; the expired ones are answered
 * either way.
 */
static void tern_tgt_watch_tick(struct work_struct *work)
{
	struct tern_tgt_watch *w, *tmp;
	struct tern_tgt_export *exp;
	LIST_HEAD(done);
	bool expired;
	u64 cap;

	mutex_lock(&tern_tgt_mutex);
	list_for_each_entry(exp, &tern_tgt_exports, entry) {
		spin_lock(&exp->watch_lock);
		expired = false;
		list_for_each_entry(w, &exp->watches, entry) {
			if (time_after_eq(jiffies, w->deadline)) {
				expired = true;
				break;
			}
		}
		spin_unlock(&exp->watch_lock);
		if (!expired)
			continue;
		mutex_lock(&exp->lock);
		if (exp->enabled)
			tern_tgt_refresh_capacity(exp);
		mutex_unlock(&exp->lock);
		cap = tern_tgt_capacity(exp);
		spin_lock(&exp->watch_lock);
		list_for_each_entry_safe(w, tmp, &exp->watches, entry)
			if (w->known != cap ||
			    time_after_eq(jiffies, w->deadline))
				list_move_tail(&w->entry, &done);
		spin_unlock(&exp->watch_lock);
	}
	mutex_unlock(&tern_tgt_mutex);
	list_for_each_entry_safe(w, tmp, &done, entry)
		tern_tgt_watch_end(w, 0);
	if (atomic_read(&tern_tgt_nr_watches))
		mod_delayed_work(tern_tgt_wq, &tern_tgt_watch_work, HZ);
}

/* Why @w can no longer be held, as its answer's status; 0 if it can. */
static int tern_tgt_watch_gone(const struct tern_tgt_watch *w)
{
	const struct tern_tgt_bind *b = w->bind;

	if (!READ_ONCE(w->port->enabled))
		return -ESHUTDOWN;
	if (READ_ONCE(b->exp->gen) != b->gen || READ_ONCE(b->ended))
		return -ENODEV;
	if (!READ_ONCE(b->hashed))
		return -ESTALE;
	return 0;
}

/**
 * tern_tgt_watch - serve a WATCH
 * @sreq: the request
 * @b: its binding, whose reference passes to the watch
 * @known: the capacity the requester knows, in sectors
 *
 * Answers @sreq now when the capacity differs from @known, the binding
 * or port is gone, or the session or target holds as many watches as
 * allowed (-EBUSY: the requester asks again later), else holds it.
 */
void tern_tgt_watch(struct tern_srv_req *sreq, struct tern_tgt_bind *b,
		    u64 known)
{
	struct tern_endpoint *ep = tern_session_endpoint(sreq->sess);
	struct tern_tgt_sess *ts = tern_session_priv(sreq->sess);
	struct tern_tgt_port *port = tern_endpoint_priv(ep);
	struct tern_tgt_export *exp = b->exp;
	struct tern_blk_info info;
	struct tern_tgt_watch *w;
	bool held = false;
	int err;

	err = tern_tgt_bind_info(b, &info);
	if (err || le64_to_cpu(info.capacity) != known)
		goto answer;
	err = -EBUSY;
	if (atomic_inc_return(&ts->nr_watches) >
	    READ_ONCE(max_session_watches))
		goto refused_session;
	if (atomic_inc_return(&tern_tgt_nr_watches) > READ_ONCE(max_watches))
		goto refused;
	err = -ENOMEM;
	w = kzalloc(sizeof(*w), GFP_NOIO);
	if (!w)
		goto uncount;
	w->sreq = sreq;
	w->bind = b;
	w->port = port;
	w->ts = ts;
	w->known = known;
	w->deadline = jiffies + tern_tgt_watch_hold();
	/*
	 * Looked at again under the lock: whatever ends watches (a port
	 * disabled, the export disabled, the binding ended or closed, a new
	 * capacity) marks so first and then takes this lock to answer them,
	 * so either it finds this watch on the list or this finds its mark.
	 */
	spin_lock(&exp->watch_lock);
	err = tern_tgt_watch_gone(w);
	/* a resize since the capacity above was read: answered with it */
	if (!err && tern_tgt_capacity(exp) == known) {
		list_add_tail(&w->entry, &exp->watches);
		held = true;
	}
	spin_unlock(&exp->watch_lock);
	if (held) {
		/* queue, not mod: a stream of watches must not defer the tick */
		queue_delayed_work(tern_tgt_wq, &tern_tgt_watch_work, HZ);
		return;
	}
	kfree(w);
	goto uncount;
refused:
	atomic_long_inc(&tern_tgt_refused_watches);
uncount:
	atomic_dec(&tern_tgt_nr_watches);
	atomic_dec(&ts->nr_watches);
	goto answer;
refused_session:
	atomic_long_inc(&tern_tgt_refused_watches);
	atomic_dec(&ts->nr_watches);
answer:
	tern_tgt_watch_reply(sreq, b, err);
	tern_tgt_bind_put(b);
}

void tern_tgt_watch_init(void)
{
	INIT_DELAYED_WORK(&tern_tgt_watch_work, tern_tgt_watch_tick);
}

/* Module exit: every port is disabled, so no watch is held. */
void tern_tgt_watch_exit(void)
{
	cancel_delayed_work_sync(&tern_tgt_watch_work);
	WARN_ON(atomic_read(&tern_tgt_nr_watches));
}
