/*
 * nbd.c - the NBD frontend (nbd.h): listeners, the handshake, and the
 * transmission phase over the exports' tmem pools.
 *
 * Requests of a connection run in order; replies are queued in its output
 * buffer and sent in one go. A request that waits (a remote page, room in the
 * tier, another connection's FLUSH) holds the connection: its bytes stay in
 * the input buffer, nothing else is read or run until it is answered, and a
 * READ reply being built stays put in the output buffer (no realloc, no
 * compaction) while remote gets write into it.
 *
 * Backing invariants, per block: in_backing set = the file alone holds the
 * data (tmem has none); dirty set = tmem holds data the file may not. A
 * FLUSH clears dirty bits as it fetches, and writes a fetched page only if
 * neither bit was set again meanwhile (a newer write wins); one FLUSH runs
 * on an export at a time.
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

#include <ev.h>

#include "node/log.h"
#include "node/nbd.h"

/* ---- the protocol (the NBD project's doc/proto.md) ------------------------------ */

#define NBD_MAGIC	       0x4e42444d41474943ull /* "NBDMAGIC" */
#define NBD_IHAVEOPT	       0x49484156454f5054ull /* "IHAVEOPT" */
#define NBD_REP_MAGIC	       0x0003e889045565a9ull
#define NBD_REQUEST_MAGIC      0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u

/* handshake flags (server) and client flags */
#define NBD_FLAG_FIXED_NEWSTYLE	  (1u << 0)
#define NBD_FLAG_NO_ZEROES	  (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES	  (1u << 1)

/* options */
#define NBD_OPT_EXPORT_NAME	 1u
#define NBD_OPT_ABORT		 2u
#define NBD_OPT_LIST		 3u
#define NBD_OPT_INFO		 6u
#define NBD_OPT_GO		 7u
#define NBD_OPT_STRUCTURED_REPLY 8u

/* option replies */
#define NBD_REP_ACK	    1u
#define NBD_REP_SERVER	    2u
#define NBD_REP_INFO	    3u
#define NBD_REP_ERR_UNSUP   ((1u << 31) + 1)
#define NBD_REP_ERR_INVALID ((1u << 31) + 3)
#define NBD_REP_ERR_UNKNOWN ((1u << 31) + 6)

/* information types */
#define NBD_INFO_EXPORT	    0u
#define NBD_INFO_NAME	    1u
#define NBD_INFO_BLOCK_SIZE 3u

/* transmission flags */
#define NBD_FLAG_HAS_FLAGS	   (1u << 0)
#define NBD_FLAG_SEND_FLUSH	   (1u << 2)
#define NBD_FLAG_SEND_FUA	   (1u << 3)
#define NBD_FLAG_SEND_TRIM	   (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_CAN_MULTI_CONN	   (1u << 8)

/* command flags */
#define NBD_CMD_FLAG_FUA     (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)

/* commands */
#define NBD_CMD_READ	     0u
#define NBD_CMD_WRITE	     1u
#define NBD_CMD_DISC	     2u
#define NBD_CMD_FLUSH	     3u
#define NBD_CMD_TRIM	     4u
#define NBD_CMD_CACHE	     5u /* not offered */
#define NBD_CMD_WRITE_ZEROES 6u
#define NBD_CMDS	     7u

/* error values */
#define NBD_EIO	   5u
#define NBD_ENOMEM 12u
#define NBD_EINVAL 22u
#define NBD_ENOSPC 28u

#define NBD_HANDSHAKE_FLAGS (NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES)
#define NBD_TRANSMIT_FLAGS                                                                         \
	(NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_TRIM |       \
	 NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_CAN_MULTI_CONN)

#define NBD_OPT_HDR	 16u
#define NBD_REQ_HDR	 28u
#define NBD_REPLY_HDR	 16u
#define NBD_OPT_MAX	 (64u * 1024) /* longest option data taken */
#define NBD_BLOCK_MIN	 512u
#define NBD_PAGE	 4096u
#define NBD_PAYLOAD_MAX	 (32u * 1024 * 1024) /* maximum block size advertised */
#define NBD_OBJ_SHIFT	 20                  /* 2^20 pages an object */
#define NBD_OBJ_PAGES	 (1ull << NBD_OBJ_SHIFT)

/* ---- tunables ------------------------------------------------------------------ */

#define NBD_IN_MIN	  (256u * 1024) /* input buffer to start with */
#define NBD_OUT_HIGH	  (4u * 1024 * 1024) /* stop running requests above this unsent */
#define NBD_FLUSH_BATCH	  256u          /* pages a FLUSH fetches at a time */
#define NBD_ACCEPT_BURST  64

/* ---- structures ---------------------------------------------------------------- */

struct nbd_conn;

struct nbd_export {
	struct nbd *srv;
	unsigned number; /* oid word 0 */
	char name[CONFIG_NAME_MAX];
	char backing[CONFIG_PATH_MAX];
	uint64_t size, blocks;
	uint32_t pool;
	bool has_pool;
	int fd;               /* backing file, or -1 */
	uint64_t *present;    /* 1: the block may be in tmem */
	uint64_t *in_backing; /* 1: the file alone holds the block (backing only) */
	uint64_t *dirty;      /* 1: tmem holds data the file may lack (backing only) */
	uint64_t backing_pages;          /* bits set in in_backing */
	struct nbd_conn *flusher;        /* the connection whose FLUSH runs now */
	struct nbd_conn *flush_q, **flush_tail; /* FLUSHes waiting for it, in order */
	uint64_t clients;                /* connections attached now */
	uint64_t requests;               /* requests served */
	uint64_t errors;                 /* error replies */
};

struct nbd_stats {
	uint64_t conns;           /* connections open now */
	uint64_t conns_total;     /* accepted since start */
	uint64_t accept_errors;   /* failed accepts */
	uint64_t bad_handshakes;  /* connections closed for a handshake violation */
	uint64_t bad_requests;    /* connections closed for a request that broke the stream */
	uint64_t io_errors;       /* connections closed on a socket error */
	uint64_t oom_closes;      /* connections closed for want of memory */
	uint64_t requests[NBD_CMDS]; /* requests by command */
	uint64_t invalid;         /* requests answered EINVAL/ENOSPC by validation */
	uint64_t errors;          /* error replies of any kind */
	uint64_t bytes_read;      /* READ bytes answered */
	uint64_t bytes_written;   /* WRITE bytes taken */
	uint64_t put_refused;     /* pages the tier refused */
	uint64_t refused_lost;    /* of those, failed writes (no backing) */
	uint64_t backing_writes;  /* pages written to backing files */
	uint64_t backing_reads;   /* pages read from backing files */
	uint64_t backing_errors;  /* backing file I/O errors */
	uint64_t remote_gets;     /* pages fetched from peers */
	uint64_t remote_waits;    /* requests that waited on the collective */
	uint64_t room_waits;      /* writes that waited for remotify to make room */
	uint64_t room_refused;    /* ... and were refused all the same */
	uint64_t flush_pages;     /* pages written behind by FLUSH and FUA */
	uint64_t flush_waits;     /* FLUSHes that waited for another connection's */
	uint64_t syncs;           /* fdatasync calls */
};

struct nbd_listener {
	ev_io io; /* first */
	struct nbd *srv;
	int fd;
	bool is_unix;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t dev; /* the socket file we made, to unlink only ours */
	ino_t ino;
};

