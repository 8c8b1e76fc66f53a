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

[ "${RAMSTER_VM:-}" = 1 ] || { echo "runs inside the VM: tests/vm/run-vm.sh $0" >&2; exit 1; }
[ -x "$suite" ] || { echo "FAIL - $suite not built (make integration)"; exit 1; }

ip link add va type veth peer name vb &&
	for i in 1 2 3 4; do ip addr add 192.0.2.$i/24 dev va; done &&
	ip link set va up && ip link set vb up &&
	rdma link add rxe0 type rxe netdev va || { echo "FAIL - soft-RoCE setup"; exit 1; }
echo "ok   - rxe0: $(rdma link show | grep rxe0)"

fails=0
for t in rdma mixed; do
	echo "# the collective suite with transport $t"
	start=$(cut -d. -f1 /proc/uptime)
	if RAMSTER_BIN=$bin RAMSTER_TEST_TRANSPORT=$t RAMSTER_TEST_NET=192.0.2. \
		RAMSTER_TEST_LOCAL_MB=1 RAMSTER_TEST_SLOW=${RAMSTER_TEST_SLOW:-6} "$suite"; then
		echo "ok   - collective over $t ($(( $(cut -d. -f1 /proc/uptime) - start )) s)"
	else
		echo "FAIL - collective over $t"
		fails=$((fails + 1))
	fi
done
exit $((fails > 0))
