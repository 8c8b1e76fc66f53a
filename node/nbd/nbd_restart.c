/*
 * nbd_restart.c - the exports across a warm restart (nbd.h, node/restart/).
 *
 * An export's pages are in its tmem pool, which the tier's snapshot carries;
 * what the export knows of its blocks is its bitmaps, saved as they are:
 * present, and with a backing file in_backing, dirty, unsynced and lost (a
 * re-executed node keeps the page cache the file went through: a block the
 * file was written is as good as before, and unsynced still asks the next
 * FLUSH for an fdatasync). The export must be the same (name, size, place in
 * the config, backing or not) to take them back.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "node/log.h"
#include "node/nbd/nbd_int.h"
#include "node/store.h"

/* NBDX record: u32 pool, u32 number, u64 size, u32 name length, u32 backing (0/1);
 * then the name, then the bitmaps (present; with backing in_backing, dirty, unsynced, lost). */
#define NBDX_HEAD 24

static size_t map_bytes(uint64_t blocks)
{
	return (size_t)((blocks + 63) / 64) * 8;
}

int nbd_save(const struct nbd *n,
	     int (*emit)(void *arg, uint16_t tag, const void *head, size_t head_len,
			 const void *body, size_t body_len),
	     void *arg)
{
	uint8_t head[NBDX_HEAD];
	size_t i;
	int rc;

	for (i = 0; n && i < n->n_exports; i++) {
		const struct nbd_export *e = &n->exports[i];
		bool backing = e->in_backing != NULL;
		size_t nlen = strlen(e->name), mb = map_bytes(e->blocks);
		size_t len = nlen + mb * (backing ? 5 : 1);
		uint8_t *body;

		if (!e->has_pool)
			continue;
		body = malloc(len);
		if (!body)
			return -ENOMEM;
		put_le32(head, (uint32_t)e->pool);
		put_le32(head + 4, (uint32_t)e->number);
		put_le64(head + 8, e->size);
		put_le32(head + 16, (uint32_t)nlen);
		put_le32(head + 20, (uint32_t)backing);
		memcpy(body, e->name, nlen);
		memcpy(body + nlen, e->present, mb);
		if (backing) {
			memcpy(body + nlen + mb, e->in_backing, mb);
			memcpy(body + nlen + 2 * mb, e->dirty, mb);
			memcpy(body + nlen + 3 * mb, e->unsynced, mb);
			memcpy(body + nlen + 4 * mb, e->lost, mb);
		}
		rc = emit(arg, NBD_TAG_EXPORT, head, sizeof(head), body, len);
		free(body);
		if (rc)
			return rc;
	}
	return 0;
}

int nbd_record_parse(const uint8_t *rec, size_t len, struct nbd_saved *out)
{
	uint64_t nlen, maps;

	if (len < NBDX_HEAD)
		return -EBADMSG;
	out->pool = get_le32(rec);
	out->number = get_le32(rec + 4);
	out->size = get_le64(rec + 8);
	nlen = get_le32(rec + 16);
	out->backing = get_le32(rec + 20);
	if (out->backing > 1 || !nlen || nlen >= sizeof(out->name) || nlen > len - NBDX_HEAD ||
	    out->size % NBD_PAGE || !out->size)
		return -EBADMSG;
	memcpy(out->name, rec + NBDX_HEAD, nlen);
	out->name[nlen] = '\0';
	if (memchr(out->name, '\0', nlen))
		return -EBADMSG;
	maps = map_bytes(out->size / NBD_PAGE) * (out->backing ? 5 : 1);
	if (len - NBDX_HEAD - nlen != maps)
		return -EBADMSG;
	out->maps = rec + NBDX_HEAD + nlen;
	return 0;
}

int nbd_adopt(struct nbd *n, const struct nbd_saved *s)
{
	struct tmem *t = store_tmem(n->store);
	struct tmem_pool_info info;
	struct nbd_export *e;
	size_t i, mb;
	uint64_t b;

	for (i = 0; i < n->n_exports; i++)
		if (!strcmp(n->exports[i].name, s->name))
			break;
	if (i == n->n_exports)
		return -ENOENT;
	e = &n->exports[i];
	mb = map_bytes(e->blocks);
	if (e->size != s->size || e->number != s->number || (e->in_backing != NULL) != s->backing ||
	    tmem_pool_info(t, s->pool, &info) || info.flags != (TMEM_PERSISTENT | TMEM_KEEP_ALL))
		return -ESTALE; /* the export changed: its old pages are not its blocks */
	memcpy(e->present, s->maps, mb);
	if (s->backing) {
		memcpy(e->in_backing, s->maps + mb, mb);
		memcpy(e->dirty, s->maps + 2 * mb, mb);
		memcpy(e->unsynced, s->maps + 3 * mb, mb);
		memcpy(e->lost, s->maps + 4 * mb, mb);
		e->backing_pages = 0;
		for (b = 0; b < e->blocks; b++)
			e->backing_pages += bit_test(e->in_backing, b);
	}
	/* the pool made for it at start is empty: the restored one takes its place */
	if (e->has_pool)
		(void)store_pool_destroy(n->store, e->pool);
	e->pool = s->pool;
	e->has_pool = true;
	log_notice("export %s: its %llu pages kept across the restart", e->name,
		   (unsigned long long)info.pages);
	return 0;
}
