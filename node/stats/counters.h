/*
 * counters.h - the walk over every counter of a running node, in the order
 * the STATS reply (`ramsterctl stats`) and the Prometheus endpoint
 * (node/stats/metrics.c) show them: the node's own and the tier's (stats.c), the
 * collective's (remote.c), the NBD frontend's, the loop's busy polling and
 * the metrics endpoint's. One walk, so both views always list the same names.
 *
 * Runs on the event loop's thread (the counters belong to it).
 */
#ifndef RAMSTER_NODE_COUNTERS_H
#define RAMSTER_NODE_COUNTERS_H

#include <stdint.h>

#include "node/client/client.h"

typedef void (*counters_fn)(void *arg, const char *name, uint64_t value, const char *help);

/* Call fn(arg, name, value, help) for every counter of the node env describes. */
void counters_foreach(const struct client_env *env, counters_fn fn, void *arg);

#endif /* RAMSTER_NODE_COUNTERS_H */
