/*
 * workload.c - ramster-drill's pages and its client: the page sets written
 * through node 1 before the fault (text-like contents seeded by set and
 * handle, so every read can be checked byte for byte), reading them back,
 * and the client thread that keeps reading and writing while the fault is
 * in, timing every call by phase.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "tools/figures.h"
#include "tools/drill/drill.h"

struct pset sets[NSETS];
struct client cl;

/* By set: the first line of each page names it. */
static const char *const set_names[] = {"persistent-a", "persistent-b", "ephemeral", "scratch"};

/* ---- page contents: text-like, seeded by the handle ---------------------------- */

static const char *const words[] = {
    "the",	  "page",      "node",	     "peer",	  "remote",	"local",  "tier",
    "frame",	  "epoch",     "session",    "heartbeat", "request",	"reply",  "lost",
    "held",	  "owner",     "holder",     "pool",	  "object",	"index",  "handle",
    "put",	  "get",       "flush",	     "memory",	  "collective", "link",	  "socket",
    "daemon",	  "client",    "persistent", "ephemeral", "of",		"and",	  "to",
    "in",	  "is",	       "a",	     "for",	  "with",	"drill",  "kill",
    "stop",	  "partition", "restart",    "drain",	  "replica",	"copy",	  "checksum",
    "compressed", "bytes",     "zombie",     "watermark", "budget",	"donate", "verify",
    "2026-12-03", "ok",	       "error",	     "warn",	  "notice",	"info",	  "debug",
    "done",
};

static void page_fill(unsigned char *pg, unsigned set, uint64_t i)
{
	uint64_t s = mix64((uint64_t)set << 56 ^ i ^ 0x6472696c6cull) | 1;
	size_t pos, len;
	const char *w;

	pos = (size_t)snprintf((char *)pg, PAGE, "drill set %s page %llu\n", set_names[set],
			       (unsigned long long)i);
	while (pos < PAGE) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		w = words[s % (sizeof(words) / sizeof(words[0]))];
		len = strlen(w);
		if (len > PAGE - pos)
			len = PAGE - pos;
		memcpy(pg + pos, w, len);
		pos += len;
		if (pos < PAGE)
			pg[pos++] = (s >> 20) % 11 ? ' ' : '\n';
	}
}

static void handle_of(uint64_t i, struct ramster_oid *oid, uint32_t *index)
{
	memset(oid, 0, sizeof(*oid));
	oid->w[0] = i / OBJ_PAGES;
	*index = (uint32_t)(i % OBJ_PAGES);
}

/* ---- the page sets ---------------------------------------------------------------- */

void set_init(struct pset *s, ramster *r, unsigned flags, uint64_t n)
{
	unsigned char uuid[16];
	unsigned k;

	for (k = 0; k < 16; k++)
		uuid[k] = (unsigned char)(0xd0 + k);
	s->flags = flags;
	s->n = n;
	s->pool = ramster_pool_new(r, flags, (flags & RAMSTER_SHARED) ? uuid : NULL);
	if (s->pool < 0)
		die("pool_new: %s", strerror(-s->pool));
	s->ok = calloc(n ? n : 1, 1);
	s->missed = calloc(n ? n : 1, 1);
	if (!s->ok || !s->missed)
		die("out of memory");
}

/* Put every page of set; @return pages accepted. */
uint64_t set_write(ramster *r, unsigned set)
{
	struct pset *s = &sets[set];
	static unsigned char buf[BATCH][PAGE];
	struct ramster_iov v[BATCH];
	uint64_t i, done = 0;
	size_t k, m;
	int rc;

	for (i = 0; i < s->n; i += m) {
		m = s->n - i < BATCH ? (size_t)(s->n - i) : BATCH;
		for (k = 0; k < m; k++) {
			page_fill(buf[k], set, i + k);
			handle_of(i + k, &v[k].oid, &v[k].index);
			v[k].page = buf[k];
		}
		rc = ramster_putv(r, s->pool, v, m);
		if (rc < 0)
			die("putv: %s", strerror(-rc));
		for (k = 0; k < m; k++)
			if (v[k].result == 0) {
				s->ok[i + k] = 1;
				done++;
			}
	}
	return done;
}

/* Read back every accepted page of a set. before: record ephemeral misses as the baseline. */
void set_verify(ramster *r, unsigned set, uint64_t from, uint64_t n, struct tally *t, bool before)
{
	struct pset *s = &sets[set];
	static unsigned char buf[BATCH][PAGE], want[PAGE];
	struct ramster_iov v[BATCH];
	uint64_t idx[BATCH], i = from;
	size_t k, m;
	int rc;

	while (i < n) {
		for (m = 0; m < BATCH && i < n; i++) {
			if (!s->ok[i])
				continue;
			idx[m] = i;
			handle_of(i, &v[m].oid, &v[m].index);
			v[m].page = buf[m];
			m++;
		}
		if (!m)
			break;
		rc = ramster_getv(r, s->pool, v, m);
		if (rc < 0)
			die("getv: %s", strerror(-rc));
		for (k = 0; k < m; k++) {
			if (before) {
				if (v[k].result == -ENOENT)
					s->missed[idx[k]] = 1;
				continue;
			}
			t->written++;
			if (v[k].result == 0) {
				page_fill(want, set, idx[k]);
				if (memcmp(want, buf[k], PAGE)) {
					t->wrong++;
					fprintf(stderr,
						"ramster-drill: WRONG bytes: %s page %llu\n",
						set_names[set], (unsigned long long)idx[k]);
				} else {
					t->verified++;
				}
			} else if (v[k].result == -EIO && (s->flags & RAMSTER_PERSISTENT)) {
				t->lost++;
			} else if (v[k].result == -ENOENT && !(s->flags & RAMSTER_PERSISTENT)) {
				t->missed++;
				if (s->missed[idx[k]])
					t->missed_before++;
			} else if (v[k].result == -ENOENT) {
				t->wrong++; /* a persistent page must never vanish silently */
				fprintf(
				    stderr,
				    "ramster-drill: persistent %s page %llu is gone (-ENOENT)\n",
				    set_names[set], (unsigned long long)idx[k]);
			} else {
				t->errors++;
				fprintf(stderr, "ramster-drill: %s page %llu: %s\n", set_names[set],
					(unsigned long long)idx[k], strerror(-v[k].result));
			}
		}
	}
}

