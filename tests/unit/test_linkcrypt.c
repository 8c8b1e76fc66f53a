/*
 * test_linkcrypt - frame protection (node/cluster/linkcrypt.c): both ciphers, both
 * modes; a frame opens once, in order, on its own link and direction only;
 * any changed byte fails; secure mode leaves no plaintext on the wire,
 * integrity mode leaves it and still refuses a change.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "node/cluster/linkcrypt.h"

static const char marker[] = "TOPSECRET card 4111 1111 1111 1111";

struct pair {
	struct lc_link d, a; /* dialer and acceptor ends */
};

static void pair_init(struct pair *p, bool aes, bool integrity, uint8_t salt)
{
	uint8_t material[2 * LC_KEY_LEN];

	memset(material, salt, sizeof(material));
	for (size_t i = 0; i < sizeof(material); i++)
		material[i] ^= (uint8_t)i;
	lc_init(&p->d, material, true, aes, integrity);
	lc_init(&p->a, material, false, aes, integrity);
}

/* msg part and payload of one sealed frame */
struct frame {
	uint8_t m[256], p[4096];
	size_t len, plen;
};

static bool sealed_pay; /* the next seal's payload is a sealed page: MAC'd only */

static void seal(struct lc_link *k, struct frame *f, const char *msg, const uint8_t *pay,
		 size_t plen)
{
	uint8_t pout[4096];
	const uint8_t *out;

	f->len =
	    lc_seal(k, (const uint8_t *)msg, strlen(msg), pay, plen, sealed_pay, f->m, pout, &out);
	f->plen = plen;
	if (plen)
		memcpy(f->p, out, plen);
	lc_sent(k);
}

static int open_frame(struct lc_link *k, const struct frame *f, char *msg_out, uint8_t *pay_out)
{
	uint8_t mout[256], pout[4096];
	const uint8_t *msg, *pay;
	size_t len;
	int rc = lc_open(k, f->m, f->len, f->p, f->plen, mout, pout, &msg, &len, &pay);

	if (rc)
		return rc;
	memcpy(msg_out, msg, len);
	msg_out[len] = '\0';
	if (f->plen)
		memcpy(pay_out, pay, f->plen);
	return 0;
}

static void one_case(bool aes, bool integrity)
{
	struct pair p, q;
	struct frame f, g, h;
	uint8_t page[4096], back[4096];
	char msg[256];
	struct lc_link save;

	for (size_t i = 0; i < sizeof(page); i += sizeof(marker))
		memcpy(page + i, marker,
		       sizeof(page) - i < sizeof(marker) ? sizeof(page) - i : sizeof(marker));
	pair_init(&p, aes, integrity, 1);
	pair_init(&q, aes, integrity, 2);

	/* round trip both ways */
	seal(&p.d, &f, "hello acceptor", page, sizeof(page));
	assert_int_equal(open_frame(&p.a, &f, msg, back), 0);
	assert_string_equal(msg, "hello acceptor");
	assert_memory_equal(back, page, sizeof(page));
	seal(&p.a, &g, "hello dialer", NULL, 0);
	assert_int_equal(open_frame(&p.d, &g, msg, back), 0);
	assert_string_equal(msg, "hello dialer");

	/* a payload that is a sealed page already: MAC'd, not encrypted twice; still checked */
	sealed_pay = true;
	seal(&p.d, &g, "a sealed page", page, sizeof(page));
	sealed_pay = false;
	assert_memory_equal(g.p, page, sizeof(page));
	h = g;
	h.p[100] ^= 1;
	save = p.a;
	assert_int_equal(open_frame(&save, &h, msg, back), -EBADMSG);
	h = g;
	h.m[strlen("a sealed page")] ^= 1; /* the flag: claim it was encrypted */
	save = p.a;
	assert_int_equal(open_frame(&save, &h, msg, back), -EBADMSG);
	assert_int_equal(open_frame(&p.a, &g, msg, back), 0);
	assert_memory_equal(back, page, sizeof(page));
	assert_string_equal(msg, "a sealed page");

	/* on the wire: secure hides the page and the message; integrity does not */
	seal(&p.d, &f, "TOPSECRET in the message", page, sizeof(page));
	assert_true((memmem(f.p, f.plen, marker, strlen(marker)) != NULL) == integrity);
	assert_true((memmem(f.m, f.len, "TOPSECRET", 9) != NULL) == integrity);

	/* a replay (the frame just opened) fails */
	save = p.a;
	assert_int_equal(open_frame(&p.a, &f, msg, back), 0);
	assert_int_equal(open_frame(&p.a, &f, msg, back), -EBADMSG);
	p.a = save;

	/* a frame from another link, or reflected back to its sender, fails */
	assert_int_equal(open_frame(&q.a, &f, msg, back), -EBADMSG);
	assert_int_equal(open_frame(&p.d, &f, msg, back), -EBADMSG);

	/* any changed byte of msg part or payload fails; so does a cut */
	for (size_t i = 0; i < f.len; i += 7) {
		h = f;
		h.m[i] ^= 0x20;
		save = p.a;
		assert_int_equal(open_frame(&save, &h, msg, back), -EBADMSG);
	}
	for (size_t i = 0; i < f.plen; i += 509) {
		h = f;
		h.p[i] ^= 0x01;
		save = p.a;
		assert_int_equal(open_frame(&save, &h, msg, back), -EBADMSG);
	}
	h = f;
	h.plen -= 1;
	save = p.a;
	assert_int_equal(open_frame(&save, &h, msg, back), -EBADMSG);
	h = f;
	h.len = LC_OVERHEAD - 1;
	assert_int_equal(open_frame(&save, &h, msg, back), -EBADMSG);

	/* reordered: the second frame first fails; in order both open */
	seal(&p.d, &g, "second", NULL, 0);
	save = p.a;
	assert_int_equal(open_frame(&save, &g, msg, back), -EBADMSG);
	assert_int_equal(open_frame(&p.a, &f, msg, back), 0);
	assert_int_equal(open_frame(&p.a, &g, msg, back), 0);
	assert_string_equal(msg, "second");
	lc_wipe(&p.d);
	lc_wipe(&p.a);
}

static void test_aes_secure(void **state)
{
	if (!(lc_ciphers() & LC_CIPHER_AES))
		skip();
	one_case(true, false);
}

static void test_aes_integrity(void **state)
{
	if (!(lc_ciphers() & LC_CIPHER_AES))
		skip();
	one_case(true, true);
}

static void test_xchacha_secure(void **state)
{
	one_case(false, false);
}

static void test_xchacha_integrity(void **state)
{
	one_case(false, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_aes_secure),
	    cmocka_unit_test(test_aes_integrity),
	    cmocka_unit_test(test_xchacha_secure),
	    cmocka_unit_test(test_xchacha_integrity),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
