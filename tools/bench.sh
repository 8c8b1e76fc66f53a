#!/usr/bin/env bash
# bench.sh BIN_DIR - the benchmark report behind `make bench`.
#
# Starts a ramsterd on a private socket, runs ramster-bench for text and mixed
# pages (bare LZO baseline, in-process tier, daemon single calls, daemon
# batches of 64), then a 1,000,000-page in-process run for metadata, and
# prints a summary against the floors; then the collective's figures
# (tools/bench-collective.sh: a 3-node collective on 127.0.0.1..3) and what
# redundancy costs (tools/bench-ec.sh: replicas 1, 2, 3 and ec 4+2 on 7 nodes,
# RAMSTER_BENCH_EC=0 skips it). A report,
# not a test: it exits 0 unless something crashed or read back wrong data.
# Environment (see also bench-collective.sh's and bench-ec.sh's):
#   RAMSTER_BENCH_PAGES  pages a run (default 50000)
#   RAMSTER_BENCH_REPS   repetitions, medians reported (default 5)
#   RAMSTER_BENCH_BIG    pages of the metadata run (default 1000000)
#   RAMSTER_BENCH_CPU    pin daemon and bench to this CPU list (taskset), e.g. 0
#   RAMSTER_BENCH_DICTS  dicts of the real-memory heap (default 300000)
set -u
command -v jq >/dev/null || { echo "$0: jq missing (tools/deps.sh installs it): the figures are read from JSON with it" >&2; exit 1; }

bin=${1:-build/bin}
pages=${RAMSTER_BENCH_PAGES:-50000}
reps=${RAMSTER_BENCH_REPS:-5}
big=${RAMSTER_BENCH_BIG:-1000000}
bench="$bin/ramster-bench"
# shellcheck source=tools/bench-nodes.sh
. "$(dirname "$0")/bench-nodes.sh"
bench_pin bench
daemon_pid=
dir=$(mktemp -d /tmp/ramster-bench.XXXXXX) || exit 1

cleanup() {
	if [ -n "$daemon_pid" ]; then
		pids=("$daemon_pid")
		bench_stop
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
	echo "bench: $*" >&2
	[ -s "$dir/log" ] && { echo "--- ramsterd log:" >&2; tail -20 "$dir/log" >&2; }
	exit 1
}

[ -x "$bench" ] || die "no $bench (run make first)"
[ -x "$bin/ramsterd" ] || die "no $bin/ramsterd"

# room for one run's pages raw, with margin (each repetition frees its pool)
local_mb=$(( pages * 4096 / 1048576 * 2 + 64 ))
"${pin[@]}" "$bin/ramsterd" --socket "$dir/sock" --local-mb "$local_mb" --log-level warn \
	>"$dir/log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
	[ -S "$dir/sock" ] && break
	kill -0 "$daemon_pid" 2>/dev/null || die "ramsterd exited at start-up"
	sleep 0.1
done
[ -S "$dir/sock" ] || die "ramsterd socket did not appear within 10 s"

# json KEY FILE: a figure from ramster-bench's JSON report ("" if absent or null)
json() {
	jq -r --arg k "$1" '.[$k] // empty' "$2"
}

# run NAME ARGS...: one ramster-bench run, its JSON kept in $dir/NAME.json
run() {
	local name=$1 rc
	shift
	echo "== ramster-bench $*"
	"${pin[@]}" "$bench" "$@" --json >"$dir/$name.json"
	rc=$?
	cat "$dir/$name.json"
	if [ $rc -ne 0 ]; then
		kill -0 "$daemon_pid" 2>/dev/null || die "ramsterd died during $name"
		die "ramster-bench failed ($rc) in $name"
	fi
}

common=(--socket "$dir/sock" --pages "$pages" --reps "$reps")
for data in text mixed; do
	run "$data-single" "${common[@]}" --data "$data" --mode all --batch 1
	run "$data-batch" "${common[@]}" --data "$data" --mode lzo,daemon --batch 64
done
run big --pages "$big" --reps 1 --data text --mode inproc

# ---- summary -------------------------------------------------------------------
# verdict VALUE FLOOR ge|le: PASS or BELOW
verdict() {
	awk -v v="$1" -v f="$2" -v op="$3" 'BEGIN {
		if (v == "") { print "n/a"; exit }
		ok = (op == "ge") ? (v + 0 >= f + 0) : (v + 0 <= f + 0)
		print ok ? "PASS" : "BELOW"
	}'
}

