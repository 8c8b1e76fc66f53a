/*
 * faults.c - ramster-drill's faults: kill, stop, partition, restart, drain,
 * kill-two, owner-stop, owner-partition, clock-step and stall, each injected
 * while the client runs; the detection, the end of the fault and the
 * rejoin as n1 (or, when n1 is the victim, n2) sees them; the replica
 * count's restore, watched from its own thread so that the times measured
 * meanwhile are not coarsened by it.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/progress.h"
#include "tools/drill/drill.h"

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

	if (res->live_after < drill_holders()) {
		note("n1 cannot restore %u %s: %u live peer(s) (replica_below_target %s)",
		     drill_holders(), o.ec_k ? "fragments" : "copies", res->live_after,
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

	snprintf(
	    cmd, sizeof(cmd),
	    NBD_PYTHON
	    " -c 'import nbd\n"
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

/*
 * restart-warm: wait until n2 answers from its new image (restart_warm 1).
 * @return ms since t0, -1 if not within 60 s; res->warm and res->kept set.
 */
static double restart_wait_warm(struct result *res, double t0)
{
	do {
		uint64_t warm = node_stat(2, "restart_warm");

		if (warm != NOSTAT && warm == 1) {
			res->warm = warm;
			res->kept = node_stat(2, "restart_foreign");
			return now_ms() - t0;
		}
		sleep_ms(POLL_MS);
	} while (now_ms() - t0 < 60000);
	res->warm = 0;
	res->kept = 0;
	return -1;
}

void fault(struct result *res, ramster *r1)
{
	unsigned i;
	double t0, tk, rejoined_at = 0;
	double hold = hold_ms();
	bool back = o.drill == D_STOP || o.drill == D_PARTITION || o.drill == D_RESTART ||
		    o.drill == D_CLOCK || o.drill == D_RESTART_WARM;
	unsigned watch = res->victims; /* whose state n1 is asked about */
	ramster *rw2 = NULL, *n1 = r1; /* r1 asks n2 while n1 is the victim */

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
		note("%u GiB of pipelined WRITE_ZEROES took %.0f ms (exit %d); n1's longest loop "
		     "batch %s us",
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
	case D_RESTART_WARM:
		/* n2 writes its image and re-executes (the same pid); n1 sees its link
		 * go and come back with the same incarnation */
		kill(run.pid[2], SIGUSR2);
		res->detect_ms = restart_wait_warm(res, t0);
		note("n2 is back warm after %.0f ms (restart_warm %llu): %llu of the %llu pages "
		     "it held for n1 kept",
		     res->detect_ms, (unsigned long long)res->warm, (unsigned long long)res->kept,
		     (unsigned long long)res->held_at_fault);
		res->dead_ms = -1;
		atomic_store(&cl.pause_writes, false);
		goto back;
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
	case D_PRESSURE:
		die("the pressure drill runs on its own (pressure.c)");
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
back:

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
			r1 = n1;
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
