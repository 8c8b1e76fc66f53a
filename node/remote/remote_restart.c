/*
 * remote_restart.c - what a warm restart keeps of the collective (remote.h,
 * docs/warm-restart.md): our incarnation and seal key, what we know of each
 * peer, the flushes we owe holders and the pages we hold for owners.
 *
 * Records (little-endian, after the tier's in the image):
 *   SELF    u32 self, u64 incarnation, u8 cipher, u8 integrity, u16 0,
 *           u64 seal version, key[32]
 *   PEER    u32 id, u64 incarnation, u32 epoch, u32 their epoch,
 *           u64 pages there, u64 owner session, u64 session dropped
 *   FLUSH   u32 node, u32 op, u32 pool, u64 oid[3], u32 index, u64 horizon
 *   FOREIGN u32 owner, u64 session, u32 pool, u64 oid[3], u32 index,
 *           u8 persistent, u8 0, u16 len, u32 checksum; then len bytes
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "common/util.h"
#include "node/log.h"
#include "node/remote/foreign.h"
#include "node/remote/remote_int.h"

#define SELF_LEN    (4 + 8 + 4 + 8 + SEAL_KEY_BYTES)
#define PEER_LEN    (4 + 8 + 4 + 4 + 8 + 8 + 8)
#define FLUSH_LEN   (4 + 4 + 4 + 24 + 4 + 8)
#define FOREIGN_LEN (4 + 8 + 4 + 24 + 4 + 4 + 4)
/* id, k, m, live, gone, L, 0, node[8], epoch[8], lens[8], version[8] */
#define STRIPE_LEN  (8 + 4 + 2 + 2 + 8 + 8 + 16 + 32)

/* ---- quiet ------------------------------------------------------------------------- */

int remote_warm_check(struct remote *r, char *why, size_t len)
{
	if (r->drain.on) {
		snprintf(why, len,
			 "a drain is running (pages are going back to their owners): wait for it, "
			 "or end it (ramsterctl drain off)");
		return -EBUSY;
	}
	return 0;
}

void remote_quiesce(struct remote *r)
{
	remotify_pause(r);
	repair_stop(r);
	compact_stop(r);
}

void remote_resume(struct remote *r)
{
	if (remotify_start(r))
		log_error(
		    "restart: the remotify thread did not start again: nothing is remotified");
	repair_kick(r);
	compact_start(r);
}

int remote_start(struct remote *r)
{
	/* stripes are known by now (ec_layout = stripes, or kept by a warm restart) */
	compact_start(r);
	return remotify_start(r);
}

bool remote_quiet(struct remote *r)
{
	/* flushes may stay owed (a holder away): the image carries them; anything
	 * else in flight must be answered first (a frame being remotified, a get) */
	return handoff_empty(&r->jobs) && handoff_empty(&r->flushes) && !r->retrying &&
	       !r->repair.inflight && !r->drain.inflight && remote_pending_others(r) == 0;
}

/* ---- save ---------------------------------------------------------------------------- */

struct save_ctx {
	struct remote *r;
	remote_emit_fn emit;
	void *arg;
	int rc;
	struct remote_restart_stats *st;
};

static void put_handle(uint8_t *p, const struct tmem_handle *h)
{
	put_le32(p, h->pool);
	put_le64(p + 4, h->oid.w[0]);
	put_le64(p + 12, h->oid.w[1]);
	put_le64(p + 20, h->oid.w[2]);
	put_le32(p + 28, h->index);
}

static void get_handle(const uint8_t *p, struct tmem_handle *h)
{
	memset(h, 0, sizeof(*h));
	h->pool = get_le32(p);
	h->oid.w[0] = get_le64(p + 4);
	h->oid.w[1] = get_le64(p + 12);
	h->oid.w[2] = get_le64(p + 20);
	h->index = get_le32(p + 28);
}

static void save_flush(void *arg, const struct rflush *f)
{
	struct save_ctx *s = arg;
	uint8_t rec[FLUSH_LEN];

	if (s->rc)
		return;
	put_le32(rec, f->node);
	put_le32(rec + 4, (uint32_t)f->op);
	put_handle(rec + 8, &f->h);
	put_le64(rec + 40, f->horizon);
	s->st->flushes++;
	s->rc = s->emit(s->arg, REMOTE_TAG_FLUSH, rec, sizeof(rec), NULL, 0);
}

static bool save_foreign(void *arg, const struct foreign_key *k, bool pers, const void *data,
			 size_t len, uint32_t checksum)
{
	struct save_ctx *s = arg;
	uint8_t rec[FOREIGN_LEN];
	struct tmem_handle h = {.pool = k->pool, .index = k->index};

	memcpy(h.oid.w, k->oid, sizeof(h.oid.w));
	put_le32(rec, k->owner);
	put_le64(rec + 4, k->incarnation);
	put_handle(rec + 12, &h);
	rec[44] = pers;
	rec[45] = 0;
	put_le16(rec + 46, (uint16_t)len);
	put_le32(rec + 48, checksum);
	s->st->foreign++;
	s->rc = s->emit(s->arg, REMOTE_TAG_FOREIGN, rec, sizeof(rec), data, len);
	return s->rc != 0;
}

