// SPDX-License-Identifier: GPL-2.0
/*
 * ternadm: administration CLI for tern.
 *
 *   ternadm GROUP COMMAND [ARGS...]
 *
 * GROUP selects a command group from the table below; the group parses
 * the rest. Exit status: 0 success, 1 failure, 2 usage error.
 */
#include <stdio.h>
#include <string.h>
#include "ternadm.h"

const char *ternadm_prog = "ternadm";

static const struct ternadm_group groups[] = {
	{ "bench", "messenger benchmark: echo service and load generator",
	  bench_main, bench_usage },
	{ "map", "map a remote export as a block device /dev/ternN",
	  maps_map_main, maps_map_usage },
	{ "unmap", "unmap a tern block device",
	  maps_unmap_main, maps_unmap_usage },
	{ "list", "list the mapped tern block devices",
	  list_main, list_usage },
	{ "target", "configure tern_target: exports, ports, links and hosts",
	  target_cfg_main, target_cfg_usage },
	{ "key", "generate and check authentication keys",
	  key_main, key_usage },
};

#define NR_GROUPS ARRAY_SIZE(groups)

static void ternadm_usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: %s GROUP COMMAND [ARGS...]\n", ternadm_prog);
	fprintf(out, "       %s help [GROUP]\n", ternadm_prog);
	fprintf(out, "       %s --version\n\ngroups:\n", ternadm_prog);
	for (i = 0; i < NR_GROUPS; i++)
		fprintf(out, "  %-10s %s\n", groups[i].name, groups[i].summary);
	fprintf(out, "\nSee ternadm(8).\n");
}

static const struct ternadm_group *find_group(const char *name)
{
	size_t i;

	for (i = 0; i < NR_GROUPS; i++)
		if (!strcmp(groups[i].name, name))
			return &groups[i];
	return NULL;
}

int main(int argc, char **argv)
{
	const struct ternadm_group *g;

	if (argc < 2) {
		ternadm_usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "--help")) {
		if (argc == 2) {
			ternadm_usage(stdout);
			return EXIT_OK;
		}
		g = find_group(argv[2]);
		if (!g) {
			ternadm_err("help: unknown group '%s'", argv[2]);
			return EXIT_USAGE;
		}
		if (argc > 3) {
			ternadm_err("help: unexpected '%s'", argv[3]);
			return EXIT_USAGE;
		}
		g->usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		if (argc > 2) {
			ternadm_err("version: unexpected '%s'", argv[2]);
			return EXIT_USAGE;
		}
		printf("%s %s\n", ternadm_prog, TERN_VERSION);
		return EXIT_OK;
	}
	g = find_group(argv[1]);
	if (!g) {
		ternadm_err("unknown group '%s'", argv[1]);
		ternadm_usage(stderr);
		return EXIT_USAGE;
	}
	return g->main(argc - 1, argv + 1);
}
