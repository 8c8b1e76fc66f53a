#!/usr/bin/env bash
# test_nbd.sh - ramsterd's NBD frontend driven by clients we did not write
# (libnbd's nbdinfo, nbdsh and nbdcopy, fio's nbd engine, qemu-img) plus raw bad
# input (nbd_raw.py). Needs RAMSTER_BIN (the Makefile's integration target
# sets it). Prints cmocka-like lines, so tests/run-tests counts them.
set -u
BIN=${RAMSTER_BIN:-build/bin}
BIN=$(cd "$BIN" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/ramster-nbd.XXXXXX)
pass=0
fail=0
pids=()

cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${RAMSTER_KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

for tool in nbdinfo nbdcopy fio qemu-img python3; do
	if ! command -v $tool >/dev/null; then
		echo "[  SKIPPED ] test_nbd: $tool missing (tools/deps.sh installs it)"
		echo "[  PASSED  ] 0 test(s)."
		exit 0
	fi
done

# run NAME CMD...: one test case, its output kept in $T/NAME.log
run() {
	local name=$1
	shift
	echo "[ RUN      ] $name"
	if "$@" >"$T/$name.log" 2>&1; then
		echo "[       OK ] $name"
		pass=$((pass + 1))
	else
		tail -20 "$T/$name.log"
		echo "[  FAILED  ] $name"
		fail=$((fail + 1))
	fi
}

# start_node CONF NODE LOG: ramsterd in the background; waits for its NBD socket
start_node() {
	"$BIN/ramsterd" --config "$1" --node "$2" --log-level notice >>"$3" 2>&1 &
	pids+=($!)
	last_pid=$!
	local sock
	sock=$(awk -v n="[node $2]" '$0==n{f=1;next} /^\[/{f=0} f&&$1=="nbd_socket"{print $3}' "$1")
	for _ in $(seq 100); do
		[ -S "$sock" ] && return 0
		sleep 0.05
	done
	echo "ramsterd $2 did not come up:"
	cat "$3"
	return 1
}

alive() { kill -0 "$1" 2>/dev/null; }

# ---- a single node with two exports ----------------------------------------------
cat >"$T/one.ini" <<EOF
[node n1]
socket = $T/n1.sock
local_mb = 512
nbd_socket = $T/nbd.sock

[export ram]
size = 1G

[export disk]
size = 512M
backing = $T/disk.img
EOF
start_node "$T/one.ini" n1 "$T/n1.log" || exit 1
node=$last_pid
U="nbd+unix:///%s?socket=$T/nbd.sock"
uri() { printf "$U" "$1"; }

t_info() {
	nbdinfo --list "$(uri ram)" >"$T/list" || return 1
	grep -q 'export="ram"' "$T/list" && grep -q 'export="disk"' "$T/list" || return 1
	nbdinfo --json "$(uri ram)" >"$T/info.json" || return 1
	python3 - "$T/info.json" <<'EOF'
import json, sys
e = json.load(open(sys.argv[1]))["exports"][0]
assert e["export-size"] == 1 << 30, e
assert e["block_size_minimum"] == 512 and e["block_size_preferred"] == 4096, e
assert e["block_size_maximum"] >= 1 << 20 and e["can_flush"] and e["can_fua"], e
assert e["can_trim"] and e["can_zero"] and not e["is_read_only"], e
EOF
	[ "$(nbdinfo --size "$(uri disk)")" = $((512 << 20)) ]
}
run nbdinfo_handshake_list_size_blocksize t_info

# nbdsh (python3-libnbd): libnbd's own view of the handshake, a write and
# read at odd offsets, zeroes, trim, flush, and the errors the protocol
# promises for out-of-range requests. nbdsh runs "python3 -m nbd": Debian's
# python3 (with the nbd module) must come first on PATH, not a pyenv shim.
t_nbdsh() {
	PATH=/usr/bin:$PATH nbdsh -u "$(uri ram)" -c '
import errno, os
size = h.get_size()
assert size == 1 << 30, size
assert h.get_block_size(nbd.SIZE_MINIMUM) == 512
assert h.get_block_size(nbd.SIZE_PREFERRED) == 4096
assert h.can_flush() and h.can_fua() and h.can_trim() and h.can_zero()
assert not h.is_read_only() and h.can_multi_conn() in (True, False)
# compressible (the "ram" export has no backing file: random pages are refused)
data = b"".join(b"nbdsh line %06d %s\n" % (i, os.urandom(4).hex().encode()) for i in range(600))
data = data[:3 * 4096 + 1536]
h.pwrite(data, 8192 + 512)                       # unaligned edges: read-modify-write
assert h.pread(len(data), 8192 + 512) == data
assert h.pread(512, 8192) == bytes(512)          # the edge before it still zeros
h.pwrite(b"x" * 4096, 1 << 20, nbd.CMD_FLAG_FUA)
h.zero(4096, 8192 + 4096)
got = h.pread(len(data), 8192 + 512)
assert got[:3584] == data[:3584] and got[3584:7680] == bytes(4096), "zeroed block"
h.trim(1 << 20, 1 << 20)
assert h.pread(4096, 1 << 20) == bytes(4096), "trimmed block reads zeros"
h.flush()
# out of range: libnbd checks bounds itself unless told not to; the server must too
h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_BOUNDS)
for off, n in ((size - 512, 1024), (size, 512), ((1 << 62), 512)):
    try:
        h.pread(n, off)
        raise AssertionError("read past the end at %d succeeded" % off)
    except nbd.Error as e:
        assert e.errnum in (errno.EINVAL, errno.ENOSPC), (off, e.errnum, e.string)
    try:
        h.pwrite(bytes(n), off)
        raise AssertionError("write past the end at %d succeeded" % off)
    except nbd.Error as e:
        assert e.errnum in (errno.EINVAL, errno.ENOSPC), (off, e.errnum, e.string)
assert h.pread(512, size - 512) is not None      # the last sector is fine
print("nbdsh ok")
'
}
if PATH=/usr/bin:$PATH command -v nbdsh >/dev/null && /usr/bin/python3 -c 'import nbd' 2>/dev/null; then
	run nbdsh_handshake_io_errors t_nbdsh
