/*
 * rdma.c - the RDMA transport (transport.h): rdma_cm for addresses and
 * connections, verbs SEND/RECV for frames, all on the caller's libev loop.
 *
 * One rdma_cm event channel per transport (an ev_io watches its fd). Each
 * tconn owns its cm id, protection domain, completion channel (an ev_io on
 * its fd: no CQ thread), one CQ, an RC queue pair and one slab of fixed
 * slots registered once (local access only). One-sided reads: the regions a
 * user registers for its peer (remote read only, on this connection alone:
 * never a key another connection could use) and a few read slots of its own
 * for the peer's bytes to land in.
 * RDMA_RECV_N slots stay posted as receives; RDMA_SEND_N carry sends. A send
 * needs a credit (a receive the peer has posted for us): each message returns
 * the receives we re-posted since our last message, and an explicit credit
 * message goes out when many are owed. Data keeps one credit in reserve, so
 * a credit message can always go: the peer never sees receiver-not-ready.
 * References work as in tcp.c: any callback may close or free anything.
 */
#include <errno.h>

#include "transport/transport.h"

#if defined(RAMSTER_RDMA) && RAMSTER_RDMA

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <ev.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "transport/frame.h"
#include "transport/transport_ops.h"

/* ---- tunables ------------------------------------------------------------ */

#define RDMA_RECV_N	      16   /* receives posted per connection (the peer's credits) */
#define RDMA_SEND_N	      16   /* send slots per connection */
#define RDMA_READ_N	      64   /* RDMA READs posted at once per connection (and their slots) */
#define RDMA_READ_DEPTH	      8	   /* of those, outstanding on the wire (the QP's rd_atomic) */
#define RDMA_CREDIT_BATCH     8	   /* owe this many credits and an explicit credit message goes */
#define RDMA_RESOLVE_MS	      2000 /* rdma_resolve_addr / rdma_resolve_route limits */
#define RDMA_BACKLOG	      64
#define RDMA_CM_EVENTS_PER_CB 32
#define RDMA_POLL_BATCH	      16
#define RDMA_POLL_MAX	      256 /* completions per wake-up, then other watchers get a turn */
#define RDMA_WIRE_HDR	      8	  /* kind, 3 reserved, credits (le32) - then the frame */
#define RDMA_SLOT_SIZE	      ((RDMA_WIRE_HDR + FRAME_READER_MAX + 63u) & ~63u) /* one largest frame */
#define RDMA_PRIV_MAGIC	      0x52534d52u /* "RMSR" as little-endian bytes */
#define RDMA_PRIV_VERSION     1
#define RDMA_PRIV_LEN	      8
#define RDMA_PEER_LEN	      sizeof("255.255.255.255:65535")
#define RDMA_WHY_LEN	      96
#define RDMA_DEV_LEN	      32

#define RDMA_KIND_FRAME	 1
#define RDMA_KIND_CREDIT 2

#define rdma_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- structures ------------------------------------------------------------ */

enum rconn_state {
	RCONN_CONNECTING, /* outbound: resolving, connecting */
	RCONN_ACCEPTING,  /* inbound: accepted, not yet established nor announced */
	RCONN_OPEN,
	RCONN_CLOSED,
};

/* One frame waiting for a send slot and a credit. */
struct rframe {
	struct rframe *next;
	size_t len; /* bytes of frame (header, message, payload) in data */
	uint8_t data[];
};

struct tconn {
	struct tconn_base base; /* first: transport.c dispatches through it */
	ev_io cqio;		/* the completion channel */
	ev_timer kick;		/* fed, never started: errors found outside the loop */
	struct transport *t;
	struct tconn *prev, *next; /* on t->conns until closed */
	struct rdma_cm_id *id;
	enum rconn_state state;
	int refs;      /* libev entries and on_close calls in progress */
	int announced; /* the user knows c: on_close is due at the end */
	int connected; /* ESTABLISHED came: rdma_disconnect at close */
	int conn_err;  /* the outbound connect failed at once; reported from the loop */
	int post_err;  /* a post from transport_send failed; closed from the loop */
	/* verbs, owned; torn down when the memory goes */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *slab; /* RDMA_RECV_N receive slots, then RDMA_SEND_N send slots */
	/* one-sided reads: ours in flight, and the regions the peer may read */
	struct ibv_mr *rd_mr;
	uint8_t *rd_slab; /* RDMA_READ_N slots of TCONN_READ_MAX */
	struct rread {
		tconn_read_fn cb;
		void *arg;
		size_t len;
		int busy;
	} reads[RDMA_READ_N];
	struct rregion {
		void *base;
		size_t len;
		struct ibv_mr *mr;
	} *regions;
	size_t n_regions, cap_regions;
	/* flow control */
	unsigned credits; /* sends we may post: receives the peer posted for us */
	unsigned owed;	  /* receives re-posted since we last told the peer */
	unsigned peer_recv_n;
	unsigned free_slots[RDMA_SEND_N];
	unsigned n_free;
	struct rframe *head, *tail;
	size_t queued; /* bytes in the queue not yet posted */
	char peer[RDMA_PEER_LEN];
	char device[RDMA_DEV_LEN];
	char why[RDMA_WHY_LEN]; /* a reason we compose for on_close */
};

