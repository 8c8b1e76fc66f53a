/*
 * rdma_verbs.c - the RDMA transport's data path (rdma_internal.h): each
 * connection's verbs objects - protection domain, completion channel (an
 * ev_io on its fd: no CQ thread), one CQ, an RC queue pair and one slab of
 * fixed slots registered once (local access only) - frames as SEND/RECV,
 * CQ polling, and one-sided reads: the regions a user registers for its peer
 * (remote read only, on this connection alone: never a key another
 * connection could use) and a few read slots of its own for the peer's bytes
 * to land in.
 * RDMA_RECV_N slots stay posted as receives; RDMA_SEND_N carry sends. A send
 * needs a credit (a receive the peer has posted for us): each message returns
 * the receives we re-posted since our last message, and an explicit credit
 * message goes out when many are owed. Data keeps one credit in reserve, so
 * a credit message can always go: the peer never sees receiver-not-ready.
 */
#include "transport/transport.h"

#if defined(RAMSTER_RDMA) && RAMSTER_RDMA

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/rdma_internal.h"

/* ---- set-up and teardown ---------------------------------------------------- */

static uint8_t *rconn_slot(struct rconn *c, unsigned i)
{
	return c->slab + (size_t)i * RDMA_SLOT_SIZE;
}

static int rconn_post_recv(struct rconn *c, unsigned i)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)rconn_slot(c, i),
	    .length = RDMA_SLOT_SIZE,
	    .lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;

	return -ibv_post_recv(c->id->qp, &wr, &bad);
}

/*
 * Everything the connection needs on its device (c->id->verbs), receives
 * posted. @return 0 or -errno; a partial set-up goes with the connection.
 */
int rconn_setup(struct rconn *c)
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

/* Free the verbs objects in the order they depend on each other. */
void rconn_teardown(struct rconn *c)
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

void rconn_drop_queue(struct rconn *c)
{
	struct rframe *f;

	while ((f = c->head)) {
		c->head = f->next;
		free(f);
	}
	c->tail = NULL;
	c->base.queued = 0;
}

/* Every read in flight ends with -ECONNRESET (the connection is closed already). */
void rconn_fail_reads(struct rconn *c)
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

/* ---- output ------------------------------------------------------------------------ */

/*
 * Post send slot i holding kind and len bytes of frame after the wire header,
 * returning every credit we owe. Calls no callback. @return 0 or -errno.
 */
static int rconn_post_send(struct rconn *c, unsigned i, uint8_t kind, size_t len)
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
	put_le32(p + 4, c->owed);
	err = ibv_post_send(c->id->qp, &wr, &bad);
	if (err)
		return -err;
	c->owed = 0;
	c->credits--;
	return 0;
}

/* Room for a data frame now: a send slot and a credit beyond the reserved one. */
static int rconn_can_send(const struct rconn *c)
{
	return c->base.state == TCONN_OPEN && c->n_free && c->credits >= 2 && !c->base.send_err;
}

/*
 * Post queued frames while slots and credits last, then a credit message if
 * we owe many. Calls no callback. @return 0 or -errno of a failed post.
 */
