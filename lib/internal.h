/*
 * internal.h - what the files of lib/ share and do not export (lib/ramster.map
 * exports only ramster_*): a second connection for a region space's fault
 * thread, and the region space (lib/region*.c, whose files share
 * lib/region_int.h) that both the public region API and the ramster-run
 * preload shim (tools/ramster-preload.c) are built on.
 */
#ifndef RAMSTER_LIB_INTERNAL_H
#define RAMSTER_LIB_INTERNAL_H

#include <stddef.h>

#include "ramster.h"

/*
 * A new connection to the node r is connected to, redialling as r does
 * (ramster_set_reconnect_ms on r before it holds for the new one too).
 * @return it, or NULL with errno.
 */
ramster *lib_ramster_reopen(const ramster *r);

/*
 * A region space: one userfaultfd, one fault-handling thread, one connection
 * of its own (conn, owned) and one private persistent pool, one resident
 * budget shared by every region of the space. All calls are thread-safe
 * (one mutex, the space's); none may be called by the fault thread itself.
 */
struct rg_space;

/*
 * Called first thing by every fault thread (NULL: nothing): the preload shim
 * marks the thread as its own, so the thread's madvise and malloc calls pass
 * straight through.
 */
extern void (*rg_thread_hook)(void);

/* @return a new space on conn (taken over, closed by rg_space_free), or NULL with errno. */
struct rg_space *rg_space_new(ramster *conn, size_t resident_bytes);

/* Unmap every region (munmap), destroy the pool, stop the thread, close conn. NULL ok. */
void rg_space_free(struct rg_space *s);

/*
 * Back [addr, addr+len) (an anonymous private mapping the caller made,
 * page-aligned, no page touched yet) with the space. @return 0 or -errno
 * (then the mapping is left as plain memory).
 */
int rg_map(struct rg_space *s, void *addr, size_t len);

/*
 * Forget the region pages in [addr, addr+len) (any part of any regions, or
 * none); with do_munmap, munmap(addr, len) too, under the space's lock so no
 * fault can be served in between. @return 0 or -errno of munmap.
 */
int rg_unmap(struct rg_space *s, void *addr, size_t len, int do_munmap);

/* @return 1 if any page of [addr, addr+len) belongs to a region, else 0. */
int rg_overlaps(struct rg_space *s, const void *addr, size_t len);

/*
 * madvise(addr, len, MADV_DONTNEED) over region pages: they read as zeros
 * afterwards, as the kernel's own DONTNEED would make them. @return 0 or -errno.
 */
int rg_discard(struct rg_space *s, void *addr, size_t len);

/*
 * Extend the region ending at addr+oldlen in place to addr+newlen (mremap
 * without MREMAP_MAYMOVE, done here). @return 0, or -errno (-ENOMEM: no room
 * in place; -ENOENT: no region ends there).
 */
int rg_grow(struct rg_space *s, void *addr, size_t oldlen, size_t newlen);

/* The pages of [addr, addr+len) may be unreadable (mprotect without PROT_READ): evict them through /proc/self/mem. */
void rg_noread(struct rg_space *s, const void *addr, size_t len);

/*
 * fork(): prepare brings every page that lives only in the pool back into
 * memory and holds the space's lock (the child's copy of the address space has
 * no userfaultfd: every page must be in it); parent drops those copies again
 * and unlocks; child forgets the space (closes its fds, no thread).
 */
void rg_fork_prepare(struct rg_space *s);
void rg_fork_parent(struct rg_space *s);
void rg_fork_child(struct rg_space *s);

/* @return the space's counters (struct ramster_region_stats, ramster.h). */
void rg_stats(struct rg_space *s, struct ramster_region_stats *st);

#endif
