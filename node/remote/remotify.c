/*
 * remotify.c - pushing the local tier's least recently used frames to peers.
 *
 * The remotify thread watches the local tier: above high_watermark it takes
 * the least recently used frame as a zombie (zcache_remotify_take) and hands
 * it to the loop (r->jobs), until usage falls below low_watermark. The loop
 * sends each page to a peer chosen by cluster_pick, and on the ack points the
 * handle there (zcache_remotify_commit); a refusal, timeout or death tries
 * another peer, and a page that cannot be placed stays in its frame, which
 * goes back on the LRU. Nothing is freed before its ack; nothing leaks on
 * failure. A frame that moved wakes the puts that wait for room.
 */

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "node/remote/arena.h"
#include "node/remote/erasure.h"
#include "node/clock.h"
#include "node/log.h"
#include "node/remote/remote_int.h"

/* ---- room waiters --------------------------------------------------------------------- */

static void room_unlink(struct remote *r, struct room_wait *w)
{
	ev_timer_stop(r->loop, &w->timer);
	if (w->prev)
		w->prev->next = w->next;
	else
		r->waiters = w->next;
	if (w->next)
		w->next->prev = w->prev;
}

static void room_fire(struct remote *r, struct room_wait *w)
{
	void (*cb)(void *) = w->cb;
	void *arg = w->arg;

	room_unlink(r, w);
	free(w);
	cb(arg);
}

static void room_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct room_wait *w = (struct room_wait *)t;

	room_fire(w->r, w);
}

/* Wake the waiters there are now; those that wait again wait for the next frame. */
static void room_wake_all(struct remote *r)
{
	struct room_wait *w = r->waiters, *next;

	r->waiters = NULL;
	for (next = w; next; next = next->next) {
		next->firing = true;
		ev_timer_stop(r->loop, &next->timer);
	}
	for (; w; w = next) {
		next = w->next;
		if (!w->cancelled)
			w->cb(w->arg);
		free(w);
	}
}

void *remote_wait_room(struct remote *r, unsigned ms, void (*cb)(void *arg), void *arg)
{
	struct room_wait *w = calloc(1, sizeof(*w));

	if (!w) {
		cb(arg);
		return NULL;
	}
	w->r = r;
	w->cb = cb;
	w->arg = arg;
	w->next = r->waiters;
	if (w->next)
		w->next->prev = w;
	r->waiters = w;
	ev_timer_init(&w->timer, room_timeout, ms / 1000.0, 0);
	ev_timer_start(r->loop, &w->timer);
	/* make sure the thread is looking */
	pthread_mutex_lock(&r->th.lock);
	pthread_cond_signal(&r->th.cond);
	pthread_mutex_unlock(&r->th.lock);
	return w;
}

void remote_wait_cancel(struct remote *r, void *token)
{
	struct room_wait *w = token;

	if (!w)
		return;
	if (w->firing) {
		w->cancelled = true;
		return;
	}
	room_unlink(r, w);
	free(w);
}

/* ---- remotify: the loop's half ----------------------------------------------------------- */

static void page_send(struct rpage *p);

static void job_free(struct rjob *job)
{
	if (job)
		free(job->blobs);
	free(job);
}

static void job_page_done(struct rjob *job)
{
	struct remote *r = job->r;

	if (--job->pending)
		return;
	zcache_remotify_done(r->z, &job->out);
	r->frames_done++;
	if (!job->placed)
		r->frames_partial++;
	pthread_mutex_lock(&r->th.lock);
	r->th.inflight--;
	pthread_cond_signal(&r->th.cond);
	pthread_mutex_unlock(&r->th.lock);
	if (job->placed)
		room_wake_all(r);
	job_free(job);
}

/* Copies acknowledged so far are of no use: the page stays in its frame. */
static void page_drop_copies(struct rpage *p)
{
	struct remote *r = p->job->r;
	unsigned k;

	for (k = 0; k < p->set.n; k++) {
		r->partial_flushes++;
		remote_flush_queue(r, p->set.node[k], RAMSTER__PEER__OP__P_FLUSH, &p->job->out.p[p->i].h);
	}
	p->set.n = 0;
}

static void page_failed(struct rpage *p)
{
	struct remote *r = p->job->r;

	page_drop_copies(p);
	r->pages_failed++;
	pthread_mutex_lock(&r->th.lock);
	r->th.backoff_until_ns = clock_now_ns() + REMOTIFY_BACKOFF_MS * 1000000ull;
	pthread_mutex_unlock(&r->th.lock);
	job_page_done(p->job);
}

