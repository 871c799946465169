// SPDX-License-Identifier: GPL-2.0
/*
 * ternadm target: configure tern_target through configfs.
 *
 *   ternadm target export add NAME PATH [--read-only] [--allowed-hosts H,..]
 *                                     [--require-auth] [--uuid UUID]
 *   ternadm target export del NAME
 *   ternadm target port add NAME URI [--max-lanes N] [--max-queue-depth N]
 *                                  [--require-auth] [--require-encrypt]
 *                                  [--require-integrity]
 *   ternadm target port del NAME
 *   ternadm target link PORT EXPORT
 *   ternadm target unlink PORT EXPORT
 *   ternadm target host add NAME --key-file FILE
 *   ternadm target host del NAME
 *   ternadm target host list
 *   ternadm target host key NAME --key-file FILE|--clear
 *   ternadm target show [--json]
 *
 * Everything is checked before anything is created. An add sets the
 * attributes, then enables; when a step fails, what was made is undone.
 * A del disables first, then removes. A host is a client identity with
 * its authentication key; the key is written to configfs and never
 * printed, and reading it back only says whether one is set.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ternadm.h"

#define MAX_HOSTS	16	/* allowed_hosts per export */
#define ATTR_MAX	4096	/* a configfs attribute page */
#define PORT_MAX_QDEPTH	256	/* tern_target's TERN_TGT_MAX_QUEUE_DEPTH */

static const char *const target_help[] = {
	"",
	"Exports are block devices or regular files (PATH, absolute); ports",
	"listen on URI, tcp://ADDR[:PORT] or rdma://ADDR[:PORT] with ADDR a",
	"numeric IPv4 address or an IPv6 address in brackets, PORT 7447 by",
	"default. A port serves the exports linked to it. Names are",
	NAME_RULE ".",
	"",
	"export add options:",
	"  --read-only            refuse writes from every client",
	"  --allowed-hosts H1,H2  only these host ids may map it (at most 16)",
	"  --require-auth         only clients that authenticate may map it",
	"  --uuid UUID            the export's persistent name, as clients see",
	"                         it (default: a new random one)",
	"",
	"port add options (caps on what each session negotiates):",
	"  --max-lanes N          lanes per session, 1..64 (default 64)",
	"  --max-queue-depth N    requests in flight per session, 1..256",
	"                         (default 256)",
	"  --require-auth         refuse connections that do not authenticate",
	"  --require-encrypt      refuse connections that do not encrypt (tcp)",
	"  --require-integrity    refuse connections that neither sign nor",
	"                         encrypt (tcp)",
	"",
	"export del refuses an export still linked to a port; port del",
	"removes the port's links.",
	"",
	"A host is a client's host id (its map --host, by default its node",
	"name) with the key it authenticates with, from ternadm key generate.",
	"host add creates it with the key in FILE; host key replaces the key,",
	"or with --clear revokes it; host del removes the host and its key.",
	"host list prints each host and whether it has a key.",
};

void target_usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: %s target export add NAME PATH [--read-only]\n",
		ternadm_prog);
	fprintf(out, "                 [--allowed-hosts H1,H2] [--require-auth]\n");
	fprintf(out, "                 [--uuid UUID]\n");
	fprintf(out, "       %s target export del NAME\n", ternadm_prog);
	fprintf(out, "       %s target export resize NAME\n", ternadm_prog);
	fprintf(out, "       %s target port add NAME URI [--max-lanes N]\n",
		ternadm_prog);
	fprintf(out, "                 [--max-queue-depth N] [--require-auth]\n");
	fprintf(out, "                 [--require-encrypt] [--require-integrity]\n");
	fprintf(out, "       %s target port del NAME\n", ternadm_prog);
	fprintf(out, "       %s target link PORT EXPORT\n", ternadm_prog);
	fprintf(out, "       %s target unlink PORT EXPORT\n", ternadm_prog);
	fprintf(out, "       %s target host add NAME --key-file FILE\n",
		ternadm_prog);
	fprintf(out, "       %s target host del NAME\n", ternadm_prog);
	fprintf(out, "       %s target host list\n", ternadm_prog);
	fprintf(out, "       %s target host key NAME --key-file FILE|--clear\n",
		ternadm_prog);
	fprintf(out, "       %s target show [--json]\n", ternadm_prog);
	for (i = 0; i < ARRAY_SIZE(target_help); i++)
		fprintf(out, "%s\n", target_help[i]);
}

/* A path under TARGET_CFS; every caller's names are short and checked. */
static void cfs_path(char *buf, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(buf, PATH_MAX, "%s/", TARGET_CFS);
	va_start(ap, fmt);
	vsnprintf(buf + n, PATH_MAX - n, fmt, ap);
	va_end(ap);
}

