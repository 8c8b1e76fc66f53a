/*
 * tcp.c - the TCP transport (transport.h): IPv4 sockets on a libev loop.
 *
 * A tcp_conn (a struct tconn, transport_ops.h, and more) owns a socket, a
 * frame reader (frame.h) and a queue of whole frames written many at a time.
 * Every entry from libev holds a reference on the tconn and the transport, so
 * any callback may close or free either: memory goes when the last reference
 * drops. Host names resolve with a blocking getaddrinfo (sock_resolve_ipv4);
 * the cluster hands it literals (node/cluster/peer.c resolves each peer's name once,
 * when it is made), so a dial does not wait for DNS on the loop.
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

#include "common/sock.h"
#include "common/util.h"
#include "transport/frame.h"
#include "transport/transport.h"
#include "transport/transport_ops.h"

#define TCP_READS_PER_EVENT 16   /* then other connections get a turn */
#define TCP_ACCEPTS_PER_EVENT 64
#define TCP_IOV_MAX 128          /* frames handed to one sendmsg */
#define TCP_ACCEPT_PAUSE 0.1     /* seconds without accept after running out of fds */

/* ---- structures ------------------------------------------------------------ */

/* One queued frame: header, message and payload in one block. */
struct tframe {
	struct tframe *next;
	size_t len; /* bytes in data */
	size_t off; /* bytes of data already written */
	uint8_t data[];
};

struct tcp_conn {
	struct tconn base; /* first: state, references, peer (transport_ops.h) */
	ev_io rio;
	ev_io wio; /* connect completion, then output backlog */
	int fd;
	struct frame_reader in;
	struct tframe *head, *tail;
};

struct tcp_transport {
	struct transport base; /* first: loop, callbacks, connections (transport_ops.h) */
	ev_io lio;
	ev_timer retry; /* restarts accept after a pause */
	int lfd;
};

static struct tcp_conn *tcp_conn(struct tconn *c)
{
	return container_of(c, struct tcp_conn, base);
}

static struct tcp_transport *tcp_transport(struct transport *t)
{
	return container_of(t, struct tcp_transport, base);
}

static void tcp_read_cb(struct ev_loop *loop, ev_io *w, int revents);
static void tcp_write_cb(struct ev_loop *loop, ev_io *w, int revents);
static void tcp_close(struct tconn *bc, const char *reason);
static const struct transport_ops tcp_ops;

/* ---- memory (references: transport_ops.h) -------------------------------------- */

static void tcp_conn_destroy(struct tconn *bc)
{
	struct tcp_conn *c = tcp_conn(bc);

	frame_reader_fini(&c->in);
	free(c);
}

static void tcp_destroy(struct transport *t)
{
	free(tcp_transport(t));
}

/* ---- sockets ------------------------------------------------------------------ */

/* Small frames go out now; dead peers are found even on an idle link. */
static int tcp_tune(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0)
		return -errno;
	return 0;
}

/* ---- connections --------------------------------------------------------------- */

static struct tcp_conn *tcp_conn_new(struct tcp_transport *tt, int fd, const struct sockaddr_in *sa)
{
	struct tcp_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (frame_reader_init(&c->in)) {
		free(c);
		return NULL;
	}
	tconn_base_init(&c->base, &tcp_ops, &tt->base);
	c->fd = fd;
	ev_io_init(&c->rio, tcp_read_cb, fd, EV_READ);
	ev_io_init(&c->wio, tcp_write_cb, fd, EV_WRITE);
	sock_format_ipv4(c->base.peer, (const struct sockaddr *)sa);
	return c;
}

static void tcp_conn_drop_queue(struct tcp_conn *c)
{
	struct tframe *f;

	while ((f = c->head)) {
		c->head = f->next;
		free(f);
	}
	c->tail = NULL;
	c->base.queued = 0;
}

