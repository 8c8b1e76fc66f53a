#!/usr/bin/env bash
# test_reload.sh - reloading the cluster file at run time, with real daemons:
# SIGHUP and `ramsterctl reload` apply the run-time keys (log_level,
# donate_mb, watermarks, replicas, rereplicate_rate) and name the keys that
# need a restart; a file that does not load changes nothing; an unprivileged
# client is refused (SO_PEERCRED); a [node] section added to every node's file
# plus a reload links a third node to the running two without restarting
# them; removing a section is reported as needing a drain and a restart.
# Needs RAMSTER_BIN. Prints cmocka-like lines for tests/run-tests.
set -u
. "$(dirname "$0")/lib.sh"
lib_init test_reload
# the nodes log at their own level: the cases change it by reload
NODE_LOG_LEVEL=

need jq

make_key "$T/key"
port=$(free_ports 4) || exit 1
# cluster FILE HIGH RATE DONATE_A LOCAL_A NODES...: write a cluster file ($REPLICAS: replicas)
cluster() {
	local f=$1 high=$2 rate=$3 donate_a=$4 local_a=$5 n id
	shift 5
	{
		printf '[export vol]\nsize = 128M\n\n'
		cluster_section reloadtest "high_watermark = $high" "low_watermark = 60" \
			"replicas = ${REPLICAS:-1}" "rereplicate_rate = $rate"
		for n in "$@"; do
			case $n in a) id=1 ;; b) id=2 ;; c) id=3 ;; esac
			if [ $n = a ]; then
				# zbud on a: two pages a frame whatever they compress to, so fio's
				# pattern fills a's tier and pages go to its peers (dense would hold it all)
				node_section a $id $((port + id)) "$local_a" "$donate_a" \
					"nbd_socket = $T/nbd-a.sock" "allocator = zbud" \
					${LEVEL_A:+"log_level = $LEVEL_A"}
			else
				node_section $n $id $((port + id)) 16 32 "nbd_socket = $T/nbd-$n.sock"
			fi
		done
	} >"$f"
}

cluster "$T/c.ini" 90 2000 16 16 a b
start_node "$T/c.ini" a || exit 1
start_node "$T/c.ini" b || exit 1

# ---- SIGHUP applies the run-time keys and names the rest -------------------------
t_sighup() {
	[ "$(node_stat a foreign_budget)" = $((16 << 20)) ] || return 1
	LEVEL_A=debug cluster "$T/c.ini" 70 500 48 32 a b
	kill -HUP "$pid_a"
	wait_for grep -q "reload of $T/c.ini: applied" "$T/a.log" || return 1
	grep "reload" "$T/a.log"
	[ "$(node_stat a foreign_budget)" = $((48 << 20)) ] || return 1 # donate_mb applied
	[ "$(node_stat a reload_done)" = 1 ] && [ "$(node_stat a reload_restart_needed)" = 1 ] || return 1
	"$BIN/ramsterctl" -s "$T/a.sock" status --json >"$T/st.json"
	jq -e '.log_level == "debug" and .local_mb == "16"' "$T/st.json" || return 1
	grep -q "applied: .*rereplicate_rate 2000 -> 500, high_watermark 90 -> 70.*donate_mb 16 -> 48.*log_level info -> debug" "$T/a.log" &&
		grep -q "needs a restart (left as it runs): local_mb 16 -> 32" "$T/a.log"
}
run sighup_applies_runtime_keys_names_restart_keys t_sighup

# ---- ramsterctl reload: the same through the socket -------------------------------
t_ctl_reload() {
	local out
	LEVEL_A=debug cluster "$T/c.ini" 70 500 48 16 a b # local_mb back as it runs
	out=$("$BIN/ramsterctl" -s "$T/a.sock" reload) || return 1
	echo "$out"
	grep -q "^reload: applied: nothing$" <<<"$out" &&
		grep -q "^reload: needs a restart: nothing$" <<<"$out" || return 1
	cluster "$T/c.ini" 70 500 64 16 a b # donate 48 -> 64, log_level unset: stays
	out=$("$BIN/ramsterctl" -s "$T/a.sock" reload) || return 1
	echo "$out"
	grep -q "^reload: applied: donate_mb 48 -> 64$" <<<"$out" &&
		[ "$(node_stat a foreign_budget)" = $((64 << 20)) ] &&
		[ "$(node_stat a node_requests_reload)" -ge 2 ]
}
run ramsterctl_reload_applies_and_reports t_ctl_reload

# ---- a file that does not load changes nothing -------------------------------------
t_bad_file() {
	local out rc
	cp "$T/c.ini" "$T/good.ini"
	sed -i 's/^donate_mb = 64$/donate_mb = lots/' "$T/c.ini"
	out=$("$BIN/ramsterctl" -s "$T/a.sock" reload 2>&1)
	rc=$?
	echo "$out"
	cp "$T/good.ini" "$T/c.ini"
	[ $rc -eq 1 ] && grep -q "ramsterctl: reload: $T/c.ini:[0-9]*: donate_mb" <<<"$out" &&
		[ "$(node_stat a foreign_budget)" = $((64 << 20)) ] && [ "$(node_stat a reload_failed)" = 1 ]
}
run bad_file_changes_nothing t_bad_file

