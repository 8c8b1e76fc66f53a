#!/usr/bin/env bash
# test_nbd_tls.sh - ramsterd's NBD over TLS (NBD_OPT_STARTTLS) with clients we
# did not write: libnbd's nbdinfo and nbdcopy (nbds:// URIs), python3-libnbd,
# and raw bytes (STARTTLS then garbage, options before STARTTLS). Keys are made
# here with psktool and certtool (gnutls-bin). Checks: round trips over PSK and
# X.509, a wrong key or an untrusted client certificate refused and counted
# with the daemon serving the next client, plaintext refused under
# nbd_tls = require and let in under on, the start-up refusals (a non-loopback
# nbd_listen without nbd_tls, a key file others can read). Needs RAMSTER_BIN
# (the Makefile's integration target sets it). Prints cmocka-like lines, so
# tests/run-tests counts them.
set -u
. "$(dirname "$0")/lib.sh"
lib_init test_nbd_tls
RUN_TAIL=20
# the nodes lock their memory, log at info, and are waited for by their NBD sockets
NODE_MEMLOCK=1
NODE_LOG_LEVEL=info
NODE_WAIT=nbd_socket

need nbdinfo nbdcopy psktool certtool
# Debian's python3 has the nbd module (python3-libnbd); a pyenv python3 on PATH does not
PY=/usr/bin/python3

alive() { kill -0 "$1" 2>/dev/null; }

# ---- keys: a PSK (psktool) and a CA with a server certificate (certtool) --------------
mkdir -p "$T/pki" "$T/client" "$T/badca" "$T/client-good" "$T/client-bad"
psktool -u alice -p "$T/keys.psk" >/dev/null || exit 1
psktool -u alice -p "$T/wrong.psk" >/dev/null || exit 1 # alice with another key
chmod 600 "$T/keys.psk" "$T/wrong.psk"

mkca() { # DIR CN: a self-signed CA, ca-key.pem and ca-cert.pem in DIR
	printf 'cn = %s\nca\ncert_signing_key\nexpiration_days = 2\n' "$2" >"$1/ca.info"
	certtool --generate-privkey --outfile "$1/ca-key.pem" 2>/dev/null &&
		certtool --generate-self-signed --load-privkey "$1/ca-key.pem" \
			--template "$1/ca.info" --outfile "$1/ca-cert.pem" 2>/dev/null
}
mkcert() { # CADIR OUTPREFIX TEMPLATE-LINES: a key and a certificate signed by CADIR's CA
	printf '%b' "$3" >"$2.info"
	certtool --generate-privkey --outfile "$2-key.pem" 2>/dev/null &&
		certtool --generate-certificate --load-ca-certificate "$1/ca-cert.pem" \
			--load-ca-privkey "$1/ca-key.pem" --load-privkey "$2-key.pem" \
			--template "$2.info" --outfile "$2-cert.pem" 2>/dev/null
}
mkca "$T/pki" "ramster test CA" || exit 1
mkca "$T/badca" "someone else's CA" || exit 1
mkcert "$T/pki" "$T/pki/server" \
	'organization = ramster test\ncn = localhost\ndns_name = localhost\nip_address = 127.0.0.1\ntls_www_server\nencryption_key\nsigning_key\nexpiration_days = 2\n' ||
	exit 1
chmod 600 "$T/pki/server-key.pem"
cp "$T/pki/ca-cert.pem" "$T/client/"
# client certificates: one from our CA, one from another
cp "$T/pki/ca-cert.pem" "$T/client-good/"
cp "$T/pki/ca-cert.pem" "$T/client-bad/"
mkcert "$T/pki" "$T/client-good/client" \
	'cn = good client\ntls_www_client\nencryption_key\nsigning_key\nexpiration_days = 2\n' || exit 1
mkcert "$T/badca" "$T/client-bad/client" \
	'cn = bad client\ntls_www_client\nencryption_key\nsigning_key\nexpiration_days = 2\n' || exit 1

