#!/usr/bin/env bash
# test_systemd.sh - ramsterd under systemd's protocols, with this test in
# systemd's place (systemd_check.py): sd_notify (READY=1 once it serves,
# STATUS= lines, WATCHDOG=1 from the loop and none while it is stalled,
# STOPPING=1) and native journal entries when stderr is the journal. Needs
# RAMSTER_BIN (the Makefile's integration target sets it). Prints cmocka-like
# lines, so tests/run-tests counts them.
set -u
BIN=${RAMSTER_BIN:-build/bin}
BIN=$(cd "$BIN" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/ramster-systemd.XXXXXX)
pass=0
fail=0
trap '[ -n "${RAMSTER_KEEP:-}" ] || rm -rf "$T"' EXIT

if ! command -v python3 >/dev/null; then
	echo "[  SKIPPED ] test_systemd: python3 missing (tools/deps.sh installs it)"
	echo "[  PASSED  ] 0 test(s)."
	exit 0
fi

# run NAME CMD...: one test case, its output kept in $T/NAME.log
run() {
	local name=$1
	shift
	echo "[ RUN      ] $name"
	mkdir -p "$T/$name"
	if "$@" "$T/$name" >"$T/$name.log" 2>&1; then
		sed 's/^/    /' "$T/$name.log"
		echo "[       OK ] $name"
		pass=$((pass + 1))
	else
		sed 's/^/    /' "$T/$name.log" | tail -40
		echo "[  FAILED  ] $name"
		fail=$((fail + 1))
	fi
}

run sd_notify python3 "$HERE/systemd_check.py" notify "$BIN"
run fdstore_restart python3 "$HERE/systemd_check.py" fdstore "$BIN"

# The journal's socket is a fixed path (/run/systemd/journal/socket): the test
# binds its own in a private mount namespace, on a tmpfs over /run, so a real
# journald (if any) is neither hidden from others nor fed test entries.
if unshare -m --propagation private true 2>/dev/null; then
	journal() {
		unshare -m --propagation private sh -c \
			'mount -t tmpfs tmpfs /run && exec python3 "$1" journal "$2" "$3"' \
			sh "$HERE/systemd_check.py" "$BIN" "$1"
	}
	run journal journal
else
	echo "[  SKIPPED ] journal: cannot make a mount namespace here (unshare -m needs root)"
fi

if [ $fail -eq 0 ]; then
	echo "[  PASSED  ] $pass test(s)."
else
	echo "[  PASSED  ] $pass test(s)."
	echo "[  FAILED  ] $fail test(s)."
	exit 1
fi
