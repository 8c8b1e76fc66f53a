/*
 * ramster_int.h - a connection's insides, shared by lib/ramster.c (the calls,
 * one round trip each) and lib/reconnect.c (its pools by the caller's ids,
 * and the redial that attaches them again). Not for region*.c: they use the
 * public API and lib/internal.h.
 */
#ifndef RAMSTER_LIB_RAMSTER_INT_H
#define RAMSTER_LIB_RAMSTER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "proto/wire.h"
#include "ramster.h"

#define LIB_TOKEN_LEN 16

/* One pool of the connection, at the caller's id. */
struct lib_pool {
	uint8_t state;	 /* LIB_POOL_* */
	bool has_token;	 /* the node gave one (an older node does not) */
	int node_id;	 /* the node's id of it on the present connection */
	unsigned char token[LIB_TOKEN_LEN];
};

enum {
	LIB_POOL_FREE,	/* no pool at this id */
	LIB_POOL_LIVE,	/* reached at node_id */
	LIB_POOL_STALE, /* lost in a reconnect: its calls get -ESTALE */
};

struct ramster {
	int fd;	      /* -1 once closed after an error */
	uint64_t seq; /* of the last request sent */
	uint8_t hdr[WIRE_HDR_SIZE];
	uint8_t *tx; /* packed request; grows, never shrinks */
	size_t tx_cap;
	uint8_t *rx; /* packed response; grows, never shrinks */
	size_t rx_cap;
	struct wire_arena arena; /* decodes every response except the admin ones */
	Ramster__Item items[RAMSTER_BATCH_MAX];
	Ramster__Item *item_ptrs[RAMSTER_BATCH_MAX];
	struct iovec iov[2 + RAMSTER_BATCH_MAX]; /* header, message, pages */
	uint64_t poll_ns; /* poll this long for a reply before sleeping (RAMSTER_POLL_US) */
	char path[108];   /* the node's socket: region.c's own connection, and the redial */
	uint32_t reconnect_ms; /* how long a broken connection is dialled again (0: never) */
	uint64_t reconnects;   /* connections dialled again and their pools attached */
	bool answered;	       /* the node has answered this handle once: a break is a redial's */
	struct lib_pool *pools; /* by the caller's pool id */
	size_t n_pools;
};

/* ramster.c */

/* Drop the connection (its stream is out of step or gone). */
void lib_break(ramster *r);

/* Connect to the socket at path. @return 0 with *fd set, or -errno. */
int lib_dial(const char *path, int *fd);

/*
 * One round trip of req, as it is (its pool is the node's id). On success the
 * caller frees *out. @return 0 or -errno; a broken stream is closed (lib_break).
 */
int lib_call_once(ramster *r, Ramster__Request *req, struct ramster_iov *v, int use_arena,
		  Ramster__Response **out);

/* reconnect.c */

/* RAMSTER_RECONNECT_MS, else the default (30000). */
uint32_t lib_env_reconnect_ms(void);

/*
 * A round trip of req whose pool (if its op takes one) is the caller's id:
 * mapped to the node's, -ENOENT for none, -ESTALE for a pool a reconnect
 * lost. A broken connection is dialled again within r->reconnect_ms, its
 * pools attached, and req sent again (tmem's puts, gets and flushes may
 * repeat). @return as lib_call_once.
 */
int lib_call(ramster *r, Ramster__Request *req, struct ramster_iov *v, int use_arena,
	     Ramster__Response **out);

/* Make sure lib_pool_add will find a free id. @return 0 or -ENOMEM. */
int lib_pool_reserve(ramster *r);

/*
 * Remember a new pool at the node's node_id with its token (NULL: none): the
 * caller's id is node_id when free, else the lowest free one. After
 * lib_pool_reserve it cannot fail. @return the caller's id, or -ENOMEM.
 */
int lib_pool_add(ramster *r, int node_id, const unsigned char *token);

/* Forget the caller's pool id. */
void lib_pool_forget(ramster *r, int id);

/*
 * An orderly close: release every pool now (POOL_DESTROY: a private pool
 * freed, a shared one's hold dropped), so that the node keeps for a
 * reconnect only the pools of connections that broke. No redial.
 */
void lib_pools_release(ramster *r);

#endif
