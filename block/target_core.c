// SPDX-License-Identifier: GPL-2.0
/*
 * tern_target: the block protocol engine.
 *
 * Each enabled port owns a messenger endpoint listening on its address.
 * A requester first sends OPEN (export name, host id); the target checks
 * the export is enabled, linked to an enabled port and allows the host,
 * and answers with the export's geometry and a random binding handle.
 * Every later request carries that handle. Bindings are keyed by handle
 * and tied to the requester's session id, not to the responder session
 * object, because the messenger rebuilds the latter after the last lane
 * of a session dies and the requester reconnects; resent requests then
 * find their binding again. A binding no session refers to is freed
 * after orphan_timeout seconds, or at once by CLOSE.
 *
 * Every request field is checked before any I/O; a bad request gets an
 * error reply (negative errno in the reply status), never a crash.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/xarray.h>
#include <tern/blk_names.h>
#include "target.h"

static unsigned int orphan_timeout = 300;
module_param(orphan_timeout, uint, 0644);
MODULE_PARM_DESC(orphan_timeout,
		 "seconds a binding survives without any session (0 to 86400, default 300)");
#define TERN_TGT_MAX_ORPHAN_S		86400U

static unsigned int max_session_binds = 8;
module_param(max_session_binds, uint, 0644);
MODULE_PARM_DESC(max_session_binds,
		 "bindings one session may hold; the oldest it does not use goes first, 2..1024 (default 8)");

static unsigned int max_binds = 16384;
module_param(max_binds, uint, 0644);
MODULE_PARM_DESC(max_binds,
		 "bindings the target holds in all; the oldest orphan goes first, else OPEN fails with -EBUSY (default 16384)");

static unsigned int session_data_kib;
module_param(session_data_kib, uint, 0644);
MODULE_PARM_DESC(session_data_kib,
		 "KiB of request data one session may hold; 0: 128 KiB per request of the negotiated queue depth, at least 1 MiB (default 0)");

static unsigned int max_data_mib;
module_param(max_data_mib, uint, 0644);
MODULE_PARM_DESC(max_data_mib,
		 "MiB of request data all sessions may hold; 0: an eighth of RAM (default 0)");

/*
 * Bindings by handle, looked up under RCU. tern_tgt_bind_lock guards
 * everything else about them: which session owns a binding (or the
 * orphan list it is on), the counts, and the hashed flag. It is taken by
 * OPEN, CLOSE, a session going away and a binding claimed again after a
 * reconnect; never by an I/O request naming its session's binding.
 */
static DEFINE_XARRAY(tern_tgt_binds);
static DEFINE_SPINLOCK(tern_tgt_bind_lock);
static LIST_HEAD(tern_tgt_orphans);		/* oldest first */
static unsigned int tern_tgt_nr_binds;
static struct delayed_work tern_tgt_gc_work;
#define TERN_TGT_GC_INTERVAL	(10 * HZ)

static atomic_long_t tern_tgt_data_bytes = ATOMIC_LONG_INIT(0);
static long tern_tgt_data_auto;		/* max_data_mib 0, in bytes */

/* what a peer was refused; shown by debugfs tern_target/limits */
static atomic_long_t tern_tgt_refused_opens = ATOMIC_LONG_INIT(0);
static atomic_long_t tern_tgt_evicted_binds = ATOMIC_LONG_INIT(0);
static atomic_long_t tern_tgt_refused_data = ATOMIC_LONG_INIT(0);
static atomic_long_t tern_tgt_discarded = ATOMIC_LONG_INIT(0);
static struct dentry *tern_tgt_debugfs;

static void tern_tgt_bind_release(struct kref *ref)
{
	struct tern_tgt_bind *b = container_of(ref, struct tern_tgt_bind, ref);

	tern_tgt_export_put(b->exp);
	kfree_rcu(b, rcu);
}

void tern_tgt_bind_put(struct tern_tgt_bind *b)
{
	kref_put(&b->ref, tern_tgt_bind_release);
}

/*
 * Take @b out of the table and off its list; caller holds
 * tern_tgt_bind_lock. The caller then erases the handle, ends the
 * binding's watches and puts the table's reference (tern_tgt_bind_kill).
 */
static bool tern_tgt_bind_unhash_locked(struct tern_tgt_bind *b)
{
	struct tern_tgt_sess *ts = b->owner;

	lockdep_assert_held(&tern_tgt_bind_lock);
	if (!b->hashed)
		return false;
	/* read unlocked by tern_tgt_watch() */
	WRITE_ONCE(b->hashed, false);
	list_del_init(&b->entry);
	if (ts) {
		ts->nr_binds--;
		if (rcu_access_pointer(ts->cur) == b)
			RCU_INIT_POINTER(ts->cur, NULL);
		b->owner = NULL;
	}
	tern_tgt_nr_binds--;
	return true;
}

static void tern_tgt_bind_kill(struct tern_tgt_bind *b)
{
	xa_erase(&tern_tgt_binds, (unsigned long)b->handle);
	tern_tgt_watch_bind_closed(b);
	tern_tgt_bind_put(b);
}

static void tern_tgt_bind_kill_list(struct list_head *dead, const char *why)
{
	struct tern_tgt_bind *b, *tmp;

	list_for_each_entry_safe(b, tmp, dead, entry) {
		list_del_init(&b->entry);
		if (why)
			pr_info_ratelimited("binding %016llx (export %s, host %s) %s\n",
					    b->handle, b->exp->name, b->host,
					    why);
		tern_tgt_bind_kill(b);
	}
}

