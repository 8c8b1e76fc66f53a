#!/bin/sh
# bench-ec-rdma.sh [K+M [pages|stripes]] - repatriate latency of ec K+M
# (default 2+1) in the layout given (default pages) against replicas 1 over
# soft-RoCE, in the VM:
#   tests/vm/run-vm.sh --timeout 1800 tests/vm/bench-ec-rdma.sh 4+2
#   tests/vm/run-vm.sh --timeout 1800 tests/vm/bench-ec-rdma.sh 2+1 stripes
# (stripes: a stripe slot is read by message, not one-sided; replicas 1 is.)
# Hydra's setting (FAST'22): with RDMA the owner reads a fragment one-sided,
# and the holder's process is never woken, so an ec read's K requests cost
# the holders no CPU of their own (over TCP each costs a process wake-up:
# docs/bench-ec.md, "Where an ec read's time goes"). K+M+1 ramsterd on rxe0
# (the owner n1 with a 1 MiB tier, K+M holders), transport = rdma; for each
# mode in turn, three times (A B A B A B, so that drift lands on both), a fresh
# collective and ramster-netbench against n1 (its pages 8x n1's tier,
# persistent; 3 rounds of 300 timed gets); prints each run's repatriate p50 /
# p99 and one-sided reads, then the medians and the ratio. A report, not a
# test (not run by check-vm: it is named bench-, not test-): exit 0 unless a
# run failed or read a page back wrong. The figures are TCG's (an emulated
# CPU, 2 vCPUs): ratios mean something, microseconds do not.
bin=${RAMSTER_BIN:-build/bin}
# shellcheck source=tests/vm/rxe-lib.sh
# the library by its path in the tree (the cwd is the project root)
. tests/vm/rxe-lib.sh

vm_only
for b in "$bin/ramsterd" "$bin/ramsterctl" "$bin/ramster-netbench"; do
	[ -x "$b" ] || { echo "FAIL - $b not built (make all builds it)"; exit 1; }
done
command -v jq > /dev/null || { echo "FAIL - jq missing"; exit 1; }
code=${1:-2+1}
layout=${2:-pages}
case "$layout" in pages | stripes) ;; *) echo "usage: bench-ec-rdma.sh [K+M [pages|stripes]]" >&2; exit 1 ;; esac
k=${code%+*} m=${code#*+}
case "$code" in [0-9]*+[0-9]*) ;; *) echo "usage: bench-ec-rdma.sh [K+M]" >&2; exit 1 ;; esac
case "$k$m" in *[!0-9]*) echo "usage: bench-ec-rdma.sh [K+M]" >&2; exit 1 ;; esac
# the daemon's limits (docs/erasure.md): 2 <= K, 1 <= M, K + M <= 8
if [ "$k" -lt 2 ] || [ "$m" -lt 1 ] || [ $((k + m)) -gt 8 ]; then
	echo "bench-ec-rdma.sh: ec $code: K >= 2, M >= 1 and K + M <= 8" >&2
	exit 1
fi
nodes=$((k + m + 1))
ec="ec $code"
top=$(mktemp -d /tmp/ec-bench.XXXXXX)
trap 'stop_nodes' EXIT
rxe_up $nodes
"$bin/ramsterctl" genkey > "$top/cluster.key" && chmod 600 "$top/cluster.key"

run=0
# bench MODE: one fresh collective, one netbench; appends "p50 p99 reads" to $top/MODE-file
bench() {
	run=$((run + 1))
	dir=$top/run$run
	mkdir "$dir"
	rxe_conf ecbench "$top/cluster.key" $nodes "7$run" 1 "dead_after_ms = 5000" \
		"high_watermark = 90%" "low_watermark = 80%" "redundancy = $1" \
		"ec_layout = $layout" > "$dir/cluster.conf"
	pids=""
	all=""
	peers=""
	for i in $(seq $nodes); do
		start n$i
		all="$all n$i"
		[ $i = 1 ] || peers="$peers --peer-socket $dir/n$i.sock"
	done
	# shellcheck disable=SC2086 # the lists are words
	all_up 120 $all || return 1
	# shellcheck disable=SC2086
	"$bin/ramster-netbench" --socket "$dir/n1.sock" $peers --pages 2048 \
		--rounds 3 --iters 300 --put-reps 1 --high 90 --memcached none --echo thread \
		--json > "$dir/net.json" 2> "$dir/net.log"
	rc=$?
	reads=$(stat n1 remote_rdma_reads)
	fb=$(stat n1 remote_rdma_read_fallbacks)
	stop_nodes
	if [ $rc -ne 0 ]; then
		tail -5 "$dir/net.log"
		fail "$1: ramster-netbench failed ($rc)"
		return 1
	fi
	set -- "$1" "$(jq -r .repat_p50_us "$dir/net.json")" "$(jq -r .repat_p99_us "$dir/net.json")"
	echo "# run $run, $1: repatriate p50 $2 us, p99 $3 us; one-sided reads $reads, fallbacks $fb"
	echo "$2 $3" >> "$top/$(echo "$1" | tr ' +' '__')"
	# replicas 1 and the page layout read one-sided; a stripe slot by message
	[ "${reads:-0}" -gt 0 ] || [ "$1 $layout" = "$ec stripes" ] || fail "$1: no one-sided read"
}
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

for pass in 1 2 3; do
	for mode in "replicas 1" "$ec"; do
		step "pass $pass: $mode"
		bench "$mode" || finish bench-ec-rdma n1
	done
done
ef=$top/$(echo "$ec" | tr ' +' '__')
r1=$(cut -d' ' -f1 "$top/replicas_1" | median)
e1=$(cut -d' ' -f1 "$ef" | median)
r9=$(cut -d' ' -f2 "$top/replicas_1" | median)
e9=$(cut -d' ' -f2 "$ef" | median)
echo "# repatriate over soft-RoCE, $nodes nodes, ec_layout = $layout, medians of 3 runs a mode:"
echo "#   replicas 1: p50 $r1 us, p99 $r9 us"
echo "#   $ec:     p50 $e1 us, p99 $e9 us"
awk -v c="$ec" -v e="$e1" -v r="$r1" -v e9="$e9" -v r9="$r9" 'BEGIN {
	printf "#   %s / replicas 1: p50 %.2f (issue 25: <= 1.5 for ec 4+2), p99 %.2f\n", c, e / r, e9 / r9 }'
finish bench-ec-rdma n1
