// SPDX-License-Identifier: GPL-2.0
/*
 * ternadm bench: drive tern_bench.ko through /dev/tern-bench.
 *
 *   ternadm bench serve URI
 *   ternadm bench stop [URI]
 *   ternadm bench stats [--json]
 *   ternadm bench run URI [options] [--json]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <tern/tern_bench.h>
#include <tern/tern_wire.h>
#include "ternadm.h"

/* Keep bench_help[] in step with these. */
#define DEF_DEPTH	50
#define DEF_SIZE	4096
#define DEF_TIME_MS	10000
#define UNALIGNED_OFF	513	/* odd, not sector aligned, < one page */

static const char *const bench_help[] = {
	"",
	"URI is tcp://HOST[:PORT] or rdma://HOST[:PORT] (IPv6 in brackets:",
	"tcp://[::1]:7500).",
	"",
	"run options:",
	"  --sessions N    sessions, 1..64 (default 1)",
	"  --lanes L       lanes (connections) per session, 1..64 (default 1)",
	"  --depth D       requests in flight per session, 1..4096 (default 50)",
	"  --size S        data bytes per request, 0..16m, k/m suffixes (default 4k)",
	"  --dir to|from|both  data direction (default to)",
	"  --crc           negotiate data crc32c",
	"  --verify        check every data byte against a pattern",
	"  --unaligned     data starts 513 bytes into its first page",
	"  --offset N      data starts N bytes into its first page, 0..4095",
	"  --time SEC      run for SEC seconds (default 10)",
	"  --count M       send M requests in all instead",
	"  --inline-write N  RDMA: data to the server of at most N bytes",
	"                    travels in the request, larger the server reads;",
	"                    0..16m, 0: always read (default:",
	"                    tern_rdma.inline_max)",
	"  --inline-read N   RDMA: data from the server of at most N bytes",
	"                    travels in the reply, larger the server writes;",
	"                    0..16m, 0: always written (default:",
	"                    tern_rdma.inline_read_max)",
	"  --json          print one JSON object",
};

void bench_usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: %s bench serve URI\n", ternadm_prog);
	fprintf(out, "       %s bench stop [URI]\n", ternadm_prog);
	fprintf(out, "       %s bench stats [--json]\n", ternadm_prog);
	fprintf(out, "       %s bench run URI [options]\n", ternadm_prog);
	for (i = 0; i < ARRAY_SIZE(bench_help); i++)
		fprintf(out, "%s\n", bench_help[i]);
}

