// SPDX-License-Identifier: GPL-2.0
/* blk_mq_alloc_disk() takes the queue limits (6.9); before, two arguments */
#include <linux/blk-mq.h>

struct gendisk *tern_probe(struct blk_mq_tag_set *set,
			   struct queue_limits *lim, void *queuedata);
struct gendisk *tern_probe(struct blk_mq_tag_set *set,
			   struct queue_limits *lim, void *queuedata)
{
	return blk_mq_alloc_disk(set, lim, queuedata);
}
