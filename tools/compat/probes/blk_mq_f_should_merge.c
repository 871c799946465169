// SPDX-License-Identifier: GPL-2.0
/*
 * BLK_MQ_F_SHOULD_MERGE, gone in 6.14 where every blk-mq queue merges
 * unless told not to: without it, merging needs no flag.
 */
#include <linux/blk-mq.h>

unsigned int tern_probe(void);
unsigned int tern_probe(void)
{
	return BLK_MQ_F_SHOULD_MERGE;
}
