/*
 * pressure.c - ramster-drill --drill pressure (issue 24, docs/elastic.md): a
 * lender with donate_mb = auto holds 200+ MiB of n1's pages in a memory
 * cgroup; a hog in the same cgroup grows until it leaves PR_LEAVE_MB; the
 * lender must give its pages back (to n3, or home to n1) fast enough that
 * the hog is never OOM-killed, lend at most what the hog leaves within
 * PR_GIVE_MS of the hog's last step, lose nothing (every page read back),
 * and lend again once the hog has exited.
 */
#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/drill/drill.h"

#define PR_LIMIT_MB 448 /* the lender's cgroup */
#define PR_LEAVE_MB 64	/* what the hog leaves the lender */
#define PR_HOLD_MB  200 /* what the lender holds before the hog starts */
#define PR_STEP_MB  16	/* the hog grows by this ... */
#define PR_STEP_MS  750 /* ... this often: ~21 MiB/s */
#define PR_GIVE_MS  10000
#define PR_BACK_MB  128 /* after the hog: the lender lends this much again */

static bool cg_v2(void)
{
	return access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
}

static int cg_write(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cg_write(const char *file, const char *fmt, ...)
{
	char path[256];
	va_list ap;
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", run.cg, file);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	va_start(ap, fmt);
	rc = vfprintf(f, fmt, ap) < 0 ? -EIO : 0;
	va_end(ap);
	if (fclose(f))
		rc = -errno;
	return rc;
}

static uint64_t cg_read(const char *v2, const char *v1)
{
	char path[256], buf[64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", run.cg, cg_v2() ? v2 : v1);
	f = fopen(path, "r");
	if (!f)
		return NOSTAT;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return strtoull(buf, NULL, 10);
}

/* The lender's memory cgroup: v2 where the host runs it, else v1's memory controller. */
static void cg_make(void)
{
	if (cg_v2()) {
		FILE *f = fopen("/sys/fs/cgroup/cgroup.subtree_control", "w");

		if (f) {
			fputs("+memory", f);
			fclose(f);
		}
		snprintf(run.cg, sizeof(run.cg), "/sys/fs/cgroup/%sn2", run.prefix);
	} else {
		snprintf(run.cg, sizeof(run.cg), "/sys/fs/cgroup/memory/%sn2", run.prefix);
	}
	if (mkdir(run.cg, 0755))
		die("cannot make the cgroup %s: %s", run.cg, strerror(errno));
	if (cg_write(cg_v2() ? "memory.max" : "memory.limit_in_bytes", "%llu",
		     (unsigned long long)PR_LIMIT_MB << 20))
		die("cannot limit the cgroup %s", run.cg);
	if (cg_v2())
		(void)cg_write("memory.swap.max", "0");
}

/* The hog: joins the cgroup, grows by PR_STEP_MB every PR_STEP_MS to mb, then waits. */
static pid_t hog_start(unsigned mb)
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		sigset_t none;
		unsigned have = 0;

		sigemptyset(&none);
		pthread_sigmask(SIG_SETMASK, &none, NULL);
		if (cg_write("cgroup.procs", "0"))
			_exit(126);
		while (have < mb) {
			unsigned step = mb - have < PR_STEP_MB ? mb - have : PR_STEP_MB;
			char *p = malloc((size_t)step << 20);

			if (!p)
				_exit(125);
			memset(p, 0x5a,
			       (size_t)step << 20); /* anonymous, touched: not reclaimable */
			have += step;
			usleep(PR_STEP_MS * 1000);
		}
		for (;;)
			pause();
	}
	run.hog = pid;
	return pid;
}

/* The hog's state: 0 running, else how it ended (a wait status). */
static int hog_poll(int *status)
{
	pid_t p = waitpid(run.hog, status, WNOHANG);

	if (p == run.hog) {
		run.hog = 0;
		return 1;
	}
	return 0;
}

static double mib(uint64_t b)
{
	return b == NOSTAT ? -1 : (double)b / 1048576.0;
}

