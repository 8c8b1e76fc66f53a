#!/usr/bin/env python3
# nbd_across.py - one NBD connection kept across a warm restart of the node
# (test_restart_nbd.sh, issue 22): the socket is handed to the re-executed
# process, so the client must never see it close, never get an error, and
# read back every block it wrote, before and after, on that one socket.
# Usage: nbd_across.py SOCKET EXPORT MODE FIRST BLOCKS DIR [random]
#   split:  write blocks [FIRST, FIRST+BLOCKS) with 16 requests in flight; then
#           send a WRITE's header and the first 1000 bytes of its payload, touch
#           DIR/split, wait for DIR/restarted, send the rest; read every block back.
#   hold:   write blocks [FIRST, FIRST+BLOCKS), touch DIR/written, wait for
#           DIR/hold-go, send a READ of block FIRST, touch DIR/asked, wait for
#           DIR/restarted, take its answer; read every block back. (The test stops
#           the block's holder meanwhile: the read is running when the restart
#           begins, and its answer comes while the node quiesces.)
#   stream: write and read blocks of [FIRST, FIRST+BLOCKS) round and round, 16
#           requests in flight, from before DIR/split-stream is touched until 2000
#           replies after DIR/restarted appears; then read every block back.
# random: blocks of random bytes (they do not compress: a small tier fills and
# writes wait for remotify to make room), not text.
# Prints the replies and the longest wait for one; exits 1 on any error.
import os
import random
import struct
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree
from nbd_handshake import dial, recvn  # noqa: E402 (beside this file)

REQ_MAGIC, REPLY_MAGIC = 0x25609513, 0x67446698
READ, WRITE, DISC = 0, 1, 2
WINDOW = 16

path, export, mode = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
first, blocks, tmp = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
noise = sys.argv[7:] == ["random"]
version = {}  # block -> the round its bytes are of
s = dial(path, export)[0]
s.settimeout(120)  # the kernel's request timeout, generously: a lost reply fails
longest, replies, last = 0.0, 0, time.monotonic()


def block(b, rnd):
    if noise:
        return random.Random(b * 1000003 + rnd).randbytes(4096)
    head = ("block %d round %d %s " % (b, rnd, mode)).encode()
    return (head * (4096 // len(head) + 1))[:4096]


def reply(inflight):
    """Take one reply and check it against what was asked (cookie -> request)."""
    global longest, replies, last
    magic, err, cookie = struct.unpack(">IIQ", recvn(s, 16))
    now = time.monotonic()
    longest, last, replies = max(longest, now - last), now, replies + 1
    if magic != REPLY_MAGIC or cookie not in inflight:
        sys.exit("reply %d: bad magic or cookie %d" % (replies, cookie))
    typ, b, rnd = inflight.pop(cookie)
    if err:
        sys.exit("%s of block %d: error %d" % ("read" if typ == READ else "write", b, err))
    if typ == READ and recvn(s, 4096) != block(b, rnd):
        sys.exit("block %d: wrong bytes (round %d expected)" % (b, rnd))


def run(ops):
    """ops yields (type, block); keep WINDOW in flight."""
    inflight, cookie = {}, 0
    for typ, b in ops:
        while len(inflight) >= WINDOW:
            reply(inflight)
        cookie += 1
        if typ == WRITE:
            version[b] = version.get(b, -1) + 1
            s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, WRITE, cookie, b * 4096, 4096) +
                      block(b, version[b]))
        else:
            s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, READ, cookie, b * 4096, 4096))
        inflight[cookie] = (typ, b, version[b])
    while inflight:
        reply(inflight)


def wait_for(name):
    for _ in range(6000):
        if os.path.exists(os.path.join(tmp, name)):
            return
        time.sleep(0.01)
    sys.exit("no %s within 60 s" % name)


def touch(name):
    open(os.path.join(tmp, name), "w").close()


rng = range(first, first + blocks)
run((WRITE, b) for b in rng)
if mode == "split":
    b = first + blocks
    version[b] = 0
    data = block(b, 0)
    s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, WRITE, 1 << 40, b * 4096, 4096) + data[:1000])
    touch("split")
    wait_for("restarted")
    s.sendall(data[1000:])
    reply({1 << 40: (WRITE, b, 0)})
    rng = range(first, first + blocks + 1)
elif mode == "hold":
    touch("written")
    wait_for("hold-go")
    s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, READ, 1 << 41, first * 4096, 4096))
    touch("asked")
    wait_for("restarted")
    reply({1 << 41: (READ, first, version[first])})
else:
    def stream():
        touch("split-stream")
        after = None
        while after is None or replies < after + 2000:
            for b in rng:
                yield (WRITE if b % 3 else READ), b
            if after is None and os.path.exists(os.path.join(tmp, "restarted")):
                after = replies
    run(stream())
run((READ, b) for b in rng)
s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, DISC, 0, 0, 0))
print("%s: %d replies on one socket, all right; the longest wait for one %.0f ms" %
      (mode, replies, longest * 1000))
