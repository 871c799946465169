// SPDX-License-Identifier: GPL-2.0
/*
 * tern_blk: a blk-mq block device on a remote tern_target export.
 *
 * One session per device; one hardware queue per lane of the session and
 * a tag set shared by all of them, as deep as the session's negotiated
 * queue depth, so a request that got a tag always fits the messenger's
 * in-flight window. Each request becomes one tern transaction whose data
 * buffer is the request's own bio_vecs: the target pulls WRITE data from
 * them and pushes READ data into them.
 *
 * Failures ride the messenger: while a session reconnects its requests
 * wait in the messenger and are resent, so the block timeout only re-arms;
 * past the loss timeout the messenger fails them and so do we (EIO). A
 * request the target does not answer over a live session is given
 * max_timeouts expiries of its timer, then cancelled (BLK_STS_TIMEOUT).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blkdev.h>
#include <linux/completion.h>
#include <linux/idr.h>
#include <linux/module.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <tern/compat.h>
#include "blk.h"

struct tern_blk_cmd {
	struct tern_request	treq;
	struct tern_blk_req	front;
	blk_status_t		status;
	bool			stale;	/* requeue once the device is bound again */
	bool			expired; /* cancelled by tern_blk_timeout() */
	unsigned int		timeouts; /* timer expiries while live */
	unsigned long		retry_until; /* jiffies: no requeue after */
	unsigned int		nr_bvec;
	struct bio_vec		*bvec;
	struct bio_vec		inline_bvec[TERN_BLK_INLINE_BVECS];
};

static int tern_blk_major;
static DEFINE_IDA(tern_blk_ida);
static DEFINE_MUTEX(tern_blk_mutex);	/* tern_blk_devs */
/*
 * Held across a whole map, as nvme-fabrics holds nvmf_dev_mutex: two maps
 * of one export cannot both miss the other's device.
 */
static DEFINE_MUTEX(tern_blk_add_mutex);
static LIST_HEAD(tern_blk_devs);
static struct tern_endpoint *tern_blk_ep;
static struct workqueue_struct *tern_blk_wq;

static unsigned int max_timeouts = 4;
module_param(max_timeouts, uint, 0644);
MODULE_PARM_DESC(max_timeouts,
		 "Fail a request unanswered over a live session after this many expiries of its timeout (queue/io_timeout); 0 = never (default 4)");

static unsigned int ctrl_timeout_ms = 30000;
module_param(ctrl_timeout_ms, uint, 0644);
MODULE_PARM_DESC(ctrl_timeout_ms,
		 "Cancel an OPEN or INFO unanswered after this many ms (1000 to 3600000, default 30000)");

static unsigned long tern_blk_ctrl_timeout(void)
{
	return msecs_to_jiffies(clamp(READ_ONCE(ctrl_timeout_ms), 1000U,
				      3600000U));
}

/* How long a failed rebind makes -ESTALE an I/O error, not a retry. */
#define TERN_BLK_REBIND_BACKOFF	(5 * HZ)

static const char *const tern_blk_state_names[] = {
	[TERN_BLK_LIVE]		= "live",
	[TERN_BLK_RECONNECTING]	= "reconnecting",
	[TERN_BLK_FAILED]	= "failed",
	[TERN_BLK_DELETING]	= "deleting",
};

/* ---- I/O ---- */

/*
 * A request the target answered with -ESTALE was not executed: the target
 * no longer knows the device's handle (it restarted, or dropped a binding
 * left without a session). Return: true to requeue it while one OPEN asks
 * for a new handle, false to fail it (the device is going away, or the
 * last attempt failed only moments ago: a vanished export must fail I/O,
 * not loop).
 */
static bool tern_blk_stale(struct tern_blk_dev *dev, u64 sent_handle)
{
	int state = atomic_read(&dev->state);

	if (state == TERN_BLK_FAILED || state == TERN_BLK_DELETING)
		return false;
	if (sent_handle != READ_ONCE(dev->handle))
		return true;	/* bound again since it was sent */
	if (test_bit(TERN_BLK_REBINDING, &dev->flags))
		return true;
	if (test_bit(TERN_BLK_REBIND_FAILED, &dev->flags) &&
	    time_before(jiffies, READ_ONCE(dev->rebind_failed_at) +
				 TERN_BLK_REBIND_BACKOFF))
		return false;
	if (!test_and_set_bit(TERN_BLK_REBINDING, &dev->flags))
		queue_work(tern_blk_wq, &dev->rebind_work);
	return true;
}

/* As nvme fails I/O to a removed namespace: for good. */
static void tern_blk_removed(struct tern_blk_dev *dev)
{
	if (!test_and_set_bit(TERN_BLK_REMOVED, &dev->flags))
		pr_err("%s: export %s was disabled or removed on the target; I/O fails until the device is mapped again\n",
		       dev->name, dev->opts.export);
}

/*
 * A target may answer "not now" (-ENOMEM) or "bind again" (-ESTALE) to a
 * request as often as it likes: one I/O timeout after its first dispatch
 * the request fails rather than going round for ever.
 */
static bool tern_blk_retry_expired(struct request *rq,
				   struct tern_blk_cmd *cmd)
{
	if (time_before(jiffies, cmd->retry_until))
		return false;
	pr_warn_ratelimited("%s: request %llu refused by the target for %u ms; failing it\n",
			    rq->q->disk->disk_name, cmd->treq.tid,
			    jiffies_to_msecs(rq->q->rq_timeout));
	cmd->status = BLK_STS_IOERR;
	return true;
}

static void tern_blk_complete(struct request *rq)
{
	struct tern_blk_cmd *cmd = blk_mq_rq_to_pdu(rq);

	if (cmd->bvec != cmd->inline_bvec)
		kfree(cmd->bvec);
	cmd->bvec = NULL;
	if ((cmd->stale || cmd->status == BLK_STS_RESOURCE) &&
	    tern_blk_retry_expired(rq, cmd))
		cmd->stale = false;
	if (cmd->stale) {
		struct tern_blk_dev *dev = rq->q->queuedata;

		blk_mq_requeue_request(rq, false);
		/* on the list before the look: tern_blk_rebind_work() */
		smp_mb();
		if (!test_bit(TERN_BLK_REBINDING, &dev->flags))
			blk_mq_kick_requeue_list(rq->q);
		return;
	}
	if (cmd->status == BLK_STS_RESOURCE) {
		blk_mq_requeue_request(rq, false);
		blk_mq_delay_kick_requeue_list(rq->q, 100);
		return;
	}
	blk_mq_end_request(rq, cmd->status);
}

/*
 * A target's status for an I/O, as the block layer's: what a disk
 * reports keeps its meaning (the target passes these on from its
 * backend, target_io.c), anything else is an I/O error. Not
 * errno_to_blk_status(): -EAGAIN or -EBUSY would tell the submitter to
 * try again, for ever if the target always says so.
 */
static blk_status_t tern_blk_wire_status(int status)
{
	switch (status) {
	case -ENOSPC:
		return BLK_STS_NOSPC;
	case -EOPNOTSUPP:
		return BLK_STS_NOTSUPP;
	case -ENODATA:
		return BLK_STS_MEDIUM;
	case -ETIMEDOUT:
		return BLK_STS_TIMEOUT;
	case -EILSEQ:
		return BLK_STS_PROTECTION;
	default:
		return BLK_STS_IOERR;
	}
}

