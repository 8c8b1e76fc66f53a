/*
 * nbd.h - the node's NBD frontend: the configured exports served over the
 * NBD protocol (fixed newstyle handshake, simple or structured replies,
 * base:allocation block status) on a Unix socket and optionally TCP, on the
 * event loop's thread (backing-file syncs on a worker).
 *
 * Each export is a persistent keep-all tmem pool of its own (incompressible
 * blocks kept raw): block N (4096 bytes) is page N & 0xfffff of object
 * {export number, N >> 20, 0}. Blocks never written read as zeros. Pages the
 * tier refuses (full) go to the export's backing file when it has one, else
 * the write fails with ENOSPC; FLUSH and FUA write what tmem holds behind to
 * that file and answer success only after a good fdatasync, so a restart
 * loses nothing flushed.
 */
#ifndef RAMSTER_NODE_NBD_H
#define RAMSTER_NODE_NBD_H

#include <stddef.h>
#include <stdint.h>

#include "node/config.h"
#include "node/store.h"

struct ev_loop;
struct nbd;

#define NBD_DEFAULT_SOCKET "/run/ramster/nbd.sock"

/*
 * Create the exports of cfg (a pool each; backing files opened or created
 * and sized) and listen on self's nbd_socket (default NBD_DEFAULT_SOCKET,
 * parent directory created) and, when set, nbd_listen (HOST:PORT). self may
 * be NULL (defaults). Every page goes through store.
 * @return the server, or NULL with err set to a one-line reason.
 */
struct nbd *nbd_create(struct ev_loop *loop, struct store *store,
		       const struct config *cfg, const struct config_node *self, char *err,
		       size_t errlen);

/* Close every connection, stop listening, remove our socket, close the files. NULL ok. */
void nbd_destroy(struct nbd *n);

/* What the server listens on, for the start-up log line ("unix PATH, tcp HOST:PORT"). */
const char *nbd_describe(const struct nbd *n);

/* One export, as `ramsterctl exports` shows it. */
struct nbd_export_info {
	const char *name;       /* valid while the server lives */
	const char *backing;    /* "" = none */
	uint64_t size;          /* bytes */
	uint64_t pages_local;   /* pages in the local tier (zero pages included) */
	uint64_t pages_remote;  /* pages whose copy is on a peer */
	uint64_t pages_backing; /* blocks whose data is in the backing file only */
	uint64_t clients;       /* connections attached now */
	uint64_t requests;      /* transmission requests served */
	uint64_t errors;        /* error replies sent */
};

/* @return the number of exports (0 for NULL). */
size_t nbd_export_count(const struct nbd *n);

/* Fill *info for export i (< nbd_export_count). O(1): the pool's counts. */
void nbd_export_info(struct nbd *n, size_t i, struct nbd_export_info *info);

/*
 * A reload: read the NBD TLS keys again from self's nbd_tls_psk or
 * nbd_tls_certificates (new sessions use them, live ones keep theirs).
 * @return 0 done, 1 TLS is not offered (nothing to read), or -errno with err
 * set (the running keys stay).
 */
int nbd_reload_tls(struct nbd *n, const struct config_node *self, char *err, size_t errlen);

/* Call fn(arg, name, value, help) for every counter of the server ("nbd_..."). */
void nbd_foreach_stat(const struct nbd *n,
		      void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
		      void *arg);

#endif /* RAMSTER_NODE_NBD_H */
