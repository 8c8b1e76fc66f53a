/*
 * ramsterctl.c - look at a running node: status, counters, pools; and make
 * a cluster key.
 *
 * Talks to ramsterd through libramster. Output is aligned text for people,
 * or JSON (stats --json) for programs. Exit 0 ok, 1 the node could not be
 * reached or answered an error, 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "ramster.h"

#ifndef RAMSTER_VERSION
#define RAMSTER_VERSION "0.1.0"
#endif

#define CTL_DEFAULT_SOCKET "/run/ramster/ramsterd.sock"
#define CTL_KEY_BYTES	   32
#define EXIT_USAGE	   2

static void ctl_usage(FILE *f)
{
	fprintf(f,
		"Usage: ramsterctl [--socket PATH] COMMAND\n"
		"Look at a running ramster node.\n"
		"\n"
		"Commands:\n"
		"  status          the node's name, version, pid, uptime, socket, ...\n"
		"  stats [--json]  every counter, one `name value` a line (or a JSON object)\n"
		"  pools           every pool of the node, as a table\n"
		"  ping [NODE]     1000 round trips of a page to the node, or via it to peer NODE\n"
		"  peers           the collective as this node sees it: state, incarnation,\n"
		"                  RTT, pages lent to and borrowed from each peer\n"
		"  exports         the NBD exports: size, pages stored (local, remote,\n"
		"                  backing), clients, requests and errors\n"
		"  drain [NODE] [--no-wait]\n"
		"                  the node (or its peer NODE, an id or a name) stops taking\n"
		"                  peers' pages and hands every page it holds back to its\n"
		"                  owner (placed on another peer); shows the node's progress\n"
		"                  until none is left; then it can stop without loss\n"
		"  undrain [NODE]  take peers' pages again\n"
		"  clients         per uid: connections, pools, pages, bytes in and out,\n"
		"                  refusals, quota and weight (root: every uid; else your own)\n"
		"  genkey          print a new cluster key (32 random bytes as 64 hex digits)\n"
		"\n"
		"Options:\n"
		"  -s, --socket PATH  the node's socket (default: $RAMSTER_SOCKET, else %s)\n"
		"  -h, --help         show this help and exit\n"
		"  -V, --version      show the version and exit\n",
		CTL_DEFAULT_SOCKET);
}

static int ctl_usage_error(const char *msg, const char *arg)
{
	fprintf(stderr, "ramsterctl: %s%s%s\nTry 'ramsterctl --help'.\n", msg, arg ? ": " : "",
		arg ? arg : "");
	return EXIT_USAGE;
}

static ramster *ctl_open(const char *path)
{
	ramster *r = ramster_open(path);

	if (!r)
		fprintf(stderr, "ramsterctl: cannot connect to %s: %s\n", path, strerror(errno));
	return r;
}

static int ctl_failed(const char *what, int rc)
{
	fprintf(stderr, "ramsterctl: %s: %s\n", what, strerror(-rc));
	return 1;
}

/* ---- status ------------------------------------------------------------------ */

static int ctl_status(ramster *r)
{
	struct ramster_kv *kv;
	size_t n, i, w = 0;
	int rc = ramster_status(r, &kv, &n);

	if (rc)
		return ctl_failed("status", rc);
	for (i = 0; i < n; i++)
		if (strlen(kv[i].key) > w)
			w = strlen(kv[i].key);
	for (i = 0; i < n; i++)
		printf("%-*s  %s\n", (int)w, kv[i].key, kv[i].value);
	ramster_kv_free(kv, n);
	return 0;
}

/* ---- stats ------------------------------------------------------------------- */

/* The length of name's group prefix: up to its first '_' (the whole name if none). */
static size_t ctl_prefix_len(const char *name)
{
	return strcspn(name, "_");
}

