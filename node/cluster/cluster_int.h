/*
 * cluster_int.h - private to the files of the cluster (cluster.h):
 *
 *   cluster.c  the cluster's life cycle, the key file, queries, placement
 *              (cluster_pick), the counters;
 *   link.c     links: the handshake (hello, auth), frames, the transport's
 *              callbacks;
 *   peer.c     peers: heartbeats, life and death, restarts, dialing, and
 *              one-sided reads over a peer's current link;
 *   pending.c  requests to peers and their replies (the pending tables).
 *
 * Everything here is loop only (the event loop's thread), except what
 * says otherwise. The lock order is in docs/design.md.
 */
#ifndef RAMSTER_NODE_CLUSTER_INT_H
#define RAMSTER_NODE_CLUSTER_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ev.h>
#include <sodium.h>

#include "common/util.h"
#include "node/closed.h"
#include "node/cluster/linkcrypt.h"
#include "node/cluster/cluster.h"
#include "transport/transport.h"

/* ---- tunables ------------------------------------------------------------ */

#define CLUSTER_VERSION		 2 /* 2: hello under the mac, acceptor proves last, AEAD frames */
#define CLUSTER_PENDING_MAX	 65536 /* requests waiting for one peer */
#define CLUSTER_HTAB_MIN	 64    /* buckets of a pending table; a power of two */
#define CLUSTER_BACKOFF_MIN_MS	 50    /* redial delays double from here ... */
#define CLUSTER_BACKOFF_MAX_MS	 2000  /* ... up to here */
#define CLUSTER_HANDSHAKE_MIN_MS 100   /* a link has max(this, dead_after_ms) to authenticate */
#define CLUSTER_BACKLOG_S	 0.002 /* retry writes this soon after a full transport queue */
#define CLUSTER_ARENA_SIZE	 (64u * 1024)
#define CLUSTER_CTL_MSG_MAX	 512 /* a packed hello, auth, heartbeat or reply */
#define CLUSTER_KEY_FILE_MAX	 4096
#define CLUSTER_AUTH_LABEL	 "ramster-auth-v2" /* + a role byte: D (dialer) or A */
#define CLUSTER_KEYS_LABEL	 "ramster-keys-v2"
#define CLUSTER_DEFAULT_NAME	 "ramster" /* on the wire when the file names no cluster */
#define CLUSTER_ERRNO_MAX	 4095	   /* replies carry 0 or -1..-this */
#define CLUSTER_TRANSCRIPT_MAX                                                                     \
	(sizeof(CLUSTER_AUTH_LABEL) + 1 + 2 * (4 + 8 + PEERWIRE_NONCE_LEN + 4 + 4 + 4) + CONFIG_NAME_MAX)

_Static_assert(CLUSTER_KEY_LEN == crypto_auth_hmacsha256_KEYBYTES, "cluster key is the hmac key");
_Static_assert(PEERWIRE_MAC_LEN == crypto_auth_hmacsha256_BYTES, "mac size");
_Static_assert(CONFIG_NODES_MAX <= 64, "exclude masks are 64 bits");


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
	bool sealed_pay; /* the payload is a sealed page (P_PUT, P_RETURN): MAC'd, not encrypted again */
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
	uint32_t their_ciphers;	 /* from their hello (linkcrypt.h) */
	uint32_t their_security; /* LC_SECURE or LC_INTEGRITY, from their hello */
	char addr[48];		 /* the other end, for logs */
	struct lc_link lc;	 /* frame keys and counters, set when authenticated */
};

enum peer_state {
	PEER_NEW,  /* never up */
	PEER_UP,   /* an authenticated link */
	PEER_DOWN, /* was up; link lost, not (yet) silent for dead_after_ms */
	PEER_UNREACHABLE, /* silent past dead_after_ms: not gone (its pages are kept,
			   * nothing new is placed there) until it comes back, restarts
			   * or stays away past orphan_after_ms (its lease: see peer.c) */
};

