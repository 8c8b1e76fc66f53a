#!/usr/bin/env bash
# test_idle.sh - an idle daemon costs (almost) nothing (issue 20). With the
# defaults a user gets (no busy_poll_us, heartbeat_ms or other tuning: the
# collective is tools/cluster-conf.sh's, whose heartbeat_ms 100 and
# dead_after_ms 1000 are the defaults), each node's own CPU time over 10 s of
# idleness, from /proc/PID/stat (utime + stime), must stay under:
#   a single node without peers            1 % of a core
#   each node of an idle 3-node collective 2 % of a core
#   the same, after a burst of work         2 % (the polling window closes again)
# Before the fix an idle collective node spun 65 % of a core. A sanitizer
# build (ASan, TSan) costs several times more per heartbeat: its floors are
# 15 %, which still catches a spinning core, and it measures 4 s, not 10
# (a spinning core shows in 4 s as in 10). Needs RAMSTER_BIN.
# RAMSTER_IDLE_S sets the measured seconds (default 10; 4 in a sanitizer build).
# A window over a floor is measured twice more and the median of three counts
# (measure, below): a host that steals one window does not fail the test.
set -u
. "$(dirname "$0")/lib.sh"
lib_init test_idle
SECS=${RAMSTER_IDLE_S:-}
# every case's figures are its report: shown whether it passed or not
RUN_SHOW=all
# the nodes as a user runs them: memory locked
NODE_MEMLOCK=1

single_floor=1 coll_floor=2
if ldd "$BIN/ramsterd" 2>/dev/null | grep -qE 'lib(asan|tsan)'; then
	single_floor=15 coll_floor=15
	SECS=${SECS:-4}
	echo "(a sanitizer build: floors ${coll_floor} %, ${SECS} s)"
fi
SECS=${SECS:-10}

