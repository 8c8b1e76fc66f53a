/*
 * transport.c - the calls of transport.h, dispatched to the implementation
 * (tcp.c, rdma.c) through the ops at the start of each object
 * (transport_ops.h). No state of its own.
 */
#include <errno.h>

#include "transport/transport.h"
#include "transport/transport_ops.h"

static const struct transport_ops *transport_ops_of(const struct transport *t)
{
	return ((const struct transport_base *)(const void *)t)->ops;
}

static const struct tconn_base *tconn_base_of(const struct tconn *c)
{
	return (const struct tconn_base *)(const void *)c;
}

void transport_free(struct transport *t)
{
	if (t)
		transport_ops_of(t)->free(t);
}

int transport_listen(struct transport *t, const char *host, uint16_t port)
{
	return transport_ops_of(t)->listen(t, host, port);
}

int transport_local_port(const struct transport *t)
{
	return transport_ops_of(t)->local_port(t);
}

struct tconn *transport_connect(struct transport *t, const char *host, uint16_t port,
				const char *bind_host)
{
	return transport_ops_of(t)->connect(t, host, port, bind_host);
}

int transport_send(struct tconn *c, const void *msg, size_t len, const void *payload, size_t plen)
{
	return tconn_base_of(c)->ops->send(c, msg, len, payload, plen);
}

void transport_close(struct tconn *c, const char *reason)
{
	if (c)
		tconn_base_of(c)->ops->close(c, reason);
}

size_t tconn_queued(const struct tconn *c)
{
	return tconn_base_of(c)->ops->queued(c);
}

void tconn_set_data(struct tconn *c, void *data)
{
	((struct tconn_base *)(void *)c)->data = data;
}

void *tconn_data(const struct tconn *c)
{
	return tconn_base_of(c)->data;
}

const char *tconn_kind(const struct tconn *c)
{
	return tconn_base_of(c)->ops->kind;
}

const char *tconn_peer(const struct tconn *c)
{
	return tconn_base_of(c)->ops->peer(c);
}

const char *tconn_device(const struct tconn *c)
{
	return tconn_base_of(c)->ops->device(c);
}

int tconn_mem_add(struct tconn *c, void *base, size_t len)
{
	const struct transport_ops *o = tconn_base_of(c)->ops;

	return o->mem_add ? o->mem_add(c, base, len) : -ENOTSUP;
}

void tconn_mem_del(struct tconn *c, void *base)
{
	const struct transport_ops *o = tconn_base_of(c)->ops;

	if (o->mem_del)
		o->mem_del(c, base);
}

int tconn_mem_key(const struct tconn *c, const void *addr, size_t len, uint32_t *rkey)
{
	const struct transport_ops *o = tconn_base_of(c)->ops;

	return o->mem_key ? o->mem_key(c, addr, len, rkey) : -ENOTSUP;
}

int tconn_read(struct tconn *c, uint64_t raddr, uint32_t rkey, size_t len, tconn_read_fn cb,
	       void *arg)
{
	const struct transport_ops *o = tconn_base_of(c)->ops;

	return o->read ? o->read(c, raddr, rkey, len, cb, arg) : -ENOTSUP;
}
