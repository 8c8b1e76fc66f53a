#!/bin/sh
# VM test: the collective integration suite of the TCP issue
# (tests/integration/test_collective), run unchanged over soft-RoCE:
# three nodes on one rxe device (192.0.2.1-3) with transport = rdma, then a
# mixed cluster (node 1 tcp, node 2 rdma, node 3 auto). Pages 4x node 1's
# tier read back byte-identical, flush-object and destroy-pool accounting,
# kill -9 of a peer at rest and mid-transfer, restart and rejoin, a wrong
# secret and another cluster refused, malformed peer frames.
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

for t in rdma mixed; do
	echo "# the collective suite with transport $t"
	start=$(cut -d. -f1 /proc/uptime)
	if RAMSTER_BIN=$bin RAMSTER_TEST_TRANSPORT=$t RAMSTER_TEST_NET=192.0.2. \
		RAMSTER_TEST_LOCAL_MB=1 RAMSTER_TEST_SLOW=${RAMSTER_TEST_SLOW:-6} "$suite"; then
		pass "collective over $t ($(( $(cut -d. -f1 /proc/uptime) - start )) s)"
	else
		fail "collective over $t"
	fi
done
exit $((fails > 0))
