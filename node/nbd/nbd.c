/*
 * nbd.c - the NBD frontend (nbd.h): connections, listeners and the server.
 * The handshake, the exports and the transmission phase have files of their
 * own (nbd_int.h).
 *
 * Requests of a connection run in order; replies are queued in its output
 * buffer and sent in one go. A request that waits (a remote page, room in the
 * tier, another connection's FLUSH) holds the connection: its bytes stay in
 * the input buffer, nothing else is read or run until it is answered, and a
 * READ reply being built stays put in the output buffer (no realloc, no
 * compaction) while remote gets write into it.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "node/log.h"
#include "node/nbd/nbd_int.h"

/* ---- connections --------------------------------------------------------------- */

void nbd_conn_free(struct nbd_conn *c)
{
	free(c->in);
	free(c->out);
	free(c->slots);
	free(c->scratch);
	free(c->fj); /* gathered, never submitted (a job in flight holds c->pending) */
	free(c);
}


void nbd_close(struct nbd_conn *c, const char *why)
{
	struct nbd *n = c->srv;
	struct nbd_export *e = c->exp;

	store_req_cancel(&c->put);
	if (e && c->flush_queued) {
		struct nbd_conn **pp = &e->flush_q;

		while (*pp != c)
			pp = &(*pp)->flush_next;
		*pp = c->flush_next;
		if (e->flush_tail == &c->flush_next)
			e->flush_tail = pp;
		c->flush_queued = false;
	}
	ev_io_stop(n->loop, &c->io);
	if (c->tls.phase)
		nbd_tls_close(c);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		n->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	n->st.conns--;
	if (e && c->transmit)
		e->clients--;
	log_debug("nbd connection %llu closed: %s", (unsigned long long)c->id, why);
	if (e && e->flusher == c)
		nbd_flush_release(e); /* may run another connection's FLUSH */
	nbd_yield_cancel(c);
	if (c->pending) {
		c->closed = true; /* the last remote get frees it */
		return;
	}
	nbd_conn_free(c);
}

/* A peer that broke the protocol: count it and close. @return CONN_CLOSED. */
int nbd_violation(struct nbd_conn *c, uint64_t *counter, const char *why)
{
	(*counter)++;
	log_info("nbd connection %llu: %s: closing", (unsigned long long)c->id, why);
	nbd_close(c, why);
	return CONN_CLOSED;
}

void nbd_watch(struct nbd_conn *c)
{
	struct ev_loop *loop = c->srv->loop;
	int ev = 0;

	if (c->out_off < c->out_len)
		ev |= EV_WRITE;
	/* quiescing (a warm restart): what the client sends next waits in the socket */
	if (!c->busy && !c->closing && !c->srv->quiescing && c->out_len - c->out_off < NBD_OUT_HIGH)
		ev |= EV_READ;
	if (c->tls.phase) {
		nbd_tls_watch(c, ev);
		return;
	}
	if (ev_is_active(&c->io) && (c->io.events & (EV_READ | EV_WRITE)) == ev)
		return;
	ev_io_stop(loop, &c->io);
	if (!ev)
		return;
	ev_io_set(&c->io, c->fd, ev);
	ev_io_start(loop, &c->io);
}

/* Send what is queued. @return 0 (maybe some left), or CONN_CLOSED. */
int nbd_send(struct nbd_conn *c)
{
	ssize_t k;
	int rc;

	if (c->tls.s) { /* records (nbd_tls.c) */
		rc = nbd_tls_push(c);
		if (rc)
			return rc == 1 ? 0 : rc;
	}
	while (c->out_off < c->out_len) {
		k = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			/* ENOBUFS/ENOMEM: the kernel is short of memory (it may be
			 * swapping into this very export): wait and try again, as
			 * for a full socket, rather than fail the device */
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS ||
			    errno == ENOMEM)
				return 0;
			c->srv->st.io_errors++;
			nbd_close(c, strerror(errno));
			return CONN_CLOSED;
		}
		c->out_off += (size_t)k;
	}
	if (!c->building)
		c->out_off = c->out_len = 0;
	if (c->closing && !c->busy) {
		nbd_close(c, "closed by the client");
		return CONN_CLOSED;
	}
	return 0;
}

