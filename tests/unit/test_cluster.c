/*
 * test_cluster.c - the membership module over real TCP on loopback: two to
 * four nodes of one collective in one process and one libev loop. Handshake
 * and sessions, heartbeats and RTT, requests with replies, held requests and
 * timeouts, refusals (wrong key, wrong cluster, frames before or instead of
 * authentication), deaths, restarts, placement, and the key file's rules.
 * TEST_VERBOSE=1 shows the module's log down to debug.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <ev.h>
#include <sodium.h>

#include "node/cluster/cluster.h"
#include "node/cluster/cluster_int.h"
#include "node/cluster/linkcrypt.h"
#include "node/log.h"
#include "transport/frame.h"

#define HB_MS	  50
#define DEAD_MS	  400
#define NODES_MAX 4
#define MB	  (1ull << 20)

/* One request's outcome, filled by req_cb. */
struct tres {
	int done; /* callbacks: must end at exactly 1 */
	int result;
	size_t plen;
	uint8_t payload[PEERWIRE_PAGE_MAX];
	bool has_page;
	uint32_t checksum;
	double at;
};

enum answer { ANSWER_NOW, ANSWER_NEVER };

/* A node under test: its cluster and what its handlers saw and answer. */
struct tnode {
	struct cluster *c;
	uint32_t id;
	unsigned ups[NODES_MAX + 1], downs[NODES_MAX + 1], unreach[NODES_MAX + 1];
	double unreach_at[NODES_MAX + 1];
	uint64_t session[NODES_MAX + 1];
	char why[NODES_MAX + 1][16];
	double down_at[NODES_MAX + 1];
	uint64_t donate_free, donate_total, foreign;
	enum answer answer;
	unsigned requests_seen;
	uint64_t req_session; /* the session on_request got last */
	uint64_t held_seq;
	uint8_t put_data[PEERWIRE_PAGE_MAX];
	size_t put_len;
};

struct world {
	struct ev_loop *loop;
	ev_timer tick; /* keeps EVRUN_ONCE short */
	struct config cfg, cfg2;
	uint8_t key[CLUSTER_KEY_LEN];
	struct tnode nodes[NODES_MAX];
};

static struct world *w;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Run the loop until cond holds or ms pass. @return cond. */
#define run_until(cond, ms)                                                                        \
	({                                                                                         \
		double end_ = now_s() + (ms) / 1000.0;                                             \
		while (!(cond) && now_s() < end_)                                                  \
			ev_run(w->loop, EVRUN_ONCE);                                               \
		(cond);                                                                            \
	})

static void run_for(unsigned ms)
{
	(void)run_until(false, ms);
}

/* ---- handlers ------------------------------------------------------------------ */

static void fill(uint8_t *buf, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 8));
}

static void on_request(void *arg, uint32_t node, uint64_t session, const Ramster__Peer__Msg *m,
		       const uint8_t *payload, size_t plen)
{
	struct tnode *t = arg;
	Ramster__Peer__Page pg = RAMSTER__PEER__PAGE__INIT;
	uint8_t data[PEERWIRE_PAGE_MAX];
	size_t len;

	t->requests_seen++;
	t->req_session = session;
	t->held_seq = m->seq;
	if (t->answer == ANSWER_NEVER)
		return;
	switch (m->op) {
	case RAMSTER__PEER__OP__P_PUT:
		memcpy(t->put_data, payload, plen);
		t->put_len = plen;
		assert_int_equal(cluster_reply(t->c, node, m->seq, 0, NULL, NULL, 0), 0);
		break;
	case RAMSTER__PEER__OP__P_GET:
		len = 1000 + m->page->index;
		fill(data, len, m->page->index);
		pg.pool = m->page->pool;
		pg.index = m->page->index;
		pg.checksum = 0xc0de0000u + m->page->index;
		assert_int_equal(cluster_reply(t->c, node, m->seq, 0, &pg, data, len), 0);
		break;
	default:
		assert_int_equal(cluster_reply(t->c, node, m->seq, -ENOENT, NULL, NULL, 0), 0);
		break;
	}
}

static void on_peer_up(void *arg, uint32_t node, uint64_t session)
{
	struct tnode *t = arg;

	assert_true(node >= 1 && node <= NODES_MAX);
	t->ups[node]++;
	t->session[node] = session;
}

static void on_peer_down(void *arg, uint32_t node, const char *why)
{
	struct tnode *t = arg;

	assert_true(node >= 1 && node <= NODES_MAX);
	t->downs[node]++;
	snprintf(t->why[node], sizeof(t->why[node]), "%s", why);
	t->down_at[node] = now_s();
}

static void on_peer_unreachable(void *arg, uint32_t node)
{
	struct tnode *t = arg;

	assert_true(node >= 1 && node <= NODES_MAX);
	t->unreach[node]++;
	t->unreach_at[node] = now_s();
}

static void donate(void *arg, uint64_t *free_bytes, uint64_t *total_bytes)
{
	struct tnode *t = arg;

	*free_bytes = t->donate_free;
	*total_bytes = t->donate_total;
}

static uint64_t foreign_pages(void *arg, uint32_t node)
{
	struct tnode *t = arg;

	return t->foreign + node;
}

static const struct cluster_handlers handlers = {
    .on_request = on_request,
    .on_peer_up = on_peer_up,
    .on_peer_down = on_peer_down,
    .on_peer_unreachable = on_peer_unreachable,
    .donate = donate,
    .foreign_pages = foreign_pages,
};

static void req_cb(void *arg, int result, const Ramster__Peer__Msg *reply, const uint8_t *payload,
		   size_t plen)
{
	struct tres *r = arg;

	r->done++;
	r->result = result;
	r->plen = plen;
	if (plen)
		memcpy(r->payload, payload, plen);
	r->has_page = reply && reply->page;
	r->checksum = r->has_page ? reply->page->checksum : 0;
	r->at = now_s();
}

/* ---- the world ------------------------------------------------------------------ */

