// SPDX-License-Identifier: GPL-2.0
/*
 * ternadm map: map a remote export as /dev/ternN through /dev/tern-blk-ctl.
 *
 *   ternadm map tcp://HOST[:PORT]/EXPORT [options]
 *
 * The URI and the options become tern_blk's option string; the kernel
 * answers with the new device's name, which is printed as /dev/ternN.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ternadm.h"

#define OPTS_MAX	1024	/* tern_blk's longest option string, with NUL */
#define MAX_LOSS_TIMEOUT 86400
#define BDEV_WAIT_MS	2000	/* for udev or devtmpfs to make the node */

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
	"                     1..86400 (default 60)",
	"",
	"Prints the new device, /dev/ternN.",
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
	bool		crc;
	bool		read_only;
	const char	*host;
};

static int map_getopt(int argc, char **argv, struct map_args *a)
{
	bool seen[NR_MAP_OPTS] = { false };
	const char *why;
	int c;

	memset(a, 0, sizeof(*a));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", map_opts, NULL)) != -1) {
		if (c >= OPT_LANES && c < OPT_END) {
			if (seen[c - OPT_LANES]) {
				ternadm_err("map: option --%s given twice",
					    map_opts[c - OPT_LANES].name);
				return EXIT_USAGE;
			}
			seen[c - OPT_LANES] = true;
		}
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
		case OPT_HOST:
			if (!valid_name(optarg))
				return bad_value("host", optarg,
						 "1-63 of [A-Za-z0-9._:-]");
			a->host = optarg;
			break;
		case OPT_LOSS_TIMEOUT:
			if (parse_u64(optarg, 1, MAX_LOSS_TIMEOUT,
				      &a->loss_timeout))
				return bad_value("loss-timeout", optarg,
						 "seconds, 1..86400");
			break;
		case OPT_HELP:
			map_usage(stdout);
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
	why = parse_uri(argv[optind], true, &a->uri);
	if (why) {
		ternadm_err("map: bad URI '%s': %s", argv[optind], why);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* tern_blk's option string; -1 when it would not fit in @len. */
static int map_opts_string(const struct map_args *a, char *buf, size_t len)
{
	const struct tern_uri *u = &a->uri;
	int n;

	n = snprintf(buf, len, "transport=%s,address=%s,service=%u,export=%s%s%s%s%s",
		     u->scheme, u->address, u->port, u->path,
		     a->host ? ",host=" : "", a->host ?: "",
		     a->crc ? ",crc=1" : "",
		     a->read_only ? ",read_only=1" : "");
	if (n < 0 || (size_t)n >= len)
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
	return (size_t)n < len ? 0 : -1;
}

static const char *map_strerror(int err)
{
	switch (err) {
	case EINVAL:
		return "invalid argument (the kernel log says which)";
	case EPROTONOSUPPORT:
		return "no such transport (is its module loaded?)";
	case ENOENT:
		return "no such export on the target";
	case EACCES:
		return "the target does not allow this host";
	default:
		return strerror(err);
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

int map_main(int argc, char **argv)
{
	char opts[OPTS_MAX], name[64];
	struct map_args a;
	ssize_t n;
	int fd, ret;

	ret = map_getopt(argc, argv, &a);
	if (ret)
		return ret < 0 ? EXIT_OK : ret;
	if (map_opts_string(&a, opts, sizeof(opts))) {
		ternadm_err("map: the option string is longer than %d bytes",
			    OPTS_MAX - 1);
		return EXIT_USAGE;
	}
	fd = open(BLK_CTL_DEVICE, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		ternadm_err("cannot open %s: %s%s", BLK_CTL_DEVICE,
			    strerror(errno),
			    errno == ENOENT ? " (is tern_blk loaded?)" : "");
		return EXIT_FAILED;
	}
	n = write(fd, opts, strlen(opts));
	if (n < 0) {
		ternadm_err("map %s: %s", argv[argc - 1], map_strerror(errno));
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
}
