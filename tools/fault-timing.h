/*
 * fault-timing.h - what far-workload and uffd-floor share to time one access
 * the same way: a monotonic clock in ns, the sort for the percentiles, the
 * xorshift64 that picks random pages (the same sequence in both), and the
 * check of their numeric arguments.
 */
#ifndef RAMSTER_FAULT_TIMING_H
#define RAMSTER_FAULT_TIMING_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* an access slower than this is a fault (a resident page takes nanoseconds) */
#define FAULT_NS 2000

#define XORSHIFT_SEED 88172645463325252ull

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* qsort's order of uint64_t */
static inline int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static inline uint64_t xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* s as a whole decimal number in [1, max]. @return 0, or -1 (anything else). */
static inline int count_arg(const char *s, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > max)
		return -1;
	*out = v;
	return 0;
}

#endif /* RAMSTER_FAULT_TIMING_H */
