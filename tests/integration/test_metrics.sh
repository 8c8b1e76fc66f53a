#!/usr/bin/env bash
# test_metrics.sh - the Prometheus endpoint (metrics_listen) of real daemons:
# a 2-node collective with an NBD export, scraped with curl and parsed with
# prometheus_client's own parser (python3-prometheus-client): every counter of
# `ramsterctl stats --json` as a family with HELP and TYPE, per-peer series
# that agree with `ramsterctl peers --json` on both sides after pages moved,
# per-export series, refusals counted, bad listen addresses refused at start.
# Needs RAMSTER_BIN. Prints cmocka-like lines for tests/run-tests.
set -u
. "$(dirname "$0")/lib.sh"
lib_init test_metrics

# Debian's python3 has prometheus_client; a pyenv shim first on PATH may not
PY=
for p in /usr/bin/python3 python3; do
	if "$p" -c 'import prometheus_client.parser' 2>/dev/null; then
		PY=$p
		break
	fi
done
[ -n "$PY" ] || skip_all "python3-prometheus-client missing (tools/deps.sh installs it)"
need curl fio

make_key "$T/key"
port=$(free_ports 4) || exit 1
ma=127.0.0.1:$((port + 2))
mb=127.0.0.1:$((port + 3))
{
	cluster_section metricstest
	node_section a 1 "$port" 16 16 "nbd_socket = $T/nbd-a.sock" "metrics_listen = $ma"
	node_section b 2 $((port + 1)) 64 256 "nbd_socket = $T/nbd-b.sock" "metrics_listen = $mb"
	printf '\n[export vol]\nsize = 256M\n'
} >"$T/two.ini"
start_node "$T/two.ini" a "$T/a.log" || exit 1
start_node "$T/two.ini" b "$T/b.log" || exit 1

# scrape ADDR FILE: GET /metrics, which must be 200 with the exposition's content type
scrape() {
	curl -sS -o "$2" -w '%{http_code} %{content_type}\n' "http://$1/metrics" >"$2.head" || return 1
	grep -q '^200 text/plain; version=0.0.4' "$2.head" || { cat "$2.head"; return 1; }
}

# ---- every counter of `ramsterctl stats` is a family, with HELP and TYPE ----------
t_families() {
	"$BIN/ramsterctl" -s "$T/a.sock" stats --json >"$T/stats.json" || return 1
	scrape "$ma" "$T/a.prom" || return 1
	"$PY" - "$T/stats.json" "$T/a.prom" "$HERE/../../docs/grafana-ramster.json" <<'EOF'
import json, sys
from prometheus_client.parser import text_string_to_metric_families
stats = json.load(open(sys.argv[1]))
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[2]).read())}
# the endpoint's naming rule (node/stats/metrics.c); the parser drops a counter's _total
renamed = {"foreign_used": "foreign_used_bytes", "foreign_budget": "foreign_budget_bytes",
           "nbd_bytes_read": "nbd_read_bytes", "nbd_bytes_written": "nbd_written_bytes",
           "loop_busy_poll_us": "loop_busy_poll_seconds"}
assert len(stats) > 150, len(stats)
for name, value in stats.items():
    stem = renamed.get(name, name)
    if stem.endswith("_total"):
        stem = stem[:-6]
    if stem.endswith("_s"):
        stem = stem[:-2] + "_seconds"
    f = fams.get("ramster_" + stem)
    assert f is not None, "no family for %s" % name
    assert f.type in ("counter", "gauge"), (name, f.type)
    assert f.documentation, "no HELP for %s" % name
    assert len(f.samples) == 1, (name, f.samples)
    s = f.samples[0]
    if f.type == "counter":
        assert s.name == f.name + "_total", (name, s.name)
# figures that do not move between the two reads must agree exactly
for name in ("tier_budget_frames", "foreign_budget", "nbd_exports", "cluster_peers",
             "replica_target", "node_pools_shared"):
    fam = fams["ramster_" + renamed.get(name, name)]
    assert fam.samples[0].value == stats[name], (name, fam.samples[0].value, stats[name])
assert fams["ramster_foreign_budget_bytes"].samples[0].value == 16 << 20
assert fams["ramster_build_info"].samples[0].labels["node"] == "a"
assert fams["ramster_metrics_snapshot_age_seconds"].samples[0].value < 1.0
# the dashboard in docs/ asks only for series the node exports
import re
dash = json.load(open(sys.argv[3]))
names = set()
for panel in dash["panels"]:
    for t in panel["targets"]:
        names.update(re.findall(r"ramster_[a-z0-9_]+", t["expr"]))
for n in names:
    base = n[:-6] if n.endswith("_total") else n
    assert base in fams, "dashboard series %s not exported" % n
print(len(stats), "counters,", len(fams), "families,", len(names), "dashboard series")
EOF
}
run every_counter_is_a_family_with_help_and_type t_families

