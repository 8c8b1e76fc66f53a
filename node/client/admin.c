/*
 * admin.c - the client socket's admin requests: stats, status, pools,
 * exports, peers, ping (echoed here or through a peer) and drain (here or
 * relayed to a peer).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "node/client/client_int.h"
#include "node/stats/counters.h"
#include "node/log.h"
#include "node/reload.h"
#include "node/spin.h"
#include "ramster.h"

struct client_stat_list {
	Ramster__Stat *items;
	size_t n, cap;
	int err;
};

static void client_stat_add(void *arg, const char *name, uint64_t value, const char *help)
{
	struct client_stat_list *sl = arg;
	Ramster__Stat *items, init = RAMSTER__STAT__INIT;

	if (sl->err)
		return;
	if (sl->n == sl->cap) {
		size_t cap = sl->cap ? sl->cap * 2 : 64;

		items = realloc(sl->items, cap * sizeof(*items));
		if (!items) {
			sl->err = -ENOMEM;
			return;
		}
		sl->items = items;
		sl->cap = cap;
	}
	init.name = strdup(name);
	if (!init.name) {
		sl->err = -ENOMEM;
		return;
	}
	init.value = value;
	sl->items[sl->n++] = init;
}

int admin_stats(struct client *c, Ramster__Response *rsp)
{
	const struct client_env *env = c->l->env;
	struct client_stat_list sl = {0};
	Ramster__Stat **ptrs = NULL;
	size_t i;
	int rc;

	counters_foreach(env, client_stat_add, &sl);
	if (!sl.err && sl.n) {
		ptrs = malloc(sl.n * sizeof(*ptrs));
		if (!ptrs)
			sl.err = -ENOMEM;
	}
	if (sl.err) {
		rsp->result = sl.err;
	} else {
		for (i = 0; i < sl.n; i++)
			ptrs[i] = &sl.items[i];
		rsp->stats = ptrs;
		rsp->n_stats = sl.n;
	}
	rc = client_reply(c, rsp, NULL, 0);
	for (i = 0; i < sl.n; i++)
		free(sl.items[i].name);
	free(sl.items);
	free(ptrs);
	return rc;
}

/* PEERS: the collective as this node sees it (none for a single node). */
int admin_peers(struct client *c, Ramster__Response *rsp)
{
	const struct client_env *env = c->l->env;
	struct cluster_peer_info info[CONFIG_NODES_MAX];
	Ramster__PeerInfo pi[CONFIG_NODES_MAX], *ptrs[CONFIG_NODES_MAX];
	size_t i, n = 0;

	if (env->remote)
		n = cluster_peers(remote_cluster(env->remote), info, CONFIG_NODES_MAX);
	if (n > CONFIG_NODES_MAX)
		n = CONFIG_NODES_MAX;
	for (i = 0; i < n; i++) {
		ramster__peer_info__init(&pi[i]);
		pi[i].id = info[i].id;
		pi[i].name = info[i].name;
		pi[i].address = info[i].address;
		pi[i].state = (char *)info[i].state;
		pi[i].transport = (char *)info[i].transport;
		pi[i].device = info[i].device;
		pi[i].incarnation = info[i].incarnation;
		pi[i].epoch = info[i].epoch;
		pi[i].rtt_us = info[i].rtt_us;
		pi[i].donate_free = info[i].donate_free;
		pi[i].donate_total = info[i].donate_total;
		pi[i].pages_lent = info[i].pages_there;
		pi[i].pages_borrowed = remote_pages_held_for(env->remote, info[i].id);
		pi[i].ups = info[i].ups;
		pi[i].deaths = info[i].deaths;
		ptrs[i] = &pi[i];
	}
	rsp->peers = ptrs;
	rsp->n_peers = n;
	return client_reply(c, rsp, NULL, 0);
}

#define CLIENT_STATUS_KEYS 11

