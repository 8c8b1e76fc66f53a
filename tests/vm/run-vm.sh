#!/usr/bin/env bash
# Run one test script as root inside a throw-away VM that boots Debian's own
# kernel (so it has rdma_rxe, nbd, ...) under qemu TCG. The guest's / is this
# host's / over 9p, read-only, with tmpfs on /tmp and /run: the script sees
# the project tree (and build/bin/) at the same paths. Its cwd is the project
# root, stdin is /dev/null, and every RAMSTER_* variable is passed through.
#
# Usage: tests/vm/run-vm.sh [--mem MB] [--timeout S] [--smp N] SCRIPT [ARGS...]
# Prints the script's output (stdout and stderr, merged) as it runs, and exits
# with its status; 124 if it did not finish within the timeout (boot
# included), 125 if the VM failed to boot. VM_KEEP=1 keeps the run directory
# (console.log, out, status) and prints where it is.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VM_DIR=${VM_DIR:-$root/build/vm}
QEMU=${QEMU:-qemu-system-x86_64}

mem=1024
timeout=300
smp=2
usage() {
	echo "usage: $0 [--mem MB] [--timeout S] [--smp N] SCRIPT [ARGS...]" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	--mem) mem=${2:?}; shift 2 ;;
	--timeout) timeout=${2:?}; shift 2 ;;
	--smp) smp=${2:?}; shift 2 ;;
	--) shift; break ;;
	-*) usage ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || usage
script=$1
shift
[ -f "$script" ] || { echo "run-vm: no such script: $script" >&2; exit 2; }
script=$(cd "$(dirname "$script")" && pwd)/$(basename "$script")

command -v "$QEMU" >/dev/null || { echo "run-vm: $QEMU not installed (tools/deps-vm.sh)" >&2; exit 125; }
"$here/build-vm.sh" || exit 125

io=$(mktemp -d "${TMPDIR:-/tmp}/ramster-vm.XXXXXX")
qpid=""
tpid=""
cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null
	[ -n "$tpid" ] && kill "$tpid" 2>/dev/null
	if [ "${VM_KEEP:-0}" = 1 ]; then
		echo "run-vm: kept $io" >&2
	else
		rm -rf "$io"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The guest has its own tmpfs on /tmp and /run, so a script kept there on the
# host is invisible to it: ship a copy through the io share instead.
gscript=$script
case $script in
/tmp/* | /run/* | /dev/shm/*)
	cp "$script" "$io/script"
	gscript=/run/vm-script
	;;
esac

echo "$root" > "$io/root" # init binds it back if it lives under /tmp or /run

# the command the guest runs, in the chroot: environment, cwd, script, args
{
	echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
	echo 'export HOME=/tmp TMPDIR=/tmp TERM=dumb LANG=C.UTF-8 RAMSTER_VM=1'
	while IFS='=' read -r name _; do
		printf 'export %s=%q\n' "$name" "${!name}"
	done < <(env | grep -E '^RAMSTER_[A-Za-z0-9_]*=' || true)
	printf 'cd %q || exit 125\n' "$root"
	printf 'exec /bin/sh %q' "$gscript"
	printf ' %q' "$@"
	echo
} > "$io/cmd"
: > "$io/out"

start=$(date +%s%N)
# -nic none: no network but the guest's own veths. TCG: KVM fails on this
# machine kind ("failed to set MSR 0x10a") or hangs, and TCG boots in ~10 s.
"$QEMU" -machine q35 -accel tcg -cpu max -m "$mem" -smp "$smp" \
	-nographic -no-reboot -nic none -monitor none -serial stdio \
	-kernel "$VM_DIR/vmlinuz" -initrd "$VM_DIR/initrd.gz" \
	-append "console=ttyS0 panic=-1 quiet loglevel=1 mitigations=off" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs local,path="$io",mount_tag=io,security_model=none,multidevs=remap \
	< /dev/null > "$io/console.log" 2>&1 &
qpid=$!

tail -n +1 -f "$io/out" &
tpid=$!

# wait for qemu, or for the deadline
deadline=$(( $(date +%s) + timeout ))
timed_out=0
boot_ms=""
while kill -0 "$qpid" 2>/dev/null; do
	if [ -z "$boot_ms" ] && [ -f "$io/booted" ]; then
		boot_ms=$(( ($(date +%s%N) - start) / 1000000 ))
	fi
	if [ "$(date +%s)" -ge "$deadline" ]; then
		timed_out=1
		kill "$qpid" 2>/dev/null || true
		sleep 1
		kill -9 "$qpid" 2>/dev/null || true
		break
	fi
	sleep 0.2
done
wait "$qpid" 2>/dev/null || true
qpid=""
sleep 0.3	# let tail print the last lines
kill "$tpid" 2>/dev/null || true
wait "$tpid" 2>/dev/null || true
tpid=""

secs() { echo "$(($1 / 1000)).$(($1 % 1000 / 100))"; }
elapsed=$(secs $(( ($(date +%s%N) - start) / 1000000 )))
booted="booted in $(secs "${boot_ms:-0}")s"
[ -n "$boot_ms" ] || booted="boot time not seen"
console_tail() {
	echo "run-vm: last console lines:" >&2
	tr -d '\r' < "$io/console.log" | tail -n 25 | sed 's/^/  | /' >&2
}
if [ -f "$io/status" ]; then
	rc=$(cat "$io/status")
	echo "run-vm: $(basename "$script") exited $rc ($booted, ${elapsed}s in all)" >&2
	exit "$rc"
fi
if [ $timed_out = 1 ]; then
	if [ -f "$io/booted" ]; then
		echo "run-vm: $(basename "$script") timed out after ${timeout}s ($booted)" >&2
	else
		echo "run-vm: timed out after ${timeout}s before the VM finished booting" >&2
		console_tail
	fi
	exit 124
fi
if [ ! -f "$io/booted" ]; then
	echo "run-vm: the VM failed to boot" >&2
	console_tail
	exit 125
fi
echo "run-vm: the VM stopped before $(basename "$script") finished" >&2
console_tail
exit 125