static bool is_dir(const char *path)
{
	struct stat st;

	return !lstat(path, &st) && S_ISDIR(st.st_mode);
}

/* tern_target's configfs tree is there; else say why not. */
static int target_root(void)
{
	char path[PATH_MAX];

	cfs_path(path, "exports");
	if (is_dir(path))
		return 0;
	ternadm_err("target: no %s (is tern_target loaded and configfs mounted?)",
		    TARGET_CFS);
	return -1;
}

static const char *kernel_says(int err)
{
	return err == EINVAL ? " (the kernel log says why)" : "";
}

/* Set @kind/@name/@attr to @val; prints why it failed. */
static int target_set(const char *kind, const char *name, const char *attr,
		      const char *val)
{
	char path[PATH_MAX];
	int err;

	cfs_path(path, "%ss/%s/%s", kind, name, attr);
	err = write_attr(path, val);
	if (err)
		ternadm_err("target: %s %s: cannot set %s to '%s': %s%s", kind,
			    name, attr, val, strerror(-err), kernel_says(-err));
	return err;
}

/* Disable, then remove @kind/@name; for undoing a half-made add, quiet. */
static void target_undo(const char *kind, const char *name)
{
	char path[PATH_MAX];

	cfs_path(path, "%ss/%s/enable", kind, name);
	write_attr(path, "0");
	cfs_path(path, "%ss/%s", kind, name);
	if (rmdir(path))
		ternadm_err("target: could not remove %s: %s", path,
			    strerror(errno));
}

/* Make @kind/@name; 0, or EXIT_FAILED after saying why. */
static int target_mkdir(const char *kind, const char *name)
{
	char path[PATH_MAX];

	if (target_root())
		return EXIT_FAILED;
	cfs_path(path, "%ss/%s", kind, name);
	if (!mkdir(path, 0755))
		return 0;
	if (errno == EEXIST)
		ternadm_err("target: %s %s already exists", kind, name);
	else
		ternadm_err("target: cannot create %s %s: %s%s", kind, name,
			    strerror(errno), kernel_says(errno));
	return EXIT_FAILED;
}

/* @kind/@name exists; else say so. */
static int target_exists(const char *kind, const char *name)
{
	char path[PATH_MAX];

	if (target_root())
		return -1;
	cfs_path(path, "%ss/%s", kind, name);
	if (is_dir(path))
		return 0;
	ternadm_err("target: no %s %s", kind, name);
	return -1;
}

static int check_name(const char *what, const char *name)
{
	if (valid_name(name))
		return 0;
	ternadm_err("target: bad %s name '%s': expected " NAME_RULE, what,
		    name);
	return -1;
}

/* "h1,h2" checked and copied into @out; -1 after saying why. */
static int parse_hosts(const char *list, char *out, size_t len)
{
	char *copy, *p, *tok;
	int nr = 0, ret = 0;

	if (strlen(list) >= len) {
		ternadm_err("target: --allowed-hosts is too long");
		return -1;
	}
	copy = strdup(list);
	if (!copy)
		return -1;
	out[0] = '\0';
	p = copy;
	while ((tok = strsep(&p, ","))) {
		if (!valid_name(tok)) {
			ternadm_err("target: bad host id '%s' in --allowed-hosts: expected "
				    NAME_RULE, tok);
			ret = -1;
			break;
		}
		if (++nr > MAX_HOSTS) {
			ternadm_err("target: at most %d allowed hosts",
				    MAX_HOSTS);
			ret = -1;
			break;
		}
		if (nr > 1)
			strcat(out, ",");
		strcat(out, tok);
	}
	free(copy);
	return ret;
}

enum {
	OPT_READ_ONLY = 256,
	OPT_ALLOWED_HOSTS,
	OPT_MAX_LANES,
	OPT_MAX_QUEUE_DEPTH,
	OPT_REQUIRE_AUTH,
	OPT_REQUIRE_ENCRYPT,
	OPT_REQUIRE_INTEGRITY,
	OPT_KEY_FILE,
	OPT_CLEAR,
	OPT_UUID,
};

static const struct option export_add_opts[] = {
	{ "read-only",		no_argument,	   NULL, OPT_READ_ONLY },
	{ "allowed-hosts",	required_argument, NULL, OPT_ALLOWED_HOSTS },
	{ "require-auth",	no_argument,	   NULL, OPT_REQUIRE_AUTH },
	{ "uuid",		required_argument, NULL, OPT_UUID },
	{ NULL, 0, NULL, 0 },
};

