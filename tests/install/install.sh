#!/bin/sh
# The installed tree, as a site gets it: `cmake --install` into a scratch
# prefix (case prefix), or the .deb that `cpack -G DEB` builds, inspected and
# unpacked into a scratch root (case deb). Checks the layout (the shim in
# lib/ferry, never in lib/ where it would shadow NVIDIA's runtime), that the
# programs need nothing but libc, the systemd unit (systemd-analyze verify,
# where it exists) and the man pages against --help, then runs programs
# through the installed `ferry run`: vecadd on the installed ferry-server
# (CPU simulation), and migrate_iter moved onto the installed ferry-mhelper,
# which the installed shim must find by itself.
# usage: install.sh BUILD_DIR prefix|deb [CMAKE [CPACK]]
set -u
build=$(cd "$1" && pwd)
case_name=$2
cmake=${3:-cmake}
cpack=${4:-cpack}
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-install.XXXXXX")
e2e_name=install
. "$src/tests/e2e/lib.sh"
# nothing may point the installed tree at the build tree
unset FERRY_LIBDIR FERRY_MHELPER_BIN FERRY_MHELPER FERRY_MIGRATE_AT FERRY_LOCAL_BACKEND \
  FERRY_SIM_KERNELS
export FERRY_CONTROL_DIR="$work"
sanitized=
grep -q '^FERRY_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" && sanitized=1

# ---- the tree: $prefix as installed here, $sys_prefix and $sys_etc as the
# running system would see them (the unit and its settings name those) ----
case $case_name in
prefix)
  prefix=$work/p
  "$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
    fail "cmake --install exited $?"
  expect_not_in install.log "CMake Warning"
  sys_prefix=$prefix sys_etc=$prefix/etc unitdir=$prefix/lib/systemd/system root=
  ;;