/* Release everything but the memory: socket, watchers, queue, list entry. */
static void tcp_conn_shutdown(struct tcp_conn *c)
{
	struct transport *t = c->base.t;

	c->base.state = TCONN_CLOSED;
	ev_io_stop(t->loop, &c->rio);
	ev_io_stop(t->loop, &c->wio);
	close(c->fd);
	c->fd = -1;
	tcp_conn_drop_queue(c);
	tconn_unlink(&c->base);
}

static void tcp_conn_close(struct tcp_conn *c, const char *reason)
{
	void (*on_close)(void *, struct tconn *, const char *);
	void *arg;

	if (c->base.state == TCONN_CLOSED)
		return;
	on_close = c->base.t->cb.on_close;
	arg = c->base.t->arg;
	tcp_conn_shutdown(c);
	tconn_hold(&c->base);
	if (on_close)
		on_close(arg, &c->base, reason ? reason : "closed");
	tconn_release(&c->base);
}

static void tcp_close(struct tconn *bc, const char *reason)
{
	if (bc)
		tcp_conn_close(tcp_conn(bc), reason);
}

/* Close with "what: strerror(err)" as the reason. */
static void tcp_conn_fail(struct tcp_conn *c, const char *what, int err)
{
	tcp_conn_close(c, tconn_why(&c->base, what, err));
}

/* ---- output ------------------------------------------------------------------ */

static void tcp_conn_consume(struct tcp_conn *c, size_t n)
{
	struct tframe *f;
	size_t left;

	c->base.queued -= n;
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
static int tcp_conn_flush(struct tcp_conn *c)
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
		tcp_conn_consume(c, (size_t)w);
		if ((size_t)w < want)
			break; /* the socket buffer is full */
	}
	if (c->head)
		ev_io_start(c->base.t->loop, &c->wio);
	else
		ev_io_stop(c->base.t->loop, &c->wio);
	return 0;
}

static int tcp_send(struct tconn *bc, const void *msg, size_t len, const void *payload,
		    size_t plen)
{
	struct tcp_conn *c = tcp_conn(bc);
	struct tframe *f;
	size_t total;
	int was_empty, err;

	if (c->base.state == TCONN_CLOSED)
		return -ENOTCONN;
	if (len > TRANSPORT_MSG_MAX || plen > TRANSPORT_PAYLOAD_MAX)
		return -EMSGSIZE;
	total = TRANSPORT_HDR_SIZE + len + plen;
	if (c->base.queued + total > TRANSPORT_QUEUE_MAX)
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
	c->base.queued += total;

	/* Callers may hold c across this call: a failure closes c from the loop. */
	if (was_empty && c->base.state == TCONN_OPEN && !c->base.send_err) {
		err = tcp_conn_flush(c);
		if (err) {
			c->base.send_err = -err;
			ev_io_start(c->base.t->loop, &c->wio);
			ev_feed_event(c->base.t->loop, &c->wio, EV_WRITE);
		}
	}
	return 0;
}

/* ---- input --------------------------------------------------------------------- */

/* Hand out every whole frame read. @return 0, or -ECONNRESET when c got closed. */
static int tcp_conn_deliver(struct tcp_conn *c)
{
	struct transport *t = c->base.t;
	struct frame f;
	const char *why;
	int rc;

	while ((rc = frame_reader_next(&c->in, &f, &why)) > 0) {
		if (!t->cb.on_message)
			continue;
		if (t->cb.on_message(t->arg, &c->base, f.msg, f.len, f.payload, f.plen) < 0)
			tcp_conn_close(c, "message refused by receiver");
		if (c->base.state == TCONN_CLOSED)
			return -ECONNRESET;
	}
	if (rc < 0) {
		tcp_conn_close(c, why);
		return -ECONNRESET;
	}
	return 0;
}

