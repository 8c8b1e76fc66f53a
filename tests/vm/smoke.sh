#!/bin/sh
# VM smoke test: run inside the test VM (tests/vm/run-vm.sh tests/vm/smoke.sh).
# Proves the guest has what the RDMA and NBD tests need: a soft-RoCE device
# rxe0 on a veth carrying 192.0.2.1-4, RDMA traffic between two of those
# addresses (rping over rdma_cm, then ibv_rc_pingpong over raw verbs), the
# kernel NBD driver (/dev/nbd0), and the project's build tree. Exit 0 or 1.
# Leaves the veth and rxe0 set up for nothing: the VM is thrown away after.

fails=0
pass() { echo "ok   - $*"; }
fail() { echo "FAIL - $*"; fails=$((fails + 1)); }
step() { echo "# [$(cut -d" " -f1 /proc/uptime)s] $*"; }
# wait_for SECONDS CMD...: poll CMD every 0.2 s until it succeeds (servers
# start slowly under TCG on a loaded host: a fixed sleep races them)
wait_for() {
	n=$(($1 * 5))
	shift
	while [ $n -gt 0 ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
		n=$((n - 1))
	done
	return 1
}
rping_listening() { rdma resource show cm_id | grep -q LISTEN; }
pp_listening() { ss -ltn | grep -q ':18515 '; }

[ "${RAMSTER_VM:-}" = 1 ] || { echo "smoke.sh runs inside the VM: tests/vm/run-vm.sh $0" >&2; exit 1; }
echo "# kernel $(uname -r), $(nproc) cpus, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MB"

# ---- the veth and the rxe device ---------------------------------------------
step "veth va<->vb with 192.0.2.1-4 on va"
veth_up() {
	ip link add va type veth peer name vb || return 1
	for i in 1 2 3 4; do
		ip addr add 192.0.2.$i/24 dev va || return 1
	done
	ip link set va up && ip link set vb up
}
if veth_up; then
	pass "veth up: $(ip -4 -o addr show dev va | awk '{print $4}' | tr '\n' ' ')"
else
	fail "veth setup"
fi

step "rdma link add rxe0 type rxe netdev va"
if rdma link add rxe0 type rxe netdev va; then
	pass "rdma link add"
else
	fail "rdma link add (is crc32_generic loaded? dmesg follows)"
	dmesg | grep -i -E 'rxe|rdma' | tail -5
fi
if rdma link show | grep -q '^link rxe0/1 .*state ACTIVE'; then
	pass "rdma link: $(rdma link show | grep rxe0)"
else
	fail "rdma link does not show rxe0 ACTIVE: $(rdma link show)"
fi
ls /dev/infiniband/uverbs0 >/dev/null 2>&1 && pass "/dev/infiniband/uverbs0 exists" ||
	fail "no /dev/infiniband/uverbs0"

# ---- RDMA traffic between two addresses --------------------------------------
step "rping server 192.0.2.1, client from 192.0.2.2"
rping -s -a 192.0.2.1 -C 5 -S 4096 > /tmp/rping-s.log 2>&1 &
spid=$!
wait_for 30 rping_listening || echo "  (rping server not seen listening)"
if timeout 30 rping -c -a 192.0.2.1 -I 192.0.2.2 -C 5 -S 4096 -v > /tmp/rping-c.log 2>&1 &&
	[ "$(grep -c '^ping data:' /tmp/rping-c.log)" -eq 5 ]; then
	pass "rping: 5 verified 4 KB exchanges"
else
	fail "rping"
	sed 's/^/  c| /' /tmp/rping-c.log | tail -5
	sed 's/^/  s| /' /tmp/rping-s.log | tail -5
fi
kill $spid 2>/dev/null
wait $spid 2>/dev/null

step "ibv_rc_pingpong over rxe0 (gid index 1), 100 x 4 KB"
ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 4096 > /tmp/pp-s.log 2>&1 &
spid=$!
wait_for 30 pp_listening || echo "  (ibv_rc_pingpong server not seen listening)"
if timeout 30 ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 4096 127.0.0.1 > /tmp/pp-c.log 2>&1; then
	pass "ibv_rc_pingpong: $(grep 'usec/iter' /tmp/pp-c.log)"
else
	fail "ibv_rc_pingpong"
	sed 's/^/  c| /' /tmp/pp-c.log | tail -5
	sed 's/^/  s| /' /tmp/pp-s.log | tail -5
fi
kill $spid 2>/dev/null
wait $spid 2>/dev/null

# ---- NBD ------------------------------------------------------------------------
step "kernel NBD driver"
if [ -b /dev/nbd0 ]; then
	pass "/dev/nbd0 is a block device ($(ls /dev/nbd* | wc -l) nbd devices)"
else
	fail "no /dev/nbd0"
fi
command -v nbd-client >/dev/null && pass "nbd-client found" || fail "nbd-client not installed"

# ---- the project's build tree ------------------------------------------------------
step "build tree visible at the host's paths"
if [ -x build/bin/ramsterd ]; then
	pass "build/bin/ramsterd visible in $(pwd)"
else
	echo "skip - build/bin/ramsterd not built (run make first)"
fi
touch /tmp/.w && pass "/tmp writable" || fail "/tmp not writable"
touch .vm-ro-probe 2>/dev/null && { rm -f .vm-ro-probe; fail "the host tree is writable"; } ||
	pass "the host tree is read-only"

if [ $fails -eq 0 ]; then
	echo "# smoke: all passed"
	exit 0
fi
echo "# smoke: $fails failed"
exit 1
