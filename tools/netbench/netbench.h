/*
 * netbench.h - ramster-netbench's parts and what they share (tools/netbench/):
 * main.c the options, the pages and the run's sequence; counters.c the
 * node's counters; phases.c the put phase, the timed gets and pings;
 * sock.c, echo.c and memcached.c the baselines the gets are held against;
 * report.c the per-round series and the text and JSON report.
 *
 * One thread drives the run; only the put phase's sampler and the echo
 * servers run beside it, each on its own connection or socket. Functions
 * return 0 or -errno unless said otherwise.
 */
#ifndef RAMSTER_TOOLS_NETBENCH_H
#define RAMSTER_TOOLS_NETBENCH_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "ramster.h"

#define PAGE 4096
#define DISTINCT 2048        /* distinct page contents; page i is content i % DISTINCT, stamped */
#define ROUNDS_MAX 101
#define REPS_MAX 21
#define PEERS_MAX 8
#define ECHO_HDR 16          /* the baseline's request header: seq and length */
#define SAMPLE_MS 20         /* the remotify sampler's period */
#define SAMPLES_MAX 50000
#define SETTLE_TIMEOUT_S 30.0
#define OBJ_PAGES 1024

/* ---- options, clock, pages (main.c) ------------------------------------------------ */

struct opts {
	const char *socket;
	const char *peer_socket[PEERS_MAX];
	unsigned npeers;
	const char *tcp_client, *tcp_server; /* the baseline's TCP ends */
	const char *memcached;               /* the binary; NULL: skip */
	uint64_t pages;                      /* put phase; 0: 4x the tier */
	unsigned put_batch, put_reps, rounds, iters, mc_values;
	unsigned high_pct, fill_pct; /* the collective's high watermark; fill before gets */
	uint64_t seed;
	bool classify_each; /* read the counters after every get (else once a round) */
	bool echo_proc;     /* also the baseline with server processes */
	unsigned ping_node; /* the peer the ping baseline goes through */
	bool json;
};

extern struct opts o; /* the command line */

extern uint64_t errors; /* wrong or missing pages, failed calls */
#define ERRORS_SHOWN 10 /* failures described one by one; the rest only counted */

#define note(...) fprintf(stderr, "netbench: " __VA_ARGS__)

double now(void); /* CLOCK_MONOTONIC, seconds */
void sleep_ms(unsigned ms);

/* Page i: content i % DISTINCT with i stamped in its first bytes. */
void page_make(uint64_t i, unsigned char *page);
/* Is page what page_make(i) makes? */
bool page_check(uint64_t i, const unsigned char *page);
/* The handle of page i in put phase rep (its index is i % OBJ_PAGES). */
struct ramster_oid oid_of(uint64_t i, unsigned rep);

/* ---- the node's counters (counters.c) --------------------------------------------- */

enum stat_id {
	ST_FRAMES, ST_BUDGET, ST_ZOMBIES, ST_STORED, ST_CBYTES, ST_REMOTE_PAGES, ST_REMOTIFIED,
	ST_REPATRIATED, ST_BROUGHT_HOME, ST_REMOTE_GETS, ST_PLACED, ST_FAILED, ST_NO_TARGET,
	ST_ROOM_WAITS, ST_ROOM_REFUSED, ST_GET_LOST, ST_REMOTE_LOST, ST_FOREIGN, ST_FLUSH_DROPPED,
	ST_FOREIGN_BYTES, ST_FOREIGN_RAM, ST_FOREIGN_USED, ST_REPLICA_RECORDS, ST_REPLICA_BYTES,
	ST_N
};

/* The counters of one moment, by stat_id. */
struct snap {
	uint64_t v[ST_N];
};

/* Read every counter of stat_id in one round trip (absent ones read 0). */
int snap_read(ramster *r, struct snap *sn);
/* The tier's frames in use, % of its budget. */
unsigned usage_pct(const struct snap *s);
/* foreign_pages of each peer given with --peer-socket (0 if unreachable). */
void peers_foreign(uint64_t *out);
/*
 * foreign_bytes, foreign_ram and foreign_used (the budget's charge) of each peer
 * (0 if unreachable): RAM a held page costs.
 */
void peers_holding(uint64_t *bytes, uint64_t *ram, uint64_t *used);
/* Wait (up to 10 s) until the peers hold at most `want` pages in all; fill out[]. */
void peers_drain(uint64_t want, uint64_t *out);

/* ---- the put phase, the gets and pings (phases.c) ----------------------------------- */

/* What one put phase measured. */
struct put_fig {
	double put_s, put_pps, full_pps, remotify_pps, remotify_phase_pps, settle_s;
	uint64_t accepted, refused, put_errors, remotified_puts, remotified_total;
	uint64_t room_waits, room_refused, no_target, failed;
	unsigned usage_end, usage_settled;
};

