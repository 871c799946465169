// SPDX-License-Identifier: GPL-2.0
/*
 * ternadm list: the mapped tern devices, from /sys/block/ternN/tern/.
 *
 *   ternadm list [--json]
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ternadm.h"

#define MAX_DEVS	4096

void list_usage(FILE *out)
{
	fprintf(out, "usage: %s list [--json]\n\n", ternadm_prog);
	fprintf(out, "One line per mapped device: name, URI (transport, address, service,\n");
	fprintf(out, "export), state, lanes, queue depth, size (K, M, G, ... of 1024) and\n");
	fprintf(out, "flags (crc, auth, encrypt, integrity, ro); a device of several paths\n");
	fprintf(out, "has a line per path below it: URI, live or down, live lanes of its\n");
	fprintf(out, "lanes, requests in flight and sent on it, resends. With --json a JSON\n");
	fprintf(out, "array of objects, sizes in bytes.\n");
}

#define MAX_PATHS	4

/* A line of /sys/block/ternN/tern/paths */
struct list_path {
	char	uri[80];
	char	state[8];
	u64	lanes;
	u64	live_lanes;
	u64	inflight;
	u64	requests;
	u64	resends;
	u64	reconnects;
};

struct list_dev {
	char	name[32];
	char	transport[16];
	char	address[48];
	char	export[NAME_MAX_LEN];
	char	host[NAME_MAX_LEN];
	char	state[16];
	u64	service;
	u64	lanes;
	u64	queue_depth;
	u64	size;		/* bytes */
	bool	read_only;
	bool	crc;
	bool	auth;
	bool	encrypt;
	bool	integrity;
	char	uuid[40];	/* empty: the target names no uuid */
	char	iopolicy[16];	/* empty: a tern_blk without paths */
	/* --inline-write, --inline-read as mapped; has_*: given at all */
	bool	has_inline_write;
	bool	has_inline_read;
	u64	inline_write;
	u64	inline_read;
	struct list_path paths[MAX_PATHS];
	int	nr_paths;
};

/* The value of key=value @key in @line, 0 if it is not there */
static u64 path_field(const char *line, const char *key)
{
	char pat[32];
	const char *p;

	snprintf(pat, sizeof(pat), " %s=", key);
	p = strstr(line, pat);
	return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

static void list_paths(struct list_dev *d)
{
	char path[PATH_MAX], line[512];
	struct list_path *lp;
	FILE *f;

	snprintf(path, sizeof(path), SYS_BLOCK "/%s/tern/paths", d->name);
	f = fopen(path, "re");
	if (!f)
		return;
	while (d->nr_paths < MAX_PATHS && fgets(line, sizeof(line), f)) {
		lp = &d->paths[d->nr_paths];
		if (sscanf(line, "%79s %7s", lp->uri, lp->state) != 2)
			continue;
		lp->lanes = path_field(line, "lanes");
		lp->live_lanes = path_field(line, "live_lanes");
		lp->inflight = path_field(line, "inflight");
		lp->requests = path_field(line, "requests");
		lp->resends = path_field(line, "resends");
		lp->reconnects = path_field(line, "reconnects");
		d->nr_paths++;
	}
	fclose(f);
}

static void list_str(const char *name, const char *attr, char *buf,
		     size_t len)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), SYS_BLOCK "/%s/%s", name, attr);
	if (read_attr(path, buf, len))
		snprintf(buf, len, "?");
}

static u64 list_u64(const char *name, const char *attr)
{
	char buf[32];

	list_str(name, attr, buf, sizeof(buf));
	return strtoull(buf, NULL, 10);
}

/* An inline limit: a number when the map gave one, else "default". */
static bool list_inline(const char *name, const char *attr, u64 *out)
{
	char buf[32];

	list_str(name, attr, buf, sizeof(buf));
	if (buf[0] < '0' || buf[0] > '9')
		return false;
	*out = strtoull(buf, NULL, 10);
	return true;
}

