/*
 * counters.c - every counter of the node, one walk (counters.h).
 */
#include "node/stats/counters.h"
#include "node/stats/metrics.h"
#include "node/elastic/elastic.h"
#include "node/nbd/nbd.h"
#include "node/reload.h"
#include "node/restart/restart.h"
#include "node/remote/remote.h"
#include "node/spin.h"
#include "node/stats/stats.h"
#include "node/store.h"

void counters_foreach(const struct client_env *env, counters_fn fn, void *arg)
{
	stats_foreach(env->stats, env->pools, env->zcache, fn, arg);
	if (env->store)
		store_foreach_stat(env->store, fn, arg);
	if (env->remote)
		remote_foreach_stat(env->remote, fn, arg);
	if (env->nbd)
		nbd_foreach_stat(env->nbd, fn, arg);
	if (env->spin) {
		struct spin_stats ss;

		spin_get_stats(env->spin, &ss);
		fn(arg, "loop_busy_polls", ss.polls,
		   "times the loop polled before sleeping (busy_poll_us)");
		fn(arg, "loop_busy_poll_hits", ss.hits, "... and found work without sleeping");
		fn(arg, "loop_busy_poll_us", ss.spun_us, "microseconds spent busy polling");
		fn(arg, "loop_busy_poll_window_us", ss.window_us,
		   "the polling window now (adapts up to busy_poll_us; 0: sleeps at once)");
		fn(arg, "loop_busy_poll_grows", ss.grows, "times the polling window grew");
		fn(arg, "loop_busy_poll_shrinks", ss.shrinks, "times the polling window shrank");
		spin_foreach_lag(&ss, fn, arg);
	}
	if (env->reload)
		reload_foreach_stat(env->reload, fn, arg);
	if (env->metrics)
		metrics_foreach_stat(env->metrics, fn, arg);
	if (env->restart)
		restart_foreach_stat(env->restart, fn, arg);
	elastic_foreach_stat(env->elastic, fn, arg);
	home_foreach_stat(env->home, fn, arg);
}
