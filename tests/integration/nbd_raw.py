#!/usr/bin/env python3
# nbd_raw.py - bad input for ramsterd's NBD frontend, byte by byte over a Unix
# socket: a malformed handshake, bad requests that must get error replies, a
# request that breaks the stream, and a second client that must not notice.
# Usage: nbd_raw.py SOCKET EXPORT SIZE. Prints "ok NAME" / "FAIL NAME: why"
# lines; exits 1 on any failure.
import socket
import struct
import sys

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REP_MAGIC = 0x3E889045565A9
REQ_MAGIC = 0x25609513
REPLY_MAGIC = 0x67446698
OPT_GO, OPT_STRUCTURED_REPLY, OPT_LIST = 7, 8, 3
REP_ACK, REP_INFO, REP_ERR_UNSUP, REP_ERR_UNKNOWN = 1, 3, 2**31 + 1, 2**31 + 6
READ, WRITE, DISC, FLUSH, TRIM, WRITE_ZEROES = 0, 1, 2, 3, 4, 6
EINVAL, ENOSPC = 22, 28

path, export, size = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
failures = 0


def check(name, cond, why=""):
    global failures
    if cond:
        print("ok " + name)
    else:
        failures += 1
        print("FAIL %s: %s" % (name, why))


def recvn(s, n):
    b = b""
    while len(b) < n:
        k = s.recv(n - len(b))
        if not k:
            raise EOFError("closed after %d of %d bytes" % (len(b), n))
        b += k
    return b


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    magic, opt, flags = struct.unpack(">QQH", recvn(s, 18))
    assert magic == NBDMAGIC and opt == IHAVEOPT, "bad greeting"
    return s, flags


def option(s, opt, data=b""):
    s.sendall(struct.pack(">QII", IHAVEOPT, opt, len(data)) + data)


def opt_reply(s):
    magic, opt, typ, ln = struct.unpack(">QIII", recvn(s, 20))
    assert magic == REP_MAGIC, "bad option reply magic"
    return opt, typ, recvn(s, ln)


def go(s, name):
    option(s, OPT_GO, struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
    while True:
        opt, typ, data = opt_reply(s)
        if typ != REP_INFO:
            return typ


def request(s, typ, off, ln, flags=0, payload=b"", cookie=7):
    s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, flags, typ, cookie, off, ln) + payload)


def reply(s, datalen=0):
    magic, err, cookie = struct.unpack(">IIQ", recvn(s, 16))
    assert magic == REPLY_MAGIC, "bad reply magic"
    data = recvn(s, datalen) if err == 0 and datalen else b""
    return err, cookie, data


def closed(s):
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, socket.timeout):
        return False


# a client that stays attached through everything below
other, _ = connect()
other.sendall(struct.pack(">I", 3))
check("other: GO", go(other, export) == REP_ACK)
request(other, WRITE, 8192, 4096, payload=b"\x5a" * 4096, cookie=1)
check("other: write", reply(other)[0] == 0)

# malformed handshakes: unknown client flags, bad option magic, huge option
s, _ = connect()
s.sendall(struct.pack(">I", 0x80))
check("unknown client flags close", closed(s))
s, _ = connect()
s.sendall(struct.pack(">I", 3) + struct.pack(">QII", 0x1234, OPT_GO, 0))
check("bad option magic closes", closed(s))
s, _ = connect()
s.sendall(struct.pack(">I", 3) + struct.pack(">QII", IHAVEOPT, OPT_GO, 1 << 30))
check("huge option closes", closed(s))

