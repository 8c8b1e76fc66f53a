/*
 * cluster.c - membership of the collective (cluster.h): its life cycle, the
 * key file, queries and placement, the counters. Links, peers and pending
 * requests have files of their own (cluster_int.h).
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

#include <ctype.h>
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

/* ---- helpers ----------------------------------------------------------------- */

const char *cluster_op_name(int op)
{
	static const char *const names[] = {"NONE", "HELLO", "AUTH",	     "HEARTBEAT",  "PUT",
					    "GET",  "FLUSH", "FLUSH_OBJECT", "FLUSH_POOL", "REPLY",
					    "ECHO", "RETURN", "DRAIN"};

	if (op < 0 || (size_t)op >= sizeof(names) / sizeof(names[0]))
		return "unknown op";
	return names[op];
}

bool cluster_op_is_request(int op)
{
	return (op >= RAMSTER__PEER__OP__P_PUT && op <= RAMSTER__PEER__OP__P_FLUSH_POOL) ||
	       op == RAMSTER__PEER__OP__P_ECHO || op == RAMSTER__PEER__OP__P_RETURN ||
	       op == RAMSTER__PEER__OP__P_DRAIN;
}

/* Copy s for a log line, with anything unprintable as '?'. */
const char *cluster_printable(char *out, size_t n, const char *s)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < n; i++)
		out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	out[i] = '\0';
	return out;
}

struct cluster_peer *cluster_peer(const struct cluster *c, uint32_t node)
{
	if (node == 0 || node > CONFIG_NODES_MAX)
		return NULL;
	return c->by_id[node];
}

static uint64_t cluster_random(struct cluster *c)
{
	/* xorshift64*: picks need spread, not secrecy */
	c->rng ^= c->rng >> 12;
	c->rng ^= c->rng << 25;
	c->rng ^= c->rng >> 27;
	return c->rng * 0x2545f4914f6cdd1dull;
}

