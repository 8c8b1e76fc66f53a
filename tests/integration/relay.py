#!/usr/bin/env python3
"""relay.py - an on-path attacker between two ramsterd nodes (test_relay.c).

    relay.py LISTEN_PORT TARGET_HOST TARGET_PORT CAPTURE MODE [K]

Listens on 127.0.0.1:LISTEN_PORT; every connection is relayed to
TARGET_HOST:TARGET_PORT (node alpha's cluster file names the relay as node
beta's address). Every byte both ways is appended to CAPTURE. In the
direction dialer -> acceptor the relay cuts the stream into frames (16-byte
header: "RMSP", version, kind, reserved, msg_len, payload_len, little-endian)
and, once, on the K-th frame of a connection (K counts from 1; the handshake
takes frames 1 and 2), does MODE:

    record   nothing: relay and record
    flip     flip one bit of frame K's message part
    replay   send frame K, then frame K again
    drop     leave frame K out
    forge    send a frame of our own before frame K: a P_DRAIN request
             in the clear (what the relay saw obeyed before link AEAD)
    splice   keep frame K of the first connection, end that connection;
             on the next connection send the kept frame before its frame K
    storm    K faults in all, once the file CAPTURE.go exists (the test makes
             it when it starts reading back): on each connection, at its
             F-th frame after the go (F = 3 + connection id * 7 % 40), flip
             one bit (odd faults: the acceptor refuses the frame and closes)
             or reset both sides at once (even faults: SO_LINGER 0, a TCP RST
             that loses whatever was in flight either way)

What it did goes to stderr, one line, "relay: MODE done on frame K".
"""
import os
import select
import socket
import struct
import sys

HDR = 16


def forged_drain():
    # ramster.peer.Msg { op = P_DRAIN (12), seq = 9 }, payload one byte 1
    msg = bytes([0x08, 12, 0x10, 9])
    return struct.pack("<4sBBHII", b"RMSP", 1, 1, 0, len(msg), 1) + msg + b"\x01"


def main():
    port, host, tport, capture, mode = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                                        sys.argv[4], sys.argv[5])
    k = int(sys.argv[6]) if len(sys.argv) > 6 else 20
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(8)
    cap = open(capture, "ab", buffering=0)
    state = {"done": False, "kept": None, "conns": 0, "storms": 0}
    go = capture + ".go"

    def reset(conn):
        for s in (conn["a"], conn["b"]):
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        close_conn(conn)
    pairs = {}  # sock -> (peer sock, direction 'up' (dialer->acceptor) or 'down', conn)

    def log(what):
        sys.stderr.write("relay: %s\n" % what)
        sys.stderr.flush()

    def close_conn(conn):
        for s in (conn["a"], conn["b"]):
            pairs.pop(s, None)
            try:
                s.close()
            except OSError:
                pass

    def up_frames(conn, data):
        """Cut dialer->acceptor bytes into frames; @return the bytes to send on."""
        conn["buf"] += data
        out = b""
        while len(conn["buf"]) >= HDR:
            mlen, plen = struct.unpack_from("<II", conn["buf"], 8)
            n = HDR + mlen + plen
            if len(conn["buf"]) < n:
                break
            f, conn["buf"] = conn["buf"][:n], conn["buf"][n:]
            conn["frames"] += 1
            if mode == "storm":
                if state["storms"] >= k or not (conn["armed"] or os.path.exists(go)):
                    out += f
                    continue
                conn["armed"] += 1
                if conn["armed"] < 3 + conn["id"] * 7 % 40:
                    out += f
                    continue
                state["storms"] += 1
                conn["armed"] = 0
                if state["storms"] % 2:
                    b = bytearray(f)
                    b[HDR + mlen // 2] ^= 0x10
                    out += bytes(b)
                    conn["end_after"] = True
                else:
                    conn["reset"] = True
                log("storm %d: %s on frame %d of connection %d" %
                    (state["storms"], "flip" if state["storms"] % 2 else "reset",
                     conn["frames"], conn["id"]))
                return out
            if state["done"] or conn["frames"] != k or mode == "record":
                out += f
                continue
            if mode == "flip":
                b = bytearray(f)
                b[HDR + mlen // 2] ^= 0x10
                out += bytes(b)
            elif mode == "replay":
                out += f + f
            elif mode == "drop":
                pass
            elif mode == "forge":
                out += forged_drain() + f
            elif mode == "splice":
                if state["kept"] is None:
                    state["kept"] = f
                    log("splice: kept frame %d of connection %d" % (k, conn["id"]))
                    conn["end"] = True
                    return out
                out += state["kept"] + f
            state["done"] = True
            log("%s done on frame %d of connection %d" % (mode, k, conn["id"]))
        return out

    while True:
        rl = [ls] + list(pairs.keys())
        r, _, _ = select.select(rl, [], [], 1.0)
        for s in r:
            if s is ls:
                a, _ = ls.accept()
                try:
                    b = socket.create_connection((host, tport), timeout=2)
                except OSError:
                    a.close()
                    continue
                state["conns"] += 1
                conn = {"a": a, "b": b, "buf": b"", "frames": 0, "id": state["conns"],
                        "end": False, "armed": 0, "reset": False, "end_after": False}
                pairs[a] = (b, "up", conn)
                pairs[b] = (a, "down", conn)
                continue
            if s not in pairs:
                continue
            other, direction, conn = pairs[s]
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if not data:
                close_conn(conn)
                continue
            cap.write(data)
            if direction == "up":
                data = up_frames(conn, data)
                if conn["reset"]:
                    reset(conn)
                    continue
            try:
                if data:
                    other.sendall(data)
            except OSError:
                close_conn(conn)
                continue
            if conn["end"]:
                close_conn(conn)


if __name__ == "__main__":
    main()
