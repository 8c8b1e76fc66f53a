/*
 * ramster-bench - load and measurement: put then get N pages and verify them,
 * through a running ramsterd (libramster), through the local tier in this
 * process (zcache + tmem, no socket), and bare LZO1X-1 as the baseline.
 *
 * Throughput counts only the time inside the measured calls (not page
 * generation or verification); figures are medians over --reps repetitions,
 * each on a fresh pool (daemon) or a fresh tier (inproc). Every page read
 * back is compared byte for byte; any difference is an error (exit 1).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tools/figures.h"
#include "tools/jout.h"
#include "tools/progress.h"
#include "ramster.h"
#include "tmem/compress.h"
#include "tmem/tmem.h"
#include "tmem/zalloc.h"
#include "tmem/zcache.h"
#include "tools/pagegen.h"

#define PAGE 4096
#define DISTINCT_MAX 16384 /* distinct pages kept in memory; page i is data[i % distinct] */
#define REPS_MAX 101

enum bench_data { DATA_ZERO, DATA_RANDOM, DATA_TEXT, DATA_MIXED, DATA_FILE };
enum { MODE_LZO = 1, MODE_INPROC = 2, MODE_DAEMON = 4 };

struct opts {
	const char *socket;
	const char *file;
	uint64_t pages;
	unsigned batch;
	unsigned modes;
	uint64_t local_mb;      /* inproc budget; 0 = enough for every page raw */
	unsigned reps;
	unsigned obj_pages;     /* pages an object */
	enum bench_data data;
	uint64_t seed;
	bool json;
	enum zalloc_kind alloc;     /* inproc tier's allocator */
	enum compress_algo algo;    /* inproc tier's compressor, and the bare baseline's */
};

/* What one mode measured, medians over the repetitions. */
struct result {
	bool ran;
	double put_pps, get_pps, putget_pps;
	double put_p50, put_p99, get_p50, get_p99; /* µs an op (a batch / B) */
	uint64_t refused;        /* puts refused (last repetition) */
	uint64_t errors;         /* wrong or missing pages, all repetitions */
	/* tier figures after the puts (last repetition) */
	bool have_tier;
	uint64_t pages, stored, zero, cbytes, frames, meta;
	double paired_ratio;     /* inproc with lzo: median of each repetition's ratio */
};

/* Zero-filled pages of the data (they take no frame in the tier, nor in zram). */
static uint64_t zero_distinct;

static struct opts o = {
	.pages = 100000,
	.batch = 1,
	.modes = MODE_LZO | MODE_INPROC | MODE_DAEMON,
	.reps = 5,
	.obj_pages = 1024,
	.data = DATA_TEXT,
	.seed = 1,
};

static unsigned char *data;  /* distinct pages */
static uint64_t distinct;

/* ---- the clock (figures: tools/figures.c) ------------------------------------- */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- page generators: tools/pagegen.c, and two kinds of the bench's own ---- */

_Static_assert(PAGE == PAGEGEN_PAGE_SIZE, "pagegen makes the pages");

/* Words of a heap: small integers and pointers near one base (LZO ~3-5x). */
static void page_binary(unsigned char *page, uint64_t seed)
{
	uint64_t s = pagegen_mix(seed) | 1, w;
	uint64_t base = 0x7f3a00000000ull + (pagegen_mix(seed + 1) & 0xfffff000ull);
	size_t i;

	for (i = 0; i < PAGE; i += 8) {
		uint64_t r = pagegen_rng_next(&s);

		switch (r & 3) {
		case 0:
			w = base + ((r >> 8) & 0xfff8);
			break;
		case 1:
			w = (r >> 8) & 0xff;
			break;
		case 2:
			w = 0;
			break;
		default:
			w = i / 8;
			break;
		}
		memcpy(page + i, &w, 8);
	}
}

/* mixed: 50% text, 20% zero, 15% random, 15% binary, by a hash of i. */
static void page_mixed(unsigned char *page, uint64_t seed)
{
	unsigned k = (unsigned)(pagegen_mix(seed ^ 0x6d69786564ull) % 20);

	if (k < 10)
		pagegen_text(page, seed);
	else if (k < 14)
		pagegen_zero(page);
	else if (k < 17)
		pagegen_random(page, seed);
	else
		page_binary(page, seed);
}

