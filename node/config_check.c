/*
 * config_check.c - the rules of the cluster file across keys and sections,
 * checked once every line parsed (config_int.h): required keys, keys that
 * bound each other, the secret, NBD TLS's keys, relative paths.
 *
 * A problem names the line of the key concerned, else of its section; the
 * earliest line wins, as for the parse's own problems.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "node/config.h"
#include "node/config_int.h"
#include "node/config_keys.h"
#include "tmem/replica.h"

#define CONFIG_SECRET_MIN 16 /* bytes; `ramsterctl genkey` prints 64 hex digits */

/* A relative file (secret_file, nbd_tls_*) is relative to the config file's directory. */
static void config_resolve_path(struct config_parse *p, int line, const char *key,
				char file[CONFIG_PATH_MAX])
{
	struct config *c = p->c;
	const char *slash = strrchr(c->path, '/');
	char path[CONFIG_PATH_MAX];

	if (!file[0] || file[0] == '/' || !slash)
		return;
	if ((size_t)snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - c->path), c->path,
			     file) >= sizeof(path)) {
		config_fail_at(p, line, "%s: path too long", key);
		return;
	}
	strcpy(file, path);
}

/*
 * A node's NBD TLS keys: on|require needs exactly one kind of credentials
 * (as nbdkit: --tls-psk or --tls-certificates); keys without nbd_tls are a
 * forgotten nbd_tls line. The files themselves are read by nbd_create.
 */
static void config_check_nbd_tls(struct config_parse *p, struct config_node *n)
{
	bool psk = n->nbd_tls_psk[0], x509 = n->nbd_tls_certificates[0];
	int line = n->nbd_tls_line ? n->nbd_tls_line : n->line;

	if ((n->nbd_tls == NBD_TLS_ON || n->nbd_tls == NBD_TLS_REQUIRE) && !psk && !x509)
		config_fail_at(p, line,
			       "node '%s': nbd_tls = %s needs nbd_tls_psk = FILE (psktool) or "
			       "nbd_tls_certificates = DIR (certtool)",
			       n->name, n->nbd_tls == NBD_TLS_ON ? "on" : "require");
	else if (psk && x509)
		config_fail_at(
		    p, line, "node '%s': set one of nbd_tls_psk and nbd_tls_certificates, not both",
		    n->name);
	else if ((psk || x509) && n->nbd_tls == NBD_TLS_UNSET)
		config_fail_at(p, n->line,
			       "node '%s': %s is set but nbd_tls is not (write nbd_tls = on, "
			       "require or off)",
			       n->name, psk ? "nbd_tls_psk" : "nbd_tls_certificates");
	config_resolve_path(p, line, "nbd_tls_psk", n->nbd_tls_psk);
	config_resolve_path(p, line, "nbd_tls_certificates", n->nbd_tls_certificates);
}

/*
 * The secret must be there, readable, and at least CONFIG_SECRET_MIN bytes of
 * anything (random bytes, or `ramsterctl genkey`'s 64 hex digits): the key is
 * a hash of the whole file (cluster_load_key).
 */
