# shellcheck shell=bash disable=SC2154  # bin, nodes, pids: set by the script that sources this
# bench-nodes.sh - sourced by the benchmarks that run daemons on this machine
# (bench.sh, bench-collective.sh, bench-ec.sh): the pinning, the start of a
# collective, the liveness check and the stop, written once.
#
# The caller sets, before use: bin (the binaries' directory), nodes (the node
# names, alpha first), pids=() and a function die MESSAGE that exits; and
# calls bench_pin NAME once. RAMSTER_BENCH_CPU pins every process it starts
# to that CPU list (taskset).

# bench_pin NAME: pin=() or pin=(taskset -c LIST) from RAMSTER_BENCH_CPU
bench_pin() {
	pin=()
	[ -n "${RAMSTER_BENCH_CPU:-}" ] || return 0
	command -v taskset >/dev/null || { echo "$1: RAMSTER_BENCH_CPU needs taskset" >&2; exit 1; }
	pin=(taskset -c "$RAMSTER_BENCH_CPU")
}

# bench_alive: 0 when every daemon still runs, else prints the first that died
bench_alive() {
	local i
	for i in "${!pids[@]}"; do
		kill -0 "${pids[$i]}" 2>/dev/null || { echo "${nodes[$i]}"; return 1; }
	done
	return 0
}

# bench_start CONF RUNDIR WHAT: every node of CONF, each logging to RUNDIR/NAME.log,
# then wait (15 s at most) until alpha sees every other node up; WHAT prefixes errors
bench_start() {
	local conf=$1 run=$2 what=$3 n up=0 dead want=$((${#nodes[@]} - 1))

	for n in "${nodes[@]}"; do
		"${pin[@]}" "$bin/ramsterd" --config "$conf" --node "$n" --log-level notice \
			2>"$run/$n.log" &
		pids+=($!)
	done
	for _ in $(seq 150); do
		dead=$(bench_alive) || die "${what}ramsterd $dead exited at start-up"
		up=$("$bin/ramsterctl" --socket "$run/alpha.sock" peers 2>/dev/null | grep -c ' up ')
		[ "$up" -ge "$want" ] && return 0
		sleep 0.1
	done
	die "${what}alpha saw $up of $want peers up within 15 s"
}

# bench_stop: TERM every daemon, KILL what is left after 5 s, reap them
bench_stop() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do
		for _ in $(seq 50); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	pids=()
}