static void ctl_json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static int ctl_stats(ramster *r, int json)
{
	struct ramster_stat *s;
	size_t n, i, nw = 0, vw = 0;
	char num[32];
	int rc = ramster_stats(r, &s, &n);

	if (rc)
		return ctl_failed("stats", rc);
	if (json) {
		printf("{");
		for (i = 0; i < n; i++) {
			printf("%s\n  ", i ? "," : "");
			ctl_json_string(s[i].name);
			printf(": %llu", (unsigned long long)s[i].value);
		}
		printf("%s}\n", n ? "\n" : "");
		ramster_stats_free(s, n);
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (strlen(s[i].name) > nw)
			nw = strlen(s[i].name);
		if ((size_t)snprintf(num, sizeof(num), "%llu", (unsigned long long)s[i].value) > vw)
			vw = strlen(num);
	}
	for (i = 0; i < n; i++) {
		size_t p = ctl_prefix_len(s[i].name);

		/* the node sends each module's counters together: a blank line between groups */
		if (i &&
		    (p != ctl_prefix_len(s[i - 1].name) || strncmp(s[i].name, s[i - 1].name, p)))
			putchar('\n');
		printf("%-*s  %*llu\n", (int)nw, s[i].name, (int)vw,
		       (unsigned long long)s[i].value);
	}
	ramster_stats_free(s, n);
	return 0;
}

/* ---- pools ------------------------------------------------------------------- */

static void ctl_uuid(const unsigned char *u, char *out)
{
	static const int dash[16] = {[4] = 1, [6] = 1, [8] = 1, [10] = 1};
	int i;

	for (i = 0; i < 16; i++) {
		if (dash[i])
			*out++ = '-';
		out += sprintf(out, "%02x", u[i]);
	}
	*out = '\0';
}

static int ctl_pools(ramster *r)
{
	static const char *const head[] = {"ID", "KIND", "SHARING", "CLIENTS", "OBJECTS", "PAGES"};
	struct ramster_pool_info *p;
	size_t n, i;
	int w[6], c, rc = ramster_pools(r, &p, &n);
	char cell[6][32], uuid[40];

	if (rc)
		return ctl_failed("pools", rc);
	for (c = 0; c < 6; c++)
		w[c] = (int)strlen(head[c]);
	for (i = 0; i < n; i++) {
		snprintf(cell[0], 32, "%u", p[i].id);
		snprintf(cell[3], 32, "%u", p[i].clients);
		snprintf(cell[4], 32, "%llu", (unsigned long long)p[i].objects);
		snprintf(cell[5], 32, "%llu", (unsigned long long)p[i].pages);
		for (c = 0; c < 6; c++)
			if (c != 1 && c != 2 && (int)strlen(cell[c]) > w[c])
				w[c] = (int)strlen(cell[c]);
	}
	w[1] = w[1] > 10 ? w[1] : 10; /* "persistent" */
	w[2] = w[2] > 7 ? w[2] : 7;   /* "private" */
	printf("%*s  %-*s  %-*s  %*s  %*s  %*s  UUID\n", w[0], head[0], w[1], head[1], w[2],
	       head[2], w[3], head[3], w[4], head[4], w[5], head[5]);
	for (i = 0; i < n; i++) {
		if (p[i].flags & RAMSTER_SHARED)
			ctl_uuid(p[i].uuid, uuid);
		else
			strcpy(uuid, "-");
		printf("%*u  %-*s  %-*s  %*u  %*llu  %*llu  %s\n", w[0], p[i].id, w[1],
		       (p[i].flags & RAMSTER_PERSISTENT) ? "persistent" : "ephemeral", w[2],
		       (p[i].flags & RAMSTER_SHARED) ? "shared" : "private", w[3], p[i].clients,
		       w[4], (unsigned long long)p[i].objects, w[5], (unsigned long long)p[i].pages,
		       uuid);
	}
	free(p);
	return 0;
}

/* ---- clients ----------------------------------------------------------------- */

