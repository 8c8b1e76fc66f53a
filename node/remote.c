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

#include "node/clock.h"
#include "node/foreign.h"
#include "node/log.h"
#include "node/remote.h"

/* ---- tunables --------------------------------------------------------------- */

#define REMOTIFY_INFLIGHT 32      /* frames handed to the loop and not done */
#define REMOTIFY_IDLE_MS 5        /* how often an idle thread looks at the tier */
#define REMOTIFY_BACKOFF_MS 50    /* pause after a frame found no peer */
#define REMOTIFY_TRIES 3          /* peers tried for one page */

/* ---- structures -------------------------------------------------------------- */

struct rjob;

/* One page of a frame in flight. */
struct rpage {
	struct rjob *job;
	unsigned i;
	uint32_t node;      /* the peer asked now */
	uint64_t tried;     /* peers that refused or failed */
	unsigned tries;
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
	uint32_t node;
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

	/* counters (loop thread, but the thread's two are under lock) */
	uint64_t frames_taken, frames_done, frames_partial;
	uint64_t pages_sent, pages_placed, pages_failed, retries, no_target, stale_flushes;
	uint64_t gets, get_hits, get_lost, get_misses;
	uint64_t flushes_sent, flush_retries, flushes_dropped;
	uint64_t served_puts, served_puts_refused, served_checksum_errors, served_gets,
	    served_get_misses, served_flushes;
	uint64_t owner_drops;
	uint64_t pings, served_echoes;
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

static void page_failed(struct rpage *p)
{
	struct remote *r = p->job->r;

	r->pages_failed++;
	pthread_mutex_lock(&r->lock);
	r->backoff_until_ns = clock_now_ns() + REMOTIFY_BACKOFF_MS * 1000000ull;
	pthread_mutex_unlock(&r->lock);
	job_page_done(p->job);
}

static void put_cb(void *arg, int result, const Ramster__Peer__Msg *reply, const uint8_t *payload,
		   size_t plen)
{
	struct rpage *p = arg;
	struct rjob *job = p->job;
	struct remote *r = job->r;
	struct zcache_out_page *op = &job->out.p[p->i];

	if (result == 0) {
		struct zcache_remote rm = { p->node, cluster_epoch(r->cl, p->node) & 255, op->len,
					    op->checksum };

		if (zcache_remotify_commit(r->z, &job->out, p->i, &rm) == 0) {
			r->pages_placed++;
			job->placed = true;
		} else {
			/* changed while in flight: the copy there is stale */
			r->stale_flushes++;
			flush_queue(r, p->node, RAMSTER__PEER__OP__P_FLUSH, &op->h);
		}
		job_page_done(job);
		return;
	}
	if (result == -ECANCELED) {
		job_page_done(job);
		return;
	}
	p->tried |= 1ull << (p->node - 1);
	if (p->tries < REMOTIFY_TRIES) {
		r->retries++;
		page_send(p);
		return;
	}
	page_failed(p);
}

static void page_send(struct rpage *p)
{
	struct rjob *job = p->job;
	struct remote *r = job->r;
	struct zcache_out_page *op = &job->out.p[p->i];
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;
	int node;

	node = cluster_pick(r->cl, op->len, p->tried);
	if (node < 0) {
		r->no_target++;
		page_failed(p);
		return;
	}
	p->node = (uint32_t)node;
	p->tries++;
	page_from_handle(&pg, &op->h, op->pers ? PAGE_PERSISTENT : 0, op->checksum);
	m.op = RAMSTER__PEER__OP__P_PUT;
	m.page = &pg;
	if (cluster_request(r->cl, p->node, &m, op->data, op->len, r->timeout_ms, put_cb, p)) {
		p->tried |= 1ull << (p->node - 1);
		if (p->tries < REMOTIFY_TRIES) {
			page_send(p);
			return;
		}
		page_failed(p);
		return;
	}
	r->pages_sent++;
}

static void job_start(struct rjob *job)
{
	unsigned i;

	job->pending = 1; /* held until every page is started */
	for (i = 0; i < job->out.n; i++) {
		if (!job->out.p[i].resolved)
			continue;
		job->pg[i] = (struct rpage){ .job = job, .i = i };
		job->pending++;
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

static void get_finish(struct rget *g, int result, const uint8_t *payload, size_t plen)
{
	struct remote *r = g->r;
	bool home = false;
	int res;

	res = zcache_repatriate_finish(r->z, &g->h, g->pampd, g->destructive, result, payload, plen,
				       g->page, &home);
	if (home)
		flush_queue(r, g->node, RAMSTER__PEER__OP__P_FLUSH, &g->h);
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

static void get_cb(void *arg, int result, const Ramster__Peer__Msg *reply, const uint8_t *payload,
		   size_t plen)
{
	get_finish(arg, result, payload, plen);
}

void remote_get(struct remote *r, const struct tmem_handle *h, bool pers, bool destructive,
		uint64_t pampd, void *page, remote_get_fn cb, void *arg)
{
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;
	struct zcache_remote rm;
	struct rget *g = calloc(1, sizeof(*g));

	if (!g || !zcache_pampd_remote(pampd, &rm)) {
		free(g);
		cb(arg, pers ? -EIO : -ENOENT);
		return;
	}
	*g = (struct rget){ r, *h, pers, destructive, pampd, rm.node, page, cb, arg };
	r->gets++;
	if (!cluster_alive(r->cl, rm.node, rm.epoch)) {
		get_finish(g, -EHOSTDOWN, NULL, 0);
		return;
	}
	page_from_handle(&pg, h, (pers ? PAGE_PERSISTENT : 0) | (destructive ? PAGE_DELETE : 0), 0);
	m.op = RAMSTER__PEER__OP__P_GET;
	m.page = &pg;
	if (cluster_request(r->cl, rm.node, &m, NULL, 0, r->timeout_ms, get_cb, g))
		get_finish(g, -EHOSTDOWN, NULL, 0);
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
	key_of(&k, node, session, m->page);
	switch (m->op) {
	case RAMSTER__PEER__OP__P_PUT:
		if (zcache_checksum(payload, plen) != m->page->checksum) {
			r->served_checksum_errors++;
			rc = -EIO;
		} else {
			rc = foreign_put(r->fs, &k, m->page->flags & PAGE_PERSISTENT, payload, plen,
					 m->page->checksum);
		}
		if (rc)
			r->served_puts_refused++;
		else
			r->served_puts++;
		cluster_reply(r->cl, node, m->seq, rc, NULL, NULL, 0);
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
	default:
		cluster_reply(r->cl, node, m->seq, -EOPNOTSUPP, NULL, NULL, 0);
		break;
	}
}

static void on_peer_up(void *arg, uint32_t node, uint64_t session)
{
	struct remote *r = arg;
	uint64_t n = foreign_drop_owner(r->fs, node, session);

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
}

static void on_donate(void *arg, uint64_t *free_bytes, uint64_t *total)
{
	struct remote *r = arg;
	struct foreign_stats s;

	foreign_get_stats(r->fs, &s);
	*total = s.budget;
	*free_bytes = s.used < s.budget ? s.budget - s.used : 0;
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
	uint8_t key[CLUSTER_KEY_LEN];
	struct remote *r;

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
	R(pages_sent, "pages sent to peers (remotify)");
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
#undef R
	foreign_get_stats(r->fs, &fs);
	fn(arg, "foreign_pages", fs.pages, "pages held for peers now");
	fn(arg, "foreign_bytes", fs.bytes, "their compressed bytes");
	fn(arg, "foreign_used", fs.used, "bytes charged to donate_mb");
	fn(arg, "foreign_budget", fs.budget, "donate_mb in bytes");
	fn(arg, "foreign_refused_full", fs.refused_full, "peer pages refused: donate_mb full");
	fn(arg, "foreign_dropped", fs.dropped, "peer pages dropped with their owner's session");
	cluster_foreach_stat(r->cl, fn, arg);
}
