/*
 * nbd_transmission.c - the transmission phase: reading requests, validating
 * them, READ, WRITE, TRIM and WRITE_ZEROES (partial edges read first, then
 * merged and stored), and simple replies.
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

#include "common/util.h"
#include "node/log.h"
#include "node/nbd/nbd_int.h"
#include "tmem/compress.h"

/* ---- slices -------------------------------------------------------------------- */

static void nbd_yield_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct nbd_conn *c = container_of(w, struct nbd_conn, yield);

	c->pending--;
	if (c->yield_cont(c) == 0) {
		c->busy = false;
		nbd_process(c);
	}
}

int nbd_yield(struct nbd_conn *c, int (*cont)(struct nbd_conn *c), unsigned extra)
{
	c->srv->st.yields++;
	c->pending++;
	c->yield_cont = cont;
	c->yield_extra = extra;
	ev_timer_init(&c->yield, nbd_yield_cb, 0., 0.);
	ev_timer_start(c->srv->loop, &c->yield);
	return 1;
}

void nbd_yield_cancel(struct nbd_conn *c)
{
	if (!ev_is_active(&c->yield))
		return;
	ev_timer_stop(c->srv->loop, &c->yield);
	c->pending -= 1 + c->yield_extra;
}

/* ---- replies ------------------------------------------------------------------- */

static void nbd_chunk(uint8_t *p, uint16_t flags, uint16_t type, uint64_t cookie, uint32_t len)
{
	nbd_be32(p, NBD_STRUCTURED_REPLY_MAGIC);
	nbd_be16(p + 4, flags);
	nbd_be16(p + 6, type);
	nbd_be64(p + 8, cookie);
	nbd_be32(p + 16, len);
}

/* A structured error chunk (26 bytes) at p, the reply's last. */
static void nbd_chunk_error(uint8_t *p, uint64_t cookie, int err)
{
	nbd_chunk(p, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, cookie, 6);
	nbd_be32(p + NBD_SREPLY_HDR, nbd_errno(err));
	nbd_be16(p + NBD_SREPLY_HDR + 4, 0); /* no message */
}

/*
 * Queue a reply without data: simple, or once structured replies are on, a
 * NONE or ERROR chunk that ends it. @return 0, or CONN_CLOSED.
 */
int nbd_reply(struct nbd_conn *c, uint64_t cookie, int err)
{
	uint8_t *p = nbd_out(c, c->structured ? NBD_SREPLY_HDR + 6 : NBD_REPLY_HDR);

	if (!p)
		return CONN_CLOSED;
	if (c->structured && err) {
		nbd_chunk_error(p, cookie, err);
	} else if (c->structured) {
		nbd_chunk(p, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, cookie, 0);
		c->out_len -= 6;
	} else {
		nbd_be32(p, NBD_SIMPLE_REPLY_MAGIC);
		nbd_be32(p + 4, err ? nbd_errno(err) : 0);
		nbd_be64(p + 8, cookie);
	}
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
	if (c->structured && c->err) {
		nbd_chunk_error(p, c->req.cookie, c->err); /* 26 bytes: within the 28 reserved */
		c->out_len = c->reply_at + NBD_SREPLY_HDR + 6;
	} else if (c->structured) {
		nbd_chunk(p, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_OFFSET_DATA, c->req.cookie,
			  8 + c->req.len);
		nbd_be64(p + NBD_SREPLY_HDR, c->req.offset);
	} else {
		nbd_be32(p, NBD_SIMPLE_REPLY_MAGIC);
		nbd_be32(p + 4, c->err ? nbd_errno(c->err) : 0);
		nbd_be64(p + 8, c->req.cookie);
		if (c->err)
			c->out_len = c->reply_at + NBD_REPLY_HDR; /* no data after an error */
	}
	if (c->err) {
		c->srv->st.errors++;
		c->exp->errors++;
	} else {
		c->out_len = c->reply_at + c->reply_hdr + c->req.len;
		c->srv->st.bytes_read += c->req.len;
	}
	return 0;
}