static int export_add(int argc, char **argv)
{
	const char *uuid = NULL;
	char hosts[ATTR_MAX] = "";
	bool read_only = false, have_hosts = false, require_auth = false;
	const char *name, *path;
	struct stat st;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", export_add_opts, NULL)) != -1) {
		switch (c) {
		case OPT_READ_ONLY:
			read_only = true;
			break;
		case OPT_ALLOWED_HOSTS:
			if (have_hosts) {
				ternadm_err("target export add: --allowed-hosts given twice");
				return EXIT_USAGE;
			}
			have_hosts = true;
			if (parse_hosts(optarg, hosts, sizeof(hosts)))
				return EXIT_USAGE;
			break;
		case OPT_REQUIRE_AUTH:
			require_auth = true;
			break;
		case OPT_UUID:
			if (uuid || !valid_uuid(optarg)) {
				ternadm_err("target export add: %s --uuid '%s': expected one non-nil xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
					    uuid ? "a second" : "bad", optarg);
				return EXIT_USAGE;
			}
			uuid = optarg;
			break;
		case '?':
		default:
			return bad_option("target export add", argv);
		}
	}
	if (argc - optind != 2) {
		ternadm_err("target export add: expected NAME PATH");
		return EXIT_USAGE;
	}
	name = argv[optind];
	path = argv[optind + 1];
	if (check_name("export", name))
		return EXIT_USAGE;
	if (path[0] != '/' || strlen(path) >= PATH_MAX) {
		ternadm_err("target export add: PATH must be absolute: '%s'",
			    path);
		return EXIT_USAGE;
	}
	if (stat(path, &st)) {
		ternadm_err("target export add: %s: %s", path, strerror(errno));
		return EXIT_FAILED;
	}
	if (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode)) {
		ternadm_err("target export add: %s is neither a block device nor a regular file",
			    path);
		return EXIT_FAILED;
	}
	if (target_mkdir("export", name))
		return EXIT_FAILED;
	if (target_set("export", name, "device_path", path) ||
	    target_set("export", name, "read_only", read_only ? "1" : "0") ||
	    (have_hosts &&
	     target_set("export", name, "allowed_hosts", hosts)) ||
	    (require_auth &&
	     target_set("export", name, "require_auth", "1")) ||
	    (uuid && target_set("export", name, "uuid", uuid)) ||
	    target_set("export", name, "enable", "1")) {
		target_undo("export", name);
		return EXIT_FAILED;
	}
	return EXIT_OK;
}

/* The export a link under ports/PORT/exports/ points to, by name. */
static int link_target(const char *link, char *buf, size_t len)
{
	char dest[PATH_MAX];
	const char *base;
	ssize_t n;

	n = readlink(link, dest, sizeof(dest) - 1);
	if (n < 0)
		return -1;
	dest[n] = '\0';
	base = strrchr(dest, '/');
	base = base ? base + 1 : dest;
	if (strlen(base) >= len)
		return -1;
	snprintf(buf, len, "%s", base);
	return 0;
}

/* A link ports/PORT/exports/LINK to exports/EXPORT. */
struct link_info {
	const char	*port;
	const char	*link;
	const char	*exp;
};

typedef int (*link_fn)(const struct link_info *l, void *arg);

/*
 * Call @fn on every link of @port, in the order of their names, so that
 * show prints the same whatever order they were made in; stop at a
 * non-zero return, return it.
 */
static int walk_links(const char *port, link_fn fn, void *arg)
{
	struct link_info l = { .port = port };
	char dir[PATH_MAX], path[PATH_MAX * 2], exp[NAME_MAX_LEN];
	struct dirent **names;
	int i, nr, ret = 0;

	cfs_path(dir, "ports/%s/exports", port);
	nr = scandir(dir, &names, NULL, alphasort);
	for (i = 0; i < nr; i++) {
		const char *name = names[i]->d_name;

		snprintf(path, sizeof(path), "%s/%s", dir, name);
		if (!ret && name[0] != '.' &&
		    !link_target(path, exp, sizeof(exp))) {
			l.link = name;
			l.exp = exp;
			ret = fn(&l, arg);
		}
		free(names[i]);
	}
	if (nr >= 0)
		free(names);
	return ret;
}

/* The entries of @dir, sorted; *nr is -1 when @dir cannot be read. */
static struct dirent **list_dir(const char *dir, int *nr)
{
	struct dirent **names = NULL;
	int n;

	n = scandir(dir, &names, NULL, alphasort);
	*nr = n;
	return n < 0 ? NULL : names;
}

static void free_dir(struct dirent **names, int nr)
{
	int i;

	for (i = 0; i < nr; i++)
		free(names[i]);
	free(names);
}

