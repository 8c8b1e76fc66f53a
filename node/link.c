/*
 * link.c - links to peers: one per transport connection, from accept or dial
 * to on_close. The handshake (hello, then auth: each side proves it knows the
 * cluster key with an HMAC over the transcript), the frames of an
 * authenticated link, and the transport's callbacks.
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
#include "node/cluster_int.h"
#include "node/log.h"

/* ---- links --------------------------------------------------------------------- */

/*
 * Close l for a reason worth a warning: count it, log it with the caller's
 * file:line and the peer's address. l may be gone when this returns.
 */
#define link_refuse(l, counter, ...) link_refuse_at(l, counter, __FILE__, __LINE__, __VA_ARGS__)

static void link_refuse_at(struct cluster_link *l, uint64_t *counter, const char *file, int line,
			   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void link_refuse_at(struct cluster_link *l, uint64_t *counter, const char *file, int line,
			   const char *fmt, ...)
{
	char why[256];
	va_list ap;

	(*counter)++;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (l->peer)
		log_msg(LOG_WARN, file, line, "peer link %s (%s, %s): %s", l->addr,
			l->peer->node.name, l->outbound ? "outbound" : "inbound", why);
	else
		log_msg(LOG_WARN, file, line, "peer link %s (inbound): %s", l->addr, why);
	transport_close(l->conn, why);
}

static void link_handshake_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cluster_link *l = container_of(w, struct cluster_link, handshake);
	struct cluster *c = l->c;

	if (l->state == LINK_CONNECTING) {
		/* an unreachable peer: the redial backoff handles it quietly */
		c->st.connect_failures++;
		log_debug("peer %s (%u): connect to %s timed out", l->peer->node.name,
			  l->peer->node.id, l->addr);
		transport_close(l->conn, "connect timeout");
		return;
	}
	link_refuse(l, &c->st.handshake_timeouts, "no authentication after %u ms",
		    c->dead_after_ms > CLUSTER_HANDSHAKE_MIN_MS ? c->dead_after_ms
								: CLUSTER_HANDSHAKE_MIN_MS);
}

/* @return a link for conn, in c->links and set as conn's data, or NULL. */
struct cluster_link *link_new(struct cluster *c, struct tconn *conn,
				     struct cluster_peer *peer, bool outbound)
{
	unsigned ms = c->dead_after_ms > CLUSTER_HANDSHAKE_MIN_MS ? c->dead_after_ms
								  : CLUSTER_HANDSHAKE_MIN_MS;
	struct cluster_link *l = calloc(1, sizeof(*l));

	if (!outbound && c->handshake_max_ms && ms > c->handshake_max_ms)
		ms = c->handshake_max_ms; /* [limits] peer_handshake_timeout_ms */
	if (!l) {
		c->st.oom++;
		return NULL;
	}
	l->c = c;
	l->conn = conn;
	l->peer = peer;
	l->outbound = outbound;
	l->state = outbound ? LINK_CONNECTING : LINK_HELLO;
	snprintf(l->addr, sizeof(l->addr), "%s", tconn_peer(conn));
	l->next = c->links;
	if (c->links)
		c->links->prev = l;
	c->links = l;
	tconn_set_data(conn, l);
	ev_timer_init(&l->handshake, link_handshake_cb, ms / 1000.0, 0.);
	ev_timer_start(c->loop, &l->handshake);
	return l;
}

/* @return 0, or -errno from packing or the transport. */
int link_send_msg(struct cluster_link *l, const Ramster__Peer__Msg *m)
{
	uint8_t buf[CLUSTER_CTL_MSG_MAX];
	int n = peerwire_pack(m, buf, sizeof(buf));

	if (n < 0)
		return n;
	return transport_send(l->conn, buf, (size_t)n, NULL, 0);
}

static int link_send_hello(struct cluster_link *l)
{
	struct cluster *c = l->c;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Hello h = RAMSTER__PEER__HELLO__INIT;

	randombytes_buf(l->nonce, sizeof(l->nonce));
	l->announced = l->peer->epoch;
	h.version = CLUSTER_VERSION;
	h.cluster = c->name;
	h.node_id = c->self.id;
	h.incarnation = c->incarnation;
	h.nonce.data = l->nonce;
	h.nonce.len = sizeof(l->nonce);
	h.epoch = l->announced;
	m.op = RAMSTER__PEER__OP__P_HELLO;
	m.hello = &h;
	return link_send_msg(l, &m);
}

/*
 * The bytes a mac covers: label, sender id, receiver id, sender incarnation
 * (little-endian), the receiver's nonce, the sender's nonce, the cluster
 * name. Binding both nonces makes a mac good for one link only; binding both
 * ids keeps a node's own mac from being reflected back to it.
 * @return the length written to out (CLUSTER_TRANSCRIPT_MAX bytes).
 */
