// SPDX-License-Identifier: GPL-2.0
/*
 * kernel_sendpage() exists until 6.4; it is the zero-copy send there.
 * From 6.5 TCP splices the pages of a sendmsg() with MSG_SPLICE_PAGES
 * instead. Some 6.1 stable kernels define MSG_SPLICE_PAGES without TCP
 * honouring it, so the flag itself proves nothing: this probe decides.
 */
#include <linux/net.h>

int tern_probe(struct socket *sock, struct page *page, int offset,
	       size_t size, int flags);
int tern_probe(struct socket *sock, struct page *page, int offset,
	       size_t size, int flags)
{
	return kernel_sendpage(sock, page, offset, size, flags);
}
