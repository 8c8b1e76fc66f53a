#!/usr/bin/env bash
# Install the Debian packages ramster needs to build, test and demo, if any
# is missing. Needs root (apt-get) only when something must be installed.
# Usage: tools/deps.sh [--check]   (--check: list what is missing, exit 1 if any)
set -euo pipefail

pkgs=(
	build-essential pkg-config clang
	liblzo2-dev libev-dev libprotobuf-c-dev protobuf-c-compiler
	libsodium-dev libinih-dev libcmocka-dev
	libibverbs-dev librdmacm-dev
	iproute2 procps psmisc memcached
	libnbd-bin python3-libnbd nbdkit fio qemu-utils socat
	passwd util-linux
)

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
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
