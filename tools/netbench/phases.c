/*
 * phases.c - what ramster-netbench times against the node: the put phase
 * (remotify's throughput while a client keeps putting, sampled from a
 * second connection; then the wait until remotify is idle), filling the
 * tier so that repatriated pages stay remote, and the rounds of timed gets
 * and pings. Every page read back is checked.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/netbench/netbench.h"
#include "tools/pagegen.h"

struct sample {
	double t;
	uint64_t remotified, frames;
};

/* A thread on its own connection reading the node's counters every SAMPLE_MS. */
struct sampler {
	ramster *r;
	pthread_t thread;
	atomic_bool stop;
	struct sample *s;
	size_t n;
};

static void *sampler_main(void *arg)
{
	struct sampler *sp = arg;
	struct snap sn;

	while (!atomic_load(&sp->stop)) {
		double t = now();

		if (snap_read(sp->r, &sn) == 0 && sp->n < SAMPLES_MAX) {
			sp->s[sp->n++] =
			    (struct sample){ t, sn.v[ST_REMOTIFIED], sn.v[ST_FRAMES] };
		}
		sleep_ms(SAMPLE_MS);
	}
	return NULL;
}

/* Where the client's puts were at time t. */
struct put_mark {
	double t;
	uint64_t accepted;
};

/*
 * Wait until remotify is idle: usage below the high watermark, no zombies,
 * tier_remotified unchanged for 10 samples. (Remotify runs from high down to
 * low, so the tier may rest anywhere below high: puts that stop between the
 * two do not restart it.) @return seconds waited (SETTLE_TIMEOUT_S: gave up).
 */
static double settle(ramster *r, struct snap *sn)
{
	double t0 = now();
	uint64_t last = UINT64_MAX;
	unsigned still = 0;

	while (now() - t0 < SETTLE_TIMEOUT_S) {
		if (snap_read(r, sn))
			break;
		if (sn->v[ST_REMOTIFIED] == last && usage_pct(sn) < o.high_pct &&
		    !sn->v[ST_ZOMBIES]) {
			if (++still >= 10)
				return now() - t0;
		} else {
			still = 0;
		}
		last = sn->v[ST_REMOTIFIED];
		sleep_ms(SAMPLE_MS);
	}
	note("remotify did not go idle below %u%% within %.0f s (usage %u%%, %llu remotified)\n",
	     o.high_pct, SETTLE_TIMEOUT_S, usage_pct(sn), (unsigned long long)sn->v[ST_REMOTIFIED]);
	return SETTLE_TIMEOUT_S;
}

/*
 * Put pages [first, first + n) in batches of o.put_batch, marking accepted
 * ones; fill prog (one entry a batch) if given. @return 0 or -errno.
 */
static int put_range(ramster *r, int pool, unsigned rep, uint64_t first, uint64_t n,
		     unsigned char *accepted, struct put_fig *f, struct put_mark *prog)
{
	struct ramster_iov *v = calloc(o.put_batch, sizeof(*v));
	unsigned char *buf = malloc((size_t)o.put_batch * PAGE);
	uint64_t i, done = 0;
	size_t b = 0, k;
	int rc = 0;

	if (!v || !buf) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = first; i < first + n; i += k) {
		size_t cnt = first + n - i < o.put_batch ? (size_t)(first + n - i) : o.put_batch;

		for (k = 0; k < cnt; k++) {
			v[k].oid = oid_of(i + k, rep);
			v[k].index = (uint32_t)((i + k) % OBJ_PAGES);
			v[k].page = buf + k * PAGE;
			page_make(i + k, buf + k * PAGE);
		}
		rc = ramster_putv(r, pool, v, cnt);
		if (rc < 0) {
			note("putv: %s\n", strerror(-rc));
			goto out;
		}
		rc = 0;
		for (k = 0; k < cnt; k++) {
			accepted[i + k] = v[k].result == 0;
			if (v[k].result == 0)
				done++;
			else if (v[k].result == -ENOSPC || v[k].result == -E2BIG)
				f->refused++;
			else
				f->put_errors++;
		}
		if (prog)
			prog[b++] = (struct put_mark){ now(), done };
	}
	f->accepted += done;