# ---- only root or the daemon's user may reload ---------------------------------------
t_unprivileged() {
	if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
		echo "SKIP: needs root and setpriv to act as another user"
		return 0
	fi
	local out rc
	chmod 755 "$T"
	chmod 666 "$T/a.sock"
	out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN/ramsterctl" -s "$T/a.sock" \
		reload 2>&1)
	rc=$?
	chmod 660 "$T/a.sock"
	echo "$out"
	[ $rc -eq 1 ] && grep -q "reload is for root or the daemon's user" <<<"$out" &&
		[ "$(node_stat a reload_refused)" = 1 ]
}
run unprivileged_client_refused t_unprivileged

# ---- a node added to the file joins the running collective ----------------------------
peer_up() { "$BIN/ramsterctl" -s "$T/$1.sock" peers --json | jq -e ".[] | select(.name == \"$2\") | .state == \"up\"" >/dev/null; }
t_add_node() {
	local out
	REPLICAS=2 cluster "$T/c.ini" 70 500 64 16 a b c
	start_node "$T/c.ini" c || return 1
	kill -HUP "$pid_a"
	out=$("$BIN/ramsterctl" -s "$T/b.sock" reload) || return 1
	echo "$out"
	grep -q "applied: replicas 1 -> 2, .*\[node c\] added (id 3, 127.0.0.1:$((port + 3)))" <<<"$out" || return 1
	wait_for peer_up a c && wait_for peer_up b c && wait_for peer_up c a && wait_for peer_up c b ||
		{ "$BIN/ramsterctl" -s "$T/a.sock" peers; return 1; }
	"$BIN/ramsterctl" -s "$T/a.sock" peers
	# a and b kept running: the same processes, their link to each other never lost
	kill -0 "$pid_a" && kill -0 "$pid_b" && [ "$(node_stat a cluster_peers)" = 2 ] &&
		[ "$(node_stat a reload_nodes_added)" = 1 ] && [ "$(node_stat a replica_target)" = 2 ] &&
		"$BIN/ramsterctl" -s "$T/a.sock" peers --json | jq -e '.[] | select(.name == "b") | .ups == 1'
}
run added_node_joins_without_restarts t_add_node

# ---- removing a node: refused while it holds our pages; drained, then removed ---------
# fio FIO-ARGS...: a's export, 24 MiB with checksums (written, or verified with --verify_only)
vol_io() {
	fio --name=vol --ioengine=nbd --uri="nbd+unix:///vol?socket=$T/nbd-a.sock" --rw=write \
		--bs=64k --iodepth=4 --size=24m --verify=crc32c --verify_pattern='"reload"%o' \
		--verify_fatal=1 --verify_state_save=0 --output-format=terse "$@" >"$T/fio.out" 2>&1 ||
		{ cat "$T/fio.out"; return 1; }
}
c_lent() { # pages c holds for a, as a last heard
	"$BIN/ramsterctl" -s "$T/a.sock" peers --json | jq -r '.[] | select(.name == "c") | .pages_lent'
}
t_remove_node() {
	local out
	# one copy a page (with two, draining c leaves a no third node for them)
	cluster "$T/c.ini" 70 500 64 16 a b c
	"$BIN/ramsterctl" -s "$T/a.sock" reload || return 1
	vol_io --do_verify=0 || return 1
	wait_for sh -c "[ \"\$('$BIN/ramsterctl' -s '$T/a.sock' peers --json |
		jq -r '.[] | select(.name == \"c\") | .pages_lent')\" -gt 0 ]" || return 1
	echo "c holds $(c_lent) pages of a"
	cluster "$T/c.ini" 70 500 64 16 a b
	out=$("$BIN/ramsterctl" -s "$T/a.sock" reload) || return 1
	echo "$out"
	grep -q "needs a restart: \[node c\] removed but still holds pages of this node (drain it first: ramsterctl drain c)" <<<"$out" ||
		return 1
	peer_up a c || return 1 # still a peer
	timeout 60 "$BIN/ramsterctl" -s "$T/c.sock" drain >"$T/drain.out" || { cat "$T/drain.out"; return 1; }
	tail -2 "$T/drain.out"
	wait_for sh -c "[ \"\$('$BIN/ramsterctl' -s '$T/a.sock' peers --json |
		jq -r '.[] | select(.name == \"c\") | .pages_lent')\" = 0 ]" || return 1
	out=$("$BIN/ramsterctl" -s "$T/a.sock" reload) || return 1
	echo "$out"
	grep -q "applied: .*\[node c\] removed" <<<"$out" || return 1
	out=$("$BIN/ramsterctl" -s "$T/b.sock" reload) || return 1
	echo "$out"
	grep -q "applied: .*\[node c\] removed" <<<"$out" || return 1
	"$BIN/ramsterctl" -s "$T/a.sock" peers
	[ "$("$BIN/ramsterctl" -s "$T/a.sock" peers --json | jq length)" = 1 ] &&
		[ "$(node_stat a cluster_peers)" = 1 ] && [ "$(node_stat a reload_nodes_removed)" = 1 ] || return 1
	kill "$pid_c" # c goes; a's data never depended on it any more
	sleep 0.5
	vol_io --verify_only=1 && echo "a's export verified after c left"
}
run removed_node_refused_until_drained_then_removed t_remove_node

finish