/* n ports free on 127.0.0.1 now (held together, so distinct). */
static void free_ports(uint16_t *ports, size_t n)
{
	int fds[NODES_MAX];
	struct sockaddr_in sa;
	socklen_t len;
	size_t i;

	for (i = 0; i < n; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		assert_true(fds[i] >= 0);
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		assert_int_equal(bind(fds[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
		len = sizeof(sa);
		assert_int_equal(getsockname(fds[i], (struct sockaddr *)&sa, &len), 0);
		ports[i] = ntohs(sa.sin_port);
	}
	for (i = 0; i < n; i++)
		close(fds[i]);
}

static void world_config(size_t n)
{
	static const char *const names[NODES_MAX] = {"alpha", "beta", "gamma", "delta"};
	struct config *cfg = &w->cfg;
	uint16_t ports[NODES_MAX];
	size_t i;

	config_defaults(cfg);
	cfg->has_cluster = true;
	strcpy(cfg->cluster_name, "test");
	cfg->heartbeat_ms = HB_MS;
	cfg->dead_after_ms = DEAD_MS;
	cfg->request_timeout_ms = 1000;
	free_ports(ports, n);
	cfg->n_nodes = n;
	for (i = 0; i < n; i++) {
		struct config_node *node = &cfg->nodes[i];

		strcpy(node->name, names[i]);
		node->id = (uint32_t)i + 1;
		strcpy(node->host, "127.0.0.1");
		node->port = ports[i];
		node->donate_mb = 64;
		w->nodes[i].id = node->id;
		w->nodes[i].donate_free = 32 * MB;
		w->nodes[i].donate_total = 64 * MB;
	}
	w->cfg2 = *cfg;
}

/* Start node idx with cfg and key; what its handlers saw starts afresh. */
static void node_start_with(int idx, const struct config *cfg, const uint8_t *key)
{
	struct tnode *t = &w->nodes[idx];
	char err[256] = "";

	memset(t->ups, 0, sizeof(t->ups));
	memset(t->downs, 0, sizeof(t->downs));
	memset(t->unreach, 0, sizeof(t->unreach));
	memset(t->session, 0, sizeof(t->session));
	memset(t->why, 0, sizeof(t->why));
	t->requests_seen = 0;
	t->c = cluster_create(w->loop, cfg, &cfg->nodes[idx], key, &handlers, t, err, sizeof(err));
	if (!t->c)
		fail_msg("cluster_create %d: %s", idx, err);
	assert_int_equal(cluster_self(t->c), t->id);
}

static void node_start(int idx)
{
	node_start_with(idx, &w->cfg, w->key);
}

static void node_stop(int idx)
{
	cluster_destroy(w->nodes[idx].c);
	w->nodes[idx].c = NULL;
}

static bool alive(int a, int b)
{
	struct cluster *c = w->nodes[a].c;
	uint32_t id = w->nodes[b].id;

	struct cluster_peer_info info[CONFIG_NODES_MAX];
	size_t i, n;

	if (!c || !cluster_alive(c, id, cluster_epoch(c, id) & 255))
		return false;
	/* alive() means the link is up: cluster_alive also holds while a lost
	 * link is not yet a dead peer */
	n = cluster_peers(c, info, CONFIG_NODES_MAX);
	for (i = 0; i < n; i++)
		if (info[i].id == id)
			return !strcmp(info[i].state, "up");
	return false;
}

static bool linked(int a, int b)
{
	return alive(a, b) && alive(b, a);
}

struct stat_find {
	const char *name;
	uint64_t value;
	bool found;
};

static void stat_cb(void *arg, const char *name, uint64_t value, const char *help)
{
	struct stat_find *f = arg;

	assert_non_null(help);
	if (!strcmp(name, f->name)) {
		f->value = value;
		f->found = true;
	}
}

static uint64_t stat_of(int idx, const char *name)
{
	struct stat_find f = {.name = name};

	cluster_foreach_stat(w->nodes[idx].c, stat_cb, &f);
	if (!f.found)
		fail_msg("no stat %s", name);
	return f.value;
}

static struct cluster_peer_info peer_info(int idx, uint32_t id)
{
	struct cluster_peer_info info[NODES_MAX];
	size_t n = cluster_peers(w->nodes[idx].c, info, NODES_MAX), i;

	for (i = 0; i < n && i < NODES_MAX; i++)
		if (info[i].id == id)
			return info[i];
	fail_msg("node %d has no peer %u", idx, id);
	return info[0];
}

static int request(int from, uint32_t to, Ramster__Peer__Op op, uint32_t index, const void *payload,
		   size_t plen, unsigned timeout_ms, struct tres *r)
{
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg = RAMSTER__PEER__PAGE__INIT;

	pg.pool = 3;
	pg.oid0 = 1;
	pg.oid1 = 2;
	pg.oid2 = 3;
	pg.index = index;
	pg.flags = op == RAMSTER__PEER__OP__P_PUT ? PAGE_PERSISTENT : 0;
	m.op = op;
	m.page = &pg;
	memset(r, 0, sizeof(*r));
	return cluster_request(w->nodes[from].c, to, &m, payload, plen, timeout_ms, req_cb, r);
}

static void tick_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
}

static int setup(void **state)
{
	w = calloc(1, sizeof(*w));
	assert_non_null(w);
	w->loop = ev_loop_new(EVFLAG_AUTO);
	assert_non_null(w->loop);
	ev_timer_init(&w->tick, tick_cb, 0.005, 0.005);
	ev_timer_start(w->loop, &w->tick);
	assert_true(sodium_init() >= 0);
	randombytes_buf(w->key, sizeof(w->key));
	return 0;
}

static int teardown(void **state)
{
	int i;

	for (i = 0; i < NODES_MAX; i++)
		node_stop(i);
	ev_timer_stop(w->loop, &w->tick);
	ev_loop_destroy(w->loop);
	free(w);
	w = NULL;
	return 0;
}

/* ---- membership ------------------------------------------------------------------- */

static void test_up(void **state)
{
	struct tnode *a = &w->nodes[0], *b = &w->nodes[1];
	struct cluster_peer_info ia, ib;
	char addr[32];

	world_config(2);
	node_start(1); /* listening before alpha dials: one dial is enough */
	node_start(0);
	assert_true(run_until(linked(0, 1) && a->ups[2] && b->ups[1], 2000));
	run_for(2 * HB_MS);
	assert_int_equal(a->ups[2], 1);
	assert_int_equal(b->ups[1], 1);
	assert_int_equal(a->downs[2] + b->downs[1], 0);

	ia = peer_info(1, 1); /* beta's view of alpha */
	ib = peer_info(0, 2);
	assert_true(ia.incarnation && ib.incarnation && ia.incarnation != ib.incarnation);
	/* session: the peer's incarnation + the epoch it keeps for us */
	assert_true(a->session[2] == ib.incarnation + cluster_epoch(b->c, 1));
	assert_true(b->session[1] == ia.incarnation + cluster_epoch(a->c, 2));
	assert_string_equal(ib.name, "beta");
	assert_string_equal(ib.state, "up");
	assert_string_equal(ib.transport, "tcp");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)w->cfg.nodes[1].port);
	assert_string_equal(ib.address, addr);
	assert_int_equal(ib.ups, 1);
	assert_int_equal(ib.epoch, 0);

	assert_true(cluster_alive(a->c, 2, 0));
	assert_false(cluster_alive(a->c, 2, 1));
	assert_false(cluster_alive(a->c, 1, 0)); /* ourselves */
	assert_false(cluster_alive(a->c, 9, 0)); /* nobody */
	assert_int_equal(stat_of(0, "cluster_links_up"), 1);
	assert_int_equal(stat_of(1, "cluster_links_up"), 1);
	assert_true(stat_of(0, "cluster_handshakes") >= 1);
	assert_true(stat_of(1, "cluster_handshakes") >= 1);
	assert_int_equal(stat_of(0, "cluster_auth_failures"), 0);
	/* one dial and one accept on a quiet machine; a handshake slower than its
	 * deadline (a sanitizer build on a loaded one) is dialed again */
	assert_true(stat_of(1, "cluster_links_accepted") >= 1);
	assert_true(stat_of(0, "cluster_dials") >= 1);
}

static void test_three_up(void **state)
{
	int i, j;

	world_config(3);
	for (i = 0; i < 3; i++)
		node_start(i);
	assert_true(run_until(linked(0, 1) && linked(0, 2) && linked(1, 2), 2000));
	run_for(2 * HB_MS);
	for (i = 0; i < 3; i++) {
		assert_int_equal(stat_of(i, "cluster_links_up"), 2);
		for (j = 0; j < 3; j++)
			if (i != j)
				assert_int_equal(w->nodes[i].ups[j + 1], 1);
	}
	/* the lower id dials: gamma dials nobody, alpha accepts nothing */
	assert_int_equal(stat_of(2, "cluster_dials"), 0);
	assert_int_equal(stat_of(0, "cluster_links_accepted"), 0);
}

static void test_heartbeat_rtt(void **state)
{
	struct cluster_peer_info ib;

	world_config(2);
	w->nodes[1].donate_free = 123456;
	w->nodes[1].donate_total = 999999;
	w->nodes[1].foreign = 40;
	node_start(0);
	node_start(1);
	assert_true(run_until(linked(0, 1), 2000));
	/* six heartbeats each way (300 ms at 50 ms): a wait for the count, not a
	 * count within a time, which a loaded machine could miss */
	assert_true(run_until(stat_of(0, "cluster_heartbeats_sent") >= 6 &&
				      stat_of(1, "cluster_heartbeats_sent") >= 6 &&
				      stat_of(0, "cluster_heartbeats_received") >= 6 &&
				      stat_of(1, "cluster_heartbeats_received") >= 6,
			      100 * HB_MS));
	ib = peer_info(0, 2);
	assert_int_equal(ib.donate_free, 123456);
	assert_int_equal(ib.donate_total, 999999);
	assert_int_equal(ib.pages_there, 41); /* beta's foreign_pages(alpha) */
	/* measured from the heartbeats' echoes; the figure is printed, not judged
	 * (a loaded machine's round trip is the scheduler's): it is the network's
	 * round trip, far below the heartbeat period of 50 ms */
	assert_true(ib.rtt_us > 0);
	assert_true(peer_info(1, 1).rtt_us > 0);
	printf("heartbeat round trip: %.0f us alpha->beta, %.0f us beta->alpha (period %u ms)\n",
	       (double)ib.rtt_us, (double)peer_info(1, 1).rtt_us, HB_MS);
}

/* ---- requests ------------------------------------------------------------------------ */

