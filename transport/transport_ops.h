/*
 * transport_ops.h - what an implementation of transport.h provides (private to
 * transport/). Each implementation's struct transport and struct tconn start
 * with the base below; transport.c reads the ops there and dispatches, so
 * tcp.c and rdma.c share the public names without sharing code.
 */
#ifndef RAMSTER_TRANSPORT_OPS_H
#define RAMSTER_TRANSPORT_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

/* Each op has the contract of the transport.h function of the same name. */
struct transport_ops {
	const char *kind; /* "tcp", "rdma" */
	void (*free)(struct transport *t);
	int (*listen)(struct transport *t, const char *host, uint16_t port);
	int (*local_port)(const struct transport *t);
	struct tconn *(*connect)(struct transport *t, const char *host, uint16_t port,
				 const char *bind_host);
	int (*send)(struct tconn *c, const void *msg, size_t len, const void *payload, size_t plen);
	void (*close)(struct tconn *c, const char *reason);
	size_t (*queued)(const struct tconn *c);
	const char *(*peer)(const struct tconn *c);
	const char *(*device)(const struct tconn *c);
	/* one-sided reads: NULL where not supported (tcp) */
	int (*mem_add)(struct tconn *c, void *base, size_t len);
	void (*mem_del)(struct tconn *c, void *base);
	int (*mem_key)(const struct tconn *c, const void *addr, size_t len, uint32_t *rkey);
	int (*read)(struct tconn *c, uint64_t raddr, uint32_t rkey, size_t len, tconn_read_fn cb,
		    void *arg);
};

/* The first member of every implementation's struct transport. */
struct transport_base {
	const struct transport_ops *ops;
};

/* The first member of every implementation's struct tconn. */
struct tconn_base {
	const struct transport_ops *ops;
	void *data; /* tconn_set_data */
};

#endif /* RAMSTER_TRANSPORT_OPS_H */
