#!/usr/bin/env bash
# test_build.sh - the build's own promises (Makefile):
# - each binary links only the libraries its objects use: ramsterctl, the
#   drill and netbench need libprotobuf-c, libjansson (their JSON) and libc,
#   libramster.so libprotobuf-c and libc, never
#   libev, libisal, liblzo2, libsodium, libinih, libmicrohttpd, libsystemd, libgnutls or the RDMA
#   libraries (readelf -d of
#   the built files in RAMSTER_BIN and its ../lib, and the link commands of
#   `make -n`);
# - a user's CFLAGS / CPPFLAGS / LDFLAGS add to the flags the build needs and
#   replace none: `make -n CFLAGS=-O0` still compiles with -std=gnu11, -fPIC,
#   -pthread, the warnings and the include paths, -O0 after -O2 (so it wins);
# - no object depends on `deps`: a dry run of a fresh build runs no
#   tools/deps.sh and no apt-get.
# Prints cmocka-like lines, so tests/run-tests counts them.
set -u
BIN=${RAMSTER_BIN:-build/bin}
BIN=$(cd "$BIN" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
pass=0
fail=0

for tool in readelf make; do
	if ! command -v $tool >/dev/null; then
		echo "[  SKIPPED ] test_build: $tool missing (tools/deps.sh installs build-essential)"
		echo "[  PASSED  ] 0 test(s)."
		exit 0
	fi
done

T=$(mktemp -d /tmp/ramster-build.XXXXXX)
trap 'rm -rf "$T"' EXIT

# run NAME CMD...: one test case; its output shown only when it fails
run() {
	local name=$1 out
	shift
	echo "[ RUN      ] $name"
	if out=$("$@" 2>&1); then
		[ -n "$out" ] && printf '%s\n' "$out"
		echo "[       OK ] $name"
		pass=$((pass + 1))
	else
		printf '%s\n' "$out"
		echo "[  FAILED  ] $name"
		fail=$((fail + 1))
	fi
}

# needed FILE: its NEEDED entries, one a line, sonames without version
needed() {
	readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sed 's/\.so.*//' | sort
}

# links_only FILE ALLOWED...: every NEEDED entry of FILE is in ALLOWED or is a
# sanitizer runtime (the asan/tsan builds link theirs) or the dynamic loader;
# ALLOWED's first entry must be there (so a broken readelf cannot pass)
links_only() {
	local f=$1 n bad="" got
	shift
	[ -f "$f" ] || { echo "no $f (build it first)"; return 1; }
	got=$(needed "$f")
	echo "$(basename "$f") needs: $(echo $got)"
	grep -qx "$1" <<<"$got" || { echo "  $1 missing"; return 1; }
	for n in $got; do
		case " $* " in *" $n "*) continue ;; esac
		case $n in ld-linux* | libasan | libubsan | libtsan | liblsan | libgcc_s) continue ;; esac
		bad="$bad $n"
	done
	[ -z "$bad" ] || { echo "  links what it does not use:$bad"; return 1; }
}

# the daemon, for contrast: it does use all of these
t_ramsterd_links() {
	local got n
	got=$(needed "$BIN/ramsterd")
	echo "ramsterd needs: $(echo $got)"
	for n in libev libisal liblzo2 liblz4 libsodium libinih libprotobuf-c libmicrohttpd libsystemd libgnutls; do
		grep -qx "$n" <<<"$got" || { echo "  $n missing"; return 1; }
	done
}
run ramsterctl_links_only_protobuf_jansson links_only "$BIN/ramsterctl" libprotobuf-c libjansson libc
run drill_links_only_protobuf_jansson links_only "$BIN/ramster-drill" libprotobuf-c libjansson libc
run netbench_links_only_protobuf_jansson links_only "$BIN/ramster-netbench" libprotobuf-c libjansson libc
run bench_links_tier_protobuf_jansson links_only "$BIN/ramster-bench" liblzo2 liblz4 libprotobuf-c libjansson libc
# libramster: protobuf-c, and LZ4 for its far-memory regions' cache of evicted pages (issue 23)
run libramster_links_only_protobuf_lz4 links_only "$BIN/../lib/libramster.so" libprotobuf-c liblz4 libc
run ramsterd_links_its_libraries t_ramsterd_links

