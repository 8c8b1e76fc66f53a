#!/bin/sh
# VM test: the guest kernel swaps into ramster. Two ramsterd nodes on the
# guest's loopback form a collective; node 1 serves an NBD export; the kernel's nbd
# client attaches it (nbd-client, over the Unix socket), mkswap + swapon;
# memhog fills and re-reads known data well beyond the guest's RAM and
# checks every byte; ramsterctl shows the pages that went through.
# NOT YET PASSING, so not a test-*.sh that make check-vm runs (see docs/vm.md):
# the daemons that take the swap live in the same 256 MiB guest and stall
# for memory until the kernel's NBD timeout fails the device.
# Run with: tests/vm/run-vm.sh --mem 256 tests/vm/wip-nbd-swap.sh
# vm-mem: 256
# vm-timeout: 600
bin=${RAMSTER_BIN:-build/bin}
hog=${RAMSTER_MEMHOG:-$bin/../tests/vm/memhog}
hog_mb=${RAMSTER_HOG_MB:-320}

[ "${RAMSTER_VM:-}" = 1 ] || { echo "runs inside the VM: tests/vm/run-vm.sh --mem 256 $0" >&2; exit 1; }
for f in "$bin/ramsterd" "$bin/ramsterctl" "$hog"; do
	[ -x "$f" ] || { echo "FAIL - $f not built"; exit 1; }
done
[ -b /dev/nbd0 ] || { echo "FAIL - no /dev/nbd0 (nbd.ko not loaded)"; exit 1; }
command -v nbd-client >/dev/null || { echo "FAIL - nbd-client not installed (tools/deps-vm.sh)"; exit 1; }

# Keep memory free ahead of need: the daemons that take the swapped pages
# live in this same small guest, and must find memory for them without
# waiting on the very swap they serve (they are I/O flushers: they do not
# reclaim through I/O).
sysctl -qw vm.min_free_kbytes=32768 2>/dev/null || echo 32768 > /proc/sys/vm/min_free_kbytes

dir=$(mktemp -d /tmp/swap-test.XXXXXX)
pids=""
cleanup() {
	swapoff /dev/nbd0 2>/dev/null
	nbd-client -d /dev/nbd0 >/dev/null 2>&1
	for p in $pids; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
}
trap cleanup EXIT
ip link set lo up

"$bin/ramsterctl" genkey > "$dir/key" && chmod 600 "$dir/key"
cat > "$dir/conf" <<CONF
[cluster]
name = swaptest
secret_file = $dir/key
heartbeat_ms = 200
dead_after_ms = 5000

[node n1]
id = 1
address = 127.0.0.1:7481
socket = $dir/n1.sock
nbd_socket = $dir/nbd.sock
local_mb = 48
donate_mb = 8

[node n2]
id = 2
address = 127.0.0.2:7482
socket = $dir/n2.sock
local_mb = 64
donate_mb = 256

[export swap0]
size = 1G
CONF

for n in n1 n2; do
	"$bin/ramsterd" --config "$dir/conf" --node $n --log-level notice 2> "$dir/$n.log" &
	pids="$pids $!"
done
i=0
until "$bin/ramsterctl" --socket "$dir/n1.sock" peers 2>/dev/null | grep -q ' up '; do
	i=$((i + 1))
	[ $i -gt 300 ] && { echo "FAIL - the collective did not come up"; cat "$dir"/*.log; exit 1; }
	sleep 0.1
done
echo "ok   - collective up"

nbd-client -N swap0 -u "$dir/nbd.sock" /dev/nbd0 -b 4096 -s -t 60 ||
	{ echo "FAIL - nbd-client could not attach"; cat "$dir/n1.log"; exit 1; }
echo "ok   - nbd-client attached swap0 as /dev/nbd0 ($(cat /sys/block/nbd0/size) sectors)"
mkswap /dev/nbd0 >/dev/null && swapon /dev/nbd0 || { echo "FAIL - mkswap/swapon"; exit 1; }
echo "ok   - swapon: $(grep nbd0 /proc/swaps)"
grep -E 'MemTotal|SwapTotal' /proc/meminfo | tr -s ' ' | tr '\n' ' '; echo

start=$(cut -d. -f1 /proc/uptime)
if "$hog" "$hog_mb"; then
	echo "ok   - memhog $hog_mb MiB verified ($(( $(cut -d. -f1 /proc/uptime) - start )) s)"
	rc=0
else
	echo "FAIL - memhog"
	rc=1
	for n in n1 n2; do echo "# $n.log:"; tail -n 15 "$dir/$n.log" | sed 's/^/#   /'; done
	dmesg | grep -iE 'nbd|oom|killed|block' | tail -n 15 | sed 's/^/# dmesg: /'
fi
echo "# swap used at the end: $(awk '/nbd0/ {print $4}' /proc/swaps) KiB; vmstat: $(grep -E '^pswp(in|out)' /proc/vmstat | tr '\n' ' ')"
for n in n1 n2; do
	echo "# ramsterctl stats ($n)"
	"$bin/ramsterctl" --socket "$dir/$n.sock" stats |
		grep -E '^(tmem_(puts|gets|hits|pages)|tier_(stored_pages|zero_pages|remote_pages|remotified|repatriated)|foreign_pages|nbd_[a-z_]*(reads|writes|errors)) ' | sed 's/^/#   /'
done
"$bin/ramsterctl" --socket "$dir/n1.sock" exports 2>/dev/null | sed 's/^/#   /'
puts=$("$bin/ramsterctl" --socket "$dir/n1.sock" stats | awk '$1 == "tmem_puts" {print $2}')
[ "${puts:-0}" -gt 1000 ] && echo "ok   - $puts pages went through ramster" ||
	{ echo "FAIL - the swap did not go through ramster (tmem_puts ${puts:-0})"; rc=1; }
exit $rc
