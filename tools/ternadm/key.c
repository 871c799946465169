// SPDX-License-Identifier: GPL-2.0
/*
 * ternadm key: make and check the keys of tern's mutual authentication.
 *
 *   ternadm key generate [--out FILE]
 *   ternadm key check FILE
 *
 * A key is one line of text, "TERNKEY-1:" then the base64 (RFC 4648) of
 * 32 random bytes followed by their CRC32C, little-endian, then ":". The
 * checksum catches a key damaged in a copy before a handshake fails for
 * it. The helpers here also read key files for map and target.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ternadm.h"

#define KEY_PREFIX_LEN	(sizeof(KEY_PREFIX) - 1)
#define KEY_RAW_LEN	(KEY_SECRET_LEN + 4)	/* the secret, its CRC32C */
#define KEY_B64_LEN	(KEY_RAW_LEN / 3 * 4)	/* 48, no padding */
#define KEY_FILE_MAX	256	/* more than this is not a key file */

static const char b64_chars[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void key_usage(FILE *out)
{
	fprintf(out, "usage: %s key generate [--out FILE]\n", ternadm_prog);
	fprintf(out, "       %s key check FILE\n\n", ternadm_prog);
	fprintf(out, "generate prints a new random key, or writes it to FILE (mode 0600;\n");
	fprintf(out, "an existing FILE is not overwritten). check says whether FILE holds\n");
	fprintf(out, "a well-formed key with a correct checksum. The same key goes to the\n");
	fprintf(out, "target (target host add) and to the client (map --key-file).\n");
}

/* CRC32C (Castagnoli), reflected, as the kernel's tern_crc(). */
static u32 crc32c(const unsigned char *p, size_t len)
{
	u32 crc = ~0U;
	int k;

	while (len--) {
		crc ^= *p++;
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78U & -(crc & 1));
	}
	return ~crc;
}

static int b64_value(char c)
{
	const char *p;

	if (!c)
		return -1;
	p = strchr(b64_chars, c);
	return p ? p - b64_chars : -1;
}

/* @len bytes, a multiple of 3, to base64 without a NUL. */
static void b64_encode(const unsigned char *in, size_t len, char *out)
{
	u32 v;

	for (; len >= 3; len -= 3, in += 3) {
		v = (u32)in[0] << 16 | (u32)in[1] << 8 | in[2];
		*out++ = b64_chars[v >> 18 & 63];
		*out++ = b64_chars[v >> 12 & 63];
		*out++ = b64_chars[v >> 6 & 63];
		*out++ = b64_chars[v & 63];
	}
}

/* @len characters, a multiple of 4, without padding; -1 on a bad one. */
static int b64_decode(const char *in, size_t len, unsigned char *out)
{
	int i, d;
	u32 v;

	for (; len >= 4; len -= 4) {
		v = 0;
		for (i = 0; i < 4; i++) {
			d = b64_value(*in++);
			if (d < 0)
				return -1;
			v = v << 6 | d;
		}
		*out++ = v >> 16;
		*out++ = v >> 8;
		*out++ = v;
	}
	return 0;
}

/*
 * Is @text (without a newline) a key? NULL if so, else why not. Checks
 * the checksum too, so a key that passes is what the kernel accepts.
 */
const char *key_text_check(const char *text)
{
	unsigned char raw[KEY_RAW_LEN];
	size_t len = strlen(text);
	const char *why = NULL;
	u32 crc;

	if (!len)
		return "empty";
	if (strchr(text, '\n'))
		return "more than one line";
	if (strncmp(text, KEY_PREFIX, KEY_PREFIX_LEN)) {
		if (!strncmp(text, "TERNKEY-", 8))
			return "a key format this ternadm does not know (expected TERNKEY-1:)";
		return "does not start with TERNKEY-1:";
	}
	if (len != KEY_TEXT_LEN)
		return "wrong length (a key is 59 characters: TERNKEY-1:, 48 of base64, ':')";
	if (text[len - 1] != ':')
		return "no ':' at the end";
	if (b64_decode(text + KEY_PREFIX_LEN, KEY_B64_LEN, raw))
		return "a character that is not base64 (A-Z a-z 0-9 + /)";
	crc = raw[KEY_SECRET_LEN] | (u32)raw[KEY_SECRET_LEN + 1] << 8 |
	      (u32)raw[KEY_SECRET_LEN + 2] << 16 |
	      (u32)raw[KEY_SECRET_LEN + 3] << 24;
	if (crc != crc32c(raw, KEY_SECRET_LEN))
		why = "checksum mismatch (the key was damaged or mistyped)";
	explicit_bzero(raw, sizeof(raw));
	return why;
}

