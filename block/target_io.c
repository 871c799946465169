// SPDX-License-Identifier: GPL-2.0
/*
 * tern_target: backend I/O.
 *
 * A block device backend gets bios built straight on the pages the
 * messenger delivered (WRITE) or will push (READ); they complete
 * asynchronously in their end_io. A regular file backend, and the
 * synchronous block helpers (flush, discard, zero-out), run on the
 * target workqueue: vfs_iter_read()/vfs_iter_write() over an ITER_BVEC
 * iterator on the same pages, fallocate() for DISCARD and WRITE_ZEROES.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bio.h>
#include <linux/falloc.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/moduleparam.h>
#include <linux/mount.h>
#include <linux/sched/mm.h>
#include <linux/namei.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <tern/compat.h>
#include "target.h"

static unsigned int inject_stall_ms;
module_param(inject_stall_ms, uint, 0644);
MODULE_PARM_DESC(inject_stall_ms,
		 "Hold every I/O request this many ms before it reaches the backend (0 = off; testing only)");

/* Set up @io, zeroed with its request, with pages for @len bytes. */
int tern_tgt_io_init(struct tern_tgt_io *io, u32 len, gfp_t gfp)
{
	unsigned int i, n = DIV_ROUND_UP(len, PAGE_SIZE);

	INIT_LIST_HEAD(&io->bind_entry);
	io->bvec = io->data_bvec;
	if (n > ARRAY_SIZE(io->data_bvec)) {
		io->bvec = kcalloc(n, sizeof(*io->bvec), gfp);
		if (!io->bvec)
			return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		struct page *page = tern_data_page_alloc(gfp);
		u32 blen = min_t(u32, len, PAGE_SIZE);

		if (!page) {
			tern_tgt_io_put_pages(io);
			return -ENOMEM;
		}
		bvec_set_page(&io->bvec[i], page, blen, 0);
		io->nr_bvec = i + 1;
		len -= blen;
	}
	return 0;
}

void tern_tgt_io_put_pages(struct tern_tgt_io *io)
{
	unsigned int i;

	for (i = 0; i < io->nr_bvec; i++)
		tern_data_page_free(io->bvec[i].bv_page);
	io->nr_bvec = 0;
	if (io->bvec != io->data_bvec)
		kfree(io->bvec);
	io->bvec = NULL;
}

/* Publish the geometry of the instance being enabled; exp->lock held. */
static int tern_tgt_fill_info(struct tern_tgt_export *exp)
{
	struct tern_tgt_geom *g, *old = tern_tgt_geom_locked(exp);
	struct tern_blk_info *info;
	u32 lbs, pbs, disc = 0, wz = 0, gran;
	u16 flags = 0;
	u64 cap;

	if (exp->bdev) {
		struct block_device *bdev = exp->bdev;

		lbs = bdev_logical_block_size(bdev);
		pbs = bdev_physical_block_size(bdev);
		cap = bdev_nr_sectors(bdev);
		if (bdev_write_cache(bdev))
			flags |= TERN_BLK_INFO_WRITE_CACHE;
		if (bdev_fua(bdev))
			flags |= TERN_BLK_INFO_FUA;
		disc = min_t(u32, bdev_max_discard_sectors(bdev),
			     TERN_TGT_MAX_RANGE_SECTORS);
		wz = min_t(u32, bdev_write_zeroes_sectors(bdev),
			   TERN_TGT_MAX_RANGE_SECTORS);
		gran = max(bdev_discard_granularity(bdev), lbs);
	} else {
		lbs = SECTOR_SIZE;
		pbs = PAGE_SIZE;
		cap = i_size_read(file_inode(exp->file)) >> SECTOR_SHIFT;
		flags |= TERN_BLK_INFO_WRITE_CACHE | TERN_BLK_INFO_FUA;
		if (exp->file->f_op->fallocate) {
			disc = TERN_TGT_MAX_RANGE_SECTORS;
			wz = TERN_TGT_MAX_RANGE_SECTORS;
		}
		gran = lbs;
	}
	/* whole logical blocks only */
	cap = round_down(cap, lbs >> SECTOR_SHIFT);
	disc = round_down(disc, lbs >> SECTOR_SHIFT);
	wz = round_down(wz, lbs >> SECTOR_SHIFT);
	if (disc)
		flags |= TERN_BLK_INFO_DISCARD;
	if (wz)
		flags |= TERN_BLK_INFO_WRITE_ZEROES;
	if (exp->read_only)
		flags |= TERN_BLK_INFO_READ_ONLY;

	g = kzalloc(sizeof(*g), GFP_KERNEL);
	if (!g)
		return -ENOMEM;
	info = &g->info;
	info->capacity = cpu_to_le64(cap);
	info->logical_block_size = cpu_to_le32(lbs);
	info->physical_block_size = cpu_to_le32(max(pbs, lbs));
	info->max_transfer = cpu_to_le32(TERN_TGT_MAX_TRANSFER);
	info->max_segments = cpu_to_le16(TERN_TGT_MAX_SEGMENTS);
	info->flags = cpu_to_le16(flags);
	info->max_discard_sectors = cpu_to_le32(disc);
	info->max_write_zeroes_sectors = cpu_to_le32(wz);
	info->discard_granularity = cpu_to_le32(gran);
	/* the uuid changes only while disabled: fixed for this instance */
	export_uuid(info->uuid, &exp->uuid);
	rcu_assign_pointer(exp->geom, g);
	if (old)
		kfree_rcu(old, rcu);
	return 0;
}

