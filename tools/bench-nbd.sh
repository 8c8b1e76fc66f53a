#!/usr/bin/env bash
# bench-nbd.sh BIN_DIR - the NBD frontend against nbdkit's memory plugin, same
# machine, same run, both over a Unix socket, driven by fio's nbd engine:
#   4 KiB random reads at iodepth 16     >= 0.8 x nbdkit (IOPS), on fio's
#   4 KiB random writes at iodepth 1     >= 0.8 x nbdkit   60 %-compressible
#     buffers and again on incompressible ones (--buffer_compress_percentage=0)
#   RAM per GiB stored, every byte in RAM on both sides (no backing file: the
#     tier keeps incompressible blocks raw), RSS deltas after nbdcopy of 256 MiB:
#     mixed data (zeros, text, random)   <= 0.75 x nbdkit
#     incompressible data (urandom)      <= 1.05 x nbdkit
# The IOPS figures are medians over rounds; each round runs both servers one
# after the other (the order alternating), and its ratio is taken within the
# round, so a slow spell of this shared machine hits both sides of a ratio.
# A report, not a test: prints figures and PASS/BELOW, exits 0 unless a tool
# failed. Environment: RAMSTER_BENCH_NBD_SECS (seconds a fio run, default 3),
# RAMSTER_BENCH_NBD_ROUNDS (default 5).
set -u

bin=$(cd "${1:-build/bin}" && pwd)
secs=${RAMSTER_BENCH_NBD_SECS:-3}
rounds=${RAMSTER_BENCH_NBD_ROUNDS:-5}
for tool in fio nbdkit nbdcopy python3; do
	command -v $tool >/dev/null || { echo "bench-nbd: $tool missing (tools/deps.sh)"; exit 0; }
done
dir=$(mktemp -d /tmp/ramster-bench-nbd.XXXXXX) || exit 1
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

cat >"$dir/node.ini" <<EOF
[node bench]
socket = $dir/r.sock
local_mb = 2048
nbd_socket = $dir/nbd.sock

[export b]
size = 1G

[export mixed]
size = 256M

[export random]
size = 256M
EOF
"$bin/ramsterd" --config "$dir/node.ini" --log-level warn 2>"$dir/ramsterd.log" &
rpid=$!
pids+=($rpid)
nbdkit -f -U "$dir/kit.sock" memory 1G &
kpid=$!
pids+=($kpid)
nbdkit -f -U "$dir/kit2.sock" memory 256M & # a fresh one for the RAM figure
k2pid=$!
pids+=($k2pid)
nbdkit -f -U "$dir/kit3.sock" memory 256M & # and one for incompressible data
k3pid=$!
pids+=($k3pid)
for _ in $(seq 100); do
	[ -S "$dir/nbd.sock" ] && [ -S "$dir/kit.sock" ] && [ -S "$dir/kit2.sock" ] &&
		[ -S "$dir/kit3.sock" ] && break
	sleep 0.05
done

rss_kb() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }

# fio JOB URI RW BS DEPTH [EXTRA...]: print IOPS ($comp: buffer_compress_percentage)
comp=60
fio_iops() {
	local name=$1 uri=$2 rw=$3 bs=$4 depth=$5
	shift 5
	fio --name="$name" --ioengine=nbd --uri="$uri" --rw="$rw" --bs="$bs" --iodepth="$depth" \
		--size=256m --direct=1 --buffer_compress_percentage=$comp --refill_buffers \
		--buffer_compress_chunk=512 --output-format=json "$@" >"$dir/$name.json" 2>"$dir/$name.err" ||
		{ cat "$dir/$name.err" >&2; echo 0; return; }
	python3 -c '
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]  # fio may print a line before it
print(int(j["read"]["iops"] + j["write"]["iops"]))' "$dir/$name.json"
}

R="nbd+unix:///b?socket=$dir/nbd.sock"
K="nbd+unix:///?socket=$dir/kit.sock"
# rounds: "rd_r rd_k wr_r wr_k" a line, in $dir/rounds (60 %) and $dir/rounds0 (0 %)
for comp in 60 0; do
# fill the region the reads hit, in both
fio_iops fill-r "$R" write 1m 4 >/dev/null
fio_iops fill-k "$K" write 1m 4 >/dev/null
for i in $(seq "$rounds"); do
	rd() { fio_iops "rd-$1" "$2" randread 4k 16 --time_based --runtime="$secs"; }
	wr() { fio_iops "wr-$1" "$2" randwrite 4k 1 --time_based --runtime="$secs"; }
	if [ $((i % 2)) = 1 ]; then
		a=$(rd r "$R"); b=$(rd k "$K"); c=$(wr r "$R"); d=$(wr k "$K")
	else
		b=$(rd k "$K"); a=$(rd r "$R"); d=$(wr k "$K"); c=$(wr r "$R")
	fi
	echo "$a $b $c $d" >>"$dir/rounds$([ $comp = 0 ] && echo 0)"
	echo "bench-nbd: ${comp}% compressible, round $i/$rounds: randread $a vs $b, randwrite $c vs $d" >&2
