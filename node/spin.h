/*
 * spin.h - the node's event loop driver, with busy polling.
 *
 * On a machine where waking a sleeping thread costs more than the work of a
 * request (a VM whose idle vCPU halts: tens of microseconds a wake-up), a
 * request/reply exchange pays that cost at every hop. Like the kernel's
 * SO_BUSY_POLL, the loop may poll for a short while before it sleeps: after
 * it has handled events it keeps polling (non-blocking) for a window of up to
 * budget_us; the next request of a busy client, or the reply of a peer it
 * just asked, is then taken without a sleep and a wake-up.
 *
 * The window adapts (spin.c, as KVM's halt polling): it opens when work came
 * soon after the loop went to sleep (within budget_us) and closes, halving,
 * when the loop's waits are longer than budget_us. An idle node, whose loop
 * wakes only for heartbeats, does not poll at all; nor does a loop whose
 * polls would only steal a core from the process it waits for. The cost is
 * bounded: at most one window of CPU for each wait, and a wait longer than
 * budget_us shrinks the next one. budget_us = 0 is plain ev_run. Only the loop
 * thread uses a spin; spin_break may be called from a callback of that loop.
 */
#ifndef RAMSTER_NODE_SPIN_H
#define RAMSTER_NODE_SPIN_H

#include <ev.h>
#include <stdint.h>

#define SPIN_LAG_BUCKETS 6 /* batch lengths: <1 ms, <10 ms, <100 ms, <1 s, <10 s, more */
#define SPIN_WINDOW_START_NS 10000 /* a window that opens opens at 10 us, then doubles */
#define SPIN_LAG_WINDOW_S 10 /* lag_recent_max_us: the worst of this window and the last */

/*
 * Loop lag: how long one batch of callbacks held the loop (nothing else,
 * heartbeats included, could run meanwhile). Measured around every batch.
 */
struct spin_stats {
	uint64_t polls;	  /* polling windows started (after work, when the window is open) */
	uint64_t hits;	  /* ... that found more work before the loop slept */
	uint64_t spun_us; /* microseconds spent polling, in all */
	uint64_t grows, shrinks; /* the window's changes (spin_run) */
	uint64_t window_us;	 /* the window now (0: the loop sleeps at once) */
	uint64_t batches; /* batches of callbacks run */
	uint64_t lag_max_us;	    /* the longest batch since start */
	uint64_t lag_recent_max_us; /* the longest in the last SPIN_LAG_WINDOW_S..2x seconds */
	uint64_t lag_hist[SPIN_LAG_BUCKETS];
};

struct spin;

/*
 * A driver for loop (budget_us 0: no polling). NULL on ENOMEM. Work is what
 * a poll or a timer made pending; prepare watchers are not work. A check
 * watcher on loop would be pending after every poll and so count as work
 * each time: the window would never close. Use none (a prepare does).
 */
struct spin *spin_create(struct ev_loop *loop, unsigned budget_us);

/* Run the loop until spin_break (or, with budget 0, until no watcher is active). */
void spin_run(struct spin *s);

/* Make spin_run return after the current callbacks (and ev_break the loop). */
void spin_break(struct spin *s);

/* Free (NULL is fine); not while spin_run runs. */
void spin_destroy(struct spin *s);

void spin_get_stats(const struct spin *s, struct spin_stats *st);

/* The lag counters of st as named stats (loop_lag_*), for ramsterctl stats. */
void spin_foreach_lag(const struct spin_stats *st,
		      void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
		      void *arg);

#endif /* RAMSTER_NODE_SPIN_H */
