#!/bin/sh
# Runs every fuzz harness for SECONDS (default 60) against a copy of its
# committed corpus, prints executions and coverage, and exits non-zero on
# any finding (crash, sanitizer report, leak, timeout, out of memory).
# Builds nothing: build first with
#   CC=clang cmake -S . -B build-fuzz -DFERRY_FUZZ=ON && cmake --build build-fuzz
# usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]
#   FERRY_FUZZ_ONLY="decode frames"  runs only those harnesses
#   FERRY_FUZZ_ARGS="-jobs=2 ..."     more libFuzzer flags for every harness
#   FERRY_FUZZ_KEEP=1                 keeps the work directory (grown corpora, logs)
set -u
build=${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]}
secs=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
harnesses=${FERRY_FUZZ_ONLY:-"frames decode session graph"}
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-fuzz.XXXXXX") || exit 2

for h in $harnesses; do
  if [ ! -x "$build/bin/fuzz_$h" ]; then
    echo "run.sh: $build/bin/fuzz_$h is missing (CC=clang cmake -DFERRY_FUZZ=ON, then build)" >&2
    exit 2
  fi
done

findings=0
for h in $harnesses; do
  mkdir -p "$work/$h/corpus" "$work/$h/found"
  cp "$here/corpus/$h/"* "$work/$h/corpus/"
  # lengths: a stream of several frames, one with bulk past the reader's
  # 32 KiB bypass; a single body; a session of a few dozen calls
  case $h in
  frames) extra="-max_len=131072" ;;
  decode) extra="-max_len=4096" ;;
  graph) extra="-max_len=4096" ;;
  session) extra="-max_len=16384 -close_fd_mask=2" ;; # the session's log lines
  esac
  # no input here is over 128 KiB, so one allocation over 1 GiB is a
  # finding: memory sized by a count the peer sent, before its bytes came
  start=$(date +%s)
  # shellcheck disable=SC2086 # word splitting of the flag lists is meant
  "$build/bin/fuzz_$h" -max_total_time="$secs" -print_final_stats=1 -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 -artifact_prefix="$work/$h/found/" $extra ${FERRY_FUZZ_ARGS:-} \
    "$work/$h/corpus" >"$work/$h/log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$h/log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]* corp: [^ ]*' "$work/$h/log" | tail -n 1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$work/$h/log" | tail -n 1)
  echo "fuzz_$h: ${execs:-?} executions in ${took} s; ${cov:-no coverage line}; peak rss ${rss:-?} MB"
  if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$work/$h/found")" ]; then
    findings=1
    echo "fuzz_$h: FINDING (exit status $rc); log and reproducers kept in $work/$h:" >&2
    grep -E 'ERROR|SUMMARY|fuzz_[a-z]+:|runtime error|Test unit written' "$work/$h/log" | head -n 20 >&2
  fi
done

if [ "$findings" -ne 0 ] || [ -n "${FERRY_FUZZ_KEEP:-}" ]; then
  echo "run.sh: work directory kept: $work"
else
  rm -rf "$work"
fi
exit "$findings"