static void test_request_reply(void **state)
{
	struct tnode *b = &w->nodes[1];
	uint8_t data[3000], big[PEERWIRE_PAGE_MAX + 1];
	struct tres r, r2;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;

	world_config(2);
	node_start(0);
	node_start(1);
	assert_true(run_until(linked(0, 1), 2000));

	fill(data, sizeof(data), 5);
	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_PUT, 0, data, sizeof(data), 0, &r), 0);
	assert_true(run_until(r.done, 2000));
	assert_int_equal(r.done, 1);
	assert_int_equal(r.result, 0);
	assert_int_equal(r.plen, 0);
	assert_int_equal(b->put_len, sizeof(data));
	assert_memory_equal(b->put_data, data, sizeof(data));
	assert_true(b->req_session == b->session[1]);

	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_GET, 7, NULL, 0, 0, &r), 0);
	assert_true(run_until(r.done, 2000));
	assert_int_equal(r.result, 0);
	assert_int_equal(r.plen, 1007);
	fill(data, 1007, 7);
	assert_memory_equal(r.payload, data, 1007);
	assert_true(r.has_page);
	assert_int_equal(r.checksum, 0xc0de0007u);

	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_FLUSH, 1, NULL, 0, 0, &r), 0);
	assert_int_equal(request(1, 1, RAMSTER__PEER__OP__P_FLUSH_OBJECT, 1, NULL, 0, 0, &r2), 0);
	assert_true(run_until(r.done && r2.done, 2000));
	assert_int_equal(r.result, -ENOENT);
	assert_int_equal(r2.result, -ENOENT);
	assert_false(r.has_page);

	/* refused at once, and no callback */
	assert_int_equal(request(0, 9, RAMSTER__PEER__OP__P_FLUSH, 1, NULL, 0, 0, &r), -ENOENT);
	assert_int_equal(request(0, 1, RAMSTER__PEER__OP__P_FLUSH, 1, NULL, 0, 0, &r), -ENOENT);
	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_HELLO, 1, NULL, 0, 0, &r), -EINVAL);
	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_PUT, 1, NULL, 0, 0, &r), -EINVAL);
	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_GET, 1, data, 10, 0, &r), -EINVAL);
	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_PUT, 1, big, sizeof(big), 0, &r),
			 -EMSGSIZE);
	m.op = RAMSTER__PEER__OP__P_FLUSH; /* no page */
	assert_int_equal(cluster_request(w->nodes[0].c, 2, &m, NULL, 0, 0, req_cb, &r), -EINVAL);
	run_for(3 * HB_MS);
	assert_int_equal(r.done, 0);
	assert_true(linked(0, 1)); /* nothing bad went out */

	assert_int_equal(stat_of(0, "cluster_requests"), 3);
	assert_int_equal(stat_of(0, "cluster_replies"), 3);
	assert_int_equal(stat_of(1, "cluster_requests_received"), 3);
	assert_int_equal(stat_of(1, "cluster_replies_sent"), 3);
	assert_int_equal(stat_of(0, "cluster_requests_pending"), 0);
	assert_true(stat_of(0, "cluster_requests_invalid") >= 4);
	assert_int_equal(stat_of(0, "cluster_bad_frames") + stat_of(1, "cluster_bad_frames"), 0);
}

/* Requests made before the link is up wait for it, both ways. */
static void test_request_held(void **state)
{
	uint8_t data[100];
	struct tres r, r2;

	world_config(2);
	node_start(0);
	node_start(1);
	fill(data, sizeof(data), 1);
	assert_string_equal(peer_info(0, 2).state, "connecting");
	assert_string_equal(peer_info(1, 1).state, "down");
	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_PUT, 0, data, sizeof(data), 0, &r), 0);
	assert_int_equal(request(1, 1, RAMSTER__PEER__OP__P_GET, 3, NULL, 0, 0, &r2), 0);
	assert_int_equal(stat_of(0, "cluster_requests_pending"), 1);
	assert_true(run_until(r.done && r2.done, 2000));
	assert_int_equal(r.result, 0);
	assert_int_equal(r2.result, 0);
	assert_int_equal(r2.plen, 1003);
	assert_int_equal(w->nodes[1].put_len, sizeof(data));
}

static void test_timeout(void **state)
{
	struct tnode *b = &w->nodes[1];
	struct tres r;
	double t0;
	uint8_t one = 1;

	world_config(2);
	node_start(0);
	node_start(1);
	assert_true(run_until(linked(0, 1), 2000));
	b->answer = ANSWER_NEVER;
	t0 = now_s();
	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_GET, 1, NULL, 0, 150, &r), 0);
	assert_true(run_until(r.done, 2000));
	assert_int_equal(r.done, 1);
	assert_int_equal(r.result, -ETIMEDOUT);
	assert_true(r.at - t0 >= 0.14);
	assert_true(r.at - t0 < 1.0);
	assert_int_equal(b->requests_seen, 1);
	assert_int_equal(stat_of(0, "cluster_timeouts"), 1);
	assert_int_equal(stat_of(0, "cluster_requests_pending"), 0);

	/* the answer comes too late: counted, ignored */
	assert_int_equal(cluster_reply(b->c, 1, b->held_seq, 0, NULL, NULL, 0), 0);
	assert_true(run_until(stat_of(0, "cluster_replies_unknown") == 1, 2000));
	assert_int_equal(r.done, 1);
	assert_true(linked(0, 1));

	/* replies the peer would refuse are refused here */
	assert_int_equal(cluster_reply(b->c, 1, 5, 1, NULL, NULL, 0), -EINVAL);
	assert_int_equal(cluster_reply(b->c, 1, 5, -EIO, NULL, &one, 1), -EINVAL);
	assert_int_equal(cluster_reply(b->c, 1, 0, 0, NULL, NULL, 0), -EINVAL);
	assert_int_equal(cluster_reply(b->c, 7, 5, 0, NULL, NULL, 0), -ENOENT);
	assert_int_equal(stat_of(1, "cluster_replies_invalid"), 3);
}

static void test_destroy_cancels(void **state)
{
	struct tres r;

	world_config(2);
	node_start(0); /* beta never starts */
	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_GET, 1, NULL, 0, 10000, &r), 0);
	run_for(300);
	assert_int_equal(r.done, 0);
	assert_string_equal(peer_info(0, 2).state, "connecting");
	assert_true(stat_of(0, "cluster_reconnects") >= 1); /* backoff: 50, 100 ms ... */
	assert_true(stat_of(0, "cluster_dials") <= 6);
	node_stop(0);
	assert_int_equal(r.done, 1);
	assert_int_equal(r.result, -ECANCELED);
}

/* ---- refusals ------------------------------------------------------------------------- */

static void test_wrong_key(void **state)
{
	uint8_t other[CLUSTER_KEY_LEN];

	world_config(2);
	memcpy(other, w->key, sizeof(other));
	other[0] ^= 1;
	node_start(0);
	node_start_with(1, &w->cfg, other);
	run_for(800);
	assert_int_equal(w->nodes[0].ups[2] + w->nodes[1].ups[1], 0);
	assert_true(stat_of(0, "cluster_auth_failures") + stat_of(1, "cluster_auth_failures") >= 2);
	assert_int_equal(stat_of(0, "cluster_handshakes") + stat_of(1, "cluster_handshakes"), 0);
	assert_int_equal(stat_of(0, "cluster_links_up"), 0);
	assert_true(stat_of(0, "cluster_reconnects") >= 1);
	assert_string_equal(peer_info(0, 2).state, "connecting");
	assert_string_equal(peer_info(1, 1).state, "down");
}

static void test_wrong_cluster(void **state)
{
	world_config(2);
	strcpy(w->cfg2.cluster_name, "other");
	node_start(0);
	node_start_with(1, &w->cfg2, w->key);
	run_for(600);
	assert_int_equal(w->nodes[0].ups[2] + w->nodes[1].ups[1], 0);
	assert_true(
	    stat_of(0, "cluster_handshake_refused") + stat_of(1, "cluster_handshake_refused") >= 2);
	assert_int_equal(stat_of(0, "cluster_auth_failures") + stat_of(1, "cluster_auth_failures"),
			 0);
	assert_int_equal(stat_of(1, "cluster_links_up"), 0);
}

