/*
 * client.c - the client socket: listener and connections (client.h).
 *
 * Frames are decoded in place in the input buffer (PUT pages are used from
 * it) and answered with one sendmsg; only what the socket does not take is
 * copied out, and while it waits the connection reads nothing more.
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

#include "node/client.h"
#include "node/counters.h"
#include "node/log.h"
#include "node/reload.h"
#include "node/spin.h"
#include "proto/wire.h"
#include "ramster.h"

#define CLIENT_IN_MIN	    (64u * 1024)  /* input buffer to start with */
#define CLIENT_ARENA_SIZE   (256u * 1024) /* decode arena of a connection */
#define CLIENT_ACCEPT_BURST 64		  /* accepts a wake-up */
#define CLIENT_ACCEPT_PAUSE 0.1		  /* s without accepting after EMFILE and the like */
#define CLIENT_WARN_EVERY   10.0	  /* s between repeated accept warnings */
#define CLIENT_SEND_FLAGS   (MSG_NOSIGNAL | MSG_DONTWAIT)

struct client {
	ev_io io; /* first: the watcher's address is the client's */
	struct client_listener *l;
	struct client *next, *prev;
	uint64_t id;
	int fd;
	uid_t uid; /* SO_PEERCRED's, or (uid_t)-1 unknown: privileged ops check it */
	struct pools_client *pools;
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
	bool pers;
	unsigned pending;         /* remote gets outstanding */
	int ping_result;          /* PING through a peer: its outcome */
	ev_tstamp partial_since;  /* a frame has been arriving since then (0: none) */
	size_t next_item;         /* PUT: the item to try next */
	ev_tstamp wait_start;     /* PUT: when it began to wait for room */
	void *room;               /* PUT: the wait token */
	struct client_slot {
		struct client *c;
		unsigned i;
	} slots[WIRE_BATCH_MAX];
};

/* A persistent put that finds the tier full waits at most this long for remotify. */
#define CLIENT_ROOM_WAIT 0.5
#define CLIENT_ROOM_STEP_MS 20

struct client_listener {
	ev_io io;	/* first */
	ev_timer retry; /* resumes accepting after a pause */
	ev_timer sweep; /* closes connections whose frame never finishes */
	ev_tstamp frame_timeout; /* s; $RAMSTER_FRAME_TIMEOUT_MS, default 30 s */
	const struct client_env *env;
	int fd;
	dev_t dev; /* the socket file we made, to unlink only ours */
	ino_t ino;
	uint64_t next_id;
	struct client *clients;
	ev_tstamp last_warn;
};

/* ---- buffers ------------------------------------------------------------------ */

/* Make *buf hold at least need bytes, keeping its contents. @return 0 or -ENOMEM. */
static int client_reserve(uint8_t **buf, size_t *cap, size_t need)
{
	uint8_t *p;
	size_t n = *cap * 2;

	if (need <= *cap)
		return 0;
	if (n < need)
		n = need; /* a frame's exact size: no doubling past 1 MiB */
	p = realloc(*buf, n);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n;
	return 0;
}

/* ---- connections -------------------------------------------------------------- */

static void client_free(struct client *c)
{
	wire_arena_fini(&c->arena);
	free(c->in);
	free(c->out);
	free(c->scratch);
	free(c);
}

static void client_close(struct client *c, const char *why)
{
	struct client_listener *l = c->l;
	struct node_stats *st = l->env->stats;

	if (c->room)
		remote_wait_cancel(l->env->remote, c->room);
	c->room = NULL;
	ev_io_stop(l->env->loop, &c->io);
	close(c->fd);
	pools_client_free(c->pools);
	if (c->prev)
		c->prev->next = c->next;
	else
		l->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	st->clients--;
	st->connections_closed++;
	log_debug("client %llu closed: %s", (unsigned long long)c->id, why);
	if (c->pending) {
		c->closed = true; /* the last remote get frees it */
		return;
	}
	client_free(c);
}

static void client_watch(struct client *c, int events)
{
	struct ev_loop *loop = c->l->env->loop;

	if ((c->io.events & (EV_READ | EV_WRITE)) == events)
		return;
	ev_io_stop(loop, &c->io);
	ev_io_set(&c->io, c->fd, events);
	ev_io_start(loop, &c->io);
}