static void tern_tgt_gc(struct work_struct *work)
{
	/* bounded: msecs_to_jiffies() would take the product modulo 2^32 */
	unsigned long tmo = (unsigned long)min(READ_ONCE(orphan_timeout),
					       TERN_TGT_MAX_ORPHAN_S) * HZ;
	struct tern_tgt_bind *b, *tmp;
	unsigned int n = 0;
	LIST_HEAD(dead);

	spin_lock(&tern_tgt_bind_lock);
	list_for_each_entry_safe(b, tmp, &tern_tgt_orphans, entry) {
		if (n == 64 || !time_after(jiffies, b->orphan_since + tmo))
			break;
		tern_tgt_bind_unhash_locked(b);
		list_add_tail(&b->entry, &dead);
		n++;
	}
	spin_unlock(&tern_tgt_bind_lock);
	tern_tgt_bind_kill_list(&dead, "expired");
	mod_delayed_work(tern_tgt_wq, &tern_tgt_gc_work,
			 n == 64 ? 0 : TERN_TGT_GC_INTERVAL);
}

static int tern_tgt_limits_show(struct seq_file *m, void *v)
{
	unsigned int nr;

	spin_lock(&tern_tgt_bind_lock);
	nr = tern_tgt_nr_binds;
	spin_unlock(&tern_tgt_bind_lock);
	seq_printf(m, "binds %u\n", nr);
	seq_printf(m, "binds_max %u\n", READ_ONCE(max_binds));
	seq_printf(m, "refused_opens %ld\n",
		   atomic_long_read(&tern_tgt_refused_opens));
	seq_printf(m, "evicted_binds %ld\n",
		   atomic_long_read(&tern_tgt_evicted_binds));
	seq_printf(m, "data_bytes %ld\n",
		   atomic_long_read(&tern_tgt_data_bytes));
	seq_printf(m, "data_bytes_max %ld\n", READ_ONCE(max_data_mib) ?
		   (long)READ_ONCE(max_data_mib) << 20 : tern_tgt_data_auto);
	seq_printf(m, "refused_data %ld\n",
		   atomic_long_read(&tern_tgt_refused_data));
	seq_printf(m, "discarded %ld\n", atomic_long_read(&tern_tgt_discarded));
	tern_tgt_watch_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tern_tgt_limits);

void tern_tgt_binds_init(void)
{
	tern_tgt_data_auto = (long)(totalram_pages() / 8) << PAGE_SHIFT;
	tern_tgt_data_auto = max_t(long, tern_tgt_data_auto, SZ_16M);
	tern_tgt_debugfs = debugfs_create_dir("tern_target", NULL);
	debugfs_create_file("limits", 0444, tern_tgt_debugfs, NULL,
			    &tern_tgt_limits_fops);
	INIT_DELAYED_WORK(&tern_tgt_gc_work, tern_tgt_gc);
	mod_delayed_work(tern_tgt_wq, &tern_tgt_gc_work, TERN_TGT_GC_INTERVAL);
}

/* Module exit: every port is gone, so every binding is an orphan. */
void tern_tgt_binds_exit(void)
{
	struct tern_tgt_bind *b, *tmp;
	LIST_HEAD(dead);

	cancel_delayed_work_sync(&tern_tgt_gc_work);
	debugfs_remove_recursive(tern_tgt_debugfs);
	spin_lock(&tern_tgt_bind_lock);
	list_for_each_entry_safe(b, tmp, &tern_tgt_orphans, entry) {
		tern_tgt_bind_unhash_locked(b);
		list_add_tail(&b->entry, &dead);
	}
	spin_unlock(&tern_tgt_bind_lock);
	tern_tgt_bind_kill_list(&dead, NULL);
	WARN_ON(!xa_empty(&tern_tgt_binds));
}

/* A path of @ts came in by @port; tern_tgt_mutex held. */
static bool tern_tgt_sess_has_path_port(const struct tern_tgt_sess *ts,
					const struct tern_tgt_port *port)
{
	unsigned int i;

	lockdep_assert_held(&tern_tgt_mutex);
	for (i = 0; ts && i < ts->nr_path_ports; i++)
		if (ts->path_ports[i] == port->id)
			return true;
	return false;
}

/*
 * End the bindings opened on @port to @exp, and those of sessions with a
 * path through @port: the export was unlinked from the port. They answer
 * -ENODEV from now on, as the export is gone for their requester, and
 * expire as orphans. With @exp NULL the port is being removed: the
 * bindings opened on it are freed. Caller holds tern_tgt_mutex, which
 * OPEN and a path's join hold from their checks to their changes.
 */
void tern_tgt_binds_end(struct tern_tgt_port *port,
			struct tern_tgt_export *exp)
{
	struct tern_tgt_bind *b;
	unsigned long idx;
	LIST_HEAD(dead);

	lockdep_assert_held(&tern_tgt_mutex);
	spin_lock(&tern_tgt_bind_lock);
	xa_for_each(&tern_tgt_binds, idx, b) {
		if ((exp && b->exp != exp) ||
		    (b->port != port &&
		     !(exp && tern_tgt_sess_has_path_port(b->owner, port))))
			continue;
		if (exp) {
			WRITE_ONCE(b->ended, true);
			if (kref_get_unless_zero(&b->ref))
				list_add_tail(&b->writes_end, &dead);
		} else if (tern_tgt_bind_unhash_locked(b)) {
			list_add_tail(&b->entry, &dead);
		}
	}
	spin_unlock(&tern_tgt_bind_lock);
	if (!exp) {
		tern_tgt_bind_kill_list(&dead, NULL);
		return;
	}
	while (!list_empty(&dead)) {
		b = list_first_entry(&dead, struct tern_tgt_bind, writes_end);
		list_del_init(&b->writes_end);
		tern_tgt_watch_bind_ended(b);
		tern_tgt_bind_put(b);
	}
}

