#!/usr/bin/env python3
"""systemd_check.py - ramsterd as systemd sees it, without systemd.

  notify  BIN DIR   ramsterd with $NOTIFY_SOCKET on a datagram socket this
                    script owns (what systemd does for Type=notify) and
                    $WATCHDOG_USEC: READY=1 once the node serves clients,
                    STATUS= lines (joining, serving, draining, stopping),
                    WATCHDOG=1 pings, none while the process is stopped
                    (SIGSTOP), again after SIGCONT, STOPPING=1 on SIGTERM.
  fdstore BIN DIR   systemctl restart with the fd store (issue 22): ramsterd with
                    RAMSTER_FDSTORE=1 hands its image to the manager on SIGTERM
                    (FDSTORE=1, FDNAME=ramster-image, the memfd in SCM_RIGHTS)
                    and, started again with it in LISTEN_FDS / LISTEN_FDNAMES,
                    serves every block an NBD client wrote before, identical;
                    the socket of a client still connected goes to the store too
                    (FDNAME=nbdconn-N) and is served on after the restart, never
                    closed; the new process removes what it took from the store
                    (FDSTOREREMOVE=1), so a crash cannot bring a stale image back.
  journal BIN DIR   ramsterd whose stderr is "the journal" ($JOURNAL_STREAM
                    names it): native entries on /run/systemd/journal/socket
                    (bound here: run it in a private mount namespace with a
                    tmpfs on /run), plain lines when the variable names another
                    stream, "<N>" lines when no journal answers.

Exit 0 when every check holds; each failure is one line on stderr.
"""
import os
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbd_handshake import dial, recvn  # noqa: E402 (beside this file)

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)
    return cond


class Reader:
    """The manager's end of a datagram socket, read all the time by a thread.

    A Unix datagram queue holds only net.unix.max_dgram_qlen messages (often
    10), and a sender whose manager does not read blocks in sendmsg, as it
    would under a systemd that stopped reading: ramsterd's loop would stall
    while this script waits on a ramsterctl that waits on that loop.
    """

    def __init__(self, sock):
        self.sock = sock
        self.q = queue.Queue()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except OSError:
                return
            self.q.put(data)

    def get(self, timeout):
        try:
            return self.q.get(timeout=max(timeout, 0))
        except queue.Empty:
            return None


def recv_all(reader, seconds):
    """Every datagram that arrives within seconds, as decoded strings."""
    out = []
    end = time.monotonic() + seconds
    while True:
        m = reader.get(end - time.monotonic())
        if m is None:
            return out
        out.append(m.decode("utf-8", "replace"))


def recv_until(reader, pred, seconds, got):
    """Append datagrams to got until pred(msg) holds for one; return it or None."""
    end = time.monotonic() + seconds
    while True:
        m = reader.get(end - time.monotonic())
        if m is None:
            return None
        m = m.decode("utf-8", "replace")
        got.append(m)
        if pred(m):
            return m


def fields(msg):
    """A notify message's KEY=VALUE lines as a list of pairs."""
    return [tuple(l.split("=", 1)) for l in msg.split("\n") if "=" in l]


def status_of(msg):
    return [v for k, v in fields(msg) if k == "STATUS"]


def ctl(binp, sock, *args):
    return subprocess.run([os.path.join(binp, "ramsterctl"), "--socket", sock] + list(args),
                          capture_output=True, text=True, timeout=30)


def stat_value(binp, sock, name):
    r = ctl(binp, sock, "stats")
    for line in r.stdout.splitlines():
        p = line.split()
        if len(p) == 2 and p[0] == name:
            return int(p[1])
    return None


def start(binp, args, env, log):
    e = dict(os.environ)
    e.update(env)
    e["RAMSTER_NO_MEMLOCK"] = "1"
    e["RAMSTER_BUSY_POLL_US"] = "0"
    return subprocess.Popen([os.path.join(binp, "ramsterd")] + args, env=e,
                            stdout=log, stderr=log)


def wait_socket(path, seconds=10):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if os.path.exists(path):
            return True
        time.sleep(0.02)
    return False


