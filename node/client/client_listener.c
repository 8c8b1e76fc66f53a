/*
 * client_listener.c - the client socket's listener (client.h): the socket
 * file made with care (parent directory, stale socket probe, mode 0660),
 * accepting with back-off on EMFILE, and the sweep that closes connections
 * whose frame never finishes.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "node/client/client_int.h"
#include "node/clock.h"
#include "node/log.h"
#include "node/spin.h"
#include "ramster.h"

/* ---- listener ----------------------------------------------------------------- */

static void client_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct client_listener *l = (struct client_listener *)w;
	int i, fd;

	for (i = 0; i < CLIENT_ACCEPT_BURST; i++) {
		fd = accept4(l->sock.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			int sndbuf = WIRE_SNDBUF; /* a whole batch reply in one send */

			(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
			client_new(l, fd);
			continue;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		l->env->stats->accept_errors++;
		if (clock_now_s() - l->last_warn >= CLIENT_WARN_EVERY) {
			log_warn("accept on %s: %s (pausing accepts)", l->env->socket_path,
				 strerror(errno));
			l->last_warn = clock_now_s();
		}
		/* out of descriptors or memory: wait rather than spin on a ready socket */
		ev_io_stop(loop, &l->io);
		ev_timer_set(&l->retry, CLIENT_ACCEPT_PAUSE, 0.);
		ev_timer_start(loop, &l->retry);
		return;
	}
}

static void client_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct client_listener *l =
	    container_of(w, struct client_listener, retry);

	ev_io_start(loop, &l->io);
}

void client_expire_arm(struct client_listener *l)
{
	uint64_t now = clock_now_ns() / 1000000u, next = pools_expire(l->env->pools, now);

	ev_timer_stop(l->env->loop, &l->expire);
	if (!next)
		return;
	/* a millisecond late rather than early: the pool is then due */
	ev_timer_set(&l->expire, (double)(next - now) / 1000.0 + 0.001, 0.);
	ev_timer_start(l->env->loop, &l->expire);
}

static void client_expire_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	client_expire_arm(container_of(w, struct client_listener, expire));
}

int client_listen(const struct client_env *env, struct client_listener **out, char *err,
		  size_t errlen)
{
	struct client_listener *l;
	int rc;

	l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	l->env = env;
	rc = sock_unix_listen(&l->sock, env->socket_path, 0660, "ramsterd", err, errlen);
	if (rc) {
		free(l);
		return rc;
	}
	if (l->sock.removed_stale)
		log_notice("removed stale socket %s", env->socket_path);
	ev_io_init(&l->io, client_accept_cb, l->sock.fd, EV_READ);
	ev_io_start(env->loop, &l->io);
	ev_timer_init(&l->retry, client_retry_cb, CLIENT_ACCEPT_PAUSE, 0.);
	l->last_warn = -CLIENT_WARN_EVERY;
	l->last_refusal_warn = -CLIENT_WARN_EVERY;
	l->frame_timeout = (env->frame_timeout_ms ? env->frame_timeout_ms : 30000) / 1000.0;
	ev_timer_init(&l->sweep, client_sweep_cb, l->frame_timeout / 4, l->frame_timeout / 4);
	ev_timer_start(env->loop, &l->sweep);
	ev_timer_init(&l->expire, client_expire_cb, 1., 0.);
	*out = l;
	client_expire_arm(l); /* pools detached already: a warm restart's */
	return 0;
}

void client_listener_close(struct client_listener *l)
{
	if (!l)
		return;
	/* a stop releases every pool, as before: none is kept for a reconnect */
	pools_set_grace(l->env->pools, 0);
	(void)pools_expire(l->env->pools, UINT64_MAX);
	while (l->clients)
		client_close(l->clients, "node stopping");
	ev_io_stop(l->env->loop, &l->io);
	ev_timer_stop(l->env->loop, &l->retry);
	ev_timer_stop(l->env->loop, &l->sweep);
	ev_timer_stop(l->env->loop, &l->expire);
	sock_unix_close(&l->sock);
	free(l);
}

