// SPDX-License-Identifier: GPL-2.0
/*
 * ternadm map: map a remote export as /dev/ternN through /dev/tern-blk-ctl.
 *
 *   ternadm map tcp://HOST[:PORT]/EXPORT [options]
 *
 * The URI and the options become tern_blk's option string; the kernel
 * answers with the device's name, which is printed as /dev/ternN: a new
 * device, or the one already mapping that export for that host id (the
 * kernel decides, so concurrent maps agree), unless --new.
 *
 * With --key-file the key is loaded into our process keyring as a "logon"
 * key first, and the option string names it (key=tern:HOSTID), so the
 * secret is on no command line and in no option string; --key names a
 * key the user loaded with keyctl instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/keyctl.h>
#include "ternadm.h"

#define OPTS_MAX	1024	/* tern_blk's longest option string, with NUL */
#define MAX_LOSS_TIMEOUT 86400
#define BDEV_WAIT_MS	2000	/* for udev or devtmpfs to make the node */
#define KEY_DESC_PREFIX	"tern:"	/* logon keys need a "prefix:" */
#define MAX_PATHS	3	/* besides the URI's: tern's TERN_MAX_PATHS - 1 */

static const char *const map_help[] = {
	"",
	"URI is tcp://HOST[:PORT]/EXPORT or rdma://HOST[:PORT]/EXPORT; HOST is",
	"a numeric IPv4 address or an IPv6 address in brackets",
	"(tcp://[::1]:7447/vol0); PORT defaults to 7447.",
	"",
	"options:",
	"  --lanes N          connections, one blk-mq queue each, 1..64 (default: one per CPU)",
	"  --queue-depth D    requests in flight, 1..4096 (default 128)",
	"  --crc              crc32c over every message's front and data",
	"  --read-only        map read-only even if the export is writable",
	"  --host ID          host id sent to the target (default: the nodename)",
	"  --loss-timeout SEC seconds without a connection before I/O fails,",
	"                     1..86400 (default 60), or forever: I/O waits for",
	"                     the target until it is back or the device unmapped",
	"  --new              map again even if the export is mapped already",
	"  --key-file FILE    authenticate with the key in FILE (ternadm key",
	"                     generate): loaded into the process keyring as logon",
	"                     key tern:HOSTID, HOSTID the --host value or",
	"                     the node name, which is sent as the host id",
	"  --key DESC         authenticate with the key already in the keyring",
	"                     under description DESC (keyctl add logon ...)",
	"  --encrypt          encrypt the connections (TCP; needs a key)",
	"  --integrity        sign every frame with keyed MACs (TCP; needs a",
	"                     key; excludes --encrypt and --crc)",
	"  --inline-write N   RDMA: write data of at most N bytes travels in the",
	"                     request's messages, larger the target reads from",
	"                     this host's pages; 0..16777216, 0: always read",
	"                     (default: tern_rdma.inline_max, 4096)",
	"  --inline-read N    RDMA: read data of at most N bytes travels in the",
	"                     reply, larger the target writes into this host's",
	"                     pages; 0..16777216, 0: always written (default:",
	"                     tern_rdma.inline_read_max, 4096)",
	"  --path URI         a further path to the same target, tcp://HOST[:PORT]",
	"                     or rdma://HOST[:PORT], with lanes of its own; up to",
	"                     3 of them, in order of preference after the first",
	"  --iopolicy P       how I/O spreads over the paths: failover (default:",
	"                     the first path that is up), round-robin, or",
	"                     min-inflight (the path with the fewest requests out)",
	"",
	"The first path must answer when mapping; the others may be down then",
	"and join when they come up. A path failing moves its requests to the",
	"others at once; the loss timeout runs only while no path is up.",
	"",
	"--key-file and --key exclude each other. With either, the target and",
	"this host prove to each other that they hold the host id's key.",
	"With --encrypt, everything after that proof travels sealed with",
	"AES-GCM under keys both sides derive from it; with --integrity, it",
	"carries Poly1305 tags instead: tampering is detected, but nothing",
	"is hidden. The tags replace the data CRC.",
	"",
	"Prints the device, /dev/ternN. An export already mapped with the same",
	"transport, address, port, export and host id gives that device.",
};

