/*
 * stripe_io.c - stripes of K pages on peers (ec_layout = stripes,
 * docs/erasure.md): the tier's stripe ops, a slot made again from K others
 * (a degraded read, a repair, a drain), and the repair walk over stripes.
 *
 * A stripe's fragments are kept by its holders under the stripe's key
 * (stripe_key): pool STRIPE_POOL, oid {stripe id, 0, 0}, index the slot. A
 * data slot's fragment is the page's sealed blob, whole (its seal names the
 * page's own handle and version, so a holder can neither read it nor pass
 * another page off as it); a parity one is L bytes of arithmetic over the
 * blobs padded to L.
 *
 * Loop only, but the two ops (any thread, under a bucket lock: they take the
 * stripe table's lock after it and queue flushes through a leaf lock).
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node/clock.h"
#include "node/log.h"
#include "node/remote/erasure.h"
#include "node/remote/remote_int.h"
#include "node/remote/stripe.h"

void stripe_key(uint64_t id, unsigned slot, struct tmem_handle *h)
{
	memset(h, 0, sizeof(*h));
	h->pool = STRIPE_POOL;
	h->oid.w[0] = id;
	h->index = slot;
}

/*
 * The slots of rec that can be had: an empty data slot (zeros), or a holder
 * alive (reach: and reachable now; an unreachable one may come back, but a
 * request to it waits for its link).
 */
static uint32_t stripe_can_ex(struct remote *r, const struct stripe_rec *rec, bool reach)
{
	uint32_t can = 0;
	unsigned s;

	for (s = 0; s < rec->k + rec->m; s++)
		if ((s < rec->k && !rec->lens[s]) ||
		    (rec->node[s] &&
		     (reach ? cluster_reachable(r->cl, rec->node[s], rec->epoch[s])
			    : cluster_alive(r->cl, rec->node[s], rec->epoch[s]))))
			can |= 1u << s;
	return can;
}

static uint32_t stripe_can(struct remote *r, const struct stripe_rec *rec)
{
	return stripe_can_ex(r, rec, false);
}

/* ---- the tier's ops ------------------------------------------------------------------ */

int stripe_op_holder(void *arg, uint64_t id, unsigned slot, struct replica_set *s)
{
	struct remote *r = arg;
	struct stripe_rec rec;

	if (!r->stripes || stripe_read(r->stripes, id, &rec) || slot >= rec.k || !rec.lens[slot] ||
	    rec.lens[slot] <= SEAL_OVERHEAD)
		return -ENOENT;
	/* fewer than K slots left: the page is lost */
	if ((unsigned)__builtin_popcount(stripe_can(r, &rec)) < rec.k)
		return -ENOENT;
	memset(s, 0, sizeof(*s));
	s->n = 1;
	s->node[0] = rec.node[slot];
	s->epoch[0] = rec.epoch[slot];
	s->len = rec.lens[slot] - SEAL_OVERHEAD;
	s->checksum = rec.version[slot];
	s->stripe = id;
	s->slot = slot;
	return 0;
}

/* Flush every fragment of the stripe rec and forget it. Any thread. */
static void stripe_drop(struct remote *r, uint64_t id, const struct stripe_rec *rec)
{
	struct tmem_handle key;
	unsigned s;

	for (s = 0; s < rec->k + rec->m; s++) {
		if (!rec->node[s])
			continue;
		stripe_key(id, s, &key);
		remote_flush_queue(r, rec->node[s], RAMSTER__PEER__OP__P_FLUSH, &key);
	}
	if (stripe_remove(r->stripes, id) == 0)
		atomic_fetch_add_explicit(&r->ec_stripes_flushed, 1, memory_order_relaxed);
}

void stripe_op_kill(void *arg, uint64_t id, unsigned slot)
{
	struct remote *r = arg;
	struct stripe_rec rec;
	bool empty = false;

	if (!r->stripes || stripe_kill(r->stripes, id, slot, &empty) || !empty)
		return;
	/* the last live page of it went: its fragments are of no more use */
	if (stripe_read(r->stripes, id, &rec) == 0)
		stripe_drop(r, id, &rec);
}