struct nbd {
	struct ev_loop *loop;
	struct store *store;
	struct nbd_listener lunix, ltcp;
	size_t n_exports;
	struct nbd_export *exports;
	struct nbd_conn *conns;
	uint64_t next_id;
	struct nbd_stats st;
	char describe[CONFIG_PATH_MAX + CONFIG_NAME_MAX + 32];
};

/* A page being fetched for a waiting request. */
struct nbd_slot {
	struct nbd_conn *c;
	uint64_t block;
	uint8_t *page;   /* where the page lands */
	uint8_t *dst;    /* then [off, off+len) of it is copied here (NULL: no copy) */
	unsigned off, len;
	int result;
};

struct nbd_req {
	uint16_t flags, type;
	uint64_t cookie, offset;
	uint32_t len;
	const uint8_t *payload; /* WRITE: in the input buffer; NULL: zeros */
};

struct nbd_conn {
	ev_io io; /* first: the watcher's address is the connection's */
	struct nbd *srv;
	struct nbd_conn *next, *prev;
	uint64_t id;
	int fd;
	bool got_flags, no_zeroes, transmit;
	bool closing; /* close once the output is sent (ABORT, DISC) */
	bool closed;  /* closed while remote gets were out: the last one frees it */
	struct nbd_export *exp;
	uint8_t *in; /* received: in[in_off..in_len) not yet taken */
	size_t in_off, in_len, in_cap, in_need;
	uint8_t *out; /* unsent: out[out_off..out_len) */
	size_t out_off, out_len, out_cap;

	/* the request that waits (busy) */
	bool busy;
	struct nbd_req req;
	int (*cont)(struct nbd_conn *c); /* runs when the wait ends: 0 answered, 1 waits, -1 closed */
	unsigned pending;                /* remote gets out, plus one while starting */
	int err;                         /* its first error, -errno */
	uint64_t cursor;                 /* WRITE: the next block to store; FLUSH: to look at */
	size_t reply_at;                 /* READ: its reply at out + reply_at (building) */
	bool building;
	struct store_req put;            /* WRITE: the store's state of its puts (room waits) */
	uint8_t edge[2][NBD_PAGE];       /* head and tail pages of a partial write or read */
	struct nbd_slot *slots;
	size_t n_slots, slots_cap;
	uint8_t *scratch;                /* FLUSH: NBD_FLUSH_BATCH pages */
	struct nbd_conn *flush_next;     /* in the export's FLUSH queue */
	bool flush_queued;
};

static const uint8_t nbd_zero_page[NBD_PAGE];

/* ---- helpers ------------------------------------------------------------------- */

static void nbd_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void nbd_be32(uint8_t *p, uint32_t v)
{
	nbd_be16(p, (uint16_t)(v >> 16));
	nbd_be16(p + 2, (uint16_t)v);
}

static void nbd_be64(uint8_t *p, uint64_t v)
{
	nbd_be32(p, (uint32_t)(v >> 32));
	nbd_be32(p + 4, (uint32_t)v);
}

static uint16_t nbd_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t nbd_get32(const uint8_t *p)
{
	return (uint32_t)nbd_get16(p) << 16 | nbd_get16(p + 2);
}

static uint64_t nbd_get64(const uint8_t *p)
{
	return (uint64_t)nbd_get32(p) << 32 | nbd_get32(p + 4);
}

static bool bit_test(const uint64_t *map, uint64_t b)
{
	return map[b >> 6] >> (b & 63) & 1;
}

static void bit_set(uint64_t *map, uint64_t b)
{
	map[b >> 6] |= 1ull << (b & 63);
}

static void bit_clear(uint64_t *map, uint64_t b)
{
	map[b >> 6] &= ~(1ull << (b & 63));
}

/* @return the first set bit >= from and < end, or end. */
static uint64_t bit_next(const uint64_t *map, uint64_t from, uint64_t end)
{
	uint64_t w;

	while (from < end) {
		w = map[from >> 6] >> (from & 63);
		if (w)
			return from + (uint64_t)__builtin_ctzll(w) < end
				   ? from + (uint64_t)__builtin_ctzll(w)
				   : end;
		from = (from | 63) + 1;
	}
	return end;
}

static struct tmem_oid nbd_oid(const struct nbd_export *e, uint64_t b)
{
	struct tmem_oid oid = {{e->number, b >> NBD_OBJ_SHIFT, 0}};

	return oid;
}

static uint32_t nbd_index(uint64_t b)
{
	return (uint32_t)(b & (NBD_OBJ_PAGES - 1));
}

/* The file alone holds b (false) no more. */
static void nbd_backing_drop(struct nbd_export *e, uint64_t b)
{
	if (e->in_backing && bit_test(e->in_backing, b)) {
		bit_clear(e->in_backing, b);
		e->backing_pages--;
	}
}

/* Make *buf hold at least need bytes, keeping its contents. @return 0 or -ENOMEM. */
static int nbd_reserve(uint8_t **buf, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap * 2 : need;
	uint8_t *p;

	if (need <= *cap)
		return 0;
	if (n < need)
		n = need;
	p = realloc(*buf, n);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n;
	return 0;
}

static uint32_t nbd_errno(int err)
{
	switch (err) {
	case -EINVAL:
		return NBD_EINVAL;
	case -ENOSPC:
		return NBD_ENOSPC;
	case -ENOMEM:
		return NBD_ENOMEM;
	default:
		return NBD_EIO;
	}
}

/* ---- connections --------------------------------------------------------------- */

static void nbd_conn_free(struct nbd_conn *c)
{
	free(c->in);
	free(c->out);
	free(c->slots);
	free(c->scratch);
	free(c);
}

static int nbd_flush_run(struct nbd_conn *c);
static void nbd_flush_release(struct nbd_export *e);

static void nbd_close(struct nbd_conn *c, const char *why)
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
	if (c->pending) {
		c->closed = true; /* the last remote get frees it */
		return;
	}
	nbd_conn_free(c);
}

/* A peer that broke the protocol: count it and close. @return -1. */
static int nbd_violation(struct nbd_conn *c, uint64_t *counter, const char *why)
{
	(*counter)++;
	log_info("nbd connection %llu: %s: closing", (unsigned long long)c->id, why);
	nbd_close(c, why);
	return -1;
}

static void nbd_watch(struct nbd_conn *c)
{
	struct ev_loop *loop = c->srv->loop;
	int ev = 0;

	if (c->out_off < c->out_len)
		ev |= EV_WRITE;
	if (!c->busy && !c->closing && c->out_len - c->out_off < NBD_OUT_HIGH)
		ev |= EV_READ;
	if (ev_is_active(&c->io) && (c->io.events & (EV_READ | EV_WRITE)) == ev)
		return;
	ev_io_stop(loop, &c->io);
	if (!ev)
		return;
	ev_io_set(&c->io, c->fd, ev);
	ev_io_start(loop, &c->io);
}

/* Send what is queued. @return 0 (maybe some left), or -1 closed. */
static int nbd_send(struct nbd_conn *c)
{
	ssize_t k;

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
			return -1;
		}
		c->out_off += (size_t)k;
	}
	if (!c->building)
		c->out_off = c->out_len = 0;
	if (c->closing && !c->busy) {
		nbd_close(c, "closed by the client");
		return -1;
	}
	return 0;
}

/* Room for len more bytes of output. @return where they go, or NULL (closed). */
static uint8_t *nbd_out(struct nbd_conn *c, size_t len)
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