def free_port():
    """A TCP port free now on 127.0.0.1 (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def notify(binp, d):
    ns_path = os.path.join(d, "notify.sock")
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(ns_path)
    rd = Reader(ns)
    key = os.path.join(d, "cluster.key")
    with open(key, "w") as f:
        f.write(subprocess.run([os.path.join(binp, "ramsterctl"), "genkey"],
                               capture_output=True, text=True, check=True).stdout)
    os.chmod(key, 0o600)
    conf = os.path.join(d, "cluster.conf")
    with open(conf, "w") as f:
        f.write("[cluster]\nname = sdtest\nsecret_file = cluster.key\n"
                "heartbeat_ms = 50\ndead_after_ms = 500\n")
        for i, port in ((1, free_port()), (2, free_port())):
            f.write("[node n%d]\nid = %d\naddress = 127.0.0.1:%d\nsocket = %s/n%d.sock\n"
                    "local_mb = 16\ndonate_mb = 16\n" % (i, i, port, d, i))
    s1 = os.path.join(d, "n1.sock")
    s2 = os.path.join(d, "n2.sock")
    wd_usec = 400000
    log1 = open(os.path.join(d, "n1.log"), "w")
    log2 = open(os.path.join(d, "n2.log"), "w")
    p1 = start(binp, ["--config", conf, "--node", "n1"],
               {"NOTIFY_SOCKET": ns_path, "WATCHDOG_USEC": str(wd_usec)}, log1)
    p2 = None
    try:
        got = []
        ready = recv_until(rd, lambda m: ("READY", "1") in fields(m), 10, got)
        check(ready is not None, "READY=1 arrives")
        if ready is None:
            return
        # the node serves clients once it says READY: a client gets in at once
        r = ctl(binp, s1, "status")
        check(r.returncode == 0 and "node" in r.stdout,
              "ramsterctl status answers right after READY=1 (rc %d)" % r.returncode)
        st = [s for m in got for s in status_of(m)]
        check(any(s.startswith("starting node n1") for s in st),
              "STATUS=starting before READY (%s)" % st[:2])
        check(any(s.startswith("joining cluster 'sdtest': 0 of 1 peers up") for s in st),
              "READY's STATUS says joining with its peer not up (%s)" % status_of(ready))

        # pings every half of WATCHDOG_USEC; the second node joins meanwhile
        p2 = start(binp, ["--config", conf, "--node", "n2"], {}, log2)
        msgs = recv_all(rd, 2.0)
        pings = sum(1 for m in msgs if ("WATCHDOG", "1") in fields(m))
        print("     %d WATCHDOG=1 in 2.0 s (WATCHDOG_USEC %d: one every %d ms expected)" %
              (pings, wd_usec, wd_usec // 2000))
        check(pings >= 3, "WATCHDOG=1 pings arrive (%d in 2 s)" % pings)
        st = [s for m in msgs for s in status_of(m)]
        check(any(s.startswith("serving: 1 of 1 peers up") for s in st),
              "STATUS says serving once the peer is up (%s)" % st)
        n = stat_value(binp, s1, "systemd_watchdog_pings")
        check(n is not None and n >= pings,
              "ramsterctl stats: systemd_watchdog_pings %s >= %d received" % (n, pings))

        # a stopped process (a stalled loop) sends nothing; it pings again once it runs
        os.kill(p1.pid, signal.SIGSTOP)
        recv_all(rd, 0.05)  # what was in flight before the stop
        stalled = recv_all(rd, 1.5)
        spings = sum(1 for m in stalled if ("WATCHDOG", "1") in fields(m))
        check(spings == 0, "no WATCHDOG=1 while the loop is stalled (SIGSTOP): %d" % spings)
        os.kill(p1.pid, signal.SIGCONT)
        back = []
        m = recv_until(rd, lambda x: ("WATCHDOG", "1") in fields(x), 2.0, back)
        check(m is not None, "WATCHDOG=1 again after SIGCONT")

        # drain: STATUS says so
        r = ctl(binp, s1, "drain", "--no-wait")
        check(r.returncode == 0, "ramsterctl drain --no-wait (rc %d: %s)" %
              (r.returncode, r.stderr.strip()))
        got = []
        m = recv_until(rd, lambda x: any(s.startswith("drained") or s.startswith("draining")
                                         for s in status_of(x)), 3.0, got)
        check(m is not None, "STATUS says draining/drained after a drain (%s)" %
              (status_of(m) if m else [s for x in got for s in status_of(x)]))
        ctl(binp, s1, "undrain")
        got = []
        m = recv_until(rd, lambda x: any(s.startswith("serving") for s in status_of(x)),
                       3.0, got)
        check(m is not None, "STATUS says serving again after undrain")

        # SIGTERM: STOPPING=1 and a clean exit
        p1.send_signal(signal.SIGTERM)
        got = []
        m = recv_until(rd, lambda x: ("STOPPING", "1") in fields(x), 5.0, got)
        check(m is not None and "stopping" in status_of(m),
              "STOPPING=1 with STATUS=stopping on SIGTERM")
        rc = p1.wait(10)
        check(rc == 0, "ramsterd exits 0 (%d)" % rc)
    finally:
        for p in (p1, p2):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        ns.close()

    # without NOTIFY_SOCKET nothing is sent and no counter moves
    log3 = open(os.path.join(d, "n3.log"), "w")
    s3 = os.path.join(d, "n3.sock")
    p3 = start(binp, ["--socket", s3, "--local-mb", "16"], {"WATCHDOG_USEC": "400000"}, log3)
    try:
        check(wait_socket(s3), "a node without NOTIFY_SOCKET starts")
        time.sleep(0.5)
        n = stat_value(binp, s3, "systemd_watchdog_pings")
        e = stat_value(binp, s3, "systemd_notify_sent")
        check(n == 0 and e == 0, "without NOTIFY_SOCKET: no pings, nothing sent (%s, %s)" % (n, e))
    finally:
        p3.terminate()
        p3.wait(10)


def journal_entries(reader, seconds):
    """Native protocol datagrams (KEY=VALUE lines, or KEY\\n<le64 len>VALUE\\n) as dicts."""
    out = []
    end = time.monotonic() + seconds
    while True:
        raw = reader.get(end - time.monotonic())
        if raw is None:
            return out
        e, i = {}, 0
        while i < len(raw):
            nl = raw.index(b"\n", i)
            line = raw[i:nl]
            if b"=" in line:
                k, v = line.split(b"=", 1)
                e[k.decode()] = v.decode("utf-8", "replace")
                i = nl + 1
            else:
                n = struct.unpack("<Q", raw[nl + 1:nl + 9])[0]
                e[line.decode()] = raw[nl + 9:nl + 9 + n].decode("utf-8", "replace")
                i = nl + 9 + n + 1
        out.append(e)


def run_node(binp, d, name, stream_env):
    """Start a node whose stderr is a file; stream_env(st) -> $JOURNAL_STREAM or None."""
    logp = os.path.join(d, name + ".log")
    log = open(logp, "w")
    st = os.fstat(log.fileno())
    env = {}
    v = stream_env(st)
    if v is not None:
        env["JOURNAL_STREAM"] = v
    sp = os.path.join(d, name + ".sock")
    p = start(binp, ["--socket", sp, "--local-mb", "16", "--node", name], env, log)
    ok = wait_socket(sp)
    time.sleep(0.2)
    p.terminate()
    p.wait(10)
    log.close()
    with open(logp) as f:
        return ok, f.read()


def journal(binp, d):
    jdir = "/run/systemd/journal"
    jpath = jdir + "/socket"
    if os.path.exists(jpath):
        print("refusing: %s exists (run this in a mount namespace with a tmpfs on /run)" % jpath)
        sys.exit(2)
    os.makedirs(jdir, exist_ok=True)
    js = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    js.bind(jpath)
    jr = Reader(js)

    # 1. stderr is the journal stream: native entries, nothing on stderr
    ok, err = run_node(binp, d, "jn1", lambda st: "%d:%d" % (st.st_dev, st.st_ino))
    check(ok, "a node with JOURNAL_STREAM naming its stderr starts")
    ents = journal_entries(jr, 0.5)
    listen = [e for e in ents if "listening on" in e.get("MESSAGE", "")]
    check(len(listen) == 1, "the start line arrives as one native entry (%d entries)" % len(ents))
    if listen:
        e = listen[0]
        check(e.get("PRIORITY") == "5", "PRIORITY=5 (notice): %s" % e.get("PRIORITY"))
        check(e.get("SYSLOG_IDENTIFIER") == "ramsterd",
              "SYSLOG_IDENTIFIER=ramsterd: %s" % e.get("SYSLOG_IDENTIFIER"))
        check(e.get("RAMSTER_NODE") == "jn1", "RAMSTER_NODE=jn1: %s" % e.get("RAMSTER_NODE"))
        check(e.get("CODE_FILE") == "node/main.c" and e.get("CODE_LINE", "").isdigit(),
              "CODE_FILE=node/main.c, CODE_LINE: %s:%s" % (e.get("CODE_FILE"), e.get("CODE_LINE")))
        check(e.get("RAMSTER_LEVEL") == "notice", "RAMSTER_LEVEL=notice")
        check(not e["MESSAGE"].startswith("<") and not e["MESSAGE"][:4].isdigit(),
              "MESSAGE has no priority prefix or timestamp: %r" % e["MESSAGE"][:40])
    check(any("SIGTERM received" in e.get("MESSAGE", "") for e in ents),
          "the stop is logged to the journal too")
    check(err == "", "nothing on stderr while the journal takes the lines (%r)" % err[:80])

    # 2. JOURNAL_STREAM names another stream (stderr redirected in a unit): plain lines
    ok, err = run_node(binp, d, "jn2", lambda st: "%d:%d" % (st.st_dev, st.st_ino + 1))
    ents = journal_entries(jr, 0.3)
    check(ok and not ents, "JOURNAL_STREAM of another stream: no journal entries (%d)" % len(ents))
    check(" notice ramsterd " in err and err[:2] == "20",
          "... but timestamped stderr lines: %r" % err[:60])

    # 3. the journal's socket is gone: "<N>" stream lines on stderr, nothing lost
    js.close()
    os.unlink(jpath)
    ok, err = run_node(binp, d, "jn3", lambda st: "%d:%d" % (st.st_dev, st.st_ino))
    check(ok and "<5>ramsterd " in err,
          "no journal socket: '<5>' priority lines on stderr (%r)" % err[:60])


def nbd_io(s, typ, block, data=b""):
    """One NBD READ (typ 0) or WRITE (1) of a 4096-byte block on s; the read's bytes."""
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, typ, block, block * 4096, 4096) + data)
    magic, err, cookie = struct.unpack(">IIQ", recvn(s, 16))
    check(magic == 0x67446698 and err == 0 and cookie == block,
          "NBD %s of block %d answered (error %d)" % ("write" if typ else "read", block, err))
    return recvn(s, 4096) if typ == 0 and err == 0 else b""


