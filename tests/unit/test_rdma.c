/*
 * test_rdma.c - the RDMA transport (transport/rdma_cm.c, rdma_verbs.c) against transport.h's
 * contract: frames whole and in order in both directions at every size, the
 * limits, backpressure past the credits, exactly one on_close per connection,
 * close and free from inside callbacks, a refused connect, one-sided reads
 * of a registered region (and a bad key ending the connection). Needs an RDMA
 * device on RAMSTER_RDMA_ADDR (default 192.0.2.1, as tests/vm/test-rdma.sh
 * sets up with soft-RoCE); without one (this host) each test skips.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ev.h>

#include "transport/transport.h"

#define TR_TIMEOUT 30.0 /* seconds any one wait may take */
#define TR_FRAMES  300

struct tr_end {
	struct tconn *c;
	int up;	    /* on_accept / on_connect(0) */
	int err;    /* on_connect(err) */
	int closed; /* on_close calls: must end at exactly 1 */
	char why[128];
	int nmsg;
	int bad; /* frames with wrong contents or order */
	int echo;
	int close_at; /* transport_close from on_message at frame n (1-based) */
	int free_at;  /* transport_free of our transport at frame n */
	struct transport *t;
};

struct tr {
	struct ev_loop *loop;
	struct transport *srv, *cli;
	const char *addr;
	int port;
	ev_timer guard;
	int timed_out;
	struct tr_end s, k; /* the server's end, the client's end */
};

static struct tr tr;
static uint8_t tr_msg[TRANSPORT_MSG_MAX + 1];
static uint8_t tr_pay[TRANSPORT_PAYLOAD_MAX + 1];

static uint8_t tr_byte(unsigned seq, size_t i)
{
	return (uint8_t)(seq * 29 + i * 11 + 5);
}

/* Frame seq: message then payload lengths by seq, bytes by (seq, offset). */
static void tr_sizes(unsigned seq, size_t *len, size_t *plen)
{
	static const size_t lens[] = {4, 5, 100, 4096, TRANSPORT_MSG_MAX}; /* >= 4: the seq */
	static const size_t plens[] = {0, 1, 4096, 65535, TRANSPORT_PAYLOAD_MAX, 17};

	*len = lens[seq % 5];
	*plen = plens[seq % 6];
}

static void tr_fill(unsigned seq, size_t len, size_t plen)
{
	size_t i;

	memcpy(tr_msg, &seq, sizeof(seq));
	for (i = sizeof(seq); i < len; i++)
		tr_msg[i] = tr_byte(seq, i);
	for (i = 0; i < plen; i++)
		tr_pay[i] = tr_byte(seq + 1000, i);
}

static int tr_send_seq(struct tconn *c, unsigned seq)
{
	size_t len, plen;

	tr_sizes(seq, &len, &plen);
	tr_fill(seq, len, plen);
	return transport_send(c, tr_msg, len, plen ? tr_pay : NULL, plen);
}

static struct tr_end *tr_end_of(struct tconn *c)
{
	struct tr_end *e = tconn_data(c);

	assert_non_null(e);
	return e;
}

static void tr_on_accept(void *arg, struct tconn *c)
{
	assert_null(tr.s.c);
	tr.s.c = c;
	tr.s.up = 1;
	tr.s.t = tr.srv;
	tconn_set_data(c, &tr.s);
	assert_string_equal(tconn_kind(c), "rdma");
	assert_string_not_equal(tconn_device(c), "-");
}

static void tr_on_connect(void *arg, struct tconn *c, int err)
{
	struct tr_end *e = tr_end_of(c);

	if (err)
		e->err = err;
	else
		e->up = 1;
}

