// SPDX-License-Identifier: GPL-2.0
/*
 * tern_target: configfs front end, in the style of nvmet.
 *
 *   /sys/kernel/config/tern/
 *     exports/NAME/{device_path,read_only,require_auth,allowed_hosts,
 *                   uuid,enable,stats,revalidate_size}
 *     ports/NAME/{transport,address,service,max_lanes,max_queue_depth,
 *                 require_auth,require_encrypt,require_integrity,
 *                 enable}
 *     ports/NAME/exports/LINK -> ../../../exports/NAME
 *     hosts/NAME/key                          (target_auth.c)
 *
 * Every store validates strictly and logs why it refused. An enabled
 * export or port refuses configuration changes (-EBUSY); disable first.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ctype.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <tern/blk_names.h>
#include "target.h"

/* Protects the export and port lists and every port's links. */
DEFINE_MUTEX(tern_tgt_mutex);
LIST_HEAD(tern_tgt_exports);
LIST_HEAD(tern_tgt_ports);
static u64 tern_tgt_port_ids;	/* under tern_tgt_mutex */
struct workqueue_struct *tern_tgt_wq;

static const struct config_item_type tern_tgt_export_type;

/* Copy a configfs value without its trailing newline; 0 or -EINVAL. */
static int tern_tgt_value(const char *page, size_t count, char *buf,
			  size_t size)
{
	size_t len = count;
	size_t i;

	if (len && page[len - 1] == '\n')
		len--;
	if (len >= size)
		return -EINVAL;
	for (i = 0; i < len; i++)
		if (!isprint(page[i]))
			return -EINVAL;
	memcpy(buf, page, len);
	buf[len] = '\0';
	return 0;
}

/* ---- exports ---- */

static inline struct tern_tgt_export *to_export(struct config_item *item)
{
	return container_of(to_config_group(item), struct tern_tgt_export,
			    group);
}

static void tern_tgt_export_release(struct kref *ref)
{
	struct tern_tgt_export *exp = container_of(ref, struct tern_tgt_export,
						   ref);

	kfree(exp->device_path);
	tern_tgt_geom_free(exp);
	percpu_ref_exit(&exp->io_ref);
	free_percpu(exp->stats);
	kfree(exp);
}

/* The last I/O of a disabled instance left (see tern_tgt_export_disable) */
static void tern_tgt_export_io_release(struct percpu_ref *ref)
{
	struct tern_tgt_export *exp = container_of(ref, struct tern_tgt_export,
						   io_ref);

	complete(&exp->io_done);
}

void tern_tgt_export_put(struct tern_tgt_export *exp)
{
	kref_put(&exp->ref, tern_tgt_export_release);
}

/* Caller holds exp->lock. */
static void tern_tgt_export_disable(struct tern_tgt_export *exp)
{
	if (!exp->enabled)
		return;
	/* bindings to this instance are stale, and no new I/O gets in */
	WRITE_ONCE(exp->gen, exp->gen + 1);
	percpu_ref_kill(&exp->io_ref);
	tern_tgt_watch_export_gone(exp);
	wait_for_completion(&exp->io_done);	/* the I/O that got in */
	tern_tgt_backend_close(exp);
	exp->enabled = false;
	pr_info("export %s disabled\n", exp->name);
}

static ssize_t tern_tgt_export_device_path_show(struct config_item *item,
						char *page)
{
	struct tern_tgt_export *exp = to_export(item);
	ssize_t ret;

	mutex_lock(&exp->lock);
	ret = sysfs_emit(page, "%s\n", exp->device_path ?: "");
	mutex_unlock(&exp->lock);
	return ret;
}

static ssize_t tern_tgt_export_device_path_store(struct config_item *item,
						 const char *page, size_t count)
{
	struct tern_tgt_export *exp = to_export(item);
	const char *name = config_item_name(item);
	char *path, *dup;
	int err;

	path = kmalloc(PATH_MAX, GFP_KERNEL);
	if (!path)
		return -ENOMEM;
	err = tern_tgt_value(page, count, path, PATH_MAX);
	if (err || path[0] != '/') {
		pr_err("export %s: device_path must be an absolute path\n",
		       name);
		kfree(path);
		return -EINVAL;
	}
	/* made before the old one goes: a failed write changes nothing */
	dup = kstrdup(path, GFP_KERNEL);
	kfree(path);
	if (!dup)
		return -ENOMEM;
	mutex_lock(&exp->lock);
	if (exp->enabled) {
		mutex_unlock(&exp->lock);
		pr_err("export %s: disable it before changing device_path\n",
		       name);
		kfree(dup);
		return -EBUSY;
	}
	kfree(exp->device_path);
	exp->device_path = dup;
	mutex_unlock(&exp->lock);
	return count;
}

