/*
 * test_reload.c - reload_run's verdict on each key of the cluster file: what
 * it applies and what it names as needing a restart, text for text (the log
 * line and `ramsterctl reload`'s answer). No daemon: the node runs alone (no
 * collective, no NBD server, no user table), so the keys that need those
 * say so. The file is rewritten between the load that "runs" and the reload.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "node/config.h"
#include "node/config_keys.h"
#include "node/log.h"
#include "node/reload.h"

#define KEY_HEX "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"

static char path[64], key[64];
static struct config cur;
static struct reload *rl;
static struct reload_result res;

static void file_write(const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
	int fd;

	snprintf(path, sizeof(path), "/tmp/ramster-test-reload-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	snprintf(key, sizeof(key), "/tmp/ramster-test-reload-key-XXXXXX");
	fd = mkstemp(key);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, KEY_HEX, strlen(KEY_HEX)), (ssize_t)strlen(KEY_HEX));
	close(fd);
	log_set_level(LOG_ERROR); /* the reload's own lines are not the test's output */
	return 0;
}

static int teardown(void **state)
{
	reload_destroy(rl);
	rl = NULL;
	unlink(path);
	unlink(key);
	log_set_level(LOG_ERROR);
	return 0;
}

/* Write text with each "KEYFILE" replaced by the key file's path. */
static void file_write_key(const char *text)
{
	char out[2048], *o = out;
	const char *k;

	while ((k = strstr(text, "KEYFILE"))) {
		o += snprintf(o, sizeof(out) - (size_t)(o - out), "%.*s%s", (int)(k - text), text,
			      key);
		text = k + strlen("KEYFILE");
	}
	snprintf(o, sizeof(out) - (size_t)(o - out), "%s", text);
	file_write(out);
}

/* Run node a from before, then reload after. @return reload_run's code. */
static int reload_from(const char *before, const char *after, bool level_from_flag)
{
	char err[CONFIG_ERR_MAX];

	file_write_key(before);
	assert_int_equal(config_load(&cur, path, err, sizeof(err)), 0);
	rl = reload_create(path, "a", &cur, level_from_flag, NULL);
	assert_non_null(rl);
	file_write_key(after);
	return reload_run(rl, &res);
}

static void expect(const char *applied, const char *restart)
{
	if (strcmp(res.applied, applied) || strcmp(res.restart, restart)) {
		print_error("want applied \"%s\"\n     restart \"%s\"\n"
			    "got  applied \"%s\"\n     restart \"%s\"\n",
			    applied, restart, res.applied, res.restart);
		fail();
	}
}

#define NODES3                                                                                     \
	"[node a]\nid = 1\naddress = 127.0.0.1:7001\n"                                             \
	"[node b]\nid = 2\naddress = 127.0.0.1:7002\n"                                             \
	"[node c]\nid = 3\naddress = 127.0.0.1:7003\n"

static void test_nothing_changed(void **state)
{
	assert_int_equal(
	    reload_from("[node a]\nlocal_mb = 64\n", "[node a]\nlocal_mb = 64\n", false), 0);
	expect("", "");
}

/* [cluster]: the tunables apply, the rest is named for a restart. */
static void test_cluster_keys(void **state)
{
	assert_int_equal(reload_from("[cluster]\nname = one\nsecret_file = KEYFILE\n" NODES3,
				     "[cluster]\nname = two\nsecret_file = KEYFILE\n"
				     "heartbeat_ms = 50\n"
				     "dead_after_ms = 500\n"
				     "orphan_after_ms = 90000\n"
				     "replicas = 2\n"
				     "link_security = integrity\n"
				     "rereplicate_rate = 10\n"
				     "high_watermark = 70%\n"
				     "low_watermark = 60\n"
				     "remotify_ephemeral = no\n"
				     "remotify_persistent = no\n"
				     "request_timeout_ms = 300\n"
				     "room_wait_ms = 20\n"
				     "pers_max = 1/2\n"
				     "pers_mean_max = 2048\n"
				     "pers_mean_limit = 1/4\n" NODES3,
				     false),
			 0);
	expect("replicas 1 -> 2, rereplicate_rate 2000 -> 10, high_watermark 90 -> 70, "
	       "low_watermark 80 -> 60, remotify_ephemeral 1 -> 0, remotify_persistent 1 -> 0, "
	       "request_timeout_ms 1000 -> 300",
	       "name 'one' -> 'two', heartbeat_ms 100 -> 50, dead_after_ms 1000 -> 500, "
	       "orphan_after_ms 600000 -> 90000, link_security 0 -> 1, room_wait_ms 500 -> 20, "
	       "pers_max 0 -> 512, pers_mean_max 0 -> 512, pers_mean_limit 0 -> 256");
	/* applied keys run from now on; restart keys stay as they run */
	assert_int_equal(cur.replicas, 2);
	assert_int_equal(cur.request_timeout_ms, 300);
	assert_int_equal(cur.heartbeat_ms, 100);
	assert_string_equal(cur.cluster_name, "one");
}

