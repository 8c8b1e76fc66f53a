/*
 * remote.c - the node's remote side (remote.h): its life cycle, the tier's
 * view of the collective (zcache_remote_ops), remote flushes, placing a copy
 * on a peer, peers coming and going, and the counters. The rest is in the
 * files remote_int.h names.
 *
 * Remote flushes are queued (tmem calls the flush hooks under a bucket lock,
 * where sending is not safe) through a handoff to the loop, and each is
 * retried until acked or the holder is dead.
 */

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "node/remote/arena.h"
#include "node/remote/erasure.h"
#include "node/clock.h"
#include "node/log.h"
#include "node/remote/remote_int.h"

void remote_page_init(Ramster__Peer__Page *pg, const struct tmem_handle *h, unsigned flags,
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

/* Keep f for node's return (it is unreachable). */
static void flog_add(struct remote *r, struct rflush *f)
{
	struct flog *l = &r->flog[f->node];

	f->item.next = NULL;
	if (l->tail)
		l->tail->item.next = &f->item;
	else
		l->head = f;
	l->tail = f;
	l->n++;
	r->flushes_logged++;
	if (l->n == FLOG_MAX) {
		/* too much changed while it was away: give its copies up, they are found lost */
		r->flush_log_overflows++;
		log_warn("node %u: %u flushes owed while it is unreachable: giving its copies up",
			 f->node, FLOG_MAX);
		cluster_forget(r->cl, f->node);
	}
}

void remote_flog_add(struct remote *r, uint32_t node, int op, const struct tmem_handle *h,
		     uint64_t horizon)
{
	struct rflush *f = calloc(1, sizeof(*f));

	if (!f) {
		atomic_fetch_add(&r->flushes_dropped, 1);
		return;
	}
	f->r = r;
	f->node = node;
	f->op = op;
	f->h = *h;
	f->horizon = horizon;
	flog_add(r, f);
}

static void flush_cb(void *arg, int result, const Ramster__Peer__Msg *reply, const uint8_t *payload,
		     size_t plen);

struct owed_ctx {
	void (*fn)(void *ctx, const struct rflush *f);
	void *ctx;
};

static void owed_pending(void *ctx, uint32_t node, cluster_reply_fn cb, void *arg)
{
	struct owed_ctx *o = ctx;

	if (cb == flush_cb)
		o->fn(o->ctx, arg);
}

void remote_flush_walk(struct remote *r, void (*fn)(void *ctx, const struct rflush *f), void *ctx)
{
	struct owed_ctx o = {fn, ctx};
	const struct rflush *f;
	uint32_t n;

	for (n = 1; n <= 64; n++)
		for (f = r->flog[n].head; f; f = (const struct rflush *)f->item.next)
			fn(ctx, f);
	cluster_foreach_pending(r->cl, owed_pending, &o);
}

static void count_others(void *ctx, uint32_t node, cluster_reply_fn cb, void *arg)
{
	if (cb != flush_cb)
		(*(size_t *)ctx)++;
}

size_t remote_pending_others(struct remote *r)
{
	size_t n = 0;

	cluster_foreach_pending(r->cl, count_others, &n);
	return n;
}

/* Forget the flushes owed to node: its copies are gone. */
static void flog_forget(struct remote *r, uint32_t node)
{
	struct flog *l = &r->flog[node];
	struct rflush *f = l->head, *next;

	for (; f; f = next) {
		next = (struct rflush *)f->item.next;
		r->flushes_forgotten++;
		free(f);
	}
	*l = (struct flog){ 0 };
}

/* node is back with the same incarnation: send what it is owed, in order. */
static void flog_replay(struct remote *r, uint32_t node)
{
	struct flog *l = &r->flog[node];
	struct rflush *f = l->head, *next;

	*l = (struct flog){ 0 };
	if (f)
		log_info("node %u is back: sending the flushes it missed", node);
	for (; f; f = next) {
		next = (struct rflush *)f->item.next;
		r->flushes_replayed++;
		f->attempts = 0;
		flush_send(f);
	}
}

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
	if (result == -EHOSTDOWN || result == -ECANCELED || result == -ETIMEDOUT)
		atomic_fetch_add(&r->flushes_dropped, 1); /* its copies are gone with it */
	free(f);
}

