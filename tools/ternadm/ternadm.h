/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ternadm: shared definitions. Each command group (bench, map, unmap,
 * list, target, key) lives in its own source file and exports one entry
 * point listed in ternadm.c's command table.
 */
#ifndef TERNADM_H
#define TERNADM_H

#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>
#include <tern/tern_blk_proto.h>
#include <tern/tern_wire.h>

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

/* Where tern_blk and tern_target are driven from. */
#define BLK_CTL_DEVICE	"/dev/tern-blk-ctl"
#define SYS_BLOCK	"/sys/block"
#define TARGET_CFS	"/sys/kernel/config/tern"

/* Export, port and host names, as the kernel takes them (valid_name()) */
#define NAME_MAX_LEN	TERN_BLK_NAME_LEN
#define NAME_RULE	"1-63 of [A-Za-z0-9._:-], not starting with '.'"

/* Command groups. */
int bench_main(int argc, char **argv);
void bench_usage(FILE *out);
int map_main(int argc, char **argv);
void map_usage(FILE *out);
int unmap_main(int argc, char **argv);
void unmap_usage(FILE *out);
int list_main(int argc, char **argv);
void list_usage(FILE *out);
int target_main(int argc, char **argv);
void target_usage(FILE *out);
int key_main(int argc, char **argv);
void key_usage(FILE *out);

/* a maps file line: "map", the URI and up to 64 words of options */
#define MAP_LINE_WORDS_MAX	66
const char *map_line_check(int argc, char **argv, const char **host);

/* maps.c: map --all and unmap --all, else map_main() and unmap_main() */
int maps_map_main(int argc, char **argv);
void maps_map_usage(FILE *out);
int maps_unmap_main(int argc, char **argv);
void maps_unmap_usage(FILE *out);

/*
 * key.c: authentication keys. The text form, one line: "TERNKEY-1:", the
 * base64 of the secret and its CRC32C (little-endian), ":".
 */
#define KEY_PREFIX	"TERNKEY-1:"
#define KEY_SECRET_LEN	32
#define KEY_TEXT_LEN	59
const char *key_text_check(const char *text);
int key_read_file(const char *cmd, const char *file, char *text);

/* util.c */
/* An error message on stderr, prefixed with the program name. */
#define ternadm_err(fmt, ...) \
	fprintf(stderr, "%s: " fmt "\n", ternadm_prog, ##__VA_ARGS__)
int parse_u64(const char *s, u64 min, u64 max, u64 *out);
int parse_size(const char *s, u64 max, u64 *out);
int parse_seconds_ms(const char *s, u64 max_ms, u64 *out_ms);
bool valid_name(const char *s);
/* the text of an export uuid, as configfs takes it */
#define UUID_LEN	36
bool valid_uuid(const char *s);
int bad_option(const char *cmd, char **argv);
struct option;
int opt_once(const char *cmd, const struct option *opts, int first,
	     int count, int c, bool *seen);

/* A parsed SCHEME://HOST[:PORT][/PATH]. */
struct tern_uri {
	char		scheme[8];	/* tcp or rdma */
	char		address[48];	/* numeric, without brackets */
	unsigned int	port;
	char		path[NAME_MAX_LEN];	/* the export, or empty */
};

const char *parse_uri(const char *s, bool want_path, struct tern_uri *u);
void uri_host(char *buf, size_t len, const char *address);
int read_attr(const char *path, char *buf, size_t len);
int write_attr(const char *path, const char *val);

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
void json_key(struct json *j, const char *key);
void json_string(FILE *out, const char *s);
void json_close(struct json *j);
void json_end(struct json *j);

/* json_parse.c: a parsed JSON value; an object's keys are in @keys. */
enum json_type {
	JSON_NULL,
	JSON_BOOL,
	JSON_NUMBER,	/* whole, non-negative */
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

struct jval {
	enum json_type	type;
	bool		b;
	u64		num;
	char		*str;
	struct jval	*items;		/* array items or object values */
	char		**keys;		/* object keys */
	size_t		n;
	size_t		cap;		/* room in @items and @keys */
};

int json_parse(const char *s, size_t len, struct jval *v, char *err,
	       size_t errlen);
const struct jval *json_get(const struct jval *v, const char *key);
void json_free(struct jval *v);

/* restore.c: target save, restore and clear, else target_main() */
int target_cfg_main(int argc, char **argv);
void target_cfg_usage(FILE *out);

#endif /* TERNADM_H */
