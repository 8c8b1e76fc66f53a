/*
 * ramster-drill - failover drills. Builds a collective of N ramsterd on this
 * machine, each in its own network namespace (rd-PID-nI, veths to a bridge in
 * rd-PID-hub, addresses 192.0.2.I), writes known pages through node 1 so that
 * most of them live on peers, injects one fault while a client keeps reading
 * and writing, then reads every page back and reports what was lost.
 *
 * Invariants checked: never a wrong byte; with replicas = 1 the pages lost are
 * exactly those the victim held for node 1 when the fault began. Everything
 * it creates (namespaces, processes, a /tmp directory) is removed on exit,
 * also on failure or a signal; --cleanup removes leftovers of killed runs.
 * Exit: 0 passed, 1 failed, 2 usage or set-up error, 77 skipped.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ramster.h"

#define PAGE	    RAMSTER_PAGE_SIZE
#define NODES_MAX   5
#define OBJ_PAGES   256 /* pages an object */
#define BATCH	    64	/* pages a putv while filling */
#define PORT	    7100
#define NS_PREFIX   "rd-" /* every namespace this tool makes starts so */
#define EXIT_FAIL   1
#define EXIT_USAGE  2
#define EXIT_SKIP   77
#define SCRATCH_MAX (1u << 20) /* pages the drill-time writer may add */
#define WRITE_EVERY 8	       /* the drill client: one put per this many ops */

enum drill { D_KILL, D_STOP, D_PARTITION, D_RESTART, D_DRAIN, D_KILL_TWO };
static const char *const drill_names[] = {"kill",    "stop",  "partition",
					  "restart", "drain", "kill-two"};

/* Page sets: tag seeds the contents, so no two sets share a page. */
enum { SET_A, SET_B, SET_E, SET_SCRATCH, NSETS };
static const char *const set_names[] = {"persistent-a", "persistent-b", "ephemeral", "scratch"};

struct opts {
	enum drill drill;
	unsigned nodes;
	unsigned local_mb;
	uint64_t pages;
	unsigned dead_after_ms, heartbeat_ms;
	const char *bin;
	bool keep, json;
};

static struct opts o = {
    .nodes = 3,
    .local_mb = 4,
    .dead_after_ms = 1000,
    .heartbeat_ms = 100,
    .bin = "build/bin",
};

/* What the run created: cleanup undoes exactly this. */
static struct {
	char prefix[32];	     /* "rd-PID-" */
	char dir[64];		     /* /tmp/ramster-drill.XXXXXX */
	char bin[4096];		     /* absolute --bin */
	bool hub, ns[NODES_MAX + 1]; /* namespaces made */
	pid_t pid[NODES_MAX + 1];    /* running ramsterd, 0 none */
	bool dir_made;
	atomic_bool cleaning;
} run;

/* One page set written through node 1. */
struct pset {
	int pool;
	unsigned flags;
	uint64_t n;	       /* handles 0..n-1 */
	unsigned char *ok;     /* 1: the put was accepted */
	unsigned char *missed; /* ephemeral: missing before the fault */
};

static struct pset sets[NSETS];