static uint64_t set_mask(const struct replica_set *s)
{
	uint64_t m = 0;
	unsigned k;

	for (k = 0; k < s->n; k++)
		m |= 1ull << (s->node[k] - 1);
	return m;
}

/* Every copy is acknowledged: point the handle at them and free the frame's copy. */
static void page_commit(struct rpage *p)
{
	struct rjob *job = p->job;
	struct remote *r = job->r;
	struct zcache_out_page *op = &job->out.p[p->i];
	int rc;

	/* the descriptor keeps the compressed length and the seal's version (seal.h) */
	p->set.len = op->len;
	p->set.checksum = job->version[p->i];
	p->set.ec_k = job->frags[p->i] ? erasure_k(r->ec) : 0;
	rc = zcache_remotify_commit(r->z, &job->out, p->i, &p->set);
	if (rc == 0) {
		r->pages_placed++;
		if (p->set.ec_k)
			r->ec_fragments_placed += p->set.n;
		else
			r->copies_placed += p->set.n;
		job->placed = true;
	} else {
		/* changed while in flight (or no memory for the record): the copies are stale */
		r->stale_flushes++;
		page_drop_copies(p);
	}
	job_page_done(job);
}

static void put_cb(void *arg, int result, const Ramster__Peer__Msg *reply, const uint8_t *payload,
		   size_t plen)
{
	struct rpage *p = arg;
	struct rjob *job = p->job;
	struct remote *r = job->r;

	if (result == 0) {
		unsigned k = p->set.n++;

		p->set.node[k] = (uint8_t)p->node;
		p->set.epoch[k] = (uint8_t)(cluster_epoch(r->cl, p->node) & 255);
		p->set.raddr[k] = 0;
		if (r->rdma_read && reply && reply->page && reply->page->raddr &&
		    reply->page->rkey) {
			/* the holder let us read it one-sided over this link */
			p->set.raddr[k] = reply->page->raddr;
			p->set.rkey[k] = reply->page->rkey;
			p->set.lgen[k] = cluster_link_gen(r->cl, p->node);
		}
		if (p->set.n < p->want) {
			page_send(p); /* the next copy, on another peer */
			return;
		}
		page_commit(p);
		return;
	}
	if (result == -ECANCELED) {
		page_drop_copies(p);
		job_page_done(job);
		return;
	}
	if (result == -ETIMEDOUT) {
		/* the holder may have kept it (the reply is what was lost): flush it
		 * there, now or when it is back, so that no copy leaks */
		r->unanswered_puts_flushed++;
		remote_flush_now(r, p->node, RAMSTER__PEER__OP__P_FLUSH, &job->out.p[p->i].h);
	}
	p->tried |= 1ull << (p->node - 1);
	if (p->tries < REMOTIFY_TRIES + p->want - 1) {
		r->retries++;
		page_send(p);
		return;
	}
	page_failed(p);
}

static void page_send(struct rpage *p)
{
	struct zcache_out_page *op = &p->job->out.p[p->i];
	/* never two copies on one peer: one death must not take both */
	uint64_t held = set_mask(&p->set), exclude = p->tried | held;

	const uint8_t *data = p->job->blob[p->i];
	size_t len = p->job->blen[p->i];
	int rc;

	if (p->job->frags[p->i]) {
		/* fragment i goes to the holder in slot i (set.n: the ones placed so far) */
		len = p->job->flen[p->i];
		data = p->job->frags[p->i] + p->set.n * len;
	}
	rc = remote_copy_send(p->job->r, &op->h, op->pers, p->job->version[p->i], data, len,
			      &exclude, &p->tries, REMOTIFY_TRIES + p->want - 1, &p->node, put_cb, p);
	p->tried = exclude & ~held;
	if (rc)
		page_failed(p);
}

/* ---- stripes (ec_layout = stripes) ---------------------------------------------------------- */

static void stripe_send(struct jstripe *st);

/* The slot placed after slot s: the filled data slots, then the parity ones. */
static unsigned stripe_slot_after(const struct jstripe *st, unsigned k, unsigned s)
{
	s++;
	if (s >= st->pages && s < k)
		s = k;
	return s;
}

