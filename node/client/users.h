/*
 * users.h - who a client is and what its uid may do and hold.
 *
 * Every client connection carries the credentials the kernel gives for its
 * socket (SO_PEERCRED: uid, gid, pid; SO_PEERGROUPS: its supplementary
 * groups). The node keeps one record per uid with a connection: its
 * connections, the pools it owns, its counters and its rule from the
 * configuration ([uid N], [user NAME] or the first [group NAME] it belongs to:
 * max_mb, weight, max_connections, max_pools). A uid is privileged when it is
 * root or the daemon's own uid: it reaches every pool and may run the
 * operations that change the node (drain, relayed requests).
 *
 * Loop thread only.
 */
#ifndef RAMSTER_NODE_USERS_H
#define RAMSTER_NODE_USERS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "node/config.h"

#define USERS_GROUPS_MAX 32 /* supplementary groups kept for a connection */

/* Permission bits of a shared pool: the file-mode classes owner/group/other. */
#define USERS_READ	 4u
#define USERS_WRITE	 2u
#define USERS_MODE_DEFAULT 0600u

struct pools_entry; /* node/client/pools.c */

struct users_cred {
	uid_t uid;
	gid_t gid;
	pid_t pid;
	bool privileged;         /* root or the daemon's uid */
	unsigned n_groups;
	gid_t groups[USERS_GROUPS_MAX];
};

/* What one uid holds and did; figures for `ramsterctl clients`. */
struct users_user {
	struct users_user *next;
	uid_t uid;
	bool privileged;          /* root or the daemon's uid */
	uint32_t connections;     /* open now */
	uint32_t pools;           /* pools it owns now (shared ones charged to their creator) */
	uint64_t max_pages;       /* quota in pages, local and remote (0: none) */
	uint32_t weight;          /* share of the tier under contention */
	uint32_t max_connections;
	uint32_t max_pools;
	int rule_line;            /* the config rule that applies (0: the defaults) */
	uint64_t bytes_in, bytes_out;
	uint64_t refused_conn;    /* connections refused (limits) */
	uint64_t refused_perm;    /* privileged requests refused (-EPERM) */
	uint64_t refused_access;  /* pools it could not reach (-EACCES) */
	uint64_t refused_quota;   /* pages refused over max_mb (-EDQUOT) */
	uint64_t refused_pools;   /* pools refused over max_pools (-EDQUOT) */
	uint32_t tier_owner;      /* the tier's owner id of its pools (1..) */
	gid_t gid;                /* its first connection's groups: what group rules match */
	unsigned n_groups;
	gid_t groups[USERS_GROUPS_MAX];
	struct pools_entry *owned; /* the pools it owns (node/client/pools.c's list) */
};

struct users;

/* @return the table with cfg's limits and rules (copied), or NULL. */
struct users *users_create(const struct config *cfg, uid_t daemon_uid);
void users_destroy(struct users *u);

/*
 * Read fd's peer credentials into cred. @return 0, or -errno (the caller
 * refuses the connection: a client without credentials is nobody).
 */
int users_cred_read(const struct users *u, int fd, struct users_cred *cred);

/* @return whether cred is in group g (its gid or a supplementary group). */
bool users_cred_in_group(const struct users_cred *cred, gid_t g);

/*
 * Admit one connection of cred. @return 0 with *out (held until
 * users_disconnect); -EUSERS the node has max_clients; -EMFILE the uid has
 * its max_connections (both counted); -ENOMEM.
 */
int users_connect(struct users *u, const struct users_cred *cred, struct users_user **out);
void users_disconnect(struct users *u, struct users_user *uu);

/*
 * The record of uid (created with gid and the rules that match, without a
 * connection): a warm restart's pools are charged to it. NULL: no memory.
 */
struct users_user *users_adopt(struct users *u, uid_t uid, gid_t gid);

/* A pool owned by uu is made / destroyed. users_pool_take: -EDQUOT over max_pools. */
int users_pool_take(struct users *u, struct users_user *uu);
void users_pool_drop(struct users *u, struct users_user *uu);

/* Call fn for every uid record (connections or pools), in uid order is not promised. */
void users_foreach(const struct users *u, void (*fn)(void *arg, const struct users_user *uu),
		   void *arg);

/*
 * A reload: cfg's client limits (max_clients, max_clients_per_uid,
 * max_pools_per_uid, default_weight) and [uid]/[user]/[group] rules replace
 * the running ones, and every uid's record takes its rule again (quota,
 * weight, connection and pool limits; what it holds now stays, over a new
 * quota it is refused further pages). changed(arg, uu) is called for each
 * record whose weight changed. The NBD and peer limits of [limits] are not
 * copied (their modules read them at start).
 */
void users_set_rules(struct users *u, const struct config *cfg,
		     void (*changed)(void *arg, const struct users_user *uu), void *arg);

/* The limits the node runs with. */
const struct config_limits *users_limits(const struct users *u);

/* Connections refused over the limits, node-wide. */
uint64_t users_refused_total(const struct users *u);

#endif /* RAMSTER_NODE_USERS_H */
