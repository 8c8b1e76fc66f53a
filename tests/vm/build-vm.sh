#!/usr/bin/env bash
# Build (or refresh) the test VM: Debian's own kernel and a busybox initramfs.
#
# Everything lands in $VM_DIR (default build/vm/ under the project root):
#   deb/      the linux-image .deb as downloaded (cached: downloaded once)
#   kernel/   the .deb extracted with dpkg -x
#   vmlinuz   symlink to the kernel image
#   initrd.gz busybox-static + /init (tests/vm/init) + the modules the tests
#             need and their dependencies, with /modules/order listing them
#             dependencies first (computed from each .ko's depends= string)
# Rebuilds only what is stale. Needs qemu's packages only at run time; needs
# busybox-static and apt (for the first download) here.
# Usage: tests/vm/build-vm.sh [--force]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VM_DIR=${VM_DIR:-$root/build/vm}
BUSYBOX=${BUSYBOX:-/bin/busybox}

# Modules the guest loads, by name; their dependencies are added. Those that
# the kernel does not ship (or builds in) are skipped. crc32_generic is not a
# depends= of rdma_rxe but rxe needs the "crc32" crypto algorithm at link
# creation ("rdma_rxe: failed to add" otherwise). VM_MODULES adds more.
want_modules="virtio_pci 9pnet_virtio 9p veth crc32_generic rdma_rxe ib_uverbs
rdma_ucm nbd zram ${VM_MODULES:-}"

force=0
[ "${1:-}" = "--force" ] && force=1

log() { echo "build-vm: $*" >&2; }
die() { echo "build-vm: error: $*" >&2; exit 1; }

[ -x "$BUSYBOX" ] || die "$BUSYBOX missing (install busybox-static: tools/deps-vm.sh)"
"$BUSYBOX" --list | grep -x cpio >/dev/null || die "$BUSYBOX has no cpio applet"

mkdir -p "$VM_DIR/deb"
# one builder at a time: several test runs may start together
exec 9> "$VM_DIR/.lock"
flock 9

# ---- the kernel package ------------------------------------------------------
# linux-image-amd64 is the metapackage; it depends on the versioned image.
pkg=""
if command -v apt-cache >/dev/null; then
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -1)
fi
deb=""
if [ -n "$pkg" ]; then
	deb=$(ls "$VM_DIR"/deb/"${pkg}"_*.deb 2>/dev/null | head -1 || true)
	if [ -z "$deb" ]; then
		log "downloading $pkg"
		# apt's _apt user must be able to write the target directory, or
		# apt warns and downloads as root; a private dir avoids the noise.
		tmp=$(mktemp -d "$VM_DIR/deb/dl.XXXXXX")
		chmod 777 "$tmp"
		(cd "$tmp" && apt-get download -q "$pkg" >/dev/null) ||
			{ rm -rf "$tmp"; die "apt-get download $pkg failed (apt-get update?)"; }
		mv "$tmp"/*.deb "$VM_DIR/deb/"
		rm -rf "$tmp"
		deb=$(ls "$VM_DIR"/deb/"${pkg}"_*.deb | head -1)
	fi
else
	# no apt lists (offline, or before apt-get update): use what is cached
	deb=$(ls -t "$VM_DIR"/deb/linux-image-*.deb 2>/dev/null | head -1 || true)
	[ -n "$deb" ] || die "cannot name the kernel package: run apt-get update (tools/deps-vm.sh)"
fi

kdir=$VM_DIR/kernel
stamp=$kdir/.from
if [ $force = 1 ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$(basename "$deb")" ]; then
	log "extracting $(basename "$deb")"
	rm -rf "$kdir"
	mkdir -p "$kdir"
	dpkg -x "$deb" "$kdir"
	basename "$deb" > "$stamp"
	force=1		# a new kernel means a new initramfs
fi
kimg=$(ls "$kdir"/boot/vmlinuz-* | head -1)
kver=${kimg##*/vmlinuz-}
moddir=$kdir/lib/modules/$kver
ln -sfn "${kimg#"$VM_DIR"/}" "$VM_DIR/vmlinuz"
echo "$kver" > "$VM_DIR/kernel-version"

# ---- the initramfs -----------------------------------------------------------
initrd=$VM_DIR/initrd.gz
if [ $force = 0 ] && [ -f "$initrd" ] && [ "$initrd" -nt "$here/init" ] &&
	[ "$initrd" -nt "$here/build-vm.sh" ] && [ "$initrd" -nt "$BUSYBOX" ]; then
	exit 0
fi

# name -> path of its .ko (names use '_'; file names may use '-')
declare -A ko_path
while IFS= read -r f; do
	n=${f##*/}
	n=${n%%.ko*}
	ko_path[${n//-/_}]=$f
done < <(find "$moddir/kernel" -name '*.ko' -o -name '*.ko.xz' -o -name '*.ko.zst' -o -name '*.ko.gz')

# the .modinfo strings of a module, one a line, whatever its compression
ko_info() {
	case $1 in
	*.xz) xz -dc "$1" ;;
	*.zst) zstd -qdc "$1" ;;
	*.gz) gzip -dc "$1" ;;
	*) cat "$1" ;;
	esac | tr '\0' '\n' | grep -a -E '^(depends|softdep)=' || true
}

# depth-first: a module's dependencies (and softdep pre:) go before it
declare -A state	# "" unseen, 1 visiting, 2 done
order=()
visit() {
	local m=${1//-/_} d info
	case ${state[$m]:-} in
	2) return ;;
	1) die "module dependency cycle at $m" ;;
	esac
	if [ -z "${ko_path[$m]:-}" ]; then
		if grep -q "/${m//_/[_-]}\.ko\$" "$moddir/modules.builtin" 2>/dev/null; then
			log "$m is built in"
		else
			log "$m not shipped by $kver, skipped"
		fi
		state[$m]=2
		return
	fi
	state[$m]=1
	info=$(ko_info "${ko_path[$m]}")
	for d in $(echo "$info" | sed -n 's/^depends=//p' | tr ',' ' '); do
		visit "$d"
	done
	# softdep=pre: a b post: c  -> load a and b first
	for d in $(echo "$info" | sed -n 's/^softdep=//p' |
		sed -n 's/.*pre: *\([^:]*\)\( post:.*\)\?$/\1/p'); do
		visit "$d"
	done
	state[$m]=2
	order+=("$m")
}
for m in $want_modules; do
	visit "$m"
done

log "initramfs for $kver: ${order[*]}"
stage=$(mktemp -d "$VM_DIR/initrd.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,dev,proc,sys,io,newroot,modules}
cp "$BUSYBOX" "$stage/bin/busybox"
ln -s busybox "$stage/bin/sh"
cp "$here/init" "$stage/init"
chmod 755 "$stage/init"
for m in "${order[@]}"; do
	f=${ko_path[$m]}
	case $f in	# busybox insmod takes plain .ko files: decompress here
	*.xz) xz -dc "$f" > "$stage/modules/$m.ko" ;;
	*.zst) zstd -qdc "$f" > "$stage/modules/$m.ko" ;;
	*.gz) gzip -dc "$f" > "$stage/modules/$m.ko" ;;
	*) cp "$f" "$stage/modules/$m.ko" ;;
	esac
	echo "$m" >> "$stage/modules/order"
done
echo "$kver" > "$stage/modules/version"
(cd "$stage" && find . | sort | "$BUSYBOX" cpio -o -H newc 2>/dev/null) | gzip -1 > "$initrd.tmp"
mv "$initrd.tmp" "$initrd"
log "built $initrd ($(du -k "$initrd" | cut -f1) KB)"
