/*
 * linkcrypt.h - protection of a peer link's frames after the handshake
 * (docs/security.md, docs/protocol.md "Frame protection").
 *
 * Each direction of a link has its own 256-bit key, derived in the handshake
 * from the cluster key and both hellos (link.c), and a frame counter that is
 * the AEAD nonce: nothing of it travels. A frame is sealed as
 *
 *   msg part on the wire:  body (len) | flag (1) | tag_p (16) | tag_m (16)
 *   payload on the wire:   plen bytes
 *
 *   payload:    encrypted under nonce (ctr, 1) -> tag_p (flag 0); or, flag 1,
 *               MAC'd only: tag_p = AEAD of nothing, associated data the payload
 *               (integrity mode, and a sealed page in either mode: node/remote/seal.h
 *               has encrypted it already, it is not encrypted twice)
 *   message:    secure: encrypted under nonce (ctr, 0), associated data flag | tag_p;
 *               integrity: tag_m = AEAD of nothing, associated data body | flag | tag_p
 *
 * so one frame's two tags bind message, payload, flag and both lengths to its
 * counter: a changed, injected, replayed, reordered or dropped frame, or one
 * from another link, fails the next check. AES-256-GCM where both ends have it
 * in hardware, XChaCha20-Poly1305 otherwise (libsodium).
 */
#ifndef RAMSTER_NODE_LINKCRYPT_H
#define RAMSTER_NODE_LINKCRYPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sodium.h>

#define LC_TAG_LEN    16
#define LC_OVERHEAD   (1 + 2 * LC_TAG_LEN) /* bytes a sealed frame's msg part grows by */
#define LC_KEY_LEN    32
#define LC_CIPHER_AES 1u /* Hello.ciphers bit */

enum lc_security { LC_SECURE = 1, LC_INTEGRITY = 2 }; /* Hello.security */

/* One direction: key and counter. */
struct lc_dir {
	crypto_aead_aes256gcm_state aes; /* expanded key (AES only) */
	uint8_t key[LC_KEY_LEN];
	uint64_t ctr; /* the next frame's */
};

struct lc_link {
	struct lc_dir tx, rx;
	bool aes;	/* AES-256-GCM, else XChaCha20-Poly1305 */
	bool integrity; /* MAC only */
};

/* The Hello.ciphers bits this machine can run (after sodium_init). */
uint32_t lc_ciphers(void);

/* "aes-256-gcm" or "xchacha20-poly1305". */
const char *lc_cipher_name(const struct lc_link *k);

/*
 * Set k's keys from 64 bytes of key material (tx = the first half when
 * dialer, else the second), the cipher (aes) and the mode; counters at 0.
 */
void lc_init(struct lc_link *k, const uint8_t material[2 * LC_KEY_LEN], bool dialer, bool aes,
	     bool integrity);

/* Forget k's keys. */
void lc_wipe(struct lc_link *k);

/*
 * Seal one frame: msg (len bytes) into out (room for len + LC_OVERHEAD);
 * payload (plen) into pout (room for plen) in secure mode, left alone in
 * integrity mode or when sealed_pay says it is a sealed page (send payload
 * itself: *pay says which to send). Uses the
 * tx counter without advancing it: lc_sent does once the transport took the
 * frame (a frame it refused never left the process, so its counter is free).
 * @return the msg part's length.
 */
size_t lc_seal(const struct lc_link *k, const uint8_t *msg, size_t len, const uint8_t *payload,
	       size_t plen, bool sealed_pay, uint8_t *out, uint8_t *pout, const uint8_t **pay);
void lc_sent(struct lc_link *k);

/*
 * Open one frame (msg part in, inlen bytes; payload plen): check both tags
 * under the rx counter and advance it. In secure mode the message goes to
 * mout (room for inlen) and the payload to pout (room for plen); in
 * integrity mode *msg and *pay point into the input (*pay also for a payload
 * sent MAC'd only). @return 0 with *msg,
 * *len, *pay set, or -EBADMSG (the link must close).
 */
int lc_open(struct lc_link *k, const uint8_t *in, size_t inlen, const uint8_t *payload, size_t plen,
	    uint8_t *mout, uint8_t *pout, const uint8_t **msg, size_t *len, const uint8_t **pay);

#endif /* RAMSTER_NODE_LINKCRYPT_H */