/* ---- a slot made again ---------------------------------------------------------------- */

struct sask {
	struct sremake *sr;
	unsigned slot;
};

struct sremake {
	struct remote *r;
	uint64_t id;
	unsigned want;
	struct stripe_rec rec;
	const struct erasure *e;
	stripe_verify_fn verify;
	stripe_remake_fn cb;
	void *arg;
	struct sask ask[ERASURE_MAX];
	unsigned outstanding;
	uint32_t have;     /* slots had (an empty data slot: from the start) */
	bool done;
	bool transient;
	bool bad;          /* a set of K made bytes verify refused */
	int failed;
	uint8_t *frag[ERASURE_MAX]; /* into buf: slot s at s * L */
	size_t flen[ERASURE_MAX];
	uint8_t out[ERASURE_STRIPE_FRAG_MAX];
	size_t out_len;
	uint8_t buf[]; /* (K + M) * L */
};

static bool remake_transient(int err)
{
	return err == -ETIMEDOUT || err == -EAGAIN || err == -ENOMEM || err == -ENOBUFS;
}

static void remake_end(struct sremake *sr, int result)
{
	sr->done = true;
	if (result)
		sr->cb(sr->arg, result, sr->transient, NULL, 0);
	else
		sr->cb(sr->arg, 0, false, sr->out, sr->out_len);
	if (!sr->outstanding)
		free(sr);
}

/*
 * Try the sets of K among those had that hold slot newest (each set is tried
 * once: when its last fragment came). @return 0 made (and verified).
 */
static int remake_try(struct sremake *sr, unsigned newest)
{
	unsigned k = sr->rec.k, n = sr->rec.k + sr->rec.m;
	uint32_t mask;

	for (mask = 0; mask < (1u << n); mask++) {
		uint8_t idx[ERASURE_MAX];
		const uint8_t *src[ERASURE_MAX];
		unsigned i, c = 0;

		if ((mask & sr->have) != mask || (unsigned)__builtin_popcount(mask) != k ||
		    !(mask & (1u << newest)))
			continue;
		for (i = 0; i < n; i++)
			if (mask & (1u << i)) {
				idx[c] = (uint8_t)i;
				src[c++] = (i < k && !sr->rec.lens[i]) ? NULL : sr->frag[i];
			}
		if (stripe_rebuild_slot(sr->e, &sr->rec, idx, src, sr->want, sr->out, &sr->out_len))
			continue;
		if (!sr->verify || sr->verify(sr->arg, sr->out, sr->out_len) == 0)
			return 0;
		sr->bad = true;
	}
	return -EBADMSG;
}

static void remake_settle(struct sremake *sr, int newest)
{
	if (sr->done)
		return;
	if (newest >= 0 && (unsigned)__builtin_popcount(sr->have) >= sr->rec.k &&
	    remake_try(sr, (unsigned)newest) == 0) {
		remake_end(sr, 0);
		return;
	}
	if (sr->outstanding)
		return;
	if (sr->bad) {
		sr->r->seal_failures++;
		remake_end(sr, -EILSEQ);
		return;
	}
	remake_end(sr, sr->failed ? sr->failed : -EIO);
}

static void remake_cb(void *arg, int result, const Ramster__Peer__Msg *reply,
		      const uint8_t *payload, size_t plen)
{
	struct sask *a = arg;
	struct sremake *sr = a->sr;
	unsigned s = a->slot;

	(void)reply;
	sr->outstanding--;
	if (sr->done) {
		sr->r->ec_fragments_late++;
		if (!sr->outstanding)
			free(sr);
		return;
	}
	if (result == 0 && plen != sr->flen[s])
		result = -EBADMSG; /* not the fragment we placed */
	if (result) {
		if (remake_transient(result))
			sr->transient = true;
		sr->failed = result;
		remake_settle(sr, -1);
		return;
	}
	memcpy(sr->frag[s], payload, plen);
	sr->have |= 1u << s;
	sr->r->ec_fragments_got++;
	remake_settle(sr, (int)s);
}

