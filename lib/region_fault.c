/*
 * region_fault.c - a space of far memory regions (region_int.h): its
 * userfaultfd, its fault thread, which serves missing faults (a fetch, the
 * zero page, prefetch along sequential runs, SIGBUS for lost pages) and
 * write-protect faults, and its counters. The thread holds s->lock while it
 * serves a fault, network round trips included.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/region_int.h"

/* Linux 6.6 uapi, absent from older headers. */
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
#endif
#ifndef _UFFDIO_POISON
#define _UFFDIO_POISON (0x08)
struct uffdio_poison {
	struct uffdio_range range;
	__u64 mode;
	__s64 updated;
};
#define UFFDIO_POISON _IOWR(UFFDIO, _UFFDIO_POISON, struct uffdio_poison)
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

/* ---- userfaultfd -------------------------------------------------------------- */

static int rg_uffd_open(int flags)
{
	int dev, fd;

	dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev >= 0) {
		fd = ioctl(dev, USERFAULTFD_IOC_NEW, flags);
		close(dev);
		if (fd >= 0)
			return fd;
	}
	fd = (int)syscall(SYS_userfaultfd, flags);
	return fd >= 0 ? fd : -errno;
}

/* A userfaultfd with write-protect and, when the kernel has it, poison. */
static int rg_uffd_new(int *has_poison)
{
	struct uffdio_api api;
	int fd, pass;

	for (pass = 0; pass < 2; pass++) {
		fd = rg_uffd_open(O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return fd == -ENOSYS ? -ENOTSUP : fd;
		memset(&api, 0, sizeof(api));
		api.api = UFFD_API;
		api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_THREAD_ID |
			       (pass ? 0 : UFFD_FEATURE_POISON);
		if (ioctl(fd, UFFDIO_API, &api) == 0) {
			*has_poison = !pass;
			return fd;
		}
		close(fd);
	}
	return -ENOTSUP;
}

/* Install len bytes of pages at dst. @return 0 or -errno; *done (may be NULL) gets the bytes
 * installed. */
int rg_copy(struct rg_space *s, uintptr_t dst, const void *src, size_t len, int wp, int wake,
	    size_t *done)
{
	struct uffdio_copy c = {.dst = dst, .src = (uintptr_t)src, .len = len};
	int rc = 0;

	c.mode = (wp ? UFFDIO_COPY_MODE_WP : 0) | (wake ? 0 : UFFDIO_COPY_MODE_DONTWAKE);
	if (ioctl(s->uffd, UFFDIO_COPY, &c))
		rc = -errno;
	if (done)
		*done = rc ? (c.copy > 0 ? (size_t)c.copy : 0) : len;
	return rc;
}

int rg_wp(struct rg_space *s, uintptr_t addr, size_t len, int on)
{
	struct uffdio_writeprotect w = {.range = {.start = addr, .len = len}};

	w.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0; /* unprotecting wakes */
	return ioctl(s->uffd, UFFDIO_WRITEPROTECT, &w) ? -errno : 0;
}

static void rg_wake(struct rg_space *s, uintptr_t addr, size_t len)
{
	struct uffdio_range r = {.start = addr, .len = len};

	(void)ioctl(s->uffd, UFFDIO_WAKE, &r);
}

/* The page is lost: SIGBUS to whoever touches it (docs/far-memory.md). */
void rg_poison(struct rg_space *s, uintptr_t addr, uint32_t tid)
{
	struct uffdio_poison p = {.range = {.start = addr, .len = RG_PAGE}};

	if (s->has_poison && ioctl(s->uffd, UFFDIO_POISON, &p) == 0)
		return;
	/* no poison markers: signal the faulting thread, which is still waiting */
	if (tid)
		(void)syscall(SYS_tgkill, getpid(), tid, SIGBUS);
	rg_wake(s, addr, RG_PAGE);
}

/* ---- faults ------------------------------------------------------------------- */

static uint64_t rg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The run a fault at a continues (its window grown), or a new one (no prefetch yet). */
static struct rg_stream *rg_stream(struct rg_space *s, uintptr_t a)
{
	struct rg_stream *m, *old = &s->streams[0];
	unsigned k, cap = s->nslots / 8 < RG_BATCH - 1 ? s->nslots / 8 : RG_BATCH - 1;

	for (k = 0; k < RG_STREAMS; k++) {
		m = &s->streams[k];
		if (m->used && a > m->last && a <= m->next + 2 * RG_PAGE) {
			m->ra = m->ra ? (m->ra * 2 > cap ? cap : m->ra * 2) : RG_RA_MIN;
			m->used = ++s->stream_clock;
			return m;
		}
		if (m->used < old->used)
			old = m;
	}
	old->last = a;
	old->next = a + RG_PAGE;
	old->ra = 0;
	old->used = ++s->stream_clock;
	return old;
}

/* One more read-fetched page (wp: fetched write-protected) toward the write-protect decision. */
static void rg_window(struct rg_space *s)
{
	if (++s->win_reads < RG_WINDOW)
		return;
	if (s->nowp) {
		/* probe again now and then: the program may have changed its ways */
		if (++s->nowp_windows >= 8)
			s->nowp = 0;
	} else {
		s->nowp = s->win_wp * 2 > s->win_reads;
		s->nowp_windows = 0;
	}
	s->win_reads = s->win_wp = 0;
}

static void rg_fault_wp(struct rg_space *s, struct rg_region *g, size_t i, uintptr_t a)
{
	uint8_t *p = &g->st[i];

	s->st.faults_wp++;
	if (*p & PG_ZEROMAP) {
		/* the first write to a zero-mapped page: it becomes a real one */
		rg_room(s, 1);
		rg_slot_take(s, g, i);
		*p = PG_PRESENT | PG_DIRTY | PG_REF;
	} else if (*p & PG_PRESENT) {
		s->win_wp++;
		if (*p & PG_INPOOL) /* the cache's copy is stale from now on */
			rg_zc_drop(s, rg_zc_key(&g->obj->oid, g->first + (uint32_t)i));
		*p = (uint8_t)((*p & ~PG_WP) | PG_DIRTY | PG_REF);
	} else {
		rg_wake(s, a, RG_PAGE); /* evicted meanwhile: it faults again as missing */
		return;
	}
	if (rg_wp(s, a, RG_PAGE, 0))
		rg_wake(s, a, RG_PAGE);
}

/*
 * Bring in page i (and, on a sequential run, the pages after it that are
 * neither present nor lost) with one getv round trip.
 */
static void rg_fault_missing(struct rg_space *s, struct rg_region *g, size_t i, uintptr_t a,
			     int write, uint32_t tid)
{
	uint8_t *p = &g->st[i], hit[RG_BATCH];
	unsigned n, want, k, ngets = 0;
	struct rg_stream *sm;
	int rc = 0, wp;

	s->st.faults++;
	if (*p & (PG_PRESENT | PG_ZEROMAP | PG_POISON)) {
		rg_wake(s, a, RG_PAGE);
		return;
	}
	sm = rg_stream(s, a);
	sm->last = a;
	want = 1 + sm->ra;
	if (!(*p & PG_INPOOL) && !write) {
		/* never written, read: the zero page (a run of them), write-protected, no memory */
		struct uffdio_zeropage z = {.range = {.start = a, .len = RG_PAGE},
					    .mode = UFFDIO_ZEROPAGE_MODE_DONTWAKE};

		for (n = 1; n < want && i + n < g->npages && !g->st[i + n]; n++)
			;
		z.range.len = (uint64_t)n * RG_PAGE;
		s->st.faults_zero++;
		if (ioctl(s->uffd, UFFDIO_ZEROPAGE, &z) == 0 && rg_wp(s, a, z.range.len, 1) == 0)
			for (k = 0; k < n; k++)
				g->st[i + k] = PG_ZEROMAP | PG_WP;
		sm->next = a + z.range.len;
		rg_wake(s, a, RG_PAGE);
		return;
	}
	for (n = 1; n < want && i + n < g->npages; n++)
		if (g->st[i + n] & (PG_PRESENT | PG_ZEROMAP | PG_POISON))
			break;
	n = rg_room(s, n);
	if (!n)
		n = 1; /* served over budget */
	for (k = 0; k < n; k++) {
		uint8_t *pg = s->buf + (size_t)k * RG_PAGE;

		hit[k] = 0;
		if (!(g->st[i + k] & PG_INPOOL)) {
			memset(pg, 0, RG_PAGE);
			continue;
		}
		/* the compressed cache first: no round trip */
		hit[k] = (uint8_t)rg_zc_fetch(s, g, i + k, pg, &ngets);
	}
	if (ngets) {
		pthread_mutex_lock(&s->io);
		rc = ramster_getv(s->conn, s->pool, s->iov, ngets);
		pthread_mutex_unlock(&s->io);
	}
	/* a failed fetch ends the run; on the faulting page it is SIGBUS */
	for (k = 0, ngets = 0; k < n; k++) {
		if (!(g->st[i + k] & PG_INPOOL) || hit[k])
			continue;
		if (rc < 0 || s->iov[ngets].result) {
			if (k == 0) {
				s->st.get_failed++;
				rg_poison(s, a, tid);
				*p = (uint8_t)(PG_POISON | PG_INPOOL);
				sm->ra = 0;
				return;
			}
			n = k;
			break;
		}
		ngets++;
	}
	s->st.gets += ngets;
	/* the faulting page first, woken at once; a write needs no protection */
	wp = !write && !s->nowp;
	if (!write && (*p & PG_INPOOL))
		rg_window(s);
	rc = rg_copy(s, a, s->buf, RG_PAGE, wp, 1, NULL);
	if (rc) {
		rg_wake(s, a, RG_PAGE); /* -EAGAIN (mm changing) or raced: fault again */
		return;
	}
	rg_slot_take(s, g, i);
	*p = (uint8_t)((*p & PG_INPOOL) | PG_PRESENT | PG_REF | (wp ? PG_WP : PG_DIRTY));
	if (!wp && hit[0]) /* fetched dirty: the cache's copy will be stale */
		rg_zc_drop(s, rg_zc_key(&g->obj->oid, g->first + (uint32_t)i));
	/*
	 * The prefetched ones, unreferenced. A run of writes (a buffer being
	 * filled) gets them writable and dirty: protecting them would cost one
	 * write-protect fault each; a run of reads gets them write-protected.
	 */
	if (n > 1) {
		size_t done = 0;

		/* what the kernel refused part-way (-EAGAIN, -ENOMEM) ends the run */
		(void)rg_copy(s, a + RG_PAGE, s->buf + RG_PAGE, (size_t)(n - 1) * RG_PAGE, wp, 1,
			      &done);
		n = 1 + (unsigned)(done / RG_PAGE);
		for (k = 1; k < n; k++) {
			rg_slot_take(s, g, i + k);
			g->st[i + k] = (uint8_t)((g->st[i + k] & PG_INPOOL) | PG_PRESENT |
						 (wp ? PG_WP : PG_DIRTY));
			s->st.prefetched++;
			if (!wp && hit[k])
				rg_zc_drop(s,
					   rg_zc_key(&g->obj->oid, g->first + (uint32_t)(i + k)));
		}
	}
	sm->next = a + (uintptr_t)n * RG_PAGE;
}

/* Serve one fault; spun: read while polling (counted). */
static void rg_fault(struct rg_space *s, const struct uffd_msg *m, int spun)
{
	uintptr_t a = (uintptr_t)m->arg.pagefault.address & ~(uintptr_t)(RG_PAGE - 1);
	uint64_t flags = m->arg.pagefault.flags, t0 = rg_now_ns(), dt;
	struct rg_region *g;
	int missing = !(flags & UFFD_PAGEFAULT_FLAG_WP);

	pthread_mutex_lock(&s->lock);
	s->st.faults_spun += (uint64_t)spun;
	g = rg_find(s, a);
	if (!g)
		rg_wake(s, a, RG_PAGE); /* unmapped meanwhile: the retry decides */
	else if (!missing)
		rg_fault_wp(s, g, (a - g->base) / RG_PAGE, a);
	else
		rg_fault_missing(s, g, (a - g->base) / RG_PAGE, a,
				 !!(flags & UFFD_PAGEFAULT_FLAG_WRITE), m->arg.pagefault.feat.ptid);
	if (g && missing) {
		dt = rg_now_ns() - t0;
		s->lat_hist[dt ? 63 - __builtin_clzll(dt) : 0]++;
	}
	pthread_mutex_unlock(&s->lock);
}

void (*rg_thread_hook)(void);

/*
 * RAMSTER_FAR_SPIN_US: how long the fault thread polls its userfaultfd after
 * a fault before it sleeps in poll() (default RG_SPIN_US, 0: off, at most
 * 1000). A fault that comes within it is read without this thread being
 * woken (a cross-thread wake-up costs tens of microseconds on a busy
 * machine). The spin follows a fault only: an idle space sleeps.
 */
static uint64_t rg_env_spin_ns(void)
{
	const char *v = secure_getenv("RAMSTER_FAR_SPIN_US");
	char *end;
	unsigned long us;

	if (!v || !*v)
		return (uint64_t)RG_SPIN_US * 1000;
	us = strtoul(v, &end, 10);
	if (*end || us > 1000)
		return (uint64_t)RG_SPIN_US * 1000;
	return (uint64_t)us * 1000;
}

/* Serve the faults read into msgs (n bytes); spun: read while polling. */
static void rg_serve(struct rg_space *s, const struct uffd_msg *msgs, ssize_t n, int spun)
{
	size_t i;

	for (i = 0; i < (size_t)n / sizeof(msgs[0]); i++)
		if (msgs[i].event == UFFD_EVENT_PAGEFAULT)
			rg_fault(s, &msgs[i], spun);
}

static void *rg_thread(void *arg)
{
	struct rg_space *s = arg;
	struct uffd_msg msgs[16];
	struct pollfd pf[2] = {{.fd = s->uffd, .events = POLLIN},
			       {.fd = s->stopfd, .events = POLLIN}};
	uint64_t spin_ns = rg_env_spin_ns(), t0;
	ssize_t n;

	if (rg_thread_hook)
		rg_thread_hook();
	for (;;) {
		if (poll(pf, 2, -1) < 0)
			continue;
		if (pf[1].revents)
			return NULL;
		n = read(s->uffd, msgs, sizeof(msgs));
		if (n <= 0)
			continue;
		rg_serve(s, msgs, n, 0);
		/* the next fault often follows at once: read it without sleeping, for a while */
		t0 = rg_now_ns();
		while (spin_ns && rg_now_ns() - t0 < spin_ns) {
			if (__atomic_load_n(&s->stopping, __ATOMIC_RELAXED))
				return NULL;
			n = read(s->uffd, msgs, sizeof(msgs)); /* O_NONBLOCK: -EAGAIN when none */
			if (n <= 0)
				continue;
			rg_serve(s, msgs, n, 1);
			t0 = rg_now_ns();
		}
	}
}

/*
 * RAMSTER_FAR_ZCACHE_MB: the compressed cache's bound in MiB (0: off; default
 * a quarter of the budget, RG_ZC_SHARE).
 */
static size_t rg_env_zcache_bytes(size_t budget_pages)
{
	const char *v = secure_getenv("RAMSTER_FAR_ZCACHE_MB");
	char *end;
	unsigned long mb;

	if (v && *v) {
		mb = strtoul(v, &end, 10);
		if (!*end && mb <= (1ul << 20))
			return (size_t)mb << 20;
	}
	return budget_pages * RG_PAGE / RG_ZC_SHARE;
}

/* ---- the space ---------------------------------------------------------------- */

struct rg_space *rg_space_new(ramster *conn, size_t resident_bytes)
{
	struct rg_space *s;
	sigset_t all, old;
	uint32_t i;
	int err;
	size_t pages = resident_bytes / RG_PAGE;

	if (!conn || pages < RG_MIN_BUDGET || pages >= UINT32_MAX) {
		ramster_close(conn);
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		ramster_close(conn);
		return NULL;
	}
	s->conn = conn;
	s->uffd = s->stopfd = s->memfd = -1;
	s->pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0u); /* -1: rg_drop_batch goes by page */
	s->nslots = (uint32_t)pages;
	s->st.budget_pages = pages;
	err = pthread_mutex_init(&s->lock, NULL);
	if (err)
		goto free_s;
	err = pthread_mutex_init(&s->io, NULL);
	if (err) {
		pthread_mutex_destroy(&s->lock);
		goto free_s;
	}
	s->slots = calloc(pages, sizeof(*s->slots));
	s->free = malloc(pages * sizeof(*s->free));
	s->buf = aligned_alloc(RG_PAGE, (size_t)RG_BATCH * RG_PAGE);
	if (!s->slots || !s->free || !s->buf) {
		err = ENOMEM;
		goto free_mem;
	}
	for (i = 0; i < s->nslots; i++)
		s->free[i] = s->nslots - 1 - i;
	s->nfree = s->nslots;
	s->pool = ramster_pool_new(conn, RAMSTER_PERSISTENT, NULL);
	if (s->pool < 0) {
		err = -s->pool;
		goto free_mem;
	}
	err = rg_uffd_new(&s->has_poison);
	if (err < 0) {
		err = -err;
		goto free_mem;
	}
	s->uffd = err;
	s->stopfd = eventfd(0, EFD_CLOEXEC);
	if (s->stopfd < 0) {
		err = errno;
		goto free_mem;
	}
	/* the fault thread takes no signal of the program's */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&s->thread, NULL, rg_thread, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		goto free_mem;
	s->thread_ok = 1;
	err = rg_zc_init(s, rg_env_zcache_bytes(pages));
	if (err) {
		rg_space_free(s);
		errno = -err;
		return NULL;
	}
	err = rg_evictor_start(s);
	if (err) {
		rg_space_free(s);
		errno = err;
		return NULL;
	}
	return s;

free_mem:
	if (s->pidfd >= 0)
		close(s->pidfd);
	if (s->stopfd >= 0)
		close(s->stopfd);
	if (s->uffd >= 0)
		close(s->uffd);
	free(s->buf);
	free(s->free);
	free(s->slots);
	pthread_mutex_destroy(&s->io);
	pthread_mutex_destroy(&s->lock);
free_s:
	ramster_close(conn);
	free(s);
	errno = err;
	return NULL;
}

