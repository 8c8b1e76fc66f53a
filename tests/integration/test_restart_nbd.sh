#!/usr/bin/env bash
# test_restart_nbd.sh - NBD exports across a warm restart (issue 22): blocks
# written through a plain NBD client (nbd_blocks.py) before SIGUSR2 read back
# identical after it, with and without a backing file; an export whose size
# changed in the file gives its pages up (counted), the others keep theirs.
set -u
. "$(dirname "$0")/lib.sh"
lib_init test_restart_nbd
RUN_TAIL=30
NODE_WAIT=nbd_socket

need python3

py() { python3 "$(dirname "$0")/nbd_blocks.py" "$T/nbd.sock" "$@"; }

conf() {
	cat >"$T/one.ini" <<EOI
[node n1]
socket = $T/n1.sock
local_mb = 256
nbd_socket = $T/nbd.sock

[export ram]
size = 256M

[export disk]
size = 64M
backing = $T/disk.img

[export gone]
size = ${1:-32M}
EOI
}
conf
start_node "$T/one.ini" n1 "$T/n1.log" || exit 1
node=$last_pid

# wait_warm: the re-executed node (same pid) answers and says it started warm
wait_warm() {
	local _
	for _ in $(seq 200); do
		[ "$(node_stat n1 restart_warm 2>/dev/null)" = 1 ] && return 0
		sleep 0.05
	done
	echo "no warm restart:"
	tail -20 "$T/n1.log"
	return 1
}

t_blocks_kept() {
	py ram write 20000 1 && py disk write 3000 2 && py gone write 1000 3 || return 1
	kill -USR2 "$node" || return 1
	wait_warm || return 1
	kill -0 "$node" || return 1
	py ram check 20000 1 && py disk check 3000 2 && py gone check 1000 3 || return 1
	[ "$(node_stat n1 restart_exports)" = 3 ] || return 1
	grep -q "restart: warm" "$T/n1.log"
}
run nbd_blocks_identical_after_warm_restart t_blocks_kept

t_changed_export_dropped() {
	conf 64M # "gone" grows: its old pages are not its blocks
	kill -HUP "$node" 2>/dev/null # the size needs a restart anyway; the restart rereads the file
	kill -USR2 "$node" || return 1
	sleep 0.3
	wait_warm || return 1
	[ "$(node_stat n1 restart_exports)" = 2 ] || return 1
	[ "$(node_stat n1 restart_exports_dropped)" = 1 ] || return 1
	py ram check 20000 1 && py disk check 3000 2 || return 1
	py gone check 2 3 >/dev/null 2>&1 && return 1 # block 1 is zeros now, no longer seed 3's
	return 0
}
run changed_export_gives_its_pages_up t_changed_export_dropped

# The connections themselves go across a re-execution: one client stops in the
# middle of a WRITE's payload, another keeps 16 requests in flight; neither
# sees its socket close or an error, and both read back every block on it.
t_conns_kept() {
	local across="$(dirname "$0")/nbd_across.py" a b rc=0 _
	rm -f "$T"/split "$T"/split-stream "$T"/restarted
	python3 "$across" "$T/nbd.sock" ram split 30000 3000 "$T" >"$T/split.out" 2>&1 &
	a=$!
	python3 "$across" "$T/nbd.sock" disk stream 0 2000 "$T" >"$T/stream.out" 2>&1 &
	b=$!
	for _ in $(seq 600); do
		[ -e "$T/split" ] && [ -e "$T/split-stream" ] && break
		sleep 0.05
	done
	[ -e "$T/split" ] || { echo "the split client did not get there"; cat "$T/split.out"; }
	kill -USR2 "$node" || return 1
	sleep 0.3
	wait_warm || return 1
	touch "$T/restarted"
	wait "$a" || rc=1
	wait "$b" || rc=1
	cat "$T/split.out" "$T/stream.out"
	[ $rc = 0 ] || return 1
	echo "taken over: $(node_stat n1 restart_nbd_conns), refused $(node_stat n1 restart_nbd_conns_refused)"
	[ "$(node_stat n1 restart_nbd_conns)" = 2 ] || return 1
	[ "$(node_stat n1 restart_nbd_conns_refused)" = 0 ] || return 1
	[ "$(node_stat n1 nbd_conns_adopted)" = 2 ] || return 1
	grep -q "2 NBD connections handed over" "$T/n1.log"
}
run nbd_connections_kept_across_reexec t_conns_kept

