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
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/hashtable.h>
#include <linux/jhash.h>
#include <net/ipv6.h>
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
	seq_printf(m, "peers %u\n", ep->nr_peers);
	seq_printf(m, "refused_peer_handshakes %llu\n",
		   ep->refused_peer_handshakes);
	seq_printf(m, "refused_peer_sessions %llu\n", ep->refused_peer_sessions);
	seq_printf(m, "auth_failures %llu\n", ep->auth_failures);
	mutex_unlock(&ep->lock);
	seq_printf(m, "tx_stalls %lld\n", atomic64_read(&ep->tx_stalls));
	seq_printf(m, "core_data_bytes %lld\n",
		   atomic64_read(&ep->core_data_bytes));
	seq_printf(m, "refused_core_data %lld\n",
		   atomic64_read(&ep->refused_core_data));
	/* Lanes that never joined a session (refused or junk). */
	tern_stats_add_pcpu(&sum, ep->stats);
	tern_stats_show(m, "unbound.", &sum);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tern_ep_stats);

/* One line per remote address holding something: what it holds. */
static int tern_ep_peers_show(struct seq_file *m, void *v)
{
	struct tern_endpoint *ep = m->private;
	struct tern_peer *peer;
	unsigned int bkt;

	mutex_lock(&ep->lock);
	hash_for_each(ep->peers, bkt, peer, node)
		seq_printf(m, "%pISc handshakes %u sessions %u\n", &peer->addr,
			   peer->handshakes, peer->sessions);
	mutex_unlock(&ep->lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tern_ep_peers);

/*
 * The address of @addr without its port, IPv4-mapped IPv6 as IPv4, into
 * @key (zeroed first, so keys compare with memcmp()). Return: the bytes
 * of @key that matter, or 0 for a family not tracked per address.
 */
static size_t tern_peer_key(const struct sockaddr_storage *addr,
			    struct sockaddr_storage *key)
{
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)addr;
	struct sockaddr_in6 *k6 = (struct sockaddr_in6 *)key;
	struct sockaddr_in *k4 = (struct sockaddr_in *)key;

	memset(key, 0, sizeof(*key));
	switch (addr->ss_family) {
	case AF_INET:
		k4->sin_family = AF_INET;
		k4->sin_addr = ((const struct sockaddr_in *)addr)->sin_addr;
		return sizeof(*k4);
	case AF_INET6:
		if (ipv6_addr_v4mapped(&a6->sin6_addr)) {
			k4->sin_family = AF_INET;
			k4->sin_addr.s_addr = a6->sin6_addr.s6_addr32[3];
			return sizeof(*k4);
		}
		k6->sin6_family = AF_INET6;
		k6->sin6_addr = a6->sin6_addr;
		k6->sin6_scope_id = a6->sin6_scope_id;	/* link-local */
		return sizeof(*k6);
	}
	return 0;
}

/**
 * tern_peer_get_locked - the entry of a remote address, created if new
 * @ep: the endpoint, ep->lock held
 * @addr: the remote address (its port is ignored)
 *
 * The caller counts something in the entry before dropping ep->lock, or
 * gives it back with tern_peer_put_locked().
 * Return: the entry; NULL for an address family not tracked (no
 * per-address caps then); ERR_PTR(-ENOMEM).
 */
struct tern_peer *tern_peer_get_locked(struct tern_endpoint *ep,
				       const struct sockaddr_storage *addr)
{
	struct sockaddr_storage key;
	struct tern_peer *peer;
	size_t len;
	u32 hash;

	lockdep_assert_held(&ep->lock);
	len = tern_peer_key(addr, &key);
	if (!len)
		return NULL;
	/* seeded: a client cannot pick addresses that share a bucket */
	hash = jhash(&key, len, ep->peer_seed);
	hash_for_each_possible(ep->peers, peer, node, hash)
		if (!memcmp(&peer->addr, &key, len))
			return peer;
	peer = kzalloc(sizeof(*peer), GFP_NOIO);
	if (!peer)
		return ERR_PTR(-ENOMEM);
	peer->addr = key;
	hash_add(ep->peers, &peer->node, hash);
	ep->nr_peers++;
	return peer;
}

/* Free @peer if it holds nothing any more; ep->lock held. */
void tern_peer_put_locked(struct tern_endpoint *ep, struct tern_peer *peer)
{
	lockdep_assert_held(&ep->lock);
	if (!peer || peer->handshakes || peer->sessions)
		return;
	hash_del(&peer->node);
	ep->nr_peers--;
	kfree(peer);
}

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
	    (conf->max_data && conf->max_data < TERN_MIN_MAX_DATA) ||
	    conf->req_space > TERN_MAX_REQ_SPACE)
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
	ep->require_integrity = conf->require_integrity;
	ep->req_space = conf->req_space;
	ep->group = conf->group;
	ep->peer_seed = get_random_u32();
	hash_init(ep->peers);
	mutex_init(&ep->lock);
	INIT_LIST_HEAD(&ep->sessions);
	INIT_LIST_HEAD(&ep->listeners);
	INIT_LIST_HEAD(&ep->lanes);
	init_waitqueue_head(&ep->wait);

	tern_obj_inc(TERN_OBJ_ENDPOINT);
	snprintf(dname, sizeof(dname), "%s.%u", ep->name, ep->id);
	ep->dbg = debugfs_create_dir(dname, tern_debugfs_root);
	debugfs_create_file("stats", 0400, ep->dbg, ep, &tern_ep_stats_fops);
	debugfs_create_file("peers", 0400, ep->dbg, ep, &tern_ep_peers_fops);
	return ep;
}
EXPORT_SYMBOL_GPL(tern_endpoint_create);