void cluster_put_le(uint8_t *p, uint64_t v, int bytes)
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
const char *cluster_check(struct cluster *c, const uint8_t *msg, size_t len, size_t plen)
{
	Ramster__Peer__Msg *m;
	const char *why = NULL;

	wire_arena_reset(&c->check);
	if (peerwire_decode(msg, len, plen, &c->check, &m, &why))
		return why ? why : "refused";
	return NULL;
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
	peer_resolve(self->name, self->host, c->self_ip);
	snprintf(c->name, sizeof(c->name), "%s",
		 cfg->cluster_name[0] ? cfg->cluster_name : CLUSTER_DEFAULT_NAME);
	c->heartbeat_ms = cfg->heartbeat_ms;
	c->dead_after_ms = cfg->dead_after_ms;
	c->timeout_ms = cfg->request_timeout_ms ? cfg->request_timeout_ms : cfg->dead_after_ms;
	/* a config made without config_defaults (tests) gets the defaults */
	c->unauth_max = cfg->limits.peer_unauth_max ? cfg->limits.peer_unauth_max : 32;
	c->unauth_per_addr = cfg->limits.peer_unauth_per_addr ? cfg->limits.peer_unauth_per_addr : 4;
	c->handshake_max_ms = cfg->limits.peer_handshake_timeout_ms;
	c->unauth_warned = -10.0;
	c->orphan_after_ms = cfg->orphan_after_ms ? cfg->orphan_after_ms : CONFIG_DEFAULT_ORPHAN_AFTER_MS;
	memcpy(c->key, key, CLUSTER_KEY_LEN);
	c->integrity = cfg->link_integrity_only;
	if (h)
		c->h = *h;
	c->arg = arg;
	do
		randombytes_buf(&c->incarnation, sizeof(c->incarnation));
	while (!c->incarnation);
	do
		randombytes_buf(&c->rng, sizeof(c->rng));
	while (!c->rng);

	/* room for every node id: a reload may add nodes (cluster_add_node), and the
	 * peers' watchers must never move */
	c->peers = calloc(CONFIG_NODES_MAX, sizeof(*c->peers));
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
		peer_init(c, p, node, self->id);
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
	/* heartbeats first in a batch, whatever else is ready */
	ev_set_priority(&c->heartbeat, EV_MAXPRI);
	ev_timer_start(loop, &c->heartbeat);
	ev_prepare_init(&c->prepare, cluster_prepare_cb);
	ev_prepare_start(loop, &c->prepare);
	ev_unref(loop); /* the stall watch alone keeps no loop running */
	log_info("cluster %s: node %s (%u) on %s:%u, incarnation %016" PRIx64 ", %zu peers",
		 c->name, self->name, self->id, self->host, (unsigned)self->port, c->incarnation,
		 c->n_peers);
	/* the first dials go when the loop runs: a warm restart sets what the
	 * hellos announce before (cluster_warm_set) */
	for (i = 0; i < c->n_peers; i++)
		if (c->peers[i].dialer)
			ev_timer_start(loop, &c->peers[i].redial);
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
	ev_ref(c->loop);
	ev_prepare_stop(c->loop, &c->prepare);
	for (i = 0; i < c->n_peers; i++) {
		struct cluster_peer *p = &c->peers[i];

		ev_timer_stop(c->loop, &p->redial);
		ev_timer_stop(c->loop, &p->dead);
		ev_timer_stop(c->loop, &p->lease);
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

/*
 * The one key format: 2 * CLUSTER_KEY_LEN hex digits (either case), then one
 * optional newline, nothing else (what ramsterctl genkey prints). A key whose
 * bytes are all alike is no random key (a placeholder): refused.
 * @return 0 with key set, -EINVAL (not the format) or -EKEYREJECTED.
 */
static int cluster_parse_key(const uint8_t *buf, size_t n, uint8_t key[CLUSTER_KEY_LEN])
{
	size_t i, hex = 2 * CLUSTER_KEY_LEN, bin = 0;
	bool alike = true;

	if (n == hex + 1 && buf[hex] == '\n')
		n = hex;
	if (n != hex)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (!isxdigit(buf[i]))
			return -EINVAL;
	if (sodium_hex2bin(key, CLUSTER_KEY_LEN, (const char *)buf, n, NULL, &bin, NULL) ||
	    bin != CLUSTER_KEY_LEN) {
		sodium_memzero(key, CLUSTER_KEY_LEN);
		return -EINVAL;
	}
	for (i = 1; i < CLUSTER_KEY_LEN; i++)
		alike &= key[i] == key[0];
	if (alike) {
		sodium_memzero(key, CLUSTER_KEY_LEN);
		return -EKEYREJECTED;
	}
	return 0;
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
	rc = cluster_parse_key(buf, n, key);
	if (rc)
		snprintf(err, errlen,
			 "secret_file %s is not a cluster key: it must hold exactly %u hexadecimal "
			 "digits (a 256-bit key) and a newline, as 'ramsterctl genkey' writes (%s)",
			 path, 2 * CLUSTER_KEY_LEN,
			 rc == -EINVAL ? "the file has something else" : "every byte alike: not a random key");
wipe:
	sodium_memzero(buf, sizeof(buf));
close_fd:
	close(fd);
	return rc;
}

/* ---- queries ---------------------------------------------------------------------------- */

/* Whether node's live word (peer_publish) has every bit of mask, under epoch. Any thread. */
static bool live_is(struct cluster *c, uint32_t node, unsigned epoch, uint32_t mask)
{
	uint32_t v;

	if (!c || node < 1 || node > CONFIG_NODES_MAX)
		return false;
	v = atomic_load_explicit(&c->live[node], memory_order_acquire);
	return (v & mask) == mask && (v >> 3) == (epoch & 255);
}

bool cluster_alive(struct cluster *c, uint32_t node, unsigned epoch)
{
	/* Any thread (the tier asks under bucket locks): the loop publishes each
	 * peer's state and epoch (peer_publish). Neither a lost link nor silence
	 * is a gone peer: only a new epoch (restart, lease expiry) is. */
	return live_is(c, node, epoch, 1); /* known */
}

bool cluster_reachable(struct cluster *c, uint32_t node, unsigned epoch)
{
	return live_is(c, node, epoch, 3); /* known, reachable */
}

bool cluster_linked(struct cluster *c, uint32_t node, unsigned epoch)
{
	return live_is(c, node, epoch, 7); /* known, reachable, linked */
}

unsigned cluster_epoch(struct cluster *c, uint32_t node)
{
	struct cluster_peer *p = c ? cluster_peer(c, node) : NULL;

	return p ? p->epoch : 0;
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
	case PEER_UNREACHABLE:
		return "unreachable";
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
		if (!c->by_id[c->peers[i].node.id])
			continue; /* removed */
		up += c->peers[i].link != NULL;
		dead += c->peers[i].state == PEER_UNREACHABLE;
		pending += c->peers[i].count;
	}
	fn(arg, "cluster_peers", c->n_peers - c->n_removed, "peers in the cluster file");
	fn(arg, "cluster_links_up", up, "peers with an authenticated link now");
	fn(arg, "cluster_peers_unreachable", dead,
	   "peers silent past dead_after_ms now (their pages kept until orphan_after_ms)");
	fn(arg, "cluster_requests_pending", pending, "requests waiting for a reply now");
#define S(f, h) fn(arg, "cluster_" #f, c->st.f, h)
	S(links_accepted, "inbound peer connections accepted");
	S(unauth_refused, "inbound peer connections closed at accept: too many unauthenticated");
	S(dials, "outbound peer connections started");
	S(reconnects, "dials after the first to the same peer");
	S(connect_failures, "outbound connections that failed before a handshake");
	S(handshakes, "links authenticated");
	S(handshake_refused, "links closed for a bad hello or a message before authentication");
	S(handshake_timeouts, "links closed for not authenticating in time");
	S(handshake_retries, "authenticated links closed because our epoch moved meanwhile");
	S(auth_failures, "links closed for a wrong mac (another cluster key)");
	S(bad_frames, "links closed for a frame the decoder refused");
	S(frame_auth_failures,
	  "links closed for a frame that failed its AEAD check (changed, forged, replayed, reordered, dropped or from another link)");
	S(protocol_errors, "links closed for a handshake message after authentication");
	S(links_lost, "authenticated links gone");
	S(links_replaced, "authenticated links closed for a newer one to the same peer");
	S(heartbeats_sent, "heartbeats sent");
	S(heartbeats_received, "heartbeats received");
	S(heartbeats_dropped, "heartbeats the transport would not take");
	S(peer_deaths, "peers declared unreachable after dead_after_ms of silence");
	S(peer_returns, "unreachable peers back with the same incarnation (nothing lost)");
	S(peer_restarts, "peers seen with a new incarnation");
	S(leases_expired, "peers unreachable past orphan_after_ms: pages both ways forgotten");
	S(leases_dropped, "holders that said they dropped our pages (lease or room)");
	S(dead_checks_deferred, "dead checks put off because the loop itself had stalled");
	S(requests, "requests to peers");
	S(requests_resent, "requests written again on a new link");
	S(requests_invalid, "requests refused before sending (malformed)");
	S(requests_full, "requests refused: too many pending for the peer");
	S(requests_failed_dead, "requests failed: the peer restarted or its lease expired");
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

