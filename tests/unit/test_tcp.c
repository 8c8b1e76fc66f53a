/*
 * test_tcp.c - the TCP transport on one libev loop in one process: a server
 * transport listening on 127.0.0.1 (ephemeral port) and a client transport,
 * plus raw sockets that speak the frame format by hand. Every frame carries a
 * sequence number and a byte pattern, so loss, reordering and corruption show.
 * Each connection must see on_close exactly once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <ev.h>

#include "transport/transport.h"

#define TT_CONNS 64
#define TT_TIMEOUT 20.0 /* seconds any one wait may take */
#define TT_SEQ_LEN 8     /* messages this long or longer start with their seq */

struct tt;

/* What one end of one connection saw, and how it behaves. */
struct tt_conn {
	struct tt *tt;
	struct tconn *c; /* NULL once closed */
	int server;      /* accepted by the server transport */
	int connected;   /* on_connect: 1 up, -1 failed */
	int connect_err;
	int closed;      /* on_close calls: must end at exactly 1 */
	char why[128];
	int nmsg;        /* frames received */
	int nshort;      /* ...of which too short to carry a seq */
	uint64_t next_seq;
	uint64_t send_seq;
	size_t last_len, last_plen;
	/* behaviour on receiving */
	int echo;        /* send each frame back */
	int close_at;    /* transport_close from on_message at frame n */
	int refuse_at;   /* on_message returns -1 at frame n */
	int free_at;     /* transport_free of this side's transport at frame n */
	int send_after_close; /* what transport_send said after that close */
	struct tt_conn *close_other; /* on a frame: close this one... */
	struct tt_conn *send_other;  /* ...and send one frame on this one */
	int free_on_close; /* transport_free of this side's transport from on_close */
};

struct tt {
	struct ev_loop *loop;
	struct transport *srv, *cli;
	uint16_t port;
	ev_timer guard;
	int timed_out;
	int accepts, connects, closes;
	int srv_echo; /* accepted connections echo from their first frame */
	int close_on_accept;  /* transport_close from on_accept */
	int close_on_connect; /* transport_close from on_connect */
	struct tt_conn conns[TT_CONNS];
	int nconns;
	struct tt_conn *last_accepted;
};

static uint8_t tt_msg[TRANSPORT_MSG_MAX + 1];
static uint8_t tt_pay[TRANSPORT_PAYLOAD_MAX + 1];

/* ---- frame contents --------------------------------------------------------- */

static uint8_t tt_msg_byte(uint64_t seq, size_t i)
{
	return (uint8_t)(seq * 31 + i * 7 + 3);
}

static uint8_t tt_pay_byte(uint64_t seq, size_t i)
{
	return (uint8_t)(seq * 17 + i * 13 + 1);
}

static void tt_fill(uint64_t seq, size_t len, size_t plen)
{
	size_t i;

	for (i = 0; i < len; i++)
		tt_msg[i] = i < TT_SEQ_LEN ? (uint8_t)(seq >> (8 * i)) : tt_msg_byte(seq, i);
	for (i = 0; i < plen; i++)
		tt_pay[i] = tt_pay_byte(seq, i);
}

static void tt_check(struct tt_conn *rc, const uint8_t *msg, size_t len, const uint8_t *payload,
		     size_t plen)
{
	uint64_t seq = 0;
	size_t i;

	rc->last_len = len;
	rc->last_plen = plen;
	if (plen)
		assert_non_null(payload);
	else
		assert_null(payload);
	if (len < TT_SEQ_LEN) {
		rc->nshort++;
		return;
	}
	for (i = 0; i < TT_SEQ_LEN; i++)
		seq |= (uint64_t)msg[i] << (8 * i);
	if (seq != rc->next_seq)
		fail_msg("frame %llu arrived, %llu expected", (unsigned long long)seq,
			 (unsigned long long)rc->next_seq);
	rc->next_seq++;
	for (i = TT_SEQ_LEN; i < len; i++)
		if (msg[i] != tt_msg_byte(seq, i))
			fail_msg("frame %llu: message byte %zu corrupt", (unsigned long long)seq, i);
	for (i = 0; i < plen; i++)
		if (payload[i] != tt_pay_byte(seq, i))
			fail_msg("frame %llu: payload byte %zu corrupt", (unsigned long long)seq, i);
}