/* A raw TCP client to port. */
static int raw_connect(uint16_t port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(port);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void raw_send(int fd, const Ramster__Peer__Msg *m, const uint8_t *msg_bytes, size_t mlen,
		     const uint8_t *payload, size_t plen)
{
	uint8_t buf[TRANSPORT_HDR_SIZE + 1024 + PEERWIRE_PAGE_MAX];
	int n = (int)mlen;

	if (m) {
		n = peerwire_pack(m, buf + TRANSPORT_HDR_SIZE, 1024);
		assert_true(n > 0);
	} else {
		memcpy(buf + TRANSPORT_HDR_SIZE, msg_bytes, mlen);
	}
	frame_hdr_encode(buf, (uint32_t)n, (uint32_t)plen);
	if (plen)
		memcpy(buf + TRANSPORT_HDR_SIZE + n, payload, plen);
	assert_int_equal(send(fd, buf, TRANSPORT_HDR_SIZE + n + plen, MSG_NOSIGNAL),
			 (ssize_t)(TRANSPORT_HDR_SIZE + n + plen));
}

/* Did the other end close fd? Reads and drops whatever came before. */
static bool raw_closed(int fd)
{
	uint8_t buf[4096];
	ssize_t r;

	for (;;) {
		r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r > 0)
			continue;
		return r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
	}
}

static void test_unauthenticated(void **state)
{
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg = RAMSTER__PEER__PAGE__INIT;
	Ramster__Peer__Hello h = RAMSTER__PEER__HELLO__INIT;
	Ramster__Peer__Auth a = RAMSTER__PEER__AUTH__INIT;
	static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
	uint8_t payload[100] = {0}, nonce[PEERWIRE_NONCE_LEN] = {1}, mac[PEERWIRE_MAC_LEN] = {0};
	uint16_t port;
	int fd;

	world_config(2);
	node_start(1); /* beta (2) accepts from alpha (1), who never starts */
	port = w->cfg.nodes[1].port;

	/* a PUT before any handshake */
	fd = raw_connect(port);
	m.op = RAMSTER__PEER__OP__P_PUT;
	m.seq = 1;
	pg.flags = PAGE_PERSISTENT;
	m.page = &pg;
	raw_send(fd, &m, NULL, 0, payload, sizeof(payload));
	assert_true(run_until(raw_closed(fd), 2000));
	close(fd);
	assert_int_equal(stat_of(1, "cluster_handshake_refused"), 1);

	/* a frame that is not a message */
	fd = raw_connect(port);
	raw_send(fd, NULL, junk, sizeof(junk), NULL, 0);
	assert_true(run_until(raw_closed(fd), 2000));
	close(fd);
	assert_int_equal(stat_of(1, "cluster_bad_frames"), 1);

	/* a hello from a node the file does not list */
	fd = raw_connect(port);
	m = (Ramster__Peer__Msg)RAMSTER__PEER__MSG__INIT;
	m.op = RAMSTER__PEER__OP__P_HELLO;
	h.version = 2;
	h.cluster = (char *)"test";
	h.security = 1;
	h.node_id = 7;
	h.incarnation = 42;
	h.nonce.data = nonce;
	h.nonce.len = sizeof(nonce);
	m.hello = &h;
	raw_send(fd, &m, NULL, 0, NULL, 0);
	assert_true(run_until(raw_closed(fd), 2000));
	close(fd);
	assert_int_equal(stat_of(1, "cluster_handshake_refused"), 2);

	/* alpha's hello, then a mac made without the key */
	fd = raw_connect(port);
	h.node_id = 1;
	raw_send(fd, &m, NULL, 0, NULL, 0);
	m = (Ramster__Peer__Msg)RAMSTER__PEER__MSG__INIT;
	m.op = RAMSTER__PEER__OP__P_AUTH;
	a.mac.data = mac;
	a.mac.len = sizeof(mac);
	m.auth = &a;
	raw_send(fd, &m, NULL, 0, NULL, 0);
	assert_true(run_until(raw_closed(fd), 2000));
	close(fd);
	assert_int_equal(stat_of(1, "cluster_auth_failures"), 1);

	/* a client that says nothing is dropped after the handshake limit */
	fd = raw_connect(port);
	assert_true(run_until(raw_closed(fd), DEAD_MS + 1000));
	close(fd);
	assert_int_equal(stat_of(1, "cluster_handshake_timeouts"), 1);

	assert_int_equal(stat_of(1, "cluster_handshakes"), 0);
	assert_int_equal(w->nodes[1].ups[1], 0);
	assert_int_equal(stat_of(1, "cluster_links_accepted"), 5);
}

/* A raw client that speaks the peer protocol itself, as node alpha. */
struct raw {
	int fd;
	size_t n;
	uint8_t buf[TRANSPORT_HDR_SIZE + TRANSPORT_MSG_MAX + TRANSPORT_PAYLOAD_MAX];
	struct wire_arena arena;
	uint8_t nonce[PEERWIRE_NONCE_LEN];
	uint64_t their_inc;
	uint32_t their_epoch;
	size_t plen; /* of the last frame taken */
	uint8_t payload[PEERWIRE_PAGE_MAX];
	bool up;	  /* frames sealed from now on */
	struct lc_link lc;
	uint8_t last[TRANSPORT_HDR_SIZE + TRANSPORT_MSG_MAX + PEERWIRE_PAGE_MAX]; /* sent */
	size_t last_len;
};

/* Pull what has arrived. @return whether a whole frame is buffered. */
static bool raw_has_frame(struct raw *r)
{
	struct frame_hdr h;
	const char *why;
	ssize_t k;

	while ((k = recv(r->fd, r->buf + r->n, sizeof(r->buf) - r->n, MSG_DONTWAIT)) > 0)
		r->n += (size_t)k;
	if (r->n < TRANSPORT_HDR_SIZE)
		return false;
	assert_int_equal(frame_hdr_decode(r->buf, &h, &why), 0);
	return r->n >= TRANSPORT_HDR_SIZE + h.msg_len + h.payload_len;
}

/* The next message that is not a heartbeat (opened with the link's keys once up). */
static Ramster__Peer__Msg *raw_recv(struct raw *r)
{
	static uint8_t mout[TRANSPORT_MSG_MAX], pout[TRANSPORT_PAYLOAD_MAX];
	const uint8_t *msg, *pay;
	Ramster__Peer__Msg *m;
	struct frame_hdr h;
	const char *why;
	size_t total, len;

	do {
		assert_true(run_until(raw_has_frame(r), 2000));
		assert_int_equal(frame_hdr_decode(r->buf, &h, &why), 0);
		msg = r->buf + TRANSPORT_HDR_SIZE;
		len = h.msg_len;
		pay = msg + h.msg_len;
		if (r->up)
			assert_int_equal(lc_open(&r->lc, msg, len, pay, h.payload_len, mout, pout,
						 &msg, &len, &pay),
					 0);
		wire_arena_reset(&r->arena);
		assert_int_equal(peerwire_decode(msg, len, h.payload_len, &r->arena, &m, &why), 0);
		r->plen = h.payload_len;
		if (h.payload_len)
			memcpy(r->payload, pay, h.payload_len);
		total = TRANSPORT_HDR_SIZE + h.msg_len + h.payload_len;
		memmove(r->buf, r->buf + total, r->n - total);
		r->n -= total;
	} while (m->op == RAMSTER__PEER__OP__P_HEARTBEAT);
	return m;
}

/* The next raw_psend flips one bit of this byte of its frame (-2: the last byte). */
static long raw_flip_at = -1;

/* Send m (and payload) on r: sealed once up. The bytes sent are kept in r->last. */
static void raw_psend(struct raw *r, const Ramster__Peer__Msg *m, const uint8_t *payload,
		      size_t plen)
{
	uint8_t msg[1024], *out = r->last + TRANSPORT_HDR_SIZE;
	const uint8_t *pay = payload;
	int n = peerwire_pack(m, msg, sizeof(msg));
	size_t len;

	assert_true(n > 0);
	if (r->up) {
		len = lc_seal(&r->lc, msg, (size_t)n, payload, plen, false, out, out + n + LC_OVERHEAD,
			      &pay);
		lc_sent(&r->lc);
	} else {
		memcpy(out, msg, (size_t)n);
		len = (size_t)n;
	}
	frame_hdr_encode(r->last, (uint32_t)len, (uint32_t)plen);
	if (plen && pay != out + len)
		memcpy(out + len, pay, plen);
	r->last_len = TRANSPORT_HDR_SIZE + len + plen;
	if (raw_flip_at != -1)
		r->last[raw_flip_at == -2 ? (long)r->last_len - 1 : raw_flip_at] ^= 0x04;
	raw_flip_at = -1;
	assert_int_equal(send(r->fd, r->last, r->last_len, MSG_NOSIGNAL), (ssize_t)r->last_len);
}

