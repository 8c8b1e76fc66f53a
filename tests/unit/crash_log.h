/*
 * crash_log.h - what a child did before it was killed, for the crash tests
 * (test_zdense_crash, test_crashload): a log in memory shared with the
 * parent, each operation written before it begins and counted in done once
 * it is over, so that after the kill the parent knows every operation that
 * finished and the one that may have been under way.
 */
#ifndef RAMSTER_TESTS_CRASH_LOG_H
#define RAMSTER_TESTS_CRASH_LOG_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

struct crash_log {
	_Atomic uint64_t done; /* operations over */
	struct crash_op {
		uint32_t ref; /* the handle's number + 1: 0 is an op not begun */
		uint32_t v;   /* the version stored; 0: released */
	} op[];
};

/* @return a zeroed log of room for ops, shared with children forked after, or NULL. */
static inline struct crash_log *crash_log_new(size_t ops, size_t *len)
{
	void *m;

	*len = sizeof(struct crash_log) + ops * sizeof(struct crash_op);
	m = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return m == MAP_FAILED ? NULL : m;
}

/* The child: op n (ref 0-based) begins / is over. */
static inline void crash_log_begin(struct crash_log *log, uint64_t n, uint32_t ref, uint32_t v)
{
	log->op[n] = (struct crash_op){ref + 1, v};
}

static inline void crash_log_end(struct crash_log *log, uint64_t n)
{
	atomic_store_explicit(&log->done, n + 1, memory_order_release);
}

/*
 * The parent, after the kill: ver[ref] (nref of them) the version each
 * handle had after the finished operations (0: none); *in_ref the handle of
 * the operation that may have been under way (UINT32_MAX: none), *in_v its
 * version and *in_old the one it would replace. @return the ops finished.
 */
static inline uint64_t crash_log_replay(const struct crash_log *log, uint32_t *ver, size_t nref,
					uint32_t *in_ref, uint32_t *in_v, uint32_t *in_old)
{
	uint64_t done = atomic_load_explicit(&log->done, memory_order_acquire), k;

	memset(ver, 0, nref * sizeof(*ver));
	for (k = 0; k < done; k++)
		ver[log->op[k].ref - 1] = log->op[k].v;
	*in_ref = UINT32_MAX;
	*in_v = *in_old = 0;
	if (log->op[done].ref) {
		*in_ref = log->op[done].ref - 1;
		*in_v = log->op[done].v;
		*in_old = ver[*in_ref];
	}
	return done;
}

#endif /* RAMSTER_TESTS_CRASH_LOG_H */
