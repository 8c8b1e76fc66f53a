#!/usr/bin/env python3
# nbd-persist.py - attach a ramster NBD export to /dev/nbdN through the
# kernel's netlink interface and keep it attached across server restarts:
# what `nbd-client -persist` does from nbd 3.27 on, and what Debian 12's
# nbd-client 3.24 does not (there -persist only works with -nonetlink, whose
# ioctl interface has no dead-connection timeout: the kernel fails every
# request the moment the server's socket closes; see docs/warm-restart.md).
#
# CONNECT sets NBD_ATTR_DEAD_CONN_TIMEOUT: when the connection dies, the
# kernel holds new requests (and requeues those in flight once their
# NBD_ATTR_TIMEOUT expires) for up to that long, and multicasts
# NBD_CMD_LINK_DEAD. This process listens for it, redials the socket,
# negotiates again (fixed newstyle, OPT_GO) and hands the new socket over with
# NBD_CMD_RECONFIGURE; the held requests go out on it.
#
# Usage: nbd-persist.py [--timeout S] [--dead-conn-timeout S] [--block-size B]
#                       SOCKET EXPORT /dev/nbdN
#        nbd-persist.py --disconnect /dev/nbdN
# Runs until SIGTERM (the device stays attached; detach with --disconnect or
# nbd-client -d). Logs to stderr: attached, link dead, reconnected after N ms.
import ctypes
import os
import signal
import socket
import struct
import sys
import time

# the NBD handshake is tests/integration/nbd_handshake.py's (the tree is at the
# same path in the VM); no __pycache__ in the tree
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import nbd_handshake  # noqa: E402

# generic netlink
NETLINK_GENERIC, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP = 16, 270, 1
NLM_F_REQUEST, NLM_F_ACK, NLMSG_ERROR = 1, 4, 2
GENL_ID_CTRL, CTRL_CMD_GETFAMILY = 16, 3
CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME, CTRL_ATTR_MCAST_GROUPS = 1, 2, 7
CTRL_ATTR_MCAST_GRP_NAME, CTRL_ATTR_MCAST_GRP_ID = 1, 2
# linux/nbd-netlink.h
NBD_CMD_CONNECT, NBD_CMD_DISCONNECT, NBD_CMD_RECONFIGURE, NBD_CMD_LINK_DEAD = 1, 2, 3, 4
NBD_ATTR_INDEX, NBD_ATTR_SIZE_BYTES, NBD_ATTR_BLOCK_SIZE_BYTES = 1, 2, 3
NBD_ATTR_TIMEOUT, NBD_ATTR_SERVER_FLAGS, NBD_ATTR_SOCKETS = 4, 5, 7
NBD_ATTR_DEAD_CONN_TIMEOUT = 8
NBD_SOCK_ITEM, NBD_SOCK_FD = 1, 1


def log(msg):
    sys.stderr.write("nbd-persist %s: %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def dial(path, export):
    """Connect and negotiate; return (socket, size, transmission flags), the
    socket blocking again for the kernel."""
    s, size, flags = nbd_handshake.dial(path, export)
    s.settimeout(None)
    return s, size, flags


def nla(typ, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, typ) + payload + b"\0" * ((4 - n % 4) % 4)


def parse(buf):
    out, off = {}, 0
    while off + 4 <= len(buf):
        n, typ = struct.unpack_from("=HH", buf, off)
        if n < 4:
            break
        out[typ & 0x3FFF] = buf[off + 4:off + n]
        off += (n + 3) & ~3
    return out


class Genl:
    def __init__(self):
        self.s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
        self.s.bind((0, 0))
        self.seq = 0

    def request(self, family, cmd, attrs, version=1):
        self.seq += 1
        body = struct.pack("=BBH", cmd, version, 0) + b"".join(attrs)
        self.s.send(struct.pack("=IHHII", 16 + len(body), family, NLM_F_REQUEST | NLM_F_ACK,
                                self.seq, 0) + body)
        reply = None
        while True:
            data = self.s.recv(65536)
            off = 0
            while off + 16 <= len(data):
                ln, typ, _, seq, _ = struct.unpack_from("=IHHII", data, off)
                if ln < 16:
                    break
                if seq == self.seq:
                    if typ == NLMSG_ERROR:
                        err = struct.unpack_from("=i", data, off + 16)[0]
                        if err:
                            raise OSError(-err, "netlink cmd %d: %s" % (cmd, os.strerror(-err)))
                        return reply
                    reply = parse(data[off + 20:off + ln])
                off += (ln + 3) & ~3


def family():
    g = Genl()
    r = g.request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, [nla(CTRL_ATTR_FAMILY_NAME, b"nbd\0")])
    fam = struct.unpack("=H", r[CTRL_ATTR_FAMILY_ID][:2])[0]
    group = None
    for grp in parse(r.get(CTRL_ATTR_MCAST_GROUPS, b"")).values():
        a = parse(grp)
        if a.get(CTRL_ATTR_MCAST_GRP_NAME, b"").rstrip(b"\0") == b"nbd_mc_group":
            group = struct.unpack("=I", a[CTRL_ATTR_MCAST_GRP_ID][:4])[0]
    return g, fam, group


