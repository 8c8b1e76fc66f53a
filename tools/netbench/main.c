/*
 * ramster-netbench - the collective's figures against a running collective:
 * repatriate latency (a get of a page held by a peer) against a baseline
 * measured in the same run (one 4 KiB round trip over a Unix socket plus one
 * over TCP between the nodes' loopback addresses), remotify throughput while
 * a client keeps putting, and the same 4 KiB get against memcached.
 *
 * Latencies come from interleaved rounds of K timed calls each; the report
 * gives the median over rounds of each round's p50 and p99. Every page read
 * back is compared with what was put; a wrong page is an error (exit 1).
 * A report, not a test: no figure is judged here.
 *
 * main.c: the options, the pages and the run's sequence; the parts are in
 * netbench.h.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/netbench/netbench.h"
#include "tools/pagegen.h"

struct opts o = {
	.tcp_client = "127.0.0.1",
	.tcp_server = "127.0.0.2",
	.memcached = "memcached",
	.put_batch = 64,
	.put_reps = 5,
	.rounds = 15,
	.iters = 1000,
	.mc_values = 10000,
	.high_pct = 90,
	.fill_pct = 85,
	.seed = 1,
	.classify_each = true,
	.echo_proc = true,
	.ping_node = 2,
};

uint64_t errors;

/* ---- the clock ----------------------------------------------------------------------- */

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- pages ------------------------------------------------------------------------- */

_Static_assert(PAGE == PAGEGEN_PAGE_SIZE, "pagegen makes the pages");

static unsigned char *contents; /* DISTINCT pages */

static int pages_init(void)
{
	unsigned i;

	contents = malloc((size_t)DISTINCT * PAGE);
	if (!contents)
		return -ENOMEM;
	for (i = 0; i < DISTINCT; i++)
		pagegen_text_plain(contents + (size_t)i * PAGE, o.seed * 0x100000000ull + i);
	return 0;
}

void page_make(uint64_t i, unsigned char *page)
{
	uint64_t stamp = i ^ (o.seed << 48);

	memcpy(page, contents + (size_t)(i % DISTINCT) * PAGE, PAGE);
	memcpy(page, &stamp, sizeof(stamp));
}

bool page_check(uint64_t i, const unsigned char *page)
{
	unsigned char want[PAGE];

	page_make(i, want);
	return !memcmp(want, page, PAGE);
}

struct ramster_oid oid_of(uint64_t i, unsigned rep)
{
	struct ramster_oid oid = { { i / OBJ_PAGES, 0x6e657462656e6368ull, rep } };

	return oid;
}

/* ---- the run ----------------------------------------------------------------------- */

/* A round's p50 of path p (0 if the path was not measured that round). */
static double round_p50(const struct report *rp, enum path p, unsigned round)
{
	return rp->s[p].n > round ? rp->s[p].p50[round] : 0;
}

