/*
 * fragments.c - an erasure-coded page's fragments gathered from its holders
 * and the sealed page made whole again (redundancy = ec K+M; erasure.h,
 * docs/erasure.md).
 *
 * The owner seals the page first (seal.h) and then cuts the blob into K data
 * and M parity fragments, fragment i on the holder in slot i of the
 * page's replica set. A fetch asks K live holders at once, reachable ones and
 * data fragments first (the K data fragments need no arithmetic), each within
 * the request timeout; a holder that fails or answers bytes of the wrong
 * length is replaced by the next one not asked. When every answer is in and K
 * fragments are had, the blob is decoded and its seal opened against the
 * owner's descriptor. A holder cannot read a fragment (it is ciphertext) nor
 * change one unseen: a blob whose seal fails means a fragment was wrong, so
 * every fragment not yet had is asked for too and each set of K had is tried
 * until one opens (at most C(8,4) = 70 sets): M lying or lost holders cost a
 * slower read, never a wrong page.
 *
 * Where a holder named an RDMA key for its fragment on the current link, the
 * fragment is read one-sided; a read that fails is asked by message, and a
 * set that does not open asks the fragments read one-sided again by message
 * (the holder may have reused the block since it named it).
 *
 * ec_read_extra = E asks K+E holders at once and decodes from the first K
 * to answer (EC-Cache's late binding: the slowest holders do not set the
 * latency); the fetch then lives on until the late answers are in, and
 * drops them.
 *
 * Loop only. One fetch serves a repatriate (repatriate.c: the page) and a
 * repair (repair.c: the blob, to make a lost fragment again).
 */

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "node/remote/erasure.h"
#include "node/remote/remote_int.h"

struct ffetch;

/* One fragment asked of its holder: the request's argument. */
struct fask {
	struct ffetch *f;
	unsigned slot;
};

struct ffetch {
	struct remote *r;
	struct tmem_handle h;
	bool pers;
	struct replica_set set;
	unsigned attempt_ms;
	unsigned extra;               /* holders asked beyond K (ec_read_extra) */
	frag_fetch_fn cb;
	void *arg;
	size_t blen, flen;            /* the sealed page's bytes; a fragment's */
	uint8_t order[REPLICA_MAX];   /* slots to ask, in order */
	unsigned n_order, next;
	struct fask ask[REPLICA_MAX];
	unsigned outstanding;
	uint32_t have;                /* slots whose fragment is had */
	uint32_t one_sided;           /* of those, read one-sided (maybe from a reused block) */
	uint32_t by_message;          /* slots to ask by message only */
	bool asking;                  /* in fetch_ask: answers are counted, not acted on */
	bool done;                    /* cb called: late answers are dropped */
	bool bad_seal;                /* a set of K did not open */
	bool transient;               /* a holder failed in a way that passes */
	int failed;                   /* why a holder was passed over */
	/* from here on: not zeroed (frag_fetch), each written before it is read */
	uint8_t frag[REPLICA_MAX][ERASURE_FRAG_MAX];
	uint8_t blob[SEAL_BLOB_MAX];
	uint8_t plain[SEAL_PAGE_MAX];
};

struct erasure *frag_codec(struct remote *r, const struct replica_set *s)
{
	unsigned k = s->ec_k, m = s->n - s->ec_k;

	if (k < 2 || k >= s->n || s->n > REPLICA_MAX)
		return NULL;
	if (r->ec && erasure_k(r->ec) == k && erasure_m(r->ec) == m)
		return r->ec;
	/* placed under another code (the config changed across a warm restart): its own codec */
	if (!r->codecs[k][m])
		r->codecs[k][m] = erasure_create(k, m);
	return r->codecs[k][m];
}

static bool fetch_transient(int err)
{
	return err == -ETIMEDOUT || err == -EAGAIN || err == -ENOMEM || err == -ENOBUFS;
}

/* The answer, once; the fetch is freed when no request of it is left in flight. */
static void fetch_end(struct ffetch *f, int result)
{
	f->done = true;
	if (result)
		f->cb(f->arg, result, f->transient, NULL, 0, NULL, 0);
	else
		f->cb(f->arg, 0, false, f->blob, f->blen, f->plain, f->set.len);
	if (!f->outstanding)
		free(f);
}

/*
 * Try the sets of K fragments had, data fragments first (the masks in
 * ascending order start with the low slots). @return 0 with the page in
 * f->plain, -EBADMSG when none opened.
 */
