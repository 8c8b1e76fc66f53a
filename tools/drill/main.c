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
 *
 * main.c: the options and the run's sequence; the parts are in drill.h.
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
#include <time.h>
#include <unistd.h>

#include "tools/drill/drill.h"

struct opts o = {
    .nodes = 3,
    .local_mb = 4,
    .dead_after_ms = 1000,
    .heartbeat_ms = 100,
    .bin = "build/bin",
};

const char *const drill_names[] = {"kill",	 "stop",     "partition",   "restart",
				   "drain",	 "kill-two", "owner-stop",  "owner-partition",
				   "clock-step", "stall",    "restart-warm", "pressure"};

struct drill_run run;

bool drill_pause(void)
{
	return o.drill == D_STOP || o.drill == D_PARTITION || o.drill == D_OWNER_STOP ||
	       o.drill == D_OWNER_PARTITION || o.drill == D_CLOCK || o.drill == D_STALL;
}

bool drill_owner(void)
{
	return o.drill == D_OWNER_STOP || o.drill == D_OWNER_PARTITION;
}

double hold_ms(void)
{
	return o.dead_after_ms * 2.0 < HOLD_MS ? HOLD_MS : o.dead_after_ms * 2.0;
}

double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void die(const char *fmt, ...)
{
	va_list ap;

	fputs("ramster-drill: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_USAGE);
}

void note(const char *fmt, ...)
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


/* n1's copies (or stripe slots) made again so far: replica_rereplicated, plus the stripes'. */
static uint64_t remade(void)
{
	uint64_t v = node_stat(1, "replica_rereplicated"), s;

	if (o.ec_stripes && v != NOSTAT && (s = node_stat(1, "remote_ec_stripe_slots_repaired")) != NOSTAT)
		v += s;
	return v;
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

	if (o.drill == D_PRESSURE)
		return drill_pressure();
	if (o.drill == D_CLOCK) {
		char rc[128];
		FILE *f;

		if (access(FAKETIME_LIB, R_OK)) {
			printf("SKIP: no %s (Debian's libfaketime): n1's wall clock cannot be "
			       "stepped alone\n",
			       FAKETIME_LIB);
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
	else if (drill_pause() || o.drill == D_RESTART_WARM)
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
	res.rerep0 = remade();
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
	res.restarts0 = node_stat(1, "cluster_peer_restarts");
	res.held_at_fault = node_stat(2, "foreign_pages");
	fault(&res, r1); /* resumes the client's writes once the fault is in */
	res.deaths = node_stat(1, "cluster_peer_deaths");
	res.restarts = node_stat(1, "cluster_peer_restarts");
	atomic_store(&cl.phase, PH_DONE);
	pthread_join(cl.th, NULL);
	res.rerep = remade();
	res.rlost = node_stat(1, "replica_lost");
	res.rfail = node_stat(1, "replica_repair_failed");

	client_figures(&res);
	judge_floors(&res);

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
	fprintf(
	    f,
	    "Usage: ramster-drill --drill NAME [options]\n"
	    "       ramster-drill --cleanup\n"
	    "Build a ramster collective in network namespaces on this machine, inject a\n"
	    "fault while a client reads and writes through node 1, and verify every page.\n"
	    "Needs root (ip netns). Exit: 0 pass, 1 fail, 2 usage/set-up error, 77 skipped.\n"
	    "\n"
	    "Drills: kill, stop, partition, restart (n2 is the victim), drain (n2 drains,\n"
	    "then is killed), kill-two (n2 and n3 are killed at once), owner-stop,\n"
	    "owner-partition (n1, the owner, is paused or cut off), clock-step (n1's wall\n"
	    "clock jumps 2 h ahead, then 2 h behind, then n2 is paused: needs libfaketime),\n"
	    "restart-warm (n2, a holder, restarts warm: SIGUSR2; nothing may be lost and n1\n"
	    "must see no new incarnation), pressure (n2 lends with donate_mb = auto in a\n"
	    "memory cgroup; a hog there grows; n2 must give back in time, lose nothing,\n"
	    "and lend again: docs/elastic.md).\n"
	    "Pauses and partitions last 3 s (or 2 x dead_after_ms), far below orphan_after_ms:\n"
	    "they must lose nothing and answer no get -EIO. stall: one NBD WRITE_ZEROES of\n"
	    "4 GiB holds n1's loop (needs python3-libnbd); nothing may be lost either.\n"
	    "\n"
	    "  -d, --drill NAME       the drill to run\n"
	    "  -n, --nodes N          nodes in the collective, 2..%d (default 3; kill-two 5)\n"
	    "  -r, --replicas N       the cluster's replicas, 1..%d (default 1; kill-two 3);\n"
	    "                         needs nodes >= replicas + 1\n"
	    "  -R, --redundancy ecK+M the pages erasure-coded: K data and M parity fragments\n"
	    "                         (2 <= K, 1 <= M, K+M <= 8); kill-two: ec4+2 on 7 nodes\n"
	    "      --ec-layout L      with --redundancy ecK+M: pages (each page coded alone, the\n"
	    "                         default) or stripes (K pages coded together)\n"
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
	    {"redundancy", required_argument, NULL, 'R'},
	    {"ec-layout", required_argument, NULL, 'E'},
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
	bool ec_layout_set = false;

	while ((c = getopt_long(argc, argv, "R:d:n:r:m:p:b:kjh", lo, NULL)) != -1) {
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
		case 'R': {
			unsigned a, b;
			char tail;

			if (sscanf(optarg, "ec%u+%u%c", &a, &b, &tail) == 2 && a >= 2 && b >= 1 &&
			    a + b <= 8) {
				o.ec_k = a;
				o.ec_m = b;
			} else if (sscanf(optarg, "replicas%u%c", &a, &tail) == 1 && a >= 1 &&
				   a <= REPLICAS_MAX) {
				o.replicas = a;
				o.replicas_set = true;
			} else {
				die("--redundancy: '%s' is neither ecK+M (2 <= K, 1 <= M, K+M <= 8) "
				    "nor replicasN (1..%d)", optarg, REPLICAS_MAX);
			}
			break;
		}
		case 'E':
			if (!strcmp(optarg, "stripes"))
				o.ec_stripes = true;
			else if (strcmp(optarg, "pages"))
				die("--ec-layout: '%s' is neither pages nor stripes", optarg);
			ec_layout_set = true;
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
		die("no --drill (try --help for the list)");
	for (k = 0; k < sizeof(drill_names) / sizeof(drill_names[0]); k++)
		if (!strcmp(drill, drill_names[k]))
			break;
	if (k == sizeof(drill_names) / sizeof(drill_names[0]))
		die("--drill: unknown drill '%s' (try --help for the list)", drill);
	o.drill = (enum drill)k;
	/* kill-two loses nothing only with a third copy; five nodes leave it two
	 * live peers after the two deaths */
	if (o.ec_k && o.replicas_set)
		die("--redundancy ec%u+%u and --replicas: one or the other", o.ec_k, o.ec_m);
	if (ec_layout_set && !o.ec_k)
		die("--ec-layout needs --redundancy ecK+M");
	if (o.ec_k)
		o.replicas = o.ec_m + 1; /* the verdicts: M holders may go */
	else if (!o.replicas_set)
		o.replicas = o.drill == D_KILL_TWO ? 3 : 1;
	if (!o.nodes_set && o.drill == D_KILL_TWO)
		o.nodes = drill_holders() + 2 > 5 ? drill_holders() + 1 : 5;
	if (o.nodes > NODES_MAX)
		die("%u nodes: at most %d", o.nodes, NODES_MAX);
	if (o.nodes < drill_holders() + 1)
		die("--nodes %u is too few for %u %s: each needs its own peer besides n1 (use "
		    "--nodes %u or more)",
		    o.nodes, drill_holders(), o.ec_k ? "fragments" : "copies", drill_holders() + 1);
	if (o.drill == D_KILL_TWO && o.nodes < 3)
		die("--drill kill-two kills n2 and n3: it needs --nodes 3 or more");
	if (o.drill == D_DRAIN && o.nodes < 3)
		die("--drill drain needs --nodes 3 or more: n2 hands its pages to another peer");
	if (o.dead_after_ms <= o.heartbeat_ms)
		die("--dead-after-ms must be above --heartbeat-ms");
	if (!o.pages && o.drill == D_PRESSURE)
		o.pages = 120000; /* ~210 MiB of text pages on the lender, sealed */
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
