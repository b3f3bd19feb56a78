#!/bin/sh
# Links /opt/xtc into a riscv64 stage (runs there, emulated): the build platform's loader and libraries at
# paths a riscv64 system never uses, and the stage's own GCC files, headers and libraries where the cross
# driver looks for them. Refuses a stage whose GCC is not the cross compiler's version.
# `setup.sh after-build` (run after the build) refuses a build that added entries to /usr/local/include,
# which the cross compiler saw only as they were when setup.sh linked them.
set -eu
P=/opt/xtc
T=riscv64-linux-gnu
fail() { echo "rvport accelerated: $*" >&2; exit 3; }
local_include() { find /usr/local/include -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort; }
if [ "${1:-}" = after-build ]; then
  added=$(local_include | comm -13 $P/local-include.list -)
  [ -z "$added" ] || fail "the build added $(echo "$added" | paste -sd ' ' -) to /usr/local/include after the cross compiler's \
include directories were made; its compiles may not have seen them: build this recipe with --mode qemu"
  exit 0
fi
V=$(cat $P/gcc-major)
cross=$(cat $P/gcc-version)
# 1. the version check, against the stage's own compiler files (the runner checks package versions first)
test -d /usr/lib/gcc/$T/"$V" || fail "the stage has no GCC $V (/usr/lib/gcc/$T/$V); the cross compiler is GCC $cross"
test -d /usr/include/c++/"$V" || fail "the stage has no libstdc++ $V headers (/usr/include/c++/$V)"
# 2. the build platform's loader and shared libraries
loader=$(cat $P/host/loader-path)
multiarch=$(cat $P/host/multiarch)
test ! -e "$loader" || fail "$loader already exists in the stage"
test ! -e /usr/lib/"$multiarch" || fail "/usr/lib/$multiarch already exists in the stage"
mkdir -p "$(dirname "$loader")"
ln -s $P/host/"$(basename "$loader")" "$loader"
ln -s $P/host/lib /usr/lib/"$multiarch"
# 3. the stage's GCC $V files, linked per file (a real directory: the driver resolves paths inside it);
#    the LTO plugin stays the prefix's own (the native linker loads it). One cp per tree: every process
#    here is emulated.
G=$P/lib/gcc-cross/$T/$V
cp -rsL /usr/lib/gcc/$T/"$V"/. "$G"/
rm -rf "$G"/plugin "$G"/liblto_plugin.so
ln -s ../../../../libexec/gcc-cross/$T/"$V"/liblto_plugin.so "$G"/liblto_plugin.so
# 4. headers. The cross driver searches GCC's own, then its tooldir's include $P/$T/include, then
#    /usr/include/$T and /usr/include: the stage's GCC searches /usr/local/include where the tooldir's is,
#    so /usr/local/include's entries are linked there. C++ headers: $P/$T/include/c++/$V.
I=$P/$T/include
mkdir -p $I/c++
cp -rsL /usr/include/c++/"$V" $I/c++/
ln -s /usr/include/$T/c++/"$V" $I/c++/"$V"/$T
test ! -e /usr/local/include/c++ || fail "the stage has /usr/local/include/c++, where the cross compiler keeps its \
C++ headers: build this recipe with --mode qemu"
for e in /usr/local/include/* /usr/local/include/.[!.]*; do
  if [ -e "$e" ]; then ln -s "$e" $I/; fi
done
local_include > $P/local-include.list
# libraries need nothing: the cross driver already searches /lib/$T and /usr/lib/$T
$P/bin/gcc -dumpmachine | grep -qx $T || fail "/opt/xtc/bin/gcc does not run or does not target $T"
echo "rvport accelerated: GCC $cross ($(cat $P/host/multiarch) host binaries) linked to the stage's GCC $V files"
: > $P/stage.env
[ -d $P/rust ] || exit 0
# 5. Rust: the build platform's rustc with the stage's own riscv64 standard library, and its own one for
#    build scripts and proc-macros, both under the sysroot that rustc derives from where it is loaded
R=riscv64gc-unknown-linux-gnu
H=$(cat $P/rust/host-target)
test -d /usr/lib/rustlib/$R/lib || fail "the stage has no riscv64 Rust standard library (/usr/lib/rustlib/$R/lib): add rustc-web to the recipe's toolchain packages, or build with --mode qemu"
S=$($P/rust/bin/rustc --print sysroot) || fail "$P/rust/bin/rustc does not run here: build with --mode qemu"
link_target() {   # $1: a target's directory under the sysroot's rustlib, $2: where its library is
  d=$S/lib/rustlib/$1
  if [ -e "$d" ]; then
    [ "$(readlink -f "$d")" = "$(readlink -f "$2")" ] || fail "$d already exists in the stage"
  else
    mkdir -p "$S"/lib/rustlib && ln -s "$2" "$d"
  fi
}
link_target "$H" $P/rust/lib/rustlib/"$H"
link_target $R /usr/lib/rustlib/$R
# the compiler must accept the stage's standard library (an rlib of another rustc version is refused)
cd /tmp
printf 'pub fn triple(x: u64) -> u64 { x.wrapping_mul(3) }\n' > xtc-probe.rs
$P/rust/bin/rustc --edition 2021 --crate-type rlib --target $R -o xtc-probe.rlib xtc-probe.rs \
  || fail "the build platform's rustc ($(head -1 $P/rust/version)) cannot use the stage's riscv64 standard library: rebuild both bases from the same Debian suite, or build with --mode qemu"
# and a build-platform program (what a build script is) links with the native gcc and runs
printf 'fn main() { println!("native ok"); }\n' > xtc-host.rs
$P/rust/bin/rustc --edition 2021 -C linker=$P/native/bin/cc -o xtc-host xtc-host.rs \
  || fail "cannot link a $H program with $P/native/bin/cc: build with --mode qemu"
./xtc-host | grep -qx "native ok" || fail "a $H program linked here does not run: build with --mode qemu"
rm -f xtc-probe.rs xtc-probe.rlib xtc-host.rs xtc-host
# pyo3 cross-compiles against the stage Python's own configuration (its _sysconfigdata)
if command -v python3 >/dev/null; then
  lib=$(python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')
  echo "export PYO3_CROSS_LIB_DIR=\"\${PYO3_CROSS_LIB_DIR:-$lib}\"" >> $P/stage.env
fi
echo "rvport accelerated: rustc $(head -1 $P/rust/version | cut -d' ' -f2) ($H) with the stage's $R standard library"
