/*
 * progress.h - progress of a long operation for the tools (ramsterctl drain,
 * ramster-bench, ramster-drill's re-replication wait): on a terminal one line
 * redrawn in place (a bar when the total is known), at most 10 times a
 * second; elsewhere (a pipe, a file, a test) plain lines, at most one every
 * PROGRESS_PLAIN_S, and always the last. $RAMSTER_PROGRESS = tty, plain or
 * off overrides what isatty() says.
 */
#ifndef RAMSTER_TOOLS_PROGRESS_H
#define RAMSTER_TOOLS_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define PROGRESS_PLAIN_S 2.0

struct progress {
	FILE *f;
	int mode; /* 0 off, 1 plain, 2 tty */
	char what[48];
	uint64_t total; /* 0: unknown */
	double start, last;
	bool drawn;
};

/* Start reporting `what` (total units, 0 if unknown) on f. */
void progress_start(struct progress *p, FILE *f, const char *what, uint64_t total);

/* done units so far, with an optional detail (printf). */
void progress_set(struct progress *p, uint64_t done, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The end: the last figure, then a newline on a terminal. */
void progress_end(struct progress *p, uint64_t done, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* @return true when p draws in place (a terminal). */
bool progress_tty(const struct progress *p);

#endif /* RAMSTER_TOOLS_PROGRESS_H */
