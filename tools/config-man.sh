#!/usr/bin/env bash
# config-man.sh RAMSTERD TEMPLATE - print TEMPLATE (man/ramster.conf.5.scd)
# with each line "; @config-keys SECTION" replaced by that section's key list
# from `RAMSTERD --help-config=scd`: the page's keys, defaults, bounds and
# reload rules are the daemon's own table (node/config_keys.c), never a copy
# that can drift. Fails when a marker names no section the daemon printed, or
# a section the daemon printed has no marker. Run by the Makefile's rule for
# ramster.conf.5.
set -eu
bin=$1
template=$2
keys=$("$bin" --help-config=scd)
awk -v keys="$keys" '
BEGIN {
	n = split(keys, l, "\n")
	for (i = 1; i <= n; i++) {
		if (l[i] ~ /^; \[[a-z]+\]$/) {
			sec = substr(l[i], 4, length(l[i]) - 4)
			printed[sec] = 1
			continue
		}
		chunk[sec] = chunk[sec] l[i] "\n"
	}
}
/^; @config-keys / {
	sec = $3
	if (!(sec in printed)) {
		print "config-man.sh: " FILENAME ":" FNR ": no section \"" sec "\" in --help-config=scd" > "/dev/stderr"
		bad = 1
		next
	}
	used[sec] = 1
	printf "%s", chunk[sec]
	next
}
{ print }
END {
	for (sec in printed)
		if (!(sec in used)) {
			print "config-man.sh: " FILENAME ": no \"; @config-keys " sec "\" line" > "/dev/stderr"
			bad = 1
		}
	exit bad
}' "$template"