out:
	free(v);
	free(buf);
	return rc;
}

/* One put phase on a fresh pool: n pages, sampled; then settle. */
int put_phase(ramster *r, ramster *rs, int pool, unsigned rep, uint64_t n,
	      unsigned char *accepted, struct put_fig *f)
{
	struct sampler sp = { .r = rs };
	struct put_mark *prog = calloc(n / o.put_batch + 2, sizeof(*prog));
	struct snap s0, s1, s2;
	double t0, t1, t_rem = 0, t_full = 0;
	size_t i;
	int rc;

	memset(f, 0, sizeof(*f));
	sp.s = calloc(SAMPLES_MAX, sizeof(*sp.s));
	if (!prog || !sp.s) {
		free(prog);
		free(sp.s);
		return -ENOMEM;
	}
	rc = snap_read(r, &s0);
	if (!rc && pthread_create(&sp.thread, NULL, sampler_main, &sp))
		rc = -EAGAIN;
	if (rc) {
		free(prog);
		free(sp.s);
		return rc;
	}
	t0 = now();
	rc = put_range(r, pool, rep, 0, n, accepted, f, prog);
	t1 = now();
	atomic_store(&sp.stop, true);
	pthread_join(sp.thread, NULL);
	if (!rc)
		rc = snap_read(r, &s1);
	if (rc)
		goto out;
	f->settle_s = settle(r, &s2);
	f->put_s = t1 - t0;
	f->put_pps = (double)f->accepted / f->put_s;
	f->remotified_puts = s1.v[ST_REMOTIFIED] - s0.v[ST_REMOTIFIED];
	f->remotified_total = s2.v[ST_REMOTIFIED] - s0.v[ST_REMOTIFIED];
	f->remotify_phase_pps = (double)f->remotified_puts / f->put_s;
	f->room_waits = s1.v[ST_ROOM_WAITS] - s0.v[ST_ROOM_WAITS];
	f->room_refused = s1.v[ST_ROOM_REFUSED] - s0.v[ST_ROOM_REFUSED];
	f->no_target = s2.v[ST_NO_TARGET] - s0.v[ST_NO_TARGET];
	f->failed = s2.v[ST_FAILED] - s0.v[ST_FAILED];
	f->usage_end = usage_pct(&s1);
	f->usage_settled = usage_pct(&s2);
	/* remotify's active window: from the last sample before it moved a page */
	for (i = 0; i < sp.n && sp.s[i].t <= t1; i++) {
		if (sp.s[i].remotified == s0.v[ST_REMOTIFIED])
			t_rem = sp.s[i].t;
		if (!t_full && s0.v[ST_BUDGET] &&
		    sp.s[i].frames * 100 / s0.v[ST_BUDGET] >= o.high_pct)
			t_full = sp.s[i].t;
	}
	if (f->remotified_puts && t_rem && t1 > t_rem)
		f->remotify_pps = (double)f->remotified_puts / (t1 - t_rem);
	/* the client's put rate once the tier had reached the high watermark */
	if (t_full) {
		size_t nb = (size_t)((n + o.put_batch - 1) / o.put_batch);

		for (i = 0; i < nb && prog[i].t < t_full; i++)
			;
		if (i < nb && t1 > prog[i].t)
			f->full_pps = (double)(f->accepted - prog[i].accepted) / (t1 - prog[i].t);
	}
out:
	free(prog);
	free(sp.s);
	return rc;
}

/*
 * One round of n timed single gets of pages drawn from cand[]. With
 * o.classify_each each get is classed remote or local by the node's
 * tier_repatriated delta (the counters read after every get, outside the
 * clock) and the latencies of the class `want_remote` go to lat; else every
 * latency goes to lat and the round's delta gives only the counts.
 */
