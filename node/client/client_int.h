/*
 * client_int.h - private to the files of the client socket (client.h):
 *
 *   client.c           connections: buffers, frames, the data requests (pools,
 *                      put, get, flush) through the store, replies in order;
 *   admin.c            the admin requests: stats, status, pools, exports,
 *                      peers, ping, drain;
 *   client_listener.c  the listening socket, accepting, the frame sweep.
 *
 * Loop only: all of it runs on the event loop's thread.
 */
#ifndef RAMSTER_NODE_CLIENT_INT_H
#define RAMSTER_NODE_CLIENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ev.h>

#include "common/sock.h"
#include "common/util.h"
#include "node/client/client.h"
#include "node/closed.h"
#include "node/client/users.h"
#include "proto/wire.h"

#define CLIENT_IN_MIN	    (64u * 1024)  /* input buffer to start with */
#define CLIENT_ARENA_SIZE   (256u * 1024) /* decode arena of a connection */
#define CLIENT_ACCEPT_BURST 64		  /* accepts a wake-up */
#define CLIENT_ACCEPT_PAUSE 0.1		  /* s without accepting after EMFILE and the like */
#define CLIENT_WARN_EVERY   10.0	  /* s between repeated accept warnings */
#define CLIENT_SEND_FLAGS   (MSG_NOSIGNAL | MSG_DONTWAIT)
/* The most input a connection makes the node hold: one whole frame of the
 * largest kind (a PUT of WIRE_BATCH_MAX pages) and a read's slack. While a
 * request is held or a reply waits to be sent, the connection is not read. */
#define CLIENT_IN_MAX (WIRE_HDR_SIZE + WIRE_MSG_MAX + WIRE_PAYLOAD_MAX + CLIENT_IN_MIN)

struct client {
	ev_io io; /* first: the watcher's address is the client's */
	struct client_listener *l;
	struct client *next, *prev;
	uint64_t id;
	int fd;
	uid_t uid; /* SO_PEERCRED's, or (uid_t)-1 unknown: privileged ops check it */
	struct pools_client *pools;
	struct users_cred cred;   /* SO_PEERCRED (+ groups) at accept */
	struct users_user *user;  /* its uid's record */
	int req_op;               /* the op being dispatched (for logs) */
	uint64_t quota_left;      /* PUT: pages its pool's owner may still add */
	struct users_user *put_owner; /* PUT: the record the pages are charged to */
	uint8_t *in; /* received bytes: in[0..in_len) */
	size_t in_len, in_cap;
	uint8_t *out; /* unsent reply bytes: out[out_off..out_len) */
	size_t out_off, out_len, out_cap;
	uint8_t *scratch; /* GET hits, scratch_pages pages */
	size_t scratch_pages;
	struct wire_arena arena;
	bool gone; /* the peer stopped reading: replies are dropped, frames only checked */
	int32_t results[WIRE_BATCH_MAX];

	/* A request waiting on the collective: its frame stays at in[0..held),
	 * and no other frame runs until it is answered (replies stay in order). */
	bool busy;
	bool closed;              /* closed while remote gets were out: freed at the last */
	size_t held;
	const Ramster__Request *req; /* the held request (in the arena) */
	size_t payload_off;       /* its payload, at in + payload_off */
	uint32_t pool;            /* the node's pool id it names */
	unsigned pending;         /* remote gets outstanding */
	int ping_result;          /* PING through a peer: its outcome */
	ev_tstamp partial_since;  /* a frame has been arriving since then (0: none) */
	size_t next_item;         /* PUT: the item to try next */
	struct store_req put;     /* PUT: the store's state of its puts (room waits) */
	struct client_slot {
		struct client *c;
		unsigned i;
	} slots[WIRE_BATCH_MAX];
};

struct client_listener {
	ev_io io;	/* first */
	ev_timer retry; /* resumes accepting after a pause */
	ev_timer sweep; /* closes connections whose frame never finishes */
	ev_timer expire; /* releases detached pools at the end of their grace */
	ev_tstamp frame_timeout; /* s; env->frame_timeout_ms */
	const struct client_env *env;
	struct sock_unix sock; /* the listening socket and the file it made */
	uint64_t next_id;
	struct client *clients;
	ev_tstamp last_warn;
	ev_tstamp last_refusal_warn;
};

/* client.c */
void client_free(struct client *c);
void client_close(struct client *c, const char *why);
int client_reply(struct client *c, Ramster__Response *rsp, const uint8_t *pages, size_t len);
void client_resume(struct client *c);
void client_sweep_cb(struct ev_loop *loop, ev_timer *w, int revents);
void client_new(struct client_listener *l, int fd);

/* client_listener.c: release the detached pools whose grace ended; time the next. */
void client_expire_arm(struct client_listener *l);

/* admin.c: each answers (0), waits (1), or closed c (-1) */
int admin_stats(struct client *c, Ramster__Response *rsp);
int admin_peers(struct client *c, Ramster__Response *rsp);
int admin_status(struct client *c, Ramster__Response *rsp);
int admin_pools(struct client *c, Ramster__Response *rsp);
int admin_exports(struct client *c, Ramster__Response *rsp);
int admin_drain(struct client *c, const Ramster__Request *req);
int admin_reload(struct client *c, Ramster__Response *rsp);
int admin_restart(struct client *c, Ramster__Response *rsp);
int admin_clients(struct client *c, Ramster__Response *rsp);
int admin_ping(struct client *c, const Ramster__Request *req, size_t payload_off);

#endif /* RAMSTER_NODE_CLIENT_INT_H */