/* Touch every byte of a frame (ASan: it must still be ours). */
static void tt_check_bytes_readable(const uint8_t *msg, size_t len, const uint8_t *payload,
				    size_t plen)
{
	volatile uint8_t sum = 0;
	size_t i;

	for (i = 0; i < len; i++)
		sum += msg[i];
	for (i = 0; i < plen; i++)
		sum += payload[i];
	(void)sum;
}

/* Send the next frame of rc's sequence. @return what transport_send said. */
static int tt_send(struct tt_conn *rc, size_t len, size_t plen)
{
	int err;

	tt_fill(rc->send_seq, len, plen);
	err = transport_send(rc->c, tt_msg, len, tt_pay, plen);
	if (err == 0)
		rc->send_seq++;
	return err;
}

/* ---- callbacks ----------------------------------------------------------------- */

static struct tt_conn *tt_conn_new(struct tt *tt, struct tconn *c, int server)
{
	struct tt_conn *rc;

	assert_true(tt->nconns < TT_CONNS);
	rc = &tt->conns[tt->nconns++];
	memset(rc, 0, sizeof(*rc));
	rc->tt = tt;
	rc->c = c;
	rc->server = server;
	tconn_set_data(c, rc);
	return rc;
}

static void tt_on_accept(void *arg, struct tconn *c)
{
	struct tt *tt = arg;

	assert_string_equal(tconn_kind(c), "tcp");
	tt->last_accepted = tt_conn_new(tt, c, 1);
	tt->last_accepted->echo = tt->srv_echo;
	tt->accepts++;
	if (tt->close_on_accept) {
		transport_close(c, "not wanted");
		assert_int_equal(tt->last_accepted->closed, 1);
		assert_ptr_equal(tconn_data(c), tt->last_accepted);
	}
}

static void tt_on_connect(void *arg, struct tconn *c, int err)
{
	struct tt *tt = arg;
	struct tt_conn *rc = tconn_data(c);

	assert_non_null(rc);
	assert_ptr_equal(rc->c, c);
	assert_int_equal(rc->connected, 0);
	rc->connected = err ? -1 : 1;
	rc->connect_err = err;
	tt->connects++;
	if (tt->close_on_connect && !err) {
		transport_close(c, "changed my mind");
		assert_int_equal(transport_send(c, "x", 1, NULL, 0), -ENOTCONN);
	}
}

static int tt_on_message(void *arg, struct tconn *c, const uint8_t *msg, size_t len,
			 const uint8_t *payload, size_t plen)
{
	struct tt *tt = arg;
	struct tt_conn *rc = tconn_data(c);

	assert_ptr_equal(rc->c, c);
	assert_int_equal(rc->closed, 0);
	rc->nmsg++;
	tt_check(rc, msg, len, payload, plen);
	if (rc->echo)
		assert_int_equal(transport_send(c, msg, len, payload, plen), 0);
	if (rc->close_at == rc->nmsg) {
		transport_close(c, "done");
		/* closed, not yet freed: c and the frame stay readable until we return */
		assert_int_equal(rc->closed, 1);
		rc->send_after_close = transport_send(c, msg, len, NULL, 0);
		assert_ptr_equal(tconn_data(c), rc);
		assert_int_equal(tconn_queued(c), 0);
		tt_check_bytes_readable(msg, len, payload, plen);
	}
	if (rc->free_at == rc->nmsg) {
		if (rc->server) {
			transport_free(tt->srv);
			tt->srv = NULL;
		} else {
			transport_free(tt->cli);
			tt->cli = NULL;
		}
		assert_int_equal(rc->closed, 1);
	}
	if (rc->close_other) {
		transport_close(rc->close_other->c, "closed by a neighbour");
		rc->close_other = NULL;
	}
	if (rc->send_other) {
		assert_int_equal(tt_send(rc->send_other, 16, 16), 0);
		rc->send_other = NULL;
	}
	if (rc->refuse_at == rc->nmsg)
		return -1;
	return 0;
}

static void tt_on_close(void *arg, struct tconn *c, const char *reason)
{
	struct tt *tt = arg;
	struct tt_conn *rc = tconn_data(c);

	assert_non_null(rc);
	assert_non_null(reason);
	assert_int_equal(rc->closed, 0);
	rc->closed = 1;
	rc->c = NULL;
	snprintf(rc->why, sizeof(rc->why), "%s", reason);
	assert_int_equal(transport_send(c, "x", 1, NULL, 0), -ENOTCONN);
	tt->closes++;
	if (rc->free_on_close) {
		if (rc->server) {
			transport_free(tt->srv);
			tt->srv = NULL;
		} else {
			transport_free(tt->cli);
			tt->cli = NULL;
		}
	}
}

