// SPDX-License-Identifier: GPL-2.0
/*
 * tern_bench: data buffers, the data pattern and the latency histogram.
 */
#include <linux/highmem.h>
#include <linux/log2.h>
#include <linux/math64.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <tern/compat.h>
#include "bench.h"

#define TB_MIX1	0x9e3779b97f4a7c15ULL
#define TB_MIX2	0xc2b2ae3d27d4eb4fULL

void tb_buf_free(struct tb_buf *b)
{
	unsigned int i;

	for (i = 0; i < b->nr; i++) {
		if (!b->bvec[i].bv_page)
			continue;
		if (b->data_pages)
			tern_data_page_free(b->bvec[i].bv_page);
		else
			__free_page(b->bvec[i].bv_page);
	}
	kvfree(b->bvec);
	b->bvec = NULL;
	b->nr = 0;
}

static int tb_buf_fill(struct tb_buf *b, u32 len, u32 offset, gfp_t gfp,
		       bool data_pages)
{
	u32 left = len;
	unsigned int i;

	b->bvec = NULL;
	b->nr = 0;
	b->data_pages = data_pages;
	if (!len)
		return 0;
	i = DIV_ROUND_UP(offset + len, PAGE_SIZE);
	b->bvec = kvcalloc(i, sizeof(*b->bvec), gfp);
	if (!b->bvec)
		return -ENOMEM;
	b->nr = i;
	for (i = 0; i < b->nr; i++) {
		u32 start = i ? 0 : offset;
		u32 n = min_t(u32, left, PAGE_SIZE - start);
		struct page *page = data_pages ?
			tern_data_page_alloc(gfp | __GFP_NOWARN) :
			alloc_page(gfp | __GFP_NOWARN);

		if (!page) {
			tb_buf_free(b);
			return -ENOMEM;
		}
		bvec_set_page(&b->bvec[i], page, n, start);
		left -= n;
	}
	return 0;
}

/**
 * tb_buf_alloc - allocate a buffer of @len bytes at @offset in its first page
 * @b: the buffer, empty on return when @len is 0 or on failure
 * @len: data bytes
 * @offset: bv_offset of the first segment, below PAGE_SIZE
 * @gfp: allocation flags
 *
 * Return: 0 or -ENOMEM.
 */
int tb_buf_alloc(struct tb_buf *b, u32 len, u32 offset, gfp_t gfp)
{
	return tb_buf_fill(b, len, offset, gfp, false);
}

/**
 * tb_buf_alloc_data - a buffer of @len bytes in the messenger's data pages
 * @b: the buffer, empty on return when @len is 0 or on failure
 * @len: data bytes
 * @gfp: allocation flags
 *
 * The pages may hold anything: the caller writes every byte before it
 * is read (tern_data_page_alloc()), and the messenger may swap them for
 * pages it received into (&tern_srv_req.rx_swappable).
 *
 * Return: 0 or -ENOMEM.
 */
int tb_buf_alloc_data(struct tb_buf *b, u32 len, gfp_t gfp)
{
	return tb_buf_fill(b, len, 0, gfp, true);
}

static inline u64 tb_word(u64 mix, u64 idx)
{
	return mix ^ ((idx + 1) * TB_MIX2);
}

/* Fill or check the one pattern byte at @p, byte @pos of the pattern. */
static bool tb_pattern_byte(u8 *p, u64 pos, u64 mix, bool check)
{
	u8 c = tb_word(mix, pos >> 3) >> ((pos & 7) * 8);

	if (check)
		return *p == c;
	*p = c;
	return true;
}

/* Fill or check @n bytes at @p, which hold pattern bytes from @pos on. */
static bool tb_pattern_range(u8 *p, u32 n, u64 pos, u64 mix, bool check)
{
	/* bytewise up to a word boundary of the pattern, then words */
	for (; n && (pos & 7); p++, pos++, n--)
		if (!tb_pattern_byte(p, pos, mix, check))
			return false;
	while (n >= 8) {
		u64 w = tb_word(mix, pos >> 3);

		if (!check)
			put_unaligned_le64(w, p);
		else if (get_unaligned_le64(p) != w)
			return false;
		p += 8;
		pos += 8;
		n -= 8;
	}
	for (; n; p++, pos++, n--)
		if (!tb_pattern_byte(p, pos, mix, check))
			return false;
	return true;
}

static bool tb_pattern_walk(const struct bio_vec *bv, unsigned int nr,
			    u32 len, u64 seed, bool check)
{
	u64 mix = (seed + 1) * TB_MIX1, pos = 0;
	unsigned int i;

	for (i = 0; i < nr && len; i++) {
		u32 seg = min(bv[i].bv_len, len), done = 0;

		while (done < seg) {
			u32 off = bv[i].bv_offset + done;
			struct page *page = bv[i].bv_page + (off >> PAGE_SHIFT);
			u32 n = min_t(u32, seg - done,
				      PAGE_SIZE - offset_in_page(off));
			u8 *p = kmap_local_page(page);
			bool ok;

			ok = tb_pattern_range(p + offset_in_page(off), n, pos,
					      mix, check);
			kunmap_local(p);
			if (!ok)
				return false;
			done += n;
			pos += n;
		}
		len -= seg;
	}
	return !len;
}

void tb_pattern_fill(const struct bio_vec *bv, unsigned int nr, u32 len,
		     u64 seed)
{
	tb_pattern_walk(bv, nr, len, seed, false);
}

/* Return: true when the first @len bytes of @bv hold the pattern. */
bool tb_pattern_check(const struct bio_vec *bv, unsigned int nr, u32 len,
		      u64 seed)
{
	return tb_pattern_walk(bv, nr, len, seed, true);
}

static unsigned int tb_hist_index(u64 v)
{
	unsigned int shift;

	if (v < TB_HIST_SUB)
		return v;
	v = min_t(u64, v, (1ULL << TB_HIST_MAX_BITS) - 1);
	shift = ilog2(v) - TB_HIST_SUB_BITS;
	return (shift + 1) * TB_HIST_SUB + ((v >> shift) & (TB_HIST_SUB - 1));
}

/* Largest value that falls into bucket @idx. */
static u64 tb_hist_upper(unsigned int idx)
{
	unsigned int shift, sub;

	if (idx < TB_HIST_SUB)
		return idx;
	shift = idx / TB_HIST_SUB - 1;
	sub = idx % TB_HIST_SUB;
	return (((u64)TB_HIST_SUB + sub + 1) << shift) - 1;
}

void tb_hist_add(u64 *hist, u64 v)
{
	hist[tb_hist_index(v)]++;
}

/**
 * tb_hist_percentile - value at a percentile of a histogram
 * @hist: TB_HIST_BUCKETS counters
 * @total: sum of @hist
 * @bp: percentile in basis points, 0.01% (5000 is the median)
 *
 * Return: the upper bound of the bucket holding the sample of that rank,
 * or 0 for an empty histogram.
 */
u64 tb_hist_percentile(const u64 *hist, u64 total, unsigned int bp)
{
	u64 rank, seen = 0;
	unsigned int i;

	if (!total)
		return 0;
	rank = div_u64(total * bp + 9999, 10000);
	rank = max_t(u64, rank, 1);
	for (i = 0; i < TB_HIST_BUCKETS; i++) {
		seen += hist[i];
		if (seen >= rank)
			return tb_hist_upper(i);
	}
	return tb_hist_upper(TB_HIST_BUCKETS - 1);
}
