/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tern: what differs between the kernels tern builds for.
 *
 * tern is written against the newest kernel API. Where an older kernel
 * lacks a piece, or a newer one dropped it, this header gives a tern_
 * wrapper that is the plain kernel call where the API exists, and an
 * equivalent built from what the kernel has otherwise. Which applies is
 * decided by compile tests (tools/compat/probes/, run by the root
 * Kbuild), never by the version number: distribution kernels carry
 * backports, and the probes see what is there. See "Kernel
 * compatibility" in Documentation/design.rst.
 */
#ifndef _TERN_COMPAT_H
#define _TERN_COMPAT_H

/* generated per kernel into the build output by tools/compat/probe */
#include <tern/compat_probes.h>

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/hrtimer.h>
#include <linux/log2.h>
#include <linux/net.h>
#include <linux/socket.h>

#ifdef TERN_HAVE_LINUX_UNALIGNED_H
#include <linux/unaligned.h>
#else
#include <asm/unaligned.h>
#endif

#ifdef TERN_HAVE_CRYPTO_UTILS_H
#include <crypto/utils.h>
#else
#include <crypto/algapi.h>
#endif

#ifdef TERN_HAVE_LINUX_CRC32C_H
#include <linux/crc32c.h>
#else
#include <linux/crc32.h>
#endif

/* ---- zero-copy send ---- */

/* May every page of @len bytes at @offset from @page be spliced? */
#ifdef TERN_HAVE_SENDPAGES_OK
static inline bool tern_sendpages_ok(struct page *page, size_t len,
				     size_t offset)
{
	return sendpages_ok(page, len, offset);
}
#else
static inline bool tern_sendpages_ok(struct page *page, size_t len,
				     size_t offset)
{
	struct page *p = page + (offset >> PAGE_SHIFT);
	size_t nr = DIV_ROUND_UP(offset_in_page(offset) + len, PAGE_SIZE);

	while (nr--) {
		if (!sendpage_ok(p++))
			return false;
	}
	return true;
}
#endif

#ifdef TERN_HAVE_KERNEL_SENDPAGE
/*
 * Before 6.5 TCP ignores MSG_SPLICE_PAGES (where it is defined at all)
 * and copies: pages go by ->sendpage, one page per call. Neither can
 * take several pages at once, so TERN_SPLICES_ITER is false.
 */
#define TERN_SPLICES_ITER	false
#define TERN_MSG_SPLICE_PAGES	0

/*
 * Send the one page segment that @msg's ITER_BVEC iterator holds by
 * reference, as ->sendpage does: TCP takes a page reference per
 * fragment, exactly as it does for MSG_SPLICE_PAGES, so the page lives
 * until the data is acknowledged. MSG_SENDPAGE_NOTLAST with MSG_MORE
 * tells TLS and TCP more follows, as nvme-tcp said it on these kernels.
 */
static inline int tern_sock_sendmsg_splice(struct socket *sock,
					   struct msghdr *msg)
{
	const struct bio_vec *bv = msg->msg_iter.bvec;
	int flags = msg->msg_flags;

	if (flags & MSG_MORE)
		flags |= MSG_SENDPAGE_NOTLAST;
	return kernel_sendpage(sock, bv->bv_page,
			       bv->bv_offset + msg->msg_iter.iov_offset,
			       iov_iter_count(&msg->msg_iter), flags);
}
#else
/* TCP splices every page of one sendmsg(): a frame's data in one call */
#define TERN_SPLICES_ITER	true
#define TERN_MSG_SPLICE_PAGES	MSG_SPLICE_PAGES

/* Send @msg's pages by reference (see tern_sendpages_ok()). */
static inline int tern_sock_sendmsg_splice(struct socket *sock,
					   struct msghdr *msg)
{
	msg->msg_flags |= MSG_SPLICE_PAGES;
	return sock_sendmsg(sock, msg);
}
#endif

