/*
 * elastic.h - an elastic donation (donate_mb = auto) and tier (local_mb =
 * auto; docs/elastic.md): every second the node reads its host's memory
 * pressure (PSI) and what the host can spare, and moves what it lends to peers
 * and what its own tier may keep in bounded steps, giving pages back to their
 * owners, and frames' memory to the kernel, when it shrinks below what it
 * holds.
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
 * Start the controllers for node self on loop: r's donation when r is given
 * (donate_mb = auto), z's tier budget when z is given (local_mb = auto; z made
 * with local_max_mb, its budget set here). @return it, or NULL with err set
 * (no PSI on this kernel: /proc/pressure/memory unreadable).
 */
struct zcache;
struct elastic *elastic_create(struct ev_loop *loop, struct remote *r, struct zcache *z,
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
struct home;
struct home *home_create(struct ev_loop *loop, struct remote *r, struct zcache *z,
			 unsigned low_pct, const struct config_node *self);
void home_destroy(struct home *hm); /* NULL ok */
void home_foreach_stat(const struct home *hm,
		       void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
		       void *arg);

#endif /* RAMSTER_NODE_ELASTIC_H */
