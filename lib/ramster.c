/*
 * ramster.c - libramster: the client side of the node's local socket.
 *
 * One handle is one blocking connection; each call is one or more round trips
 * (a request frame out, its response frame back, wire.h). Pages never pass
 * through a staging buffer: puts send straight from the caller's pages, gets
 * read hits straight into them. Any I/O or protocol failure closes the
 * connection, since the stream can no longer be trusted to be in step.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "proto/wire.h"
#include "ramster.h"
#include "lib/internal.h"
#include "lib/ramster_int.h"

#define RAMSTER_DEFAULT_SOCKET "/run/ramster/ramsterd.sock"
/* Decodes any response but the admin ones: 256 results plus generous slack. */
#define RAMSTER_ARENA_SIZE (64u * 1024)

_Static_assert(RAMSTER_BATCH_MAX == WIRE_BATCH_MAX, "client and wire batch limits differ");
_Static_assert(RAMSTER_PAGE_SIZE == WIRE_PAGE_SIZE, "client and wire page sizes differ");
_Static_assert((unsigned)RAMSTER_PERSISTENT == WIRE_POOL_PERSISTENT &&
		   (unsigned)RAMSTER_SHARED == WIRE_POOL_SHARED,
	       "client and wire pool flags differ");

/* ---- connection ------------------------------------------------------------------ */

/* The stream is out of step or gone: drop it; later calls redial or get -ENOTCONN. */
void lib_break(ramster *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}

static int ramster_io_error(int err)
{
	return err == EPIPE ? -EPIPE : err == ECONNRESET ? -ECONNRESET : -err;
}