else
	echo "[  SKIPPED ] nbdsh_handshake_io_errors: nbdsh missing (tools/deps.sh installs python3-libnbd)"
fi

# 256 MiB of mixed data: zeros, text, random, in 1 MiB runs
python3 - "$T/mixed.img" <<'EOF'
import os, random, sys
random.seed(1)
words = b"ramster tmem page pool export block node tier zero text lorem ipsum".split()
with open(sys.argv[1], "wb") as f:
    for i in range(256):
        k = i % 4
        if k == 0:
            f.write(bytes(1 << 20))
        elif k == 3:
            f.write(os.urandom(1 << 20))
        else:
            b = bytearray()
            while len(b) < 1 << 20:
                b += b" ".join(random.choice(words) for _ in range(10)) + b" %d\n" % random.randrange(10**9)
            f.write(bytes(b[: 1 << 20]))
EOF

t_copy() {
	nbdcopy --flush "$T/mixed.img" "$(uri disk)" || return 1
	nbdcopy "$(uri disk)" "$T/back.img" || return 1
	cmp "$T/mixed.img" <(head -c $((256 << 20)) "$T/back.img") || return 1
	qemu-img compare -f raw -F raw "$T/mixed.img" "$(uri disk)" 2>&1 | grep -q "identical\|Warning" ||
		qemu-img compare -f raw -F raw "$T/mixed.img" "$(uri disk)"
}
run nbdcopy_256M_mixed_roundtrip_cmp_qemu_img t_copy

# without backing, only the compressible part fits: text and zeros
t_copy_ram() {
	head -c $((192 << 20)) "$T/mixed.img" | python3 -c '
import sys
d = sys.stdin.buffer.read()
out = bytearray()
for i in range(0, len(d), 1 << 20):
    if (i >> 20) % 4 != 3:
        out += d[i:i + (1 << 20)]
sys.stdout.buffer.write(out)' >"$T/comp.img"
	nbdcopy "$T/comp.img" "$(uri ram)" || return 1
	qemu-img compare -f raw -F raw "$T/comp.img" "$(uri ram)"
}
run nbdcopy_compressible_no_backing t_copy_ram

# a refused page without backing is an error reply, never silent loss
t_refused() {
	head -c $((4 << 20)) /dev/urandom >"$T/rand.img"
	! nbdcopy "$T/rand.img" "$(uri ram)" &&
		"$BIN/ramsterctl" -s "$T/n1.sock" stats | awk '$1=="nbd_refused_lost"{exit !($2>0)}'
}
run refused_write_without_backing_fails t_refused

FIO_COMMON=(--ioengine=nbd --iodepth=16 --direct=1 --verify=crc32c --verify_fatal=1
	--do_verify=1 --verify_state_save=0 --output-format=normal)
