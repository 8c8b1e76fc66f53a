/*
 * pagegen.h - deterministic test and benchmark pages: one seed, one page, the
 * same on every run.
 *
 * The integration tests (tests/integration/harness.c), ramster-bench and
 * ramster-netbench all make their pages here. Tests regenerate from the seed
 * what they expect to read back, and the benchmarks compare figures across
 * runs, so what a generator writes for a given seed must never change: a new
 * kind of page is a new function, not a change to an old one.
 *
 * Pages are PAGEGEN_PAGE_SIZE (4096) bytes. Every function is pure (no state
 * but its arguments) and safe to call from several threads at once.
 */
#ifndef RAMSTER_PAGEGEN_H
#define RAMSTER_PAGEGEN_H

#include <stdint.h>

#define PAGEGEN_PAGE_SIZE 4096

/* splitmix64: a well-mixed 64-bit hash of x. */
uint64_t pagegen_mix(uint64_t x);

/*
 * xorshift64*: advance the state *s and return the next value. The state
 * must never be 0 (seed it with pagegen_mix(seed) | 1).
 */
uint64_t pagegen_rng_next(uint64_t *s);

/* A uniform choice below n from the low 32 bits of r, without a division. */
unsigned pagegen_below(uint64_t r, unsigned n);

/* Fill page with zeroes. */
void pagegen_zero(void *page);

/* Fill page with pseudo-random bytes (incompressible) from seed. */
void pagegen_random(void *page, uint64_t seed);

/*
 * Fill page with text-like data from seed: log lines (dates, levels,
 * templated messages with numbers) and prose of real words, about 7:1, which
 * LZO1X-1 compresses about 2.3x. The tests' and ramster-bench's text.
 */
void pagegen_text(void *page, uint64_t seed);

/*
 * Fill page with plainer text from seed: log lines of one format (one date,
 * words and numbers) and lowercase prose without punctuation, padded with
 * spaces to the end; LZO1X-1 gets about 2x. ramster-netbench's text, kept
 * apart from pagegen_text() so that its figures stay comparable.
 */
void pagegen_text_plain(void *page, uint64_t seed);

#endif /* RAMSTER_PAGEGEN_H */
