#!/bin/sh
# VM test of erasure coding over soft-RoCE: tests/vm/run-vm.sh tests/vm/test-ec-rdma.sh
# In the guest: a veth carrying 192.0.2.1-4 with rxe0 on it, four ramsterd with
# transport = rdma and redundancy = ec 2+1 (the owner n1 and three peers: each
# remote persistent page is sealed and cut into 2 data + 1 parity fragments,
# one on each peer). Through n1 (tier 1 MiB) a client (tests/vm/ec-pages.c)
# puts 4x its tier of text pages, waits until most are remote, reads every
# one back byte-identical (n1's remote_ec_fragments_placed and remote_ec_gets
# > 0), then n3 is killed (SIGKILL) and every page is read again:
# byte-identical, none lost (-EIO), with remote_ec_degraded_reads > 0 (pages
# whose data fragment was on n3 decoded with the parity). Between its
# commands the client keeps its connection and its pool. The pages the reads
# bring home are flushed from their holders: no fragment may stay behind.
# RAMSTER_BIN picks the binaries (default build/bin); RAMSTER_EC_PAGES the
# workload (default 4x n1's tier); RAMSTER_EC_LAYOUT the ec_layout (pages, the
# default, or stripes: tests/vm/test-ec-stripes-rdma.sh). Under stripes a page
# is whole on one peer and each stripe of two pages has one parity fragment on
# the third (1.5 fragments a page, not 3); its reads are counted as
# remote_ec_stripe_reads and remote_ec_stripe_degraded_reads, and a stripe
# slot is read by message over the RDMA link (one-sided reads of stripe slots
# are not built: docs/erasure.md). Exit 0 or 1.

bin=${RAMSTER_BIN:-build/bin}
client=${RAMSTER_EC_CLIENT:-$bin/../tests/vm/ec-pages}
# shellcheck source=tests/vm/rxe-lib.sh
# the guest runs a script kept under /tmp (a CI clone) from a copy in /run: the
# library by its path in the tree (the cwd is the project root)
. tests/vm/rxe-lib.sh

vm_only
for b in "$bin/ramsterd" "$bin/ramsterctl" "$client"; do
	[ -x "$b" ] || { echo "FAIL - $b not built (make check-vm builds it)"; exit 1; }
done
t_start=$(now_ms)
layout=${RAMSTER_EC_LAYOUT:-pages}
case $layout in
pages)
	c_placed=remote_ec_fragments_placed c_gets=remote_ec_gets
	c_degraded=remote_ec_degraded_reads name=test-ec-rdma
	;;
stripes)
	c_placed=remote_ec_stripe_pages c_gets=remote_ec_stripe_reads
	c_degraded=remote_ec_stripe_degraded_reads name=test-ec-stripes-rdma
	;;
*) echo "FAIL - RAMSTER_EC_LAYOUT=$layout: pages or stripes"; exit 1 ;;
esac

dir=$(mktemp -d /tmp/ec-test.XXXXXX)
cpid=""
cleanup() {
	exec 3>&- 2>/dev/null
	[ -n "$cpid" ] && kill -TERM "$cpid" 2>/dev/null
	stop_nodes
}
trap cleanup EXIT

# ---- soft-RoCE ------------------------------------------------------------------
rxe_up 4

# ---- the collective: n1 the owner, n2-n4 its holders --------------------------------
local_mb=1
"$bin/ramsterctl" genkey > "$dir/cluster.key" && chmod 600 "$dir/cluster.key"
rxe_conf ectest "$dir/cluster.key" 4 747 $local_mb "dead_after_ms = 3000" "redundancy = ec 2+1" "ec_layout = $layout" \
	> "$dir/cluster.conf"