static void tern_blk_req_done(struct tern_request *treq)
{
	struct request *rq = treq->priv;
	struct tern_blk_cmd *cmd = blk_mq_rq_to_pdu(rq);
	struct tern_blk_dev *dev = rq->q->queuedata;
	blk_status_t sts = BLK_STS_OK;

	if (treq->status == -ECANCELED && READ_ONCE(cmd->expired)) {
		sts = BLK_STS_TIMEOUT;
	} else if (treq->status) {
		sts = BLK_STS_IOERR;
	} else if (treq->reply_status == -ESTALE &&
		   tern_blk_stale(dev, le64_to_cpu(cmd->front.handle))) {
		cmd->stale = true;
	} else if (treq->reply_status == -ENODEV) {
		tern_blk_removed(dev);
		sts = BLK_STS_IOERR;
	} else if (treq->reply_status) {
		if (treq->reply_status == -ENOMEM)
			sts = BLK_STS_RESOURCE;	/* target short of memory */
		else
			sts = tern_blk_wire_status(treq->reply_status);
	} else if (req_op(rq) == REQ_OP_READ &&
		   treq->reply_data_len != treq->data_len) {
		sts = BLK_STS_IOERR;
	}
	if (sts && sts != BLK_STS_RESOURCE)
		pr_debug("%s: request %llu failed: status %d reply %d\n",
			 rq->q->disk ? rq->q->disk->disk_name : "?",
			 treq->tid, treq->status, treq->reply_status);
	cmd->status = sts;
	/*
	 * Replies are taken in a task (io_work, the CQ's work item). With
	 * one hardware queue blk-mq would finish the request in the block
	 * softirq, which raised from a task wakes ksoftirqd: two context
	 * switches per I/O for a cache already warm here. Finish it here;
	 * with several queues blk-mq finishes it here too, or sends it to
	 * the submitting CPU as rq_affinity asks.
	 */
	if (rq->q->nr_hw_queues == 1 && in_task())
		blk_mq_complete_request_direct(rq, tern_blk_complete);
	else
		blk_mq_complete_request(rq);
}

/* Describe the request's data as bio_vecs; 0 or BLK_STS_RESOURCE. */
static blk_status_t tern_blk_map_data(struct request *rq,
				      struct tern_blk_cmd *cmd)
{
	struct req_iterator iter;
	struct bio_vec bv;
	unsigned int n = 0;

	rq_for_each_bvec(bv, rq, iter)
		n++;
	cmd->bvec = cmd->inline_bvec;
	if (n > TERN_BLK_INLINE_BVECS) {
		cmd->bvec = kmalloc_array(n, sizeof(*cmd->bvec), GFP_ATOMIC);
		if (!cmd->bvec)
			return BLK_STS_RESOURCE;
	}
	n = 0;
	rq_for_each_bvec(bv, rq, iter)
		cmd->bvec[n++] = bv;
	cmd->nr_bvec = n;
	cmd->treq.bvec = cmd->bvec;
	cmd->treq.nr_bvec = n;
	cmd->treq.data_len = blk_rq_bytes(rq);
	return BLK_STS_OK;
}

/*
 * The flags of tern_send() from queue_rq. Our queue is BLOCKING when the
 * transport sends from the submitter and may sleep doing it; but a
 * stacked driver (request-based dm-multipath) calls queue_rq from its own
 * dispatch, inside an RCU read-side section of its non-blocking queue.
 * There the lane's worker sends instead.
 */
static unsigned int tern_blk_send_flags(const struct tern_blk_dev *dev)
{
	unsigned int flags = dev->send_flags;

	if ((flags & TERN_SEND_MAY_SLEEP) &&
	    (!preemptible() || rcu_preempt_depth()))
		flags &= ~TERN_SEND_MAY_SLEEP;
	return flags;
}

static blk_status_t tern_blk_queue_rq(struct blk_mq_hw_ctx *hctx,
				      const struct blk_mq_queue_data *bd)
{
	struct tern_blk_dev *dev = hctx->queue->queuedata;
	struct request *rq = bd->rq;
	struct tern_blk_cmd *cmd = blk_mq_rq_to_pdu(rq);
	struct tern_request *treq = &cmd->treq;
	struct tern_blk_req *f = &cmd->front;
	blk_status_t sts = BLK_STS_OK;
	u16 flags = 0;
	int err;

	/* first dispatch, not a requeue: as nvme counts its retries */
	if (!(rq->rq_flags & RQF_DONTPREP)) {
		cmd->retry_until = jiffies + rq->q->rq_timeout;
		rq->rq_flags |= RQF_DONTPREP;
	}
	tern_request_init(treq);
	memset(f, 0, sizeof(*f));
	cmd->bvec = NULL;
	cmd->status = BLK_STS_OK;
	cmd->stale = false;
	cmd->expired = false;
	cmd->timeouts = 0;
	if (test_bit(TERN_BLK_REMOVED, &dev->flags))
		return BLK_STS_IOERR;	/* the export is gone for good */
	/*
	 * The disk's read-only flag stops writes opened through its path;
	 * one opened by number (a device-mapper table) gets a warning from
	 * the block layer and goes on. Refuse it, as rbd does.
	 */
	if (dev->read_only && op_is_write(req_op(rq)) &&
	    req_op(rq) != REQ_OP_FLUSH) {
		pr_err_ratelimited("%s: write to a read-only mapping refused\n",
				   dev->name);
		return BLK_STS_IOERR;
	}

	switch (req_op(rq)) {
	case REQ_OP_READ:
		f->opcode = TERN_BLK_OP_READ;
		treq->dir = TERN_DATA_FROM_RESPONDER;
		sts = tern_blk_map_data(rq, cmd);
		break;
	case REQ_OP_WRITE:
		f->opcode = TERN_BLK_OP_WRITE;
		if (rq->cmd_flags & REQ_FUA)
			flags |= TERN_BLK_F_FUA;
		treq->dir = TERN_DATA_TO_RESPONDER;
		sts = tern_blk_map_data(rq, cmd);
		break;
	case REQ_OP_FLUSH:
		f->opcode = TERN_BLK_OP_FLUSH;
		break;
	case REQ_OP_DISCARD:
		f->opcode = TERN_BLK_OP_DISCARD;
		break;
	case REQ_OP_WRITE_ZEROES:
		f->opcode = TERN_BLK_OP_WRITE_ZEROES;
		if (rq->cmd_flags & REQ_NOUNMAP)
			flags |= TERN_BLK_F_NOUNMAP;
		break;
	default:
		return BLK_STS_NOTSUPP;
	}
	if (sts)
		return sts;

	f->version = TERN_BLK_PROTO_VERSION;
	f->flags = cpu_to_le16(flags);
	f->handle = cpu_to_le64(READ_ONCE(dev->handle));
	if (f->opcode != TERN_BLK_OP_FLUSH) {
		f->offset = cpu_to_le64(blk_rq_pos(rq));
		f->length = cpu_to_le32(blk_rq_bytes(rq));
	}
	treq->front = f;
	treq->front_len = sizeof(*f);
	treq->lane_hint = hctx->queue_num;
	treq->done = tern_blk_req_done;
	treq->priv = rq;

	blk_mq_start_request(rq);
	err = tern_send(dev->sess, treq, tern_blk_send_flags(dev));
	if (!err)
		return BLK_STS_OK;
	if (cmd->bvec != cmd->inline_bvec)
		kfree(cmd->bvec);
	cmd->bvec = NULL;
	if (err == -EAGAIN)
		return BLK_STS_RESOURCE;
	pr_debug("%s: cannot send request (%d)\n", dev->name, err);
	return BLK_STS_IOERR;
}

static enum blk_eh_timer_return tern_blk_timeout(struct request *rq)
{
	struct tern_blk_dev *dev = rq->q->queuedata;
	struct tern_blk_cmd *cmd = blk_mq_rq_to_pdu(rq);
	int state = atomic_read(&dev->state);
	unsigned int max = READ_ONCE(max_timeouts);

