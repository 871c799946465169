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

#include <linux/ctype.h>
#include <linux/hashtable.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/slab.h>
#include "target.h"

static unsigned int orphan_timeout = 300;
module_param(orphan_timeout, uint, 0644);
MODULE_PARM_DESC(orphan_timeout,
		 "seconds a binding survives without any session (default 300)");

static DEFINE_HASHTABLE(tern_tgt_binds, 6);
static DEFINE_SPINLOCK(tern_tgt_bind_lock);
static struct delayed_work tern_tgt_gc_work;
#define TERN_TGT_GC_INTERVAL	(10 * HZ)

static void tern_tgt_bind_release(struct kref *ref)
{
	struct tern_tgt_bind *b = container_of(ref, struct tern_tgt_bind, ref);

	tern_tgt_export_put(b->exp);
	kfree(b);
}

void tern_tgt_bind_put(struct tern_tgt_bind *b)
{
	kref_put(&b->ref, tern_tgt_bind_release);
}

/* Drop the hash's reference; caller holds tern_tgt_bind_lock. */
static bool tern_tgt_bind_unhash_locked(struct tern_tgt_bind *b)
{
	if (!b->hashed)
		return false;
	hash_del(&b->node);
	b->hashed = false;
	return true;
}

static void tern_tgt_gc(struct work_struct *work)
{
	unsigned long tmo = msecs_to_jiffies(orphan_timeout * 1000);
	struct tern_tgt_bind *b, *dead[16];
	struct hlist_node *tmp;
	unsigned int bkt, n = 0, i;

	spin_lock(&tern_tgt_bind_lock);
	hash_for_each_safe(tern_tgt_binds, bkt, tmp, b, node) {
		if (n == ARRAY_SIZE(dead))
			break;
		if (b->nr_sess || !time_after(jiffies, b->orphan_since + tmo))
			continue;
		tern_tgt_bind_unhash_locked(b);
		dead[n++] = b;
	}
	spin_unlock(&tern_tgt_bind_lock);
	for (i = 0; i < n; i++) {
		pr_info("binding %016llx (export %s, host %s) expired\n",
			dead[i]->handle,
			config_item_name(&dead[i]->exp->group.cg_item),
			dead[i]->host);
		tern_tgt_bind_put(dead[i]);
	}
	mod_delayed_work(system_wq, &tern_tgt_gc_work,
			 n == ARRAY_SIZE(dead) ? 0 : TERN_TGT_GC_INTERVAL);
}

void tern_tgt_binds_init(void)
{
	INIT_DELAYED_WORK(&tern_tgt_gc_work, tern_tgt_gc);
	mod_delayed_work(system_wq, &tern_tgt_gc_work, TERN_TGT_GC_INTERVAL);
}

/* Module exit: every port is gone, so no session refers to a binding. */
void tern_tgt_binds_exit(void)
{
	struct tern_tgt_bind *b;
	struct hlist_node *tmp;
	unsigned int bkt;
	HLIST_HEAD(dead);

	cancel_delayed_work_sync(&tern_tgt_gc_work);
	spin_lock(&tern_tgt_bind_lock);
	hash_for_each_safe(tern_tgt_binds, bkt, tmp, b, node) {
		tern_tgt_bind_unhash_locked(b);
		hlist_add_head(&b->node, &dead);
	}
	spin_unlock(&tern_tgt_bind_lock);
	hlist_for_each_entry_safe(b, tmp, &dead, node)
		tern_tgt_bind_put(b);
}

static struct tern_tgt_bind *tern_tgt_bind_find_locked(u64 handle)
{
	struct tern_tgt_bind *b;

	hash_for_each_possible(tern_tgt_binds, b, node, handle)
		if (b->handle == handle)
			return b;
	return NULL;
}

/* Point @sess at @b (or at nothing); caller holds tern_tgt_bind_lock. */
static struct tern_tgt_bind *tern_tgt_attach_locked(struct tern_session *sess,
						    struct tern_tgt_bind *b)
{
	struct tern_tgt_bind *old = tern_session_priv(sess);

	if (old == b)
		return NULL;
	if (old && !--old->nr_sess)
		old->orphan_since = jiffies;
	if (b) {
		kref_get(&b->ref);
		b->nr_sess++;
	}
	tern_session_set_priv(sess, b);
	return old;	/* the caller puts the session's old reference */
}

