/*
 * drill.h - ramster-drill's parts and what they share (tools/drill/, one
 * file a job): main.c the options and the run's sequence; bed.c the test bed
 * (namespaces, daemons, their config, asking them); workload.c the pages and
 * the client that reads and writes while the fault is in; faults.c the fault
 * and what follows it; report.c the printed and JSON report; verdict.c the
 * floors and PASS/FAIL.
 *
 * Shared state is written by the main thread before the client thread
 * starts, except what the client struct marks atomic. die() and note() may
 * be called from any file; die() exits EXIT_USAGE (cleanup runs at exit).
 */
#ifndef RAMSTER_TOOLS_DRILL_H
#define RAMSTER_TOOLS_DRILL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ramster.h"

#define PAGE	    RAMSTER_PAGE_SIZE
#define NODES_MAX   9 /* an owner and up to 8 holders (ec K+M <= 8) */
#define OBJ_PAGES   256 /* pages an object */
#define BATCH	    64	/* pages a putv while filling */
#define PORT	    7100
#define NS_PREFIX   "rd-" /* every namespace this tool makes starts so */
#define EXIT_FAIL   1
#define EXIT_USAGE  2
#define EXIT_SKIP   77
#define SCRATCH_MAX (1u << 20) /* pages the drill-time writer may add */
#define WRITE_EVERY 8	       /* the drill client: one put per this many ops */
#define REPLICAS_MAX 4
#define POLL_MS	     10	   /* wait_peers: n1's peer table read this often */
#define SCHED_SLACK  40	   /* detection floor: libev timer and scheduler lateness */
#define STAT_POLL_MS 50	   /* replica_below_target read this often */
#define RESTORE_MS   60000 /* at most this long for the replica count to return */
#define DRAIN_MS     120000 /* at most this long for a drain */
#define LAT_FACTOR   3	   /* after-detection get p99 may be this times the steady one */
#define LAT_ALLOW_US 2000  /* ... or this much: a 2-vCPU VM's p99 is noise below it */
#define HOLD_MS	     3000  /* a pause or partition lasts this long (or 2 x dead_after_ms) */
#define STALL_GB     4	   /* stall: GiB one WRITE_ZEROES (NO_HOLE) covers */
#define NBD_PYTHON   "/usr/bin/python3" /* Debian's, with python3-libnbd */
#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
#define LAT_MIN_GETS 200   /* fewer gets after the detection: their p99 is just their max */
#define NOSTAT UINT64_MAX  /* node_stat: no such counter, or the node did not answer */

/* ---- the run: options, what it made (main.c) ------------------------------------ */

enum drill { D_KILL, D_STOP, D_PARTITION, D_RESTART, D_DRAIN, D_KILL_TWO, D_OWNER_STOP,
	     D_OWNER_PARTITION, D_CLOCK, D_STALL, D_RESTART_WARM, D_PRESSURE };
extern const char *const drill_names[]; /* by enum drill, as --drill takes them */

struct opts {
	enum drill drill;
	unsigned nodes, replicas;
	bool nodes_set, replicas_set; /* given on the command line */
	/* --redundancy ecK+M: the pages erasure-coded. replicas is then M + 1 (the
	 * holders a page survives losing, plus one: what the verdicts count in) */
	unsigned ec_k, ec_m;
	bool ec_stripes; /* --ec-layout stripes: K pages coded together */
	unsigned local_mb;
	uint64_t pages;
	unsigned dead_after_ms, heartbeat_ms;
	const char *bin;
	bool keep, json;
	bool lat_report; /* --latency-floor report: print the floor, never fail on it */
	bool det_report; /* --detection-floor report: the same for the detection floor */
};

extern struct opts o; /* the command line, set before anything runs */

/* The peers a persistent page lives on: its copies, or K+M fragments. */
static inline unsigned drill_holders(void)
{
	return o.ec_k ? o.ec_k + o.ec_m : o.replicas;
}

/* What the run created: cleanup undoes exactly this. */
struct drill_run {
	char prefix[32];	     /* "rd-PID-" */
	char dir[64];		     /* /tmp/ramster-drill.XXXXXX */
	char bin[4096];		     /* absolute --bin */
	bool hub, ns[NODES_MAX + 1]; /* namespaces made */
	pid_t pid[NODES_MAX + 1];    /* running ramsterd, 0 none */
	bool dir_made;
	char cg[160];	/* pressure: n2's memory cgroup, "" none */
	pid_t hog;	/* pressure: the hog, 0 none */
	atomic_bool cleaning;
};

extern struct drill_run run;

/* --drill pressure (pressure.c): its own run. @return the exit status. */
int drill_pressure(void);

/* A pause, a partition, a clock step: shorter than orphan_after_ms, nothing may be lost. */
bool drill_pause(void);
/* The owner (n1) is the victim. */
bool drill_owner(void);
/* How long a pause or partition lasts, ms. */
double hold_ms(void);

