#!/usr/bin/env bash
# test_drills.sh - the failover drills (tools/ramster-drill.c) on a 3-node
# collective in network namespaces: kill, stop, partition and restart must
# each exit 0 (never a wrong byte; with replicas = 1 exactly the victim's
# pages lost). Skips, counted as skipped, without root or a usable `ip netns`.
# Usage: tests/integration/test_drills.sh [BIN_DIR]   (default $RAMSTER_BIN, else build/bin)
set -u
bin=${1:-${RAMSTER_BIN:-build/bin}}
drill="$bin/ramster-drill"
passed=0 failed=0 skipped=0

finish() {
	echo "$passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ]
	exit $?
}

skip_all() {
	echo "test_drills: SKIP: $1"
	skipped=4
	finish
}

[ -x "$drill" ] || skip_all "no $drill (build it with make)"
[ "$(id -u)" -eq 0 ] || skip_all "needs root (ip netns)"
command -v ip >/dev/null || skip_all "no ip command (iproute2)"
probe="rd-probe-$$"
ip netns add "$probe" 2>/dev/null || skip_all "ip netns add does not work here"
ip netns del "$probe" 2>/dev/null

before=$(ip netns list | awk '{print $1}')
for d in kill stop partition restart; do
	echo "== drill $d"
	start=$(date +%s)
	timeout -s INT 300 "$drill" --drill "$d" --nodes 3 --local-mb 2 --pages 4096 --bin "$bin"
	rc=$?
	took=$(($(date +%s) - start))
	case $rc in
	0) echo "PASS $d (${took}s)"; passed=$((passed + 1)) ;;
	77) echo "SKIP $d"; skipped=$((skipped + 1)) ;;
	*) echo "FAIL $d (exit $rc, ${took}s)"; failed=$((failed + 1)) ;;
	esac
done
# Nothing may be left behind: a namespace rd-PID-* whose drill process PID is
# gone and that was not there before we started. (A drill that another run of
# this suite has going at the same time - a sanitizer build, a second checkout -
# is alive and not ours: it is neither counted nor removed.)
ours_left() {
	local ns pid
	ip netns list | awk '{print $1}' | grep '^rd-[0-9]*-' | while read -r ns; do
		grep -qx "$ns" <<<"$before" && continue
		pid=${ns#rd-}
		pid=${pid%%-*}
		kill -0 "$pid" 2>/dev/null || echo "$ns"
	done
}
left=$(ours_left)
if [ -n "$left" ]; then
	echo "FAIL leftovers: $(echo $left)"
	failed=$((failed + 1))
	for ns in $left; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
fi
finish
