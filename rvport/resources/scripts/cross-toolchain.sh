#!/bin/sh
# The cross toolchain image's steps (resources/dockerfiles/cross-toolchain.Dockerfile, rvport/build/modes/cross.py),
# run with sh -eu from the image's build context (a bind mount: nothing of it stays in the image). The packages
# and pairs come from the kinds table (rvport/catalogue/kinds.py: CrossToolchain).
#
#   cross-toolchain.sh unpack UNPACKED_FILE [PACKAGE DIRECTORY]...
#       Run after apt-get install, with the lists still there: downloads each PACKAGE (a riscv64 one that cannot
#       be installed beside the build platform's) and unpacks only its DIRECTORY into /, then writes
#       "PACKAGE=VERSION" a line to UNPACKED_FILE (emptied first, written even with no package).
#       Environment: RVPORT_APT_CA, a CA bundle for apt when the file is not empty; RVPORT_UNPACK_DIR, where
#       the .deb files go meanwhile (default /tmp/rvport-unpack, removed after).
#   cross-toolchain.sh match UNPACKED_FILE [version|source PACKAGE PACKAGE]...
#       Fails unless each pair has one Debian version (version: both installed), or comes from one source
#       version (source: binNMU suffixes +bN dropped; either may be an unpacked one, found in UNPACKED_FILE).
#   cross-toolchain.sh compilers COMPILERS_FILE [TOOL]...
#       Writes "TOOL=first line of its --version" a line (go: `go version`); nothing without a tool.
set -eu

# The Debian version of an installed package, else of an unpacked one (empty when neither).
version_of() {
  dpkg-query -W -f "\${Version}" "$1" 2>/dev/null || sed -n "s/^$(printf '%s' "$1" | sed 's/[.]/[.]/g')=//p" "$2"
}

unpack() {
  out=$1
  shift
  : > "$out"
  [ $# -gt 0 ] || return 0
  work=${RVPORT_UNPACK_DIR:-/tmp/rvport-unpack}
  mkdir -p "$work"
  cd "$work"
  while [ $# -ge 2 ]; do
    pkg=$1 dir=${2#/}
    dir=${dir%/}
    shift 2
    if [ -s "${RVPORT_APT_CA:-}" ]; then
      apt-get -o "Acquire::https::CAInfo=$RVPORT_APT_CA" download "$pkg"
    else
      apt-get download "$pkg"
    fi
    deb=$(find . -maxdepth 1 -name "${pkg%%:*}_*.deb")
    [ -f "$deb" ] || { echo "$pkg: no single .deb downloaded ($deb)" >&2; exit 1; }
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C / "./$dir"
    test -d "/$dir"
    echo "$pkg=$(dpkg-deb -f "$deb" Version)" >> "$out"
  done
  [ $# -eq 0 ] || { echo "unpack: a PACKAGE without its DIRECTORY: $*" >&2; exit 2; }
  cd /
  rm -rf "$work"
}

match() {
  unpacked=$1
  shift
  while [ $# -ge 3 ]; do
    rule=$1 a=$2 b=$3
    shift 3
    case $rule in
      version)
        va=$(dpkg-query -W -f "\${Version}" "$a")
        vb=$(dpkg-query -W -f "\${Version}" "$b")
        [ "$va" = "$vb" ] || { echo "$a $va but $b $vb: versions must match" >&2; exit 1; }
        ;;
      source)
        va=$(version_of "$a" "$unpacked")
        vb=$(version_of "$b" "$unpacked")
        sa=$(echo "$va" | sed -E 's/(\+b[0-9]+)+$//')
        sb=$(echo "$vb" | sed -E 's/(\+b[0-9]+)+$//')
        if [ -z "$sa" ] || [ "$sa" != "$sb" ]; then
          echo "$a $va but $b $vb: they must be built from one source version" >&2
          exit 1
        fi
        ;;
      *) echo "match: unknown rule $rule (version or source)" >&2; exit 2 ;;
    esac
  done
  [ $# -eq 0 ] || { echo "match: an incomplete rule: $*" >&2; exit 2; }
}

compilers() {
  out=$1
  shift
  [ $# -gt 0 ] || return 0
  for t in "$@"; do
    if [ "$t" = go ]; then
      echo "go=$(go version 2>/dev/null || go --version | head -n1)"
    else
      echo "$t=$("$t" --version | head -n1)"
    fi
  done > "$out"
}

case ${1:-} in
  unpack | match | compilers)
    step=$1
    shift
    "$step" "$@"
    ;;
  *)
    echo "usage: cross-toolchain.sh unpack|match|compilers FILE [ARGUMENTS]..." >&2
    exit 2
    ;;
esac
