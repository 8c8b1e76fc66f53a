#!/usr/bin/env bash
# perf-check.sh BIN_DIR - a guard against CPU and latency regressions
# (`make perf-check`, a stage of .ci/run; issue 20). Two parts, both with the
# defaults a user gets:
#
#  1. idle cost: tests/integration/test_idle.sh (a single node under 1 % of a
#     core, each node of an idle 3-node collective under 2 %, also after a
#     burst of work), from /proc/PID/stat;
#  2. a short collective benchmark (tools/bench-collective.sh, 5 rounds) whose
#     ratios, each against a baseline measured in the same run, must not show
#     a clear regression:
#       repatriate p50 / ping via the node to a peer p50   <= 2.5  (make bench's floor: 1.5)
#       repatriate p50 / bare unix + tcp round trips p50    <= 10   (seen 1.6-4; 32 with the
#                                                                    idle spin of issue 20)
#       remotify pages/s / client's batched put pages/s     >= 0.5  (make bench's floor: 0.8)
#     The limits are loose on purpose: a noisy 2-core machine moves these
#     ratios by tens of percent, a regression like issue 20's by 5-30x.
#
# Exits non-zero on any failure. RAMSTER_PERF_ROUNDS (default 5) sets the
# benchmark's rounds.
set -u
bin=${1:-build/bin}
here=$(cd "$(dirname "$0")" && pwd)
json=$(mktemp /tmp/ramster-perf.XXXXXX)
trap 'rm -f "$json"' EXIT
bad=0

echo "== perf-check 1/2: idle cost (tests/integration/test_idle.sh)"
RAMSTER_BIN=$bin "$here/../tests/integration/test_idle.sh" || bad=1

echo
echo "== perf-check 2/2: a short collective benchmark (tools/bench-collective.sh)"
RAMSTER_BENCH_ROUNDS=${RAMSTER_PERF_ROUNDS:-5} RAMSTER_BENCH_ITERS=400 RAMSTER_BENCH_PUT_REPS=3 \
	RAMSTER_BENCH_JSON=$json "$here/bench-collective.sh" "$bin" >"$json.log" 2>&1
rc=$?
sed -n '/== summary/,$p' "$json.log"
if [ $rc -ne 0 ] || [ ! -s "$json" ]; then
	tail -30 "$json.log"
	echo "perf-check: the benchmark failed ($rc)"
	rm -f "$json.log"
	exit 1
fi
rm -f "$json.log"

# check NAME VALUE OP LIMIT: one ratio against its limit (OP is <= or >=)
check() {
	local verdict
	verdict=$(awk -v v="$2" -v op="$3" -v l="$4" 'BEGIN {
		if (v == "" || v == "null") { print "MISSING"; exit }
		ok = (op == "<=") ? (v + 0 <= l + 0) : (v + 0 >= l + 0)
		print ok ? "ok" : "REGRESSED" }')
	printf '  %-52s %8s %s %-5s %s\n' "$1" "$2" "$3" "$4" "$verdict"
	[ "$verdict" = ok ] || bad=1
}
j() { jq -r --arg k "$1" '.[$k] // empty' "$json"; }
rp=$(j ratio_repat_ping)
rb=$(j ratio_repat_baseline)
rr=$(awk -v a="$(j remotify_pps)" -v b="$(j put_pps)" \
	'BEGIN { if (a == "" || b == "" || b + 0 == 0) print ""; else printf "%.3f", a / b }')
echo
echo "perf-check ratios (same-run baselines):"
check "repatriate p50 / ping via the node to a peer p50" "$rp" "<=" 2.5
check "repatriate p50 / bare unix + tcp round trips p50" "$rb" "<=" 10
check "remotify pages/s / client batched puts/s" "$rr" ">=" 0.5
if [ $bad -ne 0 ]; then
	echo "perf-check: FAILED (above)"
	exit 1
fi
echo "perf-check: ok"