/* ---- handshake ----------------------------------------------------------------- */

static struct nbd_export *nbd_find(struct nbd *n, const uint8_t *name, size_t len)
{
	size_t i;

	if (!len) /* the default export: the first */
		return n->n_exports ? &n->exports[0] : NULL;
	for (i = 0; i < n->n_exports; i++)
		if (strlen(n->exports[i].name) == len && !memcmp(n->exports[i].name, name, len))
			return &n->exports[i];
	return NULL;
}

/* Queue an option reply. @return 0, or -1 closed. */
static int nbd_opt_reply(struct nbd_conn *c, uint32_t opt, uint32_t type, const void *data,
			 size_t len)
{
	uint8_t *p = nbd_out(c, 20 + len);

	if (!p)
		return -1;
	nbd_be64(p, NBD_REP_MAGIC);
	nbd_be32(p + 8, opt);
	nbd_be32(p + 12, type);
	nbd_be32(p + 16, (uint32_t)len);
	if (len)
		memcpy(p + 20, data, len);
	return 0;
}

static int nbd_opt_error(struct nbd_conn *c, uint32_t opt, uint32_t type, const char *msg)
{
	return nbd_opt_reply(c, opt, type, msg, strlen(msg));
}

static void nbd_attach(struct nbd_conn *c, struct nbd_export *e)
{
	c->exp = e;
	c->transmit = true;
	e->clients++;
	log_debug("nbd connection %llu: export %s", (unsigned long long)c->id, e->name);
}

/* NBD_OPT_INFO and NBD_OPT_GO. @return 0, or -1 closed. */
static int nbd_opt_info(struct nbd_conn *c, uint32_t opt, const uint8_t *d, uint32_t len)
{
	struct nbd_export *e;
	uint8_t info[14];
	uint32_t nlen;
	uint16_t nreq, i;
	bool want_name = false;

	if (len < 6)
		return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "option data too short");
	nlen = nbd_get32(d);
	if (nlen > len - 6)
		return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "name length past the option");
	nreq = nbd_get16(d + 4 + nlen);
	if ((uint64_t)len != 6 + (uint64_t)nlen + 2u * nreq)
		return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "option length mismatch");
	for (i = 0; i < nreq; i++)
		if (nbd_get16(d + 6 + nlen + 2u * i) == NBD_INFO_NAME)
			want_name = true;
	e = nbd_find(c->srv, d + 4, nlen);
	if (!e)
		return nbd_opt_error(c, opt, NBD_REP_ERR_UNKNOWN, "no such export");
	nbd_be16(info, NBD_INFO_EXPORT);
	nbd_be64(info + 2, e->size);
	nbd_be16(info + 10, NBD_TRANSMIT_FLAGS);
	if (nbd_opt_reply(c, opt, NBD_REP_INFO, info, 12))
		return -1;
	nbd_be16(info, NBD_INFO_BLOCK_SIZE);
	nbd_be32(info + 2, NBD_BLOCK_MIN);
	nbd_be32(info + 6, NBD_PAGE);
	nbd_be32(info + 10, NBD_PAYLOAD_MAX);
	if (nbd_opt_reply(c, opt, NBD_REP_INFO, info, 14))
		return -1;
	if (want_name) {
		uint8_t nm[2 + CONFIG_NAME_MAX];
		size_t l = strlen(e->name);

		nbd_be16(nm, NBD_INFO_NAME);
		memcpy(nm + 2, e->name, l);
		if (nbd_opt_reply(c, opt, NBD_REP_INFO, nm, 2 + l))
			return -1;
	}
	if (nbd_opt_reply(c, opt, NBD_REP_ACK, NULL, 0))
		return -1;
	if (opt == NBD_OPT_GO)
		nbd_attach(c, e);
	return 0;
}

static int nbd_opt_list(struct nbd_conn *c, uint32_t len)
{
	uint8_t d[4 + CONFIG_NAME_MAX];
	size_t i, l;

	if (len)
		return nbd_opt_error(c, NBD_OPT_LIST, NBD_REP_ERR_INVALID, "LIST takes no data");
	for (i = 0; i < c->srv->n_exports; i++) {
		l = strlen(c->srv->exports[i].name);
		nbd_be32(d, (uint32_t)l);
		memcpy(d + 4, c->srv->exports[i].name, l);
		if (nbd_opt_reply(c, NBD_OPT_LIST, NBD_REP_SERVER, d, 4 + l))
			return -1;
	}
	return nbd_opt_reply(c, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
}

/* One handshake step. @return 1 progress, 0 more bytes needed, -1 closed. */
static int nbd_negotiate(struct nbd_conn *c)
{
	const uint8_t *p = c->in + c->in_off;
	size_t avail = c->in_len - c->in_off;
	uint32_t flags, opt, len;
	struct nbd_export *e;

	if (!c->got_flags) {
		if (avail < 4) {
			c->in_need = 4;
			return 0;
		}
		flags = nbd_get32(p);
		if (flags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES))
			return nbd_violation(c, &c->srv->st.bad_handshakes, "unknown client flags");
		c->no_zeroes = flags & NBD_FLAG_C_NO_ZEROES;
		c->got_flags = true;
		c->in_off += 4;
		return 1;
	}
	if (avail < NBD_OPT_HDR) {
		c->in_need = NBD_OPT_HDR;
		return 0;
	}
	if (nbd_get64(p) != NBD_IHAVEOPT)
		return nbd_violation(c, &c->srv->st.bad_handshakes, "bad option magic");
	opt = nbd_get32(p + 8);
	len = nbd_get32(p + 12);
	if (len > NBD_OPT_MAX)
		return nbd_violation(c, &c->srv->st.bad_handshakes, "option data too long");
	if (avail < NBD_OPT_HDR + len) {
		c->in_need = NBD_OPT_HDR + len;
		return 0;
	}
	c->in_off += NBD_OPT_HDR + len; /* p stays valid: nothing compacts meanwhile */
	p += NBD_OPT_HDR;
	switch (opt) {
	case NBD_OPT_EXPORT_NAME:
		e = nbd_find(c->srv, p, len);
		if (!e) /* no way to say so: the spec has the server close */
			return nbd_violation(c, &c->srv->st.bad_handshakes, "unknown export name");
		{
			uint8_t *r = nbd_out(c, c->no_zeroes ? 10 : 134);

			if (!r)
				return -1;
			nbd_be64(r, e->size);
			nbd_be16(r + 8, NBD_TRANSMIT_FLAGS);
			if (!c->no_zeroes)
				memset(r + 10, 0, 124);
		}
		nbd_attach(c, e);
		return 1;
	case NBD_OPT_ABORT:
		c->closing = true;
		return nbd_opt_reply(c, opt, NBD_REP_ACK, NULL, 0) ? -1 : 1;
	case NBD_OPT_LIST:
		return nbd_opt_list(c, len) ? -1 : 1;
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		return nbd_opt_info(c, opt, p, len) ? -1 : 1;
	case NBD_OPT_STRUCTURED_REPLY:
		return nbd_opt_error(c, opt, NBD_REP_ERR_UNSUP, "simple replies only") ? -1 : 1;
	default:
		return nbd_opt_error(c, opt, NBD_REP_ERR_UNSUP, "option not supported") ? -1 : 1;
	}
}

/* ---- pages --------------------------------------------------------------------- */

static int nbd_process(struct nbd_conn *c);