/* ---- small helpers ------------------------------------------------------------ */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("ramster-drill: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_USAGE);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;

	if (o.json)
		return;
	fputs("drill: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

/*
 * Run a shell command, its output appended to the run's log (or discarded
 * before the directory exists). @return its exit status, -1 if it died.
 */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[1024], full[1200];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (run.dir_made)
		snprintf(full, sizeof(full), "(%s) >>%s/drill.log 2>&1", cmd, run.dir);
	else
		snprintf(full, sizeof(full), "(%s) >/dev/null 2>&1", cmd);
	st = system(full);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

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
	uint64_t s = mix((uint64_t)set << 56 ^ i ^ 0x6472696c6cull) | 1;
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

/* ---- namespaces and daemons --------------------------------------------------- */

static void ns_name(char *buf, size_t len, unsigned node)
{
	if (node)
		snprintf(buf, len, "%sn%u", run.prefix, node);
	else
		snprintf(buf, len, "%shub", run.prefix);
}

static void sock_path(char *buf, size_t len, unsigned node)
{
	snprintf(buf, len, "%s/n%u.sock", run.dir, node);
}

/* Bridge in the hub namespace; node I's eth0 (192.0.2.I/24) veth-paired to hub's nI. */
static void net_up(void)
{
	char hub[64], ns[64];
	unsigned i;

	ns_name(hub, sizeof(hub), 0);
	if (sh("ip netns add %s", hub))
		die("ip netns add %s failed (see %s/drill.log)", hub, run.dir);
	run.hub = true;
	if (sh("ip -n %s link add br0 type bridge && ip -n %s link set br0 up", hub, hub))
		die("cannot make the bridge in %s (see %s/drill.log)", hub, run.dir);
	for (i = 1; i <= o.nodes; i++) {
		ns_name(ns, sizeof(ns), i);
		if (sh("ip netns add %s", ns))
			die("ip netns add %s failed (see %s/drill.log)", ns, run.dir);
		run.ns[i] = true;
		if (sh("ip -n %s link add n%u type veth peer name eth0 netns %s && "
		       "ip -n %s link set n%u master br0 up && "
		       "ip -n %s addr add 192.0.2.%u/24 dev eth0 && "
		       "ip -n %s link set eth0 up && ip -n %s link set lo up",
		       hub, i, ns, hub, i, ns, i, ns, ns))
			die("cannot wire %s to the hub (see %s/drill.log)", ns, run.dir);
	}
}

/* Cut (up = false) or restore node's link: its veth's end on the bridge. */
static int net_link(unsigned node, bool up)
{
	char hub[64];

	ns_name(hub, sizeof(hub), 0);
	return sh("ip -n %s link set n%u %s", hub, node, up ? "up" : "down");
}

static void node_start(unsigned node)
{
	char ns[64], exe[4200], conf[128], name[16], log[128];
	pid_t pid;

	ns_name(ns, sizeof(ns), node);
	snprintf(exe, sizeof(exe), "%s/ramsterd", run.bin);
	snprintf(conf, sizeof(conf), "%s/cluster.conf", run.dir);
	snprintf(name, sizeof(name), "n%u", node);
	snprintf(log, sizeof(log), "%s/n%u.log", run.dir, node);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		pthread_sigmask(SIG_SETMASK, &none, NULL);
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the drill */
		if (!freopen(log, "a", stderr) || !freopen("/dev/null", "w", stdout))
			_exit(126);
		/* ip netns exec execs the command itself: this pid becomes ramsterd */
		execlp("ip", "ip", "netns", "exec", ns, exe, "--config", conf, "--node", name,
		       "--log-level", "notice", (char *)NULL);
		_exit(127);
	}
	run.pid[node] = pid;
}

/* @return the exit status of a node that has exited, else -1 (still running). */
static int node_exited(unsigned node)
{
	int st;

	if (!run.pid[node])
		return 0;
	if (waitpid(run.pid[node], &st, WNOHANG) != run.pid[node])
		return -1;
	run.pid[node] = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The last line of a node's log, for messages. */
static void node_last_log(unsigned node, char *buf, size_t len)
{
	char path[128], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/n%u.log", run.dir, node);
	buf[0] = 0;
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (line[0] != '\n')
			snprintf(buf, len, "%s", line);
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
}

static void write_config(unsigned replicas)
{
	char path[128], key[128];
	unsigned i;
	FILE *f;

	snprintf(key, sizeof(key), "%s/cluster.key", run.dir);
	if (sh("umask 077 && '%s/ramsterctl' genkey > '%s'", run.bin, key))
		die("'%s/ramsterctl genkey' failed", run.bin);
	snprintf(path, sizeof(path), "%s/cluster.conf", run.dir);
	f = fopen(path, "w");
	if (!f)
		die("%s: %s", path, strerror(errno));
	/* watermarks above 80 %: node 1 never brings a page home (its tier stays
	 * above the bring-home limit), so what the victim holds stays put */
	fprintf(f,
		"; generated by ramster-drill\n[cluster]\nname = drill\nsecret_file = %s\n"
		"heartbeat_ms = %u\ndead_after_ms = %u\nreplicas = %u\n"
		"high_watermark = 95\nlow_watermark = 90\n",
		key, o.heartbeat_ms, o.dead_after_ms, replicas);
	for (i = 1; i <= o.nodes; i++) {
		char sock[128];

		sock_path(sock, sizeof(sock), i);
		fprintf(f,
			"\n[node n%u]\nid = %u\naddress = 192.0.2.%u:%u\nsocket = %s\n"
			"local_mb = %u\ndonate_mb = %u\n",
			i, i, i, PORT, sock, i == 1 ? o.local_mb : 64, i == 1 ? 16 : 256);
	}
	if (fclose(f))
		die("%s: %s", path, strerror(errno));
}

/* Kill what we started, delete what we made. Idempotent; any thread may call it. */
static void cleanup(void)
{
	char ns[64];
	unsigned i;

	if (atomic_exchange(&run.cleaning, true))
		return;
	for (i = 1; i <= NODES_MAX; i++)
		if (run.pid[i]) {
			kill(run.pid[i], SIGKILL);
			waitpid(run.pid[i], NULL, 0);
			run.pid[i] = 0;
		}
	if (o.keep) {
		if (run.hub)
			fprintf(stderr, "ramster-drill: --keep: namespaces %s*, files in %s\n",
				run.prefix, run.dir);
		return;
	}
	for (i = 1; i <= NODES_MAX; i++)
		if (run.ns[i]) {
			ns_name(ns, sizeof(ns), i);
			sh("ip netns del %s", ns);
			run.ns[i] = false;
		}
	if (run.hub) {
		ns_name(ns, sizeof(ns), 0);
		sh("ip netns del %s", ns);
		run.hub = false;
	}
	if (run.dir_made) {
		run.dir_made = false;
		sh("rm -rf '%s'", run.dir);
	}
}

/* SIGINT, SIGTERM, SIGHUP are blocked everywhere and taken here: cleanup runs in a thread. */
static void *signal_thread(void *arg)
{
	sigset_t *set = arg;
	int sig = 0;

	sigwait(set, &sig);
	fprintf(stderr, "ramster-drill: %s: cleaning up\n", strsignal(sig));
	cleanup();
	_exit(128 + sig);
}

/* --cleanup: every namespace named rd-*, its processes first. */
static int cleanup_leftovers(void)
{
	char line[256], name[128];
	unsigned n = 0;
	FILE *p;

	p = popen("ip netns list 2>/dev/null", "r");
	if (!p)
		die("ip netns list: %s", strerror(errno));
	while (fgets(line, sizeof(line), p)) {
		if (sscanf(line, "%127s", name) != 1 || strncmp(name, NS_PREFIX, strlen(NS_PREFIX)))
			continue;
		sh("ip netns pids %s | xargs -r kill -9", name);
		if (sh("ip netns del %s", name) == 0) {
			printf("removed namespace %s\n", name);
			n++;
		} else {
			fprintf(stderr, "ramster-drill: could not delete namespace %s\n", name);
		}
	}
	pclose(p);
	sh("rm -rf /tmp/ramster-drill.*");
	printf("cleanup: %u namespace(s) removed\n", n);
	return 0;
}

/* ---- talking to nodes ----------------------------------------------------------- */

static ramster *node_open(unsigned node)
{
	char path[128];

	sock_path(path, sizeof(path), node);
	return ramster_open(path);
}

/* A counter of a node; UINT64_MAX if it cannot be read. */
static uint64_t node_stat(unsigned node, const char *name)
{
	struct ramster_stat *s;
	uint64_t v = UINT64_MAX;
	ramster *r = node_open(node);
	size_t n, i;

	if (!r)
		return v;
	if (ramster_stats(r, &s, &n) == 0) {
		for (i = 0; i < n; i++)
			if (!strcmp(s[i].name, name))
				v = s[i].value;
		ramster_stats_free(s, n);
	}
	ramster_close(r);
	return v;
}

/* How many peers of mask node 1 sees in state (up, connecting, down, dead); adds their pages_lent.
 */
static unsigned peers_in(ramster *r1, unsigned victims_mask, const char *state, uint64_t *lent_out)
{
	struct ramster_peer_info *p;
	unsigned up = 0;
	size_t n, i;

	if (ramster_peers(r1, &p, &n))
		return 0;
	for (i = 0; i < n; i++) {
		if (!(victims_mask & (1u << p[i].id)))
			continue;
		if (!strcmp(p[i].state, state))
			up++;
		if (lent_out)
			*lent_out += p[i].pages_lent;
	}
	free(p);
	return up;
}

static unsigned mask_count(unsigned mask)
{
	return (unsigned)__builtin_popcount(mask);
}

/* Start every node; wait for their sockets and for node 1 to see all peers up. */
static void collective_up(void)
{
	unsigned i, all = 0;
	double t0 = now_ms();
	ramster *r1 = NULL;

	for (i = 1; i <= o.nodes; i++) {
		node_start(i);
		if (i > 1)
			all |= 1u << i;
	}
	for (i = 1; i <= o.nodes; i++) {
		ramster *r;

		while (!(r = node_open(i))) {
			int st = node_exited(i);

			if (st >= 0) {
				char last[512];

				node_last_log(i, last, sizeof(last));
				if (st == 2 && strstr(last, "not supported")) {
					printf("not supported by this build: ramsterd refused the "
					       "cluster file: %s\n",
					       last);
					cleanup();
					exit(EXIT_SKIP);
				}
				fprintf(stderr, "ramster-drill: node n%u exited (%d): %s\n", i, st,
					last);
				exit(EXIT_USAGE);
			}
			if (now_ms() - t0 > 60000)
				die("node n%u: no socket after 60 s", i);
			sleep_ms(20);
		}
		if (i == 1)
			r1 = r;
		else
			ramster_close(r);
	}
	while (peers_in(r1, all, "up", NULL) < o.nodes - 1) {
		if (now_ms() - t0 > 60000)
			die("node n1 does not see every peer up after 60 s (see %s)", run.dir);
		sleep_ms(20);
	}
	ramster_close(r1);
	note("collective of %u nodes up in %.0f ms (namespaces %s*)", o.nodes, now_ms() - t0,
	     run.prefix);
}

/* Wait until node 1's remotify is idle: its counters unchanged for 0.5 s (at most 20 s). */
static void remotify_settle(void)
{
	static const char *const names[] = {"remote_pages_sent", "remote_pages_placed",
					    "remote_frames_taken", "remote_flushes_sent"};
	uint64_t last[4] = {0}, v;
	unsigned stable = 0, k;
	double t0 = now_ms();
	bool same;

	while (stable < 5 && now_ms() - t0 < 20000) {
		same = true;
		for (k = 0; k < 4; k++) {
			v = node_stat(1, names[k]);
			if (v != last[k])
				same = false;
			last[k] = v;
		}
		stable = same ? stable + 1 : 0;
		sleep_ms(100);
	}
}

/* ---- the workload ---------------------------------------------------------------- */

static void set_init(struct pset *s, ramster *r, unsigned flags, uint64_t n)
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
static uint64_t set_write(ramster *r, unsigned set)
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

/* Outcome counts of reading pages back. */
struct tally {
	uint64_t written, verified, lost, missed, wrong, errors;
	uint64_t missed_before; /* of missed: already absent at the baseline read */
	uint64_t evicted;	/* n1's ephemeral evictions since the baseline: misses too */
};

/* Read back every accepted page of a set. before: record ephemeral misses as the baseline. */
static void set_verify(ramster *r, unsigned set, uint64_t from, uint64_t n, struct tally *t,
		       bool before)
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

/* Latencies of one phase, µs. */
struct lat {
	double *v;
	size_t n, cap;
};

enum { PH_STEADY, PH_DRILL, PH_DONE };

/* The client that keeps reading and writing while the drill runs (its own connection). */
static struct {
	pthread_t th;
	ramster *r;
	atomic_int phase;
	atomic_bool pause_writes, writes_paused;
	struct lat lat[2];
	uint64_t gets, get_lost, puts, wrong, errors; /* read after join */
	uint64_t scratch_n;			      /* scratch handles used */
} cl;

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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double lat_pct(struct lat *l, double pct)
{
	size_t k;

	if (!l->n)
		return 0;
	qsort(l->v, l->n, sizeof(*l->v), cmp_double);
	k = (size_t)(pct / 100.0 * (double)(l->n - 1) + 0.5);
	return l->v[k];
}

static void *client_thread(void *arg)
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
			rc = ramster_put(cl.r, sets[SET_SCRATCH].pool, &oid, index, page);
			if (rc == 0) {
				sets[SET_SCRATCH].ok[i] = 1;
				cl.puts++;
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
			cl.get_lost++;
		} else {
			if (!cl.errors++)
				fprintf(stderr, "ramster-drill: client get: %s (%d)\n",
					strerror(-rc), rc);
		}
	}
	return arg;
}

