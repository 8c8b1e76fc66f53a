/*
 * link.c - links to peers: one per transport connection, from accept or dial
 * to on_close. The handshake (hello each way, then the dialer's proof; the
 * acceptor checks it before it proves anything itself; each proof is an HMAC
 * over both hellos), the per-link frame keys derived from it, the AEAD-sealed
 * frames of an authenticated link (linkcrypt.h), and the transport's callbacks.
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

/*
 * Send one frame on l: in the clear during the handshake, sealed (linkcrypt.h)
 * once l is up. sealed_pay: the payload is a sealed page (node/remote/seal.h),
 * already encrypted by its owner: the link MACs it and does not encrypt it
 * again. @return 0, or -errno from the transport (the frame did not
 * leave: its counter is used again by the next frame).
 */
int link_send(struct cluster_link *l, const void *msg, size_t len, const void *payload,
	      size_t plen, bool sealed_pay)
{
	struct cluster *c = l->c;
	const uint8_t *pay;
	size_t n;
	int err;

	if (l->state != LINK_UP)
		return transport_send(l->conn, msg, len, payload, plen);
	if (len + LC_OVERHEAD > sizeof(c->txmsg) || plen > sizeof(c->txpay))
		return -EMSGSIZE;
	n = lc_seal(&l->lc, msg, len, payload, plen, sealed_pay, c->txmsg, c->txpay, &pay);
	err = transport_send(l->conn, c->txmsg, n, pay, plen);
	if (!err)
		lc_sent(&l->lc);
	return err;
}

/* @return 0, or -errno from packing or the transport. */
int link_send_msg(struct cluster_link *l, const Ramster__Peer__Msg *m)
{
	uint8_t buf[CLUSTER_CTL_MSG_MAX];
	int n = peerwire_pack(m, buf, sizeof(buf));

	if (n < 0)
		return n;
	return link_send(l, buf, (size_t)n, NULL, 0, false);
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
	h.ciphers = lc_ciphers();
	h.security = c->integrity ? LC_INTEGRITY : LC_SECURE;
	m.op = RAMSTER__PEER__OP__P_HELLO;
	m.hello = &h;
	return link_send_msg(l, &m);
}

/*
 * The transcript of l's handshake: both hellos, the dialer's first - ids,
 * incarnations, nonces, the epochs each announced, cipher bits and security
 * modes - then the cluster name. Both proofs and the frame keys are made
 * from it, so whatever either side acts on from a hello is under the mac,
 * and both nonces make it good for this link only.
 * @return its length (at most CLUSTER_TRANSCRIPT_MAX - the label and role).
 */
static size_t link_transcript(const struct cluster_link *l, uint8_t *out)
{
	const struct cluster *c = l->c;
	uint32_t sec = c->integrity ? LC_INTEGRITY : LC_SECURE;
	struct {
		uint32_t id, epoch, ciphers, security;
		uint64_t inc;
		const uint8_t *nonce;
	} side[2] = {
	    {c->self.id, l->announced, lc_ciphers(), sec, c->incarnation, l->nonce},
	    {l->peer->node.id, l->their_epoch, l->their_ciphers, l->their_security, l->their_inc,
	     l->their_nonce},
	};
	size_t n = 0, name_len = strlen(c->name);
	int i, d = l->outbound ? 0 : 1; /* side[d] dialed */

	for (i = 0; i < 2; i++, d ^= 1) {
		cluster_put_le(out + n, side[d].id, 4);
		cluster_put_le(out + n + 4, side[d].inc, 8);
		memcpy(out + n + 12, side[d].nonce, PEERWIRE_NONCE_LEN);
		n += 12 + PEERWIRE_NONCE_LEN;
		cluster_put_le(out + n, side[d].epoch, 4);
		cluster_put_le(out + n + 4, side[d].ciphers, 4);
		cluster_put_le(out + n + 8, side[d].security, 4);
		n += 12;
	}
	memcpy(out + n, c->name, name_len);
	return n + name_len;
}

/* The proof of the dialer (role 'D') or the acceptor ('A'): HMAC-SHA-256(key, label role T). */
static void link_proof(const struct cluster_link *l, char role, uint8_t mac[PEERWIRE_MAC_LEN])
{
	uint8_t t[CLUSTER_TRANSCRIPT_MAX];
	size_t n = sizeof(CLUSTER_AUTH_LABEL) - 1;

	memcpy(t, CLUSTER_AUTH_LABEL, n);
	t[n++] = (uint8_t)role;
	n += link_transcript(l, t + n);
	crypto_auth_hmacsha256(mac, t, n, l->c->key);
	sodium_memzero(t, sizeof(t));
}

