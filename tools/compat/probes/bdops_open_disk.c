// SPDX-License-Identifier: GPL-2.0
/*
 * block_device_operations.open takes the disk and a blk_mode_t, and
 * .release only the disk (6.5); before, the block_device and an fmode_t.
 */
#include <linux/blkdev.h>

static int tern_probe_open(struct gendisk *disk, blk_mode_t mode)
{
	return 0;
}

static void tern_probe_release(struct gendisk *disk)
{
}

const struct block_device_operations tern_probe_fops = {
	.open		= tern_probe_open,
	.release	= tern_probe_release,
};