/*
 * The transcript of a link from alpha (1, dialer) to beta (2), written out
 * again independently of link.c: for each side, dialer first, id (4),
 * incarnation (8), nonce (32), epoch announced (4), cipher bits (4), security
 * (4); then the cluster name. All little-endian.
 */
static size_t transcript(uint8_t *t, uint64_t d_inc, const uint8_t *d_nonce, uint32_t d_epoch,
			 uint64_t a_inc, const uint8_t *a_nonce, uint32_t a_epoch,
			 uint32_t a_ciphers, const char *name)
{
	const uint32_t id[2] = {1, 2}, ep[2] = {d_epoch, a_epoch}, ci[2] = {lc_ciphers(), a_ciphers};
	const uint64_t inc[2] = {d_inc, a_inc};
	const uint8_t *nonce[2] = {d_nonce, a_nonce};
	size_t n = 0;
	int i, s;

	for (s = 0; s < 2; s++) {
		for (i = 0; i < 4; i++)
			t[n++] = (uint8_t)(id[s] >> (8 * i));
		for (i = 0; i < 8; i++)
			t[n++] = (uint8_t)(inc[s] >> (8 * i));
		memcpy(t + n, nonce[s], 32);
		n += 32;
		for (i = 0; i < 4; i++)
			t[n++] = (uint8_t)(ep[s] >> (8 * i));
		for (i = 0; i < 4; i++)
			t[n++] = (uint8_t)(ci[s] >> (8 * i));
		t[n++] = 1; /* secure */
		t[n++] = 0;
		t[n++] = 0;
		t[n++] = 0;
	}
	memcpy(t + n, name, strlen(name));
	return n + strlen(name);
}

/* label "ramster-auth-v2", role, transcript */
static void proof(uint8_t mac[32], char role, const uint8_t *t, size_t n)
{
	uint8_t buf[512];

	memcpy(buf, "ramster-auth-v2", 15);
	buf[15] = (uint8_t)role;
	memcpy(buf + 16, t, n);
	crypto_auth_hmacsha256(mac, buf, 16 + n, w->key);
}

/*
 * Connect to beta as alpha (incarnation inc) and authenticate both ways:
 * alpha proves first; beta proves nothing before it has checked alpha's
 * proof. lie_epoch: alpha's proof names another epoch than its hello did
 * (an attacker changed the hello on the way): beta refuses.
 */
static void raw_handshake_as(struct raw *r, uint64_t inc, bool lie_epoch)
{
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT, *in;
	Ramster__Peer__Hello h = RAMSTER__PEER__HELLO__INIT;
	Ramster__Peer__Auth a = RAMSTER__PEER__AUTH__INIT;
	uint8_t t[256], mac[PEERWIRE_MAC_LEN], their_nonce[PEERWIRE_NONCE_LEN];
	uint8_t buf[512], material[64];
	uint32_t their_ciphers;
	size_t n;

	memset(r, 0, sizeof(*r));
	assert_int_equal(wire_arena_init(&r->arena, 64 * 1024), 0);
	r->fd = raw_connect(w->cfg.nodes[1].port);
	randombytes_buf(r->nonce, sizeof(r->nonce));
	h.version = 2;
	h.cluster = (char *)"test";
	h.node_id = 1;
	h.incarnation = inc;
	h.nonce.data = r->nonce;
	h.nonce.len = sizeof(r->nonce);
	h.ciphers = lc_ciphers();
	h.security = 1;
	m.op = RAMSTER__PEER__OP__P_HELLO;
	m.hello = &h;
	raw_psend(r, &m, NULL, 0);

	in = raw_recv(r);
	assert_int_equal(in->op, RAMSTER__PEER__OP__P_HELLO);
	assert_int_equal(in->hello->version, 2);
	assert_string_equal(in->hello->cluster, "test");
	assert_int_equal(in->hello->node_id, 2);
	assert_int_equal(in->hello->security, 1);
	r->their_inc = in->hello->incarnation;
	r->their_epoch = in->hello->epoch;
	their_ciphers = in->hello->ciphers;
	memcpy(their_nonce, in->hello->nonce.data, sizeof(their_nonce));
	/* beta proves nothing before alpha has */
	run_for(3 * HB_MS);
	assert_false(raw_has_frame(r));

	n = transcript(t, inc, r->nonce, lie_epoch ? 7 : 0, r->their_inc, their_nonce,
		       r->their_epoch, their_ciphers, "test");
	proof(mac, 'D', t, n);
	m = (Ramster__Peer__Msg)RAMSTER__PEER__MSG__INIT;
	m.op = RAMSTER__PEER__OP__P_AUTH;
	a.mac.data = mac;
	a.mac.len = sizeof(mac);
	m.auth = &a;
	raw_psend(r, &m, NULL, 0);
	if (lie_epoch)
		return;

	in = raw_recv(r);
	assert_int_equal(in->op, RAMSTER__PEER__OP__P_AUTH);
	proof(mac, 'A', t, n);
	assert_memory_equal(in->auth->mac.data, mac, sizeof(mac));
	/* frame keys: HMAC-SHA-512(key, "ramster-keys-v2" transcript), alpha's direction first */
	memcpy(buf, "ramster-keys-v2", 15);
	memcpy(buf + 15, t, n);
	crypto_auth_hmacsha512(material, buf, 15 + n, w->key);
	lc_init(&r->lc, material, true, lc_ciphers() & their_ciphers & LC_CIPHER_AES, false);
	r->up = true;
}

static void raw_handshake(struct raw *r, uint64_t inc)
{
	raw_handshake_as(r, inc, false);
}

static void raw_close(struct raw *r)
{
	close(r->fd);
	wire_arena_fini(&r->arena);
}

/*
 * Our transcript is the documented one; a newer link for a peer replaces the
 * older; an unanswered request goes out again on the new link.
 */
static void test_raw_peer(void **state)
{
	struct tnode *b = &w->nodes[1];
	struct raw *r1 = malloc(sizeof(*r1)), *r2 = malloc(sizeof(*r2));
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT, *in;
	Ramster__Peer__Page pg = RAMSTER__PEER__PAGE__INIT;
	Ramster__Peer__Auth a = RAMSTER__PEER__AUTH__INIT;
	const uint64_t inc = 0x1122334455667788ull;
	uint8_t data[1004], mac[PEERWIRE_MAC_LEN] = {0};
	struct tres r;
	uint64_t seq;

	assert_non_null(r1);
	assert_non_null(r2);
	world_config(2);
	node_start(1);
	raw_handshake(r1, inc);
	assert_true(run_until(b->ups[1] == 1, 2000));
	assert_true(b->session[1] == inc);
	assert_int_equal(r1->their_epoch, 0);
	assert_string_equal(peer_info(1, 1).state, "up");

	/* beta asks; the answer never comes on this link */
	assert_int_equal(request(1, 1, RAMSTER__PEER__OP__P_FLUSH, 6, NULL, 0, 5000, &r), 0);
	in = raw_recv(r1);
	assert_int_equal(in->op, RAMSTER__PEER__OP__P_FLUSH);
	assert_int_equal(in->page->index, 6);
	seq = in->seq;

	/* a second authenticated link for alpha replaces the first */
	raw_handshake(r2, inc);
	assert_true(run_until(b->ups[1] == 2 && raw_closed(r1->fd), 2000));
	assert_int_equal(stat_of(1, "cluster_links_replaced"), 1);
	assert_int_equal(stat_of(1, "cluster_links_up"), 1);
	assert_int_equal(b->downs[1], 0); /* same incarnation: no restart */

	/* ... and the request comes again on it */
	in = raw_recv(r2);
	assert_int_equal(in->op, RAMSTER__PEER__OP__P_FLUSH);
	assert_true(in->seq == seq);
	assert_int_equal(r.done, 0);
	m.op = RAMSTER__PEER__OP__P_REPLY;
	m.seq = seq;
	m.result = -ENOENT;
	raw_psend(r2, &m, NULL, 0);
	assert_true(run_until(r.done, 2000));
	assert_int_equal(r.result, -ENOENT);
	assert_int_equal(stat_of(1, "cluster_requests_resent"), 1);

	/* alpha asks beta */
	m = (Ramster__Peer__Msg)RAMSTER__PEER__MSG__INIT;
	m.op = RAMSTER__PEER__OP__P_GET;
	m.seq = 77;
	pg.index = 4;
	m.page = &pg;
	raw_psend(r2, &m, NULL, 0);
	in = raw_recv(r2);
	assert_int_equal(in->op, RAMSTER__PEER__OP__P_REPLY);
	assert_int_equal(in->seq, 77);
	assert_int_equal(in->result, 0);
	assert_int_equal(r2->plen, 1004);
	fill(data, sizeof(data), 4);
	assert_memory_equal(r2->payload, data, sizeof(data));
	assert_true(b->req_session == inc);

	/* a handshake message on an authenticated link */
	m = (Ramster__Peer__Msg)RAMSTER__PEER__MSG__INIT;
	m.op = RAMSTER__PEER__OP__P_AUTH;
	a.mac.data = mac;
	a.mac.len = sizeof(mac);
	m.auth = &a;
	raw_psend(r2, &m, NULL, 0);
	assert_true(run_until(raw_closed(r2->fd), 2000));
	assert_int_equal(stat_of(1, "cluster_protocol_errors"), 1);
	assert_string_equal(peer_info(1, 1).state, "down");
	raw_close(r1);
	raw_close(r2);
	free(r1);
	free(r2);
}

