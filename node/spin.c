/*
 * spin.c - the node's event loop driver, with busy polling (see spin.h).
 *
 * libev does not expose its epoll fd, so the polling is libev's own:
 * ev_run(EVRUN_NOWAIT) polls with a zero timeout and runs what is ready.
 * Whether a pass did work is seen through the loop's invoke-pending hook
 * (set here, so nothing else may set it). libev calls that hook twice in a
 * pass: once before the poll, with every prepare watcher pending (they are
 * pending in every pass, work or not), and once after it, with what the poll
 * and the timers made pending. Only the second counts as work: the first is
 * told by the spin's own prepare watcher being pending in it. (Counting the
 * first too kept the window open for ever once any prepare watcher existed:
 * an idle cluster node spun a core, issue 20.) Check watchers would be
 * pending after every poll in the same way: the node has none, and
 * spin_create's contract says so. Timers are honoured as usual (each pass
 * updates the time).
 */
#include "node/spin.h"

#include <stdbool.h>
#include <stdlib.h>

#include "node/clock.h"

struct spin {
	struct ev_loop *loop;
	ev_prepare prepare; /* pending only in the batch before each poll */
	uint64_t budget_ns; /* the longest window (busy_poll_us) */
	uint64_t window_ns; /* the window now: 0..budget_ns, adapted (spin_run) */
	uint64_t work_ns;   /* when the last pass that did work began its callbacks */
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

static void spin_prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

static void spin_invoke(struct ev_loop *loop)
{
	struct spin *s = ev_userdata(loop);
	uint64_t t0, t1;

	if (!ev_pending_count(loop))
		return;
	/* the batch before the poll holds prepare watchers only: no work */
	t0 = clock_now_ns();
	if (!ev_is_pending(&s->prepare) && !s->worked) {
		s->worked = true;
		s->work_ns = t0;
	}
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
	/* a marker, nothing to do: pending means "this is the prepare batch" */
	ev_prepare_init(&s->prepare, spin_prepare_cb);
	ev_prepare_start(loop, &s->prepare);
	ev_unref(loop); /* the marker keeps no loop running */
	ev_set_userdata(loop, s);
	ev_set_invoke_pending_cb(loop, spin_invoke);
	return s;
}

/*
 * The window adapts as KVM's halt polling does (virt/kvm/kvm_main.c): a wait
 * for work ("block") that ended inside the window changes nothing; one that
 * ended later but within budget_us grows the window (it would have paid);
 * one longer than budget_us shrinks it, to nothing at last. So a loop whose
 * next message comes soon (a busy client, a peer's answer) polls, and one
 * whose next message comes later than the budget (an idle node's heartbeats;
 * a holder between two requests of a chain on a machine with fewer cores
 * than busy processes) sleeps at once, as with busy polling off.
 */
static void spin_grow(struct spin *s)
{
	uint64_t w = s->window_ns ? s->window_ns * 2 : SPIN_WINDOW_START_NS;

	s->window_ns = w < s->budget_ns ? w : s->budget_ns;
	s->st.grows++;
}

static void spin_shrink(struct spin *s)
{
	s->window_ns /= 2;
	if (s->window_ns < SPIN_WINDOW_START_NS)
		s->window_ns = 0;
	s->st.shrinks++;
}

void spin_run(struct spin *s)
{
	if (!s->budget_ns) {
		ev_run(s->loop, 0);
		return;
	}
	while (!s->stopped) {
		uint64_t start = clock_now_ns(), block;

		if (s->window_ns) {
			/* poll: work found ends the window (a hit), else sleep below */
			uint64_t t;

			s->st.polls++;
			for (;;) {
				s->worked = false;
				ev_run(s->loop, EVRUN_NOWAIT);
				t = clock_now_ns();
				if (s->worked || s->stopped || t - start >= s->window_ns)
					break;
			}
			s->st.spun_us += (t - start) / 1000;
			if (s->stopped)
				break;
			if (s->worked) {
				s->st.hits++;
				continue;
			}
		}
		s->worked = false;
		ev_run(s->loop, EVRUN_ONCE); /* sleep until something happens, handle it */
		if (s->stopped || !s->worked)
			continue;
		block = s->work_ns > start ? s->work_ns - start : 0;
		if (block > s->budget_ns) {
			if (s->window_ns)
				spin_shrink(s);
		} else if (s->window_ns < s->budget_ns) {
			spin_grow(s);
		}
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
	ev_ref(s->loop);
	ev_prepare_stop(s->loop, &s->prepare);
	ev_set_invoke_pending_cb(s->loop, ev_invoke_pending);
	ev_set_userdata(s->loop, NULL);
	free(s);
}

void spin_get_stats(const struct spin *s, struct spin_stats *st)
{
	*st = s ? s->st : (struct spin_stats){0};
	if (s)
		st->window_us = s->window_ns / 1000;
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
