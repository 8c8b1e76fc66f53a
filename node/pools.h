/*
 * pools.h - the node's pool directory: which tmem pools each client reaches.
 *
 * A client names pools by small ids (indexes in its own table) and reaches
 * nothing else. A private pool dies with its client; a shared pool, found or
 * created by its 16-byte uuid, lives while any client holds it. Loop thread only.
 */
#ifndef RAMSTER_NODE_POOLS_H
#define RAMSTER_NODE_POOLS_H

#include <stdbool.h>
#include <stdint.h>

#include "tmem/tmem.h"

#define POOLS_CLIENT_MAX 1024 /* pools one client may hold at once */
#define POOLS_UUID_LEN	 16

struct pools;	     /* the directory */
struct pools_client; /* one client's table */

/* @return an empty directory over t (not owned), or NULL with errno set. */
struct pools *pools_create(struct tmem *t);

/* Destroy every pool still listed, then the directory. Tables must be freed first. NULL ok. */
void pools_destroy(struct pools *p);

/* @return an empty table for the client numbered id (used in listings), or NULL. */
struct pools_client *pools_client_new(struct pools *p, uint64_t id);

/* Release every pool of the table (private ones are destroyed), then free it. NULL ok. */
void pools_client_free(struct pools_client *c);

/*
 * Create a pool for c. flags: TMEM_PERSISTENT and/or TMEM_SHARED (the same
 * bits as RAMSTER_PERSISTENT / RAMSTER_SHARED); uuid given iff shared. A
 * shared pool of that uuid is joined if it exists (its persistent bit must
 * equal flags'), else created. Each call takes one hold and one id.
 * @return the client's pool id (>= 0); -EINVAL bad flags/uuid or persistence
 * mismatch; -ENOSPC the client's table is full; -ENOMEM; or tmem's -errno.
 */
int pools_new(struct pools_client *c, unsigned flags, const unsigned char *uuid);

/*
 * Undo one pools_new: destroy a private pool, release a shared one (destroyed
 * with its last hold). @return 0, or -ENOENT (no such id in c).
 */
int pools_release(struct pools_client *c, int id);

/* Map c's pool id to the tmem pool id. @return 0 with *pool set, or -ENOENT. */
int pools_resolve(const struct pools_client *c, int id, uint32_t *pool);

/* One pool of the directory, for listings. */
struct pools_info {
	uint32_t pool;			    /* the node's tmem pool id */
	unsigned flags;			    /* TMEM_PERSISTENT | TMEM_SHARED */
	unsigned char uuid[POOLS_UUID_LEN]; /* shared pools; zero otherwise */
	uint32_t clients;		    /* distinct clients holding it */
	uint32_t holds;			    /* ids naming it, over all clients */
	uint64_t owner;			    /* private pools: the owner's client id */
};

/* Call fn for every pool, oldest first. fn must not change the directory. */
void pools_foreach(const struct pools *p, void (*fn)(void *arg, const struct pools_info *info),
		   void *arg);

/* Pools now, by kind. */
void pools_count(const struct pools *p, uint64_t *private_pools, uint64_t *shared_pools);

#endif /* RAMSTER_NODE_POOLS_H */
