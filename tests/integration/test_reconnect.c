/*
 * test_reconnect.c - libramster reconnects on its own (issue 22): a client
 * whose connection is cut dials the node again, attaches its pools by their
 * tokens and goes on as if nothing happened; the node keeps the pools of a
 * dropped connection for reattach_grace_ms, for the same uid only.
 *
 * The cut is shutdown(2) of the client's own socket (ramster_fileno), as a
 * node that closed it would look. Raw frames (as test_badframes.c sends them)
 * reach the token, which the library keeps to itself, for the uid case.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#include "proto/wire.h"
#include "ramster.h"
#include "tests/integration/harness.h"

#define PAGE  RAMSTER_PAGE_SIZE
#define PAGES 5000

static const unsigned char uuid_s[16] = {0x2e, 0xc0, 0x22, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};

static uint64_t stat_of(ramster *admin, const char *name)
{
	uint64_t v = 0;

	assert_int_equal(harness_stat(admin, name, &v), 0);
	return v;
}

static void cut(ramster *r)
{
	int fd = ramster_fileno(r);

	assert_true(fd >= 0);
	assert_int_equal(shutdown(fd, SHUT_RDWR), 0);
}

/* Put PAGES text pages (seeded by pool and index) into pool, a batch at a time. */
static void put_all(ramster *r, int pool, uint64_t seed)
{
	static char pages[RAMSTER_BATCH_MAX][PAGE];
	struct ramster_iov v[RAMSTER_BATCH_MAX];
	size_t i, k, n;

	for (i = 0; i < PAGES; i += n) {
		n = PAGES - i < RAMSTER_BATCH_MAX ? PAGES - i : RAMSTER_BATCH_MAX;
		for (k = 0; k < n; k++) {
			v[k].oid = harness_oid(seed, (i + k) / 64);
			v[k].index = (uint32_t)((i + k) % 64);
			v[k].page = pages[k];
			harness_page_text(pages[k], seed * 1000003 + i + k);
		}
		assert_int_equal(ramster_putv(r, pool, v, n), (int)n);
	}
}

/* Every page of put_all reads back byte for byte. */
static void check_all(ramster *r, int pool, uint64_t seed)
{
	static char got[RAMSTER_BATCH_MAX][PAGE];
	char want[PAGE];
	struct ramster_iov v[RAMSTER_BATCH_MAX];
	size_t i, k, n;

	for (i = 0; i < PAGES; i += n) {
		n = PAGES - i < RAMSTER_BATCH_MAX ? PAGES - i : RAMSTER_BATCH_MAX;
		for (k = 0; k < n; k++) {
			v[k].oid = harness_oid(seed, (i + k) / 64);
			v[k].index = (uint32_t)((i + k) % 64);
			v[k].page = got[k];
		}
		assert_int_equal(ramster_getv(r, pool, v, n), (int)n);
		for (k = 0; k < n; k++) {
			harness_page_text(want, seed * 1000003 + i + k);
			assert_memory_equal(got[k], want, PAGE);
		}
	}
}

/* (a) Cut twice-used pools' connection: the next calls succeed, every page is there. */
static void test_transparent(void **state)
{
	static const char *const args[] = {"--local-mb", "128", NULL};
	struct harness h;
	ramster *r, *admin;
	int priv, shared;

	assert_int_equal(harness_start(&h, args), 0);
	r = harness_connect(&h);
	admin = harness_connect(&h);
	assert_non_null(r);
	assert_non_null(admin);
	assert_int_equal(ramster_set_reconnect_ms(r, 10000), 0);
	priv = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	shared = ramster_pool_new(r, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid_s);
	assert_true(priv >= 0 && shared >= 0 && priv != shared);
	put_all(r, priv, 1);
	put_all(r, shared, 2);

	cut(r);
	check_all(r, priv, 1); /* the first call after the cut reconnects */
	check_all(r, shared, 2);
	assert_int_equal(ramster_reconnects(r), 1);
	assert_int_equal(stat_of(admin, "client_pools_reattached"), 2);
	assert_int_equal(stat_of(admin, "client_pools_expired"), 0);
	/* the node's pools are the two, not two more */
	assert_int_equal(stat_of(admin, "node_pools_private"), 1);
	assert_int_equal(stat_of(admin, "node_pools_shared"), 1);

	/* a put right after a second cut: stored, and still the same pools */
	cut(r);
	put_all(r, priv, 3);
	check_all(r, priv, 3);
	assert_int_equal(ramster_reconnects(r), 2);
	assert_int_equal(ramster_pool_destroy(r, priv), 0);
	assert_int_equal(ramster_pool_destroy(r, shared), 0);
	assert_int_equal(stat_of(admin, "node_pools_private"), 0);
	ramster_close(r);
	ramster_close(admin);
	assert_int_equal(harness_stop(&h), 0);
}

