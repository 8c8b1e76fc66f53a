#!/bin/sh
# VM test of the RDMA transport: tests/vm/run-vm.sh tests/vm/test-rdma.sh
# In the guest: a veth carrying 192.0.2.1-3 with soft-RoCE rxe0 on it, three
# ramsterd with transport = rdma, one per address. Checks: the links are
# rdma over rxe0; a workload 4x node 1's local tier goes out to the peers
# and comes back verified (ramster-bench checks every page); node 1 survives
# a peer's kill -9; a node with the wrong secret is refused.
# RAMSTER_BIN picks the binaries (default build/bin); RAMSTER_RDMA_PAGES the
# workload (default 4x node 1's tier). Exit 0 or 1.

bin=${RAMSTER_BIN:-build/bin}
# shellcheck source=tests/vm/rxe-lib.sh
# the guest runs a script kept under /tmp (a CI clone) from a copy in /run: the
# library by its path in the tree (the cwd is the project root)
. tests/vm/rxe-lib.sh

vm_only
for b in ramsterd ramsterctl ramster-bench; do
	[ -x "$bin/$b" ] || { echo "FAIL - $bin/$b not built"; exit 1; }
done

dir=$(mktemp -d /tmp/rdma-test.XXXXXX)
trap stop_nodes EXIT

# ---- soft-RoCE ------------------------------------------------------------------
rxe_up 3

# ---- the transport alone: the unit test, now that a device exists ----------------------
unit=${RAMSTER_UNIT:-$bin/../tests/unit/test_rdma}
if [ -x "$unit" ]; then
	step "$unit on 192.0.2.1"
	if RAMSTER_RDMA_ADDR=192.0.2.1 "$unit" > "$dir/unit.txt" 2>&1 && ! grep -q SKIPPED "$dir/unit.txt"; then
		pass "test_rdma: $(grep -c '\[       OK \]' "$dir/unit.txt") tests passed"
	else
		fail "test_rdma"
		sed 's/^/  | /' "$dir/unit.txt" | tail -20
	fi
else
	echo "skip - $unit not built (make unit)"
fi

# ---- the collective ----------------------------------------------------------------
local_mb=1
"$bin/ramsterctl" genkey > "$dir/cluster.key" && chmod 600 "$dir/cluster.key"
"$bin/ramsterctl" genkey > "$dir/wrong.key" && chmod 600 "$dir/wrong.key"
conf() { # conf FILE KEYFILE
	cat > "$1" <<CONF
[cluster]
name = rdmatest
secret_file = $2
heartbeat_ms = 200
dead_after_ms = 3000

[node n1]
id = 1
address = 192.0.2.1:7471
transport = rdma
socket = $dir/n1.sock
local_mb = $local_mb
donate_mb = 16

[node n2]
id = 2
address = 192.0.2.2:7472
transport = rdma
socket = $dir/n2.sock
local_mb = 16
donate_mb = 64

[node n3]
id = 3
address = 192.0.2.3:7473
transport = rdma
socket = $dir/n3.sock
local_mb = 16
donate_mb = 64
CONF
}
conf "$dir/cluster.conf" "$dir/cluster.key"
conf "$dir/wrong.conf" "$dir/wrong.key"

step "three ramsterd, transport = rdma"
start n1 "$dir/cluster.conf"; p1=$last
start n2 "$dir/cluster.conf"; p2=$last
start n3 "$dir/cluster.conf"; p3=$last
all_up 60 n1 n2 n3
rdma_links n1 2
grep -q "transport rdma" "$dir/n1.log" && pass "n1 logged its transport: $(grep -o 'transport rdma.*' "$dir/n1.log" | head -1)"

# ---- a workload 4x node 1's tier --------------------------------------------------------
pages=${RAMSTER_RDMA_PAGES:-$((local_mb * 256 * 2 * 4))}
step "ramster-bench: $pages text pages through n1 (tier ${local_mb} MiB)"
t0=$(now_ms)
if "$bin/ramster-bench" --socket "$dir/n1.sock" --mode daemon --data text --pages "$pages" \
	--batch 64 --reps 1 > "$dir/bench.txt" 2>&1; then
	pass "bench: $pages pages put and read back verified in $(($(now_ms) - t0)) ms"