static void flush_send(struct rflush *f)
{
	struct remote *r = f->r;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;
	unsigned epoch = cluster_epoch(r->cl, f->node);

	if (!r->closing && cluster_alive(r->cl, f->node, epoch) &&
	    !cluster_reachable(r->cl, f->node, epoch)) {
		flog_add(r, f); /* unreachable: owed until it comes back */
		return;
	}
	remote_page_init(&pg, &f->h, 0, 0);
	/* a retried or owed flush must not remove a copy put after it was issued */
	if (f->op == RAMSTER__PEER__OP__P_FLUSH)
		pg.horizon = f->horizon;
	m.op = f->op;
	m.page = &pg;
	f->attempts++;
	if (cluster_request(r->cl, f->node, &m, NULL, 0, r->timeout_ms, flush_cb, f)) {
		atomic_fetch_add(&r->flushes_dropped, 1);
		free(f);
		return;
	}
	r->flushes_sent++;
}

void remote_flush_now(struct remote *r, uint32_t node, int op, const struct tmem_handle *h)
{
	struct rflush *f = calloc(1, sizeof(*f));

	if (!f) {
		atomic_fetch_add(&r->flushes_dropped, 1);
		return;
	}
	f->r = r;
	f->node = node;
	f->op = op;
	f->h = *h;
	f->horizon = seal_horizon(r->seal);
	flush_send(f);
}

/* Queue a flush; any thread, any lock held (tmem calls this under a bucket lock). */
void remote_flush_queue(struct remote *r, uint32_t node, int op, const struct tmem_handle *h)
{
	struct rflush *f = calloc(1, sizeof(*f));

	if (!f) {
		/* The holder keeps an orphan page until our session with it ends. */
		atomic_fetch_add(&r->flushes_dropped, 1);
		return;
	}
	f->r = r;
	f->node = node;
	f->op = op;
	f->h = *h;
	f->horizon = seal_horizon(r->seal);
	handoff_push(&r->flushes, &f->item);
}

/* The loop's end of r->flushes. */
static void flushes_cb(void *arg, struct handoff_item *list)
{
	while (list) {
		struct rflush *f = (struct rflush *)list;

		list = list->next;
		flush_send(f);
	}
}

static void nodes_flush(struct remote *r, uint64_t nodes, int op, const struct tmem_handle *h)
{
	uint32_t n;

	for (n = 1; n <= 64; n++)
		if (nodes & (1ull << (n - 1)))
			remote_flush_queue(r, n, op, h);
}

/* ---- the tier's view of the collective (zcache_remote_ops) --------------------------- */

static bool ops_alive(void *arg, unsigned node, unsigned epoch)
{
	struct remote *r = arg;

	return cluster_alive(r->cl, node, epoch);
}

static void ops_flush_page(void *arg, unsigned node, bool pers, const struct tmem_handle *h)
{
	remote_flush_queue(arg, node, RAMSTER__PEER__OP__P_FLUSH, h);
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
	.stripe_holder = stripe_op_holder,
	.stripe_kill = stripe_op_kill,
};

/* ---- placing a copy ---------------------------------------------------------------- */

/*
 * Send len bytes of h's page (checksum, persistent or not) to a peer that is
 * not in *exclude, chosen by cluster_pick; a peer that cannot be asked joins
 * *exclude and the next is tried, while *tries < max. *to is the peer asked
 * (set before the request goes); cb(arg, ...) follows a request that went.
 * @return 0, or -ENOSPC (no peer could be asked: no cb).
 */
int remote_copy_send(struct remote *r, const struct tmem_handle *h, bool pers, uint32_t version,
		     const void *data, size_t len, uint64_t *exclude, unsigned *tries, unsigned max,
		     uint32_t *to, cluster_reply_fn cb, void *arg)
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
		/* the link's tag covers the bytes in transit, our seal end to end; the
		 * checksum field carries the seal's version (its low 32 bits), so that the
		 * holder can tell a flush issued before this put (foreign_flush_upto) even
		 * for a fragment, whose bytes do not start with the version */
		remote_page_init(&pg, h, pers ? PAGE_PERSISTENT : 0, version);
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

