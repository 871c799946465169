// SPDX-License-Identifier: GPL-2.0
/*
 * tern messenger core: URI parsing.
 *
 * Accepted forms, nothing else:
 *   SCHEME://A.B.C.D[:PORT]
 *   SCHEME://[IPV6][:PORT]
 * SCHEME is lower-case alphanumeric, PORT is 1..65535 in decimal without
 * sign or leading garbage. Host names and IPv6 scope ids are refused: the
 * kernel does not resolve names, and the ULP's tooling does that.
 * No locking: pure functions.
 */
#include <linux/ctype.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inet.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include "tern_core.h"

#define TERN_URI_MAX	256

static int tern_parse_port(const char *s, size_t len, u16 *port)
{
	unsigned int val = 0;
	size_t i;

	if (!len || len > 5)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (!isdigit(s[i]))
			return -EINVAL;
		val = val * 10 + (s[i] - '0');
	}
	if (!val || val > 65535)
		return -EINVAL;
	*port = val;
	return 0;
}

static int tern_parse_host(const char *host, size_t len,
			   struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	const char *end;

	if (!len)
		return -EINVAL;
	if (host[0] == '[') {
		if (len < 3 || host[len - 1] != ']')
			return -EINVAL;
		if (in6_pton(host + 1, len - 2, (u8 *)&sin6->sin6_addr, -1,
			     &end) != 1 || end != host + len - 1)
			return -EINVAL;
		sin6->sin6_family = AF_INET6;
		return 0;
	}
	if (in4_pton(host, len, (u8 *)&sin->sin_addr, -1, &end) != 1 ||
	    end != host + len)
		return -EINVAL;
	sin->sin_family = AF_INET;
	return 0;
}

/**
 * tern_addr_canon - a numeric address in its one spelling
 * @text: an IPv4 or IPv6 address, without brackets, port or scope
 * @out: receives it as "%pI4" or "%pI6c" prints it
 * @size: bytes at @out
 *
 * So that "10.0.0.01" or "0:0::1" name what "10.0.0.1" or "::1" does
 * wherever addresses are compared or shown.
 *
 * Return: 0, or -EINVAL for anything else, or when @out is too small.
 */
int tern_addr_canon(const char *text, char *out, size_t size)
{
	size_t len = strnlen(text, INET6_ADDRSTRLEN);
	const char *end;
	u8 addr[16];
	int n;

	if (!len || len == INET6_ADDRSTRLEN)
		return -EINVAL;
	if (in4_pton(text, len, addr, -1, &end) == 1 && end == text + len)
		n = snprintf(out, size, "%pI4", addr);
	else if (in6_pton(text, len, addr, -1, &end) == 1 && end == text + len)
		n = snprintf(out, size, "%pI6c", addr);
	else
		return -EINVAL;
	return n < size ? 0 : -EINVAL;
}
EXPORT_SYMBOL_GPL(tern_addr_canon);

/* A transport's name: 1 to TERN_SCHEME_MAX - 1 lower-case letters and digits. */
bool tern_scheme_valid(const char *name, size_t len)
{
	size_t i;

	if (!len || len >= TERN_SCHEME_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (!islower(name[i]) && !isdigit(name[i]))
			return false;
	return true;
}

/**
 * tern_parse_uri - parse "scheme://host[:port]"
 * @uri: NUL-terminated URI
 * @scheme: receives the scheme
 * @scheme_len: size of @scheme
 * @addr: receives the address; port defaults to TERN_DEFAULT_PORT
 *
 * Return: 0 or -EINVAL.
 */
int tern_parse_uri(const char *uri, char *scheme, size_t scheme_len,
		   struct sockaddr_storage *addr)
{
	const char *sep, *host, *port_sep;
	size_t len, host_len;
	u16 port = TERN_DEFAULT_PORT;
	int ret;

	if (!uri || !scheme || !scheme_len)
		return -EINVAL;
	len = strnlen(uri, TERN_URI_MAX + 1);
	if (len > TERN_URI_MAX)
		return -EINVAL;

	sep = strstr(uri, "://");
	if (!sep || (size_t)(sep - uri) >= scheme_len ||
	    !tern_scheme_valid(uri, sep - uri))
		return -EINVAL;
	memcpy(scheme, uri, sep - uri);
	scheme[sep - uri] = '\0';

	host = sep + 3;
	len = strlen(host);
	if (host[0] == '[') {
		const char *close = strchr(host, ']');

		if (!close)
			return -EINVAL;
		host_len = close - host + 1;
		port_sep = close + 1;
		if (*port_sep && *port_sep != ':')
			return -EINVAL;
	} else {
		port_sep = strchr(host, ':');
		host_len = port_sep ? (size_t)(port_sep - host) : len;
		if (!port_sep)
			port_sep = host + len;
	}

	memset(addr, 0, sizeof(*addr));
	ret = tern_parse_host(host, host_len, addr);
	if (ret)
		return ret;
	if (*port_sep == ':') {
		ret = tern_parse_port(port_sep + 1, strlen(port_sep + 1),
				      &port);
		if (ret)
			return ret;
	}

	if (addr->ss_family == AF_INET6)
		((struct sockaddr_in6 *)addr)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)addr)->sin_port = htons(port);
	return 0;
}
EXPORT_SYMBOL_GPL(tern_parse_uri);