/* Send iov[0..cnt) whole; iov is consumed. @return 0 or -errno. */
static int ramster_send_all(int fd, struct iovec *iov, size_t cnt)
{
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = cnt};
	ssize_t n;

	while (mh.msg_iovlen) {
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return ramster_io_error(errno);
		}
		while (mh.msg_iovlen && (size_t)n >= mh.msg_iov->iov_len) {
			n -= (ssize_t)mh.msg_iov->iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen) {
			mh.msg_iov->iov_base = (uint8_t *)mh.msg_iov->iov_base + n;
			mh.msg_iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/* Fill iov[0..cnt) whole; iov is consumed. End of stream is -ECONNRESET. */
static int ramster_recv_all(int fd, struct iovec *iov, size_t cnt)
{
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = cnt};
	ssize_t n;

	for (;;) {
		while (mh.msg_iovlen && !mh.msg_iov->iov_len) {
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (!mh.msg_iovlen)
			return 0;
		n = recvmsg(fd, &mh, MSG_WAITALL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return ramster_io_error(errno);
		}
		if (n == 0)
			return -ECONNRESET;
		while (mh.msg_iovlen && (size_t)n >= mh.msg_iov->iov_len) {
			n -= (ssize_t)mh.msg_iov->iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen) {
			mh.msg_iov->iov_base = (uint8_t *)mh.msg_iov->iov_base + n;
			mh.msg_iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

static int ramster_recv(int fd, void *buf, size_t len)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};

	return ramster_recv_all(fd, &iov, 1);
}

static uint64_t ramster_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Busy-poll for the reply's first bytes for up to r->poll_ns, so that a
 * quick reply is taken without this thread sleeping and being woken (on a
 * VM, a wake-up can cost more than the request). Then the blocking receive.
 */
static void ramster_poll_reply(ramster *r)
{
	struct pollfd p = {.fd = r->fd, .events = POLLIN};
	uint64_t t0 = ramster_now_ns();

	do
		if (poll(&p, 1, 0) != 0)
			return;
	while (ramster_now_ns() - t0 < r->poll_ns);
}

/* RAMSTER_POLL_US: microseconds a call polls for its reply before sleeping (default 0). */
static uint64_t ramster_env_poll_ns(void)
{
	const char *v = secure_getenv("RAMSTER_POLL_US");
	char *end;
	unsigned long us;

	if (!v || !*v)
		return 0;
	us = strtoul(v, &end, 10);
	if (*end || us > 10000)
		return 0; /* not a number of microseconds up to 10 ms: off */
	return (uint64_t)us * 1000;
}

/* Make *buf hold need bytes. @return 0 or -ENOMEM (then *buf is unchanged). */
static int ramster_reserve(uint8_t **buf, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap : 4096;
	uint8_t *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(*buf, n);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n;
	return 0;
}

/* ---- one round trip ------------------------------------------------------------------ */

/*
 * Send req (for PUT with the pages of v[0..n_items)), read its response and
 * check it against req (wire_response_decode); for GET read each hit's page
 * into its v[i].page. alloc NULL: the response is malloc'd, else it is in
 * r->arena. On success the caller frees *out with
 * ramster__response__free_unpacked(*out, alloc). @return 0 or -errno.
 * One try: lib_call (reconnect.c) is what the calls use.
 */
int lib_call_once(ramster *r, Ramster__Request *req, struct ramster_iov *v, int use_arena,
		  Ramster__Response **out)
{
	ProtobufCAllocator *alloc = use_arena ? &r->arena.pa : NULL;
	Ramster__Response *rsp;
	struct wire_hdr h;
	const char *why;
	size_t len, i, cnt;
	uint32_t payload = 0;
	int err;

	if (r->fd < 0)
		return -ENOTCONN;
	req->seq = ++r->seq;
	len = ramster__request__get_packed_size(req);
	if (len > WIRE_MSG_MAX)
		return -E2BIG;
	err = ramster_reserve(&r->tx, &r->tx_cap, len);
	if (err)
		return err;
	ramster__request__pack(req, r->tx);

	r->iov[0] = (struct iovec){.iov_base = r->hdr, .iov_len = WIRE_HDR_SIZE};
	r->iov[1] = (struct iovec){.iov_base = r->tx, .iov_len = len};
	cnt = 2;
	if (req->op == RAMSTER__OP__OP_PUT) {
		for (i = 0; i < req->n_items; i++)
			r->iov[cnt++] =
			    (struct iovec){.iov_base = v[i].page, .iov_len = RAMSTER_PAGE_SIZE};
		payload = (uint32_t)req->n_items * RAMSTER_PAGE_SIZE;
	} else if (req->op == RAMSTER__OP__OP_PING) {
		/* v[0].page goes out; the echo comes back into v[1].page */
		r->iov[cnt++] = (struct iovec){.iov_base = v[0].page, .iov_len = RAMSTER_PAGE_SIZE};
		payload = RAMSTER_PAGE_SIZE;
	}
	wire_hdr_encode(r->hdr, WIRE_REQUEST, (uint32_t)len, payload);
	err = ramster_send_all(r->fd, r->iov, cnt);
	if (err)
		goto broken;

	if (r->poll_ns)
		ramster_poll_reply(r);
	err = ramster_recv(r->fd, r->hdr, WIRE_HDR_SIZE);
	if (err)
		goto broken;
	err = wire_hdr_decode(r->hdr, WIRE_RESPONSE, &h, &why);
	if (err)
		goto broken;
	err = ramster_reserve(&r->rx, &r->rx_cap, h.msg_len);
	if (err)
		goto broken;
	err = ramster_recv(r->fd, r->rx, h.msg_len);
	if (err)
		goto broken;
	if (use_arena)
		wire_arena_reset(&r->arena);
	err = wire_response_decode(&h, r->rx, req, alloc, &rsp, &why);
	if (err)
		goto broken;

	if (h.payload_len && req->op == RAMSTER__OP__OP_PING) {
		/* the decoder saw to it: exactly one page */
		err = ramster_recv(r->fd, v[1].page, RAMSTER_PAGE_SIZE);
		if (err)
			goto free_rsp;
	} else if (h.payload_len) {
		/* only a GET gets here (the decoder saw to it), one page a hit */
		cnt = 0;
		for (i = 0; i < rsp->n_results; i++)
			if (rsp->results[i] == 0)
				r->iov[cnt++] = (struct iovec){.iov_base = v[i].page,
							       .iov_len = RAMSTER_PAGE_SIZE};
		err = ramster_recv_all(r->fd, r->iov, cnt);
		if (err)
			goto free_rsp;
	}
	*out = rsp;
	r->answered = true;
	return 0;

free_rsp:
	ramster__response__free_unpacked(rsp, alloc);
broken:
	lib_break(r);
	return err;
}

int ramster_ping(ramster *r, uint32_t node, const void *page, void *back)
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;
	struct ramster_iov v[2];
	Ramster__Response *rsp;
	int err;

	if (!r || !page || !back || node > 64)
		return -EINVAL;
	req.op = RAMSTER__OP__OP_PING;
	req.node = node;
	v[0].page = (void *)page;
	v[1].page = back;
	err = lib_call(r, &req, v, 1, &rsp);
	if (err)
		return err;
	err = rsp->result;
	ramster__response__free_unpacked(rsp, &r->arena.pa);
	return err;
}

static int ramster_simple(ramster *r, Ramster__Request *req);

int ramster_drain(ramster *r, uint32_t node, int on)
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;

	if (!r || (on != 0 && on != 1) || node > 64)
		return -EINVAL;
	req.op = RAMSTER__OP__OP_DRAIN;
	req.node = node;
	req.flags = (uint32_t)on;
	return ramster_simple(r, &req);
}

