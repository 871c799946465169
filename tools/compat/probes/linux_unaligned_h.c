// SPDX-License-Identifier: GPL-2.0
/* <linux/unaligned.h> (6.12); before, the same helpers are <asm/unaligned.h> */
#include <linux/unaligned.h>

u32 tern_probe(const void *p);
u32 tern_probe(const void *p)
{
	return get_unaligned_le32(p);
}
