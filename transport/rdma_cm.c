/*
 * rdma_cm.c - the RDMA transport (transport.h), its connection management:
 * rdma_cm for addresses and connections, all on the caller's libev loop. The
 * data path (verbs objects, frames as SEND/RECV with credits, CQ polling,
 * one-sided reads) is rdma_verbs.c; the structures are in rdma_internal.h.
 *
 * One rdma_cm event channel per transport (an ev_io watches its fd). An
 * outbound connection resolves the address, sets up its verbs objects on the
 * device found, resolves the route and connects; an inbound one is set up and
 * accepted on the request, and announced (on_accept) only when established.
 * Both sides trade their receive count in the private data (magic "RMSR").
 * References work as in tcp.c (transport_ops.h): any callback may close or
 * free anything.
 */
#include <errno.h>

#include "transport/transport.h"

#if defined(RAMSTER_RDMA) && RAMSTER_RDMA

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/sock.h"
#include "transport/rdma_internal.h"

static const struct transport_ops rdma_ops;
static void rdma_kick_cb(struct ev_loop *loop, ev_timer *w, int revents);

/* ---- memory (references: transport_ops.h) ------------------------------------------ */

static void rdma_conn_destroy(struct tconn *bc)
{
	struct rconn *c = rconn_of(bc);
	struct transport *t = c->base.t;

	rconn_teardown(c);
	free(c);
	transport_release(t);
}

static void rdma_destroy(struct transport *t)
{
	struct rdma_transport *rt = container_of(t, struct rdma_transport, base);

	rdma_destroy_event_channel(rt->ch);
	free(rt);
}

/* ---- private data ----------------------------------------------------------------- */

/* Our private data in a connect request or accept: magic, version, receives posted. */
static void rdma_priv_encode(uint8_t out[RDMA_PRIV_LEN])
{
	put_le32(out, RDMA_PRIV_MAGIC);
	out[4] = RDMA_PRIV_VERSION;
	out[5] = 0;
	out[6] = (uint8_t)RDMA_RECV_N;
	out[7] = (uint8_t)(RDMA_RECV_N >> 8);
}

/* @return the peer's receive count (>= 2), or 0 for foreign or broken private data. */
static unsigned rdma_priv_decode(const uint8_t *p, size_t len)
{
	unsigned n;

	if (len < RDMA_PRIV_LEN || get_le32(p) != RDMA_PRIV_MAGIC || p[4] != RDMA_PRIV_VERSION)
		return 0;
	n = (unsigned)p[6] | (unsigned)p[7] << 8;
	return n >= 2 ? n : 0;
}

/* ---- connections ------------------------------------------------------------------ */

static struct rconn *rconn_new(struct transport *t, struct rdma_cm_id *id)
{
	struct rconn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	tconn_base_init(&c->base, &rdma_ops, t);
	c->id = id;
	id->context = c;
	ev_io_init(&c->cqio, rconn_cq_cb, -1, EV_READ);
	ev_init(&c->kick, rdma_kick_cb);
	snprintf(c->device, sizeof(c->device), "-");
	transport_hold(t); /* the event channel outlives every cm id */
	return c;
}

/*
 * Release everything but the memory and the verbs objects: watchers, queue,
 * list entry; tell the peer. The rest goes with the last reference.
 */
static void rconn_shutdown(struct rconn *c)
{
	struct transport *t = c->base.t;

	c->base.state = TCONN_CLOSED;
	ev_io_stop(t->loop, &c->cqio);
	ev_timer_stop(t->loop, &c->kick); /* also drops a fed, pending event */
	if (c->connected && c->id)
		rdma_disconnect(c->id);
	rconn_drop_queue(c);
	tconn_unlink(&c->base);
}

void rconn_close(struct rconn *c, const char *reason)
{
	void (*on_close)(void *, struct tconn *, const char *);
	void *arg;

	if (c->base.state == TCONN_CLOSED)
		return;
	if (c->counted_accepting) {
		c->counted_accepting = 0;
		container_of(c->base.t, struct rdma_transport, base)->accepting--;
	}
	/* an inbound connection the user never saw goes without a word */
	on_close = c->announced ? c->base.t->cb.on_close : NULL;
	arg = c->base.t->arg;
	rconn_shutdown(c);
	tconn_hold(&c->base);
	if (on_close)
		on_close(arg, &c->base, reason ? reason : "closed");
	/* after on_close: a reader that falls back to messages finds the link gone */
	rconn_fail_reads(c);
	tconn_release(&c->base);
}

static void rdma_close(struct tconn *bc, const char *reason)
{
	rconn_close(rconn_of(bc), reason);
}

