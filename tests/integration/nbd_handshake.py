# nbd_handshake.py - a plain NBD client's handshake over a Unix socket (fixed
# newstyle, OPT_GO), for the scripts that speak NBD themselves: nbd_blocks.py
# beside it, and tests/vm/nbd-persist.py, which imports it from here (the VM
# sees the tree at the same path). nbd_raw.py keeps its own on purpose: it
# takes the handshake apart byte by byte.
import socket
import struct

NBDMAGIC, IHAVEOPT = 0x4E42444D41474943, 0x49484156454F5054
OPT_GO, REP_ACK, REP_INFO, INFO_EXPORT = 7, 1, 3, 0


def recvn(s, n):
    """Exactly n bytes from s; EOFError when it closes first."""
    b = bytearray()
    while len(b) < n:
        k = s.recv(n - len(b))
        if not k:
            raise EOFError("closed after %d of %d bytes" % (len(b), n))
        b += k
    return bytes(b)


def dial(path, export):
    """Connect to the Unix socket path and open export (bytes) with OPT_GO.

    Return (socket, export size, transmission flags); the socket keeps a 30 s
    timeout. Raise OSError when the server's greeting is wrong or it refuses
    the export, EOFError when it hangs up.
    """
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    magic, opt, _ = struct.unpack(">QQH", recvn(s, 18))
    if magic != NBDMAGIC or opt != IHAVEOPT:
        raise OSError("bad greeting")
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
    s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, 4 + len(export) + 2) +
              struct.pack(">I", len(export)) + export + struct.pack(">H", 0))
    size = flags = None
    while True:
        _, _, typ, ln = struct.unpack(">QIII", recvn(s, 20))
        data = recvn(s, ln)
        if typ == REP_INFO and ln >= 12 and struct.unpack(">H", data[:2])[0] == INFO_EXPORT:
            size, flags = struct.unpack(">QH", data[2:12])
        if typ != REP_INFO:
            break
    if typ != REP_ACK or size is None:
        raise OSError("OPT_GO refused (reply type %#x)" % typ)
    return s, size, flags