static const struct transport_cb tt_cb = {
	.on_accept = tt_on_accept,
	.on_connect = tt_on_connect,
	.on_message = tt_on_message,
	.on_close = tt_on_close,
};

/* ---- loop helpers ----------------------------------------------------------------- */

static void tt_guard_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tt *tt = (struct tt *)((char *)w - offsetof(struct tt, guard));

	tt->timed_out = 1;
}

/* Run the loop until done(ctx) or TT_TIMEOUT; fail on the timeout. */
static void tt_run_until(struct tt *tt, int (*done)(void *ctx), void *ctx, const char *what)
{
	tt->timed_out = 0;
	ev_timer_set(&tt->guard, TT_TIMEOUT, 0.);
	ev_timer_start(tt->loop, &tt->guard);
	while (!done(ctx) && !tt->timed_out) {
		/* events fed from outside a callback run first; then wait for more */
		ev_run(tt->loop, EVRUN_NOWAIT);
		if (!done(ctx))
			ev_run(tt->loop, EVRUN_ONCE);
	}
	ev_timer_stop(tt->loop, &tt->guard);
	if (!done(ctx))
		fail_msg("timed out waiting for %s", what);
}

struct tt_count {
	const int *counter;
	int want;
};

static int tt_count_done(void *ctx)
{
	const struct tt_count *w = ctx;

	return *w->counter >= w->want;
}

static void tt_wait(struct tt *tt, const int *counter, int want, const char *what)
{
	struct tt_count w = { counter, want };

	tt_run_until(tt, tt_count_done, &w, what);
}

/* Spin the loop briefly so nothing pending is left unseen. */
static void tt_settle(struct tt *tt)
{
	int i;

	for (i = 0; i < 20; i++)
		ev_run(tt->loop, EVRUN_NOWAIT);
}

/* Connect a client to the server and wait until both ends are up. */
static void tt_pair(struct tt *tt, const char *bind_host, struct tt_conn **cli,
		    struct tt_conn **srv)
{
	int accepts = tt->accepts;
	struct tconn *c;

	c = transport_connect(tt->cli, "127.0.0.1", tt->port, bind_host);
	assert_non_null(c);
	*cli = tt_conn_new(tt, c, 0);
	tt_wait(tt, &(*cli)->connected, 1, "connect");
	tt_wait(tt, &tt->accepts, accepts + 1, "accept");
	*srv = tt->last_accepted;
}