/*
 * Whether @st may hold a key @file: a regular file (a FIFO would block
 * the reader, a device is no key file) that only its owner, we or root,
 * may change; else a planted key could pass for a host's. One readable
 * by group or others is used, with a warning. Return: 0 or -1.
 */
static int key_file_safe(const char *cmd, const char *file,
			 const struct stat *st)
{
	if (!S_ISREG(st->st_mode)) {
		ternadm_err("%s: key file %s is not a regular file", cmd, file);
		return -1;
	}
	if (st->st_uid != geteuid() && st->st_uid != 0) {
		ternadm_err("%s: key file %s belongs to uid %u, neither to us nor to root",
			    cmd, file, (unsigned int)st->st_uid);
		return -1;
	}
	if (st->st_mode & 0022) {
		ternadm_err("%s: key file %s is writable by group or others (chmod 600 it)",
			    cmd, file);
		return -1;
	}
	if (st->st_mode & 0044)
		ternadm_err("%s: warning: key file %s is readable by group or others (chmod 600 it)",
			    cmd, file);
	return 0;
}

/*
 * Read the key in @file into @text (KEY_TEXT_LEN + 1 bytes): one line,
 * its newline dropped, checked, from a file key_file_safe() takes.
 * 0, or -1 after saying why, prefixed with @cmd.
 */
int key_read_file(const char *cmd, const char *file, char *text)
{
	char buf[KEY_FILE_MAX + 1];
	const char *why;
	struct stat st;
	size_t len = 0;
	ssize_t n;
	int fd;

	/* nonblocking: the open of a FIFO waits for a writer otherwise */
	fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		ternadm_err("%s: cannot open key file %s: %s", cmd, file,
			    strerror(errno));
		return -1;
	}
	if (fstat(fd, &st)) {
		ternadm_err("%s: cannot stat key file %s: %s", cmd, file,
			    strerror(errno));
		close(fd);
		return -1;
	}
	if (key_file_safe(cmd, file, &st)) {
		close(fd);
		return -1;
	}
	do {
		n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n > 0)
			len += n;
	} while (len < sizeof(buf) - 1 && (n > 0 || (n < 0 && errno == EINTR)));
	if (n < 0) {
		ternadm_err("%s: cannot read key file %s: %s", cmd, file,
			    strerror(errno));
		close(fd);
		explicit_bzero(buf, sizeof(buf));
		return -1;
	}
	close(fd);
	if (len == sizeof(buf) - 1) {
		ternadm_err("%s: %s is not a key file: too long", cmd, file);
		explicit_bzero(buf, sizeof(buf));
		return -1;
	}
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	buf[len] = '\0';
	why = strlen(buf) == len ? key_text_check(buf) : "a NUL byte in it";
	if (why) {
		ternadm_err("%s: %s does not hold a valid key: %s", cmd, file,
			    why);
		explicit_bzero(buf, sizeof(buf));
		return -1;
	}
	memcpy(text, buf, KEY_TEXT_LEN + 1);
	explicit_bzero(buf, sizeof(buf));
	return 0;
}

/* All of @len bytes to @fd; 0 or -errno. */
static int write_all(int fd, const char *buf, size_t len)
{
	ssize_t n;

	while (len) {
		n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= n;
	}
	return 0;
}