static void tcp_read_input(struct tcp_conn *c)
{
	uint8_t *p;
	size_t n;
	ssize_t r;
	int i, err;

	for (i = 0; i < TCP_READS_PER_EVENT; i++) {
		err = frame_reader_room(&c->in, &p, &n);
		if (err) {
			tcp_conn_fail(c, "input buffer", -err);
			return;
		}
		r = recv(c->fd, p, n, 0);
		if (r == 0) {
			tcp_conn_close(c, "peer closed");
			return;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				tcp_conn_fail(c, "read", errno);
			return;
		}
		frame_reader_commit(&c->in, (size_t)r);
		if (tcp_conn_deliver(c))
			return;
		if ((size_t)r < n)
			return; /* drained for now */
	}
}

static void tcp_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_conn *c = container_of(w, struct tcp_conn, rio);
	struct transport *t = c->base.t;

	transport_hold(t);
	tconn_hold(&c->base);
	tcp_read_input(c);
	tconn_release(&c->base);
	transport_release(t);
}

/*
 * The outbound connect finished (or failed at once: conn_err). A failure is
 * on_connect(-err) and then on_close, unless on_connect closed c itself: every
 * tconn, even one that never came up, ends with exactly one on_close.
 */
static void tcp_conn_connected(struct tcp_conn *c)
{
	struct transport *t = c->base.t;
	socklen_t len = sizeof(int);
	int err = c->base.conn_err;

	if (!err && getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		ev_io_stop(t->loop, &c->wio);
		if (t->cb.on_connect)
			t->cb.on_connect(t->arg, &c->base, -err);
		if (c->base.state != TCONN_CLOSED)
			tcp_conn_fail(c, "connect", err);
		return;
	}
	c->base.state = TCONN_OPEN;
	ev_io_start(t->loop, &c->rio);
	if (t->cb.on_connect)
		t->cb.on_connect(t->arg, &c->base, 0);
	if (c->base.state == TCONN_CLOSED)
		return;
	/* frames queued while connecting */
	err = tcp_conn_flush(c);
	if (err)
		tcp_conn_fail(c, "write", -err);
}

static void tcp_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_conn *c = container_of(w, struct tcp_conn, wio);
	struct transport *t = c->base.t;
	int err;

	transport_hold(t);
	tconn_hold(&c->base);
	if (c->base.state == TCONN_CONNECTING) {
		tcp_conn_connected(c);
	} else if (c->base.send_err) {
		tcp_conn_fail(c, "write", c->base.send_err);
	} else {
		err = tcp_conn_flush(c);
		if (err)
			tcp_conn_fail(c, "write", -err);
	}
	tconn_release(&c->base);
	transport_release(t);
}

static const char *tcp_device(const struct tconn *c)
{
	return "-";
}

/* ---- listening ------------------------------------------------------------------ */

static void tcp_accept_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tcp_transport *tt = container_of(w, struct tcp_transport, retry);

	if (tt->lfd >= 0)
		ev_io_start(loop, &tt->lio);
}

/* Out of descriptors or memory: accept again after a pause, not in a busy loop. */
static void tcp_accept_pause(struct tcp_transport *tt)
{
	struct ev_loop *loop = tt->base.loop;

	ev_io_stop(loop, &tt->lio);
	ev_timer_stop(loop, &tt->retry);
	ev_timer_set(&tt->retry, TCP_ACCEPT_PAUSE, 0.);
	ev_timer_start(loop, &tt->retry);
}

static void tcp_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_transport *tt = container_of(w, struct tcp_transport, lio);
	struct transport *t = &tt->base;
	struct sockaddr_in sa;
	socklen_t len;
	struct tcp_conn *c;
	int i, fd;

	transport_hold(t);
	for (i = 0; i < TCP_ACCEPTS_PER_EVENT && !t->dying; i++) {
		len = sizeof(sa);
		fd = accept4(tt->lfd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				tcp_accept_pause(tt);
			break;
		}
		if (tcp_tune(fd) || !(c = tcp_conn_new(tt, fd, &sa))) {
			close(fd);
			continue;
		}
		c->base.state = TCONN_OPEN;
		ev_io_start(loop, &c->rio);
		tconn_hold(&c->base);
		if (t->cb.on_accept)
			t->cb.on_accept(t->arg, &c->base);
		tconn_release(&c->base);
	}
	transport_release(t);
}