static void config_check_secret(struct config_parse *p, int secret_line)
{
	struct config *c = p->c;
	char buf[4096];
	ssize_t n;
	int fd, err;

	if (!c->secret_file[0]) {
		config_fail_at(p, p->cluster_line,
			       "secret_file is required with a [cluster] section and 2+ nodes");
		return;
	}
	fd = open(c->secret_file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		config_fail_at(p, secret_line, "cannot read secret_file %s: %s", c->secret_file,
			       strerror(errno));
		return;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	err = errno;
	close(fd);
	if (n < 0) {
		config_fail_at(p, secret_line, "cannot read secret_file %s: %s", c->secret_file,
			       strerror(err));
		return;
	}
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		n--;
	if (n < CONFIG_SECRET_MIN)
		config_fail_at(
		    p, secret_line,
		    "secret_file %s: too short (%zd bytes; at least %d, see `ramsterctl genkey`)",
		    c->secret_file, n, CONFIG_SECRET_MIN);
}

/*
 * redundancy = "replicas N" or "ec K+M" ("ecK+M" too): into replicas, or
 * ec_k and ec_m. Given with replicas = N, the two must agree.
 */
static void check_redundancy(struct config_parse *p, struct config *c)
{
	int line = config_key_line(p, CONFIG_SEC_CLUSTER, "redundancy");
	int rline = config_key_line(p, CONFIG_SEC_CLUSTER, "replicas");
	unsigned a, b;
	char tail;

	if (!line)
		return;
	if (sscanf(c->redundancy, "replicas %u %c", &a, &tail) == 1) {
		if (a < 1 || a > REPLICA_COPIES_MAX)
			config_fail_at(p, line, "redundancy: replicas %u is out of range 1..%u", a,
				       REPLICA_COPIES_MAX);
		else if (rline && c->replicas != a)
			config_fail_at(p, line, "redundancy = replicas %u but replicas = %u", a,
				       c->replicas);
		else
			c->replicas = a;
		return;
	}
	if (sscanf(c->redundancy, "ec %u+%u %c", &a, &b, &tail) == 2 ||
	    sscanf(c->redundancy, "ec%u+%u %c", &a, &b, &tail) == 2) {
		if (a < 2 || b < 1 || a + b > REPLICA_MAX)
			config_fail_at(p, line,
				       "redundancy: ec %u+%u: K (data fragments) is 2 or more, M "
				       "(parity) 1 or more, K+M at most %u",
				       a, b, REPLICA_MAX);
		else if (rline && c->replicas > 1)
			config_fail_at(p, line, "redundancy = ec %u+%u and replicas = %u: one or "
				       "the other", a, b, c->replicas);
		else {
			c->ec_k = a;
			c->ec_m = b;
		}
		return;
	}
	config_fail_at(p, line, "redundancy: '%s' is neither 'replicas N' nor 'ec K+M'",
		       c->redundancy);
}

void config_check(struct config_parse *p)
{
	struct config *c = p->c;
	int secret_line = config_key_line(p, CONFIG_SEC_CLUSTER, "secret_file");
	int high_line = config_key_line(p, CONFIG_SEC_CLUSTER, "high_watermark");
	int low_line = config_key_line(p, CONFIG_SEC_CLUSTER, "low_watermark");
	int heartbeat_line = config_key_line(p, CONFIG_SEC_CLUSTER, "heartbeat_ms");
	int dead_line = config_key_line(p, CONFIG_SEC_CLUSTER, "dead_after_ms");
	int orphan_line = config_key_line(p, CONFIG_SEC_CLUSTER, "orphan_after_ms");
	bool collective = c->has_cluster || c->n_nodes >= 2;
	size_t i;

	for (i = 0; collective && i < c->n_nodes; i++) {
		const struct config_node *n = &c->nodes[i];

		if (!n->id)
			config_fail_at(
			    p, n->line,
			    "node '%s' has no id (required with a [cluster] section or 2+ nodes)",
			    n->name);
		else if (!n->port)
			config_fail_at(p, n->line,
				       "node '%s' has no address (required with a [cluster] "
				       "section or 2+ nodes)",
				       n->name);
	}
	for (i = 0; i < c->n_exports; i++)
		if (!c->exports[i].size)
			config_fail_at(p, c->exports[i].line, "export '%s' has no size",
				       c->exports[i].name);
	if (c->low_watermark_pct >= c->high_watermark_pct)
		config_fail_at(p, low_line ? low_line : high_line,
			       "low_watermark (%u%%) must be below high_watermark (%u%%)",
			       c->low_watermark_pct, c->high_watermark_pct);
	if (c->dead_after_ms <= c->heartbeat_ms)
		config_fail_at(p, dead_line ? dead_line : heartbeat_line,
			       "dead_after_ms (%u) must be above heartbeat_ms (%u)",
			       c->dead_after_ms, c->heartbeat_ms);
	if (!config_key_line(p, CONFIG_SEC_CLUSTER, "request_timeout_ms"))
		c->request_timeout_ms = c->dead_after_ms;
	if (c->orphan_after_ms <= c->dead_after_ms)
		config_fail_at(p, orphan_line ? orphan_line : dead_line,
			       "orphan_after_ms (%u) must be above dead_after_ms (%u)",
			       c->orphan_after_ms, c->dead_after_ms);
	check_redundancy(p, c);
	if (c->replicas > 1 && c->replicas + 1 > c->n_nodes)
		config_fail_at(p, config_key_line(p, CONFIG_SEC_CLUSTER, "replicas"),
			       "replicas = %u needs at least %u nodes (the owner and %u peers); "
			       "the file has %zu",
			       c->replicas, c->replicas + 1, c->replicas, c->n_nodes);
	if (c->ec_k && c->ec_k + c->ec_m + 1 > c->n_nodes)
		config_fail_at(p, config_key_line(p, CONFIG_SEC_CLUSTER, "redundancy"),
			       "redundancy = ec %u+%u needs at least %u nodes (the owner and %u "
			       "peers, one a fragment); the file has %zu",
			       c->ec_k, c->ec_m, c->ec_k + c->ec_m + 1, c->ec_k + c->ec_m, c->n_nodes);
	for (i = 0; i < c->n_nodes; i++)
		config_check_nbd_tls(p, &c->nodes[i]);
	config_resolve_path(p, secret_line, "secret_file", c->secret_file);
	if (c->has_cluster && c->n_nodes >= 2)
		config_check_secret(p, secret_line);
}
