# lib.sh - what the shell integration tests share (sourced, not run): a temp
# dir removed at exit with every daemon started here; test cases run with
# the cmocka-like lines tests/run-tests counts ([ RUN ], [ OK ], [ PASSED ],
# [ FAILED ], [ SKIPPED ]); free TCP ports; a cluster key; cluster files;
# ramsterd started, waited for and stopped; peers and counters read.
#
#   . "$(dirname "$0")/lib.sh"
#   lib_init test_x        # $T, the traps; then cases: run NAME FUNC; at the end: finish
#
# Set by lib.sh: BIN (absolute; $RAMSTER_BIN, default build/bin), HERE (this
# dir), ROOT (the checkout), T, pass, fail, pids (every daemon), last_pid and
# pid_NODE (the last start of NODE).

BIN=${RAMSTER_BIN:-build/bin}
BIN=$(cd "$BIN" && pwd) || exit 2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
pass=0
fail=0
pids=()
last_pid=
lib_exit_hooks=()

# How run shows a case's output: only its tail on failure (fail), or always (all)
RUN_SHOW=${RUN_SHOW:-fail}
RUN_TAIL=${RUN_TAIL:-30}
# How start_node starts ramsterd: --log-level (empty: no flag, the node's own
# level); NODE_MEMLOCK=1 lets it lock its memory (RAMSTER_NO_MEMLOCK unset);
# the key naming the socket to wait for (socket or nbd_socket)
NODE_LOG_LEVEL=${NODE_LOG_LEVEL-notice}
NODE_MEMLOCK=${NODE_MEMLOCK:-0}
NODE_WAIT=${NODE_WAIT:-socket}

# lib_init NAME: the test's name (for the lines) and its temp dir $T
lib_init() {
	TEST=$1
	T=$(mktemp -d "/tmp/ramster-${TEST#test_}.XXXXXX") || exit 2
	trap lib_cleanup EXIT
}

# at_exit CMD: one more thing to undo at exit, before the daemons are killed
at_exit() { lib_exit_hooks+=("$1"); }

lib_cleanup() {
	local h p
	for h in "${lib_exit_hooks[@]}"; do eval "$h"; done
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${RAMSTER_KEEP:-}" ] || rm -rf "$T"
}

# ---- cases and their lines ---------------------------------------------------------

# skip_all REASON: the whole test skips (a tool or a privilege missing)
skip_all() {
	echo "[  SKIPPED ] $TEST: $1"
	echo "[  PASSED  ] 0 test(s)."
	exit 0
}

# need TOOL...: skip_all unless every TOOL is on PATH
need() {
	local tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null || skip_all "$tool missing (tools/deps.sh installs it)"
	done
}

# run NAME CMD...: one test case, its output kept in $T/NAME.log
run() {
	local name=$1
	shift
	echo "[ RUN      ] $name"
	if "$@" >"$T/$name.log" 2>&1; then
		[ "$RUN_SHOW" = all ] && cat "$T/$name.log"
		echo "[       OK ] $name"
		pass=$((pass + 1))
	else
		if [ "$RUN_SHOW" = all ]; then cat "$T/$name.log"; else tail -"$RUN_TAIL" "$T/$name.log"; fi
		echo "[  FAILED  ] $name"
		fail=$((fail + 1))
	fi
}

# finish: the summary lines; exits 0 if no case failed
finish() {
	echo "$pass passed, $fail failed"
	echo "[  PASSED  ] $pass test(s)."
	if [ "$fail" -ne 0 ]; then
		echo "[  FAILED  ] $fail test(s), listed above"
		exit 1
	fi
	exit 0
}

# wait_for CMD...: up to 10 s for CMD to succeed
wait_for() {
	local _
	for _ in $(seq 100); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

# ---- ports, key, cluster files -----------------------------------------------------

# free_ports N: the first of N consecutive TCP ports that bind now on every
# address, from a random start below the kernel's ephemeral range, tried up
# to 1000 times (as tests/integration/collective.c picks them). The bind is
# python3's; without a python3 that runs, a port is free when ss shows no
# socket on it.
free_ports() {
	local n=$1 lo=20000 hi base k tries
	hi=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
	[ $((${hi:-0} - lo)) -ge 1000 ] || hi=50000
	if python3 -c '' 2>/dev/null; then
		python3 - "$n" "$lo" "$hi" <<'EOF'
import random, socket, sys
n, lo, hi = (int(a) for a in sys.argv[1:])
def free(port):
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", port))
        return True
    except OSError:
        return False
    finally:
        s.close()
for _ in range(1000):
    base = random.randrange(lo, hi - n)
    if all(free(base + k) for k in range(n)):
        print(base)
        sys.exit(0)
sys.exit(1)
EOF
		[ $? -eq 0 ] && return 0
	else
		for ((tries = 0; tries < 1000; tries++)); do
			base=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo - n)))
			for ((k = 0; k < n; k++)); do
				[ -z "$(ss -Htan "sport = :$((base + k))")" ] || break
			done
			[ "$k" -eq "$n" ] && { echo "$base"; return 0; }
		done
	fi
	echo "free_ports: no $n consecutive free ports found" >&2
	return 1
}

