/*
 * zdense.c - the dense pageframe allocator: size classes in blocks of frames.
 *
 * Invariants (under the lock): a block in use and not a zombie is on its
 * kind's LRU list, and on its kind's partial list for its class iff it has a
 * free slot; a zombie is on neither. A unit below the high-water mark and not
 * in use is on the free list of its faulted-frame count. Slots of a block
 * below ninit are live (length set), free (length 0, on the block's free
 * chain) or, in a zombie only, dead (released, bytes kept).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tmem/zdense.h"

/* ---- size classes ------------------------------------------------------- */

#define ZD_NIL	      UINT32_MAX
#define ZD_SLOT_NIL   0xffu
#define ZD_MIN_SLOT   32
#define ZD_MAX_SLOT \
	(((ZDENSE_MAX_LEN + ZDENSE_HDR) + ZDENSE_STEP - 1) / ZDENSE_STEP * ZDENSE_STEP)
#define ZD_NSIZES     ((ZD_MAX_SLOT - ZD_MIN_SLOT) / ZDENSE_STEP + 1)
#define ZD_UNIT_BYTES ((size_t)ZDENSE_UNIT_FRAMES * ZDENSE_FRAME_SIZE)

_Static_assert(ZDENSE_SLOTS_MAX <= 128, "a slot index must fit 7 bits");

struct zd_class {
	uint16_t slot;	/* bytes a slot, header included */
	uint8_t frames; /* a block's frames */
	uint8_t slots;	/* a block's slots */
};

/* merged: [0, zd_nclasses) used, then the huge class at zd_huge */
static struct zd_class zd_classes[ZD_NSIZES + 1];
static uint16_t zd_class_by_size[ZD_NSIZES];  /* size index -> class */
static unsigned zd_nclasses;
static unsigned zd_huge; /* the huge class: a raw page, one frame, no slot header */
static pthread_once_t zd_once = PTHREAD_ONCE_INIT;

/*
 * For each slot size, the block of 1..4 frames that wastes the smallest
 * fraction of itself (fewer frames on a tie); sizes whose blocks hold the same
 * number of slots in the same frames share the class of the largest of them,
 * which costs nothing (zsmalloc merges its classes the same way).
 */
static void zd_classes_init(void)
{
	struct zd_class best[ZD_NSIZES];
	unsigned i, k;
	int c;

	for (i = 0; i < ZD_NSIZES; i++) {
		unsigned slot = ZD_MIN_SLOT + i * ZDENSE_STEP;
		unsigned bk = 1, bn = 1, bwaste = ~0u;

		for (k = 1; k <= ZDENSE_UNIT_FRAMES; k++) {
			unsigned n = k * ZDENSE_FRAME_SIZE / slot, waste;

			if (n > ZDENSE_SLOTS_MAX)
				n = ZDENSE_SLOTS_MAX;
			waste = k * ZDENSE_FRAME_SIZE - n * slot;
			/* waste/k < bwaste/bk, in integers */
			if (bwaste == ~0u || (uint64_t)waste * bk < (uint64_t)bwaste * k) {
				bk = k;
				bn = n;
				bwaste = waste;
			}
		}
		best[i] = (struct zd_class){(uint16_t)slot, (uint8_t)bk, (uint8_t)bn};
	}
	/* merge from the largest size down; class numbers are then reversed */
	c = -1;
	for (i = ZD_NSIZES; i-- > 0;) {
		if (c < 0 || best[i].frames != zd_classes[c].frames ||
		    best[i].slots != zd_classes[c].slots)
			zd_classes[++c] = best[i];
		zd_class_by_size[i] = (uint16_t)c;
	}
	zd_nclasses = (unsigned)c + 1;
	zd_huge = zd_nclasses;
	zd_classes[zd_huge] = (struct zd_class){ZDENSE_HUGE_LEN, 1, 1};
}

static unsigned zd_size_index(unsigned len)
{
	unsigned slot = len + ZDENSE_HDR;

	if (slot < ZD_MIN_SLOT)
		return 0;
	return (slot - ZD_MIN_SLOT + ZDENSE_STEP - 1) / ZDENSE_STEP;
}

int zdense_class_of(unsigned len, struct zdense_class *c)
{
	const struct zd_class *k;

	if (len == 0 || (len > ZDENSE_MAX_LEN && len != ZDENSE_HUGE_LEN))
		return -EINVAL;
	pthread_once(&zd_once, zd_classes_init);
	k = &zd_classes[len == ZDENSE_HUGE_LEN ? zd_huge : zd_class_by_size[zd_size_index(len)]];
	c->slot = k->slot;
	c->frames = k->frames;
	c->slots = k->slots;
	return 0;
}

/* ---- structures -------------------------------------------------------- */