static const char *data_name(enum bench_data d)
{
	static const char *const n[] = { "zero", "random", "text", "mixed", "file" };

	return n[d];
}

/* Fill data[] with the distinct pages of the run. @return 0 or -errno. */
static int data_load(void)
{
	uint64_t i;

	if (o.data == DATA_FILE) {
		struct stat st;
		size_t want, got = 0;
		ssize_t n;
		int fd = open(o.file, O_RDONLY);

		if (fd < 0 || fstat(fd, &st) < 0) {
			fprintf(stderr, "ramster-bench: %s: %s\n", o.file, strerror(errno));
			return -errno;
		}
		/* every page of a file is its own (no DISTINCT_MAX: a dump is measured whole) */
		distinct = (uint64_t)st.st_size / PAGE;
		if (distinct > o.pages)
			distinct = o.pages;
		if (!distinct) {
			fprintf(stderr, "ramster-bench: %s: less than one page\n", o.file);
			close(fd);
			return -EINVAL;
		}
		want = distinct * PAGE;
		data = malloc(want);
		if (!data) {
			close(fd);
			return -ENOMEM;
		}
		while (got < want && (n = read(fd, data + got, want - got)) > 0)
			got += (size_t)n;
		close(fd);
		distinct = got / PAGE;
		for (i = 0; i < distinct; i++)
			zero_distinct += compress_page_is_zero(data + i * PAGE);
		return distinct ? 0 : -EIO;
	}
	distinct = o.pages < DISTINCT_MAX ? o.pages : DISTINCT_MAX;
	data = malloc(distinct * PAGE);
	if (!data)
		return -ENOMEM;
	for (i = 0; i < distinct; i++) {
		unsigned char *p = data + i * PAGE;
		uint64_t seed = o.seed * 0x100000000ull + i;

		switch (o.data) {
		case DATA_ZERO:
			pagegen_zero(p);
			break;
		case DATA_RANDOM:
			pagegen_random(p, seed);
			break;
		case DATA_TEXT:
			pagegen_text(p, seed);
			break;
		default:
			page_mixed(p, seed);
			break;
		}
	}
	return 0;
}

static const unsigned char *page_of(uint64_t i)
{
	return data + (i % distinct) * PAGE;
}

static struct ramster_oid oid_of(uint64_t i, unsigned rep)
{
	struct ramster_oid oid = { { i / o.obj_pages, 0x62656e6368ull, rep } };

	return oid;
}

static uint32_t index_of(uint64_t i)
{
	return (uint32_t)(i % o.obj_pages);
}

/* ---- lzo: the baseline ----------------------------------------------------------- */

/*
 * One repetition of the baseline: compress and decompress every page, timing
 * each. t: o.pages doubles of scratch. @return pages/s, with *p50 (us) set.
 */
static double lzo_rep(struct result *res, double *t, double *p50)
{
	unsigned char dst[COMPRESS_BOUND], back[PAGE];
	double sum = 0, t0, t1;
	uint64_t i;

	for (i = 0; i < o.pages; i++) {
		const unsigned char *p = page_of(i);
		int len, rc;

		t0 = now();
		len = compress_page_algo(o.algo, p, dst);
		rc = len > 0 ? compress_unpage_algo(o.algo, dst, (size_t)len, back) : len;
		t1 = now();
		t[i] = (t1 - t0) * 1e6;
		sum += t1 - t0;
		if (rc || memcmp(back, p, PAGE))
			res->errors++;
	}
	*p50 = figures_quantile(t, o.pages, 0.5);
	return (double)o.pages / sum;
}

static int run_lzo(struct result *res)
{
	double pps[REPS_MAX], lat[REPS_MAX], *t = malloc(o.pages * sizeof(double));
	unsigned rep;

	if (!t)
		return -ENOMEM;
	if (compress_init()) {
		free(t);
		return -EINVAL;
	}
	for (rep = 0; rep < o.reps; rep++)
		pps[rep] = lzo_rep(res, t, &lat[rep]);
	res->ran = true;
	res->putget_pps = figures_median(pps, o.reps);
	res->put_p50 = figures_median(lat, o.reps);
	free(t);
	return 0;
}

