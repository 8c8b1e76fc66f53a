#!/usr/bin/env bash
# test_json.sh - the JSON the tools print (jansson) is parsed, not grepped:
# ramsterctl's --json listings, ramster-bench's report (in-process and
# against a real daemon) and ramster-netbench's report against a real 2-node
# collective, each read with python's json module and with jq, and checked
# for the figures the bench scripts (tools/bench*.sh) take from them.
# Needs RAMSTER_BIN. Prints cmocka-like lines for tests/run-tests.
set -u
. "$(dirname "$0")/lib.sh"
lib_init test_json

need jq python3

# one_doc FILE: exactly one JSON document, which python and jq both read
one_doc() {
	python3 -c 'import json, sys; json.loads(open(sys.argv[1]).read())' "$1" &&
		[ "$(jq -c . "$1" | wc -l)" -eq 1 ]
}

make_key "$T/key"
port=$(free_ports 2) || exit 1
{
	cluster_section jsontest
	node_section a 1 "$port" 8 8
	node_section b 2 $((port + 1)) 64 128
} >"$T/two.ini"
start_node "$T/two.ini" a "$T/a.log" || exit 1
start_node "$T/two.ini" b "$T/b.log" || exit 1

t_ctl() {
	local c
	for c in status stats pools peers exports; do
		"$BIN/ramsterctl" -s "$T/a.sock" $c --json >"$T/$c.json" || return 1
		one_doc "$T/$c.json" || { echo "$c: not one JSON document"; cat "$T/$c.json"; return 1; }
	done
	jq -e '.node == "a" and (.pid | tonumber) > 0' "$T/status.json" &&
		jq -e '(.tier_budget_frames > 0) and (to_entries | all(.value | type == "number"))' \
			"$T/stats.json" &&
		jq -e 'type == "array"' "$T/pools.json" &&
		jq -e '.[0].name == "b" and .[0].id == 2 and (.[0].incarnation | test("^[0-9a-f]{16}$"))' \
			"$T/peers.json" &&
		jq -e '. == []' "$T/exports.json" &&
		# a bad flag is a usage error, not JSON
		! "$BIN/ramsterctl" -s "$T/a.sock" genkey --json 2>/dev/null
}
run ramsterctl_json_listings t_ctl

t_bench_inproc() {
	"$BIN/ramster-bench" --mode lzo,inproc --pages 2000 --reps 1 --json >"$T/bench.json" ||
		return 1
	cat "$T/bench.json"
	one_doc "$T/bench.json" || return 1
	jq -e '.pages == 2000 and .inproc_errors == 0 and .lzo_errors == 0 and
		.inproc_putget_pps > 0 and .lzo_pps > 0 and (.ratio_inproc_lzo | type == "number") and
		(.inproc_meta_per_page | type == "number")' "$T/bench.json" || return 1
	# what tools/bench.sh reads, the way it reads it
	[ -n "$(jq -r '.ratio_inproc_lzo // empty' "$T/bench.json")" ]
}
run bench_inproc_json t_bench_inproc

t_bench_daemon() {
	"$BIN/ramster-bench" --socket "$T/b.sock" --mode daemon --pages 2000 --reps 1 --batch 16 \
		--json >"$T/benchd.json" || return 1
	cat "$T/benchd.json"
	one_doc "$T/benchd.json" &&
		jq -e '.daemon_errors == 0 and .daemon_putget_pps > 0 and .batch == 16 and
			(.daemon_put_p99_us >= .daemon_put_p50_us)' "$T/benchd.json"
}
run bench_daemon_json t_bench_daemon

t_netbench() {
	"$BIN/ramster-netbench" --socket "$T/a.sock" --peer-socket "$T/b.sock" --pages 6000 \
		--rounds 1 --iters 50 --put-reps 1 --memcached none --json >"$T/net.json" 2>"$T/net.err" ||
		{ cat "$T/net.err"; return 1; }
	cat "$T/net.json"
	one_doc "$T/net.json" || return 1
	jq -e '.pages == 6000 and .errors == 0 and (.repat_p50_us > 0) and
		(.baseline_p50_us > 0) and (.ratio_repat_baseline | type == "number") and
		(.peer1_foreign_pages | type == "number") and (.peer1_foreign_used | type == "number") and
		(.replica_bytes | type == "number")' "$T/net.json" || return 1
	# the sum tools/bench-collective.sh prints
	jq -e '[to_entries[] | select(.key | test("^peer[0-9]+_left_after_destroy[0-9]+$"))
		| .value] | (add // 0) | type == "number"' "$T/net.json"
}
run netbench_json_two_nodes t_netbench

finish
