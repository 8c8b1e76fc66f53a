/*
 * harness.h - what the integration tests share: a real ramsterd started with
 * fork/exec on a socket in a private temp dir, stopped with SIGTERM and
 * checked to exit 0; reading a node counter by name; and page generators
 * seeded by the handle, so a test can regenerate what it expects to read.
 *
 * The harness never calls into cmocka: every function returns 0 / -errno (or
 * a bool) and the test asserts. Daemon output goes to DIR/log, printed to
 * stderr when the daemon fails to start or to stop cleanly.
 */
#ifndef RAMSTER_HARNESS_H
#define RAMSTER_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ramster.h"

#define HARNESS_START_TIMEOUT_MS 10000
#define HARNESS_STOP_TIMEOUT_MS 5000
#define HARNESS_ARGS_MAX 16

/* One running daemon. */
struct harness {
	pid_t pid;            /* 0 when not running */
	char dir[64];         /* the private temp dir (mkdtemp) */
	char sock[100];       /* DIR/sock (fits sun_path) */
	char log[128];        /* DIR/log: the daemon's stdout and stderr */
	int exit_status;      /* raw wait status after harness_stop() */
};

/*
 * Start $RAMSTER_BIN/ramsterd (RAMSTER_BIN defaults to build/bin; $RAMSTER_DAEMON,
 * when set, names another daemon binary, e.g. the test-only ramsterd-lie) with
 * --socket DIR/sock, then args (a NULL-terminated list of extra flags, NULL
 * for none; "--log-level warn" is added unless args name a level), and wait
 * until the socket accepts a connection.
 * @return 0, or -errno (-ETIMEDOUT: no socket within 10 s; -ECHILD: the
 * daemon exited during start-up). On failure nothing is left running.
 */
int harness_start(struct harness *h, const char *const *args);

/*
 * SIGTERM the daemon, wait up to 5 s for it (SIGKILL after), remove the temp
 * dir. @return 0 if it exited with status 0 in time; -ETIMEDOUT if it had to
 * be killed; -ECHILD if it had already died; -EIO for another exit status.
 * Safe on a harness that was never started.
 */
int harness_stop(struct harness *h);

/*
 * Kill the daemon with sig (SIGKILL to crash it), reap it and remove its temp
 * dir, as after a crash; harness_start() may then start it again.
 * @return its wait status, or -ECHILD if it was not running.
 */
int harness_kill(struct harness *h, int sig);

/*
 * SIGKILL the daemon (a crash: nothing of it runs again) and start it again
 * with args in the same dir, on the same socket, so that clients reconnect to
 * it. @return 0, -ECHILD (not running, or it died starting), -ETIMEDOUT.
 */
int harness_crash_restart(struct harness *h, const char *const *args);

/* @return true while the daemon process runs (not exited, not a zombie). */
bool harness_alive(struct harness *h);

/* @return a new connection to the daemon, or NULL with errno set. */
ramster *harness_connect(const struct harness *h);

/*
 * Read the node counter called name. @return 0 with *value set; -ENOENT if
 * the node has no such counter; another -errno if the call failed.
 */
int harness_stat(ramster *r, const char *name, uint64_t *value);

/*
 * Read the first of several names (NULL-terminated) the node has, for
 * counters whose exact name the tests do not pin. *found (may be NULL) gets
 * the name used. @return as harness_stat().
 */
int harness_stat_any(ramster *r, const char *const *names, uint64_t *value, const char **found);

/* Print every counter of the node to stderr (for diagnosis). */
void harness_stats_dump(ramster *r);

/* ---- pages: wrappers of tools/pagegen.h --------------------------------- */

/* Fill page with zeroes. */
void harness_page_zero(void *page);

/* Fill page with pseudo-random bytes (incompressible) from seed. */
void harness_page_random(void *page, uint64_t seed);

/*
 * Fill page with text-like data from seed: log lines and prose of real words
 * and decimal numbers, which LZO1X-1 compresses about 2-3x.
 */
void harness_page_text(void *page, uint64_t seed);

/* A handle-derived oid: distinct for distinct (a, b). */
struct ramster_oid harness_oid(uint64_t a, uint64_t b);

/* splitmix64: a well-mixed 64-bit hash of x. */
uint64_t harness_mix(uint64_t x);

/* Milliseconds on the monotonic clock. */
uint64_t harness_now_ms(void);

/* Seconds, as a double, on the monotonic clock. */
double harness_now(void);

#endif /* RAMSTER_HARNESS_H */
