#!/bin/sh
# Runs a program with its standard output written to FILE (its messages stay on standard error), for a
# program rvport streams (proc.stream: stoppable as any other) whose output is data, not lines to show:
# `debootstrap --print-debs` (rvport.build.debprefetch).
# usage: stdout-to.sh FILE PROGRAM [ARGUMENT]...
out=$1
shift
exec "$@" > "$out"