enum { ZD_PREV, ZD_NEXT };

#define ZB_USED	   0x01 /* block in use (its frames count against the budget) */
#define ZB_PERS	   0x02 /* holds persistent pages */
#define ZB_ZOMBIE  0x04
#define ZB_ON_LRU  0x08
#define ZB_ON_PART 0x10

/* Slot header: le16 length|flags, then the back-reference (objno, index). */
#define ZS_DEAD	    0x8000u /* a zombie's released page: bytes kept */
#define ZS_LEN_MASK 0x1fffu

/*
 * Per-unit metadata: 24 bytes. The LRU links double as the free-unit links. A
 * block of the huge class is never on a partial list (it has one slot): its
 * part links hold its page's back-reference (objno, index) instead of a slot
 * header, so the frame holds the 4096 raw bytes and nothing else; nlive /
 * ndead say whether the page is live or, in a zombie, dead.
 */
struct zd_block {
	uint32_t lru[2];
	uint32_t part[2];
	uint16_t cls;
	uint8_t flags;
	uint8_t touched;   /* frames of the unit faulted in (kept in RAM) */
	uint8_t nlive;	   /* live pages */
	uint8_t ndead;	   /* a zombie's released pages */
	uint8_t ninit;	   /* slots ever handed out since the block began */
	uint8_t free_head; /* first free slot below ninit, or ZD_SLOT_NIL */
};

_Static_assert(sizeof(struct zd_block) <= 24, "block metadata must stay small");

struct zd_list {
	uint32_t head, tail;
};

struct zdense {
	pthread_mutex_t lock;
	uint32_t max_frames;  /* the most the budget may be (the mappings' size) */
	uint32_t limit;	      /* the budget now, <= max_frames (zdense_set_limit) */
	uint32_t max_units;   /* units reserved (one per frame of max_frames) */
	uint32_t top;	      /* units ever used */
	unsigned char *mem;   /* max_units * ZD_UNIT_BYTES, NORESERVE */
	struct zd_block *blk; /* max_units entries, NORESERVE */
	bool shared;	      /* mem and blk map files (zdense_create_shared) */
	uint32_t free_units[ZDENSE_UNIT_FRAMES + 1]; /* [frames faulted in], LIFO */
	struct zd_list lru[2];
	struct zd_list *part[2]; /* [pers][class] */
	uint64_t frames_used, frames_kind[2], frames_touched;
	uint64_t zombies, objects, bytes, bad_handles;
};

static unsigned char *zd_block_base(const struct zdense *zd, uint32_t b)
{
	return zd->mem + (size_t)b * ZD_UNIT_BYTES;
}

static unsigned char *zd_slot(const struct zdense *zd, uint32_t b, unsigned slot)
{
	return zd_block_base(zd, b) + (size_t)slot * zd_classes[zd->blk[b].cls].slot;
}

static unsigned zd_hdr_len(const unsigned char *s)
{
	uint16_t v;

	memcpy(&v, s, sizeof(v));
	return v;
}

static void zd_hdr_set(unsigned char *s, unsigned lenflags)
{
	uint16_t v = (uint16_t)lenflags;

	memcpy(s, &v, sizeof(v));
}

/*
 * The stores before it are made before the stores after it. In a shared tier
 * (zdense_create_shared) zdense_scan() trusts a slot only by the order its
 * stores were made in: a block's fields before its ZB_USED, a slot's bytes
 * and back-reference before its length, a fresh slot's zeroed length before
 * the ninit that admits it. The reader is a later process, after this one was
 * killed: a signal stops a thread at an instruction boundary, every store
 * before it done and none after (interrupts are precise, on any CPU), and
 * what is done reaches the file's pages. So only the compiler may reorder,
 * and a compiler barrier is all it takes (no instruction; other threads of
 * this process see the slots under the lock, as ever).
 */
#define ZD_ORDER() atomic_signal_fence(memory_order_seq_cst)

/* ---- lists (caller holds the lock) ------------------------------------- */

#define ZD_LINK(zd, b, which) ((which) ? (zd)->blk[b].part : (zd)->blk[b].lru)

static void zd_list_add_tail(struct zdense *zd, struct zd_list *l, uint32_t b, int which)
{
	uint32_t *lk = ZD_LINK(zd, b, which);

	lk[ZD_PREV] = l->tail;
	lk[ZD_NEXT] = ZD_NIL;
	if (l->tail == ZD_NIL)
		l->head = b;
	else
		ZD_LINK(zd, l->tail, which)[ZD_NEXT] = b;
	l->tail = b;
}

