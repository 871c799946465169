// SPDX-License-Identifier: GPL-2.0
/*
 * ternadm: helpers shared by the command groups: messages, strict number
 * parsing, URIs and names, sysfs and configfs attributes, JSON strings.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <string.h>
#include <unistd.h>
#include "ternadm.h"

/* Decimal digits only, no sign, no spaces; -1 on anything else. */
static int parse_digits(const char *s, const char **end, u64 *out)
{
	u64 v = 0;

	if (!isdigit((unsigned char)*s))
		return -1;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned int d = *s - '0';

		if (v > ((u64)-1 - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*end = s;
	*out = v;
	return 0;
}

/* A whole decimal number in [@min, @max]. */
int parse_u64(const char *s, u64 min, u64 max, u64 *out)
{
	const char *end;
	u64 v;

	if (parse_digits(s, &end, &v) || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* Bytes with an optional k/K (KiB) or m/M (MiB) suffix, at most @max. */
int parse_size(const char *s, u64 max, u64 *out)
{
	const char *end;
	unsigned int shift = 0;
	u64 v;

	if (parse_digits(s, &end, &v))
		return -1;
	if (*end == 'k' || *end == 'K')
		shift = 10;
	else if (*end == 'm' || *end == 'M')
		shift = 20;
	else if (*end)
		return -1;
	if (shift && end[1])
		return -1;
	if (v > (max >> shift))
		return -1;
	*out = v << shift;
	return 0;
}

/* Seconds, with up to three decimals ("2", "0.5"), to milliseconds. */
int parse_seconds_ms(const char *s, u64 max_ms, u64 *out_ms)
{
	const char *end;
	u64 sec, frac = 0;
	int digits = 0;

	if (parse_digits(s, &end, &sec))
		return -1;
	if (*end == '.') {
		for (end++; isdigit((unsigned char)*end); end++) {
			if (++digits > 3)
				return -1;
			frac = frac * 10 + (*end - '0');
		}
		if (!digits)
			return -1;
		for (; digits < 3; digits++)
			frac *= 10;
	}
	if (*end || sec > max_ms / 1000)
		return -1;
	sec = sec * 1000 + frac;
	if (!sec || sec > max_ms)
		return -1;
	*out_ms = sec;
	return 0;
}

/*
 * getopt_long() returned '?' for @cmd: say which argument it stopped at.
 * Return: EXIT_USAGE.
 */
int bad_option(const char *cmd, char **argv)
{
	/* no command takes short options; long ones have values from 256 */
	if (optopt > 0 && optopt < 256)
		ternadm_err("%s: unknown option '-%c'", cmd, optopt);
	else if (optopt)
		ternadm_err("%s: missing or unexpected value: '%s'", cmd,
			    argv[optind - 1]);
	else
		ternadm_err("%s: unknown option '%s'", cmd, argv[optind - 1]);
	return EXIT_USAGE;
}

/*
 * getopt_long() returned @c for @cmd, whose @count options have the
 * values @first on, in @opts' order: an option given twice is a mistake,
 * not "the last one wins". @seen: @count flags, false at first.
 * Return: EXIT_OK, or EXIT_USAGE after saying so.
 */
int opt_once(const char *cmd, const struct option *opts, int first,
	     int count, int c, bool *seen)
{
	if (c < first || c >= first + count)
		return EXIT_OK;
	if (seen[c - first]) {
		ternadm_err("%s: option --%s given twice", cmd,
			    opts[c - first].name);
		return EXIT_USAGE;
	}
	seen[c - first] = true;
	return EXIT_OK;
}

/* What the kernel accepts as an export, port or host name: NAME_RULE. */
bool valid_name(const char *s)
{
	size_t len = strlen(s), i;

	if (!len || len >= NAME_MAX_LEN || s[0] == '.')
		return false;
	for (i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._:-", s[i]))
			return false;
	return true;
}

/* xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx of hex digits, not all zero */
bool valid_uuid(const char *s)
{
	bool nonzero = false;
	int i;

	if (strlen(s) != UUID_LEN)
		return false;
	for (i = 0; i < UUID_LEN; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!isxdigit((unsigned char)s[i])) {
			return false;
		} else if (s[i] != '0') {
			nonzero = true;
		}
	}
	return nonzero;
}

/*
 * SCHEME://HOST[:PORT][/PATH]: SCHEME tcp or rdma, HOST a numeric IPv4
 * address or an IPv6 address in brackets, PORT 1..65535 (default 7447).
 * /PATH, a valid name, is required when @want_path and refused otherwise.
 * NULL on success, else why @s is not one.
 */
const char *parse_uri(const char *s, bool want_path, struct tern_uri *u)
{
	const char *p, *host, *end;
	unsigned char addr[16];
	char port[8];
	size_t len;
	u64 v;

	memset(u, 0, sizeof(*u));
	u->port = TERN_DEFAULT_PORT;
	p = strstr(s, "://");
	if (!p)
		return "expected SCHEME://HOST";
	len = p - s;
	if ((len != 3 || strncmp(s, "tcp", 3)) &&
	    (len != 4 || strncmp(s, "rdma", 4)))
		return "the scheme must be tcp or rdma";
	memcpy(u->scheme, s, len);
	host = p + 3;
	if (*host == '[') {
		end = strchr(++host, ']');
		if (!end)
			return "no ']' after the IPv6 address";
		len = end - host;
		if (!len || len >= sizeof(u->address))
			return "bad IPv6 address";
		memcpy(u->address, host, len);
		if (inet_pton(AF_INET6, u->address, addr) != 1)
			return "bad IPv6 address";
		p = end + 1;
	} else {
		len = strcspn(host, ":/");
		if (host[len] == ':' && strchr(host + len + 1, ':') &&
		    strchr(host + len + 1, ':') < host + strcspn(host, "/"))
			return "an IPv6 address goes in brackets: [ADDRESS]";
		if (!len || len >= sizeof(u->address))
			return "missing or bad HOST";
		memcpy(u->address, host, len);
		if (inet_pton(AF_INET, u->address, addr) != 1)
			return "HOST must be a numeric IPv4 address or an IPv6 address in brackets";
		p = host + len;
	}
	if (*p == ':') {
		len = strcspn(++p, "/");
		if (!len || len >= sizeof(port))
			return "bad PORT";
		memcpy(port, p, len);
		port[len] = '\0';
		if (parse_u64(port, 1, 65535, &v))
			return "PORT must be a number in 1..65535";
		u->port = v;
		p += len;
	}
	if (!*p) {
		if (want_path)
			return "missing /EXPORT";
		return NULL;
	}
	if (*p != '/')
		return "unexpected text after HOST";
	if (!want_path)
		return "no /PATH expected";
	p++;
	if (!valid_name(p))
		return "EXPORT must be " NAME_RULE;
	snprintf(u->path, sizeof(u->path), "%s", p);
	return NULL;
}

/* An address as URIs write it: IPv6 in brackets. */
void uri_host(char *buf, size_t len, const char *address)
{
	bool v6 = strchr(address, ':');

	snprintf(buf, len, "%s%s%s", v6 ? "[" : "", address, v6 ? "]" : "");
}

/* Read a sysfs or configfs attribute without its trailing newline. */
int read_attr(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	err = errno;
	close(fd);
	if (n < 0)
		return -err;
	buf[n] = '\0';
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return 0;
}

/* Write @val to an attribute in a single write(2); 0 or -errno. */
int write_attr(const char *path, const char *val)
{
	size_t len = strlen(val);
	ssize_t n;
	int fd, err;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, val, len);
	err = n < 0 ? errno : (size_t)n != len ? EIO : 0;
	if (close(fd) && !err)
		err = errno;
	return -err;
}

void json_begin(struct json *j, FILE *out)
{
	j->out = out;
	j->first = true;
	fputc('{', out);
}

void json_key(struct json *j, const char *key)
{
	fprintf(j->out, "%s\"%s\":", j->first ? "" : ",", key);
	j->first = false;
}

void json_u64(struct json *j, const char *key, u64 v)
{
	json_key(j, key);
	fprintf(j->out, "%llu", (unsigned long long)v);
}

void json_f(struct json *j, const char *key, double v)
{
	json_key(j, key);
	fprintf(j->out, "%.3f", v);
}

void json_bool(struct json *j, const char *key, bool v)
{
	json_key(j, key);
	fputs(v ? "true" : "false", j->out);
}

/* A JSON string, quoted and escaped. */
void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

void json_str(struct json *j, const char *key, const char *s)
{
	json_key(j, key);
	json_string(j->out, s);
}

/* Close an object nested in an array or another object. */
void json_close(struct json *j)
{
	fputc('}', j->out);
}

void json_end(struct json *j)
{
	fputs("}\n", j->out);
}