/* ---- blk-mq ---- */

#ifdef TERN_HAVE_BLK_MQ_F_SHOULD_MERGE
#define TERN_BLK_MQ_F_SHOULD_MERGE	BLK_MQ_F_SHOULD_MERGE
#else
/* 6.14 on, every blk-mq queue merges by default */
#define TERN_BLK_MQ_F_SHOULD_MERGE	0
#endif

#ifdef TERN_HAVE_QUEUE_LIMITS_FEATURES
/* plain bits for the callers; only tern_blk_mq_alloc_disk() sees the type */
#define TERN_BLK_FEAT_WRITE_CACHE	((__force unsigned int)BLK_FEAT_WRITE_CACHE)
#define TERN_BLK_FEAT_FUA		((__force unsigned int)BLK_FEAT_FUA)
#define TERN_BLK_FEAT_STABLE_WRITES	((__force unsigned int)BLK_FEAT_STABLE_WRITES)
#else
/* tern's own bits, turned into queue flags after allocation */
#define TERN_BLK_FEAT_WRITE_CACHE	BIT(0)
#define TERN_BLK_FEAT_FUA		BIT(1)
#define TERN_BLK_FEAT_STABLE_WRITES	BIT(2)

static inline void tern_queue_set_features(struct request_queue *q,
					   unsigned int features)
{
	blk_queue_write_cache(q, features & TERN_BLK_FEAT_WRITE_CACHE,
			      features & TERN_BLK_FEAT_FUA);
	if (features & TERN_BLK_FEAT_STABLE_WRITES)
		blk_queue_flag_set(QUEUE_FLAG_STABLE_WRITES, q);
}
#endif

#ifndef TERN_HAVE_BLK_MQ_ALLOC_DISK_LIMITS
/*
 * Kernels whose blk_mq_alloc_disk() takes no limits: check what the
 * newer blk_validate_limits() would reject, so that a peer's bad
 * geometry fails the map here too instead of making a broken queue.
 */
static inline int tern_queue_check_limits(struct queue_limits *lim)
{
	if (!lim->logical_block_size)
		lim->logical_block_size = SECTOR_SIZE;
	if (lim->physical_block_size < lim->logical_block_size)
		lim->physical_block_size = lim->logical_block_size;
	if (!is_power_of_2(lim->logical_block_size) ||
	    lim->logical_block_size < SECTOR_SIZE ||
	    lim->logical_block_size > PAGE_SIZE ||
	    !is_power_of_2(lim->physical_block_size))
		return -EINVAL;
	if (lim->max_hw_sectors &&
	    lim->max_hw_sectors < PAGE_SIZE >> SECTOR_SHIFT)
		return -EINVAL;
	return 0;
}

/* The limits tern sets, through the setters of those kernels. */
static inline void tern_queue_set_limits(struct request_queue *q,
					 const struct queue_limits *lim)
{
	blk_queue_logical_block_size(q, lim->logical_block_size);
	blk_queue_physical_block_size(q, lim->physical_block_size);
	if (lim->max_hw_sectors)
		blk_queue_max_hw_sectors(q, lim->max_hw_sectors);
	if (lim->max_segments)
		blk_queue_max_segments(q, lim->max_segments);
	blk_queue_max_discard_sectors(q, lim->max_hw_discard_sectors);
	q->limits.discard_granularity = lim->discard_granularity;
	blk_queue_max_write_zeroes_sectors(q, lim->max_write_zeroes_sectors);
}
#endif

/*
 * blk_mq_alloc_disk() with @lim and @features (TERN_BLK_FEAT_*) in
 * force. Only the limits tern sets are carried over where the kernel
 * takes them after allocation (tern_queue_set_limits()).
 */