static void zd_list_del(struct zdense *zd, struct zd_list *l, uint32_t b, int which)
{
	uint32_t *lk = ZD_LINK(zd, b, which);

	if (lk[ZD_PREV] == ZD_NIL)
		l->head = lk[ZD_NEXT];
	else
		ZD_LINK(zd, lk[ZD_PREV], which)[ZD_NEXT] = lk[ZD_NEXT];
	if (lk[ZD_NEXT] == ZD_NIL)
		l->tail = lk[ZD_PREV];
	else
		ZD_LINK(zd, lk[ZD_NEXT], which)[ZD_PREV] = lk[ZD_PREV];
	lk[ZD_PREV] = lk[ZD_NEXT] = ZD_NIL;
}

static void zd_lru_touch(struct zdense *zd, uint32_t b)
{
	struct zd_block *m = &zd->blk[b];
	struct zd_list *l = &zd->lru[!!(m->flags & ZB_PERS)];

	if (m->flags & ZB_ON_LRU) {
		if (l->tail == b)
			return;
		zd_list_del(zd, l, b, 0);
	}
	zd_list_add_tail(zd, l, b, 0);
	m->flags |= ZB_ON_LRU;
}

static void zd_lru_remove(struct zdense *zd, uint32_t b)
{
	struct zd_block *m = &zd->blk[b];

	if (!(m->flags & ZB_ON_LRU))
		return;
	zd_list_del(zd, &zd->lru[!!(m->flags & ZB_PERS)], b, 0);
	m->flags &= (uint8_t)~ZB_ON_LRU;
}

static void zd_part_add(struct zdense *zd, uint32_t b)
{
	struct zd_block *m = &zd->blk[b];

	zd_list_add_tail(zd, &zd->part[!!(m->flags & ZB_PERS)][m->cls], b, 1);
	m->flags |= ZB_ON_PART;
}

static void zd_part_remove(struct zdense *zd, uint32_t b)
{
	struct zd_block *m = &zd->blk[b];

	if (!(m->flags & ZB_ON_PART))
		return;
	zd_list_del(zd, &zd->part[!!(m->flags & ZB_PERS)][m->cls], b, 1);
	m->flags &= (uint8_t)~ZB_ON_PART;
}

/* ---- blocks (caller holds the lock) ------------------------------------ */

static uint32_t zd_free_pop(struct zdense *zd, unsigned t)
{
	uint32_t b = zd->free_units[t];

	if (b != ZD_NIL)
		zd->free_units[t] = zd->blk[b].lru[ZD_NEXT];
	return b;
}

/*
 * Give len bytes at p back to the kernel. Under the daemon's mlockall the
 * pages are locked and MADV_DONTNEED fails (EINVAL): unlock the range, drop
 * it, and lock it again on fault (MLOCK_ONFAULT: nothing is faulted in now,
 * and what the unit takes later is locked as it comes, as MCL_ONFAULT would).
 */
static void zd_give_back(const struct zdense *zd, unsigned char *p, size_t len)
{
	/* a shared mapping's pages stay in the file under MADV_DONTNEED */
	int advice = zd->shared ? MADV_REMOVE : MADV_DONTNEED;

	if (madvise(p, len, advice) == 0 || errno != EINVAL)
		return;
	if (munlock(p, len))
		return;
	(void)madvise(p, len, advice);
	(void)mlock2(p, len, MLOCK_ONFAULT);
}

/*
 * A unit for a block of k frames: first one with exactly k frames faulted in,
 * then one with more (the excess given back to the kernel), then a fresh one,
 * then one with fewer. @return it, or ZD_NIL past the budget.
 */
static uint32_t zd_block_get(struct zdense *zd, bool pers, unsigned cls)
{
	unsigned k = zd_classes[cls].frames, t;
	struct zd_block *m;
	uint32_t b = ZD_NIL;

	if (zd->frames_used + k > zd->limit)
		return ZD_NIL;
	b = zd_free_pop(zd, k);
	for (t = k + 1; b == ZD_NIL && t <= ZDENSE_UNIT_FRAMES; t++) {
		b = zd_free_pop(zd, t);
		if (b != ZD_NIL) {
			zd_give_back(zd, zd_block_base(zd, b) + (size_t)k * ZDENSE_FRAME_SIZE,
				     (size_t)(t - k) * ZDENSE_FRAME_SIZE);
			zd->blk[b].touched = (uint8_t)k;
			zd->frames_touched -= t - k;
		}
	}
	if (b == ZD_NIL && zd->top < zd->max_units) {
		b = zd->top++;
		zd->blk[b].touched = 0;
	}
	for (t = k; b == ZD_NIL && t-- > 1;)
		b = zd_free_pop(zd, t);
	if (b == ZD_NIL)
		return ZD_NIL;
	m = &zd->blk[b];
	if (m->touched < k) {
		zd->frames_touched += k - m->touched;
		m->touched = (uint8_t)k;
	}
	m->lru[ZD_PREV] = m->lru[ZD_NEXT] = ZD_NIL;
	m->part[ZD_PREV] = m->part[ZD_NEXT] = ZD_NIL;
	m->cls = (uint16_t)cls;
	m->nlive = m->ndead = m->ninit = 0;
	m->free_head = ZD_SLOT_NIL;
	ZD_ORDER(); /* a free block's flags are 0: in use only once it is whole */
	m->flags = ZB_USED | (pers ? ZB_PERS : 0);
	zd->frames_used += k;
	zd->frames_kind[pers] += k;
	return b;
}