static int bench_open(void)
{
	int fd = open(TERN_BENCH_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		ternadm_err("cannot open %s: %s%s", TERN_BENCH_DEVICE,
			    strerror(errno),
			    errno == ENOENT ? " (is tern_bench loaded?)" : "");
	return fd;
}

static const char *bench_strerror(int err)
{
	switch (err) {
	case EINVAL:
		return "invalid argument (the kernel log says which)";
	case EPROTONOSUPPORT:
		return "no such transport (is its module loaded?)";
	case EEXIST:
		return "already serving this URI";
	case ENOENT:
		return "not serving this URI";
	case EMSGSIZE:
		return "the peer does not accept that message size";
	case EINTR:
		return "interrupted";
	default:
		return strerror(err);
	}
}

static int set_uri(char *dst, const char *uri)
{
	if (strlen(uri) >= TERN_BENCH_URI_MAX) {
		ternadm_err("URI longer than %u bytes", TERN_BENCH_URI_MAX - 1);
		return -1;
	}
	memcpy(dst, uri, strlen(uri) + 1);
	return 0;
}

static int bench_serve(int argc, char **argv, bool stop)
{
	struct tern_bench_serve s;
	const char *what = stop ? "stop" : "serve";
	int fd, ret;

	if (argc > 2 || (!stop && argc != 2)) {
		ternadm_err("usage: bench %s %s", what, stop ? "[URI]" : "URI");
		return EXIT_USAGE;
	}
	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	if (argc == 2) {
		if (!argv[1][0] || argv[1][0] == '-') {
			ternadm_err("bench %s: bad URI '%s'", what, argv[1]);
			return EXIT_USAGE;
		}
		if (set_uri(s.uri, argv[1]))
			return EXIT_USAGE;
	}
	fd = bench_open();
	if (fd < 0)
		return EXIT_FAILED;
	ret = ioctl(fd, stop ? TERN_BENCH_IOC_STOP_SERVE : TERN_BENCH_IOC_SERVE,
		    &s);
	if (ret) {
		ternadm_err("bench %s %s: %s", what, s.uri[0] ? s.uri : "(all)",
			    bench_strerror(errno));
		close(fd);
		return EXIT_FAILED;
	}
	close(fd);
	return EXIT_OK;
}

static int bench_stats(int argc, char **argv)
{
	struct tern_bench_echo_stats st;
	bool json = false;
	int fd, i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else {
			ternadm_err("bench stats: unexpected '%s'", argv[i]);
			return EXIT_USAGE;
		}
	}
	fd = bench_open();
	if (fd < 0)
		return EXIT_FAILED;
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	if (ioctl(fd, TERN_BENCH_IOC_ECHO_STATS, &st)) {
		ternadm_err("bench stats: %s", bench_strerror(errno));
		close(fd);
		return EXIT_FAILED;
	}
	close(fd);
	if (json) {
		struct json jw;

		json_begin(&jw, stdout);
		json_u64(&jw, "listeners", st.listeners);
		json_u64(&jw, "sessions", st.sessions);
		json_u64(&jw, "sessions_total", st.sessions_total);
		json_u64(&jw, "requests", st.requests);
		json_u64(&jw, "bytes_in", st.bytes_in);
		json_u64(&jw, "bytes_out", st.bytes_out);
		json_u64(&jw, "resent", st.resent);
		json_u64(&jw, "duplicates", st.duplicates);
		json_u64(&jw, "verify_errors", st.verify_errors);
		json_u64(&jw, "errors", st.errors);
		json_end(&jw);
		return EXIT_OK;
	}
	printf("listeners      %u\n", st.listeners);
	printf("sessions       %llu open, %llu since load\n", st.sessions,
	       st.sessions_total);
	printf("requests       %llu\n", st.requests);
	printf("bytes in/out   %llu / %llu\n", st.bytes_in, st.bytes_out);
	printf("resent         %llu\n", st.resent);
	printf("duplicates     %llu\n", st.duplicates);
	printf("verify errors  %llu\n", st.verify_errors);
	printf("errors         %llu\n", st.errors);
	return EXIT_OK;
}

static const char *const dir_names[] = {
	[TERN_BENCH_DIR_TO]	= "to",
	[TERN_BENCH_DIR_FROM]	= "from",
	[TERN_BENCH_DIR_BOTH]	= "both",
};

enum {
	OPT_SESSIONS = 256,
	OPT_LANES,
	OPT_DEPTH,
	OPT_SIZE,
	OPT_DIR,
	OPT_CRC,
	OPT_VERIFY,
	OPT_UNALIGNED,
	OPT_OFFSET,
	OPT_TIME,
	OPT_COUNT,
	OPT_INLINE_WRITE,
	OPT_INLINE_READ,
	OPT_JSON,
};

#define NR_RUN_OPTS	(OPT_JSON - OPT_SESSIONS + 1)

