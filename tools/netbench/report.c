/*
 * report.c - ramster-netbench's figures and report: each path's series of
 * per-round p50 and p99 (the report gives their medians over the rounds),
 * the put phases' medians, the ratios to the baseline, as text or as one
 * line of JSON whose keys tools/bench-collective.sh reads.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tools/figures.h"
#include "tools/jout.h"
#include "tools/netbench/netbench.h"

void series_add(struct series *s, double *lat, size_t n)
{
	if (!n || s->n >= ROUNDS_MAX)
		return;
	s->p50[s->n] = figures_quantile(lat, n, 0.5);
	s->p99[s->n] = figures_quantile(lat, n, 0.99);
	s->n++;
	s->calls += n;
}

double series_p50(const struct series *s)
{
	double v[ROUNDS_MAX];

	memcpy(v, s->p50, sizeof(v));
	return figures_median(v, s->n);
}

double series_p99(const struct series *s)
{
	double v[ROUNDS_MAX];

	memcpy(v, s->p99, sizeof(v));
	return figures_median(v, s->n);
}

static const char *const path_key[P_N] = { "unix", "tcp", "unixp", "tcpp", "repat", "local", "mc",
					    "ping", "pingp" };

static const char *const path_name[P_N] = {
	"unix 4 KiB round trip",
	"tcp 4 KiB round trip",
	"unix, server process",
	"tcp, server process",
	"ramster get, remote",
	"ramster get, local hit",
	"memcached get",
	"ping the node (4 KiB)",
	"ping via the node to a peer",
};

static double put_median(const struct report *rp, size_t off)
{
	double v[REPS_MAX];
	unsigned i;

	for (i = 0; i < rp->nput; i++)
		v[i] = *(const double *)((const char *)&rp->put[i] + off);
	return figures_median(v, rp->nput);
}

#define PUT_MED(rp, field) put_median(rp, offsetof(struct put_fig, field))

static double ratio_of(double a, double b)
{
	return b > 0 ? a / b : 0;
}

static double frac(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

/* The baseline: p50 (or p99) of the unix plus the tcp round trip, threads or processes. */
static double baseline(const struct report *rp, bool proc, bool p99)
{
	const struct series *u = &rp->s[proc ? P_UNIX_PROC : P_UNIX];
	const struct series *t = &rp->s[proc ? P_TCP_PROC : P_TCP];

	if (!u->n || !t->n)
		return 0;
	return p99 ? series_p99(u) + series_p99(t) : series_p50(u) + series_p50(t);
}

static double p50_of(const struct report *rp, enum path p)
{
	return series_p50(&rp->s[p]);
}