# option errors the connection survives
s, flags = connect()
check("handshake flags", flags & 1 == 1, "no FIXED_NEWSTYLE")
s.sendall(struct.pack(">I", 3))
REP_ERR_INVALID = 2**31 + 3
option(s, OPT_STRUCTURED_REPLY, b"x")
check("STRUCTURED_REPLY with data invalid", opt_reply(s)[1] == REP_ERR_INVALID)
meta = struct.pack(">I", len(export)) + export + struct.pack(">I", 1)
option(s, 10, meta + struct.pack(">I", 15) + b"base:allocation")
check("SET_META_CONTEXT before STRUCTURED_REPLY invalid", opt_reply(s)[1] == REP_ERR_INVALID)
# (this connection stays on simple replies: the checks below read them)
option(s, 99)
check("unknown option unsupported", opt_reply(s)[1] == REP_ERR_UNSUP)
option(s, OPT_GO, struct.pack(">I", 100) + b"x")
check("GO with a bad length invalid", opt_reply(s)[1] == 2**31 + 3)
check("GO unknown export", go(s, b"no-such-export") == REP_ERR_UNKNOWN)
check("GO", go(s, export) == REP_ACK)

# bad requests: error replies, connection kept
request(s, READ, size, 4096)
check("read past the end EINVAL", reply(s)[0] == EINVAL)
request(s, READ, size - 4096, 8192)
check("read across the end EINVAL", reply(s)[0] == EINVAL)
request(s, WRITE, size, 4096, payload=b"\1" * 4096)
check("write past the end ENOSPC", reply(s)[0] == ENOSPC)
request(s, READ, 100, 4096)
check("unaligned offset EINVAL", reply(s)[0] == EINVAL)
request(s, READ, 0, 1000)
check("unaligned length EINVAL", reply(s)[0] == EINVAL)
request(s, WRITE, 0, 1000, payload=b"\1" * 1000)
check("unaligned write EINVAL", reply(s)[0] == EINVAL)
request(s, READ, 0, 0)
check("zero length EINVAL", reply(s)[0] == EINVAL)
request(s, READ, 0, 64 << 20)
check("read over the maximum EINVAL", reply(s)[0] == EINVAL)
request(s, 42, 0, 4096)
check("unknown command EINVAL", reply(s)[0] == EINVAL)
request(s, 7, 0, 4096)
check("BLOCK_STATUS without a meta context EINVAL", reply(s)[0] == EINVAL)
request(s, READ, 0, 4096, flags=1 << 4)
check("unknown flag EINVAL", reply(s)[0] == EINVAL)
request(s, 5, 0, 4096)
check("CACHE (not offered) EINVAL", reply(s)[0] == EINVAL)

# good requests after the bad ones: partial pages, zeroes, trim, pipelining
data = bytes(range(256)) * 6
request(s, TRIM, 4096, 4096, cookie=10)
check("trim a page", reply(s)[:2] == (0, 10))
request(s, WRITE, 4096 + 512, 1536, payload=data, cookie=11)
request(s, READ, 4096, 4096, cookie=12)
request(s, WRITE_ZEROES, 4096 + 1024, 512, cookie=13)
request(s, READ, 4096, 4096, cookie=14)
request(s, FLUSH, 0, 0, cookie=15)
r1, r2 = reply(s), reply(s, 4096)
r3, r4 = reply(s), reply(s, 4096)
r5 = reply(s)
want = b"\0" * 512 + data + b"\0" * 2048
check("partial write", r1[:2] == (0, 11))
check("read back partial page", r2[:2] == (0, 12) and r2[2] == want, "data differs")
check("write zeroes partial", r3[:2] == (0, 13))
want = want[:1024] + b"\0" * 512 + want[1536:]
check("read back zeroed", r4[:2] == (0, 14) and r4[2] == want, "data differs")
check("flush", r5[:2] == (0, 15))
request(s, TRIM, 0, size, cookie=16)
check("trim all", reply(s)[:2] == (0, 16))
request(s, READ, 4096, 4096, cookie=17)
check("trimmed reads zeros", reply(s, 4096)[2] == b"\0" * 4096)

