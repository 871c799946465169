// SPDX-License-Identifier: GPL-2.0
/*
 * Data pages of responder requests, recycled through a per-CPU stash.
 *
 * A responder holds a page per 4 KiB of request data for one request: the
 * transport or the backend fills it, it is read once, then released. With
 * init_on_alloc (on in Debian's kernel) every fresh page is cleared, only
 * to be overwritten by the data; at 4 KiB random writes that clearing was
 * the biggest single cost tern had over nvmet-rdma, which receives into
 * pages it posted once. Released pages wait in a small stash on the CPU
 * that released them and go straight back out from there.
 *
 * The contract that makes skipping the clearing safe: a caller overwrites
 * every byte of a page that anyone reads (a bio_vec's length) before it
 * is read, as the target does for backend reads and received data. A
 * page still referenced elsewhere when released (a socket's zero-copy
 * send) is not stashed: its reference is dropped and the last holder
 * frees it. Transports may receive into such pages too and swap them
 * with a request's (tern_lane_rx_swap_page()): the ones they keep
 * posted are counted apart (tern_data_pages_posted()).
 */

#include <linux/debugfs.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/seq_file.h>
#include <tern/tern.h>
#include "tern_core.h"

/* A queue depth's worth of 4 KiB requests per CPU; 256 KiB at most. */
#define TERN_PAGE_STASH_MAX	64

struct tern_page_counts {
	u64		fresh;		/* handed out from the page allocator */
	u64		reused;		/* handed out from the stash */
	u64		stashed;	/* released into the stash */
	u64		freed;		/* released to the page allocator */
	u64		in_stash;	/* sums only */
};

struct tern_page_stash {
	unsigned int		nr;
	struct page		*pages[TERN_PAGE_STASH_MAX];
	struct tern_page_counts	counts;
};

static DEFINE_PER_CPU(struct tern_page_stash, tern_page_stash);
static atomic_long_t tern_pages_posted;

/**
 * tern_data_page_alloc - a page for request data, maybe not cleared
 * @gfp: allocation flags when the stash is empty
 *
 * The caller must write every byte it lets anyone read. Release the page
 * with tern_data_page_free(). Any context that @gfp allows.
 */
struct page *tern_data_page_alloc(gfp_t gfp)
{
	struct tern_page_stash *st;
	struct page *page = NULL;
	unsigned long flags;

	local_irq_save(flags);
	st = this_cpu_ptr(&tern_page_stash);
	if (st->nr) {
		page = st->pages[--st->nr];
		st->counts.reused++;
	}
	local_irq_restore(flags);
	if (page)
		return page;

	page = alloc_page(gfp);
	if (page) {
		local_irq_save(flags);
		this_cpu_ptr(&tern_page_stash)->counts.fresh++;
		local_irq_restore(flags);
	}
	return page;
}
EXPORT_SYMBOL_GPL(tern_data_page_alloc);

/**
 * tern_data_page_free - release a page of tern_data_page_alloc()
 * @page: the page, or NULL
 *
 * Any context, hard interrupts included (bio completions).
 */
void tern_data_page_free(struct page *page)
{
	struct tern_page_stash *st;
	unsigned long flags;
	bool kept;

	if (!page)
		return;
	/*
	 * Zero-copy TCP sends hand the page to the socket, which may hold
	 * it past the reply: only a page nobody else holds is ours to reuse.
	 */
	kept = page_count(page) == 1;
	local_irq_save(flags);
	st = this_cpu_ptr(&tern_page_stash);
	if (kept && st->nr < TERN_PAGE_STASH_MAX) {
		st->pages[st->nr++] = page;
		st->counts.stashed++;
	} else {
		st->counts.freed++;
		kept = false;
	}
	local_irq_restore(flags);
	if (!kept)
		__free_page(page);
}
EXPORT_SYMBOL_GPL(tern_data_page_free);

/**
 * tern_data_pages_posted - data pages a transport keeps for receiving
 * @delta: pages of tern_data_page_alloc() it now keeps (> 0), or of
 *	those it gave back with tern_data_page_free() (< 0)
 *
 * A transport that receives into data pages (and swaps them with those
 * of requests, tern_lane_rx_swap_page()) holds them while its lanes
 * live: they are shown apart from the pages of requests. Any context;
 * lane setup and teardown, not per I/O.
 */
void tern_data_pages_posted(long delta)
{
	atomic_long_add(delta, &tern_pages_posted);
}
EXPORT_SYMBOL_GPL(tern_data_pages_posted);

/*
 * Every CPU's counters added up; returns the pages in use by requests,
 * those posted by transports not counted.
 */
static s64 tern_pages_sum(struct tern_page_counts *sum)
{
	int cpu;

	memset(sum, 0, sizeof(*sum));
	for_each_possible_cpu(cpu) {
		struct tern_page_stash *st = per_cpu_ptr(&tern_page_stash, cpu);

		sum->in_stash += st->nr;
		sum->fresh += st->counts.fresh;
		sum->reused += st->counts.reused;
		sum->stashed += st->counts.stashed;
		sum->freed += st->counts.freed;
	}
	return sum->fresh + sum->reused - sum->stashed - sum->freed -
	       atomic_long_read(&tern_pages_posted);
}

static int tern_pages_show(struct seq_file *m, void *v)
{
	struct tern_page_counts sum;
	s64 in_use = tern_pages_sum(&sum);

	seq_printf(m, "in_use %lld\nposted %ld\nin_stash %llu\nfresh %llu\nreused %llu\nfreed %llu\n",
		   in_use, atomic_long_read(&tern_pages_posted), sum.in_stash,
		   sum.fresh, sum.reused, sum.freed);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tern_pages);

void tern_pages_init(void)
{
	debugfs_create_file("data_pages", 0400, tern_debugfs_root, NULL,
			    &tern_pages_fops);
}

/* Module exit: every user module is gone, so is every page in use. */
void tern_pages_exit(void)
{
	struct tern_page_counts sum;
	s64 in_use = tern_pages_sum(&sum);
	int cpu;

	WARN(in_use || atomic_long_read(&tern_pages_posted),
	     "tern: %lld data pages leaked, %ld posted\n", in_use,
	     atomic_long_read(&tern_pages_posted));
	for_each_possible_cpu(cpu) {
		struct tern_page_stash *st = per_cpu_ptr(&tern_page_stash, cpu);

		while (st->nr)
			__free_page(st->pages[--st->nr]);
	}
}
