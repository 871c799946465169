// SPDX-License-Identifier: GPL-2.0
/*
 * tern messenger core: endpoints and listeners.
 *
 * An endpoint is a local messenger instance. It keeps lists of its
 * sessions (requester and responder), listeners and lanes, so that
 * tern_endpoint_destroy() can take everything down and wait for it.
 *
 * Locking: ep->lock (mutex) protects the lists and counters; it is taken
 * outside any sess->lock. Counters that a destroyer waits on are
 * decremented under ep->lock, and the destroyer takes ep->lock once more
 * after waking, so the last decrementer is out before the endpoint is
 * freed.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/idr.h>
#include <linux/random.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include "tern_core.h"

static DEFINE_IDA(tern_ep_ida);

#define TERN_EP_DEF_MAX_QDEPTH	1024
#define TERN_EP_DEF_MAX_DATA	(4U << 20)

static int tern_ep_stats_show(struct seq_file *m, void *v)
{
	struct tern_endpoint *ep = m->private;
	struct tern_stats sum = {};

	seq_printf(m, "incarnation %016llx\n", ep->incarnation);
	mutex_lock(&ep->lock);
	seq_printf(m, "lanes %u\n", ep->nr_lanes);
	seq_printf(m, "sessions %u\n", ep->nr_sessions);
	seq_printf(m, "handshakes %u\n", ep->nr_handshakes);
	seq_printf(m, "bound_lanes %u\n", tern_ep_bound_lanes(ep));
	seq_printf(m, "refused_handshakes %llu\n", ep->refused_handshakes);
	seq_printf(m, "refused_sessions %llu\n", ep->refused_sessions);
	seq_printf(m, "refused_lanes %llu\n", ep->refused_lanes);
	seq_printf(m, "auth_failures %llu\n", ep->auth_failures);
	mutex_unlock(&ep->lock);
	seq_printf(m, "tx_stalls %lld\n", atomic64_read(&ep->tx_stalls));
	/* Lanes that never joined a session (refused or junk). */
	tern_stats_add_pcpu(&sum, ep->stats);
	tern_stats_show(m, "unbound.", &sum);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tern_ep_stats);

/**
 * tern_endpoint_create - create a local messenger instance
 * @conf: configuration; @conf->name is required
 *
 * Return: the endpoint or ERR_PTR(-EINVAL/-ENOMEM).
 */
struct tern_endpoint *tern_endpoint_create(const struct tern_endpoint_conf *conf)
{
	struct tern_endpoint *ep;
	char dname[48];
	int id;

	if (!conf || !conf->name || !conf->name[0] ||
	    strlen(conf->name) >= sizeof(ep->name) || strchr(conf->name, '/') ||
	    conf->max_lanes > TERN_WIRE_MAX_LANES ||
	    conf->max_queue_depth > TERN_WIRE_MAX_QDEPTH ||
	    conf->max_data > TERN_WIRE_MAX_DATA ||
	    (conf->max_data && conf->max_data < TERN_MIN_MAX_DATA))
		return ERR_PTR(-EINVAL);

	ep = kzalloc(sizeof(*ep), GFP_KERNEL);
	if (!ep)
		return ERR_PTR(-ENOMEM);
	ep->stats = alloc_percpu(struct tern_stats);
	if (!ep->stats) {
		kfree(ep);
		return ERR_PTR(-ENOMEM);
	}
	id = ida_alloc(&tern_ep_ida, GFP_KERNEL);
	if (id < 0) {
		free_percpu(ep->stats);
		kfree(ep);
		return ERR_PTR(id);
	}
	ep->id = id;
	strscpy(ep->name, conf->name, sizeof(ep->name));
	ep->ops = conf->ops;
	ep->priv = conf->priv;
	ep->incarnation = get_random_u64();
	ep->max_lanes = conf->max_lanes ?: TERN_WIRE_MAX_LANES;
	ep->max_queue_depth = conf->max_queue_depth ?: TERN_EP_DEF_MAX_QDEPTH;
	ep->max_data = conf->max_data ?: TERN_EP_DEF_MAX_DATA;
	ep->max_session_bytes = conf->max_session_bytes;
	ep->require_auth = conf->require_auth;
	ep->require_encrypt = conf->require_encrypt;
	mutex_init(&ep->lock);
	INIT_LIST_HEAD(&ep->sessions);
	INIT_LIST_HEAD(&ep->listeners);
	INIT_LIST_HEAD(&ep->lanes);
	init_waitqueue_head(&ep->wait);