static int linked_to(const struct link_info *l, void *arg)
{
	if (strcmp(l->exp, arg))
		return 0;
	ternadm_err("target: export %s is linked to port %s", l->exp, l->port);
	return 1;
}

/* `target export CMD NAME`: NAME names an existing export. */
static int export_name_arg(int argc, char **argv, const char *cmd)
{
	if (argc != 2 || argv[1][0] == '-') {
		ternadm_err("target export %s: expected NAME", cmd);
		return EXIT_USAGE;
	}
	if (check_name("export", argv[1]))
		return EXIT_USAGE;
	if (target_exists("export", argv[1]))
		return EXIT_FAILED;
	return EXIT_OK;
}

static int export_del(int argc, char **argv)
{
	char path[PATH_MAX];
	struct dirent **ports;
	int i, nr, busy = 0, rc;

	rc = export_name_arg(argc, argv, "del");
	if (rc != EXIT_OK)
		return rc;
	cfs_path(path, "ports");
	ports = list_dir(path, &nr);
	for (i = 0; i < nr; i++)
		if (ports[i]->d_name[0] != '.')
			busy |= walk_links(ports[i]->d_name, linked_to,
					      argv[1]);
	free_dir(ports, nr);
	if (busy) {
		ternadm_err("target: unlink export %s first; not removed",
			    argv[1]);
		return EXIT_FAILED;
	}
	if (target_set("export", argv[1], "enable", "0"))
		return EXIT_FAILED;
	cfs_path(path, "exports/%s", argv[1]);
	if (rmdir(path)) {
		ternadm_err("target: cannot remove export %s: %s", argv[1],
			    strerror(errno));
		return EXIT_FAILED;
	}
	return EXIT_OK;
}

/*
 * The backend of an export grew or shrank: the target reads its size
 * again and the clients that map it follow at once.
 */
static int export_resize(int argc, char **argv)
{
	int rc = export_name_arg(argc, argv, "resize");

	if (rc != EXIT_OK)
		return rc;
	if (target_set("export", argv[1], "revalidate_size", "1"))
		return EXIT_FAILED;
	return EXIT_OK;
}

static const struct option port_add_opts[] = {
	{ "max-lanes",		required_argument, NULL, OPT_MAX_LANES },
	{ "max-queue-depth",	required_argument, NULL, OPT_MAX_QUEUE_DEPTH },
	{ "require-auth",	no_argument,	   NULL, OPT_REQUIRE_AUTH },
	{ "require-encrypt",	no_argument,	   NULL, OPT_REQUIRE_ENCRYPT },
	{ "require-integrity",	no_argument,	   NULL, OPT_REQUIRE_INTEGRITY },
	{ NULL, 0, NULL, 0 },
};

/* A --max-* value once, in 1..@max, into @out as text; -1 after saying why. */
static int port_cap(const char *opt, const char *val, u64 max, char *out,
		    size_t len)
{
	u64 v;

	if (out[0]) {
		ternadm_err("target port add: --%s given twice", opt);
		return -1;
	}
	if (parse_u64(val, 1, max, &v)) {
		ternadm_err("target port add: bad value '%s' for --%s: expected 1..%llu",
			    val, opt, (unsigned long long)max);
		return -1;
	}
	snprintf(out, len, "%llu", (unsigned long long)v);
	return 0;
}

static int port_add(int argc, char **argv)
{
	char num[16], lanes[16] = "", depth[16] = "";
	const char *why, *name;
	bool require_auth = false, require_encrypt = false;
	bool require_integrity = false;
	struct tern_uri u;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", port_add_opts, NULL)) != -1) {
		switch (c) {
		case OPT_MAX_LANES:
			if (port_cap("max-lanes", optarg, TERN_WIRE_MAX_LANES,
				     lanes, sizeof(lanes)))
				return EXIT_USAGE;
			break;
		case OPT_MAX_QUEUE_DEPTH:
			if (port_cap("max-queue-depth", optarg,
				     PORT_MAX_QDEPTH, depth, sizeof(depth)))
				return EXIT_USAGE;
			break;
		case OPT_REQUIRE_AUTH:
			require_auth = true;
			break;
		case OPT_REQUIRE_ENCRYPT:
			require_encrypt = true;
			break;
		case OPT_REQUIRE_INTEGRITY:
			require_integrity = true;
			break;
		case '?':
		default:
			return bad_option("target port add", argv);
		}
	}
	if (argc - optind != 2) {
		ternadm_err("target port add: expected NAME URI");
		return EXIT_USAGE;
	}
	name = argv[optind];
	if (check_name("port", name))
		return EXIT_USAGE;
	why = parse_uri(argv[optind + 1], false, &u);
	if (why) {
		ternadm_err("target port add: bad URI '%s': %s",
			    argv[optind + 1], why);
		return EXIT_USAGE;
	}
	if (target_mkdir("port", name))
		return EXIT_FAILED;
	snprintf(num, sizeof(num), "%u", u.port);
	if (target_set("port", name, "transport", u.scheme) ||
	    target_set("port", name, "address", u.address) ||
	    target_set("port", name, "service", num) ||
	    (lanes[0] && target_set("port", name, "max_lanes", lanes)) ||
	    (depth[0] && target_set("port", name, "max_queue_depth", depth)) ||
	    (require_auth && target_set("port", name, "require_auth", "1")) ||
	    (require_encrypt &&
	     target_set("port", name, "require_encrypt", "1")) ||
	    (require_integrity &&
	     target_set("port", name, "require_integrity", "1")) ||
	    target_set("port", name, "enable", "1")) {
		target_undo("port", name);
		return EXIT_FAILED;
	}
	return EXIT_OK;
}

