/*
 * tcp.c - the TCP transport (transport.h): IPv4 sockets on a libev loop.
 *
 * A tconn owns a socket, a frame reader (frame.h) and a queue of whole frames
 * written many at a time. Every entry from libev holds a reference on the
 * tconn and the transport, so any callback may close or free either: memory
 * goes when the last reference drops. Host names resolve with a blocking
 * getaddrinfo: meant for IPv4 literals and hosts-file names, not for DNS.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <ev.h>

#include "transport/frame.h"
#include "transport/transport.h"
#include "transport/transport_ops.h"

#define TCP_READS_PER_EVENT 16   /* then other connections get a turn */
#define TCP_ACCEPTS_PER_EVENT 64
#define TCP_IOV_MAX 128          /* frames handed to one sendmsg */
#define TCP_ACCEPT_PAUSE 0.1     /* seconds without accept after running out of fds */
#define TCP_PEER_LEN sizeof("255.255.255.255:65535")
#define TCP_WHY_LEN 96

#define tcp_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- structures ------------------------------------------------------------ */

enum tconn_state { TCONN_CONNECTING, TCONN_OPEN, TCONN_CLOSED };

/* One queued frame: header, message and payload in one block. */
struct tframe {
	struct tframe *next;
	size_t len; /* bytes in data */
	size_t off; /* bytes of data already written */
	uint8_t data[];
};

struct tconn {
	struct tconn_base base; /* first: transport.c dispatches through it */
	ev_io rio;
	ev_io wio; /* connect completion, then output backlog */
	struct transport *t;
	struct tconn *prev, *next; /* on t->conns until closed */
	int fd;
	enum tconn_state state;
	int refs;      /* libev entries and on_close calls in progress */
	int conn_err;  /* connect(2) failed at once; reported from the loop */
	int write_err; /* a write from transport_send failed; closed from the loop */
	struct frame_reader in;
	struct tframe *head, *tail;
	size_t queued; /* bytes in the queue not yet written */
	char peer[TCP_PEER_LEN];
	char why[TCP_WHY_LEN]; /* a reason we compose for on_close */
};

struct transport {
	struct transport_base base; /* first: transport.c dispatches through it */
	ev_io lio;
	ev_timer retry; /* restarts accept after a pause */
	struct ev_loop *loop;
	struct transport_cb cb;
	void *arg;
	int lfd;
	uint16_t port;
	int refs;  /* libev entries and transport_free in progress */
	int dying; /* transport_free was called; freed when refs drop */
	struct tconn *conns;
};

static void tcp_read_cb(struct ev_loop *loop, ev_io *w, int revents);
static void tcp_write_cb(struct ev_loop *loop, ev_io *w, int revents);
static void tcp_close(struct tconn *c, const char *reason);
static const struct transport_ops tcp_ops;

/* ---- references --------------------------------------------------------------
 * A closed tconn is off t->conns and holds no socket; its memory stays until
 * the frame that closed it unwinds. A dying transport has no tconns and no
 * listener; its memory stays until the callback that freed it returns.
 */

static void tconn_destroy(struct tconn *c)
{
	frame_reader_fini(&c->in);
	free(c);
}

static void tconn_hold(struct tconn *c)
{
	c->refs++;
}

static void tconn_release(struct tconn *c)
{
	if (--c->refs == 0 && c->state == TCONN_CLOSED)
		tconn_destroy(c);
}

static void transport_hold(struct transport *t)
{
	t->refs++;
}

static void transport_release(struct transport *t)
{
	if (--t->refs == 0 && t->dying)
		free(t);
}

/* ---- sockets ------------------------------------------------------------------ */

static int tcp_gai_errno(int rc)
{
	switch (rc) {
	case EAI_SYSTEM:
		return errno ? -errno : -EIO;
	case EAI_MEMORY:
		return -ENOMEM;
	case EAI_AGAIN:
		return -EAGAIN;
	default:
		return -ENXIO; /* no such host */
	}
}

/*
 * host: an IPv4 literal or a name (blocking lookup); NULL, "" or "*" mean any
 * address where any_ok. @return 0 or -errno.
 */
static int tcp_resolve(const char *host, uint16_t port, int any_ok, struct sockaddr_in *sa)
{
	struct addrinfo hints, *res;
	int rc;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	if (!host || !*host || !strcmp(host, "*")) {
		sa->sin_addr.s_addr = htonl(INADDR_ANY);
		return any_ok ? 0 : -EINVAL;
	}
	if (inet_pton(AF_INET, host, &sa->sin_addr) == 1)
		return 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	errno = 0;
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc)
		return tcp_gai_errno(rc);
	memcpy(&sa->sin_addr, &((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr,
	       sizeof(sa->sin_addr));
	freeaddrinfo(res);
	return 0;
}

/* Small frames go out now; dead peers are found even on an idle link. */
static int tcp_tune(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0)
		return -errno;
	return 0;
}