static void on_peer_up(void *arg, uint32_t node, uint64_t session)
{
	struct remote *r = arg;
	struct owner_lease *o = &r->owner[node];
	uint64_t n = foreign_drop_owner(r->fs, node, session);
	struct replica_usage u;

	if (o->down_since_ns)
		log_info("node %u back after %.1f s unreachable: its %llu pages here kept", node,
			 (double)(clock_now_ns() - o->down_since_ns) / 1e9,
			 (unsigned long long)foreign_owner_pages(r->fs, node));
	o->down_since_ns = 0;
	o->session = session;
	if (o->dropped && o->dropped != session)
		o->dropped = 0; /* it moved to a new session: it knows */
	/* what it missed while unreachable (same incarnation: else the log is gone) */
	flog_replay(r, node);
	/* its pages kept under this session: readable over the new link (if rdma) */
	serve_register_chunks(r, node);
	/* a new target for pages below their replica count */
	replica_usage(zcache_replicas(r->z), &u);
	if (u.degraded)
		repair_kick(r);
	if (r->stripes) {
		struct stripe_stats st;

		stripe_stats(r->stripes, &st);
		if (st.degraded)
			repair_kick(r);
	}

	if (n) {
		r->owner_drops += n;
		log_notice("dropped %llu pages held for node %u from its earlier session",
			   (unsigned long long)n, node);
	}
}

/* Silent past dead_after_ms: nothing is forgotten, on either side. */
static void on_peer_unreachable(void *arg, uint32_t node)
{
	struct remote *r = arg;
	uint64_t n;

	/* as a holder: its pages stay, on a lease of orphan_after_ms */
	r->owner[node].down_since_ns = clock_now_ns();
	/* as an owner: pages with copies elsewhere get a new copy in place of this
	 * one (its old copy is trimmed by a flush when it comes back); pages whose
	 * only copy is there wait for it */
	n = replica_mark_holder(zcache_replicas(r->z), node);
	if (n) {
		log_notice("%llu pages had a copy on unreachable node %u: copying them elsewhere",
			   (unsigned long long)n, node);
		repair_kick(r);
	}
	if (r->stripes && (n = stripe_node_gone(r->stripes, node))) {
		log_notice("%llu stripes had a fragment on unreachable node %u: making them again "
			   "elsewhere", (unsigned long long)n, node);
		repair_kick(r);
	}
}

/* Its copies are gone: it restarted, its lease expired, or it dropped our pages. */
static void on_peer_down(void *arg, uint32_t node, const char *why)
{
	struct remote *r = arg;
	struct owner_lease *o = &r->owner[node];
	bool it_dropped = !strcmp(why, "it dropped our pages");
	uint64_t n = 0;

	/* as a holder: a restarted owner's index is gone, an expired lease ends ours */
	if (!it_dropped) {
		n = foreign_drop_owner(r->fs, node, 0);
		if (!strcmp(why, "lease expired")) {
			r->orphans_expired += n;
			if (o->session)
				o->dropped = o->session; /* tell it, should it come back */
		} else {
			r->owner_drops += n;
		}
		if (n)
			log_notice("dropped %llu pages held for node %u (%s)",
				   (unsigned long long)n, node, why);
		o->down_since_ns = 0;
	}
	/* as an owner: nothing owed to copies that are gone; remake them elsewhere */
	flog_forget(r, node);
	n = replica_mark_holder(zcache_replicas(r->z), node);
	if (n) {
		log_notice("%llu pages had a copy on node %u (%s): re-replicating them",
			   (unsigned long long)n, node, why);
		repair_kick(r);
	}
	if (r->stripes && (n = stripe_node_gone(r->stripes, node))) {
		log_notice("%llu stripes had a fragment on node %u (%s): making them again",
			   (unsigned long long)n, node, why);
		repair_kick(r);
	}
}

static uint64_t on_dropped_session(void *arg, uint32_t node)
{
	struct remote *r = arg;

	return r->owner[node].dropped;
}

static void on_donate(void *arg, uint64_t *free_bytes, uint64_t *total)
{
	struct remote *r = arg;
	struct foreign_stats s;

	foreign_get_stats(r->fs, &s);
	*total = s.budget;
	*free_bytes = s.used < s.budget && !r->drain.on ? s.budget - s.used : 0;
}

static uint64_t on_foreign_pages(void *arg, uint32_t node)
{
	struct remote *r = arg;

	return foreign_owner_pages(r->fs, node);
}

