/*
 * collective.c - a collective of real ramsterd nodes for the integration
 * tests: ports, key, cluster files, start/stop, peers and counters.
 *
 * Ports are checked by bind() on INADDR_ANY, so they are free on every
 * 127.0.0.N a test uses; a port can still be taken between the check and the
 * daemon's listen, which the range below the ephemeral ports makes rare.
 */
#include "tests/integration/collective.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- ports and the key ---------------------------------------------------- */

static bool port_free(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* The first port of the kernel's ephemeral range (32768 when unreadable). */
static int ephemeral_low(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	int lo = 32768;

	if (f) {
		if (fscanf(f, "%d", &lo) != 1)
			lo = 32768;
		fclose(f);
	}
	return lo;
}

int coll_free_ports(int n)
{
	/* per process, so that tests started together pick apart */
	static unsigned seed;
	int lo = 20000, hi = ephemeral_low(), tries, base, k;

	if (hi - lo < 1000)
		hi = 50000; /* a range that starts low: pick where the tests used to */
	if (!seed)
		seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	for (tries = 0; tries < 1000; tries++) {
		base = lo + rand_r(&seed) % (hi - lo - n);
		for (k = 0; k < n && port_free(base + k); k++)
			;
		if (k == n)
			return base;
	}
	return -EADDRINUSE;
}

int coll_write_key(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int rc = 0;

	if (!f)
		return -errno;
	if (fputs(text, f) < 0)
		rc = -EIO;
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && chmod(path, 0600))
		rc = -errno;
	return rc;
}

/* ---- the collective ------------------------------------------------------- */

struct coll *coll_create(const char *tag, const char *key_hex)
{
	struct coll *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return NULL;
	snprintf(c->dir, sizeof(c->dir), "/tmp/ramster-%s.XXXXXX", tag);
	if (!mkdtemp(c->dir)) {
		rc = -errno;
		goto free;
	}
	snprintf(c->key, sizeof(c->key), "%s/cluster.key", c->dir);
	rc = coll_write_key(c->key, key_hex);
	if (rc)
		goto rmdir;
	c->port = coll_free_ports(COLL_NODES_MAX);
	if (c->port < 0) {
		rc = c->port;
		goto rmdir;
	}
	return c;
rmdir:
	unlink(c->key);
	rmdir(c->dir);
free:
	free(c);
	errno = -rc;
	return NULL;
}

int coll_destroy(struct coll *c)
{
	char cmd[128];
	int i, rc = 0;

	if (!c)
		return 0;
	for (i = 0; i < COLL_NODES_MAX; i++)
		if (c->h[i].pid && harness_stop(&c->h[i]))
			rc = -EIO;
	/* the tests' files, and whatever the daemons left beside them */
	snprintf(cmd, sizeof(cmd), "rm -rf %s", c->dir);
	if (system(cmd))
		rc = -EIO;
	free(c);
	return rc;
}

void coll_set_node(struct coll *c, int i, const char *name, int local_mb, int donate_mb)
{
	struct coll_node *n = &c->node[i];

	snprintf(n->name, sizeof(n->name), "%s", name);
	n->id = i + 1;
	n->local_mb = local_mb;
	n->donate_mb = donate_mb;
	if (c->nodes < i + 1)
		c->nodes = i + 1;
}

int coll_write_conf(struct coll *c, int i)
{
	char path[sizeof(c->conf[i])];
	FILE *f;
	int k;

	/* via path: GCC takes c->dir and c->conf[i] for an overlap (-Wrestrict) */
	snprintf(path, sizeof(path), "%s/%s.conf", c->dir, c->node[i].name);
	memcpy(c->conf[i], path, sizeof(path));
	f = fopen(c->conf[i], "w");
	if (!f)
		return -errno;
	fprintf(f, "[cluster]\nname = %s\nsecret_file = %s\n%s", c->cluster,
		c->secret_file[0] ? c->secret_file : c->key, c->extra);
	for (k = 0; k < c->nodes; k++) {
		const struct coll_node *n = &c->node[k];

		char donate[16] = "auto", local[16] = "auto";

		if (n->donate_mb >= 0)
			snprintf(donate, sizeof(donate), "%d", n->donate_mb);
		if (n->local_mb >= 0)
			snprintf(local, sizeof(local), "%d", n->local_mb);
		fprintf(f,
			"\n[node %s]\nid = %d\naddress = %s:%d\nlocal_mb = %s\ndonate_mb = %s\n%s",
			n->name, n->id, n->host[0] ? n->host : "127.0.0.1",
			n->port ? n->port : c->port + k, local, donate, n->extra);
	}
	if (fclose(f))
		return -errno;
	return 0;
}

int coll_write_confs(struct coll *c)
{
	int i, rc;

	for (i = 0; i < c->nodes; i++) {
		rc = coll_write_conf(c, i);
		if (rc)
			return rc;
	}
	return 0;
}