# ---- node a: PSK, nbd_tls = require -----------------------------------------------------
pa=$(free_ports 1)
cat >"$T/a.ini" <<EOF
[node a]
socket = $T/a.sock
local_mb = 256
nbd_socket = $T/nbd-a.sock
nbd_listen = 127.0.0.1:$pa
nbd_tls = require
nbd_tls_psk = keys.psk

[export ram]
size = 256M

[limits]
nbd_handshake_timeout_ms = 1500
EOF
start_node "$T/a.ini" a "$T/a.log" || exit 1
node_a=$last_pid
PSK="nbds://alice@127.0.0.1:$pa/ram?tls-psk-file=$T/keys.psk"

head -c $((40 << 20)) /dev/urandom >"$T/rand.img"
# text too: the tier compresses it (another path than the raw pages)
$PY -c '
import sys
with open(sys.argv[1], "wb") as f:
    b = b"".join(b"ramster tls line %08d export ram page\n" % i for i in range(400000))
    f.write(b + bytes(-len(b) % 4096))  # whole pages
' "$T/text.img"

t_psk_roundtrip() {
	nbdinfo "$PSK" >"$T/psk-info" || return 1
	grep -q "newstyle-fixed with TLS" "$T/psk-info" || return 1
	grep -q "export-size: $((256 << 20))" "$T/psk-info" || return 1
	nbdcopy "$T/rand.img" "$PSK" || return 1
	nbdcopy "$PSK" "$T/rand-back.img" || return 1
	cmp "$T/rand.img" <(head -c $((40 << 20)) "$T/rand-back.img") || return 1
	nbdcopy "$T/text.img" "$PSK" || return 1
	nbdcopy "$PSK" "$T/text-back.img" || return 1
	cmp "$T/text.img" <(head -c "$(stat -c %s "$T/text.img")" "$T/text-back.img") || return 1
	h=$(node_stat "$T/a.sock" nbd_tls_handshakes) || return 1
	echo "handshakes $h"
	[ "$h" -ge 5 ]
}
run psk_nbdinfo_nbdcopy_roundtrip_cmp t_psk_roundtrip

t_wrong_key() {
	local f0 f1 h0 h1
	f0=$(node_stat "$T/a.sock" nbd_tls_failures) || return 1
	if nbdinfo "nbds://alice@127.0.0.1:$pa/ram?tls-psk-file=$T/wrong.psk"; then
		echo "a wrong PSK was let in"
		return 1
	fi
	if nbdinfo "nbds://mallory@127.0.0.1:$pa/ram?tls-psk-file=$T/wrong.psk"; then
		echo "an unknown PSK user was let in"
		return 1
	fi
	f1=$(node_stat "$T/a.sock" nbd_tls_failures) || return 1
	echo "failures $f0 -> $f1"
	[ "$f1" -ge $((f0 + 2)) ] || return 1
	alive "$node_a" || return 1
	grep -q "TLS handshake failed" "$T/a.log" || return 1
	h0=$(node_stat "$T/a.sock" nbd_tls_handshakes)
	nbdinfo --size "$PSK" | grep -qx $((256 << 20)) || return 1 # the next good client
	h1=$(node_stat "$T/a.sock" nbd_tls_handshakes)
	[ "$h1" -eq $((h0 + 1)) ]
}
run psk_wrong_key_refused_counted_next_client_served t_wrong_key

t_plain_refused() {
	local r0 r1
	r0=$(node_stat "$T/a.sock" nbd_tls_required_refused) || return 1
	if nbdinfo "nbd://127.0.0.1:$pa/ram"; then
		echo "a plaintext client was let in under require"
		return 1
	fi
	r1=$(node_stat "$T/a.sock" nbd_tls_required_refused) || return 1
	echo "refused $r0 -> $r1"
	[ "$r1" -eq $((r0 + 1)) ] || return 1
	grep -q "plaintext client refused: option [0-9]* ([A-Z_]*) before STARTTLS" "$T/a.log" || return 1
	# the unix socket may stay plaintext
	nbdinfo --size "nbd+unix:///ram?socket=$T/nbd-a.sock" | grep -qx $((256 << 20))
}
run plaintext_refused_under_require_unix_socket_plain t_plain_refused