/* Pages' ends: counted once the stripe's state is no more needed (the job may go). */
static void stripe_pages_done(struct rjob *job, unsigned pages)
{
	while (pages--)
		job_page_done(job);
}

/* The stripe cannot be placed: its fragments placed are flushed, its pages stay. */
static void stripe_fail(struct jstripe *st)
{
	struct rjob *job = st->job;
	struct remote *r = job->r;
	unsigned s, k = erasure_k(r->ec), pages = st->pages;
	struct tmem_handle key;

	for (s = 0; s < st->next && s < k + erasure_m(r->ec); s = stripe_slot_after(st, k, s)) {
		if (!st->node[s])
			continue;
		stripe_key(st->id, s, &key);
		r->partial_flushes++;
		remote_flush_queue(r, st->node[s], RAMSTER__PEER__OP__P_FLUSH, &key);
	}
	stripe_remove(r->stripes, st->id);
	r->ec_stripes_failed++;
	r->pages_failed += pages;
	pthread_mutex_lock(&r->th.lock);
	r->th.backoff_until_ns = clock_now_ns() + REMOTIFY_BACKOFF_MS * 1000000ull;
	pthread_mutex_unlock(&r->th.lock);
	stripe_pages_done(job, pages);
}

/* Every fragment is acknowledged: record the stripe and point its pages at it. */
static void stripe_commit(struct jstripe *st)
{
	struct rjob *job = st->job;
	struct remote *r = job->r;
	unsigned j, s, k = erasure_k(r->ec), m = erasure_m(r->ec), pages = st->pages;
	struct stripe_rec rec = { .k = k, .m = m, .L = st->L };

	for (s = 0; s < k + m; s++) {
		rec.node[s] = st->node[s];
		rec.epoch[s] = st->epoch[s];
		rec.version[s] = s < k ? (s < pages ? job->version[st->page[s]] : 0) : st->version;
		if (s < pages)
			rec.lens[s] = job->blen[st->page[s]];
	}
	rec.live = (1u << pages) - 1;
	if (stripe_fill(r->stripes, st->id, &rec)) {
		stripe_fail(st);
		return;
	}
	r->ec_stripes_placed++;
	r->ec_fragments_placed += pages + m;
	for (j = 0; j < pages; j++) {
		struct rpage *p = &job->pg[st->page[j]];
		struct zcache_out_page *op = &job->out.p[p->i];

		p->set = (struct replica_set){ .n = 1, .len = op->len,
					       .checksum = job->version[p->i],
					       .stripe = st->id, .slot = j };
		p->set.node[0] = st->node[j];
		p->set.epoch[0] = st->epoch[j];
		if (zcache_remotify_commit(r->z, &job->out, p->i, &p->set) == 0) {
			r->pages_placed++;
			r->ec_stripe_pages++;
			job->placed = true;
		} else {
			/* changed while in flight: its slot is dead from the start */
			r->stale_flushes++;
			stripe_op_kill(r, st->id, j);
		}
	}
	stripe_pages_done(job, pages);
}

static void stripe_put_cb(void *arg, int result, const Ramster__Peer__Msg *reply,
			  const uint8_t *payload, size_t plen)
{
	struct jstripe *st = arg;
	struct remote *r = st->job->r;
	unsigned k = erasure_k(r->ec), n = k + erasure_m(r->ec);
	struct tmem_handle key;

	(void)reply;
	(void)payload;
	(void)plen;
	if (result == 0) {
		st->node[st->next] = (uint8_t)st->to;
		st->epoch[st->next] = (uint8_t)(cluster_epoch(r->cl, st->to) & 255);
		st->held |= 1ull << (st->to - 1);
		st->next = stripe_slot_after(st, k, st->next);
		st->tried = 0;
		st->tries = 0;
		if (st->next >= n)
			stripe_commit(st);
		else
			stripe_send(st);
		return;
	}
	if (result == -ECANCELED) {
		stripe_fail(st);
		return;
	}
	if (result == -ETIMEDOUT) {
		/* the holder may have kept it: flush it there, now or when it is back */
		stripe_key(st->id, st->next, &key);
		r->unanswered_puts_flushed++;
		remote_flush_now(r, st->to, RAMSTER__PEER__OP__P_FLUSH, &key);
	}
	st->tried |= 1ull << (st->to - 1);
	if (st->tries < REMOTIFY_TRIES) {
		r->retries++;
		stripe_send(st);
		return;
	}
	stripe_fail(st);
}