int coll_start(struct coll *c, int i)
{
	const char **argv = c->argv[i];
	size_t n = 0, k;

	argv[n++] = "--config";
	argv[n++] = c->conf[i];
	argv[n++] = "--node";
	argv[n++] = c->node[i].name;
	for (k = 0; k < COLL_ARGS_MAX && c->node[i].args[k]; k++)
		argv[n++] = c->node[i].args[k];
	argv[n] = NULL;
	return harness_start(&c->h[i], argv);
}

int coll_start_all(struct coll *c)
{
	int i, rc;

	for (i = 0; i < c->nodes; i++) {
		rc = coll_start(c, i);
		if (rc)
			return rc;
	}
	return 0;
}

int coll_stop(struct coll *c, int i)
{
	return harness_stop(&c->h[i]);
}

/* ---- peers and counters --------------------------------------------------- */

int coll_peers_up(const struct harness *h)
{
	ramster *r = harness_connect(h);
	struct ramster_peer_info *p = NULL;
	size_t n = 0, k;
	int rc, up = 0;

	if (!r)
		return errno ? -errno : -ECONNREFUSED;
	rc = ramster_peers(r, &p, &n);
	if (rc == 0) {
		for (k = 0; k < n; k++)
			up += !strcmp(p[k].state, "up");
		free(p);
	}
	ramster_close(r);
	return rc < 0 ? rc : up;
}

int coll_wait_peers(const struct harness *h, size_t want, unsigned ms)
{
	uint64_t end = harness_now_ms() + ms;
	int up;

	do {
		up = coll_peers_up(h);
		if (up >= 0 && (size_t)up >= want)
			return 0;
		usleep(20000);
	} while (harness_now_ms() < end);
	return -ETIMEDOUT;
}

int coll_wait_up(const struct coll *c, int i, size_t want, unsigned ms)
{
	return coll_wait_peers(&c->h[i], want, ms);
}

const char *coll_lie_daemon(void)
{
	static char path[512];
	const char *bin = getenv("RAMSTER_BIN");

	snprintf(path, sizeof(path), "%s/../tests/ramsterd-lie", bin && *bin ? bin : "build/bin");
	return path;
}

ramster *coll_wait_warm(const struct harness *h, unsigned ms)
{
	uint64_t end = harness_now_ms() + ms;
	ramster *r;

	do {
		r = harness_connect(h);
		if (r) {
			uint64_t warm = 0;

			if (harness_stat(r, "restart_warm", &warm) == 0 && warm == 1)
				return r;
			ramster_close(r);
		}
		usleep(20000);
	} while (harness_now_ms() < end);
	return NULL;
}

int coll_stat(const struct coll *c, int i, const char *name, uint64_t *value)
{
	ramster *r = harness_connect(&c->h[i]);
	int rc;

	if (!r)
		return errno ? -errno : -ECONNREFUSED;
	rc = harness_stat(r, name, value);
	ramster_close(r);
	return rc;
}

int coll_wait_stat(const struct coll *c, int i, const char *name, uint64_t min, uint64_t max,
		   unsigned ms)
{
	uint64_t end = harness_now_ms() + ms, v;
	int rc;

	do {
		rc = coll_stat(c, i, name, &v);
		if (rc)
			return rc;
		if (v >= min && v <= max)
			return 0;
		usleep(20000);
	} while (harness_now_ms() < end);
	return -ETIMEDOUT;
}

/* ---- pages read back ------------------------------------------------------ */

void coll_page_text(unsigned char *page, uint64_t i, uint64_t seed)
{
	harness_page_text(page, i * 7 + seed * 1000003);
}

uint64_t coll_read_back(ramster *r, int pool, uint64_t tag, uint32_t per_obj, uint64_t n,
			void (*expect)(unsigned char *page, uint64_t i, uint64_t seed),
			uint64_t seed, struct coll_read *out)
{
	static unsigned char page[RAMSTER_PAGE_SIZE], want[RAMSTER_PAGE_SIZE];
	uint64_t i;
	int rc;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < n; i++) {
		struct ramster_oid oid = harness_oid(tag, i / per_obj);

		memset(page, 0xa5, sizeof(page));
		rc = ramster_get(r, pool, &oid, (uint32_t)(i % per_obj), page);
		expect(want, i, seed);
		if (rc == 0 && !memcmp(page, want, sizeof(page))) {
			out->ok++;
			continue;
		}
		/* the first three lost, and the first three read wrong or refused otherwise */
		if ((rc == -EIO ? out->eio : out->wrong + out->other) < 3)
			fprintf(stderr, "  page %llu: rc %d%s\n", (unsigned long long)i, rc,
				rc ? "" : ", bytes differ");
		if (rc == 0)
			out->wrong++;
		else if (rc == -EIO)
			out->eio++;
		else
			out->other++;
	}
	return n - out->ok;
}