/* The page of block b from the backing file, or zeros. @return 0 or -EIO. */
static int nbd_fetch_cold(struct nbd_export *e, uint64_t b, uint8_t *page)
{
	ssize_t k;

	if (!e->in_backing || !bit_test(e->in_backing, b)) {
		memset(page, 0, NBD_PAGE);
		return 0;
	}
	e->srv->st.backing_reads++;
	do
		k = pread(e->fd, page, NBD_PAGE, (off_t)(b * NBD_PAGE));
	while (k < 0 && errno == EINTR);
	if (k < 0) {
		e->srv->st.backing_errors++;
		return -EIO;
	}
	if (k < (ssize_t)NBD_PAGE) /* past the end of a file cut short: zeros */
		memset(page + k, 0, NBD_PAGE - (size_t)k);
	return 0;
}

static void nbd_slot_done(void *arg, int result)
{
	struct nbd_slot *s = arg;
	struct nbd_conn *c = s->c;

	s->result = result;
	if (--c->pending)
		return;
	if (c->closed) {
		nbd_conn_free(c);
		return;
	}
	if (!c->busy)
		return; /* still starting: the starter goes on */
	if (c->cont(c) == 0) {
		c->busy = false;
		nbd_process(c);
	}
}

/*
 * Fetch block b into page: from tmem, else the backing file, else zeros. A
 * remote page starts a remote get on slot s (c->pending counts it).
 * @return 0 filled, 1 started, or -EIO.
 */
static int nbd_fetch(struct nbd_conn *c, uint64_t b, uint8_t *page, struct nbd_slot *s)
{
	struct nbd_export *e = c->exp;
	struct nbd *n = c->srv;
	struct tmem_oid oid;
	int rc;

	if (!bit_test(e->present, b))
		return nbd_fetch_cold(e, b, page);
	oid = nbd_oid(e, b);
	s->c = c;
	s->block = b;
	s->page = page;
	s->result = 0;
	c->pending++;
	rc = store_get(n->store, e->pool, &oid, nbd_index(b), page, nbd_slot_done, s);
	if (rc == STORE_PENDING) {
		n->st.remote_gets++;
		return 1;
	}
	c->pending--;
	if (!rc)
		return 0;
	if (rc == -ENOENT)
		return nbd_fetch_cold(e, b, page);
	return -EIO;
}

/* Settle the remote slots: copy partial pages, take the first error. */
static void nbd_slots_settle(struct nbd_conn *c)
{
	size_t i;

	for (i = 0; i < c->n_slots; i++) {
		struct nbd_slot *s = &c->slots[i];
		int rc = s->result;

		if (rc == -ENOENT) /* gone meanwhile: what a cold block reads */
			rc = nbd_fetch_cold(c->exp, s->block, s->page);
		if (rc) {
			if (!c->err)
				c->err = -EIO;
			continue;
		}
		if (s->dst)
			memcpy(s->dst, s->page + s->off, s->len);
	}
}

/* Make room for the slots of a request of pages pages. @return 0 or -ENOMEM. */
static int nbd_slots_reserve(struct nbd_conn *c, size_t pages)
{
	struct nbd_slot *s;

	c->n_slots = 0;
	if (pages <= c->slots_cap)
		return 0;
	s = realloc(c->slots, pages * sizeof(*s));
	if (!s)
		return -ENOMEM;
	c->slots = s;
	c->slots_cap = pages;
	return 0;
}

/*
 * The tier's answer rc to the put of page as block b: a refused page goes to
 * the backing file, or fails. @return 0 stored, or -errno.
 */
static int nbd_stored(struct nbd_conn *c, uint64_t b, const uint8_t *page, int rc)
{
	struct nbd_export *e = c->exp;
	struct nbd *n = c->srv;
	ssize_t k;

	if (!rc) {
		bit_set(e->present, b);
		nbd_backing_drop(e, b);
		if (e->dirty)
			bit_set(e->dirty, b);
		return 0;
	}
	bit_clear(e->present, b); /* a refused duplicate put flushed the old page */
	if (rc == -ENOSPC && c->put.waited_out)
		n->st.room_refused++;
	n->st.put_refused++;
	if (e->fd < 0) {
		n->st.refused_lost++;
		return rc == -ENOSPC ? -ENOSPC : -EIO;
	}
	do
		k = pwrite(e->fd, page, NBD_PAGE, (off_t)(b * NBD_PAGE));
	while (k < 0 && errno == EINTR);
	if (k != (ssize_t)NBD_PAGE) {
		n->st.backing_errors++;
		return -EIO;
	}
	n->st.backing_writes++;
	if (!bit_test(e->in_backing, b)) {
		bit_set(e->in_backing, b);
		e->backing_pages++;
	}
	bit_clear(e->dirty, b);
	return 0;
}

/*
 * Store page as block b through the store, which may wait for room (the
 * store's room-wait policy). @return 0 stored, 1 waiting (nbd_room_cb brings
 * the answer), or -errno.
 */
static int nbd_store(struct nbd_conn *c, uint64_t b, const uint8_t *page)
{
	struct nbd_export *e = c->exp;
	struct tmem_oid oid = nbd_oid(e, b);
	bool waiting = c->put.wait_start;
	int rc = store_put(c->srv->store, &c->put, e->pool, &oid, nbd_index(b), page);

	if (rc == STORE_PENDING) {
		if (!waiting)
			c->srv->st.room_waits++;
		return 1;
	}
	return nbd_stored(c, b, page, rc);
}

/* Drop block b: it reads as zeros from now on. */
static void nbd_discard(struct nbd_export *e, uint64_t b)
{
	struct tmem_oid oid;

	if (bit_test(e->present, b)) {
		oid = nbd_oid(e, b);
		(void)store_flush_page(e->srv->store, e->pool, &oid, nbd_index(b));
		bit_clear(e->present, b);
	}
	nbd_backing_drop(e, b);
	if (e->dirty) /* the file still has the old bytes: the next FLUSH zeroes them */
		bit_set(e->dirty, b);
}

/* ---- replies ------------------------------------------------------------------- */

/* Queue a simple reply without data. @return 0, or -1 closed. */
static int nbd_reply(struct nbd_conn *c, uint64_t cookie, int err)
{
	uint8_t *p = nbd_out(c, NBD_REPLY_HDR);

	if (!p)
		return -1;
	nbd_be32(p, NBD_SIMPLE_REPLY_MAGIC);
	nbd_be32(p + 4, err ? nbd_errno(err) : 0);
	nbd_be64(p + 8, cookie);
	if (err) {
		c->srv->st.errors++;
		if (c->exp)
			c->exp->errors++;
	}
	return 0;
}

/*
 * The part of block b this request covers: [*lo, *hi). @return true when
 * that is not the whole page.
 */
static bool nbd_span(const struct nbd_req *r, uint64_t b, unsigned *lo, unsigned *hi)
{
	uint64_t start = b * NBD_PAGE, end = r->offset + r->len;

	*lo = start < r->offset ? (unsigned)(r->offset - start) : 0;
	*hi = start + NBD_PAGE > end ? (unsigned)(end - start) : NBD_PAGE;
	return *lo || *hi < NBD_PAGE;
}

/* The edge page of block b: edge[0] for the first, edge[1] for the last. */
static uint8_t *nbd_edge(struct nbd_conn *c, uint64_t b, uint64_t first)
{
	return c->edge[b == first ? 0 : 1];
}