int get_round(ramster *r, int pool, unsigned rep, const uint64_t *cand, size_t ncand,
	      unsigned n, bool want_remote, double *lat, size_t *nlat, struct get_fig *g,
	      uint64_t *rng)
{
	unsigned char page[PAGE];
	struct snap before, after;
	unsigned i;
	int rc = snap_read(r, &before);

	*nlat = 0;
	for (i = 0; i < n && !rc; i++) {
		uint64_t idx = cand[pagegen_rng_next(rng) % ncand];
		struct ramster_oid oid = oid_of(idx, rep);
		double t0, us;
		bool remote;

		t0 = now();
		rc = ramster_get(r, pool, &oid, (uint32_t)(idx % OBJ_PAGES), page);
		us = (now() - t0) * 1e6;
		g->gets++;
		if (rc) {
			if (errors < ERRORS_SHOWN)
				note("get of page %llu: %s\n", (unsigned long long)idx,
				     strerror(-rc));
			g->failed++;
			errors++;
			if (rc == -ENOENT || rc == -EIO)
				rc = 0; /* counted; carry on */
		} else if (!page_check(idx, page)) {
			if (errors < ERRORS_SHOWN)
				note("page %llu read back wrong\n", (unsigned long long)idx);
			errors++;
		}
		if (!o.classify_each) {
			lat[(*nlat)++] = us;
			continue;
		}
		if (snap_read(r, &after))
			return -EIO;
		remote = after.v[ST_REPATRIATED] > before.v[ST_REPATRIATED];
		g->brought_home += after.v[ST_BROUGHT_HOME] - before.v[ST_BROUGHT_HOME];
		if (remote)
			g->remote++;
		else
			g->local++;
		if (remote == want_remote)
			lat[(*nlat)++] = us;
		before = after;
	}
	if (!rc && !o.classify_each) {
		uint64_t rem;

		if (snap_read(r, &after))
			return -EIO;
		rem = after.v[ST_REPATRIATED] - before.v[ST_REPATRIATED];
		rem = rem < i ? rem : i;
		g->remote += rem;
		g->local += i - rem;
		g->brought_home += after.v[ST_BROUGHT_HOME] - before.v[ST_BROUGHT_HOME];
	}
	return rc;
}

/*
 * K ramster_ping calls (node 0: the node itself; else through it to that
 * peer), each page checked. @return 0 or -errno.
 */
int ping_round(ramster *r, uint32_t node, double *lat, unsigned k, uint64_t *nlat)
{
	static unsigned char out[PAGE], back[PAGE];
	unsigned i;
	double t0;
	int rc;

	*nlat = 0;
	for (i = 0; i < k; i++) {
		memset(out, (int)(i & 0xff), 64);
		t0 = now();
		rc = ramster_ping(r, node, out, back);
		if (rc)
			return rc;
		lat[(*nlat)++] = (now() - t0) * 1e6;
		if (memcmp(out, back, PAGE))
			errors++;
	}
	return 0;
}

/* Fill the tier with fresh pages to o.fill_pct, so repatriated pages are not brought home. */
int fill_tier(ramster *r, int pool, unsigned rep, uint64_t first, unsigned char *accepted,
	      uint64_t cap, uint64_t *filled)
{
	struct put_fig f = { 0 };
	struct snap sn;
	unsigned batch = o.put_batch;
	uint64_t n = 0;
	int rc = snap_read(r, &sn);

	o.put_batch = 8;
	while (!rc && n + 8 <= cap && sn.v[ST_BUDGET] &&
	       sn.v[ST_FRAMES] * 100 < sn.v[ST_BUDGET] * o.fill_pct) {
		rc = put_range(r, pool, rep, first + n, 8, accepted, &f, NULL);
		n += 8;
		if (!rc)
			rc = snap_read(r, &sn);
	}
	o.put_batch = batch;
	*filled = n;
	return rc;
}
