/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tern_blk: private declarations shared by the block device (blk_dev.c)
 * and the mapping interface (blk_ctl.c).
 */
#ifndef _TERN_BLK_H
#define _TERN_BLK_H

#include <linux/blk-mq.h>
#include <linux/list.h>
#include <linux/ratelimit.h>
#include <tern/tern.h>
#include <uapi/tern/tern_blk_proto.h>

#define TERN_BLK_MINORS		16
#define TERN_BLK_MAX_SEGMENTS	128
#define TERN_BLK_INLINE_BVECS	4
#define TERN_BLK_OPTS_MAX	1024	/* longest option string, with NUL */

/* Options of one mapping; see Documentation/admin-guide.rst. */
/* queue_depth= when a map gives none */
#define TERN_BLK_DEFAULT_QDEPTH	128

/* "transport://[address]:port", as path= takes it */
#define TERN_BLK_URI_LEN	72

struct tern_blk_opts {
	char		transport[TERN_SCHEME_MAX];
	char		address[48];
	u16		service;
	char		export[TERN_BLK_NAME_LEN];
	char		host[TERN_BLK_NAME_LEN];
	unsigned int	lanes;		/* 0: one per CPU */
	unsigned int	queue_depth;	/* 0: TERN_BLK_DEFAULT_QDEPTH */
	/* 0: messenger default; TERN_LOSS_TIMEOUT_NEVER: "forever" */
	unsigned int	loss_timeout_ms;
	bool		crc;
	bool		read_only;
	/* key=: the key, read from the caller's keyring at map time */
	bool		has_key;
	u8		key[TERN_AUTH_KEY_LEN];
	bool		encrypt;	/* encrypt=1, needs key= */
	bool		integrity;	/* integrity=1, needs key=, not encrypt */
	bool		duplicate;	/* duplicate=1: map a mapped export again */
	/* path=URI, repeated: further paths of the session */
	char		paths[TERN_MAX_PATHS - 1][TERN_BLK_URI_LEN];
	unsigned int	nr_paths;
	enum tern_iopolicy iopolicy;	/* iopolicy= */
	/* inline_write=, inline_read=: as &tern_session_opts.inline_to_max */
	u32		inline_write;
	u32		inline_read;
};

/* dev->flags */
enum {
	TERN_BLK_REBINDING,	/* an OPEN for a new handle is under way */
	TERN_BLK_REBIND_FAILED,	/* the last one failed, at rebind_failed_at */
	TERN_BLK_REMOVED,	/* the export was disabled or removed (-ENODEV) */
	TERN_BLK_WATCH_STOP,	/* unmapping: post no more WATCH */
};

/* A control request (OPEN, INFO, CLOSE, WATCH) and its answer. */
struct tern_blk_ctrl {
	struct tern_request		treq;
	struct completion		done;	/* treq's done() has run */
	struct tern_blk_req		req;
	struct tern_blk_open_args	args;
	struct tern_blk_info		info;
};

/*
 * The WATCH a device keeps at the target (Documentation/protocol.rst):
 * answered when the export's capacity is no longer @known. Sent and
 * reposted by @work only; @posted: @c was sent since the last stop.
 */
struct tern_blk_watch {
	struct tern_blk_ctrl	c;
	struct delayed_work	work;
	u64			known;
	unsigned long		posted_at;	/* jiffies */
	bool			posted;
};

enum tern_blk_state {
	TERN_BLK_LIVE,
	TERN_BLK_RECONNECTING,
	TERN_BLK_FAILED,
	TERN_BLK_DELETING,
};

struct tern_blk_dev {
	struct list_head	entry;		/* tern_blk_devs */
	int			idx;
	char			name[DISK_NAME_LEN];
	struct tern_blk_opts	opts;
	struct tern_session	*sess;
	struct tern_session_info si;
	struct tern_blk_info	info;		/* from OPEN */
	u64			handle;		/* READ_ONCE: rebinding */
	bool			read_only;
	bool			uuid_refused;	/* the target predates uuids */
	/* opens of the disk and its partitions; DELETING refuses more */
	spinlock_t		open_lock;
	unsigned int		open_count;
	unsigned long		flags;		/* TERN_BLK_REBIND_*, _REMOVED */
	unsigned long		rebind_failed_at;	/* jiffies */
	atomic_t		rebinds;	/* new handles after -ESTALE */
	struct work_struct	rebind_work;
	struct tern_blk_watch	watch;
	struct mutex		resize_lock;	/* capacity changes */
	unsigned int		send_flags;	/* tern_send() from queue_rq */
	atomic_t		state;		/* enum tern_blk_state */
	/* per device, so a noisy target cannot silence another's errors */
	struct ratelimit_state	reply_rs;
	struct blk_mq_tag_set	tag_set;
	struct gendisk		*disk;
};

/* blk_dev.c */
int tern_blk_dev_init(void);
void tern_blk_dev_exit(void);
int tern_blk_add(const struct tern_blk_opts *opts, char *name, size_t size);
int tern_blk_remove(const char *name, bool force);
void tern_blk_remove_all(void);

#endif /* _TERN_BLK_H */