/* ---- the measured loop, for inproc and daemon ------------------------------------ */

/* One way to put and get: in-process tier, or a daemon connection. */
struct target {
	int (*put)(struct target *t, uint64_t first, size_t n, uint64_t *refused);
	int (*get)(struct target *t, uint64_t first, size_t n, unsigned char *buf, int *results);
	unsigned rep;
	/* inproc */
	struct zcache *z;
	struct tmem *tm;
	uint32_t tpool;
	/* daemon */
	ramster *r;
	int pool;
	struct ramster_iov *v;
};

static int inproc_put(struct target *t, uint64_t first, size_t n, uint64_t *refused)
{
	size_t k;

	for (k = 0; k < n; k++) {
		struct ramster_oid ro = oid_of(first + k, t->rep);
		struct tmem_oid oid = { { ro.w[0], ro.w[1], ro.w[2] } };
		int rc = tmem_put(t->tm, t->tpool, &oid, index_of(first + k), page_of(first + k));

		if (rc)
			(*refused)++;
	}
	return 0;
}

static int inproc_get(struct target *t, uint64_t first, size_t n, unsigned char *buf, int *results)
{
	size_t k;

	for (k = 0; k < n; k++) {
		struct ramster_oid ro = oid_of(first + k, t->rep);
		struct tmem_oid oid = { { ro.w[0], ro.w[1], ro.w[2] } };

		results[k] = tmem_get(t->tm, t->tpool, &oid, index_of(first + k), buf + k * PAGE);
	}
	return 0;
}

static int daemon_put(struct target *t, uint64_t first, size_t n, uint64_t *refused)
{
	size_t k;
	int rc;

	if (n == 1) {
		struct ramster_oid oid = oid_of(first, t->rep);

		rc = ramster_put(t->r, t->pool, &oid, index_of(first), page_of(first));
		if (rc < 0 && rc != -E2BIG && rc != -ENOSPC)
			return rc;
		*refused += rc != 0;
		return 0;
	}
	for (k = 0; k < n; k++) {
		t->v[k].oid = oid_of(first + k, t->rep);
		t->v[k].index = index_of(first + k);
		t->v[k].page = (void *)page_of(first + k);
	}
	rc = ramster_putv(t->r, t->pool, t->v, n);
	if (rc < 0)
		return rc;
	*refused += n - (size_t)rc;
	return 0;
}

static int daemon_get(struct target *t, uint64_t first, size_t n, unsigned char *buf, int *results)
{
	size_t k;
	int rc;

	if (n == 1) {
		struct ramster_oid oid = oid_of(first, t->rep);

		results[0] = ramster_get(t->r, t->pool, &oid, index_of(first), buf);
		return results[0] == 0 || results[0] == -ENOENT ? 0 : results[0];
	}
	for (k = 0; k < n; k++) {
		t->v[k].oid = oid_of(first + k, t->rep);
		t->v[k].index = index_of(first + k);
		t->v[k].page = buf + k * PAGE;
	}
	rc = ramster_getv(t->r, t->pool, t->v, n);
	if (rc < 0)
		return rc;
	for (k = 0; k < n; k++)
		results[k] = t->v[k].result;
	return 0;
}

/* Per repetition: what the loop measured. */
struct rep_figures {
	double put_s, get_s;
	double put_p50, put_p99, get_p50, get_p99;
	uint64_t refused, errors;
};

/*
 * Put then get every page through t in calls of o.batch (inproc: the same
 * grouping, one tmem call a page), timing each call, then verify.
 */