/* A request answered by a bare result (pool new/destroy, flushes). */
static int ramster_simple(ramster *r, Ramster__Request *req)
{
	Ramster__Response *rsp;
	int err;

	err = lib_call(r, req, NULL, 1, &rsp);
	if (err)
		return err;
	err = rsp->result;
	ramster__response__free_unpacked(rsp, &r->arena.pa);
	return err;
}

/* Point req at one item (r->items[0]) naming oid/index. */
static void ramster_one_item(ramster *r, Ramster__Request *req, const struct ramster_oid *oid,
			     uint32_t index)
{
	Ramster__Item *it = &r->items[0];

	ramster__item__init(it);
	it->oid0 = oid->w[0];
	it->oid1 = oid->w[1];
	it->oid2 = oid->w[2];
	it->index = index;
	r->item_ptrs[0] = it;
	req->items = r->item_ptrs;
	req->n_items = 1;
}

/* ---- connect ------------------------------------------------------------------ */

static int ramster_connect(int fd, const struct sockaddr_un *sa)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	socklen_t len = sizeof(int);
	int err = 0;

	for (;;) {
		if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 || errno == EISCONN)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EALREADY && errno != EINPROGRESS)
			return -errno;
		/* an interrupted connect still going on: wait for its outcome */
		while (poll(&p, 1, -1) < 0)
			if (errno != EINTR)
				return -errno;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			return -errno;
		return -err;
	}
}

/* A new connection to path (shorter than sun_path). @return 0 with *fd set, or -errno. */
int lib_dial(const char *path, int *fd)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int err;

	strcpy(sa.sun_path, path);
	*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*fd < 0)
		return -errno;
	/* a whole batch request in one send */
	(void)setsockopt(*fd, SOL_SOCKET, SO_SNDBUF, &(int){WIRE_SNDBUF}, sizeof(int));
	err = ramster_connect(*fd, &sa);
	if (err) {
		close(*fd);
		*fd = -1;
	}
	return err;
}

ramster *ramster_open(const char *socket_path)
{
	ramster *r;
	int err;

	if (!socket_path) {
		/* secure_getenv: a setuid caller must not be pointed at a stranger's node */
		socket_path = secure_getenv("RAMSTER_SOCKET");
		if (!socket_path || !*socket_path)
			socket_path = RAMSTER_DEFAULT_SOCKET;
	}
	if (!*socket_path) {
		errno = EINVAL;
		return NULL;
	}
	if (strlen(socket_path) >= sizeof(r->path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}

	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	err = wire_arena_init(&r->arena, RAMSTER_ARENA_SIZE);
	if (err)
		goto free_r;
	err = lib_dial(socket_path, &r->fd);
	if (err)
		goto fini_arena;
	r->poll_ns = ramster_env_poll_ns();
	r->reconnect_ms = lib_env_reconnect_ms();
	strcpy(r->path, socket_path);
	return r;

fini_arena:
	wire_arena_fini(&r->arena);
free_r:
	free(r);
	errno = -err;
	return NULL;
}

/* A second connection to r's node, with r's reconnect budget (lib/internal.h). */
ramster *lib_ramster_reopen(const ramster *r)
{
	ramster *c = ramster_open(r->path);

	if (c)
		c->reconnect_ms = r->reconnect_ms;
	return c;
}

void ramster_close(ramster *r)
{
	if (!r)
		return;
	lib_pools_release(r);
	lib_break(r);
	wire_arena_fini(&r->arena);
	free(r->tx);
	free(r->rx);
	free(r->pools);
	free(r);
}

/* ---- pools ------------------------------------------------------------------ */

int ramster_pool_new(ramster *r, unsigned flags, const unsigned char uuid[16])
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;
	Ramster__Response *rsp;
	unsigned mode = (flags >> 8) & 0777u;
	int err;

	flags &= ~RAMSTER_POOL_MODE(0777);
	if (!r || (flags & ~(unsigned)(RAMSTER_PERSISTENT | RAMSTER_SHARED)))
		return -EINVAL;
	if (!(flags & RAMSTER_SHARED) != !uuid)
		return -EINVAL;
	if (mode && !(flags & RAMSTER_SHARED))
		return -EINVAL;
	req.op = RAMSTER__OP__OP_POOL_NEW;
	req.flags = flags;
	req.mode = mode;
	if (uuid) {
		req.uuid.data = (uint8_t *)uuid;
		req.uuid.len = 16;
	}
	/* room for its entry first: a pool made on the node is never lost track of */
	err = lib_pool_reserve(r);
	if (err)
		return err;
	err = lib_call(r, &req, NULL, 1, &rsp);
	if (err)
		return err;
	err = rsp->result;
	if (err >= 0)
		err = lib_pool_add(r, err, rsp->token.len == 16 ? rsp->token.data : NULL);
	ramster__response__free_unpacked(rsp, &r->arena.pa);
	return err;
}