stats() { # stats NODE NAME...: "name=value ..." on one line
	n=$1
	shift
	"$bin/ramsterctl" --socket "$dir/$n.sock" stats 2>/dev/null | awk -v want=" $* " '
		index(want, " " $1 " ") {v[$1] = $2}
		END {n = split(substr(want, 2), w, " "); s = ""
		     for (i = 1; i <= n; i++) s = s (i > 1 ? " " : "") w[i] "=" (w[i] in v ? v[w[i]] : "?")
		     print s}'
}
# n1's remotify at rest: every frame it took is done and tier_remote_pages held
# still over two readings; prints the count (empty if it never came to rest)
wait_rest() { # wait_rest SECONDS
	i=0
	last=x
	rounds=$(($1 * 2))
	while [ "$i" -lt "$rounds" ]; do
		set -- $(stats n1 remote_frames_taken remote_frames_done tier_remote_pages | tr '=' ' ')
		now=""
		[ "$2" = "$4" ] && now=$6
		[ -n "$now" ] && [ "$now" = "$last" ] && { echo "$now"; return 0; }
		last=${now:-x}
		sleep 0.5
		i=$((i + 1))
	done
	return 1
}
foreign_sum() { # foreign_sum NODE...: foreign_pages of the nodes, added
	s=0
	for n in "$@"; do s=$((s + $(stat "$n" foreign_pages))); done
	echo "$s"
}
# the client: commands through a FIFO, one answer line each in client.out
client_cmd() { # client_cmd COMMAND PREFIX SECONDS: prints the answer line
	before=$(grep -c "^$2" "$dir/client.out")
	echo "$1" >&3
	i=0
	while [ "$i" -lt $(($3 * 5)) ]; do
		if [ "$(grep -c "^$2" "$dir/client.out")" -gt "$before" ]; then
			grep "^$2" "$dir/client.out" | tail -1
			return 0
		fi
		kill -0 "$cpid" 2>/dev/null || break
		sleep 0.2
		i=$((i + 1))
	done
	echo "$2 no answer"
	return 1
}
field() { # field LINE NAME: the number after NAME in the line
	echo "$1" | awk -v n="$2" '{for (i = 1; i < NF; i++) if ($i == n) {print $(i + 1); exit}}'
}

step "four ramsterd, transport = rdma, redundancy = ec 2+1, ec_layout = $layout"
for n in n1 n2 n3 n4; do
	start $n
	eval "p_$n=\$last"
done
all_up 90 n1 n2 n3 n4 || exit 1
rdma_links n1 3
echo "# n1: $(stats n1 ec_data_fragments ec_parity_fragments replica_target)"

# ---- pages through n1, most of them remote -------------------------------------------
pages=${RAMSTER_EC_PAGES:-$((local_mb * 256 * 2 * 4))}
mkfifo "$dir/cmd"
: > "$dir/client.out"
"$client" "$dir/n1.sock" < "$dir/cmd" >> "$dir/client.out" 2> "$dir/client.err" &
cpid=$!
exec 3> "$dir/cmd"

step "put $pages text pages through n1 (tier ${local_mb} MiB)"
line=$(client_cmd "put $pages" put: 300)
echo "# $line"
if [ "$(field "$line" stored)" = "$pages" ]; then
	pass "$pages pages stored"
else
	fail "put: $line"
fi
remote=$(wait_rest 120)
placed=$(stat n1 $c_placed)
fb=$(stat n1 remote_ec_fallback_copies)
held=$(foreign_sum n2 n3 n4)
echo "# n1: tier_remote_pages=$remote tier_replica_records=$(stat n1 tier_replica_records)" \
	"$(stats n1 $c_placed remote_ec_fallback_copies remote_ec_stripes remote_ec_stripe_live_pages)"
echo "# foreign_pages n2=$(stat n2 foreign_pages) n3=$(stat n3 foreign_pages) n4=$(stat n4 foreign_pages)"
if [ -n "$remote" ] && [ "$remote" -gt $((pages / 2)) ]; then
	pass "most pages remote: $remote of $pages"
else
	fail "remotify: ${remote:-never at rest} of $pages pages remote"
fi
if [ "${placed:-0}" -gt 0 ]; then
	pass "$c_placed = $placed"
else
	fail "$c_placed = ${placed:-?}"
fi
# no fragment stays behind its page: a P_FLUSH of a fragment used to be refused
# by its holder as "newer" (foreign_flush_upto read a fragment's first bytes as
# the seal version; the owner now says it in the put), so a flushed page's
# other fragments stayed (foreign_flushes_newer). Flushes are asynchronous:
# up to 10 s for the count to come down.
no_leak() { # no_leak REMOTE
	local held i=0
	while :; do
		held=$(foreign_sum n2 n3 n4)
		[ "$held" -le $((3 * $1)) ] && { pass "no fragment left behind ($held for $1 remote pages)"; return 0; }
		[ $i -ge 100 ] && break
		sleep 0.1
		i=$((i + 1))
	done
	fail "the peers hold $held fragments for $1 remote pages, not $((3 * $1)); flushes refused as" \
		"newer: n2=$(stat n2 foreign_flushes_newer) n3=$(stat n3 foreign_flushes_newer)" \
		"n4=$(stat n4 foreign_flushes_newer)"
}
# pages: every remote page is three fragments, one on each peer (no whole
# copies: all peers lived); stripes: each page once, whole, and a parity
# fragment for each stripe of up to two (at most 2 a page, as a stripe of
# one page has its parity too: not the three of the page layout)
if [ "$layout" = pages ]; then
	if [ "${fb:-1}" = 0 ] && [ -n "$remote" ] && [ "$held" -ge $((3 * remote)) ]; then
		pass "the peers hold 3 fragments a remote page ($held for $remote)"
	else
		fail "the peers hold $held fragments for ${remote:-?} remote pages (fallback copies ${fb:-?})"
	fi