static int ctl_clients(ramster *r)
{
	struct ramster_client_info *p = NULL;
	size_t n = 0, i;
	int rc = ramster_clients(r, &p, &n);
	char quota[24];

	if (rc)
		return ctl_failed("clients", rc);
	printf("%10s %6s %6s %12s %14s %14s %9s %9s %6s\n", "UID", "CONNS", "POOLS", "PAGES",
	       "BYTES_IN", "BYTES_OUT", "REFUSALS", "MAX_MB", "WEIGHT");
	for (i = 0; i < n; i++) {
		if (p[i].max_mb)
			snprintf(quota, sizeof(quota), "%llu", (unsigned long long)p[i].max_mb);
		else
			strcpy(quota, "-");
		printf("%10u %6u %6u %12llu %14llu %14llu %9llu %9s %6u\n", p[i].uid,
		       p[i].connections, p[i].pools, (unsigned long long)p[i].pages,
		       (unsigned long long)p[i].bytes_in, (unsigned long long)p[i].bytes_out,
		       (unsigned long long)p[i].refusals, quota, p[i].weight);
	}
	free(p);
	return 0;
}

/* ---- exports ----------------------------------------------------------------- */

static int ctl_exports(ramster *r)
{
	struct ramster_export_info *p = NULL;
	size_t n = 0, i;
	int rc = ramster_exports(r, &p, &n);

	if (rc)
		return ctl_failed("exports", rc);
	if (!n) {
		printf("no exports (none configured)\n");
		free(p);
		return 0;
	}
	printf("%-16s %14s %10s %10s %10s %7s %12s %8s  %s\n", "NAME", "SIZE", "LOCAL", "REMOTE",
	       "BACKING", "CLIENTS", "REQUESTS", "ERRORS", "BACKING_FILE");
	for (i = 0; i < n; i++)
		printf("%-16s %14llu %10llu %10llu %10llu %7llu %12llu %8llu  %s\n", p[i].name,
		       (unsigned long long)p[i].size, (unsigned long long)p[i].pages_local,
		       (unsigned long long)p[i].pages_remote, (unsigned long long)p[i].pages_backing,
		       (unsigned long long)p[i].clients, (unsigned long long)p[i].requests,
		       (unsigned long long)p[i].errors, p[i].backing[0] ? p[i].backing : "-");
	free(p);
	return 0;
}

/* ---- genkey ------------------------------------------------------------------ */

/* ---- ping -------------------------------------------------------------------- */

static int ctl_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* 1000 round trips of one page: to the node, or through it to a peer and back. */
static int ctl_ping(ramster *r, uint32_t node)
{
	static unsigned char out[RAMSTER_PAGE_SIZE], back[RAMSTER_PAGE_SIZE];
	enum { N = 1000 };
	static double us[N];
	struct timespec a, b;
	int i, rc;

	for (i = 0; i < N; i++) {
		out[i % RAMSTER_PAGE_SIZE] = (unsigned char)i;
		clock_gettime(CLOCK_MONOTONIC, &a);
		rc = ramster_ping(r, node, out, back);
		clock_gettime(CLOCK_MONOTONIC, &b);
		if (rc)
			return ctl_failed("ping", rc);
		if (memcmp(out, back, sizeof(out))) {
			fprintf(stderr, "ramsterctl: ping: the page came back changed\n");
			return 1;
		}
		us[i] = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
	}
	qsort(us, N, sizeof(us[0]), ctl_cmp_double);
	printf("ping %s%u: %d round trips of 4 KiB, us: min %.1f p50 %.1f p99 %.1f max %.1f\n",
	       node ? "via the node to node " : "the node", node ? node : 0, N, us[0], us[N / 2],
	       us[N * 99 / 100], us[N - 1]);
	return 0;
}

/* ---- drain ------------------------------------------------------------------- */

static uint64_t ctl_stat(ramster *r, const char *name)
{
	struct ramster_stat *s;
	uint64_t v = UINT64_MAX;
	size_t n, i;

	if (ramster_stats(r, &s, &n))
		return v;
	for (i = 0; i < n; i++)
		if (!strcmp(s[i].name, name))
			v = s[i].value;
	ramster_stats_free(s, n);
	return v;
}

