#!/usr/bin/env python3
# nbd_blocks.py - write or check blocks of an NBD export over a Unix socket, as
# a plain client would (fixed newstyle, OPT_GO): a warm restart's test writes
# them before the restart and checks them after (test_restart_nbd.sh).
# Usage: nbd_blocks.py SOCKET EXPORT write|check BLOCKS SEED
# Block b holds a pattern of (SEED, b); every 5th block is zeros. check exits 1
# and names the first wrong block.
import socket
import struct
import sys

NBDMAGIC, IHAVEOPT = 0x4E42444D41474943, 0x49484156454F5054
REP_MAGIC, REQ_MAGIC, REPLY_MAGIC = 0x3E889045565A9, 0x25609513, 0x67446698
OPT_GO, REP_ACK, REP_INFO = 7, 1, 3
READ, WRITE, DISC, FLUSH = 0, 1, 2, 3

path, export, mode, blocks, seed = sys.argv[1], sys.argv[2].encode(), sys.argv[3], \
    int(sys.argv[4]), int(sys.argv[5])


def recvn(s, n):
    b = bytearray()
    while len(b) < n:
        k = s.recv(n - len(b))
        if not k:
            raise EOFError("closed after %d of %d bytes" % (len(b), n))
        b += k
    return bytes(b)


def block(b):
    if b % 5 == 0:
        return bytes(4096)
    head = ("block %d seed %d " % (b, seed)).encode()
    return (head * (4096 // len(head) + 1))[:4096]


s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
s.connect(path)
magic, opt, flags = struct.unpack(">QQH", recvn(s, 18))
assert magic == NBDMAGIC and opt == IHAVEOPT, "bad greeting"
s.sendall(struct.pack(">I", 3))
s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, 4 + len(export) + 2) +
          struct.pack(">I", len(export)) + export + struct.pack(">H", 0))
while True:
    magic, opt, typ, ln = struct.unpack(">QIII", recvn(s, 20))
    recvn(s, ln)
    if typ != REP_INFO:
        break
assert typ == REP_ACK, "GO refused: %d" % typ

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
