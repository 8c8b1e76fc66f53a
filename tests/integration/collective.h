/*
 * collective.h - several real ramsterd nodes on this machine for the
 * integration tests: free TCP ports, a cluster key, cluster files written
 * from a small description, the nodes started and stopped through the
 * harness (harness.h), peers and counters waited for.
 *
 * The test fills in the description (cluster name, [cluster] lines, one
 * struct coll_node a node) after coll_create() and before it writes a file;
 * it may change it and write a node's file again (another key, another
 * address) before restarting that node. Like the harness, nothing here calls
 * into cmocka: 0 / -errno, the test asserts.
 */
#ifndef RAMSTER_COLLECTIVE_H
#define RAMSTER_COLLECTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "tests/integration/harness.h"

#define COLL_NODES_MAX 8
#define COLL_ARGS_MAX  8

/* One [node] section, and how its daemon is started. */
struct coll_node {
	char name[32];			 /* [node NAME] and --node NAME */
	int id;				 /* id = ID */
	char host[32];			 /* the address's host; "": 127.0.0.1 */
	int port;			 /* the address's port; 0: the collective's port + index */
	int local_mb;			 /* local_mb = N; negative: auto */
	int donate_mb;			 /* donate_mb = N; negative: auto */
	char extra[256];		 /* more lines of the section ("key = value\n"...) */
	const char *args[COLL_ARGS_MAX]; /* more ramsterd flags (NULL-terminated) */
};

/* A collective: its description, its files and its running daemons. */
struct coll {
	char dir[64];			/* mkdtemp: the key and the cluster files */
	char key[128];			/* DIR/cluster.key, written by coll_create() */
	char conf[COLL_NODES_MAX][128]; /* the file node i starts with: DIR/NAME.conf */
	int port;			/* the first of COLL_NODES_MAX consecutive free ports */
	int nodes;			/* sections in the files, nodes that can start */
	char cluster[32];		/* name = NAME */
	char secret_file[128];		/* secret_file = PATH; "": key */
	char extra[512];		/* more [cluster] lines after name and secret_file */
	struct coll_node node[COLL_NODES_MAX];
	struct harness h[COLL_NODES_MAX]; /* h[i].pid is 0 while node i is not running */
	const char *argv[COLL_NODES_MAX][COLL_ARGS_MAX + 6]; /* what harness_start() got */
};

/*
 * Find n consecutive TCP ports that bind() now on every address, from a
 * random start below the kernel's ephemeral range (so that no outgoing
 * connection takes one before a daemon listens on it); tried up to 1000
 * times. @return the first port, or -EADDRINUSE.
 */
int coll_free_ports(int n);

/* Write text to path, mode 0600 (a cluster key). @return 0 or -errno. */
int coll_write_key(const char *path, const char *text);

/*
 * A new collective: its dir (/tmp/ramster-TAG.XXXXXX), a key (key_hex, a
 * line of 64 hex digits) in DIR/cluster.key and COLL_NODES_MAX free ports.
 * The description is empty: the caller fills it in (coll_set_node(), then
 * cluster, extra and the nodes' host, port, extra and args as it needs).
 * @return it (free with coll_destroy()), or NULL with errno set.
 */
struct coll *coll_create(const char *tag, const char *key_hex);

/*
 * Describe node i: name, id i + 1, its tier and what it lends; the address
 * 127.0.0.1 on port + i. Raises nodes to at least i + 1.
 */
void coll_set_node(struct coll *c, int i, const char *name, int local_mb, int donate_mb);

/*
 * Stop every running node (harness_stop()), remove the dir, free c.
 * @return 0, or -EIO if a node did not exit 0 in time or the dir stayed.
 * Accepts NULL.
 */
int coll_destroy(struct coll *c);

/*
 * Write conf[i], the cluster file node i starts with: [cluster] (name,
 * secret_file, extra), then a [node] section for each of the nodes.
 * @return 0 or -errno.
 */
int coll_write_conf(struct coll *c, int i);

/* coll_write_conf() for every node. @return 0 or the first -errno. */
int coll_write_confs(struct coll *c);

/*
 * Start node i (harness_start() with --config conf[i] --node NAME and its
 * args); its file must have been written. @return as harness_start().
 */
int coll_start(struct coll *c, int i);

/* Start every node, in order. @return 0 or the first failure's -errno. */
int coll_start_all(struct coll *c);

/* Stop node i (harness_stop()). @return as harness_stop(). */
int coll_stop(struct coll *c, int i);

/*
 * The peers daemon h sees in state "up". @return their number, or -errno
 * (no connection, the call failed).
 */
int coll_peers_up(const struct harness *h);

/*
 * Wait up to ms until the daemon h sees at least want peers up (polled
 * every 20 ms, a failed connection counting as none up).
 * @return 0 or -ETIMEDOUT.
 */
int coll_wait_peers(const struct harness *h, size_t want, unsigned ms);

/* $RAMSTER_BIN/../tests/ramsterd-lie: the daemon with the lying holder (the Makefile's). */
const char *coll_lie_daemon(void);

/*
 * Wait up to ms until the daemon h, re-executed (a warm restart: the same
 * pid), answers with restart_warm 1. @return a connection to it, or NULL.
 */
ramster *coll_wait_warm(const struct harness *h, unsigned ms);

/* coll_wait_peers() for node i. */
int coll_wait_up(const struct coll *c, int i, size_t want, unsigned ms);

/*
 * Read counter name of node i (a connection of its own).
 * @return 0 with *value set; -ENOENT: no such counter; -ECONNREFUSED (or
 * another -errno): no connection to the node.
 */
int coll_stat(const struct coll *c, int i, const char *name, uint64_t *value);

/*
 * Wait up to ms until counter name of node i is in [min, max] (polled every
 * 20 ms). @return 0; -ETIMEDOUT; or at once the -errno of a failed read.
 */
int coll_wait_stat(const struct coll *c, int i, const char *name, uint64_t min, uint64_t max,
		   unsigned ms);

/* Page i of version seed for coll_read_back(): harness_page_text(page, i * 7 + seed * 1000003). */
void coll_page_text(unsigned char *page, uint64_t i, uint64_t seed);

/* What coll_read_back() found: each page read counts in exactly one. */
struct coll_read {
	uint64_t ok;	/* 0, and the bytes expected */
	uint64_t wrong; /* 0, but other bytes */
	uint64_t eio;	/* -EIO: the page is lost */
	uint64_t other; /* any other -errno (-ENOENT among them) */
};

/*
 * Read pages 0 to n - 1 of pool one by one with ramster_get(): page i is
 * index i % per_obj of object harness_oid(tag, i / per_obj) and should hold
 * the RAMSTER_PAGE_SIZE bytes expect(page, i, seed) writes. The buffer is
 * filled with 0xa5 before each get. Counts every page in *out; names on
 * stderr the first three -EIO pages and the first three otherwise not read
 * back right. Asserts nothing: the test says which outcomes it allows.
 * @return the pages not read back right (n - ok).
 */
uint64_t coll_read_back(ramster *r, int pool, uint64_t tag, uint32_t per_obj, uint64_t n,
			void (*expect)(unsigned char *page, uint64_t i, uint64_t seed),
			uint64_t seed, struct coll_read *out);

#endif /* RAMSTER_COLLECTIVE_H */