/* A blocking raw socket connected to the server. */
static int tt_raw_connect(struct tt *tt)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(tt->port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void tt_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* A header written by hand from the spec in transport.h. */
static void tt_hdr(uint8_t *h, uint32_t magic, uint8_t version, uint8_t kind, uint8_t reserved,
		   uint32_t msg_len, uint32_t payload_len)
{
	tt_put_le32(h, magic);
	h[4] = version;
	h[5] = kind;
	h[6] = 0;
	h[7] = reserved;
	tt_put_le32(h + 8, msg_len);
	tt_put_le32(h + 12, payload_len);
}

static void tt_write_all(int fd, const void *buf, size_t n)
{
	assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* ---- fixture --------------------------------------------------------------------- */

static int tt_setup(void **state)
{
	struct tt *tt = calloc(1, sizeof(*tt));
	int port;

	if (!tt)
		return -1;
	tt->loop = ev_loop_new(EVFLAG_AUTO);
	ev_timer_init(&tt->guard, tt_guard_cb, TT_TIMEOUT, 0.);
	tt->srv = transport_tcp_new(tt->loop, &tt_cb, tt);
	tt->cli = transport_tcp_new(tt->loop, &tt_cb, tt);
	if (!tt->loop || !tt->srv || !tt->cli)
		return -1;
	if (transport_listen(tt->srv, "127.0.0.1", 0))
		return -1;
	port = transport_local_port(tt->srv);
	if (port <= 0)
		return -1;
	tt->port = (uint16_t)port;
	*state = tt;
	return 0;
}

static int tt_teardown(void **state)
{
	struct tt *tt = *state;
	int i;

	transport_free(tt->cli);
	transport_free(tt->srv);
	tt_settle(tt);
	for (i = 0; i < tt->nconns; i++) {
		if (tt->conns[i].closed != 1) {
			print_error("connection %d: on_close called %d times\n", i,
				    tt->conns[i].closed);
			return -1;
		}
	}
	ev_loop_destroy(tt->loop);
	free(tt);
	return 0;
}

/* ---- tests ------------------------------------------------------------------------- */

static void test_exchange_sizes(void **state)
{
	static const size_t plens[] = { 0, 1, 4096, TRANSPORT_PAYLOAD_MAX };
	static const size_t lens[] = { TT_SEQ_LEN, 100, TRANSPORT_MSG_MAX };
	struct tt *tt = *state;
	struct tt_conn *cli, *srv;
	size_t i, j;
	int n = 0;

	tt_pair(tt, NULL, &cli, &srv);
	srv->echo = 1;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		for (j = 0; j < sizeof(plens) / sizeof(plens[0]); j++) {
			assert_int_equal(tt_send(cli, lens[i], plens[j]), 0);
			n++;
			tt_wait(tt, &cli->nmsg, n, "echo");
			assert_int_equal(cli->last_len, lens[i]);
			assert_int_equal(cli->last_plen, plens[j]);
		}
	}
	assert_int_equal(srv->nmsg, n);
	assert_int_equal(tconn_queued(cli->c), 0);

	/* the empty frame, and a payload without a message */
	assert_int_equal(transport_send(cli->c, NULL, 0, NULL, 0), 0);
	tt_wait(tt, &cli->nshort, 1, "empty frame");
	assert_int_equal(cli->last_len, 0);
	assert_int_equal(cli->last_plen, 0);
	tt_fill(0, 0, 10);
	assert_int_equal(transport_send(cli->c, NULL, 0, tt_pay, 10), 0);
	tt_wait(tt, &cli->nshort, 2, "payload-only frame");
	assert_int_equal(cli->last_plen, 10);
}

static void test_limits(void **state)
{
	struct tt *tt = *state;
	struct tt_conn *cli, *srv;

	tt_pair(tt, NULL, &cli, &srv);
	assert_int_equal(transport_send(cli->c, tt_msg, TRANSPORT_MSG_MAX + 1, NULL, 0), -EMSGSIZE);
	assert_int_equal(transport_send(cli->c, tt_msg, 8, tt_pay, TRANSPORT_PAYLOAD_MAX + 1),
			 -EMSGSIZE);
	assert_int_equal(tconn_queued(cli->c), 0);
	assert_int_equal(tt_send(cli, TRANSPORT_MSG_MAX, TRANSPORT_PAYLOAD_MAX), 0);
	tt_wait(tt, &srv->nmsg, 1, "largest frame");
}

/* Several connections, thousands of frames of mixed sizes each, sent without
 * running the loop: each arrives whole and in order. */
static void test_burst_order(void **state)
{
	static const size_t plens[] = { 0, 1, 100, 4096, 0, 4095, 13, 2000 };
	enum { NPAIRS = 6, NFRAMES = 3000 };
	struct tt *tt = *state;
	struct tt_conn *cli[NPAIRS], *srv[NPAIRS];
	int i, k, total = 0, got;

	for (k = 0; k < NPAIRS; k++)
		tt_pair(tt, NULL, &cli[k], &srv[k]);
	for (i = 0; i < NFRAMES; i++)
		for (k = 0; k < NPAIRS; k++)
			assert_int_equal(tt_send(cli[k], TT_SEQ_LEN + (size_t)(i % 200),
						 plens[(i + k) % 8]),
					 0);
	total = NFRAMES;
	for (k = 0; k < NPAIRS; k++) {
		tt_wait(tt, &srv[k]->nmsg, total, "burst");
		assert_int_equal(srv[k]->next_seq, NFRAMES);
	}
	for (k = 0, got = 0; k < NPAIRS; k++)
		got += srv[k]->nmsg;
	assert_int_equal(got, NPAIRS * NFRAMES);
}

static int tt_drained(void *ctx)
{
	struct tt_conn **pair = ctx;

	return tconn_queued(pair[0]->c) == 0 && pair[1]->nmsg == (int)pair[0]->send_seq;
}

/* Fill the queue until transport_send says -EAGAIN, then let it drain. */
static void test_backpressure(void **state)
{
	struct tt *tt = *state;
	struct tt_conn *cli, *srv, *pair[2];
	int err, sent = 0;

	tt_pair(tt, NULL, &cli, &srv);
	while ((err = tt_send(cli, 64, TRANSPORT_PAYLOAD_MAX)) == 0)
		assert_true(++sent < 100000);
	assert_int_equal(err, -EAGAIN);
	assert_true(tconn_queued(cli->c) <= TRANSPORT_QUEUE_MAX);
	assert_true(tconn_queued(cli->c) + TRANSPORT_HDR_SIZE + 64 + TRANSPORT_PAYLOAD_MAX >
		    TRANSPORT_QUEUE_MAX);
	/* a smaller frame may still fit; a refused one changed nothing */
	assert_true(sent > (int)(TRANSPORT_QUEUE_MAX / (TRANSPORT_PAYLOAD_MAX + 80)));

	pair[0] = cli;
	pair[1] = srv;
	tt_run_until(tt, tt_drained, pair, "queue to drain");
	assert_int_equal(srv->next_seq, cli->send_seq);
	assert_int_equal(tt_send(cli, 64, TRANSPORT_PAYLOAD_MAX), 0);
	tt_run_until(tt, tt_drained, pair, "one more frame");
}

/* Frames queued before the connection is up go out once it is. */
static void test_send_while_connecting(void **state)
{
	struct tt *tt = *state;
	struct tt_conn *cli;
	struct tconn *c;
	int i;

	tt->srv_echo = 1;
	c = transport_connect(tt->cli, "127.0.0.1", tt->port, NULL);
	assert_non_null(c);
	cli = tt_conn_new(tt, c, 0);
	for (i = 0; i < 5; i++)
		assert_int_equal(tt_send(cli, 32, (size_t)i * 1000), 0);
	assert_true(tconn_queued(c) > 0);
	tt_wait(tt, &cli->nmsg, 5, "echoes");
	assert_int_equal(cli->connected, 1);
	assert_int_equal(cli->next_seq, 5);
}

static void test_connect_refused(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct tt *tt = *state;
	struct tt_conn *cli;
	struct tconn *c;
	int fd;

	/* a port that is bound but not listening: nobody can take it meanwhile */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);

	c = transport_connect(tt->cli, "127.0.0.1", ntohs(sa.sin_port), NULL);
	assert_non_null(c);
	cli = tt_conn_new(tt, c, 0);
	/* on_connect never comes from transport_connect itself */
	assert_int_equal(cli->connected, 0);
	assert_int_equal(transport_send(c, "queued", 6, NULL, 0), 0);
	tt_wait(tt, &tt->connects, 1, "on_connect");
	assert_int_equal(cli->connected, -1);
	assert_int_equal(cli->connect_err, -ECONNREFUSED);
	assert_int_equal(cli->closed, 1);
	assert_non_null(strstr(cli->why, "connect"));
	close(fd);
}

