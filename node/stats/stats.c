/*
 * stats.c - the node's counters and the walk over every counter (stats.h).
 *
 * Names are stable: tools and tests read them. The node's own start with
 * "node_"; the tier's come from zcache_foreach_stat unchanged.
 */
#include <stdio.h>
#include <string.h>

#include "node/clock.h"
#include "node/notify.h"
#include "node/stats/stats.h"

void stats_init(struct node_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->start_ns = clock_now_ns();
}

uint64_t stats_uptime_s(const struct node_stats *s)
{
	return (clock_now_ns() - s->start_ns) / 1000000000u;
}

/* clang-format off */
static const char *const stats_ops[STATS_OPS] = {
	[1] = "pool_new",
	[2] = "pool_destroy",
	[3] = "put",
	[4] = "get",
	[5] = "flush",
	[6] = "flush_object",
	[7] = "stats",
	[8] = "status",
	[9] = "pools",
	[10] = "peers",
	[11] = "exports",
	[12] = "ping",
	[13] = "drain",
	[14] = "reload",
	[15] = "clients",
	[16] = "attach",
	[17] = "restart",
};
/* clang-format on */

const char *stats_op_name(unsigned op)
{
	if (op >= STATS_OPS || !stats_ops[op])
		return "unknown";
	return stats_ops[op];
}

void stats_foreach(const struct node_stats *s, const struct pools *p, struct zcache *z,
		   void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
		   void *arg)
{
	char name[64];
	struct pools_reattach_stats rs;
	uint64_t priv, shared;
	unsigned op;

	fn(arg, "node_uptime_s", stats_uptime_s(s), "seconds since start");
	fn(arg, "node_clients", s->clients, "client connections open now");
	fn(arg, "node_clients_total", s->clients_total, "client connections accepted");
	fn(arg, "node_connections_closed", s->connections_closed, "client connections closed");
	fn(arg, "node_bad_frames", s->bad_frames, "frames that failed to decode");
	fn(arg, "node_frame_timeouts", s->frame_timeouts,
	   "connections closed: a frame never finished arriving");
	fn(arg, "node_io_errors", s->io_errors, "connections closed on a socket error");
	fn(arg, "node_oom_closes", s->oom_closes, "connections closed for want of memory");
	fn(arg, "node_accept_errors", s->accept_errors, "failed accepts");
	fn(arg, "node_write_waits", s->write_waits, "replies the socket took only in part");
	fn(arg, "node_remote_waits", s->remote_waits, "requests that waited on the collective");
	fn(arg, "node_put_room_waits", s->put_room_waits,
	   "persistent puts that waited for remotify to make room");
	fn(arg, "node_put_room_refused", s->put_room_refused,
	   "of those, refused when no room came in time");
	fn(arg, "node_clients_refused", s->clients_refused,
	   "connections refused: max_clients, max_connections of a uid, no credentials");
	fn(arg, "node_perm_refused", s->perm_refused,
	   "privileged requests (drain, relayed) from other uids, refused -EPERM");
	fn(arg, "node_access_refused", s->access_refused,
	   "pools a uid may not reach (mode bits), refused -EACCES");
	fn(arg, "node_quota_refused", s->quota_refused,
	   "pages over a uid's max_mb and pools over its max_pools, refused -EDQUOT");
	fn(arg, "node_held_reads_paused", s->held_reads_paused,
	   "times a held request stopped its connection's reading");
	for (op = 1; op < STATS_OPS; op++) {
		snprintf(name, sizeof(name), "node_requests_%s", stats_op_name(op));
		fn(arg, name, s->requests[op], "requests of this op");
	}
	if (p) {
		pools_count(p, &priv, &shared);
		fn(arg, "node_pools_private", priv, "private pools now");
		fn(arg, "node_pools_shared", shared, "shared pools now");
		pools_reattach_counts(p, &rs);
		fn(arg, "client_pools_detached", rs.detached,
		   "pools kept for reattach_grace_ms when their last client's connection ended");
		fn(arg, "client_pools_reattached", rs.reattached,
		   "pools attached again by their token (a client reconnected)");
		fn(arg, "client_pools_expired", rs.expired,
		   "detached pools released at the end of the grace");
		fn(arg, "client_attach_refused", rs.attach_refused,
		   "attaches refused -EACCES: the token's pool is another uid's");
		fn(arg, "client_pools_restored", rs.restored,
		   "pools made from a warm restart's image, waiting for their clients");
	}
	notify_foreach_stat(fn, arg); /* systemd_*: sd_notify and the watchdog */
	if (z)
		zcache_foreach_stat(z, fn, arg);
}