double now_ms(void); /* CLOCK_MONOTONIC */
void sleep_ms(unsigned ms);
/* Print "ramster-drill: ..." on stderr and exit EXIT_USAGE. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A progress line "drill: ..." on stdout; nothing with --json. */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- the test bed (bed.c) --------------------------------------------------------- */

/*
 * Run a shell command, its output appended to the run's log (or discarded
 * before the directory exists). @return its exit status, -1 if it died.
 */
int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The config of the collective, with the cluster's replicas, in run.dir. */
void write_config(unsigned replicas);
/* The namespaces, the bridge and the veths of o.nodes nodes; dies on failure. */
void net_up(void);
/* Cut (up = false) or restore node's link. @return sh()'s status. */
int net_link(unsigned node, bool up);
/* Start node's ramsterd in its namespace (run.pid[node]). */
void node_start(unsigned node);
/* The last line of a node's log into buf, "" if none. */
void node_last_log(unsigned node, char *buf, size_t len);
/* Start every node; wait for their sockets and for node 1 to see all peers up. */
void collective_up(void);
/* Kill what we started, delete what we made. Idempotent; any thread may call it. */
void cleanup(void);
/* --cleanup: the leftovers of runs that are gone. @return the exit status. */
int cleanup_leftovers(void);

/* A new connection to node, NULL (errno) if none. */
ramster *node_open(unsigned node);
/* A counter of a node; NOSTAT if it cannot be read. */
uint64_t node_stat(unsigned node, const char *name);
/*
 * How many peers of mask node 1 (r1) sees in state (up, connecting, down,
 * unreachable); adds their pages_lent to *lent_out (may be NULL).
 */
unsigned peers_in(ramster *r1, unsigned victims_mask, const char *state, uint64_t *lent_out);
unsigned mask_count(unsigned mask);
/*
 * Poll r1 every POLL_MS until every peer of mask is in state (all = true)
 * or none is (all = false). @return ms since t0, -1 after limit_ms.
 */
double wait_peers(ramster *r1, unsigned mask, const char *state, bool all, double t0,
		  double limit_ms);
/* Wait until node 1's remotify is idle (at most 20 s). */
void remotify_settle(void);
/* Wait until n1 has every page at its replica count (at most 20 s). @return the shortfall. */
uint64_t replicas_settle(void);
/* Is `ramsterctl drain` in this build? */
bool have_drain(void);
/* Start `ramsterctl --socket NODE'S-SOCKET cmd` without waiting. @return its pid, or -1. */
pid_t ctl_start(unsigned node, const char *cmd);

/* ---- the workload (workload.c) ---------------------------------------------------- */

/* Page sets: tag seeds the contents, so no two sets share a page. */
enum { SET_A, SET_B, SET_E, SET_SCRATCH, NSETS };

/* One page set written through node 1. */
struct pset {
	int pool;
	unsigned flags;
	uint64_t n;	       /* handles 0..n-1 */
	unsigned char *ok;     /* 1: the put was accepted */
	unsigned char *missed; /* ephemeral: missing before the fault */
};

extern struct pset sets[NSETS];

/* Outcome counts of reading pages back. */
struct tally {
	uint64_t written, verified, lost, missed, wrong, errors;
	uint64_t missed_before; /* of missed: already absent at the baseline read */
	uint64_t evicted;	/* n1's ephemeral evictions since the baseline: misses too */
};

/* Latencies of one phase, µs. */
struct lat {
	double *v;
	size_t n, cap;
};

/*
 * The client's phases: steady (before the fault), detect (the fault is in,
 * n1 has not yet declared the victim dead: gets of its pages wait), after
 * (n1 knows: with replicas >= 2 gets go to the surviving copies at once).
 */
enum { PH_STEADY, PH_DETECT, PH_AFTER, PH_DONE };

/* The client that keeps reading and writing while the drill runs (its own connection). */
struct client {
	pthread_t th;
	ramster *r;
	atomic_int phase;
	atomic_bool pause_writes, writes_paused;
	struct lat lat[PH_DONE];
	uint64_t get_lost[PH_DONE]; /* gets answered -EIO, by phase */
	/* puts, by phase: a node that cannot place copies makes them wait for
	 * room, which stalls this client's gets too */
	struct lat put_lat[PH_DONE];
	uint64_t put_refused[PH_DONE];
	uint64_t gets, puts, wrong, errors; /* read after join */
	uint64_t scratch_n;		    /* scratch handles used */
};

extern struct client cl;

/* Make set s's pool on r (flags as ramster_pool_new) for n handles; dies on failure. */
void set_init(struct pset *s, ramster *r, unsigned flags, uint64_t n);
/* Put every page of set; @return pages accepted. */
uint64_t set_write(ramster *r, unsigned set);
/* Read back the accepted pages from..n of a set. before: record ephemeral misses as the baseline. */
void set_verify(ramster *r, unsigned set, uint64_t from, uint64_t n, struct tally *t, bool before);
/* The client's loop (pthread): runs until cl.phase is PH_DONE. */
void *client_thread(void *arg);
/* Pause the client's writes and wait until it has none in flight. */
void client_pause_writes(void);
struct result;
/* The client's latency percentiles into res, once it has stopped (sorts them). */
void client_figures(struct result *res);

