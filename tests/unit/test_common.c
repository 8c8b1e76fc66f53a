/*
 * test_common.c - unit tests of common/: the list, the frame header codec,
 * the host:port parser, the IPv4 resolver, mkdir -p, and the unix listener
 * with its stale-socket probe (real sockets in a private directory: a live
 * listener refused, a dead one's file removed, a non-socket refused, only our
 * own file unlinked at close).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/fhdr.h"
#include "common/list.h"
#include "common/sock.h"
#include "common/util.h"

struct item {
	int v;
	struct list_head link;
};

static void test_container_of(void **state)
{
	struct item it = {.v = 7};

	assert_ptr_equal(container_of(&it.link, struct item, link), &it);
}

static void test_list(void **state)
{
	struct item it[4];
	struct list_head h, *pos, *tmp;
	int i, sum = 0, order[4], n = 0;

	list_init(&h);
	assert_true(list_empty(&h));
	for (i = 0; i < 4; i++) {
		it[i].v = i;
		if (i % 2)
			list_add(&h, &it[i].link); /* front */
		else
			list_add_tail(&h, &it[i].link);
	}
	/* 3 1 0 2 */
	list_for_each_safe(pos, tmp, &h)
		order[n++] = list_entry(pos, struct item, link)->v;
	assert_int_equal(n, 4);
	assert_int_equal(order[0], 3);
	assert_int_equal(order[1], 1);
	assert_int_equal(order[2], 0);
	assert_int_equal(order[3], 2);
	assert_int_equal(list_first_entry(&h, struct item, link)->v, 3);
	/* delete while walking, and twice */
	list_for_each_safe(pos, tmp, &h) {
		struct item *e = list_entry(pos, struct item, link);

		if (e->v == 1 || e->v == 2)
			list_del(pos);
	}
	list_del(&it[1].link);
	list_for_each_safe(pos, tmp, &h)
		sum += list_entry(pos, struct item, link)->v;
	assert_int_equal(sum, 3);
	while (!list_empty(&h))
		list_del(h.next);
	assert_true(list_empty(&h));
}

static void test_le32(void **state)
{
	uint8_t b[4];

	put_le32(b, 0x11223344u);
	assert_int_equal(b[0], 0x44);
	assert_int_equal(b[3], 0x11);
	assert_int_equal(get_le32(b), 0x11223344u);
}

static const struct fhdr_spec test_spec = {
    .magic = 0x54534d52u,
    .version = 1,
    .kind = 2,
    .kind_why = "wrong kind",
    .msg_max = 100,
    .payload_max = 8192,
};

static void test_fhdr_round_trip(void **state)
{
	uint8_t b[FHDR_SIZE];
	struct fhdr h;
	const char *why = NULL;

	fhdr_encode(b, test_spec.magic, 1, 2, 100, 8192);
	assert_memory_equal(b, "RMST\x01\x02\x00\x00\x64\x00\x00\x00\x00\x20\x00\x00", FHDR_SIZE);
	assert_int_equal(fhdr_decode(b, &test_spec, &h, &why), 0);
	assert_int_equal(h.version, 1);
	assert_int_equal(h.kind, 2);
	assert_int_equal(h.msg_len, 100);
	assert_int_equal(h.payload_len, 8192);
}

/* Each field broken alone gives its own reason, in the documented order. */
static void test_fhdr_refusals(void **state)
{
	static const struct {
		int at;
		uint8_t v;
		const char *why;
	} cases[] = {
	    {0, 'X', "bad magic"},
	    {4, 2, "unsupported version"},
	    {5, 1, "wrong kind"},
	    {6, 1, "reserved field not zero"},
	    {7, 1, "reserved field not zero"},
	    {8, 101, "message too long"},
	    {13, 0x21, "payload too long"},
	};
	uint8_t b[FHDR_SIZE];
	struct fhdr h;
	const char *why;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		fhdr_encode(b, test_spec.magic, 1, 2, 10, 0);
		b[cases[i].at] = cases[i].v;
		why = NULL;
		assert_int_equal(fhdr_decode(b, &test_spec, &h, &why), -EPROTO);
		assert_string_equal(why, cases[i].why);
	}
	/* magic, then version: the first broken field names the reason */
	fhdr_encode(b, 1, 9, 9, 1000, 100000);
	assert_int_equal(fhdr_decode(b, &test_spec, &h, &why), -EPROTO);
	assert_string_equal(why, "bad magic");
}

