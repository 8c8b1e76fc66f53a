/*
 * ec-pages.c - the client of the VM's erasure-coding test (test-ec-rdma.sh):
 * one connection to a node and one persistent pool, kept open while the
 * script reads counters and kills holders between its commands. Commands, one
 * a line on stdin; one answer a line on stdout:
 *
 *   put N    put pages 0..N-1 (pagegen_text of seed 1000003 + i)
 *            -> "put: N stored S refused R ms T"
 *   get      read every page put back, compare each byte
 *            -> "get: N hits H misses M lost L wrong W other O ms T"
 *   flush    flush every page put, one ramster_flush each
 *            -> "flush: N flushed F absent A other O ms T"
 *   quit     (or end of input) destroy the pool and exit
 *
 * lost counts -EIO (the page is gone), other any other failed get.
 * Usage: ec-pages SOCKET. Exit 0, 1 on a failed call, 2 usage.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ramster.h"
#include "tools/pagegen.h"

#define PAGE	  PAGEGEN_PAGE_SIZE
#define BATCH	  64
#define OBJ_PAGES 512

static ramster *r;
static int pool = -1;
static uint64_t pages;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void slot(struct ramster_iov *v, uint64_t i, void *page)
{
	v->oid = (struct ramster_oid){{0xec, i / OBJ_PAGES, 0x5eed}};
	v->index = (uint32_t)(i % OBJ_PAGES);
	v->page = page;
	v->result = 0;
}

static int put(uint64_t n)
{
	static unsigned char buf[BATCH][PAGE];
	struct ramster_iov v[BATCH];
	uint64_t i, k, stored = 0, refused = 0;
	double t0 = now_ms();

	for (i = 0; i < n; i += BATCH) {
		size_t m = n - i < BATCH ? n - i : BATCH;
		int rc;

		for (k = 0; k < m; k++) {
			slot(&v[k], i + k, buf[k]);
			pagegen_text(buf[k], 1000003 + i + k);
		}
		rc = ramster_putv(r, pool, v, m);
		if (rc < 0) {
			printf("put: failed at page %llu: %s\n", (unsigned long long)i,
			       strerror(-rc));
			return -1;
		}
		for (k = 0; k < m; k++)
			v[k].result == 0 ? stored++ : refused++;
	}
	pages = n;
	printf("put: %llu stored %llu refused %llu ms %.0f\n", (unsigned long long)n,
	       (unsigned long long)stored, (unsigned long long)refused, now_ms() - t0);
	return 0;
}

static int get(void)
{
	static unsigned char buf[BATCH][PAGE], want[PAGE];
	struct ramster_iov v[BATCH];
	uint64_t i, k, hits = 0, misses = 0, lost = 0, wrong = 0, other = 0;
	double t0 = now_ms();

	for (i = 0; i < pages; i += BATCH) {
		size_t m = pages - i < BATCH ? pages - i : BATCH;
		int rc;

		for (k = 0; k < m; k++)
			slot(&v[k], i + k, buf[k]);
		rc = ramster_getv(r, pool, v, m);
		if (rc < 0) {
			printf("get: failed at page %llu: %s\n", (unsigned long long)i,
			       strerror(-rc));
			return -1;
		}
		for (k = 0; k < m; k++) {
			if (v[k].result == 0) {
				pagegen_text(want, 1000003 + i + k);
				if (memcmp(want, buf[k], PAGE)) {
					if (wrong++ < 5)
						fprintf(stderr, "ec-pages: page %llu differs\n",
							(unsigned long long)(i + k));
				} else {
					hits++;
				}
			} else if (v[k].result == -ENOENT) {
				misses++;
			} else if (v[k].result == -EIO) {
				lost++;
			} else if (other++ < 5) {
				fprintf(stderr, "ec-pages: page %llu: %s\n",
					(unsigned long long)(i + k), strerror(-v[k].result));
			}
		}
	}
	printf("get: %llu hits %llu misses %llu lost %llu wrong %llu other %llu ms %.0f\n",
	       (unsigned long long)pages, (unsigned long long)hits, (unsigned long long)misses,
	       (unsigned long long)lost, (unsigned long long)wrong, (unsigned long long)other,
	       now_ms() - t0);
	return 0;
}

static int flush(void)
{
	struct ramster_iov v;
	uint64_t i, flushed = 0, absent = 0, other = 0;
	double t0 = now_ms();

	for (i = 0; i < pages; i++) {
		int rc;

		slot(&v, i, NULL);
		rc = ramster_flush(r, pool, &v.oid, v.index);
		if (rc == 0)
			flushed++;
		else if (rc == -ENOENT)
			absent++;
		else
			other++;
	}
	printf("flush: %llu flushed %llu absent %llu other %llu ms %.0f\n",
	       (unsigned long long)pages, (unsigned long long)flushed, (unsigned long long)absent,
	       (unsigned long long)other, now_ms() - t0);
	return 0;
}

int main(int argc, char **argv)
{
	char line[128];
	int rc = 0;

	if (argc != 2) {
		fprintf(stderr,
			"usage: ec-pages SOCKET (commands on stdin: put N, get, flush, quit)\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	r = ramster_open(argv[1]);
	if (!r) {
		printf("open: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	if (pool < 0) {
		printf("pool: %s\n", strerror(-pool));
		ramster_close(r);
		return 1;
	}
	while (rc == 0 && fgets(line, sizeof(line), stdin)) {
		unsigned long long n;

		if (sscanf(line, "put %llu", &n) == 1)
			rc = put(n);
		else if (!strncmp(line, "get", 3))
			rc = get();
		else if (!strncmp(line, "flush", 5))
			rc = flush();
		else if (!strncmp(line, "quit", 4))
			break;
		else
			printf("?: %s", line);
	}
	ramster_pool_destroy(r, pool);
	ramster_close(r);
	return rc ? 1 : 0;
}