	/*
	 * The messenger resends across reconnects and fails what is still
	 * pending at the loss timeout: a reconnecting session only re-arms.
	 * A failed session is given up at once. Over a live session the
	 * target may be stuck (a stalled backing device, a lost reply):
	 * after max_timeouts expiries cancel the request, as nvme aborts
	 * one. done() then completes it with BLK_STS_TIMEOUT; if it is
	 * already completing, or its reply is arriving, that completion
	 * wins and the timer re-arms meanwhile.
	 */
	if (state == TERN_BLK_FAILED || state == TERN_BLK_DELETING) {
		if (!tern_cancel(&cmd->treq))
			return BLK_EH_DONE;
		return BLK_EH_RESET_TIMER;
	}
	if (state != TERN_BLK_LIVE || !max)
		return BLK_EH_RESET_TIMER;
	if (cmd->timeouts < max)
		cmd->timeouts++;
	if (cmd->timeouts < max) {
		pr_warn_ratelimited("%s: request %llu unanswered after %u timeouts of %u ms\n",
				    dev->name, cmd->treq.tid, cmd->timeouts,
				    jiffies_to_msecs(rq->q->rq_timeout));
		return BLK_EH_RESET_TIMER;
	}
	WRITE_ONCE(cmd->expired, true);
	if (!tern_cancel(&cmd->treq)) {
		pr_warn_ratelimited("%s: request %llu failed: no answer after %u timeouts\n",
				    dev->name, cmd->treq.tid, max);
		return BLK_EH_DONE;
	}
	return BLK_EH_RESET_TIMER;
}

static const struct blk_mq_ops tern_blk_mq_ops = {
	.queue_rq	= tern_blk_queue_rq,
	.complete	= tern_blk_complete,
	.timeout	= tern_blk_timeout,
};

/*
 * Opens are counted so that unmap can refuse a device in use and mark it
 * DELETING in one step under @open_lock, as rbd does: an open either
 * comes first and makes unmap fail with -EBUSY, or fails with -ENXIO.
 */
static tern_bdops_open(tern_blk_open_disk)
{
	struct tern_blk_dev *dev = tern_bdops_open_disk->private_data;
	int err = 0;

	spin_lock(&dev->open_lock);
	if (atomic_read(&dev->state) == TERN_BLK_DELETING)
		err = -ENXIO;
	else
		dev->open_count++;
	spin_unlock(&dev->open_lock);
	return err;
}

static tern_bdops_release(tern_blk_release_disk)
{
	struct tern_blk_dev *dev = tern_bdops_release_disk->private_data;

	spin_lock(&dev->open_lock);
	dev->open_count--;
	spin_unlock(&dev->open_lock);
}

/* The last reference to a disk that was added: openers may outlive unmap. */
static void tern_blk_free_disk(struct gendisk *disk)
{
	struct tern_blk_dev *dev = disk->private_data;

	ida_free(&tern_blk_ida, dev->idx);
	kfree(dev);
}

static const struct block_device_operations tern_blk_fops = {
	.owner		= THIS_MODULE,
	.open		= tern_blk_open_disk,
	.release	= tern_blk_release_disk,
	.free_disk	= tern_blk_free_disk,
};

/* ---- sysfs: /sys/block/ternN/tern/ ---- */

static struct tern_blk_dev *to_tern_blk(struct device *d)
{
	return dev_to_disk(d)->private_data;
}

/* A read-only attribute NAME showing EXPR of the device @dev. */
#define TERN_BLK_ATTR_RO(name, fmt, expr)				\
static ssize_t name##_show(struct device *d,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	const struct tern_blk_dev *dev = to_tern_blk(d);		\
									\
	return sysfs_emit(buf, fmt "\n", expr);				\
}									\
static DEVICE_ATTR_RO(name)

TERN_BLK_ATTR_RO(transport, "%s", dev->opts.transport);
TERN_BLK_ATTR_RO(address, "%s", dev->opts.address);
TERN_BLK_ATTR_RO(export, "%s", dev->opts.export);
TERN_BLK_ATTR_RO(host, "%s", dev->opts.host);
TERN_BLK_ATTR_RO(service, "%u", dev->opts.service);
TERN_BLK_ATTR_RO(lanes, "%u", dev->si.nr_lanes);
TERN_BLK_ATTR_RO(queue_depth, "%u", dev->si.queue_depth);
TERN_BLK_ATTR_RO(max_data, "%u", dev->si.max_data);
/* names the session in debugfs (tern/blk.N/ID/) and the target's logs */
TERN_BLK_ATTR_RO(session_id, "%016llx", dev->si.session_id);

TERN_BLK_ATTR_RO(crc, "%d", !!(dev->si.features & TERN_FEAT_DATA_CRC));
/* both ends proved the key: the target is the one that holds it */
TERN_BLK_ATTR_RO(auth, "%d", !!(dev->si.features & TERN_FEAT_AUTH));
TERN_BLK_ATTR_RO(encrypt, "%d", !!(dev->si.features & TERN_FEAT_ENCRYPT));
/* every frame signed: tampering is found, nothing is hidden */
TERN_BLK_ATTR_RO(integrity, "%d",
		 !!(dev->si.features & TERN_FEAT_INTEGRITY));
TERN_BLK_ATTR_RO(rebinds, "%d", atomic_read(&dev->rebinds));

/* inline_write=, inline_read= as mapped: "default" when not given */
static ssize_t tern_blk_inline_show(char *buf, u32 max)
{
	if (!max)
		return sysfs_emit(buf, "default\n");
	return sysfs_emit(buf, "%u\n", max == TERN_INLINE_NONE ? 0 : max);
}

static ssize_t inline_write_show(struct device *d,
				 struct device_attribute *attr, char *buf)
{
	return tern_blk_inline_show(buf, to_tern_blk(d)->opts.inline_write);
}
static DEVICE_ATTR_RO(inline_write);

static ssize_t inline_read_show(struct device *d,
				struct device_attribute *attr, char *buf)
{
	return tern_blk_inline_show(buf, to_tern_blk(d)->opts.inline_read);
}
static DEVICE_ATTR_RO(inline_read);

static bool tern_blk_has_uuid(const struct tern_blk_dev *dev)
{
	return memchr_inv(dev->info.uuid, 0, sizeof(dev->info.uuid));
}

/*
 * The export's persistent name from the target (empty when it has none):
 * uuid, serial (the same uuid: what udev takes for ID_SERIAL) and wwid
 * ("tern.UUID", as nvme's "uuid.UUID"), in tern/ and, for udev rules and
 * multipath, in the disk's own directory too.
 */
static ssize_t uuid_show(struct device *d, struct device_attribute *attr,
			 char *buf)
{
	const struct tern_blk_dev *dev = to_tern_blk(d);

	if (!tern_blk_has_uuid(dev))
		return sysfs_emit(buf, "\n");
	return sysfs_emit(buf, "%pUb\n", dev->info.uuid);
}
static DEVICE_ATTR_RO(uuid);

static ssize_t serial_show(struct device *d, struct device_attribute *attr,
			   char *buf)
{
	return uuid_show(d, attr, buf);
}
static DEVICE_ATTR_RO(serial);

static ssize_t wwid_show(struct device *d, struct device_attribute *attr,
			 char *buf)
{
	const struct tern_blk_dev *dev = to_tern_blk(d);

	if (!tern_blk_has_uuid(dev))
		return sysfs_emit(buf, "\n");
	return sysfs_emit(buf, "tern.%pUb\n", dev->info.uuid);
}
static DEVICE_ATTR_RO(wwid);

/* Largest keepalive interval: tern.max_peer_keepalive_ms's default. */
#define TERN_BLK_MAX_KEEPALIVE_MS	60000
#define TERN_BLK_MAX_LOSS_TIMEOUT_MS	(86400 * 1000)

static ssize_t loss_timeout_ms_show(struct device *d,
				    struct device_attribute *attr, char *buf)
{
	struct tern_session_timeouts t;

	tern_session_get_timeouts(to_tern_blk(d)->sess, &t);
	if (t.loss_timeout_ms == TERN_LOSS_TIMEOUT_NEVER)
		return sysfs_emit(buf, "forever\n");
	return sysfs_emit(buf, "%u\n", t.loss_timeout_ms);
}

