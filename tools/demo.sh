#!/usr/bin/env bash
# make demo: a 3-node collective on this machine (127.0.0.1..3), a workload
# through node 1 that is 4x its local tier, and ramsterctl showing the pages
# go to the peers and come back intact. Stops every process it started.
# Usage: tools/demo.sh BIN_DIR
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
dir=$(mktemp -d /tmp/ramster-demo.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM

local_mb=16
base=$((7400 + RANDOM % 500))
"$bin/ramsterctl" genkey > "$dir/cluster.key"
chmod 600 "$dir/cluster.key"
"$(dirname "$0")/cluster-conf.sh" "$dir" demo "$base" "$local_mb" "replicas = 1" \
	> "$dir/cluster.conf"

echo "== the cluster file ($dir/cluster.conf)"
cat "$dir/cluster.conf"
for n in alpha beta gamma; do
	"$bin/ramsterd" --config "$dir/cluster.conf" --node "$n" --log-level notice \
		2> "$dir/$n.log" &
	pids+=($!)
done

# wait until alpha sees both peers up
for _ in $(seq 100); do
	up=$("$bin/ramsterctl" --socket "$dir/alpha.sock" peers 2>/dev/null | grep -c ' up ' || true)
	[ "$up" -ge 2 ] && break
	sleep 0.1
done
echo
echo "== ramsterctl peers (on alpha)"
"$bin/ramsterctl" --socket "$dir/alpha.sock" peers

# 4x alpha's tier: text-like pages compress ~2:1, two to a frame
pages=$((local_mb * 256 * 2 * 4))
echo
echo "== workload: $pages pages (4x alpha's ${local_mb} MiB tier) put and read back through alpha"
"$bin/ramster-bench" --socket "$dir/alpha.sock" --mode daemon --data text --pages "$pages" \
	--batch 64 --reps 1

show() {
	"$bin/ramsterctl" --socket "$dir/$1.sock" stats |
		grep -E "^(tmem_(puts|gets|hits)|tier_(frames|remote_pages|remotified|repatriated|brought_home)|remote_(pages_placed|gets|get_hits|served_puts|served_gets)|foreign_pages|cluster_links_up) " || true
}
echo
for n in alpha beta gamma; do
	echo "== ramsterctl stats ($n)"
	show "$n"
done
echo
echo "== ramsterctl peers (on alpha)"
"$bin/ramsterctl" --socket "$dir/alpha.sock" peers
echo
echo "demo: every page read back byte-identical (ramster-bench verified each one); stopping"