static int run(const char *dir, struct report *rp)
{
	ramster *r = NULL, *rs = NULL;
	static struct echo echo[P_REPAT]; /* P_UNIX .. P_TCP_PROC */
	struct mc m = { .fd = -1 };
	struct snap sn, base;
	unsigned char *accepted = NULL, page[PAGE];
	uint64_t *rcand = NULL, *lcand = NULL, nr = 0, nl = 0, i, cap,
		 rng = pagegen_mix(o.seed) | 1;
	uint64_t before[PEERS_MAX];
	double *lat = malloc(o.iters * sizeof(double));
	size_t nlat;
	unsigned rep, round, e;
	int pool = -1, rc;

	for (e = 0; e < P_REPAT; e++)
		echo[e].lfd = echo[e].cfd = -1;
	r = ramster_open(o.socket);
	rs = r ? ramster_open(o.socket) : NULL;
	if (!r || !rs) {
		rc = -errno;
		note("connect %s: %s\n", o.socket ? o.socket : "(default socket)", strerror(errno));
		goto out;
	}
	rc = snap_read(r, &base);
	if (rc || !lat)
		goto out;
	if (!base.v[ST_BUDGET]) {
		note("the node reports no tier_budget_frames\n");
		rc = -EPROTO;
		goto out;
	}
	/* 4x the tier: text pages go about two to a frame */
	rp->pages = o.pages ? o.pages : base.v[ST_BUDGET] * 2 * 4;
	cap = base.v[ST_BUDGET] * 2;
	accepted = calloc(rp->pages + cap, 1);
	if (!accepted) {
		rc = -ENOMEM;
		goto out;
	}
	peers_foreign(before);

	/* ---- put phases: remotify throughput; the last one's pool stays for the gets */
	for (rep = 0; rep < o.put_reps; rep++) {
		pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
		if (pool < 0) {
			rc = pool;
			note("pool_new: %s\n", strerror(-rc));
			goto out;
		}
		note("put phase %u: %llu pages\n", rep + 1, (unsigned long long)rp->pages);
		rc = put_phase(r, rs, pool, rep, rp->pages, accepted, &rp->put[rep]);
		if (rc)
			goto out;
		note("  %.2f s, %.0f puts/s, remotify %.0f pages/s; tier %u%% at the end, "
		     "%u%% after %.2f s\n",
		     rp->put[rep].put_s, rp->put[rep].put_pps, rp->put[rep].remotify_pps,
		     rp->put[rep].usage_end, rp->put[rep].usage_settled, rp->put[rep].settle_s);
		rp->nput++;
		if (rep + 1 == o.put_reps)
			break;
		rc = ramster_pool_destroy(r, pool);
		pool = -1;
		if (rc) {
			note("pool_destroy: %s\n", strerror(-rc));
			goto out;
		}
		if (o.npeers) {
			uint64_t want = 0;
			unsigned k;

			for (k = 0; k < o.npeers; k++)
				want += before[k];
			peers_drain(want, rp->leaked[rep]);
			for (k = 0; k < o.npeers; k++)
				rp->leaked[rep][k] = rp->leaked[rep][k] > before[k]
							 ? rp->leaked[rep][k] - before[k]
							 : 0;
		}
	}

	/* ---- the pages to get: the earliest are remote, fresh fillers are local */
	rc = fill_tier(r, pool, rep, rp->pages, accepted, cap, &rp->fill);
	if (!rc)
		rc = snap_read(r, &sn);
	if (rc)
		goto out;
	rp->usage_measured = usage_pct(&sn);
	rp->measured = sn;
	note("tier %u%% full after %llu filler pages; %llu pages remote\n", rp->usage_measured,
	     (unsigned long long)rp->fill, (unsigned long long)sn.v[ST_REMOTE_PAGES]);
	rcand = malloc(rp->pages * sizeof(*rcand));
	lcand = malloc((rp->pages + rp->fill) * sizeof(*lcand));
	if (!rcand || !lcand) {
		rc = -ENOMEM;
		goto out;
	}
	/* remote: the first 90% of what went remote, in put order */
	for (i = 0; i < rp->pages && nr < sn.v[ST_REMOTE_PAGES] * 9 / 10; i++)
		if (accepted[i])
			rcand[nr++] = i;
	/* local: the fillers and the last quarter of what the tier holds */
	for (i = rp->pages + rp->fill; i-- > 0 && nl < rp->fill + sn.v[ST_STORED] / 4;)
		if (accepted[i])
			lcand[nl++] = i;
	rp->remote_cands = nr;
	rp->local_cands = nl;
	if (!nr || !nl) {
		note("no remote (%llu) or local (%llu) pages to get\n", (unsigned long long)nr,
		     (unsigned long long)nl);
		rc = -ENOENT;
		goto out;
	}

	/* ---- the baselines and memcached */
	for (e = 0; e < P_REPAT && !rc; e++)
		if (e < P_UNIX_PROC || o.echo_proc)
			rc = echo_open(&echo[e], e == P_TCP || e == P_TCP_PROC, e >= P_UNIX_PROC,
				       dir);
	if (rc)
		goto out;
	if (o.memcached) {
		rc = mc_start(&m);
		if (rc) {
			note("memcached (%s) would not start: %s; skipped\n", o.memcached,
			     strerror(-rc));
			rc = 0;
		} else {
			for (i = 0; i < o.mc_values && !rc; i++) {
				page_make(i, page);
				rc = mc_set(&m, (unsigned)i, page);
			}
			if (rc) {
				note("memcached set: %s\n", strerror(-rc));
				goto out;
			}
			rp->mc_ran = true;
		}
	}

	/* ---- interleaved rounds: each path K calls a round */
	for (round = 0; round < o.rounds; round++) {
		for (e = 0; e < P_REPAT; e++) {
			if (echo[e].cfd < 0)
				continue;
			rc = echo_round(&echo[e], lat, o.iters, &rng);
			if (rc)
				goto out;
			series_add(&rp->s[e], lat, o.iters);
		}
		rc = ping_round(r, 0, lat, o.iters, &nlat);
		if (rc == 0) {
			series_add(&rp->s[P_PING], lat, nlat);
			rc = ping_round(r, o.ping_node, lat, o.iters, &nlat);
			if (rc == 0)
				series_add(&rp->s[P_PINGP], lat, nlat);
		}
		if (rc) {
			note("ramster_ping: %s (an older ramsterd?): no ping baseline\n", strerror(-rc));
			rc = 0;
		}
		rc = get_round(r, pool, rep, rcand, nr, o.iters, true, lat, &nlat, &rp->rg, &rng);
		if (rc)
			goto out;
		series_add(&rp->s[P_REPAT], lat, nlat);
		rc = get_round(r, pool, rep, lcand, nl, o.iters, false, lat, &nlat, &rp->lg, &rng);
		if (rc)
			goto out;
		series_add(&rp->s[P_LOCAL], lat, nlat);
		if (rp->mc_ran) {
			for (i = 0, nlat = 0; i < o.iters; i++) {
				unsigned key = (unsigned)(pagegen_rng_next(&rng) % o.mc_values);

				rc = mc_get(&m, key, page, &lat[nlat]);
				if (rc == -ENOENT) {
					rp->mc_misses++;
					rc = 0;
					continue;
				}
				if (rc) {
					note("memcached get: %s\n", strerror(-rc));
					goto out;
				}
				if (!page_check(key, page))
					errors++;
				nlat++;
			}
			series_add(&rp->s[P_MC], lat, nlat);
		}
		note("round %u, us p50: unix %.1f, tcp %.1f (processes %.1f, %.1f), repatriate "
		     "%.1f, local %.1f, memcached %.1f\n",
		     round + 1, round_p50(rp, P_UNIX, round), round_p50(rp, P_TCP, round),
		     round_p50(rp, P_UNIX_PROC, round), round_p50(rp, P_TCP_PROC, round),
		     round_p50(rp, P_REPAT, round), round_p50(rp, P_LOCAL, round),
		     round_p50(rp, P_MC, round));
	}
	rc = snap_read(r, &rp->final);
	peers_foreign(rp->peer_foreign);
	peers_holding(rp->peer_bytes, rp->peer_ram, rp->peer_used);
out:
	mc_stop(&m);
	for (e = 0; e < P_REPAT; e++)
		echo_close(&echo[e]);
	if (pool >= 0 && r)
		ramster_pool_destroy(r, pool);
	ramster_close(rs);
	ramster_close(r);
	free(accepted);
	free(rcand);
	free(lcand);
	free(lat);
	return rc;
}