int rconn_flush(struct rconn *c)
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
		c->base.queued -= f->len;
		free(f);
	}
	if (c->base.state == TCONN_OPEN && c->owed >= RDMA_CREDIT_BATCH && c->credits >= 1 &&
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

int rconn_send(struct tconn *bc, const void *msg, size_t len, const void *payload, size_t plen)
{
	struct rconn *c = rconn_of(bc);
	struct rframe *f;
	size_t total;
	unsigned i;
	int err;

	if (c->base.state == TCONN_CLOSED)
		return -ENOTCONN;
	if (len > TRANSPORT_MSG_MAX || plen > TRANSPORT_PAYLOAD_MAX)
		return -EMSGSIZE;
	total = TRANSPORT_HDR_SIZE + len + plen;
	if (c->base.queued + total > TRANSPORT_QUEUE_MAX)
		return -EAGAIN;
	if (!c->head && rconn_can_send(c)) {
		/* straight into a send slot */
		i = c->free_slots[--c->n_free];
		rdma_write_frame(rconn_slot(c, i) + RDMA_WIRE_HDR, msg, len, payload, plen);
		err = rconn_post_send(c, i, RDMA_KIND_FRAME, total);
		if (err) {
			/* callers may hold c across this call: close it from the loop */
			c->base.send_err = -err;
			ev_feed_event(c->base.t->loop, &c->kick, EV_TIMER);
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
	c->base.queued += total;
	return 0;
}

/* ---- input ------------------------------------------------------------------------- */

/* Receive slot i got n bytes: credits, then maybe a frame for the user. */
static void rconn_on_recv(struct rconn *c, unsigned i, size_t n)
{
	struct transport *t = c->base.t;
	const uint8_t *p = rconn_slot(c, i);
	const uint8_t *msg;
	struct frame_hdr h;
	const char *why;
	uint32_t credits;
	int err;

	if (n < RDMA_WIRE_HDR || p[1] || p[2] || p[3]) {
		rconn_close(c, "bad rdma message header");
		return;
	}
	credits = get_le32(p + 4);
	if (credits > c->peer_recv_n || c->credits + credits > c->peer_recv_n) {
		rconn_close(c, "peer returned more credits than it had");
		return;
	}
	c->credits += credits;
	if (p[0] == RDMA_KIND_FRAME) {
		if (n < RDMA_WIRE_HDR + TRANSPORT_HDR_SIZE) {
			rconn_close(c, "short frame");
			return;
		}
		if (frame_hdr_decode(p + RDMA_WIRE_HDR, &h, &why)) {
			rconn_close(c, why);
			return;
		}
		if (n != RDMA_WIRE_HDR + TRANSPORT_HDR_SIZE + (size_t)h.msg_len + h.payload_len) {
			rconn_close(c, "frame length does not match the message");
			return;
		}
		msg = p + RDMA_WIRE_HDR + TRANSPORT_HDR_SIZE;
		if (t->cb.on_message &&
		    t->cb.on_message(t->arg, &c->base, msg, h.msg_len,
				     h.payload_len ? msg + h.msg_len : NULL, h.payload_len) < 0)
			rconn_close(c, "message refused by receiver");
		if (c->base.state == TCONN_CLOSED)
			return;
	} else if (p[0] != RDMA_KIND_CREDIT || n != RDMA_WIRE_HDR) {
		rconn_close(c, "unknown rdma message kind");
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
static void rconn_on_read(struct rconn *c, unsigned i)
{
	struct rread *rd = &c->reads[i];

	if (!rd->busy) {
		rconn_close(c, "rdma read completion for no read");
		return;
	}
	rd->busy = 0;
	rd->cb(rd->arg, 0, c->rd_slab + (size_t)i * TCONN_READ_MAX, rd->len);
}

static void rconn_complete(struct rconn *c, const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS) {
		snprintf(c->base.why, sizeof(c->base.why), "rdma %s: %s",
			 wc->wr_id < RDMA_RECV_N			? "receive"
			 : wc->wr_id < RDMA_RECV_N + RDMA_SEND_N ? "send"
								  : "read",
			 ibv_wc_status_str(wc->status));
		rconn_close(c, c->base.why);
		return;
	}
	if (wc->wr_id >= RDMA_RECV_N + RDMA_SEND_N && wc->wr_id < RDMA_RECV_N + RDMA_SEND_N + RDMA_READ_N)
		rconn_on_read(c, (unsigned)(wc->wr_id - RDMA_RECV_N - RDMA_SEND_N));
	else if (wc->wr_id < RDMA_RECV_N)
		rconn_on_recv(c, (unsigned)wc->wr_id, wc->byte_len);
	else if (wc->wr_id < RDMA_RECV_N + RDMA_SEND_N && c->n_free < RDMA_SEND_N)
		c->free_slots[c->n_free++] = (unsigned)wc->wr_id;
	else
		rconn_close(c, "rdma completion for no slot");
}

/* Take the channel's event, re-arm, and handle completions. */
static void rconn_poll(struct rconn *c)
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
			rconn_close(c, "rdma poll failed");
			return;
		}
		if (n == 0)
			break;
		for (i = 0; i < n; i++) {
			rconn_complete(c, &wc[i]);
			if (c->base.state == TCONN_CLOSED)
				return;
		}
		done += n;
	}
	if (done >= RDMA_POLL_MAX) /* more may wait: no new event will say so */
		ev_feed_event(c->base.t->loop, &c->cqio, EV_READ);
	err = rconn_flush(c);
	if (err)
		rconn_fail(c, "rdma post send", -err);
}

void rconn_cq_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct rconn *c = container_of(w, struct rconn, cqio);
	struct transport *t = c->base.t;

	transport_hold(t);
	tconn_hold(&c->base);
	if (c->base.state == TCONN_OPEN && c->base.send_err)
		rconn_fail(c, "rdma post send", c->base.send_err);
	else if (c->base.state == TCONN_OPEN)
		rconn_poll(c);
	tconn_release(&c->base);
	transport_release(t);
}

/* ---- one-sided reads ------------------------------------------------------------------ */

int rconn_mem_add(struct tconn *bc, void *base, size_t len)
{
	struct rconn *c = rconn_of(bc);
	struct ibv_mr *mr;

	if (c->base.state != TCONN_OPEN || !c->pd)
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

void rconn_mem_del(struct tconn *bc, void *base)
{
	struct rconn *c = rconn_of(bc);
	size_t i;

	for (i = 0; i < c->n_regions; i++) {
		if (c->regions[i].base != base)
			continue;
		ibv_dereg_mr(c->regions[i].mr);
		c->regions[i] = c->regions[--c->n_regions];
		return;
	}
}

int rconn_mem_key(const struct tconn *bc, const void *addr, size_t len, uint32_t *rkey)
{
	const struct rconn *c = rconn_of_c(bc);
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

int rconn_read(struct tconn *bc, uint64_t raddr, uint32_t rkey, size_t len, tconn_read_fn cb,
	       void *arg)
{
	struct rconn *c = rconn_of(bc);
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	unsigned i;
	int err;

	if (c->base.state != TCONN_OPEN || c->base.send_err)
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

#endif /* RAMSTER_RDMA */
