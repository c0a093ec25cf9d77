#!/bin/bash
# Runs ferry's InfiniBand-verbs tests for real, on a machine with no RDMA
# hardware: boots Debian 12's stock kernel, which ships rdma_rxe (soft-RoCE),
# in qemu (TCG, no network card) from an initramfs holding a minimal bookworm
# userspace plus the programs of BUILD_DIR, and reads the verdicts back from
# the serial console. Downloads and the root filesystem are cached, so only
# the first run is slow; the payload is rebuilt every run.
# usage: tests/ib/run.sh BUILD_DIR
#        tests/ib/run.sh --deps    (only install the host packages, among them
#                                   the rdma-core headers the ib:// build needs)
# env:   FERRY_IBVM_CACHE (cache dir), FERRY_IBVM_MIRROR (Debian mirror),
#        FERRY_IBVM_TIMEOUT (seconds for the whole VM run, default 900)
#        FERRY_IBVM_BENCH_ROUNDS (benchmark rounds in the VM, default 1; 0: none)
# Prints every PASS/FAIL/SKIP line, writes BENCH lines to BUILD_DIR/ib-bench.txt,
# ends with "N passed, N failed"; exits 0 only if all passed and at least one ran.
set -euo pipefail

[ $# = 1 ] && { [ "$1" = --deps ] || [ -d "$1" ]; } || { echo "usage: $0 BUILD_DIR | --deps" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
cache=${FERRY_IBVM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ferry-ibvm}
vm_timeout=${FERRY_IBVM_TIMEOUT:-900}
t0=$(date +%s)
stamp() { echo "ib-vm [+$(( $(date +%s) - t0 ))s] $*"; }

as_root=
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "ib-vm: needs root (apt-get, debootstrap, chroot) or sudo" >&2; exit 1; }
  as_root=sudo
fi
apt_get() {
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"
}

# ---- host tools (no-op when present)
missing=
for p in qemu-system-x86 debootstrap cpio libibverbs-dev librdmacm-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  stamp "installing$missing"
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends $missing >/dev/null
fi

[ "$1" = --deps ] && exit 0
build=$(cd "$1" && pwd)

if grep -q '^FERRY_HAVE_IB:INTERNAL=ON' "$build/CMakeCache.txt" 2>/dev/null &&
  [ ! -e "$build/bin/test_transport_ib" ]; then
  echo "ib-vm: $build has the ib:// transport but no bin/test_transport_ib (build it first)" >&2
  exit 1
fi

mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9 # one run at a time may touch the cache

# ---- kernel: the plain amd64 flavour (the -cloud one has no rdma_rxe)
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
if [ -z "$kpkg" ]; then
  apt_get update -qq
  kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/{print $2; exit}')
fi
[ -n "$kpkg" ] || { echo "ib-vm: cannot find Debian's linux-image-amd64 package" >&2; exit 1; }
kdir=$cache/$kpkg
if [ ! -f "$kdir/.packed-ok" ]; then
  stamp "downloading $kpkg"
  rm -rf "$cache"/linux-image-* && mkdir -p "$kdir" # older kernels are not needed again
  (cd "$kdir" && apt-get download "$kpkg" >/dev/null 2>&1) ||
    { echo "ib-vm: apt-get download $kpkg failed" >&2; exit 1; }
  # kept packed (its modules unpack to 400 MB); the kernel image beside it
  dpkg-deb --fsys-tarfile "$kdir"/*.deb | tar -x -C "$kdir" --wildcards './boot/vmlinuz-*'
  touch "$kdir/.packed-ok"
fi
vmlinuz=$(ls "$kdir"/boot/vmlinuz-* | head -n 1)
kver=${vmlinuz##*/vmlinuz-}

