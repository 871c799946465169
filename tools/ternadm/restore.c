// SPDX-License-Identifier: GPL-2.0
/*
 * ternadm target save, restore and clear: tern_target's whole
 * configuration to a file and back, for tern-target.service.
 *
 *   ternadm target save [FILE] [--keys DIR]
 *   ternadm target restore [FILE] [--keys DIR]
 *   ternadm target clear
 *
 * FILE (default /etc/tern/target.json) is what "target show --json"
 * prints: save runs show itself, so that the two cannot drift apart.
 *
 * Keys cannot be saved: configfs only says whether a host has one. A
 * host with "key_set": true is restored with the key in DIR/HOST.key
 * (default /etc/tern/keys), the file "ternadm key generate --out"
 * writes; save warns about a host whose key file is not there.
 *
 * restore checks the whole file, and reads every key, before it touches
 * configfs; it refuses a target that has any export, port or host. It
 * creates in dependency order, hosts, exports, ports and their links,
 * each enabled last as it was saved, and on the first failure undoes
 * everything it made, in reverse, so that nothing half made remains.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ternadm.h"

#define TARGET_FILE	"/etc/tern/target.json"
#define KEYS_DIR	"/etc/tern/keys"
#define SAVE_MAX	1048576		/* bytes in a saved configuration */
#define RESTORE_MAX	1024		/* exports, ports or hosts */
#define HOSTS_MAX	16		/* allowed hosts of an export */
#define LANES_MAX	64		/* a port's max_lanes */
#define QDEPTH_MAX	256		/* a port's max_queue_depth */

static const char *const target_cfg_help[] = {
	"",
	"save writes the target's configuration (exports, ports, links,",
	"hosts, every flag) as JSON, the text of target show --json, to",
	"FILE (default " TARGET_FILE "). restore recreates it in an",
	"empty target, all of it or, when any step fails, nothing. clear",
	"removes every link, port, export and host.",
	"",
	"Keys are not readable and are not saved: restore sets the key of",
	"a host saved with \"key_set\": true from DIR/HOST.key, DIR",
	KEYS_DIR " unless --keys DIR.",
};

void target_cfg_usage(FILE *out)
{
	size_t i;

	target_usage(out);
	fprintf(out, "\nusage: %s target save [FILE] [--keys DIR]\n",
		ternadm_prog);
	fprintf(out, "       %s target restore [FILE] [--keys DIR]\n",
		ternadm_prog);
	fprintf(out, "       %s target clear\n", ternadm_prog);
	for (i = 0; i < ARRAY_SIZE(target_cfg_help); i++)
		fprintf(out, "%s\n", target_cfg_help[i]);
}

struct r_export {
	const char	*name;
	const char	*device_path;
	const char	*uuid;		/* NULL: the target makes one */
	char		hosts[HOSTS_MAX * NAME_MAX_LEN];	/* "h1,h2" */
	bool		read_only;
	bool		require_auth;
	bool		enabled;
};

struct r_port {
	const char	*name;
	const char	*transport;
	const char	*address;
	u64		service;
	u64		max_lanes;	/* 0: no cap of the port's own */
	u64		max_queue_depth;
	bool		require_auth;
	bool		require_encrypt;
	bool		require_integrity;
	bool		enabled;
	const struct jval *exports;	/* names, checked */
};

struct r_host {
	const char	*name;
	bool		key_set;
	char		key[KEY_TEXT_LEN + 1];
};

struct r_config {
	struct jval	root;
	struct r_export	*exports;
	struct r_port	*ports;
	struct r_host	*hosts;
	size_t		nr_exports;
	size_t		nr_ports;
	size_t		nr_hosts;
};

static void r_free(struct r_config *c)
{
	size_t i;

	for (i = 0; i < c->nr_hosts; i++)
		explicit_bzero(c->hosts[i].key, sizeof(c->hosts[i].key));
	free(c->exports);
	free(c->ports);
	free(c->hosts);
	json_free(&c->root);
}

/* ---- checking a saved configuration ---- */

