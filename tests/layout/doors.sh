#!/bin/sh
# The client's rooms and the doors between them (docs/architecture.md):
#   NVML front end -> driver front end -> runtime front end -> migration -> core
# A room may include and call its own files and the rooms after it, never
# those before it; upward calls go through the core's hooks (hooks.h). The
# folders below the client (recorder, protocol, transport, replay, executor,
# sim, common) never include the client's, and the core never includes
# replay/, which is migration's. Checked on the source (#include lines) and
# on the objects (every symbol a room's objects use, against the room whose
# objects define it).
# usage: doors.sh SOURCE_DIR ROOM=OBJ[:OBJ...] ...   (ROOM: core migrate runtime driver nvml)
set -u
src=$1
shift
bad=0
say() { echo "doors: $*"; bad=1; }
rank() {
  case $1 in
  core) echo 1 ;; migrate) echo 2 ;; runtime) echo 3 ;; driver) echo 4 ;; nvml) echo 5 ;; *) echo 0 ;;
  esac
}

# ---- includes ----
for room in core migrate runtime driver nvml; do
  r=$(rank "$room")
  for f in "$src"/shim/"$room"/*.[ch]; do
    for inc in $(sed -n 's/^#include "\(shim\/[a-z]*\)\/.*/\1/p' "$f" | sort -u); do
      to=${inc#shim/}
      [ "$(rank "$to")" -le "$r" ] || say "${f#"$src"/} ($room) includes $inc: a door upward"
    done
    if [ "$room" = core ] && grep -q '^#include "replay/' "$f"; then
      say "${f#"$src"/} (core) includes replay/, migration's"
    fi
  done
done
for dir in recorder protocol transport replay executor sim common; do
  for f in $(find "$src/$dir" -name '*.[ch]'); do
    ! grep -q '^#include "shim/' "$f" || say "${f#"$src"/} includes the client (shim/)"
  done
done
[ -z "$(grep -rl '^#include "shim/shim.h"' "$src/shim" 2>/dev/null)" ] || say "shim/shim.h is included somewhere"

# ---- symbols ----
defs=$(mktemp) uses=$(mktemp)
trap 'rm -f "$defs" "$uses"' EXIT
for arg in "$@"; do
  room=${arg%%=*}
  [ "$(rank "$room")" != 0 ] || { echo "doors: unknown room in '$arg'" >&2; exit 2; }
  objs=$(echo "${arg#*=}" | tr ':' ' ')
  for o in $objs; do
    [ -f "$o" ] || { echo "doors: no object $o" >&2; exit 2; }
    nm -g --defined-only "$o" | awk -v r="$room" -v o="$(basename "$o")" 'NF >= 3 && $2 !~ /[Ww]/ {print $3, r, o}' >>"$defs"
    nm -u "$o" | awk -v r="$room" -v o="$(basename "$o")" '{print $2, r, o}' >>"$uses"
  done
done
[ -s "$defs" ] || { echo "doors: no objects given" >&2; exit 2; }
up=$(awk '
  function rank(x) { return x == "core" ? 1 : x == "migrate" ? 2 : x == "runtime" ? 3 : x == "driver" ? 4 : 5 }
  NR == FNR { room[$1] = $2; file[$1] = $3; next }
  ($1 in room) && rank(room[$1]) > rank($2) { printf "%s (%s) uses %s of %s (%s)\n", $3, $2, $1, file[$1], room[$1] }
' "$defs" "$uses" | sort -u)
[ -z "$up" ] || say "calls that run upward:
$up"
[ "$bad" = 0 ] && echo "doors: every include and call runs downward"
exit "$bad"
