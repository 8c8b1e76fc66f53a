/*
 * test_notify.c - sd_notify from the node (node/notify.c) to a datagram
 * socket this test owns in systemd's place, on a real libev loop: READY=1
 * with the first STATUS, WATCHDOG=1 every half of $WATCHDOG_USEC from the
 * loop's timer (none once stopped), STATUS sent again only when it changes,
 * STOPPING=1, the counters, and nothing at all without $NOTIFY_SOCKET.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <ev.h>

#include "node/notify.h"

struct fixture {
	char dir[40], path[80];
	int fd; /* the manager's end */
	struct ev_loop *loop;
	struct node_stats stats;
	struct client_env env;
	ev_io io;		/* reads the manager's end while the loop runs */
	char msgs[64][256];	/* messages read, in order */
	unsigned n_msgs, next;	/* read so far; handed out by next_msg */
};

static int setup(void **state)
{
	static struct fixture f;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(&f, 0, sizeof(f)); /* also the messages of the test before */
	snprintf(f.dir, sizeof(f.dir), "/tmp/test_notify.XXXXXX");
	if (!mkdtemp(f.dir))
		return -1;
	snprintf(f.path, sizeof(f.path), "%s/notify", f.dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f.path);
	f.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (f.fd < 0 || bind(f.fd, (struct sockaddr *)&sa, sizeof(sa)))
		return -1;
	f.loop = ev_loop_new(EVFLAG_AUTO);
	stats_init(&f.stats);
	f.env = (struct client_env){
	    .loop = f.loop, .stats = &f.stats, .node_name = "t", .socket_path = "/x.sock"};
	setenv("NOTIFY_SOCKET", f.path, 1);
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	notify_stop();
	ev_loop_destroy(f->loop);
	close(f->fd);
	unlink(f->path);
	rmdir(f->dir);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	return 0;
}

/* Take every queued message: a socket's queue is short (net.unix.max_dgram_qlen),
 * and a sender whose manager does not read blocks, as systemd's would. */
static void drain(struct fixture *f)
{
	char buf[256];
	ssize_t n;

	while ((n = recv(f->fd, buf, sizeof(buf) - 1, 0)) > 0) {
		buf[n] = '\0';
		if (f->n_msgs < 64)
			memcpy(f->msgs[f->n_msgs++], buf, (size_t)n + 1);
	}
}

static void on_msg(struct ev_loop *loop, ev_io *w, int revents)
{
	drain(w->data);
}

/* The next message, or "" when none came. */
static const char *next_msg(struct fixture *f)
{
	drain(f);
	if (f->next < f->n_msgs)
		return f->msgs[f->next++];
	return "";
}

static void stop_loop(struct ev_loop *loop, ev_timer *w, int revents)
{
	ev_break(loop, EVBREAK_ALL);
}

/* Run the loop for seconds, reading what the node sends meanwhile. */
static void run_loop(struct fixture *f, double seconds)
{
	ev_timer t;

	ev_io_init(&f->io, on_msg, f->fd, EV_READ);
	f->io.data = f;
	ev_io_start(f->loop, &f->io);
	ev_timer_init(&t, stop_loop, seconds, 0.);
	ev_timer_start(f->loop, &t);
	ev_run(f->loop, 0);
	ev_timer_stop(f->loop, &t);
	ev_io_stop(f->loop, &f->io);
}

struct counters {
	uint64_t sent, errors, pings;
};

static void count(void *arg, const char *name, uint64_t value, const char *help)
{
	struct counters *c = arg;

	if (!strcmp(name, "systemd_notify_sent"))
		c->sent = value;
	else if (!strcmp(name, "systemd_notify_errors"))
		c->errors = value;
	else if (!strcmp(name, "systemd_watchdog_pings"))
		c->pings = value;
}

