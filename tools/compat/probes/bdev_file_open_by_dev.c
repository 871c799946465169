// SPDX-License-Identifier: GPL-2.0
/* bdev_file_open_by_dev() and file_bdev() (6.9): a block device as a file */
#include <linux/blkdev.h>

struct block_device *tern_probe(dev_t dev, void *holder);
struct block_device *tern_probe(dev_t dev, void *holder)
{
	struct file *file;

	file = bdev_file_open_by_dev(dev, BLK_OPEN_READ | BLK_OPEN_WRITE,
				     holder, NULL);
	return IS_ERR(file) ? NULL : file_bdev(file);
}