int ramster_pool_destroy(ramster *r, int pool)
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;
	int err;

	if (!r || pool < 0)
		return -EINVAL;
	req.op = RAMSTER__OP__OP_POOL_DESTROY;
	req.pool = pool;
	err = ramster_simple(r, &req);
	if (!err || err == -ESTALE)
		lib_pool_forget(r, pool); /* a stale pool is gone already: only its id is left */
	return err == -ESTALE ? 0 : err;
}

/* ---- pages ------------------------------------------------------------------ */

/* One round trip for v[0..n), n <= RAMSTER_BATCH_MAX. @return hits/stores or -errno. */
static int ramster_batch(ramster *r, Ramster__Op op, int pool, struct ramster_iov *v, size_t n)
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;
	Ramster__Response *rsp;
	size_t i;
	int err, ok = 0;

	for (i = 0; i < n; i++) {
		ramster__item__init(&r->items[i]);
		r->items[i].oid0 = v[i].oid.w[0];
		r->items[i].oid1 = v[i].oid.w[1];
		r->items[i].oid2 = v[i].oid.w[2];
		r->items[i].index = v[i].index;
		r->item_ptrs[i] = &r->items[i];
	}
	req.op = op;
	req.pool = pool;
	req.items = r->item_ptrs;
	req.n_items = n;
	err = lib_call(r, &req, v, 1, &rsp);
	if (err)
		return err;
	if (rsp->result < 0) {
		err = rsp->result;
		for (i = 0; i < n; i++)
			v[i].result = err;
		ramster__response__free_unpacked(rsp, &r->arena.pa);
		return err;
	}
	for (i = 0; i < n; i++) {
		v[i].result = rsp->results[i];
		ok += v[i].result == 0;
	}
	ramster__response__free_unpacked(rsp, &r->arena.pa);
	return ok;
}

/* Check every argument before the first byte goes out, then go a batch at a time. */
static int ramster_vector(ramster *r, Ramster__Op op, int pool, struct ramster_iov *v, size_t n)
{
	size_t i, k;
	int rc, ok = 0;

	if (!r || pool < 0 || (n && !v) || n > INT_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (!v[i].page)
			return -EINVAL;
	for (i = 0; i < n; i += k) {
		k = n - i < RAMSTER_BATCH_MAX ? n - i : RAMSTER_BATCH_MAX;
		rc = ramster_batch(r, op, pool, v + i, k);
		if (rc < 0)
			return rc;
		ok += rc;
	}
	return ok;
}

int ramster_putv(ramster *r, int pool, struct ramster_iov *v, size_t n)
{
	return ramster_vector(r, RAMSTER__OP__OP_PUT, pool, v, n);
}

int ramster_getv(ramster *r, int pool, struct ramster_iov *v, size_t n)
{
	return ramster_vector(r, RAMSTER__OP__OP_GET, pool, v, n);
}

/* A single put/get is a batch of one; its result is the item's. */
static int ramster_single(ramster *r, Ramster__Op op, int pool, const struct ramster_oid *oid,
			  uint32_t index, void *page)
{
	struct ramster_iov one;
	int rc;

	if (!oid)
		return -EINVAL;
	one.oid = *oid;
	one.index = index;
	one.page = page;
	one.result = 0;
	rc = ramster_vector(r, op, pool, &one, 1);
	return rc < 0 ? rc : one.result;
}

int ramster_put(ramster *r, int pool, const struct ramster_oid *oid, uint32_t index,
		const void *page)
{
	/* the page is only ever sent, never written */
	return ramster_single(r, RAMSTER__OP__OP_PUT, pool, oid, index, (void *)page);
}

int ramster_get(ramster *r, int pool, const struct ramster_oid *oid, uint32_t index, void *page)
{
	return ramster_single(r, RAMSTER__OP__OP_GET, pool, oid, index, page);
}

int ramster_flush(ramster *r, int pool, const struct ramster_oid *oid, uint32_t index)
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;

	if (!r || pool < 0 || !oid)
		return -EINVAL;
	req.op = RAMSTER__OP__OP_FLUSH;
	req.pool = pool;
	ramster_one_item(r, &req, oid, index);
	return ramster_simple(r, &req);
}