/* NODE of drain/undrain: an id, or a peer's name. @return the id, 0 for none, -1 unknown. */
static long ctl_node_id(ramster *r, const char *arg)
{
	struct ramster_peer_info *p = NULL;
	size_t n = 0, i;
	long id = -1;
	char *end;
	unsigned long v;

	if (!arg)
		return 0;
	v = strtoul(arg, &end, 10);
	if (*arg && !*end)
		return v >= 1 && v <= 64 ? (long)v : -1;
	if (ramster_peers(r, &p, &n))
		return -1;
	for (i = 0; i < n; i++)
		if (!strcmp(p[i].name, arg))
			id = p[i].id;
	free(p);
	return id;
}

/* Drain (or end it); with wait, show this node's progress until it holds no foreign page. */
static int ctl_drain(ramster *r, int on, const char *node_arg, int wait)
{
	uint64_t left, last = UINT64_MAX;
	long node = ctl_node_id(r, node_arg);
	int rc;

	if (node < 0) {
		fprintf(stderr, "ramsterctl: %s: no node '%s' (an id 1..64 or a peer's name)\n",
			on ? "drain" : "undrain", node_arg);
		return EXIT_USAGE;
	}
	rc = ramster_drain(r, (uint32_t)node, on);
	if (rc)
		return ctl_failed(on ? "drain" : "undrain", rc);
	if (!on) {
		printf("undrain: the node takes peers' pages again\n");
		return 0;
	}
	if (node) {
		printf("drain: node %ld is draining; its progress is drain_pages_left in its own "
		       "stats (ramsterctl --socket ITS_SOCKET stats)\n",
		       node);
		return 0;
	}
	for (;;) {
		left = ctl_stat(r, "drain_pages_left");
		if (left == UINT64_MAX) {
			fprintf(stderr, "ramsterctl: drain: lost the node while waiting\n");
			return 1;
		}
		if (left != last || left == 0)
			printf("drain: %llu pages left (%llu handed back, %llu dropped as unwanted, "
			       "%llu tries failed)\n",
			       (unsigned long long)left,
			       (unsigned long long)ctl_stat(r, "drain_returned"),
			       (unsigned long long)ctl_stat(r, "drain_orphans"),
			       (unsigned long long)ctl_stat(r, "drain_failed"));
		fflush(stdout);
		if (!wait || left == 0)
			break;
		last = left;
		usleep(500 * 1000);
	}
	if (left == 0)
		printf("drain: done: the node holds no page for its peers and takes none\n");
	return 0;
}

/* ---- peers ------------------------------------------------------------------- */

static int ctl_peers(ramster *r)
{
	struct ramster_peer_info *p = NULL;
	size_t n = 0, i;
	int rc = ramster_peers(r, &p, &n);

	if (rc)
		return ctl_failed("peers", rc);
	if (!n) {
		printf("no peers (a single node)\n");
		free(p);
		return 0;
	}
	printf("%-4s %-12s %-22s %-10s %-5s %-8s %-16s %-5s %9s %12s %10s %10s %5s %6s\n", "ID",
	       "NAME", "ADDRESS", "STATE", "LINK", "DEVICE", "INCARNATION", "EPOCH", "RTT_US",
	       "DONATE_FREE", "LENT", "BORROWED", "UPS", "DEATHS");
	for (i = 0; i < n; i++)
		printf("%-4u %-12s %-22s %-10s %-5s %-8s %016llx %-5u %9.1f %12llu %10llu %10llu "
		       "%5llu %6llu\n",
		       p[i].id, p[i].name, p[i].address, p[i].state, p[i].transport,
		       p[i].device[0] ? p[i].device : "-",
		       (unsigned long long)p[i].incarnation, p[i].epoch, p[i].rtt_us,
		       (unsigned long long)p[i].donate_free, (unsigned long long)p[i].pages_lent,
		       (unsigned long long)p[i].pages_borrowed, (unsigned long long)p[i].ups,
		       (unsigned long long)p[i].deaths);
	free(p);
	return 0;
}

