/*
 * elastic.c - the elastic donation and tier on the node's loop (elastic.h):
 * a timer every ELASTIC_TICK_MS reads the pressure and the room (psi.c) and
 * asks a controller (controller.c) for each:
 *
 *   - lend (donate_mb = auto): its budget goes to the foreign store, which
 *     gives pages back (remote_give_back) while it holds more;
 *   - tier (local_mb = auto): its budget goes to the local tier
 *     (zcache_set_budget), which makes room as it does when it is full
 *     (remotify, eviction), and the memory of the frames freed goes back to
 *     the kernel (zcache_trim).
 *
 * Both see the same pressure; each sees as the host's room what the other has
 * not promised (its budget above what it holds), so they do not both grow
 * into the same memory.
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
#include "tmem/zcache.h"

struct elastic {
	struct ev_loop *loop;
	struct remote *r; /* lend's; NULL: the donation is fixed */
	struct zcache *z; /* tier's; NULL: local_mb is fixed */
	ev_timer tick;
	struct psi_source src;
	struct elastic_ctl ctl;	 /* lend (donate_mb = auto) */
	struct elastic_ctl tier; /* local_mb = auto */
	struct psi_stall since;	 /* the last reading's totals and time */
	uint64_t stall;		 /* the larger source's stall, summed */
	uint64_t avail, held;	 /* the last tick's (held: the foreign store's) */
	uint64_t tier_held;	 /* the tier's frames in use at the last tick, bytes */
	uint64_t read_errors, big_moves, tier_big_moves, trimmed;
};

/* The budget above what is held (room promised, not taken), bytes. */
static uint64_t headroom(const struct elastic_ctl *c, uint64_t held)
{
	return c->budget > held ? c->budget - held : 0;
}

static const char *tier_move_name(enum elastic_move mv)
{
	switch (mv) {
	case ELASTIC_GROW:
		return "calm: keeping more pages local";
	case ELASTIC_SHRINK:
		return "memory stall above pressure_target: keeping fewer";
	case ELASTIC_RESERVE:
		return "the host's reserve_mb was eaten into: giving frames back";
	case ELASTIC_BOUND:
		return "bounded";
	default:
		return "holding";
	}
}

static const char *move_name(enum elastic_move mv)
{
	switch (mv) {
	case ELASTIC_GROW:
		return "calm: lending more";
	case ELASTIC_SHRINK:
		return "memory stall above pressure_target: lending less";
	case ELASTIC_RESERVE:
		return "the host's reserve_mb was eaten into: giving back";
	case ELASTIC_BOUND:
		return "bounded";
	default:
		return "holding";
	}
}

/* The lend controller's tick: the foreign store's budget, and pages given back above it. */
static void lend_tick(struct elastic *e, uint64_t stall, double dt, uint64_t avail)
{
	struct elastic_sample s;
	uint64_t old = e->ctl.budget;
	enum elastic_move mv;

	e->held = remote_donate_used(e->r);
	s = (struct elastic_sample){stall, avail, e->held, dt};
	mv = elastic_ctl_tick(&e->ctl, &s);
	if (e->ctl.budget != old) {
		uint64_t d = e->ctl.budget > old ? e->ctl.budget - old : old - e->ctl.budget;

		remote_set_donate(e->r, e->ctl.budget);
		if (d >= ELASTIC_LOG_MOVE) {
			e->big_moves++;
			log_notice("elastic: lending %llu MiB (was %llu): %s (stall %.0f us/s, "
				   "available %llu MiB, holding %llu MiB)",
				   (unsigned long long)(e->ctl.budget >> 20),
				   (unsigned long long)(old >> 20), move_name(mv), e->ctl.pressure,
				   (unsigned long long)(avail >> 20),
				   (unsigned long long)(e->held >> 20));
		}
	}
	/* more held than lent: hand the difference back, least active owners first */
	remote_give_back(e->r, e->held > e->ctl.budget ? e->ctl.budget : UINT64_MAX);
}

/* Frames whose memory one tick gives back at most (64 MiB): a bounded hold of the tier's lock. */
#define ELASTIC_TRIM_FRAMES 16384