static void tcp_format_peer(char *out, const struct sockaddr_in *sa)
{
	char ip[INET_ADDRSTRLEN];

	if (!inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip)))
		strcpy(ip, "?");
	snprintf(out, TCP_PEER_LEN, "%s:%u", ip, (unsigned)ntohs(sa->sin_port));
}

/* ---- connections --------------------------------------------------------------- */

static struct tconn *tconn_new(struct transport *t, int fd, const struct sockaddr_in *sa)
{
	struct tconn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (frame_reader_init(&c->in)) {
		free(c);
		return NULL;
	}
	c->base.ops = &tcp_ops;
	c->t = t;
	c->fd = fd;
	ev_io_init(&c->rio, tcp_read_cb, fd, EV_READ);
	ev_io_init(&c->wio, tcp_write_cb, fd, EV_WRITE);
	tcp_format_peer(c->peer, sa);
	c->next = t->conns;
	if (t->conns)
		t->conns->prev = c;
	t->conns = c;
	return c;
}

static void tconn_drop_queue(struct tconn *c)
{
	struct tframe *f;

	while ((f = c->head)) {
		c->head = f->next;
		free(f);
	}
	c->tail = NULL;
	c->queued = 0;
}

/* Release everything but the memory: socket, watchers, queue, list entry. */
static void tconn_shutdown(struct tconn *c)
{
	struct transport *t = c->t;

	c->state = TCONN_CLOSED;
	ev_io_stop(t->loop, &c->rio);
	ev_io_stop(t->loop, &c->wio);
	close(c->fd);
	c->fd = -1;
	tconn_drop_queue(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		t->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

static void tcp_close(struct tconn *c, const char *reason)
{
	void (*on_close)(void *, struct tconn *, const char *);
	void *arg;

	if (!c || c->state == TCONN_CLOSED)
		return;
	on_close = c->t->cb.on_close;
	arg = c->t->arg;
	tconn_shutdown(c);
	tconn_hold(c);
	if (on_close)
		on_close(arg, c, reason ? reason : "closed");
	tconn_release(c);
}

/* Close with "what: strerror(err)" as the reason. */
static void tconn_fail(struct tconn *c, const char *what, int err)
{
	char buf[64];

	snprintf(c->why, sizeof(c->why), "%s: %s", what, strerror_r(err, buf, sizeof(buf)));
	tcp_close(c, c->why);
}

/* ---- output ------------------------------------------------------------------ */

static void tconn_consume(struct tconn *c, size_t n)
{
	struct tframe *f;
	size_t left;

	c->queued -= n;
	while (n) {
		f = c->head;
		left = f->len - f->off;
		if (n < left) {
			f->off += n;
			return;
		}
		n -= left;
		c->head = f->next;
		free(f);
	}
	if (!c->head)
		c->tail = NULL;
}

/*
 * Write as much of the queue as the socket takes, then watch for writability
 * iff some is left. Calls no callback. @return 0, or -errno of a failed write.
 */
static int tconn_flush(struct tconn *c)
{
	struct iovec iov[TCP_IOV_MAX];
	struct msghdr mh;
	struct tframe *f;
	size_t n, want;
	ssize_t w;

	while (c->head) {
		want = 0;
		for (n = 0, f = c->head; f && n < TCP_IOV_MAX; f = f->next, n++) {
			iov[n].iov_base = f->data + f->off;
			iov[n].iov_len = f->len - f->off;
			want += iov[n].iov_len;
		}
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = n;
		w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return -errno;
		}
		tconn_consume(c, (size_t)w);
		if ((size_t)w < want)
			break; /* the socket buffer is full */
	}
	if (c->head)
		ev_io_start(c->t->loop, &c->wio);
	else
		ev_io_stop(c->t->loop, &c->wio);
	return 0;
}

static int tcp_send(struct tconn *c, const void *msg, size_t len, const void *payload, size_t plen)
{
	struct tframe *f;
	size_t total;
	int was_empty, err;

	if (c->state == TCONN_CLOSED)
		return -ENOTCONN;
	if (len > TRANSPORT_MSG_MAX || plen > TRANSPORT_PAYLOAD_MAX)
		return -EMSGSIZE;
	total = TRANSPORT_HDR_SIZE + len + plen;
	if (c->queued + total > TRANSPORT_QUEUE_MAX)
		return -EAGAIN;
	f = malloc(sizeof(*f) + total);
	if (!f)
		return -ENOMEM;
	f->next = NULL;
	f->len = total;
	f->off = 0;
	frame_hdr_encode(f->data, (uint32_t)len, (uint32_t)plen);
	if (len)
		memcpy(f->data + TRANSPORT_HDR_SIZE, msg, len);
	if (plen)
		memcpy(f->data + TRANSPORT_HDR_SIZE + len, payload, plen);

	was_empty = !c->head;
	if (c->tail)
		c->tail->next = f;
	else
		c->head = f;
	c->tail = f;
	c->queued += total;

	/* Callers may hold c across this call: a failure closes c from the loop. */
	if (was_empty && c->state == TCONN_OPEN && !c->write_err) {
		err = tconn_flush(c);
		if (err) {
			c->write_err = -err;
			ev_io_start(c->t->loop, &c->wio);
			ev_feed_event(c->t->loop, &c->wio, EV_WRITE);
		}
	}
	return 0;
}

/* ---- input --------------------------------------------------------------------- */

/* Hand out every whole frame read. @return 0, or -1 when c got closed. */
static int tconn_deliver(struct tconn *c)
{
	struct transport *t = c->t;
	struct frame f;
	const char *why;
	int rc;

	while ((rc = frame_reader_next(&c->in, &f, &why)) > 0) {
		if (!t->cb.on_message)
			continue;
		if (t->cb.on_message(t->arg, c, f.msg, f.len, f.payload, f.plen) < 0)
			tcp_close(c, "message refused by receiver");
		if (c->state == TCONN_CLOSED)
			return -1;
	}
	if (rc < 0) {
		tcp_close(c, why);
		return -1;
	}
	return 0;
}

static void tcp_read_input(struct tconn *c)
{
	uint8_t *p;
	size_t n;
	ssize_t r;
	int i, err;

	for (i = 0; i < TCP_READS_PER_EVENT; i++) {
		err = frame_reader_room(&c->in, &p, &n);
		if (err) {
			tconn_fail(c, "input buffer", -err);
			return;
		}
		r = recv(c->fd, p, n, 0);
		if (r == 0) {
			tcp_close(c, "peer closed");
			return;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				tconn_fail(c, "read", errno);
			return;
		}
		frame_reader_commit(&c->in, (size_t)r);
		if (tconn_deliver(c))
			return;
		if ((size_t)r < n)
			return; /* drained for now */
	}
}

static void tcp_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tconn *c = tcp_container_of(w, struct tconn, rio);
	struct transport *t = c->t;

	transport_hold(t);
	tconn_hold(c);
	tcp_read_input(c);
	tconn_release(c);
	transport_release(t);
}