/* "forever" or 1000..86400000 ms; applies to an outage under way too. */
static ssize_t loss_timeout_ms_store(struct device *d,
				     struct device_attribute *attr,
				     const char *buf, size_t count)
{
	struct tern_blk_dev *dev = to_tern_blk(d);
	struct tern_session_timeouts t = {};
	int err;

	if (sysfs_streq(buf, "forever")) {
		t.loss_timeout_ms = TERN_LOSS_TIMEOUT_NEVER;
	} else if (kstrtouint(buf, 10, &t.loss_timeout_ms) ||
		   t.loss_timeout_ms < 1000 ||
		   t.loss_timeout_ms > TERN_BLK_MAX_LOSS_TIMEOUT_MS) {
		pr_err_ratelimited("%s: loss_timeout_ms takes 1000..%u or forever\n",
				   dev->name, TERN_BLK_MAX_LOSS_TIMEOUT_MS);
		return -EINVAL;
	}
	err = tern_session_set_timeouts(dev->sess, &t);
	return err ?: count;
}
static DEVICE_ATTR_RW(loss_timeout_ms);

static ssize_t keepalive_ms_show(struct device *d,
				 struct device_attribute *attr, char *buf)
{
	struct tern_session_timeouts t;

	tern_session_get_timeouts(to_tern_blk(d)->sess, &t);
	return sysfs_emit(buf, "%u\n", t.keepalive_ms);
}

/*
 * The ping interval, 100..60000 ms; a lane is given up after three
 * intervals of silence, as the messenger's defaults (5 s, 15 s) have it.
 */
static ssize_t keepalive_ms_store(struct device *d,
				  struct device_attribute *attr,
				  const char *buf, size_t count)
{
	struct tern_blk_dev *dev = to_tern_blk(d);
	struct tern_session_timeouts t = {};
	int err;

	if (kstrtouint(buf, 10, &t.keepalive_ms) || t.keepalive_ms < 100 ||
	    t.keepalive_ms > TERN_BLK_MAX_KEEPALIVE_MS) {
		pr_err_ratelimited("%s: keepalive_ms takes 100..%u\n",
				   dev->name, TERN_BLK_MAX_KEEPALIVE_MS);
		return -EINVAL;
	}
	t.keepalive_timeout_ms = 3 * t.keepalive_ms;
	err = tern_session_set_timeouts(dev->sess, &t);
	return err ?: count;
}
static DEVICE_ATTR_RW(keepalive_ms);

static ssize_t state_show(struct device *d, struct device_attribute *attr,
			  char *buf)
{
	const struct tern_blk_dev *dev = to_tern_blk(d);
	int state = atomic_read(&dev->state);

	if (state != TERN_BLK_DELETING && test_bit(TERN_BLK_REMOVED, &dev->flags))
		return sysfs_emit(buf, "removed\n");
	return sysfs_emit(buf, "%s\n", tern_blk_state_names[state]);
}
static DEVICE_ATTR_RO(state);

static ssize_t iopolicy_show(struct device *d, struct device_attribute *attr,
			     char *buf)
{
	struct tern_blk_dev *dev = to_tern_blk(d);

	return sysfs_emit(buf, "%s\n",
			  tern_iopolicy_name(tern_session_iopolicy(dev->sess)));
}

/* How requests spread over the paths; applies to the next request. */
static ssize_t iopolicy_store(struct device *d, struct device_attribute *attr,
			      const char *buf, size_t count)
{
	struct tern_blk_dev *dev = to_tern_blk(d);
	int policy = tern_iopolicy_parse(buf);

	if (policy < 0) {
		pr_err_ratelimited("%s: iopolicy takes failover, round-robin or min-inflight\n",
				   dev->name);
		return policy;
	}
	return tern_session_set_iopolicy(dev->sess, policy) ?: count;
}
static DEVICE_ATTR_RW(iopolicy);

/*
 * A line per path, in order of preference: its URI, "live" or "down",
 * then key=value counters (Documentation/admin-guide.rst, "Multipath").
 */
static ssize_t paths_show(struct device *d, struct device_attribute *attr,
			  char *buf)
{
	struct tern_blk_dev *dev = to_tern_blk(d);
	struct tern_path_info pi;
	unsigned int i;
	int len = 0;

	for (i = 0; !tern_session_get_path(dev->sess, i, &pi); i++)
		len += sysfs_emit_at(buf, len,
				     "%s %s lanes=%u live_lanes=%u inflight=%u requests=%llu resends=%llu reconnects=%llu last_err=%d\n",
				     pi.uri, pi.live_lanes ? "live" : "down",
				     pi.lanes, pi.live_lanes, pi.inflight,
				     pi.requests, pi.resends, pi.reconnects,
				     pi.last_err);
	return len;
}
static DEVICE_ATTR_RO(paths);

static int tern_blk_rescan(struct tern_blk_dev *dev);

/* Writing 1 asks the target for the export's size again (resize). */
static ssize_t rescan_store(struct device *d, struct device_attribute *attr,
			    const char *buf, size_t count)
{
	bool val;
	int err;

	if (kstrtobool(buf, &val) || !val)
		return -EINVAL;
	err = tern_blk_rescan(to_tern_blk(d));
	return err ?: count;
}
static DEVICE_ATTR_WO(rescan);

static struct attribute *tern_blk_attrs[] = {
	&dev_attr_rescan.attr,
	&dev_attr_transport.attr,
	&dev_attr_address.attr,
	&dev_attr_service.attr,
	&dev_attr_export.attr,
	&dev_attr_host.attr,
	&dev_attr_state.attr,
	&dev_attr_lanes.attr,
	&dev_attr_queue_depth.attr,
	&dev_attr_max_data.attr,
	&dev_attr_inline_write.attr,
	&dev_attr_inline_read.attr,
	&dev_attr_crc.attr,
	&dev_attr_auth.attr,
	&dev_attr_encrypt.attr,
	&dev_attr_integrity.attr,
	&dev_attr_rebinds.attr,
	&dev_attr_session_id.attr,
	&dev_attr_uuid.attr,
	&dev_attr_serial.attr,
	&dev_attr_wwid.attr,
	&dev_attr_loss_timeout_ms.attr,
	&dev_attr_keepalive_ms.attr,
	&dev_attr_iopolicy.attr,
	&dev_attr_paths.attr,
	NULL,
};

static const struct attribute_group tern_blk_attr_group = {
	.name	= "tern",
	.attrs	= tern_blk_attrs,
};

/* Where udev and multipath look: /sys/block/ternN/{uuid,serial,wwid} */
static struct attribute *tern_blk_id_attrs[] = {
	&dev_attr_uuid.attr,
	&dev_attr_serial.attr,
	&dev_attr_wwid.attr,
	NULL,
};

static const struct attribute_group tern_blk_id_attr_group = {
	.attrs	= tern_blk_id_attrs,
};

static const struct attribute_group *tern_blk_attr_groups[] = {
	&tern_blk_attr_group,
	&tern_blk_id_attr_group,
	NULL,
};

/* ---- control transactions (OPEN, CLOSE) ---- */

static void tern_blk_ctrl_done(struct tern_request *treq)
{
	struct tern_blk_ctrl *c = container_of(treq, struct tern_blk_ctrl,
					       treq);

	complete(&c->done);
}

/* Send @c, whose front the caller filled in up to @front_len bytes. */
static int tern_blk_ctrl_send(struct tern_blk_dev *dev,
			      struct tern_blk_ctrl *c, u32 front_len,
			      tern_request_done_t done, unsigned int flags)
{
	tern_request_init(&c->treq);
	init_completion(&c->done);
	c->req.version = TERN_BLK_PROTO_VERSION;
	c->treq.front = &c->req;
	c->treq.front_len = front_len;
	c->treq.reply_front = &c->info;
	c->treq.reply_front_max = sizeof(c->info);
	c->treq.done = done;
	c->treq.priv = dev;
	return tern_send(dev->sess, &c->treq, flags);
}

/*
 * Cancel @c, sent and not answered in time, and wait until its done()
 * has run. A reply being received when we cancel (a target trickling it)
 * makes tern_cancel() reset that lane and answer -EBUSY; the request is
 * then resent or parked, and the next try cancels it, unless it ends
 * first (answered on the new lane, or failed after max_lane_faults
 * resets): that wait consumed the one completion, so it is the end.
 */