static int tcp_listen(struct transport *t, const char *host, uint16_t port)
{
	struct tcp_transport *tt = tcp_transport(t);
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd, one = 1, err;

	if (t->dying)
		return -ESHUTDOWN;
	if (tt->lfd >= 0)
		return -EALREADY;
	err = sock_resolve_ipv4(host, port, true, &sa);
	if (err)
		return err;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, SOMAXCONN) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		goto close_fd;
	tt->lfd = fd;
	t->port = ntohs(sa.sin_port);
	ev_io_init(&tt->lio, tcp_accept_cb, fd, EV_READ);
	ev_io_start(t->loop, &tt->lio);
	return 0;

close_fd:
	err = -errno;
	close(fd);
	return err;
}

static int tcp_local_port(const struct transport *t)
{
	return container_of(t, const struct tcp_transport, base)->lfd >= 0 ? t->port : -ENOTCONN;
}

/* ---- connecting ------------------------------------------------------------------ */

static struct tconn *tcp_connect(struct transport *t, const char *host, uint16_t port,
				 const char *bind_host)
{
	struct sockaddr_in dst, src;
	struct tcp_conn *c;
	int fd, err;

	if (t->dying) {
		err = -ESHUTDOWN;
		goto fail;
	}
	err = sock_resolve_ipv4(host, port, false, &dst);
	if (err)
		goto fail;
	if (bind_host) {
		err = sock_resolve_ipv4(bind_host, 0, true, &src);
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
	c = tcp_conn_new(tcp_transport(t), fd, &dst);
	if (!c) {
		err = -ENOMEM;
		goto close_fd;
	}
	c->base.state = TCONN_CONNECTING;
	/* on_connect always comes from the loop, never from this call */
	if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) == 0) {
		ev_feed_event(t->loop, &c->wio, EV_WRITE);
	} else if (errno != EINPROGRESS && errno != EINTR) {
		c->base.conn_err = errno;
		ev_feed_event(t->loop, &c->wio, EV_WRITE);
	}
	ev_io_start(t->loop, &c->wio);
	return &c->base;

close_fd:
	close(fd);
fail:
	errno = -err;
	return NULL;
}

/* ---- the transport ----------------------------------------------------------------- */

struct transport *transport_tcp_new(struct ev_loop *loop, const struct transport_cb *cb, void *arg)
{
	struct tcp_transport *tt;

	if (!loop || !cb) {
		errno = EINVAL;
		return NULL;
	}
	tt = calloc(1, sizeof(*tt));
	if (!tt) {
		errno = ENOMEM;
		return NULL;
	}
	transport_base_init(&tt->base, &tcp_ops, loop, cb, arg);
	tt->lfd = -1;
	ev_timer_init(&tt->retry, tcp_accept_retry_cb, TCP_ACCEPT_PAUSE, 0.);
	return &tt->base;
}

static void tcp_free(struct transport *t)
{
	struct tcp_transport *tt;
	struct tconn *c;

	if (!t || t->dying)
		return;
	tt = tcp_transport(t);
	t->dying = 1;
	transport_hold(t);
	if (tt->lfd >= 0) {
		ev_io_stop(t->loop, &tt->lio);
		close(tt->lfd);
		tt->lfd = -1;
	}
	ev_timer_stop(t->loop, &tt->retry);
	while ((c = transport_first_conn(t)))
		tcp_conn_close(tcp_conn(c), "transport closed");
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
    .device = tcp_device,
    .destroy = tcp_destroy,
    .conn_destroy = tcp_conn_destroy,
};