struct transport {
	struct transport_base base; /* first: transport.c dispatches through it */
	ev_io cmio;		    /* the rdma_cm event channel */
	struct ev_loop *loop;
	struct transport_cb cb;
	void *arg;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen_id;
	uint16_t port;
	int refs;  /* libev entries, transport_free, and every tconn not yet destroyed */
	int dying; /* transport_free was called; freed when refs drop */
	struct tconn *conns;
};

static const struct transport_ops rdma_ops;
static void rdma_close(struct tconn *c, const char *reason);

/* ---- references ------------------------------------------------------------------- */

static void transport_hold(struct transport *t)
{
	t->refs++;
}

static void transport_release(struct transport *t)
{
	if (--t->refs == 0 && t->dying) {
		rdma_destroy_event_channel(t->ch);
		free(t);
	}
}

/* Free the verbs objects in the order they depend on each other. */
static void rconn_teardown(struct tconn *c)
{
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->cch)
		ibv_destroy_comp_channel(c->cch);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	if (c->rd_mr)
		ibv_dereg_mr(c->rd_mr);
	while (c->n_regions)
		ibv_dereg_mr(c->regions[--c->n_regions].mr);
	free(c->regions);
	c->regions = NULL;
	c->cap_regions = 0;
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	free(c->slab);
	free(c->rd_slab);
	c->rd_mr = NULL;
	c->rd_slab = NULL;
	c->cq = NULL;
	c->cch = NULL;
	c->mr = NULL;
	c->pd = NULL;
	c->id = NULL;
	c->slab = NULL;
}

static void rconn_destroy(struct tconn *c)
{
	struct transport *t = c->t;

	rconn_teardown(c);
	free(c);
	transport_release(t);
}

static void rconn_hold(struct tconn *c)
{
	c->refs++;
}

static void rconn_release(struct tconn *c)
{
	if (--c->refs == 0 && c->state == RCONN_CLOSED)
		rconn_destroy(c);
}

/* ---- addresses -------------------------------------------------------------------- */

/*
 * host: an IPv4 literal or a name (blocking lookup); NULL, "" or "*" mean any
 * address where any_ok. @return 0 or -errno.
 */
static int rdma_resolve_host(const char *host, uint16_t port, int any_ok, struct sockaddr_in *sa)
{
	struct addrinfo hints, *res;
	int rc;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	if (!host || !*host || !strcmp(host, "*")) {
		sa->sin_addr.s_addr = htonl(INADDR_ANY);
		return any_ok ? 0 : -EINVAL;
	}
	if (inet_pton(AF_INET, host, &sa->sin_addr) == 1)
		return 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	errno = 0;
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc == EAI_SYSTEM)
		return errno ? -errno : -EIO;
	if (rc == EAI_MEMORY)
		return -ENOMEM;
	if (rc)
		return -ENXIO;
	memcpy(&sa->sin_addr, &((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr,
	       sizeof(sa->sin_addr));
	freeaddrinfo(res);
	return 0;
}

static void rdma_format_peer(char *out, const struct sockaddr *sa)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
	char ip[INET_ADDRSTRLEN];

	if (!sa || in->sin_family != AF_INET ||
	    !inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip))) {
		snprintf(out, RDMA_PEER_LEN, "?");
		return;
	}
	snprintf(out, RDMA_PEER_LEN, "%s:%u", ip, (unsigned)ntohs(in->sin_port));
}

static void rdma_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t rdma_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Our private data in a connect request or accept: magic, version, receives posted. */
static void rdma_priv_encode(uint8_t out[RDMA_PRIV_LEN])
{
	rdma_put_le32(out, RDMA_PRIV_MAGIC);
	out[4] = RDMA_PRIV_VERSION;
	out[5] = 0;
	out[6] = (uint8_t)RDMA_RECV_N;
	out[7] = (uint8_t)(RDMA_RECV_N >> 8);
}