static void test_peer_close(void **state)
{
	struct tt *tt = *state;
	struct tt_conn *cli, *srv;

	/* the client closes: its on_close comes from the call, the server's from the loop */
	tt_pair(tt, NULL, &cli, &srv);
	transport_close(cli->c, "bye");
	assert_int_equal(cli->closed, 1);
	assert_string_equal(cli->why, "bye");
	tt_wait(tt, &srv->closed, 1, "server on_close");
	assert_string_equal(srv->why, "peer closed");

	/* the server closes */
	tt_pair(tt, NULL, &cli, &srv);
	transport_close(srv->c, NULL);
	assert_int_equal(srv->closed, 1);
	assert_string_equal(srv->why, "closed");
	tt_wait(tt, &cli->closed, 1, "client on_close");
	assert_string_equal(cli->why, "peer closed");
}

struct tt_bad {
	uint32_t magic;
	uint8_t version, kind, reserved;
	uint32_t msg_len, payload_len;
	const char *why;
};

/* A broken header closes that connection; another one carries on. */
static void test_bad_frames(void **state)
{
	static const struct tt_bad bad[] = {
		{ 0x12345678, 1, 1, 0, 0, 0, "bad magic" },
		{ TRANSPORT_MAGIC, 2, 1, 0, 0, 0, "unsupported version" },
		{ TRANSPORT_MAGIC, 0, 1, 0, 0, 0, "unsupported version" },
		{ TRANSPORT_MAGIC, 1, 2, 0, 0, 0, "unknown frame kind" },
		{ TRANSPORT_MAGIC, 1, 1, 1, 0, 0, "reserved field not zero" },
		{ TRANSPORT_MAGIC, 1, 1, 0, TRANSPORT_MSG_MAX + 1, 0, "message too long" },
		{ TRANSPORT_MAGIC, 1, 1, 0, 0xffffffffu, 0, "message too long" },
		{ TRANSPORT_MAGIC, 1, 1, 0, 0, TRANSPORT_PAYLOAD_MAX + 1, "payload too long" },
		{ TRANSPORT_MAGIC, 1, 1, 0, 8, 0xffffffffu, "payload too long" },
	};
	struct tt *tt = *state;
	struct tt_conn *cli, *srv, *victim;
	uint8_t h[TRANSPORT_HDR_SIZE], junk[64];
	size_t i;
	int fd, accepts;
	ssize_t r;

	tt_pair(tt, NULL, &cli, &srv);
	srv->echo = 1;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		accepts = tt->accepts;
		fd = tt_raw_connect(tt);
		tt_hdr(h, bad[i].magic, bad[i].version, bad[i].kind, bad[i].reserved,
		       bad[i].msg_len, bad[i].payload_len);
		tt_write_all(fd, h, sizeof(h));
		tt_wait(tt, &tt->accepts, accepts + 1, "accept");
		victim = tt->last_accepted;
		tt_wait(tt, &victim->closed, 1, "bad frame close");
		assert_string_equal(victim->why, bad[i].why);
		assert_int_equal(victim->nmsg, 0);
		/* the raw end sees its connection end */
		r = recv(fd, junk, sizeof(junk), 0);
		assert_true(r == 0 || (r < 0 && errno == ECONNRESET));
		close(fd);

		/* the good connection is unharmed */
		assert_int_equal(cli->closed, 0);
		assert_int_equal(tt_send(cli, 40, i * 7), 0);
		tt_wait(tt, &cli->nmsg, (int)i + 1, "echo on the good connection");
	}
}