/* request_timeout_ms follows dead_after_ms when not written. */
static void test_request_timeout_follows(void **state)
{
	assert_int_equal(
	    reload_from("[cluster]\nsecret_file = KEYFILE\n" NODES3,
			"[cluster]\nsecret_file = KEYFILE\ndead_after_ms = 700\n" NODES3, false),
	    0);
	expect("request_timeout_ms 1000 -> 700", "dead_after_ms 1000 -> 700");
}

/* This node's own section. */
static void test_self_keys(void **state)
{
	assert_int_equal(reload_from("[node a]\nid = 1\naddress = h:1\nlocal_mb = 64\n",
				     "[node a]\nid = 2\naddress = g:2\n"
				     "transport = auto\n"
				     "socket = /run/x.sock\n"
				     "local_mb = 128\n"
				     "donate_mb = 32\n"
				     "nbd_socket = /run/n.sock\n"
				     "nbd_listen = 127.0.0.1:10809\n"
				     "nbd_tls = on\n"
				     "nbd_tls_psk = /k.psk\n"
				     "busy_poll_us = 0\n"
				     "allocator = zbud\n"
				     "compressor = lz4\n"
				     "metrics_listen = 127.0.0.1:9101\n",
				     false),
			 0);
	expect("donate_mb 0 -> 32",
	       "id 1 -> 2, address 'h' -> 'g', address's port 1 -> 2, transport 0 -> 2, "
	       "socket '' -> '/run/x.sock', local_mb 64 -> 128, nbd_socket '' -> '/run/n.sock', "
	       "nbd_listen '' -> '127.0.0.1:10809', nbd_tls 0 -> 2, nbd_tls_psk '' -> '/k.psk', "
	       "metrics_listen '' -> '127.0.0.1:9101', busy_poll_us 50 -> 0, allocator 0 -> 1, "
	       "compressor 0 -> 1");
	assert_int_equal(cur.nodes[0].donate_mb, 32);
	assert_int_equal(cur.nodes[0].local_mb, 64);
}

/* With nbd_tls unchanged and no NBD server, a new key path is named, not read. */
static void test_nbd_tls_paths(void **state)
{
	assert_int_equal(reload_from("[node a]\nnbd_tls = on\nnbd_tls_psk = /k1\n",
				     "[node a]\nnbd_tls = on\nnbd_tls_certificates = /pki\n",
				     false),
			 0);
	expect("", "nbd_tls_psk '/k1' -> '', nbd_tls_certificates '' -> '/pki'");
}

/* log_level: applied, unless --log-level was given. */
static void test_log_level(void **state)
{
	log_set_level(LOG_INFO);
	assert_int_equal(reload_from("[node a]\n", "[node a]\nlog_level = debug\n", false), 0);
	expect("log_level info -> debug", "");
	assert_int_equal(log_get_level(), LOG_DEBUG);
	teardown(NULL);
	setup(NULL);
	log_set_level(LOG_WARN);
	assert_int_equal(reload_from("[node a]\n", "[node a]\nlog_level = debug\n", true), 0);
	expect("", "log_level debug (--log-level warn on the command line wins)");
	assert_int_equal(log_get_level(), LOG_WARN);
}

/* [limits] and the rules: without a user table they need a restart; the NBD and peer keys too. */
static void test_limits_and_rules(void **state)
{
	assert_int_equal(reload_from("[node a]\n", "[node a]\n[limits]\nmax_clients = 10\n", false),
			 0);
	expect("", "[limits] client keys");
	teardown(NULL);
	setup(NULL);
	assert_int_equal(reload_from("[node a]\n",
				     "[node a]\n[limits]\npeer_unauth_max = 8\n"
				     "nbd_max_connections = 9\n",
				     false),
			 0);
	expect("", "[limits] nbd_*/peer_* keys");
	teardown(NULL);
	setup(NULL);
	assert_int_equal(reload_from("[node a]\n[uid 5]\nweight = 2\n",
				     "[node a]\n[uid 5]\nweight = 3\n[limits]\nmax_clients = 10\n",
				     false),
			 0);
	expect("", "[uid]/[user]/[group] rules");
}

