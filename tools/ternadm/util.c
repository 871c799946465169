// SPDX-License-Identifier: GPL-2.0
/*
 * ternadm: helpers shared by the command groups: messages, strict number
 * parsing, JSON strings.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>
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

void json_begin(struct json *j, FILE *out)
{
	j->out = out;
	j->first = true;
	fputc('{', out);
}

static void json_key(struct json *j, const char *key)
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

void json_str(struct json *j, const char *key, const char *s)
{
	json_key(j, key);
	fputc('"', j->out);
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(j->out, "\\%c", c);
		else if (c < 0x20)
			fprintf(j->out, "\\u%04x", c);
		else
			fputc(c, j->out);
	}
	fputc('"', j->out);
}

void json_end(struct json *j)
{
	fputs("}\n", j->out);
}
