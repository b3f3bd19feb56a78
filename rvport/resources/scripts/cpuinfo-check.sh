#!/bin/sh
# Runs first in every emulated build stage (qemu, accelerated): refuses to build unless the stage's
# /proc/cpuinfo shows the profile's ISA, as build systems read it to choose their flags. Under QEMU user
# emulation that file describes the CPU model QEMU_CPU names; a stage that runs on a native riscv64 builder
# node, or under an emulator that ignores QEMU_CPU, would show the build another ISA.
# usage: cpuinfo-check.sh PROFILE "EXTENSIONS SHOWN" "EXTENSIONS NOT SHOWN" VLEN
# (the extensions of isa.yaml's `cpuinfo` list, split by the profile; a zvl<N>b, when the file names one,
# must be the profile's VLEN)
set -eu
profile=$1 shown=$2 hidden=$3 vlen=$4
file=/proc/cpuinfo
isa=$(sed -n 's/^isa[[:space:]]*:[[:space:]]*//p' "$file" | head -n 1 | tr '[:upper:]' '[:lower:]')
letters=${isa%%_*}
letters=${letters#rv64}
multi="_${isa#*_}_"
has() {
  case $1 in
    ?) case $letters in *"$1"*) return 0 ;; esac ;;
    *) case $multi in *"_$1_"*) return 0 ;; esac ;;
  esac
  return 1
}
wrong=""
if [ -z "$isa" ]; then
  wrong=", it has no isa line"
else
  for e in $shown; do has "$e" || wrong="$wrong, lacks $e"; done
  for e in $hidden; do ! has "$e" || wrong="$wrong, shows $e"; done
  most=0
  for t in $(echo "$multi" | tr '_' ' '); do
    case $t in zvl[0-9]*b) n=${t#zvl}; n=${n%b}; [ "$n" -le "$most" ] || most=$n ;; esac
  done
  [ "$most" -eq 0 ] || [ "$most" -eq "$vlen" ] || wrong="$wrong, shows VLEN $most (zvl${most}b)"
fi
if [ -n "$wrong" ]; then
  echo "rvport: /proc/cpuinfo in this stage is not the CPU of profile $profile: ${wrong#, }" >&2
  echo "rvport: isa: ${isa:-(none)}" >&2
  echo "rvport: an emulated stage must run under QEMU as QEMU_CPU=${QEMU_CPU:-(unset)}, else build systems that" \
       "read /proc/cpuinfo choose another ISA; use a builder that emulates riscv64, or --mode native on a host" \
       "of exactly this ISA" >&2
  exit 3
fi
echo "rvport: /proc/cpuinfo shows the ISA of profile $profile (${shown:-no vector or half-precision extension})"
