// SPDX-License-Identifier: GPL-2.0
/*
 * queue_limits.features (6.11): write cache, FUA and stable writes are
 * limits given at allocation, not queue flags set afterwards.
 */
#include <linux/blkdev.h>

void tern_probe(struct queue_limits *lim);
void tern_probe(struct queue_limits *lim)
{
	lim->features |= BLK_FEAT_WRITE_CACHE | BLK_FEAT_FUA |
			 BLK_FEAT_STABLE_WRITES;
}