static ssize_t tern_tgt_export_read_only_show(struct config_item *item,
					      char *page)
{
	return sysfs_emit(page, "%d\n", READ_ONCE(to_export(item)->read_only));
}

/* A yes/no setting of the export, changed while it is disabled. */
static ssize_t tern_tgt_export_flag_store(struct config_item *item,
					  const char *page, size_t count,
					  const char *what, bool *flag)
{
	struct tern_tgt_export *exp = to_export(item);
	bool val;

	if (kstrtobool(page, &val)) {
		pr_err("export %s: %s takes 0 or 1\n", config_item_name(item),
		       what);
		return -EINVAL;
	}
	mutex_lock(&exp->lock);
	if (exp->enabled) {
		mutex_unlock(&exp->lock);
		pr_err("export %s: disable it before changing %s\n",
		       config_item_name(item), what);
		return -EBUSY;
	}
	WRITE_ONCE(*flag, val);
	mutex_unlock(&exp->lock);
	return count;
}

static ssize_t tern_tgt_export_read_only_store(struct config_item *item,
					       const char *page, size_t count)
{
	return tern_tgt_export_flag_store(item, page, count, "read_only",
					  &to_export(item)->read_only);
}

static ssize_t tern_tgt_export_allowed_hosts_show(struct config_item *item,
						  char *page)
{
	struct tern_tgt_export *exp = to_export(item);
	ssize_t len = 0;
	unsigned int i;

	mutex_lock(&exp->lock);
	for (i = 0; i < exp->nr_hosts; i++)
		len += sysfs_emit_at(page, len, "%s\n", exp->hosts[i]);
	mutex_unlock(&exp->lock);
	return len;
}

/* A comma, space or newline separated list; empty allows every host. */
static ssize_t tern_tgt_export_allowed_hosts_store(struct config_item *item,
						   const char *page,
						   size_t count)
{
	struct tern_tgt_export *exp = to_export(item);
	const char *name = config_item_name(item);
	char (*hosts)[TERN_BLK_NAME_LEN];
	char *buf, *p, *tok;
	unsigned int n = 0, i;
	int err = -EINVAL;

	/* a NUL would end the list early: "\0hostA" would allow everyone */
	if (count >= PAGE_SIZE || memchr(page, '\0', count))
		return -EINVAL;
	buf = kmemdup_nul(page, count, GFP_KERNEL);
	hosts = kcalloc(TERN_TGT_MAX_HOSTS, TERN_BLK_NAME_LEN, GFP_KERNEL);
	if (!buf || !hosts) {
		err = -ENOMEM;
		goto out;
	}
	p = buf;
	while ((tok = strsep(&p, ",\n\t "))) {
		if (!*tok)
			continue;
		if (!tern_blk_name_ok(tok)) {
			pr_err("export %s: bad host id '%.64s' (" TERN_NAME_RULE ")\n",
			       name, tok);
			goto out;
		}
		for (i = 0; i < n; i++)
			if (!strcmp(hosts[i], tok))
				break;
		if (i < n)
			continue;
		if (n == TERN_TGT_MAX_HOSTS) {
			pr_err("export %s: at most %d allowed hosts\n", name,
			       TERN_TGT_MAX_HOSTS);
			goto out;
		}
		strscpy(hosts[n++], tok, TERN_BLK_NAME_LEN);
	}
	mutex_lock(&exp->lock);
	if (exp->enabled) {
		pr_err("export %s: disable it before changing allowed_hosts\n",
		       name);
		err = -EBUSY;
	} else {
		memcpy(exp->hosts, hosts, sizeof(exp->hosts));
		exp->nr_hosts = n;
		err = 0;
	}
	mutex_unlock(&exp->lock);
out:
	kfree(hosts);
	kfree(buf);
	return err ?: count;
}

/*
 * The export's persistent name, as nvmet's device_uuid: a random one from
 * mkdir, or one written while disabled (to keep an export's name when its
 * configuration is rebuilt). The nil uuid is refused: on the wire it
 * means "no uuid".
 */
static ssize_t tern_tgt_export_uuid_show(struct config_item *item, char *page)
{
	struct tern_tgt_export *exp = to_export(item);
	ssize_t ret;

	mutex_lock(&exp->lock);
	ret = sysfs_emit(page, "%pUb\n", &exp->uuid);
	mutex_unlock(&exp->lock);
	return ret;
}