void stripe_remake(struct remote *r, uint64_t id, unsigned want, uint64_t avoid,
		   unsigned attempt_ms, stripe_verify_fn verify, stripe_remake_fn cb, void *arg)
{
	struct stripe_rec rec;
	struct sremake *sr;
	unsigned s, n, L;
	uint32_t can;

	if (!r->stripes || stripe_read(r->stripes, id, &rec) || want >= rec.k + rec.m ||
	    (want < rec.k && !rec.lens[want])) {
		cb(arg, -ENOENT, false, NULL, 0);
		return;
	}
	n = rec.k + rec.m;
	L = rec.L;
	sr = calloc(1, sizeof(*sr) + (size_t)n * L);
	if (!sr) {
		cb(arg, -ENOMEM, true, NULL, 0);
		return;
	}
	sr->r = r;
	sr->id = id;
	sr->want = want;
	sr->rec = rec;
	sr->e = r->ec && erasure_k(r->ec) == rec.k && erasure_m(r->ec) == rec.m
			? r->ec
			: frag_codec(r, &(struct replica_set){ .n = n, .ec_k = rec.k });
	sr->verify = verify;
	sr->cb = cb;
	sr->arg = arg;
	for (s = 0; s < n; s++) {
		sr->frag[s] = sr->buf + (size_t)s * L;
		sr->flen[s] = s < rec.k ? rec.lens[s] : L;
		if (s < rec.k && !rec.lens[s])
			sr->have |= 1u << s; /* zeros, known */
	}
	if (!sr->e) {
		free(sr);
		cb(arg, -ENOMEM, true, NULL, 0);
		return;
	}
	/* every other slot with a live holder, at once: a slow or lying one does not decide;
	 * the hold keeps sr while asking (an answer may come before cluster_request returns) */
	sr->outstanding++;
	can = stripe_can_ex(r, &rec, true) & ~(1u << want);
	if ((unsigned)__builtin_popcount(can) < rec.k)
		can = stripe_can(r, &rec); /* too few reachable: the unreachable ones too */
	for (s = 0; s < n; s++) {
		Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
		Ramster__Peer__Page pg;
		struct tmem_handle key;
		int rc;

		if (s == want || (sr->have & (1u << s)) || !(can & (1u << s)) ||
		    (avoid & (1ull << (rec.node[s] - 1))))
			continue;
		stripe_key(id, s, &key);
		remote_page_init(&pg, &key, PAGE_PERSISTENT, 0);
		m.op = RAMSTER__PEER__OP__P_GET;
		m.page = &pg;
		sr->ask[s] = (struct sask){ sr, s };
		sr->outstanding++;
		rc = cluster_request(r->cl, rec.node[s], &m, NULL, 0, attempt_ms, remake_cb,
				     &sr->ask[s]);
		if (rc) {
			sr->outstanding--;
			if (remake_transient(rc))
				sr->transient = true;
			sr->failed = rc;
		}
	}
	sr->outstanding--;
	if (sr->done) {
		if (!sr->outstanding)
			free(sr);
		return;
	}
	if ((unsigned)__builtin_popcount(sr->have) >= sr->rec.k) {
		/* answers came before cluster_request returned, or empty slots are enough */
		unsigned t2;

		for (t2 = 0; t2 < n; t2++)
			if ((sr->have & (1u << t2)) && remake_try(sr, t2) == 0) {
				remake_end(sr, 0); /* may free sr */
				return;
			}
	}
	remake_settle(sr, -1); /* ends it if nothing is in flight */
}

/* ---- the repair walk over stripes --------------------------------------------------------- */

/* One gone slot being made again and placed elsewhere. */
struct srepair {
	struct remote *r;
	uint64_t id;
	unsigned slot;
	unsigned from;     /* the slot's old holder */
	uint64_t exclude;  /* the stripe's holders, and peers that failed */
	unsigned tries;
	uint32_t to;
	uint32_t version;
	bool is_return;    /* a draining holder (from) handed it back: answer seq */
	uint64_t seq;
	size_t len;
	uint8_t bytes[ERASURE_STRIPE_FRAG_MAX];
};

