#!/usr/bin/env bash
# test_install.sh - what `make install` puts, and that it works where it lands:
# the exact file list; every man page renders without a warning (man --warnings)
# and is found by man; `systemd-analyze verify` passes on the installed units;
# the README's example builds with `pkg-config --cflags --libs ramster` against
# the installed library and talks to a real node; `make uninstall` removes
# exactly what install put. Needs RAMSTER_BIN (the Makefile's integration
# target sets it: the build tree is its parent). Prints cmocka-like lines.
set -u
BIN=${RAMSTER_BIN:-build/bin}
BIN=$(cd "$BIN" && pwd)
BUILD=$(dirname "$BIN")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
T=$(mktemp -d /tmp/ramster-install.XXXXXX)
P=$T/prefix
pass=0
fail=0
node_pid=
cleanup() {
	[ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null
	[ -n "${RAMSTER_KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

# run NAME FUNCTION: one test case, its output kept in $T/NAME.log
run() {
	local name=$1
	shift
	echo "[ RUN      ] $name"
	if "$@" >"$T/$name.log" 2>&1; then
		sed 's/^/    /' "$T/$name.log"
		echo "[       OK ] $name"
		pass=$((pass + 1))
	else
		sed 's/^/    /' "$T/$name.log" | tail -40
		echo "[  FAILED  ] $name"
		fail=$((fail + 1))
	fi
}
skip() {
	echo "[  SKIPPED ] $1: $2"
}

# what make install must put under PREFIX, and nothing else
expected() {
	cat <<-EOF
		bin/ramster-bench
		bin/ramster-drill
		bin/ramster-netbench
		bin/ramster-run
		bin/ramsterctl
		bin/ramsterd
		include/ramster.h
		lib/libramster-preload.so
		lib/libramster.a
		lib/libramster.so
		lib/libramster.so.0
		lib/pkgconfig/ramster.pc
		lib/systemd/system/ramsterd.service
		lib/systemd/system/ramsterd@.service
		lib/sysusers.d/ramster.conf
		share/man/man1/ramster-run.1
		share/man/man3/libramster.3
		share/man/man5/ramster.conf.5
		share/man/man8/ramster-drill.8
		share/man/man8/ramsterctl.8
		share/man/man8/ramsterd.8
	EOF
}
files_under() {
	(cd "$1" && find . \( -type f -o -type l \) | sed 's|^\./||' | LC_ALL=C sort)
}

t_install() {
	# something of another package, already there: uninstall must leave it
	mkdir -p "$P/bin" "$P/share/man/man8"
	echo other >"$P/bin/other-tool"
	echo other >"$P/share/man/man8/other.8"
	make -s -C "$ROOT" BUILD="$BUILD" PREFIX="$P" install || return 1
	diff -u <( (expected; echo bin/other-tool; echo share/man/man8/other.8) | LC_ALL=C sort) \
		<(files_under "$P") || return 1
	[ "$(readlink "$P/lib/libramster.so")" = libramster.so.0 ] || {
		echo "lib/libramster.so does not point at libramster.so.0"
		return 1
	}
	grep -q "^ExecStart=$P/bin/ramsterd " "$P/lib/systemd/system/ramsterd.service" || {
		echo "ramsterd.service: ExecStart is not under PREFIX"
		return 1
	}
	echo "installed $(expected | wc -l) files under PREFIX"
}

t_man() {
	local m out bad=0
	# the check itself: a page with an undefined macro must warn
	printf '.TH X 8\n.SH NAME\nx \\- y\n.NOSUCHMACRO\n' >"$T/canary.8"
	out=$(MANWIDTH=80 man --warnings -l "$T/canary.8" 2>&1 >/dev/null)
	[ -n "$out" ] || {
		echo "man --warnings saw nothing wrong in a bad page: the check cannot work"
		return 1
	}
	for m in "$P"/share/man/man*/*; do
		case $m in */other.8) continue ;; esac
		out=$(MANWIDTH=80 man --warnings -l "$m" 2>&1 >/dev/null)
		if [ -n "$out" ]; then
			echo "$m: $out"
			bad=1
		fi
		[ "$(MANWIDTH=80 man -l "$m" 2>/dev/null | wc -l)" -gt 20 ] || {
			echo "$m: renders to almost nothing"
			bad=1
		}
	done
	for m in ramsterd.8 ramsterctl.8 ramster.conf.5 libramster.3 ramster-drill.8 ramster-run.1; do
		out=$(MANPATH="$P/share/man" man -w "${m##*.}" "${m%.*}" 2>&1)
		[ "$out" = "$P/share/man/man${m##*.}/$m" ] || {
			echo "man -w ${m##*.} ${m%.*}: $out"
			bad=1
		}
	done
	[ $bad -eq 0 ] && echo "6 man pages render without a warning and are found by man"
}

t_verify() {
	local u out bad=0
	# the check itself: a unit with a typo must be reported
	printf '[Service]\nType=notify\nExecStart=%s\nWatchdogSecs=30\n' "$P/bin/ramsterd" \
		>"$T/canary.service"
	out=$(systemd-analyze verify "$T/canary.service" 2>&1)
	[ -n "$out" ] || {
		echo "systemd-analyze verify saw nothing wrong in a bad unit: the check cannot work"
		return 1
	}
	# MANPATH: Documentation=man:... must name installed pages
	for u in ramsterd.service ramsterd@.service; do
		out=$(MANPATH="$P/share/man" systemd-analyze verify "$P/lib/systemd/system/$u" 2>&1)
		if [ $? -ne 0 ] || [ -n "$out" ]; then
			echo "systemd-analyze verify $u:"
			echo "$out"
			bad=1
		else
			echo "systemd-analyze verify $u: clean"
		fi
	done
	# how exposed the unit is (information, not a pass/fail)
	systemd-analyze security --offline=yes "$P/lib/systemd/system/ramsterd.service" 2>/dev/null |
		grep 'Overall exposure' || true
	return $bad
}

t_pkgconfig() {
	local flags
	flags=$(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags --libs ramster) || return 1
	echo "pkg-config --cflags --libs ramster: $flags"
	case " $flags " in *" -I$P/include "*) ;; *) echo "no -I of the prefix"; return 1 ;; esac
	case " $flags " in *" -L$P/lib "*) ;; *) echo "no -L of the prefix"; return 1 ;; esac
	# the README's example, verbatim, inside a main()
	awk '/^```c$/ { on = 1; next } /^```$/ { on = 0 } on' "$ROOT/README.md" >"$T/readme.c.in"
	grep -q 'pkg-config --cflags --libs ramster' "$T/readme.c.in" || {
		echo "README.md has no C example naming pkg-config"
		return 1
	}
	{
		grep '^#include' "$T/readme.c.in"
		echo '#include <stdio.h>'
		echo 'int main(void)'
		echo '{'
		echo '	static char page[RAMSTER_PAGE_SIZE];'
		grep -v '^#include' "$T/readme.c.in" | sed 's/^/\t/'
		echo '	return 0;'
		echo '}'
	} >"$T/readme.c"
	# a sanitizer build's library needs its runtime in the program too (make asan)
	local san=
	ldd "$P/lib/libramster.so.0" | grep -q libasan && san=-fsanitize=address,undefined
	# shellcheck disable=SC2086
	cc -Wall -Werror $san -o "$T/readme" "$T/readme.c" $flags || {
		cat -n "$T/readme.c"
		return 1
	}
	ldd "$T/readme" | grep -q "libramster.so.0 => $P/lib/libramster.so.0" || {
		LD_LIBRARY_PATH="$P/lib" ldd "$T/readme" | grep -q "libramster.so.0 => $P/lib/" || {
			echo "the example does not load the installed libramster.so.0"
			return 1
		}
	}
	# run it against a real node, then ask the node what it did
	RAMSTER_NO_MEMLOCK=1 "$P/bin/ramsterd" --socket "$T/node.sock" --local-mb 16 \
		--log-level warn 2>"$T/node.err" &
	node_pid=$!
	for _ in $(seq 200); do [ -S "$T/node.sock" ] && break; sleep 0.05; done
	RAMSTER_SOCKET=$T/node.sock LD_LIBRARY_PATH="$P/lib" "$T/readme" || {
		echo "the example failed (rc $?)"
		return 1
	}
	local stats
	stats=$("$P/bin/ramsterctl" --socket "$T/node.sock" stats) || return 1
	for c in node_requests_pool_new node_requests_put node_requests_get; do
		[ "$(echo "$stats" | awk -v c=$c '$1 == c { print $2 }')" = 1 ] || {
			echo "the node did not count one $c: $(echo "$stats" | grep "^$c ")"
			return 1
		}
	done
	echo "the README example built with pkg-config ran: one pool_new, put and get on the node"
}