	tern_obj_inc(TERN_OBJ_ENDPOINT);
	snprintf(dname, sizeof(dname), "%s.%u", ep->name, ep->id);
	ep->dbg = debugfs_create_dir(dname, tern_debugfs_root);
	debugfs_create_file("stats", 0400, ep->dbg, ep, &tern_ep_stats_fops);
	return ep;
}
EXPORT_SYMBOL_GPL(tern_endpoint_create);

void *tern_endpoint_priv(struct tern_endpoint *ep)
{
	return ep->priv;
}
EXPORT_SYMBOL_GPL(tern_endpoint_priv);

static struct tern_session *tern_ep_first_requester(struct tern_endpoint *ep)
{
	struct tern_session *sess;

	mutex_lock(&ep->lock);
	list_for_each_entry(sess, &ep->sessions, ep_entry) {
		if (sess->requester) {
			mutex_unlock(&ep->lock);
			return sess;
		}
	}
	mutex_unlock(&ep->lock);
	return NULL;
}

/**
 * tern_endpoint_destroy - stop listening, close every session and lane
 * @ep: the endpoint
 *
 * Requester sessions still open are destroyed (with a warning: the ULP
 * should have done it). Waits for the ULP to answer every responder
 * request it holds. Process context.
 */
void tern_endpoint_destroy(struct tern_endpoint *ep)
{
	struct tern_listener *lis;
	struct tern_session *sess;
	struct tern_core_lane *cl;

	mutex_lock(&ep->lock);
	ep->dying = true;
	mutex_unlock(&ep->lock);

	for (;;) {
		mutex_lock(&ep->lock);
		lis = list_first_entry_or_null(&ep->listeners,
					       struct tern_listener, entry);
		mutex_unlock(&ep->lock);
		if (!lis)
			break;
		tern_listener_stop(lis);
	}

	while ((sess = tern_ep_first_requester(ep))) {
		WARN_ONCE(1, "tern: endpoint %s destroyed with open sessions\n",
			  ep->name);
		tern_session_destroy(sess);
	}

	mutex_lock(&ep->lock);
	list_for_each_entry(cl, &ep->lanes, ep_entry)
		tern_lane_kill(cl, -ESHUTDOWN);
	mutex_unlock(&ep->lock);

	wait_event(ep->wait, !READ_ONCE(ep->nr_lanes) &&
		   !READ_ONCE(ep->nr_sessions));
	mutex_lock(&ep->lock);
	mutex_unlock(&ep->lock);

	debugfs_remove_recursive(ep->dbg);
	ida_free(&tern_ep_ida, ep->id);
	mutex_destroy(&ep->lock);
	free_percpu(ep->stats);
	kfree(ep);
	tern_obj_dec(TERN_OBJ_ENDPOINT);
}
EXPORT_SYMBOL_GPL(tern_endpoint_destroy);

void tern_endpoint_handshake_done(struct tern_endpoint *ep)
{
	mutex_lock(&ep->lock);
	ep->nr_handshakes--;
	mutex_unlock(&ep->lock);
}

void tern_endpoint_lane_gone(struct tern_endpoint *ep,
			     struct tern_core_lane *cl)
{
	mutex_lock(&ep->lock);
	if (cl->counted_handshake) {
		cl->counted_handshake = false;
		ep->nr_handshakes--;
	}
	list_del_init(&cl->ep_entry);
	ep->nr_lanes--;
	wake_up_all(&ep->wait);
	mutex_unlock(&ep->lock);
}

int tern_endpoint_link_session(struct tern_endpoint *ep,
			       struct tern_session *sess)
{
	mutex_lock(&ep->lock);
	if (ep->dying) {
		mutex_unlock(&ep->lock);
		return -ESHUTDOWN;
	}
	ep->nr_sessions++;
	sess->counted = true;
	list_add_tail(&sess->ep_entry, &ep->sessions);
	sess->linked = true;
	kref_get(&sess->ref);	/* the list's reference */
	mutex_unlock(&ep->lock);
	tern_session_debugfs(sess);
	return 0;
}

/*
 * Take @sess off the endpoint. A responder session is only unlinked while
 * it has no lane: a lane may have rejoined since the caller looked.
 */
