/*
 * pools.h - the node's pool directory: which tmem pools each client reaches.
 *
 * A client names pools by small ids (indexes in its own table) and reaches
 * nothing else. A private pool dies with its client; a shared pool, found or
 * created by its 16-byte uuid, lives while any client holds it. Loop thread only.
 *
 * A pool whose last holder's connection ends may outlive it for a grace
 * (pools_set_grace): detached, it waits for a connection of the same uid to
 * attach it again by its 16-byte random token (pools_attach), so that a
 * client that reconnects finds its pages; past the grace it is released as
 * a last release does (pools_expire).
 */
#ifndef RAMSTER_NODE_POOLS_H
#define RAMSTER_NODE_POOLS_H

#include <stdbool.h>
#include <stdint.h>

#include "node/client/users.h"
#include "tmem/tmem.h"

#define POOLS_CLIENT_MAX 1024 /* pools one client may hold at once */
#define POOLS_UUID_LEN	 16
#define POOLS_TOKEN_LEN	 16 /* a pool's attach token (random) */

struct pools;	     /* the directory */
struct pools_client; /* one client's table */

/* @return an empty directory over t (not owned), or NULL with errno set. */
struct pools *pools_create(struct tmem *t);

/* Destroy every pool still listed, then the directory. Tables must be freed first. NULL ok. */
void pools_destroy(struct pools *p);

/* @return an empty table for the client numbered id (used in listings), or NULL. */
struct pools_client *pools_client_new(struct pools *p, uint64_t id);

/*
 * Say who the table's client is (before its first pool): its pools are owned
 * by cred's uid and charged to uu (users_pool_take), shared pools are reached
 * by the mode bits (pools_new_mode). A table without credentials (the unit
 * tests) is privileged and charged to nobody. cred and uu must outlive c.
 */
void pools_client_set_cred(struct pools_client *c, struct users *u, const struct users_cred *cred,
			   struct users_user *uu);

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
 * pools_new with the permission bits a new shared pool gets (0 = 0600; at
 * most 0777, like a file's: the owner uid, the group (the creator's gid) and
 * others; USERS_READ lets a class get, USERS_WRITE put and flush, either
 * join). Joining an existing pool needs one bit of the caller's class
 * (privileged callers need none). @return as pools_new, and -EACCES (a pool
 * the caller may not reach), -EDQUOT (the owner has max_pools).
 */
int pools_new_mode(struct pools_client *c, unsigned flags, const unsigned char *uuid,
		   unsigned mode);

/*
 * Undo one pools_new: destroy a private pool, release a shared one (destroyed
 * with its last hold). @return 0, or -ENOENT (no such id in c).
 */
int pools_release(struct pools_client *c, int id);

/* Map c's pool id to the tmem pool id. @return 0 with *pool set, or -ENOENT. */
int pools_resolve(const struct pools_client *c, int id, uint32_t *pool);

/*
 * pools_resolve for a request that needs the bits need (USERS_READ for a get,
 * USERS_WRITE for a put or flush). *owner (may be NULL) gets the record the
 * pool's pages are charged to (NULL when none). @return 0, -ENOENT, or
 * -EACCES (the caller's class lacks a bit).
 */
int pools_resolve_for(const struct pools_client *c, int id, unsigned need, uint32_t *pool,
		      struct users_user **owner);

/* Pages (local and remote) in the pools uu owns; *remote (may be NULL) the remote ones. */
uint64_t pools_owner_pages(const struct pools *p, const struct users_user *uu, uint64_t *remote);

/* One pool of the directory, for listings. */
struct pools_info {
	uint32_t pool;			    /* the node's tmem pool id */
	unsigned flags;			    /* TMEM_PERSISTENT | TMEM_SHARED */
	unsigned char uuid[POOLS_UUID_LEN]; /* shared pools; zero otherwise */
	uint32_t clients;		    /* distinct clients holding it */
	uint32_t holds;			    /* ids naming it, over all clients */
	uint64_t owner;			    /* private pools: the owner's client id */
	uid_t uid;			    /* the creator's uid and gid */
	gid_t gid;
	unsigned mode;			    /* shared pools: permission bits */
	const struct users_user *user;	    /* the record it is charged to (NULL: none) */
	bool detached;			    /* held by nobody, kept for a reattach */
};