/* Room for len more bytes of output. @return where they go, or NULL (closed). */
uint8_t *nbd_out(struct nbd_conn *c, size_t len)
{
	uint8_t *p;

	if (nbd_reserve(&c->out, &c->out_cap, c->out_len + len)) {
		c->srv->st.oom_closes++;
		nbd_close(c, "out of memory for a reply");
		return NULL;
	}
	p = c->out + c->out_len;
	c->out_len += len;
	return p;
}

/* ---- listeners ----------------------------------------------------------------- */

static void nbd_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct nbd_listener *l = (struct nbd_listener *)w;
	int i, fd;

	for (i = 0; i < NBD_ACCEPT_BURST; i++) {
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			if (nbd_limits_admit(l->srv, fd))
				nbd_conn_new(l->srv, fd, !l->is_unix);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			l->srv->st.accept_errors++;
		return;
	}
}

static int nbd_listen_unix(struct nbd *n, const char *path, char *err, size_t errlen)
{
	struct nbd_listener *l = &n->lunix;
	int rc;

	rc = sock_unix_listen(&l->sock, path, 0660, "server", err, errlen);
	if (rc)
		return rc;
	l->srv = n;
	l->fd = l->sock.fd;
	l->is_unix = true;
	ev_io_init(&l->io, nbd_accept_cb, l->fd, EV_READ);
	ev_io_start(n->loop, &l->io);
	return 0;
}

/* @return true when sa is a loopback address (127.0.0.0/8, ::1, ::ffff:127.x). */
static bool nbd_loopback(const struct sockaddr *sa)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family != AF_INET6)
		return false;
	return IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) ||
	       (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) && s6->sin6_addr.s6_addr[12] == 127);
}

/*
 * Plaintext NBD on the network is anyone's disk: a non-loopback nbd_listen
 * needs nbd_tls said (require, or off on purpose). @return 0 or -EPERM.
 */
static int nbd_listen_policy(const struct sockaddr *sa, const char *addr, unsigned tls,
			     char *err, size_t errlen)
{
	if (nbd_loopback(sa))
		return 0;
	if (tls == NBD_TLS_UNSET) {
		snprintf(err, errlen,
			 "nbd_listen %s is not a loopback address and nbd_tls is not set: set "
			 "nbd_tls = require (with nbd_tls_psk or nbd_tls_certificates), or write "
			 "nbd_tls = off to serve plaintext NBD on the network",
			 addr);
		return -EPERM;
	}
	if (tls == NBD_TLS_OFF)
		log_warn("nbd_listen %s: plaintext NBD on a non-loopback address (nbd_tls = off): "
			 "whoever reaches it reads and writes the exports",
			 addr);
	else if (tls == NBD_TLS_ON)
		log_warn("nbd_listen %s: nbd_tls = on lets plaintext clients in on a non-loopback "
			 "address (nbd_tls = require refuses them)",
			 addr);
	return 0;
}

static int nbd_listen_tcp(struct nbd *n, const char *addr, unsigned tls, char *err,
			  size_t errlen)
{
	struct nbd_listener *l = &n->ltcp;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
	char host[CONFIG_NAME_MAX], port[8];
	const char *why;
	uint16_t pn;
	int fd = -1, one = 1, rc, e;

	if (sock_hostport_parse(addr, host, sizeof(host), &pn, &why)) {
		snprintf(err, errlen, "nbd_listen: '%s' %s", addr, why);
		return -EINVAL;
	}
	snprintf(port, sizeof(port), "%u", (unsigned)pn);
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "nbd_listen %s: %s", addr, gai_strerror(rc));
		return -EINVAL;
	}
	rc = nbd_listen_policy(ai->ai_addr, addr, tls, err, errlen);
	if (rc) {
		freeaddrinfo(ai);
		return rc;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, SOMAXCONN)) {
		e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(e));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -e;
	}
	freeaddrinfo(ai);
	l->srv = n;
	l->fd = fd;
	ev_io_init(&l->io, nbd_accept_cb, fd, EV_READ);
	ev_io_start(n->loop, &l->io);
	return 0;
}

