#!/bin/sh
# Installs what ferry builds with on Debian 12 / Ubuntu (as root; no-op when present).
# The CUDA toolkit itself (nvcc, headers) must already be in /usr/local/cuda.
set -e
# clang and its libFuzzer runtime: the second compiler CI builds with, and
# the fuzz harnesses (tests/fuzz); dpkg-dev: the .deb test (cpack); nettle-dev: MD2
# and HMAC for the CUDA runtime's integrity check (shim/driver/export.c);
# libjansson-dev: the status JSON of the control socket (shim/migrate/control.c, cli/ferry.c);
# curl: the e2e test of ferry-server --metrics scrapes it
pkgs="curl cmake make gcc g++ pkg-config libmsgpack-dev libcmocka-dev procps clang libclang-rt-14-dev dpkg-dev nettle-dev libjansson-dev"
missing=""
for p in $pkgs; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  as_root=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      as_root="sudo"
    else
      echo "ferry: missing packages:$missing; install them as root (apt-get install -y$missing)" >&2
      exit 1
    fi
  fi
  echo "ferry: installing$missing"
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
if [ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
  echo "ferry: the CUDA 13 toolkit is needed at ${CUDA_HOME:-/usr/local/cuda} (nvcc, headers)" >&2
  exit 1
fi
