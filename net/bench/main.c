// SPDX-License-Identifier: GPL-2.0
/*
 * tern_bench: message benchmark for the tern messenger.
 *
 * /dev/tern-bench takes the ioctls of include/uapi/tern/tern_bench.h:
 * SERVE and STOP_SERVE run the echo service (echo.c), RUN runs the load
 * generator (run.c) and blocks until it is done or a signal arrives,
 * ECHO_STATS reports the echo service's counters. Input is validated
 * field by field; anything out of range is -EINVAL with a rate-limited
 * log line saying which field.
 *
 * An open file holds a module reference (misc devices set the file's
 * owner), so the module cannot unload under a RUN; unloading stops the
 * echo service.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include "bench.h"

static_assert(sizeof(struct tern_bench_serve) == 168);
static_assert(sizeof(struct tern_bench_result) == 224);
static_assert(sizeof(struct tern_bench_run) == 448);
static_assert(sizeof(struct tern_bench_echo_stats) == 152);
static_assert(TERN_BENCH_MAX_SIZE == TERN_WIRE_MAX_DATA);
static_assert(TERN_BENCH_MAX_DEPTH <= TERN_WIRE_MAX_QDEPTH);

#define tb_bad(fmt, ...) ({						\
	pr_info_ratelimited("ioctl: " fmt "\n", ##__VA_ARGS__);	\
	-EINVAL;							\
})

static bool tb_zero(const void *p, size_t len)
{
	return !memchr_inv(p, 0, len);
}

static int tb_check_uri(const char *uri, bool may_be_empty)
{
	size_t len = strnlen(uri, TERN_BENCH_URI_MAX);
	struct sockaddr_storage ss;
	char scheme[16];

	if (len == TERN_BENCH_URI_MAX)
		return tb_bad("uri not NUL-terminated within %u bytes",
			      TERN_BENCH_URI_MAX);
	if (!len && !may_be_empty)
		return tb_bad("empty uri");
	if (!tb_zero(uri + len, TERN_BENCH_URI_MAX - len))
		return tb_bad("bytes after the uri's NUL are not zero");
	/* Syntax only: the transport is looked up when it is used. */
	if (len && tern_parse_uri(uri, scheme, sizeof(scheme), &ss))
		return tb_bad("uri \"%s\" is not SCHEME://HOST[:PORT]", uri);
	return 0;
}

static int tb_ioc_serve(void __user *arg, bool stop)
{
	struct tern_bench_serve s;
	int err;

	if (copy_from_user(&s, arg, sizeof(s)))
		return -EFAULT;
	if (s.size != sizeof(s))
		return tb_bad("serve: size %u, expected %zu", s.size,
			      sizeof(s));
	if (s.flags)
		return tb_bad("serve: unknown flags 0x%x", s.flags);
	if (!tb_zero(s.reserved, sizeof(s.reserved)))
		return tb_bad("serve: reserved fields not zero");
	err = tb_check_uri(s.uri, stop);
	if (err)
		return err;
	return stop ? tb_echo_stop(s.uri) : tb_echo_serve(s.uri);
}

