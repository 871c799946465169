// SPDX-License-Identifier: GPL-2.0
/*
 * ternadm: a small strict JSON reader, for what ternadm itself writes
 * (target save) and what an administrator edits from it. Objects,
 * arrays, strings, true, false, null and non-negative integers; no
 * fractions or exponents (nothing of ours has them), no duplicate keys,
 * at most JSON_MEMBERS_MAX members an object, nesting at most
 * JSON_DEPTH_MAX deep. Errors name the byte offset.
 */
#include <stdlib.h>
#include <string.h>
#include "ternadm.h"

#define JSON_DEPTH_MAX	16
/* bounds the duplicate key search, which compares each key with all */
#define JSON_MEMBERS_MAX	256

struct jparser {
	const char	*s;
	size_t		len;
	size_t		pos;
	char		*err;
	size_t		errlen;
};

static int jfail(struct jparser *p, const char *why)
{
	snprintf(p->err, p->errlen, "%s at byte %zu", why, p->pos);
	return -1;
}

static void jskip(struct jparser *p)
{
	while (p->pos < p->len && strchr(" \t\r\n", p->s[p->pos]))
		p->pos++;
}

static bool jlit(struct jparser *p, const char *word)
{
	size_t n = strlen(word);

	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n))
		return false;
	p->pos += n;
	return true;
}

static int jhex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A string after its opening quote, into a new buffer at *@out. */
static int jstring(struct jparser *p, char **out)
{
	size_t cap = 16, n = 0;
	char *buf = malloc(cap), *nbuf;
	unsigned char c;
	int i, d, code;

	if (!buf)
		return jfail(p, "out of memory");
	for (;;) {
		if (p->pos >= p->len) {
			free(buf);
			return jfail(p, "unterminated string");
		}
		c = p->s[p->pos++];
		if (c == '"')
			break;
		if (c < 0x20) {
			free(buf);
			return jfail(p, "control character in a string");
		}
		if (c == '\\') {
			if (p->pos >= p->len) {
				free(buf);
				return jfail(p, "unterminated string");
			}
			c = p->s[p->pos++];
			switch (c) {
			case '"': case '\\': case '/':
				break;
			case 'b':
				c = '\b';
				break;
			case 'f':
				c = '\f';
				break;
			case 'n':
				c = '\n';
				break;
			case 'r':
				c = '\r';
				break;
			case 't':
				c = '\t';
				break;
			case 'u':
				code = 0;
				for (i = 0; i < 4; i++) {
					d = p->pos < p->len ?
					    jhex(p->s[p->pos]) : -1;
					if (d < 0) {
						free(buf);
						return jfail(p, "bad \\u escape");
					}
					code = code * 16 + d;
					p->pos++;
				}
				/* names and paths of ours are ASCII or raw UTF-8 */
				if (!code || code > 0x7f) {
					free(buf);
					return jfail(p, "\\u escape outside ASCII or of NUL");
				}
				c = code;
				break;
			default:
				free(buf);
				return jfail(p, "bad escape");
			}
		}
		if (n + 2 > cap) {
			cap *= 2;
			nbuf = realloc(buf, cap);
			if (!nbuf) {
				free(buf);
				return jfail(p, "out of memory");
			}
			buf = nbuf;
		}
		buf[n++] = c;
	}
	buf[n] = '\0';
	*out = buf;
	return 0;
}

static int jvalue(struct jparser *p, struct jval *v, int depth);

/*
 * Append a zeroed slot to @v's items (and keys, for an object), growing
 * them by doubling: one realloc() per item made big inputs quadratic.
 */
static struct jval *jgrow(struct jparser *p, struct jval *v)
{
	size_t cap = v->cap ? 2 * v->cap : 4;
	struct jval *items;
	char **keys;

	if (v->type == JSON_OBJECT && v->n == JSON_MEMBERS_MAX) {
		jfail(p, "more than 256 members in an object");
		return NULL;
	}
	if (v->n == v->cap) {
		items = realloc(v->items, cap * sizeof(*items));
		if (!items) {
			jfail(p, "out of memory");
			return NULL;
		}
		v->items = items;
		if (v->type == JSON_OBJECT) {
			keys = realloc(v->keys, cap * sizeof(*keys));
			if (!keys) {
				jfail(p, "out of memory");
				return NULL;
			}
			v->keys = keys;
		}
		v->cap = cap;
	}
	if (v->type == JSON_OBJECT)
		v->keys[v->n] = NULL;
	memset(&v->items[v->n], 0, sizeof(*items));
	return &v->items[v->n++];
}