int admin_status(struct client *c, Ramster__Response *rsp)
{
	const struct client_env *env = c->l->env;
	Ramster__KeyValue kv[CLIENT_STATUS_KEYS], *ptrs[CLIENT_STATUS_KEYS];
	char pid[24], uptime[24], local_mb[48], clients[24], redundancy[24] = "-", lending[96] = "-";
	const char *config = env->config_path[0] ? env->config_path : "(none)";
	const char *rows[CLIENT_STATUS_KEYS][2] = {
	    {"node", env->node_name},
	    {"version", env->version},
	    {"pid", pid},
	    {"uptime_s", uptime},
	    {"socket", env->socket_path},
	    {"local_mb", local_mb},
	    {"config", config},
	    {"log_level", log_level_name(log_get_level())},
	    {"clients", clients},
	    {"redundancy", redundancy},
	    {"lending", lending},
	};
	int i;

	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	snprintf(uptime, sizeof(uptime), "%llu", (unsigned long long)stats_uptime_s(env->stats));
	if (env->local_auto) {
		struct zcache_stats zs;

		zcache_get_stats(env->zcache, &zs);
		snprintf(local_mb, sizeof(local_mb), "auto: %llu of %llu",
			 (unsigned long long)(zs.budget_frames * 4096 >> 20),
			 (unsigned long long)env->local_mb);
	} else {
		snprintf(local_mb, sizeof(local_mb), "%llu", (unsigned long long)env->local_mb);
	}
	snprintf(clients, sizeof(clients), "%llu", (unsigned long long)env->stats->clients);
	if (env->remote) /* a node in a collective */
		remote_status(env->remote, redundancy, sizeof(redundancy), lending, sizeof(lending));
	for (i = 0; i < CLIENT_STATUS_KEYS; i++) {
		ramster__key_value__init(&kv[i]);
		kv[i].key = (char *)rows[i][0];
		kv[i].value = (char *)rows[i][1];
		ptrs[i] = &kv[i];
	}
	rsp->status = ptrs;
	rsp->n_status = CLIENT_STATUS_KEYS;
	return client_reply(c, rsp, NULL, 0);
}

/* RELOAD (node/reload.c): privileged; the outcome as status lines applied, restart, error. */
int admin_reload(struct client *c, Ramster__Response *rsp)
{
	struct reload_result res;
	Ramster__KeyValue kv[3], *ptrs[3];
	const char *rows[3][2] = {{"applied", res.applied}, {"restart", res.restart},
				  {"error", res.error}};
	int i;

	rsp->result = reload_request(c->l->env->reload, c->uid, &res);
	for (i = 0; i < 3; i++) {
		ramster__key_value__init(&kv[i]);
		kv[i].key = (char *)rows[i][0];
		kv[i].value = (char *)rows[i][1];
		ptrs[i] = &kv[i];
	}
	rsp->status = ptrs;
	rsp->n_status = 3;
	return client_reply(c, rsp, NULL, 0);
}

/* RESTART: privileged (the caller checked); the reply goes out before the loop stops. */
int admin_restart(struct client *c, Ramster__Response *rsp)
{
	const struct client_env *env = c->l->env;
	char why[256] = "";
	Ramster__KeyValue kv, *ptr = &kv;

	rsp->result = env->restart_now ? env->restart_now(env->restart_arg, why, sizeof(why))
				       : -EOPNOTSUPP;
	if (rsp->result && why[0]) {
		ramster__key_value__init(&kv);
		kv.key = (char *)"error";
		kv.value = why;
		rsp->status = &ptr;
		rsp->n_status = 1;
	}
	return client_reply(c, rsp, NULL, 0);
}

/* POOLS: every pool of the directory with its tmem figures. */
struct client_pool_list {
	struct tmem *t;
	const struct users_cred *cred; /* list only what it may reach */
	Ramster__PoolInfo *items;
	unsigned char (*uuids)[POOLS_UUID_LEN];
	size_t n, cap;
	int err;
};

static void client_pool_add(void *arg, const struct pools_info *info)
{
	struct client_pool_list *pl = arg;
	Ramster__PoolInfo pi = RAMSTER__POOL_INFO__INIT;
	struct tmem_pool_info ti = {0};

	if (pl->err || !pools_visible(info, pl->cred))
		return;
	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? pl->cap * 2 : 32;
		Ramster__PoolInfo *items = realloc(pl->items, cap * sizeof(*items));
		unsigned char(*uuids)[POOLS_UUID_LEN];

		if (!items) {
			pl->err = -ENOMEM;
			return;
		}
		pl->items = items;
		uuids = realloc(pl->uuids, cap * sizeof(*uuids));
		if (!uuids) {
			pl->err = -ENOMEM;
			return;
		}
		pl->uuids = uuids;
		pl->cap = cap;
	}
	(void)tmem_pool_info(pl->t, info->pool, &ti);
	pi.id = info->pool;
	pi.flags = ((info->flags & TMEM_PERSISTENT) ? RAMSTER_PERSISTENT : 0) |
		   ((info->flags & TMEM_SHARED) ? RAMSTER_SHARED : 0);
	if (info->flags & TMEM_SHARED) {
		memcpy(pl->uuids[pl->n], info->uuid, POOLS_UUID_LEN);
		pi.uuid.len = POOLS_UUID_LEN; /* data set once the array stops moving */
	}
	pi.clients = info->clients;
	pi.objects = ti.objects;
	pi.pages = ti.pages;
	pl->items[pl->n++] = pi;
}

