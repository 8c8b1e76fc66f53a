#!/usr/bin/env bash
# bench-real.sh BIN_DIR - real process memory in the tier, against zram.
#
# tools/heapdump.py starts a python3 program building small dicts and copies
# its heap out of /proc/PID/mem; the same pages go through ramster-bench
# --file (in-process tier: zbud and dense, LZO and LZ4, each against the bare
# compressor in the same run) and, when this machine lets us (root,
# /sys/block/zram0 present and unused: disksize 0), through the kernel's zram
# (zsmalloc) with the same compressor: its mem_used_total over the same pages
# is the density to match. zram0 is reset afterwards. A report, not a test:
# exits 0 unless something crashed or read back wrong data.
# Environment:
#   RAMSTER_BENCH_REPS   repetitions, medians reported (default 5)
#   RAMSTER_BENCH_DICTS  dicts of the heap (default 300000: ~43,000 pages)
#   RAMSTER_BENCH_CPU    pin the bench to this CPU list (taskset)
set -u

bin=${1:-build/bin}
reps=${RAMSTER_BENCH_REPS:-5}
bench="$bin/ramster-bench"
pin=()
if [ -n "${RAMSTER_BENCH_CPU:-}" ]; then
	command -v taskset >/dev/null || { echo "bench-real: RAMSTER_BENCH_CPU needs taskset" >&2; exit 1; }
	pin=(taskset -c "$RAMSTER_BENCH_CPU")
fi
dir=$(mktemp -d /tmp/ramster-bench-real.XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

die() {
	echo "bench-real: $*" >&2
	exit 1
}

[ -x "$bench" ] || die "no $bench (run make first)"

json() {
	sed -n "s/.*\"$1\": *\([-0-9.eE+]*\).*/\1/p" "$2"
}

run() {
	local name=$1 rc
	shift
	echo "== ramster-bench $*"
	"${pin[@]}" "$bench" "$@" --json >"$dir/$name.json"
	rc=$?
	cat "$dir/$name.json"
	[ $rc -eq 0 ] || die "ramster-bench failed ($rc) in $name"
}

verdict() {
	awk -v v="$1" -v f="$2" -v op="$3" 'BEGIN {
		if (v == "") { print "n/a"; exit }
		ok = (op == "ge") ? (v + 0 >= f + 0) : (v + 0 <= f + 0)
		print ok ? "PASS" : "BELOW"
	}'
}

