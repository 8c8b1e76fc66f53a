/*
 * test_config.c - the cluster file: every shape of a valid file, defaults,
 * sizes, and each kind of error naming the right line ("FILE:LINE: ...").
 * Files are written to mkstemp temporaries and removed after each test.
 */
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "node/config.h"
#include "node/config_keys.h"
#include "node/log.h"
#include "tmem/compress.h"
#include "tmem/zalloc.h"

#define KEY_HEX "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"

static char tmp_paths[4][64];
static int n_tmp;

/* Write text to a new temporary file. @return its path (valid until teardown). */
static const char *tmp_write(const char *text)
{
	char *path;
	int fd;

	assert_true(n_tmp < 4);
	path = tmp_paths[n_tmp++];
	snprintf(path, sizeof(tmp_paths[0]), "/tmp/ramster-test-config-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static int teardown(void **state)
{
	while (n_tmp > 0)
		unlink(tmp_paths[--n_tmp]);
	return 0;
}

static struct config cfg;
static char err[CONFIG_ERR_MAX];

static int load(const char *text)
{
	const char *path = tmp_write(text);

	err[0] = '\0';
	return config_load(&cfg, path, err, sizeof(err));
}

/* The file must be refused at line with a message containing what. */
static void expect_error(const char *text, int line, const char *what)
{
	char prefix[128];
	const char *path;

	assert_int_equal(load(text), -EINVAL);
	path = tmp_paths[n_tmp - 1];
	snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
	if (strncmp(err, prefix, strlen(prefix)) || !strstr(err, what)) {
		print_error("want \"%s...%s\", got \"%s\"\n", prefix, what, err);
		fail();
	}
}

/* ---- valid files ------------------------------------------------------------------ */

static void test_defaults(void **state)
{
	config_defaults(&cfg);
	assert_string_equal(cfg.path, "");
	assert_false(cfg.has_cluster);
	assert_int_equal(cfg.heartbeat_ms, 100);
	assert_int_equal(cfg.dead_after_ms, 1000);
	assert_int_equal(cfg.replicas, 1);
	assert_false(cfg.link_integrity_only); /* secure by default */
	assert_int_equal(cfg.high_watermark_pct, 90);
	assert_int_equal(cfg.low_watermark_pct, 80);
	assert_true(cfg.remotify_ephemeral);
	assert_true(cfg.remotify_persistent);
	assert_int_equal(cfg.request_timeout_ms, 1000);
	assert_int_equal(cfg.pers_max_frac, 0);
	assert_int_equal(cfg.n_nodes, 0);
	assert_int_equal(cfg.n_exports, 0);
}

static void test_single_node_minimal(void **state)
{
	const struct config_node *n;

	assert_int_equal(load("[node solo]\n"), 0);
	assert_int_equal(cfg.n_nodes, 1);
	n = config_find_node(&cfg, "solo");
	assert_non_null(n);
	assert_int_equal(n->id, 0);
	assert_int_equal(n->port, 0);
	assert_int_equal(n->transport, TRANSPORT_TCP);
	assert_int_equal(n->local_mb, 256);
	assert_int_equal(n->donate_mb, 0);
	assert_string_equal(n->socket, "");
	assert_int_equal(n->line, 1);
	assert_null(config_find_node(&cfg, "other"));
	assert_string_equal(cfg.path, tmp_paths[0]);
}

static void test_single_node_full(void **state)
{
	const struct config_node *n;

	assert_int_equal(load("; a node of its own\n"
			      "# hash comments at the start of a line too\n"
			      "\n"
			      "[node box]\n"
			      "  socket = /run/r/box.sock   ; inline comment\n"
			      "\tlocal_mb = 1024\n"
			      "donate_mb=64\n"
			      "transport = rdma\n"
			      "nbd_socket = /run/r/nbd.sock\n"
			      "nbd_listen = 0.0.0.0:10809\n"
			      "busy_poll_us = 0\n"),
			 0);
	n = config_find_node(&cfg, "box");
	assert_int_equal(n->busy_poll_us, 0);
	assert_non_null(n);
	assert_string_equal(n->socket, "/run/r/box.sock");
	assert_int_equal(n->local_mb, 1024);
	assert_int_equal(n->donate_mb, 64);
	assert_int_equal(n->transport, TRANSPORT_RDMA);
	assert_string_equal(n->nbd_socket, "/run/r/nbd.sock");
	assert_string_equal(n->nbd_listen, "0.0.0.0:10809");
	assert_int_equal(n->line, 4);
}

static void test_cluster_full(void **state)
{
	const char *key = tmp_write(KEY_HEX);
	char text[2048];
	const struct config_node *n;

	snprintf(text, sizeof(text),
		 "[cluster]\n"
		 "name = lab\n"
		 "secret_file = %s\n"
		 "heartbeat_ms = 50\n"
		 "dead_after_ms = 500\n"
		 "replicas = 1\n"
		 "link_security = integrity\n"
		 "high_watermark = 85%%\n"
		 "low_watermark = 70\n"
		 "remotify_ephemeral = no\n"
		 "remotify_persistent = TRUE\n"
		 "pers_max = 7/8\n"
		 "pers_mean_max = 2560\n"
		 "pers_mean_limit = 5/8\n"
		 "\n"
		 "[node alpha]\n"
		 "id = 1\n"
		 "address = 10.0.0.1:7000\n"
		 "transport = auto\n"
		 "\n"
		 "[node beta]\n"
		 "id = 2\n"
		 "address = beta.example:7000\n"
		 "\n"
		 "[node gamma]\n"
		 "id = 64\n"
		 "address = 10.0.0.1:7001\n"
		 "\n"
		 "[export swap0]\n"
		 "size = 4G\n"
		 "[export scratch]\n"
		 "size = 1048576\n"
		 "backing = /var/lib/ramster/scratch.img\n",
		 key);
	assert_int_equal(load(text), 0);
	assert_true(cfg.has_cluster);
	assert_string_equal(cfg.cluster_name, "lab");
	assert_string_equal(cfg.secret_file, key);
	assert_int_equal(cfg.heartbeat_ms, 50);
	assert_int_equal(cfg.dead_after_ms, 500);
	assert_int_equal(cfg.request_timeout_ms, 500); /* defaults to dead_after_ms */
	assert_int_equal(cfg.replicas, 1);
	assert_true(cfg.link_integrity_only);
	assert_int_equal(cfg.high_watermark_pct, 85);
	assert_int_equal(cfg.low_watermark_pct, 70);
	assert_false(cfg.remotify_ephemeral);
	assert_true(cfg.remotify_persistent);
	assert_int_equal(cfg.pers_max_frac, 896);
	assert_int_equal(cfg.pers_mean_max_frac, 640);
	assert_int_equal(cfg.pers_mean_limit_frac, 640);
	assert_int_equal(cfg.n_nodes, 3);
	n = config_find_node(&cfg, "alpha");
	assert_non_null(n);
	assert_int_equal(n->id, 1);
	assert_string_equal(n->host, "10.0.0.1");
	assert_int_equal(n->port, 7000);
	assert_int_equal(n->transport, TRANSPORT_AUTO);
	n = config_find_node(&cfg, "beta");
	assert_non_null(n);
	assert_string_equal(n->host, "beta.example");
	assert_int_equal(n->line, 21);
	n = config_find_node(&cfg, "gamma");
	assert_non_null(n);
	assert_int_equal(n->id, 64);
	assert_int_equal(n->port, 7001);
	assert_int_equal(cfg.n_exports, 2);
	assert_string_equal(cfg.exports[0].name, "swap0");
	assert_int_equal(cfg.exports[0].size, 4ull << 30);
	assert_string_equal(cfg.exports[0].backing, "");
	assert_int_equal(cfg.exports[1].size, 1048576);
	assert_string_equal(cfg.exports[1].backing, "/var/lib/ramster/scratch.img");
	assert_int_equal(cfg.exports[1].line, 31);
}

static void test_request_timeout_explicit(void **state)
{
	assert_int_equal(load("[cluster]\nrequest_timeout_ms = 250\n[node a]\nid = 1\n"
			      "address = h:1\n"),
			 0);
	assert_int_equal(cfg.request_timeout_ms, 250);
}

/* orphan_after_ms: the lease of an unreachable peer, ten minutes unless set, above dead_after_ms. */
static void test_orphan_after(void **state)
{
	assert_int_equal(load("[cluster]\n[node a]\nid = 1\naddress = h:1\n"), 0);
	assert_int_equal(cfg.orphan_after_ms, 600000);
	teardown(NULL);
	assert_int_equal(load("[cluster]\norphan_after_ms = 90000\n[node a]\nid = 1\n"
			      "address = h:1\n"),
			 0);
	assert_int_equal(cfg.orphan_after_ms, 90000);
	teardown(NULL);
	expect_error("[cluster]\ndead_after_ms = 2000\norphan_after_ms = 2000\n", 3,
		     "orphan_after_ms (2000) must be above dead_after_ms (2000)");
	teardown(NULL);
	expect_error("[cluster]\norphan_after_ms = 50\n", 2, "orphan_after_ms");
}

/* A cluster of one needs no secret: nobody to talk to. */
static void test_cluster_one_node_no_secret(void **state)
{
	assert_int_equal(load("[cluster]\nname = x\n[node a]\nid = 1\naddress = a:1\n"), 0);
	assert_int_equal(cfg.n_nodes, 1);
}

/* Two nodes and no [cluster]: ids and addresses, but no secret required. */
static void test_two_nodes_no_cluster(void **state)
{
	assert_int_equal(load("[node a]\nid = 1\naddress = a:1\n[node b]\nid = 2\naddress = b:1\n"),
			 0);
	assert_int_equal(cfg.n_nodes, 2);
}

static void test_secret_relative_to_config(void **state)
{
	char dir[] = "/tmp/ramster-test-dir-XXXXXX", path[128], key[128], text[512];
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(key, sizeof(key), "%s/cluster.key", dir);
	snprintf(path, sizeof(path), "%s/ramster.conf", dir);
	f = fopen(key, "w");
	assert_non_null(f);
	fputs(KEY_HEX, f);
	fclose(f);
	snprintf(text, sizeof(text),
		 "[cluster]\nsecret_file = cluster.key\n"
		 "[node a]\nid = 1\naddress = a:1\n[node b]\nid = 2\naddress = b:1\n");
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(config_load(&cfg, path, err, sizeof(err)), 0);
	assert_string_equal(cfg.secret_file, key);
	unlink(key);
	unlink(path);
	rmdir(dir);
}

/* nbd_tls: off by default; on|require need one kind of keys; paths relative to the file */
static void test_nbd_tls_keys(void **state)
{
	const struct config_node *n;
	const char *path;
	char want[CONFIG_PATH_MAX];

	assert_int_equal(load("[node a]\nnbd_listen = 127.0.0.1:10809\n"), 0);
	n = config_find_node(&cfg, "a");
	assert_int_equal(n->nbd_tls, NBD_TLS_UNSET);
	assert_string_equal(n->nbd_tls_psk, "");
	teardown(NULL);
	assert_int_equal(load("[node a]\nnbd_tls = off\nnbd_listen = 0.0.0.0:10809\n"), 0);
	assert_int_equal(config_find_node(&cfg, "a")->nbd_tls, NBD_TLS_OFF);
	teardown(NULL);
	assert_int_equal(load("[node a]\nnbd_tls = require\nnbd_tls_psk = /etc/r/keys.psk\n"), 0);
	n = config_find_node(&cfg, "a");
	assert_int_equal(n->nbd_tls, NBD_TLS_REQUIRE);
	assert_string_equal(n->nbd_tls_psk, "/etc/r/keys.psk");
	assert_int_equal(n->nbd_tls_line, 2);
	teardown(NULL);
	/* a relative directory is the config file's */
	assert_int_equal(load("[node a]\nnbd_tls = on\nnbd_tls_certificates = pki\n"), 0);
	path = tmp_paths[n_tmp - 1];
	snprintf(want, sizeof(want), "%.*s/pki", (int)(strrchr(path, '/') - path), path);
	n = config_find_node(&cfg, "a");
	assert_int_equal(n->nbd_tls, NBD_TLS_ON);
	assert_string_equal(n->nbd_tls_certificates, want);
	teardown(NULL);
	/* explicit off keeps the keys, unused */
	assert_int_equal(load("[node a]\nnbd_tls = off\nnbd_tls_psk = /k\n"), 0);
}

static void test_err_nbd_tls(void **state)
{
	expect_error("[node a]\n\nnbd_tls = yes\n", 3, "nbd_tls: 'yes' is not off, on or require");
	teardown(NULL);
	expect_error("[node a]\nnbd_tls = on\n", 2,
		     "node 'a': nbd_tls = on needs nbd_tls_psk = FILE (psktool) or "
		     "nbd_tls_certificates = DIR");
	teardown(NULL);
	expect_error("[node a]\nlocal_mb = 64\nnbd_tls = require\n", 3, "nbd_tls = require needs");
	teardown(NULL);
	expect_error("[node a]\nnbd_tls = on\nnbd_tls_psk = /k\nnbd_tls_certificates = /d\n", 2,
		     "set one of nbd_tls_psk and nbd_tls_certificates, not both");
	teardown(NULL);
	expect_error("[node a]\nnbd_tls_psk = /k\n", 1,
		     "nbd_tls_psk is set but nbd_tls is not (write nbd_tls = on, require or off)");
	teardown(NULL);
	expect_error("[node a]\nnbd_tls = on\nnbd_tls_psk =\n", 3, "nbd_tls_psk: empty value");
	teardown(NULL);
	expect_error("[node a]\nnbd_tls = off\nnbd_tls = on\n", 3, "duplicate key 'nbd_tls'");
}

static void test_crlf_and_bom(void **state)
{
	assert_int_equal(load("\xEF\xBB\xBF[node a]\r\nlocal_mb = 300\r\n"), 0);
	assert_int_equal(cfg.nodes[0].local_mb, 300);
}

static void test_fractions(void **state)
{
	assert_int_equal(load("[cluster]\npers_max = 1/1\npers_mean_max = 4096\n"
			      "pers_mean_limit = 1\n"),
			 0);
	assert_int_equal(cfg.pers_max_frac, 1024);
	assert_int_equal(cfg.pers_mean_max_frac, 1024);
	assert_int_equal(cfg.pers_mean_limit_frac, 1); /* rounds to 0, kept as the least */
}

/* ---- sizes ------------------------------------------------------------------------ */

static void test_parse_size(void **state)
{
	uint64_t v;

	assert_int_equal(config_parse_size("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(config_parse_size("4096", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(config_parse_size("4K", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(config_parse_size("4k", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(config_parse_size("3M", &v), 0);
	assert_int_equal(v, 3ull << 20);
	assert_int_equal(config_parse_size("2g", &v), 0);
	assert_int_equal(v, 2ull << 30);
	assert_int_equal(config_parse_size("1T", &v), 0);
	assert_int_equal(v, 1ull << 40);
	assert_int_equal(config_parse_size("16777215T", &v), 0);
	assert_int_equal(v, 16777215ull << 40);
	assert_int_equal(config_parse_size("18446744073709551615", &v), 0);
	assert_int_equal(v, UINT64_MAX);

	assert_int_equal(config_parse_size("", &v), -EINVAL);
	assert_int_equal(config_parse_size("K", &v), -EINVAL);
	assert_int_equal(config_parse_size("-1", &v), -EINVAL);
	assert_int_equal(config_parse_size("+1", &v), -EINVAL);
	assert_int_equal(config_parse_size(" 1", &v), -EINVAL);
	assert_int_equal(config_parse_size("1 K", &v), -EINVAL);
	assert_int_equal(config_parse_size("1KB", &v), -EINVAL);
	assert_int_equal(config_parse_size("1X", &v), -EINVAL);
	assert_int_equal(config_parse_size("1.5G", &v), -EINVAL);
	assert_int_equal(config_parse_size("18446744073709551616", &v), -EINVAL);
	assert_int_equal(config_parse_size("16777216T", &v), -EINVAL);
	assert_int_equal(config_parse_size("17179869184G", &v), -EINVAL);
}

static void test_export_sizes(void **state)
{
	expect_error("[export e]\nsize = 4097\n", 2, "multiple of 4096");
	teardown(NULL);
	expect_error("[export e]\nsize = 0\n", 2, "multiple of 4096");
	teardown(NULL);
	expect_error("[export e]\nsize = 1Q\n", 2, "not a size");
	teardown(NULL);
	expect_error("[export e]\n\nbacking = /x\n", 1, "export 'e' has no size");
	teardown(NULL);
	assert_int_equal(load("[export e]\nsize = 8K\n"), 0);
	assert_int_equal(cfg.exports[0].size, 8192);
}

/* ---- errors: each names its line ---------------------------------------------------- */

/* [limits], [uid N], [user NAME], [group NAME] (issue 14). */
static void test_users_and_limits(void **state)
{
	config_defaults(&cfg);
	assert_int_equal(cfg.limits.max_clients, 1024);
	assert_int_equal(cfg.limits.max_clients_per_uid, 64);
	assert_int_equal(cfg.limits.nbd_handshake_timeout_ms, 10000);
	assert_int_equal(cfg.limits.peer_unauth_per_addr, 4);
	assert_int_equal(load("[node a]\n[limits]\nmax_clients = 10\nnbd_idle_timeout_ms = 5000\n"
			      "[uid 1001]\nmax_mb = 64\nweight = 3\n"
			      "[user root]\nmax_connections = 2\n"
			      "[group 0]\nmax_pools = 5\n"),
			 0);
	assert_int_equal(cfg.limits.max_clients, 10);
	assert_int_equal(cfg.limits.nbd_idle_timeout_ms, 5000);
	assert_int_equal(cfg.limits.max_clients_per_uid, 64); /* untouched: the default */
	assert_int_equal(cfg.n_users, 3);
	assert_false(cfg.users[0].group);
	assert_int_equal(cfg.users[0].id, 1001);
	assert_int_equal(cfg.users[0].max_mb, 64);
	assert_int_equal(cfg.users[0].weight, 3);
	assert_int_equal(cfg.users[1].id, 0); /* root */
	assert_int_equal(cfg.users[1].max_connections, 2);
	assert_true(cfg.users[2].group);
	assert_int_equal(cfg.users[2].max_pools, 5);
}

static void test_err_limits(void **state)
{
	expect_error("[limits]\n[limits]\n", 2, "duplicate [limits]");
	expect_error("[limits x]\n", 1, "takes no name");
	expect_error("[limits]\nmax_clients = 0\n", 2, "out of range");
	expect_error("[limits]\nfoo = 1\n", 2, "unknown key 'foo' in [limits]");
}

static void test_err_user_names(void **state)
{
	expect_error("[uid abc]\n", 1, "needs a number");
	expect_error("[user no-such-user-t14]\n", 1, "no such user");
	expect_error("[group no-such-group-t14]\n", 1, "no such group");
	expect_error("[uid 0]\n[user root]\n", 2, "a second rule for uid 0 (first at line 1)");
}

static void test_err_user_keys(void **state)
{
	expect_error("[uid 5]\nweight = 0\n", 2, "out of range");
	expect_error("[uid 5]\nmax_mb = x\n", 2, "not a number");
	expect_error("[group 5]\nquota = 1\n", 2, "unknown key 'quota' in [group]");
}

static void test_err_missing_file(void **state)
{
	assert_int_equal(config_load(&cfg, "/nonexistent/ramster.conf", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "/nonexistent/ramster.conf: "));
	assert_non_null(strstr(err, strerror(ENOENT)));
}

static void test_err_sections(void **state)
{
	expect_error("[node a]\n\n[nodes b]\n", 3, "unknown section [nodes b]");
	teardown(NULL);
	expect_error("[node]\n", 1, "needs a name");
	teardown(NULL);
	expect_error("[node a/b]\n", 1, "needs a name");
	teardown(NULL);
	expect_error("[cluster x]\n", 1, "takes no name");
	teardown(NULL);
	expect_error("[cluster]\n[cluster]\n", 2, "duplicate [cluster] section (first at line 1)");
	teardown(NULL);
	expect_error("[node a]\n[node b]\n[node a]\n", 3, "duplicate node 'a' (first at line 1)");
	teardown(NULL);
	expect_error("[export e]\nsize=4K\n[export e]\nsize=4K\n", 3, "duplicate export 'e'");
	teardown(NULL);
	expect_error("local_mb = 5\n[node a]\n", 1, "outside any section");
}

static void test_err_keys(void **state)
{
	expect_error("[node a]\nlocal_mb = 5\nlocalmb = 5\n", 3, "unknown key 'localmb' in [node]");
	teardown(NULL);
	expect_error("[cluster]\nid = 1\n", 2, "unknown key 'id' in [cluster]");
	teardown(NULL);
	expect_error("[export e]\nsize = 4K\nsocket = /x\n", 3, "unknown key 'socket' in [export]");
	teardown(NULL);
	expect_error("[node a]\nlocal_mb = 5\nlocal_mb = 6\n", 3, "duplicate key 'local_mb'");
	teardown(NULL);
	/* no mode without integrity */
	expect_error("[cluster]\nlink_security = none\n", 2,
		     "link_security: 'none' is not secure or integrity");
}

static void test_err_duplicates_across_nodes(void **state)
{
	expect_error("[node a]\nid = 1\naddress = h:1\n[node b]\naddress = h:2\nid = 1\n", 6,
		     "id 1 is already node 'a' (line 1)");
	teardown(NULL);
	expect_error("[node a]\nid = 1\naddress = H:1\n[node b]\nid = 2\naddress = h:1\n", 6,
		     "address h:1 is already node 'a'");
}

static void test_err_missing_id_address(void **state)
{
	expect_error("[node a]\nid = 1\naddress = a:1\n\n[node b]\naddress = b:1\n", 5,
		     "node 'b' has no id");
	teardown(NULL);
	expect_error("[cluster]\n[node a]\nid = 1\n", 2, "node 'a' has no address");
	teardown(NULL);
	/* the earliest line wins */
	expect_error("[node a]\n[node b]\nid = 2\naddress = b:1\n", 1, "node 'a' has no id");
}

/* The tier's allocator and compressor: defaults, both names each, bad names. */
static void test_node_tier_keys(void **state)
{
	assert_int_equal(load("[node a]\n"), 0);
	assert_int_equal(config_find_node(&cfg, "a")->allocator, ZALLOC_DENSE);
	assert_int_equal(config_find_node(&cfg, "a")->compressor, COMPRESS_LZO);
	teardown(NULL);
	assert_int_equal(load("[node a]\nallocator = zbud\ncompressor = lz4\n"), 0);
	assert_int_equal(config_find_node(&cfg, "a")->allocator, ZALLOC_ZBUD);
	assert_int_equal(config_find_node(&cfg, "a")->compressor, COMPRESS_LZ4);
	teardown(NULL);
	assert_int_equal(load("[node a]\nallocator = dense\ncompressor = lzo\n"), 0);
	assert_int_equal(config_find_node(&cfg, "a")->allocator, ZALLOC_DENSE);
	assert_int_equal(config_find_node(&cfg, "a")->compressor, COMPRESS_LZO);
	teardown(NULL);
	expect_error("[node a]\nallocator = zsmalloc\n", 2,
		     "allocator: 'zsmalloc' is not dense or zbud");
	teardown(NULL);
	expect_error("[node a]\n\ncompressor = zstd\n", 3, "compressor: 'zstd' is not lzo or lz4");
}

static void test_err_numbers(void **state)
{
	expect_error("[cluster]\nheartbeat_ms = 5\n", 2,
		     "heartbeat_ms: 5 is out of range (10..60000)");
	teardown(NULL);
	expect_error("[node a]\n\nlocal_mb = 0\n", 3, "local_mb: 0 is out of range");
	teardown(NULL);
	expect_error("[node a]\nbusy_poll_us = 10001\n", 2,
		     "busy_poll_us: 10001 is out of range (0..10000)");
	teardown(NULL);
	assert_int_equal(load("[node a]\n"), 0);
	assert_int_equal(config_find_node(&cfg, "a")->busy_poll_us, CONFIG_DEFAULT_BUSY_POLL_US);
	teardown(NULL);
	expect_error("[node a]\nlocal_mb = 12abc\n", 2, "local_mb: '12abc' is not a number");
	teardown(NULL);
	expect_error("[node a]\nlocal_mb = -1\n", 2, "is not a number");
	teardown(NULL);
	expect_error("[node a]\nlocal_mb = 99999999999999999999999\n", 2, "is not a number");
	teardown(NULL);
	expect_error("[node a]\nid = 65\n", 2, "id: 65 is out of range (1..64)");
	teardown(NULL);
	expect_error("[node a]\naddress = a:70000\n", 2, "no valid port");
	teardown(NULL);
	expect_error("[node a]\naddress = a\n", 2, "not HOST:PORT");
	teardown(NULL);
	expect_error("[node a]\naddress = :80\n", 2, "not HOST:PORT");
	teardown(NULL);
	expect_error("[cluster]\nhigh_watermark = 101\n", 2, "out of range");
	teardown(NULL);
	expect_error("[cluster]\npers_max = 9/8\n", 2, "out of range");
	teardown(NULL);
	expect_error("[cluster]\npers_max = 4097\n", 2, "out of range (1..4096 bytes)");
	teardown(NULL);
	expect_error("[cluster]\npers_max = half\n", 2, "neither a fraction");
	teardown(NULL);
	/* an inline comment needs a blank before ';' */
	expect_error("[node a]\nlocal_mb = 512;comment\n", 2, "is not a number");
}

/* metrics_listen (node/stats/metrics.c) and log_level (a reload applies it). */
static void test_metrics_listen_log_level(void **state)
{
	assert_int_equal(load("[node a]\nmetrics_listen = 127.0.0.1:9101\nlog_level = debug\n"), 0);
	assert_string_equal(cfg.nodes[0].metrics_listen, "127.0.0.1:9101");
	assert_int_equal(cfg.nodes[0].log_level, LOG_DEBUG);
	teardown(NULL);
	assert_int_equal(load("[node a]\n"), 0);
	assert_string_equal(cfg.nodes[0].metrics_listen, "");
	assert_int_equal(cfg.nodes[0].log_level, -1);
	teardown(NULL);
	expect_error("[node a]\nmetrics_listen = 9101\n", 2, "is not HOST:PORT");
	teardown(NULL);
	expect_error("[node a]\nmetrics_listen = localhost:0\n", 2, "has no valid port");
	teardown(NULL);
	expect_error("[node a]\nlog_level = loud\n", 2,
		     "log_level: 'loud' is not debug, info, notice, warn or error");
}

/* redundancy = replicas N | ec K+M (issue 25): parsed, bounded, and checked against the nodes. */
static void test_redundancy(void **state)
{
	static const char nodes4[] = "[node a]\nid = 1\naddress = 10.0.0.1:7000\n"
				     "[node b]\nid = 2\naddress = 10.0.0.2:7000\n"
				     "[node c]\nid = 3\naddress = 10.0.0.3:7000\n"
				     "[node d]\nid = 4\naddress = 10.0.0.4:7000\n";
	const char *key = tmp_write(KEY_HEX);
	char text[1024], nodes[900];

	(void)state;
	/* a collective of 4 needs its key: secret_file leads the nodes' text */
	snprintf(nodes, sizeof(nodes), "secret_file = %s\n%s", key, nodes4);
	snprintf(text, sizeof(text), "[cluster]\nredundancy = ec 2+1\n%s", nodes);
	assert_int_equal(load(text), 0);
	assert_int_equal(cfg.ec_k, 2);
	assert_int_equal(cfg.ec_m, 1);
	assert_int_equal(cfg.replicas, 1);
	teardown(NULL);
	key = tmp_write(KEY_HEX);
	snprintf(nodes, sizeof(nodes), "secret_file = %s\n%s", key, nodes4);
	snprintf(text, sizeof(text), "[cluster]\nredundancy = ec2+1\n%s", nodes);
	assert_int_equal(load(text), 0);
	assert_int_equal(cfg.ec_k, 2);
	teardown(NULL);
	key = tmp_write(KEY_HEX);
	snprintf(nodes, sizeof(nodes), "secret_file = %s\n%s", key, nodes4);
	snprintf(text, sizeof(text), "[cluster]\nredundancy = replicas 3\n%s", nodes);
	assert_int_equal(load(text), 0);
	assert_int_equal(cfg.replicas, 3);
	assert_int_equal(cfg.ec_k, 0);
	teardown(NULL);
	key = tmp_write(KEY_HEX);
	snprintf(nodes, sizeof(nodes), "secret_file = %s\n%s", key, nodes4);
	snprintf(text, sizeof(text), "[cluster]\nredundancy = ec 2+2\n%s", nodes);
	expect_error(text, 2,
		     "redundancy = ec 2+2 needs at least 5 nodes (the owner and 4 peers, one a "
		     "fragment); the file has 4");
	teardown(NULL);
	expect_error("[cluster]\nredundancy = ec 1+1\n", 2, "K (data fragments) is 2 or more");
	teardown(NULL);
	expect_error("[cluster]\nredundancy = ec 6+3\n", 2, "K+M at most 8");
	teardown(NULL);
	expect_error("[cluster]\nredundancy = ec 4+0\n", 2, "M (parity) 1 or more");
	teardown(NULL);
	expect_error("[cluster]\nredundancy = ec 4+2x\n", 2, "is neither 'replicas N' nor 'ec K+M'");
	teardown(NULL);
	expect_error("[cluster]\nredundancy = mirrored\n", 2, "is neither");
	teardown(NULL);
	expect_error("[cluster]\nredundancy = replicas 9\n", 2, "out of range 1..4");
	teardown(NULL);
	key = tmp_write(KEY_HEX);
	snprintf(nodes, sizeof(nodes), "secret_file = %s\n%s", key, nodes4);
	snprintf(text, sizeof(text), "[cluster]\nreplicas = 2\nredundancy = replicas 3\n%s", nodes);
	expect_error(text, 3, "redundancy = replicas 3 but replicas = 2");
	teardown(NULL);
	key = tmp_write(KEY_HEX);
	snprintf(nodes, sizeof(nodes), "secret_file = %s\n%s", key, nodes4);
	snprintf(text, sizeof(text), "[cluster]\nreplicas = 2\nredundancy = ec 2+1\n%s", nodes);
	expect_error(text, 3, "one or the other");
}

static void test_err_values(void **state)
{
	expect_error("[cluster]\nreplicas = 2\n", 2,
		     "replicas = 2 needs at least 3 nodes (the owner and 2 peers); the file has 0");
	teardown(NULL);
	expect_error("[cluster]\nreplicas = 5\n", 2, "out of range");
	teardown(NULL);
	expect_error("[cluster]\nrereplicate_rate = 0\n", 2, "out of range");
	teardown(NULL);
	expect_error("[cluster]\nreplicas = 0\n", 2, "out of range");
	teardown(NULL);
	expect_error("[cluster]\nremotify_ephemeral = maybe\n", 2, "not a boolean");
	teardown(NULL);
	expect_error("[node a]\ntransport = udp\n", 2, "'udp' is not tcp, rdma or auto");
	teardown(NULL);
	expect_error("[cluster]\nname =\n", 2, "name: empty value");
	teardown(NULL);
	expect_error("[node a]\nsocket = /a/very/long/path/that/goes/on/and/on/and/on/and/on/"
		     "and/on/and/on/and/on/and/on/and/on/and/on/and/on/xy.sock\n",
		     2, "socket: too long (at most 107 bytes)");
}

static void test_err_cross_checks(void **state)
{
	expect_error("[cluster]\nhigh_watermark = 60\n\nlow_watermark = 60\n", 4,
		     "low_watermark (60%) must be below high_watermark (60%)");
	teardown(NULL);
	expect_error("[cluster]\nlow_watermark = 95\n", 2, "must be below");
	teardown(NULL);
	expect_error("[cluster]\nheartbeat_ms = 1000\n", 2,
		     "dead_after_ms (1000) must be above heartbeat_ms (1000)");
	teardown(NULL);
	expect_error("[cluster]\ndead_after_ms = 50\nheartbeat_ms = 100\n", 2, "must be above");
}

static void test_err_secret(void **state)
{
	const char *nodes = "[node a]\nid = 1\naddress = a:1\n[node b]\nid = 2\naddress = b:1\n";
	char text[512];
	const char *bad;

	snprintf(text, sizeof(text), "[cluster]\nname = c\n%s", nodes);
	expect_error(text, 1, "secret_file is required");
	teardown(NULL);
	snprintf(text, sizeof(text), "[cluster]\nsecret_file = /nonexistent/key\n%s", nodes);
	expect_error(text, 2, "cannot read secret_file /nonexistent/key");
	teardown(NULL);
	bad = tmp_write("not a key\n");
	snprintf(text, sizeof(text), "[cluster]\n\nsecret_file = %s\n%s", bad, nodes);
	expect_error(text, 3, "too short");
	teardown(NULL);
	if (geteuid() != 0) { /* root reads anything */
		bad = tmp_write(KEY_HEX);
		chmod(bad, 0);
		snprintf(text, sizeof(text), "[cluster]\nsecret_file = %s\n%s", bad, nodes);
		expect_error(text, 2, "cannot read secret_file");
	}
}

static void test_err_syntax(void **state)
{
	char text[512];

	expect_error("[node a]\nlocal_mb = 5\njust words\n", 3, "syntax error");
	teardown(NULL);
	expect_error("[node a\nlocal_mb = 5\n", 1, "syntax error");
	teardown(NULL);
	/* no continuation lines: an indented line stands alone */
	expect_error("[node a]\nsocket = /x\n   continued\n", 3, "syntax error");
	teardown(NULL);
	/* the earliest problem wins: a syntax error before a bad value */
	expect_error("[node a]\nbroken\nlocal_mb = x\n", 2, "syntax error");
	teardown(NULL);
	memset(text, 0, sizeof(text));
	strcpy(text, "[node a]\nsocket = /");
	memset(text + strlen(text), 'x', 300);
	strcat(text, "\nlocal_mb = 5\n");
	expect_error(text, 2, "line too long");
}

/* The environment knobs: read once, each checked; junk refuses to start. */
static void test_env(void **state)
{
	static const char *vars[] = {"RAMSTER_SOCKET", "RAMSTER_BUSY_POLL_US",
				     "RAMSTER_FRAME_TIMEOUT_MS", "RAMSTER_RDMA_READ",
				     "RAMSTER_NO_MEMLOCK"};
	static const struct {
		const char *var, *value, *msg;
	} bad[] = {
	    {"RAMSTER_BUSY_POLL_US", "-5", "RAMSTER_BUSY_POLL_US"},
	    {"RAMSTER_BUSY_POLL_US", "12x", "RAMSTER_BUSY_POLL_US"},
	    {"RAMSTER_BUSY_POLL_US", "99999999", "RAMSTER_BUSY_POLL_US"},
	    {"RAMSTER_FRAME_TIMEOUT_MS", "0", "RAMSTER_FRAME_TIMEOUT_MS"},
	    {"RAMSTER_FRAME_TIMEOUT_MS", "soon", "RAMSTER_FRAME_TIMEOUT_MS"},
	    {"RAMSTER_RDMA_READ", "yes", "RAMSTER_RDMA_READ"},
	};
	struct config_env e;
	char why[256];
	size_t i;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	assert_int_equal(config_env_read(&e, why, sizeof(why)), 0);
	assert_string_equal(e.socket, "");
	assert_false(e.has_busy_poll);
	assert_int_equal(e.frame_timeout_ms, 30000);
	assert_true(e.rdma_read);
	assert_false(e.no_memlock);

	setenv("RAMSTER_SOCKET", "/tmp/x.sock", 1);
	setenv("RAMSTER_BUSY_POLL_US", "0", 1);
	setenv("RAMSTER_FRAME_TIMEOUT_MS", "600", 1);
	setenv("RAMSTER_RDMA_READ", "0", 1);
	setenv("RAMSTER_NO_MEMLOCK", "1", 1);
	assert_int_equal(config_env_read(&e, why, sizeof(why)), 0);
	assert_string_equal(e.socket, "/tmp/x.sock");
	assert_true(e.has_busy_poll);
	assert_int_equal(e.busy_poll_us, 0);
	assert_int_equal(e.frame_timeout_ms, 600);
	assert_false(e.rdma_read);
	assert_true(e.no_memlock);
	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv(bad[i].var, bad[i].value, 1);
		why[0] = 0;
		assert_int_equal(config_env_read(&e, why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, bad[i].msg));
		unsetenv(bad[i].var);
	}
}

/* ---- the table of keys (node/config_keys.c) ---------------------------------------- */

/* The struct a row of sec fills, zeroed. */
static void *table_base(enum config_sec sec)
{
	static struct config c;
	static struct config_node n;
	static struct config_export e;
	static struct config_user u;

	memset(&c, 0, sizeof(c));
	memset(&n, 0, sizeof(n));
	memset(&e, 0, sizeof(e));
	memset(&u, 0, sizeof(u));
	switch (sec) {
	case CONFIG_SEC_NODE:
		return &n;
	case CONFIG_SEC_EXPORT:
		return &e;
	case CONFIG_SEC_USER:
		return &u;
	default:
		return &c;
	}
}

/* Each row: a help, a default to show, sane bounds, a unique name in its section. */
static void test_table_rows(void **state)
{
	size_t i, j;

	assert_true(config_keys_n > 40);
	assert_true(config_keys_n <= CONFIG_KEYS_MAX);
	for (i = 0; i < config_keys_n; i++) {
		const struct config_key *k = &config_keys[i];

		assert_non_null(k->name);
		assert_true(k->sec < CONFIG_SECS);
		assert_ptr_equal(config_key_find(k->sec, k->name), k);
		for (j = 0; j < i; j++)
			if (config_keys[j].sec == k->sec && !strcmp(config_keys[j].name, k->name))
				fail_msg("%s: two rows", k->name);
		assert_non_null(k->help);
		assert_true(k->help[0] != '.' && k->help[0] != '\''); /* roff would eat it */
		assert_true(k->def || k->def_doc);
		assert_true(k->min <= k->max);
		assert_true(k->size > 0);
		switch (k->type) {
		case CONFIG_TEXT:
		case CONFIG_PATH:
		case CONFIG_ADDRESS:
			assert_true(k->max >= 1 && k->max < k->size);
			break;
		case CONFIG_HOSTPORT:
			assert_int_equal(k->size, CONFIG_NAME_MAX);
			break;
		case CONFIG_ENUM:
			assert_non_null(k->choices);
			assert_non_null(k->choices[0].name);
			break;
		default:
			assert_true(k->size == 1 || k->size == 2 || k->size == 4 || k->size == 8);
		}
	}
}

/* Every default parses within its row's bounds, and is what a file without the key gets. */
static void test_table_defaults(void **state)
{
	char why[CONFIG_ERR_MAX];
	size_t i;

	assert_int_equal(load("[node a]\n[export e]\nsize = 4K\n[uid 5]\n"), 0);
	for (i = 0; i < config_keys_n; i++) {
		const struct config_key *k = &config_keys[i];
		void *base = table_base(k->sec);
		const void *loaded = k->sec == CONFIG_SEC_NODE	   ? (void *)&cfg.nodes[0]
				     : k->sec == CONFIG_SEC_EXPORT ? (void *)&cfg.exports[0]
				     : k->sec == CONFIG_SEC_USER   ? (void *)&cfg.users[0]
								   : (void *)&cfg;

		if (!k->def || !strcmp(k->name, "size"))
			continue;
		why[0] = '\0';
		if (config_key_set(k, base, k->def, why, sizeof(why)))
			fail_msg("%s: default '%s' refused: %s", k->name, k->def, why);
		assert_memory_equal(config_key_cfield(k, base), config_key_cfield(k, loaded),
				    k->size);
	}
	assert_int_equal(cfg.request_timeout_ms, cfg.dead_after_ms); /* def_doc says so */
}

/* Each row's bounds are the parser's: the least and the most pass, one beyond does not. */
static void test_table_bounds(void **state)
{
	char why[CONFIG_ERR_MAX], v[32];
	size_t i;

	for (i = 0; i < config_keys_n; i++) {
		const struct config_key *k = &config_keys[i];
		void *base = table_base(k->sec);

		if (k->type != CONFIG_U32 && k->type != CONFIG_U64 && k->type != CONFIG_PERCENT)
			continue;
		snprintf(v, sizeof(v), "%llu", (unsigned long long)k->max);
		assert_int_equal(config_key_set(k, base, v, why, sizeof(why)), 0);
		assert_int_equal(config_key_get(k, base), k->max);
		snprintf(v, sizeof(v), "%llu", (unsigned long long)k->min);
		assert_int_equal(config_key_set(k, base, v, why, sizeof(why)), 0);
		assert_int_equal(config_key_get(k, base), k->min);
		snprintf(v, sizeof(v), "%llu", (unsigned long long)k->max + 1);
		assert_int_equal(config_key_set(k, base, v, why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "is out of range"));
	}
}

/* An enum's names are the ones its module parses (allocator, compressor, log_level). */
static void test_table_choices(void **state)
{
	const struct config_key *k;
	enum zalloc_kind z;
	enum compress_algo a;
	size_t i;

	k = config_key_find(CONFIG_SEC_NODE, "allocator");
	for (i = 0; k->choices[i].name; i++) {
		assert_int_equal(zalloc_parse(k->choices[i].name, &z), 0);
		assert_int_equal(z, k->choices[i].value);
	}
	k = config_key_find(CONFIG_SEC_NODE, "compressor");
	for (i = 0; k->choices[i].name; i++) {
		assert_int_equal(compress_algo_parse(k->choices[i].name, &a), 0);
		assert_int_equal(a, k->choices[i].value);
	}
	k = config_key_find(CONFIG_SEC_NODE, "log_level");
	for (i = 0; k->choices[i].name; i++)
		assert_int_equal(log_level_parse(k->choices[i].name), k->choices[i].value);
}

/* @return whether s starts with the words of want, lines wrapped anywhere between them. */
static bool words_start(const char *s, const char *want)
{
	while (*want) {
		if (*want == ' ') {
			if (!isspace((unsigned char)*s))
				return false;
			while (isspace((unsigned char)*s))
				s++;
			want++;
		} else if (*s++ != *want++) {
			return false;
		}
	}
	return true;
}

/* --help-config (text) and its scd form list every key once, each with its reload rule. */
static void test_help_config(void **state)
{
	static const char *const formats[] = {"text", "scd"};
	char *buf, want[128];
	size_t len, i, f;
	FILE *m;

	for (f = 0; f < 2; f++) {
		m = open_memstream(&buf, &len);
		assert_non_null(m);
		assert_int_equal(config_help_print(m, formats[f]), 0);
		fclose(m);
		for (i = 0; i < config_keys_n; i++) {
			const struct config_key *k = &config_keys[i];
			const char *at;

			snprintf(want, sizeof(want), f ? "\n*%s* = " : "\n  %s = ", k->name);
			at = strstr(buf, want);
			if (!at)
				fail_msg("--help-config=%s: no %s", formats[f], k->name);
			/* the rule is in the key's entry, before the next one */
			at = strstr(at, f ? "Reload: " : "reload: ");
			assert_non_null(at);
			if (!words_start(at + 8, config_reload_text(k->reload)))
				fail_msg("--help-config=%s: %s: not \"%s\"", formats[f], k->name,
					 config_reload_text(k->reload));
		}
		free(buf);
	}
	m = open_memstream(&buf, &len);
	assert_int_equal(config_help_print(m, "html"), -EINVAL);
	fclose(m);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_defaults, teardown),
	    cmocka_unit_test_teardown(test_users_and_limits, teardown),
	    cmocka_unit_test_teardown(test_err_limits, teardown),
	    cmocka_unit_test_teardown(test_err_user_names, teardown),
	    cmocka_unit_test_teardown(test_err_user_keys, teardown),
	    cmocka_unit_test_teardown(test_single_node_minimal, teardown),
	    cmocka_unit_test_teardown(test_single_node_full, teardown),
	    cmocka_unit_test_teardown(test_cluster_full, teardown),
	    cmocka_unit_test_teardown(test_request_timeout_explicit, teardown),
	    cmocka_unit_test_teardown(test_orphan_after, teardown),
	    cmocka_unit_test_teardown(test_cluster_one_node_no_secret, teardown),
	    cmocka_unit_test_teardown(test_two_nodes_no_cluster, teardown),
	    cmocka_unit_test_teardown(test_secret_relative_to_config, teardown),
	    cmocka_unit_test_teardown(test_nbd_tls_keys, teardown),
	    cmocka_unit_test_teardown(test_err_nbd_tls, teardown),
	    cmocka_unit_test_teardown(test_crlf_and_bom, teardown),
	    cmocka_unit_test_teardown(test_fractions, teardown),
	    cmocka_unit_test_teardown(test_parse_size, teardown),
	    cmocka_unit_test_teardown(test_export_sizes, teardown),
	    cmocka_unit_test_teardown(test_err_missing_file, teardown),
	    cmocka_unit_test_teardown(test_err_sections, teardown),
	    cmocka_unit_test_teardown(test_err_keys, teardown),
	    cmocka_unit_test_teardown(test_err_duplicates_across_nodes, teardown),
	    cmocka_unit_test_teardown(test_err_missing_id_address, teardown),
	    cmocka_unit_test_teardown(test_err_numbers, teardown),
	    cmocka_unit_test_teardown(test_metrics_listen_log_level, teardown),
	    cmocka_unit_test_teardown(test_err_values, teardown),
	    cmocka_unit_test_teardown(test_redundancy, teardown),
	    cmocka_unit_test_teardown(test_err_cross_checks, teardown),
	    cmocka_unit_test_teardown(test_err_secret, teardown),
	    cmocka_unit_test_teardown(test_node_tier_keys, teardown),
	    cmocka_unit_test_teardown(test_err_syntax, teardown),
	    cmocka_unit_test(test_env),
	    cmocka_unit_test(test_table_rows),
	    cmocka_unit_test_teardown(test_table_defaults, teardown),
	    cmocka_unit_test(test_table_bounds),
	    cmocka_unit_test(test_table_choices),
	    cmocka_unit_test(test_help_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