/* Frames written by hand, a byte at a time and two at once; the echo is checked
 * byte for byte against the header format. */
static void test_raw_frames(void **state)
{
	struct tt *tt = *state;
	struct tt_conn *srv;
	uint8_t buf[2 * (TRANSPORT_HDR_SIZE + 20 + 5)], want[TRANSPORT_HDR_SIZE], got[64];
	size_t i, one = TRANSPORT_HDR_SIZE + 20 + 5;
	int fd;

	tt->srv_echo = 1;
	fd = tt_raw_connect(tt);
	tt_wait(tt, &tt->accepts, 1, "accept");
	srv = tt->last_accepted;

	tt_fill(0, 20, 5);
	tt_hdr(buf, TRANSPORT_MAGIC, TRANSPORT_VERSION, 1, 0, 20, 5);
	memcpy(buf + TRANSPORT_HDR_SIZE, tt_msg, 20);
	memcpy(buf + TRANSPORT_HDR_SIZE + 20, tt_pay, 5);
	for (i = 0; i < one; i++) {
		tt_write_all(fd, buf + i, 1);
		tt_settle(tt);
		if (i + 1 < one)
			assert_int_equal(srv->nmsg, 0);
	}
	tt_wait(tt, &srv->nmsg, 1, "trickled frame");

	/* the echo: header as the spec says, then the same bytes */
	memcpy(want, buf, TRANSPORT_HDR_SIZE);
	assert_int_equal(recv(fd, got, one, MSG_WAITALL), (ssize_t)one);
	assert_memory_equal(got, want, TRANSPORT_HDR_SIZE);
	assert_memory_equal(got, buf, one);

	/* two frames in one write */
	tt_fill(1, 20, 5);
	memcpy(buf + one, buf, TRANSPORT_HDR_SIZE);
	memcpy(buf + one + TRANSPORT_HDR_SIZE, tt_msg, 20);
	memcpy(buf + one + TRANSPORT_HDR_SIZE + 20, tt_pay, 5);
	srv->next_seq = 0;
	tt_write_all(fd, buf, 2 * one);
	tt_wait(tt, &srv->nmsg, 3, "two frames");
	assert_int_equal(recv(fd, got, one, MSG_WAITALL), (ssize_t)one);
	assert_int_equal(recv(fd, got, one, MSG_WAITALL), (ssize_t)one);

	/* a frame cut short, then the peer goes: no frame, one close */
	tt_write_all(fd, buf, one - 1);
	shutdown(fd, SHUT_WR);
	tt_wait(tt, &srv->closed, 1, "close after a partial frame");
	assert_int_equal(srv->nmsg, 3);
	assert_string_equal(srv->why, "peer closed");
	close(fd);
}

