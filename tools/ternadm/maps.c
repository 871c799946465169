// SPDX-License-Identifier: GPL-2.0
/*
 * ternadm map --all, unmap --all: the devices of a maps file.
 *
 *   ternadm map --all [--file FILE]
 *   ternadm unmap --all [--file FILE]
 *
 * FILE (default /etc/tern/maps) lists one device a line: its URI, then
 * options as "ternadm map" takes them, separated by blanks. Lines whose
 * first non-blank character is '#' and blank lines are skipped. This is
 * what tern-map.service runs at boot and at shutdown, like rbdmap and
 * nvme connect-all.
 *
 * Both are idempotent: a line whose export is mapped already (same
 * transport, address, port, export and host id) is left alone by map
 * --all, and one that is not mapped is left alone by unmap --all. Each
 * line is mapped or unmapped by "ternadm map" or "ternadm unmap" in a
 * child process of its own, so that one line's options, keys and
 * failures cannot leak into the next; a failed line is reported and the
 * others are still done, and the exit status is 1 when any line failed.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ternadm.h"

#define MAPS_FILE	"/etc/tern/maps"
#define MAPS_LINE_MAX	4096	/* bytes in a line, without its newline */
#define MAPS_LINES_MAX	4096	/* devices in a file */

static void maps_usage(FILE *out, const char *cmd)
{
	fprintf(out, "\nusage: %s %s --all [--file FILE]\n\n", ternadm_prog, cmd);
	fprintf(out, "--all %ss every device listed in FILE (default %s): one a line,\n",
		cmd, MAPS_FILE);
	fprintf(out, "its URI, then options as map takes them, separated by blanks; a\n");
	fprintf(out, "line starting with '#' is a comment. A device %s already is\n",
		strcmp(cmd, "map") ? "not mapped" : "mapped");
	fprintf(out, "left alone. Each line's outcome is printed; the status is 1 if any\n");
	fprintf(out, "line failed.\n");
}

void maps_map_usage(FILE *out)
{
	map_usage(out);
	maps_usage(out, "map");
}

void maps_unmap_usage(FILE *out)
{
	unmap_usage(out);
	maps_usage(out, "unmap");
}

/* One device line of a maps file. */
struct maps_line {
	unsigned int	lineno;
	char		*text;		/* the line, split in place */
	char		*argv[MAP_LINE_WORDS_MAX + 1];	/* "map", URI, options */
	int		argc;
	struct tern_uri	uri;
	const char	*host;		/* the host id it maps as */
};

struct maps_file {
	const char		*path;
	struct maps_line	*lines;
	unsigned int		nr;
	unsigned int		bad;	/* lines that cannot be used */
};

/* The host id tern_blk maps as without --host: the node name. */
static const char *maps_default_host(void)
{
	static char node[NAME_MAX_LEN];
	struct utsname uts;
	const char *id = "unknown";

	if (!node[0]) {
		if (!uname(&uts) && valid_name(uts.nodename))
			id = uts.nodename;
		/* valid_name() bounds it */
		memcpy(node, id, strlen(id) + 1);
	}
	return node;
}

/*
 * Split @l->text into words and check them as map will: the "already
 * mapped" test needs the URI and the host id map sends. Return: NULL, or
 * why the line is not usable.
 */
static const char *maps_parse(struct maps_line *l)
{
	char *p = l->text, *word;
	const char *why;

	l->argv[0] = "map";
	l->argc = 1;
	while ((word = strsep(&p, " \t"))) {
		if (!word[0])
			continue;
		if (l->argc >= MAP_LINE_WORDS_MAX)
			return "too many words";
		l->argv[l->argc++] = word;
	}
	l->argv[l->argc] = NULL;
	if (l->argv[1][0] == '-')
		return "expected the URI first";
	why = parse_uri(l->argv[1], true, &l->uri);
	if (why) {
		static char msg[MAPS_LINE_MAX + 128];

		snprintf(msg, sizeof(msg), "bad URI '%s': %s", l->argv[1], why);
		return msg;
	}
	why = map_line_check(l->argc, l->argv, &l->host);
	if (why)
		return why;
	if (!l->host)
		l->host = maps_default_host();
	return NULL;
}

/* Is the line's text made of printable characters and blanks? */
static bool maps_printable(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if ((unsigned char)s[i] < ' ' && s[i] != '\t')
			return false;
		else if (s[i] == 0x7f)
			return false;
	return true;
}

static void maps_free(struct maps_file *f)
{
	unsigned int i;

	for (i = 0; i < f->nr; i++)
		free(f->lines[i].text);
	free(f->lines);
}

/*
 * Read every device line of @f->path. A line that cannot be used is
 * reported and counted in @f->bad; the others are kept. Return: 0, or
 * -1 when the file cannot be read at all.
 */
