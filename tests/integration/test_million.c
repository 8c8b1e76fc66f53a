/*
 * test_million.c - one million pages through libramster into one persistent
 * pool of a real ramsterd, in putv batches of 64, then all read back with
 * getv and compared byte for byte.
 *
 * Page n is regenerated from n alone: 10% are zero pages (by a hash of n),
 * the rest one of 4096 text pages (harness_page_text) chosen by a hash of n
 * and stamped with n, so every page is distinct. The daemon's budget is sized
 * from the LZO1X-1 sizes of a sample, measured here, so every page fits.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lzo/lzo1x.h>

#include "ramster.h"
#include "tests/integration/harness.h"

#define PAGE RAMSTER_PAGE_SIZE
#define NPAGES 1000000u
#define BATCH 64
#define NBASE 4096
#define CHUNK 64 /* zbud's allocation unit */

struct million {
	struct harness h;
	ramster *r;
	unsigned char *base; /* NBASE text pages */
	uint64_t local_mb;
};

static bool is_zero(uint32_t n)
{
	return harness_mix(n ^ 0x5a5a5a5aull) % 10 == 0;
}

/* Page n: zero, or a base text page stamped with n (twice, in text). */
static void million_page(const struct million *m, uint32_t n, unsigned char *page)
{
	char stamp[24];
	uint64_t h;
	int len;

	if (is_zero(n)) {
		memset(page, 0, PAGE);
		return;
	}
	h = harness_mix(n);
	memcpy(page, m->base + (h % NBASE) * PAGE, PAGE);
	len = snprintf(stamp, sizeof(stamp), "page %010u ", n);
	memcpy(page, stamp, (size_t)len);
	memcpy(page + 64 + ((h >> 20) % (PAGE - 128)), stamp, (size_t)len);
}

static struct ramster_oid million_oid(uint32_t n)
{
	return harness_oid(n >> 8, 0x4d);
}

/*
 * Estimate the frames the pages need from LZO sizes of a sample: compressed
 * pages pair two to a frame when their 64-byte chunks fit in one.
 * @return the budget in MiB, with a margin.
 */
static uint64_t million_budget(const struct million *m)
{
	static unsigned char wrk[LZO1X_1_MEM_COMPRESS];
	unsigned char page[PAGE], out[PAGE + PAGE / 16 + 64 + 3];
	uint64_t bytes = 0, chunks = 0, sample = 0, frames;
	uint32_t n;

	for (n = 0; n < NPAGES; n += 997) {
		lzo_uint len = sizeof(out);

		if (is_zero(n))
			continue;
		million_page(m, n, page);
		lzo1x_1_compress(page, PAGE, out, &len, wrk);
		bytes += len;
		chunks += (len + CHUNK - 1) / CHUNK;
		sample++;
	}
	/* frames ~ chunks / 64 if pairs fit, never below pages / 2 */
	frames = (uint64_t)((double)chunks / (double)sample * 0.9 * NPAGES / (PAGE / CHUNK));
	if (frames < NPAGES * 9 / 20)
		frames = NPAGES * 9 / 20;
	printf("million: LZO1X-1 sample of %llu text pages: mean %.0f bytes (%.2fx), "
	       "~%llu frames for the text pages\n",
	       (unsigned long long)sample, (double)bytes / (double)sample,
	       (double)PAGE * (double)sample / (double)bytes, (unsigned long long)frames);
	/* twice the estimate: zbud cannot always pair the buddies it has */
	return frames * 2 * PAGE / (1024 * 1024) + 64;
}

static int setup(void **state)
{
	struct million *m = calloc(1, sizeof(*m));
	char mb[32];
	const char *args[] = { "--local-mb", mb, NULL };
	uint32_t i;

	if (!m)
		return -1;
	if (lzo_init() != LZO_E_OK)
		return -1;
	m->base = malloc((size_t)NBASE * PAGE);
	if (!m->base)
		return -1;
	for (i = 0; i < NBASE; i++)
		harness_page_text(m->base + (size_t)i * PAGE, 0x6d696c6cull + i);
	m->local_mb = million_budget(m);
	snprintf(mb, sizeof(mb), "%llu", (unsigned long long)m->local_mb);
	printf("million: ramsterd --local-mb %s\n", mb);
	if (harness_start(&m->h, args) < 0)
		return -1;
	m->r = harness_connect(&m->h);
	if (!m->r) {
		harness_stop(&m->h);
		return -1;
	}
	*state = m;
	return 0;
}

static int teardown(void **state)
{
	struct million *m = *state;
	int rc;

	ramster_close(m->r);
	rc = harness_stop(&m->h);
	free(m->base);
	free(m);
	return rc < 0 ? -1 : 0;
}

