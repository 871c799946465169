// SPDX-License-Identifier: GPL-2.0
/* sendpages_ok() (6.11): sendpage_ok() for every page of a range */
#include <linux/net.h>

bool tern_probe(struct page *page, size_t len, size_t offset);
bool tern_probe(struct page *page, size_t len, size_t offset)
{
	return sendpages_ok(page, len, offset);
}