/* The export's memory goes: no reader is left. */
void tern_tgt_geom_free(struct tern_tgt_export *exp)
{
	kfree(rcu_dereference_protected(exp->geom, true));
	RCU_INIT_POINTER(exp->geom, NULL);
}

/* The backing device or file may have grown or shrunk; exp->lock held. */
void tern_tgt_refresh_capacity(struct tern_tgt_export *exp)
{
	struct tern_tgt_geom *g = tern_tgt_geom_locked(exp);
	u32 lbs;
	u64 cap;

	if (!g || !exp->file)
		return;
	lbs = le32_to_cpu(g->info.logical_block_size);
	if (exp->bdev)
		cap = bdev_nr_sectors(exp->bdev);
	else
		cap = i_size_read(file_inode(exp->file)) >> SECTOR_SHIFT;
	cap = round_down(cap, lbs >> SECTOR_SHIFT);
	WRITE_ONCE(g->info.capacity, cpu_to_le64(cap));
}

/*
 * Open the backing device or file; exp->lock held, export disabled.
 *
 * The path is looked up once and the object found is what gets opened
 * (the device number of that inode, or the file through that very path),
 * so nothing can be swapped in between the check and the open. A block
 * device is opened exclusively, with the export as holder: a device that
 * is mounted, or exported already, is refused with -EBUSY.
 */
int tern_tgt_backend_open(struct tern_tgt_export *exp)
{
	const char *name = exp->name;
	struct file *file;
	struct path path;
	struct inode *inode;
	int err;

	if (!exp->device_path) {
		pr_err("export %s: device_path is not set\n", name);
		return -EINVAL;
	}
	err = kern_path(exp->device_path, LOOKUP_FOLLOW, &path);
	if (err) {
		pr_err("export %s: cannot find %s (%d)\n", name,
		       exp->device_path, err);
		return err;
	}
	inode = d_backing_inode(path.dentry);

	if (S_ISBLK(inode->i_mode)) {
		if (path.mnt->mnt_flags & MNT_NODEV) {
			pr_err("export %s: %s is on a nodev mount\n", name,
			       exp->device_path);
			path_put(&path);
			return -EACCES;
		}
		file = tern_bdev_file_open(&path, !exp->read_only, exp);
		path_put(&path);
		if (IS_ERR(file)) {
			err = PTR_ERR(file);
			if (err == -EBUSY)
				pr_err("export %s: %s is in use (mounted, or held by another user)\n",
				       name, exp->device_path);
			else
				pr_err("export %s: cannot open %s (%d)\n",
				       name, exp->device_path, err);
			return err;
		}
		exp->file = file;
		exp->bdev = tern_file_bdev(file);
	} else if (S_ISREG(inode->i_mode)) {
		int flags = O_LARGEFILE | (exp->read_only ? O_RDONLY : O_RDWR);

		file = dentry_open(&path, flags, current_cred());
		path_put(&path);
		if (IS_ERR(file)) {
			err = PTR_ERR(file);
			pr_err("export %s: cannot open %s (%d)\n", name,
			       exp->device_path, err);
			return err;
		}
		if (!S_ISREG(file_inode(file)->i_mode) ||
		    i_size_read(file_inode(file)) < SECTOR_SIZE) {
			pr_err("export %s: %s is smaller than one sector\n",
			       name, exp->device_path);
			fput(file);
			return -EINVAL;
		}
		exp->file = file;
		exp->bdev = NULL;
	} else {
		path_put(&path);
		pr_err("export %s: %s is neither a block device nor a regular file\n",
		       name, exp->device_path);
		return -EINVAL;
	}
	err = tern_tgt_fill_info(exp);
	if (err) {
		tern_tgt_backend_close(exp);
		return err;
	}
	pr_info("export %s: %s %s, %llu sectors%s\n", name,
		exp->bdev ? "block device" : "file", exp->device_path,
		tern_tgt_capacity(exp), exp->read_only ? ", read-only" : "");
	return 0;
}