/* Close on a socket error. @return -1 (closed). */
static int client_io_error(struct client *c, const char *what, int err)
{
	char why[128];

	c->l->env->stats->io_errors++;
	snprintf(why, sizeof(why), "%s: %s", what, strerror(err));
	client_close(c, why);
	return -1;
}

/*
 * The peer closed or stopped reading: nothing more can be answered. Keep
 * reading to its end of stream, so that a frame it left cut short still
 * counts as a bad frame.
 */
static void client_gone(struct client *c, int err)
{
	log_debug("client %llu stopped reading (%s): dropping its replies",
		  (unsigned long long)c->id, strerror(err));
	c->gone = true;
	c->out_off = c->out_len = 0;
}

/* Send what is pending. @return 0 (maybe still pending), or -1 closed. */
static int client_flush(struct client *c)
{
	ssize_t n;

	while (c->out_off < c->out_len) {
		n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, CLIENT_SEND_FLAGS);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			if (errno == EPIPE || errno == ECONNRESET) {
				client_gone(c, errno);
				return 0;
			}
			return client_io_error(c, "send", errno);
		}
		c->out_off += (size_t)n;
	}
	c->out_off = c->out_len = 0;
	return 0;
}

/*
 * Send one response and len bytes of pages after it; keep what the socket
 * does not take in the output buffer. @return 0, or -1 closed.
 */
static int client_reply(struct client *c, Ramster__Response *rsp, const uint8_t *pages, size_t len)
{
	Ramster__Response small = RAMSTER__RESPONSE__INIT;
	struct msghdr mh = {0};
	struct iovec iov[2];
	size_t mlen = ramster__response__get_packed_size(rsp), head, sent;
	ssize_t n;

	if (mlen > WIRE_RESP_MSG_MAX) {
		/* a listing too long for the wire: answer, but with an error */
		log_warn("client %llu: reply of %zu bytes exceeds the wire limit",
			 (unsigned long long)c->id, mlen);
		small.seq = rsp->seq;
		small.result = -EMSGSIZE;
		rsp = &small;
		mlen = ramster__response__get_packed_size(rsp);
		pages = NULL;
		len = 0;
	}
	head = WIRE_HDR_SIZE + mlen;
	if (client_reserve(&c->out, &c->out_cap, head)) {
		c->l->env->stats->oom_closes++;
		client_close(c, "out of memory for a reply");
		return -1;
	}
	wire_hdr_encode(c->out, WIRE_RESPONSE, (uint32_t)mlen, (uint32_t)len);
	ramster__response__pack(rsp, c->out + WIRE_HDR_SIZE);
	iov[0].iov_base = c->out;
	iov[0].iov_len = head;
	iov[1].iov_base = (void *)pages;
	iov[1].iov_len = len;
	mh.msg_iov = iov;
	mh.msg_iovlen = len ? 2 : 1;
	do
		n = sendmsg(c->fd, &mh, CLIENT_SEND_FLAGS);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno == EPIPE || errno == ECONNRESET) {
			client_gone(c, errno);
			return 0;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return client_io_error(c, "send", errno);
		n = 0;
	}
	sent = (size_t)n;
	if (sent == head + len)
		return 0;

	c->l->env->stats->write_waits++;
	if (sent < head) {
		c->out_off = sent;
		c->out_len = head;
		sent = 0;
	} else {
		c->out_off = c->out_len = 0;
		sent -= head;
	}
	if (client_reserve(&c->out, &c->out_cap, c->out_len + (len - sent))) {
		c->l->env->stats->oom_closes++;
		client_close(c, "out of memory for a reply");
		return -1;
	}
	if (len - sent)
		memcpy(c->out + c->out_len, pages + sent, len - sent);
	c->out_len += len - sent;
	return 0;
}

/* ---- requests ----------------------------------------------------------------- */

static struct tmem_oid client_oid(const Ramster__Item *it)
{
	struct tmem_oid oid = {{it->oid0, it->oid1, it->oid2}};

	return oid;
}

/* STATS: every counter of the node, names copied (the walk may reuse its buffers). */
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

static int client_do_stats(struct client *c, Ramster__Response *rsp)
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
static int client_do_peers(struct client *c, Ramster__Response *rsp)
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

#define CLIENT_STATUS_KEYS 9

