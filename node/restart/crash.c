/*
 * crash.c - the files a crash leaves, and the start that takes them back
 * (crash.h says what they are and why).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "node/client/pools.h"
#include "node/log.h"
#include "node/restart/crash.h"
#include "node/restart/image.h"
#include "node/restart/restart.h"
#include "tmem/crashload.h"
#include "tmem/crashtab.h"
#include "tmem/snapshot.h"
#include "tmem/tmem.h"
#include "tmem/zdense.h"

#define STATE_MAGIC   "RAMCRASH"
#define STATE_VERSION 1
#define POOLS_KIND    0x504f4f4cu /* "POOL": the pool directory's image */
#define TAG_SEQ	      0x4301	  /* the directory image's first record: u64 sequence */
#define OBJS_MAX      (1u << 24)  /* object numbers the crash table records */
#define TMPFS_MAGIC   0x01021994u

/* The state file: what made the files, and whether the stop was clean. */
struct crash_state {
	char magic[8];
	uint32_t version, clean;
	uint64_t zdense_layout; /* zdense_layout_id */
	uint64_t local_mb;	/* the tier's size: the files' lengths */
	uint32_t algo;		/* the compressor of the stored bytes */
	uint32_t objs_max;	/* the crash table's entries */
	uint32_t crashtab_version;
	uint32_t spare;
};

struct crash_keep {
	char dir[PATH_MAX];
	int dir_fd, lock_fd;
	int mem_fd, blk_fd, tab_fd;
	struct tmem_crashtab *tab;
	size_t tab_len;
	struct zcache_crash zc;
	struct crash_state state; /* this process's */
	struct crash_state found; /* the crashed process's (found.magic[0]: there is one) */
	uint64_t seq;		  /* the directory's images written */
	struct restart_stats *st; /* where the figures go */
};

static const char *const tier_files[] = {"tier.mem", "tier.blk", "objects", "pools.a",
					 "pools.b"};
