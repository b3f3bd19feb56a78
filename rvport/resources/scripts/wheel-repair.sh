#!/bin/sh
# rvport: manylinux repair of the wheels the build left in $RVPORT_OUT. It runs in the riscv64 stage, right
# after the recipe's build commands, because grafting needs the target's own libraries. $1 is the platform
# auditwheel is asked for: auto (the most compatible tag the wheel allows) or manylinux_2_X_riscv64; the
# rest, --exclude LIB pairs (the recipe's manylinux: exclude:), are handed to auditwheel: libraries a wheel
# the built one requires ships, neither grafted nor counted against the tag.
# auditwheel is the pinned wheel in /rvport/tools, run by the stage's own Python from its unpacked files; its
# dependencies (pyelftools, packaging) and patchelf come from the stage's Debian packages.
# A wheel that cannot be repaired is kept as it was (linux_riscv64) and auditwheel's words are kept beside it:
# everything under $RVPORT_OUT/.rvport-repair/ is a report the runner reads and takes out of the artifacts.
set -eu
plat=${1:?platform}
shift
excludes=""
for a in "$@"; do
  case $a in
    --exclude) ;;
    *[!A-Za-z0-9_.+-]*) a="" ;;  # no glob or other shell character: the words below are split, never globbed
    lib*.so|lib*.so.[0-9]*) ;;
    *) a="" ;;
  esac
  [ -n "$a" ] || { echo "rvport: wheel-repair.sh takes --exclude LIB after the platform" >&2; exit 3; }
  excludes="$excludes $a"
done
report=$RVPORT_OUT/.rvport-repair
work=/tmp/rvport-repair
mkdir -p "$report" "$work/in" "$work/auditwheel"
set -- /rvport/tools/auditwheel-*.whl
[ -f "$1" ] || { echo "rvport: the pinned auditwheel wheel is missing from /rvport/tools" >&2; exit 3; }
python3 -m zipfile -e "$1" "$work/auditwheel"
missing=""
python3 -c 'import elftools, packaging' 2>/dev/null || missing="python3-pyelftools and python3-packaging"
command -v patchelf >/dev/null || missing="${missing:+$missing, }patchelf"
for w in "$RVPORT_OUT"/*.whl; do
  [ -e "$w" ] || continue
  name=$(basename "$w")
  mv "$w" "$work/in/$name"
  ok=false
  # shellcheck disable=SC2086 # $excludes: --exclude LIB words, checked above
  if [ -n "$missing" ]; then
    echo "rvport: the stage lacks $missing, which auditwheel needs (a base image without them?)" > "$report/$name.log"
  elif PYTHONPATH="$work/auditwheel" python3 -m auditwheel repair --plat "$plat" $excludes -w "$RVPORT_OUT" \
       "$work/in/$name" > "$report/$name.log" 2>&1; then
    ok=true
  fi
  if $ok; then
    echo "rvport: repaired $name"
  else
    cp -p "$work/in/$name" "$RVPORT_OUT/$name"
    echo "rvport: $name cannot carry $plat; kept as built (see below)"
    echo "not repaired" >> "$report/$name.log"
  fi
  tail -n 5 "$report/$name.log"
done