t_fio_4k() {
	fio --name=rand4k "${FIO_COMMON[@]}" --uri="$(uri disk)" --rw=randwrite --bs=4k --size=128m || return 1
	! grep -qi "verify: bad\|error=" "$T/fio_random_4k_verify_backing.log"
}
run fio_random_4k_verify_backing t_fio_4k

t_fio_odd() {
	fio --name=odd "${FIO_COMMON[@]}" --uri="$(uri disk)" --rw=randwrite --blockalign=512 \
		--bssplit=512/20:3584/20:4k/20:8704/20:65536/10:1m/10 --size=64m --offset=3m || return 1
	! grep -qi "verify: bad\|error=" "$T/fio_odd_sizes_verify_backing.log"
}
run fio_odd_sizes_verify_backing t_fio_odd

# compressible data (fio's own pattern with the offset in it) in RAM only
t_fio_ram() {
	fio --name=ram "${FIO_COMMON[@]}" --uri="$(uri ram)" --rw=randrw --blockalign=512 \
		--bssplit=512/25:3584/25:4k/25:8704/25 --size=96m --verify_pattern='"ramster"%o' || return 1
	! grep -qi "verify: bad\|error=" "$T/fio_mixed_sizes_verify_ram.log"
}
run fio_mixed_sizes_verify_ram t_fio_ram

t_bad() {
	python3 "$HERE/nbd_raw.py" "$T/nbd.sock" ram $((1 << 30)) || return 1
	alive "$node" && nbdinfo --size "$(uri ram)" >/dev/null
}
run bad_input_error_replies_daemon_alive t_bad

t_ctl() {
	"$BIN/ramsterctl" -s "$T/n1.sock" exports >"$T/exports" || return 1
	cat "$T/exports"
	grep -q "^disk .*$T/disk.img" "$T/exports" && grep -q "^ram " "$T/exports" &&
		"$BIN/ramsterctl" -s "$T/n1.sock" stats | grep -q "^nbd_requests_write "
}
run ramsterctl_exports t_ctl

# restart with backing: what was flushed is read back identical
t_restart() {
	nbdcopy --flush "$T/mixed.img" "$(uri disk)" || return 1
	kill -TERM "$node" && wait "$node" || return 1
	start_node "$T/one.ini" n1 "$T/n1.log" || return 1
	node=$last_pid
	nbdcopy "$(uri disk)" "$T/after.img" || return 1
	cmp "$T/mixed.img" <(head -c $((256 << 20)) "$T/after.img")
}
run restart_with_backing_keeps_flushed_data t_restart

# ---- two nodes: node 1's local tier is smaller than the data -----------------------
kill -TERM "$node" 2>/dev/null
wait "$node" 2>/dev/null
"$BIN/ramsterctl" genkey >"$T/key" 2>/dev/null || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/key"
chmod 600 "$T/key"
port=$((20000 + RANDOM % 20000))
cat >"$T/two.ini" <<EOF
[cluster]
name = nbdtest
secret_file = $T/key
heartbeat_ms = 50
dead_after_ms = 2000

[node a]
id = 1
address = 127.0.0.1:$port
socket = $T/a.sock
; 2, not 16: the dense tier packs fio's pattern pages ~20 a frame, and 16 MiB held
; all 160 MiB of them, so nothing went to b; 2 MiB makes a remotify
local_mb = 2
donate_mb = 16
nbd_socket = $T/nbd-a.sock

[node b]
id = 2
address = 127.0.0.1:$((port + 1))
socket = $T/b.sock
local_mb = 64
donate_mb = 512
nbd_socket = $T/nbd-b.sock

[export big]
size = 1G
EOF
t_two() {
	start_node "$T/two.ini" a "$T/a.log" || return 1
	start_node "$T/two.ini" b "$T/b.log" || return 1
	sleep 0.5
	fio --name=two "${FIO_COMMON[@]}" --uri="nbd+unix:///big?socket=$T/nbd-a.sock" --rw=randwrite --bs=4k \
		--size=160m --verify_pattern='"collective"%o' || return 1
	! grep -qi "verify: bad\|error=" "$T/fio_two_nodes_collective_verify.log" || return 1
	"$BIN/ramsterctl" -s "$T/a.sock" exports
	"$BIN/ramsterctl" -s "$T/a.sock" exports | awk '$1=="big"{exit !($4>0)}'
}
run fio_two_nodes_collective_verify t_two

echo "$pass passed, $fail failed"
if [ $fail -eq 0 ]; then
	echo "[  PASSED  ] $pass test(s)."
	exit 0
fi
echo "[  PASSED  ] $pass test(s)."
echo "[  FAILED  ] $fail test(s), listed above"
exit 1
