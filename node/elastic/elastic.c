/*
 * elastic.c - the elastic donation on the node's loop (elastic.h): a timer
 * every ELASTIC_TICK_MS reads the pressure and the room (psi.c), asks the
 * controller (controller.c) and applies its budget to the foreign store,
 * giving pages back (remote_give_back) while the store holds more.
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

struct elastic {
	struct ev_loop *loop;
	struct remote *r;
	ev_timer tick;
	struct psi_source src;
	struct elastic_ctl ctl;
	struct psi_stall since; /* the last reading's totals and time */
	uint64_t stall;		/* the larger source's stall, summed */
	uint64_t avail, held;	/* the last tick's */
	uint64_t read_errors, big_moves;
};

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

static void elastic_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct elastic *e = container_of(w, struct elastic, tick);
	struct elastic_sample s;
	struct psi_reading rd;
	uint64_t old = e->ctl.budget, us;
	enum elastic_move mv;
	double dt;

	if (psi_read(&e->src, &rd)) {
		e->read_errors++;
		return;
	}
	psi_stall_step(&e->since, &rd, clock_now_ns(), &us, &dt);
	e->stall += us;
	e->avail = rd.avail < rd.cg_room ? rd.avail : rd.cg_room;
	e->held = remote_donate_used(e->r);
	s = (struct elastic_sample){e->stall, e->avail, e->held, dt};
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
				   (unsigned long long)(e->avail >> 20),
				   (unsigned long long)(e->held >> 20));
		}
	}
	/* more held than lent: hand the difference back, least active owners first */
	remote_give_back(e->r, e->held > e->ctl.budget ? e->ctl.budget : UINT64_MAX);
	/* near the reserve, or giving back: look again sooner (a growing workload
	 * eats the room faster than a second) */
	w->repeat = (e->avail < 2 * e->ctl.k.reserve || e->held > e->ctl.budget ? ELASTIC_FAST_MS
										: ELASTIC_TICK_MS) /
		    1000.0;
	ev_timer_again(loop, w);
}

struct elastic *elastic_create(struct ev_loop *loop, struct remote *r,
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
			 "donate_mb = auto needs the kernel's memory pressure (PSI): "
			 "/proc/pressure/memory cannot be read (CONFIG_PSI, psi=1)");
		free(e);
		return NULL;
	}
	k.min = self->donate_min_mb << 20;
	k.max = self->donate_max_mb ? self->donate_max_mb << 20 : rd.total / 2;
	k.reserve = self->reserve_mb ? self->reserve_mb << 20 : rd.total / 16;
	if (!self->reserve_mb && k.reserve < (256ull << 20))
		k.reserve = 256ull << 20;
	k.target = self->pressure_target ? self->pressure_target : 1000;
	if (k.min > k.max)
		k.min = k.max;
	elastic_ctl_init(&e->ctl, &k);
	/* a warm restart brought pages back: lend at least what is held (the first
	 * ticks shrink it if the host cannot spare it) */
	e->held = remote_donate_used(r);
	if (e->held > e->ctl.budget)
		e->ctl.budget = e->held < k.max ? e->held : k.max;
	e->loop = loop;
	e->r = r;
	remote_set_donate(r, e->ctl.budget);
	ev_timer_init(&e->tick, elastic_tick, 0., ELASTIC_TICK_MS / 1000.0);
	ev_timer_start(loop, &e->tick);
	log_notice("elastic: donate_mb = auto: %llu..%llu MiB, keeping %llu MiB for the host, "
		   "pressure_target %u us/s%s%s",
		   (unsigned long long)(k.min >> 20), (unsigned long long)(k.max >> 20),
		   (unsigned long long)(k.reserve >> 20), k.target, e->src.cg[0] ? "; cgroup " : "",
		   e->src.cg);
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