/* Return a block, off its lists, to the free units. */
static void zd_block_put(struct zdense *zd, uint32_t b)
{
	struct zd_block *m = &zd->blk[b];
	unsigned k = zd_classes[m->cls].frames;

	zd->frames_used -= k;
	zd->frames_kind[!!(m->flags & ZB_PERS)] -= k;
	m->flags = 0;
	m->lru[ZD_NEXT] = zd->free_units[m->touched];
	zd->free_units[m->touched] = b;
}

/* ---- create / destroy --------------------------------------------------- */

/* mem_fd and blk_fd: files to map (zdense_create_shared), or -1 for anonymous memory. */
static struct zdense *zd_create(uint32_t max_frames, int mem_fd, int blk_fd)
{
	int flags = mem_fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED;
	struct zdense *zd;
	size_t mem_len, blk_len;
	unsigned i, k;
	int err;

	if (max_frames == 0 || max_frames > ZDENSE_UNITS_LIMIT) {
		errno = EINVAL;
		return NULL;
	}
	pthread_once(&zd_once, zd_classes_init);
	zd = calloc(1, sizeof(*zd));
	if (!zd)
		return NULL;
	zd->max_frames = max_frames;
	zd->limit = max_frames;
	zd->max_units = max_frames;
	mem_len = (size_t)zd->max_units * ZD_UNIT_BYTES;
	blk_len = (size_t)zd->max_units * sizeof(struct zd_block);
	zd->part[0] = calloc(2 * (size_t)zd_nclasses, sizeof(struct zd_list));
	if (!zd->part[0]) {
		err = errno;
		goto free_zd;
	}
	zd->part[1] = zd->part[0] + zd_nclasses;
	zd->shared = mem_fd >= 0;
	/* a shared tier starts empty: whatever the files held is cut away */
	if (zd->shared && (ftruncate(mem_fd, 0) || ftruncate(mem_fd, (off_t)mem_len) ||
			   ftruncate(blk_fd, 0) || ftruncate(blk_fd, (off_t)blk_len))) {
		err = errno;
		goto free_part;
	}
	zd->mem = mmap(NULL, mem_len, PROT_READ | PROT_WRITE, flags | MAP_NORESERVE, mem_fd, 0);
	if (zd->mem == MAP_FAILED) {
		err = errno;
		goto free_part;
	}
	zd->blk = mmap(NULL, blk_len, PROT_READ | PROT_WRITE, flags | MAP_NORESERVE, blk_fd, 0);
	if (zd->blk == MAP_FAILED) {
		err = errno;
		goto unmap_mem;
	}
	err = pthread_mutex_init(&zd->lock, NULL);
	if (err)
		goto unmap_blk;
	for (i = 0; i <= ZDENSE_UNIT_FRAMES; i++)
		zd->free_units[i] = ZD_NIL;
	for (k = 0; k < 2; k++) {
		zd->lru[k] = (struct zd_list){ZD_NIL, ZD_NIL};
		for (i = 0; i < zd_nclasses; i++)
			zd->part[k][i] = (struct zd_list){ZD_NIL, ZD_NIL};
	}
	return zd;

unmap_blk:
	munmap(zd->blk, blk_len);
unmap_mem:
	munmap(zd->mem, mem_len);
free_part:
	free(zd->part[0]);
free_zd:
	free(zd);
	errno = err;
	return NULL;
}

struct zdense *zdense_create(uint32_t max_frames)
{
	return zd_create(max_frames, -1, -1);
}

struct zdense *zdense_create_shared(uint32_t max_frames, int mem_fd, int blk_fd)
{
	if (mem_fd < 0 || blk_fd < 0) {
		errno = EBADF;
		return NULL;
	}
	return zd_create(max_frames, mem_fd, blk_fd);
}

int zdense_file_sizes(uint32_t max_frames, uint64_t *mem_len, uint64_t *blk_len)
{
	if (max_frames == 0 || max_frames > ZDENSE_UNITS_LIMIT)
		return -EINVAL;
	*mem_len = (uint64_t)max_frames * ZD_UNIT_BYTES;
	*blk_len = (uint64_t)max_frames * sizeof(struct zd_block);
	return 0;
}

