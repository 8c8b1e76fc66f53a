#!/usr/bin/env bash
# bench-ec.sh BIN_DIR - what redundancy costs and buys (`make bench`, issue 25):
# replicas 1, replicas 2, replicas 3 and ec 4+2 measured in one run on the
# same data.
#
# For each mode: a fresh 7-node collective on this machine (alpha + 6 peers on
# 127.0.0.1..7, tools/cluster-conf.sh with NODES=7, generated key; the line
# "redundancy = ..." the only difference), then ramster-netbench against alpha
# with all 6 peer sockets: the same pages (its text pages, seed 1, the same
# --pages count) into persistent pools (netbench's pools are always
# persistent, and ec applies to persistent pages only: ephemeral ones keep one
# copy), so every remote page is kept as the mode says. It collects:
#   - repatriate p50/p99: a get of a page held by the peers (netbench's repat_*:
#     the medians of its rounds' p50 and p99);
#   - remotify pages/s while active and the client's batched put rate (netbench's
#     remotify_pps and put_pps: medians of its put phases);
#   - the RAM the collective spends on a remote page: the sum over the 6 peers of
#     foreign_ram (and of foreign_bytes) over alpha's tier_remote_pages, which
#     netbench reads at the end of its run, the measured pool still in place;
#     holders a page = the sum of the peers' foreign_pages over tier_remote_pages
#     (N copies, or K+M fragments) checks that like is compared with like.
# The modes run in turn, PASSES times over (a shared machine's noise lands in
# one pass, not in one mode); each figure is the median over the passes.
# Then it prints a table and the ratios against the goals (PASS/BELOW):
#   RAM a page, ec 4+2 / replicas 3 <= 0.55;  repatriate p50, ec 4+2 / replicas 1 <= 1.5.
# A report, not a test: it exits 0 unless a node crashed or a page read back
# wrong or missing. Stops every process it started. About 3 minutes on 2 cores.
# Environment:
#   RAMSTER_BENCH_EC          0: skip (default 1)
#   RAMSTER_BENCH_EC_MODES    the modes, default "replicas 1,replicas 2,replicas 3,ec 4+2,
#                             ec 4+2 extra 1,ec 4+2 stripes" (the goals need replicas 1,
#                             replicas 3 and an ec mode; "ec K+M extra E" adds ec_read_extra =
#                             E: reads ask K+E holders and use the first K answers, EC-Cache's
#                             late binding; "ec K+M stripes" adds ec_layout = stripes, the
#                             default: K pages coded together, a healthy read asks one
#                             holder; the other ec modes add ec_layout = pages)
#   RAMSTER_BENCH_EC_PASSES   passes over the modes, medians reported (default 3)
#   RAMSTER_BENCH_EC_LOCAL_MB alpha's local tier (default 16)
#   RAMSTER_BENCH_EC_PAGES    pages a put phase (default 8x the tier's frames: 32768)
#   RAMSTER_BENCH_ROUNDS      latency rounds a run (default here 5)
#   RAMSTER_BENCH_ITERS       timed gets a round (default 1000)
#   RAMSTER_BENCH_PUT_REPS    put phases a run (default here 2)
#   RAMSTER_BENCH_CPU         pin every process to this CPU list (taskset), e.g. 0
#   RAMSTER_BENCH_EC_KEEP     a directory: keep each run's netbench JSON and log and
#                             alpha's counters there (net-PASS-MODE.json, ...)
set -u
command -v jq >/dev/null || { echo "$0: jq missing (tools/deps.sh installs it): the figures are read from JSON with it" >&2; exit 1; }

if [ "${RAMSTER_BENCH_EC:-1}" = 0 ]; then
	echo "== redundancy (bench-ec.sh): skipped (RAMSTER_BENCH_EC=0)"
	exit 0
fi