#define N_TIER_FILES (sizeof(tier_files) / sizeof(tier_files[0]))

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int write_state(struct crash_keep *ck, bool clean)
{
	int fd;
	ssize_t k;

	ck->state.clean = clean;
	fd = openat(ck->dir_fd, "state", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	k = pwrite(fd, &ck->state, sizeof(ck->state), 0);
	close(fd);
	return k == (ssize_t)sizeof(ck->state) ? 0 : -EIO;
}

/* @return true when the state file says a process of this layout stopped without cleaning up. */
static bool read_state(struct crash_keep *ck, char *why, size_t len)
{
	struct crash_state s;
	int fd = openat(ck->dir_fd, "state", O_RDONLY | O_CLOEXEC);
	ssize_t k;

	*why = 0;
	if (fd < 0)
		return false;
	k = pread(fd, &s, sizeof(s), 0);
	close(fd);
	if (k != (ssize_t)sizeof(s) || memcmp(s.magic, STATE_MAGIC, 8) ||
	    s.version != STATE_VERSION) {
		snprintf(why, len, "its state file is not one this version writes");
		return false;
	}
	if (s.clean)
		return false;
	if (s.zdense_layout != ck->state.zdense_layout ||
	    s.crashtab_version != ck->state.crashtab_version || s.objs_max == 0 ||
	    s.objs_max > OBJS_MAX || !compress_algo_ok((enum compress_algo)s.algo) ||
	    s.algo != ck->state.algo) {
		snprintf(why, len, "it was made by another layout or compressor");
		return false;
	}
	ck->found = s;
	return true;
}

static bool old_exists(struct crash_keep *ck)
{
	return faccessat(ck->dir_fd, "tier.mem.old", F_OK, 0) == 0;
}

static void unlink_old(struct crash_keep *ck)
{
	char name[32];
	size_t i;

	for (i = 0; i < N_TIER_FILES; i++) {
		snprintf(name, sizeof(name), "%s.old", tier_files[i]);
		(void)unlinkat(ck->dir_fd, name, 0);
	}
}

/* @return the bytes the directory's files (and *.old ones) take on the tmpfs. */
static uint64_t files_bytes(struct crash_keep *ck)
{
	uint64_t n = 0;
	char name[32];
	struct stat sb;
	size_t i;
	int old;

	for (i = 0; i < N_TIER_FILES; i++)
		for (old = 0; old < 2; old++) {
			snprintf(name, sizeof(name), "%s%s", tier_files[i], old ? ".old" : "");
			if (!fstatat(ck->dir_fd, name, &sb, AT_SYMLINK_NOFOLLOW))
				n += (uint64_t)sb.st_blocks * 512u;
		}
	return n;
}

/* A crash's files become *.old, unless a load of older ones was cut short (they are the whole). */
static int keep_crashed(struct crash_keep *ck)
{
	char name[32];
	size_t i;

	if (old_exists(ck)) {
		log_warn("crash: %s: the load of an earlier crash was cut short: loading it again",
			 ck->dir);
		return 0;
	}
	for (i = 0; i < N_TIER_FILES; i++) {
		snprintf(name, sizeof(name), "%s.old", tier_files[i]);
		if (renameat(ck->dir_fd, tier_files[i], ck->dir_fd, name) && errno != ENOENT)
			return -errno;
	}
	return 0;
}

struct crash_keep *crash_keep_open(const char *dir, uint64_t local_mb, enum compress_algo algo,
				   struct restart_stats *st, char *err, size_t errlen)
{
	struct crash_keep *ck;
	struct stat sb;
	char why[96];

	if (dir[0] != '/') {
		snprintf(err, errlen, "crash_dir %s: must be an absolute path", dir);
		return NULL;
	}
	ck = calloc(1, sizeof(*ck));
	if (!ck) {
		snprintf(err, errlen, "crash_dir: out of memory");
		return NULL;
	}
	ck->dir_fd = ck->lock_fd = ck->mem_fd = ck->blk_fd = ck->tab_fd = -1;
	ck->st = st;
	snprintf(ck->dir, sizeof(ck->dir), "%s", dir);
	if (mkdir(dir, 0700) && errno != EEXIST) {
		snprintf(err, errlen, "crash_dir %s: %s", dir, strerror(errno));
		goto fail;
	}
	ck->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (ck->dir_fd < 0 || fstat(ck->dir_fd, &sb)) {
		snprintf(err, errlen, "crash_dir %s: %s", dir, strerror(errno));
		goto fail;
	}
	/* the pages of every client are in there: nobody else may reach or plant files */
	if (sb.st_uid != geteuid() || (sb.st_mode & 077)) {
		snprintf(err, errlen,
			 "crash_dir %s: must be owned by this user (uid %u) and closed to group and "
			 "others (mode 0700)",
			 dir, (unsigned)geteuid());
		goto fail;
	}
	/* memory that outlives the process, and room for the whole tier in it: a
	 * shared mapping past a tmpfs's size faults (SIGBUS), and on a disk the
	 * tier would be written back to it */
	{
		struct statfs fs;
		uint64_t avail;

		if (fstatfs(ck->dir_fd, &fs)) {
			snprintf(err, errlen, "crash_dir %s: %s", dir, strerror(errno));
			goto fail;
		}
		if ((uint32_t)fs.f_type != TMPFS_MAGIC) {
			snprintf(err, errlen,
				 "crash_dir %s: not on tmpfs (the tier's memory would go to disk): "
				 "use /dev/shm or a tmpfs of its own",
				 dir);
			goto fail;
		}
		/* what our own files hold now is ours to reuse (a crash's, at a restart) */
		avail = ((uint64_t)fs.f_bavail * (uint64_t)fs.f_bsize + files_bytes(ck)) >> 20;
		if (avail < local_mb + 64) {
			snprintf(err, errlen,
				 "crash_dir %s: its tmpfs has %llu MiB free, and the tier may take "
				 "local_mb (%llu) and 64 MiB more: a tmpfs that fills faults the node",
				 dir, (unsigned long long)avail, (unsigned long long)local_mb);
			goto fail;
		}
	}
	ck->lock_fd = openat(ck->dir_fd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (ck->lock_fd < 0 || flock(ck->lock_fd, LOCK_EX | LOCK_NB)) {
		snprintf(err, errlen, "crash_dir %s: %s", dir,
			 errno == EWOULDBLOCK ? "another ramsterd uses it" : strerror(errno));
		goto fail;
	}
	memcpy(ck->state.magic, STATE_MAGIC, 8);
	ck->state.version = STATE_VERSION;
	ck->state.zdense_layout = zdense_layout_id();
	ck->state.local_mb = local_mb;
	ck->state.algo = (uint32_t)algo;
	ck->state.objs_max = OBJS_MAX;
	ck->state.crashtab_version = TMEM_CRASHTAB_VERSION;
	if (read_state(ck, why, sizeof(why)) || old_exists(ck)) {
		if (!ck->found.magic[0]) {
			/* only *.old: their state was overwritten by a start cut short */
			log_warn("crash: %s: files of an earlier crash without their state: dropped",
				 dir);
			unlink_old(ck);
		} else if (keep_crashed(ck)) {
			log_error("crash: %s: cannot keep the crash's files (%s): they are dropped",
				  dir, strerror(errno));
			memset(&ck->found, 0, sizeof(ck->found));
			unlink_old(ck);
		}
	} else if (why[0]) {
		log_warn("crash: %s: %s: what it holds is dropped", dir, why);
	}
	return ck;
fail:
	crash_keep_close(ck, false);
	return NULL;
}

static int make_file(struct crash_keep *ck, const char *name, int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = openat(ck->dir_fd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	return *fd < 0 ? -errno : 0;
}

const struct zcache_crash *crash_keep_fresh(struct crash_keep *ck)
{
	if (ck->tab)
		munmap(ck->tab, ck->tab_len);
	ck->tab = NULL;
	ck->tab_len = tmem_crashtab_bytes(OBJS_MAX);
	if (make_file(ck, "tier.mem", &ck->mem_fd) || make_file(ck, "tier.blk", &ck->blk_fd) ||
	    make_file(ck, "objects", &ck->tab_fd) || ftruncate(ck->tab_fd, (off_t)ck->tab_len))
		return NULL;
	ck->tab = mmap(NULL, ck->tab_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
		       ck->tab_fd, 0);
	if (ck->tab == MAP_FAILED) {
		ck->tab = NULL;
		return NULL;
	}
	if (tmem_crashtab_init(ck->tab, ck->tab_len, OBJS_MAX) || write_state(ck, false)) {
		errno = EIO;
		return NULL;
	}
	ck->zc = (struct zcache_crash){ck->mem_fd, ck->blk_fd, ck->tab};
	return &ck->zc;
}

/* ---- the pool directory's image ------------------------------------------------------ */

static int emit_image(void *arg, uint16_t tag, const void *h, size_t hl, const void *b, size_t bl)
{
	return image_record(arg, tag, h, hl, b, bl);
}

void crash_keep_pools_changed(void *arg, const struct pools *p)
{
	struct crash_keep *ck = arg;
	const char *name = ck->seq % 2 ? "pools.b" : "pools.a";
	struct image_writer w;
	uint8_t seq[8];
	int fd, rc;

	fd = openat(ck->dir_fd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}
	put_le64(seq, ++ck->seq);
	rc = image_write_begin(&w, fd, POOLS_KIND);
	if (!rc)
		rc = image_record(&w, TAG_SEQ, seq, sizeof(seq), NULL, 0);
	if (!rc)
		rc = pools_save(p, emit_image, &w);
	if (!rc)
		rc = image_write_end(&w);
	else
		(void)image_write_end(&w);
	close(fd);
	if (!rc) {
		ck->st->crash_dir_writes++;
		return;
	}
fail:
	ck->st->crash_dir_errors++;
	log_error("crash: cannot write the pool directory to %s/%s (%s): a crash now would "
		  "lose the pools made since",
		  ck->dir, name, strerror(-rc));
}

/* Open the newer of pools.a.old and pools.b.old that checks out. @return 0 with *r open, or -ENOENT. */
static int pools_image(struct crash_keep *ck, struct image_reader *r)
{
	static const char *const names[] = {"pools.a.old", "pools.b.old"};
	struct image_reader im[2];
	uint64_t seq[2] = {0, 0};
	const char *why;
	const uint8_t *rec;
	uint16_t tag;
	size_t len;
	int i, best = -1;

	for (i = 0; i < 2; i++) {
		int fd = openat(ck->dir_fd, names[i], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

		memset(&im[i], 0, sizeof(im[i]));
		if (fd < 0)
			continue;
		if (image_read_open(&im[i], fd, POOLS_KIND, &why)) {
			close(fd);
			log_warn("crash: %s/%s is refused (%s)", ck->dir, names[i], why ? why : "-");
			continue;
		}
		close(fd);
		if (image_next(&im[i], &tag, &rec, &len) == 1 && tag == TAG_SEQ && len == 8)
			seq[i] = get_le64(rec);
		if (seq[i] && (best < 0 || seq[i] > seq[best]))
			best = i;
	}
	for (i = 0; i < 2; i++)
		if (i != best && im[i].map)
			image_read_close(&im[i]);
	if (best < 0)
		return -ENOENT;
	*r = im[best];
	return 0;
}

/* ---- the load ------------------------------------------------------------------------ */

/* What crashload emits goes to the snapshot loader, for the pools of the directory only. */
struct load_ctx {
	struct snapshot_loader l;
	const uint64_t *in_dir; /* pool ids the directory named */
	uint64_t *incomplete;	/* pools that lost pages: one that finds no room here too */
	uint32_t pool;		/* the current pool */
	bool skip;		/* the current pool is not the directory's: its pages go */
	uint64_t pools_dropped, pages_dropped;
	uint8_t rec[64 + 4096];
};

static int load_emit(void *arg, uint16_t tag, const void *h, size_t hl, const void *b, size_t bl)
{
	struct load_ctx *c = arg;

	if (hl + bl > sizeof(c->rec))
		return -EBADMSG;
	uint64_t refused = c->l.st.pages_refused;
	int rc;

	if (tag == SNAPSHOT_TAG_POOL) {
		c->pool = get_le32(h);
		c->skip = c->pool >= TMEM_MAX_POOLS || !(c->in_dir[c->pool / 64] >> (c->pool % 64) & 1);
		c->pools_dropped += c->skip;
	}
	if (c->skip && tag != SNAPSHOT_TAG_TIER) {
		c->pages_dropped += tag == SNAPSHOT_TAG_PAGE;
		return 0;
	}
	memcpy(c->rec, h, hl);
	if (bl)
		memcpy(c->rec + hl, b, bl);
	rc = snapshot_load_record(&c->l, tag, c->rec, hl + bl);
	if (c->l.st.pages_refused != refused) /* no room (a smaller local_mb): lost, so says the pool */
		c->incomplete[c->pool / 64] |= 1ull << (c->pool % 64);
	return rc;
}

/* Map name (read-only) whole. @return the map or NULL; *len set. */
static const void *map_old(struct crash_keep *ck, const char *name, uint64_t *len)
{
	int fd = openat(ck->dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat sb;
	void *m = MAP_FAILED;

	if (fd >= 0 && !fstat(fd, &sb) && sb.st_size > 0) {
		*len = (uint64_t)sb.st_size;
		m = mmap(NULL, *len, PROT_READ, MAP_SHARED | MAP_NORESERVE, fd, 0);
	}
	if (fd >= 0)
		close(fd);
	return m == MAP_FAILED ? NULL : m;
}

int crash_keep_load(struct crash_keep *ck, struct zcache *z, struct pools *p, struct users *u,
		    struct restart_stats *st)
{
	static uint64_t in_dir[TMEM_MAX_POOLS / 64], incomplete[TMEM_MAX_POOLS / 64];
	struct crashload_files f = {0};
	struct crashload_stats cs = {0};
	struct load_ctx *c = NULL;
	struct image_reader r;
	uint64_t t0 = now_us(), want_mem, want_blk, tab_len = 0;
	const uint8_t *rec;
	uint16_t tag;
	size_t len;
	uint32_t id;
	int rc;

	if (!ck || !ck->found.magic[0])
		return 0;
	f.algo = (enum compress_algo)ck->found.algo;
	st->crash_found = 1;
	memset(in_dir, 0, sizeof(in_dir));
	memset(incomplete, 0, sizeof(incomplete));
	/* the directory first: it makes the pools the pages go to */
	if (pools_image(ck, &r) == 0) {
		while ((rc = image_next(&r, &tag, &rec, &len)) == 1) {
			rc = pools_load_record(p, u, tag, rec, len, now_us() / 1000u);
			if (rc)
				break;
			id = get_le32(rec);
			in_dir[id / 64] |= 1ull << (id % 64);
		}
		image_read_close(&r);
		if (rc) {
			log_error("crash: a record of the pool directory cannot be (%s): starting "
				  "cold",
				  strerror(-rc));
			goto cold;
		}
	}
	if (zdense_file_sizes((uint32_t)(ck->found.local_mb * 256), &want_mem, &want_blk)) {
		rc = -EINVAL;
		goto cold;
	}
	f.mem = map_old(ck, "tier.mem.old", &f.mem_len);
	f.blk = map_old(ck, "tier.blk.old", &f.blk_len);
	f.tab = map_old(ck, "objects.old", &tab_len);
	f.tab_len = (size_t)tab_len;
	c = calloc(1, sizeof(*c));
	rc = -EINVAL;
	if (f.mem && f.blk && f.tab && c && f.mem_len == want_mem && f.blk_len == want_blk) {
		snapshot_loader_init(&c->l, z);
		c->in_dir = in_dir;
		c->incomplete = incomplete;
		rc = crashload_emit(&f, load_emit, c, incomplete, &cs);
	} else if (!c) {
		rc = -ENOMEM;
	}
	if (f.mem)
		munmap((void *)f.mem, f.mem_len);
	if (f.blk)
		munmap((void *)f.blk, f.blk_len);
	if (f.tab)
		munmap((void *)f.tab, f.tab_len);
	if (rc) {
		log_error("crash: the tier's files cannot be read (%s): starting cold", strerror(-rc));
		goto cold;
	}
	for (id = 0; id < TMEM_MAX_POOLS; id++)
		if ((incomplete[id / 64] >> (id % 64) & 1) && (in_dir[id / 64] >> (id % 64) & 1) &&
		    tmem_pool_set_incomplete(zcache_tmem(z), id) == 0)
			st->crash_pools_incomplete++;
	st->crash_pools = c->l.st.pools - c->pools_dropped;
	st->crash_pages = c->l.st.pages_local;
	st->crash_pages_refused = cs.no_object + cs.no_pool + cs.bad_bytes + cs.dup_dropped +
				  cs.bad_slots + c->pages_dropped + c->l.st.pages_refused;
	st->crash_pools_dropped = c->pools_dropped;
	st->crash_load_us = now_us() - t0;
	log_notice("crash: the last process died without stopping: %llu pools and %llu pages "
		   "taken back from %s in %.1f ms (%llu pools incomplete: a page they lack "
		   "answers -EIO)",
		   (unsigned long long)st->crash_pools, (unsigned long long)st->crash_pages, ck->dir,
		   (double)st->crash_load_us / 1000.0,
		   (unsigned long long)st->crash_pools_incomplete);
	if (st->crash_pages_refused)
		log_error("crash: %llu pages not taken back (%llu of unknown objects, %llu of "
			  "pools gone, %llu that do not decompress, %llu slots out of bounds, %llu "
			  "of operations the crash cut, %llu of pools no client had, %llu without "
			  "room)",
			  (unsigned long long)st->crash_pages_refused,
			  (unsigned long long)cs.no_object, (unsigned long long)cs.no_pool,
			  (unsigned long long)cs.bad_bytes, (unsigned long long)cs.bad_slots,
			  (unsigned long long)cs.dup_dropped, (unsigned long long)c->pages_dropped,
			  (unsigned long long)c->l.st.pages_refused);
	free(c);
	crash_keep_pools_changed(ck, p);
	unlink_old(ck);
	memset(&ck->found, 0, sizeof(ck->found));
	return 0;
cold:
	free(c);
	st->crash_refused = 1;
	unlink_old(ck);
	memset(&ck->found, 0, sizeof(ck->found));
	return rc ? rc : -EBADMSG;
}

void crash_keep_close(struct crash_keep *ck, bool clean)
{
	if (!ck)
		return;
	if (ck->tab)
		munmap(ck->tab, ck->tab_len);
	if (clean && ck->dir_fd >= 0) {
		/* the memory back to the system; the next start finds nothing to load */
		if (ck->mem_fd >= 0)
			(void)ftruncate(ck->mem_fd, 0);
		if (ck->blk_fd >= 0)
			(void)ftruncate(ck->blk_fd, 0);
		if (ck->tab_fd >= 0)
			(void)ftruncate(ck->tab_fd, 0);
		if (ck->state.magic[0])
			(void)write_state(ck, true);
	}
	if (ck->mem_fd >= 0)
		close(ck->mem_fd);
	if (ck->blk_fd >= 0)
		close(ck->blk_fd);
	if (ck->tab_fd >= 0)
		close(ck->tab_fd);
	if (ck->lock_fd >= 0)
		close(ck->lock_fd);
	if (ck->dir_fd >= 0)
		close(ck->dir_fd);
	free(ck);
}

void crash_keep_mark_clean(struct crash_keep *ck)
{
	if (ck && ck->state.magic[0])
		(void)write_state(ck, true);
}