static void list_read(struct list_dev *d)
{
	list_str(d->name, "tern/transport", d->transport,
		 sizeof(d->transport));
	list_str(d->name, "tern/address", d->address, sizeof(d->address));
	list_str(d->name, "tern/export", d->export, sizeof(d->export));
	list_str(d->name, "tern/host", d->host, sizeof(d->host));
	list_str(d->name, "tern/state", d->state, sizeof(d->state));
	d->service = list_u64(d->name, "tern/service");
	d->lanes = list_u64(d->name, "tern/lanes");
	d->queue_depth = list_u64(d->name, "tern/queue_depth");
	d->size = list_u64(d->name, "size") * 512;
	d->read_only = list_u64(d->name, "ro");
	d->crc = list_u64(d->name, "tern/crc");
	/* a tern_blk from before these shows "?": read as 0 */
	d->auth = list_u64(d->name, "tern/auth");
	d->encrypt = list_u64(d->name, "tern/encrypt");
	d->integrity = list_u64(d->name, "tern/integrity");
	d->has_inline_write = list_inline(d->name, "tern/inline_write",
					  &d->inline_write);
	d->has_inline_read = list_inline(d->name, "tern/inline_read",
					 &d->inline_read);
	list_str(d->name, "tern/uuid", d->uuid, sizeof(d->uuid));
	if (!strcmp(d->uuid, "?"))
		d->uuid[0] = '\0';
	list_str(d->name, "tern/iopolicy", d->iopolicy, sizeof(d->iopolicy));
	if (!strcmp(d->iopolicy, "?"))
		d->iopolicy[0] = '\0';
	list_paths(d);
}

/* @bytes as 512B, 64.0M, 1.5G: units of 1024, one decimal */
static void human_size(u64 bytes, char *buf, size_t len)
{
	static const char units[] = "KMGTPE";
	double v = bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, len, "%lluB", (unsigned long long)bytes);
		return;
	}
	while (v >= 1024 && u < (int)sizeof(units) - 2) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f%c", v, units[u]);
}

/* ternN by N */
static int list_cmp(const void *a, const void *b)
{
	const struct list_dev *x = a, *y = b;
	long nx = atol(x->name + 4), ny = atol(y->name + 4);

	return nx < ny ? -1 : nx > ny;
}

/* The devices, sorted; NULL with *nr 0 when there are none. */
static struct list_dev *list_scan(int *nr)
{
	struct list_dev *devs = NULL, *d;
	struct dirent *de;
	char path[PATH_MAX];
	DIR *dh;
	int n = 0;

	*nr = 0;
	dh = opendir(SYS_BLOCK);
	if (!dh)
		return NULL;
	while ((de = readdir(dh)) && n < MAX_DEVS) {
		if (strncmp(de->d_name, "tern", 4) ||
		    strlen(de->d_name) >= sizeof(devs->name))
			continue;
		snprintf(path, sizeof(path), SYS_BLOCK "/%s/tern", de->d_name);
		if (access(path, F_OK))
			continue;
		d = realloc(devs, (n + 1) * sizeof(*devs));
		if (!d)
			break;
		devs = d;
		d = &devs[n++];
		memset(d, 0, sizeof(*d));
		snprintf(d->name, sizeof(d->name), "%s", de->d_name);
		list_read(d);
	}
	closedir(dh);
	if (n)
		qsort(devs, n, sizeof(*devs), list_cmp);
	*nr = n;
	return devs;
}

static void list_json_paths(struct json *j, const struct list_dev *d)
{
	struct json pj;
	int i;

	json_key(j, "paths");
	fputc('[', j->out);
	for (i = 0; i < d->nr_paths; i++) {
		const struct list_path *p = &d->paths[i];

		if (i)
			fputc(',', j->out);
		json_begin(&pj, j->out);
		json_str(&pj, "uri", p->uri);
		json_str(&pj, "state", p->state);
		json_u64(&pj, "lanes", p->lanes);
		json_u64(&pj, "live_lanes", p->live_lanes);
		json_u64(&pj, "inflight", p->inflight);
		json_u64(&pj, "requests", p->requests);
		json_u64(&pj, "resends", p->resends);
		json_u64(&pj, "reconnects", p->reconnects);
		json_close(&pj);
	}
	fputc(']', j->out);
}