/* @return the peer's receive count (>= 2), or 0 for foreign or broken private data. */
static unsigned rdma_priv_decode(const uint8_t *p, size_t len)
{
	unsigned n;

	if (len < RDMA_PRIV_LEN || rdma_get_le32(p) != RDMA_PRIV_MAGIC || p[4] != RDMA_PRIV_VERSION)
		return 0;
	n = (unsigned)p[6] | (unsigned)p[7] << 8;
	return n >= 2 ? n : 0;
}

/* ---- connections ------------------------------------------------------------------ */

static void rdma_cq_cb(struct ev_loop *loop, ev_io *w, int revents);
static void rdma_kick_cb(struct ev_loop *loop, ev_timer *w, int revents);

static struct tconn *rconn_new(struct transport *t, struct rdma_cm_id *id)
{
	struct tconn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->base.ops = &rdma_ops;
	c->t = t;
	c->id = id;
	id->context = c;
	ev_io_init(&c->cqio, rdma_cq_cb, -1, EV_READ);
	ev_init(&c->kick, rdma_kick_cb);
	snprintf(c->device, sizeof(c->device), "-");
	transport_hold(t); /* the event channel outlives every cm id */
	c->next = t->conns;
	if (t->conns)
		t->conns->prev = c;
	t->conns = c;
	return c;
}

static uint8_t *rconn_slot(struct tconn *c, unsigned i)
{
	return c->slab + (size_t)i * RDMA_SLOT_SIZE;
}

static int rconn_post_recv(struct tconn *c, unsigned i)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)rconn_slot(c, i),
	    .length = RDMA_SLOT_SIZE,
	    .lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;

	return -ibv_post_recv(c->id->qp, &wr, &bad);
}

/* A failed verbs call that may not have set errno. */
static int rdma_errno(int fallback)
{
	return errno ? -errno : -fallback;
}

/*
 * Everything the connection needs on its device (c->id->verbs), receives
 * posted. @return 0 or -errno; a partial set-up goes with the connection.
 */
