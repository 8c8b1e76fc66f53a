/*
 * zbud.c - the pageframe allocator: at most two compressed pages per frame.
 *
 * Frames and metadata live in two NORESERVE mappings, touched on first use.
 * Invariants: a frame in use and not a zombie is on its kind's LRU list, and
 * on its kind's unbuddied list (by free chunks) iff it has one buddy; a frame
 * below the high-water mark and not in use is on the free list.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tmem/zbud.h"

/* ---- structures -------------------------------------------------------- */

#define ZBUD_NIL UINT32_MAX
/* Frame numbers must fit a handle (frame << 1) and stay clear of ZBUD_NIL. */
#define ZBUD_FRAMES_LIMIT (UINT32_MAX >> 1)

enum { ZBUD_LRU, ZBUD_UB };     /* which pair of links: LRU/free or unbuddied */
enum { ZBUD_PREV, ZBUD_NEXT };

#define ZF_USED    0x01         /* frame in use (counted against the budget) */
#define ZF_PERS    0x02         /* holds persistent pages (else ephemeral) */
#define ZF_ZOMBIE  0x04         /* taken by zbud_zombify_lru() */
#define ZF_ON_LRU  0x08
#define ZF_ON_UB   0x10
#define ZF_DEAD0   0x20         /* zombie's first buddy released, bytes kept */
#define ZF_DEAD1   0x40         /* zombie's last buddy released, bytes kept */

/*
 * Per-frame metadata: 40 bytes. The LRU links double as the free-list links.
 * size[b] is the exact length of buddy b, 0 when the slot is empty; a zombie's
 * released buddy keeps its size (flagged dead) so zbud_data() still serves it.
 */
struct zbud_meta {
	uint32_t link[2][2];        /* [ZBUD_LRU|ZBUD_UB][ZBUD_PREV|ZBUD_NEXT] */
	struct zbud_ref ref[2];
	uint16_t size[2];
	uint8_t flags;
	uint8_t ub_free;            /* index of the unbuddied list it is on */
};

_Static_assert(sizeof(struct zbud_meta) <= 40, "frame metadata must stay small");

struct zbud_list {
	uint32_t head;
	uint32_t tail;
};

struct zbud {
	pthread_mutex_t lock;       /* guards everything below and all metadata */
	uint32_t max_frames;        /* the most the budget may be; size of both mappings */
	uint32_t limit;             /* the budget now, <= max_frames (zbud_set_limit) */
	uint32_t top;               /* frames ever used: [0, top) touched */
	uint32_t free_head;         /* free frames below top, LIFO via LRU next */
	unsigned char *frames;      /* max_frames * ZBUD_FRAME_SIZE */
	struct zbud_meta *meta;     /* max_frames entries */
	struct zbud_list lru[2];                  /* [pers] least recent first */
	struct zbud_list unbuddied[2][ZBUD_NCHUNKS]; /* [pers][free chunks] */
	uint64_t frames_used;       /* frames in use, zombies included */
	uint64_t frames_kind[2];    /* of those, [pers] */
	uint64_t zombies;           /* frames held as zombies */
	uint64_t buddied;           /* frames with two live buddies */
	uint64_t buddies;           /* live buddies */
	uint64_t bytes;             /* their exact lengths, summed */
	uint64_t bad_handles;       /* releases of a bad or dead handle, ignored */
};

static unsigned zbud_chunks(unsigned len)
{
	return (len + ZBUD_CHUNK_SIZE - 1) / ZBUD_CHUNK_SIZE;
}

static unsigned char *zbud_frame_base(const struct zbud *zb, uint32_t frame)
{
	return zb->frames + (size_t)frame * ZBUD_FRAME_SIZE;
}

/* Offset of buddy b of length len: the first at 0, the last flush with the end. */
static size_t zbud_offset(unsigned buddy, unsigned len)
{
	return buddy ? ZBUD_FRAME_SIZE - zbud_chunks(len) * ZBUD_CHUNK_SIZE : 0;
}

static bool zbud_is_live(const struct zbud_meta *m, unsigned buddy)
{
	return m->size[buddy] != 0 && !(m->flags & (buddy ? ZF_DEAD1 : ZF_DEAD0));
}

static unsigned zbud_live_count(const struct zbud_meta *m)
{
	return (unsigned)zbud_is_live(m, 0) + (unsigned)zbud_is_live(m, 1);
}

