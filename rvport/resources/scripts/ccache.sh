#!/bin/sh
# rvport's compiler cache in a build stage (ccache; rvport/engine/compcache.py): `start` before the build,
# `end` after it. The stage's Dockerfile sets RVPORT_CCACHE (engine, dir or off), RVPORT_CCACHE_KEY (rvport's
# part of the key, `;` between its lines), RVPORT_CCACHE_PROGRAM (ccache: the compilers' own platform's),
# RVPORT_CCACHE_NAMES (the compiler names to wrap), CCACHE_DIR, CCACHE_CONFIGPATH, CCACHE_MAXSIZE and
# CCACHE_STATSLOG; and RVPORT_OUT. What it saw goes to $RVPORT_OUT/.rvport-ccache (taken out of the artifacts
# by the runner): use; identity, the key's lines; key, their sha256 (ccache's compiler_check); stats.log,
# ccache's log of this build's calls; size-before and size-after (KiB); with RVPORT_CCACHE=dir, the cache
# itself (dir/), exported with the artifacts.
set -eu
R="$RVPORT_OUT/.rvport-ccache"
L=${RVPORT_CCACHE_LINKS:-/rvport/ccache-bin}  # the links (first on PATH)
I=${RVPORT_CCACHE_IMPORT:-/rvport/ccache-in}  # the imported cache (dir), bind-mounted from the context
fail() { echo "rvport compiler cache: $*" >&2; exit 3; }
size() { "$RVPORT_CCACHE_PROGRAM" --print-stats | awk '$1 == "cache_size_kibibyte" {print $2}'; }
case "${1:-}" in
start)
  mkdir -p "$R"
  echo "$RVPORT_CCACHE" > "$R/use"
  [ "$RVPORT_CCACHE" != off ] || exit 0
  [ -x "$RVPORT_CCACHE_PROGRAM" ] || fail "this stage has no $RVPORT_CCACHE_PROGRAM (build with --no-compiler-cache)"
  mkdir -p "$CCACHE_DIR"
  if [ "$RVPORT_CCACHE" = dir ] && [ -d "$I" ]; then
    cp -a "$I"/. "$CCACHE_DIR"/
  fi
  rm -f "$CCACHE_DIR/ccache.conf"  # never read (CCACHE_CONFIGPATH): an imported one sets nothing
  # the names to wrap: the usual ones and the versioned ones on PATH (after the links' own directory)
  rest=$(echo "$PATH" | tr ':' '\n' | grep -vx "$L" | paste -sd: -)
  names=$RVPORT_CCACHE_NAMES
  for d in $(echo "$rest" | tr ':' ' '); do
    for f in "$d"/gcc-[0-9]* "$d"/g++-[0-9]* "$d"/riscv64-linux-gnu-gcc-[0-9]* "$d"/riscv64-linux-gnu-g++-[0-9]*; do
      if [ -x "$f" ]; then names="$names ${f##*/}"; fi
    done
  done
  mkdir -p "$L"
  identity="$R/identity"
  echo "$RVPORT_CCACHE_KEY" | tr ';' '\n' > "$identity"
  echo "ccache=$("$RVPORT_CCACHE_PROGRAM" --version | head -n 1)" >> "$identity"
  seen=" "
  hashed=" "
  wrapped=""
  for n in $names; do
    real=$(PATH=$rest command -v "$n" 2>/dev/null) || continue
    [ ! -e "$L/$n" ] || continue
    ln -s "$RVPORT_CCACHE_PROGRAM" "$L/$n"
    wrapped="$wrapped $n"
    prog=$(readlink -f "$real")
    case "$seen" in *" $prog "*) continue ;; esac
    seen="$seen$prog "
    # the compiler's content: the driver, and the programs it runs for C and C++ (hashed by ccache itself,
    # 128-bit XXH3: a native program in accelerated and cross stages)
    files="$prog"
    for p in cc1 cc1plus; do
      q=$("$prog" -print-prog-name=$p 2>/dev/null) || continue
      case "$q" in /*) ;; *) continue ;; esac
      if [ -f "$q" ]; then files="$files $(readlink -f "$q")"; fi
    done
    for f in $files; do
      case "$hashed" in *" $f "*) continue ;; esac
      hashed="$hashed$f "
      echo "$f=$("$RVPORT_CCACHE_PROGRAM" --checksum-file "$f")" >> "$identity"
    done
  done
  [ "$seen" != " " ] || fail "none of the compilers $names is on PATH"
  key=$(sha256sum "$identity" | cut -d' ' -f1)
  echo "$key" > "$R/key"
  printf 'compiler_check = string:%s\nmax_size = %s\n' "$key" "$CCACHE_MAXSIZE" > "$CCACHE_CONFIGPATH"
  : > "$CCACHE_STATSLOG"
  size > "$R/size-before"
  echo "rvport compiler cache: ccache ($RVPORT_CCACHE, key $key) for:$wrapped"
  ;;
end)
  [ "$(cat "$R/use")" != off ] || exit 0
  "$RVPORT_CCACHE_PROGRAM" --cleanup > /dev/null
  size > "$R/size-after"
  if [ "$RVPORT_CCACHE" = dir ]; then
    rm -rf "$CCACHE_DIR/tmp"
    mv "$CCACHE_DIR" "$R/dir"
  fi
  ;;
*) fail "usage: ccache.sh start|end" ;;
esac