# raw bytes: what the spec promises before TLS, and junk where a ClientHello belongs
cat >"$T/raw.py" <<'EOF'
import socket, struct, sys, time
port = int(sys.argv[1])
NBDMAGIC, IHAVEOPT, REP_MAGIC = 0x4E42444D41474943, 0x49484156454F5054, 0x3E889045565A9
OPT_EXPORT_NAME, OPT_ABORT, OPT_LIST, OPT_STARTTLS, OPT_INFO, OPT_GO = 1, 2, 3, 5, 6, 7
REP_ACK, ERR_INVALID, ERR_TLS_REQD = 1, 2**31 + 3, 2**31 + 5
bad = 0

def check(name, cond, why=""):
    global bad
    print(("ok " if cond else "FAIL ") + name + ("" if cond else ": " + str(why)))
    bad += not cond

def recvn(s, n):
    b = b""
    while len(b) < n:
        k = s.recv(n - len(b))
        if not k:
            raise EOFError("closed after %d of %d bytes" % (len(b), n))
        b += k
    return b

def conn():
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(10)
    m, o, fl = struct.unpack(">QQH", recvn(s, 18))
    assert m == NBDMAGIC and o == IHAVEOPT, (m, o)
    s.sendall(struct.pack(">I", 3))
    return s

def opt(s, o, data=b""):
    s.sendall(struct.pack(">QII", IHAVEOPT, o, len(data)) + data)

def reply(s):
    m, o, t, n = struct.unpack(">QIII", recvn(s, 20))
    assert m == REP_MAGIC, hex(m)
    return o, t, recvn(s, n)

def closed(s, within=5.0):
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False

s = conn()
name = b"ram"
for o, data in ((OPT_LIST, b""), (OPT_GO, struct.pack(">I", 3) + name + struct.pack(">H", 0)),
                (OPT_INFO, struct.pack(">I", 3) + name + struct.pack(">H", 0))):
    opt(s, o, data)
    ro, t, d = reply(s)
    check("option %d before STARTTLS: ERR_TLS_REQD" % o, ro == o and t == ERR_TLS_REQD, (ro, hex(t), d))
opt(s, OPT_STARTTLS, b"x")
ro, t, d = reply(s)
check("STARTTLS with data: ERR_INVALID", t == ERR_INVALID, hex(t))
opt(s, OPT_ABORT)
ro, t, d = reply(s)
check("ABORT before STARTTLS: ACK", ro == OPT_ABORT and t == REP_ACK, (ro, hex(t)))
check("ABORT closes", closed(s))

s = conn()
opt(s, OPT_EXPORT_NAME, name)
check("EXPORT_NAME before STARTTLS closes", closed(s))

s = conn()
opt(s, OPT_STARTTLS)
ro, t, d = reply(s)
check("STARTTLS: ACK", ro == OPT_STARTTLS and t == REP_ACK, (ro, hex(t)))
s.sendall(b"GET / HTTP/1.0\r\n\r\n" + bytes(range(256)) * 8)
check("junk instead of a ClientHello closes", closed(s))

s = conn()
s.sendall(struct.pack(">QII", IHAVEOPT, OPT_STARTTLS, 0) + b"\x16\x03\x01\x00\x05hello")
ro, t, d = reply(s)  # junk sent with STARTTLS, before its ACK came (the spec says wait)
check("STARTTLS (junk right behind it): ACK", t == REP_ACK, hex(t))
check("junk right behind STARTTLS closes", closed(s))

s = conn()
opt(s, OPT_STARTTLS)
ro, t, d = reply(s)
s.sendall(b"\x16\x03\x01\x00\x40" + b"\x01" * 10)  # 10 bytes of a 64-byte record, then silence
t0 = time.monotonic()
check("a handshake left hanging is closed by the handshake timeout",
      closed(s, 8.0) and time.monotonic() - t0 > 0.5, time.monotonic() - t0)