else
	fail "ramster-bench failed"
fi
sed 's/^/  | /' "$dir/bench.txt" | tail -12
remotified=$(stat n1 tier_remotified)
# the bench frees its pages at the end: count what the peers stored and served
f2=$(stat n2 remote_served_puts)
f3=$(stat n3 remote_served_puts)
echo "# n1 tier_remotified=$remotified tier_repatriated=$(stat n1 tier_repatriated)" \
	"remote_pages_placed=$(stat n1 remote_pages_placed); served puts/gets n2=$f2/$(stat n2 remote_served_gets)" \
	"n3=$f3/$(stat n3 remote_served_gets); foreign_pages now n2=$(stat n2 foreign_pages) n3=$(stat n3 foreign_pages)"
[ "${remotified:-0}" -gt 0 ] && pass "n1 remotified $remotified frames" || fail "n1 remotified nothing"
[ $((${f2:-0} + ${f3:-0})) -gt 0 ] && pass "peers stored n1's pages as foreign pages (n2 $f2, n3 $f3)" ||
	fail "no foreign pages stored on the peers"
for n in n1 n2 n3; do
	echo "# $n: links_lost=$(stat $n cluster_links_lost) bad_frames=$(stat $n cluster_bad_frames)" \
		"send_full=$(stat $n cluster_send_full) timeouts=$(stat $n cluster_timeouts)"
done

# ---- a peer dies ---------------------------------------------------------------------------
step "kill -9 n3"
kill -KILL "$p3"
wait "$p3" 2>/dev/null
i=0
while [ "$i" -lt 100 ] && [ "$(peers_up n1)" -ne 1 ]; do
	sleep 0.2
	i=$((i + 1))
done
if kill -0 "$p1" 2>/dev/null && [ "$(peers_up n1)" -eq 1 ]; then
	pass "n1 alive, n3 no longer up: $("$bin/ramsterctl" --socket "$dir/n1.sock" peers | awk '$2 == "n3" {print $4}')"
else
	fail "n1 after n3's death"
	"$bin/ramsterctl" --socket "$dir/n1.sock" peers
fi
grep -E "n3.*(lost|dead)" "$dir/n1.log" | head -2 | sed 's/^/  n1| /'
if "$bin/ramster-bench" --socket "$dir/n1.sock" --mode daemon --data text --pages 256 \
	--batch 64 --reps 1 > "$dir/bench2.txt" 2>&1; then
	pass "n1 still serves a workload after n3's death"
else
	fail "n1 workload after n3's death"
	tail -5 "$dir/bench2.txt"
fi

# ---- the wrong secret ----------------------------------------------------------------------
step "n3 again, with the wrong secret"
a0=$(stat n1 cluster_auth_failures)
start n3 "$dir/wrong.conf"
sleep 6
a1=$(stat n1 cluster_auth_failures)
a2=$(stat n2 cluster_auth_failures)
a3=$(stat n3 cluster_auth_failures)
# handshake v2: the dialer (the lower id) proves first, so the acceptor n3 is the
# one that finds the proofs wrong; an acceptor n1 would count them too
if [ "$(peers_up n1)" -eq 1 ] && [ $((${a1:-0} - ${a0:-0} + ${a3:-0})) -gt 0 ]; then
	pass "n3 with the wrong secret refused (auth failures: n1 $a1, n2 $a2, n3 $a3)"
else
	fail "wrong secret: n1 peers up $(peers_up n1), auth failures n1 ${a0:-?} -> ${a1:-?}, n3 ${a3:-?}"
	tail -5 "$dir/n1.log"
fi
kill -0 "$p1" 2>/dev/null && kill -0 "$p2" 2>/dev/null && pass "n1 and n2 still running" ||
	fail "a node died"

finish test-rdma n1 n2 n3
