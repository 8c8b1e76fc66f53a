#!/usr/bin/env bash
# test_nbd.sh - ramsterd's NBD frontend driven by clients we did not write
# (libnbd's nbdinfo, nbdsh and nbdcopy, fio's nbd engine, qemu-img) plus raw bad
# input (nbd_raw.py). Needs RAMSTER_BIN (the Makefile's integration target
# sets it). Prints cmocka-like lines, so tests/run-tests counts them.
set -u
. "$(dirname "$0")/lib.sh"
lib_init test_nbd
RUN_TAIL=20
# the nodes lock their memory and wait for their NBD sockets
NODE_MEMLOCK=1
NODE_WAIT=nbd_socket

need nbdinfo nbdcopy fio qemu-img python3

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

[export wide]
size = 5G

[export sparse]
size = 256M
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
# compressible text (the "ram" export has no backing file; random pages are kept raw)
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

# without backing, every write is kept: the random quarter is stored raw (the
# tier's huge class), and it all reads back
t_copy_ram() {
	nbdcopy "$T/mixed.img" "$(uri ram)" || return 1
	qemu-img compare -f raw -F raw "$T/mixed.img" "$(uri ram)" || return 1
	nbdcopy "$(uri ram)" "$T/ram-back.img" || return 1
	cmp "$T/mixed.img" <(head -c $((256 << 20)) "$T/ram-back.img") || return 1
	"$BIN/ramsterctl" -s "$T/n1.sock" stats | tee "$T/stats-ram" | grep -E "tier_raw|nbd_refused"
	awk '$1=="tier_raw_pages"{r=$2} $1=="nbd_refused_lost"{l=$2} END{exit !(r>=16384 && l==0)}' "$T/stats-ram"
}
run nbdcopy_mixed_no_backing_every_write_kept t_copy_ram

# the issue's case: 96 MiB (32 MiB zeros, text, 32 MiB random) into RAM only
t_random_ram() {
	{ head -c $((32 << 20)) /dev/zero; head -c $((96 << 20)) "$T/mixed.img" | tail -c $((32 << 20));
	  head -c $((32 << 20)) /dev/urandom; } >"$T/issue.img"
	nbdcopy "$T/issue.img" "$(uri ram)" || return 1
	nbdcopy "$(uri ram)" "$T/issue-back.img" || return 1
	cmp "$T/issue.img" <(head -c $((96 << 20)) "$T/issue-back.img")
}
run nbdcopy_random_no_backing_roundtrip t_random_ram