static size_t cluster_transcript(const struct cluster *c, uint8_t *out, uint32_t from, uint32_t to,
				 uint64_t from_inc, const uint8_t *to_nonce,
				 const uint8_t *from_nonce)
{
	size_t n = sizeof(CLUSTER_AUTH_LABEL) - 1, name_len = strlen(c->name);

	memcpy(out, CLUSTER_AUTH_LABEL, n);
	cluster_put_le(out + n, from, 4);
	n += 4;
	cluster_put_le(out + n, to, 4);
	n += 4;
	cluster_put_le(out + n, from_inc, 8);
	n += 8;
	memcpy(out + n, to_nonce, PEERWIRE_NONCE_LEN);
	n += PEERWIRE_NONCE_LEN;
	memcpy(out + n, from_nonce, PEERWIRE_NONCE_LEN);
	n += PEERWIRE_NONCE_LEN;
	memcpy(out + n, c->name, name_len);
	return n + name_len;
}

static int link_send_auth(struct cluster_link *l)
{
	struct cluster *c = l->c;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Auth a = RAMSTER__PEER__AUTH__INIT;
	uint8_t t[CLUSTER_TRANSCRIPT_MAX], mac[PEERWIRE_MAC_LEN];
	size_t n;

	n = cluster_transcript(c, t, c->self.id, l->peer->node.id, c->incarnation, l->their_nonce,
			       l->nonce);
	crypto_auth_hmacsha256(mac, t, n, c->key);
	a.mac.data = mac;
	a.mac.len = sizeof(mac);
	m.op = RAMSTER__PEER__OP__P_AUTH;
	m.auth = &a;
	return link_send_msg(l, &m);
}

/* ---- frames ------------------------------------------------------------------------ */

static int link_on_hello(struct cluster_link *l, const Ramster__Peer__Hello *h)
{
	struct cluster *c = l->c;
	struct cluster_peer *p;
	char name[PEERWIRE_CLUSTER_MAX + 1];

	if (l->state != LINK_HELLO) {
		link_refuse(l, &c->st.handshake_refused, "second hello");
		return CONN_CLOSED;
	}
	if (h->version != CLUSTER_VERSION) {
		link_refuse(l, &c->st.handshake_refused, "protocol version %u (ours is %u)",
			    h->version, CLUSTER_VERSION);
		return CONN_CLOSED;
	}
	if (strcmp(h->cluster, c->name)) {
		link_refuse(l, &c->st.handshake_refused, "cluster '%s' is not ours ('%s')",
			    cluster_printable(name, sizeof(name), h->cluster), c->name);
		return CONN_CLOSED;
	}
	if (h->node_id == c->self.id) {
		link_refuse(l, &c->st.handshake_refused, "peer claims our node id %u", h->node_id);
		return CONN_CLOSED;
	}
	p = cluster_peer(c, h->node_id);
	if (!p) {
		link_refuse(l, &c->st.handshake_refused, "node id %u is not in the cluster file",
			    h->node_id);
		return CONN_CLOSED;
	}
	if (l->outbound && p != l->peer) {
		link_refuse(l, &c->st.handshake_refused, "node %u answered for %s (%u)", h->node_id,
			    l->peer->node.name, l->peer->node.id);
		return CONN_CLOSED;
	}
	if (!l->outbound && p->dialer) {
		link_refuse(l, &c->st.handshake_refused,
			    "node %s (%u) dialed us, but the lower id dials", p->node.name,
			    p->node.id);
		return CONN_CLOSED;
	}
	if (!h->incarnation) {
		link_refuse(l, &c->st.handshake_refused, "incarnation zero");
		return CONN_CLOSED;
	}
	l->peer = p;
	l->their_inc = h->incarnation;
	l->their_epoch = h->epoch;
	memcpy(l->their_nonce, h->nonce.data, PEERWIRE_NONCE_LEN);
	/* the acceptor answers with its hello only now: it announces our epoch for that node */
	if ((!l->outbound && link_send_hello(l)) || link_send_auth(l)) {
		transport_close(l->conn, "cannot send the handshake");
		return CONN_CLOSED;
	}
	l->state = LINK_AUTH;
	return 0;
}

static int link_on_auth(struct cluster_link *l, const Ramster__Peer__Auth *a)
{
	struct cluster *c = l->c;
	uint8_t t[CLUSTER_TRANSCRIPT_MAX];
	size_t n;

	if (l->state != LINK_AUTH) {
		link_refuse(l, &c->st.handshake_refused, "auth before hello");
		return CONN_CLOSED;
	}
	n = cluster_transcript(c, t, l->peer->node.id, c->self.id, l->their_inc, l->nonce,
			       l->their_nonce);
	if (crypto_auth_hmacsha256_verify(a->mac.data, t, n, c->key)) {
		link_refuse(l, &c->st.auth_failures, "bad auth mac (another cluster key?)");
		return CONN_CLOSED;
	}
	c->st.handshakes++;
	return link_up(l);
}