void tern_tgt_backend_close(struct tern_tgt_export *exp)
{
	if (exp->file)
		fput(exp->file);
	exp->file = NULL;
	exp->bdev = NULL;
}

/*
 * A backend's error as the wire's status (protocol.rst, "Statuses the
 * target returns"): what a disk reports passes as it is, and so does
 * -ENOMEM, which the client retries; anything else is -EIO. The
 * protocol gives some errnos meanings of its own: an offline SCSI
 * disk's -ENODEV read as "export removed" would fail the client's
 * device for good, a file on NFS's -ESTALE as "bind again".
 */
static int tern_tgt_backend_status(int err)
{
	switch (err) {
	case 0:
	case -ENOSPC:
	case -EOPNOTSUPP:
	case -ENODATA:
	case -ETIMEDOUT:
	case -EILSEQ:
	case -ENOMEM:
		return err;
	default:
		return -EIO;
	}
}

static void tern_tgt_bio_end_io(struct bio *bio)
{
	struct tern_tgt_io *io = bio->bi_private;
	int err = blk_status_to_errno(bio->bi_status);

	if (err)
		tern_tgt_count(io->exp, TERN_TGT_STAT_ERRORS);
	bio_uninit(bio);
	tern_tgt_io_complete(io, tern_tgt_backend_status(err));
}

/*
 * READ/WRITE on a block device: one bio whose vector is the request's
 * own, whatever its size, as a direct I/O on registered buffers gets:
 * the block layer splits it to the device's limits. No bio to allocate,
 * no page to add one by one.
 */
static void tern_tgt_bdev_rw(struct tern_tgt_io *io)
{
	struct block_device *bdev = io->exp->bdev;
	struct bio *bio = &io->bio;
	struct iov_iter iter;
	blk_opf_t opf;

	if (io->op == TERN_BLK_OP_READ) {
		opf = REQ_OP_READ;
		tern_tgt_count(io->exp, TERN_TGT_STAT_READS);
	} else {
		opf = REQ_OP_WRITE | REQ_SYNC | REQ_IDLE;
		if (io->flags & TERN_BLK_F_FUA)
			opf |= REQ_FUA;
		tern_tgt_count(io->exp, TERN_TGT_STAT_WRITES);
		if (opf & REQ_FUA)
			tern_tgt_count(io->exp, TERN_TGT_STAT_FUA);
	}

	iov_iter_bvec(&iter, op_is_write(opf) ? ITER_SOURCE : ITER_DEST,
		      io->bvec, io->nr_bvec, io->len);
	bio_init(bio, bdev, NULL, 0, opf);
	bio->bi_iter.bi_sector = io->sector;
	/* a bvec iterator is taken as it is: the check is for other kinds */
	if (bio_iov_iter_get_pages(bio, &iter)) {
		bio_uninit(bio);
		tern_tgt_io_complete(io, -EIO);
		return;
	}
	bio->bi_private = io;
	bio->bi_end_io = tern_tgt_bio_end_io;
	submit_bio(bio);
}

static int tern_tgt_file_rw(struct tern_tgt_io *io)
{
	struct file *file = io->exp->file;
	loff_t pos = (loff_t)io->sector << SECTOR_SHIFT;
	struct iov_iter iter;
	rwf_t rwf = 0;
	ssize_t ret;

	if (io->op == TERN_BLK_OP_READ) {
		tern_tgt_count(io->exp, TERN_TGT_STAT_READS);
		iov_iter_bvec(&iter, ITER_DEST, io->bvec, io->nr_bvec, io->len);
		ret = vfs_iter_read(file, &iter, &pos, 0);
		/* a file that shrank under us reads as zeroes */
		if (ret >= 0 && ret < io->len) {
			iov_iter_zero(io->len - ret, &iter);
			ret = io->len;
		}
	} else {
		if (io->flags & TERN_BLK_F_FUA)
			rwf = RWF_DSYNC;
		tern_tgt_count(io->exp, TERN_TGT_STAT_WRITES);
		if (rwf & RWF_DSYNC)
			tern_tgt_count(io->exp, TERN_TGT_STAT_FUA);
		iov_iter_bvec(&iter, ITER_SOURCE, io->bvec, io->nr_bvec,
			      io->len);
		ret = vfs_iter_write(file, &iter, &pos, rwf);
	}
	if (ret < 0)
		return ret;
	return ret == io->len ? 0 : -EIO;
}