/* Remove a link of a port; @arg counts the links removed. */
static int remove_link(const struct link_info *l, void *arg)
{
	char path[PATH_MAX];

	cfs_path(path, "ports/%s/exports/%s", l->port, l->link);
	if (!unlink(path)) {
		++*(int *)arg;
		return 0;
	}
	ternadm_err("target: cannot unlink export %s from port %s: %s",
		    l->exp, l->port, strerror(errno));
	return 1;
}

static int port_del(int argc, char **argv)
{
	char path[PATH_MAX];
	int removed = 0;

	if (argc != 2 || argv[1][0] == '-') {
		ternadm_err("target port del: expected NAME");
		return EXIT_USAGE;
	}
	if (check_name("port", argv[1]))
		return EXIT_USAGE;
	if (target_exists("port", argv[1]))
		return EXIT_FAILED;
	if (target_set("port", argv[1], "enable", "0") ||
	    walk_links(argv[1], remove_link, &removed))
		return EXIT_FAILED;
	cfs_path(path, "ports/%s", argv[1]);
	if (rmdir(path)) {
		ternadm_err("target: cannot remove port %s: %s", argv[1],
			    strerror(errno));
		return EXIT_FAILED;
	}
	return EXIT_OK;
}

/* @arg holds an export's name; on a match, the path of its link. */
static int find_link(const struct link_info *l, void *arg)
{
	if (strcmp(l->exp, arg))
		return 0;
	cfs_path(arg, "ports/%s/exports/%s", l->port, l->link);
	return 1;
}

static int target_link(int argc, char **argv, bool add)
{
	const char *what = add ? "link" : "unlink";
	char path[PATH_MAX], dest[PATH_MAX];

	if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-') {
		ternadm_err("target %s: expected PORT EXPORT", what);
		return EXIT_USAGE;
	}
	if (check_name("port", argv[1]) || check_name("export", argv[2]))
		return EXIT_USAGE;
	if (target_exists("port", argv[1]))
		return EXIT_FAILED;
	snprintf(path, sizeof(path), "%s", argv[2]);
	if (!walk_links(argv[1], find_link, path)) {
		if (!add) {
			ternadm_err("target: export %s is not linked to port %s",
				    argv[2], argv[1]);
			return EXIT_FAILED;
		}
	} else if (add) {
		ternadm_err("target: export %s is already linked to port %s",
			    argv[2], argv[1]);
		return EXIT_FAILED;
	}
	if (!add) {
		if (unlink(path)) {
			ternadm_err("target: cannot unlink %s: %s", path,
				    strerror(errno));
			return EXIT_FAILED;
		}
		return EXIT_OK;
	}
	if (target_exists("export", argv[2]))
		return EXIT_FAILED;
	cfs_path(dest, "exports/%s", argv[2]);
	cfs_path(path, "ports/%s/exports/%s", argv[1], argv[2]);
	if (symlink(dest, path)) {
		ternadm_err("target: cannot link export %s to port %s: %s%s",
			    argv[2], argv[1], strerror(errno),
			    kernel_says(errno));
		return EXIT_FAILED;
	}
	return EXIT_OK;
}

/* ---- hosts ---- */

/* tern_target has hosts, that is authentication; else say so. */
static int hosts_root(void)
{
	char path[PATH_MAX];

	if (target_root())
		return -1;
	cfs_path(path, "hosts");
	if (is_dir(path))
		return 0;
	ternadm_err("target: no %s/hosts (tern_target without authentication?)",
		    TARGET_CFS);
	return -1;
}

/*
 * Write @text, a checked key or "\n" to revoke, to hosts/@name/key. The
 * key is never part of a message. 0, or -1 after saying why.
 */