/* Place the stripe's slot st->next on a peer holding none of it. */
static void stripe_send(struct jstripe *st)
{
	struct rjob *job = st->job;
	struct remote *r = job->r;
	unsigned k = erasure_k(r->ec), s = st->next;
	uint64_t exclude = st->held | st->tried;
	const uint8_t *data;
	struct tmem_handle key;
	uint32_t version;
	size_t len;

	if (s < k) {
		data = job->blob[st->page[s]];
		len = job->blen[st->page[s]];
		version = job->version[st->page[s]];
	} else {
		data = st->parity + (size_t)(s - k) * st->L;
		len = st->L;
		version = st->version;
	}
	stripe_key(st->id, s, &key);
	if (remote_copy_send(r, &key, true, version, data, len, &exclude, &st->tries,
			     REMOTIFY_TRIES, &st->to, stripe_put_cb, st)) {
		stripe_fail(st);
		return;
	}
	st->tried = exclude & ~st->held;
}

/*
 * Start the job's stripes; a stripe for which too few peers are live has its
 * pages placed as M+1 whole copies instead (job_start's loop takes them).
 */
static void stripes_start(struct rjob *job)
{
	struct remote *r = job->r;
	unsigned t, j, m = erasure_m(r->ec);

	for (t = 0; t < job->nst; t++) {
		struct jstripe *st = &job->st[t];

		if (cluster_candidates(r->cl, st->L, 0) < st->pages + m ||
		    stripe_reserve(r->stripes, &st->id)) {
			for (j = 0; j < st->pages; j++)
				job->stripe_of[st->page[j]] = 0;
			r->ec_fallback_copies += st->pages;
			st->pages = 0;
			continue;
		}
		for (j = 0; j < st->pages; j++)
			job->pg[st->page[j]] = (struct rpage){ .job = job, .i = st->page[j] };
		job->pending += st->pages;
	}
	for (t = 0; t < job->nst; t++)
		if (job->st[t].pages)
			stripe_send(&job->st[t]);
}

static void job_start(struct rjob *job)
{
	struct remote *r = job->r;
	unsigned i;

	job->pending = 1; /* held until every page is started */
	if (job->nst)
		stripes_start(job);
	for (i = 0; i < job->out.n; i++) {
		if (!job->out.p[i].resolved || job->stripe_of[i])
			continue;
		job->pg[i] = (struct rpage){ .job = job, .i = i };
		job->pg[i].want = job->out.p[i].pers ? r->replicas : 1;
		if (r->sb && job->out.p[i].pers)
			job->pg[i].want = erasure_m(r->ec) + 1; /* its stripe found too few peers */
		if (job->frags[i]) {
			unsigned n = erasure_k(r->ec) + erasure_m(r->ec);

			job->pg[i].want = n;
			if (cluster_candidates(r->cl, job->flen[i], 0) < n) {
				/* too few live peers for K+M fragments (some died): M+1 whole
				 * copies survive as many deaths, on fewer peers */
				job->frags[i] = NULL;
				job->pg[i].want = erasure_m(r->ec) + 1;
				r->ec_fallback_copies++;
			}
		}
		job->pending++;
		if (cluster_candidates(r->cl, job->frags[i] ? job->flen[i] : job->out.p[i].len, 0) <
		    job->pg[i].want) {
			/* fewer live peers with room than copies wanted: do not send
			 * copies that would only be flushed again */
			r->no_target++;
			page_failed(&job->pg[i]);
			continue;
		}
		page_send(&job->pg[i]);
	}
	job_page_done(job);
}

/* The loop's end of r->jobs: start every frame the thread took. */
static void jobs_cb(void *arg, struct handoff_item *list)
{
	while (list) {
		struct rjob *job = (struct rjob *)list;

		list = list->next;
		job_start(job);
	}
}

/* ---- remotify: the thread ------------------------------------------------------------------ */

/*
 * Seal the frame's pages for their holders (seal.h): on the thread, off the
 * loop, into one allocation for the whole frame (a dense block has up to 128
 * pages). @return 0, or -ENOMEM.
 */