def fdstore(binp, d):
    ns_path = os.path.join(d, "notify.sock")
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(ns_path)
    nbd = os.path.join(d, "nbd.sock")
    sock = os.path.join(d, "n1.sock")
    conf = os.path.join(d, "one.ini")
    with open(conf, "w") as f:
        f.write("[node n1]\nsocket = %s\nlocal_mb = 128\nnbd_socket = %s\n\n"
                "[export ram]\nsize = 64M\n" % (sock, nbd))
    blocks = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nbd_blocks.py")
    log = open(os.path.join(d, "n1.log"), "w")
    env = {"NOTIFY_SOCKET": ns_path, "RAMSTER_FDSTORE": "1"}
    p = start(binp, ["--config", conf, "--node", "n1"], env, log)
    ns.settimeout(10)
    try:
        msg = b""
        while b"READY=1" not in msg:
            msg = ns.recv(4096)
        r = subprocess.run([sys.executable, blocks, nbd, "ram", "write", "3000", "7"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, "3000 blocks written (%s)" % r.stdout.strip())
        # a client that stays connected across the restart, a block written on it
        conn = dial(nbd, b"ram")[0]
        page = bytes(range(256)) * 16
        nbd_io(conn, 1, 5000, page)
        p.send_signal(signal.SIGTERM)
        stored = {}  # FDNAME -> fd, as the manager's store holds them

        def take(m, fds):
            names = [l[7:] for l in m.decode().split("\n") if l.startswith("FDNAME=")]
            if b"FDSTORE=1" in m and fds and len(names) == 1:
                stored[names[0]] = fds[0]
            else:
                for fd in fds:
                    os.close(fd)

        end = time.monotonic() + 10
        while p.poll() is None and time.monotonic() < end:
            try:
                take(*socket.recv_fds(ns, 4096, 4)[:2])
            except socket.timeout:
                continue
        # what it sent just before it exited is still queued (on a loaded host
        # the exit comes before this loop has read it)
        ns.setblocking(False)
        while True:
            try:
                take(*socket.recv_fds(ns, 4096, 4)[:2])
            except (BlockingIOError, InterruptedError):
                break
        ns.settimeout(10)
        check(p.wait(timeout=10) == 0, "ramsterd exits 0 after handing its image over")
        image = stored.pop("ramster-image", None)
        check(image is not None, "FDSTORE=1 FDNAME=ramster-image arrives with a descriptor")
        conns = [n for n in stored if n.startswith("nbdconn-")]
        check(len(conns) == 1 and len(stored) == 1,
              "the connected client's socket is stored as nbdconn-N (%s)" % sorted(stored))
        if image is None or len(conns) != 1:
            return
        # started again as systemd would: the fds at 3 and 4, LISTEN_PID the new pid
        env2 = dict(os.environ)
        env2.update({"LISTEN_FDS": "2", "LISTEN_FDNAMES": "ramster-image:" + conns[0],
                     "RAMSTER_NO_MEMLOCK": "1", "RAMSTER_BUSY_POLL_US": "0",
                     "NOTIFY_SOCKET": ns_path, "RAMSTER_FDSTORE": "1"})
        sfd = stored[conns[0]]
        os.set_inheritable(image, True)
        os.set_inheritable(sfd, True)
        p = subprocess.Popen(["sh", "-c", 'LISTEN_PID=$$ exec "$0" "$@" 3<&%d 4<&%d' %
                              (image, sfd),
                              os.path.join(binp, "ramsterd"), "--config", conf, "--node", "n1"],
                             env=env2, stdout=log, stderr=log, close_fds=False)
        os.close(image)
        os.close(sfd)  # the store's copy: FDSTOREREMOVE would drop it
        check(wait_socket(sock), "the node comes back")
        removed = set()
        end = time.monotonic() + 5
        while len(removed) < 2 and time.monotonic() < end:
            try:
                m, fds, _, _ = socket.recv_fds(ns, 4096, 4)
            except socket.timeout:
                continue
            for fd in fds:
                os.close(fd)
            if b"FDSTOREREMOVE=1" in m:
                removed.update(l[7:] for l in m.decode().split("\n") if l.startswith("FDNAME="))
        check(removed == {"ramster-image", conns[0]},
              "the new process removes the image and the socket from the store (%s)" % removed)
        check(stat_value(binp, sock, "restart_warm") == 1, "it started warm (restart_warm 1)")
        check(stat_value(binp, sock, "restart_exports") == 1, "the export took its pages back")
        check(stat_value(binp, sock, "restart_nbd_conns") == 1, "the connection was taken over")
        # the same socket: what it wrote reads back, and it writes on
        check(nbd_io(conn, 0, 5000) == page, "the connected client reads its block back")
        nbd_io(conn, 1, 5001, page[::-1])
        check(nbd_io(conn, 0, 5001) == page[::-1], "and writes and reads on, same socket")
        conn.close()
        r = subprocess.run([sys.executable, blocks, nbd, "ram", "check", "3000", "7"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, "every block identical after the restart (%s%s)" %
              (r.stdout.strip(), r.stderr.strip()[-200:]))
        p.send_signal(signal.SIGTERM)  # (it hands an image again, which nobody takes)
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("notify", "journal", "fdstore"):
        print(__doc__, file=sys.stderr)
        return 2
    binp, d = os.path.abspath(sys.argv[2]), sys.argv[3]
    {"notify": notify, "journal": journal, "fdstore": fdstore}[sys.argv[1]](binp, d)
    for f in FAILS:
        print("failed: " + f, file=sys.stderr)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
