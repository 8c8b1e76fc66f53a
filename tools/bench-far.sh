#!/usr/bin/env bash
# bench-far.sh BIN - far memory against the kernel's own answer: the same
# workload (tools/far-workload.c: a sequential scan and a random 4 KiB access
# loop over a working set 4x the resident budget) under
# `ramster-run --resident X` and in a memory cgroup limited to X that swaps to
# zram (/dev/zram1, cgroup v1 memory.limit_in_bytes). Prints time and fault
# latency side by side, the medians of RAMSTER_FAR_RUNS runs (default 3), and
# the ratio against zram; the floor: the sequential scan at least 0.5x zram's
# speed. zram needs root, /dev/zram1 unused and the v1 memory controller: when
# missing, says SKIP and prints ramster's figures alone. Exits 0 unless a run
# crashed or read wrong data. docs/far-memory.md explains the figures.
set -u
bin=${1:-build/bin}
bin=$(cd "$bin" && pwd)
work=$bin/../tools/far-workload
X_MB=${RAMSTER_FAR_RESIDENT_MB:-32}
WS_MB=$((4 * X_MB))
RUNS=${RAMSTER_FAR_RUNS:-3}
ZRAM=/dev/zram1
CG=/sys/fs/cgroup/memory
dir=$(mktemp -d /tmp/ramster-farbench.XXXXXX) || exit 1
daemon=
zram_on=
cg_made=

cleanup() {
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
	[ -n "$cg_made" ] && rmdir "$CG/ramster-farbench" 2>/dev/null
	if [ -n "$zram_on" ]; then
		swapoff "$ZRAM" 2>/dev/null
		echo 1 >/sys/block/zram1/reset 2>/dev/null
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== far memory: ramster-run vs a memory cgroup swapping to zram (resident ${X_MB} MiB, working set ${WS_MB} MiB)"
[ -x "$work" ] || { echo "bench-far: $work missing (make bench builds it)"; exit 1; }

"$bin/ramsterd" --socket "$dir/sock" --local-mb $((WS_MB * 4)) --log-level warn >"$dir/node.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$dir/sock" ] && break; sleep 0.05; done
[ -S "$dir/sock" ] || { cat "$dir/node.log"; echo "bench-far: ramsterd did not start"; exit 1; }

# field NAME LINE
field() { tr ' ' '\n' <<<"$2" | awk -F= -v n="$1" '$1 == n {print $2}'; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]; else print ""}'; }

# runs BACKEND MODE: RUNS lines of far-workload into $dir/BACKEND.MODE
runs() {
	local be=$1 mode=$2 r
	: >"$dir/$be.$mode"
	for r in $(seq "$RUNS"); do
		case $be in
		ramster)
			"$bin/ramster-run" --socket "$dir/sock" --resident "${X_MB}M" -- \
				"$work" "$mode" "$WS_MB" >>"$dir/$be.$mode" || return 1 ;;
		zram)
			sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh \
				"$CG/ramster-farbench" "$work" "$mode" "$WS_MB" >>"$dir/$be.$mode" || return 1 ;;
		esac
	done
}

# stat BACKEND MODE NAME: the median of NAME over the runs
stat() { while read -r l; do field "$3" "$l"; done <"$dir/$1.$2" | median; }

zram_skip=
if [ "$(id -u)" != 0 ]; then
	zram_skip="not root"
elif [ ! -b "$ZRAM" ] || [ ! -w /sys/block/zram1/disksize ]; then
	zram_skip="no $ZRAM"
elif [ "$(cat /sys/block/zram1/disksize)" != 0 ] || grep -q "^$ZRAM " /proc/swaps; then
	zram_skip="$ZRAM is in use"
elif [ ! -w "$CG/memory.limit_in_bytes" ]; then
	zram_skip="no cgroup v1 memory controller at $CG"
fi
if [ -z "$zram_skip" ]; then
	if echo $((WS_MB * 2))M >/sys/block/zram1/disksize && mkswap "$ZRAM" >/dev/null &&
		swapon -p 32767 "$ZRAM"; then
		zram_on=1
		mkdir -p "$CG/ramster-farbench" && cg_made=1
		echo $((X_MB << 20)) >"$CG/ramster-farbench/memory.limit_in_bytes" &&
			echo 100 >"$CG/ramster-farbench/memory.swappiness" 2>/dev/null
		[ -n "$cg_made" ] || zram_skip="could not make the cgroup"
	else
		zram_skip="could not set up swap on $ZRAM"
	fi
fi
[ -n "$zram_skip" ] && echo "bench-far: SKIP zram baseline: $zram_skip"

for mode in seq rand; do
	runs ramster $mode || { echo "bench-far: the ramster run of $mode failed"; exit 1; }
	[ -z "$zram_skip" ] && { runs zram $mode || { echo "bench-far: the zram run of $mode failed"; exit 1; }; }
done

printf '%-6s %-8s %10s %10s %12s %12s\n' mode backend secs faults p50_us p99_us
for mode in seq rand; do
	for be in ramster zram; do
		[ -s "$dir/$be.$mode" ] || continue
		printf '%-6s %-8s %10s %10s %12s %12s\n' $mode $be "$(stat $be $mode secs)" \
			"$(stat $be $mode faults)" "$(stat $be $mode fault_p50_us)" "$(stat $be $mode fault_p99_us)"
	done
done
if [ -z "$zram_skip" ]; then
	echo "ratio (zram secs / ramster secs: above 1, ramster is faster):"
	for mode in seq rand; do
		r=$(awk -v a="$(stat zram $mode secs)" -v b="$(stat ramster $mode secs)" 'BEGIN {printf "%.2f", a / b}')
		floor=
		[ $mode = seq ] && floor=$(awk -v r="$r" 'BEGIN {print (r >= 0.5) ? "PASS (floor 0.5)" : "BELOW (floor 0.5)"}')
		echo "  $mode: ${r}x $floor"
	done
fi
exit 0