static int fetch_decode(struct ffetch *f)
{
	struct remote *r = f->r;
	struct erasure *e = frag_codec(r, &f->set);
	unsigned k = f->set.ec_k, n = f->set.n;
	uint32_t mask;

	for (mask = 0; e && mask < (1u << n); mask++) {
		uint8_t idx[REPLICA_MAX];
		const uint8_t *src[REPLICA_MAX];
		unsigned i, c = 0;

		if ((mask & f->have) != mask || (unsigned)__builtin_popcount(mask) != k)
			continue;
		for (i = 0; i < n; i++)
			if (mask & (1u << i)) {
				idx[c] = (uint8_t)i;
				src[c++] = f->frag[i];
			}
		if (erasure_decode(e, idx, src, f->blen, f->blob))
			continue;
		if (seal_open(r->seal, &f->h, f->set.checksum, f->set.len, f->blob, f->blen,
			      f->plain) == 0) {
			if (mask != (1u << k) - 1)
				r->ec_degraded_reads++; /* parity used: a data fragment was missing */
			return 0;
		}
		if (!f->bad_seal)
			r->seal_failures++;
		f->bad_seal = true;
	}
	return -EBADMSG;
}

static void fetch_ask(struct ffetch *f, unsigned want);

/* An answer came (or a request could not go): decode, ask more, or give up. */
static void fetch_settle(struct ffetch *f)
{
	unsigned k = f->set.ec_k, had = (unsigned)__builtin_popcount(f->have);

	if (f->asking)
		return;
	/* every answer is in; or, with extra holders asked, the first K are */
	if (f->outstanding && !(f->extra && had >= k))
		return;
	if (had >= k) {
		if (fetch_decode(f) == 0) {
			f->r->ec_gets++;
			fetch_end(f, 0);
			return;
		}
		if (f->outstanding)
			return; /* a late answer may make a set that opens */
		/* a fragment was wrong: have every other one too, and try again */
		if (f->next < f->n_order) {
			fetch_ask(f, f->n_order - f->next);
			return;
		}
		/* fragments read one-sided may be of a reused block: ask those by message */
		if (f->one_sided) {
			unsigned i;

			for (i = 0; i < f->set.n; i++)
				if (f->one_sided & (1u << i)) {
					f->have &= ~(1u << i);
					f->by_message |= 1u << i;
					f->order[--f->next] = (uint8_t)i;
				}
			f->one_sided = 0;
			fetch_ask(f, f->n_order - f->next);
			return;
		}
		f->failed = -EILSEQ;
		fetch_end(f, -EILSEQ);
		return;
	}
	if (f->outstanding)
		return;
	if (f->next < f->n_order) {
		fetch_ask(f, k - had);
		return;
	}
	fetch_end(f, f->failed ? f->failed : -EHOSTDOWN);
}

/* A fragment (or a failure) for slot; false: the fetch was freed (it had answered). */
static bool fetch_answer(struct ffetch *f, unsigned slot, int result, const uint8_t *data,
			 size_t len, bool one_sided)
{
	f->outstanding--;
	if (f->done) {
		f->r->ec_fragments_late++;
		if (!f->outstanding)
			free(f);
		return false;
	}
	if (result == 0 && len != f->flen)
		result = -EILSEQ; /* not a fragment of this page's length */
	if (result == 0) {
		memcpy(f->frag[slot], data, len);
		f->have |= 1u << slot;
		if (one_sided)
			f->one_sided |= 1u << slot;
		f->r->ec_fragments_got++;
	} else {
		if (fetch_transient(result))
			f->transient = true;
		if (result != -ECANCELED || !f->failed)
			f->failed = result;
		if (result == -ECANCELED)
			f->next = f->n_order; /* the node stops: ask nobody else */
	}
	return true;
}

static void fetch_got(void *arg, int result, const Ramster__Peer__Msg *reply,
		      const uint8_t *payload, size_t plen)
{
	struct fask *a = arg;
	struct ffetch *f = a->f;

	if (fetch_answer(f, a->slot, result, payload, plen, false))
		fetch_settle(f);
}

static int fetch_send(struct ffetch *f, unsigned slot);