/*
 * The frame keys: HMAC-SHA-512(key, keys-label T), the dialer's direction
 * first; AES-256-GCM when both ends have it.
 */
static void link_keys(struct cluster_link *l)
{
	uint8_t t[CLUSTER_TRANSCRIPT_MAX], material[crypto_auth_hmacsha512_BYTES];
	size_t n = sizeof(CLUSTER_KEYS_LABEL) - 1;

	_Static_assert(sizeof(material) == 2 * LC_KEY_LEN, "two directions");
	_Static_assert(crypto_auth_hmacsha512_KEYBYTES == CLUSTER_KEY_LEN, "hmac-sha-512 key");
	memcpy(t, CLUSTER_KEYS_LABEL, n);
	n += link_transcript(l, t + n);
	crypto_auth_hmacsha512(material, t, n, l->c->key);
	lc_init(&l->lc, material, l->outbound, lc_ciphers() & l->their_ciphers & LC_CIPHER_AES,
		l->c->integrity);
	sodium_memzero(material, sizeof(material));
	sodium_memzero(t, sizeof(t));
}

static int link_send_auth(struct cluster_link *l)
{
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Auth a = RAMSTER__PEER__AUTH__INIT;
	uint8_t mac[PEERWIRE_MAC_LEN];

	link_proof(l, l->outbound ? 'D' : 'A', mac);
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
	if (h->security != (c->integrity ? LC_INTEGRITY : LC_SECURE)) {
		link_refuse(l, &c->st.handshake_refused,
			    "node %u runs link_security = %s, this node %s (set the same everywhere)",
			    h->node_id, h->security == LC_INTEGRITY ? "integrity" : "secure",
			    c->integrity ? "integrity" : "secure");
		return CONN_CLOSED;
	}
	l->peer = p;
	l->their_inc = h->incarnation;
	l->their_epoch = h->epoch;
	l->their_ciphers = h->ciphers;
	l->their_security = h->security;
	memcpy(l->their_nonce, h->nonce.data, PEERWIRE_NONCE_LEN);
	/*
	 * The acceptor answers with its hello only now (it announces our epoch
	 * for that node) and proves nothing before it has checked the dialer's
	 * proof; the dialer proves first, over both hellos.
	 */
	if (l->outbound ? link_send_auth(l) : link_send_hello(l)) {
		transport_close(l->conn, "cannot send the handshake");
		return CONN_CLOSED;
	}
	l->state = LINK_AUTH;
	return 0;
}

static int link_on_auth(struct cluster_link *l, const Ramster__Peer__Auth *a)
{
	struct cluster *c = l->c;
	uint8_t want[PEERWIRE_MAC_LEN];

	if (l->state != LINK_AUTH) {
		link_refuse(l, &c->st.handshake_refused, "auth before hello");
		return CONN_CLOSED;
	}
	link_proof(l, l->outbound ? 'A' : 'D', want);
	if (sodium_memcmp(a->mac.data, want, sizeof(want))) {
		link_refuse(l, &c->st.auth_failures,
			    "bad auth mac (another cluster key, or a hello changed on the way?)");
		return CONN_CLOSED;
	}
	/* the dialer has proven itself: now the acceptor proves, in the clear, last */
	if (!l->outbound && link_send_auth(l)) {
		transport_close(l->conn, "cannot send the handshake");
		return CONN_CLOSED;
	}
	link_keys(l);
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
	if (l->state == LINK_UP) {
		/* nothing reaches the decoder, let alone the tmem layer, unauthenticated */
		if (plen > sizeof(c->rxpay) || len > sizeof(c->rxmsg) ||
		    lc_open(&l->lc, msg, len, payload, plen, c->rxmsg, c->rxpay, &msg, &len,
			    &payload)) {
			link_refuse(l, &c->st.frame_auth_failures,
				    "frame %" PRIu64 " failed authentication (changed, forged, "
				    "replayed, reordered, dropped or from another link)",
				    l->lc.rx.ctr);
			return CONN_CLOSED;
		}
	}
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
	lc_wipe(&l->lc);
	if (l->busy)
		l->closed = true;
	else
		free(l);
}