/* transport_close from inside on_message: safe, on_close once, later frames dropped. */
static void test_close_in_message(void **state)
{
	struct tt *tt = *state;
	struct tt_conn *cli, *srv;
	int i;

	tt_pair(tt, NULL, &cli, &srv);
	srv->close_at = 2;
	for (i = 0; i < 10; i++)
		assert_int_equal(tt_send(cli, 64, 100), 0);
	tt_wait(tt, &srv->closed, 1, "server close");
	assert_int_equal(srv->nmsg, 2);
	assert_string_equal(srv->why, "done");
	assert_int_equal(srv->send_after_close, -ENOTCONN);
	tt_wait(tt, &cli->closed, 1, "client sees the close");

	/* on_message refusing a frame closes the connection too */
	tt_pair(tt, NULL, &cli, &srv);
	srv->refuse_at = 1;
	assert_int_equal(tt_send(cli, 64, 0), 0);
	assert_int_equal(tt_send(cli, 64, 0), 0);
	tt_wait(tt, &srv->closed, 1, "refused frame");
	assert_int_equal(srv->nmsg, 1);
	assert_non_null(strstr(srv->why, "refused"));
	tt_wait(tt, &cli->closed, 1, "client sees the refusal");
}

/* transport_free from inside on_message: every connection of it closed once. */
static void test_free_in_message(void **state)
{
	struct tt *tt = *state;
	struct tt_conn *cli[3], *srv[3];
	int k;

	for (k = 0; k < 3; k++)
		tt_pair(tt, NULL, &cli[k], &srv[k]);
	srv[1]->free_at = 1;
	assert_int_equal(tt_send(cli[1], 64, 10), 0);
	assert_int_equal(tt_send(cli[1], 64, 10), 0);
	tt_wait(tt, &srv[1]->closed, 1, "free from on_message");
	assert_null(tt->srv);
	for (k = 0; k < 3; k++) {
		assert_int_equal(srv[k]->closed, 1);
		assert_string_equal(srv[k]->why, "transport closed");
		tt_wait(tt, &cli[k]->closed, 1, "clients see the close");
	}
	assert_int_equal(srv[1]->nmsg, 1);
}

/* Callbacks that close, send on or free other things than their own connection. */
static void test_reentrancy(void **state)
{
	struct tt *tt = *state;
	struct tt_conn *cli[3], *srv[3], *rc;
	struct tconn *c;
	int k, accepts;

	/* on_message on one connection closes a second and sends on a third */
	for (k = 0; k < 3; k++)
		tt_pair(tt, NULL, &cli[k], &srv[k]);
	srv[0]->close_other = srv[1];
	srv[0]->send_other = srv[2];
	assert_int_equal(tt_send(cli[0], 16, 0), 0);
	tt_wait(tt, &srv[1]->closed, 1, "neighbour closed");
	assert_string_equal(srv[1]->why, "closed by a neighbour");
	tt_wait(tt, &cli[2]->nmsg, 1, "frame from a neighbour");
	tt_wait(tt, &cli[1]->closed, 1, "client of the neighbour");
	assert_int_equal(srv[0]->closed + srv[2]->closed, 0);

	/* on_accept turns a connection away */
	tt->close_on_accept = 1;
	accepts = tt->accepts;
	c = transport_connect(tt->cli, "127.0.0.1", tt->port, NULL);
	assert_non_null(c);
	rc = tt_conn_new(tt, c, 0);
	tt_wait(tt, &tt->accepts, accepts + 1, "accept");
	assert_int_equal(tt->last_accepted->closed, 1);
	assert_string_equal(tt->last_accepted->why, "not wanted");
	tt_wait(tt, &rc->closed, 1, "turned away");
	tt->close_on_accept = 0;

	/* on_connect changes its mind */
	tt->close_on_connect = 1;
	c = transport_connect(tt->cli, "127.0.0.1", tt->port, NULL);
	assert_non_null(c);
	rc = tt_conn_new(tt, c, 0);
	assert_int_equal(tt_send(rc, 16, 0), 0);
	tt_wait(tt, &rc->closed, 1, "closed from on_connect");
	assert_int_equal(rc->connected, 1);
	assert_string_equal(rc->why, "changed my mind");
	tt->close_on_connect = 0;

	/* on_close of a connection closed from outside any callback frees its transport */
	cli[0]->free_on_close = 1;
	transport_close(cli[0]->c, "last one");
	assert_null(tt->cli);
	assert_int_equal(cli[2]->closed, 1);
	assert_string_equal(cli[2]->why, "transport closed");
	tt_wait(tt, &srv[2]->closed, 1, "server sees the clients go");
	tt_wait(tt, &srv[0]->closed, 1, "server sees the clients go");
}

/* A write that fails inside transport_send closes the connection from the
 * loop, never from the call: the caller may still hold c. */