/*
 * End every binding of @host: its key was revoked. They are freed, so
 * a client that proves a new key opens its export again (-ESTALE, then
 * OPEN), and one that cannot stays out. Return: how many ended.
 */
unsigned int tern_tgt_binds_end_host(const char *host)
{
	struct tern_tgt_bind *b;
	unsigned int n = 0;
	unsigned long idx;
	LIST_HEAD(dead);

	spin_lock(&tern_tgt_bind_lock);
	xa_for_each(&tern_tgt_binds, idx, b) {
		if (!strcmp(b->host, host) && tern_tgt_bind_unhash_locked(b)) {
			list_add_tail(&b->entry, &dead);
			n++;
		}
	}
	spin_unlock(&tern_tgt_bind_lock);
	tern_tgt_bind_kill_list(&dead, NULL);
	return n;
}

/*
 * Make @b the binding of @ts; caller holds tern_tgt_bind_lock. Over the
 * session's limit, the oldest binding it owns and does not use now goes
 * on @dead.
 */
static void tern_tgt_own_locked(struct tern_tgt_sess *ts,
				struct tern_tgt_bind *b, struct list_head *dead)
{
	unsigned int limit = clamp(READ_ONCE(max_session_binds), 2U, 1024U);
	struct tern_tgt_bind *v, *tmp;

	lockdep_assert_held(&tern_tgt_bind_lock);
	if (b->owner != ts) {
		list_del_init(&b->entry);
		if (b->owner) {
			b->owner->nr_binds--;
			if (rcu_access_pointer(b->owner->cur) == b)
				RCU_INIT_POINTER(b->owner->cur, NULL);
		}
		b->owner = ts;
		list_add_tail(&b->entry, &ts->binds);
		ts->nr_binds++;
	} else {
		list_move_tail(&b->entry, &ts->binds);	/* newest used */
	}
	rcu_assign_pointer(ts->cur, b);
	list_for_each_entry_safe(v, tmp, &ts->binds, entry) {
		if (ts->nr_binds <= limit)
			break;
		if (v == b)
			continue;
		tern_tgt_bind_unhash_locked(v);
		list_add_tail(&v->entry, dead);
		atomic_long_inc(&tern_tgt_evicted_binds);
	}
}

/*
 * Find the binding a request names and take a reference for the request.
 * The session's own binding is found without a lock. A session that lost
 * its binding (rebuilt after a reconnect) claims it again when the handle,
 * the requester's session id and the port match.
 */
struct tern_tgt_bind *tern_tgt_bind_get(struct tern_tgt_sess *ts, u64 handle)
{
	struct tern_tgt_bind *b;
	LIST_HEAD(dead);

	if (!ts)
		return NULL;
	rcu_read_lock();
	b = rcu_dereference(ts->cur);
	if (b && b->handle == handle && kref_get_unless_zero(&b->ref)) {
		rcu_read_unlock();
		return b;
	}
	rcu_read_unlock();
	if (!handle)
		return NULL;

	spin_lock(&tern_tgt_bind_lock);
	b = xa_load(&tern_tgt_binds, (unsigned long)handle);
	/* a binding a host proved its key for needs that proof again */
	if (!b || !b->hashed || b->handle != handle ||
	    b->session_id != ts->session_id || b->port != ts->port ||
	    (b->proven && strcmp(ts->identity, b->host))) {
		spin_unlock(&tern_tgt_bind_lock);
		return NULL;
	}
	tern_tgt_own_locked(ts, b, &dead);
	kref_get(&b->ref);
	spin_unlock(&tern_tgt_bind_lock);
	tern_tgt_bind_kill_list(&dead, NULL);
	return b;
}

/*
 * Enter the export for one I/O; false once it is disabled, or enabled
 * again since the binding was made (disable counts @gen up before it
 * kills @io_ref, and waits for every I/O that got in).
 */
static bool tern_tgt_export_io_get(struct tern_tgt_export *exp,
				   unsigned int gen)
{
	if (!percpu_ref_tryget_live(&exp->io_ref))
		return false;
	if (READ_ONCE(exp->gen) != gen) {
		percpu_ref_put(&exp->io_ref);
		return false;
	}
	return true;
}

static void tern_tgt_export_io_put(struct tern_tgt_export *exp)
{
	percpu_ref_put(&exp->io_ref);
}

/*
 * The geometry a binding's export has now (its size read again from the
 * backend), as INFO and WATCH answer it; -ENODEV once the export is
 * disabled or was enabled again since the binding was made.
 */
int tern_tgt_bind_info(struct tern_tgt_bind *b, struct tern_blk_info *info)
{
	struct tern_tgt_export *exp = b->exp;
	int err = -ENODEV;

	struct tern_tgt_geom *g;

	mutex_lock(&exp->lock);
	if (exp->enabled && b->gen == exp->gen && !READ_ONCE(b->ended)) {
		tern_tgt_refresh_capacity(exp);
		err = 0;
	}
	g = tern_tgt_geom_locked(exp);
	if (g)
		*info = g->info;
	else
		memset(info, 0, sizeof(*info));
	mutex_unlock(&exp->lock);
	info->handle = cpu_to_le64(b->handle);
	if (b->read_only)
		info->flags |= cpu_to_le16(TERN_BLK_INFO_READ_ONLY);
	/* a requester that did not ask may predate the field: see OPEN */
	if (!b->want_uuid)
		memset(info->uuid, 0, sizeof(info->uuid));
	return err;
}