void map_usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: %s map URI [options]\n", ternadm_prog);
	for (i = 0; i < ARRAY_SIZE(map_help); i++)
		fprintf(out, "%s\n", map_help[i]);
}

enum {
	OPT_LANES = 256,
	OPT_QUEUE_DEPTH,
	OPT_CRC,
	OPT_READ_ONLY,
	OPT_HOST,
	OPT_LOSS_TIMEOUT,
	OPT_KEY_FILE,
	OPT_KEY,
	OPT_ENCRYPT,
	OPT_INTEGRITY,
	OPT_NEW,
	OPT_PATH,
	OPT_IOPOLICY,
	OPT_INLINE_WRITE,
	OPT_INLINE_READ,
	OPT_HELP,
	OPT_END,
};

#define NR_MAP_OPTS	(OPT_END - OPT_LANES)

static const struct option map_opts[] = {
	{ "lanes",		required_argument, NULL, OPT_LANES },
	{ "queue-depth",	required_argument, NULL, OPT_QUEUE_DEPTH },
	{ "crc",		no_argument,	   NULL, OPT_CRC },
	{ "read-only",		no_argument,	   NULL, OPT_READ_ONLY },
	{ "host",		required_argument, NULL, OPT_HOST },
	{ "loss-timeout",	required_argument, NULL, OPT_LOSS_TIMEOUT },
	{ "key-file",		required_argument, NULL, OPT_KEY_FILE },
	{ "key",		required_argument, NULL, OPT_KEY },
	{ "encrypt",		no_argument,	   NULL, OPT_ENCRYPT },
	{ "integrity",		no_argument,	   NULL, OPT_INTEGRITY },
	{ "new",		no_argument,	   NULL, OPT_NEW },
	{ "path",		required_argument, NULL, OPT_PATH },
	{ "iopolicy",		required_argument, NULL, OPT_IOPOLICY },
	{ "inline-write",	required_argument, NULL, OPT_INLINE_WRITE },
	{ "inline-read",	required_argument, NULL, OPT_INLINE_READ },
	{ "help",		no_argument,	   NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

static int bad_value(const char *opt, const char *val, const char *want)
{
	ternadm_err("map: bad --%s '%s': %s", opt, val, want);
	return EXIT_USAGE;
}

/* What the command line asks for; 0 or empty means the kernel's default. */
struct map_args {
	struct tern_uri	uri;
	u64		lanes;
	u64		queue_depth;
	u64		loss_timeout;
	bool		loss_forever;
	bool		duplicate;	/* --new */
	bool		crc;
	bool		read_only;
	bool		encrypt;
	bool		integrity;
	const char	*host;
	const char	*key_file;
	const char	*key;		/* a keyring key's description */
	char		host_id[NAME_MAX_LEN];	/* with key_file */
	char		key_desc[sizeof(KEY_DESC_PREFIX) + NAME_MAX_LEN];
	struct tern_uri	paths[MAX_PATHS];	/* --path */
	unsigned int	nr_paths;
	const char	*iopolicy;
	bool		has_inline[2];	/* --inline-write, --inline-read */
	u64		inline_max[2];
};

static const char *const iopolicies[] = {
	"failover", "round-robin", "min-inflight",
};

static bool valid_iopolicy(const char *s)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(iopolicies); i++)
		if (!strcmp(s, iopolicies[i]))
			return true;
	return false;
}

/*
 * A key description as the option string can carry it: printable, no
 * blanks, no ',' (which separates options).
 */
static bool valid_key_desc(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s <= ' ' || *s >= 0x7f || *s == ',')
			return false;
	return true;
}

