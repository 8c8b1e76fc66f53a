/*
 * seal.c - sealed pages (seal.h): AES-256-GCM where the CPU has it, else
 * XChaCha20-Poly1305 (libsodium), the page's identity and version as
 * associated data.
 */

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "common/util.h"
#include "node/remote/seal.h"

#define SEAL_LABEL     "ramster-page-v1"
#define SEAL_AD_LEN    (sizeof(SEAL_LABEL) - 1 + 4 + 4 + 24 + 4 + 8 + 4)
#define SEAL_TAG       16
#define SEAL_NONCE_MAX crypto_aead_xchacha20poly1305_ietf_NPUBBYTES

_Static_assert(crypto_aead_aes256gcm_ABYTES == SEAL_TAG, "gcm tag");
_Static_assert(crypto_aead_xchacha20poly1305_ietf_ABYTES == SEAL_TAG, "poly1305 tag");
_Static_assert(SEAL_OVERHEAD == 8 + SEAL_TAG, "version and tag");

struct seal {
	crypto_aead_aes256gcm_state aes; /* first: aligned */
	uint8_t key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES];
	bool use_aes, integrity;
	uint32_t owner;
	_Atomic uint64_t version; /* the last one used */
};

struct seal *seal_create(uint32_t owner, bool integrity)
{
	struct seal *s;

	if (sodium_init() < 0)
		return NULL;
	if (posix_memalign((void **)&s, 64, sizeof(*s)))
		return NULL;
	memset(s, 0, sizeof(*s));
	randombytes_buf(s->key, sizeof(s->key));
	s->use_aes = crypto_aead_aes256gcm_is_available();
	if (s->use_aes)
		crypto_aead_aes256gcm_beforenm(&s->aes, s->key);
	s->integrity = integrity;
	s->owner = owner;
	atomic_init(&s->version, 0);
	return s;
}

void seal_destroy(struct seal *s)
{
	if (!s)
		return;
	sodium_memzero(s, sizeof(*s));
	free(s);
}

void seal_save(const struct seal *s, uint8_t key[SEAL_KEY_BYTES], uint64_t *version,
	       uint8_t *cipher)
{
	_Static_assert(sizeof(s->key) == SEAL_KEY_BYTES, "key size");
	memcpy(key, s->key, SEAL_KEY_BYTES);
	*version = atomic_load(&s->version);
	*cipher = s->use_aes ? 1 : 2;
}

int seal_load(struct seal *s, const uint8_t key[SEAL_KEY_BYTES], uint64_t version, uint8_t cipher)
{
	if (cipher != (s->use_aes ? 1 : 2))
		return -EPROTO;
	memcpy(s->key, key, SEAL_KEY_BYTES);
	if (s->use_aes)
		crypto_aead_aes256gcm_beforenm(&s->aes, s->key);
	atomic_store(&s->version, version);
	return 0;
}

const char *seal_cipher(const struct seal *s)
{
	return s->use_aes ? "aes-256-gcm" : "xchacha20-poly1305";
}

static void seal_ad(const struct seal *s, const struct tmem_handle *h, uint64_t version, size_t len,
		    uint8_t ad[SEAL_AD_LEN])
{
	size_t n = sizeof(SEAL_LABEL) - 1;

	memcpy(ad, SEAL_LABEL, n);
	put_le32(ad + n, s->owner);
	put_le32(ad + n + 4, h->pool);
	put_le64(ad + n + 8, h->oid.w[0]);
	put_le64(ad + n + 16, h->oid.w[1]);
	put_le64(ad + n + 24, h->oid.w[2]);
	put_le32(ad + n + 32, h->index);
	put_le64(ad + n + 36, version);
	put_le32(ad + n + 44, (uint32_t)len);
}

uint64_t seal_horizon(const struct seal *s)
{
	return s ? atomic_load_explicit(&((struct seal *)s)->version, memory_order_acquire) : 0;
}

size_t seal_page(struct seal *s, const struct tmem_handle *h, const void *data, size_t len,
		 uint8_t *out, uint32_t *version)
{
	uint64_t v = atomic_fetch_add(&s->version, 1) + 1;

	/* no version's low 32 bits are 0: a put carries them to the holder, where 0
	 * means "not said" (foreign_flush_upto) */
	if ((uint32_t)v == 0)
		v = atomic_fetch_add(&s->version, 1) + 1;
	uint8_t ad[SEAL_AD_LEN + SEAL_PAGE_MAX], nonce[SEAL_NONCE_MAX] = {0};
	uint8_t *body = out + 8, *tag = out + 8 + len;
	size_t adlen = SEAL_AD_LEN;
	const uint8_t *m = data;
	size_t mlen = len;

	put_le64(out, v);
	put_le64(nonce, v);
	seal_ad(s, h, v, len, ad);
	if (s->integrity) {
		/* MAC only: the body rides in the associated data */
		memcpy(ad + SEAL_AD_LEN, data, len);
		adlen += len;
		memcpy(body, data, len);
		m = body; /* nothing is encrypted: mlen 0 */
		mlen = 0;
	}
	if (s->use_aes)
		crypto_aead_aes256gcm_encrypt_detached_afternm(body, tag, NULL, m, mlen, ad, adlen,
							       NULL, nonce, &s->aes);
	else
		crypto_aead_xchacha20poly1305_ietf_encrypt_detached(body, tag, NULL, m, mlen, ad,
								    adlen, NULL, nonce, s->key);
	*version = (uint32_t)v;
	return len + SEAL_OVERHEAD;
}

int seal_open(const struct seal *s, const struct tmem_handle *h, uint32_t version, size_t len,
	      const uint8_t *blob, size_t blen, uint8_t *out)
{
	uint8_t ad[SEAL_AD_LEN + SEAL_PAGE_MAX], nonce[SEAL_NONCE_MAX] = {0};
	const uint8_t *body = blob + 8, *tag;
	size_t adlen = SEAL_AD_LEN;
	uint64_t v;
	int rc;

	if (!len || len > SEAL_PAGE_MAX || blen != len + SEAL_OVERHEAD)
		return -EBADMSG;
	tag = blob + 8 + len;
	v = get_le64(blob);
	if ((uint32_t)v != version)
		return -EBADMSG; /* an older (or newer) version of the page */
	put_le64(nonce, v);
	seal_ad(s, h, v, len, ad);
	if (s->integrity) {
		memcpy(ad + SEAL_AD_LEN, body, len);
		adlen += len;
	}
	if (s->use_aes)
		rc = crypto_aead_aes256gcm_decrypt_detached_afternm(
		    out, NULL, body, s->integrity ? 0 : len, tag, ad, adlen, nonce, &s->aes);
	else
		rc = crypto_aead_xchacha20poly1305_ietf_decrypt_detached(
		    out, NULL, body, s->integrity ? 0 : len, tag, ad, adlen, nonce, s->key);
	if (rc)
		return -EBADMSG;
	if (s->integrity)
		memcpy(out, body, len);
	return 0;
}