void zdense_destroy(struct zdense *zd)
{
	if (!zd)
		return;
	pthread_mutex_destroy(&zd->lock);
	munmap(zd->blk, (size_t)zd->max_units * sizeof(struct zd_block));
	munmap(zd->mem, (size_t)zd->max_units * ZD_UNIT_BYTES);
	free(zd->part[0]);
	free(zd);
}

/* ---- store / data / release --------------------------------------------- */

#define ZD_HANDLE(b, slot) (((uint64_t)(b) << 7) | (uint64_t)(slot))
#define ZD_HANDLE_SLOT(h)  ((unsigned)(h)&127u)

/* @return the block of a handle, or ZD_NIL when it names none (past 31 bits). */
static uint32_t zd_handle_block(uint64_t h)
{
	return (h >> 7) >= ZDENSE_UNITS_LIMIT ? ZD_NIL : (uint32_t)(h >> 7);
}

static bool zd_is_huge(const struct zdense *zd, uint32_t b)
{
	return zd->blk[b].cls == zd_huge;
}

/* A raw page in a frame of its own; the back-reference in the block's part links. */
static int zd_store_huge(struct zdense *zd, bool pers, const void *data, struct zbud_ref ref,
			 uint64_t *handle)
{
	struct zd_block *m;
	uint32_t b;

	pthread_mutex_lock(&zd->lock);
	b = zd_block_get(zd, pers, zd_huge);
	if (b == ZD_NIL) {
		pthread_mutex_unlock(&zd->lock);
		return -ENOSPC;
	}
	m = &zd->blk[b];
	m->part[0] = ref.objno;
	m->part[1] = ref.index;
	m->ninit = 1;
	memcpy(zd_block_base(zd, b), data, ZDENSE_HUGE_LEN);
	ZD_ORDER(); /* the page and its back-reference, then live */
	m->nlive = 1;
	zd_lru_touch(zd, b);
	zd->objects++;
	zd->bytes += ZDENSE_HUGE_LEN;
	pthread_mutex_unlock(&zd->lock);
	*handle = ZD_HANDLE(b, 0);
	return 0;
}

int zdense_store(struct zdense *zd, bool pers, const void *data, unsigned len, struct zbud_ref ref,
		 uint64_t *handle)
{
	struct zd_block *m;
	unsigned cls, slot;
	unsigned char *s;
	uint32_t b;

	if (len == ZDENSE_HUGE_LEN)
		return zd_store_huge(zd, pers, data, ref, handle);
	if (len == 0 || len > ZDENSE_MAX_LEN)
		return -EINVAL;
	cls = zd_class_by_size[zd_size_index(len)];
	pthread_mutex_lock(&zd->lock);
	b = zd->part[pers][cls].head;
	if (b == ZD_NIL) {
		b = zd_block_get(zd, pers, cls);
		if (b == ZD_NIL) {
			pthread_mutex_unlock(&zd->lock);
			return -ENOSPC;
		}
		zd_part_add(zd, b);
	}
	m = &zd->blk[b];
	if (m->free_head != ZD_SLOT_NIL) {
		slot = m->free_head; /* its length is 0 (released) */
		m->free_head = zd_slot(zd, b, slot)[2];
	} else {
		/* a reused block's memory may hold an old header here */
		slot = m->ninit;
		zd_hdr_set(zd_slot(zd, b, slot), 0);
		ZD_ORDER();
		m->ninit++;
	}
	m->nlive++;
	if (m->nlive == zd_classes[cls].slots)
		zd_part_remove(zd, b);
	zd_lru_touch(zd, b);
	zd->objects++;
	zd->bytes += len;
	s = zd_slot(zd, b, slot);
	memcpy(s + 2, &ref.objno, 4);
	memcpy(s + 6, &ref.index, 4);
	/* under the lock: a zombify may read the block as soon as it is dropped */
	memcpy(s + ZDENSE_HDR, data, len);
	ZD_ORDER(); /* the length last: it is what makes the slot live */
	zd_hdr_set(s, len);
	pthread_mutex_unlock(&zd->lock);
	*handle = ZD_HANDLE(b, slot);
	return 0;
}

const void *zdense_data(const struct zdense *zd, uint64_t handle, unsigned *len)
{
	uint32_t b = zd_handle_block(handle);
	const unsigned char *s;
	unsigned l;

	if (b >= zd->max_units || ZD_HANDLE_SLOT(handle) >= zd_classes[zd->blk[b].cls].slots) {
		if (len)
			*len = 0;
		return NULL;
	}
	if (zd_is_huge(zd, b)) {
		l = zd->blk[b].nlive || zd->blk[b].ndead ? ZDENSE_HUGE_LEN : 0;
		if (len)
			*len = l;
		return l ? zd_block_base(zd, b) : NULL;
	}
	s = zd_slot(zd, b, ZD_HANDLE_SLOT(handle));
	l = zd_hdr_len(s) & ZS_LEN_MASK;
	if (len)
		*len = l;
	return l ? s + ZDENSE_HDR : NULL;
}