static int jcontainer(struct jparser *p, struct jval *v, int depth)
{
	bool object = v->type == JSON_OBJECT;
	char close = object ? '}' : ']';
	struct jval *item;
	char *key;
	size_t i;

	if (depth > JSON_DEPTH_MAX)
		return jfail(p, "nested too deep");
	jskip(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		return 0;
	}
	for (;;) {
		key = NULL;
		jskip(p);
		if (object) {
			if (p->pos >= p->len || p->s[p->pos] != '"')
				return jfail(p, "expected a key");
			p->pos++;
			if (jstring(p, &key))
				return -1;
			for (i = 0; i < v->n; i++) {
				if (!strcmp(v->keys[i], key)) {
					free(key);
					return jfail(p, "duplicate key");
				}
			}
			jskip(p);
			if (p->pos >= p->len || p->s[p->pos] != ':') {
				free(key);
				return jfail(p, "expected ':'");
			}
			p->pos++;
		}
		item = jgrow(p, v);
		if (!item) {
			free(key);
			return -1;
		}
		if (object)
			v->keys[v->n - 1] = key;
		if (jvalue(p, item, depth + 1))
			return -1;
		jskip(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == close) {
			p->pos++;
			return 0;
		}
		return jfail(p, object ? "expected ',' or '}'" :
				"expected ',' or ']'");
	}
}

static int jvalue(struct jparser *p, struct jval *v, int depth)
{
	const char *start;

	jskip(p);
	if (p->pos >= p->len)
		return jfail(p, "expected a value");
	switch (p->s[p->pos]) {
	case '{':
		p->pos++;
		v->type = JSON_OBJECT;
		return jcontainer(p, v, depth);
	case '[':
		p->pos++;
		v->type = JSON_ARRAY;
		return jcontainer(p, v, depth);
	case '"':
		p->pos++;
		v->type = JSON_STRING;
		return jstring(p, &v->str);
	}
	if (jlit(p, "true")) {
		v->type = JSON_BOOL;
		v->b = true;
		return 0;
	}
	if (jlit(p, "false")) {
		v->type = JSON_BOOL;
		return 0;
	}
	if (jlit(p, "null")) {
		v->type = JSON_NULL;
		return 0;
	}
	start = p->s + p->pos;
	if (*start < '0' || *start > '9')
		return jfail(p, "unexpected character");
	v->type = JSON_NUMBER;
	while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
		unsigned int d = p->s[p->pos] - '0';

		if ((p->pos > (size_t)(start - p->s) && *start == '0') ||
		    v->num > ((u64)-1 - d) / 10)
			return jfail(p, "bad number");
		v->num = v->num * 10 + d;
		p->pos++;
	}
	if (p->pos < p->len && strchr(".eE-+", p->s[p->pos]))
		return jfail(p, "only whole non-negative numbers are expected");
	return 0;
}

void json_free(struct jval *v)
{
	size_t i;

	for (i = 0; i < v->n; i++) {
		json_free(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
	memset(v, 0, sizeof(*v));
}

int json_parse(const char *s, size_t len, struct jval *v, char *err,
	       size_t errlen)
{
	struct jparser p = { .s = s, .len = len, .err = err, .errlen = errlen };

	memset(v, 0, sizeof(*v));
	if (memchr(s, '\0', len)) {
		snprintf(err, errlen, "a NUL byte in the text");
		return -1;
	}
	if (jvalue(&p, v, 0)) {
		json_free(v);
		return -1;
	}
	jskip(&p);
	if (p.pos != len) {
		jfail(&p, "text after the value");
		json_free(v);
		return -1;
	}
	return 0;
}

/* The member @key of object @v, or NULL, also when @v is no object. */
const struct jval *json_get(const struct jval *v, const char *key)
{
	size_t i;

	if (v->type != JSON_OBJECT)
		return NULL;
	for (i = 0; i < v->n; i++)
		if (!strcmp(v->keys[i], key))
			return &v->items[i];
	return NULL;
}