static int client_do_status(struct client *c, Ramster__Response *rsp)
{
	const struct client_env *env = c->l->env;
	Ramster__KeyValue kv[CLIENT_STATUS_KEYS], *ptrs[CLIENT_STATUS_KEYS];
	char pid[24], uptime[24], local_mb[24], clients[24];
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
	};
	int i;

	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	snprintf(uptime, sizeof(uptime), "%llu", (unsigned long long)stats_uptime_s(env->stats));
	snprintf(local_mb, sizeof(local_mb), "%llu", (unsigned long long)env->local_mb);
	snprintf(clients, sizeof(clients), "%llu", (unsigned long long)env->stats->clients);
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
static int client_do_reload(struct client *c, Ramster__Response *rsp)
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

/* POOLS: every pool of the directory with its tmem figures. */
struct client_pool_list {
	struct tmem *t;
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

	if (pl->err)
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

static int client_do_pools(struct client *c, Ramster__Response *rsp)
{
	const struct client_env *env = c->l->env;
	struct client_pool_list pl = {.t = zcache_tmem(env->zcache)};
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
static int client_do_exports(struct client *c, Ramster__Response *rsp)
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

static int client_process(struct client *c);

/* Hits are at scratch + i * page: move them together. @return their bytes. */
static size_t client_pack_hits(struct client *c, size_t n)
{
	size_t i, hits = 0;

	for (i = 0; i < n; i++) {
		if (c->results[i])
			continue;
		if (hits != i)
			memmove(c->scratch + hits * WIRE_PAGE_SIZE, c->scratch + i * WIRE_PAGE_SIZE,
				WIRE_PAGE_SIZE);
		hits++;
	}
	return hits * WIRE_PAGE_SIZE;
}

/* The held request is answered: drop its frame and go on with the next ones. */
static void client_resume(struct client *c)
{
	memmove(c->in, c->in + c->held, c->in_len - c->held);
	c->in_len -= c->held;
	c->held = 0;
	c->busy = false;
	c->req = NULL;
	client_process(c);
}

static void client_get_finish(struct client *c)
{
	Ramster__Response rsp = RAMSTER__RESPONSE__INIT;
	size_t n = c->req->n_items;

	rsp.seq = c->req->seq;
	rsp.results = c->results;
	rsp.n_results = n;
	if (!c->gone && client_reply(c, &rsp, c->scratch, client_pack_hits(c, n)))
		return;
	client_resume(c);
}

static void client_get_done(void *arg, int result)
{
	struct client_slot *s = arg;
	struct client *c = s->c;

	c->results[s->i] = result;
	if (--c->pending)
		return;
	if (c->closed)
		client_free(c);
	else
		client_get_finish(c);
}

/*
 * GET: local pages are copied out at once; remote ones are fetched
 * (repatriate) while the request waits. @return 0 answered, 1 waiting, -1 closed.
 */
static int client_do_get(struct client *c, const Ramster__Request *req, Ramster__Response *rsp,
			 uint32_t pool)
{
	const struct client_env *env = c->l->env;
	struct tmem *t = zcache_tmem(env->zcache);
	struct tmem_pool_info info = {0};
	size_t i, n = req->n_items;
	bool destructive;

	if (n > c->scratch_pages) {
		uint8_t *s = realloc(c->scratch, n * WIRE_PAGE_SIZE);

		if (!s) {
			rsp->result = -ENOMEM;
			return client_reply(c, rsp, NULL, 0);
		}
		c->scratch = s;
		c->scratch_pages = n;
	}
	tmem_pool_info(t, pool, &info);
	destructive = !(info.flags & (TMEM_PERSISTENT | TMEM_SHARED));
	c->pending = 1; /* held while the gets start: a callback may run at once */
	c->req = req;
	for (i = 0; i < n; i++) {
		struct tmem_oid oid = client_oid(req->items[i]);
		uint8_t *page = c->scratch + i * WIRE_PAGE_SIZE;
		uint64_t pampd;
		int rc = tmem_get_ex(t, pool, &oid, req->items[i]->index, page, &pampd);

		if (rc == -EREMOTE && env->remote) {
			struct tmem_handle h = {pool, oid, req->items[i]->index};

			c->slots[i] = (struct client_slot){c, (unsigned)i};
			c->pending++;
			remote_get(env->remote, &h, info.flags & TMEM_PERSISTENT, destructive, pampd,
				   page, client_get_done, &c->slots[i]);
			continue;
		}
		if (rc == -EREMOTE) /* no collective any more: the page is lost */
			rc = (info.flags & TMEM_PERSISTENT) ? -EIO : -ENOENT;
		c->results[i] = rc;
	}
	if (--c->pending) {
		env->stats->remote_waits++;
		return 1;
	}
	rsp->results = c->results;
	rsp->n_results = n;
	return client_reply(c, rsp, c->scratch, client_pack_hits(c, n));
}

static void client_put_room(void *arg);

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
 * @return 0 answered, 1 waiting, -1 closed.
 */
static int client_do_drain(struct client *c, const Ramster__Request *req)
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
 * their link. @return 0 answered, 1 waiting, -1 closed.
 */
static int client_do_ping(struct client *c, const Ramster__Request *req, size_t payload_off)
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
 * collective. @return 0 answered, 1 waiting, -1 closed.
 */
static int client_put_run(struct client *c)
{
	const struct client_env *env = c->l->env;
	struct tmem *t = zcache_tmem(env->zcache);
	const Ramster__Request *req = c->req;
	Ramster__Response rsp = RAMSTER__RESPONSE__INIT;
	size_t i;

	for (i = c->next_item; i < req->n_items; i++) {
		struct tmem_oid oid = client_oid(req->items[i]);
		int rc = tmem_put(t, c->pool, &oid, req->items[i]->index,
				  c->in + c->payload_off + i * WIRE_PAGE_SIZE);

		if (rc == -ENOSPC && c->pers && env->remote) {
			ev_tstamp now = ev_now(env->loop);

			if (!c->wait_start) {
				c->wait_start = now;
				env->stats->put_room_waits++;
			}
			if (now - c->wait_start < CLIENT_ROOM_WAIT) {
				c->next_item = i;
				c->room = remote_wait_room(env->remote, CLIENT_ROOM_STEP_MS,
							   client_put_room, c);
				return 1;
			}
			env->stats->put_room_refused++;
		}
		c->results[i] = rc;
		c->wait_start = 0;
	}
	rsp.seq = req->seq;
	rsp.results = c->results;
	rsp.n_results = req->n_items;
	return client_reply(c, &rsp, NULL, 0);
}

static void client_put_room(void *arg)
{
	struct client *c = arg;

	c->room = NULL;
	if (client_put_run(c))
		return; /* waiting again, or closed */
	client_resume(c);
}

/*
 * Run one decoded request and answer it. payload_off: where its payload
 * starts in c->in. @return 0 answered, 1 waiting (c->busy), -1 c was closed.
 */
static int client_dispatch(struct client *c, const Ramster__Request *req, size_t payload_off)
{
	const struct client_env *env = c->l->env;
	struct tmem *t = zcache_tmem(env->zcache);
	Ramster__Response rsp = RAMSTER__RESPONSE__INIT;
	struct tmem_oid oid;
	unsigned flags;
	uint32_t pool = 0;
	int rc;

	rsp.seq = req->seq;
	if ((unsigned)req->op < STATS_OPS)
		env->stats->requests[req->op]++;
	switch (req->op) {
	case RAMSTER__OP__OP_POOL_NEW:
		flags = ((req->flags & RAMSTER_PERSISTENT) ? TMEM_PERSISTENT : 0) |
			((req->flags & RAMSTER_SHARED) ? TMEM_SHARED : 0);
		rsp.result =
		    pools_new(c->pools, flags, (flags & TMEM_SHARED) ? req->uuid.data : NULL);
		break;
	case RAMSTER__OP__OP_POOL_DESTROY:
		rsp.result = pools_release(c->pools, req->pool);
		break;
	case RAMSTER__OP__OP_PUT: {
		struct tmem_pool_info info = {0};

		rsp.result = pools_resolve(c->pools, req->pool, &pool);
		if (rsp.result)
			break; /* the batch fails whole: no per-item results */
		tmem_pool_info(t, pool, &info);
		c->req = req;
		c->pool = pool;
		c->pers = info.flags & TMEM_PERSISTENT;
		c->payload_off = payload_off;
		c->next_item = 0;
		c->wait_start = 0;
		rc = client_put_run(c);
		if (rc == 1)
			env->stats->remote_waits++;
		return rc;
	}
	case RAMSTER__OP__OP_GET:
		rsp.result = pools_resolve(c->pools, req->pool, &pool);
		if (rsp.result)
			break;
		return client_do_get(c, req, &rsp, pool);
	case RAMSTER__OP__OP_PEERS:
		return client_do_peers(c, &rsp);
	case RAMSTER__OP__OP_PING:
		return client_do_ping(c, req, payload_off);
	case RAMSTER__OP__OP_FLUSH:
	case RAMSTER__OP__OP_FLUSH_OBJECT:
		rc = pools_resolve(c->pools, req->pool, &pool);
		if (!rc) {
			oid = client_oid(req->items[0]);
			if (req->op == RAMSTER__OP__OP_FLUSH)
				rc = tmem_flush_page(t, pool, &oid, req->items[0]->index);
			else
				rc = tmem_flush_object(t, pool, &oid);
		}
		rsp.result = rc;
		break;
	case RAMSTER__OP__OP_STATS:
		return client_do_stats(c, &rsp);
	case RAMSTER__OP__OP_STATUS:
		return client_do_status(c, &rsp);
	case RAMSTER__OP__OP_POOLS:
		return client_do_pools(c, &rsp);
	case RAMSTER__OP__OP_EXPORTS:
		return client_do_exports(c, &rsp);
	case RAMSTER__OP__OP_DRAIN:
		return client_do_drain(c, req);
	case RAMSTER__OP__OP_RELOAD:
		return client_do_reload(c, &rsp);
	default:
		rsp.result = -EOPNOTSUPP; /* the decoder lets no other op through */
		break;
	}
	return client_reply(c, &rsp, NULL, 0);
}

/* A frame that does not decode: the connection goes. @return -1. */
static int client_bad_frame(struct client *c, const char *why)
{
	c->l->env->stats->bad_frames++;
	log_warn("client %llu: bad frame: %s", (unsigned long long)c->id, why);
	client_close(c, "bad frame");
	return -1;
}

/*
 * Run every complete frame in the input buffer, in order, until output is
 * pending. @return 0, or -1 when c was closed.
 */
static int client_process(struct client *c)
{
	struct wire_hdr h;
	Ramster__Request *req;
	const char *why;
	size_t pos = 0, avail, need;

	int rc;

	if (c->busy)
		return 0; /* the held request goes first */
	while (c->out_off == c->out_len) {
		avail = c->in_len - pos;
		if (avail < WIRE_HDR_SIZE)
			break;
		if (wire_hdr_decode(c->in + pos, WIRE_REQUEST, &h, &why))
			return client_bad_frame(c, why);
		need = WIRE_HDR_SIZE + (size_t)h.msg_len + h.payload_len;
		if (avail < need) {
			if (need > c->in_cap) {
				memmove(c->in, c->in + pos, avail);
				c->in_len = avail;
				pos = 0;
				if (client_reserve(&c->in, &c->in_cap, need)) {
					c->l->env->stats->oom_closes++;
					client_close(c, "out of memory for a request");
					return -1;
				}
			}
			break;
		}
		wire_arena_reset(&c->arena);
		if (wire_request_decode(&h, c->in + pos + WIRE_HDR_SIZE, &c->arena, &req, &why))
			return client_bad_frame(c, why);
		rc = c->gone ? 0 : client_dispatch(c, req, pos + WIRE_HDR_SIZE + h.msg_len);
		if (rc < 0)
			return -1;
		if (rc == 1) {
			/* held: keep its frame at the front until it is answered */
			c->busy = true;
			if (pos) {
				memmove(c->in, c->in + pos, c->in_len - pos);
				c->in_len -= pos;
				c->payload_off -= pos;
			}
			c->held = need;
			client_watch(c, EV_READ);
			return 0;
		}
		pos += need;
	}
	if (pos) {
		memmove(c->in, c->in + pos, c->in_len - pos);
		c->in_len -= pos;
	}
	/* a frame still arriving: time it (client_sweep_cb closes it when it
	 * takes longer than frame_timeout; a finished frame restarts the clock) */
	if (c->in_len && c->out_off == c->out_len) {
		if (!c->partial_since || pos)
			c->partial_since = ev_now(c->l->env->loop);
	} else {
		c->partial_since = 0;
	}
	client_watch(c, c->out_off < c->out_len ? EV_WRITE : EV_READ);
	return 0;
}

/* Close the connections whose frame has been arriving for longer than frame_timeout. */
static void client_sweep_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct client_listener *l =
	    (struct client_listener *)((char *)w - offsetof(struct client_listener, sweep));
	struct client *c, *next;
	ev_tstamp now = ev_now(loop);

	for (c = l->clients; c; c = next) {
		next = c->next;
		if (c->busy || !c->partial_since || now - c->partial_since < l->frame_timeout)
			continue;
		l->env->stats->frame_timeouts++;
		log_warn("client %llu: a frame incomplete for %.0f s (%zu bytes): closing",
			 (unsigned long long)c->id, now - c->partial_since, c->in_len);
		client_close(c, "frame timeout");
	}
}

static void client_read(struct client *c)
{
	ssize_t n;

	if (c->in_len == c->in_cap &&
	    client_reserve(&c->in, &c->in_cap, c->in_cap + CLIENT_IN_MIN)) {
		c->l->env->stats->oom_closes++;
		client_close(c, "out of memory for a request");
		return;
	}
	n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			client_io_error(c, "recv", errno);
		return;
	}
	if (n == 0) {
		if (c->in_len > c->held) /* a frame cut short is a bad frame (a held one is whole) */
			client_bad_frame(c, "truncated frame (end of stream)");
		else
			client_close(c, "end of stream");
		return;
	}
	c->in_len += (size_t)n;
	client_process(c);
}