sys.exit(1 if bad else 0)
EOF

t_raw() {
	local f0 f1
	f0=$(node_stat "$T/a.sock" nbd_tls_failures) || return 1
	$PY "$T/raw.py" "$pa" || return 1
	alive "$node_a" || return 1
	f1=$(node_stat "$T/a.sock" nbd_tls_failures) || return 1
	echo "failures $f0 -> $f1"
	[ "$f1" -ge $((f0 + 3)) ] || return 1
	nbdinfo --size "$PSK" | grep -qx $((256 << 20)) # still serving
}
run raw_before_starttls_tls_reqd_junk_hello_closes_conn_not_daemon t_raw

# python3-libnbd: large reads and writes in many records, structured replies, flush
t_libnbd() {
	$PY - "$pa" "$T/keys.psk" <<'EOF'
import os, sys
import nbd
h = nbd.NBD()
h.set_tls(nbd.TLS_REQUIRE)
h.set_tls_username("alice")
h.set_tls_psk_file(sys.argv[2])
h.connect_tcp("127.0.0.1", sys.argv[1])
assert h.get_tls_negotiated(), "no TLS"
assert h.get_structured_replies_negotiated()
size = h.get_size()
big = os.urandom(32 << 20)                 # the largest request: ~2000 records
h.pwrite(big, 64 << 20)
assert h.pread(len(big), 64 << 20) == big, "32 MiB read back"
# pipelined: many small commands in flight at once
data = [os.urandom(4096) for _ in range(64)]
cookies = [h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(data[i])), 128 << 20 | i * 8192)
           for i in range(64)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    assert h.aio_command_completed(c), c
got = [h.pread(4096, 128 << 20 | i * 8192) for i in range(64)]
assert got == data, "pipelined writes"
h.zero(1 << 20, 64 << 20)
assert h.pread(4096, 64 << 20) == bytes(4096)
h.flush()
h.shutdown()
print("libnbd over TLS ok")
EOF
}
if $PY -c 'import nbd' 2>/dev/null; then
	run libnbd_psk_32M_requests_pipelined t_libnbd
else
	echo "[  SKIPPED ] libnbd_psk_32M_requests_pipelined: python3-libnbd missing"
fi

# ---- a reload reads the keys again: nbd_tls_psk names a new file, whose key gets in -----
# and the old one no more (issue 16: SIGHUP reloads TLS material); a session made before
# keeps going. (A new path, not the same file rewritten: GnuTLS reads a PSK file at each
# handshake, so a rewritten file would prove nothing about the reload.)
t_psk_reload() {
	local r0 r1
	cp "$T/keys.psk" "$T/old.psk"
	psktool -u alice -p "$T/new.psk" >/dev/null || return 1
	chmod 600 "$T/new.psk" "$T/old.psk"
	r0=$(node_stat "$T/a.sock" nbd_tls_reloads) || return 1
	# a session under the old keys, open across the reload
	$PY - "$pa" "$T/old.psk" "$T/new.psk" "$T/a.ini" "$node_a" <<'PYEOF' || return 1
import os, signal, sys, time
import nbd
port, old, new, conf, pid = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
def client(keys):
    h = nbd.NBD()
    h.set_tls(nbd.TLS_REQUIRE)
    h.set_tls_username("alice")
    h.set_tls_psk_file(keys)
    h.connect_uri("nbds://alice@127.0.0.1:%s/ram" % port)
    return h
h = client(old)
h.pwrite(b"before the reload".ljust(4096, b"."), 0)
with open(conf) as f:
    text = f.read()
assert "nbd_tls_psk = keys.psk" in text
with open(conf, "w") as f:
    f.write(text.replace("nbd_tls_psk = keys.psk", "nbd_tls_psk = new.psk"))
os.kill(pid, signal.SIGHUP)
time.sleep(1.0)
assert h.pread(4096, 0).startswith(b"before the reload"), "live session broken"
try:
    client(old).pread(4096, 0)
    sys.exit("the old key still gets in after the reload")
except nbd.Error:
    pass
assert client(new).pread(4096, 0).startswith(b"before the reload")
h.shutdown()
print("reload: old key refused, new key in, the live session kept")
PYEOF
	r1=$(node_stat "$T/a.sock" nbd_tls_reloads) || return 1
	echo "nbd_tls_reloads $r0 -> $r1"
	[ "$r1" -eq $((r0 + 1)) ] || return 1
	grep -q "applied: .*NBD TLS keys read again" "$T/a.log"
}
if $PY -c 'import nbd' 2>/dev/null; then
	run psk_reload_rotated_keys_live_session_kept t_psk_reload