static void nbd_listener_close(struct nbd *n, struct nbd_listener *l)
{
	if (l->fd < 0)
		return;
	ev_io_stop(n->loop, &l->io);
	if (l->is_unix)
		sock_unix_close(&l->sock); /* closes l->fd, unlinks the file if still ours */
	else
		close(l->fd);
	l->fd = -1;
}

/* ---- the server ---------------------------------------------------------------- */

struct nbd *nbd_create(struct ev_loop *loop, struct store *store,
		       const struct config *cfg, const struct config_node *self, char *err,
		       size_t errlen)
{
	const char *path = self && self->nbd_socket[0] ? self->nbd_socket : NBD_DEFAULT_SOCKET;
	struct nbd *n = calloc(1, sizeof(*n));
	size_t i;

	if (!n) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	n->loop = loop;
	n->store = store;
	n->lunix.fd = n->ltcp.fd = -1;
	n->exports = calloc(cfg->n_exports ? cfg->n_exports : 1, sizeof(*n->exports));
	if (!n->exports) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (i = 0; i < cfg->n_exports; i++) {
		n->n_exports++;
		if (nbd_export_init(n, &n->exports[i], (unsigned)i, &cfg->exports[i], err,
				    errlen))
			goto fail;
	}
	if (nbd_tls_init(&n->tls, self, err, errlen))
		goto fail;
	if (nbd_listen_unix(n, path, err, errlen))
		goto fail;
	if (self && self->nbd_listen[0] &&
	    nbd_listen_tcp(n, self->nbd_listen, self->nbd_tls, err, errlen))
		goto fail;
	nbd_limits_start(n, &cfg->limits);
	snprintf(n->describe, sizeof(n->describe), "unix %s%s%s%s", path,
		 n->ltcp.fd >= 0 ? ", tcp " : "", n->ltcp.fd >= 0 ? self->nbd_listen : "",
		 !nbd_tls_offered(&n->tls)	     ? ""
		 : n->tls.mode == NBD_TLS_REQUIRE ? " (TLS required)"
						  : " (TLS offered)");
	return n;

fail:
	nbd_destroy(n);
	return NULL;
}

void nbd_destroy(struct nbd *n)
{
	size_t i;

	if (!n)
		return;
	while (n->conns)
		nbd_close(n->conns, "node stopping");
	if (n->lim.max_conns)
		nbd_limits_stop(n);
	nbd_listener_close(n, &n->lunix);
	nbd_listener_close(n, &n->ltcp);
	for (i = 0; i < n->n_exports; i++)
		nbd_export_fini(n, &n->exports[i]);
	nbd_tls_fini(&n->tls);
	free(n->exports);
	free(n);
}

const char *nbd_describe(const struct nbd *n)
{
	return n->describe;
}

int nbd_reload_tls(struct nbd *n, const struct config_node *self, char *err, size_t errlen)
{
	if (!n || !nbd_tls_offered(&n->tls))
		return 1;
	return nbd_tls_reload(&n->tls, self, err, errlen);
}

size_t nbd_export_count(const struct nbd *n)
{
	return n ? n->n_exports : 0;
}

void nbd_export_info(struct nbd *n, size_t i, struct nbd_export_info *info)
{
	struct nbd_export *e = &n->exports[i];
	struct tmem_pool_info ti = {0};
	uint64_t remote;

	(void)store_pool_info(n->store, e->pool, &ti);
	remote = ti.remote;
	memset(info, 0, sizeof(*info));
	info->name = e->name;
	info->backing = e->backing;
	info->size = e->size;
	info->pages_remote = remote;
	info->pages_local = ti.pages > remote ? ti.pages - remote : 0;
	info->pages_backing = e->backing_pages;
	info->clients = e->clients;
	info->requests = e->requests;
	info->errors = e->errors;
}