elif [ "${fb:-1}" = 0 ] && [ -n "$remote" ] && [ "$held" -ge "$remote" ] &&
	[ "$held" -le $((2 * remote)) ]; then
	pass "the peers hold $held fragments for $remote remote pages (1.5 a page in full stripes)"
else
	fail "the peers hold $held fragments for ${remote:-?} remote pages, not 1..2 a page" \
		"(fallback copies ${fb:-?})"
fi

# ---- every page back ---------------------------------------------------------------------
step "read every page back"
g0=$(stat n1 $c_gets)
line=$(client_cmd get get: 300)
echo "# $line"
echo "# n1: $(stats n1 $c_gets $c_degraded remote_ec_fragments_got tier_repatriated remote_rdma_reads remote_rdma_read_fallbacks)"
if [ "$(field "$line" hits)" = "$pages" ]; then
	pass "all $pages pages read back byte-identical"
else
	fail "get: $line"
fi
g1=$(stat n1 $c_gets)
[ "${g1:-0}" -gt "${g0:-0}" ] && pass "$c_gets = $g1" || fail "$c_gets = ${g1:-?}"
# the holders named RDMA keys for their fragments: read one-sided (a stripe's
# slot is asked for by message, over the same RDMA link)
if [ "$layout" = pages ]; then
	rr=$(stat n1 remote_rdma_reads)
	[ "${rr:-0}" -gt 0 ] && pass "fragments read one-sided: remote_rdma_reads = $rr" ||
		fail "no fragment read one-sided (remote_rdma_reads = ${rr:-?})"
fi

# ---- a holder dies --------------------------------------------------------------------
# the gets brought pages home and pushed others out: let that settle first
remote=$(wait_rest 120)
d0=$(stat n1 $c_degraded)
echo "# before the kill: n1 tier_remote_pages=${remote:-not at rest}" \
	"$(stats n1 $c_placed $c_gets $c_degraded)"
echo "# foreign_pages n2=$(stat n2 foreign_pages) n3=$(stat n3 foreign_pages) n4=$(stat n4 foreign_pages)"
# the pages the gets brought home were flushed from their holders: all of
# their fragments are gone
[ -n "$remote" ] && no_leak "$remote"
step "kill -9 n3"
kill -KILL "$p_n3"
wait "$p_n3" 2>/dev/null
t0=$(now_ms)
line=$(client_cmd get get: 300)
echo "# $line (answered $(($(now_ms) - t0)) ms after the kill)"
echo "# n1: $(stats n1 $c_gets $c_degraded remote_ec_fragments_got remote_ec_fallback_copies cluster_peer_deaths)"
echo "# n1: $(stats n1 replica_below_target replica_lost_now replica_lost replica_fragments_rebuilt)"
if [ "$(field "$line" hits)" = "$pages" ] && [ "$(field "$line" lost)" = 0 ]; then
	pass "all $pages pages read back byte-identical with n3 dead, 0 lost"
else
	fail "get after the kill: $line"
fi
d1=$(stat n1 $c_degraded)
if [ "${d1:-0}" -gt "${d0:-0}" ]; then
	pass "$c_degraded = $d1 (parity stood in for n3's data fragments)"
else
	fail "$c_degraded = ${d1:-?} (was ${d0:-?})"
fi
lostnow=$(stat n1 replica_lost_now)
[ "${lostnow:-1}" = 0 ] && pass "replica_lost_now = 0" || fail "replica_lost_now = ${lostnow:-?}"
kill -0 "$p_n1" 2>/dev/null && pass "n1 still running" || fail "n1 died"

echo quit >&3
exec 3>&-
wait "$cpid" || fail "the client exited $?"
cpid=""
echo "# $name: $(($(now_ms) - t_start)) ms from the rxe setup"
[ $fails -gt 0 ] && [ -s "$dir/client.err" ] && sed 's/^/  client| /' "$dir/client.err" | tail -10
finish $name n1 n2 n3 n4