/* (d) Reconnecting off: a cut connection fails the calls, as before. */
static void test_disabled(void **state)
{
	struct harness h;
	char page[PAGE];
	ramster *r;
	int pool;

	assert_int_equal(harness_start(&h, NULL), 0);
	r = harness_connect(&h);
	assert_non_null(r);
	assert_int_equal(ramster_set_reconnect_ms(r, 0), 0);
	pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	assert_true(pool >= 0);
	harness_page_text(page, 7);
	assert_int_equal(ramster_put(r, pool, &(struct ramster_oid){{1}}, 0, page), 0);
	cut(r);
	{
		int rc = ramster_get(r, pool, &(struct ramster_oid){{1}}, 0, page);

		assert_true(rc == -EPIPE || rc == -ECONNRESET);
	}
	assert_int_equal(ramster_get(r, pool, &(struct ramster_oid){{1}}, 0, page), -ENOTCONN);
	assert_int_equal(ramster_reconnects(r), 0);
	ramster_close(r);
	assert_int_equal(harness_stop(&h), 0);
}

/* A daemon whose [limits] reattach_grace_ms is grace_ms (a file in a temp dir). */
static void start_with_grace(struct harness *h, char *conf, size_t len, unsigned grace_ms)
{
	const char *args[] = {"--config", conf, "--node", "solo", NULL};
	char dir[] = "/tmp/ramster-reconnect-XXXXXX";
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(conf, len, "%s/ramster.conf", dir);
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f, "[node solo]\nlocal_mb = 32\n[limits]\nreattach_grace_ms = %u\n", grace_ms);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(harness_start(h, args), 0);
}

static void remove_conf(const char *conf)
{
	char dir[128];

	unlink(conf);
	snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(conf, '/') - conf), conf);
	rmdir(dir);
}

/* (c) Past the grace the pool is released; the library says -ESTALE for it alone. */
static void test_grace_expires(void **state)
{
	struct harness h;
	char conf[128], page[PAGE], got[PAGE];
	ramster *r, *admin;
	int old, fresh;

	start_with_grace(&h, conf, sizeof(conf), 300);
	r = harness_connect(&h);
	admin = harness_connect(&h);
	assert_non_null(r);
	assert_non_null(admin);
	old = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	assert_true(old >= 0);
	harness_page_text(page, 9);
	assert_int_equal(ramster_put(r, old, &(struct ramster_oid){{9}}, 0, page), 0);
	cut(r);
	usleep(1000 * 1000); /* the node detaches it, and 300 ms on releases it */
	assert_int_equal(stat_of(admin, "client_pools_detached"), 1);
	assert_int_equal(stat_of(admin, "client_pools_expired"), 1);
	assert_int_equal(stat_of(admin, "node_pools_private"), 0);

	/* the reconnect finds no pool for the token: that pool is stale */
	assert_int_equal(ramster_get(r, old, &(struct ramster_oid){{9}}, 0, got), -ESTALE);
	assert_int_equal(ramster_reconnects(r), 1);
	/* a new pool may get the node's old id: the stale one never reaches it */
	fresh = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	assert_true(fresh >= 0 && fresh != old);
	assert_int_equal(ramster_put(r, fresh, &(struct ramster_oid){{9}}, 0, page), 0);
	assert_int_equal(ramster_get(r, old, &(struct ramster_oid){{9}}, 0, got), -ESTALE);
	assert_int_equal(ramster_put(r, old, &(struct ramster_oid){{9}}, 0, page), -ESTALE);
	assert_int_equal(ramster_get(r, fresh, &(struct ramster_oid){{9}}, 0, got), 0);
	assert_memory_equal(page, got, PAGE);
	assert_int_equal(ramster_pool_destroy(r, old), 0); /* forgets it */
	assert_int_equal(ramster_get(r, old, &(struct ramster_oid){{9}}, 0, got), -ENOENT);
	ramster_close(r);
	ramster_close(admin);
	assert_int_equal(harness_stop(&h), 0);
	remove_conf(conf);
}

/* ---- raw frames: the token itself ------------------------------------------------ */

static int raw_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	return fd;
}