/* Where in the file a value is, for messages: "ports[1] (p0)". */
struct r_where {
	const char	*file;
	const char	*kind;
	size_t		index;
	const char	*name;
};

static int r_bad(const struct r_where *w, const char *key, const char *why)
{
	if (!w->kind)
		ternadm_err("target restore: %s: %s: %s", w->file, key, why);
	else if (w->name)
		ternadm_err("target restore: %s: %s[%zu] (%s): %s: %s", w->file,
			    w->kind, w->index, w->name, key, why);
	else
		ternadm_err("target restore: %s: %s[%zu]: %s: %s", w->file,
			    w->kind, w->index, key, why);
	return -1;
}

/* Every key of @o is one of @keys, which ends with NULL. */
static int r_keys(const struct r_where *w, const struct jval *o,
		  const char *const *keys)
{
	const char *const *k;
	size_t i;

	for (i = 0; i < o->n; i++) {
		for (k = keys; *k; k++)
			if (!strcmp(*k, o->keys[i]))
				break;
		if (!*k)
			return r_bad(w, o->keys[i], "unknown key");
	}
	return 0;
}

static int r_str(const struct r_where *w, const struct jval *o,
		 const char *key, bool required, const char **out)
{
	const struct jval *v = json_get(o, key);

	*out = NULL;
	if (!v)
		return required ? r_bad(w, key, "missing") : 0;
	if (v->type != JSON_STRING)
		return r_bad(w, key, "not a string");
	*out = v->str;
	return 0;
}

static int r_bool(const struct r_where *w, const struct jval *o,
		  const char *key, bool def, bool *out)
{
	const struct jval *v = json_get(o, key);

	*out = def;
	if (!v)
		return 0;
	if (v->type != JSON_BOOL)
		return r_bad(w, key, "not true or false");
	*out = v->b;
	return 0;
}

static int r_num(const struct r_where *w, const struct jval *o,
		 const char *key, u64 min, u64 max, bool required, u64 *out)
{
	const struct jval *v = json_get(o, key);
	char why[64];

	*out = 0;
	if (!v)
		return required ? r_bad(w, key, "missing") : 0;
	if (v->type != JSON_NUMBER || v->num < min || v->num > max) {
		snprintf(why, sizeof(why), "not a number in %llu..%llu",
			 (unsigned long long)min, (unsigned long long)max);
		return r_bad(w, key, why);
	}
	*out = v->num;
	return 0;
}

/* An optional array of strings, each a valid name, none twice. */
static int r_names(const struct r_where *w, const struct jval *o,
		   const char *key, size_t max, const struct jval **out)
{
	const struct jval *v = json_get(o, key);
	size_t i, j;

	*out = v;
	if (!v)
		return 0;
	if (v->type != JSON_ARRAY)
		return r_bad(w, key, "not an array");
	if (v->n > max)
		return r_bad(w, key, "too many names");
	for (i = 0; i < v->n; i++) {
		if (v->items[i].type != JSON_STRING ||
		    !valid_name(v->items[i].str))
			return r_bad(w, key, "not a list of names of " NAME_RULE);
		for (j = 0; j < i; j++)
			if (!strcmp(v->items[i].str, v->items[j].str))
				return r_bad(w, key, "a name given twice");
	}
	return 0;
}

static int r_export(const struct r_where *w, const struct jval *o,
		    struct r_export *e)
{
	static const char *const keys[] = {
		"name", "device_path", "read_only", "require_auth", "enabled",
		"allowed_hosts", "uuid", NULL,
	};
	const struct jval *hosts;
	struct stat st;
	size_t i;