static int rconn_setup(struct tconn *c)
{
	struct ibv_context *ctx = c->id->verbs;
	size_t size = (size_t)(RDMA_RECV_N + RDMA_SEND_N) * RDMA_SLOT_SIZE;
	struct ibv_qp_init_attr qa;
	unsigned i;
	int err, fl;

	if (!ctx)
		return -ENODEV;
	snprintf(c->device, sizeof(c->device), "%s", ibv_get_device_name(ctx->device));
	errno = 0;
	c->pd = ibv_alloc_pd(ctx);
	if (!c->pd)
		return rdma_errno(ENOMEM);
	c->cch = ibv_create_comp_channel(ctx);
	if (!c->cch)
		return rdma_errno(ENOMEM);
	fl = fcntl(c->cch->fd, F_GETFL);
	if (fl < 0 || fcntl(c->cch->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	c->cq = ibv_create_cq(ctx, RDMA_RECV_N + RDMA_SEND_N + RDMA_READ_N, c, c->cch, 0);
	if (!c->cq)
		return rdma_errno(ENOMEM);
	err = ibv_req_notify_cq(c->cq, 0);
	if (err)
		return -err;
	if (posix_memalign((void **)&c->slab, 4096, size))
		return -ENOMEM;
	c->mr = ibv_reg_mr(c->pd, c->slab, size, IBV_ACCESS_LOCAL_WRITE);
	if (!c->mr)
		return rdma_errno(ENOMEM);
	if (posix_memalign((void **)&c->rd_slab, 4096, (size_t)RDMA_READ_N * TCONN_READ_MAX))
		return -ENOMEM;
	c->rd_mr = ibv_reg_mr(c->pd, c->rd_slab, (size_t)RDMA_READ_N * TCONN_READ_MAX,
			      IBV_ACCESS_LOCAL_WRITE);
	if (!c->rd_mr)
		return rdma_errno(ENOMEM);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = RDMA_SEND_N + RDMA_READ_N;
	qa.cap.max_recv_wr = RDMA_RECV_N;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(c->id, c->pd, &qa))
		return rdma_errno(ENOMEM);
	for (i = 0; i < RDMA_RECV_N; i++) {
		err = rconn_post_recv(c, i);
		if (err)
			return err;
	}
	for (i = 0; i < RDMA_SEND_N; i++)
		c->free_slots[i] = RDMA_RECV_N + i;
	c->n_free = RDMA_SEND_N;
	ev_io_set(&c->cqio, c->cch->fd, EV_READ);
	return 0;
}

static void rconn_drop_queue(struct tconn *c)
{
	struct rframe *f;

	while ((f = c->head)) {
		c->head = f->next;
		free(f);
	}
	c->tail = NULL;
	c->queued = 0;
}

/*
 * Release everything but the memory and the verbs objects: watchers, queue,
 * list entry; tell the peer. The rest goes with the last reference.
 */
static void rconn_shutdown(struct tconn *c)
{
	struct transport *t = c->t;

	c->state = RCONN_CLOSED;
	ev_io_stop(t->loop, &c->cqio);
	ev_timer_stop(t->loop, &c->kick); /* also drops a fed, pending event */
	if (c->connected && c->id)
		rdma_disconnect(c->id);
	rconn_drop_queue(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		t->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

/* Every read in flight ends with -ECONNRESET (the connection is closed already). */
static void rconn_fail_reads(struct tconn *c)
{
	unsigned i;

	for (i = 0; i < RDMA_READ_N; i++) {
		struct rread *rd = &c->reads[i];

		if (!rd->busy)
			continue;
		rd->busy = 0;
		rd->cb(rd->arg, -ECONNRESET, NULL, 0);
	}
}

static void rdma_close(struct tconn *c, const char *reason)
{
	void (*on_close)(void *, struct tconn *, const char *);
	void *arg;

	if (c->state == RCONN_CLOSED)
		return;
	/* an inbound connection the user never saw goes without a word */
	on_close = c->announced ? c->t->cb.on_close : NULL;
	arg = c->t->arg;
	rconn_shutdown(c);
	rconn_hold(c);
	if (on_close)
		on_close(arg, c, reason ? reason : "closed");
	/* after on_close: a reader that falls back to messages finds the link gone */
	rconn_fail_reads(c);
	rconn_release(c);
}

/* Close with "what: strerror(err)" as the reason. */
static void rconn_fail(struct tconn *c, const char *what, int err)
{
	char buf[64];

	snprintf(c->why, sizeof(c->why), "%s: %s", what, strerror_r(err, buf, sizeof(buf)));
	rdma_close(c, c->why);
}

/* ---- output ------------------------------------------------------------------------ */

/*
 * Post send slot i holding kind and len bytes of frame after the wire header,
 * returning every credit we owe. Calls no callback. @return 0 or -errno.
 */
static int rconn_post_send(struct tconn *c, unsigned i, uint8_t kind, size_t len)
{
	uint8_t *p = rconn_slot(c, i);
	struct ibv_sge sge = {
	    .addr = (uintptr_t)p,
	    .length = (uint32_t)(RDMA_WIRE_HDR + len),
	    .lkey = c->mr->lkey,
	};
	struct ibv_send_wr wr =
			       {
				   .wr_id = i,
				   .sg_list = &sge,
				   .num_sge = 1,
				   .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED,
			       },
			   *bad;
	int err;

	p[0] = kind;
	p[1] = p[2] = p[3] = 0;
	rdma_put_le32(p + 4, c->owed);
	err = ibv_post_send(c->id->qp, &wr, &bad);
	if (err)
		return -err;
	c->owed = 0;
	c->credits--;
	return 0;
}

/* Room for a data frame now: a send slot and a credit beyond the reserved one. */
static int rconn_can_send(const struct tconn *c)
{
	return c->state == RCONN_OPEN && c->n_free && c->credits >= 2 && !c->post_err;
}

/*
 * Post queued frames while slots and credits last, then a credit message if
 * we owe many. Calls no callback. @return 0 or -errno of a failed post.
 */
static int rconn_flush(struct tconn *c)
{
	struct rframe *f;
	unsigned i;
	int err;

	while (c->head && rconn_can_send(c)) {
		f = c->head;
		i = c->free_slots[--c->n_free];
		memcpy(rconn_slot(c, i) + RDMA_WIRE_HDR, f->data, f->len);
		err = rconn_post_send(c, i, RDMA_KIND_FRAME, f->len);
		if (err)
			return err;
		c->head = f->next;
		if (!c->head)
			c->tail = NULL;
		c->queued -= f->len;
		free(f);
	}
	if (c->state == RCONN_OPEN && c->owed >= RDMA_CREDIT_BATCH && c->credits >= 1 &&
	    c->n_free) {
		i = c->free_slots[--c->n_free];
		return rconn_post_send(c, i, RDMA_KIND_CREDIT, 0);
	}
	return 0;
}

static void rdma_write_frame(uint8_t *out, const void *msg, size_t len, const void *payload,
			     size_t plen)
{
	frame_hdr_encode(out, (uint32_t)len, (uint32_t)plen);
	if (len)
		memcpy(out + TRANSPORT_HDR_SIZE, msg, len);
	if (plen)
		memcpy(out + TRANSPORT_HDR_SIZE + len, payload, plen);
}

static int rdma_send(struct tconn *c, const void *msg, size_t len, const void *payload, size_t plen)
{
	struct rframe *f;
	size_t total;
	unsigned i;
	int err;

	if (c->state == RCONN_CLOSED)
		return -ENOTCONN;
	if (len > TRANSPORT_MSG_MAX || plen > TRANSPORT_PAYLOAD_MAX)
		return -EMSGSIZE;
	total = TRANSPORT_HDR_SIZE + len + plen;
	if (c->queued + total > TRANSPORT_QUEUE_MAX)
		return -EAGAIN;
	if (!c->head && rconn_can_send(c)) {
		/* straight into a send slot */
		i = c->free_slots[--c->n_free];
		rdma_write_frame(rconn_slot(c, i) + RDMA_WIRE_HDR, msg, len, payload, plen);
		err = rconn_post_send(c, i, RDMA_KIND_FRAME, total);
		if (err) {
			/* callers may hold c across this call: close it from the loop */
			c->post_err = -err;
			ev_feed_event(c->t->loop, &c->kick, EV_TIMER);
		}
		return 0;
	}
	f = malloc(sizeof(*f) + total);
	if (!f)
		return -ENOMEM;
	f->next = NULL;
	f->len = total;
	rdma_write_frame(f->data, msg, len, payload, plen);
	if (c->tail)
		c->tail->next = f;
	else
		c->head = f;
	c->tail = f;
	c->queued += total;
	return 0;
}

/* ---- input ------------------------------------------------------------------------- */

/* Receive slot i got n bytes: credits, then maybe a frame for the user. */
static void rconn_on_recv(struct tconn *c, unsigned i, size_t n)
{
	struct transport *t = c->t;
	const uint8_t *p = rconn_slot(c, i);
	const uint8_t *msg;
	struct frame_hdr h;
	const char *why;
	uint32_t credits;
	int err;

	if (n < RDMA_WIRE_HDR || p[1] || p[2] || p[3]) {
		rdma_close(c, "bad rdma message header");
		return;
	}
	credits = rdma_get_le32(p + 4);
	if (credits > c->peer_recv_n || c->credits + credits > c->peer_recv_n) {
		rdma_close(c, "peer returned more credits than it had");
		return;
	}
	c->credits += credits;
	if (p[0] == RDMA_KIND_FRAME) {
		if (n < RDMA_WIRE_HDR + TRANSPORT_HDR_SIZE) {
			rdma_close(c, "short frame");
			return;
		}
		if (frame_hdr_decode(p + RDMA_WIRE_HDR, &h, &why)) {
			rdma_close(c, why);
			return;
		}
		if (n != RDMA_WIRE_HDR + TRANSPORT_HDR_SIZE + (size_t)h.msg_len + h.payload_len) {
			rdma_close(c, "frame length does not match the message");
			return;
		}
		msg = p + RDMA_WIRE_HDR + TRANSPORT_HDR_SIZE;
		if (t->cb.on_message &&
		    t->cb.on_message(t->arg, c, msg, h.msg_len,
				     h.payload_len ? msg + h.msg_len : NULL, h.payload_len) < 0)
			rdma_close(c, "message refused by receiver");
		if (c->state == RCONN_CLOSED)
			return;
	} else if (p[0] != RDMA_KIND_CREDIT || n != RDMA_WIRE_HDR) {
		rdma_close(c, "unknown rdma message kind");
		return;
	}
	err = rconn_post_recv(c, i);
	if (err) {
		rconn_fail(c, "rdma post receive", -err);
		return;
	}
	c->owed++;
}

/* Read slot i finished: its bytes to the reader. */
static void rconn_on_read(struct tconn *c, unsigned i)
{
	struct rread *rd = &c->reads[i];

	if (!rd->busy) {
		rdma_close(c, "rdma read completion for no read");
		return;
	}
	rd->busy = 0;
	rd->cb(rd->arg, 0, c->rd_slab + (size_t)i * TCONN_READ_MAX, rd->len);
}

static void rconn_complete(struct tconn *c, const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS) {
		snprintf(c->why, sizeof(c->why), "rdma %s: %s",
			 wc->wr_id < RDMA_RECV_N			? "receive"
			 : wc->wr_id < RDMA_RECV_N + RDMA_SEND_N ? "send"
								  : "read",
			 ibv_wc_status_str(wc->status));
		rdma_close(c, c->why);
		return;
	}
	if (wc->wr_id >= RDMA_RECV_N + RDMA_SEND_N && wc->wr_id < RDMA_RECV_N + RDMA_SEND_N + RDMA_READ_N)
		rconn_on_read(c, (unsigned)(wc->wr_id - RDMA_RECV_N - RDMA_SEND_N));
	else if (wc->wr_id < RDMA_RECV_N)
		rconn_on_recv(c, (unsigned)wc->wr_id, wc->byte_len);
	else if (wc->wr_id < RDMA_RECV_N + RDMA_SEND_N && c->n_free < RDMA_SEND_N)
		c->free_slots[c->n_free++] = (unsigned)wc->wr_id;
	else
		rdma_close(c, "rdma completion for no slot");
}

/* Take the channel's event, re-arm, and handle completions. */
static void rconn_poll(struct tconn *c)
{
	struct ibv_wc wc[RDMA_POLL_BATCH];
	struct ibv_cq *cq;
	void *ctx;
	int n, i, done = 0, err;

	if (ibv_get_cq_event(c->cch, &cq, &ctx) == 0)
		ibv_ack_cq_events(cq, 1);
	err = ibv_req_notify_cq(c->cq, 0);
	if (err) {
		rconn_fail(c, "rdma notify", err);
		return;
	}
	while (done < RDMA_POLL_MAX) {
		n = ibv_poll_cq(c->cq, RDMA_POLL_BATCH, wc);
		if (n < 0) {
			rdma_close(c, "rdma poll failed");
			return;
		}
		if (n == 0)
			break;
		for (i = 0; i < n; i++) {
			rconn_complete(c, &wc[i]);
			if (c->state == RCONN_CLOSED)
				return;
		}
		done += n;
	}
	if (done >= RDMA_POLL_MAX) /* more may wait: no new event will say so */
		ev_feed_event(c->t->loop, &c->cqio, EV_READ);
	err = rconn_flush(c);
	if (err)
		rconn_fail(c, "rdma post send", -err);
}

static void rdma_cq_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tconn *c = rdma_container_of(w, struct tconn, cqio);
	struct transport *t = c->t;

	transport_hold(t);
	rconn_hold(c);
	if (c->state == RCONN_OPEN && c->post_err)
		rconn_fail(c, "rdma post send", c->post_err);
	else if (c->state == RCONN_OPEN)
		rconn_poll(c);
	rconn_release(c);
	transport_release(t);
}

/*
 * The outbound connect failed: on_connect(err), then on_close unless
 * on_connect closed c itself, as in tcp.c.
 */
static void rconn_connect_failed(struct tconn *c, const char *what, int err)
{
	struct transport *t = c->t;

	if (c->state != RCONN_CONNECTING)
		return;
	if (t->cb.on_connect)
		t->cb.on_connect(t->arg, c, err);
	if (c->state != RCONN_CLOSED)
		rconn_fail(c, what, -err);
}

static void rdma_kick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tconn *c = rdma_container_of(w, struct tconn, kick);
	struct transport *t = c->t;

	transport_hold(t);
	rconn_hold(c);
	if (c->state == RCONN_CONNECTING && c->conn_err)
		rconn_connect_failed(c, "rdma connect", c->conn_err);
	else if (c->state != RCONN_CLOSED && c->post_err)
		rconn_fail(c, "rdma post send", c->post_err);
	rconn_release(c);
	transport_release(t);
}