static void client_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct client *c = (struct client *)w;

	if (revents & EV_WRITE) {
		if (client_flush(c))
			return;
		if (c->out_off == c->out_len)
			client_process(c); /* frames that waited; resumes reading */
		return;
	}
	if (revents & EV_READ)
		client_read(c);
}

static void client_new(struct client_listener *l, int fd)
{
	const struct client_env *env = l->env;
	struct client *c = calloc(1, sizeof(*c));
	struct ucred cred = {0};
	socklen_t len = sizeof(cred);

	if (!c)
		goto fail;
	c->fd = fd;
	c->l = l;
	c->id = ++l->next_id;
	if (wire_arena_init(&c->arena, CLIENT_ARENA_SIZE))
		goto free_client;
	if (client_reserve(&c->in, &c->in_cap, CLIENT_IN_MIN))
		goto free_arena;
	c->pools = pools_client_new(env->pools, c->id);
	if (!c->pools)
		goto free_in;
	ev_io_init(&c->io, client_io_cb, fd, EV_READ);
	ev_io_start(env->loop, &c->io);
	c->next = l->clients;
	if (c->next)
		c->next->prev = c;
	l->clients = c;
	env->stats->clients++;
	env->stats->clients_total++;
	c->uid = (uid_t)-1;
	if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) && (c->uid = cred.uid, 1))
		log_debug("client %llu connected (pid %ld uid %ld)", (unsigned long long)c->id,
			  (long)cred.pid, (long)cred.uid);
	return;

