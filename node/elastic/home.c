/*
 * home.c - bringing pages home in the background (elastic.h, bring_home):
 * while this node's tier has room (its use below low_watermark by
 * HOME_MARGIN_PCT points) and its host is calm (memory stall under half of
 * pressure_target), each tick reads up to HOME_BATCH of its persistent pages
 * that live on peers; a read of a remote page stores it locally again when
 * the tier has room (zcache's bring-home) and flushes the remote copies. The
 * pages a workload reads come home on their own, first; each tick then takes
 * the other remote pages of the objects read lately (remote_hot_objects: a
 * workload that read one page of an object reads its neighbours next), then
 * walks the rest, paced, so that a borrower whose memory freed up takes its
 * pages back (frontswap's self-shrinking, the other way round).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "common/util.h"
#include "node/clock.h"
#include "node/elastic/elastic.h"
#include "node/elastic/elastic_int.h"
#include "node/log.h"
#include "node/remote/remote.h"
#include "tmem/tmem.h"
#include "tmem/zcache.h"

#define HOME_TICK_MS	1000
#define HOME_BATCH	64   /* pages asked for a tick, at most */
#define HOME_SLOTS	4096 /* object-table slots a tick's scan visits, at most */
#define HOME_MARGIN_PCT 10   /* below low_watermark by this much */
#define REMOTE_HOT_OBJECTS 16 /* objects read lately taken first, a tick */

struct home_page {
	struct tmem_handle h;
	uint64_t pampd;
};

struct home {
	struct ev_loop *loop;
	struct remote *r;
	struct zcache *z;
	ev_timer tick;
	struct psi_source src;
	struct tmem_cursor cursor;
	unsigned low_pct, target;
	struct psi_stall since; /* the last reading's totals and time */
	unsigned inflight;
	struct home_page batch[HOME_BATCH];
	unsigned n;
	uint64_t passes, asked, got, failed, skipped_full, skipped_pressure;
	uint64_t hot_asked; /* of asked, pages of objects read lately */
};

struct home_get {
	struct home *hm;
	unsigned char page[4096];
};

static int collect(void *arg, const struct tmem_handle *h, bool pers, uint64_t pampd)
{
	struct home *hm = arg;

	if (hm->n >= HOME_BATCH)
		return 1;
	if (!pers || !zcache_pampd_is_remote(pampd))
		return 0;
	hm->batch[hm->n++] = (struct home_page){*h, pampd};
	return hm->n == HOME_BATCH;
}

static void home_got(void *arg, int result)
{
	struct home_get *g = arg;
	struct home *hm = g->hm;

	if (result)
		hm->failed++;
	else
		hm->got++;
	hm->inflight--;
	free(g);
}

/* The stall since the last tick, us per s (0 when it cannot be read). */
static double home_stall(struct home *hm)
{
	struct psi_reading rd;

	if (psi_read(&hm->src, &rd))
		return 0;
	return psi_stall_step(&hm->since, &rd, clock_now_ns(), NULL, NULL);
}

static void home_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct home *hm = container_of(w, struct home, tick);
	double stall = home_stall(hm);
	unsigned i;

	if (hm->inflight)
		return; /* the last batch first */
	if (zcache_usage_pct(hm->z) + HOME_MARGIN_PCT >= hm->low_pct) {
		hm->skipped_full++;
		return;
	}
	if (stall > hm->target / 2.0) {
		hm->skipped_pressure++;
		return;
	}
	hm->n = 0;
	/* hot first: the objects whose pages the workload read lately */
	{
		uint32_t pools[REMOTE_HOT_OBJECTS];
		struct tmem_oid oids[REMOTE_HOT_OBJECTS];
		unsigned k, nh = remote_hot_objects(hm->r, pools, oids, REMOTE_HOT_OBJECTS);

		for (k = 0; k < nh && hm->n < HOME_BATCH; k++)
			(void)tmem_scan_object(zcache_tmem(hm->z), pools[k], &oids[k], collect, hm);
		hm->hot_asked += hm->n;
	}
	if (hm->n < HOME_BATCH &&
	    tmem_scan(zcache_tmem(hm->z), &hm->cursor, HOME_SLOTS, collect, hm))
		hm->passes++;
	for (i = 0; i < hm->n; i++) {
		struct home_get *g = malloc(sizeof(*g));

		if (!g)
			break;
		g->hm = hm;
		hm->inflight++;
		hm->asked++;
		/* not destructive: a persistent page read with room comes home */
		remote_get(hm->r, &hm->batch[i].h, true, REMOTE_GET_BACKGROUND, hm->batch[i].pampd,
			   g->page, home_got, g);
	}
}

struct home *home_create(struct ev_loop *loop, struct remote *r, struct zcache *z, unsigned low_pct,
			 const struct config_node *self)
{
	struct home *hm = calloc(1, sizeof(*hm));

	if (!hm)
		return NULL;
	hm->loop = loop;
	hm->r = r;
	hm->z = z;
	hm->low_pct = low_pct;
	hm->target = self->pressure_target ? self->pressure_target : 1000;
	psi_source_init(&hm->src);
	ev_timer_init(&hm->tick, home_tick, HOME_TICK_MS / 1000.0, HOME_TICK_MS / 1000.0);
	ev_timer_start(loop, &hm->tick);
	log_notice("bring_home: pages on peers come home while the tier is under %u%% and the host "
		   "calm",
		   low_pct > HOME_MARGIN_PCT ? low_pct - HOME_MARGIN_PCT : 0);
	return hm;
}

void home_destroy(struct home *hm)
{
	if (!hm)
		return;
	ev_timer_stop(hm->loop, &hm->tick);
	/* gets in flight end with the remote side (remote_destroy cancels them) */
	free(hm);
}

void home_foreach_stat(const struct home *hm,
		       void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
		       void *arg)
{
	if (!hm)
		return;
	fn(arg, "home_asked", hm->asked, "remote pages read to bring them home (bring_home)");
	fn(arg, "home_got", hm->got, "... that were read (stored locally when the tier had room)");
	fn(arg, "home_failed", hm->failed,
	   "... that could not be read (lost, or no holder answered)");
	fn(arg, "home_hot_asked", hm->hot_asked,
	   "of home_asked, pages of objects a workload read lately (taken first)");
	fn(arg, "home_passes", hm->passes, "whole passes over the tier's pages");
	fn(arg, "home_skipped_full", hm->skipped_full, "ticks skipped: the tier had no room");
	fn(arg, "home_skipped_pressure", hm->skipped_pressure,
	   "ticks skipped: the host's memory stall was above half of pressure_target");
}
