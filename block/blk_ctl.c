// SPDX-License-Identifier: GPL-2.0
/*
 * tern_blk: the mapping interface, /dev/tern-blk-ctl.
 *
 * Like /dev/nvme-fabrics: write(2) one option string
 *
 *   transport=tcp,address=127.0.0.1,service=7447,export=vol0,lanes=2
 *
 * to map an export; a following read(2) on the same open file returns the
 * device name ("tern0\n"): a new one, or the one that already maps that
 * export for that host unless duplicate=1 is given. Writing
 * "remove=tern0" unmaps a device that nobody has open (-EBUSY otherwise),
 * "remove=tern0,force=1" any; a following read returns "name=tern0\n".
 * A read before any write returns the add command's options, one line of
 * key=FORMAT, as /dev/nvme-fabrics lists its own.
 * Unknown, duplicate, empty or malformed options fail the write with
 * -EINVAL, log why, and create nothing. Documentation/admin-guide.rst
 * lists every option.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/key.h>
#include <keys/user-type.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/utsname.h>
#include <tern/blk_names.h>
#include "blk.h"

enum {
	OPT_TRANSPORT,
	OPT_ADDRESS,
	OPT_SERVICE,
	OPT_EXPORT,
	OPT_HOST,
	OPT_LANES,
	OPT_QUEUE_DEPTH,
	OPT_CRC,
	OPT_READ_ONLY,
	OPT_LOSS_TIMEOUT,
	OPT_KEY,
	OPT_ENCRYPT,
	OPT_INTEGRITY,
	OPT_DUPLICATE,
	OPT_PATH,
	OPT_IOPOLICY,
	OPT_INLINE_WRITE,
	OPT_INLINE_READ,
	OPT_NR,
};

/* Each option of the add command and the form of its value. */
static const struct tern_blk_opt {
	const char	*name;
	const char	*format;	/* as listed by a read (tern_blk_ctl_open) */
} tern_blk_opts[OPT_NR] = {
	[OPT_TRANSPORT]		= { "transport",	"%s" },
	[OPT_ADDRESS]		= { "address",		"%s" },
	[OPT_SERVICE]		= { "service",		"%u" },
	[OPT_EXPORT]		= { "export",		"%s" },
	[OPT_HOST]		= { "host",		"%s" },
	[OPT_LANES]		= { "lanes",		"%u" },
	[OPT_QUEUE_DEPTH]	= { "queue_depth",	"%u" },
	[OPT_CRC]		= { "crc",		"%d" },
	[OPT_READ_ONLY]		= { "read_only",	"%d" },
	[OPT_LOSS_TIMEOUT]	= { "loss_timeout",	"%u|forever" },
	[OPT_KEY]		= { "key",		"%s" },
	[OPT_ENCRYPT]		= { "encrypt",		"%d" },
	[OPT_INTEGRITY]		= { "integrity",	"%d" },
	[OPT_DUPLICATE]		= { "duplicate",	"%d" },
	[OPT_PATH]		= { "path",		"%s" },
	[OPT_IOPOLICY]		= { "iopolicy",		"%s" },
	[OPT_INLINE_WRITE]	= { "inline_write",	"%u" },
	[OPT_INLINE_READ]	= { "inline_read",	"%u" },
};