static void tern_blk_ctrl_abort(struct tern_blk_ctrl *c)
{
	while (tern_cancel(&c->treq) == -EBUSY)
		if (wait_for_completion_timeout(&c->done, HZ))
			return;
	/* cancelled, or completing: done() runs without waiting on the peer */
	wait_for_completion(&c->done);
}

/* Send @c and wait at most @tmo jiffies; returns the outcome. */
static int tern_blk_ctrl_exec(struct tern_blk_dev *dev,
			      struct tern_blk_ctrl *c, u32 front_len,
			      unsigned long tmo)
{
	int err;

	err = tern_blk_ctrl_send(dev, c, front_len, tern_blk_ctrl_done, 0);
	if (err)
		return err;
	if (!wait_for_completion_timeout(&c->done, tmo))
		tern_blk_ctrl_abort(c);
	if (c->treq.status == -ECANCELED)
		return -ETIMEDOUT;
	return c->treq.status ?: c->treq.reply_status;
}

static bool tern_blk_pow2_in(u32 v, u32 lo, u32 hi)
{
	return is_power_of_2(v) && v >= lo && v <= hi;
}

/*
 * Largest capacity taken from a target: its size in bytes must fit a
 * loff_t, as the page cache and every "sectors << 9" in the block layer
 * assume.
 */
#define TERN_BLK_MAX_CAPACITY	((u64)LLONG_MAX >> SECTOR_SHIFT)

/* Why @info cannot describe a disk, or NULL if it can. */
static const char *tern_blk_info_fault(const struct tern_blk_info *info,
				       u32 len)
{
	u32 lbs = le32_to_cpu(info->logical_block_size);
	u32 pbs = le32_to_cpu(info->physical_block_size);
	u64 cap = le64_to_cpu(info->capacity);
	u16 flags = le16_to_cpu(info->flags);
	u32 gran = le32_to_cpu(info->discard_granularity);

	if (len != sizeof(*info))
		return "reply front length";
	/* any uuid is fine (zero: none); only what stays reserved is not */
	if (info->reserved)
		return "reserved field set";
	if (flags & ~TERN_BLK_INFO_ALL)
		return "unknown flags";
	if (!info->handle)
		return "no handle";
	if (!tern_blk_pow2_in(lbs, SECTOR_SIZE, SZ_4K) ||
	    !tern_blk_pow2_in(pbs, lbs, SZ_64K))
		return "block size";
	if (!cap || cap > TERN_BLK_MAX_CAPACITY ||
	    !IS_ALIGNED(cap, lbs >> SECTOR_SHIFT))
		return "capacity";
	if (le32_to_cpu(info->max_transfer) < PAGE_SIZE ||
	    !IS_ALIGNED(le32_to_cpu(info->max_transfer), lbs))
		return "max transfer";
	if (!le16_to_cpu(info->max_segments))
		return "max segments";
	if ((flags & TERN_BLK_INFO_DISCARD) &&
	    (le32_to_cpu(info->max_discard_sectors) < lbs >> SECTOR_SHIFT ||
	     (gran && !tern_blk_pow2_in(gran, lbs, SZ_1G))))
		return "discard limits";
	if ((flags & TERN_BLK_INFO_WRITE_ZEROES) &&
	    le32_to_cpu(info->max_write_zeroes_sectors) < lbs >> SECTOR_SHIFT)
		return "write zeroes limit";
	return NULL;
}

static int tern_blk_check_info(struct tern_blk_dev *dev,
			       const struct tern_blk_info *info, u32 len)
{
	const char *fault = tern_blk_info_fault(info, len);

	if (!fault)
		return 0;
	if (__ratelimit(&dev->reply_rs))
		pr_err("%s: export %s: malformed geometry in a reply (%s)\n",
		       dev->name, dev->opts.export, fault);
	return -EPROTO;
}

/* OPEN the export: a new binding, its handle and geometry in @info. */
static int tern_blk_open(struct tern_blk_dev *dev, struct tern_blk_info *info,
			 gfp_t gfp)
{
	struct tern_blk_ctrl *c;
	int err;

	c = kzalloc(sizeof(*c), gfp);
	if (!c)
		return -ENOMEM;
again:
	c->req.opcode = TERN_BLK_OP_OPEN;
	if (!dev->uuid_refused)
		c->req.flags = cpu_to_le16(TERN_BLK_F_UUID);
	strscpy_pad(c->args.export, dev->opts.export, sizeof(c->args.export));
	strscpy_pad(c->args.host, dev->opts.host, sizeof(c->args.host));
	err = tern_blk_ctrl_exec(dev, c, sizeof(c->req) + sizeof(c->args),
				 tern_blk_ctrl_timeout());
	/* a target from before uuids refuses the flag: open without it */
	if (err == -EINVAL && !dev->uuid_refused) {
		pr_info("%s: the target refused TERN_BLK_F_UUID; opening export %s without a uuid\n",
			dev->name, dev->opts.export);
		dev->uuid_refused = true;
		memset(c, 0, sizeof(*c));
		goto again;
	}
	if (err) {
		pr_err("%s: cannot open export %s on %s (%d)\n", dev->name,
		       dev->opts.export, dev->opts.address, err);
		goto out;
	}
	err = tern_blk_check_info(dev, &c->info, c->treq.reply_front_len);
	if (!err)
		*info = c->info;
out:
	kfree(c);
	return err;
}

static int tern_blk_open_export(struct tern_blk_dev *dev)
{
	int err = tern_blk_open(dev, &dev->info, GFP_KERNEL);

	if (!err)
		dev->handle = le64_to_cpu(dev->info.handle);
	return err;
}

/* Best effort: tell the target the binding of @handle can go. */
static void tern_blk_close_handle(struct tern_blk_dev *dev, u64 handle,
				  gfp_t gfp)
{
	struct tern_blk_ctrl *c;

	c = kzalloc(sizeof(*c), gfp);
	if (!c)
		return;
	c->req.opcode = TERN_BLK_OP_CLOSE;
	c->req.handle = cpu_to_le64(handle);
	tern_blk_ctrl_exec(dev, c, sizeof(c->req), 5 * HZ);
	kfree(c);
}

static void tern_blk_close_export(struct tern_blk_dev *dev)
{
	tern_blk_close_handle(dev, dev->handle, GFP_KERNEL);
}

/*
 * Bind the device to its export again after -ESTALE (tern_blk_stale()).
 * Only the same export comes back: same capacity and block size, else
 * I/O keeps failing rather than landing on other data. Requests waiting
 * in the requeue list go out again either way.
 */
static void tern_blk_rebind_work(struct work_struct *work)
{
	struct tern_blk_dev *dev = container_of(work, struct tern_blk_dev,
						rebind_work);
	unsigned int noio = memalloc_noio_save();	/* I/O waits on us */
	struct tern_blk_info info;
	int err;

	err = tern_blk_open(dev, &info, GFP_NOIO);
	if (!err && (le64_to_cpu(info.capacity) != get_capacity(dev->disk) ||
		     info.logical_block_size !=
		     dev->info.logical_block_size ||
		     (tern_blk_has_uuid(dev) &&
		      memcmp(info.uuid, dev->info.uuid, sizeof(info.uuid))))) {
		pr_err("%s: export %s came back with another size, block size or uuid; not bound again\n",
		       dev->name, dev->opts.export);
		tern_blk_close_handle(dev, le64_to_cpu(info.handle), GFP_NOIO);
		err = -ESTALE;
	}
	if (!err) {
		WRITE_ONCE(dev->handle, le64_to_cpu(info.handle));
		atomic_inc(&dev->rebinds);
		clear_bit(TERN_BLK_REBIND_FAILED, &dev->flags);
		pr_info("%s: the target had lost export %s; bound again\n",
			dev->name, dev->opts.export);
	} else {
		WRITE_ONCE(dev->rebind_failed_at, jiffies);
		set_bit(TERN_BLK_REBIND_FAILED, &dev->flags);
	}
	memalloc_noio_restore(noio);
	/* the handle before the bit: tern_blk_stale() */
	smp_mb__before_atomic();
	clear_bit(TERN_BLK_REBINDING, &dev->flags);
	/* the bit before the kick: tern_blk_complete() */
	smp_mb__after_atomic();
	blk_mq_kick_requeue_list(dev->disk->queue);
}

