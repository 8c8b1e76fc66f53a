/*
 * memhog.c - a workload for the kernel-swap VM test: allocate MiB of
 * anonymous memory (more than the guest has), write every page with data
 * derived from its index, then read everything back twice (forward and
 * backward) and check every byte. The pages are text-like, so they compress
 * the way real memory does, not to nothing.
 * Usage: memhog MIB [SEED]. Exit 0 verified, 1 a wrong byte, 2 usage.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE 4096

static void fill(unsigned char *p, uint64_t i, uint64_t seed)
{
	static const char *const words[] = { "swap ", "page ", "ramster ", "memory ", "kernel ",
					     "collective ", "zbud ", "frame " };
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
	size_t off = 0;

	while (off < PAGE) {
		const char *w = words[x % 8];
		size_t n = strlen(w);

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		if (off + n > PAGE)
			n = PAGE - off;
		memcpy(p + off, w, n);
		off += n;
	}
	memcpy(p, &i, sizeof(i)); /* every page distinct */
	memcpy(p + 8, &seed, sizeof(seed));
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
		fprintf(stderr, "usage: memhog MIB [SEED]\n");
		return 2;
	}
	seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 42;
	pages = mib * 1024 * 1024 / PAGE;
	mem = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("memhog: mmap");
		return 2;
	}
	for (i = 0; i < pages; i++)
		fill(mem + i * PAGE, i, seed);
	printf("memhog: wrote %llu MiB (%llu pages)\n", (unsigned long long)mib,
	       (unsigned long long)pages);
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