void rconn_fail(struct rconn *c, const char *what, int err)
{
	rconn_close(c, tconn_why(&c->base, what, err));
}

/*
 * The outbound connect failed: on_connect(err), then on_close unless
 * on_connect closed c itself, as in tcp.c.
 */
static void rconn_connect_failed(struct rconn *c, const char *what, int err)
{
	struct transport *t = c->base.t;

	if (c->base.state != TCONN_CONNECTING)
		return;
	if (t->cb.on_connect)
		t->cb.on_connect(t->arg, &c->base, err);
	if (c->base.state != TCONN_CLOSED)
		rconn_fail(c, what, -err);
}

static void rdma_kick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rconn *c = container_of(w, struct rconn, kick);
	struct transport *t = c->base.t;

	transport_hold(t);
	tconn_hold(&c->base);
	if (c->base.state == TCONN_CONNECTING && c->base.conn_err)
		rconn_connect_failed(c, "rdma connect", c->base.conn_err);
	else if (c->base.state != TCONN_CLOSED && c->base.send_err)
		rconn_fail(c, "rdma post send", c->base.send_err);
	tconn_release(&c->base);
	transport_release(t);
}

/* ---- connection manager events ------------------------------------------------------ */

/* The connection is up: both sides know the peer's receive count by now. */
static void rconn_established(struct rconn *c, const uint8_t *priv, size_t plen)
{
	struct transport *t = c->base.t;
	int inbound = c->base.state == TCONN_ACCEPTING;
	unsigned n;
	int err;

	c->connected = 1;
	if (c->counted_accepting) {
		c->counted_accepting = 0;
		container_of(t, struct rdma_transport, base)->accepting--;
	}
	if (!inbound) {
		/* a peer that sent no private data is taken to post what we post */
		n = plen ? rdma_priv_decode(priv, plen) : RDMA_RECV_N;
		if (!n) {
			rconn_connect_failed(c, "rdma connect", -EPROTO);
			return;
		}
		c->peer_recv_n = n;
		c->credits = n;
	}
	c->base.state = TCONN_OPEN;
	ev_io_start(t->loop, &c->cqio);
	/* receives may have completed before this event: look once */
	ev_feed_event(t->loop, &c->cqio, EV_READ);
	if (inbound) {
		c->announced = 1;
		if (t->cb.on_accept)
			t->cb.on_accept(t->arg, &c->base);
	} else if (t->cb.on_connect) {
		t->cb.on_connect(t->arg, &c->base, 0);
	}
	if (c->base.state == TCONN_CLOSED)
		return;
	/* frames queued while connecting */
	err = rconn_flush(c);
	if (err)
		rconn_fail(c, "rdma post send", -err);
}