static int raw_full(int fd, void *buf, size_t len, int out)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = out ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL)
			: recv(fd, (char *)buf + done, len - done, 0);
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

/*
 * Send req on fd, read its reply. @return the result (token copied when the
 * reply has one), or INT32_MIN when the connection failed.
 */
static int raw_call(int fd, Ramster__Request *req, unsigned char token[16])
{
	uint8_t buf[WIRE_HDR_SIZE + 512];
	Ramster__Response *rsp;
	struct wire_hdr h;
	const char *why;
	size_t len = ramster__request__get_packed_size(req);
	int result;

	assert_true(len <= sizeof(buf) - WIRE_HDR_SIZE);
	ramster__request__pack(req, buf + WIRE_HDR_SIZE);
	wire_hdr_encode(buf, WIRE_REQUEST, (uint32_t)len, 0);
	if (raw_full(fd, buf, WIRE_HDR_SIZE + len, 1) || raw_full(fd, buf, WIRE_HDR_SIZE, 0))
		return INT32_MIN;
	if (wire_hdr_decode(buf, WIRE_RESPONSE, &h, &why) || h.msg_len > 512 || h.payload_len)
		return INT32_MIN;
	if (raw_full(fd, buf, h.msg_len, 0))
		return INT32_MIN;
	rsp = ramster__response__unpack(NULL, h.msg_len, buf);
	if (!rsp)
		return INT32_MIN;
	result = rsp->result;
	if (token && rsp->token.len == 16)
		memcpy(token, rsp->token.data, 16);
	ramster__response__free_unpacked(rsp, NULL);
	return result;
}

static int raw_attach(int fd, const unsigned char *token, size_t len, int want)
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;

	req.seq = 1;
	req.op = RAMSTER__OP__OP_ATTACH;
	req.pool = want;
	req.token.data = (uint8_t *)token;
	req.token.len = len;
	return raw_call(fd, &req, NULL);
}

/* In a child as uid 65534: attach token on a new connection. @return its result. */
static int attach_as_nobody(const char *sock, const unsigned char *token)
{
	int st, fd, rc;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (!pid) {
		if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(200);
		fd = raw_connect(sock);
		if (fd < 0)
			_exit(201);
		rc = raw_attach(fd, token, 16, 0);
		_exit(rc == -EACCES ? 0 : rc == INT32_MIN ? 202 : 203);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

/* (b) A token attaches for its own uid alone; a token of a wrong length is -EINVAL. */
static void test_token_uid(void **state)
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;
	unsigned char token[16] = {0};
	struct harness h;
	ramster *admin;
	int fd, fd2;

	assert_int_equal(harness_start(&h, NULL), 0);
	admin = harness_connect(&h);
	assert_non_null(admin);
	fd = raw_connect(h.sock);
	assert_true(fd >= 0);
	req.seq = 1;
	req.op = RAMSTER__OP__OP_POOL_NEW;
	req.flags = RAMSTER_PERSISTENT;
	assert_int_equal(raw_call(fd, &req, token), 0);
	/* wrong lengths: the request's error, the connection stays */
	assert_int_equal(raw_attach(fd, token, 15, 0), -EINVAL);
	assert_int_equal(raw_attach(fd, token, 0, 0), -EINVAL);
	close(fd);
	usleep(100 * 1000);
	assert_int_equal(stat_of(admin, "client_pools_detached"), 1);

	if (geteuid() == 0) {
		/* another uid may not take it (the socket opened to everyone for the test) */
		assert_int_equal(chmod(h.dir, 0711), 0);
		assert_int_equal(chmod(h.sock, 0666), 0);
		assert_int_equal(attach_as_nobody(h.sock, token), 0);
		assert_int_equal(stat_of(admin, "client_attach_refused"), 1);
	} else {
		fprintf(stderr, "  (not root: the other-uid case is test_pools' alone)\n");
	}
	/* its own uid may, at the id it asks for */
	fd2 = raw_connect(h.sock);
	assert_true(fd2 >= 0);
	assert_int_equal(raw_attach(fd2, token, 16, 3), 3);
	assert_int_equal(stat_of(admin, "client_pools_reattached"), 1);
	token[0] ^= 1;
	assert_int_equal(raw_attach(fd2, token, 16, 0), -ENOENT);
	close(fd2);
	ramster_close(admin);
	assert_int_equal(harness_stop(&h), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_transparent),
	    cmocka_unit_test(test_disabled),
	    cmocka_unit_test(test_grace_expires),
	    cmocka_unit_test(test_token_uid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