/* ---- connection manager events ------------------------------------------------------ */

/* The connection is up: both sides know the peer's receive count by now. */
static void rconn_established(struct tconn *c, const uint8_t *priv, size_t plen)
{
	struct transport *t = c->t;
	int inbound = c->state == RCONN_ACCEPTING;
	unsigned n;
	int err;

	c->connected = 1;
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
	c->state = RCONN_OPEN;
	ev_io_start(t->loop, &c->cqio);
	/* receives may have completed before this event: look once */
	ev_feed_event(t->loop, &c->cqio, EV_READ);
	if (inbound) {
		c->announced = 1;
		if (t->cb.on_accept)
			t->cb.on_accept(t->arg, c);
	} else if (t->cb.on_connect) {
		t->cb.on_connect(t->arg, c, 0);
	}
	if (c->state == RCONN_CLOSED)
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
	struct tconn *c;
	unsigned n = rdma_priv_decode(priv, plen);

	if (t->dying || !n || !(c = rconn_new(t, id))) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	c->state = RCONN_ACCEPTING;
	c->peer_recv_n = n;
	c->credits = n;
	rdma_format_peer(c->peer, rdma_get_peer_addr(id));
	rconn_hold(c);
	if (rconn_setup(c)) {
		rdma_reject(id, NULL, 0);
		rdma_close(c, "rdma set-up failed");
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
			rdma_close(c, "rdma accept failed");
	}
	rconn_release(c);
}