bin=${1:-build/bin}
local_mb=${RAMSTER_BENCH_EC_LOCAL_MB:-16}
pages=${RAMSTER_BENCH_EC_PAGES:-$((local_mb * 256 * 8))}
rounds=${RAMSTER_BENCH_ROUNDS:-5}
iters=${RAMSTER_BENCH_ITERS:-1000}
put_reps=${RAMSTER_BENCH_PUT_REPS:-2}
passes=${RAMSTER_BENCH_EC_PASSES:-3}
IFS=, read -r -a modes <<<"${RAMSTER_BENCH_EC_MODES:-replicas 1,replicas 2,replicas 3,ec 4+2,ec 4+2 extra 1,ec 4+2 stripes}"
keep=${RAMSTER_BENCH_EC_KEEP:-}
nnodes=7
high=90
low=80
# seven daemons share this machine's cores with the client: a stall longer
# than dead_after_ms would make a peer look dead and start repairs (more
# copies, more RAM) in the middle of a measurement, so 3 s here
dead_after_ms=3000
request_timeout_ms=5000
# shellcheck source=tools/bench-nodes.sh
. "$(dirname "$0")/bench-nodes.sh"
bench_pin bench-ec
nodes=(alpha beta gamma delta epsilon zeta eta)
pids=()
dir=$(mktemp -d /tmp/ramster-bench-ec.XXXXXX) || exit 1
run=

cleanup() {
	bench_stop
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
	local n
	echo "bench-ec: $*" >&2
	if [ -n "$run" ]; then
		for n in "${nodes[@]}"; do
			[ -s "$run/$n.log" ] && { echo "--- $n log:" >&2; tail -10 "$run/$n.log" >&2; }
		done
	fi
	exit 1
}

for b in ramsterd ramsterctl ramster-netbench; do
	[ -x "$bin/$b" ] || die "no $bin/$b (run make first)"
done
[ -z "$keep" ] || mkdir -p "$keep" || die "cannot make $keep"
"$bin/ramsterctl" genkey >"$dir/cluster.key" || die "ramsterctl genkey failed"
chmod 600 "$dir/cluster.key"

# stat FILE NAME: a counter from a saved `ramsterctl stats` (0 if absent)
stat() {
	awk -v k="$2" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$1"
}

