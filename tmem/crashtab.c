/*
 * crashtab.c - the crash table's format (crashtab.h): its size, its header,
 * and its object entries, written by tmem (in order, so a process killed
 * between two stores leaves an entry that does not check out) and read back
 * by a later process, which trusts nothing it did not check.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "tmem/crashtab.h"

static uint64_t mix(uint64_t h)
{
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 31;
	return h;
}

/* pool is the stored value (id + 1); the objno in it makes an entry copied elsewhere fail. */
static uint32_t crash_check(uint32_t pool, const struct tmem_oid *oid, uint32_t objno)
{
	uint64_t h = mix(((uint64_t)TMEM_CRASHTAB_MAGIC << 32 | TMEM_CRASHTAB_VERSION) ^
			 ((uint64_t)pool << 32 | objno));
	uint32_t c;

	h = mix(h ^ oid->w[0]);
	h = mix(h ^ oid->w[1]);
	h = mix(h ^ oid->w[2]);
	c = (uint32_t)(h >> 32);
	return c ? c : 1; /* 0 is a free entry's */
}

size_t tmem_crashtab_bytes(uint32_t objs_max)
{
	uint64_t n = offsetof(struct tmem_crashtab, objs) +
		     (uint64_t)objs_max * sizeof(struct tmem_crashobj);

	if (objs_max > TMEM_CRASHTAB_OBJS_MAX || n > SIZE_MAX)
		return 0;
	return (size_t)n;
}

int tmem_crashtab_init(struct tmem_crashtab *ct, size_t len, uint32_t objs_max)
{
	size_t need = tmem_crashtab_bytes(objs_max);

	if (!ct || !need || len < need)
		return -EINVAL;
	ct->version = TMEM_CRASHTAB_VERSION;
	ct->objs_max = objs_max;
	ct->pools = TMEM_MAX_POOLS;
	/* the magic last: a header cut short by a crash is refused */
	__atomic_store_n(&ct->magic, TMEM_CRASHTAB_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

int tmem_crashtab_valid(const struct tmem_crashtab *ct, size_t len)
{
	size_t need;

	if (!ct || len < offsetof(struct tmem_crashtab, objs))
		return -EINVAL;
	if (ct->magic != TMEM_CRASHTAB_MAGIC || ct->version != TMEM_CRASHTAB_VERSION ||
	    ct->pools != TMEM_MAX_POOLS)
		return -EINVAL;
	need = tmem_crashtab_bytes(ct->objs_max);
	return need && need <= len ? 0 : -EINVAL;
}

int tmem_crashtab_obj(const struct tmem_crashtab *ct, size_t len, uint32_t objno, uint32_t *pool,
		      struct tmem_oid *oid)
{
	const struct tmem_crashobj *e;
	uint32_t check, p;
	struct tmem_oid o;

	/* objno < objs_max <= TMEM_CRASHTAB_OBJS_MAX: the sum below cannot overflow */
	if (len < offsetof(struct tmem_crashtab, objs) || objno >= ct->objs_max ||
	    objno >= TMEM_CRASHTAB_OBJS_MAX || tmem_crashtab_bytes(objno + 1) > len)
		return -ERANGE;
	e = &ct->objs[objno];
	check = __atomic_load_n(&e->check, __ATOMIC_ACQUIRE);
	p = e->pool;
	o = e->oid;
	if (!check || !p || p > TMEM_MAX_POOLS || check != crash_check(p, &o, objno))
		return -ENOENT;
	*pool = p - 1;
	*oid = o;
	return 0;
}

int tmem_crashtab_pool(const struct tmem_crashtab *ct, size_t len, uint32_t id, unsigned *flags,
		       uint64_t *nonlocal)
{
	uint32_t f;

	if (id >= TMEM_MAX_POOLS || len < offsetof(struct tmem_crashtab, objs))
		return -ERANGE;
	f = ct->pool_flags[id];
	if (!(f & TMEM_CRASHTAB_POOL_LIVE))
		return -ENOENT;
	*flags = f & ~TMEM_CRASHTAB_POOL_LIVE;
	if (nonlocal)
		*nonlocal = ct->nonlocal[id];
	return 0;
}

void tmem_crashtab_obj_set(struct tmem_crashtab *ct, uint32_t objno, uint32_t pool,
			   const struct tmem_oid *oid)
{
	struct tmem_crashobj *e = &ct->objs[objno];

	e->pool = pool + 1;
	e->oid = *oid;
	/* the check last (the release keeps the compiler from moving it up) */
	__atomic_store_n(&e->check, crash_check(pool + 1, oid, objno), __ATOMIC_RELEASE);
}

void tmem_crashtab_obj_clear(struct tmem_crashtab *ct, uint32_t objno)
{
	struct tmem_crashobj *e = &ct->objs[objno];

	__atomic_store_n(&e->check, 0, __ATOMIC_RELAXED);
	/* the check first: no store below may be moved above it */
	atomic_signal_fence(memory_order_seq_cst);
	e->pool = 0;
	memset(&e->oid, 0, sizeof(e->oid));
}
