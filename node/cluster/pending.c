/*
 * pending.c - requests to peers and their replies: each peer's pending table
 * (a hash by seq, plus a list in seq order with a cursor at the first request
 * not yet written on the current link: a new link rewinds it, so requests go
 * out again in their order), timeouts, the transport's backlog, and
 * cluster_request / cluster_reply.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "node/clock.h"
#include "node/cluster/cluster_int.h"
#include "node/log.h"

/* ---- pending requests ------------------------------------------------------------- */

static struct cluster_req **req_slot(struct cluster_peer *p, uint64_t seq)
{
	return &p->htab[seq & (p->hsize - 1)];
}

static struct cluster_req *req_find(struct cluster_peer *p, uint64_t seq)
{
	struct cluster_req *r;

	if (!p->hsize)
		return NULL;
	for (r = *req_slot(p, seq); r; r = r->hnext)
		if (r->seq == seq)
			return r;
	return NULL;
}

/* Room for one more request. @return 0, or -ENOMEM (only for a first table). */
static int req_reserve(struct cluster_peer *p)
{
	struct cluster_req **t, *r, *next;
	size_t size, i;

	if (p->count < p->hsize)
		return 0;
	size = p->hsize ? p->hsize * 2 : CLUSTER_HTAB_MIN;
	t = calloc(size, sizeof(*t));
	if (!t) {
		p->c->st.oom++;
		return p->hsize ? 0 : -ENOMEM; /* longer chains still work */
	}
	for (i = 0; i < p->hsize; i++) {
		for (r = p->htab[i]; r; r = next) {
			next = r->hnext;
			r->hnext = t[r->seq & (size - 1)];
			t[r->seq & (size - 1)] = r;
		}
	}
	free(p->htab);
	p->htab = t;
	p->hsize = size;
	return 0;
}

static void req_insert(struct cluster_peer *p, struct cluster_req *r)
{
	struct cluster_req **slot = req_slot(p, r->seq);

	r->hnext = *slot;
	*slot = r;
	r->prev = p->tail;
	r->next = NULL;
	if (p->tail)
		p->tail->next = r;
	else
		p->head = r;
	p->tail = r;
	p->count++;
	if (!p->unsent)
		p->unsent = r;
}

/* Take r off p's table and list, and stop its timer. */
static void req_remove(struct cluster_peer *p, struct cluster_req *r)
{
	struct cluster_req **pp;

	for (pp = req_slot(p, r->seq); *pp != r; pp = &(*pp)->hnext)
		;
	*pp = r->hnext;
	if (p->unsent == r)
		p->unsent = r->next;
	if (r->prev)
		r->prev->next = r->next;
	else
		p->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		p->tail = r->prev;
	p->count--;
	ev_timer_stop(p->c->loop, &r->timer);
}

static void req_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cluster_req *r = container_of(w, struct cluster_req, timer);
	struct cluster_peer *p = r->peer;

	req_remove(p, r);
	p->c->st.timeouts++;
	r->cb(r->arg, -ETIMEDOUT, NULL, NULL, 0);
	free(r);
}

void peer_backlog_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	peer_flush(container_of(w, struct cluster_peer, backlog));
}

/*
 * Write p's requests from the cursor on, in order, while the transport takes
 * them. A full queue leaves the rest for a little later; nothing is reordered.
 */
void peer_flush(struct cluster_peer *p)
{
	struct cluster *c = p->c;
	struct cluster_req *r;
	int err;

	while (p->link && (r = p->unsent)) {
		err = link_send(p->link, r->data, r->len, r->payload, r->plen, r->sealed_pay);
		if (err) {
			if (err == -EAGAIN)
				c->st.send_full++;
			else
				c->st.send_errors++;
			if (!ev_is_active(&p->backlog))
				ev_timer_start(c->loop, &p->backlog);
			return;
		}
		if (r->sends++)
			c->st.requests_resent++;
		p->unsent = r->next;
	}
}

void peer_on_reply(struct cluster_peer *p, const Ramster__Peer__Msg *m,
			  const uint8_t *payload, size_t plen)
{
	struct cluster_req *r = req_find(p, m->seq);

	if (!r) {
		p->c->st.replies_unknown++;
		return;
	}
	req_remove(p, r);
	p->c->st.replies++;
	r->cb(r->arg, m->result, m, payload, plen);
	free(r);
}