/* Is slot of stripe id being made again? (mark: and mark it so; false if full) */
static bool srepair_busy(struct remote *r, uint64_t id, unsigned slot, bool mark)
{
	uint64_t key = id | (uint64_t)(slot + 1) << 56;
	unsigned i, free_i = REPAIR_INFLIGHT;

	for (i = 0; i < REPAIR_INFLIGHT; i++) {
		if (r->repair.sbusy[i] == key)
			return true;
		if (!r->repair.sbusy[i] && free_i == REPAIR_INFLIGHT)
			free_i = i;
	}
	if (mark && free_i < REPAIR_INFLIGHT)
		r->repair.sbusy[free_i] = key;
	return false;
}

static void srepair_unbusy(struct remote *r, uint64_t id, unsigned slot)
{
	uint64_t key = id | (uint64_t)(slot + 1) << 56;
	unsigned i;

	for (i = 0; i < REPAIR_INFLIGHT; i++)
		if (r->repair.sbusy[i] == key)
			r->repair.sbusy[i] = 0;
}

static void srepair_end(struct srepair *p, bool ok)
{
	struct remote *r = p->r;

	srepair_unbusy(r, p->id, p->slot);
	if (p->is_return) {
		/* 0: it is placed elsewhere, the holder drops it; else it keeps it for now */
		if (ok)
			r->ec_stripe_returns++;
		else
			r->drain.returns_refused++;
		cluster_reply(r->cl, p->from, p->seq, ok ? 0 : -EAGAIN, NULL, NULL, 0);
		free(p);
		return;
	}
	if (r->repair.inflight)
		r->repair.inflight--;
	if (ok) {
		r->repair.progress = true;
		r->ec_stripe_slots_repaired++;
	} else {
		r->repair.failed++;
	}
	free(p);
}

static void srepair_put_cb(void *arg, int result, const Ramster__Peer__Msg *reply,
			   const uint8_t *payload, size_t plen)
{
	struct srepair *p = arg;
	struct remote *r = p->r;
	struct tmem_handle key;
	int rc;

	(void)reply;
	(void)payload;
	(void)plen;
	stripe_key(p->id, p->slot, &key);
	if (result) {
		if (result == -ETIMEDOUT)
			remote_flush_now(r, p->to, RAMSTER__PEER__OP__P_FLUSH, &key);
		if (result != -ECANCELED) {
			p->exclude |= 1ull << (p->to - 1);
			if (remote_copy_send(r, &key, true, p->version, p->bytes, p->len, &p->exclude,
					     &p->tries, REMOTIFY_TRIES, &p->to, srepair_put_cb,
					     p) == 0)
				return;
			r->repair.blocked = true;
		}
		srepair_end(p, false);
		return;
	}
	rc = stripe_move(r->stripes, p->id, p->slot, p->to,
			 cluster_epoch(r->cl, p->to) & 255);
	if (rc) {
		/* the stripe went (flushed) or changed meanwhile: the new fragment is stale */
		r->repair.stale++;
		remote_flush_now(r, p->to, RAMSTER__PEER__OP__P_FLUSH, &key);
		srepair_end(p, false);
		return;
	}
	/* the old holder may come back with it (unreachable, not dead): trimmed then
	 * (a dead one's log is forgotten with its copies); a draining one drops it */
	if (!p->is_return)
		remote_flush_now(r, p->from, RAMSTER__PEER__OP__P_FLUSH, &key);
	srepair_end(p, true);
}

static void srepair_made(void *arg, int result, bool transient, const uint8_t *bytes, size_t len)
{
	struct srepair *p = arg;
	struct remote *r = p->r;
	struct tmem_handle key;

	(void)transient;
	if (result || !len) {
		srepair_end(p, false);
		return;
	}
	memcpy(p->bytes, bytes, len);
	p->len = len;
	stripe_key(p->id, p->slot, &key);
	if (remote_copy_send(r, &key, true, p->version, p->bytes, p->len, &p->exclude, &p->tries,
			     REMOTIFY_TRIES, &p->to, srepair_put_cb, p)) {
		r->repair.blocked = true;
		srepair_end(p, false);
	}
}

struct swalk {
	struct remote *r;
	unsigned budget; /* slots that may start this tick */
};