struct cluster_peer {
	struct cluster *c;
	struct config_node node;
	char ip[16];	  /* node.host resolved once, when the peer is made ("": not resolvable then) */
	ev_timer redial;  /* next dial (dialer only) */
	ev_timer dead;	  /* fires dead_after_ms after the last frame */
	ev_timer lease;	  /* fires orphan_after_ms after it became unreachable */
	ev_timer backlog; /* retry writes after a full transport queue */
	enum peer_state state;
	bool dialer; /* we dial it: its id is higher than ours */
	bool dialed_once;
	unsigned auto_dials; /* dials since its last link (transport = auto: rdma, tcp, ...) */
	struct cluster_link *link;    /* authenticated, or NULL */
	struct cluster_link *dialing; /* our outbound link in setup, or NULL */
	unsigned backoff_ms;
	uint64_t last_rx_ns;   /* last frame on an authenticated link (clock_now_ns) */
	uint64_t unreachable_ns; /* when it was declared unreachable; 0 when it is not */
	uint64_t incarnation;  /* its; 0 before its first handshake */
	unsigned epoch;	       /* ours for it */
	uint32_t their_epoch;  /* its for us, from its last hello */
	uint64_t echo_sent_ns; /* its last heartbeat's sent_ns ... */
	uint64_t echo_rx_ns;   /* ... and when we got it (our clock) */
	double rtt_us;
	uint64_t donate_free, donate_total, pages_there;
	uint64_t sent_since_hb; /* payload bytes sent since its last heartbeat */
	uint64_t ups, deaths; /* deaths: times declared unreachable */
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
	uint64_t unauth_refused;     /* inbound links closed at accept: too many unauthenticated */
	uint64_t handshake_retries;  /* authenticated links closed: our epoch moved meanwhile */
	uint64_t auth_failures;	     /* links closed for a wrong mac */
	uint64_t bad_frames;	     /* links closed for a frame the decoder refused */
	uint64_t frame_auth_failures; /* links closed for a frame that failed its AEAD check */
	uint64_t protocol_errors;    /* links closed for a handshake message after auth */
	uint64_t links_lost;	     /* authenticated links gone */
	uint64_t links_replaced;     /* authenticated links closed for a newer one */
	uint64_t heartbeats_sent;
	uint64_t heartbeats_received;
	uint64_t heartbeats_dropped; /* heartbeats the transport would not take */
	uint64_t peer_deaths;	     /* peers declared unreachable (silence) */
	uint64_t peer_returns;	     /* unreachable peers back with the same incarnation */
	uint64_t peer_restarts;
	uint64_t leases_expired;     /* unreachable past orphan_after_ms: their pages forgotten */
	uint64_t leases_dropped;     /* a holder told us it dropped our pages (its lease or room) */
	uint64_t dead_checks_deferred; /* dead checks put off: the loop itself had stalled */
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
	char self_ip[16]; /* self.host resolved once, at start: dials bind to it */
	char name[CONFIG_NAME_MAX];
	unsigned heartbeat_ms, dead_after_ms, timeout_ms;
	/* [limits] (link_limits.c): unauthenticated inbound links and their deadline */
	uint32_t unauth_max, unauth_per_addr, handshake_max_ms;
	ev_tstamp unauth_warned;
	uint64_t orphan_after_ms;
	uint8_t key[CLUSTER_KEY_LEN];
	bool integrity; /* link_security = integrity: frames MAC'd, not encrypted */
	struct cluster_handlers h;
	void *arg;
	uint64_t incarnation;
	uint64_t seq; /* the last request's */
	uint64_t rng; /* xorshift state for cluster_pick */
	struct cluster_peer *by_id[CONFIG_NODES_MAX + 1];
	struct cluster_peer *peers;
	size_t n_peers;
	size_t n_removed; /* peers removed by a reload: their slots stay, unnamed */
	struct cluster_link *links; /* every link not yet closed */
	ev_timer heartbeat;
	ev_prepare prepare;    /* notes when each loop iteration ends (stall detection) */
	uint64_t prepare_ns;   /* the last iteration's end (clock_now_ns) */
	uint64_t stall_end_ns; /* the end of the last iteration far longer than a heartbeat */
	bool destroying;
	struct wire_arena arena; /* received messages */
	struct wire_arena check; /* our own messages, checked before they leave */
	struct cluster_stats st;
	uint8_t buf[TRANSPORT_MSG_MAX]; /* a request being packed */
	/* frames being sealed (link_send) and opened (cluster_on_message) */
	uint8_t txmsg[TRANSPORT_MSG_MAX], rxmsg[TRANSPORT_MSG_MAX];
	uint8_t txpay[PEERWIRE_PAGE_MAX], rxpay[PEERWIRE_PAGE_MAX];
	/* shared, lock-free: per node, (our epoch for it & 255) << 3 | linked << 2 |
	 * reachable << 1 | known (known: its incarnation was seen; reachable: up, or link
	 * lost but not silent; linked: up, its link there now); written by the loop
	 * (peer_publish), read by cluster_alive, _reachable and _linked anywhere */
	_Atomic uint32_t live[CONFIG_NODES_MAX + 1];
};