/* ---- READ ---------------------------------------------------------------------- */

static int nbd_read_finish(struct nbd_conn *c)
{
	uint8_t *p = c->out + c->reply_at;

	nbd_slots_settle(c);
	c->building = false;
	nbd_be32(p, NBD_SIMPLE_REPLY_MAGIC);
	nbd_be32(p + 4, c->err ? nbd_errno(c->err) : 0);
	nbd_be64(p + 8, c->req.cookie);
	if (c->err) {
		c->out_len = c->reply_at + NBD_REPLY_HDR; /* no data after an error */
		c->srv->st.errors++;
		c->exp->errors++;
	} else {
		c->out_len = c->reply_at + NBD_REPLY_HDR + c->req.len;
		c->srv->st.bytes_read += c->req.len;
	}
	return 0;
}

/* @return 0 answered, 1 waiting, -1 closed. */
static int nbd_do_read(struct nbd_conn *c)
{
	const struct nbd_req *r = &c->req;
	uint64_t first = r->offset / NBD_PAGE, last = (r->offset + r->len - 1) / NBD_PAGE, b;
	uint8_t *data;
	int rc;

	if (nbd_slots_reserve(c, (size_t)(last - first + 1)))
		return nbd_reply(c, r->cookie, -ENOMEM);
	if (nbd_reserve(&c->out, &c->out_cap, c->out_len + NBD_REPLY_HDR + r->len)) {
		c->srv->st.oom_closes++;
		nbd_close(c, "out of memory for a reply");
		return -1;
	}
	c->reply_at = c->out_len; /* not counted in out_len (not sent) until finished */
	c->building = true;
	data = c->out + c->reply_at + NBD_REPLY_HDR;
	c->err = 0;
	c->pending = 1; /* held while the gets start */
	for (b = first; b <= last; b++) {
		struct nbd_slot *s = &c->slots[c->n_slots];
		unsigned lo, hi;
		bool partial = nbd_span(r, b, &lo, &hi);
		uint8_t *dst = data + (b * NBD_PAGE + lo - r->offset);
		uint8_t *page = partial ? nbd_edge(c, b, first) : dst;

		memset(s, 0, sizeof(*s));
		rc = nbd_fetch(c, b, page, s);
		if (rc == 1) {
			if (partial) {
				s->dst = dst;
				s->off = lo;
				s->len = hi - lo;
			}
			c->n_slots++;
		} else if (rc < 0) {
			if (!c->err)
				c->err = rc;
		} else if (partial) {
			memcpy(dst, page + lo, hi - lo);
		}
	}
	if (--c->pending) {
		c->srv->st.remote_waits++;
		c->cont = nbd_read_finish;
		return 1;
	}
	return nbd_read_finish(c);
}

/* ---- WRITE, TRIM, WRITE_ZEROES ------------------------------------------------- */

/* The page of block b of this request, merged: edges in edge[], else payload or zeros. */
static const uint8_t *nbd_write_page(struct nbd_conn *c, uint64_t b, uint64_t first)
{
	const struct nbd_req *r = &c->req;
	unsigned lo, hi;

	if (nbd_span(r, b, &lo, &hi))
		return nbd_edge(c, b, first);
	if (!r->payload)
		return nbd_zero_page;
	return r->payload + (b * NBD_PAGE - r->offset);
}

/* Does this request drop whole pages (TRIM, WRITE_ZEROES without NO_HOLE)? */
static bool nbd_discards(const struct nbd_req *r)
{
	return r->type != NBD_CMD_WRITE && !(r->flags & NBD_CMD_FLAG_NO_HOLE);
}

static int nbd_pwrite_page(struct nbd_export *e, uint64_t b, const uint8_t *page)
{
	ssize_t k;

	do
		k = pwrite(e->fd, page, NBD_PAGE, (off_t)(b * NBD_PAGE));
	while (k < 0 && errno == EINTR);
	if (k == (ssize_t)NBD_PAGE)
		return 0;
	e->srv->st.backing_errors++;
	return -EIO;
}

/*
 * Whole pages fb..lb were dropped: zero them in the backing file too, with a
 * hole. Where that fails, or a FLUSH runs (its stale copies must be skipped),
 * they are marked dirty instead, for the next FLUSH to write zeros.
 */
static void nbd_discard_backing(struct nbd_export *e, uint64_t fb, uint64_t lb)
{
	bool punched = !e->flusher &&
		       !fallocate(e->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				  (off_t)(fb * NBD_PAGE), (off_t)((lb - fb + 1) * NBD_PAGE));
	uint64_t b;

	for (b = fb; b <= lb; b++) {
		if (punched)
			bit_clear(e->dirty, b);
		else
			bit_set(e->dirty, b);
	}
}

/* Write behind the pages of this request to the backing file and sync (FUA). */
static int nbd_write_fua(struct nbd_conn *c, uint64_t first, uint64_t last)
{
	struct nbd_export *e = c->exp;
	struct nbd *n = c->srv;
	bool discard = nbd_discards(&c->req);
	uint64_t b;

	for (b = first; b <= last; b++) {
		const uint8_t *page = nbd_write_page(c, b, first);

		if (bit_test(e->in_backing, b))
			continue; /* refused by the tier: written already */
		if (discard && page == nbd_zero_page && !bit_test(e->dirty, b))
			continue; /* punched */
		if (nbd_pwrite_page(e, b, page))
			return -EIO;
		n->st.flush_pages++;
		if (!e->flusher) /* a running FLUSH needs the bit to skip its stale copy */
			bit_clear(e->dirty, b);
	}
	n->st.syncs++;
	if (fdatasync(e->fd)) {
		n->st.backing_errors++;
		return -EIO;
	}
	return 0;
}

/* Store blocks c->cursor..last. @return 0 answered, 1 waiting, -1 closed. */
static int nbd_write_run(struct nbd_conn *c)
{
	const struct nbd_req *r = &c->req;
	struct nbd_export *e = c->exp;
	uint64_t first = r->offset / NBD_PAGE, last = (r->offset + r->len - 1) / NBD_PAGE;
	uint64_t fb = (r->offset + NBD_PAGE - 1) / NBD_PAGE, end = (r->offset + r->len) / NBD_PAGE;
	bool discard = nbd_discards(r);
	int rc;

	for (; c->cursor <= last; c->cursor++) {
		const uint8_t *page = nbd_write_page(c, c->cursor, first);

		if (discard && page == nbd_zero_page) {
			nbd_discard(e, c->cursor);
			continue;
		}
		rc = nbd_store(c, c->cursor, page);
		if (rc == 1) {
			c->cont = nbd_write_run;
			return 1;
		}
		if (rc && !c->err)
			c->err = rc;
	}
	if (discard && e->fd >= 0 && fb < end)
		nbd_discard_backing(e, fb, end - 1);
	if (!c->err && (r->flags & NBD_CMD_FLAG_FUA) && e->fd >= 0)
		c->err = nbd_write_fua(c, first, last);
	if (!c->err && r->type == NBD_CMD_WRITE)
		c->srv->st.bytes_written += r->len;
	return nbd_reply(c, r->cookie, c->err);
}

static void nbd_room_cb(void *arg, int result)
{
	struct nbd_conn *c = arg;
	const struct nbd_req *r = &c->req;
	uint64_t first = r->offset / NBD_PAGE;
	int rc = nbd_stored(c, c->cursor, nbd_write_page(c, c->cursor, first), result);

	if (rc && !c->err)
		c->err = rc;
	c->cursor++;
	if (nbd_write_run(c) == 0) {
		c->busy = false;
		nbd_process(c);
	}
}

