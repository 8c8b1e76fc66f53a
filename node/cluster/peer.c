/*
 * peer.c - peers: heartbeats, the dead timer, deaths and restarts, a link
 * going up or lost, dialing and redialing (transport = auto tries rdma, then
 * tcp), and one-sided reads over a peer's current link.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/sock.h"
#include "node/clock.h"
#include "node/cluster/cluster_int.h"
#include "node/log.h"

/* ---- peers: heartbeats, life and death ------------------------------------------ */

uint64_t peer_session(const struct cluster_peer *p)
{
	return p->incarnation + p->their_epoch;
}

uint64_t peer_free(const struct cluster_peer *p)
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
	if (c->h.dropped_session)
		hb.dropped_session = c->h.dropped_session(c->arg, p->node.id);
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

static void peer_on_dropped(struct cluster_peer *p, uint64_t session);

void peer_on_heartbeat(struct cluster_peer *p, const Ramster__Peer__Heartbeat *hb)
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
	if (hb->dropped_session)
		peer_on_dropped(p, hb->dropped_session);
}

/* Take every pending request off p, then call each back with err. */
void peer_fail_pending(struct cluster_peer *p, int err)
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

/*
 * Publish p's state and epoch for cluster_alive / cluster_reachable on any
 * thread: called by the loop after every change of p->state or p->epoch.
 */
void peer_publish(struct cluster_peer *p)
{
	bool known = p->state != PEER_NEW;
	bool reachable = p->state == PEER_UP || p->state == PEER_DOWN;
	bool linked = p->state == PEER_UP;

	atomic_store_explicit(&p->c->live[p->node.id],
			      (uint32_t)(p->epoch & 255) << 3 | (uint32_t)linked << 2 |
				  (uint32_t)reachable << 1 | known,
			      memory_order_release);
}

/*
 * Did the loop itself stall just now (a long callback, the whole process
 * stopped or descheduled)? Then the peers' frames may sit unread in the
 * socket buffers: their silence is ours. The loop runs at least every
 * heartbeat_ms (the heartbeat timer); an iteration longer than two of them
 * and half of dead_after_ms, or one still going, is a stall. (The dead timers
 * run last in a batch, after the frames read in the same iteration; this
 * covers what those frames cannot: a loop shared by both ends, frames that
 * are not read yet.)
 */
static uint64_t peer_stall_ns(const struct cluster *c)
{
	uint64_t hb = 2ull * c->heartbeat_ms * 1000000u + 20000000u;
	uint64_t half = (uint64_t)c->dead_after_ms * 500000u;

	/* a stall long enough to make a peer look silent by itself */
	return hb > half ? hb : half;
}

static bool peer_loop_stalled(struct cluster *c, uint64_t now)
{
	uint64_t window = peer_stall_ns(c);

	if (c->prepare_ns && now - c->prepare_ns > window)
		return true; /* this very iteration began long ago */
	return c->stall_end_ns && now - c->stall_end_ns < window;
}

/* ev_prepare: the loop is about to wait; the iteration that ends here took now - prepare_ns. */
void cluster_prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct cluster *c = container_of(w, struct cluster, prepare);
	uint64_t now = clock_now_ns();

	if (c->prepare_ns && now - c->prepare_ns > peer_stall_ns(c))
		c->stall_end_ns = now;
	c->prepare_ns = now;
}

/*
 * p's copies are gone (a new incarnation, its lease expired, or it dropped
 * them): our epoch for it moves, so that every descriptor naming the old one
 * is known lost, and on_peer_down tells the node; pending requests fail.
 */
static void peer_gone(struct cluster_peer *p, const char *why)
{
	struct cluster *c = p->c;

	p->epoch++;
	peer_publish(p);
	ev_timer_stop(c->loop, &p->lease);
	if (c->h.on_peer_down)
		c->h.on_peer_down(c->arg, p->node.id, why);
	peer_fail_pending(p, -EHOSTDOWN);
}

/*
 * p was silent for dead_after_ms: unreachable. Not gone: no epoch change, no
 * request failed (each waits for its timeout), nothing forgotten; nothing new
 * is placed there, and its lease runs: orphan_after_ms.
 */
static void peer_declare_unreachable(struct cluster_peer *p, double silent_ms)
{
	struct cluster *c = p->c;

	p->state = PEER_UNREACHABLE;
	peer_publish(p);
	p->unreachable_ns = clock_now_ns();
	p->deaths++;
	c->st.peer_deaths++;
	ev_timer_stop(c->loop, &p->dead);
	log_notice("peer %s (%u) unreachable: silent for %.0f ms; its pages are kept for "
		   "orphan_after_ms (%llu ms)",
		   p->node.name, p->node.id, silent_ms, (unsigned long long)c->orphan_after_ms);
	peer_drop_link(p, "peer unreachable");
	p->donate_free = p->donate_total = 0;
	ev_timer_set(&p->lease, (double)c->orphan_after_ms / 1000.0, 0.);
	ev_timer_start(c->loop, &p->lease);
	if (c->h.on_peer_unreachable)
		c->h.on_peer_unreachable(c->arg, p->node.id);
	peer_schedule_redial(p);
}