/* cluster.c: helpers */
const char *cluster_op_name(int op);
bool cluster_op_is_request(int op);
const char *cluster_printable(char *out, size_t n, const char *s);
struct cluster_peer *cluster_peer(const struct cluster *c, uint32_t node);
void cluster_put_le(uint8_t *p, uint64_t v, int bytes);
const char *cluster_check(struct cluster *c, const uint8_t *msg, size_t len, size_t plen);

/* link.c: links, the handshake, frames, the transport's callbacks */
/* link_limits.c: @return whether an inbound conn may wait to authenticate (else counted). */
bool link_admit(struct cluster *c, struct tconn *conn);
struct cluster_link *link_new(struct cluster *c, struct tconn *conn,
				     struct cluster_peer *peer, bool outbound);
int link_send_msg(struct cluster_link *l, const Ramster__Peer__Msg *m);
int link_send(struct cluster_link *l, const void *msg, size_t len, const void *payload,
	      size_t plen, bool sealed_pay);
void cluster_on_accept(void *arg, struct tconn *conn);
void cluster_on_connect(void *arg, struct tconn *conn, int err);
int cluster_on_message(void *arg, struct tconn *conn, const uint8_t *msg, size_t len,
			      const uint8_t *payload, size_t plen);
void cluster_on_close(void *arg, struct tconn *conn, const char *reason);

/* peer.c: heartbeats, life and death, dialing, one-sided reads */
void peer_publish(struct cluster_peer *p);
/* host as an IPv4 literal in ip[16], resolved now ("" and a warning when it cannot be). */
void peer_resolve(const char *what, const char *host, char *ip);
void peer_init(struct cluster *c, struct cluster_peer *p, const struct config_node *node,
	       uint32_t self);
uint64_t peer_session(const struct cluster_peer *p);
uint64_t peer_free(const struct cluster_peer *p);
void peer_on_heartbeat(struct cluster_peer *p, const Ramster__Peer__Heartbeat *hb);
void peer_fail_pending(struct cluster_peer *p, int err);
void peer_dead_cb(struct ev_loop *loop, ev_timer *w, int revents);
void peer_lease_cb(struct ev_loop *loop, ev_timer *w, int revents);
void cluster_prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents);
int link_up(struct cluster_link *l);
void peer_link_lost(struct cluster_peer *p, struct cluster_link *l, const char *reason);
void peer_dial(struct cluster_peer *p);
void peer_redial_cb(struct ev_loop *loop, ev_timer *w, int revents);
void peer_schedule_redial(struct cluster_peer *p);
void cluster_heartbeat_cb(struct ev_loop *loop, ev_timer *w, int revents);

/* pending.c: pending requests */
void peer_backlog_cb(struct ev_loop *loop, ev_timer *w, int revents);
void peer_flush(struct cluster_peer *p);
void peer_on_reply(struct cluster_peer *p, const Ramster__Peer__Msg *m,
			  const uint8_t *payload, size_t plen);

#endif /* RAMSTER_NODE_CLUSTER_INT_H */