static int measure(struct target *t, struct rep_figures *f, double *lat,
		   void (*after_puts)(struct target *t))
{
	size_t calls = (size_t)((o.pages + o.batch - 1) / o.batch), c = 0;
	unsigned char *buf = malloc((size_t)o.batch * PAGE);
	int *results = malloc(o.batch * sizeof(int));
	uint64_t i, k;
	double t0, t1;
	struct progress pg; /* on stderr, outside the timed calls */
	int rc = 0;

	if (!buf || !results) {
		rc = -ENOMEM;
		goto out;
	}
	memset(f, 0, sizeof(*f));
	progress_start(&pg, stderr, "ramster-bench", 2 * o.pages);
	for (i = 0; i < o.pages; i += o.batch, c++) {
		size_t n = o.pages - i < o.batch ? (size_t)(o.pages - i) : o.batch;

		t0 = now();
		rc = t->put(t, i, n, &f->refused);
		t1 = now();
		if (rc < 0)
			goto out;
		f->put_s += t1 - t0;
		lat[c] = (t1 - t0) * 1e6 / (double)n;
		progress_set(&pg, i + n, "pages: puts of rep %u/%u", t->rep + 1, o.reps);
	}
	f->put_p50 = figures_quantile(lat, calls, 0.5);
	f->put_p99 = figures_quantile(lat, calls, 0.99);
	if (after_puts)
		after_puts(t);
	for (i = 0, c = 0; i < o.pages; i += o.batch, c++) {
		size_t n = o.pages - i < o.batch ? (size_t)(o.pages - i) : o.batch;

		t0 = now();
		rc = t->get(t, i, n, buf, results);
		t1 = now();
		if (rc < 0)
			goto out;
		f->get_s += t1 - t0;
		lat[c] = (t1 - t0) * 1e6 / (double)n;
		for (k = 0; k < n; k++) {
			/* a refused put reads back as absent; anything else must match */
			if (results[k] == -ENOENT)
				continue;
			if (results[k] || memcmp(buf + k * PAGE, page_of(i + k), PAGE))
				f->errors++;
		}
		progress_set(&pg, o.pages + i + n, "pages: gets of rep %u/%u", t->rep + 1, o.reps);
	}
	progress_end(&pg, 2 * o.pages, "pages: rep %u/%u", t->rep + 1, o.reps);
	f->get_p50 = figures_quantile(lat, calls, 0.5);
	f->get_p99 = figures_quantile(lat, calls, 0.99);
out:
	free(buf);
	free(results);
	return rc;
}

/* Fold repetitions into medians. */
static void summarize(struct result *res, struct rep_figures *f, unsigned reps)
{
	double a[REPS_MAX], b[REPS_MAX], c[REPS_MAX];
	unsigned i;

	for (i = 0; i < reps; i++) {
		a[i] = (double)o.pages / f[i].put_s;
		b[i] = (double)o.pages / f[i].get_s;
		c[i] = (double)o.pages / (f[i].put_s + f[i].get_s);
		res->errors += f[i].errors;
	}
	res->put_pps = figures_median(a, reps);
	res->get_pps = figures_median(b, reps);
	res->putget_pps = figures_median(c, reps);
	for (i = 0; i < reps; i++) {
		a[i] = f[i].put_p50;
		b[i] = f[i].put_p99;
	}
	res->put_p50 = figures_median(a, reps);
	res->put_p99 = figures_median(b, reps);
	for (i = 0; i < reps; i++) {
		a[i] = f[i].get_p50;
		b[i] = f[i].get_p99;
	}
	res->get_p50 = figures_median(a, reps);
	res->get_p99 = figures_median(b, reps);
	res->refused = f[reps - 1].refused;
	res->ran = true;
}

/* ---- inproc ----------------------------------------------------------------------- */

static struct result *inproc_res;

static void inproc_after_puts(struct target *t)
{
	struct zcache_stats zs;
	struct tmem_stats ts;

	zcache_get_stats(t->z, &zs);
	tmem_get_stats(t->tm, &ts);
	inproc_res->have_tier = true;
	inproc_res->pages = ts.pages;
	inproc_res->stored = zs.stored_pages;
	inproc_res->zero = zs.zero_pages;
	inproc_res->cbytes = zs.compressed_bytes;
	inproc_res->frames = zs.frames;
	inproc_res->meta = zs.meta_bytes;
}

/*
 * One tier for every repetition, as a daemon's lives: each repetition puts
 * into a fresh pool and destroys it, so the frames the first one faulted in
 * are reused by the next (the medians are a warm tier's; the first fill's
 * page faults are in the first repetition only).
 */