free_in:
	free(c->in);
free_arena:
	wire_arena_fini(&c->arena);
free_client:
	free(c);
fail:
	env->stats->oom_closes++;
	close(fd);
}

/* ---- listener ----------------------------------------------------------------- */

static void client_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct client_listener *l = (struct client_listener *)w;
	int i, fd;

	for (i = 0; i < CLIENT_ACCEPT_BURST; i++) {
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			int sndbuf = WIRE_SNDBUF; /* a whole batch reply in one send */

			(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
			client_new(l, fd);
			continue;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		l->env->stats->accept_errors++;
		if (ev_now(loop) - l->last_warn >= CLIENT_WARN_EVERY) {
			log_warn("accept on %s: %s (pausing accepts)", l->env->socket_path,
				 strerror(errno));
			l->last_warn = ev_now(loop);
		}
		/* out of descriptors or memory: wait rather than spin on a ready socket */
		ev_io_stop(loop, &l->io);
		ev_timer_set(&l->retry, CLIENT_ACCEPT_PAUSE, 0.);
		ev_timer_start(loop, &l->retry);
		return;
	}
}

static void client_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct client_listener *l =
	    (struct client_listener *)((char *)w - offsetof(struct client_listener, retry));

	ev_io_start(loop, &l->io);
}