/* Send bytes as they are on fd (a frame kept from a link, changed or not). */
static void raw_bytes(int fd, const uint8_t *b, size_t n)
{
	assert_int_equal(send(fd, b, n, MSG_NOSIGNAL), (ssize_t)n);
}

/*
 * An on-path attacker's moves on an authenticated link: a replayed frame, a
 * flipped byte, a frame in the clear, a frame from another link (spliced),
 * a hello changed under the proof. Each closes the link, counted, and never
 * reaches the handlers.
 */
static void test_raw_tamper(void **state)
{
	struct tnode *b = &w->nodes[1];
	struct raw *r1 = malloc(sizeof(*r1)), *r2 = malloc(sizeof(*r2));
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT, *in;
	Ramster__Peer__Page pg = RAMSTER__PEER__PAGE__INIT;
	const uint64_t inc = 0x0102030405060708ull;
	uint8_t kept[sizeof(r1->last)];
	size_t kept_len;
	int seen;

	assert_non_null(r1);
	assert_non_null(r2);
	world_config(2);
	node_start(1);
	m.op = RAMSTER__PEER__OP__P_GET;
	pg.index = 4;
	m.page = &pg;

	/* a good request is answered; the same bytes again are a replay */
	raw_handshake(r1, inc);
	m.seq = 1;
	raw_psend(r1, &m, NULL, 0);
	in = raw_recv(r1);
	assert_int_equal(in->op, RAMSTER__PEER__OP__P_REPLY);
	assert_int_equal(in->seq, 1);
	seen = b->requests_seen;
	raw_bytes(r1->fd, r1->last, r1->last_len);
	assert_true(run_until(raw_closed(r1->fd), 2000));
	assert_int_equal(stat_of(1, "cluster_frame_auth_failures"), 1);
	assert_int_equal(b->requests_seen, seen);
	raw_close(r1);

	/* one flipped bit in the message, then in the tag */
	for (int k = 0; k < 2; k++) {
		raw_handshake(r1, inc);
		m.seq = 2;
		raw_psend(r1, &m, NULL, 0);
		in = raw_recv(r1);
		assert_int_equal(in->seq, 2);
		m.seq = 3;
		seen = b->requests_seen;
		raw_flip_at = k ? -2 : TRANSPORT_HDR_SIZE + 1;
		raw_psend(r1, &m, NULL, 0);
		assert_true(run_until(raw_closed(r1->fd), 2000));
		assert_int_equal(stat_of(1, "cluster_frame_auth_failures"), 2 + k);
		assert_int_equal(b->requests_seen, seen);
		raw_close(r1);
	}

	/* a frame in the clear after the handshake (an injected one) */
	raw_handshake(r1, inc);
	r1->up = false;
	m.seq = 4;
	raw_psend(r1, &m, NULL, 0);
	assert_true(run_until(raw_closed(r1->fd), 2000));
	assert_int_equal(stat_of(1, "cluster_frame_auth_failures"), 4);
	raw_close(r1);

	/* a frame of one link spliced into another: good on its own link, not on this */
	raw_handshake(r1, inc);
	m.seq = 5;
	raw_psend(r1, &m, NULL, 0);
	in = raw_recv(r1);
	memcpy(kept, r1->last, r1->last_len);
	kept_len = r1->last_len;
	raw_handshake(r2, inc);
	assert_true(run_until(raw_closed(r1->fd), 2000)); /* replaced */
	seen = b->requests_seen;
	raw_bytes(r2->fd, kept, kept_len);
	assert_true(run_until(raw_closed(r2->fd), 2000));
	assert_int_equal(stat_of(1, "cluster_frame_auth_failures"), 5);
	assert_int_equal(b->requests_seen, seen);
	raw_close(r1);
	raw_close(r2);

	/* a hello whose epoch was changed on the way: the proof does not match it */
	raw_handshake_as(r1, inc, true);
	assert_true(run_until(raw_closed(r1->fd), 2000));
	assert_int_equal(stat_of(1, "cluster_auth_failures"), 1);
	raw_close(r1);
	free(r1);
	free(r2);
}

/* ---- death and rebirth ---------------------------------------------------------------- */

/*
 * Silence is not death: past dead_after_ms the peer is unreachable. Its epoch
 * stays (its copies still exist), pending requests wait for their own
 * timeouts, new ones are taken (they wait for the link), nothing is placed
 * there. A new process with the same config is a restart: then the epoch moves.
 */
static void test_peer_dead(void **state)
{
	struct tnode *a = &w->nodes[0], *b = &w->nodes[1];
	struct tres r, r2;
	double t0;

	world_config(2);
	node_start(0);
	node_start(1);
	assert_true(run_until(linked(0, 1), 2000));
	b->answer = ANSWER_NEVER;
	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_GET, 1, NULL, 0, DEAD_MS + 1500, &r), 0);
	assert_true(run_until(b->requests_seen == 1, 2000));

	node_stop(1);
	t0 = now_s();
	assert_true(run_until(a->unreach[2], DEAD_MS + 2000));
	/* a figure, printed: dead_after_ms after beta's last heartbeat, which came
	 * up to one period before the stop (a loaded machine only adds to it) */
	printf("unreachable %.0f ms after the stop (dead_after_ms %u, heartbeat %u ms)\n",
	       (a->unreach_at[2] - t0) * 1000.0, DEAD_MS, HB_MS);
	assert_int_equal(a->downs[2], 0);
	assert_int_equal(r.done, 0); /* it waits for its own timeout */

	assert_int_equal(cluster_epoch(a->c, 2), 0);
	assert_true(cluster_alive(a->c, 2, 0));
	assert_false(cluster_reachable(a->c, 2, 0));
	assert_string_equal(peer_info(0, 2).state, "unreachable");
	assert_int_equal(peer_info(0, 2).deaths, 1);
	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_GET, 1, NULL, 0, 300, &r2), 0);
	assert_int_equal(cluster_pick(a->c, 0, 0), -ENOSPC);
	assert_true(run_until(r2.done && r.done, 3000));
	assert_int_equal(r.result, -ETIMEDOUT);
	assert_int_equal(r2.result, -ETIMEDOUT);
	assert_int_equal(a->downs[2], 0);
	assert_int_equal(stat_of(0, "cluster_peer_deaths"), 1);
	assert_int_equal(stat_of(0, "cluster_peers_unreachable"), 1);
	assert_int_equal(stat_of(0, "cluster_requests_failed_dead"), 0);

	/* it comes back as a new process: a restart, the epoch moves */
	node_start(1);
	assert_true(run_until(linked(0, 1) && a->ups[2] == 2, 3000));
	assert_int_equal(cluster_epoch(a->c, 2), 1);
	assert_int_equal(a->downs[2], 1);
	assert_string_equal(a->why[2], "restarted");
	assert_false(cluster_alive(a->c, 2, 0));
	assert_true(cluster_reachable(a->c, 2, 1));
	assert_true(a->session[2] == peer_info(0, 2).incarnation + cluster_epoch(b->c, 1));
	assert_true(b->session[1] == peer_info(1, 1).incarnation + 1);
	assert_int_equal(stat_of(0, "cluster_peers_unreachable"), 0);
}