static int link_on_frame(struct cluster_link *l, const Ramster__Peer__Msg *m,
			 const uint8_t *payload, size_t plen)
{
	struct cluster *c = l->c;
	struct cluster_peer *p = l->peer;

	if (l->state != LINK_UP) {
		if (m->op == RAMSTER__PEER__OP__P_HELLO)
			return link_on_hello(l, m->hello);
		if (m->op == RAMSTER__PEER__OP__P_AUTH)
			return link_on_auth(l, m->auth);
		link_refuse(l, &c->st.handshake_refused, "%s before authentication",
			    cluster_op_name(m->op));
		return CONN_CLOSED;
	}
	p->last_rx_ns = clock_now_ns(); /* monotonic: wall-clock steps change nothing */
	switch (m->op) {
	case RAMSTER__PEER__OP__P_HEARTBEAT:
		peer_on_heartbeat(p, m->heartbeat);
		return 0;
	case RAMSTER__PEER__OP__P_REPLY:
		peer_on_reply(p, m, payload, plen);
		return 0;
	case RAMSTER__PEER__OP__P_PUT:
	case RAMSTER__PEER__OP__P_GET:
	case RAMSTER__PEER__OP__P_FLUSH:
	case RAMSTER__PEER__OP__P_FLUSH_OBJECT:
	case RAMSTER__PEER__OP__P_FLUSH_POOL:
	case RAMSTER__PEER__OP__P_ECHO:
	case RAMSTER__PEER__OP__P_RETURN:
	case RAMSTER__PEER__OP__P_DRAIN:
		c->st.requests_received++;
		if (c->h.on_request)
			c->h.on_request(c->arg, p->node.id, peer_session(p), m, payload, plen);
		else
			cluster_reply(c, p->node.id, m->seq, -EOPNOTSUPP, NULL, NULL, 0);
		return 0;
	default:
		link_refuse(l, &c->st.protocol_errors, "%s after authentication",
			    cluster_op_name(m->op));
		return CONN_CLOSED;
	}
}

/* ---- transport callbacks ------------------------------------------------------------ */

void cluster_on_accept(void *arg, struct tconn *conn)
{
	struct cluster *c = arg;

	if (c->destroying) {
		transport_close(conn, "shutting down");
		return;
	}
	c->st.links_accepted++;
	if (!link_admit(c, conn)) { /* issue 14: bounded before authentication */
		transport_close(conn, "too many unauthenticated links");
		return;
	}
	if (!link_new(c, conn, NULL, false))
		transport_close(conn, "out of memory");
}

void cluster_on_connect(void *arg, struct tconn *conn, int err)
{
	struct cluster_link *l = tconn_data(conn);

	if (!l)
		return;
	if (err) {
		/* on_close follows and schedules the redial */
		l->c->st.connect_failures++;
		log_debug("peer %s (%u): connect to %s: %s", l->peer->node.name, l->peer->node.id,
			  l->addr, strerror(-err));
		return;
	}
	l->state = LINK_HELLO;
	if (link_send_hello(l))
		transport_close(conn, "cannot send hello");
}

int cluster_on_message(void *arg, struct tconn *conn, const uint8_t *msg, size_t len,
			      const uint8_t *payload, size_t plen)
{
	struct cluster *c = arg;
	struct cluster_link *l = tconn_data(conn);
	Ramster__Peer__Msg *m;
	const char *why = "refused";
	int rc;

	if (!l)
		return CONN_CLOSED;
	wire_arena_reset(&c->arena);
	if (peerwire_decode(msg, len, plen, &c->arena, &m, &why)) {
		link_refuse(l, &c->st.bad_frames, "bad frame: %s", why);
		return CONN_CLOSED;
	}
	/* callbacks below may close l: its memory stays until we are done */
	l->busy++;
	rc = link_on_frame(l, m, payload, plen);
	if (--l->busy == 0 && l->closed) {
		free(l);
		return CONN_CLOSED;
	}
	return rc;
}

void cluster_on_close(void *arg, struct tconn *conn, const char *reason)
{
	struct cluster *c = arg;
	struct cluster_link *l = tconn_data(conn);
	struct cluster_peer *p;

	if (!l)
		return;
	tconn_set_data(conn, NULL);
	l->conn = NULL;
	ev_timer_stop(c->loop, &l->handshake);
	if (l->prev)
		l->prev->next = l->next;
	else
		c->links = l->next;
	if (l->next)
		l->next->prev = l->prev;
	p = l->peer;
	if (p && p->dialing == l)
		p->dialing = NULL;
	if (p && p->link == l)
		peer_link_lost(p, l, reason);
	else
		log_debug("peer link %s closed: %s", l->addr, reason);
	if (p)
		peer_schedule_redial(p);
	if (l->busy)
		l->closed = true;
	else
		free(l);
}

