/*
 * seal.h - sealed pages: what an owner sends a holder (docs/security.md).
 *
 * The owner seals every page it places on a peer with a key only it holds
 * (random, made at start: a restart forgets every copy anyway, so nothing
 * sealed by an earlier incarnation is ever opened), AEAD with the page's
 * identity as associated data:
 *
 *   blob = version (8, little-endian) | body (len) | tag (16)
 *   associated data = "ramster-page-v1" owner (4) pool (4) oid (3 x 8)
 *                     index (4) version (8) len (4)
 *   nonce = version (8) | zeros
 *
 * version counts seals (one counter per incarnation: a nonce is never used
 * twice under a key). The owner keeps the low 32 bits of it where adler32
 * was (the remote descriptor's and the replica record's checksum field), so
 * a holder can neither read a page (secure: the body is encrypted), nor
 * answer with another page (its identity is in the tag), nor with an older
 * version of the same page (the version is in the tag and must match what
 * the owner kept), nor change a byte. In integrity mode (link_security =
 * integrity) the body is in the clear and only the tag protects it.
 *
 * Thread-safe: seal_page from any thread, seal_open from any thread.
 */
#ifndef RAMSTER_NODE_SEAL_H
#define RAMSTER_NODE_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tmem/tmem.h"

#define SEAL_OVERHEAD 24 /* version (8) and tag (16) */
#define SEAL_PAGE_MAX 4096
#define SEAL_BLOB_MAX (SEAL_PAGE_MAX + SEAL_OVERHEAD)

struct seal;

/* A fresh random key. @return the sealer, or NULL (libsodium or memory). */
struct seal *seal_create(uint32_t owner, bool integrity);
void seal_destroy(struct seal *s); /* NULL ok; wipes the key */

/* "aes-256-gcm" or "xchacha20-poly1305" (what this machine runs). */
const char *seal_cipher(const struct seal *s);

/*
 * Seal len (1..SEAL_PAGE_MAX) compressed bytes of page h into out (room for
 * len + SEAL_OVERHEAD). *version gets the 32 bits the owner keeps.
 * @return the blob's length.
 */
/*
 * The last version sealed so far: every page sealed from now on has a larger
 * one (a flush issued now names it as its horizon, foreign.h). Any thread.
 */
uint64_t seal_horizon(const struct seal *s);

/*
 * A warm restart keeps the key, so that the copies on peers still open, and
 * the version counter, so that no nonce is used twice under it: seal_save
 * writes both (the key: SEAL_KEY_BYTES); seal_load takes them back into a
 * sealer made by seal_create for the same owner and mode. @return 0, or
 * -EPROTO (another cipher: a CPU without the instructions the key was used
 * with cannot open its pages).
 */
#define SEAL_KEY_BYTES 32
void seal_save(const struct seal *s, uint8_t key[SEAL_KEY_BYTES], uint64_t *version,
	       uint8_t *cipher);
int seal_load(struct seal *s, const uint8_t key[SEAL_KEY_BYTES], uint64_t version, uint8_t cipher);

size_t seal_page(struct seal *s, const struct tmem_handle *h, const void *data, size_t len,
		 uint8_t *out, uint32_t *version);

/*
 * Open blob (blen bytes) as page h sealed with version (the low 32 bits the
 * owner kept) and len compressed bytes, into out (room for len).
 * @return 0, or -EBADMSG (another page, another version, another owner,
 * changed bytes, a wrong length).
 */
int seal_open(const struct seal *s, const struct tmem_handle *h, uint32_t version, size_t len,
	      const uint8_t *blob, size_t blen, uint8_t *out);

#endif /* RAMSTER_NODE_SEAL_H */