static void tern_tgt_reply(struct tern_tgt_io *io)
{
	struct tern_srv_req *sreq = io->sreq;

	if (!io->status && io->op == TERN_BLK_OP_READ &&
	    tern_push(sreq, io->bvec, io->nr_bvec, io->len, NULL))
		io->status = -EIO;
	if (tern_reply(sreq, io->status, NULL, 0))
		pr_warn_ratelimited("could not reply to request %llu\n",
				    sreq->tid);
}

/*
 * Backend I/O finished; any context. tern_reply() defers only from hard
 * interrupts, so a bio completing in softirq is answered at once, as nvmet
 * does: a work item here would cost a wakeup and a context switch each.
 */
void tern_tgt_io_complete(struct tern_tgt_io *io, int status)
{
	struct tern_tgt_io *dup = NULL, *next;
	unsigned long flags;

	io->status = status;
	if (io->exp) {
		tern_tgt_export_io_put(io->exp);
		io->exp = NULL;
	}
	if (io->tracked) {
		spin_lock_irqsave(&io->bind->lock, flags);
		list_del_init(&io->bind_entry);
		io->tracked = false;
		dup = io->dup;
		io->dup = NULL;
		spin_unlock_irqrestore(&io->bind->lock, flags);
	}
	/* resent copies of this request take its result */
	for (; dup; dup = next) {
		next = dup->dup;
		dup->dup = NULL;
		dup->status = status;
		tern_tgt_reply(dup);
	}
	tern_tgt_reply(io);
}

/*
 * A modifying request must not run while an earlier copy of itself (the
 * requester resent it after a lane died) is still in progress: the first
 * copy could land after a newer write the requester issued once the
 * second copy was answered. So a resent copy that finds its first copy
 * in progress is not executed; it is answered with the first copy's
 * result. Returns true when @io was parked that way.
 */
static bool tern_tgt_track_write(struct tern_tgt_bind *b,
				 struct tern_tgt_io *io, bool resent)
{
	struct tern_tgt_io *first = NULL, *p;
	unsigned long flags;

	spin_lock_irqsave(&b->lock, flags);
	if (resent) {
		list_for_each_entry(p, &b->writes, bind_entry) {
			if (p->tid == io->tid) {
				first = p;
				break;
			}
		}
	}
	if (first) {
		io->dup = first->dup;
		first->dup = io;
	} else {
		list_add_tail(&io->bind_entry, &b->writes);
		io->tracked = true;
	}
	spin_unlock_irqrestore(&b->lock, flags);
	if (first)
		pr_debug("request %llu: first copy still in progress\n",
			 io->tid);
	return first;
}

/* A name from the wire: the rule, and NUL padded to the field's end. */
static bool tern_tgt_name_ok(const char *s)
{
	size_t i;

	if (!tern_blk_name_ok(s))
		return false;
	for (i = strlen(s); i < TERN_BLK_NAME_LEN; i++)
		if (s[i])
			return false;
	return true;
}

/* @exp is linked to @port and the port is enabled; tern_tgt_mutex held. */
static bool tern_tgt_port_has_locked(struct tern_tgt_port *port,
				     struct tern_tgt_export *exp)
{
	struct tern_tgt_link *link;

	lockdep_assert_held(&tern_tgt_mutex);
	if (!port || !READ_ONCE(port->enabled))
		return false;
	list_for_each_entry(link, &port->links, entry)
		if (link->exp == exp)
			return true;
	return false;
}

/*
 * @exp is linked to every port the session's paths came in by that is
 * still there; tern_tgt_mutex held. A port gone since holds no lane.
 */
static bool tern_tgt_paths_have_locked(struct tern_tgt_sess *ts,
				       struct tern_tgt_export *exp)
{
	struct tern_tgt_port *port;
	unsigned int i;

	lockdep_assert_held(&tern_tgt_mutex);
	list_for_each_entry(port, &tern_tgt_ports, entry) {
		for (i = 0; i < ts->nr_path_ports; i++)
			if (ts->path_ports[i] == port->id &&
			    READ_ONCE(port->enabled) &&
			    !tern_tgt_port_has_locked(port, exp))
				return false;
	}
	return true;
}

/*
 * May @host open @exp from a session that proved @identity ("" if none):
 * a host id that proved its key is the proven identity; one with a key
 * must have proved it; an export may take proven hosts only; then the
 * allowed hosts, if any, must list it. Caller holds exp->lock.
 */
static bool tern_tgt_host_allowed(struct tern_tgt_export *exp,
				  const char *host, const char *identity)
{
	unsigned int i;

	if (*identity) {
		if (strcmp(identity, host))
			return false;
	} else if (exp->require_auth || tern_tgt_host_has_key(host)) {
		return false;
	}

	if (!exp->nr_hosts)
		return true;
	for (i = 0; i < exp->nr_hosts; i++)
		if (!strcmp(exp->hosts[i], host))
			return true;
	return false;
}

/*
 * Room for one more binding; caller holds tern_tgt_bind_lock. At the
 * global limit the oldest orphan goes on @dead; with no orphan to give
 * up, false.
 */
static bool tern_tgt_bind_room_locked(struct list_head *dead)
{
	struct tern_tgt_bind *v;

	lockdep_assert_held(&tern_tgt_bind_lock);
	if (tern_tgt_nr_binds < READ_ONCE(max_binds))
		return true;
	v = list_first_entry_or_null(&tern_tgt_orphans, struct tern_tgt_bind,
				     entry);
	if (!v)
		return false;
	tern_tgt_bind_unhash_locked(v);
	list_add_tail(&v->entry, dead);
	atomic_long_inc(&tern_tgt_evicted_binds);
	return true;
}