static void stall_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	usleep(2 * DEAD_MS * 1000); /* one callback holds the loop: every node stalls */
}

/*
 * The loop itself stalls (a long callback, a stopped process) for twice
 * dead_after_ms: the peers' frames wait unread in the sockets. That silence
 * is ours: no peer may be declared unreachable for it.
 */
static void test_loop_stall_is_not_silence(void **state)
{
	struct tnode *a = &w->nodes[0], *b = &w->nodes[1];
	ev_timer stall;

	world_config(2);
	node_start(0);
	node_start(1);
	assert_true(run_until(linked(0, 1), 2000));
	run_for(3 * HB_MS);
	ev_timer_init(&stall, stall_cb, 0.001, 0.);
	ev_timer_start(w->loop, &stall);
	run_for(2 * DEAD_MS + 4 * HB_MS);
	run_for(DEAD_MS / 2);
	assert_int_equal(a->unreach[2] + b->unreach[1], 0);
	assert_int_equal(a->downs[2] + b->downs[1], 0);
	assert_true(stat_of(0, "cluster_dead_checks_deferred") +
			stat_of(1, "cluster_dead_checks_deferred") > 0);
	assert_true(linked(0, 1));
	/* and a real silence is still seen */
	node_stop(1);
	assert_true(run_until(a->unreach[2], DEAD_MS + 2000));
}

/* Unreachable past orphan_after_ms: the lease expires, the copies are gone. */
static void test_lease_expiry(void **state)
{
	struct tnode *a = &w->nodes[0];
	struct tres r;

	world_config(2);
	w->cfg.orphan_after_ms = DEAD_MS + 300;
	node_start(0);
	w->cfg.orphan_after_ms = 0;
	node_start(1);
	assert_true(run_until(linked(0, 1), 2000));
	node_stop(1);
	assert_true(run_until(a->unreach[2], DEAD_MS + 2000));
	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_GET, 1, NULL, 0, 5000, &r), 0);
	assert_int_equal(a->downs[2], 0);
	assert_true(run_until(a->downs[2], DEAD_MS + 2000));
	assert_string_equal(a->why[2], "lease expired");
	assert_true(now_s() - a->unreach_at[2] >= (DEAD_MS + 300 - 2 * HB_MS) / 1000.0);
	assert_int_equal(cluster_epoch(a->c, 2), 1);
	assert_false(cluster_alive(a->c, 2, 0));
	assert_int_equal(r.done, 1);
	assert_int_equal(r.result, -EHOSTDOWN);
	assert_int_equal(stat_of(0, "cluster_leases_expired"), 1);
}

/*
 * cluster_alive from another thread, as the tier calls it (a get under a
 * bucket lock on any thread) while the loop links, kills and relinks the
 * peer: the thread sees beta alive in epoch 0, then never again once the
 * loop declared it dead, then alive in epoch 1 after it came back. Under
 * `make tsan` this is also the proof that it reads no loop-only state.
 */
struct alive_watch {
	struct cluster *c;
	atomic_bool stop;
	atomic_uint_fast64_t calls, alive0, alive1;
};

static void *alive_watch_main(void *arg)
{
	struct alive_watch *aw = arg;

	while (!atomic_load(&aw->stop)) {
		if (cluster_alive(aw->c, 2, 0))
			atomic_fetch_add(&aw->alive0, 1);
		if (cluster_alive(aw->c, 2, 1))
			atomic_fetch_add(&aw->alive1, 1);
		atomic_fetch_add(&aw->calls, 1);
	}
	return NULL;
}

/* Let the watcher finish the pass it is in and make n more. */
static void alive_watch_passes(struct alive_watch *aw, uint64_t n)
{
	uint64_t until = atomic_load(&aw->calls) + 1 + n;

	while (atomic_load(&aw->calls) < until)
		sched_yield();
}

static void test_alive_any_thread(void **state)
{
	struct tnode *a = &w->nodes[0];
	struct alive_watch aw = {0};
	pthread_t th;
	uint64_t seen;

	world_config(2);
	node_start(0);
	aw.c = a->c;
	assert_int_equal(pthread_create(&th, NULL, alive_watch_main, &aw), 0);
	alive_watch_passes(&aw, 100);
	assert_int_equal(atomic_load(&aw.alive0), 0); /* never up yet */
	node_start(1);
	assert_true(run_until(linked(0, 1) && atomic_load(&aw.alive0) > 0, 2000));
	assert_int_equal(atomic_load(&aw.alive1), 0);

	node_stop(1);
	assert_true(run_until(a->unreach[2], DEAD_MS + 2000));
	/* unreachable is not gone (issue 11): still alive in epoch 0, seen so from
	 * another thread while the loop changed the peer's state */
	alive_watch_passes(&aw, 0);
	seen = atomic_load(&aw.alive0);
	alive_watch_passes(&aw, 1000);
	assert_true(atomic_load(&aw.alive0) > seen);
	assert_int_equal(atomic_load(&aw.alive1), 0);
	assert_false(cluster_reachable(a->c, 2, 0));

	node_start(1); /* a new incarnation: epoch 0 is over, epoch 1 begins */
	assert_true(run_until(linked(0, 1) && atomic_load(&aw.alive1) > 0, 3000));
	alive_watch_passes(&aw, 0);
	seen = atomic_load(&aw.alive0);
	alive_watch_passes(&aw, 1000);
	assert_int_equal(atomic_load(&aw.alive0), seen);

	atomic_store(&aw.stop, true);
	pthread_join(th, NULL);
}

/* Destroy node idx and start it again at once: its peer sees a new incarnation. */
static void restart_case(int idx)
{
	int other = 1 - idx;
	struct tnode *x = &w->nodes[other], *y = &w->nodes[idx];
	struct cluster_peer_info info;
	uint64_t inc0;
	unsigned epoch0;
	struct tres r;

	world_config(2);
	node_start(0);
	node_start(1);
	assert_true(run_until(linked(0, 1), 2000));
	inc0 = peer_info(other, y->id).incarnation;
	epoch0 = cluster_epoch(x->c, y->id);
	y->answer = ANSWER_NEVER;
	assert_int_equal(request(other, y->id, RAMSTER__PEER__OP__P_FLUSH, 1, NULL, 0, 10000, &r),
			 0);
	assert_true(run_until(y->requests_seen == 1, 2000));
	y->answer = ANSWER_NOW;

	node_stop(idx);
	node_start(idx);
	assert_true(run_until(x->ups[y->id] >= 2 && linked(0, 1), 3000));
	run_for(2 * HB_MS);

	info = peer_info(other, y->id);
	assert_true(info.incarnation != inc0);
	/* quick enough to be seen as a restart, not a silence */
	assert_int_equal(x->downs[y->id], 1);
	assert_string_equal(x->why[y->id], "restarted");
	assert_int_equal(cluster_epoch(x->c, y->id), epoch0 + 1);
	assert_false(cluster_alive(x->c, y->id, epoch0 & 255));
	assert_true(cluster_alive(x->c, y->id, (epoch0 + 1) & 255));
	assert_true(x->session[y->id] == info.incarnation + cluster_epoch(y->c, x->id));
	/* the new incarnation sees our current epoch in our hello */
	assert_true(y->session[x->id] == peer_info(idx, x->id).incarnation + epoch0 + 1);
	assert_int_equal(r.done, 1);
	assert_int_equal(r.result, -EHOSTDOWN);
	assert_int_equal(stat_of(other, "cluster_peer_restarts"), 1);
	assert_int_equal(stat_of(other, "cluster_peer_deaths"), 0);
	assert_int_equal(stat_of(other, "cluster_links_up"), 1);

	/* and it works */
	assert_int_equal(request(other, y->id, RAMSTER__PEER__OP__P_GET, 2, NULL, 0, 0, &r), 0);
	assert_true(run_until(r.done, 2000));
	assert_int_equal(r.result, 0);
}

static void test_restart_acceptor(void **state)
{
	restart_case(1);
}

static void test_restart_dialer(void **state)
{
	restart_case(0);
}

/* ---- placement ----------------------------------------------------------------------- */

static bool frees_are(uint64_t b, uint64_t c, uint64_t d)
{
	return peer_info(0, 2).donate_free == b && peer_info(0, 3).donate_free == c &&
	       peer_info(0, 4).donate_free == d;
}