/* mkdir -p the directory part of path, new directories 0755. @return 0 or -errno. */
static int client_make_parent(const char *path, char *err, size_t errlen)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash = strrchr(strcpy(dir, path), '/'), *p, save;
	struct stat st;

	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (!stat(dir, &st))
		return 0;
	for (p = dir + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		save = *p;
		*p = '\0';
		if (mkdir(dir, 0755) == 0) {
			(void)chmod(dir, 0755); /* whatever the umask */
		} else if (errno != EEXIST) {
			int e = errno;

			snprintf(err, errlen, "cannot create directory %s: %s", dir, strerror(e));
			return -e;
		}
		*p = save;
		if (!save)
			break;
	}
	return 0;
}

/*
 * Is a daemon answering on path? @return 1 yes, 0 no (stale), or -errno with
 * err set when the probe itself failed.
 */
static int client_probe(const struct sockaddr_un *sa, char *err, size_t errlen)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), e;

	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "socket: %s", strerror(e));
		return -e;
	}
	if (!connect(fd, (const struct sockaddr *)sa, sizeof(*sa))) {
		close(fd);
		return 1;
	}
	e = errno;
	close(fd);
	if (e == EAGAIN || e == EINPROGRESS) /* listening, backlog full */
		return 1;
	if (e == ECONNREFUSED || e == ENOENT)
		return 0;
	snprintf(err, errlen, "cannot probe %s: %s", sa->sun_path, strerror(e));
	return -e;
}