static const struct cluster_handlers remote_handlers = {
	.on_request = serve_request,
	.on_peer_up = on_peer_up,
	.on_peer_down = on_peer_down,
	.on_peer_unreachable = on_peer_unreachable,
	.dropped_session = on_dropped_session,
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
	r->replicas = cfg->replicas ? cfg->replicas : 1;
	r->ec_read_extra = cfg->ec_read_extra;
	r->rdma_read = cfg->env.rdma_read;
	r->holder_lie = cfg->env.holder_lie;
	if (r->holder_lie && (!holder_lie_get || !holder_lie_put || !holder_lie_free)) {
		snprintf(err, errlen,
			 "RAMSTER_TEST_HOLDER_LIE is set, but this ramsterd has no lying holder "
			 "(it is test-only: build/tests/ramsterd-lie has it)");
		free(r);
		return NULL;
	}
	r->seal = seal_create(self->id, cfg->link_integrity_only);
	if (!r->seal) {
		snprintf(err, errlen, "cannot make the page sealing key (libsodium)");
		free(r);
		return NULL;
	}
	if (cfg->ec_k) {
		r->ec = erasure_create(cfg->ec_k, cfg->ec_m);
		if (r->ec && cfg->ec_stripes) {
			r->stripes = stripe_table_create();
			r->sb = stripe_builder_create(r->ec);
		}
		if (!r->ec || (cfg->ec_stripes && (!r->stripes || !r->sb))) {
			stripe_table_destroy(r->stripes);
			stripe_builder_destroy(r->sb);
			erasure_destroy(r->ec);
			snprintf(err, errlen, "redundancy = ec %u+%u: cannot make the code",
				 cfg->ec_k, cfg->ec_m);
			seal_destroy(r->seal);
			free(r);
			return NULL;
		}
	}
	/* remote descriptors keep the seal's version where adler32 was: the seal checks the bytes */
	zcache_set_sealed(z, true);
	remotify_init(r);
	handoff_init(&r->flushes, loop, flushes_cb, r);
	repair_init(r, cfg->rereplicate_rate ? cfg->rereplicate_rate : 2000);
	drain_init(r);
	/* bring repatriated pages home only below the low watermark, or remotify
	 * would push them straight out again */
	{
		struct zcache_stats zs;

		zcache_get_stats(z, &zs);
		zcache_set_home_limit(z, zs.budget_frames * r->low / 100);
		/* a stripe's compaction (compact.c) just past the high one: remotify
		 * then takes the tier down to the low one */
		zcache_set_compact_limit(z, zs.budget_frames * (r->high + 1) / 100);
	}
	/* auto: the least it lends, until the elastic controller (node/elastic/) moves it */
	r->donate_auto = self->donate_mb == CONFIG_AUTO;
	r->fs = foreign_create((r->donate_auto ? self->donate_min_mb : self->donate_mb) * 1024 *
			       1024);
	if (!r->fs) {
		snprintf(err, errlen, "cannot create the foreign store (donate_mb %llu)",
			 (unsigned long long)self->donate_mb);
		goto fail;
	}
	foreign_set_hooks(r->fs, &serve_arena_hooks, r);
	r->cl = cluster_create(loop, cfg, self, key, &remote_handlers, r, err, errlen);
	sodium_memzero(key, sizeof(key));
	if (!r->cl)
		goto fail;
	zcache_set_remote(z, &remote_zops, r);
	return r; /* remote_start starts the remotify thread */
fail:
	remote_destroy(r);
	return NULL;
}

void remote_destroy(struct remote *r)
{
	struct handoff_item *list;

	if (!r)
		return;
	remotify_stop(r);
	repair_stop(r);
	drain_stop(r);
	compact_stop(r);
	r->closing = true;
	remote_gets_cancel(r);
	/* In-flight requests are cancelled (their callbacks finish the frames). */
	cluster_destroy(r->cl);
	r->cl = NULL;
	for (uint32_t n = 1; n <= 64; n++)
		flog_forget(r, n);
	list = handoff_fini(&r->flushes);
	while (list) {
		struct handoff_item *next = list->next;

		free(list);
		list = next;
	}
	remotify_fini(r);
	zcache_set_remote(r->z, NULL, NULL);
	foreign_destroy(r->fs);
	seal_destroy(r->seal);
	erasure_destroy(r->ec);
	stripe_builder_destroy(r->sb);
	stripe_table_destroy(r->stripes);
	for (unsigned k = 0; k < REPLICA_MAX; k++)
		for (unsigned m = 0; m < REPLICA_MAX; m++)
			erasure_destroy(r->codecs[k][m]);
	if (holder_lie_free)
		holder_lie_free(r);
	free(r);
}