static int job_seal(struct remote *r, struct rjob *job)
{
	size_t total = 0, off = 0;
	unsigned i, t, longest = 0;
	struct jstripe *st = NULL;

	unsigned n = r->ec ? erasure_k(r->ec) + erasure_m(r->ec) : 0;

	for (i = 0; i < job->out.n; i++) {
		const struct zcache_out_page *op = &job->out.p[i];

		if (!op->resolved || op->len > SEAL_PAGE_MAX)
			continue;
		total += op->len + SEAL_OVERHEAD;
		if (r->sb && op->pers) {
			/* K pages a stripe, in frame order; its parity as long as its longest */
			if (!st || st->pages == erasure_k(r->ec)) {
				if (st)
					total += erasure_m(r->ec) * (size_t)longest;
				st = &job->st[job->nst++];
				st->job = job;
				longest = 0;
			}
			st->page[st->pages++] = (uint8_t)i;
			job->stripe_of[i] = (uint8_t)job->nst;
			if (op->len + SEAL_OVERHEAD > longest)
				longest = op->len + SEAL_OVERHEAD;
		} else if (r->ec && op->pers) { /* and its fragments */
			total += n * erasure_frag_len(erasure_k(r->ec), op->len + SEAL_OVERHEAD);
		}
	}
	if (st)
		total += erasure_m(r->ec) * (size_t)longest;
	job->blobs = malloc(total ? total : 1);
	if (!job->blobs)
		return -ENOMEM;
	for (i = 0; i < job->out.n; i++) {
		struct zcache_out_page *op = &job->out.p[i];

		if (!op->resolved || op->len > SEAL_PAGE_MAX) /* a stored page is at most a page */
			continue;
		job->blob[i] = job->blobs + off;
		job->blen[i] = (uint16_t)seal_page(r->seal, &op->h, op->data, op->len, job->blob[i],
						   &job->version[i]);
		off += job->blen[i];
		if (r->ec && op->pers && !job->stripe_of[i]) {
			/* sealed first, then cut: the holders keep pieces of ciphertext, and
			 * the whole blob's tag checks the fragments that come back */
			job->frags[i] = job->blobs + off;
			job->flen[i] = (uint16_t)erasure_frag_len(erasure_k(r->ec), job->blen[i]);
			erasure_encode(r->ec, job->blob[i], job->blen[i], job->frags[i]);
			off += n * job->flen[i];
		}
	}
	/* each stripe's parity over its sealed blobs (ciphertext: the parity tells nothing more) */
	for (t = 0; t < job->nst; t++) {
		struct stripe_frags f;
		unsigned j;

		st = &job->st[t];
		stripe_builder_reset(r->sb);
		st->version = 0;
		for (j = 0; j < st->pages; j++) {
			stripe_builder_add(r->sb, job->blob[st->page[j]], job->blen[st->page[j]]);
			if (job->version[st->page[j]] - st->version < 0x80000000u)
				st->version = job->version[st->page[j]];
		}
		if (stripe_builder_close(r->sb, &f))
			return -EINVAL; /* cannot be: a stripe has a page */
		st->L = f.L;
		st->parity = job->blobs + off;
		for (j = 0; j < f.m; j++)
			memcpy(st->parity + (size_t)j * f.L, f.parity[j], f.L);
		off += (size_t)f.m * f.L;
	}
	return 0;
}

static void cond_wait_ms(struct remote *r, unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* th.cond waits on the monotonic clock */
	ts.tv_nsec += (long)ms * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_cond_timedwait(&r->th.cond, &r->th.lock, &ts);
}

/*
 * An idle thread dozes: it looks every REMOTIFY_IDLE_MS while the tier's use
 * changes, and after REMOTIFY_DOZE_LOOKS looks that saw neither a change nor
 * a reason to work it looks only every REMOTIFY_DOZE_MS; the next put wakes
 * it (remote_note_put). Before, an idle node woke this thread 200 times a
 * second for nothing (issue 20). dozing is set before the last look at the
 * tier, and a put reads it after it stored its page: either the look sees
 * the put, or the put sees the doze and wakes the thread.
 */
static void remotify_idle(struct remote *r, unsigned usage, unsigned *last, unsigned *still)
{
	if (usage != *last) {
		*last = usage;
		*still = 0;
	}
	if (++*still < REMOTIFY_DOZE_LOOKS) {
		cond_wait_ms(r, REMOTIFY_IDLE_MS);
		return;
	}
	atomic_store(&r->th.dozing, true);
	if (zcache_usage_pct(r->z) != usage) { /* a put slipped in: look again */
		atomic_store(&r->th.dozing, false);
		return;
	}
	r->th.dozes++;
	cond_wait_ms(r, REMOTIFY_DOZE_MS);
	/* woken by a put (it cleared dozing): look closely again; else doze on */
	if (!atomic_exchange(&r->th.dozing, false))
		*still = 0;
}

