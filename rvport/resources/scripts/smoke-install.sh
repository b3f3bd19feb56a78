#!/bin/sh
# The smoke stage's install step for the kinds whose artifacts are wheels (the kinds table: installs_wheels):
# every wheel under each DIR pip-installed into the stage's Python in one command, offline and without
# dependencies (the smoke image holds what they need). The first DIR holds the stage's own artifacts, which
# must hold a wheel (none is a failure, as pip says); the others hold the wheels of the stage's dependencies
# (recipe `depends:`, e.g. xgrammar's apache-tvm-ffi), and may be empty.
# usage: smoke-install.sh DIR [DEPDIR...]
set -eu
wheels=$(mktemp)
links=""
for dir in "$@"; do
  [ -d "$dir" ] || continue
  find "$dir" -name '*.whl' | sort >> "$wheels"
  links="$links --find-links $dir"
done
set --
while IFS= read -r w; do set -- "$@" "$w"; done < "$wheels"
rm -f "$wheels"
# shellcheck disable=SC2086 # the --find-links words are meant to split (rvport's own directories)
exec python3 -m pip install --no-index --no-deps --break-system-packages $links "$@"
