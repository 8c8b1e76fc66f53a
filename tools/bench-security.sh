#!/usr/bin/env bash
# bench-security.sh BIN_DIR - the cost of sealed pages and AEAD links, in `make bench`.
#
# Runs the collective benchmark (tools/bench-collective.sh: repatriate latency
# and remotify throughput on a 3-node collective on this machine) with
# link_security = secure (the default: links AEAD-sealed, pages sealed by
# their owner) and = integrity (MAC only), and, when RAMSTER_BENCH_BASE_BIN
# names the bin directory of a build from before the sealing (e.g. main
# before issue 12, built elsewhere), with it too: each variant REPS times,
# interleaved (base, secure, integrity, base, ...), medians reported. Prints
# the ratios against the floors (repatriate p50 <= 1.1 x, remotify pages/s
# >= 0.85 x the previous build; without a base build, against integrity
# mode). A report, not a test. Environment (besides bench-collective.sh's):
#   RAMSTER_BENCH_BASE_BIN   the previous build's bin dir (none: no A/B)
#   RAMSTER_BENCH_SEC_REPS   runs of each variant (default 2)
set -u
bin=${1:-build/bin}
base=${RAMSTER_BENCH_BASE_BIN:-}
reps=${RAMSTER_BENCH_SEC_REPS:-2}
here=$(dirname "$0")
out=$(mktemp -d /tmp/ramster-benchsec.XXXXXX) || exit 1
trap 'rm -rf "$out"' EXIT

variants=(secure integrity)
[ -n "$base" ] && variants=(base secure integrity)
if [ -n "$base" ] && [ ! -x "$base/ramsterd" ]; then
	echo "bench-security: RAMSTER_BENCH_BASE_BIN=$base has no ramsterd" >&2
	exit 1
fi

for r in $(seq "$reps"); do
	for v in "${variants[@]}"; do
		echo "== bench-security: run $r/$reps, $v" >&2
		case $v in
		base) b=$base extra= ;;
		secure) b=$bin extra="link_security = secure" ;;
		integrity) b=$bin extra="link_security = integrity" ;;
		esac
		RAMSTER_BENCH_CLUSTER=$extra RAMSTER_BENCH_JSON="$out/$v.$r.json" \
			"$here/bench-collective.sh" "$b" >"$out/$v.$r.log" 2>&1 ||
			{ echo "bench-security: $v run $r failed:" >&2; tail -20 "$out/$v.$r.log" >&2; exit 1; }
	done
done

# median of a JSON key over a variant's runs
med() {
	local v=$1 k=$2 f
	for f in "$out/$v".*.json; do
		sed -n "s/.*\"$k\": *\([-0-9.eE+]*\).*/\1/p" "$f"
	done | sort -g | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.3f", a / b }'; }
verdict() {
	awk -v v="$1" -v f="$2" -v dir="$3" 'BEGIN {
		if (v == "n/a") { print "n/a"; exit }
		ok = dir == "le" ? v + 0 <= f + 0 : v + 0 >= f + 0
		print ok ? "PASS" : "BELOW"
	}'
}

echo "== security cost: medians of $reps runs a variant (repatriate p50/p99 us, remotify pages/s)"
printf '  %-12s %10s %10s %12s\n' variant repat_p50 repat_p99 remotify_pps
for v in "${variants[@]}"; do
	printf '  %-12s %10s %10s %12s\n' "$v" "$(med "$v" repat_p50_us)" "$(med "$v" repat_p99_us)" \
		"$(med "$v" remotify_pps)"
done
ref=integrity
[ -n "$base" ] && ref=base
rp=$(ratio "$(med secure repat_p50_us)" "$(med $ref repat_p50_us)")
rr=$(ratio "$(med secure remotify_pps)" "$(med $ref remotify_pps)")
echo "floors (secure against $ref, same run):"
printf '  %-48s %6s  %s\n' "repatriate p50 <= 1.1 x" "$rp" "$(verdict "$rp" 1.1 le)"
printf '  %-48s %6s  %s\n' "remotify pages/s >= 0.85 x" "$rr" "$(verdict "$rr" 0.85 ge)"
if [ -n "$base" ]; then
	echo "  integrity against base: repatriate p50 $(ratio "$(med integrity repat_p50_us)" \
		"$(med base repat_p50_us)"), remotify $(ratio "$(med integrity remotify_pps)" \
		"$(med base remotify_pps)")"
else
	echo "  (no previous build: set RAMSTER_BENCH_BASE_BIN for the A/B against it)"
fi
exit 0