/* Pause the client's writes and wait until it has none in flight. */
static void client_pause_writes(void)
{
	atomic_store(&cl.writes_paused, false);
	atomic_store(&cl.pause_writes, true);
	while (!atomic_load(&cl.writes_paused))
		sleep_ms(1);
}

/* ---- the drill ------------------------------------------------------------------ */

struct result {
	unsigned victims;	/* mask of node ids */
	uint64_t expected_lost; /* victims' foreign_pages just before the fault */
	uint64_t lent;		/* node 1's view: pages the victims held for it */
	uint64_t lost_after;	/* of the lost: pages written after the fault began */
	double detect_ms, dead_ms, rejoin_ms, hold_ms;
	bool rejoined;
	struct tally t;
	double st_p50, st_p99, dr_p50, dr_p99, dr_max;
	uint64_t dr_gets;
};

/*
 * Poll node 1 until every peer of mask is in state (all = true) or none is
 * (all = false). @return ms since t0, -1 after limit_ms.
 */
static double wait_peers(ramster *r1, unsigned mask, const char *state, bool all, double t0,
			 double limit_ms)
{
	for (;;) {
		unsigned k = peers_in(r1, mask, state, NULL);

		if (all ? k == mask_count(mask) : k == 0)
			return now_ms() - t0;
		if (now_ms() - t0 > limit_ms)
			return -1;
		sleep_ms(2);
	}
}