/*
 * The outbound connect finished (or failed at once: conn_err). A failure is
 * on_connect(-err) and then on_close, unless on_connect closed c itself: every
 * tconn, even one that never came up, ends with exactly one on_close.
 */
static void tconn_connected(struct tconn *c)
{
	struct transport *t = c->t;
	socklen_t len = sizeof(int);
	int err = c->conn_err;

	if (!err && getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		ev_io_stop(t->loop, &c->wio);
		if (t->cb.on_connect)
			t->cb.on_connect(t->arg, c, -err);
		if (c->state != TCONN_CLOSED)
			tconn_fail(c, "connect", err);
		return;
	}
	c->state = TCONN_OPEN;
	ev_io_start(t->loop, &c->rio);
	if (t->cb.on_connect)
		t->cb.on_connect(t->arg, c, 0);
	if (c->state == TCONN_CLOSED)
		return;
	/* frames queued while connecting */
	err = tconn_flush(c);
	if (err)
		tconn_fail(c, "write", -err);
}

static void tcp_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tconn *c = tcp_container_of(w, struct tconn, wio);
	struct transport *t = c->t;
	int err;

	transport_hold(t);
	tconn_hold(c);
	if (c->state == TCONN_CONNECTING) {
		tconn_connected(c);
	} else if (c->write_err) {
		tconn_fail(c, "write", c->write_err);
	} else {
		err = tconn_flush(c);
		if (err)
			tconn_fail(c, "write", -err);
	}
	tconn_release(c);
	transport_release(t);
}

static size_t tcp_queued(const struct tconn *c)
{
	return c->queued;
}

static const char *tcp_peer(const struct tconn *c)
{
	return c->peer;
}

static const char *tcp_device(const struct tconn *c)
{
	return "-";
}

/* ---- listening ------------------------------------------------------------------ */

static void tcp_accept_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct transport *t = tcp_container_of(w, struct transport, retry);

	if (t->lfd >= 0)
		ev_io_start(loop, &t->lio);
}

