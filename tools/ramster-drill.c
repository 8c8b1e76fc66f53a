/*
 * ramster-drill - failover drills. Builds a collective of N ramsterd on this
 * machine, each in its own network namespace (rd-PID-nI, veths to a bridge in
 * rd-PID-hub, addresses 192.0.2.I), writes known pages through node 1 so that
 * most of them live on peers, injects one fault while a client keeps reading
 * and writing, then reads every page back and reports what was lost.
 *
 * Invariants checked: never a wrong byte; with replicas = 1 the pages lost are
 * exactly those the victim held for node 1 when the fault began; with more
 * replicas than victims (and after a drain) no persistent page is lost, no
 * get answers -EIO, the owner restores its replica count when enough peers
 * live, and gets after the detection stay near their steady latency. Every
 * drill also holds n1 to its detection floor (dead_after_ms + 2 heartbeats).
 * The two floors are wall-clock figures: enforced by default, printed only
 * with --latency-floor report / --detection-floor report (the test suite).
 * Everything it creates (namespaces, processes, a /tmp directory) is removed
 * on exit, also on failure or a signal; --cleanup removes leftovers of killed
 * runs. Exit: 0 passed, 1 failed, 2 usage or set-up error, 77 skipped.
 */
#include <errno.h>
#include <fcntl.h>
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
#include <math.h>

#include "tools/figures.h"
#include "tools/jout.h"
#include "tools/progress.h"
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
#define REPLICAS_MAX 4
#define POLL_MS	     10	   /* wait_peers: n1's peer table read this often */
#define SCHED_SLACK  40	   /* detection floor: libev timer and scheduler lateness */
#define STAT_POLL_MS 50	   /* replica_below_target read this often */
#define RESTORE_MS   60000 /* at most this long for the replica count to return */
#define DRAIN_MS     120000 /* at most this long for a drain */
#define LAT_FACTOR   3	   /* after-detection get p99 may be this times the steady one */
#define LAT_ALLOW_US 2000  /* ... or this much: a 2-vCPU VM's p99 is noise below it */
#define HOLD_MS	     3000  /* a pause or partition lasts this long (or 2 x dead_after_ms) */
#define STALL_GB     4	   /* stall: GiB one WRITE_ZEROES (NO_HOLE) covers */
#define NBD_PYTHON   "/usr/bin/python3" /* Debian's, with python3-libnbd */
#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
#define LAT_MIN_GETS 200   /* fewer gets after the detection: their p99 is just their max */

enum drill { D_KILL, D_STOP, D_PARTITION, D_RESTART, D_DRAIN, D_KILL_TWO, D_OWNER_STOP,
	     D_OWNER_PARTITION, D_CLOCK, D_STALL };
static const char *const drill_names[] = {"kill",    "stop",  "partition",
					  "restart", "drain", "kill-two", "owner-stop", "owner-partition", "clock-step", "stall"};

/* Page sets: tag seeds the contents, so no two sets share a page. */
enum { SET_A, SET_B, SET_E, SET_SCRATCH, NSETS };
static const char *const set_names[] = {"persistent-a", "persistent-b", "ephemeral", "scratch"};