static int rdma_event_errno(int status, int fallback)
{
	return status < 0 ? status : -fallback;
}

/* An event for connection c (its copy: the event itself is acknowledged already). */
static void rconn_on_event(struct tconn *c, enum rdma_cm_event_type type, int status,
			   const uint8_t *priv, size_t plen)
{
	struct rdma_conn_param param;
	uint8_t mine[RDMA_PRIV_LEN];
	int err;

	if (c->state == RCONN_CLOSED)
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
		if (c->state == RCONN_CONNECTING || c->state == RCONN_ACCEPTING)
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
		if (c->state == RCONN_CONNECTING)
			rconn_connect_failed(c, "rdma connect",
					     rdma_event_errno(status, EHOSTUNREACH));
		else
			rdma_close(c, "rdma connection error");
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (c->state == RCONN_CONNECTING)
			rconn_connect_failed(c, "rdma connect", -ECONNREFUSED);
		else
			rdma_close(c, "rdma connection rejected");
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		rdma_close(c, "peer closed");
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rdma_close(c, "rdma device removed");
		break;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		rdma_close(c, "rdma address changed");
		break;
	default:
		break; /* TIMEWAIT_EXIT and the like */
	}
}

static void rdma_cm_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct transport *t = rdma_container_of(w, struct transport, cmio);
	uint8_t priv[256];
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type type;
	struct rdma_cm_id *id;
	struct tconn *c;
	size_t plen;
	int i, status;

	transport_hold(t);
	for (i = 0; i < RDMA_CM_EVENTS_PER_CB && !t->dying; i++) {
		if (rdma_get_cm_event(t->ch, &ev))
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
		if (!c || id == t->listen_id)
			continue;
		rconn_hold(c);
		rconn_on_event(c, type, status, priv, plen);
		rconn_release(c);
	}
	transport_release(t);
}

