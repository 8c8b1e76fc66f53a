/*
 * restart.c - a planned restart that keeps the node's pages (restart.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "common/util.h"
#include "node/client/pools.h"
#include "node/clock.h"
#include "node/log.h"
#include "node/nbd/nbd.h"
#include "node/remote/remote.h"
#include "node/store.h"
#include "node/restart/image.h"
#include "node/restart/restart.h"
#include "tmem/snapshot.h"

static uint64_t now_us(void)
{
	return clock_now_ns() / 1000u;
}

/* $RAMSTER_RESTART_FD: a number, an open memfd. */
static int env_image(void)
{
	const char *v = getenv(RESTART_ENV);
	char *end;
	long fd;

	if (!v)
		return -1;
	errno = 0;
	fd = strtol(v, &end, 10);
	unsetenv(RESTART_ENV);
	if (errno || *end || end == v || fd < 3 || fd > 65535 || fcntl((int)fd, F_GETFD) < 0) {
		log_warn("%s=%s names no open descriptor: starting cold", RESTART_ENV, v);
		return -1;
	}
	(void)fcntl((int)fd, F_SETFD, FD_CLOEXEC);
	return (int)fd;
}

/* $RAMSTER_NBD_FDS: the NBD sockets handed over with the image ("5,9,12"). */
static void env_conns(struct restart_conns *cs)
{
	const char *v = getenv(RESTART_CONNS_ENV);
	char *end;

	cs->n = 0;
	if (!v)
		return;
	while (*v && cs->n < RESTART_CONNS_MAX) {
		long fd;

		errno = 0;
		fd = strtol(v, &end, 10);
		if (errno || end == v || (*end && *end != ','))
			break;
		/* an open socket, and not one we have taken already */
		if (fd >= 3 && fd <= 65535 && fcntl((int)fd, F_SETFD, FD_CLOEXEC) == 0) {
			cs->fd[cs->n] = cs->old[cs->n] = (int)fd;
			cs->n++;
		}
		v = *end ? end + 1 : end;
	}
	unsetenv(RESTART_CONNS_ENV);
}

