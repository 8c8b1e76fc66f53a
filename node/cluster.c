/*
 * cluster.c - membership of the collective (cluster.h): links, handshake,
 * heartbeats, deaths and restarts of peers, requests and their replies.
 *
 * Peers are fixed at create and found by node id. Each has at most one
 * authenticated link (peer->link), at most one outbound link in setup
 * (peer->dialing, toward higher ids only), a dead timer, and its pending
 * requests: a hash by seq plus a list in seq order with a cursor at the first
 * request not yet written on the current link (a new link rewinds it, so
 * requests go out again in their order). Links are freed only from the
 * transport's on_close, which also runs when we close one ourselves. A link
 * goes up only if the epoch its hello announced is still our epoch for the
 * peer: a peer's session always names our current epoch.
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

#include <ev.h>
#include <sodium.h>

#include "node/clock.h"
#include "node/cluster.h"
#include "node/liveness.h"
#include "node/log.h"
#include "transport/transport.h"

/* ---- tunables ------------------------------------------------------------ */

#define CLUSTER_VERSION		 1
#define CLUSTER_PENDING_MAX	 65536 /* requests waiting for one peer */
#define CLUSTER_HTAB_MIN	 64    /* buckets of a pending table; a power of two */
#define CLUSTER_BACKOFF_MIN_MS	 50    /* redial delays double from here ... */
#define CLUSTER_BACKOFF_MAX_MS	 2000  /* ... up to here */
#define CLUSTER_HANDSHAKE_MIN_MS 100   /* a link has max(this, dead_after_ms) to authenticate */
#define CLUSTER_BACKLOG_S	 0.002 /* retry writes this soon after a full transport queue */
#define CLUSTER_ARENA_SIZE	 (64u * 1024)
#define CLUSTER_CTL_MSG_MAX	 512 /* a packed hello, auth, heartbeat or reply */
#define CLUSTER_KEY_FILE_MAX	 4096
#define CLUSTER_KEY_MIN		 16
#define CLUSTER_AUTH_LABEL	 "ramster-auth-v1"
#define CLUSTER_DEFAULT_NAME	 "ramster" /* on the wire when the file names no cluster */
#define CLUSTER_ERRNO_MAX	 4095	   /* replies carry 0 or -1..-this */
#define CLUSTER_TRANSCRIPT_MAX                                                                     \
	(sizeof(CLUSTER_AUTH_LABEL) + 4 + 4 + 8 + 2 * PEERWIRE_NONCE_LEN + CONFIG_NAME_MAX)

_Static_assert(CLUSTER_KEY_LEN == crypto_auth_hmacsha256_KEYBYTES, "cluster key is the hmac key");
_Static_assert(PEERWIRE_MAC_LEN == crypto_auth_hmacsha256_BYTES, "mac size");
_Static_assert(CONFIG_NODES_MAX <= 64, "exclude masks are 64 bits");

#define cluster_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- structures ------------------------------------------------------------ */

/* One request to a peer, from cluster_request until its callback. */
struct cluster_req {
	ev_timer timer; /* the timeout */
	struct cluster_peer *peer;
	struct cluster_req *hnext;	 /* chain in peer->htab */
	struct cluster_req *prev, *next; /* peer's list, in seq order */
	uint64_t seq;
	cluster_reply_fn cb;
	void *arg;
	unsigned sends; /* times written to a link */
	size_t len, plen;
	uint8_t *payload; /* in data after the message; NULL when plen is 0 */
	uint8_t data[];	  /* the packed message, then the payload */
};

enum link_state {
	LINK_CONNECTING, /* outbound, TCP not up yet */
	LINK_HELLO,	 /* waiting for the peer's hello */
	LINK_AUTH,	 /* our auth sent, waiting for the peer's */
	LINK_UP,	 /* authenticated */
};

struct cluster_link {
	ev_timer handshake; /* closes a link that does not authenticate in time */
	struct cluster *c;
	struct tconn *conn;
	struct cluster_peer *peer;	  /* dialed, or named by its hello; NULL before */
	struct cluster_link *prev, *next; /* c->links */
	enum link_state state;
	bool outbound;
	int busy;	      /* frames being handled: free waits */
	bool closed;	      /* on_close ran while busy */
	unsigned announced;   /* the epoch our hello announced */
	uint64_t their_inc;   /* from their hello */
	uint32_t their_epoch; /* theirs for us, from their hello */
	uint8_t nonce[PEERWIRE_NONCE_LEN];
	uint8_t their_nonce[PEERWIRE_NONCE_LEN];
	char addr[48]; /* the other end, for logs */
};

enum peer_state {
	PEER_NEW,  /* never up */
	PEER_UP,   /* an authenticated link */
	PEER_DOWN, /* was up; link lost, not (yet) dead */
	PEER_DEAD, /* declared dead; waits for a new link */
};

struct cluster_peer {
	struct cluster *c;
	struct config_node node;
	ev_timer redial;  /* next dial (dialer only) */
	ev_timer dead;	  /* fires dead_after_ms after the last frame */
	ev_timer backlog; /* retry writes after a full transport queue */
	enum peer_state state;
	bool dialer; /* we dial it: its id is higher than ours */
	bool dialed_once;
	unsigned auto_dials; /* dials since its last link (transport = auto: rdma, tcp, ...) */
	struct cluster_link *link;    /* authenticated, or NULL */
	struct cluster_link *dialing; /* our outbound link in setup, or NULL */
	unsigned backoff_ms;
	ev_tstamp last_rx;     /* last frame on an authenticated link */
	uint64_t incarnation;  /* its; 0 before its first handshake */
	unsigned epoch;	       /* ours for it */
	uint32_t their_epoch;  /* its for us, from its last hello */
	uint64_t echo_sent_ns; /* its last heartbeat's sent_ns ... */
	uint64_t echo_rx_ns;   /* ... and when we got it (our clock) */
	double rtt_us;
	uint64_t donate_free, donate_total, pages_there;
	uint64_t sent_since_hb; /* payload bytes sent since its last heartbeat */
	uint64_t ups, deaths;
	uint32_t link_gen; /* grows with every authenticated link: names its memory keys */
	/* pending requests */
	struct cluster_req **htab;
	size_t hsize, count;
	struct cluster_req *head, *tail, *unsent;
};