static ssize_t tern_tgt_export_uuid_store(struct config_item *item,
					  const char *page, size_t count)
{
	struct tern_tgt_export *exp = to_export(item);
	const char *name = config_item_name(item);
	char buf[UUID_STRING_LEN + 1];
	uuid_t uuid;

	if (tern_tgt_value(page, count, buf, sizeof(buf)) ||
	    uuid_parse(buf, &uuid) || uuid_is_null(&uuid)) {
		pr_err("export %s: uuid takes a non-nil uuid, as xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx\n",
		       name);
		return -EINVAL;
	}
	mutex_lock(&exp->lock);
	if (exp->enabled) {
		mutex_unlock(&exp->lock);
		pr_err("export %s: disable it before changing uuid\n", name);
		return -EBUSY;
	}
	uuid_copy(&exp->uuid, &uuid);
	mutex_unlock(&exp->lock);
	return count;
}

static ssize_t tern_tgt_export_enable_show(struct config_item *item,
					   char *page)
{
	return sysfs_emit(page, "%d\n", READ_ONCE(to_export(item)->enabled));
}

static ssize_t tern_tgt_export_enable_store(struct config_item *item,
					    const char *page, size_t count)
{
	struct tern_tgt_export *exp = to_export(item);
	bool val;
	int err = 0;

	if (kstrtobool(page, &val)) {
		pr_err("export %s: enable takes 0 or 1\n",
		       config_item_name(item));
		return -EINVAL;
	}
	mutex_lock(&exp->lock);
	if (val && !exp->enabled) {
		err = tern_tgt_backend_open(exp);
		if (!err) {
			reinit_completion(&exp->io_done);
			percpu_ref_reinit(&exp->io_ref);
			WRITE_ONCE(exp->enabled, true);
		}
	} else if (!val) {
		tern_tgt_export_disable(exp);
	}
	mutex_unlock(&exp->lock);
	return err ?: count;
}

/*
 * Read the backend's size again and tell the clients watching the export
 * if it changed, as nvmet's revalidate_size does; the target also looks
 * by itself every watch_hold seconds while a client watches.
 */
static ssize_t tern_tgt_export_revalidate_size_store(struct config_item *item,
						     const char *page,
						     size_t count)
{
	struct tern_tgt_export *exp = to_export(item);
	u64 old, cap;
	bool val;

	if (kstrtobool(page, &val) || !val) {
		pr_err("export %s: revalidate_size takes 1\n",
		       config_item_name(item));
		return -EINVAL;
	}
	mutex_lock(&exp->lock);
	if (!exp->enabled) {
		mutex_unlock(&exp->lock);
		pr_err("export %s: enable it before revalidate_size\n",
		       config_item_name(item));
		return -ENODEV;
	}
	old = tern_tgt_capacity(exp);
	tern_tgt_refresh_capacity(exp);
	cap = tern_tgt_capacity(exp);
	mutex_unlock(&exp->lock);
	if (cap != old)
		pr_info("export %s: capacity %llu -> %llu sectors\n",
			config_item_name(item), old, cap);
	tern_tgt_watch_resize(exp);
	return count;
}

static const char * const tern_tgt_stat_names[TERN_TGT_STAT_NR] = {
	[TERN_TGT_STAT_READS]		= "reads",
	[TERN_TGT_STAT_WRITES]		= "writes",
	[TERN_TGT_STAT_FUA]		= "fua",
	[TERN_TGT_STAT_FLUSHES]		= "flushes",
	[TERN_TGT_STAT_DISCARDS]	= "discards",
	[TERN_TGT_STAT_WRITE_ZEROES]	= "write_zeroes",
	[TERN_TGT_STAT_ERRORS]		= "errors",
};

/* One "name count" line per counter, since the export was made. */
static ssize_t tern_tgt_export_stats_show(struct config_item *item,
					  char *page)
{
	struct tern_tgt_export *exp = to_export(item);
	int i, cpu, len = 0;
	u64 sum;

	for (i = 0; i < TERN_TGT_STAT_NR; i++) {
		sum = 0;
		for_each_possible_cpu(cpu)
			sum += per_cpu_ptr(exp->stats, cpu)->count[i];
		len += sysfs_emit_at(page, len, "%s %llu\n",
				     tern_tgt_stat_names[i], sum);
	}
	return len;
}

static ssize_t tern_tgt_export_require_auth_show(struct config_item *item,
						 char *page)
{
	return sysfs_emit(page, "%d\n",
			  READ_ONCE(to_export(item)->require_auth));
}

static ssize_t tern_tgt_export_require_auth_store(struct config_item *item,
						  const char *page,
						  size_t count)
{
	return tern_tgt_export_flag_store(item, page, count, "require_auth",
					  &to_export(item)->require_auth);
}

CONFIGFS_ATTR(tern_tgt_export_, device_path);
CONFIGFS_ATTR(tern_tgt_export_, read_only);
CONFIGFS_ATTR(tern_tgt_export_, require_auth);
CONFIGFS_ATTR(tern_tgt_export_, allowed_hosts);
CONFIGFS_ATTR(tern_tgt_export_, uuid);
CONFIGFS_ATTR(tern_tgt_export_, enable);
CONFIGFS_ATTR_RO(tern_tgt_export_, stats);
CONFIGFS_ATTR_WO(tern_tgt_export_, revalidate_size);

