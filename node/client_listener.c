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

#include "node/client_int.h"
#include "node/log.h"
#include "node/spin.h"
#include "ramster.h"

/* ---- listener ----------------------------------------------------------------- */

static void client_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct client_listener *l = (struct client_listener *)w;
	int i, fd;

	for (i = 0; i < CLIENT_ACCEPT_BURST; i++) {
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
		if (ev_now(loop) - l->last_warn >= CLIENT_WARN_EVERY) {
			log_warn("accept on %s: %s (pausing accepts)", l->env->socket_path,
				 strerror(errno));
			l->last_warn = ev_now(loop);
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
	    (struct client_listener *)((char *)w - offsetof(struct client_listener, retry));

	ev_io_start(loop, &l->io);
}

/* mkdir -p the directory part of path, new directories 0755. @return 0 or -errno. */
static int client_make_parent(const char *path, char *err, size_t errlen)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash = strrchr(strcpy(dir, path), '/'), *p, save;
	struct stat st;

	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (!stat(dir, &st))
		return 0;
	for (p = dir + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		save = *p;
		*p = '\0';
		if (mkdir(dir, 0755) == 0) {
			(void)chmod(dir, 0755); /* whatever the umask */
		} else if (errno != EEXIST) {
			int e = errno;

			snprintf(err, errlen, "cannot create directory %s: %s", dir, strerror(e));
			return -e;
		}
		*p = save;
		if (!save)
			break;
	}
	return 0;
}

/*
 * Is a daemon answering on path? @return 1 yes, 0 no (stale), or -errno with
 * err set when the probe itself failed.
 */
static int client_probe(const struct sockaddr_un *sa, char *err, size_t errlen)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), e;

	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "socket: %s", strerror(e));
		return -e;
	}
	if (!connect(fd, (const struct sockaddr *)sa, sizeof(*sa))) {
		close(fd);
		return 1;
	}
	e = errno;
	close(fd);
	if (e == EAGAIN || e == EINPROGRESS) /* listening, backlog full */
		return 1;
	if (e == ECONNREFUSED || e == ENOENT)
		return 0;
	snprintf(err, errlen, "cannot probe %s: %s", sa->sun_path, strerror(e));
	return -e;
}

int client_listen(const struct client_env *env, struct client_listener **out, char *err,
		  size_t errlen)
{
	const char *path = env->socket_path;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct client_listener *l;
	struct stat st;
	mode_t mask;
	int rc, e;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long (at most %zu bytes): %s",
			 sizeof(sa.sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	rc = client_make_parent(path, err, errlen);
	if (rc)
		return rc;
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket", path);
			return -EEXIST;
		}
		rc = client_probe(&sa, err, errlen);
		if (rc < 0)
			return rc;
		if (rc) {
			snprintf(err, errlen, "another ramsterd is listening on %s", path);
			return -EADDRINUSE;
		}
		if (unlink(path) && errno != ENOENT) {
			e = errno;
			snprintf(err, errlen, "cannot remove stale socket %s: %s", path,
				 strerror(e));
			return -e;
		}
		log_notice("removed stale socket %s", path);
	}

	l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	l->env = env;
	l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0) {
		e = errno;
		snprintf(err, errlen, "socket: %s", strerror(e));
		goto free_listener;
	}
	mask = umask(0117); /* the socket is born 0660: no window with a wider mode */
	rc = bind(l->fd, (struct sockaddr *)&sa, sizeof(sa));
	e = errno;
	umask(mask);
	if (rc) {
		snprintf(err, errlen, "cannot bind %s: %s", path, strerror(e));
		goto close_fd;
	}
	if (chmod(path, 0660) || lstat(path, &st)) {
		e = errno;
		snprintf(err, errlen, "cannot set the mode of %s: %s", path, strerror(e));
		goto unlink_path;
	}
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	if (listen(l->fd, SOMAXCONN)) {
		e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
		goto unlink_path;
	}
	ev_io_init(&l->io, client_accept_cb, l->fd, EV_READ);
	ev_io_start(env->loop, &l->io);
	ev_timer_init(&l->retry, client_retry_cb, CLIENT_ACCEPT_PAUSE, 0.);
	l->last_warn = -CLIENT_WARN_EVERY;
	l->frame_timeout = (env->frame_timeout_ms ? env->frame_timeout_ms : 30000) / 1000.0;
	ev_timer_init(&l->sweep, client_sweep_cb, l->frame_timeout / 4, l->frame_timeout / 4);
	ev_timer_start(env->loop, &l->sweep);
	*out = l;
	return 0;

unlink_path:
	unlink(path);
close_fd:
	close(l->fd);
free_listener:
	free(l);
	return -e;
}

void client_listener_close(struct client_listener *l)
{
	struct stat st;

	if (!l)
		return;
	while (l->clients)
		client_close(l->clients, "node stopping");
	ev_io_stop(l->env->loop, &l->io);
	ev_timer_stop(l->env->loop, &l->retry);
	ev_timer_stop(l->env->loop, &l->sweep);
	close(l->fd);
	if (!lstat(l->env->socket_path, &st) && st.st_dev == l->dev && st.st_ino == l->ino)
		unlink(l->env->socket_path);
	free(l);
}

