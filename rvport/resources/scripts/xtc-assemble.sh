#!/bin/sh
# Gathers the cross toolchain into /opt/xtc (runs in the build-platform base). $1: the GCC major version;
# $2: "rust" to add the build platform's rustc, its standard library and a native linker for its own target.
set -eu
V=$1
RUST=${2:-}
T=riscv64-linux-gnu
P=/opt/xtc
test -x /usr/bin/$T-gcc-"$V" || { echo "rvport: no $T-gcc-$V in the build-platform base" >&2; exit 3; }
mkdir -p $P/bin $P/libexec/gcc-cross/$T $P/lib/gcc-cross/$T/"$V" $P/$T $P/host/lib
cp -a /usr/libexec/gcc-cross/$T/"$V" $P/libexec/gcc-cross/$T/
for t in gcc g++ cpp gcc-ar gcc-nm gcc-ranlib; do cp -a /usr/bin/$T-$t-"$V" $P/bin/; done
for t in as ld ld.bfd ar nm ranlib objcopy objdump strip readelf; do cp -a /usr/bin/$T-$t $P/bin/; done
# the compiler cache beside the compilers: a native program too (rvport/engine/compcache.py)
test -x /usr/bin/ccache || { echo "rvport: no ccache in the build-platform base" >&2; exit 3; }
cp -a /usr/bin/ccache $P/bin/
# as/ld where the driver looks for them (relative links into $P/bin); never unprefixed on PATH
cp -a /usr/$T/bin $P/$T/
# the names build systems call: gcc/cc, g++/c++, cpp, and the triplet names Debian's python sysconfig uses.
# They are links in the drivers' own directory (GCC finds cc1 relative to the path it was started as).
cd $P/bin
for n in gcc cc $T-gcc; do ln -s $T-gcc-"$V" "$n"; done
for n in g++ c++ $T-g++; do ln -s $T-g++-"$V" "$n"; done
ln -s $T-cpp-"$V" $T-cpp
# ar and ranlib by their plain names too: CMake finds the archiver by name on PATH, and the stage's own would
# run emulated over every object of a static library. They write the same archive: the same binutils source
# version (the version check), deterministic mode.
for n in ar ranlib; do ln -s $T-$n "$n"; done
if [ "$RUST" = rust ]; then
  # rustc (its librustc_driver and LLVM come with the shared libraries below), the build platform's own
  # standard library (build scripts and proc-macros run here, natively)
  H=$(/usr/bin/rustc -vV | awk '$1 == "host:" {print $2}')
  mkdir -p $P/rust/bin $P/rust/lib/rustlib
  cp -a /usr/bin/rustc $P/rust/bin/
  cp -a /usr/lib/rustlib/"$H" $P/rust/lib/rustlib/
  echo "$H" > $P/rust/host-target
  /usr/bin/rustc -vV > $P/rust/version
  # a native gcc that only links build scripts and proc-macros: its driver, collect2 and libgcc files in
  # their own layout, ld and as where collect2 looks (the tooldir), and the C library's link files
  M=$(gcc -dumpmachine)
  NV=$(gcc -dumpversion | cut -d. -f1)
  N=$P/native
  mkdir -p $N/bin $N/libexec/gcc/"$M" $N/lib/gcc/"$M" $N/"$M"/bin
  cp -a /usr/bin/"$M"-gcc-"$NV" $N/bin/
  cp -a /usr/libexec/gcc/"$M"/"$NV" $N/libexec/gcc/"$M"/
  cp -a /usr/lib/gcc/"$M"/"$NV" $N/lib/gcc/"$M"/
  cp -L /usr/bin/"$M"-ld.bfd $N/"$M"/bin/ld
  cp -L /usr/bin/"$M"-as $N/"$M"/bin/as
  ln -s "$M"-gcc-"$NV" $N/bin/cc
  echo "$M" > $N/multiarch
  dpkg -L libc6 libc6-dev libgcc-s1 | grep -E "^(/usr)?/lib/$M/[^/]+$" > $N/libc-dev-files
fi
# the build platform's loader and every shared library the binaries need, from this base
loader=$(ldd $P/bin/$T-gcc-"$V" | awk '$1 ~ /^\/.*ld-linux/ {print $1}')
libc=$(ldd $P/bin/$T-gcc-"$V" | awk '$1 == "libc.so.6" {print $3}')
if [ -z "$loader" ] || [ -z "$libc" ]; then
  echo "rvport: cannot find the loader and libc of $T-gcc-$V" >&2
  exit 3
fi
cp -L "$loader" $P/host/
echo "$loader" > $P/host/loader-path
basename "$(dirname "$libc")" > $P/host/multiarch
find $P -type f ! -name '*.rlib' ! -name '*.rmeta' | while read -r f; do ldd "$f" 2>/dev/null || true; done \
  | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do cp -L "$lib" $P/host/lib/; done
if [ "$RUST" = rust ]; then   # what the native linker links build scripts against (crt files, libc, libm...)
  while read -r f; do cp -af "$f" $P/host/lib/; done < $P/native/libc-dev-files
fi
# facts for the version check and result.json
echo "$V" > $P/gcc-major
$P/bin/$T-gcc-"$V" -dumpfullversion > $P/gcc-version
dpkg-query -W -f '${Package}=${Version}\n' > $P/packages.txt
ls $P/host/lib
