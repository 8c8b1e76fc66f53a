/*
 * erasure.h - a page's bytes as K data and M parity fragments (Reed-Solomon
 * over GF(2^8) with a Cauchy matrix, ISA-L), any K of which give the bytes
 * back (docs/erasure.md).
 *
 * The fragments of len bytes are erasure_frag_len(k, len) bytes each: the
 * data fragments are the bytes cut in K (the last padded with zeros), so a
 * read of the K data fragments costs no arithmetic at all; the parity ones
 * are computed. Thread-safe: a codec is read-only after erasure_create.
 *
 * A stripe (stripe.h) codes across pages instead: its K data fragments are K
 * whole sealed pages padded to one length; erasure_encode_parity and
 * erasure_rebuild_frag work on such fragments, one length each, not on bytes cut.
 */
#ifndef RAMSTER_NODE_ERASURE_H
#define RAMSTER_NODE_ERASURE_H

#include <stddef.h>
#include <stdint.h>

#define ERASURE_MAX 8          /* K + M at most (a replica set's slots: tmem/replica.h) */
#define ERASURE_DATA_MAX 4160  /* bytes coded at most (a sealed page: seal.h) */
#define ERASURE_FRAG_MAX (ERASURE_DATA_MAX / 2) /* K >= 2 */
#define ERASURE_STRIPE_FRAG_MAX 4160 /* a stripe's fragment at most: one whole sealed page */

struct erasure;

/* @return a K+M codec (2 <= k, 1 <= m, k + m <= ERASURE_MAX), or NULL (bad k or m, memory). */
struct erasure *erasure_create(unsigned k, unsigned m);
void erasure_destroy(struct erasure *e); /* NULL ok */
unsigned erasure_k(const struct erasure *e);
unsigned erasure_m(const struct erasure *e);

/* The bytes of each fragment of len bytes cut in k: ceil(len / k). */
static inline size_t erasure_frag_len(unsigned k, size_t len)
{
	return (len + k - 1) / k;
}

/*
 * Cut len (1..ERASURE_DATA_MAX) bytes of data into the K + M fragments, one
 * after the other in out (room for (K + M) * erasure_frag_len(K, len)).
 */
void erasure_encode(const struct erasure *e, const void *data, size_t len, uint8_t *out);

/*
 * The len bytes back from K fragments: frag[i] is fragment number idx[i]
 * (distinct, < K + M), each erasure_frag_len(K, len) bytes, into out (room
 * for len). @return 0, or -EINVAL (a bad or repeated index, a bad length).
 */
int erasure_decode(const struct erasure *e, const uint8_t *idx, const uint8_t *const *frag,
		   size_t len, uint8_t *out);

/*
 * Fragment number want of the len bytes, from K fragments as erasure_decode
 * takes them, into out (erasure_frag_len bytes): a lost holder's fragment
 * made again. @return 0, -EINVAL.
 */
int erasure_rebuild(const struct erasure *e, const uint8_t *idx, const uint8_t *const *frag,
		    size_t len, unsigned want, uint8_t *out);

/*
 * The M parity fragments of K data fragments of flen (1..ERASURE_STRIPE_FRAG_MAX)
 * bytes each, already padded by the caller: data[i], i < K, in; parity[i],
 * i < M, out (flen bytes each).
 */
void erasure_encode_parity(const struct erasure *e, const uint8_t *const *data, size_t flen,
			   uint8_t *const *parity);

/*
 * Fragment number want (< K + M) from K fragments of flen bytes each, as
 * erasure_decode takes them (frag[i] is fragment idx[i]: distinct, < K + M),
 * into out (flen bytes): erasure_rebuild of K * flen bytes without the bound
 * of ERASURE_DATA_MAX. @return 0, or -EINVAL (a bad or repeated index, flen 0
 * or above ERASURE_STRIPE_FRAG_MAX, want out of range).
 */
int erasure_rebuild_frag(const struct erasure *e, const uint8_t *idx, const uint8_t *const *frag,
			 size_t flen, unsigned want, uint8_t *out);

#endif /* RAMSTER_NODE_ERASURE_H */