static void test_send_error_deferred(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	socklen_t len = sizeof(sa);
	struct tt *tt = *state;
	struct tt_conn *cli;
	struct tconn *c;
	int lfd, fd, i, err;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(lfd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);

	c = transport_connect(tt->cli, "127.0.0.1", ntohs(sa.sin_port), NULL);
	assert_non_null(c);
	cli = tt_conn_new(tt, c, 0);
	tt_wait(tt, &cli->connected, 1, "connect to a raw listener");
	fd = accept(lfd, NULL, NULL);
	assert_true(fd >= 0);
	/* the peer resets the connection */
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	close(fd);
	close(lfd);
	usleep(10000);

	for (i = 0; i < 3; i++) {
		err = tt_send(cli, 16, 100);
		assert_int_equal(err, 0);
		assert_int_equal(cli->closed, 0);
		assert_ptr_equal(tconn_data(c), cli);
	}
	tt_wait(tt, &cli->closed, 1, "close after a failed write");
	assert_non_null(strstr(cli->why, "reset"));
}

static void test_addresses(void **state)
{
	struct tt *tt = *state;
	struct tt_conn *cli, *srv;
	struct transport *t2;
	struct tconn *c;
	char want[64];
	int port;

	snprintf(want, sizeof(want), "127.0.0.1:%u", (unsigned)tt->port);
	tt_pair(tt, NULL, &cli, &srv);
	assert_string_equal(tconn_kind(cli->c), "tcp");
	assert_string_equal(tconn_peer(cli->c), want);
	assert_true(strncmp(tconn_peer(srv->c), "127.0.0.1:", 10) == 0);

	/* nodes of a test collective live on their own loopback addresses */
	tt_pair(tt, "127.0.0.2", &cli, &srv);
	assert_true(strncmp(tconn_peer(srv->c), "127.0.0.2:", 10) == 0);

	/* a local address that is not ours */
	errno = 0;
	assert_null(transport_connect(tt->cli, "127.0.0.1", tt->port, "192.0.2.1"));
	assert_int_equal(errno, EADDRNOTAVAIL);
	assert_null(transport_connect(tt->cli, NULL, tt->port, NULL));
	assert_int_equal(errno, EINVAL);

	/* names from the hosts file */
	c = transport_connect(tt->cli, "localhost", tt->port, NULL);
	assert_non_null(c);
	cli = tt_conn_new(tt, c, 0);
	tt_wait(tt, &cli->connected, 1, "connect by name");

	/* listening: once per transport; a port in use is refused */
	assert_int_equal(transport_listen(tt->srv, "127.0.0.1", 0), -EALREADY);
	t2 = transport_tcp_new(tt->loop, &tt_cb, tt);
	assert_non_null(t2);
	assert_int_equal(transport_local_port(t2), -ENOTCONN);
	assert_int_equal(transport_listen(t2, "127.0.0.1", tt->port), -EADDRINUSE);
	assert_int_equal(transport_listen(t2, "localhost", 0), 0);
	port = transport_local_port(t2);
	assert_true(port > 0 && port != tt->port);
	transport_free(t2);
	transport_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_exchange_sizes, tt_setup, tt_teardown),
		cmocka_unit_test_setup_teardown(test_limits, tt_setup, tt_teardown),
		cmocka_unit_test_setup_teardown(test_burst_order, tt_setup, tt_teardown),
		cmocka_unit_test_setup_teardown(test_backpressure, tt_setup, tt_teardown),
		cmocka_unit_test_setup_teardown(test_send_while_connecting, tt_setup, tt_teardown),
		cmocka_unit_test_setup_teardown(test_connect_refused, tt_setup, tt_teardown),
		cmocka_unit_test_setup_teardown(test_peer_close, tt_setup, tt_teardown),
		cmocka_unit_test_setup_teardown(test_bad_frames, tt_setup, tt_teardown),
		cmocka_unit_test_setup_teardown(test_raw_frames, tt_setup, tt_teardown),
		cmocka_unit_test_setup_teardown(test_close_in_message, tt_setup, tt_teardown),
		cmocka_unit_test_setup_teardown(test_free_in_message, tt_setup, tt_teardown),
		cmocka_unit_test_setup_teardown(test_reentrancy, tt_setup, tt_teardown),
		cmocka_unit_test_setup_teardown(test_send_error_deferred, tt_setup, tt_teardown),
		cmocka_unit_test_setup_teardown(test_addresses, tt_setup, tt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