static int map_getopt(int argc, char **argv, struct map_args *a)
{
	bool seen[NR_MAP_OPTS] = { false };
	const char *why;
	int c;

	memset(a, 0, sizeof(*a));
	/* 0, not 1: a full restart, as maps.c parses many command lines */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", map_opts, NULL)) != -1) {
		/* --path alone may come again, once per path */
		if (c != OPT_PATH &&
		    opt_once("map", map_opts, OPT_LANES, NR_MAP_OPTS, c, seen))
			return EXIT_USAGE;
		switch (c) {
		case OPT_LANES:
			if (parse_u64(optarg, 1, TERN_WIRE_MAX_LANES, &a->lanes))
				return bad_value("lanes", optarg, "1..64");
			break;
		case OPT_QUEUE_DEPTH:
			if (parse_u64(optarg, 1, TERN_WIRE_MAX_QDEPTH,
				      &a->queue_depth))
				return bad_value("queue-depth", optarg,
						 "1..4096");
			break;
		case OPT_CRC:
			a->crc = true;
			break;
		case OPT_READ_ONLY:
			a->read_only = true;
			break;
		case OPT_ENCRYPT:
			a->encrypt = true;
			break;
		case OPT_INTEGRITY:
			a->integrity = true;
			break;
		case OPT_HOST:
			if (!valid_name(optarg))
				return bad_value("host", optarg,
						 NAME_RULE);
			a->host = optarg;
			break;
		case OPT_LOSS_TIMEOUT:
			if (!strcmp(optarg, "forever"))
				a->loss_forever = true;
			else if (parse_u64(optarg, 1, MAX_LOSS_TIMEOUT,
					   &a->loss_timeout))
				return bad_value("loss-timeout", optarg,
						 "seconds, 1..86400, or forever");
			break;
		case OPT_NEW:
			a->duplicate = true;
			break;
		case OPT_PATH:
			if (a->nr_paths == MAX_PATHS) {
				ternadm_err("map: at most %d --path", MAX_PATHS);
				return EXIT_USAGE;
			}
			why = parse_uri(optarg, false, &a->paths[a->nr_paths]);
			if (why)
				return bad_value("path", optarg, why);
			a->nr_paths++;
			break;
		case OPT_IOPOLICY:
			if (!valid_iopolicy(optarg))
				return bad_value("iopolicy", optarg,
						 "failover, round-robin or min-inflight");
			a->iopolicy = optarg;
			break;
		case OPT_INLINE_WRITE:
		case OPT_INLINE_READ:
			if (parse_u64(optarg, 0, TERN_WIRE_MAX_DATA,
				      &a->inline_max[c == OPT_INLINE_READ]))
				return bad_value(c == OPT_INLINE_READ ?
						 "inline-read" : "inline-write",
						 optarg, "bytes, 0..16777216");
			a->has_inline[c == OPT_INLINE_READ] = true;
			break;
		case OPT_KEY_FILE:
			if (!optarg[0])
				return bad_value("key-file", optarg,
						 "a file name");
			a->key_file = optarg;
			break;
		case OPT_KEY:
			/* a secret must not travel on to the option string */
			if (!strncmp(optarg, "TERNKEY-", 8)) {
				ternadm_err("map: --key takes the description of a keyring key, not a key; use --key-file");
				return EXIT_USAGE;
			}
			if (!valid_key_desc(optarg))
				return bad_value("key", optarg,
						 "a key description without blanks or ','");
			a->key = optarg;
			break;
		case OPT_HELP:
			return -1;
		case '?':
		default:
			return bad_option("map", argv);
		}
	}
	if (optind != argc - 1) {
		if (optind >= argc)
			ternadm_err("map: missing URI");
		else
			ternadm_err("map: exactly one URI expected");
		return EXIT_USAGE;
	}
	if (a->key_file && a->key) {
		ternadm_err("map: --key-file and --key exclude each other");
		return EXIT_USAGE;
	}
	if (a->integrity && a->encrypt) {
		ternadm_err("map: --integrity and --encrypt exclude each other: encryption already authenticates every byte");
		return EXIT_USAGE;
	}
	if (a->integrity && a->crc) {
		ternadm_err("map: --integrity and --crc exclude each other: the MACs replace the data CRC");
		return EXIT_USAGE;
	}
	if (a->encrypt && !a->key_file && !a->key) {
		ternadm_err("map: --encrypt needs --key-file or --key: the keys come from the authentication");
		return EXIT_USAGE;
	}
	if (a->integrity && !a->key_file && !a->key) {
		ternadm_err("map: --integrity needs --key-file or --key: the keys come from the authentication");
		return EXIT_USAGE;
	}
	why = parse_uri(argv[optind], true, &a->uri);
	if (why) {
		ternadm_err("map: bad URI '%s': %s", argv[optind], why);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/*
 * The host id that authenticates: --host, else what tern_blk takes by
 * default, the node name if it is a valid id, else "unknown". It is
 * passed as host= too: the kernel's node name is that of the initial UTS
 * namespace, which need not be ours, and the key's description must
 * name the id the kernel authenticates as.
 */
static void map_host_id(struct map_args *a)
{
	const char *id = "unknown";
	struct utsname uts;

	if (a->host)
		id = a->host;
	else if (!uname(&uts) && valid_name(uts.nodename))
		id = uts.nodename;
	/* valid_name() bounds it */
	memcpy(a->host_id, id, strlen(id) + 1);
	a->host = a->host_id;
	snprintf(a->key_desc, sizeof(a->key_desc), KEY_DESC_PREFIX "%s",
		 a->host_id);
	a->key = a->key_desc;
}

/*
 * Load @text into our process keyring as a logon key: the kernel can
 * read it, no process can, and it goes when we exit; the mapped device
 * keeps what it needs of it.
 */
static int map_load_key(const char *desc, const char *text)
{
	const char *hint = "";
	long id;

	id = syscall(SYS_add_key, "logon", desc, text, strlen(text),
		     KEY_SPEC_PROCESS_KEYRING);
	if (id >= 0)
		return 0;
	if (errno == EOPNOTSUPP)
		hint = " (a kernel without CONFIG_KEYS?)";
	else if (errno == EDQUOT)
		hint = " (the user's key quota is used up)";
	ternadm_err("map: cannot load the key into the process keyring as %s: %s%s",
		    desc, strerror(errno), hint);
	return -1;
}

/* tern_blk's option string; -1 when it would not fit in @len. */
static int map_opts_string(const struct map_args *a, char *buf, size_t len)
{
	const struct tern_uri *u = &a->uri;
	unsigned int i;
	int n;

	n = snprintf(buf, len, "transport=%s,address=%s,service=%u,export=%s%s%s%s%s%s%s",
		     u->scheme, u->address, u->port, u->path,
		     a->host ? ",host=" : "", a->host ?: "",
		     a->crc ? ",crc=1" : "",
		     a->read_only ? ",read_only=1" : "",
		     a->encrypt ? ",encrypt=1" : "",
		     a->integrity ? ",integrity=1" : "");
	if (n < 0 || (size_t)n >= len)
		return -1;
	/* the key's description; the secret stays in the keyring */
	if (a->key)
		n += snprintf(buf + n, len - n, ",key=%s", a->key);
	if ((size_t)n >= len)
		return -1;
	if (a->lanes)
		n += snprintf(buf + n, len - n, ",lanes=%llu",
			      (unsigned long long)a->lanes);
	if ((size_t)n < len && a->queue_depth)
		n += snprintf(buf + n, len - n, ",queue_depth=%llu",
			      (unsigned long long)a->queue_depth);
	if ((size_t)n < len && a->loss_timeout)
		n += snprintf(buf + n, len - n, ",loss_timeout=%llu",
			      (unsigned long long)a->loss_timeout);
	if ((size_t)n < len && a->loss_forever)
		n += snprintf(buf + n, len - n, ",loss_timeout=forever");
	if ((size_t)n < len && a->duplicate)
		n += snprintf(buf + n, len - n, ",duplicate=1");
	for (i = 0; i < a->nr_paths && (size_t)n < len; i++) {
		char host[64];

		uri_host(host, sizeof(host), a->paths[i].address);
		n += snprintf(buf + n, len - n, ",path=%s://%s:%u",
			      a->paths[i].scheme, host, a->paths[i].port);
	}
	if ((size_t)n < len && a->iopolicy)
		n += snprintf(buf + n, len - n, ",iopolicy=%s", a->iopolicy);
	for (i = 0; i < 2 && (size_t)n < len; i++)
		if (a->has_inline[i])
			n += snprintf(buf + n, len - n, ",inline_%s=%llu",
				      i ? "read" : "write",
				      (unsigned long long)a->inline_max[i]);
	return (size_t)n < len ? 0 : -1;
}

/* What an error of the kernel means for a map, after strerror()'s words. */
static const char *map_hint(int err)
{
	switch (err) {
	case EINVAL:
		return " (the kernel log says which)";
	case EPROTONOSUPPORT:
		return ": no such transport, or it cannot encrypt or sign (tcp only)";
	case ENOENT:
		return ": no such export on the target";
	case EACCES:
		return ": refused by the target (host id, key, encryption, MACs, --path port)";
	case ENOKEY:
		return ": no such key here, or the target has none for the host id or wants one";
	case EKEYREJECTED:
		return ": the keys differ, or the target does not authenticate, encrypt or sign";
	case EEXIST:
		return ": mapped already, without what this asks for (unmap it, or --new)";
	default:
		return "";
	}
}

/* Give devtmpfs or udev a moment to make /dev/@name. */
static void wait_bdev(const char *name)
{
	char path[80];
	struct stat st;
	int ms;

	snprintf(path, sizeof(path), "/dev/%s", name);
	for (ms = 0; ms < BDEV_WAIT_MS; ms += 50) {
		if (!stat(path, &st) && S_ISBLK(st.st_mode))
			return;
		usleep(50 * 1000);
	}
}

/**
 * map_line_check - read a maps file line's command line as map will
 * @argc: words in @argv, "map" first
 * @argv: "map", the URI, the options; left as it is
 * @host: the --host given, pointing into @argv, or NULL
 *
 * So that map --all and unmap --all find a line's device by the same
 * host id map then sends, whatever spelling of an option the line uses.
 * Return: NULL, or why the line cannot be mapped (said on stderr too
 * when map would say more).
 */
const char *map_line_check(int argc, char **argv, const char **host)
{
	char *args[MAP_LINE_WORDS_MAX + 1];
	struct map_args a;
	int ret;

	if (argc > MAP_LINE_WORDS_MAX)
		return "too many words";
	/* getopt_long() reorders what it parses */
	memcpy(args, argv, argc * sizeof(*args));
	args[argc] = NULL;
	ret = map_getopt(argc, args, &a);
	if (ret < 0 || (!ret && a.duplicate))
		return "--help and --new are not for a maps file";
	if (ret)
		return "not a command line map takes";
	*host = a.host;
	return NULL;
}

int map_main(int argc, char **argv)
{
	char opts[OPTS_MAX], name[64], key[KEY_TEXT_LEN + 1];
	struct map_args a;
	ssize_t n;
	int fd, ret;

	ret = map_getopt(argc, argv, &a);
	if (ret < 0)
		map_usage(stdout);
	if (ret)
		return ret < 0 ? EXIT_OK : ret;
	if (a.key_file) {
		if (key_read_file("map", a.key_file, key))
			return EXIT_FAILED;
		map_host_id(&a);
	}
	if (map_opts_string(&a, opts, sizeof(opts))) {
		ternadm_err("map: the option string is longer than %d bytes",
			    OPTS_MAX - 1);
		ret = EXIT_USAGE;
		goto wipe;
	}
	fd = open(BLK_CTL_DEVICE, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		ternadm_err("cannot open %s: %s%s", BLK_CTL_DEVICE,
			    strerror(errno),
			    errno == ENOENT ? " (is tern_blk loaded?)" : "");
		ret = EXIT_FAILED;
		goto wipe;
	}
	if (a.key_file) {
		ret = map_load_key(a.key_desc, key);
		explicit_bzero(key, sizeof(key));
		if (ret) {
			close(fd);
			return EXIT_FAILED;
		}
	}
	n = write(fd, opts, strlen(opts));
	if (n < 0) {
		ternadm_err("map %s: %s%s", argv[argc - 1], strerror(errno),
			    map_hint(errno));
		close(fd);
		return EXIT_FAILED;
	}
	n = read(fd, name, sizeof(name) - 1);
	if (n <= 0) {
		ternadm_err("map %s: mapped, but cannot read the device name: %s",
			    argv[argc - 1], n ? strerror(errno) : "empty");
		close(fd);
		return EXIT_FAILED;
	}
	close(fd);
	name[n] = '\0';
	name[strcspn(name, "\n")] = '\0';
	wait_bdev(name);
	printf("/dev/%s\n", name);
	return EXIT_OK;

wipe:
	if (a.key_file)
		explicit_bzero(key, sizeof(key));
	return ret;
}
