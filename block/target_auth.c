// SPDX-License-Identifier: GPL-2.0
/*
 * tern_target: the hosts that authenticate, configfs hosts/NAME/key.
 *
 * A host is an identity (the host id a client maps with) and its key.
 * The messenger asks for the key when a connector claims the identity
 * (tern_tgt_auth_key()); a host with a key must prove it: OPEN refuses
 * its host id from a session that did not. Clearing or replacing a key,
 * or removing the host, revokes it: the sessions that proved the old key
 * are closed and the host's bindings end, so only the new key opens
 * the exports again.
 *
 * The key is never shown: reading hosts/NAME/key says whether one is set.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/slab.h>
#include <linux/string.h>
#include "target.h"

struct tern_tgt_host {
	struct config_item	item;
	struct list_head	entry;		/* tern_tgt_hosts */
	bool			has_key;
	u8			key[TERN_AUTH_KEY_LEN];
};

/*
 * The hosts list and keys; innermost of the target's locks. A lane's
 * receive worker takes it for the key lookup, so nothing that waits for
 * lanes may run under it.
 */
static DEFINE_MUTEX(tern_tgt_hosts_lock);
static LIST_HEAD(tern_tgt_hosts);

static struct tern_tgt_host *tern_tgt_host_find_locked(const char *name)
{
	struct tern_tgt_host *h;

	lockdep_assert_held(&tern_tgt_hosts_lock);
	list_for_each_entry(h, &tern_tgt_hosts, entry)
		if (!strcmp(config_item_name(&h->item), name))
			return h;
	return NULL;
}

/* &tern_endpoint_ops.auth_key: the key of @identity, or -ENOKEY. */
int tern_tgt_auth_key(struct tern_endpoint *ep, const char *identity,
		      u8 *key)
{
	struct tern_tgt_host *h;
	int err = -ENOKEY;

	mutex_lock(&tern_tgt_hosts_lock);
	h = tern_tgt_host_find_locked(identity);
	if (h && h->has_key) {
		memcpy(key, h->key, TERN_AUTH_KEY_LEN);
		err = 0;
	}
	mutex_unlock(&tern_tgt_hosts_lock);
	return err;
}

/* Does @name have to authenticate: it has a key. */
bool tern_tgt_host_has_key(const char *name)
{
	struct tern_tgt_host *h;
	bool ret;

	mutex_lock(&tern_tgt_hosts_lock);
	h = tern_tgt_host_find_locked(name);
	ret = h && h->has_key;
	mutex_unlock(&tern_tgt_hosts_lock);
	return ret;
}

/*
 * @name's key was set, cleared, replaced or removed (@what): close the
 * sessions that proved the old one on every port that listens, or is
 * about to, and end the host's bindings, proven or not. A first key
 * ends bindings made without one: from now on the host must prove it,
 * as a new OPEN would.
 */
static void tern_tgt_host_revoke(const char *name, const char *what)
{
	struct tern_tgt_port *port;
	unsigned int lanes = 0;

	mutex_lock(&tern_tgt_mutex);
	list_for_each_entry(port, &tern_tgt_ports, entry)
		if (port->ep)
			lanes += tern_endpoint_close_identity(port->ep, name);
	mutex_unlock(&tern_tgt_mutex);
	pr_info("host %s: key %s, %u lanes closed, %u bindings ended\n",
		name, what, lanes, tern_tgt_binds_end_host(name));
}

static inline struct tern_tgt_host *to_host(struct config_item *item)
{
	return container_of(item, struct tern_tgt_host, item);
}

static ssize_t tern_tgt_host_key_show(struct config_item *item, char *page)
{
	return sysfs_emit(page, "%s\n",
			  READ_ONCE(to_host(item)->has_key) ? "set" : "");
}

/* A key text sets the key; an empty line clears it. */
static ssize_t tern_tgt_host_key_store(struct config_item *item,
				       const char *page, size_t count)
{
	struct tern_tgt_host *h = to_host(item);
	const char *name = config_item_name(item);
	u8 key[TERN_AUTH_KEY_LEN];
	size_t len = count;
	bool had, set = false;
	int err;

	if (len && page[len - 1] == '\n')
		len--;
	if (len) {
		err = tern_key_parse(page, len, key);
		if (err) {
			pr_err("host %s: %s\n", name, err == -EBADMSG ?
			       "the key's checksum does not match" :
			       "key must be a TERNKEY-1 key text (ternadm key generate)");
			return -EINVAL;
		}
		set = true;
	}
	mutex_lock(&tern_tgt_hosts_lock);
	had = h->has_key;
	if (set)
		memcpy(h->key, key, sizeof(h->key));
	else
		memzero_explicit(h->key, sizeof(h->key));
	WRITE_ONCE(h->has_key, set);
	mutex_unlock(&tern_tgt_hosts_lock);
	memzero_explicit(key, sizeof(key));
	if (had || set)
		tern_tgt_host_revoke(name, had ? "revoked" : "set");
	return count;
}

CONFIGFS_ATTR(tern_tgt_host_, key);

static struct configfs_attribute *tern_tgt_host_attrs[] = {
	&tern_tgt_host_attr_key,
	NULL,
};

static void tern_tgt_host_release(struct config_item *item)
{
	kfree_sensitive(to_host(item));
}

static struct configfs_item_operations tern_tgt_host_item_ops = {
	.release	= tern_tgt_host_release,
};

static const struct config_item_type tern_tgt_host_type = {
	.ct_item_ops	= &tern_tgt_host_item_ops,
	.ct_attrs	= tern_tgt_host_attrs,
	.ct_owner	= THIS_MODULE,
};

static struct config_item *tern_tgt_hosts_make(struct config_group *group,
					       const char *name)
{
	struct tern_tgt_host *h;

	if (!tern_identity_valid(name, TERN_BLK_NAME_LEN)) {
		pr_err("host name '%.64s' must be " TERN_NAME_RULE "\n",
		       name);
		return ERR_PTR(-EINVAL);
	}
	h = kzalloc(sizeof(*h), GFP_KERNEL);
	if (!h)
		return ERR_PTR(-ENOMEM);
	config_item_init_type_name(&h->item, name, &tern_tgt_host_type);
	mutex_lock(&tern_tgt_hosts_lock);
	list_add_tail(&h->entry, &tern_tgt_hosts);
	mutex_unlock(&tern_tgt_hosts_lock);
	return &h->item;
}

static void tern_tgt_hosts_drop(struct config_group *group,
				struct config_item *item)
{
	struct tern_tgt_host *h = to_host(item);
	bool had;

	mutex_lock(&tern_tgt_hosts_lock);
	list_del_init(&h->entry);
	had = h->has_key;
	mutex_unlock(&tern_tgt_hosts_lock);
	if (had)
		tern_tgt_host_revoke(config_item_name(item), "revoked");
	config_item_put(item);
}

static struct configfs_group_operations tern_tgt_hosts_group_ops = {
	.make_item	= tern_tgt_hosts_make,
	.drop_item	= tern_tgt_hosts_drop,
};

const struct config_item_type tern_tgt_hosts_type = {
	.ct_group_ops	= &tern_tgt_hosts_group_ops,
	.ct_owner	= THIS_MODULE,
};