int client_listen(const struct client_env *env, struct client_listener **out, char *err,
		  size_t errlen)
{
	const char *path = env->socket_path;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct client_listener *l;
	struct stat st;
	mode_t mask;
	int rc, e;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long (at most %zu bytes): %s",
			 sizeof(sa.sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	rc = client_make_parent(path, err, errlen);
	if (rc)
		return rc;
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket", path);
			return -EEXIST;
		}
		rc = client_probe(&sa, err, errlen);
		if (rc < 0)
			return rc;
		if (rc) {
			snprintf(err, errlen, "another ramsterd is listening on %s", path);
			return -EADDRINUSE;
		}
		if (unlink(path) && errno != ENOENT) {
			e = errno;
			snprintf(err, errlen, "cannot remove stale socket %s: %s", path,
				 strerror(e));
			return -e;
		}
		log_notice("removed stale socket %s", path);
	}

	l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	l->env = env;
	l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0) {
		e = errno;
		snprintf(err, errlen, "socket: %s", strerror(e));
		goto free_listener;
	}
	mask = umask(0117); /* the socket is born 0660: no window with a wider mode */
	rc = bind(l->fd, (struct sockaddr *)&sa, sizeof(sa));
	e = errno;
	umask(mask);
	if (rc) {
		snprintf(err, errlen, "cannot bind %s: %s", path, strerror(e));
		goto close_fd;
	}
	if (chmod(path, 0660) || lstat(path, &st)) {
		e = errno;
		snprintf(err, errlen, "cannot set the mode of %s: %s", path, strerror(e));
		goto unlink_path;
	}
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	if (listen(l->fd, SOMAXCONN)) {
		e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
		goto unlink_path;
	}
	ev_io_init(&l->io, client_accept_cb, l->fd, EV_READ);
	ev_io_start(env->loop, &l->io);
	ev_timer_init(&l->retry, client_retry_cb, CLIENT_ACCEPT_PAUSE, 0.);
	l->last_warn = -CLIENT_WARN_EVERY;
	{
		const char *v = getenv("RAMSTER_FRAME_TIMEOUT_MS");
		long ms = v && *v ? strtol(v, NULL, 10) : 30000;

		l->frame_timeout = (ms > 0 ? ms : 30000) / 1000.0;
	}
	ev_timer_init(&l->sweep, client_sweep_cb, l->frame_timeout / 4, l->frame_timeout / 4);
	ev_timer_start(env->loop, &l->sweep);
	*out = l;
	return 0;

unlink_path:
	unlink(path);
close_fd:
	close(l->fd);
free_listener:
	free(l);
	return -e;
}

void client_listener_close(struct client_listener *l)
{
	struct stat st;

	if (!l)
		return;
	while (l->clients)
		client_close(l->clients, "node stopping");
	ev_io_stop(l->env->loop, &l->io);
	ev_timer_stop(l->env->loop, &l->retry);
	ev_timer_stop(l->env->loop, &l->sweep);
	close(l->fd);
	if (!lstat(l->env->socket_path, &st) && st.st_dev == l->dev && st.st_ino == l->ino)
		unlink(l->env->socket_path);
	free(l);
}
