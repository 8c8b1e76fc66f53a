# sortgen.py FILE MB - a text file of about MB megabytes for GNU sort, its lines
# out of order within blocks of 512 (a fully shuffled file of this size thrashes
# any 32 MiB budget for many minutes: docs/far-memory.md). Seeded: the same
# file every time.
import random, sys
r = random.Random(7)
n = int(sys.argv[2]) * 1024 * 1024 // 46
with open(sys.argv[1], "w") as out:
    blk = []
    for i in range(n):
        blk.append("%012d %s\n" % (i, ("%08x" % r.getrandbits(32)) * 4))
        if len(blk) == 512:
            r.shuffle(blk); out.writelines(blk); blk = []
    out.writelines(blk)