/* The edges are fetched: merge the request into them and store. */
static int nbd_write_merge(struct nbd_conn *c)
{
	const struct nbd_req *r = &c->req;
	uint64_t first = r->offset / NBD_PAGE, last = (r->offset + r->len - 1) / NBD_PAGE, b;
	unsigned lo, hi;

	nbd_slots_settle(c);
	if (c->err)
		return nbd_reply(c, r->cookie, c->err);
	for (b = first; b <= last; b = b == first && last > first ? last : last + 1) {
		uint8_t *edge = nbd_edge(c, b, first);

		if (!nbd_span(r, b, &lo, &hi))
			continue;
		if (r->payload)
			memcpy(edge + lo, r->payload + (b * NBD_PAGE + lo - r->offset), hi - lo);
		else
			memset(edge + lo, 0, hi - lo);
	}
	c->cursor = first;
	return nbd_write_run(c);
}

/* WRITE, TRIM and WRITE_ZEROES: read the partial edges, then store. */
static int nbd_do_write(struct nbd_conn *c)
{
	const struct nbd_req *r = &c->req;
	uint64_t first = r->offset / NBD_PAGE, last = (r->offset + r->len - 1) / NBD_PAGE, b;
	unsigned lo, hi;
	int rc;

	c->err = 0;
	store_req_begin(&c->put, nbd_room_cb, c);
	if (nbd_slots_reserve(c, 2))
		return nbd_reply(c, r->cookie, -ENOMEM);
	c->pending = 1;
	for (b = first; b <= last; b = b == first && last > first ? last : last + 1) {
		struct nbd_slot *s = &c->slots[c->n_slots];

		if (!nbd_span(r, b, &lo, &hi))
			continue;
		memset(s, 0, sizeof(*s));
		rc = nbd_fetch(c, b, nbd_edge(c, b, first), s);
		if (rc == 1)
			c->n_slots++;
		else if (rc < 0 && !c->err)
			c->err = rc;
	}
	if (--c->pending) {
		c->srv->st.remote_waits++;
		c->cont = nbd_write_merge;
		return 1;
	}
	return nbd_write_merge(c);
}

/* ---- FLUSH --------------------------------------------------------------------- */

static void nbd_flush_release(struct nbd_export *e)
{
	struct nbd_conn *w = e->flush_q;

	e->flusher = NULL;
	if (!w)
		return;
	e->flush_q = w->flush_next;
	if (!e->flush_q)
		e->flush_tail = &e->flush_q;
	w->flush_queued = false;
	e->flusher = w;
	w->cursor = 0;
	w->err = 0;
	if (nbd_flush_run(w) == 0) {
		w->busy = false;
		nbd_process(w);
	}
}

/* The batch in c->slots is fetched: write what is still current. */
static void nbd_flush_write(struct nbd_conn *c)
{
	struct nbd_export *e = c->exp;
	struct nbd *n = c->srv;
	size_t i;
	ssize_t k;

	for (i = 0; i < c->n_slots; i++) {
		struct nbd_slot *s = &c->slots[i];
		int rc = s->result;

		if (rc == -ENOENT)
			rc = nbd_fetch_cold(e, s->block, s->page);
		if (bit_test(e->dirty, s->block) || bit_test(e->in_backing, s->block))
			continue; /* written again meanwhile: that write is the one to keep */
		if (!rc) {
			do
				k = pwrite(e->fd, s->page, NBD_PAGE, (off_t)(s->block * NBD_PAGE));
			while (k < 0 && errno == EINTR);
			if (k == (ssize_t)NBD_PAGE) {
				n->st.flush_pages++;
				continue;
			}
			n->st.backing_errors++;
		}
		bit_set(e->dirty, s->block); /* not written: a later FLUSH tries again */
		if (!c->err)
			c->err = -EIO;
	}
}

static int nbd_flush_cont(struct nbd_conn *c)
{
	nbd_flush_write(c);
	return nbd_flush_run(c);
}

/* Fetch and write the dirty blocks from c->next on, sync, answer. */
static int nbd_flush_run(struct nbd_conn *c)
{
	struct nbd_export *e = c->exp;
	struct nbd *n = c->srv;
	uint64_t b;
	int rc;

	if (!c->scratch) {
		c->scratch = malloc((size_t)NBD_FLUSH_BATCH * NBD_PAGE);
		if (!c->scratch || nbd_slots_reserve(c, NBD_FLUSH_BATCH)) {
			c->err = -ENOMEM;
			goto done;
		}
	}
	while (c->cursor < e->blocks) {
		c->n_slots = 0;
		c->pending = 1;
		while (c->n_slots < NBD_FLUSH_BATCH) {
			struct nbd_slot *s = &c->slots[c->n_slots];

			b = bit_next(e->dirty, c->cursor, e->blocks);
			c->cursor = b + 1;
			if (b == e->blocks)
				break;
			bit_clear(e->dirty, b);
			memset(s, 0, sizeof(*s));
			s->block = b;
			s->page = c->scratch + c->n_slots * NBD_PAGE;
			rc = nbd_fetch(c, b, s->page, s);
			if (rc < 0)
				s->result = rc;
			c->n_slots++;
		}
		if (--c->pending) {
			n->st.remote_waits++;
			c->cont = nbd_flush_cont;
			return 1;
		}
		nbd_flush_write(c);
	}
	n->st.syncs++;
	if (fdatasync(e->fd) && !c->err) {
		n->st.backing_errors++;
		c->err = -EIO;
	}
done:
	if (nbd_reply(c, c->req.cookie, c->err))
		return -1; /* closed: that released the export's FLUSH */
	nbd_flush_release(e);
	return 0;
}

static int nbd_do_flush(struct nbd_conn *c)
{
	struct nbd_export *e = c->exp;

	if (e->fd < 0) /* RAM only: nothing outlives the daemon anyway */
		return nbd_reply(c, c->req.cookie, 0);
	c->err = 0;
	if (e->flusher) {
		c->srv->st.flush_waits++;
		c->flush_next = NULL;
		*e->flush_tail = c;
		e->flush_tail = &c->flush_next;
		c->flush_queued = true;
		c->cont = NULL; /* resumed by nbd_flush_release */
		return 1;
	}
	e->flusher = c;
	c->cursor = 0;
	return nbd_flush_run(c);
}

/* ---- requests ------------------------------------------------------------------ */

/* @return 0 valid, or the -errno to answer with. */
static int nbd_validate(const struct nbd_conn *c, const struct nbd_req *r)
{
	static const uint16_t known[NBD_CMDS] = {
	    [NBD_CMD_READ] = 0,
	    [NBD_CMD_WRITE] = NBD_CMD_FLAG_FUA,
	    [NBD_CMD_DISC] = 0,
	    [NBD_CMD_FLUSH] = 0,
	    [NBD_CMD_TRIM] = NBD_CMD_FLAG_FUA,
	    [NBD_CMD_WRITE_ZEROES] = NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE,
	};
	uint64_t size = c->exp->size;

	if (r->type >= NBD_CMDS || r->type == NBD_CMD_CACHE)
		return -EINVAL;
	if (r->flags & ~known[r->type])
		return -EINVAL;
	if (r->type == NBD_CMD_FLUSH || r->type == NBD_CMD_DISC)
		return 0;
	if (!r->len || (r->offset | r->len) % NBD_BLOCK_MIN)
		return -EINVAL;
	if (r->type == NBD_CMD_READ && r->len > NBD_PAYLOAD_MAX)
		return -EINVAL;
	if (r->offset > size || r->len > size - r->offset)
		return (r->type == NBD_CMD_WRITE || r->type == NBD_CMD_WRITE_ZEROES) ? -ENOSPC
										     : -EINVAL;
	return 0;
}