/* @return whether cred may see info's pool in a listing (privileged: all). */
bool pools_visible(const struct pools_info *info, const struct users_cred *cred);

/* Call fn for every pool, oldest first. fn must not change the directory. */
void pools_foreach(const struct pools *p, void (*fn)(void *arg, const struct pools_info *info),
		   void *arg);

/* Pools now, by kind. */
void pools_count(const struct pools *p, uint64_t *private_pools, uint64_t *shared_pools);

/* ---- detach and attach (a client's reconnect) ----------------------------- */

/* What reattaching did since pools_create. */
struct pools_reattach_stats {
	uint64_t detached;	 /* pools kept when their last holder's connection ended */
	uint64_t reattached;	 /* pools_attach successes */
	uint64_t expired;	 /* detached pools released at the end of the grace */
	uint64_t attach_refused; /* pools_attach refused -EACCES (another uid) */
	uint64_t restored;	 /* pools made from a warm restart's image, detached */
};

/* Keep a pool whose last holder goes for grace_ms (0, the default: release it at once). */
void pools_set_grace(struct pools *p, uint32_t grace_ms);

/*
 * Call fn(arg, p) after each change of what pools_save writes (a pool made
 * or gone), before the call that made it returns (so before its client hears
 * of it): crash_dir keeps the directory's image current (node/restart/crash.h).
 * NULL fn: none.
 */
void pools_set_on_change(struct pools *p, void (*fn)(void *arg, const struct pools *p),
			 void *arg);

/* Copy the token of c's pool id into token[POOLS_TOKEN_LEN]. @return 0 or -ENOENT. */
int pools_token(const struct pools_client *c, int id, unsigned char *token);

/*
 * The client's connection ended: a pool whose last hold is c's is detached
 * until now_ms + grace (with a grace), every other hold released; then c is
 * freed. Clock: any monotonic milliseconds, the same as pools_expire's. NULL ok.
 */
void pools_client_close(struct pools_client *c, uint64_t now_ms);

/*
 * Attach the pool of token (len bytes: it must be POOLS_TOKEN_LEN) to c: a
 * detached pool if c's uid is its last holder's, a held one as pools_new
 * would join it (the old connection may not be closed yet). Its id in c is
 * want when that is free, else c's lowest free id. Counted in the
 * reattach stats. @return the id; -EINVAL (bad token length), -ENOENT (no
 * pool has it: expired or never made here), -EACCES (another uid's),
 * -ENOSPC / -ENOMEM (c's table).
 */
int pools_attach(struct pools_client *c, const unsigned char *token, size_t len, int want);

/*
 * Release the detached pools whose grace ended by now_ms. @return the
 * earliest end of a grace still running, or 0 when none is detached.
 */
uint64_t pools_expire(struct pools *p, uint64_t now_ms);

void pools_reattach_counts(const struct pools *p, struct pools_reattach_stats *out);

/* ---- a warm restart's image (node/restart/restart.h) ---- */

#define POOLS_TAG_ENTRY 0x5001
/* A restored pool waits this long for its client at least (or reattach_grace_ms if longer). */
#define POOLS_RESTART_GRACE_MS 60000u

/* Emit every pool of the directory as one ENTRY record. @return 0 or emit's error. */
int pools_save(const struct pools *p,
	       int (*emit)(void *arg, uint16_t tag, const void *head, size_t head_len,
			   const void *body, size_t body_len),
	       void *arg);

/*
 * Make the pool an ENTRY record names: its tmem pool (empty, at its id, owned
 * by its uid's record in u, charged there), detached until now_ms plus the
 * longer of POOLS_RESTART_GRACE_MS and reattach_grace_ms, attached again by
 * its token (a private pool by its uid; a shared one as a join). Must come
 * before the tier's records. @return 0, -EBADMSG (a record that cannot be:
 * bad flags or mode, a taken id, uuid or token), -ENOMEM.
 */
int pools_load_record(struct pools *p, struct users *u, uint16_t tag, const uint8_t *rec,
		      size_t len, uint64_t now_ms);

#endif /* RAMSTER_NODE_POOLS_H */