static int tern_tgt_open(struct tern_srv_req *sreq, struct tern_tgt_sess *ts,
			 const struct tern_blk_req *r,
			 struct tern_blk_info *info)
{
	const struct tern_blk_open_args *args = (const void *)(r + 1);
	struct tern_tgt_export *exp = NULL, *e;
	struct tern_tgt_geom *g;
	struct tern_tgt_bind *b;
	struct tern_session_info si;
	LIST_HEAD(dead);
	bool room;
	int err;

	if (!tern_tgt_name_ok(args->export) || !tern_tgt_name_ok(args->host)) {
		pr_warn_ratelimited("OPEN with a malformed export or host name\n");
		return -EINVAL;
	}
	b = kzalloc(sizeof(*b), GFP_NOIO);
	if (!b)
		return -ENOMEM;
	kref_init(&b->ref);
	INIT_LIST_HEAD(&b->entry);
	INIT_LIST_HEAD(&b->writes_end);
	spin_lock_init(&b->lock);
	INIT_LIST_HEAD(&b->writes);
	strscpy(b->host, args->host, sizeof(b->host));
	b->want_uuid = le16_to_cpu(r->flags) & TERN_BLK_F_UUID;
	tern_session_get_info(sreq->sess, &si);
	b->session_id = ts->session_id;
	b->port = ts->port;

	/* held until the binding is in the table: see tern_tgt_binds_end() */
	mutex_lock(&tern_tgt_mutex);
	list_for_each_entry(e, &tern_tgt_exports, entry) {
		if (!strcmp(e->name, args->export)) {
			exp = e;
			break;
		}
	}
	err = -ENOENT;
	if (!exp || !tern_tgt_port_has_locked(ts->port, exp))
		goto fail;
	/* a path through a port the export is not linked to may not use it */
	err = -EACCES;
	if (!tern_tgt_paths_have_locked(ts, exp))
		goto fail;
	mutex_lock(&exp->lock);
	err = -ENODEV;
	g = tern_tgt_geom_locked(exp);
	if (!exp->enabled || !g)
		goto fail_exp;
	err = -EACCES;
	if (!tern_tgt_host_allowed(exp, args->host, ts->identity))
		goto fail_exp;
	b->proven = ts->identity[0];
	kref_get(&exp->ref);
	b->exp = exp;
	b->read_only = exp->read_only;
	b->gen = exp->gen;
	*info = g->info;
	mutex_unlock(&exp->lock);
	if (!b->want_uuid)
		memset(info->uuid, 0, sizeof(info->uuid));

	spin_lock(&tern_tgt_bind_lock);
	room = tern_tgt_bind_room_locked(&dead);
	if (room)
		tern_tgt_nr_binds++;	/* reserved */
	spin_unlock(&tern_tgt_bind_lock);
	err = -EBUSY;
	if (!room) {
		atomic_long_inc(&tern_tgt_refused_opens);
		goto fail_reserved;
	}
	for (;;) {
		b->handle = get_random_long();
		if (!b->handle)
			continue;
		err = xa_insert(&tern_tgt_binds, (unsigned long)b->handle, b,
				GFP_NOIO);
		if (err != -EBUSY)
			break;
	}
	spin_lock(&tern_tgt_bind_lock);
	if (err) {
		tern_tgt_nr_binds--;
		spin_unlock(&tern_tgt_bind_lock);
		goto fail_reserved;
	}
	b->hashed = true;	/* the table owns the initial reference */
	b->orphan_since = jiffies;
	tern_tgt_own_locked(ts, b, &dead);
	spin_unlock(&tern_tgt_bind_lock);
	mutex_unlock(&tern_tgt_mutex);
	tern_tgt_bind_kill_list(&dead, NULL);

	info->max_transfer = cpu_to_le32(min_t(u32, si.max_data,
					       TERN_TGT_MAX_TRANSFER));
	info->handle = cpu_to_le64(b->handle);
	pr_info_ratelimited("host %s opened export %s (binding %016llx)\n",
			    b->host, args->export, b->handle);
	return 0;

fail_reserved:
	mutex_unlock(&tern_tgt_mutex);
	tern_tgt_bind_kill_list(&dead, NULL);
	pr_warn_ratelimited("host %s cannot open export %s (%d)\n",
			    args->host, args->export, err);
	tern_tgt_bind_put(b);	/* puts the export */
	return err;
fail_exp:
	mutex_unlock(&exp->lock);
fail:
	mutex_unlock(&tern_tgt_mutex);
	pr_warn_ratelimited("host %s cannot open export %s (%d)\n",
			    args->host, args->export, err);
	kfree(b);
	return err;
}

static void tern_tgt_close(struct tern_tgt_bind *b)
{
	bool unhashed;

	spin_lock(&tern_tgt_bind_lock);
	unhashed = tern_tgt_bind_unhash_locked(b);
	spin_unlock(&tern_tgt_bind_lock);
	if (unhashed) {
		pr_info_ratelimited("host %s closed export %s\n", b->host,
				    b->exp->name);
		tern_tgt_bind_kill(b);
	}
}