# ---- root filesystem: minimal bookworm with rdma-core userspace
# libstdc++6 for the nvcc-built programs, libcmocka0 for the unit tests.
pkgs=ibverbs-providers,libibverbs1,librdmacm1,ibverbs-utils,perftest,rdmacm-utils,iproute2,kmod,libstdc++6,libcmocka0,procps
mirror=${FERRY_IBVM_MIRROR:-$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)}
mirror=${mirror:-http://deb.debian.org/debian}
rootfs=$cache/rootfs
if [ "$(cat "$rootfs.ok" 2>/dev/null)" != "$pkgs" ]; then
  stamp "debootstrap bookworm ($mirror); a few minutes the first time"
  rm -f "$rootfs.ok" "$cache/base.cpio" "$cache/base.ok"
  $as_root rm -rf "$rootfs"
  if ! timeout 1500 $as_root debootstrap --variant=minbase --include="$pkgs" \
    bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1; then
    tail -n 20 "$cache/debootstrap.log" >&2
    echo "ib-vm: debootstrap failed (log: $cache/debootstrap.log)" >&2
    exit 1
  fi
  # the VM never runs apt and the whole tree goes into RAM: drop what it never reads
  $as_root rm -rf "$rootfs"/usr/share/{doc,man,locale,info} "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/var/cache/apt/*
  echo "$pkgs" >"$rootfs.ok"
fi

# ---- base initramfs: rootfs + only the modules rxe needs, per kernel
# rxe computes its ICRC with the "crc32" hash, which it loads on demand:
# without crc32_generic `rdma link add` fails with ENOENT.
mods="rdma_rxe rdma_ucm ib_uverbs dummy crc32_generic crc32_pclmul"
if [ "$(cat "$cache/base.ok" 2>/dev/null)" != "$kpkg $mods" ]; then
  stamp "modules of $kver"
  $as_root rm -rf "$rootfs/lib/modules" && $as_root mkdir -p "$rootfs/lib/modules"
  dpkg-deb --fsys-tarfile "$kdir"/*.deb | $as_root tar -x -C "$rootfs" "./lib/modules/$kver"
  $as_root chroot "$rootfs" depmod "$kver"
  keep=$($as_root chroot "$rootfs" modprobe -S "$kver" -a --show-depends $mods |
    awk '$1 == "insmod" {print $2}' | sort -u)
  slim=$cache/modules.tmp
  $as_root rm -rf "$slim"
  for m in $keep; do $as_root install -D -m644 "$rootfs$m" "$slim$m"; done
  for f in modules.order modules.builtin modules.builtin.modinfo; do
    $as_root cp "$rootfs/lib/modules/$kver/$f" "$slim/lib/modules/$kver/"
  done
  $as_root rm -rf "$rootfs/lib/modules/$kver"
  $as_root mv "$slim/lib/modules/$kver" "$rootfs/lib/modules/"
  $as_root rm -rf "$slim"
  $as_root chroot "$rootfs" depmod "$kver"
  stamp "packing the root filesystem"
  (cd "$rootfs" && $as_root find . -xdev -print0 | $as_root cpio --null -o -H newc --quiet) >"$cache/base.cpio"
  echo "$kpkg $mods" >"$cache/base.ok"
fi

# ---- payload: ferry's programs from BUILD_DIR, in the build tree's layout
# (ferry run finds the shim at ../lib from its own binary)
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-ibvm.XXXXXX")
trap 'rm -rf "$work"' EXIT
ov=$work/overlay
p=$ov/payload
mkdir -p "$p/bin" "$p/lib" "$p/tests/apps" "$p/bench"
for f in bin/ferry-server bin/ferry lib/libcudart.so.13 lib/libcuda.so.1 lib/libnvidia-ml.so.1 \
  lib/libferry-client.so.0 \
  tests/apps/vecadd tests/apps/api_tour \
  tests/apps/app_twins.so bench/bench_calls; do
  [ -e "$build/$f" ] || { echo "ib-vm: $build/$f is missing (build first)" >&2; exit 1; }
  cp -L "$build/$f" "$p/$f"
done
[ -e "$build/bin/test_transport_ib" ] && cp "$build/bin/test_transport_ib" "$p/bin/"
install -m755 "$here/vm-tests.sh" "$p/tests.sh"
install -m755 "$here/vm-init.sh" "$ov/init"
(cd "$ov" && find . -print0 | cpio --null -o -H newc --quiet -R 0:0) >"$work/payload.cpio"
# the kernel unpacks concatenated archives in order
cat "$cache/base.cpio" "$work/payload.cpio" >"$work/initrd.cpio"
exec 9>&- # the cache is no longer touched

# ---- boot; the VM powers itself off when done
stamp "booting $kver under qemu (TCG, no network card)"
log=$work/vm.log
set +e
timeout "$vm_timeout" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m 2048 -smp 2 \
  -nographic -no-reboot -nic none -kernel "$vmlinuz" -initrd "$work/initrd.cpio" \
  -append "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=3 ferry.bench_rounds=${FERRY_IBVM_BENCH_ROUNDS:-1}" </dev/null 2>&1 |
  tee "$work/console" | sed -u -n 's/\r$//; s/^[^#]*### //p' # unbuffered: progress shows live
qrc=${PIPESTATUS[0]}
set -e
tr -d '\r' <"$work/console" >"$log"
stamp "qemu exited ($qrc)"
cp "$log" "$build/ib-vm.log"

# ---- verdict
sed -n 's/^### BENCH //p' "$log" >"$build/ib-bench.txt"
passed=$(grep -c '^### PASS ' "$log" || true)
failed=$(grep -c '^### FAIL ' "$log" || true)
if ! grep -q '^### DONE' "$log"; then
  [ "$qrc" = 124 ] && why="timed out after ${vm_timeout}s" || why="qemu exited $qrc"
  echo "FAIL ib-vm: the VM did not finish its tests ($why); last console lines:"
  tail -n 30 "$log" | sed 's/^/  | /'
  failed=$((failed + 1))
fi
echo "(console log: $build/ib-vm.log, benchmarks: $build/ib-bench.txt)"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