/* ---- index-linked lists (caller holds the lock) ------------------------- */

static void zbud_list_add_tail(struct zbud *zb, struct zbud_list *l, uint32_t f, int which)
{
	struct zbud_meta *m = &zb->meta[f];

	m->link[which][ZBUD_PREV] = l->tail;
	m->link[which][ZBUD_NEXT] = ZBUD_NIL;
	if (l->tail == ZBUD_NIL)
		l->head = f;
	else
		zb->meta[l->tail].link[which][ZBUD_NEXT] = f;
	l->tail = f;
}

static void zbud_list_del(struct zbud *zb, struct zbud_list *l, uint32_t f, int which)
{
	struct zbud_meta *m = &zb->meta[f];
	uint32_t prev = m->link[which][ZBUD_PREV];
	uint32_t next = m->link[which][ZBUD_NEXT];

	if (prev == ZBUD_NIL)
		l->head = next;
	else
		zb->meta[prev].link[which][ZBUD_NEXT] = next;
	if (next == ZBUD_NIL)
		l->tail = prev;
	else
		zb->meta[next].link[which][ZBUD_PREV] = prev;
	m->link[which][ZBUD_PREV] = ZBUD_NIL;
	m->link[which][ZBUD_NEXT] = ZBUD_NIL;
}

static void zbud_list_init(struct zbud_list *l)
{
	l->head = ZBUD_NIL;
	l->tail = ZBUD_NIL;
}

/* ---- list membership of a frame (caller holds the lock) ----------------- */

static void zbud_lru_touch(struct zbud *zb, uint32_t f)
{
	struct zbud_meta *m = &zb->meta[f];
	struct zbud_list *l = &zb->lru[!!(m->flags & ZF_PERS)];

	if (m->flags & ZF_ON_LRU)
		zbud_list_del(zb, l, f, ZBUD_LRU);
	zbud_list_add_tail(zb, l, f, ZBUD_LRU);
	m->flags |= ZF_ON_LRU;
}

static void zbud_lru_remove(struct zbud *zb, uint32_t f)
{
	struct zbud_meta *m = &zb->meta[f];

	if (!(m->flags & ZF_ON_LRU))
		return;
	zbud_list_del(zb, &zb->lru[!!(m->flags & ZF_PERS)], f, ZBUD_LRU);
	m->flags &= (uint8_t)~ZF_ON_LRU;
}

/* Put a frame with exactly one live buddy on the unbuddied list for its free chunks. */
static void zbud_ub_add(struct zbud *zb, uint32_t f)
{
	struct zbud_meta *m = &zb->meta[f];
	unsigned used = zbud_chunks(m->size[0]) + zbud_chunks(m->size[1]);
	unsigned nfree = ZBUD_NCHUNKS - used;

	m->ub_free = (uint8_t)nfree;
	zbud_list_add_tail(zb, &zb->unbuddied[!!(m->flags & ZF_PERS)][nfree], f, ZBUD_UB);
	m->flags |= ZF_ON_UB;
}

static void zbud_ub_remove(struct zbud *zb, uint32_t f)
{
	struct zbud_meta *m = &zb->meta[f];

	if (!(m->flags & ZF_ON_UB))
		return;
	zbud_list_del(zb, &zb->unbuddied[!!(m->flags & ZF_PERS)][m->ub_free], f, ZBUD_UB);
	m->flags &= (uint8_t)~ZF_ON_UB;
}

/* ---- frames (caller holds the lock) ------------------------------------- */

/* @return a free frame marked in use for the given kind, or ZBUD_NIL past the budget. */
static uint32_t zbud_frame_get(struct zbud *zb, bool pers)
{
	struct zbud_meta *m;
	uint32_t f;

	if (zb->frames_used >= zb->limit)
		return ZBUD_NIL; /* past the budget now (zbud_set_limit) */
	if (zb->free_head != ZBUD_NIL) {
		f = zb->free_head;
		zb->free_head = zb->meta[f].link[ZBUD_LRU][ZBUD_NEXT];
	} else if (zb->top < zb->max_frames) {
		f = zb->top++;
	} else {
		return ZBUD_NIL;
	}
	m = &zb->meta[f];
	memset(m, 0, sizeof(*m));
	m->link[ZBUD_LRU][ZBUD_PREV] = ZBUD_NIL;
	m->link[ZBUD_LRU][ZBUD_NEXT] = ZBUD_NIL;
	m->link[ZBUD_UB][ZBUD_PREV] = ZBUD_NIL;
	m->link[ZBUD_UB][ZBUD_NEXT] = ZBUD_NIL;
	m->flags = ZF_USED | (pers ? ZF_PERS : 0);
	zb->frames_used++;
	zb->frames_kind[pers]++;
	return f;
}