/* What the timed gets of one kind saw, all rounds. */
struct get_fig {
	uint64_t gets, remote, local, brought_home, failed;
};

/* One put phase on pool (fresh): n pages through r, sampled on rs; then settle. */
int put_phase(ramster *r, ramster *rs, int pool, unsigned rep, uint64_t n,
	      unsigned char *accepted, struct put_fig *f);
/* Fill the tier with fresh pages from first to o.fill_pct (at most cap); *filled gets how many. */
int fill_tier(ramster *r, int pool, unsigned rep, uint64_t first, unsigned char *accepted,
	      uint64_t cap, uint64_t *filled);
/*
 * One round of n timed gets of pages drawn from cand[0..ncand); the
 * latencies of remote (want_remote) or local gets into lat[0..*nlat).
 */
int get_round(ramster *r, int pool, unsigned rep, const uint64_t *cand, size_t ncand,
	      unsigned n, bool want_remote, double *lat, size_t *nlat, struct get_fig *g,
	      uint64_t *rng);
/* k timed ramster_ping calls to node (0: the node itself) into lat[0..*nlat). */
int ping_round(ramster *r, uint32_t node, double *lat, unsigned k, uint64_t *nlat);

/* ---- the baselines: sockets (sock.c), echo (echo.c), memcached (memcached.c) -------- */

int read_full(int fd, void *buf, size_t len);
int write_full(int fd, const void *buf, size_t len);
void tcp_nodelay(int fd);
/* host:port into sa. @return 0, -EINVAL if host is no IPv4 address. */
int inet_addr_of(const char *host, unsigned port, struct sockaddr_in *sa);

/*
 * A server answers each request (ECHO_HDR bytes + one page) with the page,
 * like a node answering a get; the client times each round trip. The server
 * is a thread of this process, or (--echo process) a child process, as the
 * nodes are.
 */
struct echo {
	const char *name;
	int lfd, cfd;
	bool tcp;
	pthread_t thread;
	bool started;
	pid_t pid;
	char path[108];
	unsigned char out[ECHO_HDR + PAGE], in[PAGE];
};

/* Listen (a Unix socket in dir, or TCP), start the server and connect. */
int echo_open(struct echo *e, bool tcp, bool process, const char *dir);
/* One round of n timed round trips into lat. */
int echo_round(struct echo *e, double *lat, unsigned n, uint64_t *rng);
/* Stop the server and close; e may be half open. */
void echo_close(struct echo *e);

/* memcached: a child on a free loopback port, one text-protocol connection. */
struct mc {
	pid_t pid;
	int fd;
	unsigned port;
};

/* Start o.memcached and connect to it (m stopped on failure; -ENOENT: no binary). */
int mc_start(struct mc *m);
void mc_stop(struct mc *m);
/* set key to page: STORED. */
int mc_set(struct mc *m, unsigned key, const unsigned char *page);
/* get key into page, the round trip's µs in *us. @return 0, -ENOENT (a miss) or -errno. */
int mc_get(struct mc *m, unsigned key, unsigned char *page, double *us);

/* ---- the report (report.c) ------------------------------------------------------------ */

/* One measured path: each round's p50 and p99, in µs. */
struct series {
	double p50[ROUNDS_MAX], p99[ROUNDS_MAX];
	unsigned n;
	uint64_t calls; /* timed calls counted in the figures, all rounds */
};

/* Add a round of n latencies (sorts lat). */
void series_add(struct series *s, double *lat, size_t n);
/* The median over rounds of their p50 (p99). */
double series_p50(const struct series *s);
double series_p99(const struct series *s);

/* The measured paths, in the order of a round. */
enum path { P_UNIX, P_TCP, P_UNIX_PROC, P_TCP_PROC, P_REPAT, P_LOCAL, P_MC, P_PING, P_PINGP, P_N };

struct report {
	struct series s[P_N];
	struct get_fig rg, lg;
	struct put_fig put[REPS_MAX];
	unsigned nput;
	uint64_t pages, fill, remote_cands, local_cands;
	unsigned usage_measured;
	struct snap measured, final; /* before and after the rounds */
	uint64_t peer_foreign[PEERS_MAX];
	uint64_t peer_bytes[PEERS_MAX], peer_ram[PEERS_MAX]; /* the holders' side, at the end */
	uint64_t peer_used[PEERS_MAX];
	uint64_t leaked[REPS_MAX][PEERS_MAX]; /* foreign pages left after a pool destroy */
	bool mc_ran;
	uint64_t mc_misses;
};

void print_text(const struct report *rp);
/* The report as one line of JSON (jansson), for tools/bench-collective.sh. */
void print_json(const struct report *rp);

#endif /* RAMSTER_TOOLS_NETBENCH_H */