void rg_space_free(struct rg_space *s)
{
	if (!s)
		return;
	rg_evictor_stop(s);
	if (s->thread_ok) {
		__atomic_store_n(&s->stopping, 1, __ATOMIC_RELAXED);
		(void)eventfd_write(s->stopfd, 1);
		pthread_join(s->thread, NULL);
	}
	pthread_mutex_lock(&s->lock);
	while (s->nregs) {
		struct rg_region *g = s->regs[s->nregs - 1];

		(void)rg_munmap((void *)g->base, g->npages * RG_PAGE);
		s->nregs--;
		rg_region_free(s, g);
	}
	pthread_mutex_unlock(&s->lock);
	if (!s->dead) {
		pthread_mutex_lock(&s->io);
		(void)ramster_pool_destroy(s->conn, s->pool);
		pthread_mutex_unlock(&s->io);
	}
	ramster_close(s->conn);
	close(s->uffd);
	close(s->stopfd);
	if (s->memfd >= 0)
		close(s->memfd);
	if (s->pidfd >= 0)
		close(s->pidfd);
	rg_zc_fini(s);
	free(s->regs);
	free(s->buf);
	free(s->free);
	free(s->slots);
	pthread_mutex_destroy(&s->io);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* ---- stats -------------------------------------------------------------------- */

static uint64_t rg_pct(const uint64_t *h, uint64_t total, unsigned pct)
{
	uint64_t want = (total * pct + 99) / 100, seen = 0;
	unsigned b;

	for (b = 0; b < 64; b++) {
		seen += h[b];
		if (seen >= want && h[b])
			return 1ull << b;
	}
	return 0;
}

void rg_stats(struct rg_space *s, struct ramster_region_stats *st)
{
	uint64_t total = 0;
	size_t r, i;
	unsigned b;

	pthread_mutex_lock(&s->lock);
	*st = s->st;
	st->zcache_bytes = rg_zc_bytes(s);
	st->pool_pages = 0;
	for (r = 0; r < s->nregs; r++) {
		const struct rg_region *g = s->regs[r];

		/* a page the cache holds has its current copy there, not in the pool */
		for (i = 0; i < g->npages; i++)
			st->pool_pages +=
			    (g->st[i] & (PG_INPOOL | PG_DIRTY)) == PG_INPOOL &&
			    !(st->zcache_pages &&
			      rg_zc_has(s, rg_zc_key(&g->obj->oid, g->first + (uint32_t)i)));
	}
	for (b = 0; b < 64; b++)
		total += s->lat_hist[b];
	st->fault_ns_p50 = rg_pct(s->lat_hist, total, 50);
	st->fault_ns_p99 = rg_pct(s->lat_hist, total, 99);
	pthread_mutex_unlock(&s->lock);
}