struct cluster_stats {
	uint64_t links_accepted;     /* inbound connections accepted */
	uint64_t dials;		     /* outbound connections started */
	uint64_t reconnects;	     /* dials after the first to the same peer */
	uint64_t connect_failures;   /* dials that failed before a handshake */
	uint64_t handshakes;	     /* links authenticated */
	uint64_t handshake_refused;  /* links closed for a bad hello or a message before auth */
	uint64_t handshake_timeouts; /* links closed for not authenticating in time */
	uint64_t handshake_retries;  /* authenticated links closed: our epoch moved meanwhile */
	uint64_t auth_failures;	     /* links closed for a wrong mac */
	uint64_t bad_frames;	     /* links closed for a frame the decoder refused */
	uint64_t protocol_errors;    /* links closed for a handshake message after auth */
	uint64_t links_lost;	     /* authenticated links gone */
	uint64_t links_replaced;     /* authenticated links closed for a newer one */
	uint64_t heartbeats_sent;
	uint64_t heartbeats_received;
	uint64_t heartbeats_dropped; /* heartbeats the transport would not take */
	uint64_t peer_deaths;
	uint64_t peer_restarts;
	uint64_t requests;	       /* requests taken by cluster_request */
	uint64_t requests_resent;      /* requests written again on a new link */
	uint64_t requests_invalid;     /* refused by the local check (the peer would refuse) */
	uint64_t requests_full;	       /* refused: the peer's pending table is full */
	uint64_t requests_failed_dead; /* -EHOSTDOWN: refused, or pending at a death/restart */
	uint64_t requests_cancelled;   /* -ECANCELED at destroy */
	uint64_t replies;	       /* replies that completed a request */
	uint64_t timeouts;
	uint64_t replies_unknown; /* replies for no pending seq */
	uint64_t send_full;	  /* writes deferred: transport queue full */
	uint64_t send_errors;	  /* writes deferred: other transport errors */
	uint64_t requests_received;
	uint64_t replies_sent;
	uint64_t replies_dropped; /* no link, or the transport would not take it */
	uint64_t replies_invalid; /* refused by the local check */
	uint64_t picks_failed;	  /* cluster_pick found no peer */
	uint64_t oom;		  /* allocation failures */
};

struct cluster {
	struct ev_loop *loop;
	struct transport *t;  /* TCP: always listening */
	struct transport *rt; /* RDMA: when our transport resolved to rdma, else NULL */
	struct config_node self;
	char name[CONFIG_NAME_MAX];
	unsigned heartbeat_ms, dead_after_ms, timeout_ms;
	uint8_t key[CLUSTER_KEY_LEN];
	struct cluster_handlers h;
	void *arg;
	uint64_t incarnation;
	uint64_t seq; /* the last request's */
	uint64_t rng; /* xorshift state for cluster_pick */
	struct cluster_peer *by_id[CONFIG_NODES_MAX + 1];
	struct cluster_peer *peers;
	size_t n_peers;
	struct cluster_link *links; /* every link not yet closed */
	ev_timer heartbeat;
	bool destroying;
	struct wire_arena arena; /* received messages */
	struct wire_arena check; /* our own messages, checked before they leave */
	struct cluster_stats st;
	struct liveness live; /* each peer's (alive, epoch) for cluster_alive: any thread */
	uint8_t buf[TRANSPORT_MSG_MAX]; /* a request being packed */
};

static void peer_flush(struct cluster_peer *p);
static void peer_schedule_redial(struct cluster_peer *p);

/* ---- helpers ----------------------------------------------------------------- */

static const char *cluster_op_name(int op)
{
	static const char *const names[] = {"NONE", "HELLO", "AUTH",	     "HEARTBEAT",  "PUT",
					    "GET",  "FLUSH", "FLUSH_OBJECT", "FLUSH_POOL", "REPLY",
					    "ECHO", "RETURN", "DRAIN"};

	if (op < 0 || (size_t)op >= sizeof(names) / sizeof(names[0]))
		return "unknown op";
	return names[op];
}

static bool cluster_op_is_request(int op)
{
	return (op >= RAMSTER__PEER__OP__P_PUT && op <= RAMSTER__PEER__OP__P_FLUSH_POOL) ||
	       op == RAMSTER__PEER__OP__P_ECHO || op == RAMSTER__PEER__OP__P_RETURN ||
	       op == RAMSTER__PEER__OP__P_DRAIN;
}

/* Copy s for a log line, with anything unprintable as '?'. */
static const char *cluster_printable(char *out, size_t n, const char *s)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < n; i++)
		out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	out[i] = '\0';
	return out;
}

static struct cluster_peer *cluster_peer(const struct cluster *c, uint32_t node)
{
	if (node == 0 || node > CONFIG_NODES_MAX)
		return NULL;
	return c->by_id[node];
}

/* After p's state or epoch changed: what cluster_alive answers (liveness.h). */
static void peer_publish(struct cluster_peer *p)
{
	liveness_publish(&p->c->live, p->node.id, p->state == PEER_UP || p->state == PEER_DOWN,
			 p->epoch);
}

static uint64_t cluster_random(struct cluster *c)
{
	/* xorshift64*: picks need spread, not secrecy */
	c->rng ^= c->rng >> 12;
	c->rng ^= c->rng << 25;
	c->rng ^= c->rng >> 27;
	return c->rng * 0x2545f4914f6cdd1dull;
}