static int tern_blk_uint(const char *key, const char *val, unsigned int lo,
			 unsigned int hi, unsigned int *out)
{
	unsigned int v;

	if (kstrtouint(val, 10, &v) || v < lo || v > hi) {
		pr_err("option %s=%s: expected a number in %u..%u\n", key, val,
		       lo, hi);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int tern_blk_bool(const char *key, const char *val, bool *out)
{
	if (strcmp(val, "0") && strcmp(val, "1")) {
		pr_err("option %s=%s: expected 0 or 1\n", key, val);
		return -EINVAL;
	}
	*out = val[0] == '1';
	return 0;
}

/*
 * Kept in canonical form ("::1" for "0:0::1"): it names the device's
 * target in sysfs and udev links, and two maps of one export compare it.
 */
static int tern_blk_address(const char *val, struct tern_blk_opts *o)
{
	if (!tern_addr_canon(val, o->address, sizeof(o->address)))
		return 0;
	pr_err("option address=%s: expected a numeric IPv4 or IPv6 address\n",
	       val);
	return -EINVAL;
}

/*
 * key=DESC: the "logon" (or "user") key DESC in the writer's keyrings
 * holds the key text; the secret itself never travels in the option
 * string, so it is not in any process's memory but ternadm's, briefly.
 */
static int tern_blk_key(const char *desc, struct tern_blk_opts *o)
{
	const struct user_key_payload *payload;
	struct key *key;
	int err;

	key = request_key(&key_type_logon, desc, NULL);
	if (IS_ERR(key) && PTR_ERR(key) == -ENOKEY)
		key = request_key(&key_type_user, desc, NULL);
	if (IS_ERR(key)) {
		err = PTR_ERR(key);
		pr_err("option key=%s: no usable logon or user key of that description in the caller's keyrings (%d)\n",
		       desc, err);
		return err;
	}
	down_read(&key->sem);
	payload = user_key_payload_locked(key);
	if (payload) {
		size_t len = payload->datalen;

		/* as a file holds it: one trailing newline is fine */
		if (len && payload->data[len - 1] == '\n')
			len--;
		err = tern_key_parse(payload->data, len, o->key);
	} else {
		err = -EKEYREVOKED;
	}
	up_read(&key->sem);
	key_put(key);
	if (err) {
		pr_err("option key=%s: %s (%d)\n", desc,
		       err == -EBADMSG ? "the key's checksum does not match" :
		       err == -EINVAL ? "not a TERNKEY-1 key" : "key revoked",
		       err);
		return err == -EBADMSG ? -EINVAL : err;
	}
	o->has_key = true;
	return 0;
}

/*
 * path=transport://address[:port]: a further path of the session, up to
 * TERN_MAX_PATHS - 1 of them; checked as tern_connect() will take it.
 */
static int tern_blk_path(const char *val, struct tern_blk_opts *o)
{
	char scheme[TERN_SCHEME_MAX];
	struct sockaddr_storage addr;
	unsigned int caps;
	int err;

	if (o->nr_paths == ARRAY_SIZE(o->paths)) {
		pr_err("option path: at most %zu of them\n",
		       ARRAY_SIZE(o->paths));
		return -EINVAL;
	}
	if (strlen(val) >= TERN_BLK_URI_LEN ||
	    tern_parse_uri(val, scheme, sizeof(scheme), &addr)) {
		pr_err("option path=%.80s: expected transport://address[:port]\n",
		       val);
		return -EINVAL;
	}
	err = tern_transport_query(scheme, &caps);
	if (err) {
		pr_err("option path=%s: no such tern transport (%d)\n", val,
		       err);
		return err;
	}
	strscpy(o->paths[o->nr_paths++], val, TERN_BLK_URI_LEN);
	return 0;
}

static void tern_blk_default_host(struct tern_blk_opts *o)
{
	const char *node = init_utsname()->nodename;

	if (tern_blk_name_ok(node))
		strscpy(o->host, node, sizeof(o->host));
	else
		strscpy(o->host, "unknown", sizeof(o->host));
}

static int tern_blk_parse_one(unsigned int opt, const char *key,
			      const char *val, struct tern_blk_opts *o)
{
	unsigned int v;
	int err;

	switch (opt) {
	case OPT_TRANSPORT:
		err = tern_transport_query(val, &v);
		if (err) {
			pr_err("option transport=%s: no such tern transport (%d)\n",
			       val, err);
			return err;
		}
		strscpy(o->transport, val, sizeof(o->transport));
		return 0;
	case OPT_ADDRESS:
		return tern_blk_address(val, o);
	case OPT_SERVICE:
		err = tern_blk_uint(key, val, 1, 65535, &v);
		if (!err)
			o->service = v;
		return err;
	case OPT_EXPORT:
	case OPT_HOST:
		if (!tern_blk_name_ok(val)) {
			pr_err("option %s: expected " TERN_NAME_RULE "\n",
			       key);
			return -EINVAL;
		}
		strscpy(opt == OPT_EXPORT ? o->export : o->host, val,
			TERN_BLK_NAME_LEN);
		return 0;
	case OPT_LANES:
		return tern_blk_uint(key, val, 1, TERN_WIRE_MAX_LANES,
				     &o->lanes);
	case OPT_QUEUE_DEPTH:
		return tern_blk_uint(key, val, 1, TERN_WIRE_MAX_QDEPTH,
				     &o->queue_depth);
	case OPT_CRC:
		return tern_blk_bool(key, val, &o->crc);
	case OPT_READ_ONLY:
		return tern_blk_bool(key, val, &o->read_only);
	case OPT_LOSS_TIMEOUT:
		/* forever: requests wait for a reconnect until unmapped */
		if (!strcmp(val, "forever")) {
			o->loss_timeout_ms = TERN_LOSS_TIMEOUT_NEVER;
			return 0;
		}
		err = tern_blk_uint(key, val, 1, 86400, &v);
		if (!err)
			o->loss_timeout_ms = v * 1000;
		return err;
	case OPT_KEY:
		return tern_blk_key(val, o);
	case OPT_ENCRYPT:
		return tern_blk_bool(key, val, &o->encrypt);
	case OPT_INTEGRITY:
		return tern_blk_bool(key, val, &o->integrity);
	case OPT_DUPLICATE:
		return tern_blk_bool(key, val, &o->duplicate);
	case OPT_PATH:
		return tern_blk_path(val, o);
	case OPT_IOPOLICY:
		err = tern_iopolicy_parse(val);
		if (err < 0) {
			pr_err("option iopolicy=%.32s: expected failover, round-robin or min-inflight\n",
			       val);
			return err;
		}
		o->iopolicy = err;
		return 0;
	case OPT_INLINE_WRITE:
	case OPT_INLINE_READ:
		err = tern_blk_uint(key, val, 0, TERN_WIRE_MAX_DATA, &v);
		if (err)
			return err;
		/* the session's form: 0 is its default, so none is spelt so */
		*(opt == OPT_INLINE_WRITE ? &o->inline_write :
					    &o->inline_read) =
			v ?: TERN_INLINE_NONE;
		return 0;
	}
	return -EINVAL;
}

/* Parse "key=value,key=value"; @buf is modified. */
static int tern_blk_parse(char *buf, struct tern_blk_opts *o)
{
	unsigned long seen = 0;
	char *p = buf, *tok;
	unsigned int opt;
	int err;

	memset(o, 0, sizeof(*o));
	strscpy(o->transport, "tcp", sizeof(o->transport));
	o->service = TERN_DEFAULT_PORT;
	/* lanes and queue_depth stay 0 unless given: see tern_blk_add() */
	tern_blk_default_host(o);

	while ((tok = strsep(&p, ","))) {
		char *val = strchr(tok, '=');

		if (!val || val == tok || !val[1]) {
			pr_err("option '%.64s': expected key=value\n", tok);
			return -EINVAL;
		}
		*val++ = '\0';
		for (opt = 0; opt < OPT_NR; opt++)
			if (!strcmp(tok, tern_blk_opts[opt].name))
				break;
		if (opt == OPT_NR) {
			pr_err("unknown option '%.64s'\n", tok);
			return -EINVAL;
		}
		/* path= may be given once per path */
		if (__test_and_set_bit(opt, &seen) && opt != OPT_PATH) {
			pr_err("option %s given twice\n", tok);
			return -EINVAL;
		}
		err = tern_blk_parse_one(opt, tok, val, o);
		if (err)
			return err;
	}
	if (!test_bit(OPT_ADDRESS, &seen) || !test_bit(OPT_EXPORT, &seen)) {
		pr_err("options address and export are required\n");
		return -EINVAL;
	}
	/* the traffic keys come from the authentication */
	if ((o->encrypt || o->integrity) && !o->has_key) {
		pr_err("option %s=1 needs key=\n",
		       o->encrypt ? "encrypt" : "integrity");
		return -EINVAL;
	}
	if (o->lanes && o->lanes * (o->nr_paths + 1) > TERN_WIRE_MAX_LANES) {
		pr_err("option lanes=%u: at most %u lanes in all, over %u paths\n",
		       o->lanes, TERN_WIRE_MAX_LANES, o->nr_paths + 1);
		return -EINVAL;
	}
	if (o->encrypt && o->integrity) {
		pr_err("options encrypt=1 and integrity=1 exclude each other: encryption already authenticates every byte\n");
		return -EINVAL;
	}
	return 0;
}

/*
 * "remove=NAME" or "remove=NAME,force=1"; @buf is modified. The name is
 * looked up, never parsed further: an unknown one is -ENODEV.
 */
static int tern_blk_ctl_remove(char *buf, char *name, size_t size)
{
	char *force = strchr(buf, ',');
	int err;

	if (force) {
		*force++ = '\0';
		if (strcmp(force, "force=1")) {
			pr_err("remove: expected remove=NAME or remove=NAME,force=1\n");
			return -EINVAL;
		}
	}
	err = tern_blk_remove(buf, force);
	if (err == -ENODEV)
		pr_err("remove: no device '%.32s'\n", buf);
	else if (err == -EBUSY)
		pr_err("remove: %.32s is open (mounted, held or in use); not removed without force=1\n",
		       buf);
	if (!err)
		strscpy(name, buf, size);
	return err;
}

/* @answer: what a read returns, the last command's answer or the options */
struct tern_blk_ctl_file {
	struct mutex	lock;		/* answer */
	char		answer[256];
};

static int tern_blk_ctl_open(struct inode *inode, struct file *file)
{
	struct tern_blk_ctl_file *cf;
	size_t len = 0;
	unsigned int i;

	cf = kzalloc(sizeof(*cf), GFP_KERNEL);
	if (!cf)
		return -ENOMEM;
	mutex_init(&cf->lock);
	for (i = 0; i < OPT_NR; i++)
		len += scnprintf(cf->answer + len, sizeof(cf->answer) - len,
				 "%s%s=%s", i ? "," : "", tern_blk_opts[i].name,
				 tern_blk_opts[i].format);
	scnprintf(cf->answer + len, sizeof(cf->answer) - len, "\n");
	file->private_data = cf;
	return 0;
}

static int tern_blk_ctl_release(struct inode *inode, struct file *file)
{
	struct tern_blk_ctl_file *cf = file->private_data;

	mutex_destroy(&cf->lock);
	kfree(cf);
	return 0;
}

static ssize_t tern_blk_ctl_write(struct file *file, const char __user *ubuf,
				  size_t count, loff_t *pos)
{
	struct tern_blk_ctl_file *cf = file->private_data;
	char name[DISK_NAME_LEN];
	struct tern_blk_opts *o;
	size_t len = count;
	char *buf;
	int err;

	if (!count || count >= TERN_BLK_OPTS_MAX) {
		pr_err("option string must be 1..%d bytes\n",
		       TERN_BLK_OPTS_MAX - 1);
		return -EINVAL;
	}
	buf = memdup_user_nul(ubuf, count);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	/* echo(1) appends a newline; it is consumed, not a short write */
	if (buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (strlen(buf) != len || !len) {
		pr_err("option string is empty or holds a NUL byte\n");
		err = -EINVAL;
		goto out;
	}

	if (!strncmp(buf, "remove=", 7)) {
		err = tern_blk_ctl_remove(buf + 7, name, sizeof(name));
		if (!err) {
			mutex_lock(&cf->lock);
			snprintf(cf->answer, sizeof(cf->answer), "name=%s\n",
				 name);
			*pos = 0;
			mutex_unlock(&cf->lock);
		}
		goto out;
	}

	o = kmalloc(sizeof(*o), GFP_KERNEL);
	if (!o) {
		err = -ENOMEM;
		goto out;
	}
	err = tern_blk_parse(buf, o);
	if (!err)
		err = tern_blk_add(o, name, sizeof(name));
	kfree_sensitive(o);
	if (!err) {
		mutex_lock(&cf->lock);
		snprintf(cf->answer, sizeof(cf->answer), "%s\n", name);
		*pos = 0;	/* the next read returns the device's name */
		mutex_unlock(&cf->lock);
	}
out:
	kfree(buf);
	return err ?: (ssize_t)count;
}

static ssize_t tern_blk_ctl_read(struct file *file, char __user *ubuf,
				 size_t count, loff_t *pos)
{
	struct tern_blk_ctl_file *cf = file->private_data;
	ssize_t ret;

	mutex_lock(&cf->lock);
	ret = simple_read_from_buffer(ubuf, count, pos, cf->answer,
				      strlen(cf->answer));
	mutex_unlock(&cf->lock);
	return ret;
}

static const struct file_operations tern_blk_ctl_fops = {
	.owner		= THIS_MODULE,
	.open		= tern_blk_ctl_open,
	.release	= tern_blk_ctl_release,
	.write		= tern_blk_ctl_write,
	.read		= tern_blk_ctl_read,
	.llseek		= noop_llseek,
};

static struct miscdevice tern_blk_ctl_misc = {
	.minor		= MISC_DYNAMIC_MINOR,
	.name		= "tern-blk-ctl",
	.fops		= &tern_blk_ctl_fops,
	.mode		= 0600,
};

static int __init tern_blk_init(void)
{
	int err;

	err = tern_blk_dev_init();
	if (err)
		return err;
	err = misc_register(&tern_blk_ctl_misc);
	if (err) {
		tern_blk_dev_exit();
		return err;
	}
	return 0;
}

static void __exit tern_blk_exit(void)
{
	misc_deregister(&tern_blk_ctl_misc);
	tern_blk_dev_exit();
}

module_init(tern_blk_init);
module_exit(tern_blk_exit);
MODULE_DESCRIPTION("tern block device: maps a remote tern export");
MODULE_VERSION(TERN_VERSION);
MODULE_LICENSE("GPL");
