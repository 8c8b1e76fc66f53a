/*
 * crashload.c - what a crashed tier left, as a snapshot: scan the frames,
 * name each page by the crash table, sort by handle, keep what can be
 * vouched for, emit (crashload.h says what and why).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "tmem/crashload.h"
#include "tmem/zcache.h"
#include "tmem/zdense.h"

#define PAGE_HEAD 40 /* snapshot.c's PAGE record head */

/* A page the scan found, named. */
struct found {
	struct tmem_handle h;
	const void *data;
	unsigned len;
	unsigned zombie; /* of a zombie block: an older copy when there is another */
};

struct scan_ctx {
	const struct crashload_files *f;
	struct crashload_stats *st;
	uint64_t *incomplete;
	struct found *v;
	size_t n, cap;
	int err;
};

static void mark(uint64_t *bits, uint32_t id)
{
	bits[id / 64] |= 1ull << (id % 64);
}

static bool marked(const uint64_t *bits, uint32_t id)
{
	return bits[id / 64] >> (id % 64) & 1;
}

static int on_page(void *arg, const struct zdense_found *zf)
{
	struct scan_ctx *c = arg;
	struct found *e;
	struct tmem_oid oid;
	uint32_t pool;
	unsigned flags;

	if (!zf->pers) {
		c->st->eph_dropped++;
		return 0;
	}
	if (tmem_crashtab_obj(c->f->tab, c->f->tab_len, zf->ref.objno, &pool, &oid)) {
		c->st->no_object++;
		return 0;
	}
	if (tmem_crashtab_pool(c->f->tab, c->f->tab_len, pool, &flags, NULL) ||
	    !(flags & TMEM_PERSISTENT)) {
		c->st->no_pool++;
		return 0;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 4096;

		e = realloc(c->v, cap * sizeof(*e));
		if (!e) {
			c->err = -ENOMEM;
			return 1;
		}
		c->v = e;
		c->cap = cap;
	}
	c->v[c->n++] = (struct found){{pool, oid, zf->ref.index}, zf->data, zf->len, zf->zombie};
	return 0;
}

static int handle_cmp(const struct tmem_handle *a, const struct tmem_handle *b)
{
	int k;

	if (a->pool != b->pool)
		return a->pool < b->pool ? -1 : 1;
	for (k = 0; k < 3; k++)
		if (a->oid.w[k] != b->oid.w[k])
			return a->oid.w[k] < b->oid.w[k] ? -1 : 1;
	if (a->index != b->index)
		return a->index < b->index ? -1 : 1;
	return 0;
}

static int found_cmp(const void *a, const void *b)
{
	return handle_cmp(&((const struct found *)a)->h, &((const struct found *)b)->h);
}

/*
 * Of the run v[i..j) of one handle, the one to keep, or NULL. Counted; the
 * pool is incomplete when none is kept.
 */
static const struct found *pick(struct scan_ctx *c, size_t i, size_t j)
{
	const struct found *keep = NULL;
	size_t k, outside = 0;

	if (j - i == 1)
		return &c->v[i];
	for (k = i; k < j; k++)
		if (!c->v[k].zombie) {
			outside++;
			keep = &c->v[k];
		}
	if (outside == 1) {
		c->st->zombie_dropped += j - i - 1;
		return keep;
	}
	c->st->dup_dropped += j - i;
	mark(c->incomplete, c->v[i].h.pool);
	return NULL;
}

static int emit_pool(snapshot_emit_fn emit, void *arg, uint32_t id, unsigned flags)
{
	uint8_t rec[16];

	put_le32(rec, id);
	put_le32(rec + 4, flags);
	put_le32(rec + 8, 0); /* owner, weight: the pool directory's */
	put_le32(rec + 12, 0);
	return emit(arg, SNAPSHOT_TAG_POOL, rec, sizeof(rec), NULL, 0);
}

static int emit_page(snapshot_emit_fn emit, void *arg, const struct found *p)
{
	uint8_t head[PAGE_HEAD] = {0};

	put_le32(head, p->h.pool);
	put_le64(head + 4, p->h.oid.w[0]);
	put_le64(head + 12, p->h.oid.w[1]);
	put_le64(head + 20, p->h.oid.w[2]);
	put_le32(head + 28, p->h.index);
	head[32] = ZCACHE_IMG_LOCAL;
	head[34] = (uint8_t)p->len;
	head[35] = (uint8_t)(p->len >> 8);
	return emit(arg, SNAPSHOT_TAG_PAGE, head, sizeof(head), p->data, p->len);
}

/* @return true when the stored bytes give one page (raw, zcache's zero mark, or decompressed). */
static bool page_ok(const struct found *p, enum compress_algo algo, void *page)
{
	if (p->len == ZDENSE_HUGE_LEN || (p->len == 1 && !*(const unsigned char *)p->data))
		return true;
	return compress_unpage_algo(algo, p->data, p->len, page) == 0;
}

int crashload_emit(const struct crashload_files *f, snapshot_emit_fn emit, void *arg,
		   uint64_t *incomplete, struct crashload_stats *st)
{
	struct scan_ctx c = {.f = f, .st = st, .incomplete = incomplete};
	struct zdense_scan_stats zs;
	unsigned char *page = NULL;
	size_t i = 0, j;
	uint32_t id;
	uint8_t tier[8];
	int rc;

	memset(st, 0, sizeof(*st));
	if (!compress_algo_ok(f->algo) || tmem_crashtab_valid(f->tab, f->tab_len))
		return -EINVAL;
	rc = zdense_scan(f->mem, f->mem_len, f->blk, f->blk_len, on_page, &c, &zs);
	st->bad_blocks = zs.bad_blocks;
	st->bad_slots = zs.bad_slots;
	if (c.err || rc) {
		rc = c.err ? c.err : rc;
		goto out;
	}
	page = malloc(ZDENSE_HUGE_LEN);
	if (!page) {
		rc = -ENOMEM;
		goto out;
	}
	qsort(c.v, c.n, sizeof(*c.v), found_cmp);
	put_le32(tier, SNAPSHOT_VERSION);
	put_le32(tier + 4, (uint32_t)f->algo);
	rc = emit(arg, SNAPSHOT_TAG_TIER, tier, sizeof(tier), NULL, 0);
	/* every pool alive, in id order, each with its pages (sorted by pool first) */
	for (id = 0; !rc && id < TMEM_MAX_POOLS; id++) {
		unsigned flags;
		uint64_t nonlocal;

		if (tmem_crashtab_pool(f->tab, f->tab_len, id, &flags, &nonlocal)) {
			while (i < c.n && c.v[i].h.pool == id)
				i++; /* counted as no_pool by the scan: cannot happen */
			continue;
		}
		rc = emit_pool(emit, arg, id, flags);
		st->pools++;
		if ((flags & TMEM_PERSISTENT) && nonlocal)
			mark(incomplete, id);
		for (; !rc && i < c.n && c.v[i].h.pool == id; i = j) {
			const struct found *p;

			for (j = i + 1; j < c.n && !handle_cmp(&c.v[j].h, &c.v[i].h); j++)
				;
			p = pick(&c, i, j);
			if (!p)
				continue;
			if (!page_ok(p, f->algo, page)) {
				st->bad_bytes++;
				mark(incomplete, id);
				continue;
			}
			rc = emit_page(emit, arg, p);
			st->pages++;
			st->bytes += p->len;
		}
		if (marked(incomplete, id))
			st->pools_incomplete++;
	}
out:
	free(page);
	free(c.v);
	return rc;
}