	if (r_keys(w, o, keys) ||
	    r_str(w, o, "device_path", true, &e->device_path) ||
	    r_str(w, o, "uuid", false, &e->uuid) ||
	    r_bool(w, o, "read_only", false, &e->read_only) ||
	    r_bool(w, o, "require_auth", false, &e->require_auth) ||
	    r_bool(w, o, "enabled", true, &e->enabled) ||
	    r_names(w, o, "allowed_hosts", HOSTS_MAX, &hosts))
		return -1;
	if (e->device_path[0] != '/' || strlen(e->device_path) >= PATH_MAX)
		return r_bad(w, "device_path", "not an absolute path");
	/* as export add does: a clear message before the kernel's EINVAL */
	if (stat(e->device_path, &st))
		return r_bad(w, "device_path", strerror(errno));
	if (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode))
		return r_bad(w, "device_path",
			     "neither a block device nor a regular file");
	if (e->uuid && !e->uuid[0])
		e->uuid = NULL;
	if (e->uuid && !valid_uuid(e->uuid))
		return r_bad(w, "uuid", "not a non-nil xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
	for (i = 0; hosts && i < hosts->n; i++) {
		if (i)
			strcat(e->hosts, ",");
		strcat(e->hosts, hosts->items[i].str);
	}
	return 0;
}

static int r_port(const struct r_where *w, const struct jval *o,
		  struct r_port *p, const struct r_config *c)
{
	static const char *const keys[] = {
		"name", "transport", "address", "service", "max_lanes",
		"max_queue_depth", "require_auth", "require_encrypt",
		"require_integrity", "enabled", "exports", NULL,
	};
	unsigned char addr[16];
	size_t i, j;

	if (r_keys(w, o, keys) ||
	    r_str(w, o, "transport", true, &p->transport) ||
	    r_str(w, o, "address", true, &p->address) ||
	    r_num(w, o, "service", 1, 65535, true, &p->service) ||
	    r_num(w, o, "max_lanes", 0, LANES_MAX, false, &p->max_lanes) ||
	    r_num(w, o, "max_queue_depth", 0, QDEPTH_MAX, false,
		  &p->max_queue_depth) ||
	    r_bool(w, o, "require_auth", false, &p->require_auth) ||
	    r_bool(w, o, "require_encrypt", false, &p->require_encrypt) ||
	    r_bool(w, o, "require_integrity", false, &p->require_integrity) ||
	    r_bool(w, o, "enabled", true, &p->enabled) ||
	    r_names(w, o, "exports", RESTORE_MAX, &p->exports))
		return -1;
	if (strcmp(p->transport, "tcp") && strcmp(p->transport, "rdma"))
		return r_bad(w, "transport", "neither tcp nor rdma");
	if (inet_pton(strchr(p->address, ':') ? AF_INET6 : AF_INET,
		      p->address, addr) != 1)
		return r_bad(w, "address", "not a numeric IPv4 or IPv6 address");
	for (i = 0; p->exports && i < p->exports->n; i++) {
		for (j = 0; j < c->nr_exports; j++)
			if (!strcmp(p->exports->items[i].str,
				    c->exports[j].name))
				break;
		if (j == c->nr_exports)
			return r_bad(w, "exports", "names an export the file does not have");
	}
	return 0;
}

static int r_host(const struct r_where *w, const struct jval *o,
		  struct r_host *h, const char *keys_dir)
{
	static const char *const keys[] = { "name", "key_set", NULL };
	char path[PATH_MAX];

	if (r_keys(w, o, keys) || r_bool(w, o, "key_set", true, &h->key_set))
		return -1;
	if (!h->key_set || !keys_dir)
		return 0;
	if (snprintf(path, sizeof(path), "%s/%s.key", keys_dir, h->name) >=
	    (int)sizeof(path))
		return r_bad(w, "key_set", "the key file's path is too long");
	if (key_read_file("target restore", path, h->key))
		return r_bad(w, "key_set", "no key to restore it with");
	return 0;
}