# make_key FILE: a cluster key, mode 0600 (random bytes if ramsterctl fails)
make_key() {
	"$BIN/ramsterctl" genkey >"$1" 2>/dev/null ||
		head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$1"
	chmod 600 "$1"
}

# cluster_section NAME [LINE]...: [cluster] NAME with the key $T/key,
# heartbeat_ms 50 and dead_after_ms 2000 (what the tests' collectives use),
# then each LINE ("key = value")
cluster_section() {
	local name=$1 line
	shift
	printf '[cluster]\nname = %s\nsecret_file = %s\nheartbeat_ms = 50\ndead_after_ms = 2000\n' \
		"$name" "$T/key"
	for line in "$@"; do echo "$line"; done
}

# node_section NAME ID PORT LOCAL_MB DONATE_MB [LINE]...: [node NAME] on
# 127.0.0.1:PORT with its client socket $T/NAME.sock, then each LINE
node_section() {
	local name=$1 id=$2 port=$3 local_mb=$4 donate_mb=$5 line
	shift 5
	printf '\n[node %s]\nid = %s\naddress = 127.0.0.1:%s\nsocket = %s\nlocal_mb = %s\ndonate_mb = %s\n' \
		"$name" "$id" "$port" "$T/$name.sock" "$local_mb" "$donate_mb"
	for line in "$@"; do echo "$line"; done
}

# ---- nodes ---------------------------------------------------------------------------

# start_node CONF NODE [LOG]: ramsterd NODE of CONF in the background (output
# appended to LOG, default $T/NODE.log); waits up to 10 s for the socket its
# section names ($NODE_WAIT). Sets last_pid and pid_NODE.
start_node() {
	local conf=$1 node=$2 log=${3:-$T/$2.log} sock _
	local -a flags=()
	[ -n "$NODE_LOG_LEVEL" ] && flags=(--log-level "$NODE_LOG_LEVEL")
	if [ "$NODE_MEMLOCK" = 1 ]; then
		"$BIN/ramsterd" --config "$conf" --node "$node" "${flags[@]}" >>"$log" 2>&1 &
	else
		RAMSTER_NO_MEMLOCK=1 "$BIN/ramsterd" --config "$conf" --node "$node" "${flags[@]}" \
			>>"$log" 2>&1 &
	fi
	last_pid=$!
	pids+=("$last_pid")
	eval "pid_$node=$last_pid"
	sock=$(awk -v n="[node $node]" -v k="$NODE_WAIT" \
		'$0==n{f=1;next} /^\[/{f=0} f&&$1==k{print $3}' "$conf")
	for _ in $(seq 200); do
		[ -S "$sock" ] && return 0
		kill -0 "$last_pid" 2>/dev/null || break
		sleep 0.05
	done
	echo "ramsterd $node did not come up:"
	cat "$log"
	return 1
}

# stop_node NODE: SIGTERM its last start and wait for it
stop_node() {
	local pid
	eval "pid=\${pid_$1:-}"
	[ -n "$pid" ] || return 1
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

# node_sock NODE: $T/NODE.sock, or NODE itself if it is a path
node_sock() { case $1 in */*) echo "$1" ;; *) echo "$T/$1.sock" ;; esac; }

# peers_up NODE: how many peers NODE sees up
peers_up() { "$BIN/ramsterctl" -s "$(node_sock "$1")" peers 2>/dev/null | awk '$4=="up"{n++} END{print n+0}'; }

# wait_peers NODE N [SECS]: until NODE sees at least N peers up (default 15 s)
wait_peers() {
	local node=$1 want=$2 tries=$((${3:-15} * 10)) _
	for _ in $(seq "$tries"); do
		[ "$(peers_up "$node")" -ge "$want" ] && return 0
		sleep 0.1
	done
	echo "$node did not see $want peers up"
	return 1
}

# node_stat NODE NAME: counter NAME of NODE (fails if the node has none)
node_stat() {
	"$BIN/ramsterctl" -s "$(node_sock "$1")" stats |
		awk -v k="$2" '$1==k{print $2; f=1} END{exit !f}'
}
