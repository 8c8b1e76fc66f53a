/*
 * client.c - the client socket's connections (client.h): buffers, frames,
 * and the data requests, which go through the store (node/store.h). The
 * admin requests are in admin.c, the listener in client_listener.c.
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

#include "node/client/client_int.h"
#include "node/clock.h"
#include "node/log.h"
#include "node/spin.h"
#include "ramster.h"

/* ---- buffers ------------------------------------------------------------------ */

#define CLIENT_OUT_MAX (WIRE_HDR_SIZE + WIRE_RESP_MSG_MAX + WIRE_PAYLOAD_MAX)

/*
 * Make *buf hold at least need bytes (never more than max), keeping its
 * contents. @return 0 or -ENOMEM.
 */
static int client_reserve(uint8_t **buf, size_t *cap, size_t need, size_t max)
{
	uint8_t *p;
	size_t n = *cap * 2;

	if (need <= *cap)
		return 0;
	if (need > max)
		return -ENOMEM; /* the wire's limits make this unreachable */
	if (n < need)
		n = need; /* a frame's exact size: no doubling past 1 MiB */
	if (n > max)
		n = max;
	p = realloc(*buf, n);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n;
	return 0;
}

/* ---- connections -------------------------------------------------------------- */

void client_free(struct client *c)
{
	wire_arena_fini(&c->arena);
	free(c->in);
	free(c->out);
	free(c->scratch);
	free(c);
}

void client_close(struct client *c, const char *why)
{
	struct client_listener *l = c->l;
	struct node_stats *st = l->env->stats;

	store_req_cancel(&c->put);
	ev_io_stop(l->env->loop, &c->io);
	close(c->fd);
	/* its pools wait reattach_grace_ms for it to reconnect (pools.h) */
	pools_client_close(c->pools, clock_now_ns() / 1000000u);
	client_expire_arm(l);
	users_disconnect(l->env->users, c->user);
	c->user = NULL;
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

	if ((c->io.events & (EV_READ | EV_WRITE)) == events && (events || !ev_is_active(&c->io)))
		return;
	ev_io_stop(loop, &c->io);
	ev_io_set(&c->io, c->fd, events);
	if (events)
		ev_io_start(loop, &c->io); /* 0: a held request; nothing is read or written */
}

/* Close on a socket error. @return CONN_CLOSED. */
static int client_io_error(struct client *c, const char *what, int err)
{
	char why[128];

	c->l->env->stats->io_errors++;
	snprintf(why, sizeof(why), "%s: %s", what, strerror(err));
	client_close(c, why);
	return CONN_CLOSED;
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

/* Send what is pending. @return 0 (maybe still pending), or CONN_CLOSED. */
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
		c->user->bytes_out += (uint64_t)n;
	}
	c->out_off = c->out_len = 0;
	return 0;
}

/*
 * Send one response and len bytes of pages after it; keep what the socket
 * does not take in the output buffer. @return 0, or CONN_CLOSED.
 */