int admin_pools(struct client *c, Ramster__Response *rsp)
{
	const struct client_env *env = c->l->env;
	struct client_pool_list pl = {.t = zcache_tmem(env->zcache), .cred = &c->cred};
	Ramster__PoolInfo **ptrs = NULL;
	size_t i;
	int rc;

	pools_foreach(env->pools, client_pool_add, &pl);
	if (!pl.err && pl.n) {
		ptrs = malloc(pl.n * sizeof(*ptrs));
		if (!ptrs)
			pl.err = -ENOMEM;
	}
	if (pl.err) {
		rsp->result = pl.err;
	} else {
		for (i = 0; i < pl.n; i++) {
			if (pl.items[i].uuid.len)
				pl.items[i].uuid.data = pl.uuids[i];
			ptrs[i] = &pl.items[i];
		}
		rsp->pools = ptrs;
		rsp->n_pools = pl.n;
	}
	rc = client_reply(c, rsp, NULL, 0);
	free(pl.items);
	free(pl.uuids);
	free(ptrs);
	return rc;
}

/* EXPORTS: the NBD exports with their figures (none without the frontend). */
int admin_exports(struct client *c, Ramster__Response *rsp)
{
	struct nbd *nbd = c->l->env->nbd;
	size_t i, n = nbd_export_count(nbd);
	Ramster__ExportInfo *items = NULL, **ptrs = NULL;
	struct nbd_export_info info;
	int rc;

	if (n) {
		items = calloc(n, sizeof(*items));
		ptrs = calloc(n, sizeof(*ptrs));
		if (!items || !ptrs) {
			rsp->result = -ENOMEM;
			n = 0;
		}
	}
	for (i = 0; i < n; i++) {
		nbd_export_info(nbd, i, &info);
		ramster__export_info__init(&items[i]);
		items[i].name = (char *)info.name;
		items[i].backing = (char *)info.backing;
		items[i].size = info.size;
		items[i].pages_local = info.pages_local;
		items[i].pages_remote = info.pages_remote;
		items[i].pages_backing = info.pages_backing;
		items[i].clients = info.clients;
		items[i].requests = info.requests;
		items[i].errors = info.errors;
		ptrs[i] = &items[i];
	}
	rsp->exports = ptrs;
	rsp->n_exports = n;
	rc = client_reply(c, rsp, NULL, 0);
	free(items);
	free(ptrs);
	return rc;
}

static void client_ping_done(void *arg, int result)
{
	struct client *c = arg;
	Ramster__Response rsp = RAMSTER__RESPONSE__INIT;
	bool page; /* a ping answers the page that came back; a relayed drain nothing */

	c->ping_result = result;
	if (--c->pending)
		return;
	if (c->closed) {
		client_free(c);
		return;
	}
	rsp.seq = c->req->seq;
	rsp.result = result;
	page = c->req->op == RAMSTER__OP__OP_PING && !result;
	if (!c->gone &&
	    client_reply(c, &rsp, page ? c->scratch : NULL, page ? WIRE_PAGE_SIZE : 0))
		return;
	client_resume(c);
}

/*
 * DRAIN: this node (node 0 or our own id), or relayed to peer node.
 * @return 0 answered, 1 waiting, CONN_CLOSED.
 */
int admin_drain(struct client *c, const Ramster__Request *req)
{
	const struct client_env *env = c->l->env;
	Ramster__Response rsp = RAMSTER__RESPONSE__INIT;

	rsp.seq = req->seq;
	if (!env->remote) {
		rsp.result = -ENOTCONN;
		return client_reply(c, &rsp, NULL, 0);
	}
	if (!req->node || req->node == cluster_self(remote_cluster(env->remote))) {
		rsp.result = remote_drain(env->remote, req->flags == 1);
		return client_reply(c, &rsp, NULL, 0);
	}
	c->req = req;
	c->pending = 2; /* held while it starts: the callback may run at once */
	remote_drain_peer(env->remote, req->node, req->flags == 1, client_ping_done, c);
	if (--c->pending == 0) {
		rsp.result = c->ping_result;
		return client_reply(c, &rsp, NULL, 0);
	}
	env->stats->remote_waits++;
	return 1;
}