/* ---- requests and replies ---------------------------------------------------------- */

int cluster_request(struct cluster *c, uint32_t node, Ramster__Peer__Msg *m, const void *payload,
		    size_t plen, unsigned timeout_ms, cluster_reply_fn cb, void *arg)
{
	struct cluster_peer *p;
	struct cluster_req *r;
	const char *why;
	int n;

	if (!c || !m || !cb || (plen && !payload))
		return -EINVAL;
	if (c->destroying)
		return -ESHUTDOWN;
	p = cluster_peer(c, node);
	if (!p)
		return -ENOENT;
	/* an unreachable peer is not gone: the request waits for its link, within
	 * its timeout (placements never ask one: cluster_pick skips it) */
	if (!cluster_op_is_request(m->op)) {
		c->st.requests_invalid++;
		return -EINVAL;
	}
	if (plen > PEERWIRE_PAGE_MAX) {
		c->st.requests_invalid++;
		return -EMSGSIZE;
	}
	if (p->count >= CLUSTER_PENDING_MAX) {
		c->st.requests_full++;
		return -EAGAIN;
	}
	m->seq = c->seq + 1;
	n = peerwire_pack(m, c->buf, sizeof(c->buf));
	if (n < 0) {
		c->st.requests_invalid++;
		return n;
	}
	why = cluster_check(c, c->buf, (size_t)n, plen);
	if (why) {
		c->st.requests_invalid++;
		log_warn("request %s to %s (%u) refused: %s", cluster_op_name(m->op), p->node.name,
			 node, why);
		return -EINVAL;
	}
	if (req_reserve(p))
		return -ENOMEM;
	r = malloc(sizeof(*r) + (size_t)n + plen);
	if (!r) {
		c->st.oom++;
		return -ENOMEM;
	}
	c->seq++;
	r->peer = p;
	r->seq = m->seq;
	r->cb = cb;
	r->arg = arg;
	r->sends = 0;
	r->sealed_pay = m->op == RAMSTER__PEER__OP__P_PUT || m->op == RAMSTER__PEER__OP__P_RETURN;
	r->len = (size_t)n;
	r->plen = plen;
	memcpy(r->data, c->buf, (size_t)n);
	r->payload = plen ? r->data + n : NULL;
	if (plen)
		memcpy(r->payload, payload, plen);
	ev_timer_init(&r->timer, req_timeout_cb, (timeout_ms ? timeout_ms : c->timeout_ms) / 1000.0,
		      0.);
	ev_timer_start(c->loop, &r->timer);
	req_insert(p, r);
	c->st.requests++;
	p->sent_since_hb += plen;
	peer_flush(p);
	return 0;
}

int cluster_reply(struct cluster *c, uint32_t node, uint64_t seq, int result,
		  const Ramster__Peer__Page *page, const void *payload, size_t plen)
{
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;
	uint8_t buf[CLUSTER_CTL_MSG_MAX];
	struct cluster_peer *p;
	const char *why;
	int n, err;

	if (!c)
		return -EINVAL;
	p = cluster_peer(c, node);
	if (!p)
		return -ENOENT;
	if (!seq || result > 0 || result < -CLUSTER_ERRNO_MAX || (plen && (result || !payload)) ||
	    plen > PEERWIRE_PAGE_MAX) {
		c->st.replies_invalid++;
		return -EINVAL;
	}
	m.op = RAMSTER__PEER__OP__P_REPLY;
	m.seq = seq;
	m.result = result;
	if (page) {
		pg = *page;
		m.page = &pg;
	}
	n = peerwire_pack(&m, buf, sizeof(buf));
	why = n < 0 ? "too long" : cluster_check(c, buf, (size_t)n, plen);
	if (why) {
		c->st.replies_invalid++;
		log_warn("reply to %s (%u) refused: %s", p->node.name, node, why);
		return -EINVAL;
	}
	if (!p->link) {
		c->st.replies_dropped++;
		return -ENOTCONN;
	}
	/* a reply with a page and bytes answers a get: the bytes are a sealed page */
	err = link_send(p->link, buf, (size_t)n, payload, plen, page != NULL);
	if (err) {
		c->st.replies_dropped++;
		return err;
	}
	c->st.replies_sent++;
	return 0;
}

