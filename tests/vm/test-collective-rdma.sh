#!/bin/sh
# VM test: the collective integration suite of the TCP issue
# (tests/integration/test_collective), run unchanged over soft-RoCE:
# three nodes on one rxe device (192.0.2.1-3) with transport = rdma: pages
# 4x node 1's tier read back byte-identical, flush-object and destroy-pool
# accounting, kill -9 of a peer at rest and mid-transfer, restart and rejoin,
# a wrong secret and another cluster refused, malformed peer frames, drain,
# replicas. Then a mixed cluster (node 1 tcp, node 2 rdma, node 3 auto) runs
# the cases where links of both kinds meet (the list below): the others test
# the node's policies, which do not depend on the transport, and the whole
# suite runs on TCP in make check and over rdma just before.
# Run with: tests/vm/run-vm.sh tests/vm/test-collective-rdma.sh
# vm-timeout: 900
bin=${RAMSTER_BIN:-build/bin}
suite=${RAMSTER_SUITE:-$bin/../tests/integration/test_collective}

# shellcheck source=tests/vm/rxe-lib.sh
# the guest runs a script kept under /tmp (a CI clone) from a copy in /run: the
# library by its path in the tree (the cwd is the project root)
. tests/vm/rxe-lib.sh

vm_only
[ -x "$suite" ] || { echo "FAIL - $suite not built (make integration)"; exit 1; }

rxe_up 4

mixed_cases=test_remotify_repatriate_flush,test_ephemeral_and_clients_on_two_nodes
mixed_cases=$mixed_cases,test_kill_peer_mid_transfer,test_link_reset_loses_nothing,test_ping
mixed_cases=$mixed_cases,test_wrong_secret_and_cluster,test_malformed_peer_frames

for t in rdma mixed; do
	echo "# the collective suite with transport $t"
	start=$(cut -d. -f1 /proc/uptime)
	cases=
	[ "$t" = mixed ] && cases=$mixed_cases
	if RAMSTER_BIN=$bin RAMSTER_TEST_TRANSPORT=$t RAMSTER_TEST_NET=192.0.2. \
		RAMSTER_TEST_CASES=$cases \
		RAMSTER_TEST_LOCAL_MB=1 RAMSTER_TEST_SLOW=${RAMSTER_TEST_SLOW:-6} "$suite"; then
		pass "collective over $t ($(( $(cut -d. -f1 /proc/uptime) - start )) s)"
	else
		fail "collective over $t"
	fi
done
exit $((fails > 0))
