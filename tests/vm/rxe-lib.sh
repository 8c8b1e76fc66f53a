# Sourced by the soft-RoCE guest tests (test-rdma.sh, test-ec-rdma.sh,
# test-collective-rdma.sh): . tests/vm/rxe-lib.sh (the cwd is the project root; a script under /tmp runs from a copy)
# What they share, written once: the ok/FAIL lines and the failure count, the
# veth + rxe0 set-up, the cluster file (rxe_conf), starting, asking and stopping ramsterd nodes, the
# end-of-test verdict. Not a test itself (check-vm.sh runs test-*.sh only).
# The caller sets bin (the binaries) and, before starting nodes, dir (its
# temporary directory: configs, sockets $dir/NODE.sock, logs $dir/NODE.log).
# POSIX sh: the guest runs the tests with /bin/sh.
# shellcheck shell=sh disable=SC2154 # bin and dir are the caller's

fails=0
pids=""
pass() { echo "ok   - $*"; }
fail() { echo "FAIL - $*"; fails=$((fails + 1)); }
step() { echo "# [$(cut -d" " -f1 /proc/uptime)s] $*"; }
now_ms() { awk '{printf "%d\n", $1 * 1000}' /proc/uptime; }

# vm_only: exits 1 unless in the guest (run-vm.sh sets RAMSTER_VM=1 there)
vm_only() {
	[ "${RAMSTER_VM:-}" = 1 ] && return 0
	echo "$(basename "$0") runs inside the VM: tests/vm/run-vm.sh $0" >&2
	exit 1
}

# rxe_up N: a veth va<->vb with 192.0.2.1-N on va and soft-RoCE rxe0 on va,
# one rxe device for all the nodes (across namespaces rdma_cm found no route:
# docs/vm.md); exits 1 if any of it fails
rxe_up() {
	step "veth va<->vb with 192.0.2.1-$1, rxe0 on va"
	if ! ip link add va type veth peer name vb; then
		echo "FAIL - soft-RoCE setup"
		exit 1
	fi
	i=1
	while [ "$i" -le "$1" ]; do
		ip addr add "192.0.2.$i/24" dev va || { echo "FAIL - soft-RoCE setup"; exit 1; }
		i=$((i + 1))
	done
	if ! { ip link set va up && ip link set vb up && rdma link add rxe0 type rxe netdev va; }; then
		echo "FAIL - soft-RoCE setup"
		exit 1
	fi
	pass "rxe0: $(rdma link show | grep rxe0)"
}

# start NODE [CONF]: ramsterd for NODE (CONF default $dir/cluster.conf), its
# stderr appended to $dir/NODE.log; sets $last to its pid, adds it to $pids
start() {
	"$bin/ramsterd" --config "${2:-$dir/cluster.conf}" --node "$1" --log-level info 2>> "$dir/$1.log" &
	last=$!
	pids="$pids $last"
}
# stop_nodes: SIGTERM to every node started, SIGKILL half a second later (the EXIT trap)
stop_nodes() {
	for p in $pids; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	for p in $pids; do kill -KILL "$p" 2>/dev/null; done
}
stat() { # stat NODE NAME: one counter of ramsterctl stats
	"$bin/ramsterctl" --socket "$dir/$1.sock" stats 2>/dev/null | awk -v n="$2" '$1 == n {print $2}'
}
peers_up() { # peers_up NODE: how many peers NODE sees up
	"$bin/ramsterctl" --socket "$dir/$1.sock" peers 2>/dev/null | grep -c ' up '
}
wait_up() { # wait_up NODE COUNT SECONDS: 0 once NODE sees COUNT peers up, 1 at the deadline
	i=0
	while [ "$i" -lt $(($3 * 5)) ]; do
		[ "$(peers_up "$1")" -ge "$2" ] && return 0
		sleep 0.2
		i=$((i + 1))
	done
	return 1
}
# all_up SECONDS NODE...: every NODE sees all the others up, the first within
# SECONDS (it waits for their start-up), each next within 30 s; ok or FAIL
# (with the tail of every log), 1 on FAIL
all_up() {
	s=$1
	shift
	t_up=$(now_ms)
	for n in "$@"; do
		if ! wait_up "$n" $(($# - 1)) "$s"; then
			fail "links not up"
			for m in "$@"; do sed "s/^/  $m| /" "$dir/$m.log" | tail -8; done
			return 1
		fi
		s=30
	done
	pass "all links up in $(($(now_ms) - t_up)) ms"
}
# rdma_links NODE COUNT: NODE's peers table shows COUNT links up, rdma on rxe0
rdma_links() {
	"$bin/ramsterctl" --socket "$dir/$1.sock" peers > "$dir/peers.txt"
	sed 's/^/  | /' "$dir/peers.txt"
	if [ "$(grep ' up ' "$dir/peers.txt" | grep -c ' rdma  *rxe0 ')" -eq "$2" ]; then
		pass "ramsterctl peers: $1's $2 links are rdma on rxe0"
	else
		fail "ramsterctl peers does not show $2 rdma links on rxe0"
	fi
}
# rxe_conf NAME KEY NODES PORTS OWNER_MB [LINE...]: a cluster file on stdout,
# timeouts stretched for TCG (as test_collective's RAMSTER_TEST_SLOW=6) and the
# LINEs added to [cluster]; nodes n1..nNODES at 192.0.2.i:PORTSi over rdma,
# sockets $dir/ni.sock, n1 the owner (local_mb OWNER_MB, donate_mb 16), the
# others holders (local_mb 16, donate_mb 64)
rxe_conf() {
	rc_name=$1 rc_key=$2 rc_n=$3 rc_ports=$4 rc_omb=$5
	shift 5
	printf '[cluster]\nname = %s\nsecret_file = %s\nheartbeat_ms = 300\n' "$rc_name" "$rc_key"
	printf 'request_timeout_ms = 12000\norphan_after_ms = 18000\nroom_wait_ms = 3000\n'
	for l in "$@"; do echo "$l"; done
	i=1
	while [ $i -le "$rc_n" ]; do
		lm=16 dm=64
		[ $i = 1 ] && lm=$rc_omb dm=16
		printf '\n[node n%s]\nid = %s\naddress = 192.0.2.%s:%s%s\ntransport = rdma\n' \
			$i $i $i "$rc_ports" $i
		printf 'socket = %s/n%s.sock\nlocal_mb = %s\ndonate_mb = %s\n' "$dir" $i $lm $dm
		i=$((i + 1))
	done
}
# finish NAME NODE...: the verdict; exit 0 if nothing failed, else exit 1
# after the tail of each NODE's log
finish() {
	name=$1
	shift
	if [ "$fails" -eq 0 ]; then
		echo "# $name: all passed"
		exit 0
	fi
	echo "# $name: $fails failed"
	for n in "$@"; do echo "# $n.log"; tail -15 "$dir/$n.log" | sed "s/^/  $n| /"; done
	exit 1
}