/*
 * Find the binding a request names and take a reference for the request.
 * A session that lost its binding (rebuilt after a reconnect) is attached
 * again when the handle and the requester's session id match.
 */
struct tern_tgt_bind *tern_tgt_bind_get(struct tern_session *sess, u64 handle)
{
	struct tern_tgt_bind *b, *old = NULL;
	struct tern_session_info si;

	spin_lock(&tern_tgt_bind_lock);
	b = tern_session_priv(sess);
	if (b && b->handle == handle && b->hashed)
		goto found;
	spin_unlock(&tern_tgt_bind_lock);

	/* not the session's binding: one it may claim again, by session id */
	tern_session_get_info(sess, &si);
	spin_lock(&tern_tgt_bind_lock);
	b = tern_tgt_bind_find_locked(handle);
	if (!b || b->session_id != si.session_id) {
		spin_unlock(&tern_tgt_bind_lock);
		return NULL;
	}
	old = tern_tgt_attach_locked(sess, b);
found:
	kref_get(&b->ref);
	spin_unlock(&tern_tgt_bind_lock);
	if (old)
		tern_tgt_bind_put(old);
	return b;
}

/* Enter the export for one I/O; false once it is disabled or renewed. */
static bool tern_tgt_export_io_get(struct tern_tgt_export *exp,
				   unsigned int gen)
{
	bool ok;

	spin_lock_irq(&exp->io_lock);
	ok = exp->live && exp->gen == gen;
	if (ok)
		exp->nr_io++;
	spin_unlock_irq(&exp->io_lock);
	return ok;
}

