/*
 * crashtab.h - the crash table: what tmem keeps in memory that outlives the
 * process (a file on tmpfs the node maps), so that a process started after a
 * kill -9 can name the owner of each slot the old tier left ({objno, index}
 * -> pool id, oid) and tell which persistent pools had pages outside the tier.
 *
 * No pointers, fixed-width fields, host byte order: it is read back on the
 * same machine only. The reader trusts nothing in it: the header is checked
 * against the mapped length, and an object entry counts only when its check
 * word matches (pool, oid, objno), which a torn or stale entry does not.
 */
#ifndef RAMSTER_CRASHTAB_H
#define RAMSTER_CRASHTAB_H

#include <stddef.h>
#include <stdint.h>

#include "tmem/tmem.h"

#define TMEM_CRASHTAB_MAGIC   0x42544352u /* "RCTB" */
#define TMEM_CRASHTAB_VERSION 1u
/* The object table never numbers more objects than this (tmem.c). */
#define TMEM_CRASHTAB_OBJS_MAX (UINT32_MAX >> 1)

/*
 * One object number. Written under tmem's object-table lock: on allocation
 * pool and oid first, check last; on free check first (zeroed), then the
 * rest. A process dying in between leaves an entry that does not check out.
 */
struct tmem_crashobj {
	uint32_t pool;	/* pool id + 1; 0: free */
	uint32_t check; /* hash of (pool, oid, objno) and the magic, never 0 when live */
	struct tmem_oid oid;
};

struct tmem_crashtab {
	uint32_t magic;	   /* TMEM_CRASHTAB_MAGIC, written last by tmem_crashtab_init */
	uint32_t version;  /* TMEM_CRASHTAB_VERSION */
	uint32_t objs_max; /* entries in objs[]; higher object numbers are not recorded */
	uint32_t pools;	   /* TMEM_MAX_POOLS, the length of nonlocal[] */
	/*
	 * Per pool id: pages of that persistent pool whose descriptor has no
	 * slot in the local tier (zero pages, remote pages; !ops->in_tier).
	 * Non-zero at a crash: the pool cannot come back whole. Relaxed
	 * atomic adds; 0 for ephemeral pools and free ids.
	 */
	uint64_t nonlocal[TMEM_MAX_POOLS];
	/*
	 * Per pool id: 0, or the pool's flags with TMEM_CRASHTAB_POOL_LIVE,
	 * written before the pool can hold a page and cleared when its destroy
	 * begins (a pool whose destroy a crash cut short is not brought back).
	 */
	uint32_t pool_flags[TMEM_MAX_POOLS];
	struct tmem_crashobj objs[]; /* by object number */
};

#define TMEM_CRASHTAB_POOL_LIVE 0x80000000u

_Static_assert(sizeof(struct tmem_crashobj) == 32, "crash table entry layout");
_Static_assert(offsetof(struct tmem_crashtab, objs) == 16 + 12 * TMEM_MAX_POOLS,
	       "crash table layout");

/* @return the bytes of a table of objs_max entries, or 0 when objs_max is too large. */
size_t tmem_crashtab_bytes(uint32_t objs_max);

/*
 * Write the header of a table of objs_max entries into len bytes of zeroed
 * memory (fresh tmpfs pages, calloc): only the header is written, so the
 * rest must already be zero. @return 0, or -EINVAL when len is too short.
 */
int tmem_crashtab_init(struct tmem_crashtab *ct, size_t len, uint32_t objs_max);

/*
 * Whether len mapped bytes hold a table this build can read: magic, version,
 * pool count, and objs_max entries within len. @return 0 or -EINVAL.
 */
int tmem_crashtab_valid(const struct tmem_crashtab *ct, size_t len);

/*
 * The object numbered objno in a table of len mapped bytes: @return 0 with
 * *pool (the pool id) and *oid set; -ERANGE when objno is past objs_max or
 * the entry past len; -ENOENT when the entry is free or does not check out.
 */
int tmem_crashtab_obj(const struct tmem_crashtab *ct, size_t len, uint32_t objno, uint32_t *pool,
		      struct tmem_oid *oid);

/*
 * Pool id in a table of len mapped bytes (checked with tmem_crashtab_valid):
 * @return 0 with *flags (TMEM_PERSISTENT, ...) and *nonlocal (NULL ok) set
 * when the pool was alive; -ENOENT when not; -ERANGE for a bad id.
 */
int tmem_crashtab_pool(const struct tmem_crashtab *ct, size_t len, uint32_t id, unsigned *flags,
		       uint64_t *nonlocal);

/*
 * The writer's side (tmem.c, under the object-table lock; objno below
 * objs_max): record objno as pool's object oid, or free it.
 */
void tmem_crashtab_obj_set(struct tmem_crashtab *ct, uint32_t objno, uint32_t pool,
			   const struct tmem_oid *oid);
void tmem_crashtab_obj_clear(struct tmem_crashtab *ct, uint32_t objno);

#endif /* RAMSTER_CRASHTAB_H */
