#!/bin/sh
# Builds drvlog's libcuda.so.1 into OUT_DIR (x86-64). usage: build.sh OUT_DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$1
mkdir -p "$out"
sh "$here/gen.sh" "$here/../../shim/driver/cu_symbols.txt" "$out"
cc -O1 -g -fPIC -shared -Wall -Wno-unused-function -I/usr/local/cuda/include -I"$out" \
  -o "$out/libcuda.so.1" -Wl,-soname,libcuda.so.1 "$here/drvlog.c" "$out/forward.S" -ldl -lpthread