static int tr_on_message(void *arg, struct tconn *c, const uint8_t *msg, size_t len,
			 const uint8_t *payload, size_t plen)
{
	struct tr_end *e = tr_end_of(c);
	unsigned seq = (unsigned)e->nmsg, got;
	size_t wl, wp, i;

	tr_sizes(seq, &wl, &wp);
	memcpy(&got, msg, sizeof(got));
	if (len != wl || plen != wp || got != seq || (plen && !payload) || (!plen && payload))
		e->bad++;
	for (i = sizeof(got); i < len && !e->bad; i++)
		if (msg[i] != tr_byte(seq, i))
			e->bad++;
	for (i = 0; i < plen && !e->bad; i++)
		if (payload[i] != tr_byte(seq + 1000, i))
			e->bad++;
	e->nmsg++;
	if (e->echo)
		assert_int_equal(transport_send(c, msg, len, payload, plen), 0);
	if (e->close_at == e->nmsg) {
		transport_close(c, "closed at a frame");
		assert_int_equal(transport_send(c, "x", 1, NULL, 0), -ENOTCONN);
	}
	if (e->free_at == e->nmsg) {
		transport_free(e->t);
		if (e->t == tr.srv)
			tr.srv = NULL;
		else
			tr.cli = NULL;
	}
	return 0;
}

static void tr_on_close(void *arg, struct tconn *c, const char *reason)
{
	struct tr_end *e = tr_end_of(c);

	e->closed++;
	snprintf(e->why, sizeof(e->why), "%s", reason);
	e->c = NULL;
}

static const struct transport_cb tr_cb = {
    .on_accept = tr_on_accept,
    .on_connect = tr_on_connect,
    .on_message = tr_on_message,
    .on_close = tr_on_close,
};

static void tr_guard_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	tr.timed_out = 1;
	ev_break(loop, EVBREAK_ALL);
}

/* Run the loop until *flag >= want, or fail after TR_TIMEOUT. */
static void tr_wait(const int *flag, int want, const char *what)
{
	ev_timer_set(&tr.guard, TR_TIMEOUT, 0.);
	ev_timer_start(tr.loop, &tr.guard);
	while (*flag < want && !tr.timed_out)
		ev_run(tr.loop, EVRUN_ONCE);
	ev_timer_stop(tr.loop, &tr.guard);
	if (tr.timed_out)
		fail_msg("timed out waiting for %s", what);
}

static const char *tr_addr(void)
{
	const char *a = getenv("RAMSTER_RDMA_ADDR");

	return a && *a ? a : "192.0.2.1";
}

static int tr_setup(void **state)
{
	memset(&tr, 0, sizeof(tr));
	tr.addr = tr_addr();
	tr.loop = ev_loop_new(EVFLAG_AUTO);
	ev_init(&tr.guard, tr_guard_cb);
	return 0;
}

static int tr_teardown(void **state)
{
	transport_free(tr.cli);
	transport_free(tr.srv);
	ev_loop_destroy(tr.loop);
	return 0;
}

/* Skip without a device; else a server listening and a client connected to it. */
static void tr_connect(void)
{
	if (!transport_rdma_usable(tr.addr))
		skip();
	tr.srv = transport_rdma_new(tr.loop, &tr_cb, NULL);
	tr.cli = transport_rdma_new(tr.loop, &tr_cb, NULL);
	assert_non_null(tr.srv);
	assert_non_null(tr.cli);
	assert_int_equal(transport_listen(tr.srv, tr.addr, 0), 0);
	tr.port = transport_local_port(tr.srv);
	assert_true(tr.port > 0);
	tr.k.t = tr.cli;
	tr.k.c = transport_connect(tr.cli, tr.addr, (uint16_t)tr.port, tr.addr);
	assert_non_null(tr.k.c);
	tconn_set_data(tr.k.c, &tr.k);
	assert_string_equal(tconn_kind(tr.k.c), "rdma");
	tr_wait(&tr.k.up, 1, "on_connect");
	tr_wait(&tr.s.up, 1, "on_accept");
	assert_string_not_equal(tconn_device(tr.k.c), "-");
}