static void test_ready_status_watchdog_stopping(void **state)
{
	struct fixture *f = *state;
	struct counters c0 = {0}, c = {0};
	int pings = 0, statuses = 0;
	const char *m;

	setenv("WATCHDOG_USEC", "40000", 1); /* a ping every 20 ms */
	notify_foreach_stat(count, &c0);
	assert_int_equal(notify_ready(&f->env, ""), 0);
	assert_int_equal(notify_watchdog_usec(), 40000);
	assert_string_equal(next_msg(f), "READY=1\nSTATUS=serving 0 clients on /x.sock");

	run_loop(f, 0.3);
	while (*(m = next_msg(f))) {
		if (!strcmp(m, "WATCHDOG=1"))
			pings++;
		else
			statuses++;
	}
	print_message("%d pings in 300 ms (one every 20 ms asked)\n", pings);
	assert_in_range(pings, 2, 16); /* a loaded machine may delay a few */
	assert_int_equal(statuses, 0); /* nothing changed: no STATUS again */

	f->stats.clients = 2; /* the status changes: sent once, at the next tick */
	run_loop(f, 0.15);
	statuses = 0;
	while (*(m = next_msg(f)))
		if (strcmp(m, "WATCHDOG=1")) {
			assert_string_equal(m, "STATUS=serving 2 clients on /x.sock");
			statuses++;
		}
	assert_int_equal(statuses, 1);

	notify_stopping();
	assert_string_equal(next_msg(f), "STOPPING=1\nSTATUS=stopping");
	notify_stopping(); /* once */
	assert_string_equal(next_msg(f), "");

	notify_foreach_stat(count, &c);
	assert_true(c.pings - c0.pings >= (uint64_t)pings);
	assert_int_equal(c.errors, c0.errors);
	assert_true(c.sent - c0.sent >= (uint64_t)pings + 3);

	/* stopped: the timer is gone, no more pings */
	notify_stop();
	while (*next_msg(f))
		;
	run_loop(f, 0.1);
	assert_string_equal(next_msg(f), "");
}

static void test_no_watchdog_no_pings(void **state)
{
	struct fixture *f = *state;
	const char *m;

	assert_int_equal(notify_ready(&f->env, NULL), 0);
	assert_int_equal(notify_watchdog_usec(), 0);
	assert_string_equal(next_msg(f), "READY=1\nSTATUS=serving 0 clients on /x.sock");
	run_loop(f, 0.1);
	while (*(m = next_msg(f)))
		assert_string_not_equal(m, "WATCHDOG=1");
}

static void test_status_line(void **state)
{
	struct fixture *f = *state;

	notify_status("starting node %s", "alpha");
	assert_string_equal(next_msg(f), "STATUS=starting node alpha");
}

static void test_without_notify_socket_nothing(void **state)
{
	struct fixture *f = *state;
	struct counters c0 = {0}, c = {0};

	unsetenv("NOTIFY_SOCKET");
	setenv("WATCHDOG_USEC", "40000", 1);
	notify_foreach_stat(count, &c0);
	notify_status("starting");
	assert_int_equal(notify_ready(&f->env, NULL), 0);
	notify_stopping();
	run_loop(f, 0.1);
	assert_string_equal(next_msg(f), "");
	notify_foreach_stat(count, &c);
	assert_int_equal(c.sent, c0.sent);
	assert_int_equal(c.pings, c0.pings);
}

static void test_unreachable_socket_counts_errors(void **state)
{
	struct fixture *f = *state;
	struct counters c0 = {0}, c = {0};
	char gone[100];

	snprintf(gone, sizeof(gone), "%s/nobody", f->dir);
	setenv("NOTIFY_SOCKET", gone, 1);
	notify_foreach_stat(count, &c0);
	assert_true(notify_ready(&f->env, NULL) < 0);
	notify_foreach_stat(count, &c);
	assert_int_equal(c.errors, c0.errors + 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_ready_status_watchdog_stopping, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_watchdog_no_pings, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_status_line, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_without_notify_socket_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unreachable_socket_counts_errors, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
