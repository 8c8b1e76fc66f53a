#!/usr/bin/env bash
# check-layout.sh - the rules of node/'s folders (docs/design.md, "Layers"),
# run by the build before libnode.a is made (issue 21):
#   - each folder node/F/ has at most one internal header, node/F/F_int.h;
#   - nothing outside node/F/ includes it, but the unit tests and fuzz targets,
#     which test the folder's insides (tests/unit/, tests/fuzz/);
#   - no .c file sits in node/ but the daemon's own (the list below);
#   - an internal header of those, node/N_int.h (config_int.h: the parse's
#     state), is included by node/N*.c only, and the unit tests and fuzz targets.
# Prints each breach and exits 1; silent when all hold.
set -u
cd "$(dirname "$0")/.."
bad=0
own="main.c config.c config_keys.c config_check.c config_help.c reload.c log.c notify.c spin.c handoff.c store.c"
for d in node/*/; do
	f=$(basename "$d")
	ints=$(ls "$d"*_int.h 2>/dev/null)
	n=$(printf '%s\n' $ints | grep -c . || true)
	if [ "$n" -gt 1 ]; then
		echo "check-layout: $d has $n internal headers (one at most): $ints"
		bad=1
	fi
	for h in $ints; do
		case "$h" in "node/$f/${f}_int.h") ;; *)
			echo "check-layout: $h: an internal header is named node/$f/${f}_int.h"
			bad=1 ;;
		esac
		users=$(grep -rlE "#include \"$h\"" --include='*.c' --include='*.h' \
			node lib tmem transport proto common tools tests 2>/dev/null |
			grep -vE "^(node/$f/|tests/unit/|tests/fuzz/)" || true)
		for u in $users; do
			echo "check-layout: $u includes $h, internal to node/$f/"
			bad=1
		done
	done
done
for h in node/*_int.h; do
	[ -e "$h" ] || continue
	n=$(basename "$h" _int.h)
	users=$(grep -rlE "#include \"$h\"" --include='*.c' --include='*.h' \
		node lib tmem transport proto common tools tests 2>/dev/null |
		grep -vE "^(node/$n[^/]*\.c|tests/unit/.*|tests/fuzz/.*)$" || true)
	for u in $users; do
		echo "check-layout: $u includes $h, internal to node/$n*.c"
		bad=1
	done
done
for c in node/*.c; do
	case " $own " in *" $(basename "$c") "*) ;; *)
		echo "check-layout: $c: node/ holds only the daemon's own files ($own); put it in its layer's folder"
		bad=1 ;;
	esac
done
exit $bad