/* A connect request on our listener: accept it, or refuse it quietly. */
static void rdma_on_request(struct transport *t, struct rdma_cm_id *id, const uint8_t *priv,
			    size_t plen)
{
	struct rdma_conn_param param;
	uint8_t mine[RDMA_PRIV_LEN];
	struct rconn *c;
	unsigned n = rdma_priv_decode(priv, plen);
	struct rdma_transport *rt = container_of(t, struct rdma_transport, base);

	if (rt->accepting >= RDMA_ACCEPTING_MAX) {
		rt->refused_accepting++; /* issue 14: bounded before authentication */
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	if (t->dying || !n || !(c = rconn_new(t, id))) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	c->base.state = TCONN_ACCEPTING;
	c->counted_accepting = 1;
	rt->accepting++;
	c->peer_recv_n = n;
	c->credits = n;
	sock_format_ipv4(c->base.peer, rdma_get_peer_addr(id));
	tconn_hold(&c->base);
	if (rconn_setup(c)) {
		rdma_reject(id, NULL, 0);
		rconn_close(c, "rdma set-up failed");
	} else {
		rdma_priv_encode(mine);
		memset(&param, 0, sizeof(param));
		param.private_data = mine;
		param.private_data_len = sizeof(mine);
		param.rnr_retry_count = 7;
		param.retry_count = 7;
		param.responder_resources = RDMA_READ_DEPTH; /* the peer's reads of our regions */
		param.initiator_depth = RDMA_READ_DEPTH;
		if (rdma_accept(id, &param))
			rconn_close(c, "rdma accept failed");
	}
	tconn_release(&c->base);
}

static int rdma_event_errno(int status, int fallback)
{
	return status < 0 ? status : -fallback;
}

/* An event for connection c (its copy: the event itself is acknowledged already). */
static void rconn_on_event(struct rconn *c, enum rdma_cm_event_type type, int status,
			   const uint8_t *priv, size_t plen)
{
	struct rdma_conn_param param;
	uint8_t mine[RDMA_PRIV_LEN];
	int err;

	if (c->base.state == TCONN_CLOSED)
		return;
	switch (type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		err = rconn_setup(c);
		if (!err && rdma_resolve_route(c->id, RDMA_RESOLVE_MS))
			err = rdma_errno(EIO);
		if (err)
			rconn_connect_failed(c, "rdma set-up", err);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		rdma_priv_encode(mine);
		memset(&param, 0, sizeof(param));
		param.private_data = mine;
		param.private_data_len = sizeof(mine);
		param.retry_count = 7;
		param.rnr_retry_count = 7;
		param.responder_resources = RDMA_READ_DEPTH;
		param.initiator_depth = RDMA_READ_DEPTH;
		if (rdma_connect(c->id, &param))
			rconn_connect_failed(c, "rdma connect", rdma_errno(EIO));
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (c->base.state == TCONN_CONNECTING || c->base.state == TCONN_ACCEPTING)
			rconn_established(c, priv, plen);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
		rconn_connect_failed(c, "rdma resolve address",
				     rdma_event_errno(status, EHOSTUNREACH));
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		rconn_connect_failed(c, "rdma resolve route",
				     rdma_event_errno(status, ENETUNREACH));
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		if (c->base.state == TCONN_CONNECTING)
			rconn_connect_failed(c, "rdma connect",
					     rdma_event_errno(status, EHOSTUNREACH));
		else
			rconn_close(c, "rdma connection error");
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (c->base.state == TCONN_CONNECTING)
			rconn_connect_failed(c, "rdma connect", -ECONNREFUSED);
		else
			rconn_close(c, "rdma connection rejected");
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		rconn_close(c, "peer closed");
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rconn_close(c, "rdma device removed");
		break;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		rconn_close(c, "rdma address changed");
		break;
	default:
		break; /* TIMEWAIT_EXIT and the like */
	}
}

static void rdma_cm_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rdma_transport *rt = container_of(w, struct rdma_transport, cmio);
	struct transport *t = &rt->base;
	uint8_t priv[256];
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type type;
	struct rdma_cm_id *id;
	struct rconn *c;
	size_t plen;
	int i, status;

	transport_hold(t);
	for (i = 0; i < RDMA_CM_EVENTS_PER_CB && !t->dying; i++) {
		if (rdma_get_cm_event(rt->ch, &ev))
			break; /* EAGAIN: drained */
		type = ev->event;
		id = ev->id;
		status = ev->status;
		plen = 0;
		if (ev->param.conn.private_data) {
			plen = ev->param.conn.private_data_len;
			if (plen > sizeof(priv))
				plen = sizeof(priv);
			memcpy(priv, ev->param.conn.private_data, plen);
		}
		/* acknowledged before anything may destroy its id */
		rdma_ack_cm_event(ev);
		if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
			rdma_on_request(t, id, priv, plen);
			continue;
		}
		c = id->context;
		if (!c || id == rt->listen_id)
			continue;
		tconn_hold(&c->base);
		rconn_on_event(c, type, status, priv, plen);
		tconn_release(&c->base);
	}
	transport_release(t);
}

/* ---- listening and connecting --------------------------------------------------------- */

static int rdma_listen_on(struct transport *t, const char *host, uint16_t port)
{
	struct rdma_transport *rt = container_of(t, struct rdma_transport, base);
	struct sockaddr_in sa;
	struct rdma_cm_id *id;
	int err;

	if (t->dying)
		return -ESHUTDOWN;
	if (rt->listen_id)
		return -EALREADY;
	err = sock_resolve_ipv4(host, port, true, &sa);
	if (err)
		return err;
	if (rdma_create_id(rt->ch, &id, NULL, RDMA_PS_TCP))
		return rdma_errno(ENODEV);
	if (rdma_bind_addr(id, (struct sockaddr *)&sa) || rdma_listen(id, RDMA_BACKLOG)) {
		err = rdma_errno(EADDRNOTAVAIL);
		rdma_destroy_id(id);
		return err;
	}
	rt->listen_id = id;
	t->port = ntohs(rdma_get_src_port(id));
	return 0;
}

static int rdma_local_port(const struct transport *t)
{
	return container_of(t, const struct rdma_transport, base)->listen_id ? t->port : -ENOTCONN;
}