else
	echo "[  SKIPPED ] psk_reload_rotated_keys_live_session_kept: python3-libnbd missing"
fi

# ---- node b: X.509, nbd_tls = on ---------------------------------------------------------
pb=$(free_ports 1)
cat >"$T/b.ini" <<EOF
[node b]
socket = $T/b.sock
local_mb = 128
nbd_socket = $T/nbd-b.sock
nbd_listen = 127.0.0.1:$pb
nbd_tls = on
nbd_tls_certificates = $T/pki

[export ram]
size = 128M
EOF
start_node "$T/b.ini" b "$T/b.log" || exit 1
node_b=$last_pid
X509="nbds://localhost:$pb/ram?tls-certificates=$T/client"

t_x509() {
	nbdinfo "$X509" >"$T/x509-info" || return 1
	grep -q "newstyle-fixed with TLS" "$T/x509-info" || return 1
	head -c $((24 << 20)) "$T/rand.img" >"$T/rand24.img"
	nbdcopy "$T/rand24.img" "$X509" || return 1
	nbdcopy "$X509" "$T/x509-back.img" || return 1
	cmp "$T/rand24.img" <(head -c $((24 << 20)) "$T/x509-back.img") || return 1
	# the client checks the server: without our CA it must refuse
	if nbdinfo "nbds://localhost:$pb/ram?tls-certificates=$T/badca"; then
		echo "the client took a server its CA did not sign"
		return 1
	fi
	[ "$(node_stat "$T/b.sock" nbd_tls_handshakes)" -ge 3 ]
}
run x509_nbdinfo_nbdcopy_roundtrip_cmp t_x509

t_client_certs() {
	local f0 f1
	nbdinfo --size "nbds://localhost:$pb/ram?tls-certificates=$T/client-good" |
		grep -qx $((128 << 20)) || return 1
	f0=$(node_stat "$T/b.sock" nbd_tls_failures) || return 1
	if nbdinfo "nbds://localhost:$pb/ram?tls-certificates=$T/client-bad"; then
		echo "a client certificate from another CA was let in"
		return 1
	fi
	f1=$(node_stat "$T/b.sock" nbd_tls_failures) || return 1
	echo "failures $f0 -> $f1"
	[ "$f1" -gt "$f0" ] && alive "$node_b"
}
run x509_client_cert_verified_when_sent t_client_certs

t_plain_on() {
	local r0
	r0=$(node_stat "$T/b.sock" nbd_tls_required_refused) || return 1
	nbdinfo "nbd://127.0.0.1:$pb/ram" >"$T/plain-info" || return 1
	grep -q "newstyle-fixed without TLS" "$T/plain-info" || return 1
	[ "$(node_stat "$T/b.sock" nbd_tls_required_refused)" -eq "$r0" ]
}
run plaintext_accepted_under_on t_plain_on