/* The array @kind of the top object, each member an object with a name. */
static int r_list(const struct r_config *c, const char *file,
		  const char *kind, const struct jval **out)
{
	const struct jval *v = json_get(&c->root, kind), *name;
	struct r_where w = { .file = file, .kind = kind };
	size_t i, j;

	*out = v;
	if (!v)
		return 0;
	if (v->type != JSON_ARRAY) {
		ternadm_err("target restore: %s: %s: not an array", file, kind);
		return -1;
	}
	if (v->n > RESTORE_MAX) {
		ternadm_err("target restore: %s: more than %d %s", file,
			    RESTORE_MAX, kind);
		return -1;
	}
	for (i = 0; i < v->n; i++) {
		w.index = i;
		if (v->items[i].type != JSON_OBJECT)
			return r_bad(&w, "", "not an object");
		name = json_get(&v->items[i], "name");
		if (!name || name->type != JSON_STRING ||
		    !valid_name(name->str))
			return r_bad(&w, "name", "missing, or not " NAME_RULE);
		for (j = 0; j < i; j++)
			if (!strcmp(json_get(&v->items[j], "name")->str,
				    name->str))
				return r_bad(&w, "name", "given twice");
	}
	return 0;
}

static const char *r_name(const struct jval *o)
{
	return json_get(o, "name")->str;
}

/*
 * Read and check all of @file into @c, with the hosts' keys from
 * @keys_dir, or none when it is NULL; 0, or -1 after saying why.
 * r_free() @c after, either way.
 */
static int r_load(const char *file, const char *keys_dir, struct r_config *c)
{
	static const char *const top[] = { "exports", "ports", "hosts", NULL };
	const struct jval *exports, *ports, *hosts;
	struct r_where w = { .file = file };
	char *text = NULL, err[128];
	size_t len = 0, i;
	ssize_t n;
	int fd, ret = -1;

	memset(c, 0, sizeof(*c));
	fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		ternadm_err("target restore: cannot open %s: %s", file,
			    strerror(errno));
		return -1;
	}
	text = malloc(SAVE_MAX + 1);
	if (!text)
		goto out;
	while (len <= SAVE_MAX) {
		n = read(fd, text + len, SAVE_MAX + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ternadm_err("target restore: cannot read %s: %s", file,
				    strerror(errno));
			goto out;
		}
		if (!n)
			break;
		len += n;
	}
	if (len > SAVE_MAX) {
		ternadm_err("target restore: %s is larger than %d bytes", file,
			    SAVE_MAX);
		goto out;
	}
	if (json_parse(text, len, &c->root, err, sizeof(err))) {
		ternadm_err("target restore: %s is not valid JSON: %s", file,
			    err);
		goto out;
	}
	if (c->root.type != JSON_OBJECT) {
		ternadm_err("target restore: %s: not a JSON object", file);
		goto out;
	}
	if (r_keys(&w, &c->root, top) ||
	    r_list(c, file, "exports", &exports) ||
	    r_list(c, file, "ports", &ports) ||
	    r_list(c, file, "hosts", &hosts))
		goto out;
	c->exports = calloc(exports ? exports->n + 1 : 1, sizeof(*c->exports));
	c->ports = calloc(ports ? ports->n + 1 : 1, sizeof(*c->ports));
	c->hosts = calloc(hosts ? hosts->n + 1 : 1, sizeof(*c->hosts));
	if (!c->exports || !c->ports || !c->hosts) {
		ternadm_err("target restore: out of memory");
		goto out;
	}
	w.kind = "exports";
	for (i = 0; exports && i < exports->n; i++, c->nr_exports++) {
		w.index = i;
		c->exports[i].name = r_name(&exports->items[i]);
		w.name = c->exports[i].name;
		if (r_export(&w, &exports->items[i], &c->exports[i]))
			goto out;
	}
	w.kind = "ports";
	for (i = 0; ports && i < ports->n; i++, c->nr_ports++) {
		w.index = i;
		c->ports[i].name = r_name(&ports->items[i]);
		w.name = c->ports[i].name;
		if (r_port(&w, &ports->items[i], &c->ports[i], c))
			goto out;
	}
	w.kind = "hosts";
	for (i = 0; hosts && i < hosts->n; i++) {
		w.index = i;
		c->hosts[i].name = r_name(&hosts->items[i]);
		w.name = c->hosts[i].name;
		/* counted first: its key, once read, must be wiped */
		c->nr_hosts++;
		if (r_host(&w, &hosts->items[i], &c->hosts[i], keys_dir))
			goto out;
	}
	ret = 0;
