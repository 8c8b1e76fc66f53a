/*
 * transport.c - the calls of transport.h, dispatched to the implementation
 * (tcp.c, rdma_cm.c) through the ops in the base of each object, and what
 * every implementation shares (transport_ops.h): the connection list, the
 * references, the reason text. No state of its own.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "transport/transport.h"
#include "transport/transport_ops.h"

/* ---- the base -------------------------------------------------------------- */

void transport_base_init(struct transport *t, const struct transport_ops *ops, struct ev_loop *loop,
			 const struct transport_cb *cb, void *arg)
{
	t->ops = ops;
	t->loop = loop;
	t->cb = *cb;
	t->arg = arg;
	list_init(&t->conns);
}

void transport_hold(struct transport *t)
{
	t->refs++;
}

void transport_release(struct transport *t)
{
	if (--t->refs == 0 && t->dying)
		t->ops->destroy(t);
}

void tconn_base_init(struct tconn *c, const struct transport_ops *ops, struct transport *t)
{
	c->ops = ops;
	c->t = t;
	c->state = TCONN_CONNECTING;
	list_add(&t->conns, &c->link);
}

void tconn_unlink(struct tconn *c)
{
	list_del(&c->link);
}

struct tconn *transport_first_conn(const struct transport *t)
{
	return list_empty(&t->conns) ? NULL : list_first_entry(&t->conns, struct tconn, link);
}

void tconn_hold(struct tconn *c)
{
	c->refs++;
}

void tconn_release(struct tconn *c)
{
	if (--c->refs == 0 && c->state == TCONN_CLOSED)
		c->ops->conn_destroy(c);
}

const char *tconn_why(struct tconn *c, const char *what, int err)
{
	char buf[64];

	snprintf(c->why, sizeof(c->why), "%s: %s", what, strerror_r(err, buf, sizeof(buf)));
	return c->why;
}

/* ---- transport.h ------------------------------------------------------------ */

void transport_free(struct transport *t)
{
	if (t)
		t->ops->free(t);
}

int transport_listen(struct transport *t, const char *host, uint16_t port)
{
	return t->ops->listen(t, host, port);
}

int transport_local_port(const struct transport *t)
{
	return t->ops->local_port(t);
}

struct tconn *transport_connect(struct transport *t, const char *host, uint16_t port,
				const char *bind_host)
{
	return t->ops->connect(t, host, port, bind_host);
}

int transport_send(struct tconn *c, const void *msg, size_t len, const void *payload, size_t plen)
{
	return c->ops->send(c, msg, len, payload, plen);
}

void transport_close(struct tconn *c, const char *reason)
{
	if (c)
		c->ops->close(c, reason);
}

size_t tconn_queued(const struct tconn *c)
{
	return c->queued;
}

void tconn_set_data(struct tconn *c, void *data)
{
	c->data = data;
}

void *tconn_data(const struct tconn *c)
{
	return c->data;
}

const char *tconn_kind(const struct tconn *c)
{
	return c->ops->kind;
}

const char *tconn_peer(const struct tconn *c)
{
	return c->peer;
}

const char *tconn_device(const struct tconn *c)
{
	return c->ops->device(c);
}

int tconn_mem_add(struct tconn *c, void *base, size_t len)
{
	return c->ops->mem_add ? c->ops->mem_add(c, base, len) : -ENOTSUP;
}

void tconn_mem_del(struct tconn *c, void *base)
{
	if (c->ops->mem_del)
		c->ops->mem_del(c, base);
}

int tconn_mem_key(const struct tconn *c, const void *addr, size_t len, uint32_t *rkey)
{
	return c->ops->mem_key ? c->ops->mem_key(c, addr, len, rkey) : -ENOTSUP;
}

int tconn_read(struct tconn *c, uint64_t raddr, uint32_t rkey, size_t len, tconn_read_fn cb,
	       void *arg)
{
	return c->ops->read ? c->ops->read(c, raddr, rkey, len, cb, arg) : -ENOTSUP;
}