void zdense_release(struct zdense *zd, uint64_t handle)
{
	uint32_t b = zd_handle_block(handle);
	unsigned slot = ZD_HANDLE_SLOT(handle), v;
	struct zd_block *m;
	unsigned char *s;

	pthread_mutex_lock(&zd->lock);
	if (b >= zd->top || !(zd->blk[b].flags & ZB_USED) || slot >= zd->blk[b].ninit)
		goto bad;
	m = &zd->blk[b];
	if (zd_is_huge(zd, b)) {
		if (!m->nlive)
			goto bad;
		m->nlive = 0;
		zd->objects--;
		zd->bytes -= ZDENSE_HUGE_LEN;
		if (m->flags & ZB_ZOMBIE) {
			m->ndead = 1; /* bytes kept for the zombie's holder */
			goto unlock;
		}
		zd_lru_remove(zd, b);
		zd_block_put(zd, b);
		goto unlock;
	}
	s = zd_slot(zd, b, slot);
	v = zd_hdr_len(s);
	if (!(v & ZS_LEN_MASK) || (v & ZS_DEAD))
		goto bad;
	m->nlive--;
	zd->objects--;
	zd->bytes -= v & ZS_LEN_MASK;
	if (m->flags & ZB_ZOMBIE) {
		zd_hdr_set(s, v | ZS_DEAD); /* bytes kept for the zombie's holder */
		m->ndead++;
		goto unlock;
	}
	zd_hdr_set(s, 0);
	ZD_ORDER(); /* dead before its back-reference becomes a link */
	s[2] = m->free_head;
	m->free_head = (uint8_t)slot;
	if (m->nlive == 0) {
		zd_part_remove(zd, b);
		zd_lru_remove(zd, b);
		zd_block_put(zd, b);
	} else if (!(m->flags & ZB_ON_PART)) {
		zd_part_add(zd, b);
	}
	goto unlock;
bad:
	zd->bad_handles++;
unlock:
	pthread_mutex_unlock(&zd->lock);
}

/* ---- zombies ------------------------------------------------------------ */

/* Make block b (in use, on its LRU, not a zombie) a zombie. Caller holds the lock. */
static void zd_zombify_locked(struct zdense *zd, uint32_t b, struct zalloc_victim *v)
{
	struct zd_block *m = &zd->blk[b];
	unsigned slot;

	zd_lru_remove(zd, b);
	zd_part_remove(zd, b);
	m->flags |= ZB_ZOMBIE;
	zd->zombies++;
	v->frame = b;
	v->frames = zd_classes[m->cls].frames;
	v->n = 0;
	if (zd_is_huge(zd, b) && m->nlive) {
		v->handle[0] = ZD_HANDLE(b, 0);
		v->ref[0] = (struct zbud_ref){m->part[0], m->part[1]};
		v->len[0] = ZDENSE_HUGE_LEN;
		v->data[0] = zd_block_base(zd, b);
		v->n = 1;
	}
	for (slot = 0; !zd_is_huge(zd, b) && slot < m->ninit; slot++) {
		const unsigned char *s = zd_slot(zd, b, slot);
		unsigned l = zd_hdr_len(s);

		if (!l || (l & ZS_DEAD))
			continue;
		v->handle[v->n] = ZD_HANDLE(b, slot);
		memcpy(&v->ref[v->n].objno, s + 2, 4);
		memcpy(&v->ref[v->n].index, s + 6, 4);
		v->len[v->n] = l & ZS_LEN_MASK;
		v->data[v->n] = s + ZDENSE_HDR;
		v->n++;
	}
}

int zdense_zombify_lru(struct zdense *zd, bool pers, struct zalloc_victim *v)
{
	uint32_t b;

	pthread_mutex_lock(&zd->lock);
	b = zd->lru[pers].head;
	if (b == ZD_NIL) {
		pthread_mutex_unlock(&zd->lock);
		return -ENOENT;
	}
	zd_zombify_locked(zd, b, v);
	pthread_mutex_unlock(&zd->lock);
	return 0;
}

/* Block b is in use, of kind pers, on its LRU and not a zombie. Caller holds the lock. */
static bool zd_on_lru(const struct zdense *zd, uint32_t b, bool pers)
{
	const struct zd_block *m;

	if (b >= zd->top)
		return false;
	m = &zd->blk[b];
	return (m->flags & (ZB_USED | ZB_ZOMBIE | ZB_ON_LRU)) == (ZB_USED | ZB_ON_LRU) &&
	       !!(m->flags & ZB_PERS) == pers;
}