deb)
  if ! command -v dpkg-deb >/dev/null; then
    echo "install deb: SKIP: no dpkg-deb here"
    exit 0
  fi
  (cd "$build" && "$cpack" -G DEB -B "$work/pkg") >"$work/cpack.log" 2>&1 || fail "cpack exited $?"
  expect_not_in cpack.log "CMake Warning"
  deb=$(ls "$work"/pkg/ferry_*.deb 2>/dev/null)
  [ -f "$deb" ] || fail "cpack made no ferry_*.deb"
  dpkg-deb -I "$deb" >"$work/info.log" || fail "dpkg-deb -I failed"
  dpkg-deb -c "$deb" >"$work/contents.log" || fail "dpkg-deb -c failed"
  dpkg-deb -e "$deb" "$work/control" || fail "dpkg-deb -e failed"
  expect_in info.log "^ Package: ferry$"
  # msgpack is linked in: libc is the only dependency (a sanitizer build's
  # files need its runtime too)
  deps=$(sed -n 's/^ Depends: //p' "$work/info.log")
  [ -n "$sanitized" ] || echo "$deps" | grep -Eq '^libc6( \([^)]*\))?$' ||
    fail "Depends: '$deps', expected libc6 alone"
  grep -qx /etc/ferry/ferry-server.conf "$work/control/conffiles" ||
    fail "/etc/ferry/ferry-server.conf is not a conffile"
  # the service is neither enabled nor started by the package
  for script in "$work"/control/*inst "$work"/control/*rm; do
    [ -f "$script" ] || continue
    ! grep -v '^ *#' "$script" |
      grep -Eq 'systemctl[^#]*(enable|start|restart)|deb-systemd-invoke|deb-systemd-helper' ||
      fail "$(basename "$script") enables or starts the service"
  done
  expect_in contents.log " ./lib/systemd/system/ferry-server.service$"
  expect_in contents.log " ./usr/lib/ferry/libcudart.so.13$"
  expect_in contents.log " ./usr/lib/ferry/libcuda.so.1$"
  expect_in contents.log " ./usr/lib/ferry/libnvidia-ml.so.1$"
  expect_in contents.log " ./usr/lib/ferry/libferry-client.so.0$"
  dpkg -x "$deb" "$work/root" || fail "dpkg -x failed"
  prefix=$work/root/usr
  sys_prefix=/usr sys_etc=/etc unitdir=$work/root/lib/systemd/system root=$work/root
  ;;
*) fail "unknown case" ;;
esac
real_prefix=$(cd "$prefix" && pwd -P)
etc=$root$sys_etc

# ---- layout ----
for f in ferry ferry-server ferry-mhelper; do
  [ -x "$prefix/bin/$f" ] || fail "no bin/$f"
done
[ "$(ls "$prefix/bin" | tr '\n' ' ')" = "ferry ferry-mhelper ferry-server " ] ||
  fail "bin/ holds more than the three programs: $(ls "$prefix/bin" | tr '\n' ' ')"
[ -f "$prefix/lib/ferry/libcudart.so.13" ] || fail "no lib/ferry/libcudart.so.13"
[ -f "$prefix/lib/ferry/libcuda.so.1" ] || fail "no lib/ferry/libcuda.so.1"
[ -f "$prefix/lib/ferry/libnvidia-ml.so.1" ] || fail "no lib/ferry/libnvidia-ml.so.1"
[ -f "$prefix/lib/ferry/libferry-client.so.0" ] || fail "no lib/ferry/libferry-client.so.0"
# in lib/ itself they would shadow NVIDIA's runtime and driver for every program
for f in "$prefix"/lib/libcudart* "$prefix"/lib64/libcudart* "$prefix"/lib/*/libcudart.so* \
  "$prefix"/lib/libcuda.so* "$prefix"/lib64/libcuda.so* "$prefix"/lib/*/libcuda.so* \
  "$prefix"/lib/libnvidia-ml.so* "$prefix"/lib64/libnvidia-ml.so* "$prefix"/lib/*/libnvidia-ml.so*; do
  case $f in */lib/ferry/*) continue ;; esac
  [ ! -e "$f" ] || fail "$f would shadow NVIDIA's runtime"
done
for f in README.md copyright docs/control.md docs/migration.md docs/multigpu.md docs/driver.md; do
  [ -f "$prefix/share/doc/ferry/$f" ] || fail "no share/doc/ferry/$f"
done
for f in man1/ferry.1.gz man8/ferry-server.8.gz man8/ferry-mhelper.8.gz; do
  [ -f "$prefix/share/man/$f" ] || fail "no share/man/$f"
done
[ -f "$prefix/lib/sysusers.d/ferry.conf" ] || fail "no lib/sysusers.d/ferry.conf"
grep -q '^u ferry ' "$prefix/lib/sysusers.d/ferry.conf" || fail "sysusers.d makes no user ferry"

# the files need libc and nothing else, and carry no RPATH
if [ -z "$sanitized" ]; then
  for f in bin/ferry bin/ferry-server bin/ferry-mhelper lib/ferry/libferry-client.so.0; do
    readelf -d "$prefix/$f" >"$work/elf.log" || fail "readelf $f failed"
    extra=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' "$work/elf.log" |
      grep -v -e '^libc\.so\.6$' -e '^ld-linux.*\.so\.[0-9]*$')
    [ -z "$extra" ] || fail "$f needs $extra"
    ! grep -Eq '\((RPATH|RUNPATH)\)' "$work/elf.log" || fail "$f has an RPATH"
  done
  # each front end needs the core alone, found next to it: never a library
  # named like NVIDIA's, so either loads beside NVIDIA's other one
  for front in libcudart.so.13 libcuda.so.1 libnvidia-ml.so.1; do
    readelf -d "$prefix/lib/ferry/$front" >"$work/elf.log" || fail "readelf $front failed"
    needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' "$work/elf.log" | tr '\n' ' ')
    [ "$needed" = "libferry-client.so.0 " ] || fail "$front needs '$needed', expected libferry-client.so.0 alone"
    expect_in elf.log "(RUNPATH).*\[\$ORIGIN\]"
    expect_in elf.log "(SONAME).*\[$front\]"
  done
fi

# ---- the unit and its settings ----
unit=$unitdir/ferry-server.service
conf=$etc/ferry/ferry-server.conf
[ -f "$unit" ] || fail "no $unit"
[ -f "$conf" ] || fail "no $conf"
for line in "ExecStart=$sys_prefix/bin/ferry-server \$FERRY_SERVER_ARGS" \
  "EnvironmentFile=-$sys_etc/ferry/ferry-server.conf" "User=ferry" "NoNewPrivileges=yes" \
  "ProtectSystem=strict" "PrivateTmp=yes" "ProtectHome=yes"; do
  grep -qxF "$line" "$unit" || fail "the unit lacks '$line'"
done
! grep -Eq '^(PrivateDevices|DevicePolicy|ProtectClock|MemoryDenyWriteExecute)=' "$unit" ||
  fail "the unit keeps CUDA from its devices"
default_args="--listen tcp://0.0.0.0:7420 --token-file $sys_etc/ferry/token"
grep -qxF "FERRY_SERVER_ARGS=\"$default_args\"" "$conf" ||
  fail "the settings lack the default FERRY_SERVER_ARGS"
if command -v systemd-analyze >/dev/null; then
  # Documentation=man:ferry-server(8) is looked up too: in the installed
  # pages. The package's unit names /usr and /etc: a copy names the unpacked
  # root instead (--root would want a whole system there)
  check=$unit
  if [ -n "$root" ]; then
    mkdir -p "$work/unit"
    check=$work/unit/ferry-server.service
    sed "s#=/usr/bin/#=$root/usr/bin/#; s#=-/etc/#=-$root/etc/#" "$unit" >"$check"
  fi
  (cd "$work" && MANPATH="$prefix/share/man" systemd-analyze verify "$check") \
    >"$work/verify.log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || fail "systemd-analyze verify exited $rc"
  [ ! -s "$work/verify.log" ] || fail "systemd-analyze verify: $(cat "$work/verify.log")"
else
  echo "install $case_name: systemd-analyze not found: the unit is not verified"
fi

# ---- man pages and README against --help ----
manpage() { gzip -dc "$prefix/share/man/$1"; }
# the options a man page defines: the tag lines after .TP, roff removed
defined() { awk '/^\.TP/ { getline; print }' | sed 's/\\-/-/g; s/\\f[BIRP]//g; s/^\.[A-Z]* //'; }
for p in ferry:man1/ferry.1.gz ferry-server:man8/ferry-server.8.gz \
  ferry-mhelper:man8/ferry-mhelper.8.gz; do
  prog=${p%%:*} page=${p#*:}
  "$prefix/bin/$prog" --help >"$work/help.log" 2>&1 || fail "$prog --help exited $?"
  manpage "$page" | defined >"$work/man.log"
  [ -s "$work/man.log" ] || fail "the man page of $prog defines no option"
  for opt in $(grep -o -- '--[a-z][a-z-]*' "$work/help.log" | sort -u); do
    grep -q -- "^$opt\\b" "$work/man.log" || fail "$prog --help has $opt, its man page does not"
  done
  for opt in $(grep -o -- '^--[a-z][a-z-]*' "$work/man.log" | sort -u); do
    [ "$opt" = --help ] || grep -q -- "$opt\\b" "$work/help.log" ||
      fail "the man page of $prog defines $opt, its --help does not have it"
  done
  [ "$prog" = ferry-mhelper ] && continue
  # the README documents every option of the programs people run (those
  # --help calls "for tests" aside)
  for opt in $(grep -v 'for tests' "$work/help.log" | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    grep -q -- "$opt\\b" "$prefix/share/doc/ferry/README.md" || fail "README.md lacks $prog's $opt"
  done
done

# ---- programs through the installed tree ----
bin=$prefix/bin # lib.sh's run/start and start_sim_server use the installed programs
start_sim_server
export FERRY_DEVICES="tcp://127.0.0.1:$port/0"

# ok LABEL RC: the program exited 0 and said PASSED
ok() {
  [ "$2" = 0 ] || fail "$1 exited $2"
  expect_in "$1.out" "PASSED"
}

# vecadd, with the installed shim (the dynamic loader names what it loads)
rc=$(export LD_DEBUG=libs; run vecadd vecadd)
ok vecadd "$rc"
expect_in vecadd.err "calling init: $real_prefix/lib/ferry/libcudart.so.13"
expect_not_in vecadd.err "calling init: $build/lib/libcudart.so.13"

# a program with NVIDIA's static runtime, through the installed libcuda.so.1
rc=$(export LD_DEBUG=libs; run vecadd_static vecadd_static)
ok vecadd_static "$rc"
expect_in vecadd_static.err "calling init: $real_prefix/lib/ferry/libcuda.so.1"
expect_not_in vecadd_static.err "calling init: $build/lib/libcuda.so.1"

# through a link to the installed ferry, as from a directory on PATH
mkdir -p "$work/elsewhere"
ln -s "$prefix/bin/ferry" "$work/elsewhere/ferry"
app timeout 120 "$work/elsewhere/ferry" run -- "$apps/vecadd" >"$work/linked.out" 2>"$work/linked.err"
ok linked $?

# a ferry with no shim near it says where it looked
mkdir -p "$work/lonely/bin"
cp "$prefix/bin/ferry" "$work/lonely/bin/ferry"
"$work/lonely/bin/ferry" run -- "$apps/vecadd" >"$work/lonely.out" 2>"$work/lonely.err"
[ $? = 2 ] || fail "ferry run without its library did not exit 2"
expect_in lonely.err "libcudart.so.13 is in neither .*/lonely/bin/../lib/ferry nor .*/lonely/bin/../lib"

# migrate_iter moved onto a ferry-mhelper: the installed shim finds the
# installed helper (lib/ferry/../../bin) with no FERRY_MHELPER_BIN
export FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS="$apps/app_twins.so" FERRY_MHELPER=always
FERRY_MIGRATE_AT=0:0:launch=50 start mig migrate_iter $LIVE "$work/stop"
wait_for "the migration" grep -q "now runs on local GPU 0" "$work/mig.err"
expect_in mig.err "now runs on local GPU 0 in ferry-mhelper pid"
helper=$(sed -n 's/.*in ferry-mhelper pid \([0-9]*\).*/\1/p' "$work/mig.err" | head -n 1)
exe=$(readlink "/proc/$helper/exe")
[ "$exe" = "$real_prefix/bin/ferry-mhelper" ] || fail "the helper runs $exe, not the installed one"
finish
passed mig "$rc"
expect_not_in mig.err "migration of device .* failed"

echo "install $case_name: ok"