static void test_usable(void **state)
{
	/* an address no interface has is never served */
	assert_int_equal(transport_rdma_usable("203.0.113.77"), 0);
#if !(defined(RAMSTER_RDMA) && RAMSTER_RDMA)
	errno = 0;
	assert_null(transport_rdma_new(tr.loop, &tr_cb, NULL));
	assert_int_equal(errno, ENOTSUP);
#endif
}

/* Every size, in order, both ways: the server echoes each frame. */
static void test_exchange(void **state)
{
	unsigned i;
	int rc;

	tr_connect();
	tr.s.echo = 1;
	for (i = 0; i < TR_FRAMES; i++) {
		while ((rc = tr_send_seq(tr.k.c, i)) == -EAGAIN)
			ev_run(tr.loop, EVRUN_ONCE);
		assert_int_equal(rc, 0);
	}
	tr_wait(&tr.k.nmsg, TR_FRAMES, "the echoes");
	assert_int_equal(tr.s.nmsg, TR_FRAMES);
	assert_int_equal(tr.s.bad, 0);
	assert_int_equal(tr.k.bad, 0);
	assert_int_equal(tr.k.closed + tr.s.closed, 0);
}

static void test_limits(void **state)
{
	size_t sent = 0;
	unsigned i;
	int rc;

	tr_connect();
	assert_int_equal(transport_send(tr.k.c, tr_msg, TRANSPORT_MSG_MAX + 1, NULL, 0), -EMSGSIZE);
	assert_int_equal(transport_send(tr.k.c, tr_msg, 1, tr_pay, TRANSPORT_PAYLOAD_MAX + 1),
			 -EMSGSIZE);
	/* without the loop, the queue fills past the credits to its bound */
	for (i = 0;; i++) {
		rc = tr_send_seq(tr.k.c, i);
		if (rc)
			break;
		sent++;
	}
	assert_int_equal(rc, -EAGAIN);
	assert_true(tconn_queued(tr.k.c) <= TRANSPORT_QUEUE_MAX);
	assert_true(tconn_queued(tr.k.c) > 0);
	tr_wait(&tr.s.nmsg, (int)sent, "the queued frames");
	assert_int_equal(tr.s.bad, 0);
	assert_int_equal(tconn_queued(tr.k.c), 0);
}

struct tr_read {
	int done, err;
	size_t len;
	uint8_t data[TCONN_READ_MAX];
};

static void tr_read_cb(void *arg, int err, const void *data, size_t len)
{
	struct tr_read *rd = arg;

	rd->err = err;
	rd->len = len;
	if (!err)
		memcpy(rd->data, data, len);
	rd->done++;
}

/*
 * The server lets the client read a region one-sided: every length and
 * offset comes back byte for byte; an address outside every region has no
 * key; tcp-like limits hold; a bad key is a remote access error that ends
 * the connection, and the read in flight fails with -ECONNRESET.
 */
static void test_one_sided_read(void **state)
{
	enum { REGION = 1 << 20 };
	static const size_t lens[] = { 1, 63, 1000, 4096, TCONN_READ_MAX }; /* a sealed page */
	static const size_t offs[] = { 0, 4096 * 7 + 5, REGION - TCONN_READ_MAX };
	static struct tr_read rd;
	uint8_t *region = NULL;
	uint32_t rkey, k2;
	size_t i, j, b;

	tr_connect();
	assert_int_equal(posix_memalign((void **)&region, 4096, REGION), 0);
	for (b = 0; b < REGION; b++)
		region[b] = (uint8_t)(b * 7 + b / 4096);
	assert_int_equal(tconn_mem_key(tr.s.c, region, 1, &rkey), -ENOENT);
	assert_int_equal(tconn_mem_add(tr.s.c, region, REGION), 0);
	assert_int_equal(tconn_mem_key(tr.s.c, region + 100, 4096, &rkey), 0);
	assert_int_equal(tconn_mem_key(tr.s.c, region + REGION - 10, 11, &k2), -ENOENT);
	for (i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		for (j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
			memset(&rd, 0, sizeof(rd));
			assert_int_equal(tconn_read(tr.k.c, (uintptr_t)region + offs[i], rkey, lens[j],
						    tr_read_cb, &rd),
					 0);
			tr_wait(&rd.done, 1, "a read");
			assert_int_equal(rd.err, 0);
			assert_int_equal(rd.len, lens[j]);
			assert_memory_equal(rd.data, region + offs[i], lens[j]);
		}
	}
	assert_int_equal(tconn_read(tr.k.c, (uintptr_t)region, rkey, 0, tr_read_cb, &rd), -EINVAL);
	assert_int_equal(
	    tconn_read(tr.k.c, (uintptr_t)region, rkey, TCONN_READ_MAX + 1, tr_read_cb, &rd),
	    -EINVAL);
	/* a key that names nothing: the connection goes, the read fails */
	memset(&rd, 0, sizeof(rd));
	assert_int_equal(tconn_read(tr.k.c, (uintptr_t)region, rkey ^ 0x5a5a00, 64, tr_read_cb, &rd),
			 0);
	tr_wait(&rd.done, 1, "the failed read");
	assert_int_equal(rd.err, -ECONNRESET);
	tr_wait(&tr.k.closed, 1, "the client's close");
	assert_int_equal(rd.done, 1);
	tr_wait(&tr.s.closed, 1, "the server's close");
	free(region);
}