void nbd_foreach_stat(const struct nbd *n,
		      void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
		      void *arg)
{
	static const char *const cmd[NBD_CMDS] = {"read", "write",	  "disc",	 "flush",
						  "trim", "cache", "write_zeroes", "block_status"};
	const struct nbd_stats *s = &n->st;
	char name[64];
	unsigned i;

	fn(arg, "nbd_exports", n->n_exports, "NBD exports configured");
	nbd_limits_foreach_stat(n, fn, arg);
	nbd_tls_foreach_stat(&n->tls, fn, arg);
	fn(arg, "nbd_connections", s->conns, "NBD connections open now");
	fn(arg, "nbd_connections_total", s->conns_total, "NBD connections accepted");
	fn(arg, "nbd_accept_errors", s->accept_errors, "failed NBD accepts");
	fn(arg, "nbd_bad_handshakes", s->bad_handshakes,
	   "NBD connections closed for a handshake violation");
	fn(arg, "nbd_bad_requests", s->bad_requests,
	   "NBD connections closed for a request that broke the stream");
	fn(arg, "nbd_io_errors", s->io_errors, "NBD connections closed on a socket error");
	fn(arg, "nbd_oom_closes", s->oom_closes, "NBD connections closed for want of memory");
	for (i = 0; i < NBD_CMDS; i++) {
		if (i == NBD_CMD_CACHE)
			continue;
		snprintf(name, sizeof(name), "nbd_requests_%s", cmd[i]);
		fn(arg, name, s->requests[i], "NBD requests of this command");
	}
	fn(arg, "nbd_invalid", s->invalid, "NBD requests refused by validation");
	fn(arg, "nbd_errors", s->errors, "NBD error replies");
	fn(arg, "nbd_bytes_read", s->bytes_read, "bytes answered to NBD reads");
	fn(arg, "nbd_bytes_written", s->bytes_written, "bytes taken from NBD writes");
	fn(arg, "nbd_zero_pages", s->zero_pages,
	   "pages written as zeros: dropped from the tier, read back as zeros");
	fn(arg, "nbd_put_refused", s->put_refused, "pages the tier refused");
	fn(arg, "nbd_refused_lost", s->refused_lost,
	   "refused pages without a backing file (write failed)");
	fn(arg, "nbd_nospace", s->nospace,
	   "page writes failed ENOSPC (tier, collective and backing file full)");
	fn(arg, "nbd_nospace_episodes", s->nospace_episodes,
	   "times an export became full (each logged once)");
	fn(arg, "nbd_backing_writes", s->backing_writes, "refused pages written to backing files");
	fn(arg, "nbd_backing_reads", s->backing_reads, "pages read from backing files");
	fn(arg, "nbd_backing_errors", s->backing_errors, "backing file I/O errors");
	fn(arg, "nbd_remote_gets", s->remote_gets, "pages fetched from peers");
	fn(arg, "nbd_remote_waits", s->remote_waits, "NBD requests that waited on the collective");
	fn(arg, "nbd_room_waits", s->room_waits, "NBD writes that waited for room");
	fn(arg, "nbd_room_refused", s->room_refused, "of those, refused all the same");
	fn(arg, "nbd_flush_pages", s->flush_pages, "pages written behind by FLUSH and FUA");
	fn(arg, "nbd_flush_waits", s->flush_waits, "FLUSHes that waited for another one");
	fn(arg, "nbd_syncs", s->syncs, "fdatasync calls on backing files");
	fn(arg, "nbd_yields", s->yields,
	   "slices after which a long request let other connections run");
	fn(arg, "nbd_sync_failures", s->sync_failures,
	   "failed fdatasyncs (that FLUSH/FUA failed; the data is written again)");
	fn(arg, "nbd_sync_waits", s->sync_waits, "syncs that waited for another of their export");
	fn(arg, "nbd_sync_lost", s->sync_lost,
	   "blocks a failed sync lost (FLUSH fails until they are written again)");
	fn(arg, "nbd_conns_adopted", s->adopted,
	   "NBD connections taken over, socket and all, from before a re-execution");
	fn(arg, "nbd_conns_adopt_refused", s->adopt_refused,
	   "NBD connections handed over but closed (their export changed or gone)");
}

