/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tern_target: private declarations shared by the configfs front end
 * (target_configfs.c), the protocol engine (target_core.c) and the
 * backend I/O (target_io.c).
 */
#ifndef _TERN_TARGET_H
#define _TERN_TARGET_H

#include <linux/blkdev.h>
#include <linux/completion.h>
#include <linux/configfs.h>
#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/percpu-refcount.h>
#include <linux/rcupdate.h>
#include <linux/spinlock.h>
#include <linux/seq_file.h>
#include <linux/uuid.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <tern/tern.h>
#include <uapi/tern/tern_blk_proto.h>

/* Largest READ/WRITE the target accepts; sessions may negotiate less. */
#define TERN_TGT_MAX_TRANSFER		SZ_1M
#define TERN_TGT_MAX_SEGMENTS		256
/* Requests in flight per session, each with up to MAX_TRANSFER of pages. */
#define TERN_TGT_MAX_QUEUE_DEPTH	256
/* DISCARD/WRITE_ZEROES lengths travel in a 32-bit byte count. */
#define TERN_TGT_MAX_RANGE_SECTORS	BIT(22)
#define TERN_TGT_MAX_HOSTS		16

/*
 * What an export submitted to its backend, one count per request (a
 * request split into several bios counts once); shown by exports/X/stats.
 */
enum tern_tgt_stat {
	TERN_TGT_STAT_READS,
	TERN_TGT_STAT_WRITES,
	TERN_TGT_STAT_FUA,		/* writes sent REQ_FUA or RWF_DSYNC */
	TERN_TGT_STAT_FLUSHES,
	TERN_TGT_STAT_DISCARDS,
	TERN_TGT_STAT_WRITE_ZEROES,
	TERN_TGT_STAT_ERRORS,		/* failed in the backend */
	TERN_TGT_STAT_NR,
};

struct tern_tgt_stats {
	u64	count[TERN_TGT_STAT_NR];
};

/*
 * The geometry of one enabled instance of an export, published with RCU
 * and never changed after it, but for @info.capacity (WRITE_ONCE, always a
 * valid whole number of logical blocks): a reader on the request path
 * always sees one consistent, valid snapshot, whatever enable, disable or
 * a resize do meanwhile.
 */
struct tern_tgt_geom {
	struct rcu_head		rcu;
	struct tern_blk_info	info;		/* handle field unused */
};

/**
 * struct tern_tgt_export - one exported block device or file
 *
 * Configuration fields are protected by @lock and only change while the
 * export is disabled. The backend (@file, @bdev, @geom) is set up by
 * enable and torn down by disable, after every I/O using it finished:
 * I/O enters with tern_tgt_export_io_get(), a per-CPU reference on
 * @io_ref (live from enable to disable) refused unless the binding's
 * generation is current, and leaves with tern_tgt_export_io_put(); no
 * lock is shared per I/O. Memory lives until the last @ref is put, so
 * bindings may outlive the configfs item.
 */
struct tern_tgt_export {
	struct config_group	group;
	struct kref		ref;
	struct list_head	entry;		/* tern_tgt_exports */
	/* its directory's name, kept: bindings outlive the directory */
	char			name[TERN_BLK_NAME_LEN];

	struct mutex		lock;		/* configuration, enable */
	char			*device_path;
	bool			read_only;
	bool			require_auth;	/* OPEN only from proven hosts */
	bool			enabled;
	/* persistent name, sent to requesters that ask (TERN_BLK_F_UUID) */
	uuid_t			uuid;
	unsigned int		nr_hosts;
	char			hosts[TERN_TGT_MAX_HOSTS][TERN_BLK_NAME_LEN];

	struct file		*file;
	struct block_device	*bdev;		/* NULL for a regular file */
	struct tern_tgt_geom __rcu *geom;	/* NULL until first enabled */

	struct percpu_ref	io_ref;		/* dead while disabled */
	struct completion	io_done;	/* @io_ref reached zero */
	unsigned int		gen;		/* enables so far; under @lock */

	spinlock_t		watch_lock;	/* watches */
	struct list_head	watches;	/* held WATCHes, oldest first */