/*
 * PING: echo the page (node 0), or send it through the peer and back over
 * their link. @return 0 answered, 1 waiting, CONN_CLOSED.
 */
int admin_ping(struct client *c, const Ramster__Request *req, size_t payload_off)
{
	const struct client_env *env = c->l->env;
	Ramster__Response rsp = RAMSTER__RESPONSE__INIT;

	rsp.seq = req->seq;
	if (!req->node)
		return client_reply(c, &rsp, c->in + payload_off, WIRE_PAGE_SIZE);
	if (!env->remote) {
		rsp.result = -ENOTSUP;
		return client_reply(c, &rsp, NULL, 0);
	}
	if (!c->scratch_pages) {
		uint8_t *s = realloc(c->scratch, WIRE_PAGE_SIZE);

		if (!s) {
			rsp.result = -ENOMEM;
			return client_reply(c, &rsp, NULL, 0);
		}
		c->scratch = s;
		c->scratch_pages = 1;
	}
	c->req = req;
	c->pending = 2; /* held while it starts: the callback may run at once */
	remote_ping(env->remote, req->node, c->in + payload_off, c->scratch, client_ping_done, c);
	if (--c->pending == 0) {
		/* answered at once (no such peer, ...): reply now, in this turn */
		Ramster__Response now = RAMSTER__RESPONSE__INIT;

		now.seq = req->seq;
		now.result = c->ping_result;
		return client_reply(c, &now, now.result ? NULL : c->scratch,
				    now.result ? 0 : WIRE_PAGE_SIZE);
	}
	env->stats->remote_waits++;
	return 1;
}

/*
 * PUT from item c->next_item on. A persistent put that finds the tier full
 * waits (up to CLIENT_ROOM_WAIT) for remotify to make room, when there is a
 * collective. @return 0 answered, 1 waiting, CONN_CLOSED.
 */

/* CLIENTS: one row a uid; the privileged see every uid, others their own. */
struct client_user_list {
	const struct client_env *env;
	const struct users_cred *cred;
	Ramster__ClientInfo *items;
	size_t n, cap;
	int err;
};

static void client_user_add(void *arg, const struct users_user *uu)
{
	struct client_user_list *ul = arg;
	Ramster__ClientInfo ci = RAMSTER__CLIENT_INFO__INIT;

	if (ul->err || (!ul->cred->privileged && uu->uid != ul->cred->uid))
		return;
	if (ul->n == ul->cap) {
		size_t cap = ul->cap ? ul->cap * 2 : 16;
		Ramster__ClientInfo *items = realloc(ul->items, cap * sizeof(*items));

		if (!items) {
			ul->err = -ENOMEM;
			return;
		}
		ul->items = items;
		ul->cap = cap;
	}
	ci.uid = (uint32_t)uu->uid;
	ci.connections = uu->connections;
	ci.pools = uu->pools;
	ci.pages = pools_owner_pages(ul->env->pools, uu, &ci.pages_remote);
	ci.bytes_in = uu->bytes_in;
	ci.bytes_out = uu->bytes_out;
	ci.refusals = uu->refused_conn + uu->refused_perm + uu->refused_access +
		      uu->refused_quota + uu->refused_pools;
	ci.max_mb = uu->max_pages / (1024 * 1024 / WIRE_PAGE_SIZE);
	ci.weight = uu->weight;
	ul->items[ul->n++] = ci;
}

int admin_clients(struct client *c, Ramster__Response *rsp)
{
	struct client_user_list ul = {.env = c->l->env, .cred = &c->cred};
	Ramster__ClientInfo **ptrs = NULL;
	size_t i;
	int rc;

	users_foreach(c->l->env->users, client_user_add, &ul);
	if (!ul.err && ul.n) {
		ptrs = malloc(ul.n * sizeof(*ptrs));
		if (!ptrs)
			ul.err = -ENOMEM;
	}
	if (ul.err) {
		rsp->result = ul.err;
	} else {
		for (i = 0; i < ul.n; i++)
			ptrs[i] = &ul.items[i];
		rsp->clients = ptrs;
		rsp->n_clients = ul.n;
	}
	rc = client_reply(c, rsp, NULL, 0);
	free(ul.items);
	free(ptrs);
	return rc;
}