static void cluster_put_le(uint8_t *p, uint64_t v, int bytes)
{
	int i;

	for (i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/*
 * Would the peer take this message? It refuses with a closed link, and the
 * request would go out again on every new link: better to refuse it here.
 * @return NULL, or the decoder's reason.
 */
static const char *cluster_check(struct cluster *c, const uint8_t *msg, size_t len, size_t plen)
{
	Ramster__Peer__Msg *m;
	const char *why = NULL;

	wire_arena_reset(&c->check);
	if (peerwire_decode(msg, len, plen, &c->check, &m, &why))
		return why ? why : "refused";
	return NULL;
}

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
	struct cluster_link *l = cluster_container_of(w, struct cluster_link, handshake);
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
static struct cluster_link *link_new(struct cluster *c, struct tconn *conn,
				     struct cluster_peer *peer, bool outbound)
{
	unsigned ms = c->dead_after_ms > CLUSTER_HANDSHAKE_MIN_MS ? c->dead_after_ms
								  : CLUSTER_HANDSHAKE_MIN_MS;
	struct cluster_link *l = calloc(1, sizeof(*l));

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
static int link_send_msg(struct cluster_link *l, const Ramster__Peer__Msg *m)
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

/* ---- peers: heartbeats, life and death ------------------------------------------ */

static uint64_t peer_session(const struct cluster_peer *p)
{
	return p->incarnation + p->their_epoch;
}

static uint64_t peer_free(const struct cluster_peer *p)
{
	return p->donate_free > p->sent_since_hb ? p->donate_free - p->sent_since_hb : 0;
}

static void peer_send_heartbeat(struct cluster_peer *p)
{
	struct cluster *c = p->c;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Heartbeat hb = RAMSTER__PEER__HEARTBEAT__INIT;
	uint64_t now = clock_now_ns();

	if (c->h.donate)
		c->h.donate(c->arg, &hb.donate_free, &hb.donate_total);
	if (c->h.foreign_pages)
		hb.foreign_pages = c->h.foreign_pages(c->arg, p->node.id);
	hb.sent_ns = now;
	/*
	 * Echo its sent_ns advanced by the time we held it, so that its RTT
	 * is the network's and not up to a heartbeat period more.
	 */
	if (p->echo_sent_ns)
		hb.echo_ns = p->echo_sent_ns + (now - p->echo_rx_ns);
	m.op = RAMSTER__PEER__OP__P_HEARTBEAT;
	m.heartbeat = &hb;
	if (link_send_msg(p->link, &m))
		c->st.heartbeats_dropped++;
	else
		c->st.heartbeats_sent++;
}

static void peer_on_heartbeat(struct cluster_peer *p, const Ramster__Peer__Heartbeat *hb)
{
	uint64_t now = clock_now_ns();
	double sample;

	p->c->st.heartbeats_received++;
	p->donate_free = hb->donate_free;
	p->donate_total = hb->donate_total;
	p->pages_there = hb->foreign_pages;
	p->sent_since_hb = 0;
	p->echo_sent_ns = hb->sent_ns;
	p->echo_rx_ns = now;
	if (hb->echo_ns && hb->echo_ns <= now) {
		sample = (double)(now - hb->echo_ns) / 1000.0;
		p->rtt_us = p->rtt_us > 0 ? p->rtt_us + (sample - p->rtt_us) / 8 : sample;
	}
}

/* Take every pending request off p, then call each back with err. */
static void peer_fail_pending(struct cluster_peer *p, int err)
{
	struct cluster *c = p->c;
	struct cluster_req *r = p->head, *next;

	p->head = p->tail = p->unsent = NULL;
	p->count = 0;
	if (p->htab)
		memset(p->htab, 0, p->hsize * sizeof(*p->htab));
	/* callbacks may queue new requests: they go into the emptied table */
	for (; r; r = next) {
		next = r->next;
		ev_timer_stop(c->loop, &r->timer);
		if (err == -EHOSTDOWN)
			c->st.requests_failed_dead++;
		else if (err == -ECANCELED)
			c->st.requests_cancelled++;
		r->cb(r->arg, err, NULL, NULL, 0);
		free(r);
	}
}

/* Close p's authenticated link without the "lost" bookkeeping. */
static void peer_drop_link(struct cluster_peer *p, const char *reason)
{
	struct cluster_link *l = p->link;

	if (!l)
		return;
	p->link = NULL;
	transport_close(l->conn, reason);
}

static void peer_declare_dead(struct cluster_peer *p, double silent_s)
{
	struct cluster *c = p->c;

	p->state = PEER_DEAD;
	p->epoch++;
	peer_publish(p);
	p->deaths++;
	c->st.peer_deaths++;
	ev_timer_stop(c->loop, &p->dead);
	log_notice("peer %s (%u) dead: silent for %.0f ms", p->node.name, p->node.id,
		   silent_s * 1000.0);
	peer_drop_link(p, "peer declared dead");
	p->donate_free = p->donate_total = p->pages_there = 0;
	if (c->h.on_peer_down)
		c->h.on_peer_down(c->arg, p->node.id, "silent");
	peer_fail_pending(p, -EHOSTDOWN);
	peer_schedule_redial(p);
}

static void peer_dead_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cluster_peer *p = cluster_container_of(w, struct cluster_peer, dead);
	ev_tstamp now = ev_now(loop), due = p->last_rx + p->c->dead_after_ms / 1000.0;

	if (due > now + 1e-4) {
		/* a frame came since this was armed */
		w->repeat = due - now;
		ev_timer_again(loop, w);
		return;
	}
	peer_declare_dead(p, now - p->last_rx);
}

/*
 * A new incarnation of p authenticated: the old one is gone with every page
 * we had there. If we had not declared it dead already, that is a death:
 * epoch up, on_peer_down("restarted"), pending requests fail.
 */
static void peer_restarted(struct cluster_peer *p, uint64_t inc)
{
	struct cluster *c = p->c;

	c->st.peer_restarts++;
	log_notice("peer %s (%u) restarted: incarnation %016" PRIx64 " -> %016" PRIx64,
		   p->node.name, p->node.id, p->incarnation, inc);
	p->incarnation = inc;
	p->donate_free = p->donate_total = p->pages_there = 0;
	p->rtt_us = 0;
	p->backoff_ms = CLUSTER_BACKOFF_MIN_MS;
	peer_drop_link(p, "peer restarted");
	if (p->state == PEER_DEAD)
		return;
	p->state = PEER_DOWN;
	p->epoch++;
	peer_publish(p);
	p->last_rx = ev_now(c->loop); /* the new incarnation spoke */
	if (c->h.on_peer_down)
		c->h.on_peer_down(c->arg, p->node.id, "restarted");
	peer_fail_pending(p, -EHOSTDOWN);
}

/*
 * l authenticated. @return 0, or -1 when l was closed (its hello announced
 * an epoch we have since left: the next link carries the current one).
 */
static int link_up(struct cluster_link *l)
{
	struct cluster *c = l->c;
	struct cluster_peer *p = l->peer;
	struct cluster_link *old;

	ev_timer_stop(c->loop, &l->handshake);
	if (p->incarnation && p->incarnation != l->their_inc)
		peer_restarted(p, l->their_inc);
	p->incarnation = l->their_inc;
	if (l->announced != p->epoch) {
		c->st.handshake_retries++;
		log_info("peer %s (%u): our epoch for it moved during the handshake; reconnecting",
			 p->node.name, p->node.id);
		transport_close(l->conn, "epoch changed during the handshake");
		return -1;
	}
	if (p->dialing == l)
		p->dialing = NULL;
	old = p->link;
	p->link = l;
	p->link_gen++;
	l->state = LINK_UP;
	if (old) {
		c->st.links_replaced++;
		log_info("peer %s (%u): link %s replaced by %s", p->node.name, p->node.id,
			 old->addr, l->addr);
		transport_close(old->conn, "replaced by a newer link");
	}
	p->their_epoch = l->their_epoch;
	p->state = PEER_UP;
	peer_publish(p);
	p->ups++;
	p->auto_dials = 0;
	p->backoff_ms = CLUSTER_BACKOFF_MIN_MS;
	ev_timer_stop(c->loop, &p->redial);
	p->last_rx = ev_now(c->loop);
	p->dead.repeat = c->dead_after_ms / 1000.0;
	ev_timer_again(c->loop, &p->dead);
	p->echo_sent_ns = p->echo_rx_ns = 0;
	log_notice("peer %s (%u) up via %s %s, incarnation %016" PRIx64 ", epochs %u/%u",
		   p->node.name, p->node.id, tconn_kind(l->conn), l->addr, p->incarnation, p->epoch,
		   p->their_epoch);
	peer_send_heartbeat(p);
	/* everything unanswered goes (again) on this link, in order */
	p->unsent = p->head;
	peer_flush(p);
	if (c->h.on_peer_up)
		c->h.on_peer_up(c->arg, p->node.id, peer_session(p));
	return 0;
}

/* p's authenticated link is gone (not replaced, not dropped by us). */
static void peer_link_lost(struct cluster_peer *p, struct cluster_link *l, const char *reason)
{
	struct cluster *c = p->c;

	p->link = NULL;
	p->unsent = NULL;
	if (p->state == PEER_UP)
		p->state = PEER_DOWN;
	c->st.links_lost++;
	if (c->destroying)
		log_debug("peer %s (%u): link %s closed: %s", p->node.name, p->node.id, l->addr,
			  reason);
	else
		log_info("peer %s (%u): link %s lost: %s", p->node.name, p->node.id, l->addr,
			 reason);
}

/* ---- transport choice ------------------------------------------------------------------
 * Every node listens on TCP; a node whose transport is rdma (or auto, with an
 * RDMA device on its address) listens on RDMA too, on the same address and
 * port (RDMA CM ports are not TCP ports). The dialer picks by the peer's
 * configured transport: RDMA only when both ends are rdma; an auto peer gets
 * RDMA and TCP dials in turn until a link comes up.
 */

static struct transport *peer_transport(struct cluster_peer *p)
{
	struct cluster *c = p->c;

	if (!c->rt || p->node.transport == TRANSPORT_TCP)
		return c->t;
	if (p->node.transport == TRANSPORT_AUTO && (p->auto_dials++ & 1))
		return c->t;
	return c->rt;
}

static void peer_dial(struct cluster_peer *p)
{
	struct cluster *c = p->c;
	const char *bind_host = c->self.host;
	struct cluster_link *l;
	struct tconn *conn;

	if (!*bind_host || !strcmp(bind_host, "*") || !strcmp(bind_host, "0.0.0.0"))
		bind_host = NULL;
	c->st.dials++;
	if (p->dialed_once)
		c->st.reconnects++;
	p->dialed_once = true;
	conn = transport_connect(peer_transport(p), p->node.host, p->node.port, bind_host);
	if (!conn) {
		c->st.connect_failures++;
		log_debug("peer %s (%u): connect to %s:%u: %s", p->node.name, p->node.id,
			  p->node.host, (unsigned)p->node.port, strerror(errno));
		peer_schedule_redial(p);
		return;
	}
	l = link_new(c, conn, p, true);
	if (!l) {
		transport_close(conn, "out of memory");
		peer_schedule_redial(p);
		return;
	}
	p->dialing = l;
}

static void peer_redial_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cluster_peer *p = cluster_container_of(w, struct cluster_peer, redial);

	if (!p->link && !p->dialing && !p->c->destroying)
		peer_dial(p);
}

/* Dial p again after the backoff, if we dial it and have no link to it. */
static void peer_schedule_redial(struct cluster_peer *p)
{
	struct cluster *c = p->c;

	if (c->destroying || !p->dialer || p->link || p->dialing || ev_is_active(&p->redial))
		return;
	ev_timer_set(&p->redial, p->backoff_ms / 1000.0, 0.);
	ev_timer_start(c->loop, &p->redial);
	p->backoff_ms *= 2;
	if (p->backoff_ms > CLUSTER_BACKOFF_MAX_MS)
		p->backoff_ms = CLUSTER_BACKOFF_MAX_MS;
}

static void cluster_heartbeat_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cluster *c = cluster_container_of(w, struct cluster, heartbeat);
	size_t i;

	for (i = 0; i < c->n_peers; i++) {
		struct cluster_peer *p = &c->peers[i];

		if (!p->link)
			continue;
		peer_send_heartbeat(p);
		peer_flush(p);
	}
}

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
	struct cluster_req *r = cluster_container_of(w, struct cluster_req, timer);
	struct cluster_peer *p = r->peer;

	req_remove(p, r);
	p->c->st.timeouts++;
	r->cb(r->arg, -ETIMEDOUT, NULL, NULL, 0);
	free(r);
}