static int host_set_key(const char *name, const char *text)
{
	char path[PATH_MAX];
	int err;

	cfs_path(path, "hosts/%s/key", name);
	err = write_attr(path, text);
	if (!err)
		return 0;
	ternadm_err("target: host %s: cannot %s its key: %s%s", name,
		    text[0] == '\n' ? "clear" : "set", strerror(-err),
		    kernel_says(-err));
	return -1;
}

static bool host_has_key(const char *name)
{
	char path[PATH_MAX], buf[16];

	cfs_path(path, "hosts/%s/key", name);
	return !read_attr(path, buf, sizeof(buf)) && !strcmp(buf, "set");
}

static const struct option host_key_opts[] = {
	{ "key-file",		required_argument, NULL, OPT_KEY_FILE },
	{ "clear",		no_argument,	   NULL, OPT_CLEAR },
	{ NULL, 0, NULL, 0 },
};

/*
 * `target host add|key NAME --key-file FILE` (and for key, --clear):
 * the key read and checked into @key, or @key "\n" for --clear.
 */
static int host_key_args(int argc, char **argv, const char *cmd, bool add,
			 char *key)
{
	const char *file = NULL;
	bool clear = false;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", host_key_opts, NULL)) != -1) {
		switch (c) {
		case OPT_KEY_FILE:
			if (file) {
				ternadm_err("%s: --key-file given twice", cmd);
				return EXIT_USAGE;
			}
			file = optarg;
			break;
		case OPT_CLEAR:
			if (add)
				return bad_option(cmd, argv);
			clear = true;
			break;
		case '?':
		default:
			return bad_option(cmd, argv);
		}
	}
	if (argc - optind != 1) {
		ternadm_err("%s: expected NAME", cmd);
		return EXIT_USAGE;
	}
	if (check_name("host", argv[optind]))
		return EXIT_USAGE;
	if (file && clear) {
		ternadm_err("%s: --key-file and --clear exclude each other",
			    cmd);
		return EXIT_USAGE;
	}
	if (!file && !clear) {
		ternadm_err("%s: expected --key-file FILE%s", cmd,
			    add ? "" : " or --clear");
		return EXIT_USAGE;
	}
	if (clear) {
		snprintf(key, 2, "\n");
		return EXIT_OK;
	}
	if (!file[0]) {
		ternadm_err("%s: empty --key-file", cmd);
		return EXIT_USAGE;
	}
	if (key_read_file(cmd, file, key))
		return EXIT_FAILED;
	return EXIT_OK;
}

/* A new host with its key; on a failure nothing of it remains. */
static int host_add(int argc, char **argv)
{
	char key[KEY_TEXT_LEN + 1], path[PATH_MAX];
	const char *name;
	int rc;

	rc = host_key_args(argc, argv, "target host add", true, key);
	if (rc != EXIT_OK)
		return rc;
	name = argv[optind];
	rc = EXIT_FAILED;
	if (hosts_root() || target_mkdir("host", name))
		goto out;
	if (host_set_key(name, key)) {
		cfs_path(path, "hosts/%s", name);
		if (rmdir(path))
			ternadm_err("target: could not remove %s: %s", path,
				    strerror(errno));
		goto out;
	}
	rc = EXIT_OK;
out:
	explicit_bzero(key, sizeof(key));
	return rc;
}

/* Replace the key of a host, or revoke it. */
static int host_key(int argc, char **argv)
{
	char key[KEY_TEXT_LEN + 1];
	int rc;

	rc = host_key_args(argc, argv, "target host key", false, key);
	if (rc != EXIT_OK)
		return rc;
	rc = EXIT_FAILED;
	if (!hosts_root() && !target_exists("host", argv[optind]) &&
	    !host_set_key(argv[optind], key))
		rc = EXIT_OK;
	explicit_bzero(key, sizeof(key));
	return rc;
}

/* Remove a host; its key is revoked with it. */
static int host_del(int argc, char **argv)
{
	char path[PATH_MAX];

	if (argc != 2 || argv[1][0] == '-') {
		ternadm_err("target host del: expected NAME");
		return EXIT_USAGE;
	}
	if (check_name("host", argv[1]))
		return EXIT_USAGE;
	if (hosts_root() || target_exists("host", argv[1]))
		return EXIT_FAILED;
	cfs_path(path, "hosts/%s", argv[1]);
	if (rmdir(path)) {
		ternadm_err("target: cannot remove host %s: %s", argv[1],
			    strerror(errno));
		return EXIT_FAILED;
	}
	return EXIT_OK;
}