echo
echo "== summary: $pages pages a run, medians of $reps; put+get pages/s (x bare LZO)" \
	"${RAMSTER_BENCH_CPU:+[pinned to CPU $RAMSTER_BENCH_CPU]}"
printf '%-6s %9s %17s %17s %17s %6s %9s %9s\n' data lzo inproc daemon-1 daemon-64 \
	comp RAM/page meta/page
for data in text mixed; do
	s="$dir/$data-single.json"
	b="$dir/$data-batch.json"
	printf '%-6s %9s %9s (%5s) %9s (%5s) %9s (%5s) %6s %9s %9s\n' "$data" \
		"$(json lzo_pps "$s")" \
		"$(json inproc_putget_pps "$s")" "$(json ratio_inproc_lzo "$s")" \
		"$(json daemon_putget_pps "$s")" "$(json ratio_daemon_lzo "$s")" \
		"$(json daemon_putget_pps "$b")" "$(json ratio_daemon_lzo "$b")" \
		"$(json daemon_compression "$b")" "$(json daemon_ram_per_page "$b")" \
		"$(json daemon_meta_per_page "$b")"
done
echo "(daemon-64's lzo baseline is its own run's; comp, RAM and meta per page: daemon, batch 64)"
echo
echo "latency, us an op p50/p99 (a batch / 64 for daemon-64)"
printf '%-6s %-7s %15s %15s\n' data mode put get
for data in text mixed; do
	for m in inproc:single daemon:single daemon:batch; do
		mode=${m%%:*}
		f="$dir/$data-${m##*:}.json"
		label=$mode
		[ "$m" = daemon:single ] && label=daemon-1
		[ "$m" = daemon:batch ] && label=daemon-64
		printf '%-6s %-9s %6s/%-8s %6s/%-8s\n' "$data" "$label" \
			"$(json "${mode}_put_p50_us" "$f")" "$(json "${mode}_put_p99_us" "$f")" \
			"$(json "${mode}_get_p50_us" "$f")" "$(json "${mode}_get_p99_us" "$f")"
	done
done
meta=$(json inproc_meta_per_page "$dir/big.json")
echo
echo "floors:"
for data in text mixed; do
	r=$(json ratio_inproc_lzo "$dir/$data-single.json")
	printf '  %-48s %-6s %6s  %s\n' "inproc put+get >= 0.8 x lzo" "$data" "$r" \
		"$(verdict "$r" 0.8 ge)"
done
for data in text mixed; do
	r=$(json ratio_daemon_lzo "$dir/$data-batch.json")
	printf '  %-48s %-6s %6s  %s\n' "daemon batch 64 put+get >= 0.6 x lzo" "$data" "$r" \
		"$(verdict "$r" 0.6 ge)"
done
printf '  %-48s %-6s %6s  %s\n' "metadata <= 64 B/stored page at $big pages" text "$meta" \
	"$(verdict "$meta" 64 le)"
echo "  (at $big pages: $(json inproc_putget_pps "$dir/big.json") put+get pages/s inproc," \
	"RAM $(json inproc_ram_per_page "$dir/big.json") B/page," \
	"compression $(json inproc_compression "$dir/big.json")x)"

# ---- real memory against zram (tools/bench-real.sh) ----
echo
"$(dirname "$0")/bench-real.sh" "$bin" || exit 1

# ---- the collective: repatriate, remotify, memcached (tools/bench-collective.sh) ----
echo
"$(dirname "$0")/bench-collective.sh" "$bin" || exit 1
echo
# ---- redundancy: replicas 1/2/3 against ec 4+2 on 7 nodes (tools/bench-ec.sh) ----
"$(dirname "$0")/bench-ec.sh" "$bin" || exit 1
echo
# the cost of sealed pages and AEAD links: secure vs integrity (vs a previous build)
"$(dirname "$0")/bench-security.sh" "$bin" || exit 1
echo
"$(dirname "$0")/bench-nbd.sh" "$bin" || exit 1 # the NBD frontend vs nbdkit memory
"$(dirname "$0")/bench-far.sh" "$bin" || exit 1 # ramster-run vs a cgroup swapping to zram
exit 0
