/*
 * remote.c - the node's side of the collective: remotify, repatriate, remote
 * flushes, and the foreign store served to peers.
 *
 * The remotify thread watches the local tier: above high_watermark it takes
 * the least recently used frame as a zombie (zcache_remotify_take) and queues
 * it to the loop, until usage falls below low_watermark. The loop sends each
 * page to a peer chosen by cluster_pick, and on the ack points the handle
 * there (zcache_remotify_commit); a refusal, timeout or death tries another
 * peer, and a page that cannot be placed stays in its frame, which goes back
 * on the LRU. Nothing is freed before its ack; nothing leaks on failure.
 *
 * Remote flushes are queued (tmem calls the flush hooks under a bucket lock,
 * where sending is not safe) and sent from an ev_async; each is retried until
 * acked or the holder is dead.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ev.h>
#include <sodium.h>

#include "node/arena.h"
#include "node/clock.h"
#include "node/foreign.h"
#include "node/log.h"
#include "node/remote.h"

/* ---- tunables --------------------------------------------------------------- */

#define REMOTIFY_INFLIGHT 32      /* frames handed to the loop and not done */
#define REMOTIFY_IDLE_MS 5        /* how often an idle thread looks at the tier */
#define REMOTIFY_BACKOFF_MS 50    /* pause after a frame found no peer */
#define REMOTIFY_TRIES 3          /* peers tried for one page (plus one per extra copy) */
#define REPAIR_INFLIGHT 16        /* re-replications at once */
#define REPAIR_TICK_MS 10         /* the repair walk's pace */
#define REPAIR_WALK 4096          /* records looked at a tick, at most */
#define REPAIR_IDLE_MS 500        /* pause after a pass that could mend nothing */
#define DRAIN_INFLIGHT 8          /* pages handed back at once */
#define DRAIN_TICK_MS 10
#define DRAIN_RETRY_MS 200        /* pause after a page nobody could take */

/* ---- structures -------------------------------------------------------------- */

struct rjob;

/* One page of a frame in flight. */
struct rpage {
	struct rjob *job;
	unsigned i;
	uint32_t node;      /* the peer asked now */
	uint64_t tried;     /* peers that refused or failed */
	unsigned tries;
	unsigned want;      /* copies to place: replicas for a persistent page, else 1 */
	struct replica_set set; /* the copies acknowledged so far */
};

/* One zombie frame handed from the thread to the loop. */
struct rjob {
	struct rjob *next;
	struct remote *r;
	struct zcache_out out;
	struct rpage pg[2];
	unsigned pending;   /* pages not finished */
	bool placed;        /* at least one page moved */
};

/* A remote flush to send (and resend until acked or the holder is dead). */
struct rflush {
	struct rflush *next;
	struct remote *r;
	uint32_t node;
	int op;             /* P_FLUSH, P_FLUSH_OBJECT, P_FLUSH_POOL */
	struct tmem_handle h;
	unsigned attempts;
};

struct room_wait {
	ev_timer timer;     /* first: the watcher leads the struct */
	struct room_wait *prev, *next;
	struct remote *r;
	void (*cb)(void *arg);
	void *arg;
	bool firing;        /* taken off the list by room_wake_all */
	bool cancelled;     /* cancelled while firing: skipped, freed there */
};

struct rget {
	struct remote *r;
	struct tmem_handle h;
	bool pers, destructive;
	uint64_t pampd;
	struct replica_set set;      /* the holders when the get began */
	uint8_t order[REPLICA_MAX];  /* slots of the live holders to ask, nearest first */
	unsigned n_order, next;
	bool by_message;             /* a one-sided read failed: ask the same holder again */
	unsigned attempt_ms;         /* each asked within this */
	void *page;
	remote_get_fn cb;
	void *arg;
};

struct remote {
	struct ev_loop *loop;
	struct zcache *z;
	struct tmem *t;
	struct cluster *cl;
	struct foreign *fs;
	uint32_t self;
	unsigned timeout_ms;
	unsigned high, low;
	bool rem_eph, rem_pers;
	unsigned replicas;          /* copies of a persistent page */
	unsigned repair_rate;       /* re-replications a second, at most */

	/* the remotify thread, and what it hands to the loop (under lock) */
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	unsigned inflight;          /* frames queued or in flight */
	uint64_t backoff_until_ns;  /* no peer could take a page: pause */
	struct rjob *jobs_head, *jobs_tail;
	struct rflush *flush_head, *flush_tail;
	ev_async wake;

	struct room_wait *waiters;  /* loop thread only */

	/* counters (loop thread; the two written elsewhere are atomic: stats read them unlocked) */
	_Atomic uint64_t frames_taken;    /* the remotify thread's */
	_Atomic uint64_t flushes_dropped; /* also flush_queue's, on any thread */
	uint64_t frames_done, frames_partial;
	uint64_t pages_sent, pages_placed, pages_failed, retries, no_target, stale_flushes;
	uint64_t gets, get_hits, get_lost, get_misses;
	uint64_t flushes_sent, flush_retries;
	uint64_t served_puts, served_puts_refused, served_checksum_errors, served_gets,
	    served_get_misses, served_flushes;
	uint64_t owner_drops;
	uint64_t pings, served_echoes;
	uint64_t copies_placed, partial_flushes, get_fallovers;
	uint64_t rdma_reads, rdma_read_fallbacks, rdma_chunks, rdma_chunk_errors;
	bool closing;               /* remote_destroy: no new requests from callbacks */
	bool rdma_read;             /* use the read keys holders name (RAMSTER_RDMA_READ=0: no) */

	/* re-replication (loop thread) */
	ev_timer repair_timer;
	bool repair_on;
	uint32_t repair_cursor;
	unsigned repair_inflight;
	uint64_t repair_busy[REPAIR_INFLIGHT];   /* ids being mended */
	double repair_tokens;
	bool repair_progress;                   /* this pass mended something */
	bool repair_blocked;                    /* no peer could take a copy: pause */
	uint64_t rereplicated, repair_failed, repair_stale, replica_lost, repair_passes, repair_waits;

	/* drain (loop thread) */
	ev_timer drain_timer;
	bool draining;
	ev_tstamp drain_pause_until;   /* a hand-back failed: wait before the next */
	unsigned drain_inflight;
	struct foreign_key drain_busy[DRAIN_INFLIGHT];
	bool drain_busy_used[DRAIN_INFLIGHT];
	uint64_t drain_returned, drain_orphans, drain_failed, drain_refused;
	uint64_t returns_served, returns_refused;
};

static void page_from_handle(Ramster__Peer__Page *pg, const struct tmem_handle *h, unsigned flags,
			     uint32_t checksum)
{
	ramster__peer__page__init(pg);
	pg->pool = h->pool;
	pg->oid0 = h->oid.w[0];
	pg->oid1 = h->oid.w[1];
	pg->oid2 = h->oid.w[2];
	pg->index = h->index;
	pg->flags = flags;
	pg->checksum = checksum;
}

/* ---- remote flushes ------------------------------------------------------------ */

static void flush_send(struct rflush *f);

