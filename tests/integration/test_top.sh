#!/usr/bin/env bash
# test_top.sh - live views and progress with real daemons (a 3-node collective,
# pages written through an NBD export of a so that they move to b and c):
# `ramsterctl top` as key=value lines when not a terminal (parsed: rates,
# peers), and redrawn in place on a terminal (tmux, capture-pane: one picture,
# not a scroll of them); `ramsterctl drain` as plain progress lines in a pipe
# and as one bar redrawn in place on a terminal; ramster-bench's progress on
# stderr, its JSON on stdout untouched. Needs RAMSTER_BIN.
set -u
. "$(dirname "$0")/lib.sh"
lib_init test_top
TMUX_S="ramster-top-$$"
at_exit 'tmux kill-session -t "$TMUX_S" 2>/dev/null'

need fio python3

make_key "$T/key"
port=$(free_ports 4) || exit 1
{
	cluster_section toptest
	printf '\n[export vol]\nsize = 256M\n'
	node_section a 1 $((port + 1)) 8 128 "nbd_socket = $T/nbd-a.sock"
	node_section b 2 $((port + 2)) 32 128 "nbd_socket = $T/nbd-b.sock"
	node_section c 3 $((port + 3)) 32 128 "nbd_socket = $T/nbd-c.sock"
} >"$T/c.ini"
for n in a b c; do start_node "$T/c.ini" $n || exit 1; done

fill() { # fill MB: sequential writes into a's export (its pages go to b and c)
	fio --name=fill --ioengine=nbd --uri="nbd+unix:///vol?socket=$T/nbd-a.sock" --rw=write \
		--bs=64k --iodepth=4 --size="$1"m --buffer_compress_percentage=50 --refill_buffers=1 \
		--output-format=terse >"$T/fio.out" 2>&1
}

# ---- top, not a terminal: key=value lines, parsed ------------------------------------
t_top_plain() {
	fill 40 &
	local fio_pid=$!
	"$BIN/ramsterctl" -s "$T/a.sock" top --interval 0.5 --iterations 4 >"$T/top.txt" || return 1
	wait $fio_pid || { cat "$T/fio.out"; return 1; }
	cat "$T/top.txt"
	python3 - "$T/top.txt" <<'EOF'
import sys
tops, peers = [], []
for line in open(sys.argv[1]):
    kind, *kv = line.split()
    d = dict(x.split("=", 1) for x in kv)
    (tops if kind == "top" else peers).append(d)
    assert kind in ("top", "peer"), line
assert len(tops) == 4, tops
assert all(float(t["t"]) > 0 for t in tops)
assert max(float(t["puts_per_s"]) for t in tops) > 0, tops       # fio was writing
assert max(float(t["remotify_per_s"]) for t in tops) > 0, tops   # a's tier is small
assert len(peers) == 8 and {p["name"] for p in peers} == {"b", "c"}, peers
assert all(p["state"] == "up" and float(p["rtt_us"]) > 0 for p in peers), peers
assert sum(int(p["lent"]) for p in peers[-2:]) > 0, peers
EOF
}
run top_plain_lines_parsed t_top_plain

# ---- top on a terminal: redrawn in place ---------------------------------------------
have_tmux() { command -v tmux >/dev/null; }
t_top_tty() {
	have_tmux || { echo "SKIP: tmux missing"; return 0; }
	tmux new-session -d -s "$TMUX_S" -x 120 -y 40 \
		"'$BIN/ramsterctl' -s '$T/a.sock' top --interval 0.2 --iterations 5; sleep 30" || return 1
	sleep 2
	tmux capture-pane -p -t "$TMUX_S" >"$T/top.screen"
	tmux kill-session -t "$TMUX_S"
	cat "$T/top.screen"
	# one picture: the header once, however many refreshes ran
	[ "$(grep -c 'PUTS/S' "$T/top.screen")" -eq 1 ] &&
		[ "$(grep -c '^ramsterctl top' "$T/top.screen")" -eq 1 ] &&
		grep -Eq '^b +up ' "$T/top.screen" && grep -Eq '^c +up ' "$T/top.screen"
}
run top_tty_redrawn_in_place t_top_tty

# ---- drain progress: plain lines in a pipe ----------------------------------------------
t_drain_plain() {
	local held
	held=$("$BIN/ramsterctl" -s "$T/b.sock" stats | awk '$1=="foreign_pages"{print $2}')
	echo "b holds $held pages for a"
	[ "$held" -gt 0 ] || return 1
	"$BIN/ramsterctl" -s "$T/b.sock" drain >"$T/drain.txt" || return 1
	cat "$T/drain.txt"
	# no terminal control bytes, every line a plain one, the last progress line at 100%
	! grep -q $'\r\|\033' "$T/drain.txt" &&
		grep -E '^drain: [0-9]+/[0-9]+ \(100%\), pages handed back: 0 left.*done$' "$T/drain.txt" &&
		grep -q '^drain: done: the node holds no page' "$T/drain.txt" &&
		"$BIN/ramsterctl" -s "$T/b.sock" undrain
}
run drain_progress_plain_lines t_drain_plain

# ---- drain progress on a terminal: one bar redrawn ------------------------------------------
t_drain_tty() {
	have_tmux || { echo "SKIP: tmux missing"; return 0; }
	fill 40 || return 1 # more pages onto b and c
	tmux new-session -d -s "$TMUX_S" -x 160 -y 20 \
		"'$BIN/ramsterctl' -s '$T/c.sock' drain; echo rc=\$?; sleep 30" || return 1
	for _ in $(seq 100); do
		tmux capture-pane -p -t "$TMUX_S" >"$T/drain.screen"
		grep -q '^rc=' "$T/drain.screen" && break
		sleep 0.1
	done
	tmux kill-session -t "$TMUX_S"
	cat "$T/drain.screen"
	grep -q '^rc=0' "$T/drain.screen" &&
		[ "$(grep -c '^drain ' "$T/drain.screen")" -eq 1 ] &&
		grep -Eq '^drain \[#{24}\] 100% ' "$T/drain.screen"
}
run drain_progress_tty_bar t_drain_tty

# ---- ramster-bench: progress on stderr, JSON alone on stdout ------------------------------
t_bench_progress() {
	RAMSTER_PROGRESS=plain "$BIN/ramster-bench" --mode inproc --pages 3000 --reps 2 --json \
		>"$T/bench.json" 2>"$T/bench.err" || return 1
	cat "$T/bench.err"
	python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/bench.json" &&
		[ "$(grep -c '^ramster-bench: 6000/6000 (100%), pages: rep [12]/2 after .*, done$' \
			"$T/bench.err")" -eq 2 ]
}
run bench_progress_on_stderr t_bench_progress

finish