static struct tconn *rdma_connect_to(struct transport *t, const char *host, uint16_t port,
				     const char *bind_host)
{
	struct sockaddr_in dst, src;
	struct rdma_cm_id *id;
	struct rconn *c;
	int err;

	if (t->dying) {
		err = -ESHUTDOWN;
		goto fail;
	}
	err = sock_resolve_ipv4(host, port, false, &dst);
	if (!err && bind_host)
		err = sock_resolve_ipv4(bind_host, 0, true, &src);
	if (err)
		goto fail;
	if (rdma_create_id(container_of(t, struct rdma_transport, base)->ch, &id, NULL,
			   RDMA_PS_TCP)) {
		err = rdma_errno(ENODEV);
		goto fail;
	}
	c = rconn_new(t, id);
	if (!c) {
		rdma_destroy_id(id);
		err = -ENOMEM;
		goto fail;
	}
	c->base.state = TCONN_CONNECTING;
	c->announced = 1;
	sock_format_ipv4(c->base.peer, (struct sockaddr *)&dst);
	/* on_connect always comes from the loop, never from this call */
	if (rdma_resolve_addr(id, bind_host ? (struct sockaddr *)&src : NULL,
			      (struct sockaddr *)&dst, RDMA_RESOLVE_MS)) {
		c->base.conn_err = rdma_errno(EHOSTUNREACH);
		ev_feed_event(t->loop, &c->kick, EV_TIMER);
	}
	return &c->base;

fail:
	errno = -err;
	return NULL;
}

static const char *rdma_device(const struct tconn *c)
{
	return rconn_of_c(c)->device;
}

/* ---- the transport ------------------------------------------------------------------ */

struct transport *transport_rdma_new(struct ev_loop *loop, const struct transport_cb *cb, void *arg)
{
	struct rdma_transport *rt;
	int fl, e;

	if (!loop || !cb) {
		errno = EINVAL;
		return NULL;
	}
	rt = calloc(1, sizeof(*rt));
	if (!rt) {
		errno = ENOMEM;
		return NULL;
	}
	transport_base_init(&rt->base, &rdma_ops, loop, cb, arg);
	errno = 0;
	rt->ch = rdma_create_event_channel();
	if (!rt->ch) {
		e = errno ? errno : ENODEV;
		free(rt);
		errno = e;
		return NULL;
	}
	fl = fcntl(rt->ch->fd, F_GETFL);
	if (fl < 0 || fcntl(rt->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		e = errno;
		rdma_destroy_event_channel(rt->ch);
		free(rt);
		errno = e;
		return NULL;
	}
	ev_io_init(&rt->cmio, rdma_cm_cb, rt->ch->fd, EV_READ);
	ev_io_start(loop, &rt->cmio);
	return &rt->base;
}

static void rdma_free(struct transport *t)
{
	struct rdma_transport *rt = container_of(t, struct rdma_transport, base);
	struct tconn *c;

	if (t->dying)
		return;
	t->dying = 1;
	transport_hold(t);
	ev_io_stop(t->loop, &rt->cmio);
	if (rt->listen_id) {
		rdma_destroy_id(rt->listen_id);
		rt->listen_id = NULL;
	}
	while ((c = transport_first_conn(t)))
		rconn_close(rconn_of(c), "transport closed");
	transport_release(t);
}

int transport_rdma_usable(const char *host)
{
	struct ibv_device **list;
	struct sockaddr_in sa;
	struct rdma_cm_id *id;
	int n = 0, ok = 0;

	if (sock_resolve_ipv4(host, 0, true, &sa))
		return 0;
	if (sa.sin_addr.s_addr == htonl(INADDR_ANY)) {
		list = ibv_get_device_list(&n);
		if (list)
			ibv_free_device_list(list);
		return n > 0;
	}
	/* no channel: a synchronous id, enough to ask which device owns the address */
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return 0;
	if (rdma_bind_addr(id, (struct sockaddr *)&sa) == 0 && id->verbs)
		ok = 1;
	rdma_destroy_id(id);
	return ok;
}

static const struct transport_ops rdma_ops = {
    .kind = "rdma",
    .free = rdma_free,
    .listen = rdma_listen_on,
    .local_port = rdma_local_port,
    .connect = rdma_connect_to,
    .send = rconn_send,
    .close = rdma_close,
    .device = rdma_device,
    .mem_add = rconn_mem_add,
    .mem_del = rconn_mem_del,
    .mem_key = rconn_mem_key,
    .read = rconn_read,
    .destroy = rdma_destroy,
    .conn_destroy = rdma_conn_destroy,
};

#else /* built without RDMA (make RDMA=0) */

struct transport *transport_rdma_new(struct ev_loop *loop, const struct transport_cb *cb, void *arg)
{
	errno = ENOTSUP;
	return NULL;
}

int transport_rdma_usable(const char *host)
{
	return 0;
}

#endif