static int run_inproc(struct result *res, struct result *pair)
{
	double pair_pps[REPS_MAX], pair_lat[REPS_MAX], ratios[REPS_MAX];
	double *scratch = pair ? malloc(o.pages * sizeof(double)) : NULL;
	struct rep_figures f[REPS_MAX];
	struct zcache_config cfg = { 0 };
	size_t calls = (size_t)((o.pages + o.batch - 1) / o.batch);
	double *lat = malloc(calls * sizeof(double));
	struct target t = { .put = inproc_put, .get = inproc_get };
	unsigned rep;
	int rc = 0;

	if (!lat || (pair && !scratch)) {
		free(lat);
		free(scratch);
		return -ENOMEM;
	}
	cfg.local_mb = o.local_mb ? o.local_mb : o.pages * PAGE / (1024 * 1024) + 16;
	cfg.allocator = o.alloc;
	cfg.compressor = o.algo;
	inproc_res = res;
	t.z = zcache_create(&cfg);
	if (!t.z) {
		rc = -errno;
		fprintf(stderr, "ramster-bench: zcache_create: %s\n", strerror(errno));
		free(lat);
		free(scratch);
		return rc;
	}
	t.tm = zcache_tmem(t.z);
	for (rep = 0; rep < o.reps && !rc; rep++) {
		t.rep = rep;
		if (pair) /* the baseline right before, under the same load */
			pair_pps[rep] = lzo_rep(pair, scratch, &pair_lat[rep]);
		rc = tmem_pool_new(t.tm, TMEM_PERSISTENT);
		if (rc < 0)
			break;
		t.tpool = (uint32_t)rc;
		rc = measure(&t, &f[rep], lat, rep + 1 == o.reps ? inproc_after_puts : NULL);
		tmem_pool_destroy(t.tm, t.tpool);
		if (pair && rc >= 0)
			ratios[rep] = (double)o.pages / (f[rep].put_s + f[rep].get_s) / pair_pps[rep];
	}
	zcache_destroy(t.z);
	free(lat);
	free(scratch);
	if (rc < 0)
		return rc;
	summarize(res, f, o.reps);
	if (pair) {
		pair->ran = true;
		pair->putget_pps = figures_median(pair_pps, o.reps);
		pair->put_p50 = figures_median(pair_lat, o.reps);
		res->paired_ratio = figures_median(ratios, o.reps);
	}
	return 0;
}

/* ---- daemon ----------------------------------------------------------------------- */

static const char *const tier_stats[] = {
	"tmem_pages", "tier_stored_pages", "tier_zero_pages", "tier_compressed_bytes",
	"tier_frames", "tier_meta_bytes",
};
#define NTIER (sizeof(tier_stats) / sizeof(tier_stats[0]))

static struct result *daemon_res;
static uint64_t daemon_before[NTIER];
static bool daemon_stats_ok;

static void daemon_read_tier(ramster *r, uint64_t *v)
{
	size_t i;

	daemon_stats_ok = true;
	for (i = 0; i < NTIER; i++)
		if (ramster_stat(r, tier_stats[i], &v[i]) < 0)
			daemon_stats_ok = false;
}

/* The tier's figures as the difference the puts made. */
static void daemon_after_puts(struct target *t)
{
	uint64_t v[NTIER];

	daemon_read_tier(t->r, v);
	if (!daemon_stats_ok)
		return;
	daemon_res->have_tier = true;
	daemon_res->pages = v[0] - daemon_before[0];
	daemon_res->stored = v[1] - daemon_before[1];
	daemon_res->zero = v[2] - daemon_before[2];
	daemon_res->cbytes = v[3] - daemon_before[3];
	daemon_res->frames = v[4] - daemon_before[4];
	daemon_res->meta = v[5] - daemon_before[5];
}