int ramster_flush_object(ramster *r, int pool, const struct ramster_oid *oid)
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;

	if (!r || pool < 0 || !oid)
		return -EINVAL;
	req.op = RAMSTER__OP__OP_FLUSH_OBJECT;
	req.pool = pool;
	ramster_one_item(r, &req, oid, 0);
	return ramster_simple(r, &req);
}

/* ---- administration ------------------------------------------------------------------ */

/* One admin round trip, its response malloc'd (it may be large). */
static int ramster_admin(ramster *r, Ramster__Op op, Ramster__Response **out)
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;
	int err;

	if (!r)
		return -EINVAL;
	req.op = op;
	err = lib_call(r, &req, NULL, 0, out);
	if (err)
		return err;
	if ((*out)->result < 0) {
		err = (*out)->result;
		ramster__response__free_unpacked(*out, NULL);
	}
	return err;
}

int ramster_stats(ramster *r, struct ramster_stat **out, size_t *n)
{
	Ramster__Response *rsp;
	struct ramster_stat *s = NULL;
	size_t i = 0;
	int err;

	if (!out || !n)
		return -EINVAL;
	err = ramster_admin(r, RAMSTER__OP__OP_STATS, &rsp);
	if (err)
		return err;
	if (rsp->n_stats) {
		s = calloc(rsp->n_stats, sizeof(*s));
		if (!s)
			goto nomem;
	}
	for (i = 0; i < rsp->n_stats; i++) {
		s[i].name = strdup(rsp->stats[i]->name);
		if (!s[i].name)
			goto nomem;
		s[i].value = rsp->stats[i]->value;
	}
	*out = s;
	*n = rsp->n_stats;
	ramster__response__free_unpacked(rsp, NULL);
	return 0;

nomem:
	ramster_stats_free(s, i);
	ramster__response__free_unpacked(rsp, NULL);
	return -ENOMEM;
}

/* The node sends every counter: pick one out of the response, copying nothing else. */
int ramster_stat(ramster *r, const char *name, uint64_t *value)
{
	Ramster__Response *rsp;
	size_t i;
	int err;

	if (!name || !value)
		return -EINVAL;
	err = ramster_admin(r, RAMSTER__OP__OP_STATS, &rsp);
	if (err)
		return err;
	err = -ENOENT;
	for (i = 0; i < rsp->n_stats; i++) {
		if (rsp->stats[i]->name && !strcmp(rsp->stats[i]->name, name)) {
			*value = rsp->stats[i]->value;
			err = 0;
			break;
		}
	}
	ramster__response__free_unpacked(rsp, NULL);
	return err;
}

void ramster_stats_free(struct ramster_stat *s, size_t n)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < n; i++)
		free(s[i].name);
	free(s);
}

