#!/usr/bin/env bash
# Install the Debian packages the VM tests (tests/vm/, `make check-vm`) need,
# if any is missing: qemu to boot Debian's kernel under TCG, busybox-static
# for the initramfs, and the RDMA and NBD user tools the guest runs (it runs
# the host's own binaries, over 9p). Also makes sure apt's lists name the
# kernel package that tests/vm/build-vm.sh downloads with `apt-get download`.
# Needs root (apt-get) only when something must be installed or updated.
# Usage: tools/deps-vm.sh [--check]   (--check: list what is missing, exit 1 if any)
set -euo pipefail

pkgs=(
	qemu-system-x86 busybox-static
	rdma-core ibverbs-utils rdmacm-utils ibverbs-providers
	nbd-client iproute2 coreutils gzip xz-utils zstd
)

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
# the lists must know linux-image-amd64 (a fresh machine has empty lists)
lists_ok=1
apt-cache depends linux-image-amd64 2>/dev/null | grep 'Depends: linux-image-' >/dev/null || lists_ok=0

if [ ${#missing[@]} -eq 0 ] && [ $lists_ok = 1 ]; then
	exit 0
fi
if [ "${1:-}" = "--check" ]; then
	[ ${#missing[@]} -eq 0 ] || echo "missing: ${missing[*]}"
	[ $lists_ok = 1 ] || echo "apt lists do not name linux-image-amd64 (apt-get update)"
	exit 1
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
echo "deps-vm: apt-get update" >&2
$SUDO apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps-vm: installing ${missing[*]}" >&2
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
