/*
 * ramster-preload.c - the LD_PRELOAD shim of ramster-run (libramster-preload.so):
 * a program's large anonymous memory goes to far memory regions (lib/region*.c)
 * with one resident budget for the whole program (docs/far-memory.md).
 *
 * It interposes mmap/mmap64/munmap/mremap/mprotect/madvise (anonymous private
 * mappings of at least RAMSTER_RUN_MIN_MAP bytes become regions) and the
 * malloc family: glibc's malloc calls its own internal mmap, which no
 * LD_PRELOAD can see, so allocations of at least the same size are served
 * here, as mappings of their own; smaller ones go to glibc (__libc_malloc).
 * A block of ours looks like a glibc mmapped chunk (16-byte header, IS_MMAPPED)
 * with a magic in its prev_size word, so free() tells it apart in two loads.
 *
 * Environment (set by ramster-run): RAMSTER_RUN_RESIDENT (bytes; unset: the
 * shim does nothing), RAMSTER_RUN_MIN_MAP, RAMSTER_SOCKET, RAMSTER_RUN_STATS
 * (a file to append this process's counters to at exit), RAMSTER_RUN_STRICT
 * (exit 127 when far memory cannot be set up instead of running without it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/internal.h"
#include "ramster.h"

#define PL_PAGE 4096ul
#define PL_MAGIC (0x5253ull << 48) /* "RS" in a prev_size word: a block of ours */
#define PL_OFF_MASK ((1ull << 48) - 1)
#define PL_MMAPPED 2ul		   /* glibc's IS_MMAPPED size bit */

#define PL_EXPORT __attribute__((visibility("default")))

void *__libc_malloc(size_t n);
void __libc_free(void *p);
void *__libc_calloc(size_t a, size_t b);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);
void *__libc_valloc(size_t n);
void *__libc_pvalloc(size_t n);

static struct rg_space *pl_space;
static size_t pl_min_map = 1ul << 20;
static __thread int pl_inside; /* this thread is in the shim: pass everything through */

/* ---- the kernel's calls, unintercepted ------------------------------------------ */

static void *pl_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static int pl_sys_munmap(void *addr, size_t len)
{
	return (int)syscall(SYS_munmap, addr, len);
}

/* The shim is on for this call: set up, not re-entered, not a fork child's. */
static struct rg_space *pl_on(void)
{
	return pl_inside ? NULL : pl_space;
}

/* ---- mappings -------------------------------------------------------------------- */

static int pl_wanted(size_t len, int flags, int fd)
{
	return len >= pl_min_map && fd == -1 && (flags & MAP_ANONYMOUS) &&
	       (flags & MAP_TYPE) == MAP_PRIVATE &&
	       !(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_HUGETLB | MAP_GROWSDOWN | MAP_STACK));
}

/* Map len bytes as a region (plain memory if the space refuses). */
static void *pl_map(struct rg_space *s, void *hint, size_t len, int prot, int flags)
{
	void *p;

	len = (len + PL_PAGE - 1) & ~(PL_PAGE - 1);
	/* populating would fault every page in before the region exists */
	p = pl_sys_mmap(hint, len, prot, flags & ~MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		return p;
	pl_inside = 1;
	(void)rg_map(s, p, len);
	pl_inside = 0;
	return p;
}

PL_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	struct rg_space *s = pl_on();
	void *p;

	if (s && pl_wanted(len, flags, fd))
		return pl_map(s, addr, len, prot, flags);
	if (s && (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) == MAP_FIXED && rg_overlaps(s, addr, len)) {
		/* a fixed mapping over region pages replaces them */
		pl_inside = 1;
		(void)rg_unmap(s, addr, len, 0);
		pl_inside = 0;
	}
	p = pl_sys_mmap(addr, len, prot, flags, fd, off);
	return p;
}

PL_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}

PL_EXPORT int munmap(void *addr, size_t len)
{
	struct rg_space *s = pl_on();
	int rc;

	if (!s || !rg_overlaps(s, addr, len))
		return pl_sys_munmap(addr, len);
	pl_inside = 1;
	rc = rg_unmap(s, addr, len, 1);
	pl_inside = 0;
	if (rc) {
		errno = -rc;
		return -1;
	}
	return 0;
}

