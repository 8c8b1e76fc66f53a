/*
 * reconnect.c - a connection that outlives its socket: the pools it made,
 * known by the caller's ids, and the redial that attaches them again.
 *
 * The node gives each pool a random token (POOL_NEW's reply) and keeps a
 * dropped client's pools for its reattach_grace_ms. When a call finds the
 * stream gone (end of stream, reset, broken pipe, or closed before), the
 * socket is dialled again with a backoff of 10 ms doubling to 500 ms for up
 * to r->reconnect_ms, every pool attached again by its token (OP_ATTACH), and
 * the call sent again: the caller sees a delay, not an error. The node may
 * give a pool another id on the new connection; the caller keeps its own.
 * A pool the node no longer has (a cold restart, the grace ran out) is
 * stale: its calls get -ESTALE, never another pool's pages.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/ramster_int.h"

#define LIB_RECONNECT_MS_DEFAULT 30000
#define LIB_RECONNECT_MS_MAX	 86400000 /* a day */
#define LIB_BACKOFF_FIRST_MS	 10
#define LIB_BACKOFF_MAX_MS	 500
#define LIB_POOLS_MIN		 8

uint32_t lib_env_reconnect_ms(void)
{
	const char *v = secure_getenv("RAMSTER_RECONNECT_MS");
	unsigned long ms;
	char *end;

	if (!v || !*v)
		return LIB_RECONNECT_MS_DEFAULT;
	ms = strtoul(v, &end, 10);
	if (*end || *v == '-' || ms > LIB_RECONNECT_MS_MAX)
		return LIB_RECONNECT_MS_DEFAULT; /* not a number of milliseconds: the default */
	return (uint32_t)ms;
}

/* ---- the caller's pool ids --------------------------------------------------------- */