static struct configfs_attribute *tern_tgt_export_attrs[] = {
	&tern_tgt_export_attr_device_path,
	&tern_tgt_export_attr_read_only,
	&tern_tgt_export_attr_require_auth,
	&tern_tgt_export_attr_allowed_hosts,
	&tern_tgt_export_attr_uuid,
	&tern_tgt_export_attr_enable,
	&tern_tgt_export_attr_stats,
	&tern_tgt_export_attr_revalidate_size,
	NULL,
};

static void tern_tgt_export_item_release(struct config_item *item)
{
	tern_tgt_export_put(to_export(item));
}

static struct configfs_item_operations tern_tgt_export_item_ops = {
	.release	= tern_tgt_export_item_release,
};

static const struct config_item_type tern_tgt_export_type = {
	.ct_item_ops	= &tern_tgt_export_item_ops,
	.ct_attrs	= tern_tgt_export_attrs,
	.ct_owner	= THIS_MODULE,
};

static struct config_group *tern_tgt_exports_make(struct config_group *group,
						  const char *name)
{
	struct tern_tgt_export *exp;

	if (!tern_blk_name_ok(name)) {
		pr_err("export name '%.64s' must be " TERN_NAME_RULE "\n",
		       name);
		return ERR_PTR(-EINVAL);
	}
	exp = kzalloc(sizeof(*exp), GFP_KERNEL);
	if (!exp)
		return ERR_PTR(-ENOMEM);
	exp->stats = alloc_percpu(struct tern_tgt_stats);
	if (!exp->stats) {
		kfree(exp);
		return ERR_PTR(-ENOMEM);
	}
	/* dead until enabled; zero again once a disable's I/O drained */
	if (percpu_ref_init(&exp->io_ref, tern_tgt_export_io_release,
			    PERCPU_REF_INIT_DEAD, GFP_KERNEL)) {
		free_percpu(exp->stats);
		kfree(exp);
		return ERR_PTR(-ENOMEM);
	}
	init_completion(&exp->io_done);
	kref_init(&exp->ref);
	mutex_init(&exp->lock);
	uuid_gen(&exp->uuid);	/* random (v4), kept until changed */
	tern_tgt_watch_export_init(exp);
	INIT_LIST_HEAD(&exp->entry);
	strscpy(exp->name, name, sizeof(exp->name));
	config_group_init_type_name(&exp->group, name, &tern_tgt_export_type);

	mutex_lock(&tern_tgt_mutex);
	list_add_tail(&exp->entry, &tern_tgt_exports);
	mutex_unlock(&tern_tgt_mutex);
	return &exp->group;
}

/* rmdir: new OPENs stop finding it, sessions using it fail with -ENODEV. */
static void tern_tgt_exports_drop(struct config_group *group,
				  struct config_item *item)
{
	struct tern_tgt_export *exp = to_export(item);

	mutex_lock(&tern_tgt_mutex);
	list_del_init(&exp->entry);
	mutex_unlock(&tern_tgt_mutex);

	mutex_lock(&exp->lock);
	tern_tgt_export_disable(exp);
	mutex_unlock(&exp->lock);
	config_item_put(item);
}

static struct configfs_group_operations tern_tgt_exports_group_ops = {
	.make_group	= tern_tgt_exports_make,
	.drop_item	= tern_tgt_exports_drop,
};

static const struct config_item_type tern_tgt_exports_type = {
	.ct_group_ops	= &tern_tgt_exports_group_ops,
	.ct_owner	= THIS_MODULE,
};

/* ---- ports ---- */

static inline struct tern_tgt_port *to_port(struct config_item *item)
{
	return container_of(to_config_group(item), struct tern_tgt_port,
			    group);
}

static ssize_t tern_tgt_port_busy(struct tern_tgt_port *port,
				  const char *what)
{
	pr_err("port %s: disable it before changing %s\n",
	       config_item_name(&port->group.cg_item), what);
	return -EBUSY;
}

static ssize_t tern_tgt_port_transport_show(struct config_item *item,
					    char *page)
{
	struct tern_tgt_port *port = to_port(item);
	ssize_t ret;

	mutex_lock(&port->lock);
	ret = sysfs_emit(page, "%s\n", port->transport);
	mutex_unlock(&port->lock);
	return ret;
}