void tern_endpoint_unlink_session(struct tern_session *sess)
{
	struct tern_endpoint *ep = sess->ep;
	bool put = false;

	mutex_lock(&ep->lock);
	spin_lock_bh(&sess->lock);
	if (sess->linked && (sess->requester || !sess->nr_lanes)) {
		list_del_init(&sess->ep_entry);
		sess->linked = false;
		put = true;
	}
	spin_unlock_bh(&sess->lock);
	if (put) {
		/* A successor with the same id may be created right after. */
		debugfs_remove_recursive(sess->dbg);
		sess->dbg = NULL;
	}
	mutex_unlock(&ep->lock);
	if (put)
		tern_session_put(sess);
}

/**
 * tern_listen - accept sessions on an address
 * @ep: the endpoint
 * @uri: "tcp://HOST[:PORT]", e.g. "tcp://0.0.0.0:7447" or "tcp://[::1]"
 *
 * Return: the listener, or ERR_PTR: -EINVAL, -EPROTONOSUPPORT, a bind or
 * listen error, -ESHUTDOWN.
 */
struct tern_listener *tern_listen(struct tern_endpoint *ep, const char *uri)
{
	const struct tern_transport_ops *tops;
	struct tern_listener *lis;
	char scheme[16];
	int err;

	lis = kzalloc(sizeof(*lis), GFP_KERNEL);
	if (!lis)
		return ERR_PTR(-ENOMEM);
	err = tern_parse_uri(uri, scheme, sizeof(scheme), &lis->addr);
	if (err)
		goto out_free;
	tops = tern_transport_get(scheme);
	if (!tops) {
		err = -EPROTONOSUPPORT;
		goto out_free;
	}
	lis->tops = tops;
	lis->ep = ep;
	INIT_LIST_HEAD(&lis->entry);

	mutex_lock(&ep->lock);
	if (ep->dying) {
		mutex_unlock(&ep->lock);
		err = -ESHUTDOWN;
		goto out_put;
	}
	list_add_tail(&lis->entry, &ep->listeners);
	mutex_unlock(&ep->lock);

	err = tops->listen(lis);
	if (err) {
		mutex_lock(&ep->lock);
		list_del(&lis->entry);
		mutex_unlock(&ep->lock);
		goto out_put;
	}
	return lis;

out_put:
	tern_transport_put(tops);
out_free:
	kfree(lis);
	return ERR_PTR(err);
}
EXPORT_SYMBOL_GPL(tern_listen);

/**
 * tern_listener_stop - stop accepting and free the listener
 * @lis: from tern_listen()
 *
 * Lanes already accepted live on. Process context.
 */
void tern_listener_stop(struct tern_listener *lis)
{
	struct tern_endpoint *ep = lis->ep;

	mutex_lock(&ep->lock);
	list_del(&lis->entry);
	mutex_unlock(&ep->lock);
	lis->tops->stop_listen(lis);
	tern_transport_put(lis->tops);
	kfree(lis);
}
EXPORT_SYMBOL_GPL(tern_listener_stop);

/**
 * tern_endpoint_close_identity - end every session an identity proved
 * @ep: a responder endpoint
 * @identity: the identity whose key was revoked
 *
 * Closes every lane of the responder sessions authenticated as
 * @identity; their requests already in progress still finish. The
 * connector's reconnections must prove the key again, so once the key is
 * gone (&tern_endpoint_ops.auth_key answers -ENOKEY) they are refused.
 * Return: the number of lanes closed.
 */
unsigned int tern_endpoint_close_identity(struct tern_endpoint *ep,
					  const char *identity)
{
	struct tern_session *sess;
	struct tern_core_lane *cl;
	unsigned int n = 0, i;

	mutex_lock(&ep->lock);
	list_for_each_entry(sess, &ep->sessions, ep_entry) {
		if (sess->requester || !(sess->info.features & TERN_FEAT_AUTH) ||
		    strcmp(sess->identity, identity))
			continue;
		spin_lock_bh(&sess->lock);
		for (i = 0; i < sess->nr_slots; i++) {
			if (sess->slots[i].lane) {
				tern_lane_kill(sess->slots[i].lane,
					       -EKEYREVOKED);
				n++;
			}
		}
		spin_unlock_bh(&sess->lock);
	}
	/* and lanes past the key lookup that would otherwise bind later */
	list_for_each_entry(cl, &ep->lanes, ep_entry) {
		if (!cl->requester && !cl->bound && READ_ONCE(cl->auth) &&
		    !strncmp(cl->hello_rx.identity, identity,
			     sizeof(cl->hello_rx.identity))) {
			tern_lane_kill(cl, -EKEYREVOKED);
			n++;
		}
	}
	mutex_unlock(&ep->lock);
	return n;
}
EXPORT_SYMBOL_GPL(tern_endpoint_close_identity);
