#!/usr/bin/env bash
# test_fault_tools.sh - the tools bench-far.sh measures with still work, so a
# `make bench` figure cannot come from a broken one: far-workload's scan and
# random access read every page back right (in a plain process and under
# `ramster-run --resident`, whose faults it must count), and uffd-floor serves
# every fault with each of its three handlers, each page read back right, and
# refuses bad arguments. Prints cmocka-like lines for tests/run-tests. Needs
# RAMSTER_BIN and userfaultfd.
set -u
. "$(dirname "$0")/lib.sh"
lib_init test_fault_tools
TOOLS=$BIN/../tools
# every case's lines are its report: shown whether it passed or not
# shellcheck disable=SC2034 # read by lib.sh's run
RUN_SHOW=all

[ -x "$TOOLS/far-workload" ] && [ -x "$TOOLS/uffd-floor" ] ||
	skip_all "no $TOOLS/far-workload or uffd-floor (make integration builds them)"
[ -r /dev/userfaultfd ] && [ -w /dev/userfaultfd ] || [ "$(id -u)" = 0 ] ||
	skip_all "no access to /dev/userfaultfd"

# field NAME LINE: NAME=value out of a tool's line
field() { tr ' ' '\n' <<<"$2" | awk -F= -v n="$1" '$1 == n {print $2}'; }

# plain: every page read back right (the tool exits 1 otherwise), every access counted
test_workload_plain() {
	local mode line
	for mode in seq rand; do
		line=$("$TOOLS/far-workload" $mode 8) || return 1
		echo "$line"
		[ "$(field mode "$line")" = $mode ] && [ "$(field accesses "$line")" -gt 0 ] || return 1
	done
}

# under ramster-run with a budget a quarter of the set: the faults are seen and timed
# (not with a sanitizer build's shim, which cannot be preloaded: test_far_programs.sh)
test_workload_far() {
	local mode line
	if ldd "$BIN/../lib/libramster-preload.so" 2>/dev/null | grep -q -e libasan -e libubsan -e libtsan; then
		echo "SKIP: the shim is a sanitizer build"
		return 0
	fi
	# killed at exit (lib.sh)
	"$BIN/ramsterd" --socket "$T/sock" --local-mb 256 --log-level warn >"$T/node.log" 2>&1 &
	pids+=("$!")
	wait_for test -S "$T/sock" || { cat "$T/node.log"; return 1; }
	for mode in seq rand; do
		line=$("$BIN/ramster-run" --socket "$T/sock" --resident 4M -- "$TOOLS/far-workload" $mode 16) || return 1
		echo "$line"
		[ "$(field faults "$line")" -gt 100 ] || { echo "too few faults for 16 MiB in 4"; return 1; }
		awk -v p="$(field fault_p50_us "$line")" 'BEGIN {exit !(p > 0)}' || return 1
	done
}

# each handler serves every fault of pages touched once in random order
test_floor() {
	local out h line n
	out=$("$TOOLS/uffd-floor" 2048)
	[ $? = 0 ] || { echo "$out"; return 1; }
	echo "$out"
	[ "$(wc -l <<<"$out")" = 3 ] || return 1
	for h in sleep spin sigbus; do
		line=$(grep "^handler=$h " <<<"$out") || { echo "no $h line"; return 1; }
		n=$(field faults "$line")
		# pages touched once each: most of 2048 (the random walk repeats some)
		[ "$n" -gt 1000 ] && [ "$n" -le 2048 ] || { echo "$h: $n faults"; return 1; }
	done
}

test_bad_args() {
	! "$TOOLS/uffd-floor" 0 2>"$T/e1" && grep -q usage "$T/e1" &&
		! "$TOOLS/uffd-floor" 12x 2>/dev/null && ! "$TOOLS/uffd-floor" 1 2 2>/dev/null &&
		! "$TOOLS/far-workload" walk 8 2>"$T/e2" && grep -q usage "$T/e2" &&
		! "$TOOLS/far-workload" seq 0 2>/dev/null
}

run workload_plain test_workload_plain
run workload_far test_workload_far
run floor test_floor
run fault_tools_bad_args test_bad_args
finish
