/*
 * elastic_int.h - the parts of node/elastic/ (and the unit tests'): the
 * controller, a pure function of what it is shown (controller.c), and the
 * readers of PSI, /proc/meminfo and the node's cgroup (psi.c).
 */
#ifndef RAMSTER_NODE_ELASTIC_INT_H
#define RAMSTER_NODE_ELASTIC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ELASTIC_TICK_MS	   1000
#define ELASTIC_FAST_MS	   200 /* the tick near the reserve, or while giving back */
#define ELASTIC_STEP_MIN   (8ull << 20)	 /* the smallest move, bytes */
#define ELASTIC_CALM_TICKS 3		 /* ticks well below the target before it grows */
#define ELASTIC_LOG_MOVE   (64ull << 20) /* a move this large goes to the journal */

/* ---- controller.c --------------------------------------------------------------- */

struct elastic_knobs {
	uint64_t min, max; /* bytes lent, at least / at most */
	uint64_t reserve;  /* bytes the host always keeps */
	uint32_t target;   /* memory stall tolerated, us per s */
};

/* What one tick sees. */
struct elastic_sample {
	uint64_t stall_us; /* cumulative memory stall (PSI some total), the larger source's */
	uint64_t avail;	   /* bytes the host could still give (MemAvailable, cgroup room) */
	uint64_t held;	   /* bytes the foreign store uses now */
	double dt_s;	   /* since the last tick */
};

enum elastic_move {
	ELASTIC_HOLD,	 /* no change */
	ELASTIC_GROW,	 /* calm for a while and room left: lend more */
	ELASTIC_SHRINK,	 /* stall above the target: lend less */
	ELASTIC_RESERVE, /* the host's reserve was eaten into: give it back now */
	ELASTIC_BOUND,	 /* clamped to [min, max] or to what the host can spare */
};

struct elastic_ctl {
	struct elastic_knobs k;
	uint64_t budget;     /* bytes lent now */
	uint64_t last_stall; /* the last sample's */
	bool primed;	     /* a sample was seen */
	unsigned calm;	     /* ticks in a row well below the target */
	double pressure;     /* the last tick's stall, us per s */
	uint64_t grows, shrinks, reserve_shrinks, holds, ticks;
};

/* Start at min (what a node lends before it knows anything). */
void elastic_ctl_init(struct elastic_ctl *c, const struct elastic_knobs *k);

/* One tick: the new budget in c->budget. @return what moved it. */
enum elastic_move elastic_ctl_tick(struct elastic_ctl *c, const struct elastic_sample *s);

/* ---- psi.c ---------------------------------------------------------------------- */

/* "some avg10=... total=N" in text (a pressure file): N into *us. @return 0 or -EINVAL. */
int psi_parse_some(const char *text, uint64_t *us);
/* MemAvailable and MemTotal of /proc/meminfo text, bytes. @return 0 or -EINVAL. */
int psi_parse_meminfo(const char *text, uint64_t *avail, uint64_t *total);
/*
 * The path of /proc/self/cgroup text in the hierarchy prefix names ("0::" for
 * cgroup v2's "0::/a/b", ":memory:" for v1's "4:memory:/a/b"), into out.
 * @return 0 or -EINVAL.
 */
int psi_parse_cgroup(const char *text, const char *prefix, char *out, size_t len);

/* Where this process reads its pressure and room from. */
struct psi_source {
	char cg[512]; /* its memory cgroup's directory, "" when at the root or none */
	bool v1;      /* cgroup v1: memory.limit_in_bytes, no memory.pressure */
};
void psi_source_init(struct psi_source *src);
struct psi_reading {
	uint64_t stall_us;     /* the host's memory some total */
	uint64_t cg_stall_us;  /* the node's cgroup's (0: none) */
	uint64_t avail, total; /* MemAvailable, MemTotal, bytes */
	uint64_t cg_room;      /* below the cgroup's memory.max, bytes (UINT64_MAX: no limit) */
};
/* Read them. @return 0, or -errno when the host's PSI or meminfo cannot be read. */
int psi_read(const struct psi_source *src, struct psi_reading *rd);

/* The stall between one reading and the next (a timer's ticks). Zeroed: no reading yet. */
struct psi_stall {
	uint64_t host_last, cg_last; /* the last reading's totals */
	uint64_t last_ns;	     /* when it was taken (clock_now_ns), 0: none */
};
/*
 * Take rd, read at now_ns: the stall since the last reading, host or cgroup,
 * the larger of the two deltas (a total that went back counts 0), in us into
 * *us, and the seconds since into *dt_s (either may be NULL); both 0 for the
 * first reading. @return the stall in us per s, 0 for the first reading.
 */
double psi_stall_step(struct psi_stall *st, const struct psi_reading *rd, uint64_t now_ns,
		      uint64_t *us, double *dt_s);

#endif /* RAMSTER_NODE_ELASTIC_INT_H */
