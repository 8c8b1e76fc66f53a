/*
 * test_arena.c - the foreign store's chunked memory (node/remote/arena.c): blocks
 * are 8-byte aligned, never overlap, are reused by size class, chunks are
 * announced as made and withdrawn before they are freed, and bad lengths get
 * nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/remote/arena.h"

static struct {
	int added, deleted;
	void *last_base;
	size_t last_len;
	uint32_t last_tag;
} seen;

static void on_add(void *arg, uint32_t tag, void *base, size_t len)
{
	seen.added++;
	seen.last_base = base;
	seen.last_len = len;
	seen.last_tag = tag;
}

static void on_del(void *arg, uint32_t tag, void *base, size_t len)
{
	seen.deleted++;
	seen.last_tag = tag;
}

static const struct arena_hooks hooks = {on_add, on_del};

static void count_chunk(void *arg, void *base, size_t len)
{
	++*(int *)arg;
}

static void test_blocks(void **state)
{
	enum { N = 3000 };
	static unsigned char *p[N];
	struct arena *a;
	int i, chunks = 0;

	memset(&seen, 0, sizeof(seen));
	a = arena_create(&hooks, NULL, 7);
	assert_non_null(a);
	assert_int_equal(arena_chunks(a), 0);
	assert_null(arena_alloc(a, 0));
	assert_null(arena_alloc(a, ARENA_BLOCK_MAX + 1));
	for (i = 0; i < N; i++) {
		size_t len = 1 + (size_t)(i * 37) % 4200;

		p[i] = arena_alloc(a, len);
		assert_non_null(p[i]);
		assert_int_equal((uintptr_t)p[i] % ARENA_ALIGN, 0);
		memset(p[i], (int)(i & 0xff), len); /* no block overlaps another */
	}
	for (i = 0; i < N; i++) {
		size_t len = 1 + (size_t)(i * 37) % 4200;

		assert_int_equal(p[i][0], i & 0xff);
		assert_int_equal(p[i][len - 1], i & 0xff);
	}
	assert_int_equal(arena_blocks(a), N);
	/* ~6.3 MB of blocks */
	assert_true(arena_chunks(a) >= 6300000 / ARENA_CHUNK);
	assert_int_equal(seen.added, (int)arena_chunks(a));
	assert_int_equal(seen.last_tag, 7);
	assert_int_equal(seen.last_len, ARENA_CHUNK);
	arena_foreach_chunk(a, count_chunk, &chunks);
	assert_int_equal(chunks, (int)arena_chunks(a));

	/* a freed block is the next of its class */
	arena_free(a, p[10], 1 + (10 * 37) % 4200);
	assert_ptr_equal(arena_alloc(a, 1 + (10 * 37) % 4200), p[10]);
	/* same class, other length: still reused (38 bytes: the 40-byte class) */
	arena_free(a, p[1], 38);
	assert_ptr_equal(arena_alloc(a, 40), p[1]);
	arena_free(a, p[1], 40);
	assert_ptr_not_equal(arena_alloc(a, 41), p[1]);
	assert_int_equal(arena_blocks(a), N);

	arena_destroy(a);
	assert_int_equal(seen.deleted, seen.added);
	arena_destroy(NULL);
}

/*
 * Giving memory back: a few blocks live in every chunk (freeing blocks alone
 * unmaps nothing); evacuating marks the emptiest chunks, takes their free
 * blocks off the lists, and unmaps each when its last block goes; new blocks
 * never land in an evacuating chunk.
 */
static void test_evacuate(void **state)
{
	enum { N = 4000, LEN = 1000, PER = ARENA_CHUNK / LEN /* blocks a chunk */ };
	static unsigned char *p[N];
	struct arena *a;
	size_t chunks, marked, evac;
	int i, moved = 0;

	memset(&seen, 0, sizeof(seen));
	a = arena_create(&hooks, NULL, 3);
	for (i = 0; i < N; i++) {
		p[i] = arena_alloc(a, LEN);
		assert_non_null(p[i]);
		memset(p[i], i & 0xff, LEN);
	}
	chunks = arena_chunks(a);
	assert_true(chunks >= 3);
	assert_true(N / PER >= 8);
	/* a chunk emptied whole, its blocks on the free lists: evacuated, it goes at once */
	{
		struct arena *b = arena_create(NULL, NULL, 1);
		void *q[PER + 60];
		int j;

		for (j = 0; j < PER + 60; j++)
			q[j] = arena_alloc(b, LEN); /* two chunks */
		for (j = 0; j < PER; j++)
			arena_free(b, q[j], LEN);
		assert_int_equal(arena_chunks(b), 2);
		/* the empty one is the emptiest: gone; it freed no live byte, so the other is
		 * marked */
		arena_evacuate(b, 1);
		assert_int_equal(arena_chunks(b), 1);
		assert_int_equal(arena_evac_chunks(b), 1);
		for (j = 0; j < 100; j++) /* the free lists hold nothing of the unmapped chunk */
			memset(arena_alloc(b, LEN), 1, LEN);
		arena_destroy(b);
	}
	/* free 15 of every 16: the chunks stay (each keeps some) */
	for (i = 0; i < N; i++)
		if (i % 16) {
			arena_free(a, p[i], LEN);
			p[i] = NULL;
		}
	assert_int_equal(arena_chunks(a), chunks);
	/*
	 * PER / 16 live blocks a full chunk; the newest chunk holds N % PER
	 * blocks (70 of 262), so a sixteenth of those: it is the emptiest and
	 * short of a full chunk's live bytes, which the next emptiest brings.
	 */
	assert_true(N % PER < PER / 2);
	marked = arena_evacuate(a, (size_t)LEN * (PER / 16));
	assert_true(marked >= (size_t)LEN * (PER / 16));
	evac = arena_evac_chunks(a);
	assert_int_equal(evac, 2);
	/* new blocks go elsewhere */
	for (i = 0; i < 50; i++) {
		unsigned char *q = arena_alloc(a, LEN);

		assert_non_null(q);
		assert_false(arena_evacuating(a, q));
		arena_free(a, q, LEN);
	}
	/* move what is in them: the chunks go */
	for (i = 0; i < N; i++)
		if (p[i] && arena_evacuating(a, p[i])) {
			assert_int_equal(p[i][LEN - 1], i & 0xff); /* bytes intact until moved */
			arena_free(a, p[i], LEN);
			p[i] = NULL;
			moved++;
		}
	assert_true(moved > 0);
	assert_int_equal(arena_evac_chunks(a), 0);
	assert_true(arena_chunks(a) <= chunks - evac + 1); /* one new chunk for the 50 blocks */
	assert_true(arena_chunks_freed(a) >= 2);
	assert_int_equal(seen.deleted, (int)arena_chunks_freed(a));
	/* the rest is intact */
	for (i = 0; i < N; i++)
		if (p[i])
			assert_int_equal(p[i][0], i & 0xff);
	arena_destroy(a);
	assert_int_equal(seen.deleted, seen.added);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_blocks),
	    cmocka_unit_test(test_evacuate),
	};

	return cmocka_run_group_tests_name("arena", tests, NULL, NULL);
}
