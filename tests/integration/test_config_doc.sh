#!/usr/bin/env bash
# test_config_doc.sh - the keys of the cluster file in the words around the
# daemon (issue 21). ramster.conf(5)'s key lists are printed from the table
# (node/config_keys.c) and cannot drift; these can, so they are checked:
# - `ramsterd --help-config` runs, exits 0 and lists keys of every section;
# - docs/operations.md names every key of the table in its section's table
#   (or, for [limits] and the rules, its example file), and names no key the
#   table lacks;
# - the built ramster.conf.5 names every key (the Makefile rule spliced it).
# Needs RAMSTER_BIN. Prints cmocka-like lines for tests/run-tests.
set -u
BIN=${RAMSTER_BIN:-build/bin}
BIN=$(cd "$BIN" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DOC=$ROOT/docs/operations.md
MAN=$(dirname "$BIN")/man/ramster.conf.5
T=$(mktemp -d /tmp/ramster-config-doc.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0

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

# "SECTION KEY" a line, from --help-config: sections cluster, node, export, limits, user
"$BIN/ramsterd" --help-config >"$T/help" || { echo "ramsterd --help-config failed"; exit 1; }
awk '/^\[[a-z]+/ { sec = substr($1, 2); sub(/[]:,].*/, "", sec); if (sec == "uid") sec = "user"; next }
     /^  [a-z_]+ = / { print sec, $1 }' "$T/help" >"$T/keys"

t_help() {
	local s
	for s in cluster node export limits user; do
		grep -q "^$s " "$T/keys" || { echo "--help-config lists no key of [$s]"; return 1; }
	done
	echo "--help-config: $(wc -l <"$T/keys") keys"
}

# the keys docs/operations.md names: "| `key` |" rows of the three key tables,
# "key = " lines of the [limits] / [user] example
doc_keys() {
	awk '/^### `\[cluster\]`/ { sec = "cluster" } /^### `\[node NAME\]`/ { sec = "node" }
	     /^### `\[export NAME\]`/ { sec = "export" } /^### / && !/`\[(cluster|node NAME|export NAME)\]`/ { sec = "" }
	     sec != "" && /^\| `[a-z_]+` \|/ { k = $2; gsub(/`/, "", k); print sec, k }
	     /^\[limits\] / { ini = "limits"; next } /^\[user alice\]/ { ini = "user"; next }
	     /^```/ { ini = "" }
	     ini != "" && /^[a-z_]+ = / { print ini, $1 }' "$DOC" | sort -u
}

t_operations() {
	local missing extra
	doc_keys >"$T/doc"
	missing=$(sort -u "$T/keys" | comm -23 - "$T/doc")
	extra=$(sort -u "$T/keys" | comm -13 - "$T/doc")
	[ -z "$missing" ] || echo "docs/operations.md does not name:" $missing
	[ -z "$extra" ] || echo "docs/operations.md names keys the table lacks:" $extra
	[ -z "$missing$extra" ] && echo "docs/operations.md names the $(wc -l <"$T/doc") keys"
}

t_man() {
	local sec key bad=0
	[ -f "$MAN" ] || { echo "no $MAN (make all builds it)"; return 1; }
	MANWIDTH=200 man -l "$MAN" 2>/dev/null >"$T/man.txt"
	while read -r sec key; do
		grep -qE "^ +$key = " "$T/man.txt" || { echo "ramster.conf(5) lacks $key"; bad=1; }
	done <"$T/keys"
	return $bad
}

run help_config_lists_every_section t_help
run operations_md_names_every_key t_operations
if command -v man >/dev/null; then
	run man_page_names_every_key t_man
else
	echo "[  SKIPPED ] man_page_names_every_key: man missing"
fi

echo "$pass passed, $fail failed"
echo "[  PASSED  ] $pass test(s)."
if [ $fail -ne 0 ]; then
	echo "[  FAILED  ] $fail test(s), listed above"
	exit 1
fi
exit 0