/* Return a frame, already off the LRU and unbuddied lists, to the free list. */
static void zbud_frame_put(struct zbud *zb, uint32_t f)
{
	struct zbud_meta *m = &zb->meta[f];

	zb->frames_used--;
	zb->frames_kind[!!(m->flags & ZF_PERS)]--;
	memset(m, 0, sizeof(*m));
	m->link[ZBUD_LRU][ZBUD_NEXT] = zb->free_head;
	zb->free_head = f;
}

/* @return the metadata of a handle's frame if it is in use, else NULL. */
static struct zbud_meta *zbud_meta_of(const struct zbud *zb, uint32_t handle)
{
	uint32_t f = ZBUD_HANDLE_FRAME(handle);

	if (f >= zb->top || !(zb->meta[f].flags & ZF_USED))
		return NULL;
	return &zb->meta[f];
}

/* ---- create / destroy --------------------------------------------------- */

struct zbud *zbud_create(uint32_t max_frames)
{
	struct zbud *zb;
	size_t frames_len, meta_len;
	int err, i, k;

	if (max_frames == 0 || max_frames > ZBUD_FRAMES_LIMIT) {
		errno = EINVAL;
		return NULL;
	}
	zb = calloc(1, sizeof(*zb));
	if (!zb)
		return NULL;
	frames_len = (size_t)max_frames * ZBUD_FRAME_SIZE;
	meta_len = (size_t)max_frames * sizeof(struct zbud_meta);
	zb->frames = mmap(NULL, frames_len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (zb->frames == MAP_FAILED) {
		err = errno;
		goto free_zb;
	}
	zb->meta = mmap(NULL, meta_len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (zb->meta == MAP_FAILED) {
		err = errno;
		goto unmap_frames;
	}
	err = pthread_mutex_init(&zb->lock, NULL);
	if (err)
		goto unmap_meta;
	zb->max_frames = max_frames;
	zb->limit = max_frames;
	zb->free_head = ZBUD_NIL;
	for (k = 0; k < 2; k++) {
		zbud_list_init(&zb->lru[k]);
		for (i = 0; i < ZBUD_NCHUNKS; i++)
			zbud_list_init(&zb->unbuddied[k][i]);
	}
	return zb;

unmap_meta:
	munmap(zb->meta, meta_len);
unmap_frames:
	munmap(zb->frames, frames_len);
free_zb:
	free(zb);
	errno = err;
	return NULL;
}

void zbud_destroy(struct zbud *zb)
{
	if (!zb)
		return;
	pthread_mutex_destroy(&zb->lock);
	munmap(zb->meta, (size_t)zb->max_frames * sizeof(struct zbud_meta));
	munmap(zb->frames, (size_t)zb->max_frames * ZBUD_FRAME_SIZE);
	free(zb);
}

/* ---- store / data / release --------------------------------------------- */

/* @return an unbuddied frame of the kind with the fewest free chunks >= need, or ZBUD_NIL. */
static uint32_t zbud_find_unbuddied(struct zbud *zb, bool pers, unsigned need)
{
	unsigned i;

	for (i = need; i < ZBUD_NCHUNKS; i++)
		if (zb->unbuddied[pers][i].head != ZBUD_NIL)
			return zb->unbuddied[pers][i].head;
	return ZBUD_NIL;
}

int zbud_store(struct zbud *zb, bool pers, const void *data, unsigned len, struct zbud_ref ref,
	       uint32_t *handle)
{
	struct zbud_meta *m;
	unsigned buddy;
	uint32_t f;

	if (len == 0 || len > ZBUD_BUDDY_MAX)
		return -EINVAL;
	pthread_mutex_lock(&zb->lock);
	f = zbud_find_unbuddied(zb, pers, zbud_chunks(len));
	if (f != ZBUD_NIL) {
		m = &zb->meta[f];
		zbud_ub_remove(zb, f);
		buddy = m->size[0] ? 1 : 0;
		zb->buddied++;
	} else {
		f = zbud_frame_get(zb, pers);
		if (f == ZBUD_NIL) {
			pthread_mutex_unlock(&zb->lock);
			return -ENOSPC;
		}
		m = &zb->meta[f];
		buddy = 0;
	}
	m->size[buddy] = (uint16_t)len;
	m->ref[buddy] = ref;
	memcpy(zbud_frame_base(zb, f) + zbud_offset(buddy, len), data, len);
	if (zbud_live_count(m) == 1)
		zbud_ub_add(zb, f);
	zbud_lru_touch(zb, f);
	zb->buddies++;
	zb->bytes += len;
	pthread_mutex_unlock(&zb->lock);
	*handle = ZBUD_HANDLE(f, buddy);
	return 0;
}

/*
 * Lock-free: reads only size[buddy], which changes under the lock only while
 * the buddy is not owned by a caller that may call this. A handle out of range
 * or naming an empty slot gives NULL (and *len = 0).
 */
const void *zbud_data(const struct zbud *zb, uint32_t handle, unsigned *len)
{
	uint32_t f = ZBUD_HANDLE_FRAME(handle);
	unsigned buddy = ZBUD_HANDLE_BUDDY(handle);
	unsigned size;

	if (f >= zb->max_frames) {
		if (len)
			*len = 0;
		return NULL;
	}
	size = zb->meta[f].size[buddy];
	if (len)
		*len = size;
	if (!size)
		return NULL;
	return zbud_frame_base(zb, f) + zbud_offset(buddy, size);
}

/*
 * A handle whose frame is not in use, or whose buddy is not live (released
 * already, or a zombie's released buddy), is ignored and counted in
 * bad_handles: a caller's bug must not corrupt the lists.
 */
void zbud_release(struct zbud *zb, uint32_t handle)
{
	unsigned buddy = ZBUD_HANDLE_BUDDY(handle);
	uint32_t f = ZBUD_HANDLE_FRAME(handle);
	struct zbud_meta *m;
	unsigned live;

	pthread_mutex_lock(&zb->lock);
	m = zbud_meta_of(zb, handle);
	if (!m || !zbud_is_live(m, buddy)) {
		zb->bad_handles++;
		goto unlock;
	}
	live = zbud_live_count(m);
	zb->buddies--;
	zb->bytes -= m->size[buddy];
	if (live == 2)
		zb->buddied--;
	if (m->flags & ZF_ZOMBIE) {
		/* Keep the bytes for the holder until zbud_zombie_done(). */
		m->flags |= buddy ? ZF_DEAD1 : ZF_DEAD0;
		goto unlock;
	}
	m->size[buddy] = 0;
	m->ref[buddy] = (struct zbud_ref){ 0, 0 };
	if (live == 2) {
		zbud_ub_add(zb, f);
	} else {
		zbud_ub_remove(zb, f);
		zbud_lru_remove(zb, f);
		zbud_frame_put(zb, f);
	}
unlock:
	pthread_mutex_unlock(&zb->lock);
}

/* ---- zombies ------------------------------------------------------------ */

/* Make frame f (on an LRU list, not a zombie) a zombie. Caller holds the lock. */
static void zbud_zombify_locked(struct zbud *zb, uint32_t f, struct zbud_victim *v)
{
	struct zbud_meta *m = &zb->meta[f];
	unsigned b;

	zbud_lru_remove(zb, f);
	zbud_ub_remove(zb, f);
	m->flags |= ZF_ZOMBIE;
	zb->zombies++;
	memset(v, 0, sizeof(*v));
	v->frame = f;
	for (b = 0; b < 2; b++) {
		if (!zbud_is_live(m, b))
			continue;
		v->handle[v->n] = ZBUD_HANDLE(f, b);
		v->ref[v->n] = m->ref[b];
		v->len[v->n] = m->size[b];
		v->data[v->n] = zbud_frame_base(zb, f) + zbud_offset(b, m->size[b]);
		v->n++;
	}
}

int zbud_zombify_lru(struct zbud *zb, bool pers, struct zbud_victim *v)
{
	uint32_t f;

	pthread_mutex_lock(&zb->lock);
	f = zb->lru[pers].head;
	if (f == ZBUD_NIL) {
		pthread_mutex_unlock(&zb->lock);
		return -ENOENT;
	}
	zbud_zombify_locked(zb, f, v);
	pthread_mutex_unlock(&zb->lock);
	return 0;
}

unsigned zbud_lru_peek(struct zbud *zb, bool pers, unsigned k, uint32_t *frames,
		       struct zbud_ref *refs)
{
	unsigned n = 0, b;
	uint32_t f;

	pthread_mutex_lock(&zb->lock);
	for (f = zb->lru[pers].head; f != ZBUD_NIL && n < k; f = zb->meta[f].link[ZBUD_LRU][ZBUD_NEXT]) {
		for (b = 0; b < 2; b++)
			if (zbud_is_live(&zb->meta[f], b))
				break;
		if (b == 2)
			continue;
		frames[n] = f;
		refs[n] = zb->meta[f].ref[b];
		n++;
	}
	pthread_mutex_unlock(&zb->lock);
	return n;
}

int zbud_lru_requeue(struct zbud *zb, bool pers, uint32_t frame)
{
	struct zbud_meta *m;
	int rc = -ENOENT;

	pthread_mutex_lock(&zb->lock);
	m = frame < zb->top ? &zb->meta[frame] : NULL;
	if (m && (m->flags & (ZF_USED | ZF_ZOMBIE | ZF_ON_LRU)) == (ZF_USED | ZF_ON_LRU) &&
	    !!(m->flags & ZF_PERS) == pers) {
		zbud_lru_touch(zb, frame);
		rc = 0;
	}
	pthread_mutex_unlock(&zb->lock);
	return rc;
}

int zbud_zombify_frame(struct zbud *zb, bool pers, uint32_t frame, struct zbud_victim *v)
{
	struct zbud_meta *m;

	pthread_mutex_lock(&zb->lock);
	m = frame < zb->top ? &zb->meta[frame] : NULL;
	if (!m || (m->flags & (ZF_USED | ZF_ZOMBIE | ZF_ON_LRU)) != (ZF_USED | ZF_ON_LRU) ||
	    !!(m->flags & ZF_PERS) != pers) {
		pthread_mutex_unlock(&zb->lock);
		return -ENOENT;
	}
	zbud_zombify_locked(zb, frame, v);
	pthread_mutex_unlock(&zb->lock);
	return 0;
}

/* A frame that is not a zombie is ignored (counted in bad_handles). */
void zbud_zombie_done(struct zbud *zb, uint32_t frame)
{
	struct zbud_meta *m;
	unsigned b;

	pthread_mutex_lock(&zb->lock);
	if (frame >= zb->top || !(zb->meta[frame].flags & ZF_ZOMBIE)) {
		zb->bad_handles++;
		goto unlock;
	}
	m = &zb->meta[frame];
	for (b = 0; b < 2; b++) {
		if (m->flags & (b ? ZF_DEAD1 : ZF_DEAD0)) {
			m->size[b] = 0;
			m->ref[b] = (struct zbud_ref){ 0, 0 };
		}
	}
	m->flags &= (uint8_t)~(ZF_ZOMBIE | ZF_DEAD0 | ZF_DEAD1);
	zb->zombies--;
	switch (zbud_live_count(m)) {
	case 0:
		zbud_frame_put(zb, frame);
		break;
	case 1:
		zbud_ub_add(zb, frame);
		zbud_lru_touch(zb, frame);
		break;
	default:
		zbud_lru_touch(zb, frame);
		break;
	}
unlock:
	pthread_mutex_unlock(&zb->lock);
}

/* ---- stats -------------------------------------------------------------- */

void zbud_get_stats(struct zbud *zb, struct zbud_stats *s)
{
	pthread_mutex_lock(&zb->lock);
	s->frames = zb->frames_used;
	s->frames_eph = zb->frames_kind[0];
	s->frames_pers = zb->frames_kind[1];
	s->zombies = zb->zombies;
	s->frames_touched = zb->top;
	s->buddied = zb->buddied;
	s->buddies = zb->buddies;
	s->bytes = zb->bytes;
	s->max_frames = zb->limit;
	s->meta_bytes = (uint64_t)zb->top * sizeof(struct zbud_meta) + sizeof(*zb);
	s->bad_handles = zb->bad_handles;
	pthread_mutex_unlock(&zb->lock);
}

void zbud_set_limit(struct zbud *zb, uint32_t frames)
{
	if (frames < 1)
		frames = 1;
	pthread_mutex_lock(&zb->lock);
	zb->limit = frames < zb->max_frames ? frames : zb->max_frames;
	pthread_mutex_unlock(&zb->lock);
}
