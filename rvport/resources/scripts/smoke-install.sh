#!/bin/sh
# The smoke stage's install step for the kinds whose artifacts are wheels (the kinds table: installs_wheels):
# every wheel under DIR pip-installed into the stage's Python, offline and without dependencies (the smoke
# image holds what they need). No wheel is a failure, as pip says.
# usage: smoke-install.sh DIR
set -eu
dir=$1
wheels=$(mktemp)
find "$dir" -name '*.whl' > "$wheels"
set --
while IFS= read -r w; do set -- "$@" "$w"; done < "$wheels"
rm -f "$wheels"
exec python3 -m pip install --no-index --no-deps --break-system-packages --find-links "$dir" "$@"