/* ---- reload hook (node/reload.c) ---- */
void remote_set_tunables(struct remote *r, const struct config *cfg,
			 const struct config_node *self)
{
	struct zcache_stats zs;

	pthread_mutex_lock(&r->th.lock); /* the remotify thread reads these under it */
	r->high = cfg->high_watermark_pct;
	r->low = cfg->low_watermark_pct;
	r->rem_eph = cfg->remotify_ephemeral;
	r->rem_pers = cfg->remotify_persistent;
	pthread_cond_signal(&r->th.cond);
	pthread_mutex_unlock(&r->th.lock);
	r->replicas = cfg->replicas ? cfg->replicas : 1;
	r->ec_read_extra = cfg->ec_read_extra;
	r->repair.rate = cfg->rereplicate_rate ? cfg->rereplicate_rate : 2000;
	r->timeout_ms = cfg->request_timeout_ms ? cfg->request_timeout_ms : cfg->dead_after_ms;
	zcache_get_stats(r->z, &zs);
	zcache_set_home_limit(r->z, zs.budget_frames * r->low / 100);
	zcache_set_compact_limit(r->z, zs.budget_frames * (r->high + 1) / 100);
	if (r->donate_auto != (self->donate_mb == CONFIG_AUTO))
		log_warn("donate_mb: switching between auto and a number needs a restart; "
			 "left as it runs");
	else if (!r->donate_auto)
		foreign_set_budget(r->fs, self->donate_mb * 1024 * 1024);
}
/* ---- end of the reload hook ---- */

struct cluster *remote_cluster(struct remote *r)
{
	return r->cl;
}

void remote_set_donate(struct remote *r, uint64_t bytes)
{
	foreign_set_budget(r->fs, bytes);
}

uint64_t remote_donate_used(struct remote *r)
{
	struct foreign_stats fs;

	foreign_get_stats(r->fs, &fs);
	return fs.used;
}

unsigned remote_hot_objects(struct remote *r, uint32_t *pools, struct tmem_oid *oids,
			    unsigned max)
{
	unsigned n = 0;

	while (r->hot_n && n < max) {
		r->hot_n--;
		pools[n] = r->hot[r->hot_n].pool;
		oids[n++] = r->hot[r->hot_n].oid;
	}
	r->hot_n = 0;
	return n;
}