/* Take the capacity of @info, which the export now has. */
static int tern_blk_resize(struct tern_blk_dev *dev,
			   const struct tern_blk_info *info)
{
	u64 old, cap = le64_to_cpu(info->capacity);

	if (info->logical_block_size != dev->info.logical_block_size) {
		pr_err("%s: the export's block size changed; map it again\n",
		       dev->name);
		return -EIO;
	}
	mutex_lock(&dev->resize_lock);
	old = get_capacity(dev->disk);
	if (cap != old) {
		set_capacity_and_notify(dev->disk, cap);
		pr_info("%s: capacity %llu -> %llu sectors\n", dev->name, old,
			cap);
	}
	mutex_unlock(&dev->resize_lock);
	return 0;
}

static int tern_blk_rescan(struct tern_blk_dev *dev)
{
	struct tern_blk_ctrl *c;
	int err;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return -ENOMEM;
	c->req.opcode = TERN_BLK_OP_INFO;
	c->req.handle = cpu_to_le64(dev->handle);
	err = tern_blk_ctrl_exec(dev, c, sizeof(c->req),
				 tern_blk_ctrl_timeout());
	if (!err)
		err = tern_blk_check_info(dev, &c->info,
					  c->treq.reply_front_len);
	if (err)
		pr_err("%s: rescan failed (%d)\n", dev->name, err);
	else
		err = tern_blk_resize(dev, &c->info);
	kfree(c);
	return err;
}

#define TERN_BLK_WATCH_RETRY	(5 * HZ)
/*
 * WATCHes are posted at most this often, whatever the answers: a target
 * answering each at once, with a new size or not, gets one resize (one
 * uevent, one log line) a second, not a storm.
 */
#define TERN_BLK_WATCH_GAP	HZ

static void tern_blk_watch_done(struct tern_request *treq)
{
	struct tern_blk_dev *dev = treq->priv;

	complete(&dev->watch.c.done);
	if (!test_bit(TERN_BLK_WATCH_STOP, &dev->flags))
		queue_delayed_work(tern_blk_wq, &dev->watch.work, 0);
}

/*
 * What the answer to the last WATCH means for the next one: 0 to post it
 * now, a delay, or -1 for none (the export is gone, or the target does
 * not know WATCH).
 */
static long tern_blk_watch_answer(struct tern_blk_dev *dev)
{
	struct tern_blk_watch *w = &dev->watch;
	struct tern_blk_ctrl *c = &w->c;
	int err = c->treq.status ?: c->treq.reply_status;
	long delay;

	switch (err) {
	case 0:
		if (tern_blk_check_info(dev, &c->info, c->treq.reply_front_len))
			return TERN_BLK_WATCH_RETRY;
		w->known = le64_to_cpu(c->info.capacity);
		tern_blk_resize(dev, &c->info);
		delay = w->posted_at + TERN_BLK_WATCH_GAP - jiffies;
		return delay > 0 && delay <= TERN_BLK_WATCH_GAP ? delay : 0;
	case -ENODEV:
		tern_blk_removed(dev);
		return -1;
	case -ESTALE:
		/* the target lost the binding: get a new one, then watch */
		tern_blk_stale(dev, le64_to_cpu(c->req.handle));
		return TERN_BLK_WATCH_RETRY;
	case -EINVAL:
	case -EOPNOTSUPP:
		pr_info("%s: the target does not announce resizes; use rescan\n",
			dev->name);
		return -1;
	default:
		/* rebinding, reconnecting, a port going away: later */
		return TERN_BLK_WATCH_RETRY;
	}
}

static void tern_blk_watch_work(struct work_struct *work)
{
	struct tern_blk_dev *dev = container_of(to_delayed_work(work),
						struct tern_blk_dev,
						watch.work);
	struct tern_blk_watch *w = &dev->watch;
	long delay = 0;

	if (test_bit(TERN_BLK_WATCH_STOP, &dev->flags))
		return;
	if (w->posted) {
		w->posted = false;
		delay = tern_blk_watch_answer(dev);
		if (delay < 0)
			return;
		if (delay) {
			queue_delayed_work(tern_blk_wq, &w->work, delay);
			return;
		}
	}
	memset(&w->c.req, 0, sizeof(w->c.req));
	w->c.req.opcode = TERN_BLK_OP_WATCH;
	w->c.req.handle = cpu_to_le64(READ_ONCE(dev->handle));
	w->c.req.offset = cpu_to_le64(w->known);
	w->posted = true;
	w->posted_at = jiffies;
	if (tern_blk_ctrl_send(dev, &w->c, sizeof(w->c.req),
			       tern_blk_watch_done,
			       TERN_SEND_RESERVED | TERN_SEND_NOWAIT)) {
		w->posted = false;
		queue_delayed_work(tern_blk_wq, &w->work, TERN_BLK_WATCH_RETRY);
	}
}

static void tern_blk_watch_start(struct tern_blk_dev *dev)
{
	dev->watch.known = get_capacity(dev->disk);
	queue_delayed_work(tern_blk_wq, &dev->watch.work, 0);
}

static void tern_blk_watch_stop(struct tern_blk_dev *dev)
{
	struct tern_blk_watch *w = &dev->watch;

	set_bit(TERN_BLK_WATCH_STOP, &dev->flags);
	/* the bit before the work's test: it posts nothing after this */
	smp_mb__after_atomic();
	cancel_delayed_work_sync(&w->work);
	if (w->posted)
		tern_blk_ctrl_abort(&w->c);
	/* ->done may have queued it before it saw the bit */
	cancel_delayed_work_sync(&w->work);
}

static void tern_blk_session_event(struct tern_session *sess,
				   enum tern_session_event ev)
{
	struct tern_blk_dev *dev = tern_session_priv(sess);
	int state, old;

	if (!dev)
		return;
	switch (ev) {
	case TERN_SESSION_UP:
		state = TERN_BLK_LIVE;
		break;
	case TERN_SESSION_DOWN:
		state = TERN_BLK_RECONNECTING;
		break;
	case TERN_SESSION_FAILED:
		state = TERN_BLK_FAILED;
		break;
	default:
		return;
	}
	old = atomic_read(&dev->state);
	do {
		if (old == TERN_BLK_DELETING)
			return;	/* for good: unmap is under way */
	} while (!atomic_try_cmpxchg(&dev->state, &old, state));
	pr_info("%s: session %s\n", dev->name, tern_blk_state_names[state]);
}

static const struct tern_endpoint_ops tern_blk_ep_ops = {
	.session_event	= tern_blk_session_event,
};

/* ---- devices ---- */

