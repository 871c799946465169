/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * tern_bench: control interface of the messenger benchmark, /dev/tern-bench.
 *
 * Every structure starts with @size, which userspace sets to sizeof() of
 * the structure it was compiled with; the kernel refuses any other value
 * with -EINVAL. Every flags word and reserved field must be zero on input.
 * All fields are naturally aligned with explicit padding, so the layout is
 * the same for 32-bit and 64-bit userspace.
 *
 * Documentation/admin-guide.rst (ternadm bench) and
 * Documentation/performance.rst describe the semantics.
 */
#ifndef _UAPI_TERN_BENCH_H
#define _UAPI_TERN_BENCH_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define TERN_BENCH_DEVICE	"/dev/tern-bench"

/* Longest URI, terminating NUL included: "tcp://[v6-addr]:port". */
#define TERN_BENCH_URI_MAX	128

/* Limits of a run. */
#define TERN_BENCH_MAX_SESSIONS		64
#define TERN_BENCH_MAX_DEPTH		4096
#define TERN_BENCH_MAX_SIZE		(16U << 20)
#define TERN_BENCH_MAX_DURATION_MS	(3600U * 1000)
#define TERN_BENCH_MAX_COUNT		(1ULL << 40)
/* sessions * depth * data buffer bytes (offset included) may not exceed: */
#define TERN_BENCH_MAX_BUFFER_BYTES	(512ULL << 20)

/* Echo listeners at most, over all URIs. */
#define TERN_BENCH_MAX_LISTENERS	16

/* struct tern_bench_run.dir */
enum tern_bench_dir {
	TERN_BENCH_DIR_TO	= 1,	/* data to the responder (it pulls) */
	TERN_BENCH_DIR_FROM	= 2,	/* data from the responder (it pushes) */
	TERN_BENCH_DIR_BOTH	= 3,	/* alternate, request by request */
};

/* struct tern_bench_run.flags */
#define TERN_BENCH_RUN_CRC	(1U << 0)	/* negotiate data crc32c */
#define TERN_BENCH_RUN_VERIFY	(1U << 1)	/* pattern-check every byte */
#define TERN_BENCH_RUN_INLINE_WRITE	(1U << 2)	/* inline_write given */
#define TERN_BENCH_RUN_INLINE_READ	(1U << 3)	/* inline_read given */
#define TERN_BENCH_RUN_ALL	(TERN_BENCH_RUN_CRC | TERN_BENCH_RUN_VERIFY | \
				 TERN_BENCH_RUN_INLINE_WRITE | \
				 TERN_BENCH_RUN_INLINE_READ)

/**
 * struct tern_bench_serve - SERVE and STOP_SERVE argument
 * @size: sizeof(struct tern_bench_serve)
 * @flags: must be 0
 * @uri: "tcp://HOST[:PORT]", NUL-terminated. For STOP_SERVE, the empty
 *	string stops every listener and closes every echo session.
 * @reserved: must be 0
 */
struct tern_bench_serve {
	__u32	size;
	__u32	flags;
	char	uri[TERN_BENCH_URI_MAX];
	__u64	reserved[4];
};

/**
 * struct tern_bench_result - what a run measured (RUN output)
 * @messages: requests completed successfully (status 0, reply matched)
 * @bytes: data bytes moved by those requests, both directions
 * @elapsed_ns: first send to last completion
 * @msgs_per_sec: @messages per second of @elapsed_ns
 * @bytes_per_sec: @bytes per second of @elapsed_ns
 * @lat_min_ns .. @lat_max_ns: request latency, tern_send() to done();
 *	percentiles come from a log-linear histogram (relative error
 *	below 1/32) and report the upper bound of their bucket
 * @cpu_busy_ns: non-idle time summed over all online CPUs during the
 *	run (user, nice, system, irq, softirq, steal from kcpustat): on one
 *	host it covers requester and responder together
 * @nr_cpus: online CPUs the sum ran over
 * @sent: requests handed to tern_send() successfully
 * @completed: done() calls (any status)
 * @errors: messenger errors, error replies, failed sends
 * @mismatches: verify failures: reply front not the request's, wrong
 *	data length, data pattern wrong (here or at the responder)
 * @resends: sum of &tern_request.resends
 * @dup_completions: done() for a request that had already completed
 * @lost: @sent - @completed once the sessions are closed (must be 0)
 */
