/*
 * report.c - ramster-drill's report: the text a person reads, or with
 * --json one object on one line (jansson) that the tests parse; its keys are
 * an interface (tests/integration/test_drills.sh, docs). A figure the drill
 * did not measure reads n/a in text and null in JSON.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/jout.h"
#include "tools/drill/drill.h"

uint64_t delta(uint64_t now, uint64_t then)
{
	return now == NOSTAT || then == NOSTAT ? NOSTAT : now - then;
}

/* A counter as text: "n/a" when the daemon has none. */
const char *stat_str(char *buf, size_t len, uint64_t v)
{
	if (v == NOSTAT)
		snprintf(buf, len, "n/a");
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
	return buf;
}

/*
 * Ephemeral misses the fault caused: n1 is the only user of ephemeral pages,
 * so every miss is one of: absent at the baseline, evicted by n1 since (a
 * local page, never one the victim held), or held by the victim.
 */
uint64_t fault_misses(const struct tally *t)
{
	uint64_t old = t->missed_before + t->evicted;

	return t->missed > old ? t->missed - old : 0;
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
	jout_uint(j, o.ec_k, "ec_k");
	jout_bool(j, o.ec_stripes, "ec_stripes");
	jout_uint(j, o.ec_m, "ec_m");
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
	if (o.drill == D_RESTART_WARM) {
		jout_uint(j, res->kept, "warm_pages_kept");
		jout_uint(j, res->held_at_fault, "warm_pages_held");
		jout_uint(j, delta(res->restarts, res->restarts0), "peer_restarts_seen");
	}
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

void report(const struct result *res, bool pass, const char *why)
{
	const struct tally *t = &res->t;
	uint64_t missed_new = fault_misses(t);
	char rejoin[32] = "n/a", b[4][24];
	bool dies = o.drill != D_RESTART && o.drill != D_RESTART_WARM; /* n1 declares them dead */
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
	if (o.ec_k)
		printf(", redundancy ec %u+%u%s", o.ec_k, o.ec_m, o.ec_stripes ? " in stripes" : "");
	else
		printf(", replicas %u", o.replicas);
	printf(", heartbeat %u ms, dead after %u ms\n", o.heartbeat_ms, o.dead_after_ms);
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
		printf(
		    "lost + new misses    %llu (expected %llu: replicas 1, the victim's pages)\n",
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
		if (o.drill == D_RESTART_WARM) {
			char d[24];

			printf("lost + new misses    %llu (expected 0: a warm restart)\n",
			       (unsigned long long)(t->lost + missed_new));
			printf("gets -EIO            %llu during the drill (expected 0)\n",
			       (unsigned long long)res->eio_drill);
			printf("warm restart         n2 back warm after %.0f ms, kept %llu of the "
			       "%llu "
			       "pages it held; n1 saw %s new incarnation(s) (expected 0)\n",
			       res->detect_ms, (unsigned long long)res->kept,
			       (unsigned long long)res->held_at_fault,
			       stat_str(d, sizeof(d), delta(res->restarts, res->restarts0)));
			break;
		}
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

			printf(
			    "peers declared       %s by n1 through two clock steps and n2's stop "
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
			printf(
			    "drain                not done after %.0f ms (ramsterctl exit %d; n2 "
			    "foreign_pages %s at the kill)\n",
			    res->drain_ms, res->drain_rc,
			    stat_str(b[2], sizeof(b[2]), res->drain_foreign));
	}
	if (o.drill != D_RESTART_WARM)
		printf("time to detect       %.0f ms (n1's peers shows %s not up%s)\n",
		       res->detect_ms, res->nvictims > 1 ? "them" : "n2",
		       o.drill == D_DRAIN ? "; from the kill" : "");
	if (dies)
		printf("time to dead         %.0f ms (n1 declared %s dead: %s)\n", res->dead_ms,
		       res->nvictims > 1 ? "them" : "it",
		       o.drill == D_DRAIN	    ? "it held nothing any more"
		       : o.replicas > res->nvictims ? "other copies serve"
		       : drill_pause()		    ? "unreachable: its pages kept"
						    : "pages with no other copy are lost");
	if (o.drill == D_RESTART_WARM)
		printf("detection floor      n/a (nobody is declared dead: a link blip)\n");
	else
		printf("detection floor      %s %.0f ms <= %.0f ms: %s (dead_after %u + 2 x "
		       "heartbeat %u "
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