void remote_note_put(struct remote *r)
{
	if (!atomic_load_explicit(&r->th.dozing, memory_order_seq_cst))
		return;
	pthread_mutex_lock(&r->th.lock);
	if (atomic_exchange(&r->th.dozing, false)) {
		r->th.kicks++;
		pthread_cond_signal(&r->th.cond);
	}
	pthread_mutex_unlock(&r->th.lock);
}

static void *remotify_main(void *arg)
{
	struct remote *r = arg;
	bool active = false, pers_first = true, rem_pers, rem_eph;
	unsigned last = ~0u, still = 0;

	pthread_mutex_lock(&r->th.lock);
	while (!r->th.stop) {
		unsigned usage = zcache_usage_pct(r->z);
		struct rjob *job;
		int got = -ENOENT;

		if (usage >= r->high)
			active = true;
		else if (usage < r->low)
			active = false;
		if (!active) {
			remotify_idle(r, usage, &last, &still);
			continue;
		}
		still = 0;
		if (r->th.inflight >= REMOTIFY_INFLIGHT || clock_now_ns() < r->th.backoff_until_ns) {
			cond_wait_ms(r, REMOTIFY_IDLE_MS);
			continue;
		}
		rem_pers = r->rem_pers; /* a reload may change them: read under th.lock */
		rem_eph = r->rem_eph;
		pthread_mutex_unlock(&r->th.lock);
		job = calloc(1, sizeof(*job));
		if (job) {
			job->r = r;
			/* alternate the kinds, so neither LRU starves */
			if (pers_first && rem_pers)
				got = zcache_remotify_take(r->z, true, &job->out);
			if (got && rem_eph)
				got = zcache_remotify_take(r->z, false, &job->out);
			if (got && !pers_first && rem_pers)
				got = zcache_remotify_take(r->z, true, &job->out);
			pers_first = !pers_first;
			/* stripes want K pages (a frame may hold two): frames enough for
			 * STRIPE_TAKE_STRIPES stripes, while the tier has them */
			if (!got && r->sb && job->out.pers)
				while (job->out.n < STRIPE_TAKE_STRIPES * erasure_k(r->ec) &&
				       zcache_remotify_take_more(r->z, &job->out) == 0)
					;
		}
		if (job && !got && job_seal(r, job)) {
			zcache_remotify_done(r->z, &job->out); /* no memory: the frame stays */
			got = -ENOMEM;
		}
		pthread_mutex_lock(&r->th.lock);
		if (!job || got) {
			job_free(job);
			cond_wait_ms(r, REMOTIFY_IDLE_MS);
			continue;
		}
		r->th.frames_taken++;
		r->th.inflight++;
		handoff_push(&r->jobs, &job->item); /* a leaf lock: fine under th.lock */
	}
	pthread_mutex_unlock(&r->th.lock);
	return NULL;
}

/* ---- life cycle --------------------------------------------------------------------------- */

void remotify_init(struct remote *r)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&r->th.lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->th.cond, &ca);
	pthread_condattr_destroy(&ca);
	handoff_init(&r->jobs, r->loop, jobs_cb, r);
}

int remotify_start(struct remote *r)
{
	int rc = pthread_create(&r->th.thread, NULL, remotify_main, r);

	if (rc)
		return -rc;
	r->th.started = true;
	return 0;
}

void remotify_pause(struct remote *r)
{
	if (r->th.started) {
		pthread_mutex_lock(&r->th.lock);
		r->th.stop = true;
		pthread_cond_signal(&r->th.cond);
		pthread_mutex_unlock(&r->th.lock);
		pthread_join(r->th.thread, NULL);
		r->th.started = false;
	}
}

void remotify_stop(struct remote *r)
{
	struct handoff_item *list;

	remotify_pause(r);
	/* Frames queued but not started go back to the LRU. */
	list = handoff_fini(&r->jobs);
	while (list) {
		struct rjob *job = (struct rjob *)list;

		list = list->next;
		zcache_remotify_done(r->z, &job->out);
		job_free(job);
	}
}

void remotify_fini(struct remote *r)
{
	while (r->waiters)
		room_fire(r, r->waiters);
	pthread_cond_destroy(&r->th.cond);
	pthread_mutex_destroy(&r->th.lock);
}
