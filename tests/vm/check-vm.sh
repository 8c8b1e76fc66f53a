#!/usr/bin/env bash
# Run the VM tests: tests/vm/smoke.sh, then every tests/vm/test-*.sh, each in
# its own VM (tests/vm/run-vm.sh). Skips (exit 0, one "check-vm: SKIP" line)
# when qemu cannot run here or the VM cannot be built; fails (exit 1) if any
# test fails. `make check-vm` runs tools/deps-vm.sh first, then this.
# Env: VM_TIMEOUT (s, per test, default 300), VM_MEM (MB, default 1024).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root" || exit 1
QEMU=${QEMU:-qemu-system-x86_64}

skip() { echo "check-vm: SKIP: $* (the VM tests did not run)"; exit 0; }

command -v "$QEMU" >/dev/null || skip "$QEMU not installed (tools/deps-vm.sh as root installs it)"
"$QEMU" -accel help 2>/dev/null | grep -x tcg >/dev/null || skip "$QEMU cannot run: no TCG accelerator"
t0=$(date +%s)
"$here/build-vm.sh" || skip "cannot build the VM (kernel download or busybox-static missing)"
echo "check-vm: VM ready in $(( $(date +%s) - t0 ))s ($(cat build/vm/kernel-version))"

tests=("$here/smoke.sh")
for t in "$here"/test-*.sh; do
	[ -f "$t" ] && tests+=("$t")
done

failed=()
for t in "${tests[@]}"; do
	name=${t#"$root"/}
	echo "check-vm: === $name"
	t1=$(date +%s)
	# a test may ask for its own memory and time: "# vm-mem: MB", "# vm-timeout: S"
	mem=$(sed -n 's/^# vm-mem: *\([0-9]*\).*/\1/p' "$t" | head -1)
	tmo=$(sed -n 's/^# vm-timeout: *\([0-9]*\).*/\1/p' "$t" | head -1)
	tests/vm/run-vm.sh --timeout "${VM_TIMEOUT:-${tmo:-300}}" --mem "${VM_MEM:-${mem:-1024}}" "$t"
	rc=$?
	d=$(( $(date +%s) - t1 ))
	case $rc in
	0) echo "check-vm: PASS $name (${d}s)" ;;
	124) echo "check-vm: FAIL $name: timed out (${d}s)"; failed+=("$name") ;;
	125) echo "check-vm: FAIL $name: the VM did not boot (${d}s)"; failed+=("$name") ;;
	*) echo "check-vm: FAIL $name: exit $rc (${d}s)"; failed+=("$name") ;;
	esac
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "check-vm: ${#failed[@]} of ${#tests[@]} failed: ${failed[*]}"
	exit 1
fi
echo "check-vm: all ${#tests[@]} passed"