void print_text(const struct report *rp)
{
	double base50 = baseline(rp, false, false);
	double comp = rp->final.v[ST_CBYTES]
			  ? (double)rp->final.v[ST_STORED] * PAGE / (double)rp->final.v[ST_CBYTES]
			  : 0;
	unsigned i;

	printf("ramster-netbench: %llu pages put (4 KiB, text ~%.2fx), batches of %u, %u put "
	       "phases; latency: %u rounds of %u calls, medians of the rounds' p50/p99\n",
	       (unsigned long long)rp->pages, comp, o.put_batch, rp->nput, o.rounds, o.iters);
	printf("%-28s %10s %10s %8s\n", "path", "p50 us", "p99 us", "calls");
	for (i = 0; i < P_N; i++)
		if (rp->s[i].n)
			printf("%-28s %10.1f %10.1f %8llu\n", path_name[i], series_p50(&rp->s[i]),
			       series_p99(&rp->s[i]), (unsigned long long)rp->s[i].calls);
	printf("%-28s %10.1f %10.1f\n", "baseline (unix + tcp)", base50,
	       baseline(rp, false, true));
	if (baseline(rp, true, false) > 0)
		printf("%-28s %10.1f %10.1f\n", "baseline, server processes",
		       baseline(rp, true, false), baseline(rp, true, true));
	printf("repatriate / baseline p50   %.2f  (floor <= 1.5)\n",
	       ratio_of(p50_of(rp, P_REPAT), base50));
	if (rp->s[P_PINGP].n)
		printf("repatriate / ping via the node to a peer p50   %.2f\n",
		       ratio_of(p50_of(rp, P_REPAT), p50_of(rp, P_PINGP)));
	if (baseline(rp, true, false) > 0)
		printf("repatriate / baseline p50, server processes   %.2f\n",
		       ratio_of(p50_of(rp, P_REPAT), baseline(rp, true, false)));
	printf("remote gets: %llu of %llu timed gets were remote (%.1f%%), brought home %llu, "
	       "failed %llu; tier at %u%% while measured\n",
	       (unsigned long long)rp->rg.remote, (unsigned long long)rp->rg.gets,
	       100 * frac(rp->rg.remote, rp->rg.gets), (unsigned long long)rp->rg.brought_home,
	       (unsigned long long)rp->rg.failed, rp->usage_measured);
	printf("remotified while the gets ran: %llu; tier at %u%% after them\n",
	       (unsigned long long)(rp->final.v[ST_REMOTIFIED] - rp->measured.v[ST_REMOTIFIED]),
	       usage_pct(&rp->final));
	printf("local gets: %llu of %llu local (%.1f%%), brought home %llu\n",
	       (unsigned long long)rp->lg.local, (unsigned long long)rp->lg.gets,
	       100 * frac(rp->lg.local, rp->lg.gets), (unsigned long long)rp->lg.brought_home);
	if (rp->mc_ran)
		printf("repatriate / memcached p50  %.2f;  local get / memcached p50  %.2f\n",
		       ratio_of(p50_of(rp, P_REPAT), p50_of(rp, P_MC)),
		       ratio_of(p50_of(rp, P_LOCAL), p50_of(rp, P_MC)));
	printf("put phases (medians of %u): client %.0f puts/s (%.0f once the tier was full), "
	       "remotify %.0f pages/s while active (%.0f over the whole put phase), "
	       "settle %.2f s\n",
	       rp->nput, PUT_MED(rp, put_pps), PUT_MED(rp, full_pps), PUT_MED(rp, remotify_pps),
	       PUT_MED(rp, remotify_phase_pps), PUT_MED(rp, settle_s));
	for (i = 0; i < rp->nput; i++) {
		const struct put_fig *f = &rp->put[i];

		printf("  phase %u: %llu accepted, %llu refused, %.2f s, %llu remotified during "
		       "puts, %llu in all; room waits %llu (refused %llu), no target %llu, failed "
		       "%llu; usage %u%% at end, %u%% settled\n",
		       i + 1, (unsigned long long)f->accepted, (unsigned long long)f->refused,
		       f->put_s, (unsigned long long)f->remotified_puts,
		       (unsigned long long)f->remotified_total, (unsigned long long)f->room_waits,
		       (unsigned long long)f->room_refused, (unsigned long long)f->no_target,
		       (unsigned long long)f->failed, f->usage_end, f->usage_settled);
	}
	if (errors)
		printf("ERRORS: %llu pages read back wrong or missing, or calls failed\n",
		       (unsigned long long)errors);
}

