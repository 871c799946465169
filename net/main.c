// SPDX-License-Identifier: GPL-2.0
/*
 * tern messenger core: module setup, transport registry, fault injection.
 *
 * Locking: tern_registry_lock (mutex) protects tern_transports. Lookups
 * take a reference on the transport module, so a transport cannot be
 * unloaded while a session, lane or listener uses it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/kmod.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/seq_file.h>
#include <linux/string.h>
#include "tern_core.h"

static LIST_HEAD(tern_transports);
static DEFINE_MUTEX(tern_registry_lock);

struct workqueue_struct *tern_wq;
DEFINE_PER_CPU(struct tern_live_objects, tern_live_objects);
struct dentry *tern_debugfs_root;

unsigned int tern_inject_fail_every;
module_param_named(inject_fail_every, tern_inject_fail_every, uint, 0644);
MODULE_PARM_DESC(inject_fail_every,
		 "Fail a transport operation on a live lane with a chance of one in N (0 = off; testing only)");

unsigned int tern_handshake_timeout_ms = 10000;
module_param_named(handshake_timeout_ms, tern_handshake_timeout_ms, uint, 0644);
MODULE_PARM_DESC(handshake_timeout_ms,
		 "Close a connection whose handshake has not completed after this many ms, at least 1000 (default 10000)");

unsigned int tern_max_handshakes = 256;
module_param_named(max_handshakes, tern_max_handshakes, uint, 0644);
MODULE_PARM_DESC(max_handshakes,
		 "Accepted connections per endpoint allowed to be in handshake at once (default 256)");

unsigned int tern_max_lane_faults = 8;
module_param_named(max_lane_faults, tern_max_lane_faults, uint, 0644);
MODULE_PARM_DESC(max_lane_faults,
		 "Fail a request with -EIO once this many lanes died while sending it or receiving its reply (0 = never; default 8)");

unsigned int tern_max_sessions = 1024;
module_param_named(max_sessions, tern_max_sessions, uint, 0644);
MODULE_PARM_DESC(max_sessions,
		 "Sessions per endpoint; a responder refuses new ones beyond it (default 1024)");

unsigned int tern_max_lanes = 4096;
module_param_named(max_lanes, tern_max_lanes, uint, 0644);
MODULE_PARM_DESC(max_lanes,
		 "Lanes past their handshake per endpoint; a responder refuses more (default 4096)");

unsigned int tern_max_handshakes_per_peer = 32;
module_param_named(max_handshakes_per_peer, tern_max_handshakes_per_peer, uint,
		   0644);
MODULE_PARM_DESC(max_handshakes_per_peer,
		 "Accepted connections from one remote address in handshake at once, per endpoint (0 = no per-address cap; default 32)");

unsigned int tern_max_sessions_per_peer = 128;
module_param_named(max_sessions_per_peer, tern_max_sessions_per_peer, uint,
		   0644);
MODULE_PARM_DESC(max_sessions_per_peer,
		 "Sessions one remote address may open on an endpoint; a responder refuses more (0 = no per-address cap; default 128)");

unsigned int tern_max_core_data_mib_per_session = 256;
module_param_named(max_core_data_mib_per_session,
		   tern_max_core_data_mib_per_session, uint, 0644);
MODULE_PARM_DESC(max_core_data_mib_per_session,
		 "MiB of request data the core allocates for a responder session whose ULP supplies no pages; more is refused with -ENOMEM (0 = no cap; default 256)");

unsigned int tern_max_core_data_mib = 1024;
module_param_named(max_core_data_mib, tern_max_core_data_mib, uint, 0644);
MODULE_PARM_DESC(max_core_data_mib,
		 "MiB of request data the core allocates for all responder sessions of an endpoint; more is refused with -ENOMEM (0 = no cap; default 1024)");

unsigned int tern_max_peer_keepalive_ms = 60000;
module_param_named(max_peer_keepalive_ms, tern_max_peer_keepalive_ms, uint,
		   0644);
MODULE_PARM_DESC(max_peer_keepalive_ms,
		 "Largest PING interval a responder accepts in a handshake (default 60000)");

unsigned int tern_tx_stall_timeout_ms = 30000;
module_param_named(tx_stall_timeout_ms, tern_tx_stall_timeout_ms, uint, 0644);
MODULE_PARM_DESC(tx_stall_timeout_ms,
		 "Close a responder lane whose queued frames made no progress for this many ms (0 = never; default 30000)");

static unsigned int inject_crc_every;
module_param(inject_crc_every, uint, 0644);
MODULE_PARM_DESC(inject_crc_every,
		 "Treat a received data CRC as wrong with a chance of one in N (0 = off; testing only)");

/*
 * Chance, not a counter: a deterministic "every Nth" can fall into step
 * with a retry loop (the same resent reply hit on every attempt, seen in
 * a test) and livelock the request it was meant to exercise.
 */
