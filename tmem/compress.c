/*
 * compress.c - LZO1X-1 page compression, the zero-page test and the
 * poor-compression policy.
 *
 * liblzo2 is initialised once (pthread_once). Each thread gets its own LZO
 * work memory on its first compress_page(); a pthread key destructor frees it
 * when the thread exits, so no lock is ever taken on the data path.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <lzo/lzo1x.h>

#include "tmem/compress.h"

/* ---- init and per-thread work memory ------------------------------------ */

#define COMPRESS_WRKMEM_ALIGN 64

static pthread_once_t compress_once = PTHREAD_ONCE_INIT;
static int compress_init_err;           /* result of the one-time init */
static pthread_key_t compress_key;      /* its destructor frees a thread's work memory */
static __thread void *compress_wrkmem;  /* this thread's LZO1X_1_MEM_COMPRESS bytes */
static pthread_key_t compress_lz4_key;  /* the same for LZ4's state */

static void compress_wrkmem_free(void *mem)
{
	free(mem);
}

static void compress_init_once(void)
{
	if (lzo_init() != LZO_E_OK) {
		compress_init_err = -EINVAL;
		return;
	}
	if (pthread_key_create(&compress_key, compress_wrkmem_free) != 0 ||
	    pthread_key_create(&compress_lz4_key, compress_wrkmem_free) != 0)
		compress_init_err = -EINVAL;
}

int compress_init(void)
{
	pthread_once(&compress_once, compress_init_once);
	return compress_init_err;
}

/* @return this thread's work memory, or NULL if it cannot be had. */
static void *compress_wrkmem_get(void)
{
	size_t len = (LZO1X_1_MEM_COMPRESS + COMPRESS_WRKMEM_ALIGN - 1) &
		     ~(size_t)(COMPRESS_WRKMEM_ALIGN - 1);
	void *mem;

	if (compress_wrkmem)
		return compress_wrkmem;
	if (compress_init() != 0)
		return NULL;
	mem = aligned_alloc(COMPRESS_WRKMEM_ALIGN, len);
	if (!mem)
		return NULL;
	if (pthread_setspecific(compress_key, mem) != 0) {
		free(mem);
		return NULL;
	}
	compress_wrkmem = mem;
	return mem;
}

/* ---- pages -------------------------------------------------------------- */

bool compress_page_is_zero(const void *page)
{
	const unsigned char *p = page;
	uint64_t w[8], acc;
	size_t off;
	int i;

	/* 64 bytes per round: one OR over eight words, then one branch. */
	for (off = 0; off < COMPRESS_PAGE_SIZE; off += sizeof(w)) {
		memcpy(w, p + off, sizeof(w));
		acc = 0;
		for (i = 0; i < 8; i++)
			acc |= w[i];
		if (acc)
			return false;
	}
	return true;
}

/* @return as in compress.h, and -ENOMEM when this thread's work memory cannot be had. */
int compress_page(const void *page, void *dst)
{
	lzo_uint out_len = COMPRESS_BOUND;
	void *wrkmem = compress_wrkmem_get();
	int ret;

	if (!wrkmem)
		return -ENOMEM;
	ret = lzo1x_1_compress(page, COMPRESS_PAGE_SIZE, dst, &out_len, wrkmem);
	if (ret != LZO_E_OK || out_len == 0 || out_len > COMPRESS_BOUND)
		return -EIO;
	return (int)out_len;
}

int compress_unpage(const void *src, size_t len, void *page)
{
	lzo_uint out_len = COMPRESS_PAGE_SIZE;
	int ret;

	if (len == 0)
		return -EIO;
	ret = lzo1x_decompress_safe(src, len, page, &out_len, NULL);
	if (ret != LZO_E_OK || out_len != COMPRESS_PAGE_SIZE)
		return -EIO;
	return 0;
}

/* ---- LZ4 and the choice --------------------------------------------------- */

/*
 * LZ4_compress_fast_extState with this thread's state (LZ4_sizeofState()
 * bytes, allocated on first use like LZO's work memory).
 */
static __thread void *compress_lz4_state;

static void *compress_lz4_state_get(void)
{
	void *mem;

	if (compress_lz4_state)
		return compress_lz4_state;
	if (compress_init() != 0)
		return NULL;
	mem = aligned_alloc(COMPRESS_WRKMEM_ALIGN,
			    ((size_t)LZ4_sizeofState() + COMPRESS_WRKMEM_ALIGN - 1) &
				~(size_t)(COMPRESS_WRKMEM_ALIGN - 1));
	if (!mem)
		return NULL;
	if (pthread_setspecific(compress_lz4_key, mem) != 0) {
		free(mem);
		return NULL;
	}
	compress_lz4_state = mem;
	return mem;
}

bool compress_algo_ok(enum compress_algo algo)
{
	return algo == COMPRESS_LZO || algo == COMPRESS_LZ4;
}

const char *compress_algo_name(enum compress_algo algo)
{
	return algo == COMPRESS_LZ4 ? "lz4" : algo == COMPRESS_LZO ? "lzo" : "?";
}

int compress_algo_parse(const char *name, enum compress_algo *algo)
{
	if (!strcmp(name, "lzo"))
		*algo = COMPRESS_LZO;
	else if (!strcmp(name, "lz4"))
		*algo = COMPRESS_LZ4;
	else
		return -EINVAL;
	return 0;
}

int compress_page_algo(enum compress_algo algo, const void *page, void *dst)
{
	void *state;
	int n;

	if (algo != COMPRESS_LZ4)
		return compress_page(page, dst);
	state = compress_lz4_state_get();
	if (!state)
		return -ENOMEM;
	n = LZ4_compress_fast_extState(state, page, dst, COMPRESS_PAGE_SIZE, COMPRESS_BOUND, 1);
	return n > 0 ? n : -EIO;
}

int compress_unpage_algo(enum compress_algo algo, const void *src, size_t len, void *page)
{
	if (algo != COMPRESS_LZ4)
		return compress_unpage(src, len, page);
	if (len == 0 || len > COMPRESS_BOUND)
		return -EIO;
	if (LZ4_decompress_safe(src, page, (int)len, COMPRESS_PAGE_SIZE) != COMPRESS_PAGE_SIZE)
		return -EIO;
	return 0;
}

/* ---- policy ------------------------------------------------------------- */

void compress_policy_default(struct compress_policy *p, unsigned buddy_max)
{
	p->pers_max = COMPRESS_PAGE_SIZE * 7 / 8;
	p->pers_mean_max = COMPRESS_PAGE_SIZE * 5 / 8;
	p->pers_mean_limit = COMPRESS_PAGE_SIZE * 5 / 8;
	p->eph_max = buddy_max;
}

bool compress_policy_refuse(const struct compress_policy *p, bool persistent, unsigned len,
			    unsigned mean_pers)
{
	if (!persistent)
		return len > p->eph_max;
	if (len > p->pers_max)
		return true;
	return len > p->pers_mean_max && mean_pers > p->pers_mean_limit;
}