/* One transmission request. @return 1 progress, 0 more bytes needed, -1 closed, 2 waiting. */
static int nbd_request(struct nbd_conn *c)
{
	const uint8_t *p = c->in + c->in_off;
	size_t avail = c->in_len - c->in_off, need = NBD_REQ_HDR;
	struct nbd_req *r = &c->req;
	struct nbd *n = c->srv;
	int rc;

	if (avail < NBD_REQ_HDR) {
		c->in_need = NBD_REQ_HDR;
		return 0;
	}
	if (nbd_get32(p) != NBD_REQUEST_MAGIC)
		return nbd_violation(c, &n->st.bad_requests, "bad request magic");
	r->flags = nbd_get16(p + 4);
	r->type = nbd_get16(p + 6);
	r->cookie = nbd_get64(p + 8);
	r->offset = nbd_get64(p + 16);
	r->len = nbd_get32(p + 24);
	r->payload = NULL;
	if (r->type == NBD_CMD_WRITE) {
		if (r->len > NBD_PAYLOAD_MAX) /* not worth reading: the stream is lost */
			return nbd_violation(c, &n->st.bad_requests, "write payload too long");
		need += r->len;
		if (avail < need) {
			c->in_need = need;
			return 0;
		}
		r->payload = p + NBD_REQ_HDR;
	}
	c->in_off += need; /* the payload stays in place until the request is answered */
	if (r->type < NBD_CMDS)
		n->st.requests[r->type]++;
	c->exp->requests++;
	rc = nbd_validate(c, r);
	if (rc) {
		n->st.invalid++;
		return nbd_reply(c, r->cookie, rc) ? -1 : 1;
	}
	switch (r->type) {
	case NBD_CMD_READ:
		rc = nbd_do_read(c);
		break;
	case NBD_CMD_WRITE:
	case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES:
		rc = nbd_do_write(c);
		break;
	case NBD_CMD_FLUSH:
		rc = nbd_do_flush(c);
		break;
	default: /* NBD_CMD_DISC: answer nothing more; close once sent */
		c->closing = true;
		return 1;
	}
	if (rc == 1) {
		c->busy = true;
		return 2;
	}
	return rc < 0 ? -1 : 1;
}

/*
 * Run what the input holds, in order, until a request waits or the output
 * backs up; send; compact the input. @return 0, or -1 closed.
 */
static int nbd_process(struct nbd_conn *c)
{
	int rc;

	c->in_need = 0;
	for (;;) {
		rc = 1;
		while (!c->busy && !c->closing && c->out_len - c->out_off < NBD_OUT_HIGH) {
			rc = c->transmit ? nbd_request(c) : nbd_negotiate(c);
			if (rc <= 0 || rc == 2)
				break;
		}
		if (rc < 0)
			return -1;
		if (!c->busy && c->in_off) {
			memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
			c->in_len -= c->in_off;
			c->in_off = 0;
		}
		if (nbd_send(c))
			return -1;
		/* stopped by the backlog and the socket took it: run what the input holds */
		if (rc != 1 || c->busy || c->closing || c->out_len - c->out_off >= NBD_OUT_HIGH)
			break;
	}
	nbd_watch(c);
	return 0;
}

static void nbd_read_input(struct nbd_conn *c)
{
	size_t want = c->in_len + NBD_IN_MIN / 4;
	ssize_t k;

	if (want < c->in_off + c->in_need)
		want = c->in_off + c->in_need;
	if (nbd_reserve(&c->in, &c->in_cap, want)) {
		c->srv->st.oom_closes++;
		nbd_close(c, "out of memory for a request");
		return;
	}
	k = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
	if (k < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ENOBUFS &&
		    errno != ENOMEM) {
			c->srv->st.io_errors++;
			nbd_close(c, strerror(errno));
		}
		return;
	}
	if (k == 0) {
		nbd_close(c, c->in_len > c->in_off ? "end of stream inside a message"
						   : "end of stream");
		return;
	}
	c->in_len += (size_t)k;
	nbd_process(c);
}

static void nbd_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct nbd_conn *c = (struct nbd_conn *)w;

	if (revents & EV_WRITE) {
		if (nbd_send(c))
			return;
		if (c->out_off == c->out_len && !c->busy) {
			nbd_process(c); /* requests that waited for the output to drain */
			return;
		}
		nbd_watch(c);
		return;
	}
	if (revents & EV_READ)
		nbd_read_input(c);
}

static void nbd_conn_new(struct nbd *n, int fd, bool tcp)
{
	struct nbd_conn *c = calloc(1, sizeof(*c));
	uint8_t *p;
	int one = 1;

	if (!c || nbd_reserve(&c->in, &c->in_cap, NBD_IN_MIN)) {
		free(c);
		n->st.oom_closes++;
		close(fd);
		return;
	}
	if (tcp)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->srv = n;
	c->fd = fd;
	c->id = ++n->next_id;
	ev_io_init(&c->io, nbd_io_cb, fd, EV_READ);
	c->next = n->conns;
	if (c->next)
		c->next->prev = c;
	n->conns = c;
	n->st.conns++;
	n->st.conns_total++;
	p = nbd_out(c, 18);
	if (!p)
		return;
	nbd_be64(p, NBD_MAGIC);
	nbd_be64(p + 8, NBD_IHAVEOPT);
	nbd_be16(p + 16, NBD_HANDSHAKE_FLAGS);
	if (nbd_send(c))
		return;
	nbd_watch(c);
	log_debug("nbd connection %llu accepted", (unsigned long long)c->id);
}

/* ---- listeners ----------------------------------------------------------------- */

static void nbd_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct nbd_listener *l = (struct nbd_listener *)w;
	int i, fd;

	for (i = 0; i < NBD_ACCEPT_BURST; i++) {
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
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

/* mkdir -p the directory part of path (0755). @return 0 or -errno with err set. */
static int nbd_make_parent(const char *path, char *err, size_t errlen)
{
	char dir[CONFIG_PATH_MAX];
	char *p;
	int e;

	snprintf(dir, sizeof(dir), "%s", path);
	p = strrchr(dir, '/');
	if (!p || p == dir)
		return 0;
	*p = '\0';
	for (p = dir + 1;; p++) {
		bool end = *p == '\0';

		if (*p != '/' && !end)
			continue;
		*p = '\0';
		if (mkdir(dir, 0755) && errno != EEXIST) {
			e = errno;
			snprintf(err, errlen, "cannot create directory %s: %s", dir, strerror(e));
			return -e;
		}
		if (end)
			return 0;
		*p = '/';
	}
}

static int nbd_listen_unix(struct nbd *n, const char *path, char *err, size_t errlen)
{
	struct nbd_listener *l = &n->lunix;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, e, rc;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "nbd_socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	rc = nbd_make_parent(path, err, errlen);
	if (rc)
		return rc;
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket", path);
			return -EEXIST;
		}
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && !connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			close(fd);
			snprintf(err, errlen, "another server is listening on %s", path);
			return -EADDRINUSE;
		}
		if (fd >= 0)
			close(fd);
		unlink(path); /* stale */
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || chmod(path, 0660) ||
	    lstat(path, &st) || listen(fd, SOMAXCONN)) {
		e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	l->srv = n;
	l->fd = fd;
	l->is_unix = true;
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	memcpy(l->path, sa.sun_path, sizeof(l->path)); /* its length was checked */
	ev_io_init(&l->io, nbd_accept_cb, fd, EV_READ);
	ev_io_start(n->loop, &l->io);
	return 0;
}

