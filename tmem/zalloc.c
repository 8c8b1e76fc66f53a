/*
 * zalloc.c - struct zalloc_ops for zbud and zdense.
 */
#include <errno.h>
#include <string.h>

#include "tmem/zalloc.h"
#include "tmem/zbud.h"
#include "tmem/zdense.h"

/* ---- zbud --------------------------------------------------------------- */

static void *zb_create(uint32_t max_frames)
{
	return zbud_create(max_frames);
}

static void zb_destroy(void *a)
{
	zbud_destroy(a);
}

static int zb_store(void *a, bool pers, const void *data, unsigned len, struct zbud_ref ref,
		    uint64_t *handle)
{
	uint32_t h;
	int ret = zbud_store(a, pers, data, len, ref, &h);

	/* as zbud_store: the handle is set on success only (h is unset otherwise) */
	if (!ret)
		*handle = h;
	return ret;
}

/* A handle past 32 bits is none of zbud's: no data, a bad release. */
static const void *zb_data(const void *a, uint64_t handle, unsigned *len)
{
	return zbud_data(a, handle > UINT32_MAX ? UINT32_MAX : (uint32_t)handle, len);
}

static void zb_release(void *a, uint64_t handle)
{
	zbud_release(a, handle > UINT32_MAX ? UINT32_MAX : (uint32_t)handle);
}

static void zb_victim(struct zalloc_victim *v, const struct zbud_victim *zv);

static int zb_zombify_lru(void *a, bool pers, struct zalloc_victim *v)
{
	struct zbud_victim zv;
	int ret;

	ret = zbud_zombify_lru(a, pers, &zv);
	if (ret)
		return ret;
	zb_victim(v, &zv);
	return 0;
}

static unsigned zb_lru_peek(void *a, bool pers, unsigned k, uint32_t *units,
			    struct zbud_ref *refs)
{
	return zbud_lru_peek(a, pers, k, units, refs);
}

static int zb_zombify_unit(void *a, bool pers, uint32_t unit, struct zalloc_victim *v)
{
	struct zbud_victim zv;
	int ret = zbud_zombify_frame(a, pers, unit, &zv);

	if (!ret)
		zb_victim(v, &zv);
	return ret;
}

static int zb_lru_requeue(void *a, bool pers, uint32_t unit)
{
	return zbud_lru_requeue(a, pers, unit);
}

static void zb_victim(struct zalloc_victim *v, const struct zbud_victim *zv)
{
	unsigned i;

	v->frame = zv->frame;
	v->frames = 1;
	v->n = zv->n;
	for (i = 0; i < zv->n; i++) {
		v->handle[i] = zv->handle[i];
		v->ref[i] = zv->ref[i];
		v->len[i] = zv->len[i];
		v->data[i] = zv->data[i];
	}
}

static void zb_zombie_done(void *a, uint32_t frame)
{
	zbud_zombie_done(a, frame);
}

static void zb_get_stats(void *a, struct zalloc_stats *s)
{
	struct zbud_stats zs;

	zbud_get_stats(a, &zs);
	s->frames = zs.frames;
	s->frames_eph = zs.frames_eph;
	s->frames_pers = zs.frames_pers;
	s->frames_touched = zs.frames_touched;
	s->zombies = zs.zombies;
	s->objects = zs.buddies;
	s->bytes = zs.bytes;
	s->max_frames = zs.max_frames;
	s->meta_bytes = zs.meta_bytes;
	s->bad_handles = zs.bad_handles;
}

static void zb_set_limit(void *a, uint32_t frames)
{
	zbud_set_limit(a, frames);
}

static uint64_t zb_trim(void *a, uint64_t keep, uint64_t max)
{
	(void)a;
	(void)keep;
	(void)max;
	return 0;
}

static const struct zalloc_ops zbud_ops = {
    .name = "zbud",
    .max_len = ZBUD_BUDDY_MAX,
    .create = zb_create,
    .destroy = zb_destroy,
    .store = zb_store,
    .data = zb_data,
    .release = zb_release,
    .zombify_lru = zb_zombify_lru,
    .lru_peek = zb_lru_peek,
    .zombify_unit = zb_zombify_unit,
    .lru_requeue = zb_lru_requeue,
    .zombie_done = zb_zombie_done,
    .get_stats = zb_get_stats,
    .set_limit = zb_set_limit,
    .trim = zb_trim,
};

/* ---- zdense ------------------------------------------------------------- */

static void *zd_create(uint32_t max_frames)
{
	return zdense_create(max_frames);
}

static void zd_destroy(void *a)
{
	zdense_destroy(a);
}

static int zd_store(void *a, bool pers, const void *data, unsigned len, struct zbud_ref ref,
		    uint64_t *handle)
{
	return zdense_store(a, pers, data, len, ref, handle);
}

static const void *zd_data(const void *a, uint64_t handle, unsigned *len)
{
	return zdense_data(a, handle, len);
}

static void zd_release(void *a, uint64_t handle)
{
	zdense_release(a, handle);
}

static int zd_zombify_lru(void *a, bool pers, struct zalloc_victim *v)
{
	return zdense_zombify_lru(a, pers, v);
}

static unsigned zd_lru_peek(void *a, bool pers, unsigned k, uint32_t *units,
			    struct zbud_ref *refs)
{
	return zdense_lru_peek(a, pers, k, units, refs);
}

static int zd_zombify_unit(void *a, bool pers, uint32_t unit, struct zalloc_victim *v)
{
	return zdense_zombify_block(a, pers, unit, v);
}

static int zd_lru_requeue(void *a, bool pers, uint32_t unit)
{
	return zdense_lru_requeue(a, pers, unit);
}

static void zd_zombie_done(void *a, uint32_t frame)
{
	zdense_zombie_done(a, frame);
}

static void zd_get_stats(void *a, struct zalloc_stats *s)
{
	zdense_get_stats(a, s);
}

static void zd_set_limit(void *a, uint32_t frames)
{
	zdense_set_limit(a, frames);
}

static uint64_t zd_trim(void *a, uint64_t keep, uint64_t max)
{
	return zdense_trim(a, keep, max);
}

static const struct zalloc_ops zdense_ops = {
    .name = "dense",
    .max_len = ZDENSE_MAX_LEN,
    .huge_len = ZDENSE_HUGE_LEN,
    .create = zd_create,
    .destroy = zd_destroy,
    .store = zd_store,
    .data = zd_data,
    .release = zd_release,
    .zombify_lru = zd_zombify_lru,
    .lru_peek = zd_lru_peek,
    .zombify_unit = zd_zombify_unit,
    .lru_requeue = zd_lru_requeue,
    .zombie_done = zd_zombie_done,
    .get_stats = zd_get_stats,
    .set_limit = zd_set_limit,
    .trim = zd_trim,
};

/* ---- choice ------------------------------------------------------------- */

const struct zalloc_ops *zalloc_ops(enum zalloc_kind kind)
{
	switch (kind) {
	case ZALLOC_DENSE:
		return &zdense_ops;
	case ZALLOC_ZBUD:
		return &zbud_ops;
	default:
		return NULL;
	}
}

int zalloc_parse(const char *name, enum zalloc_kind *kind)
{
	if (!strcmp(name, "dense"))
		*kind = ZALLOC_DENSE;
	else if (!strcmp(name, "zbud"))
		*kind = ZALLOC_ZBUD;
	else
		return -EINVAL;
	return 0;
}