static void test_hostport(void **state)
{
	static const struct {
		const char *in;
		int ok;
		const char *host;
		unsigned port;
		const char *why;
	} cases[] = {
	    {"10.0.0.1:7470", 1, "10.0.0.1", 7470, NULL},
	    {"alpha.example-1_x:1", 1, "alpha.example-1_x", 1, NULL},
	    {"h:65535", 1, "h", 65535, NULL},
	    {"h:0080", 1, "h", 80, NULL},
	    {"nocolon", 0, NULL, 0, "is not HOST:PORT"},
	    {":80", 0, NULL, 0, "is not HOST:PORT (a host name or IPv4 address)"},
	    {"a:b:80", 0, NULL, 0, "is not HOST:PORT (a host name or IPv4 address)"},
	    {"[::1]:80", 0, NULL, 0, "is not HOST:PORT (a host name or IPv4 address)"},
	    {"ho st:80", 0, NULL, 0, "is not HOST:PORT (a host name or IPv4 address)"},
	    {"h:", 0, NULL, 0, "has no valid port (1..65535)"},
	    {"h:0", 0, NULL, 0, "has no valid port (1..65535)"},
	    {"h:65536", 0, NULL, 0, "has no valid port (1..65535)"},
	    {"h:99999999999999999999999", 0, NULL, 0, "has no valid port (1..65535)"},
	    {"h:+80", 0, NULL, 0, "has no valid port (1..65535)"},
	    {"h:80 ", 0, NULL, 0, "has no valid port (1..65535)"},
	    {"h:-1", 0, NULL, 0, "has no valid port (1..65535)"},
	};
	char host[32];
	uint16_t port;
	const char *why;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		why = NULL;
		port = 0;
		if (cases[i].ok) {
			assert_int_equal(
			    sock_hostport_parse(cases[i].in, host, sizeof(host), &port, &why), 0);
			assert_string_equal(host, cases[i].host);
			assert_int_equal(port, cases[i].port);
		} else {
			assert_int_equal(
			    sock_hostport_parse(cases[i].in, host, sizeof(host), &port, &why),
			    -EINVAL);
			assert_string_equal(why, cases[i].why);
		}
	}
	/* the host must fit: 15 characters do, 16 do not */
	assert_int_equal(sock_hostport_parse("aaaaaaaaaaaaaaa:1", host, 16, NULL, &why), 0);
	assert_string_equal(host, "aaaaaaaaaaaaaaa");
	assert_int_equal(sock_hostport_parse("aaaaaaaaaaaaaaaa:1", host, 16, NULL, &why), -EINVAL);
	/* validation only */
	assert_int_equal(sock_hostport_parse("x:9", NULL, 8, NULL, &why), 0);
}

static void test_resolve(void **state)
{
	struct sockaddr_in sa;
	char text[SOCK_IPV4_TEXT_MAX];

	assert_int_equal(sock_resolve_ipv4("192.0.2.7", 7470, false, &sa), 0);
	sock_format_ipv4(text, (struct sockaddr *)&sa);
	assert_string_equal(text, "192.0.2.7:7470");
	assert_int_equal(sock_resolve_ipv4("*", 1, true, &sa), 0);
	assert_int_equal(sa.sin_addr.s_addr, htonl(INADDR_ANY));
	assert_int_equal(sock_resolve_ipv4(NULL, 1, false, &sa), -EINVAL);
	assert_int_equal(sock_resolve_ipv4("", 1, false, &sa), -EINVAL);
	assert_int_equal(sock_resolve_ipv4("localhost", 2, false, &sa), 0);
	sock_format_ipv4(text, (struct sockaddr *)&sa);
	assert_string_equal(text, "127.0.0.1:2");
	assert_int_equal(sock_resolve_ipv4("no-such-host.invalid", 2, false, &sa) < 0, 1);
	sock_format_ipv4(text, NULL);
	assert_string_equal(text, "?");
}

/* ---- filesystem: a private directory per test ----------------------------------- */

static char test_dir[64];

static int test_dir_setup(void **state)
{
	snprintf(test_dir, sizeof(test_dir), "/tmp/test_common.XXXXXX");
	return mkdtemp(test_dir) ? 0 : -1;
}