unsigned zdense_lru_peek(struct zdense *zd, bool pers, unsigned k, uint32_t *blocks,
			 struct zbud_ref *refs)
{
	unsigned n = 0, slot;
	uint32_t b;

	pthread_mutex_lock(&zd->lock);
	for (b = zd->lru[pers].head; b != ZD_NIL && n < k; b = zd->blk[b].lru[ZD_NEXT]) {
		for (slot = 0; slot < zd->blk[b].ninit; slot++) {
			const unsigned char *s = zd_slot(zd, b, slot);
			unsigned l = zd_hdr_len(s);

			if (!l || (l & ZS_DEAD))
				continue;
			blocks[n] = b;
			memcpy(&refs[n].objno, s + 2, 4);
			memcpy(&refs[n].index, s + 6, 4);
			n++;
			break;
		}
	}
	pthread_mutex_unlock(&zd->lock);
	return n;
}

int zdense_zombify_block(struct zdense *zd, bool pers, uint32_t b, struct zalloc_victim *v)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&zd->lock);
	if (zd_on_lru(zd, b, pers)) {
		zd_zombify_locked(zd, b, v);
		rc = 0;
	}
	pthread_mutex_unlock(&zd->lock);
	return rc;
}

int zdense_lru_requeue(struct zdense *zd, bool pers, uint32_t b)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&zd->lock);
	if (zd_on_lru(zd, b, pers)) {
		zd_lru_touch(zd, b);
		rc = 0;
	}
	pthread_mutex_unlock(&zd->lock);
	return rc;
}

void zdense_zombie_done(struct zdense *zd, uint32_t b)
{
	struct zd_block *m;
	unsigned slot;

	pthread_mutex_lock(&zd->lock);
	if (b >= zd->top || !(zd->blk[b].flags & ZB_ZOMBIE)) {
		zd->bad_handles++;
		goto unlock;
	}
	m = &zd->blk[b];
	if (zd_is_huge(zd, b)) {
		m->ndead = 0;
		m->flags &= (uint8_t)~ZB_ZOMBIE;
		zd->zombies--;
		if (m->nlive == 0)
			zd_block_put(zd, b);
		else
			zd_lru_touch(zd, b);
		goto unlock;
	}
	for (slot = 0; m->ndead && slot < m->ninit; slot++) {
		unsigned char *s = zd_slot(zd, b, slot);

		if (!(zd_hdr_len(s) & ZS_DEAD))
			continue;
		zd_hdr_set(s, 0);
		ZD_ORDER();
		s[2] = m->free_head;
		m->free_head = (uint8_t)slot;
		m->ndead--;
	}
	m->flags &= (uint8_t)~ZB_ZOMBIE;
	zd->zombies--;
	if (m->nlive == 0) {
		zd_block_put(zd, b);
		goto unlock;
	}
	if (m->nlive < zd_classes[m->cls].slots)
		zd_part_add(zd, b);
	zd_lru_touch(zd, b);
unlock:
	pthread_mutex_unlock(&zd->lock);
}

/* ---- stats -------------------------------------------------------------- */

void zdense_get_stats(struct zdense *zd, struct zalloc_stats *s)
{
	pthread_mutex_lock(&zd->lock);
	s->frames = zd->frames_used;
	s->frames_eph = zd->frames_kind[0];
	s->frames_pers = zd->frames_kind[1];
	s->frames_touched = zd->frames_touched;
	s->zombies = zd->zombies;
	s->objects = zd->objects;
	s->bytes = zd->bytes;
	s->max_frames = zd->limit;
	s->meta_bytes = (uint64_t)zd->top * sizeof(struct zd_block) + sizeof(*zd) +
			2 * (uint64_t)zd_nclasses * sizeof(struct zd_list);
	s->bad_handles = zd->bad_handles;
	pthread_mutex_unlock(&zd->lock);
}

void zdense_set_limit(struct zdense *zd, uint32_t frames)
{
	if (frames < ZDENSE_UNIT_FRAMES)
		frames = ZDENSE_UNIT_FRAMES; /* room for the largest block */
	pthread_mutex_lock(&zd->lock);
	zd->limit = frames < zd->max_frames ? frames : zd->max_frames;
	pthread_mutex_unlock(&zd->lock);
}