def sockets_attr(fd):
    return nla(NBD_ATTR_SOCKETS, nla(NBD_SOCK_ITEM, nla(NBD_SOCK_FD, struct.pack("=I", fd))))


def index_of(dev):
    if not dev.startswith("/dev/nbd"):
        raise SystemExit("not an nbd device: %s" % dev)
    return int(dev[len("/dev/nbd"):])


def main():
    args, opts = [], {"--timeout": 30, "--dead-conn-timeout": 120, "--block-size": 4096}
    argv = sys.argv[1:]
    while argv:
        a = argv.pop(0)
        if a in opts:
            opts[a] = int(argv.pop(0))
        elif a == "--disconnect":
            g, fam, _ = family()
            g.request(fam, NBD_CMD_DISCONNECT,
                      [nla(NBD_ATTR_INDEX, struct.pack("=I", index_of(argv.pop(0))))])
            return 0
        else:
            args.append(a)
    if len(args) != 3:
        sys.stderr.write("usage: nbd-persist.py [--timeout S] [--dead-conn-timeout S] "
                         "[--block-size B] SOCKET EXPORT /dev/nbdN\n"
                         "       nbd-persist.py --disconnect /dev/nbdN\n")
        return 2
    path, export, index = args[0], args[1].encode(), index_of(args[2])

    # as nbd-client -swap: never the OOM killer's pick, never paged out
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("-1000")
        ctypes.CDLL(None, use_errno=True).mlockall(3)  # MCL_CURRENT | MCL_FUTURE
    except OSError:
        pass

    g, fam, group = family()
    if group is None:
        raise SystemExit("nbd-persist: the nbd netlink family has no multicast group")
    mc = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
    mc.bind((0, 0))
    mc.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, group)

    s, size, flags = dial(path, export)
    g.request(fam, NBD_CMD_CONNECT, [
        nla(NBD_ATTR_INDEX, struct.pack("=I", index)),
        nla(NBD_ATTR_SIZE_BYTES, struct.pack("=Q", size)),
        nla(NBD_ATTR_BLOCK_SIZE_BYTES, struct.pack("=Q", opts["--block-size"])),
        nla(NBD_ATTR_SERVER_FLAGS, struct.pack("=Q", flags)),
        nla(NBD_ATTR_TIMEOUT, struct.pack("=Q", opts["--timeout"])),
        nla(NBD_ATTR_DEAD_CONN_TIMEOUT, struct.pack("=Q", opts["--dead-conn-timeout"])),
        sockets_attr(s.fileno())])
    s.close()  # the kernel holds its own reference
    log("attached %s as /dev/nbd%d: %d bytes, flags %#x, timeout %d s, dead-connection "
        "timeout %d s" % (path, index, size, flags, opts["--timeout"], opts["--dead-conn-timeout"]))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    while True:
        data = mc.recv(65536)
        off = 0
        dead = False
        while off + 20 <= len(data):
            ln, typ = struct.unpack_from("=IH", data, off)
            if ln < 20:
                break
            cmd = data[off + 16]
            a = parse(data[off + 20:off + ln])
            if typ == fam and cmd == NBD_CMD_LINK_DEAD and \
                    struct.unpack("=I", a.get(NBD_ATTR_INDEX, b"\xff\xff\xff\xff")[:4])[0] == index:
                dead = True
            off += (ln + 3) & ~3
        if not dead:
            continue
        t0 = time.monotonic()
        log("link dead: redialing %s" % path)
        wait = 0.01
        while True:
            s = None
            try:
                s, size2, flags2 = dial(path, export)
                if size2 != size:
                    raise SystemExit("nbd-persist: the export's size changed (%d, was %d)" %
                                     (size2, size))
                g.request(fam, NBD_CMD_RECONFIGURE,
                          [nla(NBD_ATTR_INDEX, struct.pack("=I", index)), sockets_attr(s.fileno())])
                s.close()
                break
            except (OSError, EOFError) as e:
                if s:
                    s.close()
                if time.monotonic() - t0 > opts["--dead-conn-timeout"]:
                    raise SystemExit("nbd-persist: no server within the dead-connection "
                                     "timeout: %s" % e)
                time.sleep(wait)
                wait = min(wait * 2, 0.5)
        log("reconnected after %d ms" % ((time.monotonic() - t0) * 1000))


if __name__ == "__main__":
    sys.exit(main())