static int save_stripe(void *arg, uint64_t id, const struct stripe_rec *sr)
{
	struct save_ctx *s = arg;
	uint8_t rec[STRIPE_LEN];
	unsigned i;

	memset(rec, 0, sizeof(rec));
	put_le64(rec, id);
	rec[8] = (uint8_t)sr->k;
	rec[9] = (uint8_t)sr->m;
	rec[10] = (uint8_t)sr->live;
	rec[11] = (uint8_t)sr->gone;
	put_le16(rec + 12, (uint16_t)sr->L);
	for (i = 0; i < ERASURE_MAX; i++) {
		rec[16 + i] = sr->node[i];
		rec[24 + i] = sr->epoch[i];
		put_le16(rec + 32 + 2 * i, (uint16_t)sr->lens[i]);
		put_le32(rec + 48 + 4 * i, sr->version[i]);
	}
	s->st->stripes++;
	s->rc = s->emit(s->arg, REMOTE_TAG_STRIPE, rec, sizeof(rec), NULL, 0);
	return s->rc;
}

int remote_save(struct remote *r, remote_emit_fn emit, void *arg, struct remote_restart_stats *st)
{
	struct cluster_warm_peer w[CONFIG_NODES_MAX];
	struct save_ctx s = {r, emit, arg, 0, st};
	uint8_t rec[SELF_LEN], key[SEAL_KEY_BYTES], cipher;
	uint64_t version;
	size_t i, n;

	memset(st, 0, sizeof(*st));
	seal_save(r->seal, key, &version, &cipher);
	put_le32(rec, r->self);
	put_le64(rec + 4, cluster_incarnation(r->cl));
	rec[12] = cipher;
	rec[13] = 0;
	put_le16(rec + 14, 0);
	put_le64(rec + 16, version);
	memcpy(rec + 24, key, SEAL_KEY_BYTES);
	s.rc = emit(arg, REMOTE_TAG_SELF, rec, sizeof(rec), NULL, 0);
	sodium_memzero(key, sizeof(key));
	sodium_memzero(rec, sizeof(rec));
	n = cluster_warm_get(r->cl, w, CONFIG_NODES_MAX);
	for (i = 0; i < n && !s.rc; i++) {
		uint8_t pr[PEER_LEN];
		const struct owner_lease *o = &r->owner[w[i].id];

		put_le32(pr, w[i].id);
		put_le64(pr + 4, w[i].incarnation);
		put_le32(pr + 12, w[i].epoch);
		put_le32(pr + 16, w[i].their_epoch);
		put_le64(pr + 20, w[i].pages_there);
		put_le64(pr + 28, o->session);
		put_le64(pr + 36, o->dropped);
		st->peers++;
		s.rc = emit(arg, REMOTE_TAG_PEER, pr, sizeof(pr), NULL, 0);
	}
	if (!s.rc)
		remote_flush_walk(r, save_flush, &s);
	if (!s.rc)
		foreign_walk(r->fs, save_foreign, &s);
	if (!s.rc && r->stripes)
		stripe_walk(r->stripes, save_stripe, &s);
	return s.rc;
}

/* ---- load ---------------------------------------------------------------------------- */

int remote_record_check(uint16_t tag, const uint8_t *p, size_t len, uint32_t self)
{
	uint32_t node;

	switch (tag) {
	case REMOTE_TAG_SELF:
		if (len != SELF_LEN || !get_le64(p + 4))
			return -EBADMSG;
		/* another node id (or none now): the image's remote pages are not ours */
		return get_le32(p) == self ? 0 : -EPROTO;
	case REMOTE_TAG_PEER:
		if (len != PEER_LEN)
			return -EBADMSG;
		node = get_le32(p);
		return node && node <= CONFIG_NODES_MAX && node != self && get_le64(p + 4)
			   ? 0
			   : -EBADMSG;
	case REMOTE_TAG_FLUSH:
		node = len == FLUSH_LEN ? get_le32(p) : 0;
		if (!node || node > CONFIG_NODES_MAX || node == self)
			return -EBADMSG;
		switch ((int)get_le32(p + 4)) {
		case RAMSTER__PEER__OP__P_FLUSH:
		case RAMSTER__PEER__OP__P_FLUSH_OBJECT:
		case RAMSTER__PEER__OP__P_FLUSH_POOL:
			return 0;
		}
		return -EBADMSG;
	case REMOTE_TAG_FOREIGN:
		if (len < FOREIGN_LEN)
			return -EBADMSG;
		node = get_le32(p);
		if (!node || node > CONFIG_NODES_MAX || node == self || p[44] > 1 || p[45] ||
		    !get_le16(p + 46) || get_le16(p + 46) > SEAL_BLOB_MAX ||
		    len != FOREIGN_LEN + (size_t)get_le16(p + 46))
			return -EBADMSG;
		return 0;
	case REMOTE_TAG_STRIPE:
		/* the form; the table checks the rest as it restores it (stripe_restore) */
		if (len != STRIPE_LEN || !(uint32_t)get_le64(p) || (get_le64(p) >> 56) ||
		    p[8] < 2 || p[9] < 1 || p[8] + p[9] > ERASURE_MAX || p[14] || p[15])
			return -EBADMSG;
		return 0;
	}
	return -EBADMSG;
}