static int run_daemon(struct result *res)
{
	struct rep_figures f[REPS_MAX];
	size_t calls = (size_t)((o.pages + o.batch - 1) / o.batch);
	double *lat = malloc(calls * sizeof(double));
	struct target t = { .put = daemon_put, .get = daemon_get };
	unsigned rep;
	int rc = 0;

	t.v = calloc(o.batch, sizeof(*t.v));
	if (!lat || !t.v)
		return -ENOMEM;
	t.r = ramster_open(o.socket);
	if (!t.r) {
		rc = -errno;
		fprintf(stderr, "ramster-bench: connect %s: %s\n",
			o.socket ? o.socket : "(default socket)", strerror(errno));
		goto out;
	}
	daemon_res = res;
	for (rep = 0; rep < o.reps && !rc; rep++) {
		t.rep = rep;
		t.pool = ramster_pool_new(t.r, RAMSTER_PERSISTENT, NULL);
		if (t.pool < 0) {
			rc = t.pool;
			fprintf(stderr, "ramster-bench: pool_new: %s\n", strerror(-rc));
			break;
		}
		if (rep + 1 == o.reps)
			daemon_read_tier(t.r, daemon_before);
		rc = measure(&t, &f[rep], lat, rep + 1 == o.reps ? daemon_after_puts : NULL);
		if (rc < 0)
			fprintf(stderr, "ramster-bench: daemon: %s\n", strerror(-rc));
		ramster_pool_destroy(t.r, t.pool);
	}
	if (!rc)
		summarize(res, f, o.reps);
out:
	ramster_close(t.r);
	free(t.v);
	free(lat);
	return rc;
}

/* ---- report --------------------------------------------------------------------- */

static double ratio(const struct result *r)
{
	return r->cbytes ? (double)r->stored * PAGE / (double)r->cbytes : 0;
}

static double ram_per_page(const struct result *r)
{
	return r->pages ? (double)(r->frames * PAGE + r->meta) / (double)r->pages : 0;
}

static double meta_per_page(const struct result *r)
{
	return r->pages ? (double)r->meta / (double)r->pages : 0;
}

static void print_text(const struct result *lzo, const struct result *in, const struct result *dm)
{
	const struct result *rs[] = { in, dm };
	const char *names[] = { "inproc", "daemon" };
	unsigned i;

	printf("ramster-bench: %llu pages of %s data (%llu distinct), batch %u, medians of %u; "
	       "inproc tier: %s, %s\n",
	       (unsigned long long)o.pages, data_name(o.data), (unsigned long long)distinct,
	       o.batch, o.reps, zalloc_ops(o.alloc)->name, compress_algo_name(o.algo));
	printf("%-7s %11s %11s %11s %17s %17s %8s\n", "mode", "put/s", "get/s", "put+get/s",
	       "put p50/p99 us", "get p50/p99 us", "refused");
	if (lzo->ran)
		printf("%-7s %11s %11s %11.0f %17s %17s %8s   (compress+decompress; p50 %.2f us)\n",
		       "lzo", "-", "-", lzo->putget_pps, "-", "-", "-", lzo->put_p50);
	for (i = 0; i < 2; i++) {
		const struct result *r = rs[i];

		if (!r->ran)
			continue;
		printf("%-7s %11.0f %11.0f %11.0f %8.2f/%-8.2f %8.2f/%-8.2f %8llu\n", names[i],
		       r->put_pps, r->get_pps, r->putget_pps, r->put_p50, r->put_p99, r->get_p50,
		       r->get_p99, (unsigned long long)r->refused);
	}
	for (i = 0; i < 2; i++) {
		const struct result *r = rs[i];

		if (!r->ran || !r->have_tier)
			continue;
		printf("%-7s tier: %llu pages (%llu compressed, %llu zero), compression %.2fx, "
		       "%.2f pages/frame, RAM %.0f B/page, metadata %.1f B/page\n",
		       names[i], (unsigned long long)r->pages, (unsigned long long)r->stored,
		       (unsigned long long)r->zero, ratio(r),
		       r->frames ? (double)r->stored / (double)r->frames : 0, ram_per_page(r),
		       meta_per_page(r));
	}
	if (lzo->ran && lzo->putget_pps > 0) {
		if (in->ran)
			printf("ratio inproc/lzo %.2f (median of paired repetitions; from op "
			       "medians: %.2f)\n",
			       in->paired_ratio,
			       lzo->put_p50 / (in->put_p50 + in->get_p50));
		if (dm->ran)
			printf("ratio daemon/lzo %.2f\n", dm->putget_pps / lzo->putget_pps);
	}
	if (lzo->errors + in->errors + dm->errors)
		printf("ERRORS: %llu pages read back wrong or missing\n",
		       (unsigned long long)(lzo->errors + in->errors + dm->errors));
}

