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

/* ---- a warm restart (node/restart/restart.h; nbd_restart.c) ---- */

#define NBD_TAG_EXPORT 0x4e01

/* An export as a restart image names it. */
struct nbd_saved {
	uint32_t pool;   /* its tmem pool (the tier's snapshot holds its pages) */
	uint32_t number; /* its place in the config: its pages' object ids carry it */
	uint64_t size;
	uint32_t backing;      /* 1: it had a backing file (the record has five bitmaps) */
	const uint8_t *maps;   /* the bitmaps, in the record */
	char name[CONFIG_NAME_MAX];
};

/* Emit an NBD_TAG_EXPORT record for every export. n may be NULL. @return 0 or emit's error. */
int nbd_save(const struct nbd *n,
	     int (*emit)(void *arg, uint16_t tag, const void *head, size_t head_len,
			 const void *body, size_t body_len),
	     void *arg);

/* Parse a record. @return 0, or -EBADMSG. */
int nbd_record_parse(const uint8_t *rec, size_t len, struct nbd_saved *out);

/*
 * Give the export s names its restored pool and bitmaps (before anything is
 * served). @return 0; -ENOENT (no export of that name now), -ESTALE (its
 * size, place or backing changed, or the pool is not an export's): the
 * caller destroys the pool (the export starts as a new one).
 */
int nbd_adopt(struct nbd *n, const struct nbd_saved *s);

/*
 * The connections across a re-execution (nbd_handover.c). A quiescing
 * server starts no request and reads no more from its sockets; the requests
 * running finish and their replies go out. Then a connection in the
 * transmission phase, without TLS, idle, on an export whose pages the image
 * keeps, is handed to the next process: its socket stays open across the
 * exec or in the fd store (the kernel's NBD client never sees it close) and an NBD_TAG_CONN
 * record carries its state and the bytes it had read and not yet taken.
 * The rest close at the exec, as on any stop.
 */
#define NBD_TAG_CONN 0x4e02

void nbd_quiesce(struct nbd *n); /* NULL ok */
void nbd_resume(struct nbd *n);  /* the restart was given up: serve again. NULL ok */
/* Whether every connection that can be handed over is idle. NULL: true. */
bool nbd_quiet(const struct nbd *n);

/*
 * Emit an NBD_TAG_CONN record for every connection that can be handed over,
 * and its socket's fd into fds[] (at most max) for the exec to leave open.
 * @return the count, or emit's error.
 */
int nbd_save_conns(const struct nbd *n,
		   int (*emit)(void *arg, uint16_t tag, const void *head, size_t head_len,
			       const void *body, size_t body_len),
		   void *arg, int *fds, size_t max);

/* A connection as its record names it. */
struct nbd_conn_saved {
	int fd;             /* its socket, in the process that wrote the record */
	uint32_t number;    /* its export's place in the config */
	bool structured, meta_alloc, tcp;
	const uint8_t *unread; /* the bytes it had read and not taken, in the record */
	uint32_t unread_len;   /* at most a request header and its payload */
};

/* Parse a connection record. @return 0, or -EBADMSG. */
int nbd_conn_record_parse(const uint8_t *rec, size_t len, struct nbd_conn_saved *out);

/* The socket fd a connection record names, or -1 when the record is bad. */
int nbd_conn_record_fd(const uint8_t *rec, size_t len);

/*
 * Serve the connection of a record on its inherited socket fd, on the export
 * of the record's number (taken back from the image: the caller checks).
 * @return 0; -EBADMSG, -ENOENT, -ENOTSOCK, -ENOMEM: fd is closed, counted.
 */
int nbd_adopt_conn(struct nbd *n, const uint8_t *rec, size_t len, int fd);

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