/* Check a request front against the message; returns the opcode or < 0. */
static int tern_tgt_check_front(struct tern_srv_req *sreq,
				const struct tern_blk_req *r)
{
	u16 flags = le16_to_cpu(r->flags);
	u32 len = le32_to_cpu(r->length);
	size_t want = sizeof(*r);
	enum tern_data_dir dir = TERN_DATA_NONE;

	if (sreq->front_len < sizeof(*r) || r->version != TERN_BLK_PROTO_VERSION ||
	    r->reserved1 || r->opcode < TERN_BLK_OP_READ ||
	    r->opcode > TERN_BLK_OP_MAX || (flags & ~TERN_BLK_F_ALL))
		return -EINVAL;
	switch (r->opcode) {
	case TERN_BLK_OP_READ:
		dir = TERN_DATA_FROM_RESPONDER;
		fallthrough;
	case TERN_BLK_OP_WRITE:
		if (r->opcode == TERN_BLK_OP_WRITE)
			dir = TERN_DATA_TO_RESPONDER;
		if (sreq->data_len != len ||
		    (flags & ~(r->opcode == TERN_BLK_OP_WRITE ?
			       TERN_BLK_F_FUA : 0)))
			return -EINVAL;
		break;
	case TERN_BLK_OP_WRITE_ZEROES:
		if (flags & ~TERN_BLK_F_NOUNMAP)
			return -EINVAL;
		break;
	case TERN_BLK_OP_WATCH:
		if (flags || len)
			return -EINVAL;
		break;
	case TERN_BLK_OP_OPEN:
		want += sizeof(struct tern_blk_open_args);
		if (flags & ~TERN_BLK_F_UUID)
			return -EINVAL;
		break;
	default:
		if (flags)
			return -EINVAL;
		break;
	}
	if (sreq->front_len != want || sreq->dir != dir ||
	    (dir == TERN_DATA_NONE && sreq->data_len))
		return -EINVAL;
	return r->opcode;
}

/* Check the range of an I/O against the export's geometry. */
static int tern_tgt_check_range(u8 op, u32 len, u64 sector,
				const struct tern_blk_info *info)
{
	u32 lbs = le32_to_cpu(info->logical_block_size);
	u64 cap = le64_to_cpu(READ_ONCE(info->capacity));
	u16 iflags = le16_to_cpu(info->flags);
	u32 max_sectors;

	switch (op) {
	case TERN_BLK_OP_FLUSH:
		return len || sector ? -EINVAL : 0;
	case TERN_BLK_OP_READ:
	case TERN_BLK_OP_WRITE:
		max_sectors = le32_to_cpu(info->max_transfer) >> SECTOR_SHIFT;
		break;
	case TERN_BLK_OP_DISCARD:
		if (!(iflags & TERN_BLK_INFO_DISCARD))
			return -EOPNOTSUPP;
		max_sectors = le32_to_cpu(info->max_discard_sectors);
		break;
	case TERN_BLK_OP_WRITE_ZEROES:
		if (!(iflags & TERN_BLK_INFO_WRITE_ZEROES))
			return -EOPNOTSUPP;
		max_sectors = le32_to_cpu(info->max_write_zeroes_sectors);
		break;
	default:
		return -EINVAL;
	}
	if (!lbs || !len || len % lbs || (sector << SECTOR_SHIFT) % lbs ||
	    (len >> SECTOR_SHIFT) > max_sectors)
		return -EINVAL;
	if (sector >= cap || (len >> SECTOR_SHIFT) > cap - sector)
		return -ERANGE;
	return 0;
}

/*
 * May @b do this I/O: read-only, and the range against the geometry
 * snapshot its export publishes. 0 or a negative errno.
 */
static int tern_tgt_check_io(struct tern_tgt_bind *b,
			     const struct tern_blk_req *r)
{
	struct tern_tgt_geom *g;
	u8 op = r->opcode;
	int err;

	if (READ_ONCE(b->ended))
		return -ENODEV;
	if (b->read_only && (op == TERN_BLK_OP_WRITE ||
			     op == TERN_BLK_OP_DISCARD ||
			     op == TERN_BLK_OP_WRITE_ZEROES))
		return -EROFS;
	rcu_read_lock();
	g = rcu_dereference(b->exp->geom);
	err = g ? tern_tgt_check_range(op, le32_to_cpu(r->length),
				       le64_to_cpu(r->offset), &g->info) :
		  -ENODEV;
	rcu_read_unlock();
	return err;
}

/* Charge @len bytes of request data to @ts and to the target. */
static bool tern_tgt_charge(struct tern_tgt_sess *ts, u32 len)
{
	long limit = READ_ONCE(max_data_mib);

	limit = limit ? limit << 20 : tern_tgt_data_auto;
	if (atomic_long_add_return(len, &ts->data_bytes) > ts->data_budget)
		goto over_session;
	if (atomic_long_add_return(len, &tern_tgt_data_bytes) > limit)
		goto over;
	return true;
over:
	atomic_long_sub(len, &tern_tgt_data_bytes);
over_session:
	atomic_long_sub(len, &ts->data_bytes);
	atomic_long_inc(&tern_tgt_refused_data);
	return false;
}

static void tern_tgt_uncharge(struct tern_tgt_sess *ts, u32 len)
{
	atomic_long_sub(len, &ts->data_bytes);
	atomic_long_sub(len, &tern_tgt_data_bytes);
}

/*
 * @sreq's io, with data pages within the budgets; once per request.
 * Return: the io, or NULL: -ENOMEM.
 */
static struct tern_tgt_io *tern_tgt_io_get(struct tern_srv_req *sreq,
					   struct tern_tgt_sess *ts, u32 len)
{
	struct tern_tgt_io *io = tern_srv_req_space(sreq);

	if (len && !tern_tgt_charge(ts, len))
		return NULL;
	if (tern_tgt_io_init(io, len, GFP_NOIO)) {
		if (len)
			tern_tgt_uncharge(ts, len);
		return NULL;
	}
	io->ts = ts;
	io->charged = len;
	return io;
}

static int tern_tgt_handle_io(struct tern_srv_req *sreq,
			      struct tern_tgt_io *io)
{
	struct tern_tgt_bind *b = io->bind;
	struct tern_tgt_export *exp = b->exp;