static const struct option run_opts[] = {
	{ "sessions",	required_argument, NULL, OPT_SESSIONS },
	{ "lanes",	required_argument, NULL, OPT_LANES },
	{ "depth",	required_argument, NULL, OPT_DEPTH },
	{ "size",	required_argument, NULL, OPT_SIZE },
	{ "dir",	required_argument, NULL, OPT_DIR },
	{ "crc",	no_argument,	   NULL, OPT_CRC },
	{ "verify",	no_argument,	   NULL, OPT_VERIFY },
	{ "unaligned",	no_argument,	   NULL, OPT_UNALIGNED },
	{ "offset",	required_argument, NULL, OPT_OFFSET },
	{ "time",	required_argument, NULL, OPT_TIME },
	{ "count",	required_argument, NULL, OPT_COUNT },
	{ "inline-write", required_argument, NULL, OPT_INLINE_WRITE },
	{ "inline-read", required_argument, NULL, OPT_INLINE_READ },
	{ "json",	no_argument,	   NULL, OPT_JSON },
	{ NULL, 0, NULL, 0 },
};

static int bad_value(const char *opt, const char *val, const char *want)
{
	ternadm_err("bench run: bad --%s '%s': %s", opt, val, want);
	return EXIT_USAGE;
}

/* Fill @p from the command line; EXIT_OK or EXIT_USAGE. */
static int run_parse(int argc, char **argv, struct tern_bench_run *p,
		     bool *json)
{
	bool have_time = false, have_count = false, have_off = false;
	bool seen[NR_RUN_OPTS] = { false };
	u64 v;
	int c, i;

	memset(p, 0, sizeof(*p));
	p->size = sizeof(*p);
	p->sessions = 1;
	p->lanes = 1;
	p->depth = DEF_DEPTH;
	p->msg_size = DEF_SIZE;
	p->dir = TERN_BENCH_DIR_TO;
	p->duration_ms = DEF_TIME_MS;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", run_opts, NULL)) != -1) {
		if (opt_once("bench run", run_opts, OPT_SESSIONS,
			     NR_RUN_OPTS, c, seen))
			return EXIT_USAGE;
		switch (c) {
		case OPT_SESSIONS:
			if (parse_u64(optarg, 1, TERN_BENCH_MAX_SESSIONS, &v))
				return bad_value("sessions", optarg, "1..64");
			p->sessions = v;
			break;
		case OPT_LANES:
			if (parse_u64(optarg, 1, TERN_WIRE_MAX_LANES, &v))
				return bad_value("lanes", optarg, "1..64");
			p->lanes = v;
			break;
		case OPT_DEPTH:
			if (parse_u64(optarg, 1, TERN_BENCH_MAX_DEPTH, &v))
				return bad_value("depth", optarg, "1..4096");
			p->depth = v;
			break;
		case OPT_SIZE:
			if (parse_size(optarg, TERN_BENCH_MAX_SIZE, &v))
				return bad_value("size", optarg,
						 "0..16m, suffix k or m");
			p->msg_size = v;
			break;
		case OPT_DIR:
			for (i = TERN_BENCH_DIR_TO; i <= TERN_BENCH_DIR_BOTH; i++)
				if (!strcmp(optarg, dir_names[i]))
					break;
			if (i > TERN_BENCH_DIR_BOTH)
				return bad_value("dir", optarg,
						 "to, from or both");
			p->dir = i;
			break;
		case OPT_CRC:
			p->flags |= TERN_BENCH_RUN_CRC;
			break;
		case OPT_VERIFY:
			p->flags |= TERN_BENCH_RUN_VERIFY;
			break;
		case OPT_UNALIGNED:
		case OPT_OFFSET:
			if (have_off) {
				ternadm_err("bench run: give --unaligned or --offset once");
				return EXIT_USAGE;
			}
			have_off = true;
			if (c == OPT_UNALIGNED)
				v = UNALIGNED_OFF;
			else if (parse_u64(optarg, 0, 4095, &v))
				return bad_value("offset", optarg, "0..4095");
			p->data_offset = v;
			break;
		case OPT_TIME:
			if (have_time ||
			    parse_seconds_ms(optarg, TERN_BENCH_MAX_DURATION_MS,
					     &v))
				return bad_value("time", optarg,
						 "seconds, 0.001..3600, once");
			have_time = true;
			p->duration_ms = v;
			break;
		case OPT_COUNT:
			if (have_count ||
			    parse_u64(optarg, 1, TERN_BENCH_MAX_COUNT, &v))
				return bad_value("count", optarg,
						 "1..2^40, once");
			have_count = true;
			p->count = v;
			break;
		case OPT_INLINE_WRITE:
		case OPT_INLINE_READ:
			if (parse_size(optarg, TERN_WIRE_MAX_DATA, &v))
				return bad_value(c == OPT_INLINE_READ ?
						 "inline-read" : "inline-write",
						 optarg,
						 "0..16m, suffix k or m");
			if (c == OPT_INLINE_READ) {
				p->flags |= TERN_BENCH_RUN_INLINE_READ;
				p->inline_read = v;
			} else {
				p->flags |= TERN_BENCH_RUN_INLINE_WRITE;
				p->inline_write = v;
			}
			break;
		case OPT_JSON:
			*json = true;
			break;
		case '?':
		default:
			return bad_option("bench run", argv);
		}
	}
	if (have_time && have_count) {
		ternadm_err("bench run: --time and --count exclude each other");
		return EXIT_USAGE;
	}
	if (have_count)
		p->duration_ms = 0;
	if (optind != argc - 1) {
		if (optind >= argc)
			ternadm_err("bench run: missing URI");
		else
			ternadm_err("bench run: exactly one URI expected");
		return EXIT_USAGE;
	}
	if (argv[optind][0] == '-' || !argv[optind][0]) {
		ternadm_err("bench run: bad URI '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	if (set_uri(p->uri, argv[optind]))
		return EXIT_USAGE;
	return EXIT_OK;
}

static double us(u64 ns)
{
	return ns / 1000.0;
}

static void run_print_json(const struct tern_bench_run *p, double mbs,
			   double cpu_pct, bool ok)
{
	const struct tern_bench_result *r = &p->result;
	struct json j;

	json_begin(&j, stdout);
	json_str(&j, "uri", p->uri);
	json_u64(&j, "sessions", p->sessions);
	json_u64(&j, "lanes", p->lanes);
	json_u64(&j, "depth", p->depth);
	json_u64(&j, "size", p->msg_size);
	json_str(&j, "dir", dir_names[p->dir]);
	json_bool(&j, "crc", p->flags & TERN_BENCH_RUN_CRC);
	json_bool(&j, "verify", p->flags & TERN_BENCH_RUN_VERIFY);
	json_u64(&j, "offset", p->data_offset);
	json_u64(&j, "duration_ms", p->duration_ms);
	json_u64(&j, "count", p->count);
	if (p->flags & TERN_BENCH_RUN_INLINE_WRITE)
		json_u64(&j, "inline_write", p->inline_write);
	if (p->flags & TERN_BENCH_RUN_INLINE_READ)
		json_u64(&j, "inline_read", p->inline_read);
	json_u64(&j, "messages", r->messages);
	json_u64(&j, "bytes", r->bytes);
	json_u64(&j, "elapsed_ns", r->elapsed_ns);
	json_u64(&j, "msgs_per_sec", r->msgs_per_sec);
	json_u64(&j, "bytes_per_sec", r->bytes_per_sec);
	json_f(&j, "mb_per_sec", mbs);
	json_f(&j, "lat_min_us", us(r->lat_min_ns));
	json_f(&j, "lat_avg_us", us(r->lat_avg_ns));
	json_f(&j, "lat_p50_us", us(r->lat_p50_ns));
	json_f(&j, "lat_p99_us", us(r->lat_p99_ns));
	json_f(&j, "lat_p999_us", us(r->lat_p999_ns));
	json_f(&j, "lat_max_us", us(r->lat_max_ns));
	json_u64(&j, "cpu_busy_ns", r->cpu_busy_ns);
	json_f(&j, "cpu_busy_pct", cpu_pct);
	json_u64(&j, "nr_cpus", r->nr_cpus);
	json_u64(&j, "sent", r->sent);
	json_u64(&j, "completed", r->completed);
	json_u64(&j, "errors", r->errors);
	json_u64(&j, "mismatches", r->mismatches);
	json_u64(&j, "resends", r->resends);
	json_u64(&j, "dup_completions", r->dup_completions);
	json_u64(&j, "lost", r->lost);
	json_bool(&j, "ok", ok);
	json_end(&j);
}

static void run_print(const struct tern_bench_run *p, bool json, bool ok)
{
	const struct tern_bench_result *r = &p->result;
	double secs = r->elapsed_ns / 1e9;
	double mbs = r->bytes_per_sec / 1048576.0;
	double cpu_pct = r->elapsed_ns && r->nr_cpus ?
		100.0 * r->cpu_busy_ns / ((double)r->elapsed_ns * r->nr_cpus) :
		0.0;

	if (json) {
		run_print_json(p, mbs, cpu_pct, ok);
		return;
	}
	printf("run          %s: %u session(s) x %u lane(s), depth %u\n",
	       p->uri, p->sessions, p->lanes, p->depth);
	printf("data         %u bytes %s, offset %u, crc %s, verify %s\n",
	       p->msg_size, dir_names[p->dir], p->data_offset,
	       p->flags & TERN_BENCH_RUN_CRC ? "on" : "off",
	       p->flags & TERN_BENCH_RUN_VERIFY ? "on" : "off");
	printf("messages     %llu in %.3f s: %llu msg/s, %.2f MB/s\n",
	       r->messages, secs, r->msgs_per_sec, mbs);
	printf("latency us   min %.1f avg %.1f p50 %.1f p99 %.1f p99.9 %.1f max %.1f\n",
	       us(r->lat_min_ns), us(r->lat_avg_ns), us(r->lat_p50_ns),
	       us(r->lat_p99_ns), us(r->lat_p999_ns), us(r->lat_max_ns));
	printf("cpu          %.3f s busy on %u CPUs, %.1f%% of the machine\n",
	       r->cpu_busy_ns / 1e9, r->nr_cpus, cpu_pct);
	printf("requests     sent %llu completed %llu resends %llu\n",
	       r->sent, r->completed, r->resends);
	printf("failures     errors %llu mismatches %llu duplicates %llu lost %llu\n",
	       r->errors, r->mismatches, r->dup_completions, r->lost);
	printf("result       %s\n", ok ? "ok" : "FAILED");
}

static int bench_run(int argc, char **argv)
{
	struct tern_bench_run p;
	const struct tern_bench_result *r = &p.result;
	bool json = false, ok;
	int fd, ret;

	ret = run_parse(argc, argv, &p, &json);
	if (ret)
		return ret;
	fd = bench_open();
	if (fd < 0)
		return EXIT_FAILED;
	ret = ioctl(fd, TERN_BENCH_IOC_RUN, &p);
	if (ret) {
		ternadm_err("bench run %s: %s", p.uri, bench_strerror(errno));
		close(fd);
		return EXIT_FAILED;
	}
	close(fd);
	ok = r->sent && r->completed == r->sent && !r->errors &&
	     !r->mismatches && !r->dup_completions && !r->lost &&
	     r->messages == r->sent;
	run_print(&p, json, ok);
	return ok ? EXIT_OK : EXIT_FAILED;
}

int bench_main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2) {
		bench_usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "serve"))
		return bench_serve(argc - 1, argv + 1, false);
	if (!strcmp(cmd, "stop"))
		return bench_serve(argc - 1, argv + 1, true);
	if (!strcmp(cmd, "stats"))
		return bench_stats(argc - 1, argv + 1);
	if (!strcmp(cmd, "run"))
		return bench_run(argc - 1, argv + 1);
	if (!strcmp(cmd, "help") || !strcmp(cmd, "-h") ||
	    !strcmp(cmd, "--help")) {
		bench_usage(stdout);
		return EXIT_OK;
	}
	ternadm_err("bench: unknown command '%s'", cmd);
	bench_usage(stderr);
	return EXIT_USAGE;
}
