#!/usr/bin/env bash
# test_far_programs.sh - unmodified programs under `ramster-run --resident 32M`
# (docs/far-memory.md): GNU sort with -S 256M and a Python program building a
# large structure give byte for byte the output of a plain run, with their peak
# RSS under 64 MiB, the shim's counters showing pages put and fetched, and the
# node's tmem_puts covering them; an exec'd child is served too.
#
# Sizes: RAMSTER_SLOW=1 runs the issue's full sizes (a 200 MB file, a 300 MB
# structure; minutes on a loaded 2-core machine); the default is 64 MB and
# 48 MB, still above the resident budget. Prints cmocka-like lines for
# tests/run-tests. Needs RAMSTER_BIN, sort, python3 and /dev/userfaultfd.
set -u
. "$(dirname "$0")/lib.sh"
lib_init test_far_programs
PROGS=$ROOT/tools/far-programs # build.py, sortgen.py
# every case's lines are its report: shown whether it passed or not
# shellcheck disable=SC2034 # read by lib.sh's run
RUN_SHOW=all

PY=$(command -v python3) || skip_all "python3 missing"
command -v sort >/dev/null || skip_all "sort missing"
[ -r /dev/userfaultfd ] && [ -w /dev/userfaultfd ] || [ "$(id -u)" = 0 ] ||
	skip_all "no access to /dev/userfaultfd"

if ldd "$BIN/../lib/libramster-preload.so" 2>/dev/null | grep -q -e libasan -e libubsan -e libtsan; then
	skip_all "the shim is a sanitizer build: it cannot be preloaded into other programs"
fi

if [ "${RAMSTER_SLOW:-0}" = 1 ]; then
	SORT_MB=200 PY_MB=300
else
	SORT_MB=64 PY_MB=48
fi

# killed at exit (lib.sh)
"$BIN/ramsterd" --socket "$T/sock" --local-mb 1024 --log-level warn >"$T/node.log" 2>&1 &
pids+=("$!")
wait_for test -S "$T/sock" ||
	{ cat "$T/node.log"; echo "[  FAILED  ] 1 test(s): ramsterd did not start"; exit 1; }

# field NAME LINE: a counter of the shim's stats line
field() { awk -v n="$1" '{for (i = 1; i < NF; i++) if ($i == n) {print $(i + 1); exit}}' <<<"$2"; }

# far NAME STATS-FILE: the counters of the program's main process (the largest puts), checked
check_far() {
	local name=$1 line puts gets failed peak
	line=$(sort -k12,12n "$2" 2>/dev/null | awk '{print}' | sort -t' ' -k24,24n | tail -1)
	line=$(awk '{for (i = 1; i < NF; i++) if ($i == "puts") print $(i + 1), $0}' "$2" | sort -n | tail -1 | cut -d' ' -f2-)
	echo "$name: $line"
	puts=$(field puts "$line"); gets=$(field gets "$line"); failed=$(field get_failed "$line")
	# pages back from the node or from the region's compressed cache of the node's copies
	gets=$((gets + $(field zcache_hits "$line")))
	peak=$(field rss_peak_kib "$line")
	[ -n "$puts" ] && [ "$puts" -gt 0 ] || { echo "$name: no page went to the node"; return 1; }
	[ "$gets" -gt 0 ] || { echo "$name: no page came back"; return 1; }
	[ "$failed" = 0 ] || { echo "$name: $failed fetches failed"; return 1; }
	[ "$peak" -lt 65536 ] || { echo "$name: peak RSS $peak KiB, not under 64 MiB"; return 1; }
	local node
	node=$("$BIN/ramsterctl" --socket "$T/sock" stats | awk '$1 == "tmem_puts" {print $2}')
	echo "$name: node tmem_puts $node"
	[ "$node" -ge "$puts" ] || { echo "$name: the node saw fewer puts ($node)"; return 1; }
}

# timed NAME FUNC: FUNC, then how long case NAME took (its last line)
timed() {
	local name=$1 t0=$SECONDS rc
	shift
	"$@"
	rc=$?
	echo "$name: $((SECONDS - t0)) s"
	return $rc
}

# A text file of SORT_MB (tools/far-programs/sortgen.py).
test_sort() {
	"$PY" "$PROGS/sortgen.py" "$T/in" "$SORT_MB" || return 1
	sort -S 256M "$T/in" >"$T/sort.plain" || return 1
	"$BIN/ramster-run" --socket "$T/sock" --resident 32M --stats "$T/sort.stats" -- \
		sort -S 256M "$T/in" >"$T/sort.far" || return 1
	cmp "$T/sort.plain" "$T/sort.far" || return 1
	echo "sort: $(stat -c %s "$T/in") bytes sorted, outputs identical"
	check_far sort "$T/sort.stats"
}

# A structure of PY_MB (tools/far-programs/build.py).
test_python() {
	"$PY" "$PROGS/build.py" "$PY_MB" >"$T/py.plain" || return 1
	"$BIN/ramster-run" --socket "$T/sock" --resident 32M --stats "$T/py.stats" -- \
		"$PY" "$PROGS/build.py" "$PY_MB" >"$T/py.far" || return 1
	cmp "$T/py.plain" "$T/py.far" || return 1
	echo "python: $(cat "$T/py.far" | head -1)"
	check_far python "$T/py.stats"
}

# exec: a shell that execs the program; the program still gets the shim.
test_exec() {
	"$BIN/ramster-run" --socket "$T/sock" --resident 32M --stats "$T/exec.stats" -- \
		sh -c "exec '$PY' -c 'x = bytearray(64 << 20); x[-1] = 1; print(x.count(1), len(x))'" \
		>"$T/exec.out" || return 1
	[ "$(cat "$T/exec.out")" = "1 67108864" ] || return 1
	grep -q "puts" "$T/exec.stats" || return 1
	line=$(awk '{for (i = 1; i < NF; i++) if ($i == "faults") print $(i + 1), $0}' "$T/exec.stats" | sort -n | tail -1 | cut -d' ' -f2-)
	echo "exec: $line"
	[ "$(field faults "$line")" -gt 0 ]
}

# bad arguments: clear errors, no run
test_bad_args() {
	! "$BIN/ramster-run" --socket "$T/sock" -- true 2>"$T/e1" && grep -q "resident" "$T/e1" &&
		! "$BIN/ramster-run" --socket "$T/sock" --resident 12Q -- true 2>"$T/e2" && grep -q "12Q" "$T/e2" &&
		! "$BIN/ramster-run" --socket "$T/nosock" --resident 32M -- true 2>"$T/e3" &&
		grep -q "cannot reach" "$T/e3"
}

run far_sort timed far_sort test_sort
run far_python timed far_python test_python
run far_exec timed far_exec test_exec
run far_bad_args timed far_bad_args test_bad_args
finish
