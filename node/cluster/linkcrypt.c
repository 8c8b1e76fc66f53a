/*
 * linkcrypt.c - a peer link's frame protection (linkcrypt.h): per-direction
 * AEAD with a counter nonce, AES-256-GCM or XChaCha20-Poly1305 (libsodium).
 */

#include <errno.h>
#include <string.h>

#include "node/cluster/linkcrypt.h"

_Static_assert(crypto_aead_aes256gcm_ABYTES == LC_TAG_LEN, "gcm tag");
_Static_assert(crypto_aead_xchacha20poly1305_ietf_ABYTES == LC_TAG_LEN, "poly1305 tag");
_Static_assert(crypto_aead_aes256gcm_KEYBYTES == LC_KEY_LEN, "gcm key");
_Static_assert(crypto_aead_xchacha20poly1305_ietf_KEYBYTES == LC_KEY_LEN, "xchacha key");

/* the longer nonce; AES-GCM takes its first 12 bytes */
#define LC_NONCE_MAX crypto_aead_xchacha20poly1305_ietf_NPUBBYTES

uint32_t lc_ciphers(void)
{
	return crypto_aead_aes256gcm_is_available() ? LC_CIPHER_AES : 0;
}

const char *lc_cipher_name(const struct lc_link *k)
{
	return k->aes ? "aes-256-gcm" : "xchacha20-poly1305";
}

void lc_init(struct lc_link *k, const uint8_t material[2 * LC_KEY_LEN], bool dialer, bool aes,
	     bool integrity)
{
	memset(k, 0, sizeof(*k));
	memcpy(k->tx.key, material + (dialer ? 0 : LC_KEY_LEN), LC_KEY_LEN);
	memcpy(k->rx.key, material + (dialer ? LC_KEY_LEN : 0), LC_KEY_LEN);
	k->aes = aes;
	k->integrity = integrity;
	if (aes) {
		crypto_aead_aes256gcm_beforenm(&k->tx.aes, k->tx.key);
		crypto_aead_aes256gcm_beforenm(&k->rx.aes, k->rx.key);
	}
}

void lc_wipe(struct lc_link *k)
{
	sodium_memzero(k, sizeof(*k));
}

/* nonce = counter (8 bytes, little-endian), part (1 byte), zeros */
static void lc_nonce(uint8_t n[LC_NONCE_MAX], uint64_t ctr, uint8_t part)
{
	int i;

	memset(n, 0, LC_NONCE_MAX);
	for (i = 0; i < 8; i++)
		n[i] = (uint8_t)(ctr >> (8 * i));
	n[8] = part;
}

/* libsodium wants a ciphertext pointer even for nothing to encrypt */
static uint8_t lc_none[1];

/* Encrypt m (mlen; may be 0) into c with associated data ad; tag to mac. */
static void lc_enc(const struct lc_link *k, const struct lc_dir *d, uint8_t part, uint8_t *c,
		   uint8_t *mac, const uint8_t *m, size_t mlen, const uint8_t *ad, size_t adlen)
{
	uint8_t n[LC_NONCE_MAX];

	if (!c)
		c = lc_none;

	lc_nonce(n, d->ctr, part);
	if (k->aes)
		crypto_aead_aes256gcm_encrypt_detached_afternm(c, mac, NULL, m, mlen, ad, adlen,
							       NULL, n, &d->aes);
	else
		crypto_aead_xchacha20poly1305_ietf_encrypt_detached(c, mac, NULL, m, mlen, ad,
								    adlen, NULL, n, d->key);
}

/* @return 0, or -1 when the tag is wrong. */
static int lc_dec(const struct lc_link *k, const struct lc_dir *d, uint8_t part, uint8_t *m,
		  const uint8_t *c, size_t clen, const uint8_t *mac, const uint8_t *ad,
		  size_t adlen)
{
	uint8_t n[LC_NONCE_MAX];

	if (!c)
		c = lc_none;

	lc_nonce(n, d->ctr, part);
	if (k->aes)
		return crypto_aead_aes256gcm_decrypt_detached_afternm(m, NULL, c, clen, mac, ad,
								      adlen, n, &d->aes);
	return crypto_aead_xchacha20poly1305_ietf_decrypt_detached(m, NULL, c, clen, mac, ad, adlen,
								   n, d->key);
}

size_t lc_seal(const struct lc_link *k, const uint8_t *msg, size_t len, const uint8_t *payload,
	       size_t plen, bool sealed_pay, uint8_t *out, uint8_t *pout, const uint8_t **pay)
{
	uint8_t *flag = out + len, *tag_p = flag + 1, *tag_m = tag_p + LC_TAG_LEN;
	bool mac_only = k->integrity || sealed_pay;

	*flag = mac_only;
	if (mac_only) {
		lc_enc(k, &k->tx, 1, NULL, tag_p, NULL, 0, payload, plen);
		*pay = payload;
	} else {
		lc_enc(k, &k->tx, 1, pout, tag_p, payload, plen, NULL, 0);
		*pay = plen ? pout : NULL;
	}
	if (k->integrity) {
		if (out != msg)
			memmove(out, msg, len);
		lc_enc(k, &k->tx, 0, NULL, tag_m, NULL, 0, out, len + 1 + LC_TAG_LEN);
	} else {
		lc_enc(k, &k->tx, 0, out, tag_m, msg, len, flag, 1 + LC_TAG_LEN);
	}
	return len + LC_OVERHEAD;
}

void lc_sent(struct lc_link *k)
{
	k->tx.ctr++;
}

int lc_open(struct lc_link *k, const uint8_t *in, size_t inlen, const uint8_t *payload, size_t plen,
	    uint8_t *mout, uint8_t *pout, const uint8_t **msg, size_t *len, const uint8_t **pay)
{
	const uint8_t *flag, *tag_p, *tag_m;
	size_t n;

	if (inlen < LC_OVERHEAD)
		return -EBADMSG;
	n = inlen - LC_OVERHEAD;
	flag = in + n;
	tag_p = flag + 1;
	tag_m = tag_p + LC_TAG_LEN;
	if (*flag > 1 || (k->integrity && !*flag))
		return -EBADMSG;
	/* the message first: its tag covers the flag and the payload's tag */
	if (k->integrity) {
		if (lc_dec(k, &k->rx, 0, mout, in, 0, tag_m, in, n + 1 + LC_TAG_LEN))
			return -EBADMSG;
		*msg = in;
	} else {
		if (lc_dec(k, &k->rx, 0, mout, in, n, tag_m, flag, 1 + LC_TAG_LEN))
			return -EBADMSG;
		*msg = mout;
	}
	if (*flag) {
		if (lc_dec(k, &k->rx, 1, pout, payload, 0, tag_p, payload, plen))
			return -EBADMSG;
		*pay = plen ? payload : NULL;
	} else {
		if (lc_dec(k, &k->rx, 1, pout, payload, plen, tag_p, NULL, 0))
			return -EBADMSG;
		*pay = plen ? pout : NULL;
	}
	*len = n;
	k->rx.ctr++;
	return 0;
}
