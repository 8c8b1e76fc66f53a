/*
 * far-workload - the workload of tools/bench-far.sh: the same program run
 * under ramster-run and in a memory cgroup swapping to zram.
 *
 *   far-workload seq|rand WS_MB [ACCESSES]
 *
 * It maps WS_MB of anonymous memory, writes every page once (each page's
 * number repeated: compressible, the same bytes for both backends), then
 * either scans the whole set twice in order reading every page ("seq") or
 * reads and writes ACCESSES random pages ("rand", default one per page). Each
 * page access is timed: the median and 99th percentile of those that took
 * longer than 2 us (a fault; a resident page takes nanoseconds) are the fault
 * latency. Every page read is checked. Prints one line:
 *   mode=seq ws_mb=128 secs=1.234 accesses=N faults=N fault_p50_us=X fault_p99_us=Y
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tools/fault-timing.h"

#define PAGE 4096ul

int main(int argc, char **argv)
{
	size_t ws, npages, i, k, acc, nfault = 0, bad = 0;
	uint64_t *lat, t0, t1, start, rng = XORSHIFT_SEED, *w;
	const char *mode = argc > 1 ? argv[1] : "";
	int seq = !strcmp(mode, "seq");
	uint8_t *m;
	long ws_mb, nacc = 0;

	if (argc < 3 || argc > 4 || (!seq && strcmp(mode, "rand")) ||
	    count_arg(argv[2], 1l << 20, &ws_mb) ||
	    (argc == 4 && count_arg(argv[3], 1l << 30, &nacc))) {
		fprintf(stderr,
			"usage: far-workload seq|rand WS_MB [ACCESSES] (WS_MB 1 to 1048576, "
			"ACCESSES 1 to 2^30)\n");
		return 2;
	}
	ws = (size_t)ws_mb << 20;
	npages = ws / PAGE;
	acc = seq ? 2 * npages : nacc ? (size_t)nacc : npages;
	m = mmap(NULL, ws, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	lat = malloc(acc * sizeof(*lat)); /* < 1 MiB for small sets: stays in glibc's heap */
	if (m == MAP_FAILED || !lat) {
		perror("far-workload");
		return 1;
	}
	for (i = 0; i < npages; i++) {
		w = (uint64_t *)(m + i * PAGE);
		for (k = 0; k < PAGE / 8; k++)
			w[k] = i;
	}
	start = now_ns();
	for (i = 0; i < acc; i++) {
		size_t pg;

		if (seq) {
			pg = i % npages;
		} else {
			pg = xorshift64(&rng) % npages;
		}
		w = (uint64_t *)(m + pg * PAGE);
		t0 = now_ns();
		bad += w[(i * 7) % (PAGE / 8)] != pg;
		if (!seq)
			w[(i * 13) % (PAGE / 8)] =
			    pg; /* the same value: the page is dirty, its bytes unchanged */
		t1 = now_ns();
		if (t1 - t0 > FAULT_NS)
			lat[nfault++] = t1 - t0;
	}
	t1 = now_ns();
	qsort(lat, nfault, sizeof(*lat), cmp_u64);
	printf("mode=%s ws_mb=%zu secs=%.3f accesses=%zu faults=%zu fault_p50_us=%.1f "
	       "fault_p99_us=%.1f\n",
	       mode, ws >> 20, (double)(t1 - start) / 1e9, acc, nfault,
	       nfault ? (double)lat[nfault / 2] / 1e3 : 0.0,
	       nfault ? (double)lat[nfault * 99 / 100] / 1e3 : 0.0);
	free(lat);
	munmap(m, ws);
	if (bad) {
		fprintf(stderr, "far-workload: %zu pages read back wrong\n", bad);
		return 1;
	}
	return 0;
}