/* ---- listening and connecting --------------------------------------------------------- */

static int rdma_listen_on(struct transport *t, const char *host, uint16_t port)
{
	struct sockaddr_in sa;
	struct rdma_cm_id *id;
	int err;

	if (t->dying)
		return -ESHUTDOWN;
	if (t->listen_id)
		return -EALREADY;
	err = rdma_resolve_host(host, port, 1, &sa);
	if (err)
		return err;
	if (rdma_create_id(t->ch, &id, NULL, RDMA_PS_TCP))
		return rdma_errno(ENODEV);
	if (rdma_bind_addr(id, (struct sockaddr *)&sa) || rdma_listen(id, RDMA_BACKLOG)) {
		err = rdma_errno(EADDRNOTAVAIL);
		rdma_destroy_id(id);
		return err;
	}
	t->listen_id = id;
	t->port = ntohs(rdma_get_src_port(id));
	return 0;
}

static int rdma_local_port(const struct transport *t)
{
	return t->listen_id ? t->port : -ENOTCONN;
}

static struct tconn *rdma_connect_to(struct transport *t, const char *host, uint16_t port,
				     const char *bind_host)
{
	struct sockaddr_in dst, src;
	struct rdma_cm_id *id;
	struct tconn *c;
	int err;

	if (t->dying) {
		err = -ESHUTDOWN;
		goto fail;
	}
	err = rdma_resolve_host(host, port, 0, &dst);
	if (!err && bind_host)
		err = rdma_resolve_host(bind_host, 0, 1, &src);
	if (err)
		goto fail;
	if (rdma_create_id(t->ch, &id, NULL, RDMA_PS_TCP)) {
		err = rdma_errno(ENODEV);
		goto fail;
	}
	c = rconn_new(t, id);
	if (!c) {
		rdma_destroy_id(id);
		err = -ENOMEM;
		goto fail;
	}
	c->state = RCONN_CONNECTING;
	c->announced = 1;
	rdma_format_peer(c->peer, (struct sockaddr *)&dst);
	/* on_connect always comes from the loop, never from this call */
	if (rdma_resolve_addr(id, bind_host ? (struct sockaddr *)&src : NULL,
			      (struct sockaddr *)&dst, RDMA_RESOLVE_MS)) {
		c->conn_err = rdma_errno(EHOSTUNREACH);
		ev_feed_event(t->loop, &c->kick, EV_TIMER);
	}
	return c;

fail:
	errno = -err;
	return NULL;
}

static size_t rdma_queued(const struct tconn *c)
{
	return c->queued;
}

static const char *rdma_peer(const struct tconn *c)
{
	return c->peer;
}

static const char *rdma_device(const struct tconn *c)
{
	return c->device;
}

