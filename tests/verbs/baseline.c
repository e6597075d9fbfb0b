/*
 * verbs-baseline: what a process costs in memory to open a device and allocate a PD. It prints
 * the process's VmRSS (and RssAnon / RssFile) from /proc/self/status at each step, the threads,
 * and, after the PD, the resident and private-dirty KiB of every mapping grouped by what it maps
 * (a library's file name, [heap], anonymous, [stack]), each group's mapped size beside. It prints
 * figures; it tests nothing.
 *
 *   verbs-baseline DEVICE [SMAPS_COPY]   SMAPS_COPY: where to copy /proc/self/smaps at the end
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The status fields printed at each step. */
static const char *const fields[] = { "VmRSS:", "RssAnon:", "RssFile:", "Threads:" };
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static void step(const char *what)
{
	char line[256];
	long v[NFIELDS] = { 0 };
	FILE *f = fopen("/proc/self/status", "r");

	if (!f) {
		perror("/proc/self/status");
		exit(1);
	}
	while (fgets(line, sizeof(line), f))
		for (size_t i = 0; i < NFIELDS; i++)
			if (!strncmp(line, fields[i], strlen(fields[i])))
				v[i] = strtol(line + strlen(fields[i]), NULL, 10);
	fclose(f);
	printf("baseline %-24s VmRSS %6ld KiB  RssAnon %6ld  RssFile %6ld  threads %ld\n", what, v[0],
	       v[1], v[2], v[3]);
}

/* What the step `what` (a call's name) made: its step printed; when it is NULL, why, and exit 1. */
static void *made(void *p, const char *what)
{
	if (!p) {
		perror(what);
		exit(1);
	}
	step(what);
	return p;
}

#define MAX_GROUPS 64

struct group {
	char name[96];
	long size, rss, dirty;
};

/* The mappings of /proc/self/smaps summed per file name (anonymous ones under "[anon]"). */
static void mappings(const char *copy)
{
	static struct group g[MAX_GROUPS];
	size_t n = 0, cur = MAX_GROUPS;
	char line[512];
	FILE *f = fopen("/proc/self/smaps", "r");
	FILE *out = copy ? fopen(copy, "w") : NULL;

	if (!f) {
		perror("/proc/self/smaps");
		exit(1);
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8], path[400] = "";
		long kib;

		if (out)
			fputs(line, out);
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %399[^\n]", &lo, &hi, perms, path) >= 3) {
			const char *name = path[0] ? strrchr(path, '/') : NULL;

			name = name ? name + 1 : path[0] ? path : "[anon]";
			for (cur = 0; cur < n && strcmp(g[cur].name, name); cur++)
				;
			if (cur == n && n < MAX_GROUPS)
				snprintf(g[n++].name, sizeof(g[0].name), "%s", name);
			if (cur < n)
				g[cur].size += (long)((hi - lo) / 1024);
		} else if (cur < n && sscanf(line, "Rss: %ld kB", &kib) == 1) {
			g[cur].rss += kib;
		} else if (cur < n && sscanf(line, "Private_Dirty: %ld kB", &kib) == 1) {
			g[cur].dirty += kib;
		}
	}
	fclose(f);
	if (out)
		fclose(out);
	printf("baseline mappings after the PD: %-28s %9s %9s %9s\n", "file", "size KiB", "Rss KiB",
	       "dirty KiB");
	for (size_t i = 0; i < n; i++)
		if (g[i].rss)
			printf("baseline map %-46s %9ld %9ld %9ld\n", g[i].name, g[i].size, g[i].rss,
			       g[i].dirty);
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;

	if (argc < 2) {
		fprintf(stderr, "usage: verbs-baseline DEVICE [SMAPS_COPY]\n");
		return 2;
	}
	step("start");
	list = made(ibv_get_device_list(NULL), "ibv_get_device_list");
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 1;
	}
	step("ibv_open_device");
	pd = made(ibv_alloc_pd(ctx), "ibv_alloc_pd");
	mappings(argc > 2 ? argv[2] : NULL);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