int ramster_status(ramster *r, struct ramster_kv **out, size_t *n)
{
	Ramster__Response *rsp;
	struct ramster_kv *kv = NULL;
	size_t i = 0;
	int err;

	if (!out || !n)
		return -EINVAL;
	err = ramster_admin(r, RAMSTER__OP__OP_STATUS, &rsp);
	if (err)
		return err;
	if (rsp->n_status) {
		kv = calloc(rsp->n_status, sizeof(*kv));
		if (!kv)
			goto nomem;
	}
	for (i = 0; i < rsp->n_status; i++) {
		kv[i].key = strdup(rsp->status[i]->key);
		kv[i].value = strdup(rsp->status[i]->value);
		if (!kv[i].key || !kv[i].value) {
			i++; /* this entry is half made: free it too */
			goto nomem;
		}
	}
	*out = kv;
	*n = rsp->n_status;
	ramster__response__free_unpacked(rsp, NULL);
	return 0;

nomem:
	ramster_kv_free(kv, i);
	ramster__response__free_unpacked(rsp, NULL);
	return -ENOMEM;
}

/* An admin op whose answer is a result and status lines (RELOAD, RESTART). */
static int lib_kv_call(ramster *r, int op, struct ramster_kv **out, size_t *n)
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;
	Ramster__Response *rsp;
	struct ramster_kv *kv = NULL;
	size_t i = 0;
	int err;

	req.op = op;
	err = lib_call(r, &req, NULL, 0, &rsp);
	if (err)
		return err;
	/* the lines come with a refusal too: they say why */
	if (rsp->n_status) {
		kv = calloc(rsp->n_status, sizeof(*kv));
		if (!kv)
			goto nomem;
	}
	for (i = 0; i < rsp->n_status; i++) {
		kv[i].key = strdup(rsp->status[i]->key);
		kv[i].value = strdup(rsp->status[i]->value);
		if (!kv[i].key || !kv[i].value) {
			i++;
			goto nomem;
		}
	}
	*out = kv;
	*n = rsp->n_status;
	err = rsp->result;
	ramster__response__free_unpacked(rsp, NULL);
	return err;

nomem:
	ramster_kv_free(kv, i);
	ramster__response__free_unpacked(rsp, NULL);
	return -ENOMEM;
}

int ramster_reload(ramster *r, struct ramster_kv **out, size_t *n)
{
	if (!r || !out || !n)
		return -EINVAL;
	return lib_kv_call(r, RAMSTER__OP__OP_RELOAD, out, n);
}

int ramster_restart(ramster *r, struct ramster_kv **out, size_t *n)
{
	struct ramster_kv *kv = NULL;
	size_t k = 0;
	uint32_t keep;
	int rc;

	if (!r)
		return -EINVAL;
	/* a reply lost to the exec must not be asked again of the new process */
	keep = r->reconnect_ms;
	r->reconnect_ms = 0;
	rc = lib_kv_call(r, RAMSTER__OP__OP_RESTART, &kv, &k);
	r->reconnect_ms = keep;
	if (out && n) {
		*out = kv;
		*n = k;
	} else {
		ramster_kv_free(kv, k);
	}
	return rc;
}