int restart_find_image(struct restart_stats *st)
{
	char **names = NULL;
	int n, i, fd = env_image();

	env_conns(&st->conn_fds);
	if (fd >= 0)
		return fd;
	/*
	 * systemd's fd store gives it back in LISTEN_FDS, named, with the NBD
	 * sockets handed over. The store keeps its copies: each is removed now,
	 * or a crash of this process would start the next from a stale image (and
	 * a socket this process closes would stay open there).
	 */
	n = sd_listen_fds_with_names(1, &names);
	for (i = 0; i < n; i++) {
		const char *name = names && names[i] ? names[i] : "";
		struct restart_conns *cs = &st->conn_fds;
		char msg[64];
		char *end;
		long old;

		snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
		if (fd < 0 && !strcmp(name, RESTART_FDNAME)) {
			fd = SD_LISTEN_FDS_START + i;
			(void)sd_notify(0, msg);
			continue;
		}
		if (!strncmp(name, RESTART_CONN_FDNAME, strlen(RESTART_CONN_FDNAME)) &&
		    cs->n < RESTART_CONNS_MAX) {
			errno = 0;
			old = strtol(name + strlen(RESTART_CONN_FDNAME), &end, 10);
			if (!errno && !*end && old >= 3 && old <= 65535) {
				cs->fd[cs->n] = SD_LISTEN_FDS_START + i;
				cs->old[cs->n++] = (int)old;
				(void)sd_notify(0, msg);
				continue;
			}
		}
		close(SD_LISTEN_FDS_START + i); /* nothing else is ours to keep */
	}
	for (i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
	return fd;
}

static int emit(void *arg, uint16_t tag, const void *h, size_t hl, const void *b, size_t bl)
{
	return image_record(arg, tag, h, hl, b, bl);
}

int restart_save(struct zcache *z, struct pools *p, const struct nbd *nbd, struct remote *r,
		 uint64_t *pages, struct restart_conns *conns)
{
	struct remote_restart_stats rs = {0};
	struct snapshot_stats st;
	struct image_writer w;
	uint64_t t0 = now_us();
	int fd, rc;

	*pages = 0;
	fd = memfd_create("ramster-image", MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	rc = image_write_begin(&w, fd, RESTART_KIND);
	/* the directory first: it makes the pools its records name (pools_load_record) */
	if (!rc)
		rc = pools_save(p, emit, &w);
	if (!rc)
		rc = nbd_save(nbd, emit, &w);
	if (!rc && conns) {
		rc = nbd_save_conns(nbd, emit, &w, conns->fd, RESTART_CONNS_MAX);
		conns->n = rc > 0 ? (size_t)rc : 0;
		memcpy(conns->old, conns->fd, sizeof(conns->old));
		rc = rc < 0 ? rc : 0;
	}
	if (!rc)
		rc = snapshot_save(z, emit, &w, &st);
	/* the collective last: the load applies it once the cluster is made */
	if (!rc && r)
		rc = remote_save(r, emit, &w, &rs);
	if (!rc)
		rc = image_write_end(&w);
	else
		(void)image_write_end(&w); /* frees the buffer; the image is not used */
	if (rc) {
		close(fd);
		return rc;
	}
	/* nobody changes it from here on, not even by mistake */
	(void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
	*pages = st.pages_zero + st.pages_local + st.pages_remote;
	log_notice("restart: %llu pools, %llu pages (%llu in frames, %llu zero, %llu remote) "
		   "written in %.1f ms",
		   (unsigned long long)st.pools, (unsigned long long)*pages,
		   (unsigned long long)st.pages_local, (unsigned long long)st.pages_zero,
		   (unsigned long long)st.pages_remote, (double)(now_us() - t0) / 1000.0);
	if (r)
		log_notice("restart: the collective: %llu peers, %llu pages held for them, %llu "
			   "flushes owed",
			   (unsigned long long)rs.peers, (unsigned long long)rs.foreign,
			   (unsigned long long)rs.flushes);
	return fd;
}

/* An export's record, kept until the NBD frontend exists (checked now). */
/* A copy of rec as kept[*n] (at most max). @return 0, -EBADMSG (no room), -ENOMEM. */
static int keep_rec(struct restart_rec *kept, unsigned *n, unsigned max, const uint8_t *rec,
		    size_t len)
{
	uint8_t *copy;

	if (*n == max)
		return -EBADMSG;
	copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, rec, len);
	kept[*n] = (struct restart_rec){ copy, len };
	(*n)++;
	return 0;
}

static int keep_export(struct restart_stats *st, const uint8_t *rec, size_t len)
{
	struct nbd_saved s;

	if (nbd_record_parse(rec, len, &s))
		return -EBADMSG;
	return keep_rec(st->nbd, &st->n_nbd, RESTART_NBD_MAX, rec, len);
}

/* A connection's record, kept until the exports are taken back. */
static int keep_conn(struct restart_stats *st, const uint8_t *rec, size_t len)
{
	struct nbd_conn_saved s;

	if (nbd_conn_record_parse(rec, len, &s))
		return -EBADMSG;
	return keep_rec(st->conn, &st->n_conn, RESTART_CONNS_MAX, rec, len);
}

static void drop_exports(struct restart_stats *st)
{
	while (st->n_conn) {
		st->n_conn--;
		free(st->conn[st->n_conn].rec);
	}
	while (st->n_nbd) {
		st->n_nbd--;
		free(st->nbd[st->n_nbd].rec);
	}
}

/*
 * The connections handed over: each on the socket its record names, if that
 * socket was handed (in $RAMSTER_NBD_FDS) and its export's pages were taken
 * back (kept[number]); every socket handed and not served is closed, so its
 * client sees the end and reconnects.
 */
static void adopt_conns(struct restart_stats *st, struct nbd *nbd, const bool *kept,
			size_t n_kept)
{
	struct restart_conns *cs = &st->conn_fds;
	unsigned i;
	size_t j;

	for (i = 0; i < st->n_conn; i++) {
		const uint8_t *rec = st->conn[i].rec;
		size_t len = st->conn[i].len;
		struct nbd_conn_saved s;
		int fd;

		if (nbd_conn_record_parse(rec, len, &s))
			continue; /* checked at the load: not reached */
		fd = s.fd;
		for (j = 0; j < cs->n && cs->old[j] != fd; j++)
			;
		if (j == cs->n)
			continue; /* not handed to us: not ours to touch */
		fd = cs->fd[j]; /* the socket here */
		cs->n--;        /* taken: nbd_adopt_conn serves it or closes it */
		cs->fd[j] = cs->fd[cs->n];
		cs->old[j] = cs->old[cs->n];
		if (!nbd || s.number >= n_kept || !kept[s.number]) {
			st->conns_refused++;
			close(fd);
			continue;
		}
		if (nbd_adopt_conn(nbd, rec, len, fd) == 0)
			st->conns++;
		else
			st->conns_refused++; /* logged there */
	}
	for (j = 0; j < cs->n; j++) {
		st->conns_refused++;
		close(cs->fd[j]);
	}
	cs->n = 0;
	if (st->conns_refused)
		log_error("restart: %llu NBD connections handed over were closed (their export "
			  "changed, or the image was refused): their clients reconnect",
			  (unsigned long long)st->conns_refused);
}

void restart_adopt_exports(struct restart_stats *st, struct nbd *nbd, struct store *store)
{
	bool kept[RESTART_NBD_MAX] = { false };
	unsigned i;

	for (i = 0; i < st->n_nbd; i++) {
		struct nbd_saved s;
		int rc = nbd_record_parse(st->nbd[i].rec, st->nbd[i].len, &s);

		if (!rc)
			rc = nbd ? nbd_adopt(nbd, &s) : -ENOENT;
		if (!rc) {
			st->exports++;
			if (s.number < RESTART_NBD_MAX)
				kept[s.number] = true;
			continue;
		}
		st->exports_dropped++;
		log_error("restart: export %s cannot take its pages back (%s): they are dropped",
			  s.name, rc == -ENOENT ? "no such export now" : "it changed");
		(void)store_pool_destroy(store, s.pool);
	}
	adopt_conns(st, nbd, kept, RESTART_NBD_MAX);
	drop_exports(st);
}

int restart_load(int fd, struct zcache *z, struct pools *p, struct users *u, uint32_t self,
		 struct restart_stats *st)
{
	bool remote_seen = false, self_seen = false;
	struct snapshot_loader l;
	struct image_reader r;
	const char *why = NULL;
	const uint8_t *rec;
	uint64_t t0 = now_us();
	uint16_t tag;
	size_t len;
	int rc;

	rc = image_read_open(&r, fd, RESTART_KIND, &why);
	close(fd);
	if (rc) {
		st->refused++;
		log_error("restart: the image handed over is refused (%s): starting cold, "
			  "without the pages it held",
			  why ? why : strerror(-rc));
		return -EBADMSG;
	}
	st->image_bytes = r.map_len;
	snapshot_loader_init(&l, z);
	while ((rc = image_next(&r, &tag, &rec, &len)) == 1) {
		if (tag >= REMOTE_TAG_SELF && tag <= REMOTE_TAG_STRIPE) {
			/* checked now, loaded once the cluster is made (restart_load_remote) */
			if (!remote_seen)
				st->remote_off = (size_t)(rec - r.map) - 8;
			remote_seen = true;
			self_seen |= tag == REMOTE_TAG_SELF;
			rc = remote_record_check(tag, rec, len, self);
			if (!rc && tag == REMOTE_TAG_SELF && st->remote_off != (size_t)(rec - r.map) - 8)
				rc = -EBADMSG; /* SELF comes first */
		} else if (remote_seen)
			rc = -EBADMSG; /* the collective's records come last */
		else if (tag >= SNAPSHOT_TAG_TIER && tag <= SNAPSHOT_TAG_PAGE)
			rc = snapshot_load_record(&l, tag, rec, len);
		else if (tag == NBD_TAG_EXPORT)
			rc = keep_export(st, rec, len);
		else if (tag == NBD_TAG_CONN)
			rc = keep_conn(st, rec, len);
		else
			rc = pools_load_record(p, u, tag, rec, len, t0 / 1000u);
		if (rc)
			break;
	}
	if (!rc && l.st.pages_remote && !self_seen)
		rc = -EPROTO; /* remote pages without the collective that holds them */
	if (!rc && remote_seen) {
		st->image = r; /* mapped until restart_load_remote */
	} else
		image_read_close(&r);
	if (rc) {
		drop_exports(st);
		st->refused++;
		log_error("restart: the image checks out but a record of it cannot be (%s): "
			  "starting cold",
			  strerror(-rc));
		return rc == -EPROTO ? -EPROTO : -EBADMSG;
	}
	st->warm = 1;
	st->pools = l.st.pools;
	st->pages = l.st.pages_zero + l.st.pages_local + l.st.pages_remote;
	st->pages_refused = l.st.pages_refused;
	st->pers_refused = l.st.pers_refused;
	st->load_us = now_us() - t0;
	log_notice("restart: warm: %llu pools, %llu pages loaded in %.1f ms from a %.1f MiB image",
		   (unsigned long long)st->pools, (unsigned long long)st->pages,
		   (double)st->load_us / 1000.0, (double)st->image_bytes / 1048576.0);
	if (l.st.pages_refused)
		log_error("restart: %llu pages found no room (%llu persistent: lost); was local_mb "
			  "made smaller?",
			  (unsigned long long)l.st.pages_refused,
			  (unsigned long long)l.st.pers_refused);
	return 0;
}

int restart_load_remote(struct restart_stats *st, struct remote *r)
{
	struct image_reader *im = &st->image;
	struct remote_loader *l;
	const uint8_t *rec;
	uint16_t tag;
	size_t len;
	int rc = 0;

	if (!im->map)
		return 0;
	l = r ? malloc(sizeof(*l)) : NULL;
	if (l) {
		remote_loader_init(l, r);
		im->off = st->remote_off;
		while (!rc && image_next(im, &tag, &rec, &len) == 1)
			rc = remote_load_record(l, tag, rec, len); /* checked already: 0 */
		if (!rc)
			rc = remote_load_end(l);
		st->peers = l->st.peers;
		st->foreign = l->st.foreign;
		st->foreign_refused = l->st.foreign_refused;
		st->flushes = l->st.flushes;
		free(l);
	} else if (r) {
		rc = -ENOMEM;
	}
	image_read_close(im);
	if (rc)
		log_error("restart: the collective's records could not be loaded (%s): peers see a "
			  "new incarnation",
			  strerror(-rc));
	return rc;
}

int restart_exec(int fd, char **argv, const struct restart_conns *conns)
{
	char num[16], fds[RESTART_CONNS_MAX * 7 + 1] = "";
	size_t i, off = 0;

	if (fcntl(fd, F_SETFD, 0) < 0)
		return -errno;
	snprintf(num, sizeof(num), "%d", fd);
	if (setenv(RESTART_ENV, num, 1))
		return -errno;
	/* the NBD sockets stay open (a socket left out closes: its client reconnects) */
	for (i = 0; conns && i < conns->n; i++)
		if (fcntl(conns->fd[i], F_SETFD, 0) == 0)
			off += (size_t)snprintf(fds + off, sizeof(fds) - off, "%s%d", off ? "," : "",
						conns->fd[i]);
	if (off && setenv(RESTART_CONNS_ENV, fds, 1))
		return -errno;
	log_notice("restart: re-executing %s with the image on fd %d", argv[0], fd);
	execv("/proc/self/exe", argv);
	unsetenv(RESTART_ENV);
	return -errno;
}

int restart_fdstore(int fd, const struct restart_conns *conns)
{
	char msg[96];
	size_t i, sent = 0;
	int rc;

	if (!getenv("NOTIFY_SOCKET"))
		return -ENOTCONN;
	/* FDSTOREREMOVE first: a stale image of an earlier stop must not come back */
	(void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" RESTART_FDNAME);
	rc = sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=" RESTART_FDNAME, &fd, 1);
	if (rc <= 0)
		return rc < 0 ? rc : -ENOTCONN;
	log_notice("restart: image handed to the service manager's fd store");
	/* then the NBD sockets, each under its record's number; one the store takes
	 * not is closed at our exit: its client reconnects */
	for (i = 0; conns && i < conns->n; i++) {
		snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s%d", RESTART_CONN_FDNAME,
			 conns->old[i]);
		(void)sd_notify(0, msg);
		snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s%d", RESTART_CONN_FDNAME,
			 conns->old[i]);
		if (sd_pid_notify_with_fds(0, 0, msg, &conns->fd[i], 1) > 0)
			sent++;
	}
	if (conns && conns->n)
		log_notice("restart: %zu of %zu NBD connections handed to the fd store", sent,
			   conns->n);
	return 0;
}

void restart_foreach_stat(const struct restart_stats *st,
			  void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			  void *arg)
{
	fn(arg, "restart_warm", st->warm, "1: this process started from a restart image");
	fn(arg, "restart_images_refused", st->refused,
	   "restart images refused (torn, changed, another format): started cold");
	fn(arg, "restart_pools", st->pools, "pools loaded from the restart image");
	fn(arg, "restart_pages", st->pages, "pages loaded from the restart image");
	fn(arg, "restart_pages_refused", st->pages_refused,
	   "pages of the image that found no room (a smaller local_mb)");
	fn(arg, "restart_pers_refused", st->pers_refused,
	   "of those, persistent pages: lost (logged)");
	fn(arg, "restart_image_bytes", st->image_bytes, "the restart image's size");
	fn(arg, "restart_load_us", st->load_us, "time to load the restart image");
	fn(arg, "restart_exports", st->exports, "NBD exports that took their pages back");
	fn(arg, "restart_exports_dropped", st->exports_dropped,
	   "exports of the image that could not (renamed, resized, gone): pages dropped");
	fn(arg, "restart_nbd_conns", st->conns,
	   "NBD connections served on across the re-execution (socket handed over)");
	fn(arg, "restart_nbd_conns_refused", st->conns_refused,
	   "NBD connections handed over but closed (export changed, image refused)");
	fn(arg, "restart_peers", st->peers, "peers whose sessions the restart kept");
	fn(arg, "restart_foreign", st->foreign, "pages held for peers that the restart kept");
	fn(arg, "restart_foreign_refused", st->foreign_refused,
	   "pages held for peers that found no room after the restart (their owners' loss)");
	fn(arg, "restart_flushes", st->flushes, "flushes owed to holders that the restart kept");
	fn(arg, "crash_found", st->crash_found,
	   "1: this start found the files of a process that died without stopping (crash_dir)");
	fn(arg, "crash_refused", st->crash_refused,
	   "1: those files could not be read: the node started cold");
	fn(arg, "crash_pools", st->crash_pools, "pools taken back after the crash");
	fn(arg, "crash_pages", st->crash_pages, "persistent pages taken back after the crash");
	fn(arg, "crash_pools_incomplete", st->crash_pools_incomplete,
	   "of those pools, ones that lost pages (zero or remote pages, cut operations): a page "
	   "they lack answers -EIO");
	fn(arg, "crash_pools_dropped", st->crash_pools_dropped,
	   "pools of the crashed tier no client had yet (their creation was never answered)");
	fn(arg, "crash_pages_refused", st->crash_pages_refused,
	   "pages of the crashed tier not taken back (unknown object, broken, cut operation, no "
	   "room)");
	fn(arg, "crash_load_us", st->crash_load_us, "time to take the crash's files back");
	fn(arg, "crash_dir_writes", st->crash_dir_writes,
	   "images of the pool directory written to crash_dir");
	fn(arg, "crash_dir_errors", st->crash_dir_errors,
	   "images of the pool directory that could not be written (pools made since would be "
	   "lost in a crash)");
}
