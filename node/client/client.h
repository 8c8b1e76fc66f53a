/*
 * client.h - the node's client socket: a Unix stream listener and its
 * connections, one client each, served on the event loop's thread.
 *
 * Requests are answered in order (pipelining allowed), each response echoing
 * its request's seq. A frame that fails to decode closes that connection only.
 */
#ifndef RAMSTER_NODE_CLIENT_H
#define RAMSTER_NODE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <ev.h>

#include "node/nbd/nbd.h"
#include "node/client/pools.h"
#include "node/remote/remote.h"
#include "node/stats/stats.h"
#include "node/store.h"
#include "tmem/zcache.h"

/* What the connections work with and report; owned by the caller, outlives the listener. */
struct client_env {
	struct ev_loop *loop;
	struct zcache *zcache;   /* for the tier's counters and listings */
	struct store *store;     /* every page goes through it */
	struct pools *pools;
	struct node_stats *stats;
	const char *version;
	const char *node_name;
	const char *socket_path;
	const char *config_path; /* "" when the node runs without a file */
	uint64_t local_mb;
	bool local_auto;          /* local_mb = auto: status shows the tier's budget now */
	struct remote *remote;   /* the collective, or NULL for a single node */
	struct nbd *nbd;         /* the NBD frontend, or NULL when no export is configured */
	struct spin *spin;       /* the loop's busy polling (its counters), or NULL */
	uint32_t frame_timeout_ms; /* a frame's limit to arrive whole (0: 30 s) */
	struct users *users;     /* credentials, per-uid limits and records (node/client/users.h) */
	struct metrics *metrics; /* the Prometheus endpoint (its counters), or NULL */
	struct reload *reload;   /* re-reads the cluster file (OP_RELOAD), or NULL without one */
	const struct restart_stats *restart; /* the warm restart's figures, or NULL */
	const struct elastic *elastic; /* donate_mb = auto's controller, or NULL */
	const struct home *home;       /* bring_home, or NULL */
	/* OP_RESTART: start a warm restart after this reply (0), or say why not (-EBUSY) */
	int (*restart_now)(void *arg, char *why, size_t len);
	void *restart_arg;
};

struct client_listener;
struct metrics;
struct reload;
struct restart_stats;
struct elastic;
struct home;

/*
 * Listen on env->socket_path: create its parent directory (0755) if missing;
 * if the path exists, refuse when a daemon answers on it, else remove the
 * stale socket; bind with mode 0660 and start accepting on env->loop.
 * @return 0 with *out set, or -errno with err set to a one-line reason
 * (-EADDRINUSE: "another ramsterd is listening on PATH").
 */
int client_listen(const struct client_env *env, struct client_listener **out, char *err,
		  size_t errlen);

/*
 * Close every connection (their private pools are destroyed, their shared
 * holds released), stop listening and remove the socket if it is still
 * ours. NULL ok.
 */
void client_listener_close(struct client_listener *l);

#endif /* RAMSTER_NODE_CLIENT_H */