/* Is `ramsterctl drain` in this build? @return true if its help lists it. */
static bool have_drain(void)
{
	return sh("'%s/ramsterctl' --help | grep -qw drain", run.bin) == 0;
}

static void fault(struct result *res, ramster *r1)
{
	unsigned i;
	double t0, hold = o.dead_after_ms * 2.0 < 3000 ? 3000 : o.dead_after_ms * 2.0;

	t0 = now_ms();
	switch (o.drill) {
	case D_KILL:
	case D_RESTART:
	case D_KILL_TWO:
		for (i = 2; i <= o.nodes; i++)
			if (res->victims & (1u << i))
				kill(run.pid[i], SIGKILL);
		break;
	case D_STOP:
		kill(run.pid[2], SIGSTOP);
		break;
	case D_PARTITION:
		if (net_link(2, false))
			note("warning: cutting n2's link failed");
		break;
	case D_DRAIN:
		if (sh("'%s/ramsterctl' --socket '%s/n2.sock' drain", run.bin, run.dir))
			note("warning: ramsterctl drain failed");
		/* the drain must have moved every page away before the node goes */
		while (node_stat(2, "foreign_pages") > 0 && now_ms() - t0 < 60000)
			sleep_ms(50);
		kill(run.pid[2], SIGKILL);
		break;
	}
	atomic_store(&cl.pause_writes, false);
	res->detect_ms = wait_peers(r1, res->victims, "up", false, t0, 120000);
	note("fault injected; node n1 saw it after %.0f ms", res->detect_ms);
	if (o.drill != D_RESTART) {
		res->dead_ms = wait_peers(r1, res->victims, "dead", true, t0, 120000);
		note("node n1 declared it dead after %.0f ms", res->dead_ms);
	}
	for (i = 2; i <= o.nodes; i++)
		if (res->victims & (1u << i) && o.drill != D_STOP && o.drill != D_PARTITION)
			waitpid(run.pid[i], NULL, 0), run.pid[i] = 0;

	switch (o.drill) {
	case D_STOP:
	case D_PARTITION:
		while (now_ms() - t0 < hold)
			sleep_ms(10);
		res->hold_ms = now_ms() - t0;
		if (o.drill == D_STOP)
			kill(run.pid[2], SIGCONT);
		else
			net_link(2, true);
		break;
	case D_RESTART:
		node_start(2);
		break;
	default:
		break;
	}
	if (o.drill == D_STOP || o.drill == D_PARTITION || o.drill == D_RESTART) {
		double t1 = now_ms(), d = wait_peers(r1, res->victims, "up", true, t1, 120000);

		res->rejoined = d >= 0;
		res->rejoin_ms = d;
		note("n2 %s after %.0f ms",
		     o.drill == D_RESTART ? "restarted and rejoined" : "back and rejoined", d);
	}
	sleep_ms(2000); /* two more seconds of client traffic after the fault */
}

