/*
 * transport.h - one interface for the links between node daemons. TCP
 * (transport/tcp.c) and RDMA (transport/rdma.c) implement it, with the same semantics:
 * framed messages (a protobuf message plus an optional payload of at most
 * TRANSPORT_PAYLOAD_MAX bytes, delivered whole and in order), non-blocking on
 * the caller's libev loop, every callback on that loop's thread.
 *
 * Frame: 16-byte little-endian header - magic "RMSP", version, kind, reserved
 * zero, msg_len (<= TRANSPORT_MSG_MAX), payload_len (<= TRANSPORT_PAYLOAD_MAX) -
 * then the message, then the payload. A frame that breaks these rules closes
 * the connection (on_close with the reason); the process carries on.
 */
#ifndef RAMSTER_TRANSPORT_H
#define RAMSTER_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

struct ev_loop;

#define TRANSPORT_MAGIC 0x50534d52u /* "RMSP" as little-endian bytes */
#define TRANSPORT_VERSION 1
#define TRANSPORT_HDR_SIZE 16 /* FHDR_SIZE: common/fhdr.h codes it */
#define TRANSPORT_MSG_MAX (16u * 1024)
#define TRANSPORT_PAYLOAD_MAX (64u * 1024)
/* Bytes queued on one connection before transport_send says -EAGAIN. */
#define TRANSPORT_QUEUE_MAX (8u * 1024 * 1024)

struct transport;
struct tconn;

struct transport_cb {
	/* A peer connected to our listener. */
	void (*on_accept)(void *arg, struct tconn *c);
	/* An outbound connection is up (err 0) or failed (-errno; c is then closed). */
	void (*on_connect)(void *arg, struct tconn *c, int err);
	/*
	 * One whole frame. @return 0, or -errno to close the connection (any
	 * negative value closes it; say why with -EPROTO for a bad message,
	 * -ECONNRESET when the callback closed c itself, rather than a bare -1).
	 */
	int (*on_message)(void *arg, struct tconn *c, const uint8_t *msg, size_t len,
			  const uint8_t *payload, size_t plen);
	/* The connection is gone (peer closed, error, bad frame, transport_close); c is freed after. */
	void (*on_close)(void *arg, struct tconn *c, const char *reason);
};

/* @return a TCP transport on loop, or NULL with errno set. */
struct transport *transport_tcp_new(struct ev_loop *loop, const struct transport_cb *cb, void *arg);

/*
 * @return an RDMA transport on loop (rdma_cm + verbs, rdma.c), or NULL with
 * errno set: ENOTSUP when built without RDMA (make RDMA=0).
 */
struct transport *transport_rdma_new(struct ev_loop *loop, const struct transport_cb *cb, void *arg);

/* @return 1 when an RDMA device serves the local IPv4 address host, else 0. */
int transport_rdma_usable(const char *host);

/* Close every connection (on_close each) and free t. NULL ok. */
void transport_free(struct transport *t);

/* Listen on host:port (IPv4 literal or name). @return 0 or -errno. */
int transport_listen(struct transport *t, const char *host, uint16_t port);

/* @return the port transport_listen bound (useful after port 0), or -ENOTCONN. */
int transport_local_port(const struct transport *t);

/*
 * Start connecting to host:port, from local address bind_host (NULL: any).
 * @return the connection (on_connect follows), or NULL with errno set.
 */
struct tconn *transport_connect(struct transport *t, const char *host, uint16_t port,
				const char *bind_host);

/*
 * Queue one frame. @return 0; -EMSGSIZE over the limits; -EAGAIN when more than
 * TRANSPORT_QUEUE_MAX bytes are queued; -ENOTCONN when the connection is closing.
 */
int transport_send(struct tconn *c, const void *msg, size_t len, const void *payload, size_t plen);

/* Close now; on_close follows (from this call). */
void transport_close(struct tconn *c, const char *reason);

/* Bytes queued and not yet written. */
size_t tconn_queued(const struct tconn *c);

/* The user's pointer for this connection. */
void tconn_set_data(struct tconn *c, void *data);
void *tconn_data(const struct tconn *c);

/* "tcp" or "rdma", and the peer's address as text ("192.0.2.1:7470"). */
const char *tconn_kind(const struct tconn *c);
const char *tconn_peer(const struct tconn *c);

/* The RDMA device of an rdma connection ("rxe0", "mlx5_0"); "-" for tcp. */
const char *tconn_device(const struct tconn *c);

/*
 * One-sided reads (rdma only; tcp answers -ENOTSUP). The reader's peer lets
 * it read a region of its memory: tconn_mem_add registers [base, base+len)
 * on this connection alone (remote read only; withdrawn with the connection
 * or by tconn_mem_del, which must come before the memory is freed), and
 * tconn_mem_key names it for the peer. The peer then reads with tconn_read.
 */
int tconn_mem_add(struct tconn *c, void *base, size_t len);
void tconn_mem_del(struct tconn *c, void *base);
/* @return 0 with *rkey for [addr, addr+len); -ENOENT (not in a region); -ENOTSUP. */
int tconn_mem_key(const struct tconn *c, const void *addr, size_t len, uint32_t *rkey);

/* A finished read: err 0 with the bytes (valid during the call), or -errno. */
typedef void (*tconn_read_fn)(void *arg, int err, const void *data, size_t len);

#define TCONN_READ_MAX 4160 /* bytes one read may take: a sealed page (node/remote/seal.h) */

/*
 * Read len (1..TCONN_READ_MAX) bytes at the peer's address raddr under rkey.
 * cb runs once, on the loop, later (-ECONNRESET if the connection goes
 * first). A bad address or key is a remote access error, which ends the
 * connection: read only what the peer named on this connection. @return 0;
 * -EBUSY (every read slot in use: cb not called); -ENOTSUP; -ENOTCONN; -EINVAL.
 */
int tconn_read(struct tconn *c, uint64_t raddr, uint32_t rkey, size_t len, tconn_read_fn cb,
	       void *arg);

#endif /* RAMSTER_TRANSPORT_H */