/* Out of descriptors or memory: accept again after a pause, not in a busy loop. */
static void tcp_accept_pause(struct transport *t)
{
	ev_io_stop(t->loop, &t->lio);
	ev_timer_stop(t->loop, &t->retry);
	ev_timer_set(&t->retry, TCP_ACCEPT_PAUSE, 0.);
	ev_timer_start(t->loop, &t->retry);
}

static void tcp_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct transport *t = tcp_container_of(w, struct transport, lio);
	struct sockaddr_in sa;
	socklen_t len;
	struct tconn *c;
	int i, fd;

	transport_hold(t);
	for (i = 0; i < TCP_ACCEPTS_PER_EVENT && !t->dying; i++) {
		len = sizeof(sa);
		fd = accept4(t->lfd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				tcp_accept_pause(t);
			break;
		}
		if (tcp_tune(fd) || !(c = tconn_new(t, fd, &sa))) {
			close(fd);
			continue;
		}
		c->state = TCONN_OPEN;
		ev_io_start(loop, &c->rio);
		tconn_hold(c);
		if (t->cb.on_accept)
			t->cb.on_accept(t->arg, c);
		tconn_release(c);
	}
	transport_release(t);
}

static int tcp_listen(struct transport *t, const char *host, uint16_t port)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd, one = 1, err;

	if (t->dying)
		return -ESHUTDOWN;
	if (t->lfd >= 0)
		return -EALREADY;
	err = tcp_resolve(host, port, 1, &sa);
	if (err)
		return err;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, SOMAXCONN) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		goto close_fd;
	t->lfd = fd;
	t->port = ntohs(sa.sin_port);
	ev_io_init(&t->lio, tcp_accept_cb, fd, EV_READ);
	ev_io_start(t->loop, &t->lio);
	return 0;

close_fd:
	err = -errno;
	close(fd);
	return err;
}

static int tcp_local_port(const struct transport *t)
{
	return t->lfd >= 0 ? t->port : -ENOTCONN;
}

/* ---- connecting ------------------------------------------------------------------ */

static struct tconn *tcp_connect(struct transport *t, const char *host, uint16_t port,
				 const char *bind_host)
{
	struct sockaddr_in dst, src;
	struct tconn *c;
	int fd, err;

	if (t->dying) {
		err = -ESHUTDOWN;
		goto fail;
	}
	err = tcp_resolve(host, port, 0, &dst);
	if (err)
		goto fail;
	if (bind_host) {
		err = tcp_resolve(bind_host, 0, 1, &src);
		if (err)
			goto fail;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		goto fail;
	}
	err = tcp_tune(fd);
	if (err)
		goto close_fd;
	if (bind_host && bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0) {
		err = -errno;
		goto close_fd;
	}
	c = tconn_new(t, fd, &dst);
	if (!c) {
		err = -ENOMEM;
		goto close_fd;
	}
	c->state = TCONN_CONNECTING;
	/* on_connect always comes from the loop, never from this call */
	if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) == 0) {
		ev_feed_event(t->loop, &c->wio, EV_WRITE);
	} else if (errno != EINPROGRESS && errno != EINTR) {
		c->conn_err = errno;
		ev_feed_event(t->loop, &c->wio, EV_WRITE);
	}
	ev_io_start(t->loop, &c->wio);
	return c;

close_fd:
	close(fd);
fail:
	errno = -err;
	return NULL;
}

/* ---- the transport ----------------------------------------------------------------- */

struct transport *transport_tcp_new(struct ev_loop *loop, const struct transport_cb *cb, void *arg)
{
	struct transport *t;

	if (!loop || !cb) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	t->base.ops = &tcp_ops;
	t->loop = loop;
	t->cb = *cb;
	t->arg = arg;
	t->lfd = -1;
	ev_timer_init(&t->retry, tcp_accept_retry_cb, TCP_ACCEPT_PAUSE, 0.);
	return t;
}

static void tcp_free(struct transport *t)
{
	if (!t || t->dying)
		return;
	t->dying = 1;
	transport_hold(t);
	if (t->lfd >= 0) {
		ev_io_stop(t->loop, &t->lio);
		close(t->lfd);
		t->lfd = -1;
	}
	ev_timer_stop(t->loop, &t->retry);
	while (t->conns)
		tcp_close(t->conns, "transport closed");
	transport_release(t);
}

static const struct transport_ops tcp_ops = {
    .kind = "tcp",
    .free = tcp_free,
    .listen = tcp_listen,
    .local_port = tcp_local_port,
    .connect = tcp_connect,
    .send = tcp_send,
    .close = tcp_close,
    .queued = tcp_queued,
    .peer = tcp_peer,
    .device = tcp_device,
};