void peer_dead_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cluster_peer *p = container_of(w, struct cluster_peer, dead);
	struct cluster *c = p->c;
	uint64_t now = clock_now_ns(), due = (uint64_t)c->dead_after_ms * 1000000u;
	uint64_t silent = now - p->last_rx_ns;

	if (silent < due) {
		/* a frame came since this was armed */
		w->repeat = (double)(due - silent) / 1e9 + 1e-4;
		ev_timer_again(loop, w);
		return;
	}
	if (peer_loop_stalled(c, now)) {
		/* our own stall: read what waits first, then judge */
		c->st.dead_checks_deferred++;
		w->repeat = c->heartbeat_ms / 1000.0;
		ev_timer_again(loop, w);
		return;
	}
	peer_declare_unreachable(p, (double)silent / 1e6);
}

/* p stayed unreachable for orphan_after_ms: its lease expired. */
void peer_lease_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cluster_peer *p = container_of(w, struct cluster_peer, lease);
	struct cluster *c = p->c;
	uint64_t now = clock_now_ns();

	if (p->state != PEER_UNREACHABLE)
		return;
	if (peer_loop_stalled(c, now)) {
		w->repeat = c->heartbeat_ms / 1000.0;
		ev_timer_again(loop, w);
		return;
	}
	c->st.leases_expired++;
	log_notice("peer %s (%u): unreachable for %.0f s (orphan_after_ms %llu): its lease "
		   "expired; the pages it held for us and we for it are forgotten",
		   p->node.name, p->node.id, (double)(now - p->unreachable_ns) / 1e9,
		   (unsigned long long)c->orphan_after_ms);
	p->pages_there = 0;
	peer_gone(p, "lease expired");
}

uint64_t cluster_silent_ms(struct cluster *c, uint32_t node)
{
	struct cluster_peer *p = c ? cluster_peer(c, node) : NULL;

	if (!p || p->state == PEER_UP || !p->last_rx_ns)
		return 0;
	return (clock_now_ns() - p->last_rx_ns) / 1000000u;
}

void cluster_forget(struct cluster *c, uint32_t node)
{
	struct cluster_peer *p = cluster_peer(c, node);

	if (!p || p->state != PEER_UNREACHABLE)
		return;
	c->st.leases_expired++;
	log_notice("peer %s (%u): its lease ends early; the pages it held for us are forgotten",
		   p->node.name, p->node.id);
	p->pages_there = 0;
	peer_gone(p, "lease expired");
}

/*
 * A heartbeat of p says it dropped the pages we placed there under session:
 * if that is our current session with it, they are gone. Reconnect, so that
 * our next hello announces the new epoch (and p keys new pages by it).
 */
static void peer_on_dropped(struct cluster_peer *p, uint64_t session)
{
	struct cluster *c = p->c;

	if (session != c->incarnation + p->epoch)
		return; /* an older session's: already forgotten */
	c->st.leases_dropped++;
	log_notice("peer %s (%u) dropped the pages it held for us (its lease of us expired, "
		   "or it needed the room): they are forgotten",
		   p->node.name, p->node.id);
	p->pages_there = 0;
	peer_gone(p, "it dropped our pages");
	peer_drop_link(p, "our epoch for it moved");
	if (p->state == PEER_UP)
		p->state = PEER_DOWN;
	peer_publish(p);
	peer_schedule_redial(p);
}

/*
 * A new incarnation of p authenticated: the old one is gone with every page
 * we had there: epoch up, on_peer_down("restarted"), pending requests fail.
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
	p->state = PEER_DOWN;
	peer_publish(p);
	p->unreachable_ns = 0;
	p->last_rx_ns = clock_now_ns(); /* the new incarnation spoke */
	peer_gone(p, "restarted");
}

/*
 * l authenticated. @return 0, or -1 when l was closed (its hello announced
 * an epoch we have since left: the next link carries the current one).
 */