static ssize_t tern_tgt_port_transport_store(struct config_item *item,
					     const char *page, size_t count)
{
	struct tern_tgt_port *port = to_port(item);
	char buf[TERN_SCHEME_MAX];
	unsigned int caps;
	int err;

	err = tern_tgt_value(page, count, buf, sizeof(buf)) ? -EINVAL :
		tern_transport_query(buf, &caps);
	if (err) {
		pr_err("port %s: no such tern transport (%d)\n",
		       config_item_name(item), err);
		return err;
	}
	mutex_lock(&port->lock);
	if (port->enabled) {
		mutex_unlock(&port->lock);
		return tern_tgt_port_busy(port, "transport");
	}
	strscpy(port->transport, buf, sizeof(port->transport));
	mutex_unlock(&port->lock);
	return count;
}

static ssize_t tern_tgt_port_address_show(struct config_item *item,
					  char *page)
{
	struct tern_tgt_port *port = to_port(item);
	ssize_t ret;

	mutex_lock(&port->lock);
	ret = sysfs_emit(page, "%s\n", port->address);
	mutex_unlock(&port->lock);
	return ret;
}

static ssize_t tern_tgt_port_address_store(struct config_item *item,
					   const char *page, size_t count)
{
	struct tern_tgt_port *port = to_port(item);
	char buf[sizeof(port->address)];

	if (tern_tgt_value(page, count, buf, sizeof(buf)) ||
	    tern_addr_canon(buf, buf, sizeof(buf)))
		goto bad;
	mutex_lock(&port->lock);
	if (port->enabled) {
		mutex_unlock(&port->lock);
		return tern_tgt_port_busy(port, "address");
	}
	strscpy(port->address, buf, sizeof(port->address));
	mutex_unlock(&port->lock);
	return count;
bad:
	pr_err("port %s: address must be a numeric IPv4 or IPv6 address\n",
	       config_item_name(item));
	return -EINVAL;
}

static ssize_t tern_tgt_port_service_show(struct config_item *item,
					  char *page)
{
	return sysfs_emit(page, "%u\n", READ_ONCE(to_port(item)->service));
}

static ssize_t tern_tgt_port_service_store(struct config_item *item,
					   const char *page, size_t count)
{
	struct tern_tgt_port *port = to_port(item);
	u16 val;

	if (kstrtou16(page, 10, &val) || !val) {
		pr_err("port %s: service must be a port number 1-65535\n",
		       config_item_name(item));
		return -EINVAL;
	}
	mutex_lock(&port->lock);
	if (port->enabled) {
		mutex_unlock(&port->lock);
		return tern_tgt_port_busy(port, "service");
	}
	WRITE_ONCE(port->service, val);
	mutex_unlock(&port->lock);
	return count;
}

/* A cap on what sessions negotiate: 0 (the default) or 1..@max. */
static ssize_t tern_tgt_port_cap_store(struct config_item *item,
				       const char *page, size_t count,
				       const char *what, unsigned int max,
				       unsigned int *cap)
{
	struct tern_tgt_port *port = to_port(item);
	unsigned int val;

	if (kstrtouint(page, 10, &val) || val > max) {
		pr_err("port %s: %s must be 0 (default) or 1-%u\n",
		       config_item_name(item), what, max);
		return -EINVAL;
	}
	mutex_lock(&port->lock);
	if (port->enabled) {
		mutex_unlock(&port->lock);
		return tern_tgt_port_busy(port, what);
	}
	WRITE_ONCE(*cap, val);
	mutex_unlock(&port->lock);
	return count;
}

static ssize_t tern_tgt_port_max_lanes_show(struct config_item *item,
					    char *page)
{
	return sysfs_emit(page, "%u\n", READ_ONCE(to_port(item)->max_lanes));
}

static ssize_t tern_tgt_port_max_lanes_store(struct config_item *item,
					     const char *page, size_t count)
{
	return tern_tgt_port_cap_store(item, page, count, "max_lanes",
				       TERN_WIRE_MAX_LANES,
				       &to_port(item)->max_lanes);
}

static ssize_t tern_tgt_port_max_queue_depth_show(struct config_item *item,
						  char *page)
{
	return sysfs_emit(page, "%u\n",
			  READ_ONCE(to_port(item)->max_queue_depth));
}

static ssize_t tern_tgt_port_max_queue_depth_store(struct config_item *item,
						   const char *page,
						   size_t count)
{
	return tern_tgt_port_cap_store(item, page, count, "max_queue_depth",
				       TERN_TGT_MAX_QUEUE_DEPTH,
				       &to_port(item)->max_queue_depth);
}

/* A yes/no policy of the port, set while it is disabled. */
static ssize_t tern_tgt_port_flag_store(struct config_item *item,
					const char *page, size_t count,
					const char *what, bool *flag)
{
	struct tern_tgt_port *port = to_port(item);
	bool val;

	if (kstrtobool(page, &val)) {
		pr_err("port %s: %s takes 0 or 1\n", config_item_name(item),
		       what);
		return -EINVAL;
	}
	mutex_lock(&port->lock);
	if (port->enabled) {
		mutex_unlock(&port->lock);
		return tern_tgt_port_busy(port, what);
	}
	WRITE_ONCE(*flag, val);
	mutex_unlock(&port->lock);
	return count;
}

