#!/usr/bin/env bash
# Install the Debian packages ramster needs to build, test and demo, if any
# is missing. Needs root (apt-get) only when something must be installed.
# Usage: tools/deps.sh [--check]   (--check: list what is missing, exit 1 if any)
# libsystemd-dev: sd_notify and the journal; scdoc builds the man pages; man-db
# (man --warnings) and systemd (systemd-analyze verify) are for the tests of
# them: installing the systemd package in a container only adds files, it
# starts nothing (its postinst does not run systemd when it is not PID 1).
# libgnutls28-dev: NBD over TLS (node/nbd/nbd_tls.c); gnutls-bin (psktool,
# certtool) makes the keys test_nbd_tls.sh uses.
set -euo pipefail

pkgs=(
	build-essential pkg-config clang
	liblzo2-dev liblz4-dev libev-dev libprotobuf-c-dev protobuf-c-compiler
	libsodium-dev libinih-dev libcmocka-dev libgnutls28-dev gnutls-bin
	libibverbs-dev librdmacm-dev
	libmicrohttpd-dev libjansson-dev python3-prometheus-client jq curl tmux
	iproute2 procps psmisc memcached python3
	libnbd-bin python3-libnbd nbdkit fio qemu-utils socat
	libsystemd-dev scdoc man-db systemd
	python3 coreutils util-linux passwd
	libfaketime libisal-dev
)

# one dpkg query for all (make check and make demo run --check every time)
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${pkgs[@]}" 2>/dev/null |
	awk '$2 == "install" && $3 == "ok" && $4 == "installed" { print $1 }' || true)
missing=()
for p in "${pkgs[@]}"; do
	grep -qx -- "$p" <<<"$installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
if [ "${1:-}" = "--check" ]; then
	echo "missing: ${missing[*]}"
	exit 1
fi
echo "deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