	/* per CPU: every lane of every session counts here */
	struct tern_tgt_stats __percpu *stats;
};

/* A link ports/NAME/exports/X -> exports/X. */
struct tern_tgt_link {
	struct list_head	entry;
	struct tern_tgt_export	*exp;
};

struct tern_tgt_port {
	struct config_group	group;
	struct config_group	exports_group;
	struct list_head	entry;		/* tern_tgt_ports */
	struct list_head	links;		/* under tern_tgt_mutex */
	u64			id;		/* never reused; paths name it */

	struct mutex		lock;		/* configuration, enable */
	char			transport[TERN_SCHEME_MAX];
	char			address[48];
	u16			service;
	unsigned int		max_lanes;	/* 0: TERN_WIRE_MAX_LANES */
	unsigned int		max_queue_depth; /* 0: TERN_TGT_MAX_QUEUE_DEPTH */
	bool			require_auth;	/* refuse unauthenticated lanes */
	bool			require_encrypt; /* refuse unencrypted lanes */
	/* refuse lanes neither signed nor encrypted */
	bool			require_integrity;
	bool			enabled;	/* also read under tern_tgt_mutex */
	struct tern_endpoint	*ep;		/* set and cleared under tern_tgt_mutex */
	struct tern_listener	*lis;
};

/*
 * Per responder session state, the session's priv: created when the
 * session comes up, freed when it is gone (after its last request).
 * @cur is read without a lock on the request path (RCU, see bind_get).
 */
struct tern_tgt_sess {
	struct tern_tgt_bind __rcu *cur;	/* binding requests name */
	struct list_head	binds;		/* bindings it owns */
	unsigned int		nr_binds;	/* under tern_tgt_bind_lock */
	u64			session_id;
	struct tern_tgt_port	*port;		/* the port it came in on */
	/* other ports its paths came in by (ids), under tern_tgt_mutex */
	u64			path_ports[TERN_MAX_PATHS];
	unsigned int		nr_path_ports;
	/* the identity the session proved, "" if none */
	char			identity[TERN_BLK_NAME_LEN];
	atomic_t		nr_watches;
	atomic_long_t		data_bytes;	/* request data held */
	long			data_budget;
};

/*
 * A binding: the result of OPEN. Requests name it by @handle; it is tied
 * to the requester's session id, so it survives the responder session
 * being rebuilt after a reconnect, and to the port it was opened on:
 * only requests arriving on that port may use it; unlinking the export
 * from the port ends it (-ENODEV from then on), removing the port frees
 * it.
 */
struct tern_tgt_bind {
	struct kref		ref;
	struct rcu_head		rcu;
	struct list_head	entry;		/* owner's binds, or orphans */
	struct tern_tgt_sess	*owner;		/* NULL: an orphan */
	u64			handle;
	u64			session_id;
	struct tern_tgt_export	*exp;
	struct tern_tgt_port	*port;		/* compared, never followed */
	unsigned int		gen;		/* exp->gen when opened */
	bool			read_only;
	bool			proven;		/* @host proved its key */
	bool			want_uuid;	/* OPEN had TERN_BLK_F_UUID */
	bool			hashed;		/* in tern_tgt_binds */
	bool			ended;		/* its port link is gone */
	struct list_head	writes_end;	/* tern_tgt_binds_end() */
	unsigned long		orphan_since;
	char			host[TERN_BLK_NAME_LEN];

	spinlock_t		lock;		/* writes, io->dup */
	struct list_head	writes;		/* modifying I/O in progress */
};

/* pages of an I/O whose page vector needs no allocation: 16 KiB */
#define TERN_TGT_INLINE_VECS	4

/*
 * One request in progress on the target, in its request's space
 * (tern_srv_req_space()): no allocation of its own.
 */