static int swalk_fn(void *arg, uint64_t id, const struct stripe_rec *rec)
{
	struct swalk *w = arg;
	struct remote *r = w->r;
	uint32_t can, gone = rec->gone;
	unsigned s, n = rec->k + rec->m;

	if (!gone)
		return 0;
	can = stripe_can(r, rec);
	if ((unsigned)__builtin_popcount(can) < rec->k) {
		/* fewer than K left: its live pages are lost (their gets answer -EIO) */
		r->ec_stripe_pages_lost += (unsigned)__builtin_popcount(rec->live);
		r->repair.lost += (unsigned)__builtin_popcount(rec->live);
		log_warn("stripe %llx: %u of its %u slots are gone: %u pages lost",
			 (unsigned long long)id, n - (unsigned)__builtin_popcount(can), n,
			 (unsigned)__builtin_popcount(rec->live));
		stripe_drop(r, id, rec);
		return 0;
	}
	for (s = 0; s < n && w->budget; s++) {
		struct srepair *p;
		unsigned k;

		if (!(gone & (1u << s)) || r->repair.inflight >= REPAIR_INFLIGHT ||
		    srepair_busy(r, id, s, true))
			continue;
		{
			uint64_t holders = 0;

			for (k = 0; k < n; k++)
				if (rec->node[k])
					holders |= 1ull << (rec->node[k] - 1);
			if (!cluster_candidates(r->cl, s < rec->k ? rec->lens[s] : rec->L,
						holders)) {
				/* no live peer holds none of it: wait for one (a pause, not a failure) */
				srepair_unbusy(r, id, s);
				r->repair.blocked = true;
				return 1;
			}
		}
		p = calloc(1, sizeof(*p));
		if (!p) {
			srepair_unbusy(r, id, s);
			return 1;
		}
		p->r = r;
		p->id = id;
		p->slot = s;
		p->from = rec->node[s];
		p->version = rec->version[s];
		for (k = 0; k < n; k++)
			if (rec->node[k])
				p->exclude |= 1ull << (rec->node[k] - 1);
		r->repair.inflight++;
		r->repair.ec_started++;
		w->budget--;
		stripe_remake(r, id, s, 0, r->timeout_ms, NULL, srepair_made, p);
	}
	return w->budget && r->repair.inflight < REPAIR_INFLIGHT ? 0 : 1;
}

bool stripe_repair_tick(struct remote *r, unsigned budget)
{
	struct swalk w = { r, budget };
	struct stripe_stats st;

	if (!r->stripes)
		return false;
	stripe_stats(r->stripes, &st);
	if (!st.degraded)
		return false;
	stripe_walk(r->stripes, swalk_fn, &w);
	return true;
}

/* ---- a draining holder hands a fragment back ---------------------------------------------- */

void stripe_return_serve(struct remote *r, uint32_t node, uint64_t seq,
			 const struct tmem_handle *key)
{
	uint64_t id = key->oid.w[0];
	unsigned slot = key->index, s;
	struct stripe_rec rec;
	struct srepair *p;

	if (!r->stripes || key->oid.w[1] || key->oid.w[2] || stripe_read(r->stripes, id, &rec) ||
	    slot >= rec.k + rec.m || rec.node[slot] != node) {
		/* not a fragment we point at there (flushed, moved, made up): it can go */
		r->drain.returns_refused++;
		cluster_reply(r->cl, node, seq, -ENOENT, NULL, NULL, 0);
		return;
	}
	if (srepair_busy(r, id, slot, false) || !(p = calloc(1, sizeof(*p)))) {
		cluster_reply(r->cl, node, seq, -EAGAIN, NULL, NULL, 0); /* asked again later */
		return;
	}
	srepair_busy(r, id, slot, true);
	p->r = r;
	p->id = id;
	p->slot = slot;
	p->from = node;
	p->version = rec.version[slot];
	p->is_return = true;
	p->seq = seq;
	for (s = 0; s < rec.k + rec.m; s++)
		if (rec.node[s])
			p->exclude |= 1ull << (rec.node[s] - 1);
	/* the bytes handed back are not trusted alone: made from K others, as a repair */
	stripe_remake(r, id, slot, 1ull << (node - 1), r->timeout_ms, NULL, srepair_made, p);
}