void remote_loader_init(struct remote_loader *l, struct remote *r)
{
	memset(l, 0, sizeof(*l));
	l->r = r;
	/* an elastic donation starts at its minimum: what was held comes back whole,
	 * and the controller takes it from there (elastic_create) */
	if (r->donate_auto)
		foreign_set_budget(r->fs, UINT64_MAX);
}

int remote_load_record(struct remote_loader *l, uint16_t tag, const uint8_t *p, size_t len)
{
	struct remote *r = l->r;
	struct tmem_handle h;
	int rc = remote_record_check(tag, p, len, r->self);

	if (rc)
		return rc;
	switch (tag) {
	case REMOTE_TAG_SELF:
		if (seal_load(r->seal, p + 24, get_le64(p + 16), p[12])) {
			/* the copies on peers cannot be opened here: they are found lost */
			log_error(
			    "restart: the seal key was made with another cipher than this CPU "
			    "runs: our pages on peers cannot be read back");
			l->st.seal_refused++;
		}
		l->incarnation = get_le64(p + 4);
		break;
	case REMOTE_TAG_PEER:
		if (l->n >= CONFIG_NODES_MAX)
			return -EBADMSG;
		l->w[l->n].id = get_le32(p);
		l->w[l->n].incarnation = get_le64(p + 4);
		l->w[l->n].epoch = get_le32(p + 12);
		l->w[l->n].their_epoch = get_le32(p + 16);
		l->w[l->n].pages_there = get_le64(p + 20);
		r->owner[l->w[l->n].id].session = get_le64(p + 28);
		r->owner[l->w[l->n].id].dropped = get_le64(p + 36);
		l->n++;
		l->st.peers++;
		break;
	case REMOTE_TAG_FLUSH:
		get_handle(p + 8, &h);
		remote_flog_add(r, get_le32(p), (int)get_le32(p + 4), &h, get_le64(p + 40));
		l->st.flushes++;
		break;
	case REMOTE_TAG_FOREIGN: {
		struct foreign_key k = {.owner = get_le32(p), .incarnation = get_le64(p + 4)};

		get_handle(p + 12, &h);
		k.pool = h.pool;
		k.index = h.index;
		memcpy(k.oid, h.oid.w, sizeof(k.oid));
		if (foreign_put(r->fs, &k, p[44], p + FOREIGN_LEN, get_le16(p + 46),
				get_le32(p + 48)))
			l->st.foreign_refused++; /* no room (a smaller donate_mb): its owner finds
						    it lost */
		else
			l->st.foreign++;
		break;
	}
	case REMOTE_TAG_STRIPE: {
		struct stripe_rec sr = {.k = p[8], .m = p[9], .live = p[10], .gone = p[11],
					.L = get_le16(p + 12)};
		unsigned i;

		for (i = 0; i < ERASURE_MAX; i++) {
			sr.node[i] = p[16 + i];
			sr.epoch[i] = p[24 + i];
			sr.lens[i] = get_le16(p + 32 + 2 * i);
			sr.version[i] = get_le32(p + 48 + 4 * i);
		}
		/* placed under ec_layout = stripes: served whatever the layout is now */
		if (!r->stripes)
			r->stripes = stripe_table_create();
		if (!r->stripes || stripe_restore(r->stripes, get_le64(p), &sr)) {
			l->st.stripes_refused++; /* its pages read as lost (-EIO) */
			break;
		}
		l->st.stripes++;
		break;
	}
	}
	return 0;
}

int remote_load_end(struct remote_loader *l)
{
	if (l->r->donate_auto)
		foreign_set_budget(l->r->fs, remote_donate_used(l->r));
	if (!l->incarnation)
		return 0; /* the image held no collective: a new incarnation */
	if (cluster_warm_set(l->r->cl, l->incarnation, l->w, l->n))
		return -EBUSY;
	if (l->st.foreign_refused)
		log_error("restart: %llu pages held for peers found no room (was donate_mb made "
			  "smaller?): their owners find them lost",
			  (unsigned long long)l->st.foreign_refused);
	log_notice("restart: the collective kept: %llu peers, %llu pages held for them, %llu "
		   "flushes owed",
		   (unsigned long long)l->st.peers, (unsigned long long)l->st.foreign,
		   (unsigned long long)l->st.flushes);
	return 0;
}