static void test_exports(void **state)
{
	assert_int_equal(reload_from("[node a]\n[export e]\nsize = 4K\n",
				     "[node a]\n[export e]\nsize = 8K\n", false),
			 0);
	expect("", "[export] sections");
	teardown(NULL);
	setup(NULL);
	assert_int_equal(reload_from("[node a]\n[export e]\nsize = 4K\n",
				     "[node a]\n[export e]\nsize = 4K\nbacking = /b\n", false),
			 0);
	expect("", "[export] sections");
}

/* Other nodes: without a collective an added node cannot join, a removed one cannot go. */
static void test_other_nodes(void **state)
{
	assert_int_equal(
	    reload_from("[node a]\nid = 1\naddress = h:1\n[node b]\nid = 2\naddress = h:2\n",
			"[node a]\nid = 1\naddress = h:1\n[node b]\nid = 2\naddress = h:3\n"
			"[node c]\nid = 3\naddress = h:4\n",
			false),
	    0);
	expect("", "[node b] id/address/transport, "
		   "[node c] added (this node is not in a collective)");
	teardown(NULL);
	setup(NULL);
	assert_int_equal(
	    reload_from("[node a]\nid = 1\naddress = h:1\n[node b]\nid = 2\naddress = h:2\n",
			"[node a]\nid = 1\naddress = h:1\n", false),
	    0);
	expect("", "[node b] removed (Transport endpoint is not connected)");
}

static void test_bad_file(void **state)
{
	assert_int_equal(
	    reload_from("[node a]\ndonate_mb = 1\n", "[node a]\ndonate_mb = lots\n", false),
	    -EINVAL);
	assert_non_null(strstr(res.error, "donate_mb: 'lots' is not a number"));
	assert_int_equal(cur.nodes[0].donate_mb, 1);
	teardown(NULL);
	setup(NULL);
	assert_int_equal(reload_from("[node a]\n", "[node b]\n", false), -EINVAL);
	assert_non_null(strstr(res.error, "no [node a] section any more"));
}

/* In lines (a section's "key = value\n" lines), set name to value: replace its line or add one. */
static void lines_set(char *lines, size_t cap, const char *name, const char *value)
{
	char head[128], rest[1024];
	char *at = lines;
	size_t n;

	snprintf(head, sizeof(head), "%s = ", name);
	while (*at && strncmp(at, head, strlen(head)))
		at += strcspn(at, "\n") + 1;
	if (!*at) {
		n = strlen(lines);
		snprintf(lines + n, cap - n, "%s%s\n", head, value);
		return;
	}
	snprintf(rest, sizeof(rest), "%s", at + strcspn(at, "\n") + 1);
	n = (size_t)(at - lines);
	snprintf(lines + n, cap - n, "%s%s\n%s", head, value, rest);
}

/* A valid value of k other than its default (and other than the base file's). */
static void other_value(const struct config_key *k, char *v, size_t len)
{
	unsigned long long d;
	size_t i;

	switch (k->type) {
	case CONFIG_U32:
	case CONFIG_U64:
	case CONFIG_PERCENT:
		d = k->def ? strtoull(k->def, NULL, 10) : k->max;
		snprintf(v, len, "%llu",
			 !k->def      ? d
			 : d < k->max ? d + 1
				      : (unsigned long long)k->min);
		break;
	case CONFIG_BOOL:
		snprintf(v, len, "%s", !strcmp(k->def, "true") ? "false" : "true");
		break;
	case CONFIG_FRACTION:
		snprintf(v, len, "1/2");
		break;
	case CONFIG_SIZE:
		snprintf(v, len, "8K");
		break;
	case CONFIG_ENUM:
		for (i = 0; k->choices[i].name; i++)
			if (!k->def || strcmp(k->def, k->choices[i].name))
				break;
		snprintf(v, len, "%s", k->choices[i].name);
		break;
	case CONFIG_TEXT: /* redundancy has a grammar (replicas 2: three nodes below) */
		snprintf(v, len, "%s", !strcmp(k->name, "redundancy") ? "replicas 2" : "x");
		break;
	case CONFIG_PATH: /* secret_file: the same key by another name */
		snprintf(v, len, "%s", !strcmp(k->name, "secret_file") ? "/tmp/../tmp/" : "/x");
		if (!strcmp(k->name, "secret_file"))
			snprintf(v + strlen(v), len - strlen(v), "%s", key + strlen("/tmp/"));
		break;
	case CONFIG_ADDRESS:
		snprintf(v, len, "127.0.0.1:1");
		break;
	case CONFIG_HOSTPORT:
		snprintf(v, len, "127.0.0.1:7009");
		break;
	}
}