FIO_COMMON=(--ioengine=nbd --iodepth=16 --direct=1 --verify=crc32c --verify_fatal=1 --verify_state_save=0
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

# no stalls: while one client zeroes 4 GiB of a 5 GiB export (four pipelined 1 GiB WRITE_ZEROES,
# two with NO_HOLE: half a million zero pages stored), another's 4 KiB reads are
# answered between the slices. Prints the latencies; asserts only a generous
# bound (the loop was held for seconds per request before slicing).
t_no_stall() {
	PATH=/usr/bin:$PATH python3 - "$(uri wide)" <<'EOF'
import subprocess, sys, time
import nbd
uri = sys.argv[1]
b = nbd.NBD()
b.connect_uri(uri)
b.pwrite(b"r" * 4096, 4 << 30)        # past the zeroed 4 GiB
# the zeroing client, in a process of its own: four pipelined 1 GiB
# WRITE_ZEROES, two with NO_HOLE (zero pages stored), two that drop blocks
zero = subprocess.Popen([sys.executable, "-c", """
import sys, nbd
a = nbd.NBD()
a.connect_uri(sys.argv[1])
cs = [a.aio_zero(1 << 30, i << 30, flags=nbd.CMD_FLAG_NO_HOLE if i < 2 else 0) for i in range(4)]
while a.aio_in_flight() > 0:
    a.poll(-1)
assert all(a.aio_command_completed(c) for c in cs)
""", uri])
t0 = time.monotonic()
lat = []
while zero.poll() is None:
    t = time.monotonic()
    assert b.pread(4096, 4 << 30) == b"r" * 4096
    lat.append(time.monotonic() - t)
    time.sleep(0.01)
    if time.monotonic() - t0 > 600:
        zero.kill()
        raise AssertionError("zeroes did not finish")
total = time.monotonic() - t0
assert zero.returncode == 0, "the zeroing client failed"
assert b.pread(4096, (1 << 30) + 8192) == bytes(4096)
lat.sort()
print("zeroing 4 GiB took %.2f s; %d reads meanwhile: median %.2f ms, max %.2f ms"
      % (total, len(lat), 1e3 * lat[len(lat) // 2] if lat else 0, 1e3 * max(lat or [0])))
assert len(lat) >= 1
assert max(lat) < max(2.0, total / 2), "a 4 KiB read waited for the whole zeroing"
EOF
}
run no_stall_read_while_zeroing_4G t_no_stall

# structured replies and base:allocation: the map shows what was written and
# nothing else, and qemu-img / nbdcopy skip the holes
t_map() {
	PATH=/usr/bin:$PATH python3 - "$(uri sparse)" <<'EOF' || return 1
import sys
import nbd
h = nbd.NBD()
h.add_meta_context("base:allocation")
h.connect_uri(sys.argv[1])
assert h.can_meta_context("base:allocation")
h.pwrite(b"a" * 8192, 64 << 20)
h.pwrite(b"b" * 512, (128 << 20) + 512)      # a partial block: its whole page is data
h.pwrite(b"c" * 4096, (200 << 20))
h.trim(4096, 200 << 20)                      # and dropped again: a hole
ext = []
h.block_status(256 << 20, 0, lambda meta, off, e, err: ext.extend(e))
want = [64 << 20, 3, 8192, 0, (64 << 20) - 8192, 3, 4096, 0, (128 << 20) - 4096, 3]
assert ext == want, ext
one = []
h.block_status(256 << 20, 0, lambda meta, off, e, err: one.extend(e), nbd.CMD_FLAG_REQ_ONE)
assert one == [64 << 20, 3], one
EOF
	nbdinfo --map "$(uri sparse)" | tee "$T/map"
	grep -q "^ *67108864 *8192 *0 *data" "$T/map" && grep -q "hole,zero" "$T/map" || return 1
	qemu-img convert -f raw -O qcow2 "$(uri sparse)" "$T/sparse.qcow2" || return 1
	qemu-img map -f qcow2 "$T/sparse.qcow2" | tee "$T/qmap"
	[ "$(stat -c %s "$T/sparse.qcow2")" -lt $((4 << 20)) ] || return 1
	nbdcopy "$(uri sparse)" "$T/sparse.raw" || return 1
	du -k "$T/sparse.raw"
	[ "$(du -k "$T/sparse.raw" | cut -f1)" -lt 4096 ] &&
		qemu-img compare -f raw -F qcow2 "$T/sparse.raw" "$T/sparse.qcow2"
}
if PATH=/usr/bin:$PATH command -v nbdsh >/dev/null && /usr/bin/python3 -c 'import nbd' 2>/dev/null; then
	run structured_replies_block_status_map_sparse_copy t_map
else
	echo "[  SKIPPED ] structured_replies_block_status_map_sparse_copy: python3-libnbd missing"
fi

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

# ---- a full node: a write fails only when nothing is left, with ENOSPC -------------
cat >"$T/full.ini" <<EOF
[node f]
socket = $T/f.sock
local_mb = 4
nbd_socket = $T/nbd-f.sock

[export small]
size = 16M
EOF
t_full() {
	start_node "$T/full.ini" f "$T/f.log" || return 1
	local fpid=$last_pid rc=0
	head -c $((16 << 20)) /dev/urandom >"$T/rand16.img"
	PATH=/usr/bin:$PATH python3 - "$T/nbd-f.sock" "$T/rand16.img" <<'EOF' || rc=1
import errno, sys
import nbd
h = nbd.NBD()
h.connect_uri("nbd+unix:///small?socket=" + sys.argv[1])
data = open(sys.argv[2], "rb").read()
kept = 0
for off in range(0, len(data), 1 << 20):
    try:
        h.pwrite(data[off:off + (1 << 20)], off)
        kept = off + (1 << 20)
    except nbd.Error as e:
        assert e.errnum == errno.ENOSPC, (off, e.errnum, e.string)
        break
else:
    raise AssertionError("16 MiB of random pages fit a 4 MiB tier")
assert kept >= 2 << 20, kept          # what fitted was kept
assert h.pread(kept, 0) == data[:kept]
h.trim(len(data), 0)                  # room again: writes are kept again
h.pwrite(data[:1 << 20], 0)
assert h.pread(1 << 20, 0) == data[:1 << 20]
print("full ok, kept", kept)
EOF
	"$BIN/ramsterctl" -s "$T/f.sock" stats | grep -E "nbd_nospace" | tee "$T/full-stats"
	kill -TERM "$fpid"
	wait "$fpid"
	[ $rc -eq 0 ] || return 1
	awk '$1=="nbd_nospace"{n=$2} $1=="nbd_nospace_episodes"{e=$2} END{exit !(n>0 && e==1)}' "$T/full-stats" || return 1
	[ "$(grep -c "writes fail with ENOSPC" "$T/f.log")" = 1 ] && grep -q "writes are kept again" "$T/f.log"
}
if PATH=/usr/bin:$PATH command -v nbdsh >/dev/null && /usr/bin/python3 -c 'import nbd' 2>/dev/null; then
	run full_tier_enospc_once_per_episode t_full
else
	echo "[  SKIPPED ] full_tier_enospc_once_per_episode: python3-libnbd missing"
fi

# ---- the backing file is never reached through a symlink, nor a FIFO -------------
t_backing_refused() {
	local what
	echo precious >"$T/precious"
	ln -sf "$T/precious" "$T/link.img"
	mkfifo "$T/fifo.img"
	for what in link fifo; do
		printf '[node r]\nsocket = %s\nnbd_socket = %s\n\n[export x]\nsize = 1M\nbacking = %s\n' \
			"$T/r.sock" "$T/nbd-r.sock" "$T/$what.img" >"$T/r-$what.ini"
		if timeout 20 "$BIN/ramsterd" --config "$T/r-$what.ini" --node r >"$T/r-$what.log" 2>&1; then
			echo "ramsterd started with a $what as backing"
			return 1
		fi
		cat "$T/r-$what.log"
	done
	grep -q "symlink" "$T/r-link.log" && grep -q "not a regular file" "$T/r-fifo.log" &&
		[ "$(cat "$T/precious")" = precious ]
}
run backing_symlink_and_fifo_refused t_backing_refused

# ---- honest FLUSH: a failed sync fails that FLUSH and every later one until -------
# the data is written again; a FLUSH on one connection covers the writes of
# another. fdatasync fails through an LD_PRELOAD shim (failsync.c) while a flag
# file exists; the data that the file alone held (the 1 MiB tier is full) is
# lost by a failed sync until the client writes it again.
cat >"$T/sync.ini" <<EOF
[node s]
socket = $T/s.sock
local_mb = 1
nbd_socket = $T/nbd-s.sock

[export d]
size = 16M
backing = $T/d.img
EOF
t_sync() {
	cc -shared -fPIC -O2 -o "$T/failsync.so" "$HERE/failsync.c" -ldl || return 1
	# a sanitizer build's runtime must come first in the preload list (make asan, make tsan)
	local san
	san=$(ldd "$BIN/ramsterd" | awk '$1 ~ /^lib(a|t)san\.so/ {print $3; exit}')
	LD_PRELOAD="${san:+$san }$T/failsync.so" RAMSTER_FAILSYNC="$T/failsync.flag" start_node "$T/sync.ini" s "$T/s.log" || return 1
	local spid=$last_pid rc=0
	PATH=/usr/bin:$PATH python3 - "$T/nbd-s.sock" "$T/d.img" "$T/failsync.flag" <<'EOF' || rc=1
import errno, os, sys
import nbd
sock, img, flag = sys.argv[1:4]
uri = "nbd+unix:///d?socket=" + sock
h1, h2 = nbd.NBD(), nbd.NBD()
h1.connect_uri(uri)
h2.connect_uri(uri)
assert h1.can_multi_conn()
def file_at(off, n):
    with open(img, "rb") as f:
        f.seek(off)
        return f.read(n)
def fails(fn, *a):
    try:
        fn(*a)
    except nbd.Error as e:
        assert e.errnum == errno.EIO, e.string
        return True
    return False
A, B, C = (os.urandom(8192) for _ in range(3))
# multi-conn: a write completed on h1, flushed by h2, is in the file
h1.pwrite(A, 0)
h2.flush()
assert file_at(0, 8192) == A
# the sync fails: that FLUSH and every later one, FUA too
open(flag, "w").close()
h1.pwrite(B, 0)
assert fails(h2.flush)
assert fails(h1.flush)
assert fails(h1.pwrite, C, 40960, nbd.CMD_FLAG_FUA)
assert fails(h2.flush)
# the disk is back: the next FLUSH writes B and C again from RAM and succeeds
os.unlink(flag)
h2.flush()
assert file_at(0, 8192) == B and file_at(40960, 8192) == C
# 4 MiB of random data overflows the 1 MiB tier into the file; a failed sync
# loses what the file alone held: FLUSH fails until it is written again
D = os.urandom(4 << 20)
open(flag, "w").close()
h1.pwrite(D, 1 << 20)
assert fails(h2.flush)
os.unlink(flag)
assert fails(h2.flush), "data lost by a failed sync reported as flushed"
assert fails(h1.flush)
h1.pwrite(D, 1 << 20)
h2.flush()
assert file_at(1 << 20, 4 << 20) == D and h2.pread(4 << 20, 1 << 20) == D
print("honest flush ok")
EOF
	"$BIN/ramsterctl" -s "$T/s.sock" stats | grep -E "nbd_sync|nbd_backing" | tee "$T/sync-stats"
	kill -TERM "$spid"
	wait "$spid"
	[ $rc -eq 0 ] || return 1
	awk '$1=="nbd_sync_failures"{f=$2} $1=="nbd_sync_lost"{l=$2} END{exit !(f>=4 && l>0)}' "$T/sync-stats"
}
if ! command -v cc >/dev/null; then
	echo "[  SKIPPED ] flush_honest_failed_sync_multi_conn: no C compiler for the LD_PRELOAD shim"
elif PATH=/usr/bin:$PATH command -v nbdsh >/dev/null && /usr/bin/python3 -c 'import nbd' 2>/dev/null; then
	run flush_honest_failed_sync_multi_conn t_sync
else
	echo "[  SKIPPED ] flush_honest_failed_sync_multi_conn: python3-libnbd missing"
fi

# ---- a slow backing file does not stall the loop: its I/O runs on the worker -------
# pread and pwrite of the backing file take 2 ms more each (the shim, while a flag file
# exists); one client writes 8 MiB of random data into a 1 MiB tier with a backing file
# in 4 MiB requests (~2000 pwrites: 4 s and more), another reads a RAM export's block
# meanwhile. With the file's I/O on the loop (the build before the worker took it) the
# slowest read waited 2216 ms (11 reads in 4 s); on the worker 21 ms (721). Bound: 0.5 s.
cat >"$T/slow.ini" <<EOF
[node w]
socket = $T/w.sock
local_mb = 1
nbd_socket = $T/nbd-w.sock

[export d]
size = 16M
backing = $T/slow.img

[export r]
size = 4M
EOF
t_slow_file() {
	local san wpid rc=0
	cc -shared -fPIC -O2 -o "$T/failsync.so" "$HERE/failsync.c" -ldl || return 1
	san=$(ldd "$BIN/ramsterd" | awk '$1 ~ /^lib(a|t)san\.so/ {print $3; exit}')
	LD_PRELOAD="${san:+$san }$T/failsync.so" RAMSTER_SLOWIO="$T/slowio.flag" start_node "$T/slow.ini" w "$T/w.log" || return 1
	wpid=$last_pid
	PATH=/usr/bin:$PATH python3 - "$T/nbd-w.sock" "$T/slowio.flag" <<'EOF' || rc=1
import os, sys, threading, time
import nbd
sock, flag = sys.argv[1:3]
def conn(name):
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix(sock)
    return h
d, r = conn("d"), conn("r")
block = os.urandom(4096)
r.pwrite(block, 0)
data = os.urandom(8 << 20)
open(flag, "w").close()
took = {}
def writer():
    t = time.monotonic()
    for off in range(0, len(data), 4 << 20):
        d.pwrite(data[off:off + (4 << 20)], off)
    took["w"] = time.monotonic() - t
th = threading.Thread(target=writer)
th.start()
worst, reads = 0.0, 0
while th.is_alive():
    t = time.monotonic()
    assert r.pread(4096, 0) == block
    worst = max(worst, time.monotonic() - t)
    reads += 1
    time.sleep(0.005)
th.join()
os.unlink(flag)
print("8 MiB into the slow file took %.1f s; %d reads of the RAM export meanwhile, the slowest %.0f ms"
      % (took["w"], reads, worst * 1e3))
assert d.pread(len(data), 0) == data, "the slow file's data came back wrong"
assert took["w"] > 2.0, "the file was not slow: the case proves nothing"
assert worst < 0.5, "a read waited for the backing file's I/O"
EOF
	"$BIN/ramsterctl" -s "$T/w.sock" stats | grep -E "nbd_backing_(writes|reads)"
	kill -TERM "$wpid"
	wait "$wpid"
	return $rc
}
if ! command -v cc >/dev/null; then
	echo "[  SKIPPED ] slow_backing_file_no_loop_stall: no C compiler for the LD_PRELOAD shim"
elif PATH=/usr/bin:$PATH /usr/bin/python3 -c 'import nbd' 2>/dev/null; then
	run slow_backing_file_no_loop_stall t_slow_file
else
	echo "[  SKIPPED ] slow_backing_file_no_loop_stall: python3-libnbd missing"
fi

# ---- two nodes: node 1's local tier is smaller than the data -----------------------
stop_node n1
make_key "$T/key"
port=$(free_ports 2) || exit 1
{
	cluster_section nbdtest
	# 2, not 16: the dense tier packs fio's pattern pages ~20 a frame, and 16 MiB held
	# all 160 MiB of them, so nothing went to b; 2 MiB makes a remotify
	node_section a 1 "$port" 2 16 "nbd_socket = $T/nbd-a.sock"
	node_section b 2 $((port + 1)) 64 512 "nbd_socket = $T/nbd-b.sock"
	printf '\n[export big]\nsize = 1G\n'
} >"$T/two.ini"

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

# incompressible pages go to the peer raw and come back (a's tier is 2 MiB)
t_two_random() {
	head -c $((48 << 20)) /dev/urandom >"$T/rand48.img"
	nbdcopy "$T/rand48.img" "nbd+unix:///big?socket=$T/nbd-a.sock" || return 1
	nbdcopy "nbd+unix:///big?socket=$T/nbd-a.sock" "$T/rand48-back.img" || return 1
	cmp "$T/rand48.img" <(head -c $((48 << 20)) "$T/rand48-back.img") || return 1
	"$BIN/ramsterctl" -s "$T/a.sock" stats | grep -E "tier_raw|tier_remotified|nbd_remote_gets"
	"$BIN/ramsterctl" -s "$T/a.sock" stats | awk '$1=="nbd_remote_gets"{exit !($2>0)}'
}
run random_pages_through_the_peer_roundtrip t_two_random

finish