static void json_mode(struct jout *j, const char *name, const struct result *r)
{
	jout_round(j, r->put_pps, "%s_put_pps", name);
	jout_round(j, r->get_pps, "%s_get_pps", name);
	jout_round(j, r->putget_pps, "%s_putget_pps", name);
	jout_real(j, r->put_p50, "%s_put_p50_us", name);
	jout_real(j, r->put_p99, "%s_put_p99_us", name);
	jout_real(j, r->get_p50, "%s_get_p50_us", name);
	jout_real(j, r->get_p99, "%s_get_p99_us", name);
	jout_uint(j, r->refused, "%s_refused", name);
	jout_uint(j, r->errors, "%s_errors", name);
	if (r->have_tier) {
		jout_uint(j, r->pages, "%s_pages", name);
		jout_real(j, ratio(r), "%s_compression", name);
		jout_real(j, ram_per_page(r), "%s_ram_per_page", name);
		jout_real(j, meta_per_page(r), "%s_meta_per_page", name);
		jout_real(j, r->frames ? (double)r->stored / (double)r->frames : 0,
			  "%s_pages_per_frame", name);
		jout_real(j, r->stored ? (double)r->cbytes / (double)r->stored : 0,
			  "%s_cbytes_per_page", name);
	}
}

/* The report as one line of JSON (jansson), for tools/bench.sh. */
static void print_json(const struct result *lzo, const struct result *in, const struct result *dm)
{
	struct jout *j = jout_new();

	jout_uint(j, o.pages, "pages");
	jout_str(j, data_name(o.data), "data");
	jout_uint(j, distinct, "distinct");
	jout_uint(j, o.batch, "batch");
	jout_uint(j, o.reps, "reps");
	jout_str(j, zalloc_ops(o.alloc)->name, "alloc");
	jout_str(j, compress_algo_name(o.algo), "compressor");
	jout_uint(j, zero_distinct, "zero_distinct");
	if (lzo->ran) {
		jout_round(j, lzo->putget_pps, "lzo_pps");
		jout_real(j, lzo->put_p50, "lzo_p50_us");
		jout_uint(j, lzo->errors, "lzo_errors");
	}
	if (in->ran)
		json_mode(j, "inproc", in);
	if (dm->ran)
		json_mode(j, "daemon", dm);
	if (lzo->ran && in->ran)
		jout_real(j, in->paired_ratio, "ratio_inproc_lzo");
	/* the same ratio from the medians of single ops: blind to preemption on a busy machine */
	if (lzo->ran && in->ran && in->put_p50 + in->get_p50 > 0)
		jout_real(j, lzo->put_p50 / (in->put_p50 + in->get_p50), "ratio_inproc_lzo_p50");
	if (lzo->ran && dm->ran)
		jout_real(j, dm->putget_pps / lzo->putget_pps, "ratio_daemon_lzo");
	jout_print(j);
}