static ssize_t tern_tgt_port_require_auth_show(struct config_item *item,
					       char *page)
{
	return sysfs_emit(page, "%d\n", READ_ONCE(to_port(item)->require_auth));
}

static ssize_t tern_tgt_port_require_auth_store(struct config_item *item,
						const char *page, size_t count)
{
	return tern_tgt_port_flag_store(item, page, count, "require_auth",
					&to_port(item)->require_auth);
}

static ssize_t tern_tgt_port_require_encrypt_show(struct config_item *item,
						  char *page)
{
	return sysfs_emit(page, "%d\n",
			  READ_ONCE(to_port(item)->require_encrypt));
}

static ssize_t tern_tgt_port_require_encrypt_store(struct config_item *item,
						   const char *page,
						   size_t count)
{
	return tern_tgt_port_flag_store(item, page, count, "require_encrypt",
					&to_port(item)->require_encrypt);
}

static ssize_t tern_tgt_port_require_integrity_show(struct config_item *item,
						    char *page)
{
	return sysfs_emit(page, "%d\n",
			  READ_ONCE(to_port(item)->require_integrity));
}

static ssize_t tern_tgt_port_require_integrity_store(struct config_item *item,
						     const char *page,
						     size_t count)
{
	return tern_tgt_port_flag_store(item, page, count, "require_integrity",
					&to_port(item)->require_integrity);
}

/*
 * Caller holds port->lock. port->ep is published and withdrawn under
 * tern_tgt_mutex, where a host's key revocation looks for the ports'
 * sessions (tern_tgt_host_revoke()).
 */
static void tern_tgt_port_disable(struct tern_tgt_port *port)
{
	struct tern_endpoint *ep = port->ep;

	if (!port->enabled)
		return;
	mutex_lock(&tern_tgt_mutex);
	WRITE_ONCE(port->enabled, false);
	port->ep = NULL;
	mutex_unlock(&tern_tgt_mutex);
	/* after enabled: no watch is held for the port from here on */
	tern_tgt_watch_port_gone(port);
	/* closes every session of the port, waits for their requests */
	tern_listener_stop(port->lis);
	tern_endpoint_destroy(ep);
	port->lis = NULL;
	pr_info("port %s disabled\n", config_item_name(&port->group.cg_item));
}

static int tern_tgt_port_enable(struct tern_tgt_port *port)
{
	const char *name = config_item_name(&port->group.cg_item);
	bool v6 = strchr(port->address, ':');
	struct tern_listener *lis;
	struct tern_endpoint *ep;
	unsigned int caps;
	char uri[96];

	if (!port->address[0]) {
		pr_err("port %s: set address before enabling\n", name);
		return -EINVAL;
	}
	if (port->require_encrypt &&
	    (tern_transport_query(port->transport, &caps) ||
	     !(caps & TERN_TRANSPORT_ENCRYPTS))) {
		pr_err("port %s: %s does not encrypt; require_encrypt would refuse every client\n",
		       name, port->transport);
		return -EINVAL;
	}
	if (port->require_integrity &&
	    (tern_transport_query(port->transport, &caps) ||
	     !(caps & (TERN_TRANSPORT_ENCRYPTS | TERN_TRANSPORT_SIGNS)))) {
		pr_err("port %s: %s neither signs nor encrypts; require_integrity would refuse every client\n",
		       name, port->transport);
		return -EINVAL;
	}
	snprintf(uri, sizeof(uri), "%s://%s%s%s:%u", port->transport,
		 v6 ? "[" : "", port->address, v6 ? "]" : "", port->service);
	ep = tern_tgt_endpoint_create(port);
	if (IS_ERR(ep))
		return PTR_ERR(ep);
	/* before it listens: a key revoked from now on finds its sessions */
	mutex_lock(&tern_tgt_mutex);
	port->ep = ep;
	mutex_unlock(&tern_tgt_mutex);
	lis = tern_listen(ep, uri);
	if (IS_ERR(lis)) {
		pr_err("port %s: cannot listen on %s (%ld)\n", name, uri,
		       PTR_ERR(lis));
		mutex_lock(&tern_tgt_mutex);
		port->ep = NULL;
		mutex_unlock(&tern_tgt_mutex);
		tern_endpoint_destroy(ep);
		return PTR_ERR(lis);
	}
	port->lis = lis;
	mutex_lock(&tern_tgt_mutex);
	WRITE_ONCE(port->enabled, true);
	mutex_unlock(&tern_tgt_mutex);
	pr_info("port %s listening on %s\n", name, uri);
	return 0;
}