static bool tern_inject_one_in(unsigned int n)
{
	return n && get_random_u32_below(n) == 0;
}

/* Pretend a received data CRC did not match, to test recovery. */
bool tern_inject_crc(void)
{
	return tern_inject_one_in(READ_ONCE(inject_crc_every));
}

/**
 * tern_inject_fault - decide whether to fail this transport operation
 *
 * Fails an operation on a live lane with a chance of one in
 * inject_fail_every, like Ceph's ms_inject_socket_failures, so a test
 * gets that failure rate from any transport.
 * Return: true if the caller must fail this operation.
 */
bool tern_inject_fault(void)
{
	return tern_inject_one_in(READ_ONCE(tern_inject_fail_every));
}

static struct tern_transport_ops *tern_transport_find(const char *name)
{
	struct tern_transport_ops *ops;

	list_for_each_entry(ops, &tern_transports, entry)
		if (!strcmp(ops->name, name))
			return ops;
	return NULL;
}

/**
 * tern_transport_register - make a transport available to the core
 * @ops: the transport; must stay valid until tern_transport_unregister()
 *
 * Return: 0, -EINVAL for an incomplete table, -EEXIST if the scheme is
 * taken.
 */
int tern_transport_register(struct tern_transport_ops *ops)
{
	int ret = 0;

	if (!ops->name || !ops->owner || !ops->connect || !ops->listen ||
	    !ops->stop_listen || !ops->kick || !ops->shutdown)
		return -EINVAL;

	mutex_lock(&tern_registry_lock);
	if (tern_transport_find(ops->name))
		ret = -EEXIST;
	else
		list_add_tail(&ops->entry, &tern_transports);
	mutex_unlock(&tern_registry_lock);
	if (!ret)
		pr_info("transport %s registered\n", ops->name);
	return ret;
}
EXPORT_SYMBOL_GPL(tern_transport_register);

/**
 * tern_transport_unregister - remove a transport
 * @ops: a registered transport
 *
 * Called from the transport's module exit. Every user holds a module
 * reference, so there are no users left when this runs.
 */
void tern_transport_unregister(struct tern_transport_ops *ops)
{
	mutex_lock(&tern_registry_lock);
	list_del(&ops->entry);
	mutex_unlock(&tern_registry_lock);
	pr_info("transport %s unregistered\n", ops->name);
}
EXPORT_SYMBOL_GPL(tern_transport_unregister);

static const struct tern_transport_ops *tern_transport_try_get(const char *name)
{
	struct tern_transport_ops *ops;

	mutex_lock(&tern_registry_lock);
	ops = tern_transport_find(name);
	if (ops && !try_module_get(ops->owner))
		ops = NULL;
	mutex_unlock(&tern_registry_lock);
	return ops;
}

/**
 * tern_transport_get - look up a transport by URI scheme, loading it
 * @name: scheme, e.g. "tcp"
 *
 * Return: the transport with a module reference held, or NULL.
 */
const struct tern_transport_ops *tern_transport_get(const char *name)
{
	const struct tern_transport_ops *ops;

	ops = tern_transport_try_get(name);
	if (!ops) {
		request_module("tern-transport-%s", name);
		ops = tern_transport_try_get(name);
	}
	return ops;
}

void tern_transport_put(const struct tern_transport_ops *tops)
{
	module_put(tops->owner);
}