# dry runs against an empty build tree of our own: nothing is built
# (the flags of a make this runs under - make asan's OPT, SAN - are left out)
dry() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u OPT -u SAN -u WERROR -u CFLAGS -u CPPFLAGS \
		-u LDFLAGS make -n --no-print-directory -C "$SRC" BUILD="$T/b" "$@"
}

# has LINE WORD...: every WORD is a separate word of LINE
has() {
	local line=$1 w
	shift
	for w in "$@"; do
		case " $line " in *" $w "*) ;; *) echo "  '$w' missing"; return 1 ;; esac
	done
}

t_user_cflags() {
	local line
	line=$(dry CFLAGS="-O0 -DUSER_FLAG" "$T/b/obj/tmem/zbud.o" | grep -- ' -c -o .*zbud\.o')
	echo "$line"
	[ -n "$line" ] || { echo "  no compile line for zbud.o"; return 1; }
	has "$line" -O0 -DUSER_FLAG -std=gnu11 -fPIC -pthread -Wall -Wextra -Wshadow -Wformat=2 \
		-Wstrict-prototypes -Wmissing-prototypes -I. -Iinclude -D_GNU_SOURCE || return 1
	# the user's -O0 comes after the build's -O2, so it is the one in force
	[[ $line == *"-O2 "*" -O0 "* ]] || { echo "  -O0 is not after -O2"; return 1; }
}
run user_cflags_keep_required_flags t_user_cflags

t_user_cppflags() {
	local line
	line=$(dry CPPFLAGS="-DUSER_CPP" "$T/b/obj/tmem/zbud.o" | grep -- ' -c -o .*zbud\.o')
	has "$line" -DUSER_CPP -I. -Iinclude -D_GNU_SOURCE -std=gnu11 -Wall
}
run user_cppflags_keep_include_paths t_user_cppflags

t_user_ldflags() {
	local line
	line=$(dry LDFLAGS="-Wl,-O1" "$T/b/bin/ramsterctl" | grep -- '-o .*bin/ramsterctl ')
	echo "$line"
	has "$line" -pthread -Wl,-O1
}
run user_ldflags_keep_pthread t_user_ldflags

t_no_deps_in_build() {
	local out
	out=$(dry all)
	grep -q -- ' -c -o ' <<<"$out" || { echo "  the dry run compiled nothing"; return 1; }
	if grep -E 'deps\.sh|apt-get' <<<"$out"; then
		echo "  a plain build runs the package installer"
		return 1
	fi
}
run build_never_runs_deps t_no_deps_in_build

# The same promise as the NEEDED checks above, on the link commands: a
# toolchain that links --as-needed (Debian's gcc does) would drop an unused
# library from NEEDED and hide a Makefile that names it.
t_link_lines() {
	local out f line extra bad=0
	out=$(dry all)
	for f in bin/ramsterctl bin/ramster-drill bin/ramster-netbench lib/libramster.so; do
		line=$(grep -- "-o $T/b/$f " <<<"$out")
		[ -n "$line" ] || { echo "  no link line for $f"; bad=1; continue; }
		grep -q -- '-lprotobuf-c' <<<"$line" || { echo "  $f: no -lprotobuf-c"; bad=1; }
		extra=$(tr ' ' '\n' <<<"$line" | grep -Ex -- '-l(ev|isal|lzo2|lz4|sodium|inih|rdmacm|ibverbs|m|microhttpd|systemd)')
		# libramster's regions keep evicted pages in LZ4 (lib/region_zcache.c)
		[ "$f" = lib/libramster.so ] && extra=$(grep -vx -- -llz4 <<<"$extra")
		if [ -n "$extra" ]; then
			echo "  $f links more than protobuf-c (and jansson):" $extra
			bad=1
		fi
	done
	line=$(grep -- "-o $T/b/bin/ramster-bench " <<<"$out")
	extra=$(tr ' ' '\n' <<<"$line" | grep -Ex -- '-l(ev|isal|sodium|inih|rdmacm|ibverbs|m|microhttpd|systemd)')
	if [ -n "$extra" ]; then
		echo "  ramster-bench links more than liblzo2 and protobuf-c:" $extra
		bad=1
	fi
	return $bad
}
run link_lines_name_only_used_libraries t_link_lines

echo "$pass passed, $fail failed"
echo "[  PASSED  ] $pass test(s)."
if [ $fail -eq 0 ]; then
	exit 0
fi
echo "[  FAILED  ] $fail test(s), listed above"
exit 1