/* A new key, "TERNKEY-1:...:\n", into @line (KEY_TEXT_LEN + 2 bytes). */
static int key_new(char *line)
{
	unsigned char raw[KEY_RAW_LEN];
	size_t got = 0;
	ssize_t n;
	u32 crc;

	while (got < KEY_SECRET_LEN) {
		n = getrandom(raw + got, KEY_SECRET_LEN - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ternadm_err("key generate: getrandom: %s",
				    strerror(errno));
			explicit_bzero(raw, sizeof(raw));
			return -1;
		}
		got += n;
	}
	crc = crc32c(raw, KEY_SECRET_LEN);
	raw[KEY_SECRET_LEN] = crc;
	raw[KEY_SECRET_LEN + 1] = crc >> 8;
	raw[KEY_SECRET_LEN + 2] = crc >> 16;
	raw[KEY_SECRET_LEN + 3] = crc >> 24;
	memcpy(line, KEY_PREFIX, KEY_PREFIX_LEN);
	b64_encode(raw, KEY_RAW_LEN, line + KEY_PREFIX_LEN);
	explicit_bzero(raw, sizeof(raw));
	memcpy(line + KEY_PREFIX_LEN + KEY_B64_LEN, ":\n", 3);
	return 0;
}

/* A new file @out, 0600, holding @line; nothing left behind on failure. */
static int key_write_file(const char *out, const char *line)
{
	int fd, err;

	fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0) {
		if (errno == EEXIST)
			ternadm_err("key generate: %s exists; not overwritten",
				    out);
		else
			ternadm_err("key generate: cannot create %s: %s", out,
				    strerror(errno));
		return -1;
	}
	/* 0600 whatever the umask */
	err = fchmod(fd, 0600) ? -errno : 0;
	if (!err)
		err = write_all(fd, line, strlen(line));
	if (!err && fsync(fd))
		err = -errno;
	if (close(fd) && !err)
		err = -errno;
	if (err) {
		ternadm_err("key generate: cannot write %s: %s", out,
			    strerror(-err));
		unlink(out);
		return -1;
	}
	return 0;
}

enum {
	OPT_OUT = 256,
};

static const struct option generate_opts[] = {
	{ "out",	required_argument, NULL, OPT_OUT },
	{ NULL, 0, NULL, 0 },
};

static int key_generate(int argc, char **argv)
{
	char line[KEY_TEXT_LEN + 2];
	const char *out = NULL;
	int c, err;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", generate_opts, NULL)) != -1) {
		switch (c) {
		case OPT_OUT:
			if (out) {
				ternadm_err("key generate: --out given twice");
				return EXIT_USAGE;
			}
			out = optarg;
			break;
		case '?':
		default:
			return bad_option("key generate", argv);
		}
	}
	if (optind != argc) {
		ternadm_err("key generate: unexpected '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	if (out && !out[0]) {
		ternadm_err("key generate: empty --out");
		return EXIT_USAGE;
	}
	if (key_new(line))
		return EXIT_FAILED;
	if (out) {
		err = key_write_file(out, line);
	} else {
		/* not through stdio, whose buffer would keep a copy */
		err = write_all(STDOUT_FILENO, line, strlen(line));
		if (err)
			ternadm_err("key generate: cannot write the key: %s",
				    strerror(-err));
	}
	explicit_bzero(line, sizeof(line));
	return err ? EXIT_FAILED : EXIT_OK;
}

static int key_check(int argc, char **argv)
{
	char text[KEY_TEXT_LEN + 1];

	if (argc != 2 || (argv[1][0] == '-' && argv[1][1])) {
		ternadm_err("key check: expected FILE");
		return EXIT_USAGE;
	}
	if (key_read_file("key check", argv[1], text))
		return EXIT_FAILED;
	explicit_bzero(text, sizeof(text));
	printf("ok\n");
	return EXIT_OK;
}

int key_main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2) {
		key_usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "generate"))
		return key_generate(argc - 1, argv + 1);
	if (!strcmp(cmd, "check"))
		return key_check(argc - 1, argv + 1);
	if (!strcmp(cmd, "help") || !strcmp(cmd, "-h") ||
	    !strcmp(cmd, "--help")) {
		key_usage(stdout);
		return EXIT_OK;
	}
	ternadm_err("key: unknown command '%s'", cmd);
	key_usage(stderr);
	return EXIT_USAGE;
}