/* ---- one-sided reads ------------------------------------------------------------------ */

static int rdma_mem_add(struct tconn *c, void *base, size_t len)
{
	struct ibv_mr *mr;

	if (c->state != RCONN_OPEN || !c->pd)
		return -ENOTCONN;
	if (!base || !len)
		return -EINVAL;
	if (c->n_regions == c->cap_regions) {
		size_t cap = c->cap_regions ? c->cap_regions * 2 : 16;
		struct rregion *n = realloc(c->regions, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		c->regions = n;
		c->cap_regions = cap;
	}
	errno = 0;
	mr = ibv_reg_mr(c->pd, base, len, IBV_ACCESS_REMOTE_READ);
	if (!mr)
		return rdma_errno(ENOMEM);
	c->regions[c->n_regions++] = (struct rregion){ base, len, mr };
	return 0;
}

static void rdma_mem_del(struct tconn *c, void *base)
{
	size_t i;

	for (i = 0; i < c->n_regions; i++) {
		if (c->regions[i].base != base)
			continue;
		ibv_dereg_mr(c->regions[i].mr);
		c->regions[i] = c->regions[--c->n_regions];
		return;
	}
}

static int rdma_mem_key(const struct tconn *c, const void *addr, size_t len, uint32_t *rkey)
{
	const char *a = addr;
	size_t i;

	for (i = 0; i < c->n_regions; i++) {
		const char *b = c->regions[i].base;

		if (a >= b && len <= c->regions[i].len && (size_t)(a - b) <= c->regions[i].len - len) {
			*rkey = c->regions[i].mr->rkey;
			return 0;
		}
	}
	return -ENOENT;
}

static int rdma_read(struct tconn *c, uint64_t raddr, uint32_t rkey, size_t len,
		     tconn_read_fn cb, void *arg)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	unsigned i;
	int err;

	if (c->state != RCONN_OPEN || c->post_err)
		return -ENOTCONN;
	if (!len || len > TCONN_READ_MAX || !cb)
		return -EINVAL;
	for (i = 0; i < RDMA_READ_N && c->reads[i].busy; i++)
		;
	if (i == RDMA_READ_N)
		return -EBUSY;
	memset(&sge, 0, sizeof(sge));
	sge.addr = (uintptr_t)(c->rd_slab + (size_t)i * TCONN_READ_MAX);
	sge.length = (uint32_t)len;
	sge.lkey = c->rd_mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = RDMA_RECV_N + RDMA_SEND_N + i;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	err = ibv_post_send(c->id->qp, &wr, &bad);
	if (err)
		return -err;
	c->reads[i] = (struct rread){ cb, arg, len, 1 };
	return 0;
}

/* ---- the transport ------------------------------------------------------------------ */

struct transport *transport_rdma_new(struct ev_loop *loop, const struct transport_cb *cb, void *arg)
{
	struct transport *t;
	int fl, e;

	if (!loop || !cb) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	t->base.ops = &rdma_ops;
	t->loop = loop;
	t->cb = *cb;
	t->arg = arg;
	errno = 0;
	t->ch = rdma_create_event_channel();
	if (!t->ch) {
		e = errno ? errno : ENODEV;
		free(t);
		errno = e;
		return NULL;
	}
	fl = fcntl(t->ch->fd, F_GETFL);
	if (fl < 0 || fcntl(t->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		e = errno;
		rdma_destroy_event_channel(t->ch);
		free(t);
		errno = e;
		return NULL;
	}
	ev_io_init(&t->cmio, rdma_cm_cb, t->ch->fd, EV_READ);
	ev_io_start(loop, &t->cmio);
	return t;
}

static void rdma_free(struct transport *t)
{
	if (t->dying)
		return;
	t->dying = 1;
	transport_hold(t);
	ev_io_stop(t->loop, &t->cmio);
	if (t->listen_id) {
		rdma_destroy_id(t->listen_id);
		t->listen_id = NULL;
	}
	while (t->conns)
		rdma_close(t->conns, "transport closed");
	transport_release(t);
}

int transport_rdma_usable(const char *host)
{
	struct ibv_device **list;
	struct sockaddr_in sa;
	struct rdma_cm_id *id;
	int n = 0, ok = 0;

	if (rdma_resolve_host(host, 0, 1, &sa))
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
    .send = rdma_send,
    .close = rdma_close,
    .queued = rdma_queued,
    .peer = rdma_peer,
    .device = rdma_device,
    .mem_add = rdma_mem_add,
    .mem_del = rdma_mem_del,
    .mem_key = rdma_mem_key,
    .read = rdma_read,
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