t_uninstall() {
	make -s -C "$ROOT" BUILD="$BUILD" PREFIX="$P" uninstall || return 1
	diff -u <(printf 'bin/other-tool\nshare/man/man8/other.8\n') <(files_under "$P")
}

if ! command -v make >/dev/null || ! command -v cc >/dev/null; then
	skip test_install "make or cc missing (tools/deps.sh installs build-essential)"
	echo "[  PASSED  ] 0 test(s)."
	exit 0
fi
run install t_install
if [ $fail -ne 0 ]; then
	echo "[  FAILED  ] $fail test(s)."
	exit 1
fi
if command -v man >/dev/null; then
	run man_pages t_man
else
	skip man_pages "man missing (tools/deps.sh installs man-db)"
fi
if command -v systemd-analyze >/dev/null; then
	run systemd_verify t_verify
else
	skip systemd_verify "systemd-analyze missing (tools/deps.sh installs systemd)"
fi
if command -v pkg-config >/dev/null; then
	run pkgconfig_example t_pkgconfig
else
	skip pkgconfig_example "pkg-config missing (tools/deps.sh installs it)"
fi
[ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null
node_pid=
run uninstall t_uninstall

echo "[  PASSED  ] $pass test(s)."
if [ $fail -ne 0 ]; then
	echo "[  FAILED  ] $fail test(s)."
	exit 1
fi
