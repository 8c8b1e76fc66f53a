/*
 * transport_ops.h - what an implementation of transport.h builds on (private
 * to transport/). Every implementation embeds the one struct transport and
 * the one struct tconn below as the first member of its own (tcp.c:
 * struct tcp_transport, struct tcp_conn; rdma_cm.c: struct rdma_transport,
 * struct rconn) and gets back to its struct with container_of. transport.c
 * reads the ops there and dispatches, and keeps what both share: the list of
 * open connections, the references, the reason text.
 *
 * References: every entry from libev (and transport_free, and each on_close
 * call) holds one on the transport and the tconn it touches, so any callback
 * may close or free either. A closed tconn is off t->conns and holds no
 * socket; its memory goes (ops->conn_destroy) when its last reference drops.
 * A dying transport has no tconns and no listener; its memory goes
 * (ops->destroy) when its last reference drops. All of it: loop thread only.
 */
#ifndef RAMSTER_TRANSPORT_OPS_H
#define RAMSTER_TRANSPORT_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "common/list.h"
#include "common/sock.h"
#include "transport/transport.h"

#define TCONN_PEER_LEN SOCK_IPV4_TEXT_MAX
#define TCONN_WHY_LEN  96

/* Each op but the last two has the contract of the transport.h function of the same name. */
struct transport_ops {
	const char *kind; /* "tcp", "rdma" */
	void (*free)(struct transport *t);
	int (*listen)(struct transport *t, const char *host, uint16_t port);
	int (*local_port)(const struct transport *t);
	struct tconn *(*connect)(struct transport *t, const char *host, uint16_t port,
				 const char *bind_host);
	int (*send)(struct tconn *c, const void *msg, size_t len, const void *payload, size_t plen);
	void (*close)(struct tconn *c, const char *reason);
	const char *(*device)(const struct tconn *c);
	/* one-sided reads: NULL where not supported (tcp) */
	int (*mem_add)(struct tconn *c, void *base, size_t len);
	void (*mem_del)(struct tconn *c, void *base);
	int (*mem_key)(const struct tconn *c, const void *addr, size_t len, uint32_t *rkey);
	int (*read)(struct tconn *c, uint64_t raddr, uint32_t rkey, size_t len, tconn_read_fn cb,
		    void *arg);
	/* memory: the last reference of a dying transport, of a closed tconn */
	void (*destroy)(struct transport *t);
	void (*conn_destroy)(struct tconn *c);
};

enum tconn_state {
	TCONN_CONNECTING, /* outbound: connect (tcp), resolve and connect (rdma) in progress */
	TCONN_ACCEPTING,  /* inbound, rdma only: accepted, not yet established nor announced */
	TCONN_OPEN,
	TCONN_CLOSED,
};

/* The first member of every implementation's transport. */
struct transport {
	const struct transport_ops *ops;
	struct ev_loop *loop;
	struct transport_cb cb;
	void *arg;
	struct list_head conns; /* tconns not yet closed, newest first */
	uint16_t port;		/* bound by listen */
	int refs;		/* see above */
	int dying;		/* transport_free was called; freed when refs drop */
};

/* The first member of every implementation's connection. */
struct tconn {
	const struct transport_ops *ops;
	void *data; /* tconn_set_data */
	struct transport *t;
	struct list_head link; /* on t->conns until closed */
	enum tconn_state state;
	int refs;      /* see above */
	int conn_err;  /* the outbound connect failed at once; reported from the loop */
	int send_err;  /* a write or post from transport_send failed; closed from the loop */
	size_t queued; /* bytes queued and not yet written or posted */
	char peer[TCONN_PEER_LEN];
	char why[TCONN_WHY_LEN]; /* a reason composed for on_close */
};

/* Fill the base of a new transport (refs 0, no connections). */
void transport_base_init(struct transport *t, const struct transport_ops *ops, struct ev_loop *loop,
			 const struct transport_cb *cb, void *arg);
void transport_hold(struct transport *t);
/* Drop a reference; the last one of a dying transport destroys it. */
void transport_release(struct transport *t);

/* Fill the base of a new connection of t and put it first on t->conns (state CONNECTING). */
void tconn_base_init(struct tconn *c, const struct transport_ops *ops, struct transport *t);
/* Take c off t->conns (once closed). */
void tconn_unlink(struct tconn *c);
/* The newest open connection of t, or NULL. */
struct tconn *transport_first_conn(const struct transport *t);
void tconn_hold(struct tconn *c);
/* Drop a reference; the last one of a closed tconn destroys it. */
void tconn_release(struct tconn *c);
/* "what: strerror(err)" composed in c->why. @return c->why. */
const char *tconn_why(struct tconn *c, const char *what, int err);

#endif /* RAMSTER_TRANSPORT_OPS_H */
