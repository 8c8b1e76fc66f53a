/*
 * memhog.c - a workload for the kernel-swap VM test: allocate MiB of
 * anonymous memory (more than the guest has), write every page with data
 * derived from its index, then read everything back twice (forward and
 * backward) and check every byte. Each page is a distinct line repeated:
 * the nodes that take the swap live in the same small guest, so what they
 * keep must be much smaller than what they are given. With "random", each
 * page is pseudo-random bytes from its index and the seed instead: nothing
 * compresses (as encrypted or already-compressed memory), and the export
 * must keep it all the same.
 * Usage: memhog MIB [SEED [random]]. Exit 0 verified, 1 a wrong byte, 2 usage.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE 4096

static int random_pages;

/* xorshift64* from (i, seed): incompressible, and the same bytes again for the check */
static void fill_random(unsigned char *p, uint64_t i, uint64_t seed)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed * 0xbf58476d1ce4e5b9ull, v;
	size_t off;

	if (!x)
		x = 1;
	for (off = 0; off < PAGE; off += sizeof(x)) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		v = x * 0x2545f4914f6cdd1dull;
		memcpy(p + off, &v, sizeof(v));
	}
}

static void fill(unsigned char *p, uint64_t i, uint64_t seed)
{
	char line[64];
	int n;
	size_t off;

	if (random_pages) {
		fill_random(p, i, seed);
		return;
	}
	/* a distinct line per page, repeated: compresses well (as the guest's
	 * swap must, when the nodes that take it live in the same small guest) */
	n = snprintf(line, sizeof(line), "ramster swap page %012llx seed %llu | ",
		     (unsigned long long)i, (unsigned long long)seed);
	for (off = 0; off < PAGE; off += (size_t)n)
		memcpy(p + off, line, off + (size_t)n <= PAGE ? (size_t)n : PAGE - off);
	memcpy(p + PAGE - 16, &i, sizeof(i)); /* and a binary stamp at the end */
	memcpy(p + PAGE - 8, &seed, sizeof(seed));
}

static int check(const unsigned char *p, uint64_t i, uint64_t seed)
{
	unsigned char want[PAGE];

	fill(want, i, seed);
	return memcmp(p, want, PAGE) != 0;
}

int main(int argc, char **argv)
{
	uint64_t mib, pages, i, seed, bad = 0;
	unsigned char *mem;

	if (argc < 2 || (mib = strtoull(argv[1], NULL, 10)) == 0 || mib > (1u << 20)) {
		fprintf(stderr, "usage: memhog MIB [SEED [random]]\n");
		return 2;
	}
	seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 42;
	if (argc > 3) {
		if (strcmp(argv[3], "random")) {
			fprintf(stderr, "usage: memhog MIB [SEED [random]]\n");
			return 2;
		}
		random_pages = 1;
	}
	pages = mib * 1024 * 1024 / PAGE;
	mem = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("memhog: mmap");
		return 2;
	}
	for (i = 0; i < pages; i++)
		fill(mem + i * PAGE, i, seed);
	printf("memhog: wrote %llu MiB (%llu %s pages)\n", (unsigned long long)mib,
	       (unsigned long long)pages, random_pages ? "random" : "text");
	fflush(stdout);
	for (i = 0; i < pages; i++)
		bad += check(mem + i * PAGE, i, seed);
	for (i = pages; i-- > 0;)
		bad += check(mem + i * PAGE, i, seed);
	if (bad) {
		printf("memhog: %llu wrong pages\n", (unsigned long long)bad);
		return 1;
	}
	printf("memhog: %llu MiB verified twice, every byte\n", (unsigned long long)mib);
	return 0;
}