/* ---- the fault (faults.c) ------------------------------------------------------- */

/* What the drill may lose, by the fault and the replica count. */
enum expect {
	EX_EXACT,      /* replicas = 1: exactly what the victims held for n1 */
	EX_BOUNDED,    /* 1 < replicas <= victims: at most that (copies on two victims) */
	EX_REPLICATED, /* replicas > victims: no persistent page; ephemeral: one copy */
	EX_DRAINED,    /* drain: the victim gave everything away before it died */
	EX_NONE,       /* a pause, partition or clock step shorter than orphan_after_ms */
};

struct result {
	unsigned victims;	/* mask of node ids */
	unsigned nvictims;	/* of the mask */
	unsigned live_after;	/* peers of n1 alive once the fault is over */
	enum expect expect;
	uint64_t expected_lost; /* victims' foreign_pages just before the fault */
	uint64_t lent;		/* node 1's view: pages the victims held for it */
	uint64_t lost_after;	/* of the lost: pages written after the fault began */
	/* from the fault (drain: from the kill that follows it) */
	double detect_ms, dead_ms, rejoin_ms, hold_ms;
	bool rejoined;
	struct tally t;
	/* get latencies, us: steady; detecting (fault to dead); after; the whole drill */
	double st_p50, st_p99, dt_p50, dt_p99, dt_max, af_p50, af_p99, af_max, dr_p50, dr_p99,
	    dr_max;
	uint64_t dt_gets, af_gets, dr_gets, eio_drill;
	double put_p50[PH_DONE], put_p99[PH_DONE], put_max[PH_DONE]; /* us */
	/* the detection floor: dead_after_ms + 2 x heartbeat_ms + slack */
	double floor_ms, floor_seen;
	bool floor_met;
	/* the replica count on n1 (NOSTAT: the daemon has no such counter) */
	bool restored;
	double restore_ms, restore_rejoin_ms; /* from the fault; from the rejoin (-1: before) */
	uint64_t below_at_fault, below_peak, below_end;
	uint64_t rerep0, rlost0, rerep, rlost; /* counters at the fault and at the end */
	uint64_t rfail0, rfail;		       /* replica_repair_failed: why no restore */
	/* drain */
	bool drain_done, drain_cmd_ok;
	int drain_rc;
	double drain_ms;
	uint64_t drain_returned, drain_failed, drain_orphans;
	uint64_t drain_foreign; /* n2's foreign_pages at the kill */
	/* the latency floor */
	bool lat_checked, lat_judged, lat_met; /* judged: enough gets to have a p99 */
	char lat_rule[96]; /* which rule passed */
	/* what the copies cost, read at the fault: n1's remote pages and replica
	 * table, and what every peer holds for it (pages, bytes charged) */
	uint64_t mem_remote, mem_records, mem_table, mem_peer_pages, mem_peer_used;
	uint64_t deaths0, deaths; /* n1's cluster_peer_deaths at the fault and at the end */
	/* restart-warm: n1's cluster_peer_restarts at the fault and at the end; what
	 * n2 held for n1 then, what its image brought back, its restart_warm after */
	uint64_t restarts0, restarts, held_at_fault, kept, warm;
	double clock_h;		  /* clock-step: n1's wall clock offset as it logged n2's stop */
	int stall_rc;		  /* stall: the NBD client's exit status */
	char stall_lag[24];	  /* stall: n1's loop_lag_max_us after it */
};

/*
 * Inject o.drill's fault on res->victims while the client runs, wait for n1
 * (r1: its connection) to see it, end it and wait for the rejoin and the
 * restore as the drill has them; then 2 s more of client traffic. Fills
 * res's times, drain and replica figures.
 */
void fault(struct result *res, ramster *r1);

/* ---- the report (report.c) and the verdict (verdict.c) ---------------------------- */

/* now - then, NOSTAT if either is. */
uint64_t delta(uint64_t now, uint64_t then);
/* A counter as text in buf: "n/a" when the daemon has none. @return buf. */
const char *stat_str(char *buf, size_t len, uint64_t v);
/* Ephemeral misses the fault caused (not absent before, not evicted since). */
uint64_t fault_misses(const struct tally *t);
/* The report: text, or one JSON object with --json. */
void report(const struct result *res, bool pass, const char *why);

/* The detection and latency floors of res, measured against its figures. */
void judge_floors(struct result *res);
/* PASS or FAIL: why gets the reasons (or what passed). @return true for PASS. */
bool judge(const struct result *res, char *why, size_t len);
/* Append one reason to why (len bytes, NUL-terminated), after "; " if it
 * holds one already; cut short when full. */
void add_why(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif /* RAMSTER_TOOLS_DRILL_H */
