/*
 * compact.c - stripes made dense again (ec_layout = stripes; docs/erasure.md,
 * "Compaction").
 *
 * A page that dies in a stripe (flushed, overwritten, brought home) leaves
 * its slot's bytes on its holder: the parity needs them until the stripe's
 * last live page goes. A workload that rewrites some pages of every stripe
 * would so keep up to K+M fragments for one live page. This walk finds the
 * live pages of sparse stripes (as many dead pages as live ones, or more)
 * and reads them home: a background, non-destructive get whose page is
 * stored in the tier below the compact limit (just past the high watermark),
 * not only below the home limit (the low one) as other gets' are
 * (ZCACHE_FIN_COMPACT). A tier between its watermarks is the usual state
 * under a workload, and remotify works only once it passes the high one:
 * the pages read home take it there, remotify takes it back down to the low
 * one (older frames first), and the walk goes on.
 * Each page that comes home kills its slot, and a stripe's last live page
 * flushes its K+M fragments (stripe_op_kill). Remotify sends the pages out
 * again in full stripes when the tier next passes its high watermark.
 *
 * Paced: each tick scans COMPACT_SLOTS object-table slots and reads at most
 * COMPACT_BATCH pages, the next batch only once this one is answered; a
 * tier at its high watermark skips the tick (remotify makes room). A
 * node without stripes never arms the timer; one whose stripes hold no dead
 * page looks every COMPACT_IDLE_MS only (an idle node is not woken for it).
 */
#include <errno.h>
#include <stdlib.h>

#include <ev.h>

#include "common/util.h"
#include "node/remote/remote_int.h"
#include "node/remote/stripe.h"
#include "tmem/tmem.h"
#include "tmem/zcache.h"

#define COMPACT_TICK_MS	   200  /* the pace while some stripe holds a dead page */
#define COMPACT_IDLE_MS	   5000 /* the look while none does */
#define COMPACT_SLOTS	   4096 /* object-table slots a tick's scan visits, at most */

struct compact_get {
	struct remote *r;
	uint8_t page[4096];
};

/* Whether a stripe holds as many dead pages as live ones, or more (and one at least). */
static bool stripe_sparse(const struct stripe_rec *rec)
{
	unsigned s, used = 0;

	for (s = 0; s < rec->k; s++)
		used += rec->lens[s] != 0;
	used -= (unsigned)__builtin_popcount(rec->live);
	return used && used >= (unsigned)__builtin_popcount(rec->live);
}

/* tmem_scan's: a bucket lock held (the stripe table's comes after it). */
static int compact_collect(void *arg, const struct tmem_handle *h, bool pers, uint64_t pampd)
{
	struct remote *r = arg;
	struct remote_compact *c = &r->compact;
	struct stripe_rec rec;
	uint64_t id;
	unsigned slot;

	if (c->n >= COMPACT_BATCH)
		return 1;
	if (!pers || !zcache_pampd_stripe(pampd, &id, &slot) || stripe_read(r->stripes, id, &rec) ||
	    !(rec.live >> slot & 1) || !stripe_sparse(&rec))
		return 0;
	c->batch[c->n].h = *h;
	c->batch[c->n].pampd = pampd;
	c->n++;
	return c->n == COMPACT_BATCH;
}

static void compact_got(void *arg, int result)
{
	struct compact_get *g = arg;
	struct remote_compact *c = &g->r->compact;

	if (result)
		c->failed++; /* lost (-EIO: counted by the get) or changed meanwhile */
	else
		c->read++;
	c->inflight--;
	free(g);
}

static void compact_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct remote *r = container_of(w, struct remote, compact.timer);
	struct remote_compact *c = &r->compact;
	struct stripe_stats st;
	unsigned i;

	(void)revents;
	w->repeat = COMPACT_IDLE_MS / 1000.0;
	stripe_stats(r->stripes, &st);
	if (!st.dead_pages)
		goto again;
	w->repeat = COMPACT_TICK_MS / 1000.0;
	if (c->inflight)
		goto again; /* the last batch first */
	if (zcache_usage_pct(r->z) >= r->high) {
		c->skipped_full++; /* no room to take pages home: remotify makes it */
		goto again;
	}
	c->n = 0;
	if (tmem_scan(r->t, &c->cursor, COMPACT_SLOTS, compact_collect, r))
		c->passes++;
	for (i = 0; i < c->n; i++) {
		struct compact_get *g = malloc(sizeof(*g));

		if (!g)
			break;
		g->r = r;
		c->inflight++;
		c->asked++;
		remote_get(r, &c->batch[i].h, true, REMOTE_GET_COMPACT, c->batch[i].pampd, g->page,
			   compact_got, g);
	}
again:
	ev_timer_again(loop, w);
}

void compact_start(struct remote *r)
{
	if (!r->stripes || r->compact.on)
		return;
	r->compact.on = true;
	ev_init(&r->compact.timer, compact_tick);
	r->compact.timer.repeat = COMPACT_TICK_MS / 1000.0;
	ev_timer_again(r->loop, &r->compact.timer);
}

void compact_stop(struct remote *r)
{
	if (!r->compact.on)
		return;
	r->compact.on = false;
	ev_timer_stop(r->loop, &r->compact.timer);
	/* gets in flight end on their own (answered, or cancelled with the collective) */
}