static void flush_cb(void *arg, int result, const Ramster__Peer__Msg *reply, const uint8_t *payload,
		     size_t plen)
{
	struct rflush *f = arg;
	struct remote *r = f->r;

	if (result == -ETIMEDOUT && f->attempts < 1000) {
		r->flush_retries++;
		flush_send(f);
		return;
	}
	if (result == -EHOSTDOWN || result == -ECANCELED)
		r->flushes_dropped++; /* a dead holder's pages are gone with it */
	free(f);
}

static void flush_send(struct rflush *f)
{
	struct remote *r = f->r;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;

	page_from_handle(&pg, &f->h, 0, 0);
	m.op = f->op;
	m.page = &pg;
	f->attempts++;
	if (cluster_request(r->cl, f->node, &m, NULL, 0, r->timeout_ms, flush_cb, f)) {
		r->flushes_dropped++;
		free(f);
		return;
	}
	r->flushes_sent++;
}

/* Queue a flush; any thread, any lock held (tmem calls this under a bucket lock). */
static void flush_queue(struct remote *r, uint32_t node, int op, const struct tmem_handle *h)
{
	struct rflush *f = calloc(1, sizeof(*f));

	if (!f) {
		/* The holder keeps an orphan page until our session with it ends. */
		r->flushes_dropped++;
		return;
	}
	f->r = r;
	f->node = node;
	f->op = op;
	f->h = *h;
	pthread_mutex_lock(&r->lock);
	if (r->flush_tail)
		r->flush_tail->next = f;
	else
		r->flush_head = f;
	r->flush_tail = f;
	pthread_mutex_unlock(&r->lock);
	ev_async_send(r->loop, &r->wake);
}

static void nodes_flush(struct remote *r, uint64_t nodes, int op, const struct tmem_handle *h)
{
	uint32_t n;

	for (n = 1; n <= 64; n++)
		if (nodes & (1ull << (n - 1)))
			flush_queue(r, n, op, h);
}

/* ---- the tier's view of the collective (zcache_remote_ops) --------------------------- */

static bool ops_alive(void *arg, unsigned node, unsigned epoch)
{
	struct remote *r = arg;

	return cluster_alive(r->cl, node, epoch);
}

static void ops_flush_page(void *arg, unsigned node, bool pers, const struct tmem_handle *h)
{
	flush_queue(arg, node, RAMSTER__PEER__OP__P_FLUSH, h);
}

static void ops_flush_object(void *arg, uint64_t nodes, bool pers, const struct tmem_handle *h)
{
	nodes_flush(arg, nodes, RAMSTER__PEER__OP__P_FLUSH_OBJECT, h);
}

static void ops_flush_pool(void *arg, uint64_t nodes, bool pers, uint32_t pool)
{
	struct tmem_handle h = { .pool = pool };

	nodes_flush(arg, nodes, RAMSTER__PEER__OP__P_FLUSH_POOL, &h);
}

static const struct zcache_remote_ops remote_zops = {
	.alive = ops_alive,
	.flush_page = ops_flush_page,
	.flush_object = ops_flush_object,
	.flush_pool = ops_flush_pool,
};

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
	pthread_mutex_lock(&r->lock);
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
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

/* ---- placing a copy ---------------------------------------------------------------- */

/*
 * Send len bytes of h's page (checksum, persistent or not) to a peer that is
 * not in *exclude, chosen by cluster_pick; a peer that cannot be asked joins
 * *exclude and the next is tried, while *tries < max. *to is the peer asked
 * (set before the request goes); cb(arg, ...) follows a request that went.
 * @return 0, or -ENOSPC (no peer could be asked: no cb).
 */
static int copy_send(struct remote *r, const struct tmem_handle *h, bool pers, const void *data,
		     size_t len, uint32_t checksum, uint64_t *exclude, unsigned *tries,
		     unsigned max, uint32_t *to, cluster_reply_fn cb, void *arg)
{
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;
	int node;

	while (*tries < max) {
		node = cluster_pick(r->cl, len, *exclude);
		if (node < 0)
			break;
		(*tries)++;
		*to = (uint32_t)node;
		page_from_handle(&pg, h, pers ? PAGE_PERSISTENT : 0, checksum);
		m.op = RAMSTER__PEER__OP__P_PUT;
		m.page = &pg;
		if (cluster_request(r->cl, (uint32_t)node, &m, data, len, r->timeout_ms, cb, arg) ==
		    0) {
			r->pages_sent++;
			return 0;
		}
		*exclude |= 1ull << (node - 1);
	}
	r->no_target++;
	return -ENOSPC;
}

/* ---- remotify: the loop's half ----------------------------------------------------------- */

static void page_send(struct rpage *p);

static void job_page_done(struct rjob *job)
{
	struct remote *r = job->r;

	if (--job->pending)
		return;
	zcache_remotify_done(r->z, &job->out);
	r->frames_done++;
	if (!job->placed)
		r->frames_partial++;
	pthread_mutex_lock(&r->lock);
	r->inflight--;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	if (job->placed)
		room_wake_all(r);
	free(job);
}

/* Copies acknowledged so far are of no use: the page stays in its frame. */
static void page_drop_copies(struct rpage *p)
{
	struct remote *r = p->job->r;
	unsigned k;

	for (k = 0; k < p->set.n; k++) {
		r->partial_flushes++;
		flush_queue(r, p->set.node[k], RAMSTER__PEER__OP__P_FLUSH, &p->job->out.p[p->i].h);
	}
	p->set.n = 0;
}