	if (io->op != TERN_BLK_OP_READ &&
	    tern_tgt_track_write(b, io, sreq->resent))
		return 1;	/* answered with its first copy */
	if (!tern_tgt_export_io_get(exp, b->gen)) {
		tern_tgt_io_complete(io, -ENODEV);
		return 1;
	}
	io->exp = exp;
	if (io->op == TERN_BLK_OP_WRITE &&
	    tern_pull(sreq, io->bvec, io->nr_bvec, 0, io->len, NULL)) {
		tern_tgt_io_complete(io, -EIO);
		return 1;
	}
	tern_tgt_io_submit(io);
	return 1;	/* in progress */
}

static void tern_tgt_request(struct tern_srv_req *sreq)
{
	const struct tern_blk_req *r = sreq->front;
	struct tern_tgt_io *io = sreq->priv;
	struct tern_tgt_sess *ts;
	struct tern_tgt_bind *b;
	struct tern_blk_info info;
	int op, err;

	/* a WRITE whose data alloc_data took: its front was checked there */
	ts = io ? io->ts : tern_session_priv(sreq->sess);
	err = -ENOMEM;
	if (!ts)
		goto reply;
	op = io ? TERN_BLK_OP_WRITE : tern_tgt_check_front(sreq, r);
	if (op < 0) {
		pr_warn_ratelimited("malformed request %llu refused\n",
				    sreq->tid);
		err = op;
		goto reply;
	}

	if (op == TERN_BLK_OP_OPEN) {
		err = tern_tgt_open(sreq, ts, r, &info);
		if (err)
			goto reply;
		if (tern_reply(sreq, 0, &info, sizeof(info)))
			pr_warn_ratelimited("could not answer OPEN\n");
		return;
	}

	if (io) {
		/* a WRITE whose data alloc_data took: checked there */
		b = io->bind;
	} else {
		b = tern_tgt_bind_get(ts, le64_to_cpu(r->handle));
		if (!b) {
			err = -ESTALE;
			goto reply;
		}
	}
	if (op == TERN_BLK_OP_WATCH) {
		tern_tgt_watch(sreq, b, le64_to_cpu(r->offset));
		return;
	}
	if (op == TERN_BLK_OP_INFO) {
		err = tern_tgt_bind_info(b, &info);
		/* a size read anew is news for the other clients too */
		if (!err)
			tern_tgt_watch_resize(b->exp);
		tern_tgt_bind_put(b);
		if (err)
			goto reply;
		if (tern_reply(sreq, 0, &info, sizeof(info)))
			pr_warn_ratelimited("could not answer INFO\n");
		return;
	}
	if (op == TERN_BLK_OP_CLOSE) {
		tern_tgt_close(b);
		tern_tgt_bind_put(b);
		err = 0;
		goto reply;
	}

	if (!io) {
		err = tern_tgt_check_io(b, r);
		/*
		 * A WRITE whose data was discarded and that would pass now:
		 * the budget was exhausted when it came; let it be retried.
		 */
		if (!err && op == TERN_BLK_OP_WRITE)
			err = -ENOMEM;
		if (!err) {
			io = tern_tgt_io_get(sreq, ts,
					     op == TERN_BLK_OP_READ ?
					     sreq->data_len : 0);
			if (!io)
				err = -ENOMEM;
		}
		if (err) {
			tern_tgt_bind_put(b);
			goto reply;
		}
		io->bind = b;
		sreq->priv = io;
	}
	io->sreq = sreq;
	io->op = op;
	io->flags = le16_to_cpu(r->flags);
	io->len = le32_to_cpu(r->length);
	io->sector = le64_to_cpu(r->offset);
	io->tid = sreq->tid;
	tern_tgt_handle_io(sreq, io);
	return;
reply:
	if (err && err != -ESTALE && err != -EROFS)
		pr_debug("request %llu failed: %d\n", sreq->tid, err);
	if (tern_reply(sreq, err, NULL, 0))
		pr_warn_ratelimited("could not reply to request %llu\n",
				    sreq->tid);
}

/*
 * WRITE data lands straight in the pages the backend bios will use. The
 * request is checked in full first (front, binding, range, budgets): a
 * request that would be refused gets no pages. Its data is discarded as
 * it arrives (or, remote, never pulled) and request() answers it with
 * the reason, -ESTALE included, which a requester rebinds on.
 */
static int tern_tgt_alloc_data(struct tern_srv_req *sreq)
{
	struct tern_tgt_sess *ts = tern_session_priv(sreq->sess);
	const struct tern_blk_req *r = sreq->front;
	struct tern_tgt_bind *b;
	struct tern_tgt_io *io;

	if (!ts || tern_tgt_check_front(sreq, r) != TERN_BLK_OP_WRITE)
		goto discard;
	b = tern_tgt_bind_get(ts, le64_to_cpu(r->handle));
	if (!b)
		goto discard;
	if (tern_tgt_check_io(b, r))
		goto discard_put;
	io = tern_tgt_io_get(sreq, ts, sreq->data_len);
	if (!io)
		goto discard_put;
	io->bind = b;
	io->sreq = sreq;
	sreq->priv = io;
	sreq->rx_bvec = io->bvec;
	sreq->rx_nr_bvec = io->nr_bvec;
	sreq->rx_swappable = true;	/* tern_tgt_io_init()'s data pages */
	return 0;

discard_put:
	tern_tgt_bind_put(b);
discard:
	atomic_long_inc(&tern_tgt_discarded);
	sreq->rx_discard = true;
	return 0;
}

