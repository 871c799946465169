/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tern_bench: definitions shared by the benchmark's sources.
 *
 * The benchmark's requests carry a struct tb_front; the echo service
 * answers each with the same front. Data follows the pattern of
 * tb_pattern_*(): byte @pos of the request with seed @seed is byte
 * (pos % 8) of the little-endian word
 *   ((seed + 1) * TB_MIX1) ^ ((pos / 8 + 1) * TB_MIX2),
 * so either side can generate or check any byte without state.
 */
#ifndef _TERN_BENCH_H
#define _TERN_BENCH_H

#include <linux/bits.h>
#include <linux/bvec.h>
#include <linux/types.h>
#include <tern/tern.h>
#include <uapi/tern/tern_bench.h>

#define TB_FRONT_MAGIC	0x48434e42	/* "BNCH" read as LE u32 */
#define TB_FRONT_VERIFY	BIT(0)	/* check/fill the data pattern */

/* Request front; the reply front is a byte-for-byte copy. */
struct tb_front {
	__le32	magic;
	__le32	flags;		/* TB_FRONT_* */
	__le64	seed;		/* pattern seed: session << 48 | sequence */
	__le32	len;		/* data bytes */
	__le32	slot;		/* requester slot, for diagnostics */
	__le64	reserved;
};

/* A data buffer: order-0 pages, the first one used from @offset. */
struct tb_buf {
	struct bio_vec	*bvec;
	unsigned int	nr;
	bool		data_pages;	/* tern_data_page_alloc()'s */
};

int tb_buf_alloc(struct tb_buf *b, u32 len, u32 offset, gfp_t gfp);
int tb_buf_alloc_data(struct tb_buf *b, u32 len, gfp_t gfp);
void tb_buf_free(struct tb_buf *b);
void tb_pattern_fill(const struct bio_vec *bv, unsigned int nr, u32 len,
		     u64 seed);
bool tb_pattern_check(const struct bio_vec *bv, unsigned int nr, u32 len,
		      u64 seed);

/* Latency histogram: log-linear, 32 linear buckets per power of two. */
#define TB_HIST_SUB_BITS	5
#define TB_HIST_SUB		BIT(TB_HIST_SUB_BITS)
#define TB_HIST_MAX_BITS	40	/* values clamp at 2^40 ns, ~18 min */
#define TB_HIST_BUCKETS		((TB_HIST_MAX_BITS - TB_HIST_SUB_BITS + 1) * \
				 TB_HIST_SUB)

void tb_hist_add(u64 *hist, u64 v);
u64 tb_hist_percentile(const u64 *hist, u64 total, unsigned int bp);

/* echo.c */
int tb_echo_serve(const char *uri);
int tb_echo_stop(const char *uri);
void tb_echo_stats(struct tern_bench_echo_stats *st);
void tb_echo_exit(void);

/* run.c */
int tb_run(struct tern_bench_run *p);

#endif /* _TERN_BENCH_H */