void *tern_endpoint_priv(struct tern_endpoint *ep)
{
	return ep->priv;
}
EXPORT_SYMBOL_GPL(tern_endpoint_priv);

/*
 * Responder sessions of grouped endpoints, by id, so that a lane may join
 * its session through any endpoint of the group (a requester's paths).
 * The lock nests inside ep->lock and sess->lock is not taken under it.
 */
static DEFINE_SPINLOCK(tern_group_lock);
static DEFINE_HASHTABLE(tern_group_sessions, 8);

/* @id's session in @ep's group, referenced; NULL if there is none */
struct tern_session *tern_group_find(struct tern_endpoint *ep, u64 id)
{
	struct tern_session *sess;

	spin_lock(&tern_group_lock);
	hash_for_each_possible(tern_group_sessions, sess, group_node, id) {
		if (sess->id == id && sess->ep->group == ep->group) {
			kref_get(&sess->ref);
			spin_unlock(&tern_group_lock);
			return sess;
		}
	}
	spin_unlock(&tern_group_lock);
	return NULL;
}

/*
 * Enter a new responder session of a grouped endpoint in the table;
 * -EBUSY if its group has one of that id already (another path of the
 * requester created it meanwhile). Without a group, nothing to do.
 */
int tern_group_add(struct tern_session *sess)
{
	struct tern_session *other;

	if (!sess->ep->group)
		return 0;
	spin_lock(&tern_group_lock);
	hash_for_each_possible(tern_group_sessions, other, group_node,
			       sess->id) {
		if (other->id == sess->id &&
		    other->ep->group == sess->ep->group) {
			spin_unlock(&tern_group_lock);
			return -EBUSY;
		}
	}
	hash_add(tern_group_sessions, &sess->group_node, sess->id);
	spin_unlock(&tern_group_lock);
	return 0;
}

void tern_group_del(struct tern_session *sess)
{
	if (!sess->ep->group)
		return;
	spin_lock(&tern_group_lock);
	if (!hlist_unhashed(&sess->group_node))
		hash_del(&sess->group_node);
	spin_unlock(&tern_group_lock);
}

/*
 * Close the lanes of @ep's responder sessions, those that came through
 * other endpoints of its group too; a lane that joins one later finds it
 * destroying and closes itself.
 */
static void tern_ep_close_sessions(struct tern_endpoint *ep)
{
	struct tern_session *sess;
	unsigned int i;

	mutex_lock(&ep->lock);
	list_for_each_entry(sess, &ep->sessions, ep_entry) {
		if (sess->requester)
			continue;
		spin_lock_bh(&sess->lock);
		sess->destroying = true;
		for (i = 0; i < sess->nr_slots; i++)
			if (sess->slots[i].lane)
				tern_lane_kill(sess->slots[i].lane,
					       -ESHUTDOWN);
		spin_unlock_bh(&sess->lock);
	}
	mutex_unlock(&ep->lock);
}

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
	tern_ep_close_sessions(ep);

	wait_event(ep->wait, !READ_ONCE(ep->nr_lanes) &&
		   !READ_ONCE(ep->nr_sessions));
	mutex_lock(&ep->lock);
	mutex_unlock(&ep->lock);

	/* every lane and session gave its counts back */
	WARN_ON_ONCE(ep->nr_peers || !hash_empty(ep->peers));
	WARN_ON_ONCE(atomic64_read(&ep->core_data_bytes));
	debugfs_remove_recursive(ep->dbg);
	ida_free(&tern_ep_ida, ep->id);
	mutex_destroy(&ep->lock);
	free_percpu(ep->stats);
	kfree(ep);
	tern_obj_dec(TERN_OBJ_ENDPOINT);
}
EXPORT_SYMBOL_GPL(tern_endpoint_destroy);

/* Give back a handshake counted for @peer (may be NULL); ep->lock held. */
static void tern_ep_handshake_uncount_locked(struct tern_endpoint *ep,
					     struct tern_peer *peer)
{
	lockdep_assert_held(&ep->lock);
	if (!WARN_ON_ONCE(!ep->nr_handshakes))
		ep->nr_handshakes--;
	if (!peer)
		return;
	if (!WARN_ON_ONCE(!peer->handshakes))
		peer->handshakes--;
	tern_peer_put_locked(ep, peer);
}

/* A handshake counted in tern_lane_accept() whose lane never came. */
void tern_endpoint_handshake_done(struct tern_endpoint *ep,
				  struct tern_peer *peer)
{
	mutex_lock(&ep->lock);
	tern_ep_handshake_uncount_locked(ep, peer);
	mutex_unlock(&ep->lock);
}

/* @cl's handshake is over (bound or gone): uncount it once; ep->lock held. */
void tern_lane_handshake_uncount_locked(struct tern_core_lane *cl)
{
	lockdep_assert_held(&cl->ep->lock);
	if (!cl->counted_handshake)
		return;
	cl->counted_handshake = false;
	tern_ep_handshake_uncount_locked(cl->ep, cl->peer);
	cl->peer = NULL;
}

void tern_endpoint_lane_gone(struct tern_endpoint *ep,
			     struct tern_core_lane *cl)
{
	mutex_lock(&ep->lock);
	tern_lane_handshake_uncount_locked(cl);
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
		tern_group_del(sess);
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
	char scheme[TERN_SCHEME_MAX];
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
	/*
	 * And the lanes that came in here: past the key lookup, which would
	 * otherwise bind later, or bound into a session another endpoint
	 * of its group holds, which that endpoint may have looked at before
	 * they were.
	 */
	list_for_each_entry(cl, &ep->lanes, ep_entry) {
		if (!cl->requester && (cl->proven || READ_ONCE(cl->auth)) &&
		    !test_bit(TERN_LANE_F_DYING, &cl->flags) &&
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
