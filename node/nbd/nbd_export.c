/*
 * nbd_export.c - an export: a persistent pool of the store, block N (4096
 * bytes) at page N & 0xfffff of object {export number, N >> 20, 0}; its
 * bitmaps, its backing file, and FLUSH.
 *
 * Backing invariants, per block: in_backing set = the file alone holds the
 * data (tmem has none); dirty set = tmem holds data the file may not. A
 * FLUSH clears dirty bits as it fetches, and writes a fetched page only if
 * neither bit was set again meanwhile (a newer write wins); one FLUSH runs
 * on an export at a time.
 *
 * Honest syncs: unsynced set = the file was written there (pwrite, punched
 * hole) since the last good fdatasync. A good sync clears it; a failed one
 * (nbd_sync) turns it into dirty where tmem still has the data (or the block
 * reads as zeros), so the next FLUSH writes it again, and into lost where the
 * file alone had it: every FLUSH and FUA fails while a block is lost, until
 * the client writes or trims that block again.
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
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "node/log.h"
#include "node/nbd/nbd_int.h"

/* ---- pages --------------------------------------------------------------------- */


/*
 * The page of block b from the backing file, or zeros, read on the loop: only
 * where a remote get found its page gone meanwhile (a concurrent request
 * flushed or overwrote it; whatever the file holds now is a right answer for
 * a request that overlapped that one). Every other read of a backing file is
 * the worker's (nbd_fetch_file). @return 0 or -EIO.
 */
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

/*
 * Block b is not in tmem: zeros, or a read of the backing file on the
 * worker (slot s; gathered for c's next job, nbd_file_submit).
 * @return 0 filled (zeros), 1 gathered, or -EIO.
 */
static int nbd_fetch_file(struct nbd_conn *c, uint64_t b, uint8_t *page, struct nbd_slot *s)
{
	struct nbd_export *e = c->exp;

	if (!e->in_backing || !bit_test(e->in_backing, b)) {
		memset(page, 0, NBD_PAGE);
		return 0;
	}
	s->c = c;
	s->block = b;
	s->page = page;
	s->result = 0;
	if (nbd_file_op(c, NBD_OP_READ, b, 1, page, s))
		return -EIO;
	e->srv->st.backing_reads++;
	return 1;
}

