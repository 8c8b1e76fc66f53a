/*
 * fuzz_linkcrypt.c - libFuzzer target for a peer link's frame protection
 * (node/cluster/linkcrypt.h), the first thing every frame of an authenticated link
 * meets.
 *
 * An input is a control byte (bit 0: AES-256-GCM if the CPU has it, bit 1:
 * integrity mode, bit 2: the payload is a sealed page, MAC'd only), a 2-byte
 * little-endian split, then bytes. Two things are
 * checked with fixed link keys:
 *   1. the bytes as a received frame (msg part = the first split bytes, the
 *      rest the payload): lc_open must refuse it (a forger without the key
 *      cannot make a tag) and touch nothing outside its buffers;
 *   2. the bytes as a message and payload sealed by the sender: the receiver
 *      opens exactly them; a copy with one bit flipped (chosen by the input)
 *      or sent a second time is refused.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/cluster/linkcrypt.h"
#include "tests/fuzz/fuzz.h"

#define FUZZ_MSG_MAX 1024
#define FUZZ_PAY_MAX 4096

static uint8_t mout[FUZZ_MSG_MAX + LC_OVERHEAD], pout[FUZZ_PAY_MAX];
static uint8_t sealed[FUZZ_MSG_MAX + LC_OVERHEAD], spay[FUZZ_PAY_MAX], flip[FUZZ_PAY_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t material[2 * LC_KEY_LEN] = {1, 2, 3, 4, 5, 6, 7, 8};
	struct lc_link tx, rx, rx2;
	const uint8_t *msg, *pay, *sp;
	size_t split, len, plen, n, bit;
	bool aes, integrity, sealed_pay;

	if (size < 3 || sodium_init() < 0)
		return 0;
	aes = (data[0] & 1) && (lc_ciphers() & LC_CIPHER_AES);
	integrity = data[0] & 2;
	sealed_pay = data[0] & 4;
	split = (size_t)data[1] | (size_t)data[2] << 8;
	data += 3;
	size -= 3;
	if (split > size)
		split = size;
	if (split > FUZZ_MSG_MAX || size - split > FUZZ_PAY_MAX)
		return 0;
	plen = size - split;
	lc_init(&tx, material, true, aes, integrity);
	lc_init(&rx, material, false, aes, integrity);

	/* 1: a frame nobody sealed */
	rx2 = rx;
	fuzz_assert(lc_open(&rx2, data, split, data + split, plen, mout, pout, &msg, &len, &pay) ==
		    -EBADMSG);
	fuzz_assert(rx2.rx.ctr == 0);

	/* 2: sealed by the sender: opens once, whole; a flipped bit or a replay does not */
	n = lc_seal(&tx, data, split, data + split, plen, sealed_pay, sealed, spay, &sp);
	fuzz_assert(n == split + LC_OVERHEAD);
	lc_sent(&tx);
	if (plen)
		memcpy(flip, sp, plen);
	rx2 = rx;
	bit = (split ? data[0] : 0) * 8u % ((n + plen) * 8);
	if (bit / 8 < n)
		sealed[bit / 8] ^= (uint8_t)(1u << bit % 8);
	else
		flip[bit / 8 - n] ^= (uint8_t)(1u << bit % 8);
	fuzz_assert(lc_open(&rx2, sealed, n, flip, plen, mout, pout, &msg, &len, &pay) == -EBADMSG);
	if (bit / 8 < n)
		sealed[bit / 8] ^= (uint8_t)(1u << bit % 8);
	else
		flip[bit / 8 - n] ^= (uint8_t)(1u << bit % 8);
	fuzz_assert(lc_open(&rx, sealed, n, flip, plen, mout, pout, &msg, &len, &pay) == 0);
	fuzz_assert(len == split && !memcmp(msg, data, split));
	fuzz_assert(!plen || !memcmp(pay, data + split, plen));
	fuzz_assert(lc_open(&rx, sealed, n, flip, plen, mout, pout, &msg, &len, &pay) == -EBADMSG);
	lc_wipe(&tx);
	lc_wipe(&rx);
	return 0;
}