/*
 * Ephemeral misses the fault caused: n1 is the only user of ephemeral pages,
 * so every miss is one of: absent at the baseline, evicted by n1 since (a
 * local page, never one the victim held), or held by the victim.
 */
static uint64_t fault_misses(const struct tally *t)
{
	uint64_t old = t->missed_before + t->evicted;

	return t->missed > old ? t->missed - old : 0;
}

static void report(const struct result *res, bool pass, const char *why)
{
	const struct tally *t = &res->t;
	uint64_t missed_new = fault_misses(t);
	char restore[32] = "n/a", rejoin[32] = "n/a";

	if (res->rejoined)
		snprintf(rejoin, sizeof(rejoin), "%.0f", res->rejoin_ms);
	if (o.json) {
		printf(
		    "{\"drill\": \"%s\", \"nodes\": %u, \"victims\": %u, \"replicas\": %u, "
		    "\"dead_after_ms\": %u, \"heartbeat_ms\": %u, \"local_mb\": %u, "
		    "\"written\": %llu, \"verified\": %llu, \"lost\": %llu, \"missed\": %llu, "
		    "\"missed_before_fault\": %llu, \"evicted\": %llu, \"wrong\": %llu, "
		    "\"errors\": %llu, "
		    "\"victim_foreign_pages\": %llu, \"detect_ms\": %.1f, \"dead_ms\": %.1f, "
		    "\"restore_ms\": null, "
		    "\"rejoin_ms\": %s, \"steady_get_p50_us\": %.1f, \"steady_get_p99_us\": %.1f, "
		    "\"drill_get_p50_us\": %.1f, \"drill_get_p99_us\": %.1f, \"drill_get_max_us\": "
		    "%.1f, \"drill_gets\": %llu, "
		    "\"client_puts\": %llu, \"pass\": %s, \"reason\": \"%s\"}\n",
		    drill_names[o.drill], o.nodes, mask_count(res->victims), 1u, o.dead_after_ms,
		    o.heartbeat_ms, o.local_mb, (unsigned long long)t->written,
		    (unsigned long long)t->verified, (unsigned long long)t->lost,
		    (unsigned long long)t->missed, (unsigned long long)t->missed_before,
		    (unsigned long long)t->evicted, (unsigned long long)t->wrong,
		    (unsigned long long)t->errors, (unsigned long long)res->expected_lost,
		    res->detect_ms, res->dead_ms, res->rejoined ? rejoin : "null", res->st_p50,
		    res->st_p99, res->dr_p50, res->dr_p99, res->dr_max,
		    (unsigned long long)res->dr_gets, (unsigned long long)cl.puts,
		    pass ? "true" : "false", why);
		return;
	}
	printf("\n== drill %s: %u nodes, victim%s", drill_names[o.drill], o.nodes,
	       mask_count(res->victims) > 1 ? "s" : "");
	for (unsigned i = 2; i <= o.nodes; i++)
		if (res->victims & (1u << i))
			printf(" n%u", i);
	printf(", replicas 1, heartbeat %u ms, dead after %u ms\n", o.heartbeat_ms,
	       o.dead_after_ms);
	printf(
	    "pages written        %llu (through n1, local_mb %u; %llu by the client as it ran)\n",
	    (unsigned long long)t->written, o.local_mb, (unsigned long long)cl.puts);
	printf("verified             %llu\n", (unsigned long long)t->verified);
	printf("lost (-EIO)          %llu persistent (%llu of them written after the fault)\n",
	       (unsigned long long)t->lost, (unsigned long long)res->lost_after);
	printf("missed (ephemeral)   %llu (%llu already missing before the fault, %llu evicted "
	       "by n1 since)\n",
	       (unsigned long long)t->missed, (unsigned long long)t->missed_before,
	       (unsigned long long)t->evicted);
	printf("wrong                %llu\n", (unsigned long long)t->wrong);
	if (t->errors)
		printf("errors               %llu\n", (unsigned long long)t->errors);
	printf("victim held          %llu pages for n1 (foreign_pages before the fault; n1 saw "
	       "%llu lent)\n",
	       (unsigned long long)res->expected_lost, (unsigned long long)res->lent);
	printf("lost + new misses    %llu (expected %llu)\n",
	       (unsigned long long)(t->lost + missed_new), (unsigned long long)res->expected_lost);
	printf("time to detect       %.0f ms (n1's peers shows n2 not up)\n", res->detect_ms);
	if (o.drill != D_RESTART)
		printf("time to dead         %.0f ms (n1 declared it dead: its pages are lost)\n",
		       res->dead_ms);
	if (res->hold_ms > 0)
		printf("fault held           %.0f ms\n", res->hold_ms);
	printf("time to rejoin       %s%s\n", rejoin, res->rejoined ? " ms" : "");
	printf("time to restore      %s (replicas = 1: nothing to restore)\n", restore);
	printf("get latency steady   p50 %.0f us, p99 %.0f us\n", res->st_p50, res->st_p99);
	printf("get latency drill    p50 %.0f us, p99 %.0f us, max %.0f us (%llu gets, %llu "
	       "answered -EIO)\n",
	       res->dr_p50, res->dr_p99, res->dr_max, (unsigned long long)res->dr_gets,
	       (unsigned long long)cl.get_lost);
	printf("result               %s%s%s\n", pass ? "PASS" : "FAIL", why[0] ? ": " : "", why);
}