/* Each host and whether it has a key, one per line. */
static int host_list(int argc, char **argv)
{
	struct dirent **names;
	char path[PATH_MAX];
	int i, nr;

	if (argc != 1) {
		ternadm_err("target host list: unexpected '%s'", argv[1]);
		return EXIT_USAGE;
	}
	if (hosts_root())
		return EXIT_FAILED;
	cfs_path(path, "hosts");
	names = list_dir(path, &nr);
	if (nr < 0) {
		ternadm_err("target: cannot read %s: %s", path,
			    strerror(errno));
		return EXIT_FAILED;
	}
	for (i = 0; i < nr; i++)
		if (names[i]->d_name[0] != '.')
			printf("%-16s %s\n", names[i]->d_name,
			       host_has_key(names[i]->d_name) ?
			       "key set" : "no key");
	free_dir(names, nr);
	return EXIT_OK;
}

/* ---- show ---- */

struct show_ctx {
	bool	json;
	int	nr;
};

static void show_attr(const char *kind, const char *name, const char *attr,
		      char *buf, size_t len)
{
	char path[PATH_MAX];

	cfs_path(path, "%ss/%s/%s", kind, name, attr);
	if (read_attr(path, buf, len))
		buf[0] = '\0';
}

/* require_auth in text; a kernel without the attribute requires none */
static const char *auth_word(const char *require_auth)
{
	return require_auth[0] == '1' ? "auth-required" : "auth-optional";
}

static void show_export(const char *name, bool json, bool first)
{
	char dev[ATTR_MAX], ro[8], en[8], auth[8], hosts[ATTR_MAX], *p, *tok;
	char uuid[40];
	struct json j;

	show_attr("export", name, "device_path", dev, sizeof(dev));
	show_attr("export", name, "uuid", uuid, sizeof(uuid));
	show_attr("export", name, "read_only", ro, sizeof(ro));
	show_attr("export", name, "require_auth", auth, sizeof(auth));
	show_attr("export", name, "enable", en, sizeof(en));
	show_attr("export", name, "allowed_hosts", hosts, sizeof(hosts));
	if (!json) {
		for (p = hosts; (p = strchr(p, '\n')); )
			*p = ',';
		printf("export %-16s %-32s %-8s %-10s %s hosts %s uuid %s\n",
		       name, dev[0] ? dev : "-",
		       en[0] == '1' ? "enabled" : "disabled",
		       ro[0] == '1' ? "read-only" : "read-write",
		       auth_word(auth), hosts[0] ? hosts : "any",
		       uuid[0] ? uuid : "-");
		return;
	}
	fputs(first ? "\n" : ",\n", stdout);
	json_begin(&j, stdout);
	json_str(&j, "name", name);
	json_str(&j, "device_path", dev);
	json_bool(&j, "read_only", ro[0] == '1');
	json_bool(&j, "require_auth", auth[0] == '1');
	json_bool(&j, "enabled", en[0] == '1');
	json_str(&j, "uuid", uuid);
	json_key(&j, "allowed_hosts");
	fputc('[', stdout);
	p = hosts;
	first = true;
	while ((tok = strsep(&p, "\n"))) {
		if (!tok[0])
			continue;
		if (!first)
			fputc(',', stdout);
		first = false;
		json_string(stdout, tok);
	}
	fputc(']', stdout);
	json_close(&j);
}

static int show_link(const struct link_info *l, void *arg)
{
	struct show_ctx *c = arg;

	if (c->json) {
		if (c->nr)
			fputc(',', stdout);
		json_string(stdout, l->exp);
	} else {
		printf("%s%s", c->nr ? "," : " ", l->exp);
	}
	c->nr++;
	return 0;
}