echo "== real memory: a python3 heap of ${RAMSTER_BENCH_DICTS:-300000} small dicts"
dump="$dir/heap.bin"
heap_ok=1
python3 "$(dirname "$0")/heapdump.py" "$dump" "${RAMSTER_BENCH_DICTS:-300000}" || heap_ok=0
if [ "$heap_ok" = 1 ]; then
	npages=$(( $(stat -c %s "$dump") / 4096 ))
	for alloc in zbud dense; do
		for comp in lzo lz4; do
			run "real-$alloc-$comp" --file "$dump" --pages "$npages" --reps "$reps" \
				--mode lzo,inproc --alloc "$alloc" --compressor "$comp"
		done
	done
	# zram_measure ALGO: "mem_used_total compr_data_size" for the dump, or a SKIP line
	zram_measure() {
		local z=/sys/block/zram0 algo=$1 stat
		if [ "$(id -u)" != 0 ]; then echo "SKIP: not root"; return; fi
		if [ ! -e $z ]; then echo "SKIP: no /sys/block/zram0 (modprobe zram)"; return; fi
		if [ "$(cat $z/disksize)" != 0 ]; then echo "SKIP: zram0 is in use (disksize set)"; return; fi
		if ! grep -qw "$algo" $z/comp_algorithm; then echo "SKIP: zram has no $algo"; return; fi
		echo "$algo" >$z/comp_algorithm 2>/dev/null || { echo "SKIP: cannot set $algo"; return; }
		if ! echo $((npages * 4096)) >$z/disksize 2>/dev/null; then
			echo 1 >$z/reset 2>/dev/null
			echo "SKIP: cannot size zram0"
			return
		fi
		if ! dd if="$dump" of=/dev/zram0 bs=1M oflag=direct status=none 2>/dev/null; then
			echo 1 >$z/reset
			echo "SKIP: cannot write zram0"
			return
		fi
		stat=$(cat $z/mm_stat)
		echo 1 >$z/reset
		# mm_stat: orig_data_size compr_data_size mem_used_total ...
		set -- $stat
		echo "$3 $2"
	}
	declare -A zram_bpp zram_cpp
	for comp in lzo lz4; do
		zr=$(zram_measure "$comp")
		case "$zr" in
		SKIP*) echo "zram ($comp): $zr"; zram_bpp[$comp]= ;;
		*)
			set -- $zr
			zram_bpp[$comp]=$(awk -v u="$1" -v n="$npages" 'BEGIN { printf "%.1f", u / n }')
			zram_cpp[$comp]=$(awk -v c="$2" -v n="$npages" 'BEGIN { printf "%.1f", c / n }')
			echo "zram ($comp): mem_used_total $1 B, compressed $2 B for $npages pages:" \
				"${zram_bpp[$comp]} B/page"
			;;
		esac
	done
	echo
	echo "real memory: $npages pages ($(json zero_distinct "$dir/real-dense-lzo.json") zero);" \
		"medians of $reps; RAM = frames in use + metadata, over every page"
	printf '%-6s %-4s %8s %8s %9s %9s %8s %10s %6s %6s\n' alloc comp compress pg/frame \
		"B/page" "zram B/p" "x zram" "put+get/s" "x bare" "x p50"
	for alloc in zbud dense; do
		for comp in lzo lz4; do
			f="$dir/real-$alloc-$comp.json"
			bpp=$(json inproc_ram_per_page "$f")
			zb=${zram_bpp[$comp]:-}
			x=n/a
			[ -n "$zb" ] && [ -n "$bpp" ] && x=$(awk -v a="$bpp" -v b="$zb" 'BEGIN { printf "%.2f", a / b }')
			printf '%-6s %-4s %7sx %8s %9s %9s %8s %10s %6s %6s\n' "$alloc" "$comp" \
				"$(json inproc_compression "$f")" "$(json inproc_pages_per_frame "$f")" \
				"$bpp" "${zb:-n/a}" "$x" "$(json inproc_putget_pps "$f")" \
				"$(json ratio_inproc_lzo "$f")" "$(json ratio_inproc_lzo_p50 "$f")"
		done
	done
	echo "(x bare: put+get pages/s over bare compress+decompress of the same compressor, same run;"
	echo " x p50: the same from single-op medians, blind to preemption on a busy machine;"
	echo " bare lzo $(json lzo_pps "$dir/real-dense-lzo.json") pages/s, bare lz4" \
		"$(json lzo_pps "$dir/real-dense-lz4.json") pages/s)"
	echo "floors:"
	for comp in lzo lz4; do
		bpp=$(json inproc_ram_per_page "$dir/real-dense-$comp.json")
		zb=${zram_bpp[$comp]:-}
		if [ -n "$zb" ]; then
			lim=$(awk -v b="$zb" 'BEGIN { printf "%.1f", b * 1.2 }')
			printf '  %-48s %-6s %6s  %s\n' "dense RAM/page <= 1.2 x zram's ($lim B)" "$comp" \
				"$bpp" "$(verdict "$bpp" "$lim" le)"
		else
			printf '  %-48s %-6s %6s  %s\n' "dense RAM/page <= 1.2 x zram's" "$comp" "$bpp" \
				"n/a (zram skipped)"
		fi
	done
	for comp in lzo lz4; do
		r=$(json ratio_inproc_lzo "$dir/real-dense-$comp.json")
		printf '  %-48s %-6s %6s  %s\n' "dense put+get >= 0.8 x bare $comp (real memory)" \
			real "$r" "$(verdict "$r" 0.8 ge)"
	done
else
	echo "real memory: SKIP: tools/heapdump.py could not make the dump"
fi

exit 0