static int maps_read(struct maps_file *f)
{
	struct maps_line *l;
	unsigned int lineno = 0;
	size_t cap = 0;
	char *buf = NULL, *s;
	const char *why;
	ssize_t len;
	FILE *in;

	in = fopen(f->path, "re");
	if (!in) {
		ternadm_err("cannot open %s: %s", f->path, strerror(errno));
		return -1;
	}
	while ((len = getline(&buf, &cap, in)) != -1) {
		lineno++;
		if (len && buf[len - 1] == '\n')
			buf[--len] = '\0';
		/* a file saved with CRLF line ends reads as with LF */
		if (len && buf[len - 1] == '\r')
			buf[--len] = '\0';
		s = buf + strspn(buf, " \t");
		if (!*s || *s == '#')
			continue;
		why = NULL;
		if (len > MAPS_LINE_MAX)
			why = "longer than 4096 bytes";
		else if (strlen(buf) != (size_t)len || !maps_printable(buf, len))
			why = "control characters";
		else if (f->nr >= MAPS_LINES_MAX)
			why = "more than 4096 devices in the file";
		if (why) {
			ternadm_err("%s:%u: %s", f->path, lineno, why);
			f->bad++;
			continue;
		}
		l = realloc(f->lines, (f->nr + 1) * sizeof(*l));
		if (!l)
			break;
		f->lines = l;
		l = &f->lines[f->nr];
		memset(l, 0, sizeof(*l));
		l->lineno = lineno;
		l->text = strdup(s);
		if (!l->text)
			break;
		why = maps_parse(l);
		if (why) {
			ternadm_err("%s:%u: %s", f->path, lineno, why);
			free(l->text);
			f->bad++;
			continue;
		}
		f->nr++;
	}
	if (ferror(in) || !feof(in)) {
		ternadm_err("cannot read %s: %s", f->path,
			    errno ? strerror(errno) : "out of memory");
		free(buf);
		fclose(in);
		maps_free(f);
		return -1;
	}
	free(buf);
	fclose(in);
	return 0;
}

/* Two numeric addresses, the same once parsed (IPv6 has many spellings). */
static bool maps_same_address(const char *a, const char *b)
{
	unsigned char x[16], y[16];
	int af = strchr(a, ':') ? AF_INET6 : AF_INET;

	if (inet_pton(af, a, x) != 1 || inet_pton(af, b, y) != 1)
		return false;
	return !memcmp(x, y, af == AF_INET6 ? 16 : 4);
}

static bool maps_attr_is(const char *dev, const char *attr, const char *val)
{
	char path[PATH_MAX], buf[128];

	snprintf(path, sizeof(path), SYS_BLOCK "/%s/tern/%s", dev, attr);
	return !read_attr(path, buf, sizeof(buf)) && !strcmp(buf, val);
}

/*
 * The tern device that maps @l's export already, into @dev; -1 when
 * there is none. The kernel compares the same things.
 */
static int maps_find(const struct maps_line *l, char *dev, size_t len)
{
	char path[PATH_MAX], addr[64], port[16];
	struct dirent *de;
	int ret = -1;
	DIR *dh;

	dh = opendir(SYS_BLOCK);
	if (!dh)
		return -1;
	snprintf(port, sizeof(port), "%u", l->uri.port);
	while (ret && (de = readdir(dh))) {
		if (strncmp(de->d_name, "tern", 4) ||
		    strlen(de->d_name) >= len)
			continue;
		snprintf(path, sizeof(path), SYS_BLOCK "/%s/tern/address",
			 de->d_name);
		if (read_attr(path, addr, sizeof(addr)) ||
		    !maps_same_address(addr, l->uri.address))
			continue;
		if (maps_attr_is(de->d_name, "transport", l->uri.scheme) &&
		    maps_attr_is(de->d_name, "service", port) &&
		    maps_attr_is(de->d_name, "export", l->uri.path) &&
		    maps_attr_is(de->d_name, "host", l->host)) {
			snprintf(dev, len, "%s", de->d_name);
			ret = 0;
		}
	}
	closedir(dh);
	return ret;
}

/*
 * Run @fn(@argc, @argv) in a child: its stdout, up to @len - 1 bytes,
 * into @out without the trailing newline; its stderr is ours. Return:
 * its exit status, EXIT_FAILED when it could not run or was killed.
 */