static void show_port(const char *name, bool json, bool first)
{
	char tr[16], addr[64], host[72], svc[16], en[8], uri[128];
	char lanes[16], depth[16], auth[8], enc[8], integ[8];
	struct show_ctx c = { .json = json };
	struct json j;

	show_attr("port", name, "transport", tr, sizeof(tr));
	show_attr("port", name, "address", addr, sizeof(addr));
	show_attr("port", name, "service", svc, sizeof(svc));
	show_attr("port", name, "max_lanes", lanes, sizeof(lanes));
	show_attr("port", name, "max_queue_depth", depth, sizeof(depth));
	show_attr("port", name, "require_auth", auth, sizeof(auth));
	show_attr("port", name, "require_encrypt", enc, sizeof(enc));
	show_attr("port", name, "require_integrity", integ, sizeof(integ));
	show_attr("port", name, "enable", en, sizeof(en));
	if (!json) {
		uri_host(host, sizeof(host), addr[0] ? addr : "-");
		snprintf(uri, sizeof(uri), "%s://%s:%s", tr, host, svc);
		printf("port   %-16s %-32s %-8s %s%s%s exports", name, uri,
		       en[0] == '1' ? "enabled" : "disabled", auth_word(auth),
		       enc[0] == '1' ? " encrypt-required" : "",
		       integ[0] == '1' ? " integrity-required" : "");
		walk_links(name, show_link, &c);
		printf("%s\n", c.nr ? "" : " -");
		return;
	}
	fputs(first ? "\n" : ",\n", stdout);
	json_begin(&j, stdout);
	json_str(&j, "name", name);
	json_str(&j, "transport", tr);
	json_str(&j, "address", addr);
	json_u64(&j, "service", strtoull(svc, NULL, 10));
	/* 0: no cap of the port's own */
	json_u64(&j, "max_lanes", strtoull(lanes, NULL, 10));
	json_u64(&j, "max_queue_depth", strtoull(depth, NULL, 10));
	json_bool(&j, "require_auth", auth[0] == '1');
	json_bool(&j, "require_encrypt", enc[0] == '1');
	json_bool(&j, "require_integrity", integ[0] == '1');
	json_bool(&j, "enabled", en[0] == '1');
	json_key(&j, "exports");
	fputc('[', stdout);
	walk_links(name, show_link, &c);
	fputc(']', stdout);
	json_close(&j);
}

/* A host and whether it has a key; the key itself is not readable. */
static void show_host(const char *name, bool json, bool first)
{
	bool key = host_has_key(name);
	struct json j;

	if (!json) {
		printf("host   %-16s %s\n", name, key ? "key set" : "no key");
		return;
	}
	fputs(first ? "\n" : ",\n", stdout);
	json_begin(&j, stdout);
	json_str(&j, "name", name);
	json_bool(&j, "key_set", key);
	json_close(&j);
}

static int target_show(int argc, char **argv)
{
	static void (*const show[])(const char *name, bool json,
				    bool first) = {
		show_export, show_port, show_host,
	};
	static const char *const kinds[] = { "export", "port", "host" };
	struct dirent **names;
	char path[PATH_MAX];
	bool json = false, first;
	int i, k, nr, nr_kinds;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else {
			ternadm_err("target show: unexpected '%s'", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (target_root())
		return EXIT_FAILED;
	/* hosts only where tern_target authenticates */
	cfs_path(path, "hosts");
	nr_kinds = is_dir(path) ? 3 : 2;
	if (json)
		fputc('{', stdout);
	for (k = 0; k < nr_kinds; k++) {
		cfs_path(path, "%ss", kinds[k]);
		names = list_dir(path, &nr);
		if (json)
			printf("%s\"%ss\":[", k ? ",\n" : "", kinds[k]);
		first = true;
		for (i = 0; i < nr; i++) {
			if (names[i]->d_name[0] == '.')
				continue;
			show[k](names[i]->d_name, json, first);
			first = false;
		}
		if (json)
			fputs(first ? "]" : "\n]", stdout);
		free_dir(names, nr);
	}
	if (json)
		fputs("}\n", stdout);
	return EXIT_OK;
}

/* ---- dispatch ---- */

static int target_export(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "add"))
		return export_add(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "del"))
		return export_del(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "resize"))
		return export_resize(argc - 1, argv + 1);
	ternadm_err("target export: expected add, del or resize");
	return EXIT_USAGE;
}

static int target_host(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "add"))
		return host_add(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "del"))
		return host_del(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "list"))
		return host_list(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "key"))
		return host_key(argc - 1, argv + 1);
	ternadm_err("target host: expected add, del, list or key");
	return EXIT_USAGE;
}

static int target_port(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "add"))
		return port_add(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "del"))
		return port_del(argc - 1, argv + 1);
	ternadm_err("target port: expected add or del");
	return EXIT_USAGE;
}

int target_main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2) {
		target_usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "export"))
		return target_export(argc - 1, argv + 1);
	if (!strcmp(cmd, "port"))
		return target_port(argc - 1, argv + 1);
	if (!strcmp(cmd, "host"))
		return target_host(argc - 1, argv + 1);
	if (!strcmp(cmd, "link"))
		return target_link(argc - 1, argv + 1, true);
	if (!strcmp(cmd, "unlink"))
		return target_link(argc - 1, argv + 1, false);
	if (!strcmp(cmd, "show"))
		return target_show(argc - 1, argv + 1);
	if (!strcmp(cmd, "help") || !strcmp(cmd, "-h") ||
	    !strcmp(cmd, "--help")) {
		target_usage(stdout);
		return EXIT_OK;
	}
	ternadm_err("target: unknown command '%s'", cmd);
	target_usage(stderr);
	return EXIT_USAGE;
}
