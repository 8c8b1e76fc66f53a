/*
 * counters.c - the node's counters as ramster-netbench reads them: a
 * snapshot of every counter it uses, in one round trip (so that two of them
 * are of the same moment), and what the peers given with --peer-socket hold.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "tools/netbench/netbench.h"

static const char *const stat_names[ST_N] = {
	[ST_FRAMES] = "tier_frames",
	[ST_BUDGET] = "tier_budget_frames",
	[ST_ZOMBIES] = "tier_zombies",
	[ST_STORED] = "tier_stored_pages",
	[ST_CBYTES] = "tier_compressed_bytes",
	[ST_REMOTE_PAGES] = "tier_remote_pages",
	[ST_REMOTIFIED] = "tier_remotified",
	[ST_REPATRIATED] = "tier_repatriated",
	[ST_BROUGHT_HOME] = "tier_brought_home",
	[ST_REMOTE_GETS] = "tmem_remote_gets",
	[ST_PLACED] = "remote_pages_placed",
	[ST_FAILED] = "remote_pages_failed",
	[ST_NO_TARGET] = "remote_no_target",
	[ST_ROOM_WAITS] = "node_put_room_waits",
	[ST_ROOM_REFUSED] = "node_put_room_refused",
	[ST_GET_LOST] = "remote_get_lost",
	[ST_REMOTE_LOST] = "tier_remote_lost",
	[ST_FOREIGN] = "foreign_pages",
	[ST_FOREIGN_BYTES] = "foreign_bytes",
	[ST_FOREIGN_RAM] = "foreign_ram",
	[ST_FOREIGN_USED] = "foreign_used",
	[ST_FLUSH_DROPPED] = "remote_flushes_dropped",
	[ST_REPLICA_RECORDS] = "tier_replica_records",
	[ST_REPLICA_BYTES] = "tier_replica_bytes",
};

/* Read the counters named in stat_names (absent ones read 0). @return 0 or -errno. */
int snap_read(ramster *r, struct snap *sn)
{
	struct ramster_stat *s;
	size_t n, i;
	unsigned k;
	int rc = ramster_stats(r, &s, &n);

	if (rc < 0)
		return rc;
	memset(sn, 0, sizeof(*sn));
	for (i = 0; i < n; i++) {
		if (!s[i].name)
			continue;
		for (k = 0; k < ST_N; k++) {
			if (!strcmp(s[i].name, stat_names[k])) {
				sn->v[k] = s[i].value;
				break;
			}
		}
	}
	ramster_stats_free(s, n);
	return 0;
}

unsigned usage_pct(const struct snap *s)
{
	return s->v[ST_BUDGET] ? (unsigned)(s->v[ST_FRAMES] * 100 / s->v[ST_BUDGET]) : 0;
}

/* foreign_pages of each peer given with --peer-socket (0 if unreachable). */
void peers_foreign(uint64_t *out)
{
	unsigned k;

	for (k = 0; k < o.npeers; k++) {
		ramster *p = ramster_open(o.peer_socket[k]);
		struct snap sn;

		out[k] = p && !snap_read(p, &sn) ? sn.v[ST_FOREIGN] : 0;
		ramster_close(p);
	}
}

/* foreign_bytes, foreign_ram and foreign_used of each peer (0 if unreachable). */
void peers_holding(uint64_t *bytes, uint64_t *ram, uint64_t *used)
{
	unsigned k;

	for (k = 0; k < o.npeers; k++) {
		ramster *p = ramster_open(o.peer_socket[k]);
		struct snap sn;

		bytes[k] = ram[k] = used[k] = 0;
		if (p && !snap_read(p, &sn)) {
			bytes[k] = sn.v[ST_FOREIGN_BYTES];
			ram[k] = sn.v[ST_FOREIGN_RAM];
			used[k] = sn.v[ST_FOREIGN_USED];
		}
		ramster_close(p);
	}
}

/* Wait (up to 10 s) until the peers hold at most `want` pages in all; fill out[]. */
void peers_drain(uint64_t want, uint64_t *out)
{
	unsigned k, i;
	uint64_t sum = 0;

	for (i = 0; i < 100; i++) {
		peers_foreign(out);
		for (sum = 0, k = 0; k < o.npeers; k++)
			sum += out[k];
		if (sum <= want)
			return;
		sleep_ms(100);
	}
}
