/*
 * spin.c - the node's event loop driver, with busy polling (see spin.h).
 *
 * libev does not expose its epoll fd, so the polling is libev's own:
 * ev_run(EVRUN_NOWAIT) polls with a zero timeout and runs what is ready.
 * Whether a pass did work is seen through the loop's invoke-pending hook
 * (set here, so nothing else may set it): a pass that had pending watchers
 * did work. Timers are honoured as usual (each pass updates the time).
 */
#include "node/spin.h"

#include <stdbool.h>
#include <stdlib.h>

#include "node/clock.h"

struct spin {
	struct ev_loop *loop;
	uint64_t budget_ns;
	bool worked;  /* the last pass invoked a watcher */
	bool stopped; /* spin_break was called */
	struct spin_stats st;
	uint64_t window_start_ns;
	uint64_t window_max_us, prev_window_max_us;
};

/* One batch held the loop for us microseconds, ending at now. */
static void spin_lag(struct spin *s, uint64_t us, uint64_t now)
{
	unsigned b = 0;
	uint64_t edge = 1000;

	s->st.batches++;
	while (b + 1 < SPIN_LAG_BUCKETS && us >= edge) {
		b++;
		edge *= 10;
	}
	s->st.lag_hist[b]++;
	if (us > s->st.lag_max_us)
		s->st.lag_max_us = us;
	if (now - s->window_start_ns >= SPIN_LAG_WINDOW_S * 1000000000ull) {
		s->prev_window_max_us = s->window_max_us;
		s->window_max_us = 0;
		s->window_start_ns = now;
	}
	if (us > s->window_max_us)
		s->window_max_us = us;
}

static void spin_invoke(struct ev_loop *loop)
{
	struct spin *s = ev_userdata(loop);
	uint64_t t0, t1;

	if (!ev_pending_count(loop))
		return;
	s->worked = true;
	t0 = clock_now_ns();
	ev_invoke_pending(loop);
	t1 = clock_now_ns();
	spin_lag(s, (t1 - t0) / 1000, t1);
}

struct spin *spin_create(struct ev_loop *loop, unsigned budget_us)
{
	struct spin *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->loop = loop;
	s->budget_ns = (uint64_t)budget_us * 1000;
	ev_set_userdata(loop, s);
	ev_set_invoke_pending_cb(loop, spin_invoke);
	return s;
}

void spin_run(struct spin *s)
{
	if (!s->budget_ns) {
		ev_run(s->loop, 0);
		return;
	}
	while (!s->stopped) {
		uint64_t t0, t;

		s->worked = false;
		ev_run(s->loop, EVRUN_ONCE); /* sleep until something happens, handle it */
		if (s->stopped || !s->worked)
			continue;
		/* poll for more before sleeping again; work found restarts the budget */
		s->st.polls++;
		t0 = t = clock_now_ns();
		while (!s->stopped) {
			s->worked = false;
			ev_run(s->loop, EVRUN_NOWAIT);
			if (s->worked) {
				s->st.hits++;
				s->st.polls++;
				s->st.spun_us += (clock_now_ns() - t0) / 1000;
				t0 = t = clock_now_ns();
				continue;
			}
			t = clock_now_ns();
			if (t - t0 >= s->budget_ns)
				break;
		}
		s->st.spun_us += (t - t0) / 1000;
	}
}

void spin_break(struct spin *s)
{
	s->stopped = true;
	ev_break(s->loop, EVBREAK_ALL);
}

void spin_destroy(struct spin *s)
{
	if (!s)
		return;
	ev_set_invoke_pending_cb(s->loop, ev_invoke_pending);
	ev_set_userdata(s->loop, NULL);
	free(s);
}

void spin_get_stats(const struct spin *s, struct spin_stats *st)
{
	*st = s ? s->st : (struct spin_stats){0};
	if (s)
		st->lag_recent_max_us = s->window_max_us > s->prev_window_max_us
					    ? s->window_max_us
					    : s->prev_window_max_us;
}

void spin_foreach_lag(const struct spin_stats *st,
		      void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
		      void *arg)
{
	static const char *const names[SPIN_LAG_BUCKETS] = {
	    "loop_lag_lt_1ms",	"loop_lag_lt_10ms", "loop_lag_lt_100ms",
	    "loop_lag_lt_1s",	"loop_lag_lt_10s",  "loop_lag_ge_10s"};
	unsigned i;

	fn(arg, "loop_lag_max_us", st->lag_max_us,
	   "the longest batch of callbacks that held the event loop, microseconds");
	fn(arg, "loop_lag_recent_max_us", st->lag_recent_max_us,
	   "the longest in the last 10 to 20 seconds");
	fn(arg, "loop_batches", st->batches, "batches of callbacks the loop ran");
	for (i = 0; i < SPIN_LAG_BUCKETS; i++)
		fn(arg, names[i], st->lag_hist[i], "batches of callbacks of this length");
}