uint64_t zdense_trim(struct zdense *zd, uint64_t keep, uint64_t max)
{
	uint64_t n = 0;
	unsigned t;
	uint32_t b;

	pthread_mutex_lock(&zd->lock);
	/* the units with most frames faulted in first: fewest calls for the most memory */
	for (t = ZDENSE_UNIT_FRAMES; t >= 1 && zd->frames_touched > keep && n < max; t--)
		while (zd->frames_touched > keep && n < max && (b = zd_free_pop(zd, t)) != ZD_NIL) {
			zd_give_back(zd, zd_block_base(zd, b), (size_t)t * ZDENSE_FRAME_SIZE);
			zd->blk[b].touched = 0;
			zd->frames_touched -= t;
			zd->blk[b].lru[ZD_NEXT] = zd->free_units[0];
			zd->free_units[0] = b;
			n += t;
		}
	pthread_mutex_unlock(&zd->lock);
	return n;
}

/* ---- after a crash: the live pages of a dead process's shared tier ------ */

uint64_t zdense_layout_id(void)
{
	/* FNV-1a over everything that places a byte: a binary that would read
	 * the files differently has another id */
	uint64_t h = 0xcbf29ce484222325ull;
	unsigned i;

#define ZD_MIX(v)                                                                                  \
	do {                                                                                       \
		h ^= (uint64_t)(v);                                                                \
		h *= 0x100000001b3ull;                                                             \
	} while (0)
	pthread_once(&zd_once, zd_classes_init);
	ZD_MIX(1); /* this layout's version */
	ZD_MIX(sizeof(struct zd_block));
	ZD_MIX(offsetof(struct zd_block, cls));
	ZD_MIX(offsetof(struct zd_block, flags));
	ZD_MIX(offsetof(struct zd_block, ninit));
	ZD_MIX(ZD_UNIT_BYTES);
	ZD_MIX(ZDENSE_HDR);
	ZD_MIX(ZB_USED | ZB_PERS << 8 | ZB_ZOMBIE << 16 | (uint64_t)ZS_DEAD << 24);
	ZD_MIX(zd_nclasses);
	for (i = 0; i <= zd_nclasses; i++)
		ZD_MIX((uint64_t)zd_classes[i].slot | (uint64_t)zd_classes[i].frames << 16 |
		       (uint64_t)zd_classes[i].slots << 24);
#undef ZD_MIX
	return h;
}

int zdense_scan(const void *mem, uint64_t mem_len, const void *blk, uint64_t blk_len,
		int (*fn)(void *arg, const struct zdense_found *f), void *arg,
		struct zdense_scan_stats *st)
{
	const struct zd_block *bk = blk;
	uint64_t units = blk_len / sizeof(struct zd_block), b;
	struct zdense_scan_stats z = {0};
	int rc = 0;

	pthread_once(&zd_once, zd_classes_init);
	if (units > ZDENSE_UNITS_LIMIT || mem_len / ZD_UNIT_BYTES < units)
		return -EINVAL;
	for (b = 0; b < units && rc == 0; b++) {
		const struct zd_block *m = &bk[b];
		const unsigned char *base = (const unsigned char *)mem + b * ZD_UNIT_BYTES;
		struct zdense_found f;
		unsigned slot;

		if (!(m->flags & ZB_USED))
			continue;
		z.blocks++;
		f.pers = m->flags & ZB_PERS;
		f.zombie = m->flags & ZB_ZOMBIE;
		if (m->cls == zd_huge) {
			/* a raw page: live while nlive is 1 (ndead 1: a zombie's dead page) */
			if (m->nlive != 1 || m->ninit != 1) {
				z.dead += m->nlive == 0 && m->ndead == 1;
				z.bad_blocks += m->nlive > 1 || m->ninit > 1;
				continue;
			}
			f.ref = (struct zbud_ref){m->part[0], m->part[1]};
			f.data = base;
			f.len = ZDENSE_HUGE_LEN;
			z.pages++;
			rc = fn(arg, &f);
			continue;
		}
		if (m->cls >= zd_nclasses || m->ninit > zd_classes[m->cls].slots) {
			z.bad_blocks++;
			continue;
		}
		for (slot = 0; slot < m->ninit && rc == 0; slot++) {
			const unsigned char *s = base + (size_t)slot * zd_classes[m->cls].slot;
			unsigned v = zd_hdr_len(s), len = v & ZS_LEN_MASK;

			if (!len)
				continue;
			if (v & ZS_DEAD) {
				z.dead++;
				continue;
			}
			if ((v & ~(unsigned)ZS_LEN_MASK) || len > ZDENSE_MAX_LEN ||
			    len + ZDENSE_HDR > zd_classes[m->cls].slot) {
				z.bad_slots++;
				continue;
			}
			memcpy(&f.ref.objno, s + 2, 4);
			memcpy(&f.ref.index, s + 6, 4);
			f.data = s + ZDENSE_HDR;
			f.len = len;
			z.pages++;
			rc = fn(arg, &f);
		}
	}
	if (st)
		*st = z;
	return rc;
}
