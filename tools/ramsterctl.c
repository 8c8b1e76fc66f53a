/*
 * ramsterctl.c - look at a running node: status, counters, pools; and make
 * a cluster key.
 *
 * Talks to ramsterd through libramster. Output is aligned text for people,
 * or JSON (--json on the listings, made with jansson) for programs. Exit 0 ok, 1 the node could not be
 * reached or answered an error, 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "ramster.h"
#include "tools/progress.h"

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
		"  stats           every counter, one `name value` a line\n"
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
		"  top [--interval S] [--iterations N]\n"
		"                  live rates (puts, gets, remotify, repatriate, per peer),\n"
		"                  redrawn in place on a terminal, key=value lines elsewhere\n"
		"  reload          re-read the cluster file (as SIGHUP does; root or the\n"
		"                  daemon's user): what was applied, what needs a restart\n"
		"  restart         a warm restart (root or the daemon's user): the node\n"
		"                  re-executes keeping its pools, pages and exports; waits\n"
		"                  until it serves again and says what it loaded\n"
		"  clients         per uid: connections, pools, pages here and on peers,\n"
		"                  refusals, quota and weight (root: every uid; else your own)\n"
		"  genkey          print a new cluster key (32 random bytes as 64 hex digits)\n"
		"\n"
		"status, stats, pools, peers and exports take --json: one JSON document\n"
		"(an object for status and stats, an array of objects for the others).\n"
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

/* ---- JSON (jansson) ---------------------------------------------------------- */

/* Print j (stolen) as indented JSON and a newline. @return 0, or 1 (out of memory). */
static int ctl_json_put(json_t *j)
{
	int rc;

	if (!j) {
		fprintf(stderr, "ramsterctl: out of memory\n");
		return 1;
	}
	rc = json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
	json_decref(j);
	if (rc) {
		fprintf(stderr, "ramsterctl: cannot write the JSON\n");
		return 1;
	}
	putchar('\n');
	return 0;
}

/* Set key of o to a new value v (NULL: out of memory, made sticky in *bad). */
static void ctl_json_set(json_t *o, const char *key, json_t *v, int *bad)
{
	if (!o || !v || json_object_set_new(o, key, v))
		*bad = 1;
}

/* ---- status ------------------------------------------------------------------ */