static void tern_tgt_release(struct tern_srv_req *sreq)
{
	struct tern_tgt_io *io = sreq->priv;

	if (!io)
		return;
	sreq->priv = NULL;
	if (io->charged)
		tern_tgt_uncharge(io->ts, io->charged);
	if (io->bind)
		tern_tgt_bind_put(io->bind);
	tern_tgt_io_put_pages(io);
}

/* The per session state: before the first request, after the last. */
static void tern_tgt_session_event(struct tern_session *sess,
				   enum tern_session_event ev)
{
	struct tern_endpoint *ep = tern_session_endpoint(sess);
	struct tern_tgt_sess *ts = tern_session_priv(sess);
	struct tern_tgt_bind *b, *tmp;
	struct tern_session_info si;
	unsigned int kib;

	if (ev == TERN_SESSION_UP && !ts) {
		ts = kzalloc(sizeof(*ts), GFP_KERNEL);
		if (!ts)
			return;		/* its requests get -ENOMEM */
		tern_session_get_info(sess, &si);
		INIT_LIST_HEAD(&ts->binds);
		ts->session_id = si.session_id;
		ts->port = tern_endpoint_priv(ep);
		if (tern_session_identity(sess))
			strscpy(ts->identity, tern_session_identity(sess),
				sizeof(ts->identity));
		kib = READ_ONCE(session_data_kib);
		ts->data_budget = kib ? (long)kib << 10 :
				  max_t(long, (long)si.queue_depth * SZ_128K,
					SZ_1M);
		ts->data_budget = max_t(long, ts->data_budget,
					TERN_TGT_MAX_TRANSFER);
		tern_session_set_priv(sess, ts);
		return;
	}
	if (ev != TERN_SESSION_GONE || !ts)
		return;
	tern_session_set_priv(sess, NULL);
	spin_lock(&tern_tgt_bind_lock);
	list_for_each_entry_safe(b, tmp, &ts->binds, entry) {
		b->owner = NULL;
		b->orphan_since = jiffies;
		list_move_tail(&b->entry, &tern_tgt_orphans);
	}
	ts->nr_binds = 0;
	RCU_INIT_POINTER(ts->cur, NULL);
	spin_unlock(&tern_tgt_bind_lock);
	WARN_ON_ONCE(atomic_long_read(&ts->data_bytes));
	kfree(ts);
}

/*
 * A requester's path into one of its sessions through another port: let
 * it in if every export the session has open, or left open before it was
 * rebuilt (an orphan it would claim again), is linked to that port too,
 * and remember the port, which later OPENs check as well. The session's
 * bindings stay with the port it was opened on; its requests may come
 * through any port that passed these checks.
 */
static int tern_tgt_lane_join(struct tern_session *sess,
			      struct tern_endpoint *ep)
{
	struct tern_tgt_port *port = tern_endpoint_priv(ep);
	struct tern_tgt_sess *ts = tern_session_priv(sess);
	struct tern_tgt_bind *b;
	unsigned int i;
	int err = 0;

	if (!ts)
		return -ENOMEM;	/* as its requests would be answered */
	mutex_lock(&tern_tgt_mutex);
	spin_lock(&tern_tgt_bind_lock);
	list_for_each_entry(b, &ts->binds, entry) {
		if (!tern_tgt_port_has_locked(port, b->exp)) {
			err = -EACCES;
			break;
		}
	}
	/* and those it may claim again: a session rebuilt after a reconnect */
	list_for_each_entry(b, &tern_tgt_orphans, entry) {
		if (err)
			break;
		if (b->session_id == ts->session_id && b->port == ts->port &&
		    !tern_tgt_port_has_locked(port, b->exp))
			err = -EACCES;
	}
	spin_unlock(&tern_tgt_bind_lock);
	for (i = 0; !err && i < ts->nr_path_ports; i++)
		if (ts->path_ports[i] == port->id)
			break;
	if (!err && i == ts->nr_path_ports) {
		if (i == ARRAY_SIZE(ts->path_ports))
			err = -EUSERS;
		else
			ts->path_ports[ts->nr_path_ports++] = port->id;
	}
	mutex_unlock(&tern_tgt_mutex);
	if (err)
		pr_warn_ratelimited("session %016llx: a path through port %s refused (%d): %s\n",
				    ts->session_id,
				    config_item_name(&port->group.cg_item), err,
				    err == -EACCES ?
				    "an export it has open is not linked there" :
				    "it has paths through too many ports");
	return err;
}

static const struct tern_endpoint_ops tern_tgt_ops = {
	.request	= tern_tgt_request,
	.alloc_data	= tern_tgt_alloc_data,
	.release	= tern_tgt_release,
	.session_event	= tern_tgt_session_event,
	.auth_key	= tern_tgt_auth_key,
	.lane_join	= tern_tgt_lane_join,
};

/* Every port's endpoint: a requester's paths may use any of them. */
static const char tern_tgt_group[] = "target";

struct tern_endpoint *tern_tgt_endpoint_create(struct tern_tgt_port *port)
{
	struct tern_endpoint_conf conf = {
		.name		= "target",
		.ops		= &tern_tgt_ops,
		.priv		= port,
		.max_lanes	= port->max_lanes,
		.max_data	= TERN_TGT_MAX_TRANSFER,
		.max_queue_depth = port->max_queue_depth ?:
				   TERN_TGT_MAX_QUEUE_DEPTH,
		.require_auth	= port->require_auth,
		.require_encrypt = port->require_encrypt,
		.require_integrity = port->require_integrity,
		.group		= tern_tgt_group,
		.req_space	= sizeof(struct tern_tgt_io),
	};

	BUILD_BUG_ON(sizeof(struct tern_tgt_io) > TERN_MAX_REQ_SPACE);
	return tern_endpoint_create(&conf);
}
