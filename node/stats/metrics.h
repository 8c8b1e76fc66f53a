/*
 * metrics.h - the node's Prometheus endpoint: `metrics_listen = HOST:PORT`
 * in the node's section serves GET /metrics in the text exposition format
 * (version 0.0.4) through libmicrohttpd.
 *
 * Threads: libmicrohttpd answers on a thread of its own; every figure it
 * shows belongs to the event loop. The handler never reads them: it asks the
 * loop for a fresh rendering (ev_async) and waits at most METRICS_WAIT_MS on
 * a condition variable for it; the loop renders the whole page on its own
 * thread and swaps it in under the mutex. A loop that does not answer in
 * time (stalled, or busy) gets the last page served with its age
 * (ramster_metrics_snapshot_age_seconds) and metrics_stale_scrapes counted.
 */
#ifndef RAMSTER_NODE_METRICS_H
#define RAMSTER_NODE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "node/client/client.h"

#define METRICS_WAIT_MS 1000 /* a scrape waits this long for the loop's rendering */

struct metrics;

/*
 * Serve /metrics on listen (HOST:PORT; a host name, IPv4 or IPv6 literal)
 * for the node env describes (its counters, peers and exports; env and what
 * it points to outlive the endpoint). Starts libmicrohttpd's thread and an
 * ev_async on env->loop. @return the endpoint, or NULL with err set.
 */
struct metrics *metrics_create(const struct client_env *env, const char *listen, char *err,
			       size_t errlen);

/* Stop serving (a scrape waiting for the loop is released at once), free. NULL ok. */
void metrics_destroy(struct metrics *m);

/* The endpoint's own counters ("metrics_..."). Any thread. */
void metrics_foreach_stat(struct metrics *m,
			  void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			  void *arg);

/*
 * The exposition of env's node, as the loop renders it: every counter of
 * counters_foreach as ramster_NAME (base units, _total on counters) with HELP
 * and TYPE, then per-peer and per-export series. Loop thread only.
 * @return a malloc'd NUL-terminated text (*len its length), or NULL on ENOMEM.
 */
char *metrics_render(const struct client_env *env, size_t *len);

#endif /* RAMSTER_NODE_METRICS_H */