# In a collective, with a tier so small that the client's writes wait for
# remotify to make room (the restart waits for the NBD requests before it
# stops remotify: main_quiet_remote). Then a read that is running when the
# restart begins: its block's holder is stopped, so the read waits on the
# collective, and its answer comes while the node quiesces (nbd_process once
# looped for ever there: nothing more is run while quiescing, and nothing
# stopped the loop).
t_conns_kept_collective() {
	local across="$(dirname "$0")/nbd_across.py" port b rc=0 _
	kill -TERM "$node" 2>/dev/null
	wait "$node" 2>/dev/null
	port=$(free_ports 2) || return 1
	make_key "$T/key"
	{
		cluster_section restartnbd "replicas = 1" "room_wait_ms = 2000"
		node_section c1 1 "$port" 4 0 "nbd_socket = $T/c1nbd.sock"
		node_section c2 2 $((port + 1)) 16 256
		printf '\n[export swapish]\nsize = 64M\n'
	} >"$T/two.ini"
	NODE_WAIT=socket start_node "$T/two.ini" c2 || return 1
	NODE_WAIT=nbd_socket start_node "$T/two.ini" c1 || return 1
	c1=$last_pid
	wait_peers c1 1 || return 1
	rm -f "$T"/split-stream "$T"/restarted
	python3 "$across" "$T/c1nbd.sock" swapish stream 0 3000 "$T" random >"$T/cstream.out" 2>&1 &
	b=$!
	for _ in $(seq 600); do
		[ -e "$T/split-stream" ] && [ "$(node_stat c1 tier_remotified 2>/dev/null || echo 0)" -gt 500 ] && break
		sleep 0.05
	done
	echo "before: $(node_stat c1 tier_remotified) remotified, $(node_stat c1 nbd_room_waits) room waits"
	kill -USR2 "$c1" || return 1
	sleep 0.3
	for _ in $(seq 400); do
		[ "$(node_stat c1 restart_warm 2>/dev/null)" = 1 ] && break
		sleep 0.05
	done
	[ "$(node_stat c1 restart_warm)" = 1 ] || { tail -20 "$T/c1.log"; return 1; }
	touch "$T/restarted"
	wait "$b" || rc=1
	cat "$T/cstream.out"
	echo "after: $(node_stat c1 tier_remotified) remotified, $(node_stat c1 nbd_room_waits) room waits," \
		"$(node_stat c1 nbd_errors) NBD errors, $(node_stat c1 restart_nbd_conns) taken over"
	[ $rc = 0 ] || { grep -E "restart|room" "$T/c1.log" | tail -10; return 1; }
	[ "$(node_stat c1 restart_nbd_conns)" = 1 ] || return 1

	rm -f "$T"/written "$T"/hold-go "$T"/asked "$T"/restarted
	python3 "$across" "$T/c1nbd.sock" swapish hold 4000 3000 "$T" random >"$T/hold.out" 2>&1 &
	b=$!
	wait_for test -e "$T/written" || { cat "$T/hold.out"; return 1; }
	kill -STOP "$pid_c2"
	touch "$T/hold-go"
	wait_for test -e "$T/asked" || { kill -CONT "$pid_c2"; return 1; }
	sleep 0.2 # the read waits on the stopped holder
	kill -USR2 "$c1"
	sleep 0.5 # the node quiesces, waiting for the read
	kill -CONT "$pid_c2"
	for _ in $(seq 400); do
		[ "$(node_stat c1 restart_warm 2>/dev/null)" = 1 ] &&
			[ "$(node_stat c1 restart_nbd_conns 2>/dev/null)" = 1 ] && break
		sleep 0.05
	done
	touch "$T/restarted"
	wait "$b" || rc=1
	cat "$T/hold.out"
	grep -E "NBD requests still running|handed over" "$T/c1.log" | tail -3
	[ $rc = 0 ] && [ "$(node_stat c1 restart_nbd_conns)" = 1 ]
}
run nbd_connections_kept_in_a_collective t_conns_kept_collective

finish
