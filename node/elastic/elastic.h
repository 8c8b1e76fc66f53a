/*
 * elastic.h - an elastic donation (donate_mb = auto, docs/elastic.md): every
 * second the node reads its host's memory pressure (PSI) and what the host
 * can spare, and moves what it lends to peers in bounded steps, giving pages
 * back to their owners when it shrinks below what it holds.
 *
 * Loop thread only.
 */
#ifndef RAMSTER_NODE_ELASTIC_H
#define RAMSTER_NODE_ELASTIC_H

#include <stdint.h>

#include "node/config.h"

struct ev_loop;
struct remote;
struct elastic;

/*
 * Start the controller for node self (its donate_mb is CONFIG_AUTO) on loop,
 * moving r's donation. @return it, or NULL with err set (no PSI on this
 * kernel: /proc/pressure/memory unreadable).
 */
struct elastic *elastic_create(struct ev_loop *loop, struct remote *r,
			       const struct config_node *self, char *err, size_t errlen);
void elastic_destroy(struct elastic *e); /* NULL ok */

/* Its counters and figures, for ramsterctl stats (elastic_*). NULL: none. */
void elastic_foreach_stat(const struct elastic *e,
			  void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			  void *arg);

/*
 * bring_home (home.c): while the tier has room and the host is calm, read
 * this node's persistent pages on peers back into the tier, paced (a batch a
 * second). Destroy it after remote_destroy (its gets end there).
 */
struct zcache;
struct home;
struct home *home_create(struct ev_loop *loop, struct remote *r, struct zcache *z,
			 unsigned low_pct, const struct config_node *self);
void home_destroy(struct home *hm); /* NULL ok */
void home_foreach_stat(const struct home *hm,
		       void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
		       void *arg);

#endif /* RAMSTER_NODE_ELASTIC_H */