static void test_pick(void **state)
{
	unsigned counts[NODES_MAX + 1] = {0};
	uint8_t page[PEERWIRE_PAGE_MAX];
	struct tres r;
	int i, id;

	world_config(4);
	for (i = 0; i < 4; i++) {
		w->nodes[i].donate_free = MB;
		node_start(i);
	}
	assert_true(
	    run_until(alive(0, 1) && alive(0, 2) && alive(0, 3) && frees_are(MB, MB, MB), 3000));

	/* equal room: spread over all */
	for (i = 0; i < 600; i++) {
		id = cluster_pick(w->nodes[0].c, 4096, 0);
		assert_true(id >= 2 && id <= 4);
		counts[id]++;
	}
	for (id = 2; id <= 4; id++)
		assert_true(counts[id] >= 100);

	/* exclusions and room */
	for (i = 0; i < 50; i++)
		assert_int_equal(cluster_pick(w->nodes[0].c, 4096, (1u << 1) | (1u << 2)), 4);
	assert_int_equal(cluster_pick(w->nodes[0].c, 4096, 0xe), -ENOSPC);
	assert_int_equal(cluster_pick(w->nodes[0].c, MB + 1, 0), -ENOSPC);
	assert_int_equal(cluster_pick(w->nodes[0].c, MB, 0xc), 2);
	/* the candidates a placement of N copies counts on */
	assert_int_equal(cluster_candidates(w->nodes[0].c, 4096, 0), 3);
	assert_int_equal(cluster_candidates(w->nodes[0].c, 4096, 1u << 2), 2);
	assert_int_equal(cluster_candidates(w->nodes[0].c, 4096, 0xe), 0);
	assert_int_equal(cluster_candidates(w->nodes[0].c, MB + 1, 0), 0);
	/* copies on distinct peers: each pick excludes the holders so far */
	for (i = 0; i < 50; i++) {
		uint64_t held = 0;
		int k;

		for (k = 0; k < 3; k++) {
			id = cluster_pick(w->nodes[0].c, 4096, held);
			assert_true(id >= 2 && id <= 4);
			assert_false(held & (1ull << (id - 1)));
			held |= 1ull << (id - 1);
		}
		assert_int_equal(cluster_pick(w->nodes[0].c, 4096, held), -ENOSPC);
	}

	/* more room wins whenever it is one of the two drawn (2/3 of the draws) */
	w->nodes[3].donate_free = 4 * MB;
	assert_true(run_until(frees_are(MB, MB, 4 * MB), 2000));
	memset(counts, 0, sizeof(counts));
	for (i = 0; i < 600; i++)
		counts[cluster_pick(w->nodes[0].c, 4096, 0)]++;
	assert_true(counts[4] > 300);
	assert_true(counts[4] > 2 * counts[2] && counts[4] > 2 * counts[3]);
	assert_int_equal(cluster_pick(w->nodes[0].c, 2 * MB, 0), 4);

	/* what we sent since beta's last heartbeat counts against it */
	fill(page, sizeof(page), 9);
	assert_int_equal(request(0, 2, RAMSTER__PEER__OP__P_PUT, 0, page, sizeof(page), 0, &r), 0);
	for (i = 0; i < 50; i++)
		assert_int_equal(cluster_pick(w->nodes[0].c, MB - 2048, 1u << 3), 3);
	assert_true(run_until(r.done, 2000));
	run_for(3 * HB_MS); /* beta's next heartbeat restores it */
	memset(counts, 0, sizeof(counts));
	for (i = 0; i < 200; i++)
		counts[cluster_pick(w->nodes[0].c, MB - 2048, 1u << 3)]++;
	assert_true(counts[2] > 0 && counts[3] > 0);
	assert_true(stat_of(0, "cluster_picks_failed") >= 2);
}

/* ---- the key file ---------------------------------------------------------------------- */

static void write_file(const char *path, const char *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

/*
 * Names are resolved once, when a peer is made, not at each dial on the
 * loop (issue 11: no name resolution on the loop): a literal stays, a name
 * becomes its address, an unresolvable one is "" (dials resolve it again);
 * and a collective whose peer is named "localhost" links up.
 */
static void test_names_resolved_once(void **state)
{
	struct tnode *a = &w->nodes[0], *b = &w->nodes[1];
	char ip[16];

	peer_resolve("t", "127.0.0.1", ip);
	assert_string_equal(ip, "127.0.0.1");
	peer_resolve("t", "localhost", ip);
	assert_string_equal(ip, "127.0.0.1");
	peer_resolve("t", "no-such-host.invalid", ip);
	assert_string_equal(ip, "");
	peer_resolve("t", "*", ip);
	assert_string_equal(ip, "");

	world_config(2);
	strcpy(w->cfg.nodes[1].host, "localhost"); /* beta, whom alpha dials */
	node_start(1);
	node_start(0);
	assert_true(run_until(linked(0, 1) && a->ups[2] && b->ups[1], 2000));
}

static void test_load_key(void **state)
{
	static const char hex[] = "3b6f2a7c9d1e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f809a1b2c3";
	char dir[] = "/tmp/test_cluster.XXXXXX", path[64], err[256], big[5000], buf[80];
	uint8_t key[CLUSTER_KEY_LEN], key2[CLUSTER_KEY_LEN], want[CLUSTER_KEY_LEN];
	int rc;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/secret", dir);
	assert_int_equal(sodium_hex2bin(want, sizeof(want), hex, 64, NULL, NULL, NULL), 0);

	/* genkey's format: the 32 bytes themselves, no hash */
	snprintf(buf, sizeof(buf), "%s\n", hex);
	write_file(path, buf, 65, 0600);
	assert_int_equal(cluster_load_key(path, key, err, sizeof(err)), 0);
	assert_memory_equal(key, want, sizeof(key));
	/* without the newline, and in capitals: the same key */
	for (rc = 0; rc < 64; rc++)
		buf[rc] = (char)toupper((unsigned char)hex[rc]);
	write_file(path, buf, 64, 0400);
	assert_int_equal(cluster_load_key(path, key2, err, sizeof(err)), 0);
	assert_memory_equal(key2, want, sizeof(key2));
	/* anything else is refused, with the format named */
	static const char *const bad[] = {
		"0123456789abcdef0123456789abcdef\n",				      /* a passphrase */
		"3b6f2a7c9d1e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f809a1b2c\n", /* 63 digits */
		"3b6f2a7c9d1e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f809a1b2c3a\n",
		"3b6f2a7c9d1e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f809a1b2c3 \n",
		"3b6f2a7c9d1e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f809a1b2c3\n\n",
		"3b6f2a7c9d1e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f809a1b2cg\n",
		" 3b6f2a7c9d1e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f809a1b2c3",
		"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_file(path, bad[i], strlen(bad[i]), 0600);
		assert_int_equal(cluster_load_key(path, key2, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "ramsterctl genkey"));
		assert_non_null(strstr(err, path));
	}
	/* the right format, but no random key */
	write_file(path, "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff\n", 65,
		   0600);
	assert_int_equal(cluster_load_key(path, key2, err, sizeof(err)), -EKEYREJECTED);
	assert_non_null(strstr(err, "not a random key"));

	/* readable by others */
	snprintf(buf, sizeof(buf), "%s\n", hex);
	write_file(path, buf, 65, 0644);
	rc = cluster_load_key(path, key2, err, sizeof(err));
	assert_true(rc < 0);
	assert_non_null(strstr(err, "readable by group or others (chmod 600)"));
	assert_non_null(strstr(err, path));
	write_file(path, buf, 65, 0640);
	assert_true(cluster_load_key(path, key2, err, sizeof(err)) < 0);

	/* too long */
	memset(big, 'x', sizeof(big));
	write_file(path, big, sizeof(big), 0600);
	assert_int_equal(cluster_load_key(path, key2, err, sizeof(err)), -EFBIG);

	/* missing */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(cluster_load_key(path, key2, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, path));
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_load_key),
	    cmocka_unit_test_setup_teardown(test_names_resolved_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_up, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_three_up, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_heartbeat_rtt, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_request_reply, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_request_held, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_destroy_cancels, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wrong_key, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wrong_cluster, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unauthenticated, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_raw_peer, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_raw_tamper, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_peer_dead, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_alive_any_thread, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lease_expiry, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_loop_stall_is_not_silence, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_restart_acceptor, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_restart_dialer, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pick, setup, teardown),
	};
	const char *v = getenv("TEST_VERBOSE");

	log_set_level(v && *v == '1' ? LOG_DEBUG : LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