static int tern_blk_init_disk(struct tern_blk_dev *dev)
{
	const struct tern_blk_info *info = &dev->info;
	u16 iflags = le16_to_cpu(info->flags);
	u32 max_bytes = min(le32_to_cpu(info->max_transfer), dev->si.max_data);
	struct queue_limits lim = {
		.logical_block_size	= le32_to_cpu(info->logical_block_size),
		.physical_block_size	= le32_to_cpu(info->physical_block_size),
		.max_hw_sectors		= max_bytes >> SECTOR_SHIFT,
		.max_segments		= min_t(u16, TERN_BLK_MAX_SEGMENTS,
						le16_to_cpu(info->max_segments)),
	};
	unsigned int features = 0;
	struct gendisk *disk;
	int err;

	/* the block layer takes at least a page per request, and WARNs */
	if (max_bytes < PAGE_SIZE) {
		pr_err("%s: export %s takes %u bytes per request, less than a page\n",
		       dev->name, dev->opts.export, max_bytes);
		return -EINVAL;
	}
	if (iflags & TERN_BLK_INFO_DISCARD) {
		lim.max_hw_discard_sectors =
			le32_to_cpu(info->max_discard_sectors);
		lim.discard_granularity =
			le32_to_cpu(info->discard_granularity);
	}
	if (iflags & TERN_BLK_INFO_WRITE_ZEROES)
		lim.max_write_zeroes_sectors =
			le32_to_cpu(info->max_write_zeroes_sectors);
	if (iflags & TERN_BLK_INFO_WRITE_CACHE) {
		features |= TERN_BLK_FEAT_WRITE_CACHE;
		if (iflags & TERN_BLK_INFO_FUA)
			features |= TERN_BLK_FEAT_FUA;
	}
	/* a checksum or tag over the data holds only if the pages hold still */
	if (dev->si.features & (TERN_FEAT_DATA_CRC | TERN_FEAT_INTEGRITY))
		features |= TERN_BLK_FEAT_STABLE_WRITES;

	dev->tag_set.ops = &tern_blk_mq_ops;
	/* a queue per lane of a path: each path serves every queue */
	dev->tag_set.nr_hw_queues = DIV_ROUND_UP(dev->si.nr_lanes,
						 tern_session_nr_paths(dev->sess));
	dev->tag_set.queue_depth = dev->si.queue_depth;
	dev->tag_set.numa_node = NUMA_NO_NODE;
	dev->tag_set.cmd_size = sizeof(struct tern_blk_cmd);
	dev->tag_set.flags = TERN_BLK_MQ_F_SHOULD_MERGE | BLK_MQ_F_TAG_HCTX_SHARED;
	dev->send_flags = TERN_SEND_NOWAIT;
	/* let a socket transport send from queue_rq, as nvme-tcp does */
	if (tern_session_send_sleeps(dev->sess)) {
		dev->tag_set.flags |= BLK_MQ_F_BLOCKING;
		dev->send_flags |= TERN_SEND_MAY_SLEEP;
	}
	dev->tag_set.driver_data = dev;
	err = blk_mq_alloc_tag_set(&dev->tag_set);
	if (err)
		return err;

	disk = tern_blk_mq_alloc_disk(&dev->tag_set, &lim, features, dev);
	if (IS_ERR(disk)) {
		blk_mq_free_tag_set(&dev->tag_set);
		return PTR_ERR(disk);
	}
	blk_queue_rq_timeout(disk->queue, 30 * HZ);
	disk->major = tern_blk_major;
	disk->first_minor = dev->idx * TERN_BLK_MINORS;
	disk->minors = TERN_BLK_MINORS;
	disk->fops = &tern_blk_fops;
	disk->private_data = dev;
	strscpy(disk->disk_name, dev->name, sizeof(disk->disk_name));
	set_capacity(disk, le64_to_cpu(info->capacity));
	set_disk_ro(disk, dev->read_only);
	dev->disk = disk;

	err = device_add_disk(NULL, disk, tern_blk_attr_groups);
	if (err) {
		put_disk(disk);
		dev->disk = NULL;
		blk_mq_free_tag_set(&dev->tag_set);
	}
	return err;
}

/*
 * A device still serving what @o names: same transport, address,
 * service, export and host id, neither failed, nor being unmapped, nor
 * left by its export. Caller holds tern_blk_mutex.
 */
static struct tern_blk_dev *tern_blk_find_locked(const struct tern_blk_opts *o)
{
	struct tern_blk_dev *dev;
	int state;

	lockdep_assert_held(&tern_blk_mutex);
	list_for_each_entry(dev, &tern_blk_devs, entry) {
		state = atomic_read(&dev->state);
		if (state == TERN_BLK_FAILED || state == TERN_BLK_DELETING ||
		    test_bit(TERN_BLK_REMOVED, &dev->flags))
			continue;
		if (!strcmp(dev->opts.transport, o->transport) &&
		    !strcmp(dev->opts.address, o->address) &&
		    dev->opts.service == o->service &&
		    !strcmp(dev->opts.export, o->export) &&
		    !strcmp(dev->opts.host, o->host))
			return dev;
	}
	return NULL;
}

/* Does @dev have every path @want names? */
static bool tern_blk_has_paths(const struct tern_blk_opts *dev,
			       const struct tern_blk_opts *want)
{
	unsigned int i, j;

	for (i = 0; i < want->nr_paths; i++) {
		for (j = 0; j < dev->nr_paths; j++)
			if (!strcmp(want->paths[i], dev->paths[j]))
				break;
		if (j == dev->nr_paths)
			return false;
	}
	return true;
}

/*
 * May a second map of @dev's export, asking for @want, get @dev? Only
 * if it asks for nothing @dev lacks: the lanes, queue depth and inline
 * limits it names (0 when it names none) are the ones @dev was mapped
 * with, and crc,
 * read-only, a key, encryption, integrity and further paths, when asked
 * for, @dev has (integrity stands for crc). The loss timeout, keepalive
 * and I/O policy may be changed on a mapped device, so they do not count.
 */
static bool tern_blk_mapping_fits(const struct tern_blk_opts *dev,
				  const struct tern_blk_opts *want)
{
	return tern_blk_has_paths(dev, want) &&
	       (!want->lanes || want->lanes == dev->lanes) &&
	       (!want->queue_depth || want->queue_depth == dev->queue_depth) &&
	       (!want->inline_write || want->inline_write == dev->inline_write) &&
	       (!want->inline_read || want->inline_read == dev->inline_read) &&
	       (!want->crc || dev->crc || dev->integrity) &&
	       (!want->read_only || dev->read_only) &&
	       (!want->has_key || dev->has_key) &&
	       (!want->encrypt || dev->encrypt) &&
	       (!want->integrity || dev->integrity);
}

static int __tern_blk_add(const struct tern_blk_opts *opts, char *name,
			  size_t size);

/**
 * tern_blk_add - map a remote export as a block device
 * @opts: validated options
 * @name: receives the device name
 * @size: size of @name
 *
 * An export already mapped with the same identity (transport, address,
 * service, export, host id) gives the existing device, unless
 * @opts->duplicate asks for another one; asking for what that device
 * lacks (other lanes, queue depth or inline limits, a path, crc,
 * read-only, a key, encryption, integrity) is refused with -EEXIST, as
 * nvme refuses a duplicate connect.
 *
 * Return: 0, or a negative errno and nothing is created.
 */
int tern_blk_add(const struct tern_blk_opts *opts, char *name, size_t size)
{
	struct tern_blk_dev *dev = NULL;
	int err = 0;

	mutex_lock(&tern_blk_add_mutex);
	if (!opts->duplicate) {
		mutex_lock(&tern_blk_mutex);
		dev = tern_blk_find_locked(opts);
		if (dev && tern_blk_mapping_fits(&dev->opts, opts)) {
			strscpy(name, dev->name, size);
		} else if (dev) {
			pr_warn_ratelimited("%s maps export %s with other options already: unmap it, or map again with duplicate=1\n",
					    dev->name, opts->export);
			err = -EEXIST;
		}
		mutex_unlock(&tern_blk_mutex);
	}
	if (!dev)
		err = __tern_blk_add(opts, name, size);
	mutex_unlock(&tern_blk_add_mutex);
	return err;
}