static void page_failed(struct rpage *p)
{
	struct remote *r = p->job->r;

	page_drop_copies(p);
	r->pages_failed++;
	pthread_mutex_lock(&r->lock);
	r->backoff_until_ns = clock_now_ns() + REMOTIFY_BACKOFF_MS * 1000000ull;
	pthread_mutex_unlock(&r->lock);
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

	p->set.len = op->len;
	p->set.checksum = op->checksum;
	rc = zcache_remotify_commit(r->z, &job->out, p->i, &p->set);
	if (rc == 0) {
		r->pages_placed++;
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
	int rc;

	rc = copy_send(p->job->r, &op->h, op->pers, op->data, op->len, op->checksum, &exclude,
		       &p->tries, REMOTIFY_TRIES + p->want - 1, &p->node, put_cb, p);
	p->tried = exclude & ~held;
	if (rc)
		page_failed(p);
}

static void job_start(struct rjob *job)
{
	struct remote *r = job->r;
	unsigned i;

	job->pending = 1; /* held until every page is started */
	for (i = 0; i < job->out.n; i++) {
		if (!job->out.p[i].resolved)
			continue;
		job->pg[i] = (struct rpage){ .job = job, .i = i };
		job->pg[i].want = job->out.p[i].pers ? r->replicas : 1;
		job->pending++;
		if (cluster_candidates(r->cl, job->out.p[i].len, 0) < job->pg[i].want) {
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

static void wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct remote *r = (struct remote *)((char *)w - offsetof(struct remote, wake));
	struct rjob *jobs;
	struct rflush *fl;

	pthread_mutex_lock(&r->lock);
	jobs = r->jobs_head;
	r->jobs_head = r->jobs_tail = NULL;
	fl = r->flush_head;
	r->flush_head = r->flush_tail = NULL;
	pthread_mutex_unlock(&r->lock);
	while (fl) {
		struct rflush *next = fl->next;

		fl->next = NULL;
		flush_send(fl);
		fl = next;
	}
	while (jobs) {
		struct rjob *next = jobs->next;

		job_start(jobs);
		jobs = next;
	}
}

/* ---- remotify: the thread ------------------------------------------------------------------ */

static void cond_wait_ms(struct remote *r, unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)ms * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_cond_timedwait(&r->cond, &r->lock, &ts);
}

static void *remotify_main(void *arg)
{
	struct remote *r = arg;
	bool active = false, pers_first = true;

	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		unsigned usage = zcache_usage_pct(r->z);
		struct rjob *job;
		int got = -ENOENT;

		if (usage >= r->high)
			active = true;
		else if (usage < r->low)
			active = false;
		if (!active || r->inflight >= REMOTIFY_INFLIGHT || clock_now_ns() < r->backoff_until_ns) {
			cond_wait_ms(r, REMOTIFY_IDLE_MS);
			continue;
		}
		pthread_mutex_unlock(&r->lock);
		job = calloc(1, sizeof(*job));
		if (job) {
			job->r = r;
			/* alternate the kinds, so neither LRU starves */
			if (pers_first && r->rem_pers)
				got = zcache_remotify_take(r->z, true, &job->out);
			if (got && r->rem_eph)
				got = zcache_remotify_take(r->z, false, &job->out);
			if (got && !pers_first && r->rem_pers)
				got = zcache_remotify_take(r->z, true, &job->out);
			pers_first = !pers_first;
		}
		pthread_mutex_lock(&r->lock);
		if (!job || got) {
			free(job);
			cond_wait_ms(r, REMOTIFY_IDLE_MS);
			continue;
		}
		r->frames_taken++;
		r->inflight++;
		if (r->jobs_tail)
			r->jobs_tail->next = job;
		else
			r->jobs_head = job;
		r->jobs_tail = job;
		ev_async_send(r->loop, &r->wake);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* ---- repatriate ------------------------------------------------------------------------------ */

/*
 * The slots of s whose holders are alive, nearest (smallest heartbeat round
 * trip; a lost link last) first, into order. @return how many.
 */
static unsigned holders_by_rtt(struct remote *r, const struct replica_set *s,
			       uint8_t order[REPLICA_MAX])
{
	double rtt[REPLICA_MAX];
	unsigned k, j, n = 0;

	for (k = 0; k < s->n; k++) {
		double t;

		if (!cluster_alive(r->cl, s->node[k], s->epoch[k]))
			continue;
		t = cluster_rtt_us(r->cl, s->node[k]);
		for (j = n; j > 0 && rtt[j - 1] > t; j--) {
			order[j] = order[j - 1];
			rtt[j] = rtt[j - 1];
		}
		order[j] = (uint8_t)k;
		rtt[j] = t;
		n++;
	}
	return n;
}

static void get_finish(struct rget *g, int result, const uint8_t *payload, size_t plen)
{
	struct remote *r = g->r;
	bool home = false;
	unsigned k;
	int res;

	res = zcache_repatriate_finish(r->z, &g->h, g->pampd, &g->set, g->destructive, result,
				       payload, plen, g->page, &home);
	for (k = 0; home && k < g->set.n; k++)
		flush_queue(r, g->set.node[k], RAMSTER__PEER__OP__P_FLUSH, &g->h);
	if (res == 0)
		r->get_hits++;
	else if (g->pers)
		r->get_lost++;
	else
		r->get_misses++;
	if (res && !g->pers)
		res = -ENOENT; /* an ephemeral page that cannot be had is a miss */
	tmem_note_get(r->t, res);
	g->cb(g->arg, res);
	free(g);
}

static void get_ask(struct rget *g);

static void get_cb(void *arg, int result, const Ramster__Peer__Msg *reply, const uint8_t *payload,
		   size_t plen)
{
	struct rget *g = arg;
	struct remote *r = g->r;

	if (result == 0 && (plen != g->set.len || zcache_checksum(payload, plen) != g->set.checksum))
		result = -EILSEQ; /* a bad copy: another holder may have a good one */
	if (result && result != -ECANCELED && g->next < g->n_order) {
		r->get_fallovers++;
		get_ask(g);
		return;
	}
	if (result == -EILSEQ)
		result = 0; /* the last copy: zcache counts the checksum error */
	get_finish(g, result, payload, plen);
}

/* A one-sided read of the page finished (or failed: then ask the same holder by message). */
static void get_read_cb(void *arg, int err, const void *data, size_t len)
{
	struct rget *g = arg;
	struct remote *r = g->r;

	if (!err && len == g->set.len && zcache_checksum(data, len) == g->set.checksum) {
		r->rdma_reads++;
		get_finish(g, 0, data, len);
		return;
	}
	/* a block reused since it was named, or the link went: the copy may still be there */
	r->rdma_read_fallbacks++;
	if (r->closing) {
		get_finish(g, -ECANCELED, NULL, 0);
		return;
	}
	g->next--;
	g->by_message = true;
	get_ask(g);
}

/* Ask the next live holder in order; with none left the page is lost. */
static void get_ask(struct rget *g)
{
	struct remote *r = g->r;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;

	while (g->next < g->n_order) {
		unsigned slot = g->order[g->next++];
		uint32_t node = g->set.node[slot];

		/* one-sided when the holder named where the bytes are on this very link */
		if (g->set.raddr[slot] && !g->destructive && !g->by_message &&
		    cluster_read(r->cl, node, g->set.lgen[slot], g->set.raddr[slot],
				 g->set.rkey[slot], g->set.len, get_read_cb, g) == 0)
			return;
		g->by_message = false;

		page_from_handle(&pg, &g->h,
				 (g->pers ? PAGE_PERSISTENT : 0) | (g->destructive ? PAGE_DELETE : 0),
				 0);
		m.op = RAMSTER__PEER__OP__P_GET;
		m.page = &pg;
		if (cluster_request(r->cl, node, &m, NULL, 0, g->attempt_ms, get_cb, g) == 0)
			return;
		r->get_fallovers++;
	}
	get_finish(g, -EHOSTDOWN, NULL, 0);
}

void remote_get(struct remote *r, const struct tmem_handle *h, bool pers, bool destructive,
		uint64_t pampd, void *page, remote_get_fn cb, void *arg)
{
	struct rget *g = calloc(1, sizeof(*g));
	unsigned again;
	int rc;

	if (!g) {
		cb(arg, pers ? -EIO : -ENOENT);
		return;
	}
	for (again = 0; zcache_remote_holders(r->z, pampd, &g->set); again++) {
		/* another thread changed the page since tmem looked: look again */
		rc = tmem_get_ex(r->t, h->pool, &h->oid, h->index, page, &pampd);
		if (rc != -EREMOTE || again == 3) {
			free(g);
			cb(arg, rc == -EREMOTE ? -EIO : rc);
			return;
		}
	}
	g->r = r;
	g->h = *h;
	g->pers = pers;
	g->destructive = destructive;
	g->pampd = pampd;
	g->page = page;
	g->cb = cb;
	g->arg = arg;
	r->gets++;
	g->n_order = holders_by_rtt(r, &g->set, g->order);
	/* all of them within the request timeout */
	g->attempt_ms = g->n_order > 1 ? r->timeout_ms / g->n_order : r->timeout_ms;
	if (g->attempt_ms < 20)
		g->attempt_ms = 20;
	get_ask(g);
}

/* ---- re-replication ------------------------------------------------------------------------- */

/*
 * A peer's death marks every replica record it held a copy in as degraded
 * (replica_mark_holder). The repair walk goes over the table at a bounded
 * pace, and for each degraded record copies the page from a live holder
 * (P_GET) to a new peer (P_PUT), then moves the record's dead slot there
 * (zcache_remote_move: only if the page is still the one read). A record
 * with no live holder is lost: counted and logged once, and its gets answer
 * -EIO. The walk ends when nothing is degraded and nothing is in flight.
 */

struct rrepair {
	struct remote *r;
	unsigned slot;            /* in r->repair_busy */
	uint64_t id;
	struct tmem_handle h;
	bool pers;
	struct replica_set set;
	unsigned from;            /* the dead holder whose copy is made again */
	uint8_t order[REPLICA_MAX]; /* live holders to ask for the bytes, nearest first */
	unsigned n_order, next;
	uint64_t tried;           /* targets that failed */
	unsigned tries;
	uint32_t to;
	size_t len;
	uint8_t data[4096];
};

static void repair_kick(struct remote *r)
{
	if (r->repair_on)
		return;
	r->repair_on = true;
	r->repair_cursor = 0;
	ev_timer_again(r->loop, &r->repair_timer);
}

static void repair_end(struct rrepair *p, bool mended)
{
	struct remote *r = p->r;

	r->repair_busy[p->slot] = 0;
	r->repair_inflight--;
	if (mended)
		r->repair_progress = true;
	else
		r->repair_failed++;
	free(p);
}

static void log_lost(const struct tmem_handle *h)
{
	log_warn("persistent page lost: every holder of its copies died (pool %u, object "
		 "%016llx.%016llx.%016llx, index %u): its gets answer -EIO",
		 h->pool, (unsigned long long)h->oid.w[0], (unsigned long long)h->oid.w[1],
		 (unsigned long long)h->oid.w[2], h->index);
}

static void repair_put(struct rrepair *p);

static void repair_put_cb(void *arg, int result, const Ramster__Peer__Msg *reply,
			  const uint8_t *payload, size_t plen)
{
	struct rrepair *p = arg;
	struct remote *r = p->r;
	struct replica_set now;
	uint64_t pampd;
	unsigned k, alive = 0;
	int rc;

	if (result == -ECANCELED) {
		repair_end(p, false);
		return;
	}
	if (result) {
		p->tried |= 1ull << (p->to - 1);
		repair_put(p);
		return;
	}
	rc = zcache_remote_move(r->z, &p->h, zcache_replica_pampd(p->id), p->from, p->to,
				cluster_epoch(r->cl, p->to) & 255, &pampd);
	if (rc) {
		/* the page changed or went away meanwhile: the new copy is stale */
		r->repair_stale++;
		flush_queue(r, p->to, RAMSTER__PEER__OP__P_FLUSH, &p->h);
		repair_end(p, true);
		return;
	}
	r->rereplicated++;
	if (zcache_remote_holders(r->z, pampd, &now) == 0) {
		for (k = 0; k < now.n; k++)
			alive += cluster_alive(r->cl, now.node[k], now.epoch[k]);
		if (alive == now.n)
			replica_set_state(zcache_replicas(r->z), pampd & ~3ull, 0);
	}
	repair_end(p, true);
}

/* Place the bytes on a peer that holds no live copy yet. */
static void repair_put(struct rrepair *p)
{
	struct remote *r = p->r;
	uint64_t exclude = p->tried;
	unsigned k;

	/* a dead holder that came back (empty, in a new epoch) is a fine target */
	for (k = 0; k < p->set.n; k++)
		if (cluster_alive(r->cl, p->set.node[k], p->set.epoch[k]))
			exclude |= 1ull << (p->set.node[k] - 1);
	if (copy_send(r, &p->h, p->pers, p->data, p->len, p->set.checksum, &exclude, &p->tries,
		      REMOTIFY_TRIES, &p->to, repair_put_cb, p))
		repair_end(p, false);
}

static void repair_fetch(struct rrepair *p);

static void repair_got(void *arg, int result, const Ramster__Peer__Msg *reply,
		       const uint8_t *payload, size_t plen)
{
	struct rrepair *p = arg;

	if (result == -ECANCELED) {
		repair_end(p, false);
		return;
	}
	if (result || plen != p->set.len || zcache_checksum(payload, plen) != p->set.checksum) {
		repair_fetch(p); /* another live holder, if any */
		return;
	}
	memcpy(p->data, payload, plen);
	p->len = plen;
	repair_put(p);
}

/* Ask the next live holder (nearest first) for the bytes. */
static void repair_fetch(struct rrepair *p)
{
	struct remote *r = p->r;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;

	while (p->next < p->n_order) {
		uint32_t node = p->set.node[p->order[p->next++]];

		page_from_handle(&pg, &p->h, p->pers ? PAGE_PERSISTENT : 0, 0);
		m.op = RAMSTER__PEER__OP__P_GET;
		m.page = &pg;
		if (cluster_request(r->cl, node, &m, NULL, 0, r->timeout_ms, repair_got, p) == 0)
			return;
	}
	repair_end(p, false);
}

/* A record the walk met; start mending it if it is degraded and not in hand already. */
static void repair_visit(void *arg, uint64_t id, const struct tmem_handle *h, bool pers,
			 const struct replica_set *s)
{
	struct remote *r = arg;
	struct rrepair *p;
	unsigned k, slot = REPAIR_INFLIGHT, alive = 0, from = 0;

	if (!(s->state & REPLICA_DEGRADED))
		return;
	for (k = 0; k < REPAIR_INFLIGHT; k++) {
		if (r->repair_busy[k] >> 32 == id >> 32)
			return; /* this record (under an older id, maybe) is being mended */
		if (!r->repair_busy[k] && slot == REPAIR_INFLIGHT)
			slot = k;
	}
	for (k = 0; k < s->n; k++) {
		if (cluster_alive(r->cl, s->node[k], s->epoch[k]))
			alive++;
		else if (!from)
			from = s->node[k];
	}
	if (!from) {
		replica_set_state(zcache_replicas(r->z), id, 0); /* healed meanwhile */
		return;
	}
	if (!alive) {
		replica_set_state(zcache_replicas(r->z), id, REPLICA_LOST);
		r->replica_lost++;
		log_lost(h);
		return;
	}
	if (slot == REPAIR_INFLIGHT)
		return;
	{
		uint64_t live = 0;

		for (k = 0; k < s->n; k++)
			if (cluster_alive(r->cl, s->node[k], s->epoch[k]))
				live |= 1ull << (s->node[k] - 1);
		if (!cluster_candidates(r->cl, s->len, live)) {
			/* no peer could take a copy now: wait (a peer coming up wakes us) */
			r->repair_blocked = true;
			return;
		}
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return;
	*p = (struct rrepair){ .r = r, .slot = slot, .id = id, .h = *h, .pers = pers, .set = *s,
			       .from = from };
	p->n_order = holders_by_rtt(r, s, p->order);
	r->repair_busy[slot] = id;
	r->repair_inflight++;
	r->repair_tokens -= 1;
	repair_fetch(p);
}

static void repair_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct remote *r = (struct remote *)((char *)w - offsetof(struct remote, repair_timer));
	struct replica_table *t = zcache_replicas(r->z);
	unsigned walked = 0;

	r->repair_tokens += r->repair_rate * (REPAIR_TICK_MS / 1000.0);
	if (r->repair_tokens > r->repair_rate / 10.0 + 1)
		r->repair_tokens = r->repair_rate / 10.0 + 1; /* no bursts after a pause */
	w->repeat = REPAIR_TICK_MS / 1000.0;
	r->repair_blocked = false;
	while (r->repair_inflight < REPAIR_INFLIGHT && r->repair_tokens >= 1 &&
	       walked < REPAIR_WALK) {
		walked += (unsigned)replica_walk(t, &r->repair_cursor, 1, repair_visit, r);
		if (r->repair_blocked) {
			r->repair_waits++;
			w->repeat = REPAIR_IDLE_MS / 1000.0;
			break;
		}
		if (r->repair_cursor)
			continue;
		/* a pass is over */
		struct replica_usage u;

		r->repair_passes++;
		replica_usage(t, &u);
		if (!u.degraded && !r->repair_inflight) {
			r->repair_on = false;
			ev_timer_stop(loop, w);
			return;
		}
		if (!r->repair_progress)
			w->repeat = REPAIR_IDLE_MS / 1000.0; /* nothing could be mended: wait */
		r->repair_progress = false;
		break;
	}
	ev_timer_again(loop, w);
}

/* ---- drain: hand every foreign page back to its owner ----------------------------------- */

/*
 * A draining node refuses new pages (and announces no free room), and sends
 * each page it holds to its owner (P_RETURN with the bytes). The owner places
 * it on another peer and moves its record there, then answers 0, and the page
 * is dropped here; an owner that no longer wants the copy answers -ENOENT and
 * it is dropped too. Anything else keeps the page for a later try.
 */

struct rdrain {
	struct remote *r;
	unsigned slot;
};

static void drain_ret_cb(void *arg, int result, const Ramster__Peer__Msg *reply,
			 const uint8_t *payload, size_t plen)
{
	struct rdrain *d = arg;
	struct remote *r = d->r;

	if (result == 0 || result == -ENOENT) {
		foreign_flush(r->fs, &r->drain_busy[d->slot]);
		if (result == 0)
			r->drain_returned++;
		else
			r->drain_orphans++; /* the owner does not want this copy (or it is bad) */
	} else if (result != -ECANCELED) {
		r->drain_failed++;
		r->drain_pause_until = ev_now(r->loop) + DRAIN_RETRY_MS / 1000.0;
	}
	r->drain_busy_used[d->slot] = false;
	r->drain_inflight--;
	free(d);
}

static bool key_eq(const struct foreign_key *a, const struct foreign_key *b)
{
	return a->owner == b->owner && a->incarnation == b->incarnation && a->pool == b->pool &&
	       a->oid[0] == b->oid[0] && a->oid[1] == b->oid[1] && a->oid[2] == b->oid[2] &&
	       a->index == b->index;
}

/* A page of the walk: hand it back unless in hand already. @return true to stop the walk. */
static bool drain_visit(void *arg, const struct foreign_key *k, bool pers, const void *data,
			size_t len, uint32_t checksum)
{
	struct remote *r = arg;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;
	struct rdrain *d;
	unsigned i, slot = DRAIN_INFLIGHT;

	for (i = 0; i < DRAIN_INFLIGHT; i++) {
		if (r->drain_busy_used[i] && key_eq(&r->drain_busy[i], k))
			return false;
		if (!r->drain_busy_used[i] && slot == DRAIN_INFLIGHT)
			slot = i;
	}
	if (slot == DRAIN_INFLIGHT)
		return true;
	d = malloc(sizeof(*d));
	if (!d)
		return true;
	*d = (struct rdrain){ r, slot };
	ramster__peer__page__init(&pg);
	pg.pool = k->pool;
	pg.oid0 = k->oid[0];
	pg.oid1 = k->oid[1];
	pg.oid2 = k->oid[2];
	pg.index = k->index;
	pg.flags = pers ? PAGE_PERSISTENT : 0;
	pg.checksum = checksum;
	m.op = RAMSTER__PEER__OP__P_RETURN;
	m.page = &pg;
	if (cluster_request(r->cl, k->owner, &m, data, len, r->timeout_ms, drain_ret_cb, d)) {
		free(d);
		r->drain_failed++;
		return false;
	}
	r->drain_busy[slot] = *k;
	r->drain_busy_used[slot] = true;
	r->drain_inflight++;
	return r->drain_inflight >= DRAIN_INFLIGHT;
}

static void drain_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct remote *r = (struct remote *)((char *)w - offsetof(struct remote, drain_timer));

	if (r->drain_inflight < DRAIN_INFLIGHT && ev_now(loop) >= r->drain_pause_until)
		foreign_walk(r->fs, drain_visit, r);
}

int remote_drain(struct remote *r, bool on)
{
	struct foreign_stats fs;

	foreign_get_stats(r->fs, &fs);
	if (on == r->draining)
		return 0;
	r->draining = on;
	if (on) {
		log_notice("draining: refusing new pages from peers, handing %llu held pages to "
			   "their owners",
			   (unsigned long long)fs.pages);
		ev_timer_set(&r->drain_timer, 0, DRAIN_TICK_MS / 1000.0);
		ev_timer_start(r->loop, &r->drain_timer);
	} else {
		log_notice("drain ended: taking pages from peers again (%llu still held)",
			   (unsigned long long)fs.pages);
		ev_timer_stop(r->loop, &r->drain_timer);
	}
	return 0;
}

struct rdrain_peer {
	remote_get_fn cb;
	void *arg;
};

static void drain_peer_cb(void *arg, int result, const Ramster__Peer__Msg *reply,
			  const uint8_t *payload, size_t plen)
{
	struct rdrain_peer *d = arg;

	d->cb(d->arg, result);
	free(d);
}

void remote_drain_peer(struct remote *r, uint32_t node, bool on, remote_get_fn cb, void *arg)
{
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	struct rdrain_peer *d = malloc(sizeof(*d));
	uint8_t b = on;
	int rc;

	if (!d) {
		cb(arg, -ENOMEM);
		return;
	}
	*d = (struct rdrain_peer){ cb, arg };
	m.op = RAMSTER__PEER__OP__P_DRAIN;
	rc = cluster_request(r->cl, node, &m, &b, 1, r->timeout_ms, drain_peer_cb, d);
	if (rc) {
		free(d);
		cb(arg, rc);
	}
}

/* ---- taking a copy back from a draining holder (the owner's side) ------------------------- */

struct rreturn {
	struct remote *r;
	uint32_t from;            /* the draining holder */
	uint64_t seq;             /* its request */
	struct tmem_handle h;
	bool pers;
	uint64_t expect;          /* our descriptor of the page when it came */
	uint64_t exclude;         /* its holders and the targets that failed */
	unsigned tries;
	uint32_t to;
	size_t len;
	uint32_t checksum;
	uint8_t data[4096];
};

struct peek {
	uint64_t pampd;
	bool pers;
};

static int peek_fn(void *arg, struct tmem_ref ref, bool pers, uint64_t *pampd)
{
	struct peek *k = arg;

	k->pampd = *pampd;
	k->pers = pers;
	return 0;
}

/* Does our page h still name node's copy (alive), with these bytes? @return its descriptor or 0. */
static uint64_t names_copy(struct remote *r, const struct tmem_handle *h, uint32_t node,
			   unsigned len, uint32_t checksum, bool *pers)
{
	struct peek pk = { 0, false };
	struct replica_set set;
	unsigned k;

	tmem_update(r->t, h, peek_fn, &pk);
	if (!pk.pampd || zcache_remote_holders(r->z, pk.pampd, &set) || set.len != len ||
	    set.checksum != checksum)
		return 0;
	if (pers)
		*pers = pk.pers;
	for (k = 0; k < set.n; k++)
		if (set.node[k] == node && cluster_alive(r->cl, node, set.epoch[k]))
			return pk.pampd;
	return 0;
}

static void return_end(struct rreturn *q, int result)
{
	struct remote *r = q->r;

	if (result)
		r->returns_refused++;
	else
		r->returns_served++;
	cluster_reply(r->cl, q->from, q->seq, result, NULL, NULL, 0);
	free(q);
}

static void return_put(struct rreturn *q);

static void return_put_cb(void *arg, int result, const Ramster__Peer__Msg *reply,
			  const uint8_t *payload, size_t plen)
{
	struct rreturn *q = arg;
	struct remote *r = q->r;
	int rc;

	if (result == -ECANCELED) {
		free(q);
		return;
	}
	if (result) {
		q->exclude |= 1ull << (q->to - 1);
		return_put(q);
		return;
	}
	rc = zcache_remote_move(r->z, &q->h, q->expect, q->from, q->to,
				cluster_epoch(r->cl, q->to) & 255, NULL);
	if (rc == -ENOENT) {
		/* the record changed (another slot re-replicated, say): if it still
		 * names the draining copy, move it under the new descriptor */
		q->expect = names_copy(r, &q->h, q->from, (unsigned)q->len, q->checksum, NULL);
		if (q->expect)
			rc = zcache_remote_move(r->z, &q->h, q->expect, q->from, q->to,
						cluster_epoch(r->cl, q->to) & 255, NULL);
	}
	if (rc) {
		/* the page changed meanwhile: neither copy is wanted */
		flush_queue(r, q->to, RAMSTER__PEER__OP__P_FLUSH, &q->h);
		return_end(q, -ENOENT);
		return;
	}
	return_end(q, 0);
}

static void return_put(struct rreturn *q)
{
	if (copy_send(q->r, &q->h, q->pers, q->data, q->len, q->checksum, &q->exclude, &q->tries,
		      REMOTIFY_TRIES, &q->to, return_put_cb, q))
		return_end(q, -ENOSPC);
}

/* P_RETURN from node: place its copy of our page elsewhere, then answer. */
static void return_serve(struct remote *r, uint32_t node, const Ramster__Peer__Msg *m,
			 const uint8_t *payload, size_t plen)
{
	struct tmem_handle h = { m->page->pool, { { m->page->oid0, m->page->oid1, m->page->oid2 } },
				 m->page->index };
	uint32_t checksum = zcache_checksum(payload, plen);
	struct replica_set set;
	struct rreturn *q;
	uint64_t expect;
	unsigned k;
	bool pers = false;

	expect = names_copy(r, &h, node, (unsigned)plen, checksum, &pers);
	if (!expect || zcache_remote_holders(r->z, expect, &set)) {
		/* not a copy we point at (stale, or bad bytes): it can go */
		r->returns_refused++;
		cluster_reply(r->cl, node, m->seq, -ENOENT, NULL, NULL, 0);
		return;
	}
	q = malloc(sizeof(*q));
	if (!q) {
		cluster_reply(r->cl, node, m->seq, -ENOMEM, NULL, NULL, 0);
		return;
	}
	*q = (struct rreturn){ .r = r, .from = node, .seq = m->seq, .h = h, .pers = pers,
			       .expect = expect, .len = plen, .checksum = checksum };
	for (k = 0; k < set.n; k++)
		q->exclude |= 1ull << (set.node[k] - 1); /* a slot of the record, dead or not */
	memcpy(q->data, payload, plen);
	return_put(q);
}

/* ---- ping: a diagnostic round trip through a peer ---------------------------------------------- */

struct rping {
	void *back;
	remote_get_fn cb;
	void *arg;
};

static void ping_cb(void *arg, int result, const Ramster__Peer__Msg *reply, const uint8_t *payload,
		    size_t plen)
{
	struct rping *p = arg;

	if (result == 0 && plen != 4096)
		result = -EIO;
	if (result == 0)
		memcpy(p->back, payload, plen);
	p->cb(p->arg, result);
	free(p);
}

void remote_ping(struct remote *r, uint32_t node, const void *page, void *back, remote_get_fn cb,
		 void *arg)
{
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	struct rping *p = malloc(sizeof(*p));
	int rc;

	if (!p) {
		cb(arg, -ENOMEM);
		return;
	}
	*p = (struct rping){ back, cb, arg };
	r->pings++;
	m.op = RAMSTER__PEER__OP__P_ECHO;
	rc = cluster_request(r->cl, node, &m, page, 4096, r->timeout_ms, ping_cb, p);
	if (rc) {
		free(p);
		cb(arg, rc);
	}
}

/* ---- serving peers (the foreign store) ------------------------------------------------------ */

static void key_of(struct foreign_key *k, uint32_t node, uint64_t session,
		   const Ramster__Peer__Page *pg)
{
	memset(k, 0, sizeof(*k));
	k->owner = node;
	k->incarnation = session;
	k->pool = pg->pool;
	k->oid[0] = pg->oid0;
	k->oid[1] = pg->oid1;
	k->oid[2] = pg->oid2;
	k->index = pg->index;
}

static void on_request(void *arg, uint32_t node, uint64_t session, const Ramster__Peer__Msg *m,
		       const uint8_t *payload, size_t plen)
{
	struct remote *r = arg;
	struct foreign_key k;
	const void *data;
	size_t len;
	uint32_t cs;
	int rc;

	if (m->op == RAMSTER__PEER__OP__P_ECHO) {
		/* a diagnostic round trip (ramster_ping): the bytes go back as they came */
		r->served_echoes++;
		cluster_reply(r->cl, node, m->seq, 0, NULL, payload, plen);
		return;
	}
	if (m->op == RAMSTER__PEER__OP__P_DRAIN) {
		/* peerwire let through exactly one byte */
		rc = payload[0] > 1 ? -EINVAL : remote_drain(r, payload[0] == 1);
		if (!rc)
			log_notice("drain %s at the request of node %u", payload[0] ? "asked" : "ended",
				   node);
		cluster_reply(r->cl, node, m->seq, rc, NULL, NULL, 0);
		return;
	}
	key_of(&k, node, session, m->page);
	switch (m->op) {
	case RAMSTER__PEER__OP__P_PUT:
		if (r->draining) {
			r->drain_refused++;
			rc = -ENOSPC;
		} else if (zcache_checksum(payload, plen) != m->page->checksum) {
			r->served_checksum_errors++;
			rc = -EIO;
		} else {
			rc = foreign_put_at(r->fs, &k, m->page->flags & PAGE_PERSISTENT, payload,
					    plen, m->page->checksum, &data);
		}
		if (rc) {
			r->served_puts_refused++;
			cluster_reply(r->cl, node, m->seq, rc, NULL, NULL, 0);
			break;
		}
		r->served_puts++;
		{
			/* over rdma: tell the owner where the bytes are, for one-sided reads */
			Ramster__Peer__Page pg = RAMSTER__PEER__PAGE__INIT;
			uint32_t rkey, gen;

			if (cluster_mem_key(r->cl, node, data, plen, &rkey, &gen) == 0) {
				pg.raddr = (uint64_t)(uintptr_t)data;
				pg.rkey = rkey;
				cluster_reply(r->cl, node, m->seq, 0, &pg, NULL, 0);
				break;
			}
		}
		cluster_reply(r->cl, node, m->seq, 0, NULL, NULL, 0);
		break;
	case RAMSTER__PEER__OP__P_GET: {
		Ramster__Peer__Page pg;

		rc = foreign_get(r->fs, &k, &data, &len, &cs);
		if (rc) {
			r->served_get_misses++;
			cluster_reply(r->cl, node, m->seq, rc, NULL, NULL, 0);
			break;
		}
		r->served_gets++;
		pg = *m->page;
		pg.base.unknown_fields = NULL;
		pg.base.n_unknown_fields = 0;
		pg.checksum = cs;
		cluster_reply(r->cl, node, m->seq, 0, &pg, data, len);
		if (m->page->flags & PAGE_DELETE)
			foreign_flush(r->fs, &k);
		break;
	}
	case RAMSTER__PEER__OP__P_FLUSH:
		r->served_flushes++;
		cluster_reply(r->cl, node, m->seq, foreign_flush(r->fs, &k), NULL, NULL, 0);
		break;
	case RAMSTER__PEER__OP__P_FLUSH_OBJECT:
		r->served_flushes++;
		foreign_flush_object(r->fs, &k);
		cluster_reply(r->cl, node, m->seq, 0, NULL, NULL, 0);
		break;
	case RAMSTER__PEER__OP__P_FLUSH_POOL:
		r->served_flushes++;
		foreign_flush_pool(r->fs, node, session, m->page->pool);
		cluster_reply(r->cl, node, m->seq, 0, NULL, NULL, 0);
		break;
	case RAMSTER__PEER__OP__P_RETURN:
		return_serve(r, node, m, payload, plen);
		break;

	default:
		cluster_reply(r->cl, node, m->seq, -EOPNOTSUPP, NULL, NULL, 0);
		break;
	}
}

/* ---- the foreign store's memory, readable by its owner over rdma ---------------------------- */

static void chunk_add(void *arg, uint32_t owner, void *base, size_t len)
{
	struct remote *r = arg;
	int rc = cluster_mem_add(r->cl, owner, base, len);

	if (rc == 0)
		r->rdma_chunks++;
	else if (rc != -ENOTSUP)
		r->rdma_chunk_errors++;
}

static void chunk_del(void *arg, uint32_t owner, void *base, size_t len)
{
	struct remote *r = arg;

	cluster_mem_del(r->cl, owner, base);
}

static const struct arena_hooks remote_arena_hooks = { chunk_add, chunk_del };

struct chunk_ctx {
	struct remote *r;
	uint32_t owner;
};

static void chunk_register(void *arg, void *base, size_t len)
{
	struct chunk_ctx *x = arg;

	chunk_add(x->r, x->owner, base, len);
}

static void on_peer_up(void *arg, uint32_t node, uint64_t session)
{
	struct remote *r = arg;
	uint64_t n = foreign_drop_owner(r->fs, node, session);
	struct replica_usage u;

	/* its pages kept under this session: readable over the new link (if rdma) */
	{
		struct chunk_ctx x = { r, node };

		foreign_foreach_chunk(r->fs, node, chunk_register, &x);
	}
	/* a new target for pages below their replica count */
	replica_usage(zcache_replicas(r->z), &u);
	if (u.degraded)
		repair_kick(r);

	if (n) {
		r->owner_drops += n;
		log_notice("dropped %llu pages held for node %u from its earlier session",
			   (unsigned long long)n, node);
	}
}

static void on_peer_down(void *arg, uint32_t node, const char *why)
{
	struct remote *r = arg;
	/* Our session with it is over: it will not ask for these pages again
	 * (a new link starts a new session, see cluster.h). */
	uint64_t n = foreign_drop_owner(r->fs, node, 0);

	r->owner_drops += n;
	if (n)
		log_notice("dropped %llu pages held for node %u (%s)", (unsigned long long)n, node,
			   why);
	/* and its copies of our pages are gone: make them again elsewhere */
	n = replica_mark_holder(zcache_replicas(r->z), node);
	if (n) {
		log_notice("%llu pages had a copy on node %u: re-replicating them",
			   (unsigned long long)n, node);
		repair_kick(r);
	}
}

static void on_donate(void *arg, uint64_t *free_bytes, uint64_t *total)
{
	struct remote *r = arg;
	struct foreign_stats s;

	foreign_get_stats(r->fs, &s);
	*total = s.budget;
	*free_bytes = s.used < s.budget && !r->draining ? s.budget - s.used : 0;
}

static uint64_t on_foreign_pages(void *arg, uint32_t node)
{
	struct remote *r = arg;

	return foreign_owner_pages(r->fs, node);
}

static const struct cluster_handlers remote_handlers = {
	.on_request = on_request,
	.on_peer_up = on_peer_up,
	.on_peer_down = on_peer_down,
	.donate = on_donate,
	.foreign_pages = on_foreign_pages,
};

/* ---- life cycle ---------------------------------------------------------------------------------- */

struct remote *remote_create(struct ev_loop *loop, struct zcache *z, const struct config *cfg,
			     const struct config_node *self, char *err, size_t errlen)
{
	const char *rdma_read_env = getenv("RAMSTER_RDMA_READ");
	uint8_t key[CLUSTER_KEY_LEN];
	struct remote *r;

	if (rdma_read_env && strcmp(rdma_read_env, "0") && strcmp(rdma_read_env, "1")) {
		snprintf(err, errlen, "RAMSTER_RDMA_READ: '%s' is not 0 or 1", rdma_read_env);
		return NULL;
	}
	if (cluster_load_key(cfg->secret_file, key, err, errlen))
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	r->loop = loop;
	r->z = z;
	r->t = zcache_tmem(z);
	r->self = self->id;
	r->timeout_ms = cfg->request_timeout_ms ? cfg->request_timeout_ms : cfg->dead_after_ms;
	r->high = cfg->high_watermark_pct;
	r->low = cfg->low_watermark_pct;
	r->rem_eph = cfg->remotify_ephemeral;
	r->rem_pers = cfg->remotify_persistent;
	r->replicas = cfg->replicas ? cfg->replicas : 1;
	r->rdma_read = !(rdma_read_env && !strcmp(rdma_read_env, "0"));
	r->repair_rate = cfg->rereplicate_rate ? cfg->rereplicate_rate : 2000;
	ev_init(&r->repair_timer, repair_tick);
	r->repair_timer.repeat = REPAIR_TICK_MS / 1000.0;
	ev_init(&r->drain_timer, drain_tick);
	/* bring repatriated pages home only below the low watermark, or remotify
	 * would push them straight out again */
	{
		struct zcache_stats zs;

		zcache_get_stats(z, &zs);
		zcache_set_home_limit(z, zs.budget_frames * r->low / 100);
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	ev_async_init(&r->wake, wake_cb);
	ev_async_start(loop, &r->wake);
	r->fs = foreign_create(self->donate_mb * 1024 * 1024);
	if (!r->fs) {
		snprintf(err, errlen, "cannot create the foreign store (donate_mb %llu)",
			 (unsigned long long)self->donate_mb);
		goto fail;
	}
	foreign_set_hooks(r->fs, &remote_arena_hooks, r);
	r->cl = cluster_create(loop, cfg, self, key, &remote_handlers, r, err, errlen);
	sodium_memzero(key, sizeof(key));
	if (!r->cl)
		goto fail;
	zcache_set_remote(z, &remote_zops, r);
	if (pthread_create(&r->thread, NULL, remotify_main, r)) {
		snprintf(err, errlen, "cannot start the remotify thread");
		goto fail;
	}
	r->thread_started = true;
	return r;
fail:
	remote_destroy(r);
	return NULL;
}

void remote_destroy(struct remote *r)
{
	struct rjob *job;
	struct rflush *fl;

	if (!r)
		return;
	if (r->thread_started) {
		pthread_mutex_lock(&r->lock);
		r->stop = true;
		pthread_cond_signal(&r->cond);
		pthread_mutex_unlock(&r->lock);
		pthread_join(r->thread, NULL);
	}
	/* Frames queued but not started go back to the LRU. */
	while ((job = r->jobs_head)) {
		r->jobs_head = job->next;
		zcache_remotify_done(r->z, &job->out);
		free(job);
	}
	ev_timer_stop(r->loop, &r->repair_timer);
	ev_timer_stop(r->loop, &r->drain_timer);
	r->closing = true;
	/* In-flight requests are cancelled (their callbacks finish the frames). */
	cluster_destroy(r->cl);
	r->cl = NULL;
	while ((fl = r->flush_head)) {
		r->flush_head = fl->next;
		free(fl);
	}
	while (r->waiters)
		room_fire(r, r->waiters);
	zcache_set_remote(r->z, NULL, NULL);
	ev_async_stop(r->loop, &r->wake);
	foreign_destroy(r->fs);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

struct cluster *remote_cluster(struct remote *r)
{
	return r->cl;
}

uint64_t remote_pages_held_for(struct remote *r, uint32_t node)
{
	return foreign_owner_pages(r->fs, node);
}

void remote_foreach_stat(struct remote *r,
			 void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			 void *arg)
{
	struct foreign_stats fs;

#define R(f, h) fn(arg, "remote_" #f, r->f, h)
	R(frames_taken, "frames the remotify thread took (zombies)");
	R(frames_done, "of those, finished");
	R(frames_partial, "frames none of whose pages could be placed (back on the LRU)");
	R(pages_sent, "page copies sent to peers (remotify, re-replication, drain)");
	R(pages_placed, "pages a peer acknowledged (now remote)");
	R(pages_failed, "pages no peer would take (stayed local)");
	R(retries, "remotify pages retried on another peer");
	R(no_target, "remotify attempts that found no live peer with room");
	R(stale_flushes, "pages changed in flight whose remote copy was flushed");
	R(gets, "gets of remote pages (repatriate)");
	R(get_hits, "repatriated pages returned");
	R(get_lost, "persistent remote pages lost (-EIO)");
	R(get_misses, "ephemeral remote pages missing");
	R(flushes_sent, "remote flushes sent (page, object, pool)");
	R(flush_retries, "remote flushes resent after a timeout");
	R(flushes_dropped, "remote flushes dropped: the holder is dead");
	R(served_puts, "peer pages stored in the foreign store");
	R(served_puts_refused, "peer pages refused (store full, bad checksum)");
	R(served_checksum_errors, "peer pages whose bytes failed their checksum");
	R(served_gets, "peer gets answered with a page");
	R(served_get_misses, "peer gets of pages not held");
	R(served_flushes, "peer flushes served");
	R(owner_drops, "pages dropped because their owner died, restarted or re-linked");
	R(pings, "diagnostic round trips through a peer (ramster_ping)");
	R(served_echoes, "diagnostic round trips answered for peers");
	R(copies_placed, "page copies peers acknowledged (replicas per persistent page)");
	R(partial_flushes, "copies flushed because a page could not get all its replicas");
	R(get_fallovers, "remote gets that asked the next holder (one failed or was bad)");
	R(rdma_reads, "remote gets served by a one-sided RDMA READ");
	R(rdma_read_fallbacks, "one-sided reads that failed or read other bytes (asked by message)");
	R(rdma_chunks, "foreign store chunks registered on rdma links for peers' reads");
	R(rdma_chunk_errors, "foreign store chunks that could not be registered (no reads there)");
	R(returns_served, "copies a draining peer handed back, placed elsewhere");
	R(returns_refused, "copies a draining peer handed back that were not wanted or placed");
#undef R
	{
		struct replica_usage u;

		replica_usage(zcache_replicas(r->z), &u);
		fn(arg, "replica_target", r->replicas, "copies kept of each remote persistent page");
		fn(arg, "replica_below_target", u.degraded,
		   "remote persistent pages with fewer live copies than the target now");
		fn(arg, "replica_lost_now", u.lost,
		   "remote persistent pages with no live copy now (gets answer -EIO)");
	}
	fn(arg, "replica_rereplicated", r->rereplicated, "copies made again after a holder died");
	fn(arg, "replica_repair_failed", r->repair_failed,
	   "re-replications that failed (no source or no target; tried again)");
	fn(arg, "replica_repair_stale", r->repair_stale,
	   "re-replicated copies flushed: the page changed meanwhile");
	fn(arg, "replica_lost", r->replica_lost, "persistent pages whose every copy died (logged)");
	fn(arg, "replica_repair_passes", r->repair_passes, "passes of the repair walk");
	fn(arg, "replica_repair_waits", r->repair_waits,
	   "pauses of the repair walk: no live peer could take another copy");
	fn(arg, "replica_repair_active", r->repair_on, "1 while re-replication is running");
	{
		struct foreign_stats ds;

		foreign_get_stats(r->fs, &ds);
		fn(arg, "drain_active", r->draining, "1 while this node is draining or drained");
		fn(arg, "drain_pages_left", r->draining ? ds.pages : 0,
		   "pages still held for peers while draining");
	}
	fn(arg, "drain_returned", r->drain_returned, "pages handed to their owners (drain)");
	fn(arg, "drain_orphans", r->drain_orphans, "pages dropped in a drain: the owner no longer wanted them");
	fn(arg, "drain_failed", r->drain_failed, "hand-backs that failed (tried again)");
	fn(arg, "drain_refused", r->drain_refused, "peer pages refused while draining");
	foreign_get_stats(r->fs, &fs);
	fn(arg, "foreign_pages", fs.pages, "pages held for peers now");
	fn(arg, "foreign_bytes", fs.bytes, "their compressed bytes");
	fn(arg, "foreign_used", fs.used, "bytes charged to donate_mb");
	fn(arg, "foreign_budget", fs.budget, "donate_mb in bytes");
	fn(arg, "foreign_refused_full", fs.refused_full, "peer pages refused: donate_mb full");
	fn(arg, "foreign_dropped", fs.dropped, "peer pages dropped with their owner's session");
	cluster_foreach_stat(r->cl, fn, arg);
}