static ssize_t tern_tgt_port_enable_show(struct config_item *item, char *page)
{
	return sysfs_emit(page, "%d\n", READ_ONCE(to_port(item)->enabled));
}

static ssize_t tern_tgt_port_enable_store(struct config_item *item,
					  const char *page, size_t count)
{
	struct tern_tgt_port *port = to_port(item);
	bool val;
	int err = 0;

	if (kstrtobool(page, &val)) {
		pr_err("port %s: enable takes 0 or 1\n",
		       config_item_name(item));
		return -EINVAL;
	}
	mutex_lock(&port->lock);
	if (val && !port->enabled)
		err = tern_tgt_port_enable(port);
	else if (!val)
		tern_tgt_port_disable(port);
	mutex_unlock(&port->lock);
	return err ?: count;
}

CONFIGFS_ATTR(tern_tgt_port_, transport);
CONFIGFS_ATTR(tern_tgt_port_, address);
CONFIGFS_ATTR(tern_tgt_port_, service);
CONFIGFS_ATTR(tern_tgt_port_, max_lanes);
CONFIGFS_ATTR(tern_tgt_port_, max_queue_depth);
CONFIGFS_ATTR(tern_tgt_port_, require_auth);
CONFIGFS_ATTR(tern_tgt_port_, require_encrypt);
CONFIGFS_ATTR(tern_tgt_port_, require_integrity);
CONFIGFS_ATTR(tern_tgt_port_, enable);

static struct configfs_attribute *tern_tgt_port_attrs[] = {
	&tern_tgt_port_attr_transport,
	&tern_tgt_port_attr_address,
	&tern_tgt_port_attr_service,
	&tern_tgt_port_attr_max_lanes,
	&tern_tgt_port_attr_max_queue_depth,
	&tern_tgt_port_attr_require_auth,
	&tern_tgt_port_attr_require_encrypt,
	&tern_tgt_port_attr_require_integrity,
	&tern_tgt_port_attr_enable,
	NULL,
};

static void tern_tgt_port_item_release(struct config_item *item)
{
	struct tern_tgt_port *port = to_port(item);

	mutex_destroy(&port->lock);
	kfree(port);
}

static struct configfs_item_operations tern_tgt_port_item_ops = {
	.release	= tern_tgt_port_item_release,
};

static const struct config_item_type tern_tgt_port_type = {
	.ct_item_ops	= &tern_tgt_port_item_ops,
	.ct_attrs	= tern_tgt_port_attrs,
	.ct_owner	= THIS_MODULE,
};

static int tern_tgt_port_allow_link(struct config_item *src,
				    struct config_item *target)
{
	struct tern_tgt_port *port = to_port(src->ci_parent);
	struct tern_tgt_export *exp;
	struct tern_tgt_link *link, *p;

	if (target->ci_type != &tern_tgt_export_type) {
		pr_err("port %s: only exports can be linked here\n",
		       config_item_name(&port->group.cg_item));
		return -EINVAL;
	}
	exp = to_export(target);
	link = kzalloc(sizeof(*link), GFP_KERNEL);
	if (!link)
		return -ENOMEM;
	link->exp = exp;

	mutex_lock(&tern_tgt_mutex);
	list_for_each_entry(p, &port->links, entry) {
		if (p->exp == exp) {
			mutex_unlock(&tern_tgt_mutex);
			kfree(link);
			pr_err("port %s: export %s is already linked\n",
			       config_item_name(&port->group.cg_item),
			       config_item_name(target));
			return -EEXIST;
		}
	}
	list_add_tail(&link->entry, &port->links);
	mutex_unlock(&tern_tgt_mutex);
	return 0;
}

static void tern_tgt_port_drop_link(struct config_item *src,
				    struct config_item *target)
{
	struct tern_tgt_port *port = to_port(src->ci_parent);
	struct tern_tgt_export *exp = to_export(target);
	struct tern_tgt_link *p;

	mutex_lock(&tern_tgt_mutex);
	list_for_each_entry(p, &port->links, entry) {
		if (p->exp == exp) {
			list_del(&p->entry);
			kfree(p);
			break;
		}
	}
	/* what was opened through this link ends with it */
	tern_tgt_binds_end(port, exp);
	mutex_unlock(&tern_tgt_mutex);
}

static struct configfs_item_operations tern_tgt_port_exports_item_ops = {
	.allow_link	= tern_tgt_port_allow_link,
	.drop_link	= tern_tgt_port_drop_link,
};

static const struct config_item_type tern_tgt_port_exports_type = {
	.ct_item_ops	= &tern_tgt_port_exports_item_ops,
	.ct_owner	= THIS_MODULE,
};