static int nbd_listen_tcp(struct nbd *n, const char *addr, char *err, size_t errlen)
{
	struct nbd_listener *l = &n->ltcp;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
	char host[CONFIG_NAME_MAX];
	const char *colon = strrchr(addr, ':');
	size_t hl;
	int fd = -1, one = 1, rc, e;

	if (!colon) {
		snprintf(err, errlen, "nbd_listen: '%s' is not HOST:PORT", addr);
		return -EINVAL;
	}
	hl = (size_t)(colon - addr);
	if (hl && addr[0] == '[' && addr[hl - 1] == ']') {
		addr++;
		hl -= 2;
	}
	snprintf(host, sizeof(host), "%.*s", (int)hl, addr);
	rc = getaddrinfo(hl ? host : NULL, colon + 1, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "nbd_listen %s: %s", addr, gai_strerror(rc));
		return -EINVAL;
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
	struct stat st;

	if (l->fd < 0)
		return;
	ev_io_stop(n->loop, &l->io);
	close(l->fd);
	l->fd = -1;
	if (l->is_unix && !lstat(l->path, &st) && st.st_dev == l->dev && st.st_ino == l->ino)
		unlink(l->path);
}

/* ---- exports ------------------------------------------------------------------- */

static uint64_t *nbd_bitmap(uint64_t blocks, bool ones)
{
	size_t words = (size_t)((blocks + 63) / 64);
	uint64_t *m = calloc(words ? words : 1, sizeof(*m));
	size_t i;

	if (m && ones) {
		for (i = 0; i < words; i++)
			m[i] = ~0ull;
		if (blocks % 64)
			m[words - 1] = (1ull << (blocks % 64)) - 1;
	}
	return m;
}

/* Open the backing file: an existing one holds every block until written again. */
static int nbd_export_backing(struct nbd_export *e, char *err, size_t errlen)
{
	struct stat st;
	bool existed;
	int ee;

	e->fd = open(e->backing, O_RDWR | O_CLOEXEC);
	existed = e->fd >= 0;
	if (!existed && errno == ENOENT)
		e->fd = open(e->backing, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (e->fd < 0 || fstat(e->fd, &st)) {
		ee = errno;
		snprintf(err, errlen, "export %s: cannot open backing %s: %s", e->name, e->backing,
			 strerror(ee));
		return -ee;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "export %s: backing %s is not a regular file", e->name,
			 e->backing);
		return -EINVAL;
	}
	if ((uint64_t)st.st_size != e->size) {
		if (existed)
			log_warn("export %s: backing %s has %llu bytes, resized to %llu", e->name,
				 e->backing, (unsigned long long)st.st_size,
				 (unsigned long long)e->size);
		if (ftruncate(e->fd, (off_t)e->size)) {
			ee = errno;
			snprintf(err, errlen, "export %s: cannot size backing %s: %s", e->name,
				 e->backing, strerror(ee));
			return -ee;
		}
	}
	e->in_backing = nbd_bitmap(e->blocks, existed);
	e->dirty = nbd_bitmap(e->blocks, false);
	if (!e->in_backing || !e->dirty) {
		snprintf(err, errlen, "export %s: out of memory", e->name);
		return -ENOMEM;
	}
	e->backing_pages = existed ? e->blocks : 0;
	log_info("export %s: backing %s (%s)", e->name, e->backing,
		 existed ? "existing: every block reads from it until written" : "created");
	return 0;
}

static int nbd_export_init(struct nbd *n, struct nbd_export *e, unsigned number,
			   const struct config_export *ce, char *err, size_t errlen)
{
	int pool;

	e->srv = n;
	e->number = number;
	e->fd = -1;
	e->flush_tail = &e->flush_q;
	snprintf(e->name, sizeof(e->name), "%s", ce->name);
	snprintf(e->backing, sizeof(e->backing), "%s", ce->backing);
	e->size = ce->size;
	e->blocks = ce->size / NBD_PAGE;
	pool = store_pool_new(n->store, TMEM_PERSISTENT);
	if (pool < 0) {
		snprintf(err, errlen, "export %s: cannot create its pool: %s", e->name,
			 strerror(-pool));
		return pool;
	}
	e->pool = (uint32_t)pool;
	e->has_pool = true;
	e->present = nbd_bitmap(e->blocks, false);
	if (!e->present) {
		snprintf(err, errlen, "export %s: out of memory", e->name);
		return -ENOMEM;
	}
	if (e->backing[0])
		return nbd_export_backing(e, err, errlen);
	return 0;
}

static void nbd_export_fini(struct nbd *n, struct nbd_export *e)
{
	if (e->has_pool)
		(void)store_pool_destroy(n->store, e->pool);
	if (e->fd >= 0)
		close(e->fd);
	free(e->present);
	free(e->in_backing);
	free(e->dirty);
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
	if (nbd_listen_unix(n, path, err, errlen))
		goto fail;
	if (self && self->nbd_listen[0] && nbd_listen_tcp(n, self->nbd_listen, err, errlen))
		goto fail;
	snprintf(n->describe, sizeof(n->describe), "unix %s%s%s", path,
		 n->ltcp.fd >= 0 ? ", tcp " : "", n->ltcp.fd >= 0 ? self->nbd_listen : "");
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
	nbd_listener_close(n, &n->lunix);
	nbd_listener_close(n, &n->ltcp);
	for (i = 0; i < n->n_exports; i++)
		nbd_export_fini(n, &n->exports[i]);
	free(n->exports);
	free(n);
}

const char *nbd_describe(const struct nbd *n)
{
	return n->describe;
}

size_t nbd_export_count(const struct nbd *n)
{
	return n ? n->n_exports : 0;
}

void nbd_export_info(struct nbd *n, size_t i, struct nbd_export_info *info)
{
	struct nbd_export *e = &n->exports[i];
	struct tmem_pool_info ti = {0};
	uint64_t b, remote = 0;

	(void)store_pool_info(n->store, e->pool, &ti);
	for (b = bit_next(e->present, 0, e->blocks); b < e->blocks;
	     b = bit_next(e->present, b + 1, e->blocks)) {
		struct tmem_handle h = {e->pool, nbd_oid(e, b), nbd_index(b)};

		remote += store_is_remote(n->store, &h);
	}
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
	static const char *const cmd[NBD_CMDS] = {"read", "write", "disc",	   "flush",
						  "trim", "cache", "write_zeroes"};
	const struct nbd_stats *s = &n->st;
	char name[64];
	unsigned i;

	fn(arg, "nbd_exports", n->n_exports, "NBD exports configured");
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
	fn(arg, "nbd_put_refused", s->put_refused, "pages the tier refused");
	fn(arg, "nbd_refused_lost", s->refused_lost,
	   "refused pages without a backing file (write failed)");
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
}