/* The report as one line of JSON (jansson), for tools/bench-collective.sh. */
void print_json(const struct report *rp)
{
	double base50 = baseline(rp, false, false);
	struct jout *j = jout_new();
	unsigned i, k;

	jout_uint(j, rp->pages, "pages");
	jout_uint(j, o.put_batch, "put_batch");
	jout_uint(j, o.rounds, "rounds");
	jout_uint(j, o.iters, "iters");
	for (i = 0; i < P_N; i++)
		if (rp->s[i].n) {
			jout_real(j, series_p50(&rp->s[i]), "%s_p50_us", path_key[i]);
			jout_real(j, series_p99(&rp->s[i]), "%s_p99_us", path_key[i]);
			jout_uint(j, rp->s[i].calls, "%s_calls", path_key[i]);
		}
	jout_real(j, base50, "baseline_p50_us");
	jout_real(j, baseline(rp, false, true), "baseline_p99_us");
	jout_real(j, ratio_of(p50_of(rp, P_REPAT), base50), "ratio_repat_baseline");
	if (rp->s[P_PINGP].n)
		jout_real(j, ratio_of(p50_of(rp, P_REPAT), p50_of(rp, P_PINGP)), "ratio_repat_ping");
	if (baseline(rp, true, false) > 0) {
		jout_real(j, baseline(rp, true, false), "baselinep_p50_us");
		jout_real(j, baseline(rp, true, true), "baselinep_p99_us");
		jout_real(j, ratio_of(p50_of(rp, P_REPAT), baseline(rp, true, false)),
			  "ratio_repat_baselinep");
	}
	jout_uint(j, rp->rg.gets, "repat_gets");
	jout_uint(j, rp->rg.remote, "repat_remote");
	jout_real(j, frac(rp->rg.remote, rp->rg.gets), "repat_remote_frac");
	jout_uint(j, rp->rg.brought_home + rp->lg.brought_home, "brought_home");
	jout_uint(j, rp->rg.failed + rp->lg.failed, "get_failed");
	jout_uint(j, rp->usage_measured, "usage_measured_pct");
	jout_uint(j, rp->lg.gets, "local_gets");
	jout_real(j, frac(rp->lg.local, rp->lg.gets), "local_local_frac");
	if (rp->mc_ran) {
		jout_real(j, ratio_of(p50_of(rp, P_REPAT), p50_of(rp, P_MC)), "ratio_repat_mc");
		jout_real(j, ratio_of(p50_of(rp, P_LOCAL), p50_of(rp, P_MC)), "ratio_local_mc");
		jout_uint(j, rp->mc_misses, "mc_misses");
	}
	jout_round(j, PUT_MED(rp, put_pps), "put_pps");
	jout_round(j, PUT_MED(rp, full_pps), "put_full_pps");
	jout_round(j, PUT_MED(rp, remotify_pps), "remotify_pps");
	jout_round(j, PUT_MED(rp, remotify_phase_pps), "remotify_phase_pps");
	jout_real(j, PUT_MED(rp, settle_s), "settle_s");
	jout_uint(j, rp->put[rp->nput - 1].usage_end, "usage_put_end_pct");
	jout_uint(j, rp->put[rp->nput - 1].usage_settled, "usage_settled_pct");
	jout_uint(j, usage_pct(&rp->final), "usage_after_pct");
	jout_uint(j, rp->final.v[ST_REMOTIFIED] - rp->measured.v[ST_REMOTIFIED],
		  "remotified_during_gets");
	jout_uint(j, rp->put[rp->nput - 1].refused, "put_refused");
	jout_uint(j, rp->put[rp->nput - 1].room_refused, "room_refused");
	jout_uint(j, rp->final.v[ST_REMOTE_PAGES], "remote_pages");
	/* the owner's side of pages with several holders (copies or fragments) */
	jout_uint(j, rp->final.v[ST_REPLICA_RECORDS], "replica_records");
	jout_uint(j, rp->final.v[ST_REPLICA_BYTES], "replica_bytes");
	jout_real(j,
		  rp->final.v[ST_CBYTES] ? (double)rp->final.v[ST_STORED] * PAGE /
					       (double)rp->final.v[ST_CBYTES]
					 : 0,
		  "compression");
	for (k = 0; k < o.npeers; k++) {
		jout_uint(j, rp->peer_foreign[k], "peer%u_foreign_pages", k + 1);
		jout_uint(j, rp->peer_bytes[k], "peer%u_foreign_bytes", k + 1);
		jout_uint(j, rp->peer_ram[k], "peer%u_foreign_ram", k + 1);
		jout_uint(j, rp->peer_used[k], "peer%u_foreign_used", k + 1);
	}
	for (i = 0; i + 1 < rp->nput; i++)
		for (k = 0; k < o.npeers; k++)
			jout_uint(j, rp->leaked[i][k], "peer%u_left_after_destroy%u", k + 1, i + 1);
	jout_uint(j, errors, "errors");
	jout_print(j);
}
