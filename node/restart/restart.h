/*
 * restart.h - a planned restart that keeps the node's pages
 * (docs/warm-restart.md).
 *
 * At a planned stop the node writes what it holds (the tier's pools and
 * pages: tmem/snapshot.h; the pool directory: pools_save) into a checked
 * image (node/restart/image.h) in a memfd, and either re-executes itself with
 * the memfd inherited ($RAMSTER_RESTART_FD: SIGUSR2, `ramsterctl restart`)
 * or hands it to systemd's file descriptor store (FDSTORE=1,
 * FDNAME=ramster-image) before it exits, to get it back in LISTEN_FDS when
 * the unit starts again. The new process loads the image before it serves
 * anyone; an image that does not check out is refused, counted and closed,
 * and the node starts cold. A crash leaves no image: a cold start.
 *
 * Loop thread only; the save needs a quiet node (the loop stopped, the
 * collective's threads stopped).
 */
#ifndef RAMSTER_RESTART_H
#define RAMSTER_RESTART_H

#include <stdbool.h>
#include <stdint.h>

#include "node/restart/image.h"

#define RESTART_ENV    "RAMSTER_RESTART_FD"
#define RESTART_FDNAME "ramster-image"
#define RESTART_KIND   0x4e4f4445u /* "NODE": the image of a whole node */

#define RESTART_NBD_MAX 64 /* exports an image may name */
#define RESTART_CONNS_MAX 64 /* NBD connections handed over a re-execution */
#define RESTART_CONNS_ENV "RAMSTER_NBD_FDS" /* their sockets' fds: "5,9,12" */

#define RESTART_CONN_FDNAME "nbdconn-" /* in the fd store: "nbdconn-" and the fd the record names */

/* The NBD sockets a restart hands over (nbd_save_conns). */
struct restart_conns {
	int fd[RESTART_CONNS_MAX];  /* the socket, in this process */
	int old[RESTART_CONNS_MAX]; /* the fd its record names (the fd store renumbers) */
	size_t n;
};

struct zcache;
struct nbd;
struct store;
struct pools;
struct users;
struct remote;

struct restart_stats {
	uint64_t warm;		  /* 1: this process started from an image */
	uint64_t refused;	  /* images refused (did not check out, or another format) */
	uint64_t pools, pages;	  /* pools and pages loaded */
	uint64_t pages_refused;	  /* pages that found no room (a smaller local_mb) */
	uint64_t pers_refused;	  /* of those, persistent pages: lost, and logged */
	uint64_t image_bytes;	  /* the image's size */
	uint64_t load_us;	  /* the load's duration */
	uint64_t exports;	  /* NBD exports that took their pages back */
	uint64_t exports_dropped; /* exports of the image that could not (changed, gone) */
	uint64_t peers;		  /* peers whose sessions were kept (our incarnation kept) */
	uint64_t foreign;	  /* pages held for peers, kept */
	uint64_t foreign_refused; /* pages held for peers that found no room: their owners' loss */
	uint64_t flushes;	  /* flushes owed to holders, kept */
	/* a crash's files (crash_dir: node/restart/crash.h) */
	uint64_t crash_found;		/* 1: this start found a crash's files */
	uint64_t crash_refused;		/* 1: they could not be read: started cold */
	uint64_t crash_pools, crash_pages;
	uint64_t crash_pools_incomplete; /* pools that lost pages in the crash: a miss is -EIO */
	uint64_t crash_pools_dropped;	 /* pools of the tier no client had (never answered) */
	uint64_t crash_pages_refused;	 /* pages not taken back (see the log for why) */
	uint64_t crash_load_us;
	uint64_t crash_dir_writes, crash_dir_errors; /* the pool directory's images */
	/* the image, mapped from the load until restart_load_remote, when it has a collective's records */
	struct image_reader image;
	size_t remote_off;
	/* the exports' records, kept from the load until restart_adopt_exports */
	unsigned n_nbd;
	struct restart_rec {
		uint8_t *rec;
		size_t len;
	} nbd[RESTART_NBD_MAX];
	/* the NBD connections' records, and the sockets handed over ($RAMSTER_NBD_FDS) */
	unsigned n_conn;
	struct restart_rec conn[RESTART_CONNS_MAX];
	struct restart_conns conn_fds;
	uint64_t conns, conns_refused; /* connections taken over; handed but closed */
};

/*
 * The fd of an image handed to this process, or -1 (the variables are then
 * unset); the NBD sockets handed with it go into st (close-on-exec from now).
 */
int restart_find_image(struct restart_stats *st);

/*
 * Write z's pools and pages, p's directory, nbd's exports and the
 * collective's records of r (NULL: none) into a new memfd. @return the fd
 * (not close-on-exec), or -errno; *pages gets the pages written. conns
 * (NULL: none) gets the NBD connections handed over: their records are in
 * the image, their sockets go over the exec or into the fd store.
 */
int restart_save(struct zcache *z, struct pools *p, const struct nbd *nbd, struct remote *r,
		 uint64_t *pages, struct restart_conns *conns);

/*
 * Load the image on fd (closed here) into a new node's empty z and p; self
 * is this node's id in its collective (0: none), which the image's
 * collective records must name. @return 0; -EBADMSG or -EPROTO when refused
 * (logged and counted: the caller then recreates z and p empty and starts
 * cold).
 */
int restart_load(int fd, struct zcache *z, struct pools *p, struct users *u, uint32_t self,
		 struct restart_stats *st);

/*
 * After remote_create, before remote_start and the loop: the collective's
 * records (our incarnation, the peers, the pages held for them, flushes
 * owed) go into r; the image is unmapped. r NULL: only unmaps.
 * @return 0, or -EBUSY (the cluster had started: logged).
 */
int restart_load_remote(struct restart_stats *st, struct remote *r);

/*
 * After the NBD frontend is made (nbd may be NULL: no exports now): each
 * export of the image takes its pool and bitmaps back (nbd_adopt); the pool
 * of one that cannot (renamed, resized, gone) is destroyed, logged and
 * counted. Then the NBD connections handed over are served again, those of
 * exports taken back only; every other socket handed over is closed. Frees
 * the kept records.
 */
void restart_adopt_exports(struct restart_stats *st, struct nbd *nbd, struct store *store);

/*
 * Re-execute this program (argv) with fd and conns' sockets inherited.
 * Returns only on failure (-errno).
 */
int restart_exec(int fd, char **argv, const struct restart_conns *conns);

/*
 * Hand fd, and the NBD sockets of conns (NULL: none), to the service
 * manager's fd store. @return 0 when the image was sent, else -errno.
 */
int restart_fdstore(int fd, const struct restart_conns *conns);

/* The counters, for ramsterctl stats (restart_*). */
void restart_foreach_stat(const struct restart_stats *st,
			  void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			  void *arg);

#endif /* RAMSTER_RESTART_H */