static struct config_group *tern_tgt_ports_make(struct config_group *group,
						const char *name)
{
	struct tern_tgt_port *port;

	if (!tern_blk_name_ok(name)) {
		pr_err("port name '%.64s' must be " TERN_NAME_RULE "\n",
		       name);
		return ERR_PTR(-EINVAL);
	}
	port = kzalloc(sizeof(*port), GFP_KERNEL);
	if (!port)
		return ERR_PTR(-ENOMEM);
	mutex_init(&port->lock);
	INIT_LIST_HEAD(&port->links);
	INIT_LIST_HEAD(&port->entry);
	strscpy(port->transport, "tcp", sizeof(port->transport));
	port->service = TERN_DEFAULT_PORT;
	config_group_init_type_name(&port->group, name, &tern_tgt_port_type);
	config_group_init_type_name(&port->exports_group, "exports",
				    &tern_tgt_port_exports_type);
	configfs_add_default_group(&port->exports_group, &port->group);

	mutex_lock(&tern_tgt_mutex);
	port->id = ++tern_tgt_port_ids;
	list_add_tail(&port->entry, &tern_tgt_ports);
	mutex_unlock(&tern_tgt_mutex);
	return &port->group;
}

static void tern_tgt_ports_drop(struct config_group *group,
				struct config_item *item)
{
	struct tern_tgt_port *port = to_port(item);

	mutex_lock(&port->lock);
	tern_tgt_port_disable(port);
	mutex_unlock(&port->lock);

	mutex_lock(&tern_tgt_mutex);
	list_del_init(&port->entry);
	/* no binding names the port once it is freed */
	tern_tgt_binds_end(port, NULL);
	mutex_unlock(&tern_tgt_mutex);
	config_item_put(item);
}

static struct configfs_group_operations tern_tgt_ports_group_ops = {
	.make_group	= tern_tgt_ports_make,
	.drop_item	= tern_tgt_ports_drop,
};

static const struct config_item_type tern_tgt_ports_type = {
	.ct_group_ops	= &tern_tgt_ports_group_ops,
	.ct_owner	= THIS_MODULE,
};

/* ---- subsystem ---- */

static const struct config_item_type tern_tgt_root_type = {
	.ct_owner	= THIS_MODULE,
};

static struct config_group tern_tgt_exports_group;
static struct config_group tern_tgt_ports_group;
static struct config_group tern_tgt_hosts_group;

static struct configfs_subsystem tern_tgt_subsys = {
	.su_group = {
		.cg_item = {
			.ci_namebuf	= "tern",
			.ci_type	= &tern_tgt_root_type,
		},
	},
};

int tern_tgt_configfs_init(void)
{
	config_group_init(&tern_tgt_subsys.su_group);
	mutex_init(&tern_tgt_subsys.su_mutex);
	config_group_init_type_name(&tern_tgt_exports_group, "exports",
				    &tern_tgt_exports_type);
	configfs_add_default_group(&tern_tgt_exports_group,
				   &tern_tgt_subsys.su_group);
	config_group_init_type_name(&tern_tgt_ports_group, "ports",
				    &tern_tgt_ports_type);
	configfs_add_default_group(&tern_tgt_ports_group,
				   &tern_tgt_subsys.su_group);
	config_group_init_type_name(&tern_tgt_hosts_group, "hosts",
				    &tern_tgt_hosts_type);
	configfs_add_default_group(&tern_tgt_hosts_group,
				   &tern_tgt_subsys.su_group);
	return configfs_register_subsystem(&tern_tgt_subsys);
}

void tern_tgt_configfs_exit(void)
{
	configfs_unregister_subsystem(&tern_tgt_subsys);
}

static int __init tern_tgt_init(void)
{
	int err;

	tern_tgt_wq = alloc_workqueue("tern_target", WQ_UNBOUND |
				      WQ_MEM_RECLAIM, 0);
	if (!tern_tgt_wq)
		return -ENOMEM;
	tern_tgt_binds_init();
	tern_tgt_watch_init();
	err = tern_tgt_configfs_init();
	if (err) {
		pr_err("cannot register configfs subsystem (%d)\n", err);
		tern_tgt_watch_exit();
		tern_tgt_binds_exit();
		destroy_workqueue(tern_tgt_wq);
		return err;
	}
	return 0;
}

static void __exit tern_tgt_exit(void)
{
	tern_tgt_configfs_exit();
	tern_tgt_watch_exit();
	tern_tgt_binds_exit();
	destroy_workqueue(tern_tgt_wq);
}

module_init(tern_tgt_init);
module_exit(tern_tgt_exit);
MODULE_DESCRIPTION("tern block target: exports block devices and files");
MODULE_VERSION(TERN_VERSION);
MODULE_LICENSE("GPL");