struct tern_tgt_io {
	struct tern_srv_req	*sreq;
	struct tern_tgt_bind	*bind;
	struct tern_tgt_export	*exp;		/* set while it holds exp->io_ref */
	struct tern_tgt_sess	*ts;		/* charged @charged bytes */
	u32			charged;
	u8			op;
	u16			flags;
	u32			len;
	u64			sector;
	int			status;
	u64			tid;
	struct list_head	bind_entry;	/* on bind->writes */
	bool			tracked;
	struct tern_tgt_io	*dup;		/* resent copies awaiting us */
	struct work_struct	work;
	struct delayed_work	stall_work;	/* inject_stall_ms */
	/* a block device backend's bio, on the data pages below */
	struct bio		bio;
	/* the data pages: in data_bvec up to 16 KiB, else allocated */
	unsigned int		nr_bvec;
	struct bio_vec		*bvec;
	struct bio_vec		data_bvec[TERN_TGT_INLINE_VECS];
};

extern struct mutex tern_tgt_mutex;
extern struct list_head tern_tgt_exports;
extern struct list_head tern_tgt_ports;
extern struct workqueue_struct *tern_tgt_wq;

static inline void tern_tgt_count(struct tern_tgt_export *exp,
				  enum tern_tgt_stat stat)
{
	this_cpu_inc(exp->stats->count[stat]);
}

/* The geometry, for a holder of exp->lock; NULL before the first enable. */
static inline struct tern_tgt_geom *
tern_tgt_geom_locked(struct tern_tgt_export *exp)
{
	return rcu_dereference_protected(exp->geom,
					 lockdep_is_held(&exp->lock));
}

/* The capacity the export announces, in sectors; any context. */
static inline u64 tern_tgt_capacity(struct tern_tgt_export *exp)
{
	struct tern_tgt_geom *g;
	u64 cap = 0;

	rcu_read_lock();
	g = rcu_dereference(exp->geom);
	if (g)
		cap = le64_to_cpu(READ_ONCE(g->info.capacity));
	rcu_read_unlock();
	return cap;
}

/* target_auth.c */
extern const struct config_item_type tern_tgt_hosts_type;
int tern_tgt_auth_key(struct tern_endpoint *ep, const char *identity,
		      u8 *key);
bool tern_tgt_host_has_key(const char *name);

/* target_configfs.c */
int tern_tgt_configfs_init(void);
void tern_tgt_configfs_exit(void);
void tern_tgt_export_put(struct tern_tgt_export *exp);

/* target_core.c */
struct tern_endpoint *tern_tgt_endpoint_create(struct tern_tgt_port *port);
struct tern_tgt_bind *tern_tgt_bind_get(struct tern_tgt_sess *ts, u64 handle);
void tern_tgt_bind_put(struct tern_tgt_bind *b);
int tern_tgt_bind_info(struct tern_tgt_bind *b, struct tern_blk_info *info);
void tern_tgt_binds_end(struct tern_tgt_port *port,
			struct tern_tgt_export *exp);
unsigned int tern_tgt_binds_end_host(const char *host);
void tern_tgt_watch_bind_ended(struct tern_tgt_bind *b);
void tern_tgt_binds_exit(void);
void tern_tgt_binds_init(void);
void tern_tgt_io_complete(struct tern_tgt_io *io, int status);

/* target_watch.c */
void tern_tgt_watch(struct tern_srv_req *sreq, struct tern_tgt_bind *b,
		    u64 known);
void tern_tgt_watch_export_init(struct tern_tgt_export *exp);
void tern_tgt_watch_show(struct seq_file *m);
void tern_tgt_watch_resize(struct tern_tgt_export *exp);
void tern_tgt_watch_export_gone(struct tern_tgt_export *exp);
void tern_tgt_watch_bind_closed(struct tern_tgt_bind *b);
void tern_tgt_watch_port_gone(struct tern_tgt_port *port);
void tern_tgt_watch_init(void);
void tern_tgt_watch_exit(void);

/* target_io.c */
int tern_tgt_backend_open(struct tern_tgt_export *exp);
void tern_tgt_geom_free(struct tern_tgt_export *exp);
void tern_tgt_backend_close(struct tern_tgt_export *exp);
void tern_tgt_refresh_capacity(struct tern_tgt_export *exp);
void tern_tgt_io_submit(struct tern_tgt_io *io);
int tern_tgt_io_init(struct tern_tgt_io *io, u32 len, gfp_t gfp);
void tern_tgt_io_put_pages(struct tern_tgt_io *io);

#endif /* _TERN_TARGET_H */