static int ctl_genkey(void)
{
	unsigned char key[CTL_KEY_BYTES];
	char hex[2 * CTL_KEY_BYTES + 1];

	if (sodium_init() < 0) {
		fprintf(stderr, "ramsterctl: genkey: libsodium failed to initialise\n");
		return 1;
	}
	randombytes_buf(key, sizeof(key));
	sodium_bin2hex(hex, sizeof(hex), key, sizeof(key));
	sodium_memzero(key, sizeof(key));
	printf("%s\n", hex);
	sodium_memzero(hex, sizeof(hex));
	return fflush(stdout) ? 1 : 0;
}

/* ---- main -------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	/* clang-format off */
	static const struct option longopts[] = {
		{ "socket",  required_argument, NULL, 's' },
		{ "help",    no_argument,       NULL, 'h' },
		{ "version", no_argument,       NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	/* clang-format on */
	const char *path = NULL, *cmd;
	int ch, json = 0, drain_wait = 1, rc;
	uint32_t ping_node = 0;
	const char *drain_node = NULL;
	ramster *r;

	while ((ch = getopt_long(argc, argv, "+s:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			path = optarg;
			break;
		case 'h':
			ctl_usage(stdout);
			return 0;
		case 'V':
			printf("ramsterctl %s\n", RAMSTER_VERSION);
			return 0;
		default:
			fputs("Try 'ramsterctl --help'.\n", stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc)
		return ctl_usage_error("no command (status, stats, pools, peers, exports or genkey)",
				       NULL);
	cmd = argv[optind++];
	if (!strcmp(cmd, "stats") && optind < argc && !strcmp(argv[optind], "--json")) {
		json = 1;
		optind++;
	}
	if (!strcmp(cmd, "ping") && optind < argc) {
		char *end;
		unsigned long v = strtoul(argv[optind], &end, 10);

		if (*end || v > 64)
			return ctl_usage_error("ping: NODE is a node id (1..64) or 0", argv[optind]);
		ping_node = (uint32_t)v;
		optind++;
	}
	while ((!strcmp(cmd, "drain") || !strcmp(cmd, "undrain")) && optind < argc) {
		if (!strcmp(cmd, "drain") && !strcmp(argv[optind], "--no-wait"))
			drain_wait = 0;
		else if (!drain_node && argv[optind][0] != '-')
			drain_node = argv[optind];
		else
			break;
		optind++;
	}
	if (optind < argc)
		return ctl_usage_error("unexpected argument", argv[optind]);
	if (!strcmp(cmd, "genkey"))
		return ctl_genkey();
	if (strcmp(cmd, "status") && strcmp(cmd, "stats") && strcmp(cmd, "pools") &&
	    strcmp(cmd, "peers") && strcmp(cmd, "exports") && strcmp(cmd, "ping") &&
	    strcmp(cmd, "drain") && strcmp(cmd, "undrain") && strcmp(cmd, "clients"))
		return ctl_usage_error("unknown command", cmd);

	if (!path) {
		path = getenv("RAMSTER_SOCKET");
		if (!path || !*path)
			path = CTL_DEFAULT_SOCKET;
	}
	if (!*path)
		return ctl_usage_error("--socket: empty path", NULL);
	r = ctl_open(path);
	if (!r)
		return 1;
	if (!strcmp(cmd, "status"))
		rc = ctl_status(r);
	else if (!strcmp(cmd, "stats"))
		rc = ctl_stats(r, json);
	else if (!strcmp(cmd, "peers"))
		rc = ctl_peers(r);
	else if (!strcmp(cmd, "ping"))
		rc = ctl_ping(r, ping_node);
	else if (!strcmp(cmd, "exports"))
		rc = ctl_exports(r);
	else if (!strcmp(cmd, "clients"))
		rc = ctl_clients(r);
	else if (!strcmp(cmd, "drain") || !strcmp(cmd, "undrain"))
		rc = ctl_drain(r, !strcmp(cmd, "drain"), drain_node, drain_wait);
	else
		rc = ctl_pools(r);
	ramster_close(r);
	if (!rc && fflush(stdout)) {
		fprintf(stderr, "ramsterctl: write error: %s\n", strerror(errno));
		rc = 1;
	}
	return rc;
}
