/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ternadm: shared definitions. Each command group (bench, later map,
 * unmap, list, target) lives in its own source file and exports one
 * entry point listed in ternadm.c's command table.
 */
#ifndef TERNADM_H
#define TERNADM_H

#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>

typedef __u64 u64;
typedef __u32 u32;

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* Exit codes. */
#define EXIT_OK		0	/* success */
#define EXIT_FAILED	1	/* the operation failed, or a run had errors */
#define EXIT_USAGE	2	/* bad command line */

extern const char *ternadm_prog;

struct ternadm_group {
	const char	*name;
	const char	*summary;
	int		(*main)(int argc, char **argv);	/* argv[0] = group */
	void		(*usage)(FILE *out);
};

/* Command groups. */
int bench_main(int argc, char **argv);
void bench_usage(FILE *out);

/* util.c */
/* An error message on stderr, prefixed with the program name. */
#define ternadm_err(fmt, ...) \
	fprintf(stderr, "%s: " fmt "\n", ternadm_prog, ##__VA_ARGS__)
int parse_u64(const char *s, u64 min, u64 max, u64 *out);
int parse_size(const char *s, u64 max, u64 *out);
int parse_seconds_ms(const char *s, u64 max_ms, u64 *out_ms);

/* A flat JSON object written member by member. */
struct json {
	FILE	*out;
	bool	first;
};

void json_begin(struct json *j, FILE *out);
void json_u64(struct json *j, const char *key, u64 v);
void json_f(struct json *j, const char *key, double v);
void json_bool(struct json *j, const char *key, bool v);
void json_str(struct json *j, const char *key, const char *s);
void json_end(struct json *j);

#endif /* TERNADM_H */