void ramster_kv_free(struct ramster_kv *kv, size_t n)
{
	size_t i;

	if (!kv)
		return;
	for (i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

static void copy_str(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

/*
 * An admin listing: the op that asks for it, where the response keeps its
 * count of entries, and how to copy entry i into the caller's array.
 */
struct ramster_lister {
	Ramster__Op op;
	size_t count_off; /* offsetof(Ramster__Response, n_...) */
	size_t elem;	  /* bytes a caller's entry */
	/* Fill dst (zeroed) from the response's entry i. */
	void (*fill)(void *dst, const Ramster__Response *rsp, size_t i);
};

/*
 * Run l's op and copy its entries into a new array (NULL for none) of *n
 * entries, freed with free(3), stored in the pointer out points to: a
 * struct ramster_..._info *, whose representation is a void *'s on every
 * ABI libramster builds for (POSIX). @return 0 or -errno.
 */
static int ramster_list(ramster *r, const struct ramster_lister *l, void *out, size_t *n)
{
	Ramster__Response *rsp;
	void *arr = NULL;
	size_t i, cnt;
	int err;

	if (!out || !n)
		return -EINVAL;
	err = ramster_admin(r, l->op, &rsp);
	if (err)
		return err;
	cnt = *(const size_t *)((const char *)rsp + l->count_off);
	if (cnt) {
		arr = calloc(cnt, l->elem);
		if (!arr) {
			ramster__response__free_unpacked(rsp, NULL);
			return -ENOMEM;
		}
	}
	for (i = 0; i < cnt; i++)
		l->fill((char *)arr + i * l->elem, rsp, i);
	memcpy(out, &arr, sizeof(arr));
	*n = cnt;
	ramster__response__free_unpacked(rsp, NULL);
	return 0;
}

static void fill_peer(void *dst, const Ramster__Response *rsp, size_t i)
{
	const Ramster__PeerInfo *pi = rsp->peers[i];
	struct ramster_peer_info *p = dst;

	p->id = pi->id;
	copy_str(p->name, sizeof(p->name), pi->name);
	copy_str(p->address, sizeof(p->address), pi->address);
	copy_str(p->state, sizeof(p->state), pi->state);
	copy_str(p->transport, sizeof(p->transport), pi->transport);
	copy_str(p->device, sizeof(p->device), pi->device);
	p->incarnation = pi->incarnation;
	p->epoch = pi->epoch;
	p->rtt_us = pi->rtt_us;
	p->donate_free = pi->donate_free;
	p->donate_total = pi->donate_total;
	p->pages_lent = pi->pages_lent;
	p->pages_borrowed = pi->pages_borrowed;
	p->ups = pi->ups;
	p->deaths = pi->deaths;
}

static void fill_export(void *dst, const Ramster__Response *rsp, size_t i)
{
	const Ramster__ExportInfo *ei = rsp->exports[i];
	struct ramster_export_info *p = dst;

	copy_str(p->name, sizeof(p->name), ei->name);
	copy_str(p->backing, sizeof(p->backing), ei->backing);
	p->size = ei->size;
	p->pages_local = ei->pages_local;
	p->pages_remote = ei->pages_remote;
	p->pages_backing = ei->pages_backing;
	p->clients = ei->clients;
	p->requests = ei->requests;
	p->errors = ei->errors;
}

static void fill_pool(void *dst, const Ramster__Response *rsp, size_t i)
{
	const Ramster__PoolInfo *pi = rsp->pools[i];
	struct ramster_pool_info *p = dst;

	p->id = pi->id;
	p->flags = pi->flags;
	/* the decoder allows 0 or 16 bytes */
	if (pi->uuid.len == sizeof(p->uuid))
		memcpy(p->uuid, pi->uuid.data, sizeof(p->uuid));
	p->clients = pi->clients;
	p->objects = pi->objects;
	p->pages = pi->pages;
}

static void fill_client(void *dst, const Ramster__Response *rsp, size_t i)
{
	const Ramster__ClientInfo *ci = rsp->clients[i];
	struct ramster_client_info *p = dst;

	p->uid = ci->uid;
	p->connections = ci->connections;
	p->pools = ci->pools;
	p->pages = ci->pages;
	p->pages_remote = ci->pages_remote;
	p->bytes_in = ci->bytes_in;
	p->bytes_out = ci->bytes_out;
	p->refusals = ci->refusals;
	p->max_mb = ci->max_mb;
	p->weight = ci->weight;
}

#define RAMSTER_LISTER(op_, field, type, fill_)                                             \
	{ .op = (op_), .count_off = offsetof(Ramster__Response, n_##field),                 \
	  .elem = sizeof(type), .fill = (fill_) }

static const struct ramster_lister peer_lister =
    RAMSTER_LISTER(RAMSTER__OP__OP_PEERS, peers, struct ramster_peer_info, fill_peer);
static const struct ramster_lister export_lister =
    RAMSTER_LISTER(RAMSTER__OP__OP_EXPORTS, exports, struct ramster_export_info, fill_export);
static const struct ramster_lister pool_lister =
    RAMSTER_LISTER(RAMSTER__OP__OP_POOLS, pools, struct ramster_pool_info, fill_pool);
static const struct ramster_lister client_lister =
    RAMSTER_LISTER(RAMSTER__OP__OP_CLIENTS, clients, struct ramster_client_info, fill_client);

int ramster_peers(ramster *r, struct ramster_peer_info **out, size_t *n)
{
	return ramster_list(r, &peer_lister, out, n);
}

int ramster_exports(ramster *r, struct ramster_export_info **out, size_t *n)
{
	return ramster_list(r, &export_lister, out, n);
}

int ramster_pools(ramster *r, struct ramster_pool_info **out, size_t *n)
{
	return ramster_list(r, &pool_lister, out, n);
}

int ramster_clients(ramster *r, struct ramster_client_info **out, size_t *n)
{
	return ramster_list(r, &client_lister, out, n);
}