void remote_status(struct remote *r, char *redundancy, size_t rlen, char *lending, size_t llen)
{
	struct foreign_stats fs;

	if (r->ec)
		snprintf(redundancy, rlen, "ec %u+%u", erasure_k(r->ec), erasure_m(r->ec));
	else
		snprintf(redundancy, rlen, "replicas %u", r->replicas);
	foreign_get_stats(r->fs, &fs);
	snprintf(lending, llen, "%llu MiB held of %llu MiB, %s",
		 (unsigned long long)(fs.used >> 20), (unsigned long long)(fs.budget >> 20),
		 r->donate_auto ? "auto (the elastic controller moves it)" : "fixed (donate_mb)");
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
	pthread_mutex_lock(&r->th.lock);
	fn(arg, "remote_frames_taken", r->th.frames_taken, "frames the remotify thread took (zombies)");
	fn(arg, "remote_remotify_dozes", r->th.dozes,
	   "times the idle remotify thread dozed (looks once a second until a put)");
	fn(arg, "remote_remotify_kicks", r->th.kicks, "puts that woke the dozing remotify thread");
	pthread_mutex_unlock(&r->th.lock);
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
	R(get_unreachable, "gets that found a holder unreachable (they wait for it: the page is kept)");
	R(get_retries, "times a get asked its holders again (a timeout or a lost link, the holder alive)");
	R(flushes_sent, "remote flushes sent (page, object, pool)");
	R(flush_retries, "remote flushes resent after a timeout");
	fn(arg, "remote_flushes_dropped", atomic_load(&r->flushes_dropped),
	   "remote flushes dropped: the holder is dead");
	R(served_puts, "peer pages stored in the foreign store");
	R(served_puts_refused, "peer pages refused (store full, draining)");
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
	R(flushes_logged, "flushes owed to unreachable holders, kept for their return");
	R(flushes_replayed, "owed flushes sent when the holder came back");
	R(flushes_forgotten, "owed flushes forgotten: the holder's copies were gone");
	R(flush_log_overflows, "holders given up: too many flushes owed while unreachable");
	R(unanswered_puts_flushed, "copies flushed: their put timed out (the holder may keep one)");
	R(copies_trimmed, "copies on an unreachable holder flushed: re-made elsewhere meanwhile");
	R(orphans_expired, "pages held for a peer dropped: unreachable past orphan_after_ms");
	R(orphans_reclaimed, "pages held for an unreachable peer dropped: room was needed");
	R(orphan_reclaims, "unreachable owners whose pages were reclaimed for room");
	R(seal_failures, "copies of our pages whose seal did not open: another page, an older "
			 "version or changed bytes (the get asked the next holder, else -EIO)");
	R(ec_fragments_placed, "erasure-coded fragments peers acknowledged (K+M per persistent page)");
	R(ec_gets, "erasure-coded pages read back whole from K fragments");
	R(ec_degraded_reads, "erasure-coded reads that used parity (a data fragment was missing or bad)");
	R(ec_fragments_got, "fragments holders answered with");
	R(ec_fragments_late, "fragments answered after their page was read (ec_read_extra): dropped");
	R(ec_fallback_copies, "persistent pages placed as M+1 whole copies: fewer than K+M peers were live");
	R(ec_stripes_placed, "ec_layout = stripes: stripes of up to K pages placed (K+M fragments each)");
	R(ec_stripe_pages, "pages placed in stripes");
	R(ec_stripes_failed, "stripes that could not be placed (their pages stayed local)");
	R(ec_stripe_reads, "stripe pages read whole from their one holder");
	R(ec_stripe_degraded_reads, "stripe pages made again from K other fragments (their holder failed)");
	R(ec_stripe_slots_repaired, "stripe fragments made again elsewhere after a holder died");
	R(ec_stripe_pages_lost, "stripe pages lost: fewer than K of their stripe's fragments left");
	R(ec_stripe_returns, "stripe fragments a draining peer handed back: made again and placed");
	fn(arg, "remote_ec_compact_asked", r->compact.asked,
	   "live pages of sparse stripes read home to compact them (as many dead pages as live)");
	fn(arg, "remote_ec_compact_read", r->compact.read,
	   "... that were read (stored locally when the tier was under its high watermark)");
	fn(arg, "remote_ec_compact_failed", r->compact.failed,
	   "... that could not be read (lost, or changed meanwhile)");
	fn(arg, "remote_ec_compact_passes", r->compact.passes,
	   "whole passes of the compaction walk over the tier's pages");
	fn(arg, "remote_ec_compact_skipped_full", r->compact.skipped_full,
	   "compaction ticks skipped: the tier was near its high watermark");
	fn(arg, "remote_ec_stripes_flushed", atomic_load(&r->ec_stripes_flushed),
	   "stripes flushed: their last live page went");
	if (r->stripes) {
		struct stripe_stats st;

		stripe_stats(r->stripes, &st);
		fn(arg, "remote_ec_stripes", st.stripes, "stripes on peers now");
		fn(arg, "remote_ec_stripe_live_pages", st.live_pages, "their live pages");
		fn(arg, "remote_ec_stripe_dead_pages", st.dead_pages,
		   "their dead pages, kept for the parity until the stripe empties");
		fn(arg, "remote_ec_stripe_dead_bytes", st.dead_bytes, "those dead pages' bytes on peers");
		fn(arg, "remote_ec_stripe_parity_bytes", st.parity_bytes, "parity bytes on peers");
		fn(arg, "remote_ec_stripes_degraded", st.degraded,
		   "stripes with a slot whose holder died, not made again yet");
		fn(arg, "remote_ec_stripe_table_bytes", st.bytes, "the stripe table's RAM");
	}
	if (r->holder_lie)
		R(holder_lies, "test only (RAMSTER_TEST_HOLDER_LIE): answers made up as a holder");
	fn(arg, "remote_returns_served", r->drain.returns_served,
	   "copies a draining peer handed back, placed elsewhere");
	fn(arg, "remote_returns_fragments", r->drain.returns_fragments,
	   "fragments a draining peer handed back: made again from K others and placed");
	fn(arg, "remote_returns_refused", r->drain.returns_refused,
	   "copies a draining peer handed back that were not wanted or placed");
#undef R
	{
		struct stripe_stats sst = {0};
		struct replica_usage u;

		replica_usage(zcache_replicas(r->z), &u);
		fn(arg, "replica_target", r->ec ? 0 : r->replicas,
		   "copies kept of each remote persistent page (0: erasure-coded)");
		fn(arg, "ec_data_fragments", r->ec ? erasure_k(r->ec) : 0,
		   "redundancy = ec K+M: K (0: copies)");
		fn(arg, "ec_parity_fragments", r->ec ? erasure_m(r->ec) : 0,
		   "redundancy = ec K+M: M, the holders a page may lose");
		if (r->stripes)
			stripe_stats(r->stripes, &sst);
		fn(arg, "replica_below_target", u.degraded + sst.degraded_pages,
		   "remote persistent pages with fewer live copies (or stripe fragments) than the "
		   "target now");
		fn(arg, "replica_lost_now", u.lost,
		   "remote persistent pages with no live copy now (gets answer -EIO)");
	}
	fn(arg, "replica_rereplicated", r->repair.rereplicated, "copies made again after a holder died");
	fn(arg, "replica_fragments_rebuilt", r->repair.fragments,
	   "of those, erasure-coded fragments made again from K others");
	fn(arg, "replica_repair_failed", r->repair.failed,
	   "re-replications that failed (no source or no target; tried again)");
	fn(arg, "replica_repair_stale", r->repair.stale,
	   "re-replicated copies flushed: the page changed meanwhile");
	fn(arg, "replica_lost", r->repair.lost, "persistent pages whose every copy died (logged)");
	fn(arg, "replica_repair_passes", r->repair.passes, "passes of the repair walk");
	fn(arg, "replica_repair_waits", r->repair.waits,
	   "pauses of the repair walk: no live peer could take another copy");
	fn(arg, "replica_repair_active", r->repair.on, "1 while re-replication is running");
	{
		struct foreign_stats ds;

		foreign_get_stats(r->fs, &ds);
		fn(arg, "drain_active", r->drain.on, "1 while this node is draining or drained");
		fn(arg, "drain_pages_left", r->drain.on ? ds.pages : 0,
		   "pages still held for peers while draining");
	}
	fn(arg, "drain_returned", r->drain.returned, "pages handed to their owners (drain)");
	fn(arg, "drain_orphans", r->drain.orphans, "pages dropped in a drain: the owner no longer wanted them");
	fn(arg, "drain_failed", r->drain.failed, "hand-backs that failed (tried again)");
	fn(arg, "drain_refused", r->drain.refused, "peer pages refused while draining");
	fn(arg, "drain_returns_home", r->drain.returns_home,
	   "our pages a holder handed back that no peer could take: taken into our tier");
	fn(arg, "giveback_pages", r->drain.given_pages,
	   "pages handed back to their owners to shrink the donation (elastic)");
	fn(arg, "giveback_bytes", r->drain.given_bytes, "their bytes in the foreign store");
	fn(arg, "giveback_dropped", r->drain.given_dropped,
	   "ephemeral pages nobody had room for while giving back: dropped (a miss)");
	fn(arg, "giveback_rounds", r->drain.give_rounds, "passes of the give back walk");
	fn(arg, "giveback_active", ev_is_active(&r->drain.timer) && !r->drain.on,
	   "1 while the store gives pages back to shrink to its budget");
	foreign_get_stats(r->fs, &fs);
	fn(arg, "foreign_pages", fs.pages, "pages held for peers now");
	fn(arg, "foreign_bytes", fs.bytes, "their compressed bytes");
	fn(arg, "foreign_used", fs.used, "bytes charged to donate_mb");
	fn(arg, "foreign_ram", fs.ram, "RAM the foreign store holds (data, records, arena slack)");
	fn(arg, "foreign_budget", fs.budget, "donate_mb in bytes");
	fn(arg, "foreign_refused_full", fs.refused_full, "peer pages refused: donate_mb full");
	fn(arg, "foreign_dropped", fs.dropped, "peer pages dropped with their owner's session");
	fn(arg, "foreign_flushes_newer", fs.flushes_newer,
	   "page flushes that found a copy put after they were issued: kept");
	cluster_foreach_stat(r->cl, fn, arg);
}