# ---- start-up refusals -------------------------------------------------------------------
# must_refuse CONF NODE WHAT: ramsterd exits non-zero at start, saying WHAT
must_refuse() {
	timeout 10 "$BIN/ramsterd" --config "$1" --node "$2" --log-level info >"$T/refuse.out" 2>&1
	local rc=$?
	cat "$T/refuse.out"
	[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qF "$3" "$T/refuse.out"
}

t_nonloopback() {
	local p
	p=$(free_ports 1)
	printf '[node w]\nsocket = %s/w.sock\nnbd_socket = %s/nbd-w.sock\nnbd_listen = 0.0.0.0:%s\n[export x]\nsize = 1M\n' \
		"$T" "$T" "$p" >"$T/w.ini"
	must_refuse "$T/w.ini" w "is not a loopback address and nbd_tls is not set: set nbd_tls = require" ||
		return 1
	printf '[node w]\nsocket = %s/w.sock\nnbd_socket = %s/nbd-w.sock\nnbd_listen = 0.0.0.0:%s\nnbd_tls = off\n[export x]\nsize = 1M\n' \
		"$T" "$T" "$p" >"$T/w.ini"
	start_node "$T/w.ini" w "$T/w.log" || return 1
	grep -q "plaintext NBD on a non-loopback address (nbd_tls = off)" "$T/w.log" || return 1
	nbdinfo --size "nbd://127.0.0.1:$p/x" | grep -qx $((1 << 20)) || return 1
	kill "$last_pid"
	# require on the wildcard address is fine too
	printf '[node w]\nsocket = %s/w.sock\nnbd_socket = %s/nbd-w.sock\nnbd_listen = 0.0.0.0:%s\nnbd_tls = require\nnbd_tls_psk = %s\n[export x]\nsize = 1M\n' \
		"$T" "$T" "$p" "$T/keys.psk" >"$T/w.ini"
	wait "$last_pid" 2>/dev/null
	start_node "$T/w.ini" w "$T/w.log" || return 1
	nbdinfo --size "nbds://alice@127.0.0.1:$p/x?tls-psk-file=$T/keys.psk" | grep -qx $((1 << 20))
	kill "$last_pid"
	wait "$last_pid" 2>/dev/null
	true
}
run nonloopback_listen_needs_nbd_tls_off_starts t_nonloopback

t_key_modes() {
	local p
	p=$(free_ports 1)
	cp "$T/keys.psk" "$T/open.psk"
	chmod 644 "$T/open.psk"
	printf '[node k]\nsocket = %s/k.sock\nnbd_socket = %s/nbd-k.sock\nnbd_listen = 127.0.0.1:%s\nnbd_tls = require\nnbd_tls_psk = open.psk\n[export x]\nsize = 1M\n' \
		"$T" "$T" "$p" >"$T/k.ini"
	must_refuse "$T/k.ini" k "open.psk is readable by group or others (chmod 600)" || return 1
	printf 'alice:not-hex\n' >"$T/junk.psk"
	chmod 600 "$T/junk.psk"
	sed -i 's/open.psk/junk.psk/' "$T/k.ini"
	must_refuse "$T/k.ini" k "junk.psk:1: not 'username:hexkey'" || return 1
	printf '[node k]\nsocket = %s/k.sock\nnbd_socket = %s/nbd-k.sock\nnbd_tls = on\n' "$T" "$T" >"$T/k.ini"
	must_refuse "$T/k.ini" k "nbd_tls = on needs nbd_tls_psk = FILE (psktool) or nbd_tls_certificates = DIR" ||
		return 1
	cp -r "$T/pki" "$T/pki-open"
	chmod 640 "$T/pki-open/server-key.pem"
	printf '[node k]\nsocket = %s/k.sock\nnbd_socket = %s/nbd-k.sock\nnbd_tls = on\nnbd_tls_certificates = %s\n[export x]\nsize = 1M\n' \
		"$T" "$T" "$T/pki-open" >"$T/k.ini"
	must_refuse "$T/k.ini" k "server-key.pem is readable by group or others (chmod 600)"
}
run key_files_others_can_read_refused_at_start t_key_modes

alive "$node_a" && alive "$node_b" || { echo "a node died"; fail=$((fail + 1)); }

finish