static int tb_run_validate(const struct tern_bench_run *p)
{
	u64 pages, bytes;
	int err;

	if (p->size != sizeof(*p))
		return tb_bad("run: size %u, expected %zu", p->size, sizeof(*p));
	if (p->flags & ~TERN_BENCH_RUN_ALL)
		return tb_bad("run: unknown flags 0x%x", p->flags);
	if (p->pad0 || !tb_zero(p->reserved, sizeof(p->reserved)))
		return tb_bad("run: reserved fields not zero");
	if (!tb_zero(&p->result, sizeof(p->result)))
		return tb_bad("run: result not zeroed");
	err = tb_check_uri(p->uri, false);
	if (err)
		return err;
	if (!p->sessions || p->sessions > TERN_BENCH_MAX_SESSIONS)
		return tb_bad("run: sessions %u not in 1..%u", p->sessions,
			      TERN_BENCH_MAX_SESSIONS);
	if (!p->lanes || p->lanes > TERN_WIRE_MAX_LANES)
		return tb_bad("run: lanes %u not in 1..%u", p->lanes,
			      TERN_WIRE_MAX_LANES);
	if (!p->depth || p->depth > TERN_BENCH_MAX_DEPTH)
		return tb_bad("run: depth %u not in 1..%u", p->depth,
			      TERN_BENCH_MAX_DEPTH);
	if (p->dir < TERN_BENCH_DIR_TO || p->dir > TERN_BENCH_DIR_BOTH)
		return tb_bad("run: dir %u unknown", p->dir);
	if (p->msg_size > TERN_BENCH_MAX_SIZE)
		return tb_bad("run: msg_size %u above %u", p->msg_size,
			      TERN_BENCH_MAX_SIZE);
	if (p->data_offset >= PAGE_SIZE)
		return tb_bad("run: data_offset %u not below %lu",
			      p->data_offset, PAGE_SIZE);
	if (!p->duration_ms == !p->count)
		return tb_bad("run: give exactly one of duration_ms and count");
	if (p->duration_ms > TERN_BENCH_MAX_DURATION_MS)
		return tb_bad("run: duration_ms %u above %u", p->duration_ms,
			      TERN_BENCH_MAX_DURATION_MS);
	if (p->count > TERN_BENCH_MAX_COUNT)
		return tb_bad("run: count %llu above %llu", p->count,
			      TERN_BENCH_MAX_COUNT);
	if (p->inline_write > TERN_WIRE_MAX_DATA ||
	    p->inline_read > TERN_WIRE_MAX_DATA)
		return tb_bad("run: inline_write %u or inline_read %u above %u",
			      p->inline_write, p->inline_read,
			      TERN_WIRE_MAX_DATA);
	if ((p->inline_write && !(p->flags & TERN_BENCH_RUN_INLINE_WRITE)) ||
	    (p->inline_read && !(p->flags & TERN_BENCH_RUN_INLINE_READ)))
		return tb_bad("run: inline limit without its flag");
	pages = p->msg_size ? DIV_ROUND_UP(p->data_offset + p->msg_size,
					   PAGE_SIZE) : 0;
	/* Data pages plus about 512 bytes of slot per request in flight. */
	bytes = (u64)p->sessions * p->depth * (pages * PAGE_SIZE + 512);
	if (bytes > TERN_BENCH_MAX_BUFFER_BYTES)
		return tb_bad("run: sessions x depth x buffer = %llu bytes, above %llu",
			      bytes, TERN_BENCH_MAX_BUFFER_BYTES);
	return 0;
}

static int tb_ioc_run(void __user *arg)
{
	struct tern_bench_run *p;
	int err;

	p = memdup_user(arg, sizeof(*p));
	if (IS_ERR(p))
		return PTR_ERR(p);
	err = tb_run_validate(p);
	if (!err)
		err = tb_run(p);
	if (!err && copy_to_user(arg, p, sizeof(*p)))
		err = -EFAULT;
	kfree(p);
	return err;
}

static int tb_ioc_echo_stats(void __user *arg)
{
	struct tern_bench_echo_stats st;

	if (copy_from_user(&st, arg, sizeof(st)))
		return -EFAULT;
	if (st.size != sizeof(st))
		return tb_bad("echo_stats: size %u, expected %zu", st.size,
			      sizeof(st));
	if (st.flags)
		return tb_bad("echo_stats: unknown flags 0x%x", st.flags);
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	tb_echo_stats(&st);
	return copy_to_user(arg, &st, sizeof(st)) ? -EFAULT : 0;
}

static long tb_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case TERN_BENCH_IOC_SERVE:
		return tb_ioc_serve(uarg, false);
	case TERN_BENCH_IOC_STOP_SERVE:
		return tb_ioc_serve(uarg, true);
	case TERN_BENCH_IOC_RUN:
		return tb_ioc_run(uarg);
	case TERN_BENCH_IOC_ECHO_STATS:
		return tb_ioc_echo_stats(uarg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations tb_fops = {
	.owner		= THIS_MODULE,
	.unlocked_ioctl	= tb_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

static struct miscdevice tb_miscdev = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "tern-bench",
	.fops	= &tb_fops,
	.mode	= 0600,
};

static int __init tb_init(void)
{
	return misc_register(&tb_miscdev);
}

static void __exit tb_exit(void)
{
	misc_deregister(&tb_miscdev);
	tb_echo_exit();
}

module_init(tb_init);
module_exit(tb_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("tern messenger benchmark: echo service and load generator");
MODULE_VERSION(TERN_VERSION);