/* ---- the client ------------------------------------------------------------------- */

static void lat_add(struct lat *l, double us)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4096;
		double *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = us;
}

/* The pct-th percentile of l's latencies (0 if none); sorts them. */
static double lat_pct(struct lat *l, double pct)
{
	return figures_quantile(l->v, l->n, pct / 100.0);
}

/* Latencies of two phases together. */
static double lat_pct2(const struct lat *a, const struct lat *b, double pct)
{
	struct lat m = {0};
	double v;
	size_t k;

	for (k = 0; k < a->n; k++)
		lat_add(&m, a->v[k]);
	for (k = 0; k < b->n; k++)
		lat_add(&m, b->v[k]);
	v = lat_pct(&m, pct);
	free(m.v);
	return v;
}

void *client_thread(void *arg)
{
	static unsigned char page[PAGE], want[PAGE];
	uint64_t s = 0x9e3779b97f4a7c15ull, i, op = 0;
	struct ramster_oid oid;
	uint32_t index;
	unsigned set;
	double t;
	int rc, ph;

	while ((ph = atomic_load(&cl.phase)) != PH_DONE) {
		bool writes = !atomic_load(&cl.pause_writes);

		if (!writes)
			atomic_store(&cl.writes_paused, true);
		if (writes && ++op % WRITE_EVERY == 0 && cl.scratch_n < SCRATCH_MAX) {
			/* append-only: a page never overwritten stays where it was put */
			i = cl.scratch_n++;
			page_fill(page, SET_SCRATCH, i);
			handle_of(i, &oid, &index);
			t = now_ms();
			rc = ramster_put(cl.r, sets[SET_SCRATCH].pool, &oid, index, page);
			lat_add(&cl.put_lat[ph], (now_ms() - t) * 1e3);
			if (rc == 0) {
				sets[SET_SCRATCH].ok[i] = 1;
				cl.puts++;
			} else {
				cl.put_refused[ph]++;
			}
			continue;
		}
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		set = (s >> 40) & 1 ? SET_B : SET_A;
		i = (s >> 1) % sets[set].n;
		if (!sets[set].ok[i])
			continue;
		handle_of(i, &oid, &index);
		t = now_ms();
		rc = ramster_get(cl.r, sets[set].pool, &oid, index, page);
		lat_add(&cl.lat[ph], (now_ms() - t) * 1e3);
		cl.gets++;
		if (rc == 0) {
			page_fill(want, set, i);
			if (memcmp(want, page, PAGE))
				cl.wrong++;
		} else if (rc == -EIO) {
			cl.get_lost[ph]++;
		} else {
			if (!cl.errors++)
				fprintf(stderr, "ramster-drill: client get: %s (%d)\n",
					strerror(-rc), rc);
		}
	}
	return arg;
}

/* Pause the client's writes and wait until it has none in flight. */
void client_pause_writes(void)
{
	atomic_store(&cl.writes_paused, false);
	atomic_store(&cl.pause_writes, true);
	while (!atomic_load(&cl.writes_paused))
		sleep_ms(1);
}

/* The client's latency percentiles (all phases, and detect + after as the drill's). */
void client_figures(struct result *res)
{
	unsigned i;

	res->st_p50 = lat_pct(&cl.lat[PH_STEADY], 50);
	res->st_p99 = lat_pct(&cl.lat[PH_STEADY], 99);
	res->dt_p50 = lat_pct(&cl.lat[PH_DETECT], 50);
	res->dt_p99 = lat_pct(&cl.lat[PH_DETECT], 99);
	res->dt_max = lat_pct(&cl.lat[PH_DETECT], 100);
	res->dt_gets = cl.lat[PH_DETECT].n;
	res->af_p50 = lat_pct(&cl.lat[PH_AFTER], 50);
	res->af_p99 = lat_pct(&cl.lat[PH_AFTER], 99);
	res->af_max = lat_pct(&cl.lat[PH_AFTER], 100);
	res->af_gets = cl.lat[PH_AFTER].n;
	res->dr_p50 = lat_pct2(&cl.lat[PH_DETECT], &cl.lat[PH_AFTER], 50);
	res->dr_p99 = lat_pct2(&cl.lat[PH_DETECT], &cl.lat[PH_AFTER], 99);
	res->dr_max = lat_pct2(&cl.lat[PH_DETECT], &cl.lat[PH_AFTER], 100);
	res->dr_gets = res->dt_gets + res->af_gets;
	res->eio_drill = cl.get_lost[PH_DETECT] + cl.get_lost[PH_AFTER];
	for (i = 0; i < PH_DONE; i++) {
		res->put_p50[i] = lat_pct(&cl.put_lat[i], 50);
		res->put_p99[i] = lat_pct(&cl.put_lat[i], 99);
		res->put_max[i] = lat_pct(&cl.put_lat[i], 100);
	}
}