/**
 * tern_transport_query - is there such a transport, and what can it do
 * @name: scheme, e.g. "tcp"
 * @caps: set to TERN_TRANSPORT_* flags
 *
 * Loads the transport's module if need be, as a connect or a listen
 * would, so that a ULP refuses a setting when it is made rather than at
 * its first use, and names no transport itself.
 *
 * Return: 0, -EINVAL for a malformed name, or -EPROTONOSUPPORT.
 */
int tern_transport_query(const char *name, unsigned int *caps)
{
	const struct tern_transport_ops *ops;

	if (!tern_scheme_valid(name, strnlen(name, TERN_SCHEME_MAX)))
		return -EINVAL;
	ops = tern_transport_get(name);
	if (!ops)
		return -EPROTONOSUPPORT;
	*caps = (ops->encrypt ? TERN_TRANSPORT_ENCRYPTS : 0) |
		(ops->frame_tags ? TERN_TRANSPORT_SIGNS : 0);
	tern_transport_put(ops);
	return 0;
}
EXPORT_SYMBOL_GPL(tern_transport_query);

/* Every lane's counters since the module loaded, whatever became of it. */
struct tern_stats __percpu *tern_total_stats;

static int tern_total_stats_show(struct seq_file *m, void *v)
{
	struct tern_stats sum = {};

	tern_stats_add_pcpu(&sum, tern_total_stats);
	tern_stats_show(m, "", &sum);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tern_total_stats);

static int tern_obj_count(enum tern_obj obj)
{
	unsigned int cpu;
	int sum = 0;

	for_each_possible_cpu(cpu)
		sum += READ_ONCE(per_cpu(tern_live_objects, cpu).n[obj]);
	return sum;
}

static int tern_objects_show(struct seq_file *m, void *v)
{
	seq_printf(m, "endpoints %d\nsessions %d\nlanes %d\nsrv_reqs %d\n",
		   tern_obj_count(TERN_OBJ_ENDPOINT),
		   tern_obj_count(TERN_OBJ_SESSION),
		   tern_obj_count(TERN_OBJ_LANE),
		   tern_obj_count(TERN_OBJ_SRV_REQ));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tern_objects);

/* The legal state moves, as the code holds them (design.rst has them too) */
static int tern_moves_file_show(struct seq_file *m, void *v)
{
	tern_lane_moves_show(m);
	tern_session_moves_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tern_moves_file);

static int __init tern_init(void)
{
	tern_total_stats = alloc_percpu(struct tern_stats);
	if (!tern_total_stats)
		return -ENOMEM;
	tern_wq = alloc_workqueue("tern", WQ_MEM_RECLAIM | WQ_UNBOUND, 0);
	if (!tern_wq) {
		free_percpu(tern_total_stats);
		return -ENOMEM;
	}

	tern_debugfs_root = debugfs_create_dir("tern", NULL);
	debugfs_create_u32("inject_fail_every", 0600, tern_debugfs_root,
			   &tern_inject_fail_every);
	debugfs_create_u32("inject_crc_every", 0600, tern_debugfs_root,
			   &inject_crc_every);
	debugfs_create_file("objects", 0400, tern_debugfs_root, NULL,
			    &tern_objects_fops);
	debugfs_create_file("stats", 0400, tern_debugfs_root, NULL,
			    &tern_total_stats_fops);
	debugfs_create_file("moves", 0400, tern_debugfs_root, NULL,
			    &tern_moves_file_fops);
	tern_pages_init();
	return 0;
}

static void __exit tern_exit(void)
{
	unsigned int i;
	int n;

	debugfs_remove_recursive(tern_debugfs_root);
	destroy_workqueue(tern_wq);	/* runs pending frees first */
	tern_pages_exit();
	free_percpu(tern_total_stats);
	for (i = 0; i < TERN_OBJ_MAX; i++) {
		n = tern_obj_count(i);
		WARN(n, "tern: %d objects of kind %u leaked\n", n, i);
	}
}

module_init(tern_init);
module_exit(tern_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("tern messenger core: sessions, lanes and transports for network block I/O");
MODULE_VERSION(TERN_VERSION);
