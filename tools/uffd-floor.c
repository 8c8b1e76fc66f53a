/*
 * uffd-floor - the cheapest fault a userfaultfd handler can serve on this
 * machine: the floor under every fault of a region (lib/region_fault.c),
 * measured beside zram's whole fault in tools/bench-far.sh (issue 23).
 *
 *   uffd-floor [PAGES]
 *
 * It maps PAGES pages (default 32768) registered for missing faults and
 * touches them in a random order from the main thread. Each fault is served
 * with one UFFDIO_COPY of a page made ready before: no lookup, no
 * decompression, no eviction, no socket. Three ways of serving, one run each:
 *
 * - sleep: a handler thread in poll() then read(), as lib/region_fault.c
 *   does by default: two wake-ups a fault, the handler's and the faulting
 *   thread's.
 * - spin: a handler thread reading the (non-blocking) uffd in a loop,
 *   RAMSTER_FAR_SPIN_US's extreme: one wake-up a fault, and a core spent.
 * - sigbus: no handler thread. UFFD_FEATURE_SIGBUS, and the faulting thread
 *   copies the page in its own SIGBUS handler: no wake-up at all. What serving
 *   faults in the faulting thread would cost; lib/region cannot do it for
 *   unmodified programs, since a fault the kernel takes inside a system call
 *   then fails that call with EFAULT (docs/far-memory.md).
 *
 * Each access is timed as far-workload times one (the median and 99th
 * percentile of those over 2 us). Prints one line a way of serving:
 *   handler=sleep|spin|sigbus faults=N fault_p50_us=X fault_p99_us=Y
 * Exit 1: bad arguments, or a page read back wrong; exit 2: userfaultfd (or
 * its SIGBUS feature) is not available here.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tools/fault-timing.h"

#define PAGE 4096ul

enum serving { SERVE_SLEEP, SERVE_SPIN, SERVE_SIGBUS };

struct floor {
	int uffd;
	enum serving how; /* SERVE_SLEEP or SERVE_SPIN: the handler thread's way */
	atomic_int stop;
	unsigned char *src;
};

/* the sigbus handler's page and descriptor */
static int sig_uffd = -1;
static unsigned char *sig_src;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	struct uffdio_copy c = {
	    .dst = (uintptr_t)si->si_addr & ~(PAGE - 1),
	    .src = (uintptr_t)sig_src,
	    .len = PAGE,
	};

	(void)sig;
	(void)uc;
	if (sig_uffd < 0 || (ioctl(sig_uffd, UFFDIO_COPY, &c) && errno != EEXIST))
		_exit(3);
}

static void *handler(void *arg)
{
	struct floor *f = arg;
	struct uffd_msg m;
	struct pollfd pfd = {.fd = f->uffd, .events = POLLIN};

	while (!atomic_load(&f->stop)) {
		ssize_t n;

		if (f->how == SERVE_SLEEP && poll(&pfd, 1, 100) <= 0)
			continue;
		n = read(f->uffd, &m, sizeof(m));
		if (n != (ssize_t)sizeof(m)) {
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				perror("uffd-floor: read");
				exit(1);
			}
			continue;
		}
		if (m.event != UFFD_EVENT_PAGEFAULT)
			continue;
		struct uffdio_copy c = {
		    .dst = m.arg.pagefault.address & ~(PAGE - 1),
		    .src = (uintptr_t)f->src,
		    .len = PAGE,
		};
		if (ioctl(f->uffd, UFFDIO_COPY, &c) && errno != EEXIST) {
			perror("uffd-floor: UFFDIO_COPY");
			exit(1);
		}
	}
	return NULL;
}

/* One run of a way of serving over npages. @return 0, or 2 without userfaultfd (or SIGBUS). */
static int run(const char *name, enum serving how, size_t npages)
{
	struct uffdio_api api = {.api = UFFD_API,
				 .features = how == SERVE_SIGBUS ? UFFD_FEATURE_SIGBUS : 0};
	struct floor f = {.how = how};
	uint64_t *lat, t0, t1, rng = XORSHIFT_SEED;
	size_t i, nfault = 0, len = npages * PAGE, bad = 0;
	unsigned char *m, *order;
	pthread_t th;
	int rc = 0;

	f.uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (f.uffd < 0 || ioctl(f.uffd, UFFDIO_API, &api)) {
		fprintf(stderr, "uffd-floor: userfaultfd: %s\n", strerror(errno));
		if (f.uffd >= 0)
			close(f.uffd);
		return 2;
	}
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	f.src = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	lat = malloc(npages * sizeof(*lat));
	order = calloc(npages, 1);
	if (m == MAP_FAILED || f.src == MAP_FAILED || !lat || !order) {
		perror("uffd-floor");
		exit(1);
	}
	memset(f.src, 0x5a, PAGE);
	struct uffdio_register reg = {.range = {.start = (uintptr_t)m, .len = len},
				      .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (ioctl(f.uffd, UFFDIO_REGISTER, &reg)) {
		fprintf(stderr, "uffd-floor: UFFDIO_REGISTER: %s\n", strerror(errno));
		rc = 2;
		goto out;
	}
	if (how == SERVE_SIGBUS) {
		struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO};

		sig_uffd = f.uffd;
		sig_src = f.src;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGBUS, &sa, NULL)) {
			perror("uffd-floor: sigaction");
			exit(1);
		}
	} else if (pthread_create(&th, NULL, handler, &f)) {
		perror("uffd-floor: pthread_create");
		exit(1);
	}
	/* random pages, each once: every access a fault */
	for (i = 0; i < npages; i++) {
		size_t pg;

		pg = xorshift64(&rng) % npages;
		if (order[pg])
			continue;
		order[pg] = 1;
		t0 = now_ns();
		bad += m[pg * PAGE + (i * 7) % PAGE] != 0x5a;
		t1 = now_ns();
		if (t1 - t0 > FAULT_NS)
			lat[nfault++] = t1 - t0;
	}
	atomic_store(&f.stop, 1);
	if (how == SERVE_SIGBUS) {
		signal(SIGBUS, SIG_DFL);
		sig_uffd = -1;
	} else {
		pthread_join(th, NULL);
	}
	qsort(lat, nfault, sizeof(*lat), cmp_u64);
	printf("handler=%s faults=%zu fault_p50_us=%.1f fault_p99_us=%.1f\n", name, nfault,
	       nfault ? (double)lat[nfault / 2] / 1e3 : 0.0,
	       nfault ? (double)lat[nfault * 99 / 100] / 1e3 : 0.0);
	if (bad) {
		fprintf(stderr, "uffd-floor: %zu pages read back wrong\n", bad);
		exit(1);
	}
out:
	munmap(m, len);
	munmap(f.src, PAGE);
	free(lat);
	free(order);
	close(f.uffd);
	return rc;
}

int main(int argc, char **argv)
{
	long n = 32768;
	int rc;

	if (argc > 2 || (argc == 2 && count_arg(argv[1], 1l << 22, &n))) {
		fprintf(stderr, "usage: uffd-floor [PAGES] (1 to 4194304, default 32768)\n");
		return 1;
	}
	rc = run("sleep", SERVE_SLEEP, (size_t)n);
	if (rc)
		return rc;
	rc = run("spin", SERVE_SPIN, (size_t)n);
	if (rc)
		return rc;
	return run("sigbus", SERVE_SIGBUS, (size_t)n);
}