static int lib_pools_grow(ramster *r, size_t n)
{
	struct lib_pool *p;
	size_t cap = r->n_pools ? r->n_pools : LIB_POOLS_MIN;

	if (n <= r->n_pools)
		return 0;
	while (cap < n)
		cap *= 2;
	p = realloc(r->pools, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	memset(p + r->n_pools, 0, (cap - r->n_pools) * sizeof(*p));
	r->pools = p;
	r->n_pools = cap;
	return 0;
}

static int lib_pool_free_id(const ramster *r)
{
	size_t i;

	for (i = 0; i < r->n_pools; i++)
		if (r->pools[i].state == LIB_POOL_FREE)
			return (int)i;
	return -1;
}

int lib_pool_reserve(ramster *r)
{
	if (lib_pool_free_id(r) >= 0)
		return 0;
	return lib_pools_grow(r, r->n_pools + 1);
}

int lib_pool_add(ramster *r, int node_id, const unsigned char *token)
{
	struct lib_pool *p;
	int id = node_id;

	/* the node's id while it is free: without a reconnect the two never differ */
	if (lib_pools_grow(r, (size_t)node_id + 1) || r->pools[id].state != LIB_POOL_FREE)
		id = lib_pool_free_id(r);
	if (id < 0)
		return -ENOMEM;
	p = &r->pools[id];
	p->state = LIB_POOL_LIVE;
	p->node_id = node_id;
	p->has_token = token != NULL;
	if (token)
		memcpy(p->token, token, LIB_TOKEN_LEN);
	return id;
}

void lib_pool_forget(ramster *r, int id)
{
	if (id >= 0 && (size_t)id < r->n_pools)
		memset(&r->pools[id], 0, sizeof(r->pools[id]));
}

/* The node's id of the caller's pool id. @return 0, -ENOENT (none), -ESTALE (lost). */
static int lib_pool_node_id(const ramster *r, int id, int *node_id)
{
	const struct lib_pool *p;

	if (id < 0 || (size_t)id >= r->n_pools || r->pools[id].state == LIB_POOL_FREE)
		return -ENOENT;
	p = &r->pools[id];
	if (p->state == LIB_POOL_STALE)
		return -ESTALE;
	*node_id = p->node_id;
	return 0;
}

/* ---- the redial ---------------------------------------------------------------------- */

/* The errors of a stream that is gone (not of a request the node refused). */
static bool lib_broken(int err)
{
	return err == -ECONNRESET || err == -EPIPE || err == -ENOTCONN;
}

static uint64_t lib_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void lib_sleep_ms(uint64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * Attach pool p again on the new connection. @return 0 (attached, or made
 * stale: the node said no), or a broken stream's -errno.
 */
static int lib_pool_attach(ramster *r, struct lib_pool *p)
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;
	Ramster__Response *rsp;
	int err;

	if (!p->has_token) {
		p->state = LIB_POOL_STALE; /* an older node: nothing to attach it by */
		return 0;
	}
	req.op = RAMSTER__OP__OP_ATTACH;
	req.pool = p->node_id; /* the same id if it is free there */
	req.token.data = p->token;
	req.token.len = LIB_TOKEN_LEN;
	err = lib_call_once(r, &req, NULL, 1, &rsp);
	if (err)
		return err; /* the stream is gone or out of step: this dial failed */
	if (rsp->result >= 0)
		p->node_id = rsp->result;
	else
		p->state = LIB_POOL_STALE; /* -ENOENT: the node forgot it; -EACCES: not ours */
	ramster__response__free_unpacked(rsp, &r->arena.pa);
	return 0;
}

/* Dial once and attach every live pool. @return 0 or -errno (then the connection is closed). */
static int lib_redial_once(ramster *r)
{
	size_t i;
	int err;

	lib_break(r);
	err = lib_dial(r->path, &r->fd);
	if (err)
		return err;
	for (i = 0; i < r->n_pools; i++) {
		if (r->pools[i].state != LIB_POOL_LIVE)
			continue;
		err = lib_pool_attach(r, &r->pools[i]);
		if (err) {
			lib_break(r);
			return err;
		}
	}
	return 0;
}

/* Dial again with backoff within r->reconnect_ms. @return 0, or the last try's -errno. */
static int lib_reconnect(ramster *r)
{
	uint64_t deadline = lib_now_ms() + r->reconnect_ms, delay = LIB_BACKOFF_FIRST_MS, now;
	int err;

	for (;;) {
		err = lib_redial_once(r);
		if (!err) {
			r->reconnects++;
			return 0;
		}
		now = lib_now_ms();
		if (now >= deadline)
			return err;
		lib_sleep_ms(delay < deadline - now ? delay : deadline - now);
		delay = delay * 2 < LIB_BACKOFF_MAX_MS ? delay * 2 : LIB_BACKOFF_MAX_MS;
	}
}

static bool lib_op_has_pool(Ramster__Op op)
{
	return op == RAMSTER__OP__OP_PUT || op == RAMSTER__OP__OP_GET ||
	       op == RAMSTER__OP__OP_FLUSH || op == RAMSTER__OP__OP_FLUSH_OBJECT ||
	       op == RAMSTER__OP__OP_POOL_DESTROY;
}

int lib_call(ramster *r, Ramster__Request *req, struct ramster_iov *v, int use_arena,
	     Ramster__Response **out)
{
	int id = req->pool, err;
	bool tried = false;

	for (;;) {
		/* mapped again each try: a reconnect may move or lose the pool */
		if (lib_op_has_pool(req->op)) {
			err = lib_pool_node_id(r, id, &req->pool);
			if (err)
				break;
		}
		err = lib_call_once(r, req, v, use_arena, out);
		/* a connection the node never answered was refused (max_clients and
		 * the like), not broken: that is the caller's error, as before */
		if (!lib_broken(err) || !r->reconnect_ms || !r->answered || tried)
			break;
		/* one redial (within the budget) a call: a node that drops every
		 * connection at once gets an error, not a loop */
		tried = true;
		if (lib_reconnect(r))
			break;
	}
	req->pool = id;
	return err;
}

void lib_pools_release(ramster *r)
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;
	Ramster__Response *rsp;
	size_t i;

	req.op = RAMSTER__OP__OP_POOL_DESTROY;
	for (i = 0; i < r->n_pools && r->fd >= 0; i++) {
		if (r->pools[i].state != LIB_POOL_LIVE)
			continue;
		req.pool = r->pools[i].node_id;
		if (!lib_call_once(r, &req, NULL, 1, &rsp))
			ramster__response__free_unpacked(rsp, &r->arena.pa);
	}
}

/* ---- the public knobs ------------------------------------------------------------------- */

int ramster_set_reconnect_ms(ramster *r, uint32_t ms)
{
	if (!r || ms > LIB_RECONNECT_MS_MAX)
		return -EINVAL;
	r->reconnect_ms = ms;
	return 0;
}

uint64_t ramster_reconnects(const ramster *r)
{
	return r ? r->reconnects : 0;
}

int ramster_fileno(const ramster *r)
{
	if (!r)
		return -EINVAL;
	return r->fd >= 0 ? r->fd : -ENOTCONN;
}