static void list_json(const struct list_dev *devs, int nr)
{
	char dev[48];
	struct json j;
	int i;

	fputc('[', stdout);
	for (i = 0; i < nr; i++) {
		const struct list_dev *d = &devs[i];

		fputs(i ? ",\n" : "\n", stdout);
		snprintf(dev, sizeof(dev), "/dev/%s", d->name);
		json_begin(&j, stdout);
		json_str(&j, "name", d->name);
		json_str(&j, "device", dev);
		json_str(&j, "transport", d->transport);
		json_str(&j, "address", d->address);
		json_u64(&j, "service", d->service);
		json_str(&j, "export", d->export);
		json_str(&j, "host", d->host);
		json_str(&j, "state", d->state);
		json_u64(&j, "lanes", d->lanes);
		json_u64(&j, "queue_depth", d->queue_depth);
		json_u64(&j, "size", d->size);
		json_bool(&j, "read_only", d->read_only);
		json_bool(&j, "crc", d->crc);
		json_bool(&j, "auth", d->auth);
		json_bool(&j, "encrypt", d->encrypt);
		json_bool(&j, "integrity", d->integrity);
		json_str(&j, "uuid", d->uuid);
		if (d->iopolicy[0])
			json_str(&j, "iopolicy", d->iopolicy);
		if (d->has_inline_write)
			json_u64(&j, "inline_write", d->inline_write);
		if (d->has_inline_read)
			json_u64(&j, "inline_read", d->inline_read);
		if (d->nr_paths)
			list_json_paths(&j, d);
		json_close(&j);
	}
	fputs(nr ? "\n]\n" : "]\n", stdout);
}

static void list_path_line(const struct list_path *p)
{
	printf("  path %-36s %-4s lanes %llu/%llu", p->uri, p->state,
	       (unsigned long long)p->live_lanes,
	       (unsigned long long)p->lanes);
	printf(" inflight %llu requests %llu resends %llu\n",
	       (unsigned long long)p->inflight,
	       (unsigned long long)p->requests,
	       (unsigned long long)p->resends);
}

static void list_text(const struct list_dev *devs, int nr)
{
	char uri[160], host[64], size[16];
	int i, p;

	for (i = 0; i < nr; i++) {
		const struct list_dev *d = &devs[i];

		uri_host(host, sizeof(host), d->address);
		snprintf(uri, sizeof(uri), "%s://%s:%llu/%s", d->transport,
			 host, (unsigned long long)d->service, d->export);
		human_size(d->size, size, sizeof(size));
		/* ro last: scripts match " ro$" */
		printf("%-8s %-36s %-12s lanes %-2llu qd %-4llu size %-7s%s%s%s%s%s\n",
		       d->name, uri, d->state, (unsigned long long)d->lanes,
		       (unsigned long long)d->queue_depth, size,
		       d->crc ? " crc" : "", d->auth ? " auth" : "",
		       d->encrypt ? " encrypt" : "",
		       d->integrity ? " integrity" : "",
		       d->read_only ? " ro" : "");
		if (d->nr_paths > 1)
			printf("  iopolicy %s\n", d->iopolicy);
		for (p = 0; d->nr_paths > 1 && p < d->nr_paths; p++)
			list_path_line(&d->paths[p]);
	}
}

int list_main(int argc, char **argv)
{
	struct list_dev *devs;
	bool json = false;
	int i, nr;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			list_usage(stdout);
			return EXIT_OK;
		}
		if (strcmp(argv[i], "--json")) {
			ternadm_err("list: unexpected '%s'", argv[i]);
			return EXIT_USAGE;
		}
		json = true;
	}
	devs = list_scan(&nr);
	if (json)
		list_json(devs, nr);
	else
		list_text(devs, nr);
	free(devs);
	return EXIT_OK;
}