/* Close from on_message: one on_close each side, the peer hears of it. */
static void test_close_in_message(void **state)
{
	unsigned i;

	tr_connect();
	tr.s.close_at = 3;
	for (i = 0; i < 10; i++)
		assert_int_equal(tr_send_seq(tr.k.c, i), 0);
	tr_wait(&tr.k.closed, 1, "the client's on_close");
	assert_int_equal(tr.s.closed, 1);
	assert_int_equal(tr.s.nmsg, 3);
	assert_string_equal(tr.s.why, "closed at a frame");
	transport_free(tr.cli);
	tr.cli = NULL;
	transport_free(tr.srv);
	tr.srv = NULL;
	assert_int_equal(tr.k.closed, 1);
	assert_int_equal(tr.s.closed, 1);
}

/* transport_free from on_message, then the other side sees the close. */
static void test_free_in_message(void **state)
{
	tr_connect();
	tr.s.free_at = 1;
	assert_int_equal(tr_send_seq(tr.k.c, 0), 0);
	assert_int_equal(tr_send_seq(tr.k.c, 1), 0);
	tr_wait(&tr.k.closed, 1, "the client's on_close");
	assert_null(tr.srv);
	assert_int_equal(tr.s.closed, 1);
	assert_string_equal(tr.s.why, "transport closed");
}

/* No listener: on_connect(err) from the loop, then one on_close. */
static void test_connect_refused(void **state)
{
	if (!transport_rdma_usable(tr.addr))
		skip();
	tr.cli = transport_rdma_new(tr.loop, &tr_cb, NULL);
	assert_non_null(tr.cli);
	tr.k.t = tr.cli;
	tr.k.c = transport_connect(tr.cli, tr.addr, 1, NULL);
	assert_non_null(tr.k.c);
	tconn_set_data(tr.k.c, &tr.k);
	assert_int_equal(tr.k.err, 0); /* not from the call */
	tr_wait(&tr.k.closed, 1, "on_close");
	assert_true(tr.k.err < 0);
	assert_int_equal(tr.k.up, 0);
	assert_int_equal(tr.k.closed, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_usable, tr_setup, tr_teardown),
	    cmocka_unit_test_setup_teardown(test_exchange, tr_setup, tr_teardown),
	    cmocka_unit_test_setup_teardown(test_limits, tr_setup, tr_teardown),
	    cmocka_unit_test_setup_teardown(test_close_in_message, tr_setup, tr_teardown),
	    cmocka_unit_test_setup_teardown(test_free_in_message, tr_setup, tr_teardown),
	    cmocka_unit_test_setup_teardown(test_connect_refused, tr_setup, tr_teardown),
	    cmocka_unit_test_setup_teardown(test_one_sided_read, tr_setup, tr_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