/* A one-sided read of a fragment: done, or ask the same holder by message. */
static void fetch_read_got(void *arg, int err, const void *data, size_t len)
{
	struct fask *a = arg;
	struct ffetch *f = a->f;
	struct remote *r = f->r;

	if (!err && len == f->flen) {
		r->rdma_reads++;
		if (fetch_answer(f, a->slot, 0, data, len, true))
			fetch_settle(f);
		return;
	}
	r->rdma_read_fallbacks++;
	if (!f->done && !r->closing) {
		f->by_message |= 1u << a->slot;
		f->outstanding--;
		f->asking = true;
		if (fetch_send(f, a->slot) == 0) {
			f->asking = false;
			return;
		}
		f->asking = false;
		f->outstanding++;
	}
	if (fetch_answer(f, a->slot, err ? err : -EILSEQ, NULL, 0, false))
		fetch_settle(f);
}

/* Ask slot's holder: one-sided where it named a key on this link, else P_GET. @return 0, -errno. */
static int fetch_send(struct ffetch *f, unsigned slot)
{
	struct remote *r = f->r;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;
	uint32_t node = f->set.node[slot];
	int rc;

	f->ask[slot] = (struct fask){ f, slot };
	f->outstanding++;
	if (r->rdma_read && f->set.raddr[slot] && !(f->by_message & (1u << slot)) &&
	    cluster_read(r->cl, node, f->set.lgen[slot], f->set.raddr[slot], f->set.rkey[slot],
			 f->flen, fetch_read_got, &f->ask[slot]) == 0)
		return 0;
	remote_page_init(&pg, &f->h, f->pers ? PAGE_PERSISTENT : 0, 0);
	m.op = RAMSTER__PEER__OP__P_GET;
	m.page = &pg;
	rc = cluster_request(r->cl, node, &m, NULL, 0, f->attempt_ms, fetch_got, &f->ask[slot]);
	if (rc)
		f->outstanding--;
	return rc;
}

/* Ask up to want more holders, in order. */
static void fetch_ask(struct ffetch *f, unsigned want)
{
	f->asking = true;
	while (want && f->next < f->n_order) {
		int rc = fetch_send(f, f->order[f->next++]);

		if (rc) {
			if (fetch_transient(rc))
				f->transient = true;
			f->failed = rc;
			continue;
		}
		want--;
	}
	f->asking = false;
	fetch_settle(f);
}

void frag_fetch(struct remote *r, const struct tmem_handle *h, bool pers,
		const struct replica_set *s, unsigned attempt_ms, frag_fetch_fn cb, void *arg)
{
	struct ffetch *f;
	double key[REPLICA_MAX];
	unsigned k, j;

	if (!frag_codec(r, s)) {
		cb(arg, -ENOMEM, true, NULL, 0, NULL, 0);
		return;
	}
	/*
	 * Only the bookkeeping before frag[] is set up: the ~25 KB of fragment,
	 * blob and page buffers after it are written before they are read, and
	 * zeroing them (calloc, then again by a compound literal) cost every
	 * get a few microseconds of memory writes.
	 */
	f = malloc(sizeof(*f));
	if (!f) {
		cb(arg, -ENOMEM, true, NULL, 0, NULL, 0);
		return;
	}
	memset(f, 0, offsetof(struct ffetch, frag));
	f->r = r;
	f->h = *h;
	f->pers = pers;
	f->set = *s;
	f->attempt_ms = attempt_ms;
	f->extra = r->ec_read_extra;
	f->cb = cb;
	f->arg = arg;
	f->blen = s->len + SEAL_OVERHEAD;
	f->flen = erasure_frag_len(s->ec_k, f->blen);
	/* the live holders: reachable before unreachable, data before parity, then nearest */
	for (k = 0; k < s->n; k++) {
		double t;

		if (!cluster_alive(r->cl, s->node[k], s->epoch[k]))
			continue;
		t = cluster_rtt_us(r->cl, s->node[k]) / 1e9 + (k >= s->ec_k ? 1.0 : 0.0) +
		    (cluster_reachable(r->cl, s->node[k], s->epoch[k]) ? 0.0 : 2.0);
		for (j = f->n_order; j > 0 && key[j - 1] > t; j--) {
			f->order[j] = f->order[j - 1];
			key[j] = key[j - 1];
		}
		f->order[j] = (uint8_t)k;
		key[j] = t;
		f->n_order++;
	}
	if (f->n_order < s->ec_k) {
		/* fewer than K holders alive: the page cannot be had, now or later */
		f->failed = -EIO;
		fetch_end(f, -EIO);
		return;
	}
	fetch_ask(f, s->ec_k + f->extra);
}