static uint64_t stat_or_zero(ramster *r, const char *name)
{
	uint64_t v = 0;

	if (harness_stat(r, name, &v) < 0)
		fprintf(stderr, "million: no stat %s\n", name);
	return v;
}

static void test_million_pages(void **state)
{
	struct million *m = *state;
	struct ramster_iov v[BATCH];
	unsigned char *buf = malloc(BATCH * PAGE), want[PAGE];
	uint64_t refused = 0, missing = 0, wrong = 0, batch_err = 0;
	int pool = ramster_pool_new(m->r, RAMSTER_PERSISTENT, NULL);
	uint64_t pages, frames, meta, cbytes, stored, zero;
	double t0, t_put, t_get;
	uint32_t n, i;
	int rc;

	assert_non_null(buf);
	assert_true(pool >= 0);

	t0 = harness_now();
	for (n = 0; n < NPAGES; n += BATCH) {
		for (i = 0; i < BATCH; i++) {
			v[i].oid = million_oid(n + i);
			v[i].index = (n + i) & 0xff;
			v[i].page = buf + (size_t)i * PAGE;
			million_page(m, n + i, v[i].page);
		}
		rc = ramster_putv(m->r, pool, v, BATCH);
		if (rc < 0) {
			if (!batch_err++)
				fprintf(stderr, "million: putv at %u: %s\n", n, strerror(-rc));
			assert_true(harness_alive(&m->h));
			continue;
		}
		for (i = 0; i < BATCH; i++) {
			if (v[i].result && !refused++)
				fprintf(stderr, "million: put %u refused: %d\n", n + i, v[i].result);
		}
	}
	t_put = harness_now() - t0;

	pages = stat_or_zero(m->r, "tmem_pages");
	frames = stat_or_zero(m->r, "tier_frames");
	meta = stat_or_zero(m->r, "tier_meta_bytes");
	cbytes = stat_or_zero(m->r, "tier_compressed_bytes");
	stored = stat_or_zero(m->r, "tier_stored_pages");
	zero = stat_or_zero(m->r, "tier_zero_pages");

	t0 = harness_now();
	for (n = 0; n < NPAGES; n += BATCH) {
		for (i = 0; i < BATCH; i++) {
			v[i].oid = million_oid(n + i);
			v[i].index = (n + i) & 0xff;
			v[i].page = buf + (size_t)i * PAGE;
		}
		rc = ramster_getv(m->r, pool, v, BATCH);
		if (rc < 0) {
			if (!batch_err++)
				fprintf(stderr, "million: getv at %u: %s\n", n, strerror(-rc));
			continue;
		}
		for (i = 0; i < BATCH; i++) {
			if (v[i].result) {
				if (!missing++)
					fprintf(stderr, "million: get %u: %d\n", n + i, v[i].result);
				continue;
			}
			million_page(m, n + i, want);
			if (memcmp(v[i].page, want, PAGE) && !wrong++)
				fprintf(stderr, "million: page %u read back wrong\n", n + i);
		}
	}
	t_get = harness_now() - t0;

	printf("million: put %u pages in %.2f s (%.0f pages/s), get in %.2f s (%.0f pages/s), "
	       "put+get %.0f pages/s\n",
	       NPAGES, t_put, NPAGES / t_put, t_get, NPAGES / t_get, NPAGES / (t_put + t_get));
	printf("million: %llu pages held (%llu compressed, %llu zero), %llu frames of %llu MiB "
	       "budget, compression %.2fx, RAM %.0f bytes/page, metadata %.1f bytes/page\n",
	       (unsigned long long)pages, (unsigned long long)stored, (unsigned long long)zero,
	       (unsigned long long)frames, (unsigned long long)m->local_mb,
	       cbytes ? (double)stored * PAGE / (double)cbytes : 0.0,
	       pages ? (double)(frames * PAGE + meta) / (double)pages : 0.0,
	       pages ? (double)meta / (double)pages : 0.0);
	if (refused || missing || wrong || batch_err)
		fprintf(stderr, "million: %llu refused, %llu missing, %llu wrong, %llu failed batches\n",
			(unsigned long long)refused, (unsigned long long)missing,
			(unsigned long long)wrong, (unsigned long long)batch_err);
	assert_int_equal(batch_err, 0);
	assert_int_equal(refused, 0);
	assert_int_equal(missing, 0);
	assert_int_equal(wrong, 0);
	assert_int_equal(pages, NPAGES);
	assert_int_equal(stored + zero, NPAGES);
	assert_true(harness_alive(&m->h));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_million_pages, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