/*
 * Every key, changed alone, is either applied or named as needing a restart:
 * a key no reload looks at would run on as it was and nobody would know.
 */
static void test_every_key_has_a_verdict(void **state)
{
	static const char *const headers[CONFIG_SECS] = {
	    [CONFIG_SEC_CLUSTER] = "[cluster]\n", [CONFIG_SEC_NODE] = "[node a]\n",
	    [CONFIG_SEC_EXPORT] = "[export e]\n", [CONFIG_SEC_LIMITS] = "[limits]\n",
	    [CONFIG_SEC_USER] = "[uid 5]\n",
	};
	static const char *const base[CONFIG_SECS] = {
	    [CONFIG_SEC_CLUSTER] = "secret_file = KEYFILE\n",
	    [CONFIG_SEC_NODE] = "id = 1\naddress = 127.0.0.1:7001\n",
	    [CONFIG_SEC_EXPORT] = "size = 4K\n",
	    [CONFIG_SEC_LIMITS] = "",
	    [CONFIG_SEC_USER] = "",
	};
	/* the rules first: a rule's line is part of it, and a line added above would change it */
	static const enum config_sec order[CONFIG_SECS] = {
	    CONFIG_SEC_USER,   CONFIG_SEC_CLUSTER, CONFIG_SEC_NODE,
	    CONFIG_SEC_EXPORT, CONFIG_SEC_LIMITS,
	};
	size_t i, j, sec;

	for (i = 0; i < config_keys_n; i++) {
		const struct config_key *k = &config_keys[i];
		char lines[CONFIG_SECS][1024], before[8192] = "", after[8192] = "", v[256];
		/* TLS key files without nbd_tls refuse the file; off keeps them unused */
		bool tls_keys = k->reload == CONFIG_RELOAD_TLS_KEYS;

		for (j = 0; j < CONFIG_SECS; j++) {
			sec = order[j];
			snprintf(lines[sec], sizeof(lines[sec]), "%s", base[sec]);
			if (sec == CONFIG_SEC_NODE && tls_keys)
				lines_set(lines[sec], sizeof(lines[sec]), "nbd_tls", "off");
			snprintf(before + strlen(before), sizeof(before) - strlen(before), "%s%s",
				 headers[sec], lines[sec]);
		}
		other_value(k, v, sizeof(v));
		lines_set(lines[k->sec], sizeof(lines[k->sec]), k->name, v);
		for (j = 0; j < CONFIG_SECS; j++)
			snprintf(after + strlen(after), sizeof(after) - strlen(after), "%s%s",
				 headers[order[j]], lines[order[j]]);
		strcat(before, "[node b]\nid = 2\naddress = 127.0.0.1:7002\n"
			       "[node c]\nid = 3\naddress = 127.0.0.1:7003\n");
		strcat(after, "[node b]\nid = 2\naddress = 127.0.0.1:7002\n"
			      "[node c]\nid = 3\naddress = 127.0.0.1:7003\n");
		if (reload_from(before, after, false))
			fail_msg("[%s] %s = %s: %s", config_sec_name(k->sec), k->name, v,
				 res.error);
		if (k->sec == CONFIG_SEC_CLUSTER || k->sec == CONFIG_SEC_NODE) {
			if (!strstr(res.applied, k->name) && !strstr(res.restart, k->name))
				fail_msg("[%s] %s = %s: neither applied nor named (applied \"%s\", "
					 "restart \"%s\")",
					 config_sec_name(k->sec), k->name, v, res.applied,
					 res.restart);
		} else if (!res.applied[0] && !res.restart[0]) { /* named as a group */
			fail_msg("[%s] %s = %s: neither applied nor named", config_sec_name(k->sec),
				 k->name, v);
		}
		teardown(NULL);
		setup(NULL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_nothing_changed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cluster_keys, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_request_timeout_follows, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_self_keys, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nbd_tls_paths, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_log_level, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_limits_and_rules, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exports, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_other_nodes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_every_key_has_a_verdict, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