/* ---- main -------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ramster-netbench --socket PATH [--peer-socket PATH]... [--pages N]\n"
		"           [--put-batch B] [--put-reps R] [--rounds R] [--iters K]\n"
		"           [--tcp-client ADDR] [--tcp-server ADDR] [--memcached BIN|none]\n"
		"           [--mc-values N] [--high PCT] [--fill PCT]\n"
		"           [--classify each|round] [--echo thread|both]\n"
		"           [--seed S] [--json]\n"
		"Against a running collective (node behind --socket, with a small tier): puts N\n"
		"pages (default 4x the tier) and measures remotify; then, in interleaved rounds,\n"
		"times 4 KiB round trips over a Unix socket and over TCP (the baseline), gets of\n"
		"remote pages (repatriate) and of local pages, and memcached gets.\n"
		"  --peer-socket  a peer's socket, to read its foreign_pages (repeatable)\n"
		"  --high PCT     the collective's high_watermark (default 90)\n"
		"  --fill PCT     fill the tier to this before the gets (default 85: above the\n"
		"                 80%% a repatriated page is brought home below)\n"
		"  --classify     each: read the node's counters after every get and time only\n"
		"                 the gets that were remote (or local); round: once a round,\n"
		"                 every get timed, the fraction reported (default each)\n"
		"  --echo         the baseline's servers: threads of this process (the\n"
		"                 floor's), or both threads and child processes (default)\n");
}

static bool parse_u64(const char *s, uint64_t *v, uint64_t min, uint64_t max)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || x < min || x > max)
		return false;
	*v = x;
	return true;
}

static bool parse_uint(const char *s, unsigned *v, unsigned min, unsigned max)
{
	uint64_t x;

	if (!parse_u64(s, &x, min, max))
		return false;
	*v = (unsigned)x;
	return true;
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "peer-socket", required_argument, NULL, 'P' },
		{ "pages", required_argument, NULL, 'n' },
		{ "put-batch", required_argument, NULL, 'b' },
		{ "put-reps", required_argument, NULL, 'R' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "iters", required_argument, NULL, 'k' },
		{ "tcp-client", required_argument, NULL, 'c' },
		{ "tcp-server", required_argument, NULL, 'C' },
		{ "memcached", required_argument, NULL, 'm' },
		{ "mc-values", required_argument, NULL, 'v' },
		{ "high", required_argument, NULL, 'H' },
		{ "fill", required_argument, NULL, 'F' },
		{ "seed", required_argument, NULL, 'S' },
		{ "classify", required_argument, NULL, 'x' },
		{ "echo", required_argument, NULL, 'e' },
		{ "ping-node", required_argument, NULL, 'N' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "s:P:n:b:R:r:k:c:C:m:v:H:F:S:x:e:N:jh", opts, NULL)) !=
	       -1) {
		bool ok = true;

		switch (c) {
		case 's':
			o.socket = optarg;
			break;
		case 'P':
			ok = o.npeers < PEERS_MAX;
			if (ok)
				o.peer_socket[o.npeers++] = optarg;
			break;
		case 'n':
			ok = parse_u64(optarg, &o.pages, 1, 1ull << 28);
			break;
		case 'b':
			ok = parse_uint(optarg, &o.put_batch, 1, RAMSTER_BATCH_MAX);
			break;
		case 'R':
			ok = parse_uint(optarg, &o.put_reps, 1, REPS_MAX);
			break;
		case 'r':
			ok = parse_uint(optarg, &o.rounds, 1, ROUNDS_MAX);
			break;
		case 'N':
			ok = parse_uint(optarg, &o.ping_node, 1, 64);
			break;
		case 'k':
			ok = parse_uint(optarg, &o.iters, 10, 10000000);
			break;
		case 'c':
			o.tcp_client = optarg;
			break;
		case 'C':
			o.tcp_server = optarg;
			break;
		case 'm':
			o.memcached = strcmp(optarg, "none") ? optarg : NULL;
			break;
		case 'v':
			ok = parse_uint(optarg, &o.mc_values, 1, 1000000);
			break;
		case 'H':
			ok = parse_uint(optarg, &o.high_pct, 1, 100);
			break;
		case 'F':
			ok = parse_uint(optarg, &o.fill_pct, 0, 100);
			break;
		case 'S':
			ok = parse_u64(optarg, &o.seed, 0, UINT32_MAX);
			break;
		case 'x':
			ok = !strcmp(optarg, "each") || !strcmp(optarg, "round");
			o.classify_each = !strcmp(optarg, "each");
			break;
		case 'e':
			ok = !strcmp(optarg, "thread") || !strcmp(optarg, "both");
			o.echo_proc = !strcmp(optarg, "both");
			break;
		case 'j':
			o.json = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
		if (!ok) {
			fprintf(stderr, "ramster-netbench: bad value '%s'\n", optarg);
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ramster-netbench: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct report rp;
	char dir[] = "/tmp/ramster-netbench.XXXXXX";
	int rc;

	if (parse_args(argc, argv) < 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir)) {
		perror("ramster-netbench: mkdtemp");
		return 1;
	}
	rc = pages_init();
	if (!rc)
		rc = run(dir, &rp);
	rmdir(dir);
	free(contents);
	if (rc) {
		note("failed: %s\n", strerror(-rc));
		return 1;
	}
	if (o.json)
		print_json(&rp);
	else
		print_text(&rp);
	return errors ? 1 : 0;
}