out:
	if (ret && !text)
		ternadm_err("target restore: out of memory");
	free(text);
	close(fd);
	return ret;
}

/* ---- making it ---- */

/* What restore made, to be undone in reverse when a later step fails. */
struct r_undo {
	char	path[PATH_MAX];
	bool	link;		/* unlink; else disable and rmdir */
};

struct r_made {
	struct r_undo	*steps;
	size_t		nr;
};

static void r_path(char *buf, const char *fmt, const char *a, const char *b)
{
	int n = snprintf(buf, PATH_MAX, "%s/", TARGET_CFS);

	snprintf(buf + n, PATH_MAX - n, fmt, a, b);
}

static int r_remember(struct r_made *m, const char *path, bool link)
{
	struct r_undo *steps = realloc(m->steps, (m->nr + 1) * sizeof(*steps));

	if (!steps) {
		ternadm_err("target restore: out of memory");
		return -1;
	}
	m->steps = steps;
	snprintf(steps[m->nr].path, PATH_MAX, "%s", path);
	steps[m->nr++].link = link;
	return 0;
}

/* Disable, then remove the export or port at @dir; a host has no enable. */
static int r_remove_dir(const char *dir)
{
	char enable[PATH_MAX + 8];
	struct stat st;

	snprintf(enable, sizeof(enable), "%s/enable", dir);
	if (!stat(enable, &st))
		write_attr(enable, "0");
	if (!rmdir(dir))
		return 0;
	ternadm_err("target: cannot remove %s: %s", dir, strerror(errno));
	return -1;
}

static void r_undo(struct r_made *m)
{
	while (m->nr--) {
		struct r_undo *u = &m->steps[m->nr];

		if (u->link) {
			if (unlink(u->path))
				ternadm_err("target: cannot remove %s: %s",
					    u->path, strerror(errno));
		} else {
			r_remove_dir(u->path);
		}
	}
	free(m->steps);
}

static int r_mkdir(struct r_made *m, const char *kind, const char *name)
{
	char path[PATH_MAX];

	r_path(path, "%ss/%s", kind, name);
	if (mkdir(path, 0755)) {
		ternadm_err("target restore: cannot create %s %s: %s", kind,
			    name, strerror(errno));
		return -1;
	}
	return r_remember(m, path, false);
}

static int r_set(const char *kind, const char *name, const char *attr,
		 const char *val)
{
	char path[PATH_MAX], sub[NAME_MAX_LEN + 32];
	int err;

	snprintf(sub, sizeof(sub), "%s/%s", name, attr);
	r_path(path, "%ss/%s", kind, sub);
	err = write_attr(path, val);
	if (!err)
		return 0;
	ternadm_err("target restore: %s %s: cannot set %s%s%s: %s%s", kind,
		    name, attr, strcmp(attr, "key") ? " to " : "",
		    strcmp(attr, "key") ? val : "", strerror(-err),
		    err == -EINVAL ? " (the kernel log says why)" : "");
	return -1;
}

static int r_make_export(struct r_made *m, const struct r_export *e)
{
	if (r_mkdir(m, "export", e->name) ||
	    r_set("export", e->name, "device_path", e->device_path) ||
	    r_set("export", e->name, "read_only", e->read_only ? "1" : "0") ||
	    (e->hosts[0] &&
	     r_set("export", e->name, "allowed_hosts", e->hosts)) ||
	    (e->require_auth &&
	     r_set("export", e->name, "require_auth", "1")) ||
	    (e->uuid && r_set("export", e->name, "uuid", e->uuid)) ||
	    (e->enabled && r_set("export", e->name, "enable", "1")))
		return -1;
	return 0;
}