int drill_pressure(void)
{
	struct tally t = {0};
	uint64_t used, budget, n, wrote, peak_used = 0, moved0, home0, pres_max = 0;
	double t0, t_full = -1, t_given = -1, t_back = -1;
	int status = 0, hog_dead = 0;
	ramster *r, *r1;
	char why[512] = "";
	bool pass;

	cg_make();
	write_config(1);
	net_up();
	node_start(1);
	node_start(2); /* in the cgroup (node_start: run.cg) */
	r1 = NULL;
	for (t0 = now_ms(); !r1 && now_ms() - t0 < 10000; sleep_ms(20))
		r1 = node_open(1);
	if (!r1)
		die("cannot connect to n1: %s", strerror(errno));
	if (wait_peers(r1, 1u << 2, "up", true, now_ms(), 20000) < 0)
		die("n1 does not see n2 up");
	/* the lender grows its donation while it is calm */
	note("n2 (donate_mb = auto, cgroup %s of %u MiB): waiting for it to lend %u MiB", run.cg,
	     PR_LIMIT_MB, PR_HOLD_MB + 40);
	for (t0 = now_ms(); now_ms() - t0 < 30000; sleep_ms(100)) {
		budget = node_stat(2, "elastic_budget");
		if (budget != NOSTAT && budget >= ((uint64_t)PR_HOLD_MB + 40) << 20)
			break;
	}
	note("n2 lends %.0f MiB after %.1f s", mib(node_stat(2, "elastic_budget")),
	     (now_ms() - t0) / 1e3);

	/* n1 writes persistent pages until n2 holds PR_HOLD_MB */
	r = node_open(1);
	if (!r)
		die("cannot connect to n1: %s", strerror(errno));
	n = o.pages;
	/* n1's remote pages: 120,000 text pages are ~210 MiB on n2 */
	set_init(&sets[SET_A], r, RAMSTER_PERSISTENT, n);
	t0 = now_ms();
	wrote = set_write(r, SET_A);
	remotify_settle();
	used = node_stat(2, "foreign_used");
	note("wrote %llu pages in %.1f s; n2 holds %.0f MiB (%llu pages)",
	     (unsigned long long)wrote, (now_ms() - t0) / 1e3, mib(used),
	     (unsigned long long)node_stat(2, "foreign_pages"));
	if (used == NOSTAT || used < (uint64_t)PR_HOLD_MB << 20)
		add_why(why, sizeof(why), "n2 held %.0f MiB before the hog, not %u", mib(used),
			PR_HOLD_MB);

	/* n3 joins: room for what n2 gives back */
	node_start(3);
	if (wait_peers(r1, 1u << 3, "up", true, now_ms(), 20000) < 0)
		die("n1 does not see n3 up");
	moved0 = node_stat(2, "giveback_pages");
	home0 = node_stat(1, "drain_returns_home");

	/* the hog */
	note("a hog in n2's cgroup grows by %u MiB every %u ms to leave it %u MiB", PR_STEP_MB,
	     PR_STEP_MS, PR_LEAVE_MB);
	hog_start(PR_LIMIT_MB - PR_LEAVE_MB);
	t0 = now_ms();
	for (;;) {
		uint64_t cur = cg_read("memory.current", "memory.usage_in_bytes");
		uint64_t pres = node_stat(2, "elastic_pressure_us");
		double now = now_ms() - t0;

		used = node_stat(2, "foreign_used");
		if (used != NOSTAT && used > peak_used)
			peak_used = used;
		if (pres != NOSTAT && pres > pres_max)
			pres_max = pres;
		if (hog_poll(&status)) {
			hog_dead = 1;
			break;
		}
		/* the hog is full when its cgroup holds it and the lender's leftover */
		if (t_full < 0 &&
		    now >= (double)(PR_LIMIT_MB - PR_LEAVE_MB) / PR_STEP_MB * PR_STEP_MS)
			t_full = now;
		if (t_given < 0 && used != NOSTAT && used <= (uint64_t)PR_LEAVE_MB << 20)
			t_given = now;
		if (t_full >= 0 && t_given >= 0 && now > t_full + 2000)
			break;
		if (t_full >= 0 && now > t_full + PR_GIVE_MS)
			break;
		if (getenv("RAMSTER_DRILL_TRACE"))
			note("%6.0f ms: cgroup %.0f MiB, n2 holds %.0f MiB, lends %.0f MiB, gave "
			     "%llu "
			     "pages, stall %llu us/s",
			     now, mib(cur), mib(used), mib(node_stat(2, "elastic_budget")),
			     (unsigned long long)node_stat(2, "giveback_pages"),
			     (unsigned long long)pres);
		sleep_ms(100);
	}
	note("n2 lends %.0f MiB (held %.0f MiB at most), its cgroup uses %.0f MiB; %s",
	     mib(node_stat(2, "elastic_budget")), mib(peak_used),
	     mib(cg_read("memory.current", "memory.usage_in_bytes")),
	     hog_dead ? "the hog DIED" : "the hog lives");
	if (hog_dead)
		add_why(why, sizeof(why), "the hog died (%s)",
			WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exited");
	if (t_given < 0 || (t_full >= 0 && t_given > t_full + PR_GIVE_MS))
		add_why(why, sizeof(why), "n2 still lent %.0f MiB %u s after the hog was full",
			mib(used), PR_GIVE_MS / 1000);

	/* every page back */
	set_verify(r, SET_A, 0, n, &t, false);
	note("read back %llu pages: %llu lost, %llu wrong", (unsigned long long)t.verified,
	     (unsigned long long)t.lost, (unsigned long long)t.wrong);
	if (t.lost || t.wrong || t.errors)
		add_why(why, sizeof(why), "%llu lost, %llu wrong, %llu errors",
			(unsigned long long)t.lost, (unsigned long long)t.wrong,
			(unsigned long long)t.errors);

	/* the hog goes: the lender lends again */
	if (run.hog) {
		kill(run.hog, SIGKILL);
		waitpid(run.hog, NULL, 0);
		run.hog = 0;
	}
	for (t0 = now_ms(); now_ms() - t0 < 20000; sleep_ms(100)) {
		budget = node_stat(2, "elastic_budget");
		if (budget != NOSTAT && budget >= (uint64_t)PR_BACK_MB << 20) {
			t_back = now_ms() - t0;
			break;
		}
	}
	if (t_back < 0)
		add_why(why, sizeof(why), "n2 did not lend %u MiB again within 20 s", PR_BACK_MB);

	pass = !why[0];
	printf("\n== drill pressure: n2 lends with donate_mb = auto in a %u MiB cgroup; a hog "
	       "leaves it %u MiB\n",
	       PR_LIMIT_MB, PR_LEAVE_MB);
	printf("held before the hog  %.0f MiB of n1's pages (%llu written)\n", mib(peak_used),
	       (unsigned long long)wrote);
	printf("given back           %llu pages (%llu taken home by n1), n2 lends %.0f MiB at "
	       "the end\n",
	       (unsigned long long)(node_stat(2, "giveback_pages") - moved0),
	       (unsigned long long)(node_stat(1, "drain_returns_home") - home0),
	       mib(node_stat(2, "foreign_used")));
	printf("time to give back    %s%.0f ms after the hog started (full at %.0f ms)\n",
	       t_given < 0 ? "not within the drill: " : "", t_given, t_full);
	printf("pressure seen        %llu us/s at most (PSI some)\n", (unsigned long long)pres_max);
	printf("hog                  %s\n", hog_dead ? "DIED" : "alive (not OOM-killed)");
	printf("pages                %llu verified, %llu lost, %llu wrong\n",
	       (unsigned long long)t.verified, (unsigned long long)t.lost,
	       (unsigned long long)t.wrong);
	printf("lends again          %s%.0f ms after the hog exited\n", t_back < 0 ? "not: " : "",
	       t_back);
	printf("result               %s%s%s\n", pass ? "PASS" : "FAIL", pass ? "" : ": ",
	       pass ? ": nothing lost, the hog lives, the lender gave back and lends again" : why);
	ramster_close(r);
	ramster_close(r1);
	return pass ? 0 : EXIT_FAIL;
}