static int maps_run(int (*fn)(int argc, char **argv), int argc, char **argv,
		    char *out, size_t len)
{
	size_t used = 0;
	int pipefd[2], status;
	ssize_t n;
	pid_t pid;

	out[0] = '\0';
	fflush(stdout);
	fflush(stderr);
	if (pipe2(pipefd, O_CLOEXEC)) {
		ternadm_err("pipe: %s", strerror(errno));
		return EXIT_FAILED;
	}
	pid = fork();
	if (pid < 0) {
		ternadm_err("fork: %s", strerror(errno));
		close(pipefd[0]);
		close(pipefd[1]);
		return EXIT_FAILED;
	}
	if (!pid) {
		close(pipefd[0]);
		if (dup2(pipefd[1], STDOUT_FILENO) < 0)
			_exit(EXIT_FAILED);
		status = fn(argc, argv);
		fflush(stdout);
		fflush(stderr);
		_exit(status);
	}
	close(pipefd[1]);
	while (used < len - 1) {
		n = read(pipefd[0], out + used, len - 1 - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		used += n;
	}
	close(pipefd[0]);
	out[used] = '\0';
	out[strcspn(out, "\n")] = '\0';
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return EXIT_FAILED;
	if (!WIFEXITED(status))
		return EXIT_FAILED;
	return WEXITSTATUS(status);
}

/* "--all [--file FILE]", in any order; EXIT_OK or EXIT_USAGE. */
static int maps_args(int argc, char **argv, const char *cmd, const char **file)
{
	bool all = false;
	int i;

	*file = MAPS_FILE;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--all")) {
			all = true;
		} else if (!strcmp(argv[i], "--file") && i + 1 < argc) {
			*file = argv[++i];
		} else if (!strcmp(argv[i], "--file")) {
			ternadm_err("%s --all: --file needs a FILE", cmd);
			return EXIT_USAGE;
		} else if (!strncmp(argv[i], "--file=", 7)) {
			*file = argv[i] + 7;
		} else {
			ternadm_err("%s --all: unexpected '%s': only --file FILE goes with --all",
				    cmd, argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!all) {
		ternadm_err("%s: --file goes with --all", cmd);
		return EXIT_USAGE;
	}
	if (!(*file)[0]) {
		ternadm_err("%s --all: empty --file", cmd);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* Is this "map --all" / "unmap --all" rather than one device's command? */
static bool maps_wanted(int argc, char **argv)
{
	return argc > 1 && (!strcmp(argv[1], "--all") ||
			    !strncmp(argv[1], "--file", 6));
}

static int maps_map_all(const char *path)
{
	struct maps_file f = { .path = path };
	char dev[128];
	unsigned int i, failed;
	int rc;

	if (maps_read(&f))
		return EXIT_FAILED;
	failed = f.bad;
	for (i = 0; i < f.nr; i++) {
		struct maps_line *l = &f.lines[i];

		if (!maps_find(l, dev, sizeof(dev))) {
			printf("%s:%u: %s: already mapped as /dev/%s\n", path,
			       l->lineno, l->argv[1], dev);
			continue;
		}
		rc = maps_run(map_main, l->argc, l->argv, dev, sizeof(dev));
		if (rc == EXIT_OK && dev[0]) {
			printf("%s:%u: %s: mapped as %s\n", path, l->lineno,
			       l->argv[1], dev);
			continue;
		}
		ternadm_err("%s:%u: %s: not mapped", path, l->lineno,
			    l->argv[1]);
		failed++;
	}
	maps_free(&f);
	return failed ? EXIT_FAILED : EXIT_OK;
}

/* In the file's reverse order: what was mapped last goes first. */
static int maps_unmap_all(const char *path)
{
	struct maps_file f = { .path = path };
	char dev[128], out[128];
	char *argv[3] = { "unmap", dev, NULL };
	unsigned int i, failed;

	if (maps_read(&f))
		return EXIT_FAILED;
	failed = f.bad;
	for (i = f.nr; i-- > 0; ) {
		struct maps_line *l = &f.lines[i];

		if (maps_find(l, dev, sizeof(dev))) {
			printf("%s:%u: %s: not mapped\n", path, l->lineno,
			       l->argv[1]);
			continue;
		}
		if (maps_run(unmap_main, 2, argv, out, sizeof(out)) == EXIT_OK) {
			printf("%s:%u: %s: unmapped /dev/%s\n", path,
			       l->lineno, l->argv[1], dev);
			continue;
		}
		ternadm_err("%s:%u: %s: /dev/%s not unmapped", path,
			    l->lineno, l->argv[1], dev);
		failed++;
	}
	maps_free(&f);
	return failed ? EXIT_FAILED : EXIT_OK;
}

int maps_map_main(int argc, char **argv)
{
	const char *file;
	int rc;

	if (!maps_wanted(argc, argv))
		return map_main(argc, argv);
	rc = maps_args(argc, argv, "map", &file);
	return rc == EXIT_OK ? maps_map_all(file) : rc;
}

int maps_unmap_main(int argc, char **argv)
{
	const char *file;
	int rc;

	if (!maps_wanted(argc, argv))
		return unmap_main(argc, argv);
	rc = maps_args(argc, argv, "unmap", &file);
	return rc == EXIT_OK ? maps_unmap_all(file) : rc;
}