static int r_make_port(struct r_made *m, const struct r_port *p)
{
	char num[24], link[PATH_MAX], dest[PATH_MAX];
	size_t i;

	if (r_mkdir(m, "port", p->name) ||
	    r_set("port", p->name, "transport", p->transport) ||
	    r_set("port", p->name, "address", p->address))
		return -1;
	snprintf(num, sizeof(num), "%llu", (unsigned long long)p->service);
	if (r_set("port", p->name, "service", num))
		return -1;
	snprintf(num, sizeof(num), "%llu", (unsigned long long)p->max_lanes);
	if (p->max_lanes && r_set("port", p->name, "max_lanes", num))
		return -1;
	snprintf(num, sizeof(num), "%llu",
		 (unsigned long long)p->max_queue_depth);
	if ((p->max_queue_depth &&
	     r_set("port", p->name, "max_queue_depth", num)) ||
	    (p->require_auth && r_set("port", p->name, "require_auth", "1")) ||
	    (p->require_encrypt &&
	     r_set("port", p->name, "require_encrypt", "1")) ||
	    (p->require_integrity &&
	     r_set("port", p->name, "require_integrity", "1")))
		return -1;
	/* linked before it listens: a client never sees a partial port */
	for (i = 0; p->exports && i < p->exports->n; i++) {
		const char *exp = p->exports->items[i].str;

		r_path(dest, "exports/%s%s", exp, "");
		r_path(link, "ports/%s/exports/%s", p->name, exp);
		if (symlink(dest, link)) {
			ternadm_err("target restore: cannot link export %s to port %s: %s",
				    exp, p->name, strerror(errno));
			return -1;
		}
		if (r_remember(m, link, true))
			return -1;
	}
	if (p->enabled && r_set("port", p->name, "enable", "1"))
		return -1;
	return 0;
}

static int r_make_host(struct r_made *m, const struct r_host *h)
{
	if (r_mkdir(m, "host", h->name))
		return -1;
	return h->key_set ? r_set("host", h->name, "key", h->key) : 0;
}

/* The number of entries of TARGET_CFS/@kind, or -1 if it is not there. */
static int r_count(const char *kind)
{
	char path[PATH_MAX];
	struct dirent *de;
	int nr = 0;
	DIR *dh;

	r_path(path, "%s%s", kind, "");
	dh = opendir(path);
	if (!dh)
		return -1;
	while ((de = readdir(dh)))
		if (de->d_name[0] != '.')
			nr++;
	closedir(dh);
	return nr;
}

static int r_target_root(const char *cmd)
{
	if (r_count("exports") >= 0)
		return 0;
	ternadm_err("target %s: no %s (is tern_target loaded and configfs mounted?)",
		    cmd, TARGET_CFS);
	return -1;
}

/* "[FILE] [--keys DIR]"; EXIT_OK or EXIT_USAGE. */
static int r_args(int argc, char **argv, const char *cmd, const char **file,
		  const char **keys_dir)
{
	bool have_file = false;
	int i;

	*file = TARGET_FILE;
	*keys_dir = KEYS_DIR;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--keys") && i + 1 < argc &&
		    argv[i + 1][0]) {
			*keys_dir = argv[++i];
		} else if (argv[i][0] != '-' && argv[i][0] && !have_file) {
			*file = argv[i];
			have_file = true;
		} else {
			ternadm_err("target %s: expected [FILE] [--keys DIR], not '%s'",
				    cmd, argv[i]);
			return EXIT_USAGE;
		}
	}
	return EXIT_OK;
}

