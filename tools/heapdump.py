#!/usr/bin/env python3
"""heapdump.py OUT [DICTS] - real process memory for the benchmarks.

Starts a Python program that builds DICTS (default 300000) small dicts (the
heap of a typical service: small objects, pointers, short strings, floats),
waits until it is built, then copies that process's private writable memory
([heap] and anonymous read-write mappings, as /proc/PID/maps lists them)
through /proc/PID/mem into OUT, a whole number of 4096-byte pages, and ends
the program. Prints one line: pages, zero pages, and the mappings read.
No file is shipped: `make bench` (tools/bench.sh) makes the dump each run.
"""
import os
import subprocess
import sys

PAGE = 4096

CHILD = r"""
import sys
n = int(sys.argv[1])
objs = []
for i in range(n):
    objs.append({"id": i, "name": "item-%d" % i, "score": i * 0.5,
                 "tags": [i % 7, i % 11], "owner": "user%d" % (i % 1000),
                 "active": i % 3 == 0})
sys.stdout.write("ready\n")
sys.stdout.flush()
sys.stdin.read()  # until the parent has the dump
"""


def regions(pid):
    """The private writable anonymous mappings of pid: (start, end, name)."""
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split()
            addr, perms = fields[0], fields[1]
            name = fields[5] if len(fields) > 5 else ""
            if not perms.startswith("rw") or perms[3] != "p":
                continue
            if name not in ("", "[heap]"):
                continue  # files, the stack, vvar/vdso
            start, end = (int(x, 16) for x in addr.split("-"))
            out.append((start, end, name or "anon"))
    return out


def main():
    if len(sys.argv) < 2 or len(sys.argv) > 3:
        sys.stderr.write("usage: heapdump.py OUT [DICTS]\n")
        return 2
    out_path = sys.argv[1]
    dicts = int(sys.argv[2]) if len(sys.argv) == 3 else 300000
    if dicts < 1 or dicts > 10000000:
        sys.stderr.write("heapdump: DICTS must be 1..10000000\n")
        return 2
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(dicts)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        if child.stdout.readline().strip() != b"ready":
            sys.stderr.write("heapdump: the program did not get ready\n")
            return 1
        pages = zero = 0
        maps = regions(child.pid)
        with open("/proc/%d/mem" % child.pid, "rb", buffering=0) as mem, \
                open(out_path, "wb") as out:
            for start, end, _ in maps:
                addr = start
                while addr < end:
                    n = min(end - addr, 256 * PAGE)
                    try:
                        mem.seek(addr)
                        buf = mem.read(n)
                    except OSError:
                        buf = b""
                    if len(buf) != n:  # unreadable (a guard page): skip it
                        addr += n
                        continue
                    out.write(buf)
                    for off in range(0, n, PAGE):
                        if buf[off:off + PAGE].count(0) == PAGE:
                            zero += 1
                    pages += n // PAGE
                    addr += n
        print("heapdump: %d pages (%d zero) from %d mappings of a python3 heap of %d dicts"
              % (pages, zero, len(maps), dicts))
        return 0 if pages else 1
    finally:
        try:
            child.stdin.close()
        except OSError:
            pass
        child.wait()


if __name__ == "__main__":
    sys.exit(main())