static int drill_run(void)
{
	struct result res = {0};
	uint64_t n = o.pages, ne = n / 8, na = (n - ne) / 2, nb = n - ne - na, wrote;
	unsigned replicas = 1, i;
	ramster *r, *r1;
	uint64_t measured, expect, ev0, scratch_at_fault, after;
	char why[256] = "";
	double t0;
	bool pass;

	if (o.drill == D_KILL_TWO) {
		replicas = 3;
		if (o.nodes < 4)
			o.nodes = 4; /* three copies and two dead still leave one */
	}
	write_config(replicas);
	net_up();
	collective_up();
	if (o.drill == D_DRAIN && !have_drain()) {
		printf("not supported by this build: ramsterctl has no 'drain' command "
		       "(a node cannot hand its pages to the others before it goes)\n");
		return EXIT_SKIP;
	}
	res.victims = 1u << 2;
	if (o.drill == D_KILL_TWO)
		res.victims |= 1u << 3;

	/* private pools belong to one connection: the client's holds every set,
	 * used by this thread only while the client thread is not running */
	r1 = node_open(1);
	r = cl.r = node_open(1);
	if (!r1 || !cl.r)
		die("cannot connect to n1: %s", strerror(errno));
	set_init(&sets[SET_E], r, RAMSTER_SHARED, ne); /* shared: gets leave the page */
	set_init(&sets[SET_A], r, RAMSTER_PERSISTENT, na);
	set_init(&sets[SET_B], r, RAMSTER_PERSISTENT, nb);
	set_init(&sets[SET_SCRATCH], r, RAMSTER_PERSISTENT, SCRATCH_MAX);

	/* ephemeral first: the coldest pages go to peers first */
	t0 = now_ms();
	wrote = set_write(r, SET_E);
	wrote += set_write(r, SET_A);
	wrote += set_write(r, SET_B);
	note("wrote %llu of %llu pages in %.1f s (%llu refused)", (unsigned long long)wrote,
	     (unsigned long long)n, (now_ms() - t0) / 1e3, (unsigned long long)(n - wrote));
	remotify_settle();
	note("n1 keeps %llu pages remote; peers hold:",
	     (unsigned long long)node_stat(1, "tier_remote_pages"));
	for (i = 2; i <= o.nodes; i++)
		note("  n%u foreign_pages %llu", i,
		     (unsigned long long)node_stat(i, "foreign_pages"));
	set_verify(r, SET_E, 0, ne, &res.t, true); /* the ephemeral baseline */
	ev0 = node_stat(1, "tier_evicted_pages");

	/* steady state: 2 s of the client alone */
	if (pthread_create(&cl.th, NULL, client_thread, NULL))
		die("pthread_create failed");
	sleep_ms(2000);

	/* the snapshot: no write in flight, remotify idle, then at once the fault */
	client_pause_writes();
	scratch_at_fault = cl.scratch_n;
	remotify_settle();
	atomic_store(&cl.phase, PH_DRILL);
	for (i = 2; i <= o.nodes; i++)
		if (res.victims & (1u << i))
			res.expected_lost += node_stat(i, "foreign_pages");
	peers_in(r1, res.victims, "up", &res.lent);
	fault(&res, r1); /* resumes the client's writes once the fault is in */
	atomic_store(&cl.phase, PH_DONE);
	pthread_join(cl.th, NULL);

	res.st_p50 = lat_pct(&cl.lat[PH_STEADY], 50);
	res.st_p99 = lat_pct(&cl.lat[PH_STEADY], 99);
	res.dr_p50 = lat_pct(&cl.lat[PH_DRILL], 50);
	res.dr_p99 = lat_pct(&cl.lat[PH_DRILL], 99);
	res.dr_max = lat_pct(&cl.lat[PH_DRILL], 100);
	res.dr_gets = cl.lat[PH_DRILL].n;

	res.t.evicted = node_stat(1, "tier_evicted_pages") - ev0;
	set_verify(r, SET_E, 0, ne, &res.t, false);
	set_verify(r, SET_A, 0, na, &res.t, false);
	set_verify(r, SET_B, 0, nb, &res.t, false);
	set_verify(r, SET_SCRATCH, 0, scratch_at_fault, &res.t, false);
	/* pages written after the fault began: none was on the victim's old session */
	after = res.t.lost;
	set_verify(r, SET_SCRATCH, scratch_at_fault, cl.scratch_n, &res.t, false);
	res.lost_after = res.t.lost - after;
	res.t.wrong += cl.wrong;
	res.t.errors += cl.errors;

	measured = res.t.lost + fault_misses(&res.t);
	expect = (o.drill == D_DRAIN || o.drill == D_KILL_TWO) ? 0 : res.expected_lost;

	pass = true;
	if (res.t.wrong) {
		pass = false;
		snprintf(why, sizeof(why), "%llu wrong page(s)", (unsigned long long)res.t.wrong);
	} else if (res.t.errors) {
		pass = false;
		snprintf(why, sizeof(why), "%llu unexpected error(s)",
			 (unsigned long long)res.t.errors);
	} else if (measured != expect) {
		pass = false;
		snprintf(why, sizeof(why), "lost %llu, expected %llu (the victim's pages)",
			 (unsigned long long)measured, (unsigned long long)expect);
	} else if (res.detect_ms < 0) {
		pass = false;
		snprintf(why, sizeof(why), "node n1 never saw the fault");
	} else if ((o.drill == D_STOP || o.drill == D_PARTITION || o.drill == D_RESTART) &&
		   !res.rejoined) {
		pass = false;
		snprintf(why, sizeof(why), "the victim never rejoined");
	} else {
		snprintf(why, sizeof(why), "lost exactly the victim's pages, nothing wrong");
	}
	report(&res, pass, why);
	ramster_close(r1);
	ramster_close(r);
	return pass ? 0 : EXIT_FAIL;
}