static int ctl_status(ramster *r, int json)
{
	struct ramster_kv *kv;
	size_t n, i, w = 0;
	int rc = ramster_status(r, &kv, &n);

	if (rc)
		return ctl_failed("status", rc);
	if (json) {
		json_t *o = json_object();
		int bad = !o;

		for (i = 0; i < n && !bad; i++)
			ctl_json_set(o, kv[i].key, json_string(kv[i].value), &bad);
		ramster_kv_free(kv, n);
		if (bad) {
			json_decref(o);
			o = NULL;
		}
		return ctl_json_put(o);
	}
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

static int ctl_stats(ramster *r, int json)
{
	struct ramster_stat *s;
	size_t n, i, nw = 0, vw = 0;
	char num[32];
	int rc = ramster_stats(r, &s, &n);

	if (rc)
		return ctl_failed("stats", rc);
	if (json) {
		json_t *o = json_object();
		int bad = !o;

		for (i = 0; i < n && !bad; i++)
			ctl_json_set(o, s[i].name, json_integer((json_int_t)s[i].value), &bad);
		ramster_stats_free(s, n);
		if (bad) {
			json_decref(o);
			o = NULL;
		}
		return ctl_json_put(o);
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

static int ctl_pools_json(struct ramster_pool_info *p, size_t n)
{
	json_t *a = json_array(), *o;
	char uuid[40];
	size_t i;
	int bad = !a;

	for (i = 0; i < n && !bad; i++) {
		o = json_object();
		ctl_json_set(o, "id", json_integer(p[i].id), &bad);
		ctl_json_set(o, "kind",
			     json_string((p[i].flags & RAMSTER_PERSISTENT) ? "persistent"
									   : "ephemeral"),
			     &bad);
		ctl_json_set(o, "sharing",
			     json_string((p[i].flags & RAMSTER_SHARED) ? "shared" : "private"), &bad);
		ctl_json_set(o, "clients", json_integer(p[i].clients), &bad);
		ctl_json_set(o, "objects", json_integer((json_int_t)p[i].objects), &bad);
		ctl_json_set(o, "pages", json_integer((json_int_t)p[i].pages), &bad);
		if (p[i].flags & RAMSTER_SHARED) {
			ctl_uuid(p[i].uuid, uuid);
			ctl_json_set(o, "uuid", json_string(uuid), &bad);
		} else {
			ctl_json_set(o, "uuid", json_null(), &bad);
		}
		if (!o || json_array_append_new(a, o))
			bad = 1;
	}
	free(p);
	if (bad) {
		json_decref(a);
		a = NULL;
	}
	return ctl_json_put(a);
}

static int ctl_pools(ramster *r, int json)
{
	static const char *const head[] = {"ID", "KIND", "SHARING", "CLIENTS", "OBJECTS", "PAGES"};
	struct ramster_pool_info *p;
	size_t n, i;
	int w[6], c, rc = ramster_pools(r, &p, &n);
	char cell[6][32], uuid[40];

	if (rc)
		return ctl_failed("pools", rc);
	if (json)
		return ctl_pools_json(p, n);
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
	printf("%10s %6s %6s %12s %12s %14s %14s %9s %9s %6s\n", "UID", "CONNS", "POOLS", "LOCAL",
	       "REMOTE", "BYTES_IN", "BYTES_OUT", "REFUSALS", "MAX_MB", "WEIGHT");
	for (i = 0; i < n; i++) {
		if (p[i].max_mb)
			snprintf(quota, sizeof(quota), "%llu", (unsigned long long)p[i].max_mb);
		else
			strcpy(quota, "-");
		printf("%10u %6u %6u %12llu %12llu %14llu %14llu %9llu %9s %6u\n", p[i].uid,
		       p[i].connections, p[i].pools,
		       (unsigned long long)(p[i].pages - p[i].pages_remote),
		       (unsigned long long)p[i].pages_remote,
		       (unsigned long long)p[i].bytes_in, (unsigned long long)p[i].bytes_out,
		       (unsigned long long)p[i].refusals, quota, p[i].weight);
	}
	free(p);
	return 0;
}

/* ---- exports ----------------------------------------------------------------- */

static int ctl_exports(ramster *r, int json)
{
	struct ramster_export_info *p = NULL;
	size_t n = 0, i;
	int rc = ramster_exports(r, &p, &n);

	if (rc)
		return ctl_failed("exports", rc);
	if (json) {
		json_t *a = json_array(), *o;
		int bad = !a;

		for (i = 0; i < n && !bad; i++) {
			o = json_object();
			ctl_json_set(o, "name", json_string(p[i].name), &bad);
			ctl_json_set(o, "size", json_integer((json_int_t)p[i].size), &bad);
			ctl_json_set(o, "pages_local", json_integer((json_int_t)p[i].pages_local),
				     &bad);
			ctl_json_set(o, "pages_remote", json_integer((json_int_t)p[i].pages_remote),
				     &bad);
			ctl_json_set(o, "pages_backing",
				     json_integer((json_int_t)p[i].pages_backing), &bad);
			ctl_json_set(o, "clients", json_integer((json_int_t)p[i].clients), &bad);
			ctl_json_set(o, "requests", json_integer((json_int_t)p[i].requests), &bad);
			ctl_json_set(o, "errors", json_integer((json_int_t)p[i].errors), &bad);
			ctl_json_set(o, "backing",
				     p[i].backing[0] ? json_string(p[i].backing) : json_null(), &bad);
			if (!o || json_array_append_new(a, o))
				bad = 1;
		}
		free(p);
		if (bad) {
			json_decref(a);
			a = NULL;
		}
		return ctl_json_put(a);
	}
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

/* A counter of the node; UINT64_MAX if it has none or does not answer. */
static uint64_t ctl_stat(ramster *r, const char *name)
{
	uint64_t v;

	return ramster_stat(r, name, &v) ? UINT64_MAX : v;
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
	uint64_t left, total;
	long node = ctl_node_id(r, node_arg);
	struct progress pg;
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
	/* progress: a bar redrawn in place on a terminal, a plain line every 2 s elsewhere */
	total = ctl_stat(r, "drain_pages_left");
	progress_start(&pg, stdout, "drain", total == UINT64_MAX ? 0 : total);
	for (;;) {
		left = ctl_stat(r, "drain_pages_left");
		if (left == UINT64_MAX) {
			if (pg.drawn && progress_tty(&pg))
				putchar('\n');
			fprintf(stderr, "ramsterctl: drain: lost the node while waiting\n");
			return 1;
		}
		if (left > pg.total)
			pg.total = left; /* pages still arriving when the drain began */
		if (!wait || left == 0) {
			progress_end(&pg, pg.total - left,
				     "pages handed back: %llu left, %llu returned, %llu dropped as "
				     "unwanted, %llu tries failed",
				     (unsigned long long)left,
				     (unsigned long long)ctl_stat(r, "drain_returned"),
				     (unsigned long long)ctl_stat(r, "drain_orphans"),
				     (unsigned long long)ctl_stat(r, "drain_failed"));
			break;
		}
		progress_set(&pg, pg.total - left, "pages handed back: %llu left, %llu returned",
			     (unsigned long long)left,
			     (unsigned long long)ctl_stat(r, "drain_returned"));
		usleep(progress_tty(&pg) ? 100 * 1000 : 250 * 1000);
	}
	if (left == 0)
		printf("drain: done: the node holds no page for its peers and takes none\n");
	return 0;
}

/* ---- top --------------------------------------------------------------------- */

/* The figures top shows, read at one moment. */
struct ctl_top_snap {
	double t;
	uint64_t puts, gets, remotified, repatriated, sent, served, below, stored, frames, budget;
	uint64_t remote_pages, foreign_pages;
	struct ramster_peer_info *peers;
	size_t n_peers;
};

static double ctl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int ctl_top_read(ramster *r, struct ctl_top_snap *s)
{
	static const struct {
		const char *name;
		size_t off;
	} want[] = {
#define W(n, f) {n, offsetof(struct ctl_top_snap, f)}
	    W("tmem_puts", puts),
	    W("tmem_gets", gets),
	    W("tier_remotified", remotified),
	    W("tier_repatriated", repatriated),
	    W("remote_pages_sent", sent),
	    W("remote_served_gets", served),
	    W("replica_below_target", below),
	    W("tier_stored_pages", stored),
	    W("tier_frames", frames),
	    W("tier_budget_frames", budget),
	    W("tier_remote_pages", remote_pages),
	    W("foreign_pages", foreign_pages),
#undef W
	};
	struct ramster_stat *st;
	size_t n, i, k;
	int rc;

	memset(s, 0, sizeof(*s));
	rc = ramster_stats(r, &st, &n);
	if (rc)
		return rc;
	s->t = ctl_now();
	for (i = 0; i < n; i++)
		for (k = 0; k < sizeof(want) / sizeof(want[0]); k++)
			if (!strcmp(st[i].name, want[k].name))
				*(uint64_t *)((char *)s + want[k].off) = st[i].value;
	ramster_stats_free(st, n);
	rc = ramster_peers(r, &s->peers, &s->n_peers);
	if (rc) {
		s->peers = NULL;
		s->n_peers = 0;
	}
	return 0;
}

static double ctl_rate(uint64_t a, uint64_t b, double dt)
{
	return b >= a && dt > 0 ? (double)(b - a) / dt : 0;
}

/* The peer's entry in snapshot s, or NULL. */
static const struct ramster_peer_info *ctl_top_peer(const struct ctl_top_snap *s, uint32_t id)
{
	size_t i;

	for (i = 0; i < s->n_peers; i++)
		if (s->peers[i].id == id)
			return &s->peers[i];
	return NULL;
}

static void ctl_top_show(const struct ctl_top_snap *a, const struct ctl_top_snap *b, bool tty,
			 double elapsed, double interval)
{
	double dt = b->t - a->t;
	size_t i;

	if (tty) {
		/* home and clear: the picture is redrawn in place */
		fputs("\033[H\033[2J", stdout);
		printf("ramsterctl top - every %.1f s - %.0f s - Ctrl-C to quit\n\n", interval,
		       elapsed);
		printf("%12s %12s %12s %12s %12s %12s\n", "PUTS/S", "GETS/S", "REMOTIFY/S",
		       "REPATRIATE/S", "SERVED/S", "TIER_USED");
		printf("%12.0f %12.0f %12.0f %12.0f %12.0f %11.0f%%\n",
		       ctl_rate(a->puts, b->puts, dt), ctl_rate(a->gets, b->gets, dt),
		       ctl_rate(a->remotified, b->remotified, dt),
		       ctl_rate(a->repatriated, b->repatriated, dt),
		       ctl_rate(a->served, b->served, dt),
		       b->budget ? 100.0 * (double)b->frames / (double)b->budget : 0);
		printf("\nstored %llu pages, remote %llu, held for peers %llu, below replica "
		       "target %llu\n",
		       (unsigned long long)b->stored, (unsigned long long)b->remote_pages,
		       (unsigned long long)b->foreign_pages, (unsigned long long)b->below);
		if (b->n_peers)
			printf("\n%-12s %-10s %9s %10s %10s %9s %11s\n", "PEER", "STATE", "RTT_US",
			       "LENT", "BORROWED", "LENT/S", "BORROWED/S");
		for (i = 0; i < b->n_peers; i++) {
			const struct ramster_peer_info *p = &b->peers[i], *q = ctl_top_peer(a, p->id);

			printf("%-12s %-10s %9.1f %10llu %10llu %9.0f %11.0f\n", p->name, p->state,
			       p->rtt_us, (unsigned long long)p->pages_lent,
			       (unsigned long long)p->pages_borrowed,
			       q ? ctl_rate(q->pages_lent, p->pages_lent, dt) : 0,
			       q ? ctl_rate(q->pages_borrowed, p->pages_borrowed, dt) : 0);
		}
	} else {
		/* plain key=value lines, one a refresh and one a peer: for scripts */
		printf("top t=%.1f puts_per_s=%.0f gets_per_s=%.0f remotify_per_s=%.0f "
		       "repatriate_per_s=%.0f served_per_s=%.0f tier_used_pct=%.0f stored=%llu "
		       "remote=%llu foreign=%llu below_target=%llu\n",
		       elapsed, ctl_rate(a->puts, b->puts, dt), ctl_rate(a->gets, b->gets, dt),
		       ctl_rate(a->remotified, b->remotified, dt),
		       ctl_rate(a->repatriated, b->repatriated, dt),
		       ctl_rate(a->served, b->served, dt),
		       b->budget ? 100.0 * (double)b->frames / (double)b->budget : 0,
		       (unsigned long long)b->stored, (unsigned long long)b->remote_pages,
		       (unsigned long long)b->foreign_pages, (unsigned long long)b->below);
		for (i = 0; i < b->n_peers; i++) {
			const struct ramster_peer_info *p = &b->peers[i], *q = ctl_top_peer(a, p->id);

			printf("peer t=%.1f name=%s state=%s rtt_us=%.1f lent=%llu borrowed=%llu "
			       "lent_per_s=%.0f borrowed_per_s=%.0f\n",
			       elapsed, p->name, p->state, p->rtt_us,
			       (unsigned long long)p->pages_lent,
			       (unsigned long long)p->pages_borrowed,
			       q ? ctl_rate(q->pages_lent, p->pages_lent, dt) : 0,
			       q ? ctl_rate(q->pages_borrowed, p->pages_borrowed, dt) : 0);
		}
	}
	fflush(stdout);
}

/* Live rates every interval s, iterations times (0: until interrupted). */
static int ctl_top(ramster *r, double interval, unsigned long iterations)
{
	struct ctl_top_snap a, b;
	bool tty = isatty(STDOUT_FILENO);
	double t0;
	unsigned long i;
	int rc = ctl_top_read(r, &a);

	if (rc)
		return ctl_failed("top", rc);
	t0 = a.t;
	for (i = 0; !iterations || i < iterations; i++) {
		usleep((useconds_t)(interval * 1e6));
		rc = ctl_top_read(r, &b);
		if (rc) {
			free(a.peers);
			return ctl_failed("top", rc);
		}
		ctl_top_show(&a, &b, tty, b.t - t0, interval);
		free(a.peers);
		a = b;
	}
	free(a.peers);
	return 0;
}

/* ---- reload ------------------------------------------------------------------ */

static int ctl_reload(ramster *r)
{
	struct ramster_kv *kv = NULL;
	const char *applied = "", *restart = "", *error = "";
	size_t n = 0, i;
	int rc = ramster_reload(r, &kv, &n);

	if (rc && !n)
		return ctl_failed("reload", rc);
	for (i = 0; i < n; i++) {
		if (!strcmp(kv[i].key, "applied"))
			applied = kv[i].value;
		else if (!strcmp(kv[i].key, "restart"))
			restart = kv[i].value;
		else if (!strcmp(kv[i].key, "error"))
			error = kv[i].value;
	}
	if (rc) {
		fprintf(stderr, "ramsterctl: reload: %s\n", *error ? error : strerror(-rc));
		ramster_kv_free(kv, n);
		return 1;
	}
	printf("reload: applied: %s\n", *applied ? applied : "nothing");
	printf("reload: needs a restart: %s\n", *restart ? restart : "nothing");
	ramster_kv_free(kv, n);
	return 0;
}

/* ---- restart ----------------------------------------------------------------- */

static int ctl_restart(ramster *r, const char *path)
{
	struct ramster_kv *kv = NULL;
	size_t n = 0, i;
	double t0 = ctl_now();
	int rc = ramster_restart(r, &kv, &n);

	if (rc) {
		const char *why = "";

		for (i = 0; i < n; i++)
			if (!strcmp(kv[i].key, "error"))
				why = kv[i].value;
		fprintf(stderr, "ramsterctl: restart: %s\n", *why ? why : strerror(-rc));
		ramster_kv_free(kv, n);
		return 1;
	}
	ramster_kv_free(kv, n);
	printf("restart: the node re-executes, keeping its pages\n");
	fflush(stdout);
	/* the same socket answers again once the new process has loaded the image */
	while (ctl_now() - t0 < 60) {
		ramster *b;
		uint64_t warm = 0, pools = 0, pages = 0, us = 0;

		usleep(50000);
		b = ramster_open(path);
		if (!b)
			continue;
		if (ramster_stat(b, "restart_warm", &warm) == 0 && warm) {
			(void)ramster_stat(b, "restart_pools", &pools);
			(void)ramster_stat(b, "restart_pages", &pages);
			(void)ramster_stat(b, "restart_load_us", &us);
			printf("restart: serving again after %.0f ms, warm: %llu pools, %llu pages "
			       "loaded in %.0f ms\n",
			       (ctl_now() - t0) * 1000.0, (unsigned long long)pools,
			       (unsigned long long)pages, (double)us / 1000.0);
			ramster_close(b);
			return 0;
		}
		ramster_close(b);
	}
	fprintf(stderr, "ramsterctl: restart: the node did not come back warm within 60 s "
			"(see its log)\n");
	return 1;
}

/* ---- peers ------------------------------------------------------------------- */

static int ctl_peers_json(struct ramster_peer_info *p, size_t n)
{
	json_t *a = json_array(), *o;
	char inc[20];
	size_t i;
	int bad = !a;

	for (i = 0; i < n && !bad; i++) {
		o = json_object();
		snprintf(inc, sizeof(inc), "%016llx", (unsigned long long)p[i].incarnation);
		ctl_json_set(o, "id", json_integer(p[i].id), &bad);
		ctl_json_set(o, "name", json_string(p[i].name), &bad);
		ctl_json_set(o, "address", json_string(p[i].address), &bad);
		ctl_json_set(o, "state", json_string(p[i].state), &bad);
		ctl_json_set(o, "transport", json_string(p[i].transport), &bad);
		ctl_json_set(o, "device", json_string(p[i].device[0] ? p[i].device : "-"), &bad);
		ctl_json_set(o, "incarnation", json_string(inc), &bad);
		ctl_json_set(o, "epoch", json_integer(p[i].epoch), &bad);
		ctl_json_set(o, "rtt_us", json_real(p[i].rtt_us), &bad);
		ctl_json_set(o, "donate_free", json_integer((json_int_t)p[i].donate_free), &bad);
		ctl_json_set(o, "donate_total", json_integer((json_int_t)p[i].donate_total), &bad);
		ctl_json_set(o, "pages_lent", json_integer((json_int_t)p[i].pages_lent), &bad);
		ctl_json_set(o, "pages_borrowed", json_integer((json_int_t)p[i].pages_borrowed),
			     &bad);
		ctl_json_set(o, "ups", json_integer((json_int_t)p[i].ups), &bad);
		ctl_json_set(o, "deaths", json_integer((json_int_t)p[i].deaths), &bad);
		if (!o || json_array_append_new(a, o))
			bad = 1;
	}
	free(p);
	if (bad) {
		json_decref(a);
		a = NULL;
	}
	return ctl_json_put(a);
}

static int ctl_peers(ramster *r, int json)
{
	struct ramster_peer_info *p = NULL;
	size_t n = 0, i;
	int rc = ramster_peers(r, &p, &n);

	if (rc)
		return ctl_failed("peers", rc);
	if (json)
		return ctl_peers_json(p, n);
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
	static const char digits[] = "0123456789abcdef";
	unsigned char key[CTL_KEY_BYTES];
	char hex[2 * CTL_KEY_BYTES + 1];
	ssize_t got;
	size_t i;

	/* the kernel's CSPRNG, as libsodium's randombytes_buf uses on Linux: 32
	 * bytes never come back short, and it blocks only until the pool is
	 * initialised at boot */
	do
		got = getrandom(key, sizeof(key), 0);
	while (got < 0 && errno == EINTR);
	if (got != (ssize_t)sizeof(key)) {
		fprintf(stderr, "ramsterctl: genkey: getrandom: %s\n",
			got < 0 ? strerror(errno) : "short read");
		explicit_bzero(key, sizeof(key));
		return 1;
	}
	for (i = 0; i < sizeof(key); i++) {
		hex[2 * i] = digits[key[i] >> 4];
		hex[2 * i + 1] = digits[key[i] & 15];
	}
	hex[2 * sizeof(key)] = '\0';
	explicit_bzero(key, sizeof(key));
	printf("%s\n", hex);
	explicit_bzero(hex, sizeof(hex));
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
	double top_interval = 1.0;
	unsigned long top_iterations = 0;
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
	if ((!strcmp(cmd, "stats") || !strcmp(cmd, "status") || !strcmp(cmd, "pools") ||
	     !strcmp(cmd, "peers") || !strcmp(cmd, "exports")) &&
	    optind < argc && !strcmp(argv[optind], "--json")) {
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
	while (!strcmp(cmd, "top") && optind + 1 < argc) {
		char *end;

		if (!strcmp(argv[optind], "--interval")) {
			top_interval = strtod(argv[optind + 1], &end);
			if (*end || !(top_interval >= 0.05 && top_interval <= 3600))
				return ctl_usage_error("top: --interval is seconds, 0.05..3600",
						       argv[optind + 1]);
		} else if (!strcmp(argv[optind], "--iterations")) {
			top_iterations = strtoul(argv[optind + 1], &end, 10);
			if (*end || argv[optind + 1][0] == '-' || !argv[optind + 1][0])
				return ctl_usage_error("top: --iterations is a count (0: forever)",
						       argv[optind + 1]);
		} else {
			break;
		}
		optind += 2;
	}
	if (optind < argc)
		return ctl_usage_error("unexpected argument", argv[optind]);
	if (!strcmp(cmd, "genkey"))
		return ctl_genkey();
	if (strcmp(cmd, "status") && strcmp(cmd, "stats") && strcmp(cmd, "pools") &&
	    strcmp(cmd, "peers") && strcmp(cmd, "exports") && strcmp(cmd, "ping") &&
	    strcmp(cmd, "drain") && strcmp(cmd, "undrain") && strcmp(cmd, "reload") &&
	    strcmp(cmd, "clients") && strcmp(cmd, "restart") &&
	    strcmp(cmd, "top"))
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
		rc = ctl_status(r, json);
	else if (!strcmp(cmd, "stats"))
		rc = ctl_stats(r, json);
	else if (!strcmp(cmd, "peers"))
		rc = ctl_peers(r, json);
	else if (!strcmp(cmd, "ping"))
		rc = ctl_ping(r, ping_node);
	else if (!strcmp(cmd, "exports"))
		rc = ctl_exports(r, json);
	else if (!strcmp(cmd, "reload"))
		rc = ctl_reload(r);
	else if (!strcmp(cmd, "clients"))
		rc = ctl_clients(r);
	else if (!strcmp(cmd, "restart"))
		rc = ctl_restart(r, path);
	else if (!strcmp(cmd, "top"))
		rc = ctl_top(r, top_interval, top_iterations);
	else if (!strcmp(cmd, "drain") || !strcmp(cmd, "undrain"))
		rc = ctl_drain(r, !strcmp(cmd, "drain"), drain_node, drain_wait);
	else
		rc = ctl_pools(r, json);
	ramster_close(r);
	if (!rc && fflush(stdout)) {
		fprintf(stderr, "ramsterctl: write error: %s\n", strerror(errno));
		rc = 1;
	}
	return rc;
}