struct opts {
	enum drill drill;
	unsigned nodes, replicas;
	bool nodes_set, replicas_set; /* given on the command line */
	unsigned local_mb;
	uint64_t pages;
	unsigned dead_after_ms, heartbeat_ms;
	const char *bin;
	bool keep, json;
	bool lat_report; /* --latency-floor report: print the floor, never fail on it */
	bool det_report; /* --detection-floor report: the same for the detection floor */
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

/* A pause, a partition, a clock step: shorter than orphan_after_ms, nothing may be lost. */
static bool drill_pause(void)
{
	return o.drill == D_STOP || o.drill == D_PARTITION || o.drill == D_OWNER_STOP ||
	       o.drill == D_OWNER_PARTITION || o.drill == D_CLOCK || o.drill == D_STALL;
}

/* The owner (n1) is the victim. */
static bool drill_owner(void)
{
	return o.drill == D_OWNER_STOP || o.drill == D_OWNER_PARTITION;
}

static double hold_ms(void)
{
	return o.dead_after_ms * 2.0 < HOLD_MS ? HOLD_MS : o.dead_after_ms * 2.0;
}

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
		if (o.drill == D_CLOCK && node == 1) {
			/* n1's wall clock is libfaketime's: the drill steps it through this file */
			char rc[128];

			snprintf(rc, sizeof(rc), "%s/faketime.rc", run.dir);
			setenv("LD_PRELOAD", FAKETIME_LIB, 1);
			setenv("FAKETIME_TIMESTAMP_FILE", rc, 1);
			setenv("FAKETIME_NO_CACHE", "1", 1);
			setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
		}
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
	/* a get whose only copy is on a paused holder waits for it, up to
	 * request_timeout_ms: above the pause, no get fails */
	if (drill_pause())
		fprintf(f, "request_timeout_ms = %.0f\n", hold_ms() + 3000);
	/* a killed holder is only unreachable to its owners until its lease ends
	 * (issue 20: a get waits for a live holder rather than report its page
	 * lost); a lease of 2 s past dead_after_ms lets the drill see the pages
	 * that had no other copy go, as the default 10 min would in production */
	else
		fprintf(f, "orphan_after_ms = %u\n", o.dead_after_ms + 2000);
	for (i = 1; i <= o.nodes; i++) {
		char sock[128];

		sock_path(sock, sizeof(sock), i);
		fprintf(f,
			"\n[node n%u]\nid = %u\naddress = 192.0.2.%u:%u\nsocket = %s\n"
			"local_mb = %u\ndonate_mb = %u\n",
			i, i, i, PORT, sock, i == 1 ? o.local_mb : 64, i == 1 ? 16 : 256);
		if (o.drill == D_STALL)
			fprintf(f, "nbd_socket = %s/n%u.nbd\n", run.dir, i);
	}
	/* stall: one NBD export, zeroed in one request (one callback of n1's loop) */
	if (o.drill == D_STALL)
		fprintf(f, "\n[export stall]\nsize = %uG\n", STALL_GB);
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

/*
 * --cleanup: every namespace named rd-*, its processes first; except those
 * of a drill still running (rd-PID-* with PID alive): several runs may share
 * the machine (a sanitizer build's suite, a second checkout).
 */
static int cleanup_leftovers(void)
{
	char line[256], name[128];
	unsigned n = 0, kept = 0;
	FILE *p;

	p = popen("ip netns list 2>/dev/null", "r");
	if (!p)
		die("ip netns list: %s", strerror(errno));
	while (fgets(line, sizeof(line), p)) {
		int pid;

		if (sscanf(line, "%127s", name) != 1 || strncmp(name, NS_PREFIX, strlen(NS_PREFIX)))
			continue;
		if (sscanf(name + strlen(NS_PREFIX), "%d-", &pid) == 1 && pid > 0 &&
		    kill(pid, 0) == 0) {
			printf("kept namespace %s: its drill (pid %d) is running\n", name, pid);
			kept++;
			continue;
		}
		sh("ip netns pids %s | xargs -r kill -9", name);
		if (sh("ip netns del %s", name) == 0) {
			printf("removed namespace %s\n", name);
			n++;
		} else {
			fprintf(stderr, "ramster-drill: could not delete namespace %s\n", name);
		}
	}
	pclose(p);
	/* the directories name no pid: a running drill's would go with the rest */
	if (kept)
		printf("kept /tmp/ramster-drill.*: a drill is running\n");
	else
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
	ramster *r = node_open(node);
	uint64_t v;
	int rc;

	if (!r)
		return UINT64_MAX;
	rc = ramster_stat(r, name, &v);
	ramster_close(r);
	return rc ? UINT64_MAX : v;
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

/*
 * The client's phases: steady (before the fault), detect (the fault is in,
 * n1 has not yet declared the victim dead: gets of its pages wait), after
 * (n1 knows: with replicas >= 2 gets go to the surviving copies at once).
 */
enum { PH_STEADY, PH_DETECT, PH_AFTER, PH_DONE };

/* The client that keeps reading and writing while the drill runs (its own connection). */
static struct {
	pthread_t th;
	ramster *r;
	atomic_int phase;
	atomic_bool pause_writes, writes_paused;
	struct lat lat[PH_DONE];
	uint64_t get_lost[PH_DONE];		      /* gets answered -EIO, by phase */
	/* puts, by phase: a node that cannot place copies makes them wait for
	 * room, which stalls this client's gets too */
	struct lat put_lat[PH_DONE];
	uint64_t put_refused[PH_DONE];
	uint64_t gets, puts, wrong, errors;	      /* read after join */
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

/* The pct-th percentile of l's latencies (0 if none); sorts them. */
static double lat_pct(struct lat *l, double pct)
{
	return figures_quantile(l->v, l->n, pct / 100.0);
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
static void client_pause_writes(void)
{
	atomic_store(&cl.writes_paused, false);
	atomic_store(&cl.pause_writes, true);
	while (!atomic_load(&cl.writes_paused))
		sleep_ms(1);
}

/* ---- the drill ------------------------------------------------------------------ */

#define NOSTAT UINT64_MAX /* node_stat: no such counter, or the node did not answer */

/* What the drill may lose, by the fault and the replica count. */
enum expect {
	EX_EXACT,      /* replicas = 1: exactly what the victims held for n1 */
	EX_BOUNDED,    /* 1 < replicas <= victims: at most that (copies on two victims) */
	EX_REPLICATED, /* replicas > victims: no persistent page; ephemeral: one copy */
	EX_DRAINED,    /* drain: the victim gave everything away before it died */
	EX_NONE,       /* a pause, partition or clock step shorter than orphan_after_ms */
};

struct result {
	unsigned victims;	/* mask of node ids */
	unsigned nvictims;	/* of the mask */
	unsigned live_after;	/* peers of n1 alive once the fault is over */
	enum expect expect;
	uint64_t expected_lost; /* victims' foreign_pages just before the fault */
	uint64_t lent;		/* node 1's view: pages the victims held for it */
	uint64_t lost_after;	/* of the lost: pages written after the fault began */
	/* from the fault (drain: from the kill that follows it) */
	double detect_ms, dead_ms, rejoin_ms, hold_ms;
	bool rejoined;
	struct tally t;
	/* get latencies, us: steady; detecting (fault to dead); after; the whole drill */
	double st_p50, st_p99, dt_p50, dt_p99, dt_max, af_p50, af_p99, af_max, dr_p50, dr_p99,
	    dr_max;
	uint64_t dt_gets, af_gets, dr_gets, eio_drill;
	double put_p50[PH_DONE], put_p99[PH_DONE], put_max[PH_DONE]; /* us */
	/* the detection floor: dead_after_ms + 2 x heartbeat_ms + slack */
	double floor_ms, floor_seen;
	bool floor_met;
	/* the replica count on n1 (NOSTAT: the daemon has no such counter) */
	bool restored;
	double restore_ms, restore_rejoin_ms; /* from the fault; from the rejoin (-1: before) */
	uint64_t below_at_fault, below_peak, below_end;
	uint64_t rerep0, rlost0, rerep, rlost; /* counters at the fault and at the end */
	uint64_t rfail0, rfail;		       /* replica_repair_failed: why no restore */
	/* drain */
	bool drain_done, drain_cmd_ok;
	int drain_rc;
	double drain_ms;
	uint64_t drain_returned, drain_failed, drain_orphans;
	uint64_t drain_foreign; /* n2's foreign_pages at the kill */
	/* the latency floor */
	bool lat_checked, lat_judged, lat_met; /* judged: enough gets to have a p99 */
	char lat_rule[96]; /* which rule passed */
	/* what the copies cost, read at the fault: n1's remote pages and replica
	 * table, and what every peer holds for it (pages, bytes charged) */
	uint64_t mem_remote, mem_records, mem_table, mem_peer_pages, mem_peer_used;
	uint64_t deaths0, deaths; /* n1's cluster_peer_deaths at the fault and at the end */
	double clock_h;		  /* clock-step: n1's wall clock offset as it logged n2's stop */
	int stall_rc;		  /* stall: the NBD client's exit status */
	char stall_lag[24];	  /* stall: n1's loop_lag_max_us after it */
};

static uint64_t delta(uint64_t now, uint64_t then)
{
	return now == NOSTAT || then == NOSTAT ? NOSTAT : now - then;
}

/* A counter as text: "n/a" when the daemon has none. */
static const char *stat_str(char *buf, size_t len, uint64_t v)
{
	if (v == NOSTAT)
		snprintf(buf, len, "n/a");
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
	return buf;
}


/*
 * Poll node 1 every POLL_MS until every peer of mask is in state (all =
 * true) or none is (all = false). @return ms since t0, -1 after limit_ms.
 * The interval bounds how late a time measured here can be: it is part of
 * the detection floor's slack.
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
		sleep_ms(POLL_MS);
	}
}

/* Is `ramsterctl drain` in this build? @return true if its help lists it. */
static bool have_drain(void)
{
	return sh("'%s/ramsterctl' --help | grep -qw drain", run.bin) == 0;
}

/*
 * Start `ramsterctl --socket NODE'S-SOCKET cmd`, its output appended to the
 * run's log, and do not wait: whether the drain command answers at once or
 * only when done, the drill watches the progress meanwhile. Everything the
 * child needs is prepared before the fork: the client thread runs, and only
 * async-signal-safe calls are safe in the child. @return the pid, or -1.
 */
static pid_t ctl_start(unsigned node, const char *cmd)
{
	char exe[4200], sock[128], log[128];
	char *argv[] = {exe, (char *)"--socket", sock, (char *)cmd, NULL};
	sigset_t none;
	pid_t pid;
	int fd;

	snprintf(exe, sizeof(exe), "%s/ramsterctl", run.bin);
	sock_path(sock, sizeof(sock), node);
	snprintf(log, sizeof(log), "%s/drill.log", run.dir);
	sigemptyset(&none);
	pid = fork();
	if (pid != 0)
		return pid;
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0600);
	if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
		_exit(126);
	execv(exe, argv);
	_exit(127);
}

/*
 * The drain: n2 refuses new foreign pages and hands those it holds to the
 * other peers, while the client keeps reading and writing (its new pages must
 * not land on n2). Done when ramsterctl succeeded, n2 says it drains and it
 * has no foreign page left; progress every 500 ms.
 */
static void drain(struct result *res)
{
	double t0 = now_ms(), next = t0;
	pid_t ctl = ctl_start(2, "drain");
	uint64_t left = NOSTAT, active = NOSTAT;
	char b1[24], b2[24], b3[24];
	int st;

	res->drain_rc = -1;
	if (ctl < 0) {
		note("cannot start ramsterctl: %s", strerror(errno));
		res->drain_ms = -1;
		return;
	}
	note("n2: ramsterctl drain (the client keeps going)");
	for (;;) {
		if (ctl > 0 && waitpid(ctl, &st, WNOHANG) == ctl) {
			res->drain_rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			ctl = 0;
			if (res->drain_rc) {
				note("'ramsterctl drain' on n2 exited %d (see %s/drill.log)",
				     res->drain_rc, run.dir);
				break;
			}
		}
		left = node_stat(2, "drain_pages_left");
		active = node_stat(2, "drain_active");
		/* 0 left means drained only once n2 took the command: before, it is
		 * the counter of a node that is not draining */
		if (ctl == 0 && active == 1 && left == 0) {
			res->drain_done = true;
			break;
		}
		if (now_ms() >= next && active == 1) {
			note("  %5.1f s: n2 drain_pages_left %s (returned %s, failed %s)",
			     (now_ms() - t0) / 1e3, stat_str(b1, sizeof(b1), left),
			     stat_str(b2, sizeof(b2), node_stat(2, "drain_returned")),
			     stat_str(b3, sizeof(b3), node_stat(2, "drain_failed")));
			next += 500;
		}
		if (now_ms() - t0 > DRAIN_MS) {
			note("n2 not drained after %u s: drain_pages_left %s, drain_active %s",
			     DRAIN_MS / 1000, stat_str(b1, sizeof(b1), left),
			     stat_str(b2, sizeof(b2), active));
			break;
		}
		sleep_ms(STAT_POLL_MS);
	}
	res->drain_ms = now_ms() - t0;
	if (ctl > 0) {
		kill(ctl, SIGKILL);
		waitpid(ctl, NULL, 0);
	}
	res->drain_cmd_ok = res->drain_rc == 0;
	res->drain_returned = node_stat(2, "drain_returned");
	res->drain_failed = node_stat(2, "drain_failed");
	res->drain_orphans = node_stat(2, "drain_orphans");
	res->drain_foreign = node_stat(2, "foreign_pages");
	if (res->drain_done)
		note("n2 drained in %.0f ms: %s pages handed over, %s failed, foreign_pages %s",
		     res->drain_ms, stat_str(b1, sizeof(b1), res->drain_returned),
		     stat_str(b2, sizeof(b2), res->drain_failed),
		     stat_str(b3, sizeof(b3), res->drain_foreign));
}

/*
 * Watches n1's replica_below_target every STAT_POLL_MS from the fault on, in
 * its own thread so that the times the drill measures meanwhile (dead,
 * rejoin) are not coarsened by it. Armed once n1 knows the victims' copies
 * are gone (declared dead, or back as a new incarnation): the first 0 from
 * then on is the restore. A 0 before that is only n1 not knowing yet.
 */
static struct {
	pthread_t th;
	atomic_bool stop, armed, restored, started;
	_Atomic double restored_at;  /* now_ms() of that first 0 */
	_Atomic uint64_t peak, last; /* peak: since armed */
} rw;

static void *restore_thread(void *arg)
{
	while (!atomic_load(&rw.stop)) {
		bool armed = atomic_load(&rw.armed);
		uint64_t v = node_stat(1, "replica_below_target");

		atomic_store(&rw.last, v);
		if (armed && v != NOSTAT) {
			if (v > atomic_load(&rw.peak) || atomic_load(&rw.peak) == NOSTAT)
				atomic_store(&rw.peak, v);
			if (v == 0 && !atomic_load(&rw.restored)) {
				atomic_store(&rw.restored_at, now_ms());
				atomic_store(&rw.restored, true);
			}
		}
		sleep_ms(STAT_POLL_MS);
	}
	return arg;
}

static void restore_watch_start(void)
{
	atomic_store(&rw.peak, NOSTAT);
	atomic_store(&rw.last, NOSTAT);
	if (pthread_create(&rw.th, NULL, restore_thread, NULL))
		die("pthread_create failed");
	atomic_store(&rw.started, true);
}

/*
 * Wait for the restore once the fault is over: at most RESTORE_MS, and only
 * when enough peers live to hold every copy; else it cannot come.
 */
static void restore_wait(const struct result *res)
{
	double t0 = now_ms(), next = t0 + 5000;
	struct progress pg;
	uint64_t peak = 0;
	char b[24];

	if (res->live_after < o.replicas) {
		note("n1 cannot restore %u copies: %u live peer(s) (replica_below_target %s)",
		     o.replicas, res->live_after,
		     stat_str(b, sizeof(b), node_stat(1, "replica_below_target")));
		return;
	}
	/* re-replication's progress on stderr: the copies still missing going down */
	progress_start(&pg, stderr, "drill: re-replication", 0);
	if (o.json)
		pg.mode = 0; /* the report is the only output */
	while (!atomic_load(&rw.restored) && now_ms() - t0 < RESTORE_MS) {
		uint64_t last = atomic_load(&rw.last);

		if (last != NOSTAT && last > peak)
			pg.total = peak = last;
		if (last != NOSTAT && peak)
			progress_set(&pg, peak - last, "copies re-made, %llu below target",
				     (unsigned long long)last);
		if (now_ms() >= next && !progress_tty(&pg)) {
			note("  %4.0f s: n1 replica_below_target %s", (now_ms() - t0) / 1e3,
			     stat_str(b, sizeof(b), last));
			next += 5000;
		}
		sleep_ms(STAT_POLL_MS);
	}
	if (pg.drawn)
		progress_end(&pg, peak, "copies re-made%s",
			     atomic_load(&rw.restored) ? "" : " (not all: timed out)");
}

static ramster *cl_r1; /* n1's connection for the drill's queries */

/*
 * How far n1's wall clock is from ours, hours, read from the time stamp of
 * its last log line (NAN if none): the proof that a clock step took.
 */
static double n1_clock_offset_h(void)
{
	char line[512];
	struct tm tm = {0};

	node_last_log(1, line, sizeof(line));
	if (!strptime(line, "%Y-%m-%d %H:%M:%S", &tm))
		return NAN;
	tm.tm_isdst = -1;
	return difftime(mktime(&tm), time(NULL)) / 3600.0;
}

/* Set n1's wall clock to the real one plus off (libfaketime: "+2h", "-2h", "+0"). */
static void clock_step(struct result *res, const char *off)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/faketime.rc", run.dir);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%s\n", off) < 0 || fclose(f))
		die("%s: %s", path, strerror(errno));
	note("n1's wall clock stepped to real %s", off);
}