/* ---- command line --------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ramster-drill --drill NAME [options]\n"
		"       ramster-drill --cleanup\n"
		"Build a ramster collective in network namespaces on this machine, inject a\n"
		"fault while a client reads and writes through node 1, and verify every page.\n"
		"Needs root (ip netns). Exit: 0 pass, 1 fail, 2 usage/set-up error, 77 skipped.\n"
		"\n"
		"Drills: kill, stop, partition, restart, drain, kill-two\n"
		"\n"
		"  -d, --drill NAME       the drill to run\n"
		"  -n, --nodes N          nodes in the collective, 2..%d (default 3)\n"
		"  -m, --local-mb N       node 1's local tier, MiB (default 4)\n"
		"  -p, --pages N          pages written (default: 8x local_mb in pages)\n"
		"      --dead-after-ms N  the cluster's dead_after_ms (default 1000)\n"
		"      --heartbeat-ms N   the cluster's heartbeat_ms (default 100)\n"
		"  -b, --bin DIR          where ramsterd and ramsterctl are (default build/bin)\n"
		"  -k, --keep             leave the namespaces and files for debugging\n"
		"  -j, --json             the report as one JSON object\n"
		"      --cleanup          remove leftovers: namespaces rd-*, /tmp/ramster-drill.*\n"
		"  -h, --help             this help\n",
		NODES_MAX);
}

static unsigned long long num(const char *opt, const char *s, unsigned long long lo,
			      unsigned long long hi)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		die("%s: '%s' is not a number in %llu..%llu", opt, s, lo, hi);
	return v;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"drill", required_argument, NULL, 'd'},
	    {"nodes", required_argument, NULL, 'n'},
	    {"local-mb", required_argument, NULL, 'm'},
	    {"pages", required_argument, NULL, 'p'},
	    {"dead-after-ms", required_argument, NULL, 'D'},
	    {"heartbeat-ms", required_argument, NULL, 'H'},
	    {"bin", required_argument, NULL, 'b'},
	    {"keep", no_argument, NULL, 'k'},
	    {"json", no_argument, NULL, 'j'},
	    {"cleanup", no_argument, NULL, 'C'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	const char *drill = NULL;
	bool do_cleanup = false;
	static sigset_t sigs;
	pthread_t sth;
	unsigned k;
	int c, rc;

	while ((c = getopt_long(argc, argv, "d:n:m:p:b:kjh", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			drill = optarg;
			break;
		case 'n':
			o.nodes = (unsigned)num("--nodes", optarg, 2, NODES_MAX);
			break;
		case 'm':
			o.local_mb = (unsigned)num("--local-mb", optarg, 1, 4096);
			break;
		case 'p':
			o.pages = num("--pages", optarg, 64, 1ull << 26);
			break;
		case 'D':
			o.dead_after_ms = (unsigned)num("--dead-after-ms", optarg, 20, 600000);
			break;
		case 'H':
			o.heartbeat_ms = (unsigned)num("--heartbeat-ms", optarg, 10, 60000);
			break;
		case 'b':
			o.bin = optarg;
			break;
		case 'k':
			o.keep = true;
			break;
		case 'j':
			o.json = true;
			break;
		case 'C':
			do_cleanup = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc)
		die("unexpected argument '%s' (try --help)", argv[optind]);
	if (geteuid() != 0) {
		fprintf(stderr, "ramster-drill: needs root: it creates network namespaces "
				"(ip netns) and veth links; run it with sudo\n");
		return EXIT_SKIP;
	}
	if (do_cleanup)
		return cleanup_leftovers();
	if (!drill)
		die("no --drill (kill, stop, partition, restart, drain, kill-two)");
	for (k = 0; k < sizeof(drill_names) / sizeof(drill_names[0]); k++)
		if (!strcmp(drill, drill_names[k]))
			break;
	if (k == sizeof(drill_names) / sizeof(drill_names[0]))
		die("--drill: unknown drill '%s' (kill, stop, partition, restart, drain, kill-two)",
		    drill);
	o.drill = (enum drill)k;
	if (o.dead_after_ms <= o.heartbeat_ms)
		die("--dead-after-ms must be above --heartbeat-ms");
	if (!o.pages)
		o.pages = (uint64_t)o.local_mb * 256 * 2 * 4; /* text pages compress ~2:1 */
	if (!realpath(o.bin, run.bin))
		die("--bin %s: %s", o.bin, strerror(errno));
	if (access(run.bin, F_OK) ||
	    sh("test -x '%s/ramsterd' && test -x '%s/ramsterctl'", run.bin, run.bin))
		die("--bin %s: no ramsterd and ramsterctl there (build with make)", o.bin);
	if (sh("ip netns list"))
		die("'ip netns' does not work here (iproute2 missing or no netns support)");

	snprintf(run.prefix, sizeof(run.prefix), NS_PREFIX "%d-", (int)getpid());
	snprintf(run.dir, sizeof(run.dir), "/tmp/ramster-drill.XXXXXX");
	if (!mkdtemp(run.dir))
		die("mkdtemp: %s", strerror(errno));
	run.dir_made = true;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	if (pthread_create(&sth, NULL, signal_thread, &sigs))
		die("pthread_create failed");
	atexit(cleanup);

	rc = drill_run();
	cleanup();
	return rc;
}