static void tern_tgt_export_io_put(struct tern_tgt_export *exp)
{
	unsigned long flags;
	bool wake;

	spin_lock_irqsave(&exp->io_lock, flags);
	wake = !--exp->nr_io && !exp->live;
	spin_unlock_irqrestore(&exp->io_lock, flags);
	if (wake)
		wake_up_all(&exp->io_wait);
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

	mutex_lock(&exp->lock);
	if (exp->enabled && b->gen == exp->gen) {
		tern_tgt_refresh_capacity(exp);
		err = 0;
	}
	*info = exp->info;
	mutex_unlock(&exp->lock);
	info->handle = cpu_to_le64(b->handle);
	if (b->read_only)
		info->flags |= cpu_to_le16(TERN_BLK_INFO_READ_ONLY);
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

static bool tern_tgt_name_ok(const char *s)
{
	size_t len = strnlen(s, TERN_BLK_NAME_LEN);
	size_t i;

	if (!len || len == TERN_BLK_NAME_LEN)
		return false;
	for (i = len; i < TERN_BLK_NAME_LEN; i++)
		if (s[i])
			return false;	/* NUL padded */
	for (i = 0; i < len; i++)
		if (!isalnum(s[i]) && !strchr("._:-", s[i]))
			return false;
	return true;
}

static bool tern_tgt_port_has_locked(struct tern_tgt_export *exp)
{
	struct tern_tgt_port *port;
	struct tern_tgt_link *link;

	list_for_each_entry(port, &tern_tgt_ports, entry) {
		if (!READ_ONCE(port->enabled))
			continue;
		list_for_each_entry(link, &port->links, entry)
			if (link->exp == exp)
				return true;
	}
	return false;
}

static bool tern_tgt_host_allowed(struct tern_tgt_export *exp,
				  const char *host)
{
	unsigned int i;

	if (!exp->nr_hosts)
		return true;
	for (i = 0; i < exp->nr_hosts; i++)
		if (!strcmp(exp->hosts[i], host))
			return true;
	return false;
}

static int tern_tgt_open(struct tern_srv_req *sreq,
			 const struct tern_blk_open_args *args,
			 struct tern_blk_info *info)
{
	struct tern_tgt_export *exp = NULL, *e;
	struct tern_tgt_bind *b, *old;
	struct tern_session_info si;
	int err;

	if (!tern_tgt_name_ok(args->export) || !tern_tgt_name_ok(args->host)) {
		pr_warn_ratelimited("OPEN with a malformed export or host name\n");
		return -EINVAL;
	}
	b = kzalloc(sizeof(*b), GFP_NOIO);
	if (!b)
		return -ENOMEM;
	kref_init(&b->ref);
	spin_lock_init(&b->lock);
	INIT_LIST_HEAD(&b->writes);
	strscpy(b->host, args->host, sizeof(b->host));
	tern_session_get_info(sreq->sess, &si);
	b->session_id = si.session_id;

	mutex_lock(&tern_tgt_mutex);
	list_for_each_entry(e, &tern_tgt_exports, entry) {
		if (!strcmp(config_item_name(&e->group.cg_item),
			    args->export)) {
			exp = e;
			break;
		}
	}
	err = -ENOENT;
	if (!exp || !tern_tgt_port_has_locked(exp))
		goto fail;
	mutex_lock(&exp->lock);
	err = -ENODEV;
	if (!exp->enabled)
		goto fail_exp;
	err = -EACCES;
	if (!tern_tgt_host_allowed(exp, args->host))
		goto fail_exp;
	kref_get(&exp->ref);
	b->exp = exp;
	b->read_only = exp->read_only;
	spin_lock_irq(&exp->io_lock);
	b->gen = exp->gen;
	spin_unlock_irq(&exp->io_lock);
	*info = exp->info;
	mutex_unlock(&exp->lock);
	mutex_unlock(&tern_tgt_mutex);

	info->max_transfer = cpu_to_le32(min_t(u32, si.max_data,
					       TERN_TGT_MAX_TRANSFER));
	spin_lock(&tern_tgt_bind_lock);
	do {
		b->handle = get_random_u64();
	} while (!b->handle || tern_tgt_bind_find_locked(b->handle));
	hash_add(tern_tgt_binds, &b->node, b->handle);
	b->hashed = true;	/* the hash owns the initial reference */
	b->orphan_since = jiffies;
	old = tern_tgt_attach_locked(sreq->sess, b);
	spin_unlock(&tern_tgt_bind_lock);
	if (old)
		tern_tgt_bind_put(old);
	info->handle = cpu_to_le64(b->handle);
	pr_info("host %s opened export %s (binding %016llx)\n", b->host,
		args->export, b->handle);
	return 0;

fail_exp:
	mutex_unlock(&exp->lock);
fail:
	mutex_unlock(&tern_tgt_mutex);
	pr_warn_ratelimited("host %s cannot open export %s (%d)\n",
			    args->host, args->export, err);
	kfree(b);
	return err;
}

static void tern_tgt_close(struct tern_session *sess, struct tern_tgt_bind *b)
{
	struct tern_tgt_bind *old;
	bool unhashed;

	spin_lock(&tern_tgt_bind_lock);
	unhashed = tern_tgt_bind_unhash_locked(b);
	old = tern_session_priv(sess) == b ?
		tern_tgt_attach_locked(sess, NULL) : NULL;
	spin_unlock(&tern_tgt_bind_lock);
	if (unhashed) {
		pr_info("host %s closed export %s\n", b->host,
			config_item_name(&b->exp->group.cg_item));
		tern_tgt_watch_bind_closed(b);
		tern_tgt_bind_put(b);
	}
	if (old)
		tern_tgt_bind_put(old);
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
		fallthrough;
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

/* Check the range of an I/O against the export; 0 or negative errno. */
static int tern_tgt_check_range(struct tern_tgt_io *io,
				const struct tern_blk_info *info)
{
	u32 lbs = le32_to_cpu(info->logical_block_size);
	u64 cap = le64_to_cpu(READ_ONCE(info->capacity));
	u16 iflags = le16_to_cpu(info->flags);
	u32 max_sectors;

	switch (io->op) {
	case TERN_BLK_OP_FLUSH:
		return io->len || io->sector ? -EINVAL : 0;
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
	if (!io->len || io->len % lbs ||
	    (io->sector << SECTOR_SHIFT) % lbs ||
	    (io->len >> SECTOR_SHIFT) > max_sectors)
		return -EINVAL;
	if (io->sector >= cap || (io->len >> SECTOR_SHIFT) > cap - io->sector)
		return -ERANGE;
	return 0;
}

static int tern_tgt_handle_io(struct tern_srv_req *sreq,
			      struct tern_tgt_io *io,
			      const struct tern_blk_req *r)
{
	struct tern_tgt_bind *b;
	struct tern_tgt_export *exp;
	int err;

	b = tern_tgt_bind_get(sreq->sess, le64_to_cpu(r->handle));
	if (!b)
		return -ESTALE;
	io->bind = b;
	exp = b->exp;

	if (r->opcode == TERN_BLK_OP_CLOSE) {
		tern_tgt_close(sreq->sess, b);
		return 0;
	}
	if (r->opcode == TERN_BLK_OP_INFO)
		return -EINVAL;	/* handled by the caller */

	if (b->read_only && (io->op == TERN_BLK_OP_WRITE ||
			     io->op == TERN_BLK_OP_DISCARD ||
			     io->op == TERN_BLK_OP_WRITE_ZEROES))
		return -EROFS;
	err = tern_tgt_check_range(io, &exp->info);
	if (err)
		return err;
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
	struct tern_blk_info info;
	int op, err;

	op = tern_tgt_check_front(sreq, r);
	if (op < 0) {
		pr_warn_ratelimited("malformed request %llu refused\n",
				    sreq->tid);
		err = op;
		goto reply;
	}

	if (op == TERN_BLK_OP_OPEN) {
		err = tern_tgt_open(sreq, (const void *)(r + 1), &info);
		if (err)
			goto reply;
		if (tern_reply(sreq, 0, &info, sizeof(info)))
			pr_warn_ratelimited("could not answer OPEN\n");
		return;
	}
	if (op == TERN_BLK_OP_INFO || op == TERN_BLK_OP_WATCH) {
		struct tern_tgt_bind *b;

		b = tern_tgt_bind_get(sreq->sess, le64_to_cpu(r->handle));
		if (!b) {
			err = -ESTALE;
			goto reply;
		}
		if (op == TERN_BLK_OP_WATCH) {
			tern_tgt_watch(sreq, b, le64_to_cpu(r->offset));
			return;
		}
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

	if (!io) {
		u32 len = op == TERN_BLK_OP_READ ? sreq->data_len : 0;

		io = tern_tgt_io_alloc(len, GFP_NOIO);
		if (!io) {
			err = -ENOMEM;
			goto reply;
		}
		sreq->priv = io;
	}
	io->sreq = sreq;
	io->op = op;
	io->flags = le16_to_cpu(r->flags);
	io->len = le32_to_cpu(r->length);
	io->sector = le64_to_cpu(r->offset);
	io->tid = sreq->tid;
	err = tern_tgt_handle_io(sreq, io, r);
	if (err > 0)
		return;
reply:
	if (err && err != -ESTALE && err != -EROFS)
		pr_debug("request %llu failed: %d\n", sreq->tid, err);
	if (tern_reply(sreq, err, NULL, 0))
		pr_warn_ratelimited("could not reply to request %llu\n",
				    sreq->tid);
}

/* WRITE data lands straight in the pages the backend bios will use. */
static int tern_tgt_alloc_data(struct tern_srv_req *sreq)
{
	struct tern_tgt_io *io;

	if (sreq->data_len > TERN_TGT_MAX_TRANSFER)
		return 0;	/* the core buffers it; request() refuses */
	io = tern_tgt_io_alloc(sreq->data_len, GFP_NOIO);
	if (!io)
		return -ENOMEM;
	io->sreq = sreq;
	sreq->priv = io;
	sreq->rx_bvec = io->bvec;
	sreq->rx_nr_bvec = io->nr_bvec;
	return 0;
}

static void tern_tgt_release(struct tern_srv_req *sreq)
{
	struct tern_tgt_io *io = sreq->priv;

	if (!io)
		return;
	sreq->priv = NULL;
	if (io->bind)
		tern_tgt_bind_put(io->bind);
	tern_tgt_io_free(io);
}

static void tern_tgt_session_event(struct tern_session *sess,
				   enum tern_session_event ev)
{
	struct tern_tgt_bind *old;

	if (ev != TERN_SESSION_GONE)
		return;
	spin_lock(&tern_tgt_bind_lock);
	old = tern_tgt_attach_locked(sess, NULL);
	spin_unlock(&tern_tgt_bind_lock);
	if (old)
		tern_tgt_bind_put(old);
}

static const struct tern_endpoint_ops tern_tgt_ops = {
	.request	= tern_tgt_request,
	.alloc_data	= tern_tgt_alloc_data,
	.release	= tern_tgt_release,
	.session_event	= tern_tgt_session_event,
};

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
	};

	return tern_endpoint_create(&conf);
}