static int target_restore(int argc, char **argv)
{
	const char *file, *keys_dir;
	struct r_made made = { 0 };
	struct r_config c;
	size_t i;
	int rc, nr, nr_ports, nr_hosts;

	memset(&c, 0, sizeof(c));
	rc = r_args(argc, argv, "restore", &file, &keys_dir);
	if (rc != EXIT_OK)
		return rc;
	if (r_target_root("restore") || r_load(file, keys_dir, &c)) {
		rc = EXIT_FAILED;
		goto out;
	}
	nr_ports = r_count("ports");
	nr_hosts = r_count("hosts");
	nr = r_count("exports");
	if (nr < 0 || nr_ports < 0) {
		ternadm_err("target restore: cannot read %s/exports or %s/ports",
			    TARGET_CFS, TARGET_CFS);
		rc = EXIT_FAILED;
		goto out;
	}
	/* an old tern_target has no hosts: -1 */
	if (nr + nr_ports + (nr_hosts > 0 ? nr_hosts : 0)) {
		ternadm_err("target restore: the target has a configuration already; ternadm target clear removes it");
		rc = EXIT_FAILED;
		goto out;
	}
	if (c.nr_hosts && nr_hosts < 0) {
		ternadm_err("target restore: %s has hosts, but tern_target has no %s/hosts",
			    file, TARGET_CFS);
		rc = EXIT_FAILED;
		goto out;
	}
	rc = EXIT_FAILED;
	for (i = 0; i < c.nr_hosts; i++)
		if (r_make_host(&made, &c.hosts[i]))
			goto undo;
	for (i = 0; i < c.nr_exports; i++)
		if (r_make_export(&made, &c.exports[i]))
			goto undo;
	for (i = 0; i < c.nr_ports; i++)
		if (r_make_port(&made, &c.ports[i]))
			goto undo;
	free(made.steps);
	printf("restored %zu exports, %zu ports and %zu hosts from %s\n",
	       c.nr_exports, c.nr_ports, c.nr_hosts, file);
	rc = EXIT_OK;
	goto out;
undo:
	ternadm_err("target restore: undoing what was restored from %s",
		    file);
	r_undo(&made);
out:
	r_free(&c);
	return rc;
}

/* ---- clear ---- */

/* Remove every entry of TARGET_CFS/@kind; the number that would not go. */
static int r_clear_kind(const char *kind)
{
	char path[PATH_MAX], links[PATH_MAX], link[PATH_MAX + NAME_MAX + 1];
	struct dirent **names, **sub;
	int i, j, nr, nr_sub, failed = 0;

	r_path(path, "%s%s", kind, "");
	nr = scandir(path, &names, NULL, alphasort);
	if (nr < 0)
		return 0;
	for (i = 0; i < nr; i++) {
		const char *name = names[i]->d_name;

		if (name[0] == '.')
			continue;
		r_path(path, "%s/%s", kind, name);
		if (!strcmp(kind, "ports")) {
			/* not listening before its links go */
			r_path(link, "ports/%s/enable", name, "");
			write_attr(link, "0");
			r_path(links, "ports/%s/exports", name, "");
			nr_sub = scandir(links, &sub, NULL, alphasort);
			for (j = 0; j < nr_sub; j++) {
				snprintf(link, sizeof(link), "%s/%s", links,
					 sub[j]->d_name);
				if (sub[j]->d_name[0] != '.' && unlink(link)) {
					ternadm_err("target clear: cannot remove %s: %s",
						    link, strerror(errno));
					failed++;
				}
				free(sub[j]);
			}
			if (nr_sub >= 0)
				free(sub);
		}
		if (r_remove_dir(path))
			failed++;
	}
	for (i = 0; i < nr; i++)
		free(names[i]);
	free(names);
	return failed;
}

static int target_clear(int argc, char **argv)
{
	int failed;

	if (argc != 1) {
		ternadm_err("target clear: unexpected '%s'", argv[1]);
		return EXIT_USAGE;
	}
	/* nothing loaded, nothing to clear: what a unit's stop wants */
	if (r_count("exports") < 0)
		return EXIT_OK;
	failed = r_clear_kind("ports");
	failed += r_clear_kind("exports");
	failed += r_clear_kind("hosts");
	if (failed) {
		ternadm_err("target clear: %d left in place", failed);
		return EXIT_FAILED;
	}
	return EXIT_OK;
}

/* ---- save ---- */

/*
 * Run "target show --json" with its output going to @fd; its errors
 * stay on stderr. Return its exit status.
 */