static void peer_backlog_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	peer_flush(cluster_container_of(w, struct cluster_peer, backlog));
}

/*
 * Write p's requests from the cursor on, in order, while the transport takes
 * them. A full queue leaves the rest for a little later; nothing is reordered.
 */
static void peer_flush(struct cluster_peer *p)
{
	struct cluster *c = p->c;
	struct cluster_req *r;
	int err;

	while (p->link && (r = p->unsent)) {
		err = transport_send(p->link->conn, r->data, r->len, r->payload, r->plen);
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

static void peer_on_reply(struct cluster_peer *p, const Ramster__Peer__Msg *m,
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

/* ---- frames ------------------------------------------------------------------------ */

static int link_on_hello(struct cluster_link *l, const Ramster__Peer__Hello *h)
{
	struct cluster *c = l->c;
	struct cluster_peer *p;
	char name[PEERWIRE_CLUSTER_MAX + 1];

	if (l->state != LINK_HELLO) {
		link_refuse(l, &c->st.handshake_refused, "second hello");
		return -1;
	}
	if (h->version != CLUSTER_VERSION) {
		link_refuse(l, &c->st.handshake_refused, "protocol version %u (ours is %u)",
			    h->version, CLUSTER_VERSION);
		return -1;
	}
	if (strcmp(h->cluster, c->name)) {
		link_refuse(l, &c->st.handshake_refused, "cluster '%s' is not ours ('%s')",
			    cluster_printable(name, sizeof(name), h->cluster), c->name);
		return -1;
	}
	if (h->node_id == c->self.id) {
		link_refuse(l, &c->st.handshake_refused, "peer claims our node id %u", h->node_id);
		return -1;
	}
	p = cluster_peer(c, h->node_id);
	if (!p) {
		link_refuse(l, &c->st.handshake_refused, "node id %u is not in the cluster file",
			    h->node_id);
		return -1;
	}
	if (l->outbound && p != l->peer) {
		link_refuse(l, &c->st.handshake_refused, "node %u answered for %s (%u)", h->node_id,
			    l->peer->node.name, l->peer->node.id);
		return -1;
	}
	if (!l->outbound && p->dialer) {
		link_refuse(l, &c->st.handshake_refused,
			    "node %s (%u) dialed us, but the lower id dials", p->node.name,
			    p->node.id);
		return -1;
	}
	if (!h->incarnation) {
		link_refuse(l, &c->st.handshake_refused, "incarnation zero");
		return -1;
	}
	l->peer = p;
	l->their_inc = h->incarnation;
	l->their_epoch = h->epoch;
	memcpy(l->their_nonce, h->nonce.data, PEERWIRE_NONCE_LEN);
	/* the acceptor answers with its hello only now: it announces our epoch for that node */
	if ((!l->outbound && link_send_hello(l)) || link_send_auth(l)) {
		transport_close(l->conn, "cannot send the handshake");
		return -1;
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
		return -1;
	}
	n = cluster_transcript(c, t, l->peer->node.id, c->self.id, l->their_inc, l->nonce,
			       l->their_nonce);
	if (crypto_auth_hmacsha256_verify(a->mac.data, t, n, c->key)) {
		link_refuse(l, &c->st.auth_failures, "bad auth mac (another cluster key?)");
		return -1;
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
		return -1;
	}
	p->last_rx = ev_now(c->loop);
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
		return -1;
	}
}

/* ---- transport callbacks ------------------------------------------------------------ */

static void cluster_on_accept(void *arg, struct tconn *conn)
{
	struct cluster *c = arg;

	if (c->destroying) {
		transport_close(conn, "shutting down");
		return;
	}
	c->st.links_accepted++;
	if (!link_new(c, conn, NULL, false))
		transport_close(conn, "out of memory");
}

static void cluster_on_connect(void *arg, struct tconn *conn, int err)
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

static int cluster_on_message(void *arg, struct tconn *conn, const uint8_t *msg, size_t len,
			      const uint8_t *payload, size_t plen)
{
	struct cluster *c = arg;
	struct cluster_link *l = tconn_data(conn);
	Ramster__Peer__Msg *m;
	const char *why = "refused";
	int rc;

	if (!l)
		return -1;
	wire_arena_reset(&c->arena);
	if (peerwire_decode(msg, len, plen, &c->arena, &m, &why)) {
		link_refuse(l, &c->st.bad_frames, "bad frame: %s", why);
		return -1;
	}
	/* callbacks below may close l: its memory stays until we are done */
	l->busy++;
	rc = link_on_frame(l, m, payload, plen);
	if (--l->busy == 0 && l->closed) {
		free(l);
		return -1;
	}
	return rc;
}

static void cluster_on_close(void *arg, struct tconn *conn, const char *reason)
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

/* ---- the cluster ---------------------------------------------------------------------- */

static void cluster_fail(char *err, size_t errlen, int e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void cluster_fail(char *err, size_t errlen, int e, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	errno = e;
}

/*
 * Start the RDMA transport when self's transport asks for it: rdma must have
 * a device on self's address, auto takes one if there is. @return 0 (c->rt set
 * or NULL), or -errno with err set.
 */
static int cluster_rdma_start(struct cluster *c, const struct transport_cb *tcb, char *err,
			      size_t errlen)
{
	const struct config_node *self = &c->self;
	int rc, e;

	if (self->transport == TRANSPORT_TCP)
		return 0;
	if (!transport_rdma_usable(self->host)) {
		if (self->transport == TRANSPORT_AUTO) {
			log_info("cluster: transport auto: no RDMA device serves %s, using tcp",
				 self->host);
			return 0;
		}
		cluster_fail(err, errlen, ENODEV, "transport rdma: no RDMA device serves %s",
			     self->host);
		return -ENODEV;
	}
	c->rt = transport_rdma_new(c->loop, tcb, c);
	if (!c->rt) {
		e = errno;
		cluster_fail(err, errlen, e, "transport rdma: %s", strerror(e));
		return -e;
	}
	rc = transport_listen(c->rt, self->host, self->port);
	if (rc) {
		cluster_fail(err, errlen, -rc, "transport rdma: cannot listen on %s:%u: %s",
			     self->host, (unsigned)self->port, strerror(-rc));
		transport_free(c->rt);
		c->rt = NULL;
		return rc;
	}
	log_info("cluster: transport %s: rdma (and tcp) on %s:%u",
		 self->transport == TRANSPORT_AUTO ? "auto" : "rdma", self->host,
		 (unsigned)self->port);
	return 0;
}

struct cluster *cluster_create(struct ev_loop *loop, const struct config *cfg,
			       const struct config_node *self, const uint8_t key[CLUSTER_KEY_LEN],
			       const struct cluster_handlers *h, void *arg, char *err,
			       size_t errlen)
{
	static const struct transport_cb tcb = {
	    .on_accept = cluster_on_accept,
	    .on_connect = cluster_on_connect,
	    .on_message = cluster_on_message,
	    .on_close = cluster_on_close,
	};
	struct cluster *c;
	size_t i, n;
	int rc, e;

	if (!loop || !cfg || !self || !key) {
		cluster_fail(err, errlen, EINVAL, "cluster: missing loop, config, node or key");
		return NULL;
	}
	if (self->id == 0 || self->id > CONFIG_NODES_MAX || !cfg->heartbeat_ms ||
	    !cfg->dead_after_ms || strlen(cfg->cluster_name) > PEERWIRE_CLUSTER_MAX) {
		cluster_fail(err, errlen, EINVAL, "cluster: bad node id, timing or cluster name");
		return NULL;
	}
	if (sodium_init() < 0) {
		cluster_fail(err, errlen, EIO, "cluster: libsodium failed to initialize");
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		cluster_fail(err, errlen, ENOMEM, "cluster: out of memory");
		return NULL;
	}
	c->loop = loop;
	c->self = *self;
	snprintf(c->name, sizeof(c->name), "%s",
		 cfg->cluster_name[0] ? cfg->cluster_name : CLUSTER_DEFAULT_NAME);
	c->heartbeat_ms = cfg->heartbeat_ms;
	c->dead_after_ms = cfg->dead_after_ms;
	c->timeout_ms = cfg->request_timeout_ms ? cfg->request_timeout_ms : cfg->dead_after_ms;
	memcpy(c->key, key, CLUSTER_KEY_LEN);
	if (h)
		c->h = *h;
	c->arg = arg;
	do
		randombytes_buf(&c->incarnation, sizeof(c->incarnation));
	while (!c->incarnation);
	do
		randombytes_buf(&c->rng, sizeof(c->rng));
	while (!c->rng);

	c->peers = calloc(cfg->n_nodes ? cfg->n_nodes : 1, sizeof(*c->peers));
	if (!c->peers) {
		cluster_fail(err, errlen, ENOMEM, "cluster: out of memory");
		goto free_cluster;
	}
	for (i = 0, n = 0; i < cfg->n_nodes; i++) {
		const struct config_node *node = &cfg->nodes[i];
		struct cluster_peer *p = &c->peers[n];

		if (node->id == self->id)
			continue;
		if (node->id == 0 || node->id > CONFIG_NODES_MAX || c->by_id[node->id]) {
			cluster_fail(err, errlen, EINVAL,
				     "cluster: node %s has a bad or repeated id %u", node->name,
				     node->id);
			goto free_peers;
		}
		p->c = c;
		p->node = *node;
		p->dialer = node->id > self->id;
		p->backoff_ms = CLUSTER_BACKOFF_MIN_MS;
		ev_timer_init(&p->redial, peer_redial_cb, 0., 0.);
		ev_init(&p->dead, peer_dead_cb);
		ev_timer_init(&p->backlog, peer_backlog_cb, CLUSTER_BACKLOG_S, 0.);
		c->by_id[node->id] = p;
		n++;
	}
	c->n_peers = n;

	if (wire_arena_init(&c->arena, CLUSTER_ARENA_SIZE)) {
		cluster_fail(err, errlen, ENOMEM, "cluster: out of memory");
		goto free_peers;
	}
	if (wire_arena_init(&c->check, CLUSTER_ARENA_SIZE)) {
		cluster_fail(err, errlen, ENOMEM, "cluster: out of memory");
		goto free_arena;
	}
	c->t = transport_tcp_new(loop, &tcb, c);
	if (!c->t) {
		e = errno;
		cluster_fail(err, errlen, e, "cluster: transport: %s", strerror(e));
		goto free_check;
	}
	rc = transport_listen(c->t, self->host, self->port);
	if (rc) {
		cluster_fail(err, errlen, -rc, "cluster: cannot listen on %s:%u: %s", self->host,
			     (unsigned)self->port, strerror(-rc));
		goto free_transport;
	}
	if (cluster_rdma_start(c, &tcb, err, errlen))
		goto free_transport;
	ev_timer_init(&c->heartbeat, cluster_heartbeat_cb, c->heartbeat_ms / 1000.0,
		      c->heartbeat_ms / 1000.0);
	ev_timer_start(loop, &c->heartbeat);
	log_info("cluster %s: node %s (%u) on %s:%u, incarnation %016" PRIx64 ", %zu peers",
		 c->name, self->name, self->id, self->host, (unsigned)self->port, c->incarnation,
		 c->n_peers);
	for (i = 0; i < c->n_peers; i++)
		if (c->peers[i].dialer)
			peer_dial(&c->peers[i]);
	return c;

free_transport:
	transport_free(c->t);
free_check:
	wire_arena_fini(&c->check);
free_arena:
	wire_arena_fini(&c->arena);
free_peers:
	free(c->peers);
free_cluster:
	sodium_memzero(c->key, sizeof(c->key));
	free(c);
	return NULL;
}

void cluster_destroy(struct cluster *c)
{
	struct cluster_link *l;
	size_t i;

	if (!c)
		return;
	c->destroying = true;
	ev_timer_stop(c->loop, &c->heartbeat);
	for (i = 0; i < c->n_peers; i++) {
		struct cluster_peer *p = &c->peers[i];

		ev_timer_stop(c->loop, &p->redial);
		ev_timer_stop(c->loop, &p->dead);
		ev_timer_stop(c->loop, &p->backlog);
		peer_fail_pending(p, -ECANCELED);
	}
	/* closes every connection: on_close frees each link */
	transport_free(c->rt);
	transport_free(c->t);
	while ((l = c->links)) {
		/* not reached with a transport that keeps its word; never leak */
		c->links = l->next;
		ev_timer_stop(c->loop, &l->handshake);
		free(l);
	}
	log_info("cluster %s: node %s (%u) left", c->name, c->self.name, c->self.id);
	for (i = 0; i < c->n_peers; i++)
		free(c->peers[i].htab);
	free(c->peers);
	wire_arena_fini(&c->check);
	wire_arena_fini(&c->arena);
	sodium_memzero(c->key, sizeof(c->key));
	free(c);
}

int cluster_load_key(const char *path, uint8_t key[CLUSTER_KEY_LEN], char *err, size_t errlen)
{
	uint8_t buf[CLUSTER_KEY_FILE_MAX + 1];
	size_t n = 0;
	struct stat st;
	ssize_t r;
	int fd, rc = 0;

	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium failed to initialize");
		return -EIO;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open secret_file %s: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot stat secret_file %s: %s", path, strerror(-rc));
		goto close_fd;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		snprintf(err, errlen, "secret_file %s is not a regular file", path);
		goto close_fd;
	}
	if (st.st_mode & (S_IRGRP | S_IROTH)) {
		rc = -EACCES;
		snprintf(err, errlen, "secret_file %s is readable by group or others (chmod 600)",
			 path);
		goto close_fd;
	}
	while (n < sizeof(buf)) {
		r = read(fd, buf + n, sizeof(buf) - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			snprintf(err, errlen, "cannot read secret_file %s: %s", path,
				 strerror(-rc));
			goto wipe;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > CLUSTER_KEY_FILE_MAX) {
		rc = -EFBIG;
		snprintf(err, errlen, "secret_file %s is longer than %u bytes", path,
			 CLUSTER_KEY_FILE_MAX);
		goto wipe;
	}
	while (n && (buf[n - 1] == ' ' || buf[n - 1] == '\t' || buf[n - 1] == '\r' ||
		     buf[n - 1] == '\n' || buf[n - 1] == '\v' || buf[n - 1] == '\f'))
		n--;
	if (n < CLUSTER_KEY_MIN) {
		rc = -EINVAL;
		snprintf(err, errlen, "secret_file %s is too short: %zu bytes, at least %u", path,
			 n, CLUSTER_KEY_MIN);
		goto wipe;
	}
	crypto_generichash(key, CLUSTER_KEY_LEN, buf, n, NULL, 0);
wipe:
	sodium_memzero(buf, sizeof(buf));
close_fd:
	close(fd);
	return rc;
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
	if (p->state == PEER_DEAD) {
		c->st.requests_failed_dead++;
		return -EHOSTDOWN;
	}
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
	err = transport_send(p->link->conn, buf, (size_t)n, payload, plen);
	if (err) {
		c->st.replies_dropped++;
		return err;
	}
	c->st.replies_sent++;
	return 0;
}

/* ---- queries ---------------------------------------------------------------------------- */

bool cluster_alive(struct cluster *c, uint32_t node, unsigned epoch)
{
	/* A link that dropped is not a dead peer: requests wait for the next link
	 * (or for the death that ends the session after dead_after_ms). Any
	 * thread: the word peer_publish keeps, not the loop's peer table. */
	return c && liveness_alive(&c->live, node, epoch);
}

unsigned cluster_epoch(struct cluster *c, uint32_t node)
{
	struct cluster_peer *p = c ? cluster_peer(c, node) : NULL;

	return p ? p->epoch : 0;
}

/* ---- one-sided reads over the peer's current link ----------------------------------------- */

/* The peer's link when it is up and can read one-sided (rdma), else NULL. */
static struct tconn *peer_rdma_conn(struct cluster *c, uint32_t node)
{
	struct cluster_peer *p = c ? cluster_peer(c, node) : NULL;

	if (!p || p->state != PEER_UP || !p->link || strcmp(tconn_kind(p->link->conn), "rdma"))
		return NULL;
	return p->link->conn;
}

int cluster_mem_add(struct cluster *c, uint32_t node, void *base, size_t len)
{
	struct tconn *t = peer_rdma_conn(c, node);

	return t ? tconn_mem_add(t, base, len) : -ENOTSUP;
}

void cluster_mem_del(struct cluster *c, uint32_t node, void *base)
{
	struct tconn *t = peer_rdma_conn(c, node);

	if (t)
		tconn_mem_del(t, base);
}

int cluster_mem_key(struct cluster *c, uint32_t node, const void *addr, size_t len,
		    uint32_t *rkey, uint32_t *gen)
{
	struct tconn *t = peer_rdma_conn(c, node);
	int rc = t ? tconn_mem_key(t, addr, len, rkey) : -ENOTSUP;

	if (!rc)
		*gen = cluster_peer(c, node)->link_gen;
	return rc;
}

uint32_t cluster_link_gen(struct cluster *c, uint32_t node)
{
	struct cluster_peer *p = c ? cluster_peer(c, node) : NULL;

	return p ? p->link_gen : 0;
}

int cluster_read(struct cluster *c, uint32_t node, uint32_t gen, uint64_t raddr, uint32_t rkey,
		 size_t len, tconn_read_fn cb, void *arg)
{
	struct tconn *t = peer_rdma_conn(c, node);

	/* a key names memory on one link: on another it would break the link */
	if (!t || cluster_peer(c, node)->link_gen != gen)
		return -ESTALE;
	return tconn_read(t, raddr, rkey, len, cb, arg);
}

double cluster_rtt_us(struct cluster *c, uint32_t node)
{
	struct cluster_peer *p = c ? cluster_peer(c, node) : NULL;

	if (!p || p->state != PEER_UP)
		return 1e12; /* a lost link answers last, if at all */
	return p->rtt_us > 0 ? p->rtt_us : 1e9;
}

/* The live peers not in exclude with room for need bytes. @return how many. */
static size_t pick_candidates(struct cluster *c, size_t need, uint64_t exclude,
			      struct cluster_peer **cand)
{
	size_t i, n = 0;

	for (i = 0; i < c->n_peers; i++) {
		struct cluster_peer *p = &c->peers[i];

		if (!p->link || p->state != PEER_UP)
			continue;
		if (exclude & (1ull << (p->node.id - 1)))
			continue;
		if (peer_free(p) < need)
			continue;
		cand[n++] = p;
	}
	return n;
}

unsigned cluster_candidates(struct cluster *c, size_t need, uint64_t exclude)
{
	struct cluster_peer *cand[CONFIG_NODES_MAX];

	return (unsigned)pick_candidates(c, need, exclude, cand);
}

int cluster_pick(struct cluster *c, size_t need, uint64_t exclude)
{
	struct cluster_peer *cand[CONFIG_NODES_MAX], *a, *b;
	size_t i, j, n = pick_candidates(c, need, exclude, cand);

	if (!n) {
		c->st.picks_failed++;
		return -ENOSPC;
	}
	i = cluster_random(c) % n;
	a = cand[i];
	b = a;
	if (n > 1) {
		j = cluster_random(c) % (n - 1);
		b = cand[j >= i ? j + 1 : j];
	}
	return (int)(peer_free(b) > peer_free(a) ? b : a)->node.id;
}

uint32_t cluster_self(const struct cluster *c)
{
	return c->self.id;
}

static const char *peer_state_name(const struct cluster_peer *p)
{
	switch (p->state) {
	case PEER_UP:
		return "up";
	case PEER_DEAD:
		return "dead";
	default:
		return p->dialer ? "connecting" : "down";
	}
}

size_t cluster_peers(struct cluster *c, struct cluster_peer_info *out, size_t max)
{
	size_t n = 0;
	uint32_t id;

	/* by id, whatever the file's order */
	for (id = 1; id <= CONFIG_NODES_MAX; id++) {
		struct cluster_peer *p = c->by_id[id];
		struct cluster_peer_info *o;

		if (!p)
			continue;
		if (n < max) {
			o = &out[n];
			memset(o, 0, sizeof(*o));
			o->id = p->node.id;
			snprintf(o->name, sizeof(o->name), "%s", p->node.name);
			snprintf(o->address, sizeof(o->address), "%s:%u", p->node.host,
				 (unsigned)p->node.port);
			o->state = peer_state_name(p);
			o->transport = p->link ? tconn_kind(p->link->conn) : "-";
			snprintf(o->device, sizeof(o->device), "%s",
				 p->link ? tconn_device(p->link->conn) : "-");
			o->incarnation = p->incarnation;
			o->epoch = p->epoch;
			o->rtt_us = p->rtt_us;
			o->donate_free = p->donate_free;
			o->donate_total = p->donate_total;
			o->pages_there = p->pages_there;
			o->ups = p->ups;
			o->deaths = p->deaths;
		}
		n++;
	}
	return n;
}

void cluster_foreach_stat(struct cluster *c,
			  void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			  void *arg)
{
	uint64_t up = 0, dead = 0, pending = 0;
	size_t i;

	for (i = 0; i < c->n_peers; i++) {
		up += c->peers[i].link != NULL;
		dead += c->peers[i].state == PEER_DEAD;
		pending += c->peers[i].count;
	}
	fn(arg, "cluster_peers", c->n_peers, "peers in the cluster file");
	fn(arg, "cluster_links_up", up, "peers with an authenticated link now");
	fn(arg, "cluster_peers_dead", dead, "peers declared dead now");
	fn(arg, "cluster_requests_pending", pending, "requests waiting for a reply now");
#define S(f, h) fn(arg, "cluster_" #f, c->st.f, h)
	S(links_accepted, "inbound peer connections accepted");
	S(dials, "outbound peer connections started");
	S(reconnects, "dials after the first to the same peer");
	S(connect_failures, "outbound connections that failed before a handshake");
	S(handshakes, "links authenticated");
	S(handshake_refused, "links closed for a bad hello or a message before authentication");
	S(handshake_timeouts, "links closed for not authenticating in time");
	S(handshake_retries, "authenticated links closed because our epoch moved meanwhile");
	S(auth_failures, "links closed for a wrong mac (another cluster key)");
	S(bad_frames, "links closed for a frame the decoder refused");
	S(protocol_errors, "links closed for a handshake message after authentication");
	S(links_lost, "authenticated links gone");
	S(links_replaced, "authenticated links closed for a newer one to the same peer");
	S(heartbeats_sent, "heartbeats sent");
	S(heartbeats_received, "heartbeats received");
	S(heartbeats_dropped, "heartbeats the transport would not take");
	S(peer_deaths, "peers declared dead after silence");
	S(peer_restarts, "peers seen with a new incarnation");
	S(requests, "requests to peers");
	S(requests_resent, "requests written again on a new link");
	S(requests_invalid, "requests refused before sending (malformed)");
	S(requests_full, "requests refused: too many pending for the peer");
	S(requests_failed_dead, "requests failed because the peer is dead or restarted");
	S(requests_cancelled, "requests cancelled at shutdown");
	S(replies, "replies that completed a request");
	S(timeouts, "requests that timed out");
	S(replies_unknown, "replies for no pending request (late or duplicate)");
	S(send_full, "writes deferred because the transport queue was full");
	S(send_errors, "writes deferred on other transport errors");
	S(requests_received, "requests from peers");
	S(replies_sent, "replies sent to peers");
	S(replies_dropped, "replies dropped: no link, or the transport would not take them");
	S(replies_invalid, "replies refused before sending (malformed)");
	S(picks_failed, "placements that found no peer with room");
	S(oom, "allocation failures");
#undef S
}