struct tern_bench_result {
	__u64	messages;
	__u64	bytes;
	__u64	elapsed_ns;
	__u64	msgs_per_sec;
	__u64	bytes_per_sec;
	__u64	lat_min_ns;
	__u64	lat_avg_ns;
	__u64	lat_p50_ns;
	__u64	lat_p99_ns;
	__u64	lat_p999_ns;
	__u64	lat_max_ns;
	__u64	cpu_busy_ns;
	__u32	nr_cpus;
	__u32	pad0;
	__u64	sent;
	__u64	completed;
	__u64	errors;
	__u64	mismatches;
	__u64	resends;
	__u64	dup_completions;
	__u64	lost;
	__u64	reserved[8];
};

/**
 * struct tern_bench_run - RUN argument (in) and result (out)
 * @size: sizeof(struct tern_bench_run)
 * @flags: TERN_BENCH_RUN_*
 * @uri: echo server, "tcp://HOST[:PORT]" or "rdma://HOST[:PORT]",
 *	NUL-terminated
 * @sessions: 1..TERN_BENCH_MAX_SESSIONS
 * @lanes: lanes per session, 1..TERN_WIRE_MAX_LANES
 * @depth: requests in flight per session, 1..TERN_BENCH_MAX_DEPTH
 * @dir: enum tern_bench_dir
 * @msg_size: data bytes per request, 0..TERN_BENCH_MAX_SIZE
 * @data_offset: offset of the data in its first page (bv_offset),
 *	0..4095
 * @duration_ms: run for this long (1..TERN_BENCH_MAX_DURATION_MS), or 0
 * @count: send this many requests in all (1..TERN_BENCH_MAX_COUNT), or
 *	0; exactly one of @duration_ms and @count is non-zero
 * @inline_write: with TERN_BENCH_RUN_INLINE_WRITE, on lanes with remote
 *	data access (RDMA): request data up to this many bytes rides in the
 *	request, larger data the responder reads; 0: none rides inline;
 *	0..TERN_WIRE_MAX_DATA. Without the flag: the transport's default
 * @inline_read: the same for reply data (TERN_BENCH_RUN_INLINE_READ),
 *	which the responder writes above it
 * @reserved: must be 0
 * @result: output; must be 0 on input
 */
struct tern_bench_run {
	__u32	size;
	__u32	flags;
	char	uri[TERN_BENCH_URI_MAX];
	__u32	sessions;
	__u32	lanes;
	__u32	depth;
	__u32	dir;
	__u32	msg_size;
	__u32	data_offset;
	__u32	duration_ms;
	__u32	pad0;
	__u64	count;
	__u32	inline_write;
	__u32	inline_read;
	__u64	reserved[5];
	struct tern_bench_result result;
};

/**
 * struct tern_bench_echo_stats - ECHO_STATS output
 * @size: sizeof(struct tern_bench_echo_stats), set by the caller
 * @flags: must be 0
 * @requests: requests received since the module loaded
 * @bytes_in: data bytes pulled (TO_RESPONDER)
 * @bytes_out: data bytes pushed (FROM_RESPONDER)
 * @resent: requests flagged as resent by the requester
 * @duplicates: resent requests whose tid had already been answered in
 *	the same session (among the last 4096 answered): executed twice
 * @verify_errors: requests whose data did not match the pattern
 * @errors: malformed requests, failed pulls, pushes or replies
 * @sessions: responder sessions open now
 * @sessions_total: responder sessions opened since the module loaded
 * @listeners: listening URIs now
 */
struct tern_bench_echo_stats {
	__u32	size;
	__u32	flags;
	__u64	requests;
	__u64	bytes_in;
	__u64	bytes_out;
	__u64	resent;
	__u64	duplicates;
	__u64	verify_errors;
	__u64	errors;
	__u64	sessions;
	__u64	sessions_total;
	__u32	listeners;
	__u32	pad0;
	__u64	reserved[8];
};

#define TERN_BENCH_IOC_MAGIC	0xE8

#define TERN_BENCH_IOC_SERVE		_IOW(TERN_BENCH_IOC_MAGIC, 0x01, \
					     struct tern_bench_serve)
#define TERN_BENCH_IOC_STOP_SERVE	_IOW(TERN_BENCH_IOC_MAGIC, 0x02, \
					     struct tern_bench_serve)
#define TERN_BENCH_IOC_RUN		_IOWR(TERN_BENCH_IOC_MAGIC, 0x03, \
					      struct tern_bench_run)
#define TERN_BENCH_IOC_ECHO_STATS	_IOWR(TERN_BENCH_IOC_MAGIC, 0x04, \
					      struct tern_bench_echo_stats)

#endif /* _UAPI_TERN_BENCH_H */