static int r_show_into(int fd)
{
	char json[] = "--json";
	char *argv[4] = { "target", "show", json, NULL };
	int saved, rc;

	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	if (saved < 0 || dup2(fd, STDOUT_FILENO) < 0) {
		ternadm_err("target save: %s", strerror(errno));
		if (saved >= 0)
			close(saved);
		return EXIT_FAILED;
	}
	rc = target_main(3, argv);
	if (fflush(stdout))
		rc = EXIT_FAILED;
	dup2(saved, STDOUT_FILENO);
	close(saved);
	return rc;
}

/* Say which key files a restore would need and does not find. */
static void r_check_keys(const char *file, const char *keys_dir)
{
	char path[PATH_MAX];
	struct dirent **names;
	struct stat st;
	int i, nr;

	r_path(path, "hosts%s%s", "", "");
	nr = scandir(path, &names, NULL, alphasort);
	for (i = 0; i < nr; i++) {
		const char *name = names[i]->d_name;
		char key[16];

		r_path(path, "hosts/%s/key", name, "");
		if (name[0] != '.' && !read_attr(path, key, sizeof(key)) &&
		    !strcmp(key, "set")) {
			snprintf(path, sizeof(path), "%s/%s.key", keys_dir,
				 name);
			if (stat(path, &st))
				ternadm_err("target save: warning: host %s has a key, which is not saved: restoring %s needs it in %s",
					    name, file, path);
		}
		free(names[i]);
	}
	if (nr >= 0)
		free(names);
}

/* Make a rename into @file's directory last: fsync() the directory. */
static int r_sync_dir(const char *file)
{
	char dir[PATH_MAX];
	char *slash;
	int fd, ret;

	snprintf(dir, sizeof(dir), "%s", file);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ret = fsync(fd);
	close(fd);
	return ret;
}

static int target_save(int argc, char **argv)
{
	char tmp[PATH_MAX];
	const char *file, *keys_dir;
	struct r_config c;
	int fd, rc;

	memset(&c, 0, sizeof(c));
	rc = r_args(argc, argv, "save", &file, &keys_dir);
	if (rc != EXIT_OK)
		return rc;
	if (r_target_root("save"))
		return EXIT_FAILED;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", file) >= (int)sizeof(tmp)) {
		ternadm_err("target save: %s: name too long", file);
		return EXIT_FAILED;
	}
	/* no secret in it, but an administrator's file: theirs to open */
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0644);
	if (fd < 0) {
		ternadm_err("target save: cannot create %s: %s", tmp,
			    strerror(errno));
		return EXIT_FAILED;
	}
	rc = r_show_into(fd);
	/*
	 * What was written must restore: check it as restore does, but for
	 * the keys (r_check_keys() warns about those). An export made and
	 * never given a device, say, is refused here, where the
	 * administrator sees it, not at the next boot's restore.
	 */
	if (rc != EXIT_OK) {
		ternadm_err("target save: target show failed");
	} else if (r_load(tmp, NULL, &c)) {
		ternadm_err("target save: a restore would refuse what the target holds (above); %s left as it was",
			    file);
		rc = EXIT_FAILED;
	}
	r_free(&c);
	if (rc == EXIT_OK && fsync(fd)) {
		ternadm_err("target save: %s: %s", tmp, strerror(errno));
		rc = EXIT_FAILED;
	}
	close(fd);
	if (rc == EXIT_OK && rename(tmp, file)) {
		ternadm_err("target save: cannot rename %s to %s: %s", tmp,
			    file, strerror(errno));
		rc = EXIT_FAILED;
	}
	if (rc == EXIT_OK && r_sync_dir(file)) {
		ternadm_err("target save: cannot sync the directory of %s: %s",
			    file, strerror(errno));
		rc = EXIT_FAILED;
	}
	if (rc != EXIT_OK) {
		unlink(tmp);
		return rc;
	}
	r_check_keys(file, keys_dir);
	return EXIT_OK;
}

int target_cfg_main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "save"))
		return target_save(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "restore"))
		return target_restore(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "clear"))
		return target_clear(argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "help") || !strcmp(argv[1], "-h") ||
			  !strcmp(argv[1], "--help"))) {
		target_cfg_usage(stdout);
		return EXIT_OK;
	}
	return target_main(argc, argv);
}