void nbd_pending_drop(struct nbd_conn *c)
{
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

static void nbd_slot_done(void *arg, int result)
{
	struct nbd_slot *s = arg;

	s->result = result;
	nbd_pending_drop(s->c);
}

/*
 * Fetch block b into page: from tmem, else the backing file, else zeros. A
 * remote page starts a remote get on slot s (c->pending counts it); a block
 * in the backing file is gathered as a read for c's next file job (the
 * caller submits it with nbd_file_submit before it waits).
 * @return 0 filled, 1 started or gathered, or -EIO.
 */
int nbd_fetch(struct nbd_conn *c, uint64_t b, uint8_t *page, struct nbd_slot *s)
{
	struct nbd_export *e = c->exp;
	struct nbd *n = c->srv;
	struct tmem_oid oid;
	int rc;

	if (!bit_test(e->present, b))
		return nbd_fetch_file(c, b, page, s);
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
		return nbd_fetch_file(c, b, page, s);
	return -EIO;
}

/* Settle the remote slots: copy partial pages, take the first error. */
void nbd_slots_settle(struct nbd_conn *c)
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
int nbd_slots_reserve(struct nbd_conn *c, size_t pages)
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

/* The file was written at block b: not durable before the next good sync. */
static void nbd_unsynced(struct nbd_export *e, uint64_t b)
{
	bit_set(e->unsynced, b);
}

/* Block b is written again (or dropped): no longer lost. */
static void nbd_found(struct nbd_export *e, uint64_t b)
{
	if (e->lost && bit_test(e->lost, b)) {
		bit_clear(e->lost, b);
		e->lost_blocks--;
	}
}

/*
 * Settle the blocks of a finished sync (e->syncing): written for good, or,
 * when it failed (err), to be written again from RAM (dirty) or lost.
 * @return 0, or -EIO when it failed or blocks are lost.
 */
static int nbd_sync_settle(struct nbd_export *e, int err)
{
	struct nbd *n = e->srv;
	size_t words = (size_t)((e->blocks + 63) / 64);
	uint64_t b, again = 0, lost = 0;

	if (!err) {
		memset(e->syncing, 0, words * sizeof(*e->syncing));
		if (e->sync_failed) {
			e->sync_failed = false;
			if (!e->lost_blocks)
				log_notice("export %s: backing %s synced again", e->name, e->backing);
		}
		return e->lost_blocks ? -EIO : 0;
	}
	n->st.backing_errors++;
	n->st.sync_failures++;
	for (b = bit_next(e->syncing, 0, e->blocks); b < e->blocks;
	     b = bit_next(e->syncing, b + 1, e->blocks)) {
		if (!bit_test(e->in_backing, b)) {
			bit_set(e->dirty, b);
			again++;
		} else if (!bit_test(e->unsynced, b) && !bit_test(e->lost, b)) {
			/* the file alone had it, and it was not written again since */
			bit_set(e->lost, b);
			e->lost_blocks++;
			lost++;
		}
	}
	memset(e->syncing, 0, words * sizeof(*e->syncing));
	n->st.sync_lost += lost;
	if (!e->sync_failed || lost) /* once per episode, and whenever data is lost */
		log_warn("export %s: fdatasync of %s failed: %s (%llu blocks to write again from "
			 "RAM, %llu lost until written again)",
			 e->name, e->backing, strerror(-err), (unsigned long long)again,
			 (unsigned long long)lost);
	e->sync_failed = true;
	return -EIO;
}

/* Start the sync of what was written so far, for c. */
static void nbd_sync_begin(struct nbd_export *e, struct nbd_conn *c)
{
	uint64_t *t = e->syncing;

	e->syncing = e->unsynced; /* this sync covers these; later writes start afresh */
	e->unsynced = t;
	e->sync_conn = c;
	e->sync_job.fd = e->fd;
	e->sync_job.result = 0;
	e->srv->st.syncs++;
	nbd_io_submit(e->srv, &e->sync_job);
}

/* Hand a finished sync's result to c (its hold on pending dropped). */
static void nbd_sync_deliver(struct nbd_conn *c, int rc)
{
	c->sync_result = rc;
	c->pending--;
	if (c->closed) {
		if (!c->pending)
			nbd_conn_free(c);
		return;
	}
	if (c->sync_cont(c) == 0) {
		c->busy = false;
		nbd_process(c);
	}
}

static void nbd_sync_done(struct nbd_job *j)
{
	struct nbd_export *e = j->e;
	struct nbd_conn *c = e->sync_conn, *w;
	int rc = nbd_sync_settle(e, j->result);

	e->sync_conn = NULL;
	/* the next live waiter's sync starts before c's reply may queue another */
	while ((w = e->sync_q)) {
		e->sync_q = w->sync_next;
		if (!e->sync_q)
			e->sync_tail = &e->sync_q;
		if (!w->closed) {
			nbd_sync_begin(e, w);
			break;
		}
		if (!--w->pending)
			nbd_conn_free(w);
	}
	nbd_sync_deliver(c, rc);
}

int nbd_sync_start(struct nbd_conn *c, int (*cont)(struct nbd_conn *c))
{
	struct nbd_export *e = c->exp;

	c->sync_cont = cont;
	c->sync_result = 0;
	c->pending++; /* held while it waits or runs: a close defers the free */
	if (e->sync_conn) {
		c->srv->st.sync_waits++;
		c->sync_next = NULL;
		*e->sync_tail = c;
		e->sync_tail = &c->sync_next;
		return 1;
	}
	nbd_sync_begin(e, c);
	return 1;
}

/*
 * A write failed for want of room everywhere it could go: counted per write,
 * logged once per episode (until a write is kept again).
 */
static void nbd_full(struct nbd_export *e, const char *why)
{
	e->srv->st.nospace++;
	if (e->full)
		return;
	e->full = true;
	e->srv->st.nospace_episodes++;
	log_warn("export %s: %s: writes fail with ENOSPC until room is made", e->name, why);
}

static void nbd_room_again(struct nbd_export *e)
{
	if (!e->full)
		return;
	e->full = false;
	log_notice("export %s: writes are kept again", e->name);
}

/*
 * The tier's answer rc to the put of page as block b: a refused page goes to
 * the backing file, or fails. @return 0 stored, or -errno.
 */
int nbd_stored(struct nbd_conn *c, uint64_t b, const uint8_t *page, int rc)
{
	struct nbd_export *e = c->exp;
	struct nbd *n = c->srv;

	if (!rc) {
		bit_set(e->present, b);
		nbd_backing_drop(e, b);
		if (e->dirty) {
			bit_set(e->dirty, b);
			nbd_found(e, b);
		}
		nbd_room_again(e);
		return 0;
	}
	bit_clear(e->present, b); /* a refused duplicate put flushed the old page */
	if (rc == -ENOSPC && c->put.waited_out)
		n->st.room_refused++;
	n->st.put_refused++;
	if (e->fd < 0) {
		n->st.refused_lost++;
		if (rc != -ENOSPC)
			return -EIO;
		nbd_full(e, "the tier and the collective are full");
		return -ENOSPC;
	}
	/* the file will hold it: the write goes to the worker with this
	 * request's next job (in order with every other operation on the file);
	 * its failure is settled there (nbd_file_settle) */
	if (nbd_file_op(c, NBD_OP_STORE, b, 1, (uint8_t *)page, NULL))
		return -EIO;
	nbd_room_again(e);
	nbd_unsynced(e, b);
	nbd_found(e, b);
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
int nbd_store(struct nbd_conn *c, uint64_t b, const uint8_t *page)
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
void nbd_discard(struct nbd_export *e, uint64_t b)
{
	struct tmem_oid oid;

	if (bit_test(e->present, b)) {
		oid = nbd_oid(e, b);
		(void)store_flush_page(e->srv->store, e->pool, &oid, nbd_index(b));
		bit_clear(e->present, b);
	}
	nbd_backing_drop(e, b);
	if (e->dirty) { /* the file still has the old bytes: the next FLUSH zeroes them */
		bit_set(e->dirty, b);
		nbd_found(e, b);
	}
}

/*
 * Whole pages fb..lb were dropped: zero them in the backing file too, with a
 * hole punched by the worker (gathered for c's next job). Where a FLUSH runs
 * (its stale copies must be skipped), or the punch fails (nbd_file_settle),
 * they are marked dirty instead, for the next FLUSH to write zeros.
 */
void nbd_discard_backing(struct nbd_conn *c, uint64_t fb, uint64_t lb)
{
	struct nbd_export *e = c->exp;
	bool punch = !e->flusher && !nbd_file_op(c, NBD_OP_PUNCH, fb, lb - fb + 1, NULL, NULL);
	uint64_t b;

	for (b = fb; b <= lb; b++) {
		if (punch) {
			bit_clear(e->dirty, b);
			nbd_unsynced(e, b);
		} else {
			bit_set(e->dirty, b);
		}
	}
}

/*
 * Write behind the pages of this request to the backing file (FUA; the
 * caller submits the job, then syncs): gathered for c's next job. A dirty
 * bit is cleared now, so a newer write meanwhile sets it again; a failed
 * write sets it back (nbd_file_settle).
 */
void nbd_write_fua(struct nbd_conn *c, uint64_t first, uint64_t last)
{
	struct nbd_export *e = c->exp;
	bool discard = nbd_discards(&c->req);
	uint64_t b;

	for (b = first; b <= last; b++) {
		const uint8_t *page = nbd_write_page(c, b, first);

		if (bit_test(e->in_backing, b))
			continue; /* refused by the tier: written already */
		if (discard && page == nbd_zero_page && !bit_test(e->dirty, b))
			continue; /* punched */
		if (nbd_file_op(c, NBD_OP_BEHIND, b, 1, (uint8_t *)page, NULL)) {
			if (!c->err)
				c->err = -EIO;
			return;
		}
		nbd_unsynced(e, b);
		if (!e->flusher) /* a running FLUSH needs the bit to skip its stale copy */
			bit_clear(e->dirty, b);
	}
}

/* The loop's side of a finished job: the writes and punches that failed. */
void nbd_file_settle(struct nbd_conn *c, const struct nbd_op *op, size_t n)
{
	struct nbd_export *e = c->exp;
	struct nbd *s = c->srv;
	uint64_t b;
	size_t i;

	for (i = 0; i < n; i++, op++) {
		switch (op->kind) {
		case NBD_OP_READ:
			if (op->result)
				s->st.backing_errors++;
			break;
		case NBD_OP_STORE: /* the file alone was to hold it: the write fails */
			if (!op->result)
				break;
			s->st.backing_errors++;
			if (op->result == -ENOSPC || op->result == -EDQUOT) {
				nbd_full(e, "the tier, the collective and the backing file are full");
				if (!c->err)
					c->err = -ENOSPC;
			} else if (!c->err) {
				c->err = -EIO;
			}
			break;
		case NBD_OP_BEHIND: /* tmem still has it: the next FLUSH writes it */
			if (!op->result) {
				s->st.flush_pages++;
				break;
			}
			s->st.backing_errors++;
			bit_set(e->dirty, op->block);
			if (!c->err)
				c->err = -EIO;
			break;
		case NBD_OP_PUNCH:
			if (op->result)
				for (b = op->block; b < op->block + op->count; b++)
					bit_set(e->dirty, b);
			break;
		}
	}
}

/* Store blocks c->cursor..last. @return 0 answered, 1 waiting, CONN_CLOSED. */
/* ---- FLUSH --------------------------------------------------------------------- */

void nbd_flush_release(struct nbd_export *e)
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

/*
 * The batch in c->slots is fetched: gather the writes of what is still
 * current for c's next job (nbd_file_settle takes their outcome: a failed
 * one is dirty again and fails this FLUSH).
 */
static void nbd_flush_write(struct nbd_conn *c)
{
	struct nbd_export *e = c->exp;
	size_t i;

	for (i = 0; i < c->n_slots; i++) {
		struct nbd_slot *s = &c->slots[i];
		int rc = s->result;

		if (rc == -ENOENT)
			rc = nbd_fetch_cold(e, s->block, s->page);
		if (bit_test(e->dirty, s->block) || bit_test(e->in_backing, s->block))
			continue; /* written again meanwhile: that write is the one to keep */
		if (!rc && !nbd_file_op(c, NBD_OP_BEHIND, s->block, 1, s->page, NULL)) {
			nbd_unsynced(e, s->block);
			continue;
		}
		bit_set(e->dirty, s->block); /* not written: a later FLUSH tries again */
		if (!c->err)
			c->err = -EIO;
	}
}

static int nbd_flush_answer(struct nbd_conn *c)
{
	if (nbd_reply(c, c->req.cookie, c->err))
		return CONN_CLOSED; /* closed: that released the export's FLUSH */
	nbd_flush_release(c->exp);
	return 0;
}

static int nbd_flush_synced(struct nbd_conn *c)
{
	if (c->sync_result && !c->err)
		c->err = c->sync_result;
	return nbd_flush_answer(c);
}

/* The batch's remote gets are back: its writes go to the worker, then on. */
static int nbd_flush_cont(struct nbd_conn *c)
{
	nbd_flush_write(c);
	if (nbd_file_submit(c)) {
		c->cont = nbd_flush_run; /* the scratch pages are reused after the job */
		return 1;
	}
	return nbd_flush_run(c);
}

/* Fetch and write the dirty blocks from c->next on, sync, answer. */
int nbd_flush_run(struct nbd_conn *c)
{
	struct nbd_export *e = c->exp;
	struct nbd *n = c->srv;
	unsigned batches = 0;
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
		if (batches++ == NBD_SLICE_PAGES / NBD_FLUSH_BATCH)
			return nbd_yield(c, nbd_flush_run, 0);
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
		nbd_file_submit(c); /* reads of blocks the file alone holds (rare here) */
		if (--c->pending) {
			n->st.remote_waits++;
			c->cont = nbd_flush_cont;
			return 1;
		}
		nbd_flush_write(c);
		if (nbd_file_submit(c)) {
			c->cont = nbd_flush_run;
			return 1;
		}
	}
	return nbd_sync_start(c, nbd_flush_synced);
done:
	return nbd_flush_answer(c);
}

int nbd_do_flush(struct nbd_conn *c)
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

/*
 * Open the backing file: an existing one holds every block until written
 * again. Never through a symlink (O_NOFOLLOW: a link planted where the file
 * is expected is refused, not followed and truncated), and only a regular
 * file (sized to the export) or a block device (at least the export's size).
 */
static int nbd_export_backing(struct nbd_export *e, char *err, size_t errlen)
{
	struct stat st;
	uint64_t dev_size = 0;
	bool existed;
	int ee;

	e->fd = open(e->backing, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
	existed = e->fd >= 0;
	if (!existed && errno == ENOENT)
		e->fd = open(e->backing, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (e->fd < 0 && errno == ELOOP) {
		snprintf(err, errlen, "export %s: backing %s is a symlink (refused)", e->name,
			 e->backing);
		return -ELOOP;
	}
	if (e->fd < 0 || fstat(e->fd, &st)) {
		ee = errno;
		snprintf(err, errlen, "export %s: cannot open backing %s: %s", e->name, e->backing,
			 strerror(ee));
		return -ee;
	}
	/* O_NONBLOCK only kept a FIFO from blocking the open: files ignore it, drop it */
	(void)fcntl(e->fd, F_SETFL, fcntl(e->fd, F_GETFL) & ~O_NONBLOCK);
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(e->fd, BLKGETSIZE64, &dev_size) || dev_size < e->size) {
			snprintf(err, errlen,
				 "export %s: backing device %s has %llu bytes, fewer than the export's %llu",
				 e->name, e->backing, (unsigned long long)dev_size,
				 (unsigned long long)e->size);
			return -EINVAL;
		}
	} else if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "export %s: backing %s is not a regular file or block device",
			 e->name, e->backing);
		return -EINVAL;
	} else if ((uint64_t)st.st_size != e->size) {
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
	e->unsynced = nbd_bitmap(e->blocks, false);
	e->syncing = nbd_bitmap(e->blocks, false);
	e->lost = nbd_bitmap(e->blocks, false);
	if (!e->in_backing || !e->dirty || !e->unsynced || !e->syncing || !e->lost) {
		snprintf(err, errlen, "export %s: out of memory", e->name);
		return -ENOMEM;
	}
	ee = nbd_io_start(e->srv);
	if (ee) {
		snprintf(err, errlen, "export %s: cannot start the backing I/O thread: %s",
			 e->name, strerror(-ee));
		return ee;
	}
	e->backing_pages = existed ? e->blocks : 0;
	log_info("export %s: backing %s (%s)", e->name, e->backing,
		 existed ? "existing: every block reads from it until written" : "created");
	return 0;
}

int nbd_export_init(struct nbd *n, struct nbd_export *e, unsigned number,
			   const struct config_export *ce, char *err, size_t errlen)
{
	int pool;

	e->srv = n;
	e->number = number;
	e->fd = -1;
	e->flush_tail = &e->flush_q;
	e->sync_tail = &e->sync_q;
	e->sync_job.e = e;
	e->sync_job.done = nbd_sync_done;
	e->sync_job.n_ops = 0; /* an fdatasync */
	snprintf(e->name, sizeof(e->name), "%s", ce->name);
	snprintf(e->backing, sizeof(e->backing), "%s", ce->backing);
	e->size = ce->size;
	e->blocks = ce->size / NBD_PAGE;
	pool = store_pool_new(n->store, TMEM_PERSISTENT | TMEM_KEEP_ALL);
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

void nbd_export_fini(struct nbd *n, struct nbd_export *e)
{
	nbd_io_stop(n); /* no sync runs on a file about to be closed (first export: all) */
	if (e->has_pool)
		(void)store_pool_destroy(n->store, e->pool);
	if (e->fd >= 0)
		close(e->fd);
	free(e->present);
	free(e->in_backing);
	free(e->dirty);
	free(e->unsynced);
	free(e->syncing);
	free(e->lost);
}

