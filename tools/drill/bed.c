/*
 * bed.c - ramster-drill's test bed: the collective it builds on this machine
 * (one network namespace a node, veths to a bridge in a hub namespace, the
 * cluster file, one ramsterd each), what it removes at the end, and asking
 * the nodes what they see. Everything made is recorded in run, so that
 * cleanup() undoes exactly that, also from the signal thread.
 */
#include <errno.h>
#include <fcntl.h>
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
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/drill/drill.h"

/*
 * Run a shell command, its output appended to the run's log (or discarded
 * before the directory exists). @return its exit status, -1 if it died.
 */
int sh(const char *fmt, ...)
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
void net_up(void)
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
int net_link(unsigned node, bool up)
{
	char hub[64];

	ns_name(hub, sizeof(hub), 0);
	return sh("ip -n %s link set n%u %s", hub, node, up ? "up" : "down");
}

void node_start(unsigned node)
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
		if (run.cg[0] && node == 2) {
			/* pressure: n2 lives in the memory cgroup the drill made */
			char procs[200];
			FILE *f;

			snprintf(procs, sizeof(procs), "%s/cgroup.procs", run.cg);
			f = fopen(procs, "w");
			if (!f || fputs("0", f) < 0 || fclose(f))
				_exit(125);
		}
		if (o.drill == D_CLOCK && node == 1) {
			/* n1's wall clock is libfaketime's: the drill steps it through this file */
			char rc[128];

			snprintf(rc, sizeof(rc), "%s/faketime.rc", run.dir);
			setenv("LD_PRELOAD", FAKETIME_LIB, 1);
			setenv("FAKETIME_TIMESTAMP_FILE", rc, 1);
			setenv("FAKETIME_NO_CACHE", "1", 1);
			setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
		}
		if (run.cg[0]) {
			/* pressure: nsenter joins the namespace without remounting /sys
			 * (ip netns exec does), so that the node sees its cgroup */
			char netns[96];

			snprintf(netns, sizeof(netns), "--net=/run/netns/%s", ns);
			execlp("nsenter", "nsenter", netns, exe, "--config", conf, "--node", name,
			       "--log-level", "notice", (char *)NULL);
			_exit(127);
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
void node_last_log(unsigned node, char *buf, size_t len)
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

void write_config(unsigned replicas)
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
		"heartbeat_ms = %u\ndead_after_ms = %u\n"
		"high_watermark = 95\nlow_watermark = 90\n",
		key, o.heartbeat_ms, o.dead_after_ms);
	if (o.ec_k)
		fprintf(f, "redundancy = ec %u+%u\nec_layout = %s\n", o.ec_k, o.ec_m,
			o.ec_stripes ? "stripes" : "pages");
	else
		fprintf(f, "replicas = %u\n", replicas);
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
		fprintf(f, "\n[node n%u]\nid = %u\naddress = 192.0.2.%u:%u\nsocket = %s\n", i, i, i,
			PORT, sock);
		if (o.drill == D_PRESSURE && i == 2)
			/* the lender: elastic, keeping 64 MiB of its cgroup free */
			fprintf(f, "local_mb = 16\ndonate_mb = auto\ndonate_max_mb = 1024\n"
				   "reserve_mb = 64\n");
		else if (o.drill == D_PRESSURE)
			fprintf(f, "local_mb = %u\ndonate_mb = %u\n", i == 1 ? 8 : 16,
				i == 1 ? 16 : 1024);
		else
			fprintf(f, "local_mb = %u\ndonate_mb = %u\n", i == 1 ? o.local_mb : 64,
				i == 1 ? 16 : 256);
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
void cleanup(void)
{
	char ns[64];
	unsigned i;

	if (atomic_exchange(&run.cleaning, true))
		return;
	if (run.hog) {
		kill(run.hog, SIGKILL);
		waitpid(run.hog, NULL, 0);
		run.hog = 0;
	}
	for (i = 1; i <= NODES_MAX; i++)
		if (run.pid[i]) {
			kill(run.pid[i], SIGKILL);
			waitpid(run.pid[i], NULL, 0);
			run.pid[i] = 0;
		}
	if (run.cg[0]) {
		rmdir(run.cg); /* empty now: its processes are gone */
		run.cg[0] = 0;
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

/*
 * --cleanup: every namespace named rd-*, its processes first; except those
 * of a drill still running (rd-PID-* with PID alive): several runs may share
 * the machine (a sanitizer build's suite, a second checkout).
 */
int cleanup_leftovers(void)
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

ramster *node_open(unsigned node)
{
	char path[128];

	sock_path(path, sizeof(path), node);
	return ramster_open(path);
}

/* A counter of a node; UINT64_MAX if it cannot be read. */
uint64_t node_stat(unsigned node, const char *name)
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
unsigned peers_in(ramster *r1, unsigned victims_mask, const char *state, uint64_t *lent_out)
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

unsigned mask_count(unsigned mask)
{
	return (unsigned)__builtin_popcount(mask);
}

/* Start every node; wait for their sockets and for node 1 to see all peers up. */
void collective_up(void)
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
void remotify_settle(void)
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

/* Wait until n1 has every page at its replica count before the fault (at most 20 s). */
uint64_t replicas_settle(void)
{
	double t0 = now_ms();
	uint64_t v;

	while ((v = node_stat(1, "replica_below_target")) != 0 && v != NOSTAT &&
	       now_ms() - t0 < 20000)
		sleep_ms(STAT_POLL_MS);
	return v;
}

/*
 * Poll node 1 every POLL_MS until every peer of mask is in state (all =
 * true) or none is (all = false). @return ms since t0, -1 after limit_ms.
 * The interval bounds how late a time measured here can be: it is part of
 * the detection floor's slack.
 */
double wait_peers(ramster *r1, unsigned mask, const char *state, bool all, double t0,
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
bool have_drain(void)
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
pid_t ctl_start(unsigned node, const char *cmd)
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