# ticks PID: its CPU time so far, in clock ticks (utime + stime)
ticks() {
	# the command name (field 2) may hold spaces: count from after its ')'
	sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# machine: the whole machine's busy jiffies and all jiffies so far (/proc/stat)
machine() {
	awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat
}

# threads PID: each thread's name and CPU ticks so far, a line each
threads() {
	local t
	for t in /proc/"$1"/task/*; do
		printf '%s/%s %s\n' "$(basename "$t")" "$(cat "$t/comm" 2>/dev/null)" \
			"$(sed 's/^.*) //' "$t/stat" 2>/dev/null | awk '{ print $12 + $13 }')"
	done
}

# window PID...: one window of $SECS s; sets pct[i] (% of a core) for each PID and
# prints the machine's load over it; a PID over $floor also gets its threads' shares
window() {
	local hz p i=0 m0 m1
	hz=$(getconf CLK_TCK)
	local -a t0=()
	for p in "$@"; do
		t0+=("$(ticks "$p")")
		threads "$p" >"$T/threads.$p.0"
	done
	m0=$(machine)
	sleep "$SECS"
	m1=$(machine)
	for p in "$@"; do
		local t1
		t1=$(ticks "$p") || { echo "pid $p exited"; return 1; }
		pct[$i]=$(awk -v a="${t0[$i]}" -v b="$t1" -v hz="$hz" -v s="$SECS" \
			'BEGIN { printf "%.2f", (b - a) * 100 / hz / s }')
		if ! awk -v v="${pct[$i]}" -v f="$floor" 'BEGIN { exit !(v < f) }'; then
			threads "$p" >"$T/threads.$p.1"
			echo "  pid $p over the floor (${pct[$i]} %): its threads' ticks in the window:"
			join <(sort "$T/threads.$p.0") <(sort "$T/threads.$p.1") | awk '$3 > $2 { print "    " $1, $3 - $2 }'
		fi
		i=$((i + 1))
	done
	# the machine as a whole (both cores = 200 %): a busy or noisy host shows here
	echo "$m0 $m1" | awk '{ printf "  the machine was busy %.1f %% of its time over the window\n",
		($3 - $1) * 100 / ($4 - $2) }'
}

# measure NAME FLOOR PID...: each PID's CPU over $SECS s, in % of a core; fail
# over FLOOR. A window whose figures all pass is the result (the usual case); if
# any is over the floor, two more windows are measured and each PID's median of
# the three counts: a spinning loop fails every window, while a host that stole
# one window (CI once measured 2.00 % on a node that idles at 0.3 %) does not
# fail the test. Every window's figures are printed.
measure() {
	local name=$1 floor=$2 p bad=0 w n=$(($# - 2))
	shift 2
	local -a pct=() all=()
	for w in 1 2 3; do
		window "$@" || return 1
		local i over=0
		for ((i = 0; i < n; i++)); do
			all[$((i * 3 + w - 1))]=${pct[$i]}
			echo "$name: window $w: pid ${*:i+1:1} used ${pct[$i]} % of a core over $SECS s"
			awk -v v="${pct[$i]}" -v f="$floor" 'BEGIN { exit !(v < f) }' || over=1
		done
		[ $over = 0 ] && [ $w = 1 ] && break
	done
	local i=0
	for p in "$@"; do
		local med
		if [ "$w" = 1 ]; then
			med=${all[$((i * 3))]}
		else
			med=$(printf '%s\n' "${all[$((i * 3))]}" "${all[$((i * 3 + 1))]}" \
				"${all[$((i * 3 + 2))]}" | sort -g | sed -n 2p)
		fi
		echo "$name: pid $p used $med % of a core over $SECS s$([ "$w" = 1 ] || echo " (median of 3 windows)") (floor < $floor %)"
		awk -v v="$med" -v f="$floor" 'BEGIN { exit !(v < f) }' || bad=1
		i=$((i + 1))
	done
	return $bad
}

wait_sock() {
	local _
	for _ in $(seq 100); do
		[ -S "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# ---- a single node, no peers ------------------------------------------------------
t_single() {
	"$BIN/ramsterd" --socket "$T/single.sock" --local-mb 64 --log-level notice \
		2>"$T/single.err" &
	local pid=$!
	pids+=("$pid")
	wait_sock "$T/single.sock" || { echo "no socket"; return 1; }
	sleep 1
	measure single "$single_floor" "$pid"
	local rc=$?
	"$BIN/ramsterctl" --socket "$T/single.sock" stats | grep -E '^loop_(busy|batches)'
	kill "$pid"
	wait "$pid" 2>/dev/null
	return $rc
}

# ---- a 3-node collective ---------------------------------------------------------------
coll_pids=()
start_collective() {
	local base n
	base=$(free_ports 3) || return 1
	make_key "$T/cluster.key"
	"$ROOT/tools/cluster-conf.sh" "$T" idle "$base" 8 >"$T/cluster.conf" || return 1
	for n in alpha beta gamma; do
		start_node "$T/cluster.conf" "$n" || return 1
		coll_pids+=("$last_pid")
	done
	wait_peers alpha 2 15
}

# links NAME...: each node's link and wake counters (a link re-made over and over,
# or a loop woken far more often than its heartbeats, shows here)
links() {
	local n
	for n in "$@"; do
		echo "$n:" $("$BIN/ramsterctl" --socket "$T/$n.sock" stats |
			grep -E '^(cluster_(dials|reconnects|handshakes|links_lost|links_replaced|heartbeats_sent|heartbeats_received)|loop_batches) ' |
			awk '{ printf "%s %s  ", $1, $2 }')
	done
}

t_collective() {
	start_collective || return 1
	sleep 1
	measure collective "$coll_floor" "${coll_pids[@]}"
	local rc=$?
	"$BIN/ramsterctl" --socket "$T/alpha.sock" stats | grep -E '^(loop_(busy|batches)|remote_remotify_)'
	links alpha beta gamma
	return $rc
}

# ---- after a burst of work the window closes again ---------------------------------------
t_after_work() {
	local i
	[ ${#coll_pids[@]} -eq 3 ] || { echo "no collective"; return 1; }
	for i in $(seq 200); do
		"$BIN/ramsterctl" --socket "$T/alpha.sock" ping 2 >/dev/null || {
			echo "ping $i failed"
			return 1
		}
	done
	# pages through alpha to its peers and back: remotify wakes, then dozes again
	"$BIN/ramster-bench" --socket "$T/alpha.sock" --mode daemon --pages 8192 --data text --reps 1 \
		>/dev/null 2>&1 || true
	sleep 1
	measure after-work "$coll_floor" "${coll_pids[@]}"
	local rc=$?
	"$BIN/ramsterctl" --socket "$T/alpha.sock" stats |
		grep -E '^(loop_busy|remote_remotify_|tier_remotified )'
	links alpha beta gamma
	return $rc
}

run idle_single_node t_single
run idle_collective t_collective
run idle_after_work t_after_work
finish
