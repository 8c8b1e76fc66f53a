#!/usr/bin/env python3
# nbd_blocks.py - write or check blocks of an NBD export over a Unix socket, as
# a plain client would (fixed newstyle, OPT_GO): a warm restart's test writes
# them before the restart and checks them after (test_restart_nbd.sh).
# Usage: nbd_blocks.py SOCKET EXPORT write|check BLOCKS SEED
# Block b holds a pattern of (SEED, b); every 5th block is zeros. check exits 1
# and names the first wrong block.
import struct
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the tree
from nbd_handshake import dial, recvn  # noqa: E402 (beside this file)

REQ_MAGIC = 0x25609513
READ, WRITE, DISC, FLUSH = 0, 1, 2, 3

path, export, mode, blocks, seed = sys.argv[1], sys.argv[2].encode(), sys.argv[3], \
    int(sys.argv[4]), int(sys.argv[5])


def block(b):
    if b % 5 == 0:
        return bytes(4096)
    head = ("block %d seed %d " % (b, seed)).encode()
    return (head * (4096 // len(head) + 1))[:4096]


s = dial(path, export)[0]

for b in range(blocks):
    if mode == "write":
        s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, WRITE, b, b * 4096, 4096) + block(b))
        magic, err, cookie = struct.unpack(">IIQ", recvn(s, 16))
        if err:
            print("write of block %d: error %d" % (b, err))
            sys.exit(1)
    else:
        s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, READ, b, b * 4096, 4096))
        magic, err, cookie = struct.unpack(">IIQ", recvn(s, 16))
        data = recvn(s, 4096) if err == 0 else b""
        if err or data != block(b):
            print("block %d: %s" % (b, "error %d" % err if err else "wrong bytes"))
            sys.exit(1)
if mode == "write":
    s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, FLUSH, 1 << 40, 0, 0))
    magic, err, cookie = struct.unpack(">IIQ", recvn(s, 16))
    assert err == 0, "flush: %d" % err
s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, DISC, 0, 0, 0))
print("%s: %d blocks ok" % (mode, blocks))