int link_up(struct cluster_link *l)
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
		return CONN_CLOSED;
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
	if (p->state == PEER_UNREACHABLE) {
		/* the same incarnation: everything it held is there again */
		c->st.peer_returns++;
		log_notice("peer %s (%u) back after %.1f s unreachable, same incarnation: "
			   "nothing lost",
			   p->node.name, p->node.id, (double)(clock_now_ns() - p->unreachable_ns) / 1e9);
	}
	p->unreachable_ns = 0;
	ev_timer_stop(c->loop, &p->lease);
	p->their_epoch = l->their_epoch;
	p->state = PEER_UP;
	peer_publish(p);
	p->ups++;
	p->auto_dials = 0;
	p->backoff_ms = CLUSTER_BACKOFF_MIN_MS;
	ev_timer_stop(c->loop, &p->redial);
	p->last_rx_ns = clock_now_ns();
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
void peer_link_lost(struct cluster_peer *p, struct cluster_link *l, const char *reason)
{
	struct cluster *c = p->c;

	p->link = NULL;
	p->unsent = NULL;
	if (p->state == PEER_UP)
		p->state = PEER_DOWN; /* still alive, no longer linked (cluster_linked) */
	peer_publish(p);
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

/*
 * host resolved to an IPv4 literal in ip (16 bytes), once, so dials do not
 * resolve names on the loop; "" (and a warning) when it cannot be now: the
 * dials then resolve it each time. Called at start and by a reload.
 */
void peer_resolve(const char *what, const char *host, char *ip)
{
	struct sockaddr_in sa;

	ip[0] = '\0';
	if (!*host || !strcmp(host, "*") || !strcmp(host, "0.0.0.0"))
		return;
	if (sock_resolve_ipv4(host, 0, false, &sa) ||
	    !inet_ntop(AF_INET, &sa.sin_addr, ip, 16)) {
		ip[0] = '\0';
		log_warn("%s: cannot resolve %s now: each dial resolves it again", what, host);
	}
}

void peer_dial(struct cluster_peer *p)
{
	struct cluster *c = p->c;
	const char *bind_host = c->self_ip[0] ? c->self_ip : c->self.host;
	struct cluster_link *l;
	struct tconn *conn;

	if (!*bind_host || !strcmp(bind_host, "*") || !strcmp(bind_host, "0.0.0.0"))
		bind_host = NULL;
	c->st.dials++;
	if (p->dialed_once)
		c->st.reconnects++;
	p->dialed_once = true;
	conn = transport_connect(peer_transport(p), p->ip[0] ? p->ip : p->node.host, p->node.port,
				 bind_host);
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

void peer_redial_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cluster_peer *p = container_of(w, struct cluster_peer, redial);

	if (!p->link && !p->dialing && !p->c->destroying)
		peer_dial(p);
}

/* Dial p again after the backoff, if we dial it and have no link to it. */
void peer_schedule_redial(struct cluster_peer *p)
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

void cluster_heartbeat_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cluster *c = container_of(w, struct cluster, heartbeat);
	size_t i;

	for (i = 0; i < c->n_peers; i++) {
		struct cluster_peer *p = &c->peers[i];

		if (!p->link)
			continue;
		peer_send_heartbeat(p);
		peer_flush(p);
	}
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


/* ---- a reload's changes to the cluster file (node/reload.c) ----------------------------- */

/* Set up a zeroed p for node (cluster_create, cluster_add_node). */
void peer_init(struct cluster *c, struct cluster_peer *p, const struct config_node *node,
	       uint32_t self)
{
	p->c = c;
	p->node = *node;
	peer_resolve(node->name, node->host, p->ip);
	p->dialer = node->id > self;
	p->backoff_ms = CLUSTER_BACKOFF_MIN_MS;
	ev_timer_init(&p->redial, peer_redial_cb, 0., 0.);
	ev_init(&p->dead, peer_dead_cb);
	/* last in a batch: the frames read in the same loop iteration count */
	ev_set_priority(&p->dead, EV_MINPRI);
	ev_init(&p->lease, peer_lease_cb);
	ev_timer_init(&p->backlog, peer_backlog_cb, CLUSTER_BACKLOG_S, 0.);
}

/* A node added to the cluster file. */
int cluster_add_node(struct cluster *c, const struct config_node *node)
{
	struct cluster_peer *p;

	if (node->id == 0 || node->id > CONFIG_NODES_MAX || node->id == c->self.id)
		return -EINVAL;
	if (c->by_id[node->id])
		return -EEXIST;
	if (c->n_peers >= CONFIG_NODES_MAX)
		return -ENOSPC; /* removed peers keep their slots until a restart */
	p = &c->peers[c->n_peers];
	memset(p, 0, sizeof(*p));
	peer_init(c, p, node, c->self.id);
	c->by_id[node->id] = p;
	c->n_peers++;
	log_notice("cluster %s: node %s (%u) at %s:%u added%s", c->name, node->name, node->id,
		   node->host, (unsigned)node->port, p->dialer ? ", dialing it" : ", waiting for it");
	if (p->dialer)
		peer_dial(p);
	return 0;
}

/* A node removed from the cluster file: refused while it holds our pages. */
int cluster_remove_node(struct cluster *c, uint32_t id)
{
	struct cluster_peer *p = cluster_peer(c, id);

	if (!p)
		return -ENOENT;
	if (p->pages_there)
		return -EBUSY; /* drain it first: its copies of our pages would go */
	log_notice("cluster %s: node %s (%u) removed", c->name, p->node.name, p->node.id);
	p->dialer = false; /* never dialed again; its hellos name no peer of ours */
	ev_timer_stop(c->loop, &p->redial);
	ev_timer_stop(c->loop, &p->dead);
	ev_timer_stop(c->loop, &p->backlog);
	ev_timer_stop(c->loop, &p->lease);
	peer_drop_link(p, "node removed from the cluster file");
	if (p->state != PEER_NEW)
		peer_gone(p, "removed"); /* its session ends: epoch, on_peer_down, requests */
	else
		peer_fail_pending(p, -EHOSTDOWN);
	p->state = PEER_NEW; /* not known any more: alive in no epoch */
	peer_publish(p);
	c->by_id[id] = NULL;
	c->n_removed++;
	return 0;
}