static int __tern_blk_add(const struct tern_blk_opts *opts, char *name,
			  size_t size)
{
	struct tern_session_opts so = {
		/* a lane per CPU, as nvme's I/O queues; the target may cap it */
		.nr_lanes	= opts->lanes ?: min(num_online_cpus(),
						     TERN_WIRE_MAX_LANES /
						     (opts->nr_paths + 1)),
		.queue_depth	= opts->queue_depth ?: TERN_BLK_DEFAULT_QDEPTH,
		.data_crc	= opts->crc,
		.loss_timeout_ms = opts->loss_timeout_ms,
		/* the identity that proves the key is the host id of OPEN */
		.auth_identity	= opts->host,
		.auth_key	= opts->has_key ? opts->key : NULL,
		.encrypt	= opts->encrypt,
		.integrity	= opts->integrity,
		.iopolicy	= opts->iopolicy,
		.inline_to_max	= opts->inline_write,
		.inline_from_max = opts->inline_read,
	};
	bool v6 = strchr(opts->address, ':');
	struct tern_blk_dev *dev;
	struct tern_session *sess;
	unsigned int i;
	char uri[96];
	int err;

	for (i = 0; i < opts->nr_paths; i++)
		so.paths[i] = opts->paths[i];

	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev)
		return -ENOMEM;
	/* a DOWN while tern_connect() returns must reach dev->state */
	so.priv = dev;
	dev->opts = *opts;
	dev->opts.lanes = so.nr_lanes;
	dev->opts.queue_depth = so.queue_depth;
	/* the session keeps what it needs of the key */
	memzero_explicit(dev->opts.key, sizeof(dev->opts.key));
	INIT_LIST_HEAD(&dev->entry);
	INIT_WORK(&dev->rebind_work, tern_blk_rebind_work);
	INIT_DELAYED_WORK(&dev->watch.work, tern_blk_watch_work);
	mutex_init(&dev->resize_lock);
	spin_lock_init(&dev->open_lock);
	atomic_set(&dev->state, TERN_BLK_LIVE);
	ratelimit_state_init(&dev->reply_rs, DEFAULT_RATELIMIT_INTERVAL,
			     DEFAULT_RATELIMIT_BURST);
	dev->idx = ida_alloc_max(&tern_blk_ida,
				 (1 << MINORBITS) / TERN_BLK_MINORS - 1,
				 GFP_KERNEL);
	if (dev->idx < 0) {
		err = dev->idx;
		goto out_free;
	}
	snprintf(dev->name, sizeof(dev->name), "tern%d", dev->idx);

	snprintf(uri, sizeof(uri), "%s://%s%s%s:%u", opts->transport,
		 v6 ? "[" : "", opts->address, v6 ? "]" : "", opts->service);
	sess = tern_connect(tern_blk_ep, uri, &so);
	if (IS_ERR(sess)) {
		err = PTR_ERR(sess);
		pr_err("%s: cannot connect to %s (%d)\n", dev->name, uri, err);
		goto out_ida;
	}
	dev->sess = sess;
	tern_session_get_info(sess, &dev->si);

	err = tern_blk_open_export(dev);
	if (err)
		goto out_sess;
	dev->read_only = opts->read_only ||
		(le16_to_cpu(dev->info.flags) & TERN_BLK_INFO_READ_ONLY);

	err = tern_blk_init_disk(dev);
	if (err) {
		pr_err("%s: cannot create the disk (%d)\n", dev->name, err);
		goto out_close;
	}

	tern_blk_watch_start(dev);
	mutex_lock(&tern_blk_mutex);
	list_add_tail(&dev->entry, &tern_blk_devs);
	mutex_unlock(&tern_blk_mutex);
	pr_info("%s: %s export %s, %llu sectors of %u bytes, %u lanes over %u path%s, queue depth %u%s%s%s\n",
		dev->name, uri, opts->export,
		le64_to_cpu(dev->info.capacity),
		le32_to_cpu(dev->info.logical_block_size), dev->si.nr_lanes,
		opts->nr_paths + 1, opts->nr_paths ? "s" : "",
		dev->si.queue_depth, dev->read_only ? ", read-only" : "",
		dev->si.features & TERN_FEAT_DATA_CRC ? ", crc" : "",
		dev->si.features & TERN_FEAT_ENCRYPT ? ", encrypted" :
		dev->si.features & TERN_FEAT_INTEGRITY ? ", signed" :
		dev->si.features & TERN_FEAT_AUTH ? ", authenticated" : "");
	strscpy(name, dev->name, size);
	return 0;

out_close:
	tern_blk_close_export(dev);
out_sess:
	tern_session_set_priv(sess, NULL);
	tern_session_destroy(sess);
out_ida:
	ida_free(&tern_blk_ida, dev->idx);
out_free:
	kfree(dev);
	return err;
}

/* Frees @dev when the disk's last opener is gone: tern_blk_free_disk(). */
static void tern_blk_destroy(struct tern_blk_dev *dev)
{
	atomic_set(&dev->state, TERN_BLK_DELETING);
	tern_blk_watch_stop(dev);
	/* a rebind under way kicks the requests del_gendisk() waits for */
	del_gendisk(dev->disk);
	flush_work(&dev->rebind_work);
	/*
	 * del_gendisk() cancelled the queue's requeue work, but a rebind
	 * that began with no request waiting (a WATCH's -ESTALE) and ended
	 * after it kicked it again: nothing may run on the queue once it
	 * is freed.
	 */
	cancel_delayed_work_sync(&dev->disk->queue->requeue_work);
	tern_blk_close_export(dev);
	tern_session_set_priv(dev->sess, NULL);
	tern_session_destroy(dev->sess);
	/*
	 * A WATCH's ->done that tested the stop bit just before it was set
	 * may have queued the work after tern_blk_watch_stop() cancelled
	 * it; with the session gone no ->done runs any more.
	 */
	cancel_delayed_work_sync(&dev->watch.work);
	/* the queue is gone with del_gendisk(): its disk needs no tag set */
	blk_mq_free_tag_set(&dev->tag_set);
	pr_info("%s: removed\n", dev->name);
	put_disk(dev->disk);
}

/**
 * tern_blk_remove - unmap a device
 * @name: its name, e.g. "tern0"
 * @force: even if it is open (mounted, held, or open in a process)
 *
 * Return: 0, -ENODEV, or -EBUSY when it is open and not @force.
 */
int tern_blk_remove(const char *name, bool force)
{
	struct tern_blk_dev *dev, *found = NULL;
	int err = -ENODEV;

	mutex_lock(&tern_blk_mutex);
	list_for_each_entry(dev, &tern_blk_devs, entry) {
		if (strcmp(dev->name, name))
			continue;
		/* open or DELETING, never both: see tern_blk_open_disk() */
		spin_lock(&dev->open_lock);
		if (dev->open_count && !force) {
			err = -EBUSY;
		} else {
			atomic_set(&dev->state, TERN_BLK_DELETING);
			found = dev;
			list_del_init(&dev->entry);
		}
		spin_unlock(&dev->open_lock);
		break;
	}
	mutex_unlock(&tern_blk_mutex);
	if (!found)
		return err;
	tern_blk_destroy(found);
	return 0;
}

void tern_blk_remove_all(void)
{
	struct tern_blk_dev *dev;

	for (;;) {
		mutex_lock(&tern_blk_mutex);
		dev = list_first_entry_or_null(&tern_blk_devs,
					       struct tern_blk_dev, entry);
		if (dev) {
			spin_lock(&dev->open_lock);
			atomic_set(&dev->state, TERN_BLK_DELETING);
			spin_unlock(&dev->open_lock);
			list_del_init(&dev->entry);
		}
		mutex_unlock(&tern_blk_mutex);
		if (!dev)
			break;
		tern_blk_destroy(dev);
	}
}

int tern_blk_dev_init(void)
{
	struct tern_endpoint_conf conf = {
		.name	= "blk",
		.ops	= &tern_blk_ep_ops,
	};

	/* rebinding is on the I/O path: it must run under memory pressure */
	tern_blk_wq = alloc_workqueue("tern_blk", WQ_MEM_RECLAIM | WQ_UNBOUND,
				      0);
	if (!tern_blk_wq)
		return -ENOMEM;
	tern_blk_major = register_blkdev(0, "tern");
	if (tern_blk_major < 0) {
		destroy_workqueue(tern_blk_wq);
		return tern_blk_major;
	}
	tern_blk_ep = tern_endpoint_create(&conf);
	if (IS_ERR(tern_blk_ep)) {
		unregister_blkdev(tern_blk_major, "tern");
		destroy_workqueue(tern_blk_wq);
		return PTR_ERR(tern_blk_ep);
	}
	return 0;
}

void tern_blk_dev_exit(void)
{
	tern_blk_remove_all();
	tern_endpoint_destroy(tern_blk_ep);
	unregister_blkdev(tern_blk_major, "tern");
	destroy_workqueue(tern_blk_wq);
	ida_destroy(&tern_blk_ida);
}