PL_EXPORT int mprotect(void *addr, size_t len, int prot)
{
	struct rg_space *s = pl_on();

	if (s && !(prot & PROT_READ) && rg_overlaps(s, addr, len)) {
		pl_inside = 1;
		rg_noread(s, addr, len);
		pl_inside = 0;
	}
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

PL_EXPORT int madvise(void *addr, size_t len, int advice)
{
	struct rg_space *s = pl_on();
	int rc;

	if (!s || !rg_overlaps(s, addr, len))
		return (int)syscall(SYS_madvise, addr, len, advice);
	switch (advice) {
	case MADV_DONTNEED:
	case MADV_FREE:
		/* both may read zeros afterwards; regions make it so at once */
		pl_inside = 1;
		rc = rg_discard(s, addr, len);
		pl_inside = 0;
		if (rc) {
			errno = -rc;
			return -1;
		}
		return 0;
	case MADV_HUGEPAGE:
	case 25: /* MADV_COLLAPSE (Linux 6.1) */
		return 0; /* a region is served in 4 KiB pages */
	default:
		return (int)syscall(SYS_madvise, addr, len, advice);
	}
}

/* Move a region's bytes to a new mapping (the kernel cannot move a region). */
static void *pl_move(void *old, size_t oldlen, size_t newlen, int flags)
{
	void *p = mmap(NULL, newlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return p;
	memcpy(p, old, oldlen < newlen ? oldlen : newlen);
	if (!(flags & MREMAP_DONTUNMAP))
		(void)munmap(old, oldlen);
	return p;
}

PL_EXPORT void *mremap(void *old, size_t oldlen, size_t newlen, int flags, ...)
{
	struct rg_space *s = pl_on();
	void *naddr = NULL;
	va_list ap;
	int rc;

	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		naddr = va_arg(ap, void *);
		va_end(ap);
	}
	if (!s || !rg_overlaps(s, old, oldlen))
		return (void *)syscall(SYS_mremap, old, oldlen, newlen, flags, naddr);
	oldlen = (oldlen + PL_PAGE - 1) & ~(PL_PAGE - 1);
	newlen = (newlen + PL_PAGE - 1) & ~(PL_PAGE - 1);
	if (flags & MREMAP_FIXED) {
		errno = EINVAL; /* not served for regions (docs/far-memory.md) */
		return MAP_FAILED;
	}
	if (newlen <= oldlen && !(flags & MREMAP_DONTUNMAP)) {
		if (newlen < oldlen)
			(void)munmap((char *)old + newlen, oldlen - newlen);
		return old;
	}
	pl_inside = 1;
	rc = rg_grow(s, old, oldlen, newlen);
	pl_inside = 0;
	if (!rc)
		return old;
	if (!(flags & MREMAP_MAYMOVE)) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	return pl_move(old, oldlen, newlen, flags);
}

/* ---- the malloc family ------------------------------------------------------------- */

static size_t *pl_hdr(void *p)
{
	return (size_t *)p - 2;
}

static int pl_ours(void *p)
{
	size_t *h;

	if (!p || ((uintptr_t)p & (PL_PAGE - 1)))
		return 0;
	h = pl_hdr(p);
	return (h[1] & PL_MMAPPED) && (h[0] & ~PL_OFF_MASK) == PL_MAGIC;
}

static size_t pl_usable(void *p)
{
	size_t *h = pl_hdr(p);

	return (h[1] & ~(size_t)7) - (h[0] & PL_OFF_MASK);
}

/* A block of n bytes aligned to align (a power of two) in a region of its own. */
static void *pl_big(struct rg_space *s, size_t n, size_t align)
{
	size_t lead = align > PL_PAGE ? align : PL_PAGE, len;
	uintptr_t base, p;
	void *m;

	if (n > SIZE_MAX / 2 - lead) {
		errno = ENOMEM;
		return NULL;
	}
	len = (n + 2 * lead - PL_PAGE + PL_PAGE - 1) & ~(PL_PAGE - 1);
	m = pl_map(s, NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
	if (m == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	base = (uintptr_t)m;
	p = (base + 16 + lead - 1) & ~(uintptr_t)(lead - 1);
	/* outside the space's lock: this write faults the header's page in */
	pl_hdr((void *)p)[0] = PL_MAGIC | (p - base);
	pl_hdr((void *)p)[1] = len | PL_MMAPPED;
	return (void *)p;
}

static void pl_big_free(void *p)
{
	size_t *h = pl_hdr(p);
	size_t off = h[0] & PL_OFF_MASK, len = h[1] & ~(size_t)7;
	char *base = (char *)p - off;

	if (pl_space && !pl_inside) {
		pl_inside = 1;
		(void)rg_unmap(pl_space, base, len, 1);
		pl_inside = 0;
	} else {
		(void)pl_sys_munmap(base, len); /* a fork child's: plain memory now */
	}
}

PL_EXPORT void *malloc(size_t n)
{
	struct rg_space *s = pl_on();

	if (s && n >= pl_min_map)
		return pl_big(s, n, 16);
	return __libc_malloc(n);
}

PL_EXPORT void free(void *p)
{
	if (pl_ours(p))
		pl_big_free(p);
	else
		__libc_free(p);
}

PL_EXPORT void *calloc(size_t a, size_t b)
{
	struct rg_space *s = pl_on();
	size_t n;

	if (__builtin_mul_overflow(a, b, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	if (s && n >= pl_min_map)
		return pl_big(s, n, 16); /* a fresh region reads zeros: nothing to clear */
	return __libc_calloc(a, b);
}

static size_t pl_glibc_usable(void *p)
{
	static size_t (*real)(void *);

	if (!real)
		real = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
	return real ? real(p) : 0;
}

PL_EXPORT void *realloc(void *p, size_t n)
{
	struct rg_space *s = pl_on();
	size_t have;
	void *q;

	if (!p)
		return malloc(n);
	if (!pl_ours(p)) {
		if (!s || n < pl_min_map)
			return __libc_realloc(p, n);
		q = pl_big(s, n, 16);
		if (!q)
			return NULL;
		have = pl_glibc_usable(p);
		memcpy(q, p, have < n ? have : n);
		__libc_free(p);
		return q;
	}
	if (!n) {
		free(p);
		return NULL;
	}
	have = pl_usable(p);
	if (n <= have)
		return p;
	if (s) {
		size_t *h = pl_hdr(p), off = h[0] & PL_OFF_MASK, len = h[1] & ~(size_t)7;
		size_t nlen = (off + n + PL_PAGE - 1) & ~(PL_PAGE - 1);

		pl_inside = 1;
		if (rg_grow(s, (char *)p - off, len, nlen) == 0) {
			pl_inside = 0;
			h[1] = nlen | PL_MMAPPED;
			return p;
		}
		pl_inside = 0;
	}
	q = malloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, have);
	free(p);
	return q;
}

PL_EXPORT void *memalign(size_t align, size_t n)
{
	struct rg_space *s = pl_on();

	if (s && n >= pl_min_map && align && !(align & (align - 1)))
		return pl_big(s, n, align);
	return __libc_memalign(align, n);
}

PL_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	return memalign(align, n);
}

PL_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	if (!align || (align & (align - 1)) || align % sizeof(void *))
		return EINVAL;
	p = memalign(align, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

PL_EXPORT void *valloc(size_t n)
{
	return memalign(PL_PAGE, n);
}

PL_EXPORT void *pvalloc(size_t n)
{
	return memalign(PL_PAGE, (n + PL_PAGE - 1) & ~(PL_PAGE - 1));
}

PL_EXPORT size_t malloc_usable_size(void *p)
{
	if (pl_ours(p))
		return pl_usable(p);
	return p ? pl_glibc_usable(p) : 0;
}

/* ---- set-up, fork, exit ------------------------------------------------------------- */

static void pl_prepare(void)
{
	if (pl_space)
		rg_fork_prepare(pl_space);
}

static void pl_parent(void)
{
	if (pl_space)
		rg_fork_parent(pl_space);
}

/* The child's memory is whole and plain; it runs on without far memory (an exec gets it back). */
static void pl_child(void)
{
	if (pl_space)
		rg_fork_child(pl_space);
	pl_space = NULL;
}

/* "32M", "1G", "4096": bytes. @return 0 or -EINVAL. */
static int pl_size(const char *v, size_t *out)
{
	char *end;
	unsigned long long n;
	unsigned shift = 0;

	if (!v || !*v)
		return -EINVAL;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || end == v)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end || n > (SIZE_MAX >> shift))
		return -EINVAL;
	*out = (size_t)(n << shift);
	return 0;
}

static void pl_fail(const char *why, int err)
{
	fprintf(stderr, "ramster-run: far memory off in pid %d: %s: %s\n", (int)getpid(), why,
		strerror(err));
	if (getenv("RAMSTER_RUN_STRICT"))
		_exit(127);
}

static void pl_thread_is_ours(void)
{
	pl_inside = 1;
}

__attribute__((constructor)) static void pl_init(void)
{
	const char *v = getenv("RAMSTER_RUN_RESIDENT");
	size_t resident;
	ramster *r;

	if (!v)
		return;
	if (pl_size(v, &resident) || pl_size(getenv("RAMSTER_RUN_MIN_MAP") ? getenv("RAMSTER_RUN_MIN_MAP") : "1M",
					     &pl_min_map) || pl_min_map < PL_PAGE) {
		pl_fail("RAMSTER_RUN_RESIDENT or RAMSTER_RUN_MIN_MAP", EINVAL);
		return;
	}
	rg_thread_hook = pl_thread_is_ours;
	pl_inside = 1;
	r = ramster_open(NULL);
	if (!r) {
		pl_inside = 0;
		pl_fail("cannot reach the node", errno);
		return;
	}
	pl_space = rg_space_new(r, resident);
	pl_inside = 0;
	if (!pl_space) {
		pl_fail("cannot set up userfaultfd regions", errno);
		return;
	}
	(void)pthread_atfork(pl_prepare, pl_parent, pl_child);
}

__attribute__((destructor)) static void pl_fini(void)
{
	const char *path = getenv("RAMSTER_RUN_STATS");
	struct ramster_region_stats st;
	char line[1536], buf[4096], *hwm;
	unsigned long long peak = 0;
	ssize_t got;
	int fd, n;

	if (!pl_space || !path || !*path)
		return;
	rg_stats(pl_space, &st);
	/* the process's peak RSS, for ramster-run's tests and users */
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		got = read(fd, buf, sizeof(buf) - 1);
		buf[got > 0 ? got : 0] = 0;
		hwm = strstr(buf, "VmHWM:");
		if (hwm)
			peak = strtoull(hwm + 6, NULL, 10);
		close(fd);
	}
	n = snprintf(line, sizeof(line),
		     "pid %d budget_pages %llu resident_pages %llu pool_pages %llu faults %llu faults_zero %llu "
		     "faults_wp %llu gets %llu prefetched %llu get_failed %llu evicted %llu puts %llu "
		     "put_refused %llu over_budget %llu evict_failed %llu fault_ns_p50 %llu fault_ns_p99 %llu rss_peak_kib %llu "
		     "evicted_bg %llu evicted_sync %llu faults_spun %llu zcache_cap_bytes %llu "
		     "zcache_bytes %llu zcache_pages %llu zcache_stored %llu zcache_hits %llu "
		     "zcache_absorbed %llu zcache_written_back %llu zcache_wb_sync %llu "
		     "evicted_batched %llu\n",
		     (int)getpid(), (unsigned long long)st.budget_pages,
		     (unsigned long long)st.resident_pages, (unsigned long long)st.pool_pages,
		     (unsigned long long)st.faults, (unsigned long long)st.faults_zero,
		     (unsigned long long)st.faults_wp, (unsigned long long)st.gets,
		     (unsigned long long)st.prefetched, (unsigned long long)st.get_failed,
		     (unsigned long long)st.evicted, (unsigned long long)st.puts,
		     (unsigned long long)st.put_refused, (unsigned long long)st.over_budget,
		     (unsigned long long)st.evict_failed,
		     (unsigned long long)st.fault_ns_p50, (unsigned long long)st.fault_ns_p99, peak,
		     (unsigned long long)st.evicted_bg, (unsigned long long)st.evicted_sync,
		     (unsigned long long)st.faults_spun, (unsigned long long)st.zcache_cap_bytes,
		     (unsigned long long)st.zcache_bytes, (unsigned long long)st.zcache_pages,
		     (unsigned long long)st.zcache_stored, (unsigned long long)st.zcache_hits,
		     (unsigned long long)st.zcache_absorbed, (unsigned long long)st.zcache_written_back,
		     (unsigned long long)st.zcache_wb_sync, (unsigned long long)st.evicted_batched);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write(fd, line, (size_t)n) != n)
			(void)0;
		close(fd);
	}
	/* the space is left as it is: other threads may still run; the node drops the pool */
}