/*
 * One NBD client zeroes the whole export of n1 with pipelined WRITE_ZEROES
 * (NO_HOLE) of 2 GiB each (an NBD length is 32 bits): n1 handles each in one
 * go on its loop. @return its exit
 * status (0: done), the time it took in *ms.
 */
static int stall_request(double *ms)
{
	char cmd[1024];
	double t = now_ms();
	int rc;

	snprintf(cmd, sizeof(cmd),
		 NBD_PYTHON " -c 'import nbd\n"
		 "h = nbd.NBD(); h.set_export_name(\"stall\"); h.connect_unix(\"%s/n1.nbd\")\n"
		 "G = 1 << 30\n"
		 "c = [h.aio_zero(2 * G, i * 2 * G, flags=nbd.CMD_FLAG_NO_HOLE) for i in range(%u)]\n"
		 "while h.aio_in_flight() > 0: h.poll(-1)\n"
		 "[h.aio_command_completed(x) for x in c]\n"
		 "h.shutdown()'",
		 run.dir, STALL_GB / 2);
	rc = sh("%s", cmd);
	*ms = now_ms() - t;
	return rc;
}

static void fault(struct result *res, ramster *r1)
{
	unsigned i;
	double t0, tk, rejoined_at = 0;
	double hold = hold_ms();
	bool back = o.drill == D_STOP || o.drill == D_PARTITION || o.drill == D_RESTART ||
		    o.drill == D_CLOCK;
	unsigned watch = res->victims; /* whose state n1 is asked about */
	ramster *rw2 = NULL;

	if (o.replicas >= 2)
		restore_watch_start();
	t0 = now_ms();
	switch (o.drill) {
	case D_KILL:
	case D_RESTART:
	case D_KILL_TWO:
		for (i = 2; i <= o.nodes; i++)
			if (res->victims & (1u << i))
				kill(run.pid[i], SIGKILL);
		break;
	case D_STALL:
		/* n1's loop busy with one request: no fault to detect, only its end */
		atomic_store(&cl.pause_writes, false);
		res->stall_rc = stall_request(&res->hold_ms);
		note("%u GiB of pipelined WRITE_ZEROES took %.0f ms (exit %d); n1's longest loop batch %s us",
		     STALL_GB, res->hold_ms, res->stall_rc,
		     stat_str(res->stall_lag, sizeof(res->stall_lag),
			      node_stat(1, "loop_lag_max_us")));
		note("n2 declared peers unreachable %llu times; n1 put off %llu dead checks "
		     "after its own stall, declared %llu",
		     (unsigned long long)node_stat(2, "cluster_peer_deaths"),
		     (unsigned long long)node_stat(1, "cluster_dead_checks_deferred"),
		     (unsigned long long)node_stat(1, "cluster_peer_deaths"));
		res->detect_ms = res->dead_ms = -1;
		{
			unsigned all = 0;
			double t1 = now_ms(), d;

			for (i = 2; i <= o.nodes; i++)
				all |= 1u << i;
			d = wait_peers(r1, all, "up", true, t1, 120000);
			res->rejoined = d >= 0;
			res->rejoin_ms = d;
		}
		atomic_store(&rw.armed, true);
		atomic_store(&cl.phase, PH_AFTER);
		goto after;
	case D_CLOCK:
		/* n1's wall clock two hours ahead, then (after 1 s) two hours behind
		 * the real one: then n2 stops; n1 must see it as on any day */
		clock_step(res, "+2h");
		sleep_ms(1000);
		clock_step(res, "-2h");
		sleep_ms(1000);
		t0 = now_ms();
		kill(run.pid[2], SIGSTOP);
		break;
	case D_STOP:
		kill(run.pid[2], SIGSTOP);
		break;
	case D_OWNER_STOP:
	case D_OWNER_PARTITION:
		/* the holders see the owner go: ask n2 */
		rw2 = node_open(2);
		if (!rw2)
			die("cannot connect to n2: %s", strerror(errno));
		if (o.drill == D_OWNER_STOP)
			kill(run.pid[1], SIGSTOP);
		else if (net_link(1, false))
			note("warning: cutting n1's link failed");
		break;
	case D_PARTITION:
		if (net_link(2, false))
			note("warning: cutting n2's link failed");
		break;
	case D_DRAIN:
		atomic_store(&cl.pause_writes, false);
		drain(res);
		/* even a failed drain ends in the kill: what it left behind is then lost */
		kill(run.pid[2], SIGKILL);
		break;
	}
	/* the detection runs from the kill; for a drain that is after it */
	tk = o.drill == D_DRAIN ? now_ms() : t0;
	atomic_store(&cl.pause_writes, false);
	if (rw2) {
		r1 = rw2;
		watch = 1u << 1;
	}
	res->detect_ms = wait_peers(r1, watch, "up", false, tk, 120000);
	note("fault injected; node n%s saw it after %.0f ms", rw2 ? "2" : "1", res->detect_ms);
	if (o.drill != D_RESTART) {
		res->dead_ms = wait_peers(r1, watch, "unreachable", true, tk, 120000);
		note("node n%s declared it unreachable after %.0f ms", rw2 ? "2" : "1",
		     res->dead_ms);
		if (o.drill == D_CLOCK) {
			/* n1 logged that with its wall clock two hours behind */
			res->clock_h = n1_clock_offset_h();
			note("n1's log says its wall clock is %+.2f h from the real one",
			     res->clock_h);
		}
		atomic_store(&rw.armed, true);
		atomic_store(&cl.phase, PH_AFTER);
	}
	for (i = 2; i <= o.nodes; i++)
		if (res->victims & (1u << i) && !drill_pause())
			waitpid(run.pid[i], NULL, 0), run.pid[i] = 0;

	switch (o.drill) {
	case D_STOP:
	case D_PARTITION:
	case D_CLOCK:
	case D_OWNER_STOP:
	case D_OWNER_PARTITION:
		while (now_ms() - t0 < hold)
			sleep_ms(10);
		res->hold_ms = now_ms() - t0;
		if (o.drill == D_STOP || o.drill == D_CLOCK)
			kill(run.pid[2], SIGCONT);
		else if (o.drill == D_PARTITION)
			net_link(2, true);
		else if (o.drill == D_OWNER_STOP)
			kill(run.pid[1], SIGCONT);
		else
			net_link(1, true);
		if (rw2) {
			/* n1 is the one that comes back: its view of every peer */
			ramster_close(rw2);
			rw2 = NULL;
			r1 = cl_r1;
			watch = 0;
			for (i = 2; i <= o.nodes; i++)
				watch |= 1u << i;
		}
		break;
	case D_RESTART:
		node_start(2);
		break;
	default:
		break;
	}
	if (back || drill_owner()) {
		double t1 = now_ms(), d = wait_peers(r1, watch, "up", true, t1, 120000);

		res->rejoined = d >= 0;
		res->rejoin_ms = d;
		rejoined_at = now_ms();
		note("n%s %s after %.0f ms", drill_owner() ? "1" : "2",
		     o.drill == D_RESTART ? "restarted and rejoined" : "back and rejoined", d);
		if (o.drill == D_CLOCK) {
			clock_step(res, "+0");
			sleep_ms(1000);
		}
		/* a restart is known by the new incarnation's hello: n1 drops the old
		 * copies as it lets the new one up */
		atomic_store(&rw.armed, true);
		atomic_store(&cl.phase, PH_AFTER);
	}
after:
	/* a victim that should be back and is not leaves too few peers: no wait */
	if (o.replicas >= 2 && (!back || res->rejoined)) {
		restore_wait(res);
		res->restored = atomic_load(&rw.restored);
		if (res->restored) {
			double at = atomic_load(&rw.restored_at);

			res->restore_ms = at - t0;
			res->restore_rejoin_ms = back && at >= rejoined_at ? at - rejoined_at : -1;
			note("n1 has every copy back %.0f ms after the fault", res->restore_ms);
		}
	}
	sleep_ms(2000); /* two more seconds of client traffic after the fault */
	if (atomic_load(&rw.started)) {
		atomic_store(&rw.stop, true);
		pthread_join(rw.th, NULL);
		res->below_peak = atomic_load(&rw.peak);
		res->below_end = atomic_load(&rw.last);
	}
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

/* A figure that may be absent (NOSTAT): null then. */
static void jout_stat(struct jout *j, uint64_t v, const char *key)
{
	if (v == NOSTAT)
		jout_null(j, "%s", key);
	else
		jout_uint(j, v, "%s", key);
}

/* A time that may be unmeasured (< 0 or !have): null then. */
static void jout_ms(struct jout *j, bool have, double ms, bool whole, const char *key)
{
	if (!have || ms < 0)
		jout_null(j, "%s", key);
	else if (whole)
		jout_round(j, ms, "%s", key);
	else
		jout_real(j, ms, "%s", key);
}

/* The report as one JSON object on one line (jansson); tests parse it. */
static void report_json(const struct result *res, bool pass, const char *why)
{
	const struct tally *t = &res->t;
	struct jout *j = jout_new();

	jout_str(j, drill_names[o.drill], "drill");
	jout_uint(j, o.nodes, "nodes");
	jout_uint(j, res->nvictims, "victims");
	jout_uint(j, o.replicas, "replicas");
	jout_uint(j, o.dead_after_ms, "dead_after_ms");
	jout_uint(j, o.heartbeat_ms, "heartbeat_ms");
	jout_uint(j, o.local_mb, "local_mb");
	jout_uint(j, t->written, "written");
	jout_uint(j, t->verified, "verified");
	jout_uint(j, t->lost, "lost");
	jout_uint(j, t->missed, "missed");
	jout_uint(j, fault_misses(t), "missed_new");
	jout_uint(j, t->missed_before, "missed_before_fault");
	jout_uint(j, t->evicted, "evicted");
	jout_uint(j, t->wrong, "wrong");
	jout_uint(j, t->errors, "errors");
	jout_uint(j, res->expected_lost, "victim_foreign_pages");
	jout_ms(j, true, res->detect_ms, false, "detect_ms");
	jout_ms(j, true, res->dead_ms, false, "dead_ms");
	jout_round(j, res->floor_ms, "detect_floor_ms");
	jout_bool(j, res->floor_met, "detect_floor_met");
	jout_ms(j, res->restored, res->restore_ms, true, "restore_ms");
	jout_ms(j, res->restored, res->restore_rejoin_ms, true, "restore_after_rejoin_ms");
	jout_stat(j, res->below_peak, "replica_below_target_peak");
	jout_stat(j, res->below_end, "replica_below_target_end");
	jout_stat(j, delta(res->rerep, res->rerep0), "rereplicated");
	jout_stat(j, delta(res->rlost, res->rlost0), "replica_lost");
	jout_ms(j, res->drain_done, res->drain_ms, true, "drain_ms");
	jout_stat(j, res->drain_returned, "drain_returned");
	jout_stat(j, res->drain_failed, "drain_failed");
	jout_ms(j, res->rejoined, res->rejoin_ms, true, "rejoin_ms");
	jout_real(j, res->st_p50, "steady_get_p50_us");
	jout_real(j, res->st_p99, "steady_get_p99_us");
	jout_real(j, res->dt_p50, "detect_get_p50_us");
	jout_real(j, res->dt_p99, "detect_get_p99_us");
	jout_uint(j, res->dt_gets, "detect_gets");
	jout_real(j, res->af_p50, "after_get_p50_us");
	jout_real(j, res->af_p99, "after_get_p99_us");
	jout_uint(j, res->af_gets, "after_gets");
	if (!res->lat_checked || !res->lat_judged)
		jout_null(j, "latency_floor");
	else
		jout_bool(j, res->lat_met, "latency_floor");
	jout_real(j, res->dr_p50, "drill_get_p50_us");
	jout_real(j, res->dr_p99, "drill_get_p99_us");
	jout_real(j, res->dr_max, "drill_get_max_us");
	jout_uint(j, res->dr_gets, "drill_gets");
	jout_uint(j, res->eio_drill, "drill_get_eio");
	jout_real(j, res->put_p99[PH_AFTER], "after_put_p99_us");
	jout_real(j, res->put_max[PH_AFTER], "after_put_max_us");
	jout_uint(j, res->mem_remote, "remote_pages");
	jout_uint(j, res->mem_peer_pages, "peer_copies");
	jout_uint(j, res->mem_peer_used, "peer_bytes");
	jout_uint(j, res->mem_records, "replica_records");
	jout_uint(j, res->mem_table, "replica_table_bytes");
	jout_uint(j, cl.puts, "client_puts");
	jout_bool(j, pass, "pass");
	jout_str(j, why, "reason");
	jout_print(j);
}

static void report(const struct result *res, bool pass, const char *why)
{
	const struct tally *t = &res->t;
	uint64_t missed_new = fault_misses(t);
	char rejoin[32] = "n/a", b[4][24];
	bool dies = o.drill != D_RESTART; /* n1 declares the victims dead */
	static const char *const phase_names[] = {"steady", "detect", "after"};
	unsigned k;

	if (o.json) {
		report_json(res, pass, why);
		return;
	}
	if (res->rejoined)
		snprintf(rejoin, sizeof(rejoin), "%.0f", res->rejoin_ms);
	printf("\n== drill %s: %u nodes, victim%s", drill_names[o.drill], o.nodes,
	       res->nvictims > 1 ? "s" : "");
	for (unsigned i = 2; i <= o.nodes; i++)
		if (res->victims & (1u << i))
			printf(" n%u", i);
	printf(", replicas %u, heartbeat %u ms, dead after %u ms\n", o.replicas, o.heartbeat_ms,
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
	if (res->mem_remote && res->mem_remote != NOSTAT && res->mem_peer_pages)
		printf("copies               %llu held by the peers for n1's %llu remote pages "
		       "(%.2f a page); peer RAM %.0f bytes a copy, %.0f a remote page; n1's "
		       "replica table %llu records, %llu bytes\n",
		       (unsigned long long)res->mem_peer_pages, (unsigned long long)res->mem_remote,
		       (double)res->mem_peer_pages / (double)res->mem_remote,
		       (double)res->mem_peer_used / (double)res->mem_peer_pages,
		       (double)res->mem_peer_used / (double)res->mem_remote,
		       (unsigned long long)res->mem_records, (unsigned long long)res->mem_table);
	printf("%s%llu pages for n1 (foreign_pages %s; n1 saw %llu lent)\n",
	       res->nvictims > 1 ? "victims held         " : "victim held          ",
	       (unsigned long long)res->expected_lost,
	       o.drill == D_DRAIN ? "as the drain began" : "before the fault",
	       (unsigned long long)res->lent);
	switch (res->expect) {
	case EX_EXACT:
		printf("lost + new misses    %llu (expected %llu: replicas 1, the victim's pages)\n",
		       (unsigned long long)(t->lost + missed_new),
		       (unsigned long long)res->expected_lost);
		break;
	case EX_BOUNDED:
		printf("lost + new misses    %llu (at most %llu: pages with every copy on a "
		       "victim)\n",
		       (unsigned long long)(t->lost + missed_new),
		       (unsigned long long)res->expected_lost);
		break;
	case EX_REPLICATED:
		printf("lost + new misses    %llu persistent lost (expected 0), %llu new ephemeral "
		       "misses (at most %llu: ephemeral pages keep one copy)\n",
		       (unsigned long long)t->lost, (unsigned long long)missed_new,
		       (unsigned long long)res->expected_lost);
		break;
	case EX_DRAINED:
		printf("lost + new misses    %llu (expected 0: the drain handed every page over)\n",
		       (unsigned long long)(t->lost + missed_new));
		break;
	case EX_NONE:
		printf("lost + new misses    %llu (expected 0: a %.0f ms %s, orphan_after_ms is "
		       "minutes)\n",
		       (unsigned long long)(t->lost + missed_new), res->hold_ms,
		       o.drill == D_PARTITION || o.drill == D_OWNER_PARTITION ? "partition"
									     : "pause");
		printf("gets -EIO            %llu during the drill (expected 0: request_timeout_ms "
		       "%.0f is above the pause)\n",
		       (unsigned long long)res->eio_drill, hold_ms() + 3000);
		if (o.drill == D_STALL)
			printf("loop stall           %u GiB of WRITE_ZEROES took %.0f ms; n1's "
			       "loop_lag_max_us %s\n",
			       STALL_GB, res->hold_ms, res->stall_lag);
		if (o.drill == D_CLOCK) {
			char d[24];

			printf("peers declared       %s by n1 through two clock steps and n2's stop "
			       "(expected 1)\n",
			       stat_str(d, sizeof(d), delta(res->deaths, res->deaths0)));
		}
		break;
	}
	if (o.drill == D_DRAIN) {
		if (res->drain_done)
			printf("drain                %.0f ms (%s pages handed over, %s dropped as "
			       "unwanted, %s failed; n2 foreign_pages %s at the kill)\n",
			       res->drain_ms, stat_str(b[0], sizeof(b[0]), res->drain_returned),
			       stat_str(b[3], sizeof(b[3]), res->drain_orphans),
			       stat_str(b[1], sizeof(b[1]), res->drain_failed),
			       stat_str(b[2], sizeof(b[2]), res->drain_foreign));
		else
			printf("drain                not done after %.0f ms (ramsterctl exit %d; n2 "
			       "foreign_pages %s at the kill)\n",
			       res->drain_ms, res->drain_rc,
			       stat_str(b[2], sizeof(b[2]), res->drain_foreign));
	}
	printf("time to detect       %.0f ms (n1's peers shows %s not up%s)\n", res->detect_ms,
	       res->nvictims > 1 ? "them" : "n2", o.drill == D_DRAIN ? "; from the kill" : "");
	if (dies)
		printf("time to dead         %.0f ms (n1 declared %s dead: %s)\n", res->dead_ms,
		       res->nvictims > 1 ? "them" : "it",
		       o.drill == D_DRAIN		? "it held nothing any more"
		       : o.replicas > res->nvictims ? "other copies serve"
						    : drill_pause() ? "unreachable: its pages kept"
						    : "pages with no other copy are lost");
	printf("detection floor      %s %.0f ms <= %.0f ms: %s (dead_after %u + 2 x heartbeat %u "
	       "+ %u slack: %u ms polls, %u ms scheduling)\n",
	       dies ? "time to dead" : "time to detect", res->floor_seen, res->floor_ms,
	       res->floor_met ? "met" : "MISSED", o.dead_after_ms, o.heartbeat_ms,
	       POLL_MS + SCHED_SLACK, POLL_MS, SCHED_SLACK);
	if (!res->floor_met && o.det_report)
		printf("                     (reported only: --detection-floor report)\n");
	if (res->hold_ms > 0)
		printf("fault held           %.0f ms\n", res->hold_ms);
	printf("time to rejoin       %s%s\n", rejoin, res->rejoined ? " ms" : "");
	if (o.replicas < 2) {
		printf("time to restore      n/a (replicas = 1: nothing to restore)\n");
	} else if (res->restored) {
		printf("time to restore      %.0f ms after the fault", res->restore_ms);
		if (res->rejoined && res->restore_rejoin_ms >= 0)
			printf(" (%.0f ms after the rejoin)", res->restore_rejoin_ms);
		else if (res->rejoined)
			printf(" (before the rejoin: on the other peers)");
		printf("\n");
	} else if (res->live_after < o.replicas) {
		printf("time to restore      n/a (%u live peer%s cannot hold %u copies)\n",
		       res->live_after, res->live_after == 1 ? "" : "s", o.replicas);
	} else {
		printf("time to restore      never (not within %u s)\n", RESTORE_MS / 1000);
	}
	if (o.replicas >= 2)
		printf("replicas             below target: %s at the fault, %s at the peak, %s at "
		       "the end\n",
		       stat_str(b[0], sizeof(b[0]), res->below_at_fault),
		       stat_str(b[1], sizeof(b[1]), res->below_peak),
		       stat_str(b[2], sizeof(b[2]), res->below_end));
	printf("re-replicated        %s copies (replica_rereplicated), %s pages lost for good "
	       "(replica_lost), %s failed attempts (replica_repair_failed)\n",
	       stat_str(b[0], sizeof(b[0]), delta(res->rerep, res->rerep0)),
	       stat_str(b[1], sizeof(b[1]), delta(res->rlost, res->rlost0)),
	       stat_str(b[2], sizeof(b[2]), delta(res->rfail, res->rfail0)));
	printf("get latency steady   p50 %.0f us, p99 %.0f us\n", res->st_p50, res->st_p99);
	printf("get latency detect   p50 %.0f us, p99 %.0f us, max %.0f us (%llu gets, %llu "
	       "answered -EIO; fault to %s)\n",
	       res->dt_p50, res->dt_p99, res->dt_max, (unsigned long long)res->dt_gets,
	       (unsigned long long)cl.get_lost[PH_DETECT], dies ? "dead" : "rejoin");
	printf("get latency after    p50 %.0f us, p99 %.0f us, max %.0f us (%llu gets, %llu "
	       "answered -EIO)\n",
	       res->af_p50, res->af_p99, res->af_max, (unsigned long long)res->af_gets,
	       (unsigned long long)cl.get_lost[PH_AFTER]);
	for (k = 0; k < PH_DONE; k++)
		printf("put latency %-8s p50 %.0f us, p99 %.0f us, max %.0f us (%zu puts, %llu "
		       "refused)\n",
		       phase_names[k], res->put_p50[k], res->put_p99[k], res->put_max[k],
		       cl.put_lat[k].n, (unsigned long long)cl.put_refused[k]);
	if (res->lat_checked && !res->lat_judged)
		printf("WARN                 latency floor not judged: %llu gets after the "
		       "detection, fewer than %u (the client waited in puts: p50 %.0f us)\n",
		       (unsigned long long)res->af_gets, LAT_MIN_GETS, res->put_p50[PH_AFTER]);
	else if (res->lat_checked)
		printf("latency floor        after p99 %.0f us vs steady p99 %.0f us: %s%s\n",
		       res->af_p99, res->st_p99, res->lat_met ? res->lat_rule : "MISSED",
		       !res->lat_met && o.lat_report ? " (reported only: --latency-floor report)"
						     : "");
	else
		printf("latency floor        n/a (checked with replicas >= 2 and one victim)\n");
	printf("result               %s%s%s\n", pass ? "PASS" : "FAIL", why[0] ? ": " : "", why);
}

/* Append one reason to why. */
static void add_why(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_why(char *why, size_t len, const char *fmt, ...)
{
	size_t n = strlen(why);
	va_list ap;

	if (n && n + 2 < len)
		n += (size_t)snprintf(why + n, len - n, "; ");
	if (n >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(why + n, len - n, fmt, ap);
	va_end(ap);
}

/* Wait until n1 has every page at its replica count before the fault (at most 20 s). */
static uint64_t replicas_settle(void)
{
	double t0 = now_ms();
	uint64_t v;

	while ((v = node_stat(1, "replica_below_target")) != 0 && v != NOSTAT &&
	       now_ms() - t0 < 20000)
		sleep_ms(STAT_POLL_MS);
	return v;
}

static bool judge(const struct result *res, char *why, size_t len)
{
	const struct tally *t = &res->t;
	uint64_t missed_new = fault_misses(t), measured = t->lost + missed_new;
	uint64_t rlost = delta(res->rlost, res->rlost0);
	bool zero = res->expect == EX_REPLICATED || res->expect == EX_DRAINED ||
		    res->expect == EX_NONE;
	char b[24];

	why[0] = 0;
	if (t->wrong)
		add_why(why, len, "%llu wrong page(s)", (unsigned long long)t->wrong);
	if (t->errors)
		add_why(why, len, "%llu unexpected error(s)", (unsigned long long)t->errors);
	switch (res->expect) {
	case EX_EXACT:
		if (measured != res->expected_lost)
			add_why(why, len, "lost %llu, expected %llu (the victim's pages)",
				(unsigned long long)measured,
				(unsigned long long)res->expected_lost);
		break;
	case EX_BOUNDED:
		if (measured > res->expected_lost)
			add_why(why, len, "lost %llu, more than the victims held (%llu)",
				(unsigned long long)measured,
				(unsigned long long)res->expected_lost);
		/* which pages had every copy on a victim only n1 knows: its count
		 * of them must be what the reads found */
		if (rlost != NOSTAT && rlost != t->lost)
			add_why(why, len, "read %llu persistent page(s) lost, n1 counted %llu "
				"(replica_lost)",
				(unsigned long long)t->lost, (unsigned long long)rlost);
		break;
	case EX_REPLICATED:
		if (t->lost)
			add_why(why, len, "%llu persistent page(s) lost with %u replicas",
				(unsigned long long)t->lost, o.replicas);
		if (missed_new > res->expected_lost)
			add_why(why, len, "%llu new ephemeral misses, more than the victim held (%llu)",
				(unsigned long long)missed_new,
				(unsigned long long)res->expected_lost);
		break;
	case EX_DRAINED:
		if (measured)
			add_why(why, len, "lost %llu after the drain, expected 0",
				(unsigned long long)measured);
		break;
	case EX_NONE:
		if (measured)
			add_why(why, len, "lost %llu through a %.0f ms %s, expected 0",
				(unsigned long long)measured, res->hold_ms,
				o.drill == D_PARTITION || o.drill == D_OWNER_PARTITION ? "partition"
											: "pause");
		break;
	}
	/* a clock step is no silence: n1 saw exactly one peer go (n2's stop) */
	if (o.drill == D_CLOCK && !(res->clock_h < -1.9 && res->clock_h > -2.1))
		add_why(why, len, "n1's clock was not stepped (its log: %+.2f h): nothing tested",
			res->clock_h);
	if (o.drill == D_CLOCK && delta(res->deaths, res->deaths0) != 1)
		add_why(why, len, "n1 declared %s peers unreachable, expected 1 (n2's stop)",
			stat_str(b, sizeof(b), delta(res->deaths, res->deaths0)));
	if (zero && res->eio_drill)
		add_why(why, len, "the client's gets got %llu -EIO", (unsigned long long)res->eio_drill);
	if (zero && rlost != NOSTAT && rlost)
		add_why(why, len, "n1 counted %llu page(s) lost (replica_lost)",
			(unsigned long long)rlost);
	if (o.drill == D_STALL) {
		if (res->stall_rc)
			add_why(why, len, "the NBD client failed (exit %d)", res->stall_rc);
	} else if (res->detect_ms < 0)
		add_why(why, len, "node n1 never saw the fault");
	else if (o.drill != D_RESTART && res->dead_ms < 0)
		add_why(why, len, "node n1 never declared the victim dead");
	/* enforced unless --detection-floor report: n1 declares a peer dead at
	 * most dead_after_ms after its last frame, which came before the fault;
	 * measured at 916..1014 ms against 1250 ms, also with two CPU hogs on the
	 * 2-vCPU VM, but once 1278 ms in the suite on a loaded machine */
	if (res->floor_seen >= 0 && !res->floor_met && !o.det_report)
		add_why(why, len, "detection took %.0f ms, above the floor of %.0f ms",
			res->floor_seen, res->floor_ms);
	if ((drill_pause() || o.drill == D_RESTART) && !res->rejoined)
		add_why(why, len, "the victim never rejoined");
	if (o.drill == D_DRAIN) {
		if (!res->drain_cmd_ok)
			add_why(why, len, "'ramsterctl drain' failed (exit %d)", res->drain_rc);
		else if (!res->drain_done)
			add_why(why, len, "n2 not drained within %u s", DRAIN_MS / 1000);
		if (res->drain_foreign != 0)
			add_why(why, len, "n2 still held %s foreign page(s) at the kill",
				stat_str(b, sizeof(b), res->drain_foreign));
	}
	if (o.replicas > res->nvictims && res->live_after >= o.replicas && !res->restored)
		add_why(why, len,
			"n1 did not restore %u copies within %u s (replica_below_target %s)",
			o.replicas, RESTORE_MS / 1000, stat_str(b, sizeof(b), res->below_end));
	if (res->lat_checked && res->lat_judged && !res->lat_met && !o.lat_report)
		add_why(why, len, "gets after the detection: p99 %.0f us > %d x steady p99 %.0f us and "
			"> %u us",
			res->af_p99, LAT_FACTOR, res->st_p99, LAT_ALLOW_US);
	if (why[0])
		return false;
	snprintf(why, len, "%s",
		 res->expect == EX_EXACT     ? "lost exactly the victim's pages, nothing wrong"
		 : res->expect == EX_BOUNDED ? "lost at most the victims' pages, nothing wrong"
		 : res->expect == EX_DRAINED ? "drained: nothing lost, nothing wrong"
		 : res->expect == EX_NONE    ? "a pause is not a death: nothing lost, no -EIO, nothing wrong"
					     : "no persistent page lost, no -EIO, nothing wrong");
	return true;
}

static int drill_run(void)
{
	struct result res = {0};
	uint64_t n = o.pages, ne = n / 8, na = (n - ne) / 2, nb = n - ne - na, wrote;
	unsigned i;
	ramster *r, *r1;
	uint64_t ev0, scratch_at_fault, after;
	char why[512] = "";
	double t0;
	bool pass;

	if (o.drill == D_CLOCK) {
		char rc[128];
		FILE *f;

		if (access(FAKETIME_LIB, R_OK)) {
			printf("SKIP: no %s (Debian's libfaketime): n1's wall clock cannot be "
			       "stepped alone\n", FAKETIME_LIB);
			return EXIT_SKIP;
		}
		snprintf(rc, sizeof(rc), "%s/faketime.rc", run.dir);
		f = fopen(rc, "w");
		if (!f || fputs("+0\n", f) < 0 || fclose(f))
			die("%s: %s", rc, strerror(errno));
	}
	if (o.drill == D_STALL && sh(NBD_PYTHON " -c 'import nbd' 2>/dev/null")) {
		printf("SKIP: %s cannot import nbd (Debian's python3-libnbd): no NBD client\n",
		       NBD_PYTHON);
		return EXIT_SKIP;
	}
	write_config(o.replicas);
	net_up();
	collective_up();
	if (o.drill == D_DRAIN && !have_drain()) {
		printf("not supported by this build: ramsterctl has no 'drain' command "
		       "(a node cannot hand its pages to the others before it goes)\n");
		return EXIT_SKIP;
	}
	res.victims = drill_owner() ? 1u << 1 : 1u << 2;
	if (o.drill == D_KILL_TWO)
		res.victims |= 1u << 3;
	res.nvictims = mask_count(res.victims);
	/* what a drill does not measure reads null in JSON, n/a in text */
	res.dead_ms = -1;
	res.below_at_fault = res.below_peak = res.below_end = NOSTAT;
	res.drain_returned = res.drain_failed = res.drain_orphans = res.drain_foreign = NOSTAT;
	/* stop, partition and restart give the victim back; the others take it for good */
	res.live_after = o.nodes - 1;
	if (o.drill == D_KILL || o.drill == D_KILL_TWO || o.drill == D_DRAIN)
		res.live_after -= res.nvictims;
	if (o.drill == D_DRAIN)
		res.expect = EX_DRAINED;
	else if (drill_pause())
		res.expect = EX_NONE;
	else if (o.replicas == 1)
		res.expect = EX_EXACT;
	else if (o.replicas > res.nvictims)
		res.expect = EX_REPLICATED;
	else
		res.expect = EX_BOUNDED;

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
	if (o.replicas >= 2) {
		/* a page still short of copies when the fault comes may be lost rightly */
		res.below_at_fault = replicas_settle();
		if (res.below_at_fault == NOSTAT)
			note("warning: n1 has no replica_below_target counter");
		else if (res.below_at_fault)
			note("warning: n1 replica_below_target %llu at the fault",
			     (unsigned long long)res.below_at_fault);
	}
	res.rerep0 = node_stat(1, "replica_rereplicated");
	res.rlost0 = node_stat(1, "replica_lost");
	res.rfail0 = node_stat(1, "replica_repair_failed");
	atomic_store(&cl.phase, PH_DETECT);
	for (i = 2; i <= o.nodes; i++)
		if (res.victims & (1u << i))
			res.expected_lost += node_stat(i, "foreign_pages");
	res.mem_remote = node_stat(1, "tier_remote_pages");
	res.mem_records = node_stat(1, "tier_replica_records");
	res.mem_table = node_stat(1, "tier_replica_bytes");
	for (i = 2; i <= o.nodes; i++) {
		res.mem_peer_pages += node_stat(i, "foreign_pages");
		res.mem_peer_used += node_stat(i, "foreign_used");
	}
	peers_in(r1, res.victims, "up", &res.lent);
	res.deaths0 = node_stat(1, "cluster_peer_deaths");
	cl_r1 = r1;
	fault(&res, r1);
	res.deaths = node_stat(1, "cluster_peer_deaths"); /* resumes the client's writes once the fault is in */
	atomic_store(&cl.phase, PH_DONE);
	pthread_join(cl.th, NULL);
	res.rerep = node_stat(1, "replica_rereplicated");
	res.rlost = node_stat(1, "replica_lost");
	res.rfail = node_stat(1, "replica_repair_failed");

	res.st_p50 = lat_pct(&cl.lat[PH_STEADY], 50);
	res.st_p99 = lat_pct(&cl.lat[PH_STEADY], 99);
	res.dt_p50 = lat_pct(&cl.lat[PH_DETECT], 50);
	res.dt_p99 = lat_pct(&cl.lat[PH_DETECT], 99);
	res.dt_max = lat_pct(&cl.lat[PH_DETECT], 100);
	res.dt_gets = cl.lat[PH_DETECT].n;
	res.af_p50 = lat_pct(&cl.lat[PH_AFTER], 50);
	res.af_p99 = lat_pct(&cl.lat[PH_AFTER], 99);
	res.af_max = lat_pct(&cl.lat[PH_AFTER], 100);
	res.af_gets = cl.lat[PH_AFTER].n;
	res.dr_p50 = lat_pct2(&cl.lat[PH_DETECT], &cl.lat[PH_AFTER], 50);
	res.dr_p99 = lat_pct2(&cl.lat[PH_DETECT], &cl.lat[PH_AFTER], 99);
	res.dr_max = lat_pct2(&cl.lat[PH_DETECT], &cl.lat[PH_AFTER], 100);
	res.dr_gets = res.dt_gets + res.af_gets;
	res.eio_drill = cl.get_lost[PH_DETECT] + cl.get_lost[PH_AFTER];
	for (i = 0; i < PH_DONE; i++) {
		res.put_p50[i] = lat_pct(&cl.put_lat[i], 50);
		res.put_p99[i] = lat_pct(&cl.put_lat[i], 99);
		res.put_max[i] = lat_pct(&cl.put_lat[i], 100);
	}

	/* the latest n1 may know: the last frame came up to a heartbeat before the
	 * fault, another may be in flight; then dead_after_ms of silence */
	res.floor_ms = o.dead_after_ms + 2.0 * o.heartbeat_ms + POLL_MS + SCHED_SLACK;
	res.floor_seen = o.drill == D_RESTART ? res.detect_ms : res.dead_ms;
	res.floor_met = res.floor_seen >= 0 && res.floor_seen <= res.floor_ms;

	/* with a surviving copy of everything, failover must not cost the client
	 * more than the steady state's noise: both rules allow for a noisy VM */
	res.lat_checked = o.replicas >= 2 && res.nvictims == 1 && o.drill != D_DRAIN;
	res.lat_judged = res.af_gets >= LAT_MIN_GETS;
	if (res.lat_checked && res.lat_judged) {
		if (res.af_p99 <= LAT_FACTOR * res.st_p99) {
			res.lat_met = true;
			snprintf(res.lat_rule, sizeof(res.lat_rule), "met (<= %d x steady p99)",
				 LAT_FACTOR);
		} else if (res.af_p99 <= LAT_ALLOW_US) {
			res.lat_met = true;
			snprintf(res.lat_rule, sizeof(res.lat_rule),
				 "met (<= the %u us allowance; above %d x steady p99)", LAT_ALLOW_US,
				 LAT_FACTOR);
		}
	}

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

	pass = judge(&res, why, sizeof(why));
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
		"Drills: kill, stop, partition, restart (n2 is the victim), drain (n2 drains,\n"
		"then is killed), kill-two (n2 and n3 are killed at once), owner-stop,\n"
		"owner-partition (n1, the owner, is paused or cut off), clock-step (n1's wall\n"
		"clock jumps 2 h ahead, then 2 h behind, then n2 is paused: needs libfaketime).\n"
		"Pauses and partitions last 3 s (or 2 x dead_after_ms), far below orphan_after_ms:\n"
		"they must lose nothing and answer no get -EIO. stall: one NBD WRITE_ZEROES of\n"
		"4 GiB holds n1's loop (needs python3-libnbd); nothing may be lost either.\n"
		"\n"
		"  -d, --drill NAME       the drill to run\n"
		"  -n, --nodes N          nodes in the collective, 2..%d (default 3; kill-two 5)\n"
		"  -r, --replicas N       the cluster's replicas, 1..%d (default 1; kill-two 3);\n"
		"                         needs nodes >= replicas + 1\n"
		"  -m, --local-mb N       node 1's local tier, MiB (default 4)\n"
		"  -p, --pages N          pages written (default: 8x local_mb in pages)\n"
		"      --dead-after-ms N  the cluster's dead_after_ms (default 1000)\n"
		"      --heartbeat-ms N   the cluster's heartbeat_ms (default 100)\n"
		"  -b, --bin DIR          where ramsterd and ramsterctl are (default build/bin)\n"
		"  -k, --keep             leave the namespaces and files for debugging\n"
		"  -j, --json             the report as one JSON object\n"
		"      --latency-floor enforce|report\n"
		"                         fail on a missed get latency floor (default), or\n"
		"                         only report it (sanitizer builds: their slowness\n"
		"                         is not the collective's)\n"
		"      --detection-floor enforce|report\n"
		"                         the same for the detection floor (time to dead)\n"
		"      --cleanup          remove leftovers: namespaces rd-*, /tmp/ramster-drill.*\n"
		"                         (not those of a drill still running)\n"
		"  -h, --help             this help\n",
		NODES_MAX, REPLICAS_MAX);
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
	    {"replicas", required_argument, NULL, 'r'},
	    {"local-mb", required_argument, NULL, 'm'},
	    {"pages", required_argument, NULL, 'p'},
	    {"dead-after-ms", required_argument, NULL, 'D'},
	    {"heartbeat-ms", required_argument, NULL, 'H'},
	    {"bin", required_argument, NULL, 'b'},
	    {"keep", no_argument, NULL, 'k'},
	    {"json", no_argument, NULL, 'j'},
	    {"latency-floor", required_argument, NULL, 'L'},
	    {"detection-floor", required_argument, NULL, 'F'},
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

	while ((c = getopt_long(argc, argv, "d:n:r:m:p:b:kjh", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			drill = optarg;
			break;
		case 'n':
			o.nodes = (unsigned)num("--nodes", optarg, 2, NODES_MAX);
			o.nodes_set = true;
			break;
		case 'r':
			o.replicas = (unsigned)num("--replicas", optarg, 1, REPLICAS_MAX);
			o.replicas_set = true;
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
		case 'L':
			if (!strcmp(optarg, "report"))
				o.lat_report = true;
			else if (strcmp(optarg, "enforce"))
				die("--latency-floor: '%s' is not enforce or report", optarg);
			break;
		case 'F':
			if (!strcmp(optarg, "report"))
				o.det_report = true;
			else if (strcmp(optarg, "enforce"))
				die("--detection-floor: '%s' is not enforce or report", optarg);
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
	/* kill-two loses nothing only with a third copy; five nodes leave it two
	 * live peers after the two deaths */
	if (!o.replicas_set)
		o.replicas = o.drill == D_KILL_TWO ? 3 : 1;
	if (!o.nodes_set && o.drill == D_KILL_TWO)
		o.nodes = 5;
	if (o.nodes < o.replicas + 1)
		die("--nodes %u is too few for --replicas %u: every copy needs its own peer "
		    "besides n1 (use --nodes %u or more)",
		    o.nodes, o.replicas, o.replicas + 1);
	if (o.drill == D_KILL_TWO && o.nodes < 3)
		die("--drill kill-two kills n2 and n3: it needs --nodes 3 or more");
	if (o.drill == D_DRAIN && o.nodes < 3)
		die("--drill drain needs --nodes 3 or more: n2 hands its pages to another peer");
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