# ---- per-peer series after pages moved from a to b; per-export series ---------------
t_peers() {
	fio --name=fill --ioengine=nbd --uri="nbd+unix:///vol?socket=$T/nbd-a.sock" --rw=write \
		--bs=64k --iodepth=4 --size=48m --buffer_compress_percentage=50 \
		--refill_buffers=1 --output-format=terse >"$T/fio.out" 2>&1 || { cat "$T/fio.out"; return 1; }
	# wait for remotify and a heartbeat carrying the figure (a's "lent" is b's report)
	for _ in $(seq 100); do
		scrape "$ma" "$T/a2.prom" || return 1
		grep -q '^ramster_peer_pages_lent{peer="b",peer_id="2"} [1-9]' "$T/a2.prom" && break
		sleep 0.1
	done
	sleep 0.3 # one more heartbeat: both sides settle
	scrape "$ma" "$T/a2.prom" && scrape "$mb" "$T/b2.prom" || return 1
	"$BIN/ramsterctl" -s "$T/a.sock" peers --json >"$T/a-peers.json" || return 1
	"$BIN/ramsterctl" -s "$T/b.sock" peers --json >"$T/b-peers.json" || return 1
	"$BIN/ramsterctl" -s "$T/a.sock" exports --json >"$T/a-exports.json" || return 1
	"$PY" - "$T" <<'EOF'
import json, sys
from prometheus_client.parser import text_string_to_metric_families
d = sys.argv[1]
def samples(path):
    out = {}
    for f in text_string_to_metric_families(open(path).read()):
        for s in f.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out
a, b = samples(d + "/a2.prom"), samples(d + "/b2.prom")
pb = (("peer", "b"), ("peer_id", "2"))
pa = (("peer", "a"), ("peer_id", "1"))
for st in ("up", "connecting", "down", "unreachable"):
    assert a[("ramster_peer_state", pb + (("state", st),))] == (st == "up"), st
assert a[("ramster_peer_up", pb)] == 1 and b[("ramster_peer_up", pa)] == 1
rtt = a[("ramster_peer_rtt_seconds", pb)]
assert 0 < rtt < 1, rtt  # seconds, not microseconds
lent = a[("ramster_peer_pages_lent", pb)]
borrowed = b[("ramster_peer_pages_borrowed", pa)]
assert lent > 0 and borrowed > 0, (lent, borrowed)
# the two sides agree (a's figure is b's last heartbeat), and with ramsterctl peers
assert abs(lent - borrowed) <= borrowed // 10, (lent, borrowed)
bp = json.load(open(d + "/b-peers.json"))
assert [p for p in bp if p["name"] == "a"][0]["pages_borrowed"] == borrowed, bp
ap = json.load(open(d + "/a-peers.json"))
assert [p for p in ap if p["name"] == "b"][0]["state"] == "up", ap
assert a[("ramster_peer_ups_total", pb)] >= 1 and a[("ramster_peer_deaths_total", pb)] == 0
assert a[("ramster_peer_donate_bytes", pb)] == 256 << 20
assert a[("ramster_tier_remote_pages", ())] > 0
# the export
e = (("export", "vol"),)
assert a[("ramster_export_size_bytes", e)] == 256 << 20
loc = a[("ramster_export_pages", e + (("where", "local"),))]
rem = a[("ramster_export_pages", e + (("where", "remote"),))]
assert rem > 0 and loc + rem > 0, (loc, rem)
assert a[("ramster_export_requests_total", e)] > 0
assert a[("ramster_nbd_written_bytes_total", ())] >= 48 << 20
ex = json.load(open(d + "/a-exports.json"))[0]
assert ex["name"] == "vol" and ex["size"] == 256 << 20, ex
print("lent", lent, "borrowed", borrowed, "rtt", rtt, "export local", loc, "remote", rem)
EOF
}
run peer_and_export_series_two_nodes t_peers

# ---- refusals: other paths and methods, counted --------------------------------------
t_refusals() {
	local c
	c=$(curl -s -o /dev/null -w '%{http_code}' "http://$ma/nope") && [ "$c" = 404 ] || return 1
	c=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$ma/metrics") && [ "$c" = 405 ] ||
		return 1
	c=$(curl -s -o /dev/null -w '%{http_code}' -I "http://$ma/metrics") && [ "$c" = 200 ] || return 1
	scrape "$ma" "$T/a3.prom" || return 1
	grep -q '^ramster_metrics_not_found_total [1-9]' "$T/a3.prom" &&
		grep -q '^ramster_metrics_bad_method_total [1-9]' "$T/a3.prom" &&
		grep -q '^ramster_metrics_scrapes_total [1-9]' "$T/a3.prom" &&
		"$BIN/ramsterctl" -s "$T/a.sock" stats | grep -q '^metrics_not_found  *[1-9]'
}
run not_found_and_bad_method_refused_and_counted t_refusals

# ---- bad listen addresses stop the start with a clear reason -----------------------
t_bad_listen() {
	local rc
	sed "s|^metrics_listen = $ma|metrics_listen = 127.0.0.1:99999|" "$T/two.ini" >"$T/bad.ini"
	RAMSTER_NO_MEMLOCK=1 "$BIN/ramsterd" --config "$T/bad.ini" --node a >"$T/bad.log" 2>&1
	rc=$?
	cat "$T/bad.log"
	[ $rc -eq 2 ] && grep -q "metrics_listen.*port" "$T/bad.log" || return 1
	# the address b already serves: taken
	cat >"$T/taken.ini" <<EOF
[node c]
socket = $T/c.sock
local_mb = 16
metrics_listen = $mb
EOF
	RAMSTER_NO_MEMLOCK=1 timeout 10 "$BIN/ramsterd" --config "$T/taken.ini" >"$T/taken.log" 2>&1
	rc=$?
	cat "$T/taken.log"
	[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "metrics_listen $mb: cannot serve" "$T/taken.log"
}
run bad_or_taken_listen_address_refused t_bad_listen

finish