# a request that breaks the stream: bad magic closes this connection only
s.sendall(b"\xde\xad\xbe\xef" + b"\0" * 24)
check("bad request magic closes", closed(s))
s, _ = connect()
s.sendall(struct.pack(">I", 3))
check("GO again", go(s, export) == REP_ACK)
request(s, WRITE, 0, 64 << 20)  # a payload over the maximum: the stream is lost
check("oversized write closes", closed(s))

# the other client saw nothing of it (its block was trimmed above: zeros)
request(other, READ, 8192, 4096, cookie=2)
err, cookie, got = reply(other, 4096)
check("other client unaffected", err == 0 and cookie == 2 and got == b"\0" * 4096)
request(other, WRITE, 8192, 4096, payload=b"\x5a" * 4096, cookie=3)
request(other, READ, 8192, 4096, cookie=4)
check("other client writes", reply(other)[0] == 0 and reply(other, 4096)[2] == b"\x5a" * 4096)
request(other, DISC, 0, 0)
check("DISC closes", closed(other))

# structured replies: malformed meta context options, then chunks
s, _ = connect()
s.sendall(struct.pack(">I", 3))
option(s, OPT_STRUCTURED_REPLY)
check("STRUCTURED_REPLY", opt_reply(s)[1] == REP_ACK)
name = struct.pack(">I", len(export)) + export
option(s, 10, name + struct.pack(">I", 1) + struct.pack(">I", 1000) + b"base:allocation")
check("meta query past the option invalid", opt_reply(s)[1] == REP_ERR_INVALID)
option(s, 10, name + struct.pack(">I", 2) + struct.pack(">I", 15) + b"base:allocation")
check("meta query count past the option invalid", opt_reply(s)[1] == REP_ERR_INVALID)
option(s, 9, struct.pack(">I", 3) + b"zzz" + struct.pack(">I", 0))
check("meta of an unknown export", opt_reply(s)[1] == REP_ERR_UNKNOWN)
option(s, 9, name + struct.pack(">I", 0))
opt, typ, data = opt_reply(s)
check("LIST_META_CONTEXT names base:allocation", typ == 4 and data[4:] == b"base:allocation")
check("LIST_META_CONTEXT ends", opt_reply(s)[1] == REP_ACK)
option(s, 10, name + struct.pack(">I", 1) + struct.pack(">I", 15) + b"base:allocation")
opt, typ, data = opt_reply(s)
ctx = struct.unpack(">I", data[:4])[0]
check("SET_META_CONTEXT", typ == 4 and opt_reply(s)[1] == REP_ACK)
check("GO structured", go(s, export) == REP_ACK)


def chunk(s):
    magic, flags, typ, cookie, ln = struct.unpack(">IHHQI", recvn(s, 20))
    assert magic == 0x668E33EF, "bad structured reply magic"
    return flags, typ, cookie, recvn(s, ln)


request(s, WRITE, 4096, 4096, payload=b"\x11" * 4096, cookie=31)
check("write: a NONE chunk, done", chunk(s)[:3] == (1, 0, 31))
request(s, READ, 4096, 4096, cookie=32)
f, t, c, d = chunk(s)
check("read: one OFFSET_DATA chunk", (f, t, c) == (1, 1, 32) and d == struct.pack(">Q", 4096) + b"\x11" * 4096)
request(s, READ, size, 4096, cookie=33)
f, t, c, d = chunk(s)
check("read past the end: an ERROR chunk", (f, t, c) == (1, 2**15 + 1, 33) and d[:4] == struct.pack(">I", EINVAL))
request(s, 7, 0, 3 * 4096, cookie=34)  # block 0 trimmed, 1 written here, 2 by the other client
f, t, c, d = chunk(s)
check("block status", (f, t, c) == (1, 5, 34) and struct.unpack(">IIIII", d) == (ctx, 4096, 3, 8192, 0))
request(s, 7, 0, 3 * 4096, flags=1 << 3, cookie=35)
check("block status REQ_ONE", struct.unpack(">III", chunk(s)[3]) == (ctx, 4096, 3))
request(s, DISC, 0, 0)
sys.exit(1 if failures else 0)