done
done

# RAM per GiB stored: 256 MiB of 1 MiB runs of zeros, text, text, random
python3 - "$dir/data.img" <<'EOF'
import os, random, sys
random.seed(3)
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
r0=$(rss_kb $rpid)
k0=$(rss_kb $k2pid)
nbdcopy "$dir/data.img" "nbd+unix:///mixed?socket=$dir/nbd.sock" || echo "bench-nbd: nbdcopy to ramsterd failed"
nbdcopy "$dir/data.img" "nbd+unix:///?socket=$dir/kit2.sock" || echo "bench-nbd: nbdcopy to nbdkit failed"
r1=$(rss_kb $rpid)
k1=$(rss_kb $k2pid)
head -c $((256 << 20)) /dev/urandom >"$dir/random.img"
k2=$(rss_kb $k3pid)
nbdcopy "$dir/random.img" "nbd+unix:///random?socket=$dir/nbd.sock" || echo "bench-nbd: nbdcopy to ramsterd failed"
nbdcopy "$dir/random.img" "nbd+unix:///?socket=$dir/kit3.sock" || echo "bench-nbd: nbdcopy to nbdkit failed"
r2=$(rss_kb $rpid)
k3=$(rss_kb $k3pid)

python3 - "$dir/rounds" "$dir/rounds0" "$secs" "$r0" "$r1" "$k0" "$k1" "$r2" "$k2" "$k3" <<'EOF'
import statistics, sys
secs = sys.argv[3]
r0, r1, k0, k1, r2, k2, k3 = map(int, sys.argv[4:])
def ratio(a, b):
    return a / b if b else 0.0
def verdict(ok):
    return "PASS" if ok else "BELOW"
def med(col):
    return statistics.median(r[col] for r in rows)
def med_ratio(a, b):
    return statistics.median(ratio(r[a], r[b]) for r in rows)
print("NBD frontend vs nbdkit memory (fio nbd engine, Unix socket, 4 KiB random;"
      " medians of rounds of %s s runs)" % secs)
print("  %-40s %10s %10s %7s" % ("", "ramsterd", "nbdkit", "ratio"))
for path, what in ((sys.argv[1], "60 % compressible"), (sys.argv[2], "incompressible")):
    rows = [list(map(int, l.split())) for l in open(path) if l.strip()]
    r = med_ratio(0, 1)
    print("  %-40s %10d %10d %7.2f  %s" % ("randread IOPS, iodepth 16, " + what, med(0), med(1), r,
                                           verdict(r >= 0.8)))
    w = med_ratio(2, 3)
    print("  %-40s %10d %10d %7.2f  %s" % ("randwrite IOPS, iodepth 1, " + what, med(2), med(3), w,
                                           verdict(w >= 0.8)))
    print("  (%d rounds; ratio = median of the rounds' ratios; per round: read %s, write %s)" % (
        len(rows), " ".join("%.2f" % ratio(x[0], x[1]) for x in rows),
        " ".join("%.2f" % ratio(x[2], x[3]) for x in rows)))
gib = 256 / 1024
for what, dr, dk, floor in (("mixed", r1 - r0, k1 - k0, 0.75), ("incompressible", r2 - r1, k3 - k2, 1.05)):
    per_r = dr / 1024 / 1024 / gib
    per_k = dk / 1024 / 1024 / gib
    x = ratio(per_r, per_k)
    print("  %-40s %10.3f %10.3f %7.2f  %s" % ("RAM GiB per GiB stored, " + what, per_r, per_k, x,
          verdict(x <= floor)))
    print("  (RSS delta over 256 MiB: ramsterd %.1f MiB, nbdkit %.1f MiB; floor %.2f x nbdkit;"
          " every byte in RAM on both sides)" % (dr / 1024, dk / 1024, floor))
EOF
exit 0
