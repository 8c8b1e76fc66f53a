# build.py MB - a Python program that builds a structure of about MB
# megabytes in small objects (pymalloc's 1 MiB arenas are mmaps) and big lists
# (malloc), indexes a fifth of it in a dict, hashes and sums it. Its output
# depends on MB only: tests/integration/test_far_programs.sh compares a plain
# run with one under ramster-run; tools/bench-far.sh times it against a memory
# cgroup swapping to zram.
import sys, hashlib
mb = int(sys.argv[1])
n = mb * 1024 * 1024 // 150
data = [(i, "k%09d" % i, i * 7 % 1000003) for i in range(n)]
index = {}
for t in data[::5]:
    index[t[1]] = t
h = hashlib.sha256()
for t in data:
    h.update(t[1].encode())
    h.update(str(t[2]).encode())
print(n, len(index), sum(t[2] for t in data), h.hexdigest())
print(sorted(index)[-3:])