/* Fetch blocks c->cursor..last, a slice a turn. @return 0 answered, 1 waiting. */
static int nbd_read_run(struct nbd_conn *c)
{
	const struct nbd_req *r = &c->req;
	uint64_t first = r->offset / NBD_PAGE, last = (r->offset + r->len - 1) / NBD_PAGE, b;
	uint8_t *data = c->out + c->reply_at + c->reply_hdr;
	unsigned done = 0;
	int rc;

	for (b = c->cursor; b <= last; b++) {
		struct nbd_slot *s = &c->slots[c->n_slots];
		unsigned lo, hi;
		bool partial = nbd_span(r, b, &lo, &hi);
		uint8_t *dst = data + (b * NBD_PAGE + lo - r->offset);
		uint8_t *page = partial ? nbd_edge(c, b, first) : dst;

		if (done++ == NBD_SLICE_PAGES) {
			c->cursor = b;
			nbd_file_submit(c); /* this slice's reads of the backing file */
			return nbd_yield(c, nbd_read_run, 1); /* the starter's hold stays */
		}
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
	nbd_file_submit(c);
	if (--c->pending) {
		c->srv->st.remote_waits++;
		c->cont = nbd_read_finish;
		return 1;
	}
	return nbd_read_finish(c);
}

/* @return 0 answered, 1 waiting, CONN_CLOSED. */
static int nbd_do_read(struct nbd_conn *c)
{
	const struct nbd_req *r = &c->req;
	uint64_t first = r->offset / NBD_PAGE, last = (r->offset + r->len - 1) / NBD_PAGE;

	if (nbd_slots_reserve(c, (size_t)(last - first + 1)))
		return nbd_reply(c, r->cookie, -ENOMEM);
	c->reply_hdr = c->structured ? NBD_SREPLY_HDR + 8 : NBD_REPLY_HDR;
	if (nbd_reserve(&c->out, &c->out_cap, c->out_len + c->reply_hdr + r->len)) {
		c->srv->st.oom_closes++;
		nbd_close(c, "out of memory for a reply");
		return CONN_CLOSED;
	}
	c->reply_at = c->out_len; /* not counted in out_len (not sent) until finished */
	c->building = true;
	c->err = 0;
	c->pending = 1; /* held while the gets start */
	c->cursor = first;
	return nbd_read_run(c);
}

/* ---- WRITE, TRIM, WRITE_ZEROES ------------------------------------------------- */

/* The page of block b of this request, merged: edges in edge[], else payload or zeros. */
const uint8_t *nbd_write_page(struct nbd_conn *c, uint64_t b, uint64_t first)
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
bool nbd_discards(const struct nbd_req *r)
{
	return r->type != NBD_CMD_WRITE && !(r->flags & NBD_CMD_FLAG_NO_HOLE);
}

static int nbd_write_answer(struct nbd_conn *c)
{
	const struct nbd_req *r = &c->req;

	if (!c->err && r->type == NBD_CMD_WRITE)
		c->srv->st.bytes_written += r->len;
	return nbd_reply(c, r->cookie, c->err);
}

static int nbd_write_synced(struct nbd_conn *c)
{
	if (c->sync_result && !c->err)
		c->err = c->sync_result;
	return nbd_write_answer(c);
}

/* The job with a FUA write's pages is back: sync them, or answer its error. */
static int nbd_write_behind_done(struct nbd_conn *c)
{
	if (!c->err)
		return nbd_sync_start(c, nbd_write_synced);
	return nbd_write_answer(c);
}

/*
 * Every page is stored (and the refused ones written to the file): punch
 * what a discard dropped, write a FUA request's pages behind and sync, answer.
 */
static int nbd_write_tail(struct nbd_conn *c)
{
	const struct nbd_req *r = &c->req;
	struct nbd_export *e = c->exp;
	uint64_t first = r->offset / NBD_PAGE, last = (r->offset + r->len - 1) / NBD_PAGE;
	uint64_t fb = (r->offset + NBD_PAGE - 1) / NBD_PAGE, end = (r->offset + r->len) / NBD_PAGE;
	bool fua = !c->err && (r->flags & NBD_CMD_FLAG_FUA) && e->fd >= 0;

	if (nbd_discards(r) && e->fd >= 0 && fb < end)
		nbd_discard_backing(c, fb, end - 1);
	if (fua)
		nbd_write_fua(c, first, last);
	if (nbd_file_submit(c)) {
		c->cont = fua ? nbd_write_behind_done : nbd_write_answer;
		return 1;
	}
	if (fua)
		return nbd_write_behind_done(c);
	return nbd_write_answer(c);
}

static int nbd_write_run(struct nbd_conn *c)
{
	const struct nbd_req *r = &c->req;
	struct nbd_export *e = c->exp;
	uint64_t first = r->offset / NBD_PAGE, last = (r->offset + r->len - 1) / NBD_PAGE;
	unsigned done = 0;
	int rc;

	for (; c->cursor <= last; c->cursor++) {
		const uint8_t *page = nbd_write_page(c, c->cursor, first);

		if (done++ == NBD_SLICE_PAGES) {
			/* this slice's refused pages go to the file; the job's
			 * return is the yield (other connections run meanwhile) */
			if (nbd_file_submit(c)) {
				c->cont = nbd_write_run;
				return 1;
			}
			return nbd_yield(c, nbd_write_run, 0);
		}
		/* A page of zeros takes no room at all: the export's bitmaps say
		 * it reads as zeros (as zram's same-filled pages). In the tier
		 * it would cost its index entry, charged to local_mb: a 4 GiB
		 * WRITE_ZEROES (NO_HOLE) filled a 2 MiB node's budget with
		 * bookkeeping and failed. NO_HOLE still writes zeros to a
		 * backing file (dirty: the next FLUSH, or FUA now); a discard
		 * punches a hole below. */
		if (page == nbd_zero_page || compress_page_is_zero(page)) {
			nbd_discard(e, c->cursor);
			c->srv->st.zero_pages++;
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
	return nbd_write_tail(c);
}

void nbd_room_cb(void *arg, int result)
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
	nbd_file_submit(c); /* edges the backing file alone holds */
	if (--c->pending) {
		c->srv->st.remote_waits++;
		c->cont = nbd_write_merge;
		return 1;
	}
	return nbd_write_merge(c);
}

/* ---- BLOCK_STATUS -------------------------------------------------------------- */

/* base:allocation of block b: 0 data (tmem or the backing file has it), or a hole of zeros. */
static uint32_t nbd_block_state(const struct nbd_export *e, uint64_t b)
{
	if (bit_test(e->present, b) || (e->in_backing && bit_test(e->in_backing, b)))
		return 0;
	return NBD_STATE_HOLE | NBD_STATE_ZERO;
}

/*
 * One BLOCK_STATUS chunk for base:allocation: runs of blocks of one state,
 * from the request's offset, at most NBD_EXTENTS_MAX (one with REQ_ONE),
 * never past its end. @return 0, or CONN_CLOSED.
 */
static int nbd_do_block_status(struct nbd_conn *c)
{
	const struct nbd_req *r = &c->req;
	const struct nbd_export *e = c->exp;
	unsigned max = (r->flags & NBD_CMD_FLAG_REQ_ONE) ? 1 : NBD_EXTENTS_MAX, n = 0;
	uint64_t pos = r->offset, end = r->offset + r->len;
	uint8_t *p;

	if (!c->meta_alloc)
		return nbd_reply(c, r->cookie, -EINVAL);
	p = nbd_out(c, NBD_SREPLY_HDR + 4 + 8u * max);
	if (!p)
		return CONN_CLOSED;
	while (pos < end && n < max) {
		uint64_t b = pos / NBD_PAGE, run_end;
		uint32_t state = nbd_block_state(e, b);

		while (++b * NBD_PAGE < end && nbd_block_state(e, b) == state)
			;
		run_end = b * NBD_PAGE < end ? b * NBD_PAGE : end;
		if (run_end - pos > UINT32_MAX - NBD_PAGE + 1) /* lengths are 32-bit */
			run_end = pos + (UINT32_MAX - NBD_PAGE + 1);
		nbd_be32(p + NBD_SREPLY_HDR + 4 + 8u * n, (uint32_t)(run_end - pos));
		nbd_be32(p + NBD_SREPLY_HDR + 8 + 8u * n, state);
		n++;
		pos = run_end;
	}
	nbd_chunk(p, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_BLOCK_STATUS, r->cookie, 4 + 8u * n);
	nbd_be32(p + NBD_SREPLY_HDR, NBD_META_ALLOCATION_ID);
	c->out_len -= 8u * (max - n);
	return 0;
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
	    [NBD_CMD_BLOCK_STATUS] = NBD_CMD_FLAG_REQ_ONE,
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

/* One transmission request. @return 1 progress, 0 more bytes needed, CONN_CLOSED, 2 waiting. */
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
	case NBD_CMD_BLOCK_STATUS:
		rc = nbd_do_block_status(c);
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
 * backs up; send; compact the input. @return 0, or CONN_CLOSED.
 */
int nbd_process(struct nbd_conn *c)
{
	int rc;

	c->in_need = 0;
	for (;;) {
		rc = 1;
		while (!c->busy && !c->closing && !c->srv->quiescing &&
		       c->out_len - c->out_off < NBD_OUT_HIGH) {
			rc = c->transmit ? nbd_request(c) : nbd_negotiate(c);
			if (rc <= 0 || rc == 2)
				break;
		}
		if (rc < 0)
			return CONN_CLOSED;
		if (!c->busy && c->in_off) {
			memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
			c->in_len -= c->in_off;
			c->in_off = 0;
		}
		if (nbd_send(c))
			return CONN_CLOSED;
		/* stopped by the backlog and the socket took it: run what the input holds
		 * (not while quiescing: then nothing more is run, and nothing would stop us) */
		if (rc != 1 || c->busy || c->closing || c->srv->quiescing ||
		    c->out_len - c->out_off >= NBD_OUT_HIGH)
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

void nbd_writable(struct nbd_conn *c)
{
	if (nbd_send(c))
		return;
	if (c->out_off == c->out_len && !c->busy) {
		nbd_process(c); /* requests that waited for the output to drain */
		return;
	}
	nbd_watch(c);
}

static void nbd_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct nbd_conn *c = (struct nbd_conn *)w;

	c->active = ev_now(loop);
	if (c->tls.phase) { /* STARTTLS was answered: records (nbd_tls.c) */
		nbd_tls_io(c, revents);
		return;
	}
	if (revents & EV_WRITE) {
		nbd_writable(c);
		return;
	}
	if (revents & EV_READ)
		nbd_read_input(c);
}

struct nbd_conn *nbd_conn_make(struct nbd *n, int fd, bool tcp, size_t in_min)
{
	struct nbd_conn *c = calloc(1, sizeof(*c));
	int one = 1;

	if (!c || nbd_reserve(&c->in, &c->in_cap, in_min > NBD_IN_MIN ? in_min : NBD_IN_MIN)) {
		if (c)
			free(c->in);
		free(c);
		n->st.oom_closes++;
		close(fd);
		return NULL;
	}
	if (tcp)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->srv = n;
	c->fd = fd;
	c->tcp = tcp;
	c->id = ++n->next_id;
	c->since = c->active = ev_now(n->loop);
	ev_io_init(&c->io, nbd_io_cb, fd, EV_READ);
	c->next = n->conns;
	if (c->next)
		c->next->prev = c;
	n->conns = c;
	n->st.conns++;
	n->st.conns_total++;
	return c;
}

void nbd_conn_new(struct nbd *n, int fd, bool tcp)
{
	struct nbd_conn *c = nbd_conn_make(n, fd, tcp, 0);
	uint8_t *p;

	if (!c)
		return;
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