static int test_dir_teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", test_dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_mkdir_parent(void **state)
{
	char path[256], err[256];
	struct stat st;
	mode_t old = umask(077);

	snprintf(path, sizeof(path), "%s/a/b/c/sock", test_dir);
	assert_int_equal(sock_mkdir_parent(path, 0755, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/a/b/c", test_dir);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0755); /* whatever the umask */
	/* again: nothing to do */
	snprintf(path, sizeof(path), "%s/a/b/c/sock", test_dir);
	assert_int_equal(sock_mkdir_parent(path, 0755, err, sizeof(err)), 0);
	/* no directory part */
	assert_int_equal(sock_mkdir_parent("sock", 0755, err, sizeof(err)), 0);
	assert_int_equal(sock_mkdir_parent("/sock", 0755, err, sizeof(err)), 0);
	/* a file in the way */
	snprintf(path, sizeof(path), "%s/file", test_dir);
	fclose(fopen(path, "w"));
	snprintf(path, sizeof(path), "%s/file/x/sock", test_dir);
	assert_true(sock_mkdir_parent(path, 0755, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "cannot create directory"));
	umask(old);
}

static void test_unix_listen(void **state)
{
	struct sock_unix a, b;
	char path[256], err[256];
	struct stat st;
	mode_t old = umask(0);

	snprintf(path, sizeof(path), "%s/run/x.sock", test_dir);
	assert_int_equal(sock_unix_listen(&a, path, 0660, "ramsterd", err, sizeof(err)), 0);
	assert_true(a.fd >= 0);
	assert_false(a.removed_stale);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0660); /* mode, not the umask's 0777 */
	assert_int_equal(sock_unix_probe(path, err, sizeof(err)), 1);

	/* a live listener is refused, and its file left alone */
	assert_int_equal(sock_unix_listen(&b, path, 0660, "ramsterd", err, sizeof(err)),
			 -EADDRINUSE);
	assert_int_equal(b.fd, -1);
	assert_non_null(strstr(err, "another ramsterd is listening on"));
	assert_int_equal(lstat(path, &st), 0);

	/* a dead listener's file: stale, removed, listened on again */
	close(a.fd);
	assert_int_equal(lstat(path, &st), 0);
	assert_int_equal(sock_unix_probe(path, err, sizeof(err)), 0);
	assert_int_equal(sock_unix_listen(&b, path, 0600, "ramsterd", err, sizeof(err)), 0);
	assert_true(b.removed_stale);
	assert_int_equal(lstat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	/* close unlinks only the file it bound: not one that replaced it */
	assert_int_equal(unlink(path), 0);
	fclose(fopen(path, "w"));
	sock_unix_close(&b);
	assert_int_equal(b.fd, -1);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	sock_unix_close(&b); /* idempotent */

	/* a file that is not a socket is refused, and kept */
	assert_int_equal(sock_unix_listen(&b, path, 0660, "ramsterd", err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "is not a socket"));
	assert_int_equal(unlink(path), 0);

	/* our own file goes at close */
	assert_int_equal(sock_unix_listen(&b, path, 0660, "ramsterd", err, sizeof(err)), 0);
	sock_unix_close(&b);
	assert_int_equal(lstat(path, &st), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(sock_unix_probe(path, err, sizeof(err)), 0); /* nothing there */
	umask(old);
}

static void test_unix_too_long(void **state)
{
	char path[SOCK_UNIX_PATH_MAX + 8], err[256];
	struct sock_unix s;

	memset(path, 'a', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = '\0';
	assert_int_equal(sock_unix_listen(&s, path, 0660, "x", err, sizeof(err)), -ENAMETOOLONG);
	assert_int_equal(s.fd, -1);
	assert_non_null(strstr(err, "too long"));
	assert_int_equal(sock_unix_probe(path, err, sizeof(err)), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_container_of),
	    cmocka_unit_test(test_list),
	    cmocka_unit_test(test_le32),
	    cmocka_unit_test(test_fhdr_round_trip),
	    cmocka_unit_test(test_fhdr_refusals),
	    cmocka_unit_test(test_hostport),
	    cmocka_unit_test(test_resolve),
	    cmocka_unit_test_setup_teardown(test_mkdir_parent, test_dir_setup, test_dir_teardown),
	    cmocka_unit_test_setup_teardown(test_unix_listen, test_dir_setup, test_dir_teardown),
	    cmocka_unit_test(test_unix_too_long),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