# figures I: one line of the mode's figures, space-separated ("-" for none)
figures() {
	local run="$dir/$1" s="$dir/$1/alpha.stats"
	jq -r --argjson placed "$(stat "$s" remote_pages_placed)" \
		--argjson copies "$(stat "$s" remote_copies_placed)" \
		--argjson frags "$(stat "$s" remote_ec_fragments_placed)" \
		--argjson ecgets "$(stat "$s" remote_ec_gets)" \
		--argjson degr "$(stat "$s" remote_ec_degraded_reads)" \
		--argjson fallb "$(stat "$s" remote_ec_fallback_copies)" '
		def sum(re): [to_entries[] | select(.key | test(re)) | .value] | add // 0;
		def r(x; d): if x == null then "-" else (x * d | round / d | tostring) end;
		sum("^peer[0-9]+_foreign_pages$") as $fp
		| sum("^peer[0-9]+_foreign_bytes$") as $fb
		| sum("^peer[0-9]+_foreign_ram$") as $fr
		| sum("^peer[0-9]+_foreign_used$") as $fu
		| sum("^peer[0-9]+_left_after_destroy[0-9]+$") as $left
		| .remote_pages as $rp
		| [r(.repat_p50_us; 10), r(.repat_p99_us; 10), r(.remotify_pps; 1), r(.put_pps; 1),
		   $rp, $fp, $fb, $fr,
		   (if $rp > 0 then r($fp / $rp; 100) else "-" end),
		   (if $rp > 0 then r($fb / $rp; 1) else "-" end),
		   (if $rp > 0 then r($fr / $rp; 1) else "-" end),
		   r((.repat_remote_frac // 0) * 100; 10), .repat_remote, .compression,
		   $placed, $copies, $frags, $ecgets, $degr, $fallb, $left, .errors,
		   (.replica_records // "-"), (.replica_bytes // "-"),
		   (if $rp > 0 and .replica_bytes != null then r(.replica_bytes / $rp; 1) else "-" end),
		   (if $rp > 0 and $fu > 0 then r($fu / $rp; 1) else "-" end)]
		| map(tostring) | join(" ")' "$run/net.json"
}

declare -A F1 # PASS-I: one run's figures
# one_mode PASS I MODE: a fresh collective under MODE, netbench against it; its JSON,
# log and alpha's counters kept in $dir/PASS-I
redundancy_of() { # the mode's redundancy line: "ec 4+2 extra 1" and "ec 4+2 stripes" are ec 4+2
	local m=${1% extra *}
	echo "${m% stripes}"
}

one_mode() {
	local pass=$1 idx=$2 mode=$3 t0 up dead rc n base peer_args=() extra=()

	run="$dir/$pass-$idx"
	mkdir "$run" || die "mkdir $run"
	cp "$dir/cluster.key" "$run/cluster.key"
	base=$((8400 + RANDOM % 500))
	# "ec K+M extra E": that code, reads asking E holders more than K (ec_read_extra)
	[[ $mode == *" extra "* ]] && extra=("ec_read_extra = ${mode##* extra }")
	# "ec K+M stripes": that code across K pages (ec_layout = stripes)
	[[ $mode == *" stripes" ]] && extra+=("ec_layout = stripes")
	# any other ec mode: each page coded alone (ec_layout = pages; stripes are the default)
	[[ $mode == ec* && $mode != *" stripes" ]] && extra+=("ec_layout = pages")
	NODES=$nnodes "$(dirname "$0")/cluster-conf.sh" "$run" "bench-ec" "$base" "$local_mb" \
		"dead_after_ms = $dead_after_ms" "request_timeout_ms = $request_timeout_ms" \
		"high_watermark = $high%" "low_watermark = $low%" "redundancy = $(redundancy_of "$mode")" \
		${extra[@]+"${extra[@]}"} \
		>"$run/cluster.conf" || die "cannot write the cluster file"
	t0=$SECONDS
	bench_start "$run/cluster.conf" "$run" "$mode: "
	for n in "${nodes[@]:1}"; do peer_args+=(--peer-socket "$run/$n.sock"); done
	"${pin[@]}" "$bin/ramster-netbench" --socket "$run/alpha.sock" "${peer_args[@]}" \
		--pages "$pages" --rounds "$rounds" --iters "$iters" --put-reps "$put_reps" \
		--high "$high" --memcached none --echo thread --json \
		>"$run/net.json" 2>"$run/net.log"
	rc=$?
	dead=$(bench_alive) || die "$mode: ramsterd $dead died during the benchmark"
	"$bin/ramsterctl" --socket "$run/alpha.sock" stats >"$run/alpha.stats" ||
		die "$mode: ramsterctl stats failed"
	if [ -n "$keep" ]; then
		cp "$run/net.json" "$keep/net-$pass-$idx.json"
		cp "$run/net.log" "$keep/net-$pass-$idx.log"
		cp "$run/alpha.stats" "$keep/alpha-$pass-$idx.stats"
	fi
	if [ $rc -eq 2 ]; then
		grep -m1 "ramster-netbench:" "$run/net.log" >&2
		die "$mode: ramster-netbench refused its arguments (a RAMSTER_BENCH_* value out of range?)"
	elif [ $rc -ne 0 ]; then
		tail -15 "$run/net.log" >&2
		die "$mode: ramster-netbench failed ($rc):" \
			"$(jq -r '.errors // "?"' "$run/net.json" 2>/dev/null) pages read back wrong or missing"
	fi
	bench_stop
	run=
	F1[$pass-$idx]=$(figures "$pass-$idx") || die "$mode: cannot read its figures"
	set -- ${F1[$pass-$idx]}
	printf '   pass %u, %-14s %3u s: repatriate p50 %s us, remotify %s pages/s, RAM %s B/page\n' \
		"$pass" "$mode" $((SECONDS - t0)) "$1" "$3" "${11}"
}

echo "== redundancy: alpha (local_mb $local_mb) + 6 peers on 127.0.0.1..$nnodes;" \
	"$pages text pages a put phase into persistent pools, $put_reps put phases," \
	"$rounds rounds x $iters gets; $passes passes over the modes${RAMSTER_BENCH_CPU:+, pinned to CPU $RAMSTER_BENCH_CPU}"
t_start=$SECONDS
for pass in $(seq "$passes"); do
	idx=0
	for mode in "${modes[@]}"; do
		idx=$((idx + 1))
		one_mode "$pass" "$idx" "$mode"
	done
done

# ---- the figures of each mode ----------------------------------------------------------
# a mode's figures over the passes: the median of each (the lower middle of an even
# count), the largest of the counts that should be 0 (degraded, fallback, left, errors)
declare -A F
idx=0
for mode in "${modes[@]}"; do
	idx=$((idx + 1))
	F[$mode]=$(for pass in $(seq "$passes"); do echo "${F1[$pass-$idx]}"; done | awk -v OFMT=%.10g -v CONVFMT=%.10g '
		{ for (i = 1; i <= NF; i++) v[i, NR] = $i; nf = NF }
		END {
			for (i = 1; i <= nf; i++) {
				n = 0
				for (r = 1; r <= NR; r++) if (v[i, r] != "-") a[++n] = v[i, r] + 0
				if (!n) { out = out (i > 1 ? " " : "") "-"; continue }
				for (x = 2; x <= n; x++)
					for (y = x; y > 1 && a[y - 1] > a[y]; y--) { t = a[y]; a[y] = a[y - 1]; a[y - 1] = t }
				m = (i >= 19 && i <= 22) ? a[n] : a[int((n + 1) / 2)]
				out = out (i > 1 ? " " : "") m
			}
			print out
		}')
done

# row MODE "FMT..." VALUE...: one line of a table, each value in its printf format
# (width.precision f), "-" as it is
row() {
	local mode=$1 fmts=$2
	shift 2
	awk -v mode="$mode" -v fmts="$fmts" -v vals="$*" 'BEGIN {
		n = split(fmts, f, " "); split(vals, v, " ")
		line = sprintf("%-14s", mode)
		for (i = 1; i <= n; i++) {
			w = f[i]; sub(/\..*/, "", w)
			line = line " " ((v[i] == "-" || v[i] == "") ? sprintf("%" w "s", "-") \
				: sprintf("%" f[i], v[i]))
		}
		print line
	}'
}

echo
echo "== redundancy summary: $pages text pages a put phase (the same pages in every mode)," \
	"persistent pools; latency medians of $rounds rounds x $iters gets; rates medians of" \
	"$put_reps put phases; holders' counters at the end of the run"
printf '%-14s %8s %8s %9s %9s %7s %8s %6s %7s %7s %7s %6s\n' mode "rep p50" "rep p99" \
	"remotify" "puts" "remote" "holders" "held" "bytes" "RAM" charged owner
printf '%-14s %8s %8s %9s %9s %7s %8s %6s %7s %7s %7s %6s\n' "" us us pages/s pages/s pages \
	"pages" "/page" "B/page" "B/page" B/page B/page
for mode in "${modes[@]}"; do
	set -- ${F[$mode]}
	row "$mode" "8.1f 8.1f 9.0f 9.0f 7.0f 8.0f 6.2f 7.0f 7.0f 7.0f 6.0f" "$1" "$2" "$3" "$4" \
		"$5" "$6" "$9" "${10}" "${11}" "${26}" "${25}"
done
echo "(remote: alpha's tier_remote_pages; holders pages: the sum of the 6 peers' foreign_pages"
echo " (copies, or fragments); held/page: that over remote; bytes, RAM, charged B/page: the sum"
echo " of the peers' foreign_bytes, foreign_ram, foreign_used over remote, read at the same"
echo " moment, the same pages in every mode (foreign_ram counts whole 256 KiB arena chunks,"
echo " foreign_used the budget's charge: bytes + records, no chunk tails); owner: alpha's replica"
echo " table (tier_replica_bytes: chunks of 4096 records, never shrunk) over remote, not in RAM)"
echo
echo "alpha's counters (cumulative over the run) and checks:"
printf '%-14s %8s %8s %8s %8s %8s %8s %8s %6s %6s\n' mode placed copies ec_frags ec_gets \
	degraded fallback "remote%" comp left
for mode in "${modes[@]}"; do
	set -- ${F[$mode]}
	row "$mode" "8.0f 8.0f 8.0f 8.0f 8.0f 8.0f 8.1f 6.2f 6.0f" "${15}" "${16}" "${17}" \
		"${18}" "${19}" "${20}" "${12}" "${14}" "${21}"
done
echo "(placed: remote_pages_placed; copies: remote_copies_placed; ec_frags: ec_fragments_placed;"
echo " degraded: ec_degraded_reads; fallback: ec_fallback_copies; remote%: timed remote gets"
echo " that were remote; comp: alpha's compression; left: pages left on the peers after a"
echo " pool destroy, all phases)"
# like for like: every remote page of the run kept as its mode says (no ephemeral
# page, no ec page placed as copies), the holders holding exactly that
for mode in "${modes[@]}"; do
	set -- ${F[$mode]}
	case $mode in
	*" stripes")
		# K pages and M parity a stripe (a short one: fewer pages, the same M):
		# at least (K+M)/K fragments a page, at most 1+M
		set -- "$@"
		km=$(redundancy_of "$mode")
		ok=$(echo "${km#ec }" | awk -F+ -v p="${15}" -v n="${17}" -v f="${20}" -v l="${21}" '{
			k = $1; m = $2
			print (p > 0 && n >= p * (k + m) / k - 0.5 && n <= p * (1 + m) && f == 0 &&
			       l == 0) ? "yes" : "NO" }')
		echo "  $mode: (K+M)/K to 1+M fragments a page placed, no fallback, nothing left over: $ok"
		continue ;;
	"ec "*) want=$(redundancy_of "$mode" | awk '{ sub(/^ec /, ""); split($0, a, "+"); print a[1] + a[2] }') n=${17} ;;
	*) want=${mode#replicas } n=${16} ;;
	esac
	ok=$(awk -v p="${15}" -v n="$n" -v w="$want" -v h="$9" -v f="${20}" -v l="${21}" 'BEGIN {
		print (p > 0 && n == p * w && h == w && f == 0 && l == 0) ? "yes" : "NO" }')
	echo "  $mode: $want holders a page placed and held, no fallback, nothing left over: $ok"
done

# ratio A B: A / B to 3 places ("" when either is missing or B is 0)
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a == "" || a == "-" || b == "" || b == "-" || b + 0 == 0) print ""
		else printf "%.3f", a / b }'
}
verdict() {
	awk -v v="$1" -v f="$2" 'BEGIN {
		if (v == "") { print "n/a"; exit }
		print (v + 0 <= f + 0) ? "PASS" : "BELOW"
	}'
}
field() { # field MODE N: the mode's Nth figure ("" if the mode was not run)
	[ -n "${F[$1]+x}" ] || { echo ""; return; }
	echo "${F[$1]}" | awk -v n="$2" '{ print $n }'
}
echo
echo "goals:"
ecs=()
for mode in "${modes[@]}"; do [[ $mode == ec* && $mode != *" extra "* ]] && ecs+=("$mode"); done
[ ${#ecs[@]} -gt 0 ] || ecs=("ec 4+2")
for ec in "${ecs[@]}"; do
	r=$(ratio "$(field "$ec" 11)" "$(field "replicas 3" 11)")
	printf '  %-52s %6s  %s\n' "RAM a remote page, $ec / replicas 3 <= 0.55" "${r:-n/a}" \
		"$(verdict "$r" 0.55)"
	rb=$(ratio "$(field "$ec" 10)" "$(field "replicas 3" 10)")
	ru=$(ratio "$(field "$ec" 26)" "$(field "replicas 3" 26)")
	echo "    (the same ratio by foreign_used, no chunk tails: ${ru:-n/a}; by foreign_bytes: ${rb:-n/a})"
	r=$(ratio "$(field "$ec" 1)" "$(field "replicas 1" 1)")
	printf '  %-52s %6s  %s\n' "repatriate p50, $ec / replicas 1 <= 1.5" "${r:-n/a}" \
		"$(verdict "$r" 1.5)"
	echo "    (p99: $(r=$(ratio "$(field "$ec" 2)" "$(field "replicas 1" 2)"); echo "${r:-n/a}");" \
		"remotify pages/s: $(ratio "$(field "$ec" 3)" "$(field "replicas 1" 3)") of replicas 1's," \
		"$(r=$(ratio "$(field "$ec" 3)" "$(field "replicas 3" 3)"); echo "${r:-n/a}") of replicas 3's)"
done
for mode in "${modes[@]}"; do
	[[ $mode == *" extra "* ]] || continue
	r=$(ratio "$(field "$mode" 1)" "$(field "replicas 1" 1)")
	r99=$(ratio "$(field "$mode" 2)" "$(field "replicas 1" 2)")
	echo "  (EC-Cache's late binding, $mode: repatriate p50 ${r:-n/a}, p99 ${r99:-n/a} of replicas 1's)"
done
echo "bench-ec: $((SECONDS - t_start)) s"
exit 0
