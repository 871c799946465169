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
#include <linux/slab.h>
#include "target.h"

static unsigned int watch_hold = 30;
module_param(watch_hold, uint, 0644);
MODULE_PARM_DESC(watch_hold,
		 "seconds a WATCH is held before the backend's size is checked and it is answered, 1..3600 (default 30)");

struct tern_tgt_watch {
	struct list_head	entry;		/* tern_tgt_watches */
	struct tern_srv_req	*sreq;
	struct tern_tgt_bind	*bind;		/* a reference */
	struct tern_tgt_port	*port;
	u64			known;		/* the requester's capacity */
	unsigned long		deadline;	/* jiffies */
};

static LIST_HEAD(tern_tgt_watches);
static DEFINE_SPINLOCK(tern_tgt_watch_lock);
static struct delayed_work tern_tgt_watch_work;

static unsigned long tern_tgt_watch_hold(void)
{
	return clamp(READ_ONCE(watch_hold), 1U, 3600U) * HZ;
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
	tern_tgt_watch_reply(w->sreq, w->bind, status);
	tern_tgt_bind_put(w->bind);
	kfree(w);
}

/* Answer, with @status, the watches @match picks out of the held ones. */
static void tern_tgt_watch_end_if(bool (*match)(struct tern_tgt_watch *w,
						const void *arg),
				  const void *arg, int status)
{
	struct tern_tgt_watch *w, *tmp;
	LIST_HEAD(done);

	spin_lock(&tern_tgt_watch_lock);
	list_for_each_entry_safe(w, tmp, &tern_tgt_watches, entry)
		if (match(w, arg))
			list_move_tail(&w->entry, &done);
	spin_unlock(&tern_tgt_watch_lock);
	list_for_each_entry_safe(w, tmp, &done, entry)
		tern_tgt_watch_end(w, status);
}

static bool tern_tgt_watch_resized(struct tern_tgt_watch *w, const void *arg)
{
	const struct tern_tgt_export *exp = arg;

	return w->bind->exp == exp &&
	       w->known != le64_to_cpu(READ_ONCE(exp->info.capacity));
}

static bool tern_tgt_watch_of_export(struct tern_tgt_watch *w,
				     const void *arg)
{
	return w->bind->exp == arg;
}

static bool tern_tgt_watch_of_bind(struct tern_tgt_watch *w, const void *arg)
{
	return w->bind == arg;
}

static bool tern_tgt_watch_of_port(struct tern_tgt_watch *w, const void *arg)
{
	return w->port == arg;
}

static bool tern_tgt_watch_expired(struct tern_tgt_watch *w, const void *arg)
{
	return time_after_eq(jiffies, w->deadline);
}

/* @exp's capacity was refreshed: tell the watchers who know another. */
void tern_tgt_watch_resize(struct tern_tgt_export *exp)
{
	tern_tgt_watch_end_if(tern_tgt_watch_resized, exp, 0);
}

void tern_tgt_watch_export_gone(struct tern_tgt_export *exp)
{
	tern_tgt_watch_end_if(tern_tgt_watch_of_export, exp, -ENODEV);
}

void tern_tgt_watch_bind_closed(struct tern_tgt_bind *b)
{
	tern_tgt_watch_end_if(tern_tgt_watch_of_bind, b, -ESTALE);
}

/* @port->enabled is already false: no watch is held for it after this. */
void tern_tgt_watch_port_gone(struct tern_tgt_port *port)
{
	tern_tgt_watch_end_if(tern_tgt_watch_of_port, port, -ESHUTDOWN);
}

/*
 * Once a second while watches are held: those past their hold time look
 * at the backend's size (which answers every watcher of a resized export)
 * and are answered either way.
 */
static void tern_tgt_watch_tick(struct work_struct *work)
{
	struct tern_tgt_watch *w, *tmp;
	struct tern_blk_info info;
	LIST_HEAD(expired);
	bool more;

	spin_lock(&tern_tgt_watch_lock);
	list_for_each_entry_safe(w, tmp, &tern_tgt_watches, entry)
		if (tern_tgt_watch_expired(w, NULL))
			list_move_tail(&w->entry, &expired);
	spin_unlock(&tern_tgt_watch_lock);
	list_for_each_entry_safe(w, tmp, &expired, entry) {
		if (!tern_tgt_bind_info(w->bind, &info))
			tern_tgt_watch_resize(w->bind->exp);
		tern_tgt_watch_end(w, 0);
	}
	spin_lock(&tern_tgt_watch_lock);
	more = !list_empty(&tern_tgt_watches);
	spin_unlock(&tern_tgt_watch_lock);
	if (more)
		mod_delayed_work(system_wq, &tern_tgt_watch_work, HZ);
}

/**
 * tern_tgt_watch - serve a WATCH
 * @sreq: the request
 * @b: its binding, whose reference passes to the watch
 * @known: the capacity the requester knows, in sectors
 *
 * Answers @sreq now when the capacity differs from @known or the
 * binding or port is gone, else holds it.
 */
void tern_tgt_watch(struct tern_srv_req *sreq, struct tern_tgt_bind *b,
		    u64 known)
{
	struct tern_endpoint *ep = tern_session_endpoint(sreq->sess);
	struct tern_tgt_port *port = tern_endpoint_priv(ep);
	struct tern_blk_info info;
	struct tern_tgt_watch *w;
	bool held = false;
	int err;

	err = tern_tgt_bind_info(b, &info);
	if (err || le64_to_cpu(info.capacity) != known)
		goto answer;
	err = -ENOMEM;
	w = kzalloc(sizeof(*w), GFP_NOIO);
	if (!w)
		goto answer;
	w->sreq = sreq;
	w->bind = b;
	w->port = port;
	w->known = known;
	w->deadline = jiffies + tern_tgt_watch_hold();
	err = -ESHUTDOWN;
	/* pairs with tern_tgt_port_disable(): enabled, then the lock */
	spin_lock(&tern_tgt_watch_lock);
	if (READ_ONCE(port->enabled)) {
		if (list_empty(&tern_tgt_watches))
			mod_delayed_work(system_wq, &tern_tgt_watch_work, HZ);
		list_add_tail(&w->entry, &tern_tgt_watches);
		held = true;
	}
	spin_unlock(&tern_tgt_watch_lock);
	if (held)
		return;
	kfree(w);
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
	WARN_ON(!list_empty(&tern_tgt_watches));
}