/* ---- main ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ramster-bench [--socket PATH] [--pages N] [--data zero|random|text|mixed]\n"
		"                     [--file F] [--batch B] [--mode daemon|inproc|lzo|all[,...]]\n"
		"                     [--local-mb N] [--reps R] [--obj-pages P] [--seed S] [--json]\n"
		"                     [--alloc dense|zbud] [--compressor lzo|lz4]\n"
		"Puts then gets N pages and verifies them; prints pages/s (medians of R runs),\n"
		"latency per op, compression and RAM per stored page, and ratios to bare LZO.\n"
		"  --socket PATH  the daemon's socket (default $RAMSTER_SOCKET, then the default)\n"
		"  --file F       pages from F (e.g. a memory dump) instead of a generator\n"
		"  --batch B      pages a call to the daemon (1: single calls; else putv/getv)\n"
		"  --local-mb N   the inproc tier's budget (default: every page raw fits)\n"
		"  --alloc A      the inproc tier's allocator (default dense)\n"
		"  --compressor C the inproc tier's compressor and the bare baseline's\n"
		"                 (default lzo; the JSON keys keep lzo_* for the baseline)\n");
}

static bool parse_u64(const char *s, uint64_t *v, uint64_t min, uint64_t max)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || x < min || x > max)
		return false;
	*v = x;
	return true;
}

static bool parse_modes(const char *s)
{
	char buf[64], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	o.modes = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "lzo"))
			o.modes |= MODE_LZO;
		else if (!strcmp(tok, "inproc"))
			o.modes |= MODE_INPROC;
		else if (!strcmp(tok, "daemon"))
			o.modes |= MODE_DAEMON;
		else if (!strcmp(tok, "all"))
			o.modes |= MODE_LZO | MODE_INPROC | MODE_DAEMON;
		else
			return false;
	}
	return o.modes != 0;
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "pages", required_argument, NULL, 'n' },
		{ "data", required_argument, NULL, 'd' },
		{ "file", required_argument, NULL, 'f' },
		{ "batch", required_argument, NULL, 'b' },
		{ "mode", required_argument, NULL, 'm' },
		{ "local-mb", required_argument, NULL, 'l' },
		{ "reps", required_argument, NULL, 'r' },
		{ "obj-pages", required_argument, NULL, 'o' },
		{ "seed", required_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "alloc", required_argument, NULL, 'A' },
		{ "compressor", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "s:n:d:f:b:m:l:r:o:S:jhA:C:", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.socket = optarg;
			break;
		case 'n':
			if (!parse_u64(optarg, &o.pages, 1, 1ull << 32))
				goto bad;
			break;
		case 'd':
			if (!strcmp(optarg, "zero"))
				o.data = DATA_ZERO;
			else if (!strcmp(optarg, "random"))
				o.data = DATA_RANDOM;
			else if (!strcmp(optarg, "text"))
				o.data = DATA_TEXT;
			else if (!strcmp(optarg, "mixed"))
				o.data = DATA_MIXED;
			else
				goto bad;
			break;
		case 'f':
			o.file = optarg;
			o.data = DATA_FILE;
			break;
		case 'b':
			if (!parse_u64(optarg, &v, 1, 65536))
				goto bad;
			o.batch = (unsigned)v;
			break;
		case 'm':
			if (!parse_modes(optarg))
				goto bad;
			break;
		case 'l':
			if (!parse_u64(optarg, &o.local_mb, 1, 1ull << 30))
				goto bad;
			break;
		case 'r':
			if (!parse_u64(optarg, &v, 1, REPS_MAX))
				goto bad;
			o.reps = (unsigned)v;
			break;
		case 'o':
			if (!parse_u64(optarg, &v, 1, 1ull << 32))
				goto bad;
			o.obj_pages = (unsigned)v;
			break;
		case 'S':
			if (!parse_u64(optarg, &o.seed, 0, UINT32_MAX))
				goto bad;
			break;
		case 'j':
			o.json = true;
			break;
		case 'A':
			if (zalloc_parse(optarg, &o.alloc))
				goto bad;
			break;
		case 'C':
			if (compress_algo_parse(optarg, &o.algo))
				goto bad;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ramster-bench: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (o.data == DATA_FILE && !o.file)
		return -EINVAL;
	return 0;
bad:
	fprintf(stderr, "ramster-bench: bad value '%s'\n", optarg);
	usage(stderr);
	return -EINVAL;
}

int main(int argc, char **argv)
{
	struct result lzo = { 0 }, in = { 0 }, dm = { 0 };
	int rc = 0;

	if (parse_args(argc, argv) < 0)
		return 2;
	if (data_load() < 0)
		return 1;
	/* with inproc, each lzo repetition runs right before the inproc one it is compared with */
	if ((o.modes & MODE_LZO) && !(o.modes & MODE_INPROC) && run_lzo(&lzo) < 0)
		rc = 1;
	if ((o.modes & MODE_INPROC) &&
	    run_inproc(&in, (o.modes & MODE_LZO) && compress_init() == 0 ? &lzo : NULL) < 0)
		rc = 1;
	if ((o.modes & MODE_DAEMON) && run_daemon(&dm) < 0)
		rc = 1;
	if (!lzo.ran && !in.ran && !dm.ran)
		rc = 1;
	else if (o.json)
		print_json(&lzo, &in, &dm);
	else
		print_text(&lzo, &in, &dm);
	free(data);
	if (lzo.errors || in.errors || dm.errors)
		rc = 1;
	return rc;
}