/* The tier controller's tick: the local tier's budget, and free frames' memory given back. */
static void tier_tick(struct elastic *e, uint64_t stall, double dt, uint64_t avail)
{
	struct elastic_sample s;
	struct zcache_stats zs;
	uint64_t old = e->tier.budget;
	enum elastic_move mv;

	zcache_get_stats(e->z, &zs);
	e->tier_held = zs.frames * 4096;
	s = (struct elastic_sample){stall, avail, e->tier_held, dt};
	mv = elastic_ctl_tick(&e->tier, &s);
	if (e->tier.budget != old) {
		uint64_t d = e->tier.budget > old ? e->tier.budget - old : old - e->tier.budget;

		zcache_set_budget(e->z, e->tier.budget / 4096);
		if (d >= ELASTIC_LOG_MOVE) {
			e->tier_big_moves++;
			log_notice("elastic: local tier %llu MiB (was %llu): %s (stall %.0f us/s, "
				   "available %llu MiB, using %llu MiB)",
				   (unsigned long long)(e->tier.budget >> 20),
				   (unsigned long long)(old >> 20), tier_move_name(mv),
				   e->tier.pressure, (unsigned long long)(avail >> 20),
				   (unsigned long long)(e->tier_held >> 20));
		}
	}
	/* frames freed (remotified, evicted) above the budget: their memory back to the host */
	e->trimmed += zcache_trim(e->z, ELASTIC_TRIM_FRAMES);
}

static void elastic_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct elastic *e = container_of(w, struct elastic, tick);
	struct psi_reading rd;
	uint64_t room, promised, us;
	bool fast = false;
	double dt;

	if (psi_read(&e->src, &rd)) {
		e->read_errors++;
		return;
	}
	psi_stall_step(&e->since, &rd, clock_now_ns(), &us, &dt);
	e->stall += us;
	e->avail = rd.avail < rd.cg_room ? rd.avail : rd.cg_room;
	if (e->r) {
		/* the room the tier promised itself is not the donation's to take */
		promised = e->z ? headroom(&e->tier, e->tier_held) : 0;
		room = e->avail > promised ? e->avail - promised : 0;
		lend_tick(e, e->stall, dt, room);
		fast = e->held > e->ctl.budget;
	}
	if (e->z) {
		promised = e->r ? headroom(&e->ctl, e->held) : 0;
		room = e->avail > promised ? e->avail - promised : 0;
		tier_tick(e, e->stall, dt, room);
		fast = fast || e->tier_held > e->tier.budget;
	}
	/* near the reserve, or giving back: look again sooner (a growing workload
	 * eats the room faster than a second) */
	w->repeat = (e->avail < 2 * (e->r ? e->ctl.k.reserve : e->tier.k.reserve) || fast
			     ? ELASTIC_FAST_MS
			     : ELASTIC_TICK_MS) /
		    1000.0;
	ev_timer_again(loop, w);
}

struct elastic *elastic_create(struct ev_loop *loop, struct remote *r, struct zcache *z,
			       const struct config_node *self, char *err, size_t errlen)
{
	struct elastic_knobs k;
	struct psi_reading rd;
	struct elastic *e = calloc(1, sizeof(*e));

	if (!e) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	psi_source_init(&e->src);
	if (psi_read(&e->src, &rd)) {
		snprintf(err, errlen,
			 "%s = auto needs the kernel's memory pressure (PSI): "
			 "/proc/pressure/memory cannot be read (CONFIG_PSI, psi=1)",
			 r ? "donate_mb" : "local_mb");
		free(e);
		return NULL;
	}
	e->loop = loop;
	e->r = r;
	e->z = z;
	k.reserve = self->reserve_mb ? self->reserve_mb << 20 : rd.total / 16;
	if (!self->reserve_mb && k.reserve < (256ull << 20))
		k.reserve = 256ull << 20;
	k.target = self->pressure_target ? self->pressure_target : 1000;
	if (r) {
		k.min = self->donate_min_mb << 20;
		k.max = self->donate_max_mb ? self->donate_max_mb << 20 : rd.total / 2;
		if (k.min > k.max)
			k.min = k.max;
		elastic_ctl_init(&e->ctl, &k);
		/* a warm restart brought pages back: lend at least what is held (the
		 * first ticks shrink it if the host cannot spare it) */
		e->held = remote_donate_used(r);
		if (e->held > e->ctl.budget)
			e->ctl.budget = e->held < k.max ? e->held : k.max;
		remote_set_donate(r, e->ctl.budget);
		log_notice("elastic: donate_mb = auto: %llu..%llu MiB, keeping %llu MiB for the "
			   "host, pressure_target %u us/s%s%s",
			   (unsigned long long)(k.min >> 20), (unsigned long long)(k.max >> 20),
			   (unsigned long long)(k.reserve >> 20), k.target,
			   e->src.cg[0] ? "; cgroup " : "", e->src.cg);
	}
	if (z) {
		struct zcache_stats zs;

		zcache_get_stats(z, &zs);
		k.max = zcache_capacity_frames(z) * 4096;
		k.min = self->local_min_mb << 20;
		if (k.min > k.max)
			k.min = k.max;
		elastic_ctl_init(&e->tier, &k);
		/* a warm restart's pages stay: at least what is used */
		e->tier_held = zs.frames * 4096;
		if (e->tier_held > e->tier.budget)
			e->tier.budget = e->tier_held < k.max ? e->tier_held : k.max;
		zcache_set_budget(z, e->tier.budget / 4096);
		log_notice("elastic: local_mb = auto: %llu..%llu MiB (now %llu), keeping %llu MiB "
			   "for the host, pressure_target %u us/s",
			   (unsigned long long)(k.min >> 20), (unsigned long long)(k.max >> 20),
			   (unsigned long long)(e->tier.budget >> 20),
			   (unsigned long long)(k.reserve >> 20), k.target);
	}
	ev_timer_init(&e->tick, elastic_tick, 0., ELASTIC_TICK_MS / 1000.0);
	ev_timer_start(loop, &e->tick);
	return e;
}

