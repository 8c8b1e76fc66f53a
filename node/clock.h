/*
 * clock.h - the node's one monotonic clock, in nanoseconds (CLOCK_MONOTONIC:
 * never jumps with the wall clock). Header-only: it is one system call.
 */
#ifndef RAMSTER_NODE_CLOCK_H
#define RAMSTER_NODE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The same in seconds, for code that keeps ev_tstamp-like doubles (libev's
 * ev_now is the wall clock: a step would move every deadline kept with it). */
static inline double clock_now_s(void)
{
	return (double)clock_now_ns() / 1e9;
}

#endif /* RAMSTER_NODE_CLOCK_H */