int client_reply(struct client *c, Ramster__Response *rsp, const uint8_t *pages, size_t len)
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
	if (client_reserve(&c->out, &c->out_cap, head, CLIENT_OUT_MAX)) {
		c->l->env->stats->oom_closes++;
		client_close(c, "out of memory for a reply");
		return CONN_CLOSED;
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
	c->user->bytes_out += sent;
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
	if (client_reserve(&c->out, &c->out_cap, c->out_len + (len - sent), CLIENT_OUT_MAX)) {
		c->l->env->stats->oom_closes++;
		client_close(c, "out of memory for a reply");
		return CONN_CLOSED;
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
void client_resume(struct client *c)
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
 * (repatriate) while the request waits. @return 0 answered, 1 waiting, CONN_CLOSED.
 */
static int client_do_get(struct client *c, const Ramster__Request *req, Ramster__Response *rsp,
			 uint32_t pool)
{
	const struct client_env *env = c->l->env;
	size_t i, n = req->n_items;

	if (n > c->scratch_pages) {
		uint8_t *s = realloc(c->scratch, n * WIRE_PAGE_SIZE);

		if (!s) {
			rsp->result = -ENOMEM;
			return client_reply(c, rsp, NULL, 0);
		}
		c->scratch = s;
		c->scratch_pages = n;
	}
	c->pending = 1; /* held while the gets start: a callback may run at once */
	c->req = req;
	for (i = 0; i < n; i++) {
		struct tmem_oid oid = client_oid(req->items[i]);
		int rc;

		c->slots[i] = (struct client_slot){c, (unsigned)i};
		c->pending++;
		rc = store_get(env->store, pool, &oid, req->items[i]->index,
			       c->scratch + i * WIRE_PAGE_SIZE, client_get_done, &c->slots[i]);
		if (rc == STORE_PENDING)
			continue;
		c->pending--;
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

static void client_put_room(void *arg, int result);

static int client_put_run(struct client *c)
{
	const struct client_env *env = c->l->env;
	const Ramster__Request *req = c->req;
	Ramster__Response rsp = RAMSTER__RESPONSE__INIT;
	size_t i;

	for (i = c->next_item; i < req->n_items; i++) {
		struct tmem_oid oid = client_oid(req->items[i]);
		bool waited = c->put.wait_start;
		int rc;

		if (!c->quota_left) {
			/* the pool's owner holds its max_mb: refused, not stored */
			c->results[i] = -EDQUOT;
			env->stats->quota_refused++;
			c->put_owner->refused_quota++;
			continue;
		}
		rc = store_put(env->store, &c->put, c->pool, &oid, req->items[i]->index,
				   c->in + c->payload_off + i * WIRE_PAGE_SIZE);

		if (rc == STORE_PENDING) {
			if (!waited)
				env->stats->put_room_waits++;
			c->next_item = i;
			return 1;
		}
		if (rc == -ENOSPC && c->put.waited_out)
			env->stats->put_room_refused++;
		if (!rc && c->quota_left != UINT64_MAX)
			c->quota_left--;
		c->results[i] = rc;
	}
	rsp.seq = req->seq;
	rsp.results = c->results;
	rsp.n_results = req->n_items;
	return client_reply(c, &rsp, NULL, 0);
}

static void client_put_room(void *arg, int result)
{
	struct client *c = arg;
	if (result == -ENOSPC && c->put.waited_out)
		c->l->env->stats->put_room_refused++;
	if (!result && c->quota_left && c->quota_left != UINT64_MAX)
		c->quota_left--;
	c->results[c->next_item++] = result;
	if (client_put_run(c))
		return; /* waiting again, or closed */
	client_resume(c);
}

/* Count a refusal of c's request that the pool directory decided. */
static void client_count_refusal(struct client *c, int rc)
{
	struct node_stats *st = c->l->env->stats;

	if (rc == -EACCES)
		st->access_refused++;
	else if (rc == -EDQUOT)
		st->quota_refused++;
}

/*
 * The operations that change the node or cost its peers (drain, undrain,
 * relayed requests) are for root and the daemon's uid. @return true when c
 * is refused (rsp->result = -EPERM, counted).
 */
static bool client_refuse_unprivileged(struct client *c, Ramster__Response *rsp)
{
	if (c->cred.privileged)
		return false;
	c->l->env->stats->perm_refused++;
	c->user->refused_perm++;
	log_info("client %llu (uid %ld): %s refused: not privileged", (unsigned long long)c->id,
		 (long)c->cred.uid, stats_op_name((unsigned)c->req_op));
	rsp->result = -EPERM;
	return true;
}

/*
 * POOL_NEW and ATTACH: the pool's token goes with its id, for the client to
 * attach it again after a reconnect. token is the reply's buffer.
 */
static void client_pool_reply(struct client *c, Ramster__Response *rsp, unsigned char *token)
{
	client_count_refusal(c, rsp->result);
	if (rsp->result < 0 || pools_token(c->pools, rsp->result, token))
		return;
	rsp->token.data = token;
	rsp->token.len = POOLS_TOKEN_LEN;
}

/*
 * Run one decoded request and answer it. payload_off: where its payload
 * starts in c->in. @return 0 answered, 1 waiting (c->busy), CONN_CLOSED (c was closed).
 */
static int client_dispatch(struct client *c, const Ramster__Request *req, size_t payload_off)
{
	const struct client_env *env = c->l->env;
	Ramster__Response rsp = RAMSTER__RESPONSE__INIT;
	unsigned char token[POOLS_TOKEN_LEN];
	struct tmem_oid oid;
	unsigned flags;
	uint32_t pool = 0;
	int rc;

	rsp.seq = req->seq;
	c->req_op = req->op;
	if ((unsigned)req->op < STATS_OPS)
		env->stats->requests[req->op]++;
	switch (req->op) {
	case RAMSTER__OP__OP_POOL_NEW:
		flags = ((req->flags & RAMSTER_PERSISTENT) ? TMEM_PERSISTENT : 0) |
			((req->flags & RAMSTER_SHARED) ? TMEM_SHARED : 0);
		rsp.result = pools_new_mode(c->pools, flags,
					    (flags & TMEM_SHARED) ? req->uuid.data : NULL, req->mode);
		client_pool_reply(c, &rsp, token);
		break;
	case RAMSTER__OP__OP_ATTACH:
		/* a token of the wrong length is -EINVAL here, the connection stays */
		rsp.result = pools_attach(c->pools, req->token.data, req->token.len, req->pool);
		if (rsp.result == -EACCES)
			log_info("client %llu (uid %ld): attach refused: another uid's pool",
				 (unsigned long long)c->id, (long)c->cred.uid);
		client_pool_reply(c, &rsp, token);
		break;
	case RAMSTER__OP__OP_POOL_DESTROY:
		rsp.result = pools_release(c->pools, req->pool);
		break;
	case RAMSTER__OP__OP_PUT:
		rsp.result = pools_resolve_for(c->pools, req->pool, USERS_WRITE, &pool,
					       &c->put_owner);
		if (rsp.result) {
			client_count_refusal(c, rsp.result);
			break; /* the batch fails whole: no per-item results */
		}
		c->quota_left = UINT64_MAX;
		if (c->put_owner && c->put_owner->max_pages) {
			uint64_t used = pools_owner_pages(env->pools, c->put_owner, NULL);

			c->quota_left = used < c->put_owner->max_pages
					    ? c->put_owner->max_pages - used
					    : 0;
		}
		c->req = req;
		c->pool = pool;
		c->payload_off = payload_off;
		c->next_item = 0;
		store_req_begin(&c->put, client_put_room, c);
		rc = client_put_run(c);
		if (rc == 1)
			env->stats->remote_waits++;
		return rc;
	case RAMSTER__OP__OP_GET:
		rsp.result = pools_resolve_for(c->pools, req->pool, USERS_READ, &pool, NULL);
		if (rsp.result) {
			client_count_refusal(c, rsp.result);
			break;
		}
		return client_do_get(c, req, &rsp, pool);
	case RAMSTER__OP__OP_PEERS:
		return admin_peers(c, &rsp);
	case RAMSTER__OP__OP_PING:
		if (req->node && client_refuse_unprivileged(c, &rsp))
			break; /* it costs the peer and the link: an operator's tool */
		return admin_ping(c, req, payload_off);
	case RAMSTER__OP__OP_FLUSH:
	case RAMSTER__OP__OP_FLUSH_OBJECT:
		rc = pools_resolve_for(c->pools, req->pool, USERS_WRITE, &pool, NULL);
		client_count_refusal(c, rc);
		if (!rc) {
			oid = client_oid(req->items[0]);
			if (req->op == RAMSTER__OP__OP_FLUSH)
				rc = store_flush_page(env->store, pool, &oid, req->items[0]->index);
			else
				rc = store_flush_object(env->store, pool, &oid);
		}
		rsp.result = rc;
		break;
	case RAMSTER__OP__OP_STATS:
		return admin_stats(c, &rsp);
	case RAMSTER__OP__OP_STATUS:
		return admin_status(c, &rsp);
	case RAMSTER__OP__OP_POOLS:
		return admin_pools(c, &rsp);
	case RAMSTER__OP__OP_EXPORTS:
		return admin_exports(c, &rsp);
	case RAMSTER__OP__OP_DRAIN:
		if (client_refuse_unprivileged(c, &rsp))
			break;
		return admin_drain(c, req);
	case RAMSTER__OP__OP_RELOAD:
		return admin_reload(c, &rsp);
	case RAMSTER__OP__OP_RESTART:
		if (client_refuse_unprivileged(c, &rsp))
			break;
		return admin_restart(c, &rsp);
	case RAMSTER__OP__OP_CLIENTS:
		return admin_clients(c, &rsp);
	default:
		rsp.result = -EOPNOTSUPP; /* the decoder lets no other op through */
		break;
	}
	return client_reply(c, &rsp, NULL, 0);
}

/* A frame that does not decode: the connection goes. @return CONN_CLOSED. */
static int client_bad_frame(struct client *c, const char *why)
{
	c->l->env->stats->bad_frames++;
	log_warn("client %llu: bad frame: %s", (unsigned long long)c->id, why);
	client_close(c, "bad frame");
	return CONN_CLOSED;
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
				if (client_reserve(&c->in, &c->in_cap, need, CLIENT_IN_MAX)) {
					c->l->env->stats->oom_closes++;
					client_close(c, "out of memory for a request");
					return CONN_CLOSED;
				}
			}
			break;
		}
		wire_arena_reset(&c->arena);
		if (wire_request_decode(&h, c->in + pos + WIRE_HDR_SIZE, &c->arena, &req, &why))
			return client_bad_frame(c, why);
		rc = c->gone ? 0 : client_dispatch(c, req, pos + WIRE_HDR_SIZE + h.msg_len);
		if (rc < 0)
			return CONN_CLOSED;
		if (rc == 1) {
			/* held: keep its frame at the front until it is answered */
			c->busy = true;
			if (pos) {
				memmove(c->in, c->in + pos, c->in_len - pos);
				c->in_len -= pos;
				c->payload_off -= pos;
			}
			c->held = need;
			/* read no more until it is answered: the node holds this
			 * frame and whatever partial one followed it, no more */
			c->l->env->stats->held_reads_paused++;
			client_watch(c, 0);
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
			c->partial_since = clock_now_s(); /* monotonic */
	} else {
		c->partial_since = 0;
	}
	client_watch(c, c->out_off < c->out_len ? EV_WRITE : EV_READ);
	return 0;
}

/* Close the connections whose frame has been arriving for longer than frame_timeout. */
void client_sweep_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct client_listener *l =
	    container_of(w, struct client_listener, sweep);
	struct client *c, *next;
	ev_tstamp now = clock_now_s();

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

	if (c->busy)
		return; /* a held request reads nothing more (client_process stopped the watcher) */
	if (c->in_len == c->in_cap &&
	    client_reserve(&c->in, &c->in_cap, c->in_cap + CLIENT_IN_MIN, CLIENT_IN_MAX)) {
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
	c->user->bytes_in += (uint64_t)n;
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

void client_new(struct client_listener *l, int fd)
{
	const struct client_env *env = l->env;
	struct client *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		goto fail;
	c->fd = fd;
	c->l = l;
	c->id = ++l->next_id;
	rc = users_cred_read(env->users, fd, &c->cred);
	if (!rc)
		rc = users_connect(env->users, &c->cred, &c->user);
	if (rc) {
		env->stats->clients_refused++;
		if (ev_now(env->loop) - l->last_refusal_warn >= CLIENT_WARN_EVERY) {
			log_warn("client connection of uid %ld (pid %ld) refused: %s",
				 (long)c->cred.uid, (long)c->cred.pid,
				 rc == -EUSERS ? "max_clients reached"
				 : rc == -EMFILE ? "the uid's max_connections reached"
						 : strerror(-rc));
			l->last_refusal_warn = ev_now(env->loop);
		}
		free(c);
		close(fd);
		return;
	}
	if (wire_arena_init(&c->arena, CLIENT_ARENA_SIZE))
		goto free_client;
	if (client_reserve(&c->in, &c->in_cap, CLIENT_IN_MIN, CLIENT_IN_MAX))
		goto free_arena;
	c->pools = pools_client_new(env->pools, c->id);
	if (!c->pools)
		goto free_in;
	pools_client_set_cred(c->pools, env->users, &c->cred, c->user);
	ev_io_init(&c->io, client_io_cb, fd, EV_READ);
	ev_io_start(env->loop, &c->io);
	c->next = l->clients;
	if (c->next)
		c->next->prev = c;
	l->clients = c;
	env->stats->clients++;
	env->stats->clients_total++;
	c->uid = c->cred.uid; /* OP_RELOAD's check (admin.c) */
	log_debug("client %llu connected (pid %ld uid %ld gid %ld%s)", (unsigned long long)c->id,
		  (long)c->cred.pid, (long)c->cred.uid, (long)c->cred.gid,
		  c->cred.privileged ? ", privileged" : "");
	return;

free_in:
	free(c->in);
free_arena:
	wire_arena_fini(&c->arena);
free_client:
	users_disconnect(env->users, c->user);
	free(c);
fail:
	env->stats->oom_closes++;
	close(fd);
}