static inline struct gendisk *
tern_blk_mq_alloc_disk(struct blk_mq_tag_set *set, struct queue_limits *lim,
		       unsigned int features, void *queuedata)
{
#if defined(TERN_HAVE_QUEUE_LIMITS_FEATURES)
	lim->features |= (__force blk_features_t)features;
	return blk_mq_alloc_disk(set, lim, queuedata);
#elif defined(TERN_HAVE_BLK_MQ_ALLOC_DISK_LIMITS)
	struct gendisk *disk = blk_mq_alloc_disk(set, lim, queuedata);

	if (!IS_ERR(disk))
		tern_queue_set_features(disk->queue, features);
	return disk;
#else
	struct gendisk *disk;
	int err = tern_queue_check_limits(lim);

	if (err)
		return ERR_PTR(err);
	disk = blk_mq_alloc_disk(set, queuedata);
	if (!IS_ERR(disk)) {
		tern_queue_set_limits(disk->queue, lim);
		tern_queue_set_features(disk->queue, features);
	}
	return disk;
#endif
}

/* ---- block devices ---- */

/*
 * Open the block device at @path exclusively (@holder), for writing too
 * if @write, as a file: fput() closes it on every kernel.
 */
#ifdef TERN_HAVE_BDEV_FILE_OPEN_BY_DEV
static inline struct file *tern_bdev_file_open(const struct path *path,
					       bool write, void *holder)
{
	blk_mode_t mode = BLK_OPEN_READ;

	if (write)
		mode |= BLK_OPEN_WRITE;
	return bdev_file_open_by_dev(d_backing_inode(path->dentry)->i_rdev,
				     mode, holder, NULL);
}

static inline struct block_device *tern_file_bdev(struct file *file)
{
	return file_bdev(file);
}
#else
/*
 * Before 6.9 a block device file opened with O_EXCL claims the device
 * exclusively, with the file as holder (blkdev_open()), and is closed,
 * claim and all, by fput(): the same as the newer call, with a
 * different holder cookie that nothing else compares.
 */
static inline struct file *tern_bdev_file_open(const struct path *path,
					       bool write, void *holder)
{
	int flags = O_LARGEFILE | O_EXCL | (write ? O_RDWR : O_RDONLY);

	return dentry_open(path, flags, current_cred());
}

static inline struct block_device *tern_file_bdev(struct file *file)
{
	return I_BDEV(file->f_mapping->host);
}
#endif

/* ---- timers ---- */

#ifdef TERN_HAVE_HRTIMER_SETUP
static inline void tern_hrtimer_setup(struct hrtimer *timer,
				      enum hrtimer_restart (*fn)(struct hrtimer *),
				      clockid_t clock, enum hrtimer_mode mode)
{
	hrtimer_setup(timer, fn, clock, mode);
}
#else
static inline void tern_hrtimer_setup(struct hrtimer *timer,
				      enum hrtimer_restart (*fn)(struct hrtimer *),
				      clockid_t clock, enum hrtimer_mode mode)
{
	hrtimer_init(timer, clock, mode);
	timer->function = fn;
}
#endif

/* ---- block device operations ---- */

/*
 * Since 6.5 .open takes the disk and a blk_mode_t and .release only the
 * disk; before, .open took the block_device and both an fmode_t. Define
 * them as tern_bdops_open(name) and tern_bdops_release(name), whose
 * disks are tern_bdops_open_disk and tern_bdops_release_disk.
 */
#ifdef TERN_HAVE_BDOPS_OPEN_DISK
#define tern_bdops_open(name) \
	int name(struct gendisk *tern_bdops_open_disk, blk_mode_t mode)
#define tern_bdops_release(name) \
	void name(struct gendisk *tern_bdops_release_disk)
#else
#define tern_bdops_open(name) \
	int name(struct block_device *bdev, fmode_t mode)
#define tern_bdops_open_disk	(bdev->bd_disk)
#define tern_bdops_release(name) \
	void name(struct gendisk *tern_bdops_release_disk, fmode_t mode)
#endif

#endif /* _TERN_COMPAT_H */