static int tern_tgt_file_other(struct tern_tgt_io *io)
{
	struct file *file = io->exp->file;
	loff_t pos = (loff_t)io->sector << SECTOR_SHIFT;
	int mode;

	int err;

	switch (io->op) {
	case TERN_BLK_OP_FLUSH:
		return vfs_fsync(file, 1);
	case TERN_BLK_OP_DISCARD:
		mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		return vfs_fallocate(file, mode, pos, io->len);
	}

	/*
	 * WRITE_ZEROES: a punched hole reads as zeroes; NOUNMAP asks for
	 * the blocks to stay allocated, so zero the range in place, or
	 * punch and allocate again where ZERO_RANGE is not supported
	 * (tmpfs, for one).
	 */
	if (!(io->flags & TERN_BLK_F_NOUNMAP))
		return vfs_fallocate(file, FALLOC_FL_PUNCH_HOLE |
				     FALLOC_FL_KEEP_SIZE, pos, io->len);
	err = vfs_fallocate(file, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
			    pos, io->len);
	if (err != -EOPNOTSUPP)
		return err;
	err = vfs_fallocate(file, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			    pos, io->len);
	return err ?: vfs_fallocate(file, FALLOC_FL_KEEP_SIZE, pos, io->len);
}

static int tern_tgt_bdev_other(struct tern_tgt_io *io)
{
	struct block_device *bdev = io->exp->bdev;
	sector_t nr = io->len >> SECTOR_SHIFT;
	unsigned int zflags = BLKDEV_ZERO_NOFALLBACK;

	switch (io->op) {
	case TERN_BLK_OP_FLUSH:
		return blkdev_issue_flush(bdev);
	case TERN_BLK_OP_DISCARD:
		return blkdev_issue_discard(bdev, io->sector, nr, GFP_NOIO);
	default:
		if (io->flags & TERN_BLK_F_NOUNMAP)
			zflags |= BLKDEV_ZERO_NOUNMAP;
		return blkdev_issue_zeroout(bdev, io->sector, nr, GFP_NOIO,
					    zflags);
	}
}

static void tern_tgt_io_work(struct work_struct *work)
{
	struct tern_tgt_io *io = container_of(work, struct tern_tgt_io, work);
	bool rw = io->op == TERN_BLK_OP_READ || io->op == TERN_BLK_OP_WRITE;
	unsigned int noio;
	int err;

	/*
	 * No reclaim may recurse into I/O from here: the backend may sit on
	 * a device whose own writeback waits for this request (a target
	 * exporting a file on a filesystem mounted from a tern device on
	 * the same host, the loop and nbd deadlock).
	 */
	noio = memalloc_noio_save();
	if (io->exp->bdev)
		err = tern_tgt_bdev_other(io);
	else if (rw)
		err = tern_tgt_file_rw(io);
	else
		err = tern_tgt_file_other(io);
	memalloc_noio_restore(noio);
	if (err)
		tern_tgt_count(io->exp, TERN_TGT_STAT_ERRORS);
	tern_tgt_io_complete(io, tern_tgt_backend_status(err));
}

static void tern_tgt_io_start(struct tern_tgt_io *io)
{
	bool rw = io->op == TERN_BLK_OP_READ || io->op == TERN_BLK_OP_WRITE;

	if (io->exp->bdev && rw) {
		tern_tgt_bdev_rw(io);
		return;
	}
	INIT_WORK(&io->work, tern_tgt_io_work);
	queue_work(tern_tgt_wq, &io->work);
}

static void tern_tgt_stall_work(struct work_struct *work)
{
	struct tern_tgt_io *io = container_of(to_delayed_work(work),
					      struct tern_tgt_io, stall_work);

	tern_tgt_io_start(io);
}

/* Start a validated request; io->exp holds an I/O reference. */
void tern_tgt_io_submit(struct tern_tgt_io *io)
{
	unsigned int stall = READ_ONCE(inject_stall_ms);

	switch (io->op) {
	case TERN_BLK_OP_FLUSH:
		tern_tgt_count(io->exp, TERN_TGT_STAT_FLUSHES);
		break;
	case TERN_BLK_OP_DISCARD:
		tern_tgt_count(io->exp, TERN_TGT_STAT_DISCARDS);
		break;
	case TERN_BLK_OP_WRITE_ZEROES:
		tern_tgt_count(io->exp, TERN_TGT_STAT_WRITE_ZEROES);
		break;
	}

	/* a stuck backend, for tests: the requester sees no answer */
	if (unlikely(stall)) {
		INIT_DELAYED_WORK(&io->stall_work, tern_tgt_stall_work);
		queue_delayed_work(tern_tgt_wq, &io->stall_work,
				   msecs_to_jiffies(stall));
		return;
	}
	tern_tgt_io_start(io);
}