void elastic_destroy(struct elastic *e)
{
	if (!e)
		return;
	ev_timer_stop(e->loop, &e->tick);
	free(e);
}

void elastic_foreach_stat(const struct elastic *e,
			  void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			  void *arg)
{
	if (!e)
		return;
	if (e->z) {
		fn(arg, "elastic_tier_budget", e->tier.budget, "bytes the local tier may use now "
		   "(local_mb = auto)");
		fn(arg, "elastic_tier_held", e->tier_held,
		   "bytes of frames the tier used at the last tick");
		fn(arg, "elastic_tier_grows", e->tier.grows, "ticks that let the tier keep more");
		fn(arg, "elastic_tier_shrinks", e->tier.shrinks,
		   "ticks that made the tier keep less (stall above the target)");
		fn(arg, "elastic_tier_reserve_shrinks", e->tier.reserve_shrinks,
		   "ticks that shrank the tier at once: the host's reserve was eaten into");
		fn(arg, "elastic_tier_big_moves", e->tier_big_moves,
		   "tier moves of 64 MiB or more (logged)");
		fn(arg, "elastic_tier_trimmed_frames", e->trimmed,
		   "free frames whose memory the ticks gave back to the kernel");
	}
	if (!e->r) {
		fn(arg, "elastic_available", e->avail,
		   "bytes the host could still give at the last tick (MemAvailable, cgroup room)");
		fn(arg, "elastic_pressure_us", (uint64_t)e->tier.pressure,
		   "memory stall at the last tick, us per s (PSI some; host or cgroup, the larger)");
		fn(arg, "elastic_read_errors", e->read_errors,
		   "ticks that could not read PSI or meminfo");
		return;
	}
	fn(arg, "elastic_budget", e->ctl.budget, "bytes lent now (donate_mb = auto)");
	fn(arg, "elastic_held", e->held, "bytes the foreign store used at the last tick");
	fn(arg, "elastic_available", e->avail,
	   "bytes the host could still give at the last tick (MemAvailable, cgroup room)");
	fn(arg, "elastic_reserve", e->ctl.k.reserve, "reserve_mb in bytes");
	fn(arg, "elastic_pressure_us", (uint64_t)e->ctl.pressure,
	   "memory stall at the last tick, us per s (PSI some; host or cgroup, the larger)");
	fn(arg, "elastic_ticks", e->ctl.ticks, "controller ticks");
	fn(arg, "elastic_grows", e->ctl.grows, "ticks that lent more (calm, room left)");
	fn(arg, "elastic_shrinks", e->ctl.shrinks, "ticks that lent less (stall above the target)");
	fn(arg, "elastic_reserve_shrinks", e->ctl.reserve_shrinks,
	   "ticks that gave back at once: the host's reserve was eaten into");
	fn(arg, "elastic_holds", e->ctl.holds, "ticks that left the budget (or only bounded it)");
	fn(arg, "elastic_big_moves", e->big_moves, "moves of 64 MiB or more (logged)");
	fn(arg, "elastic_read_errors", e->read_errors, "ticks that could not read PSI or meminfo");
}
