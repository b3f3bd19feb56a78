"""Accelerated riscv64 stages: the stage stays riscv64 (Python, pip, CMake and build backends run under QEMU),
while its C and C++ compilers are native cross compilers of the build platform targeting riscv64.

The cross toolchain is a pinned, cached input: Debian's riscv64 cross GCC and binutils from the
build-platform base (toolchains/debian-trixie-xtc.yaml, made by rvport.baseimage.ensure_base), gathered by a
small stage into a self-contained prefix, /opt/xtc (drivers, cc1/cc1plus, the build platform's loader and
shared libraries), and loaded as an image. A riscv64 build stage takes it with `COPY --from=<that image>`
and links it to its own headers, libraries and GCC files (dockerfiles/accelerated.Dockerfile), so the cross
compiler must be the stage's GCC version: checked here from package versions before anything is built,
and again inside the stage.

Stages that compile Rust (a recipe whose toolchain names `rust:` or installs rustc/cargo) get more in the same
prefix, from a second build-platform base (toolchains/debian-trixie-xtc-rust.yaml, which adds rustc-web):
the build platform's rustc, its own standard library (for build scripts and proc-macros, which run on the
build platform) and a native linker for them. The target's standard library is the stage's own riscv64
one, so the native rustc must be the stage's rustc version (RUST_MATCHED). Cargo, build backends and
Python stay riscv64; cargo is told to target riscv64gc-unknown-linux-gnu with that rustc (RUST_ENV).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from . import buildx, cross, dockerfiles
from .baseimage import BaseImage
from .errors import BuildFailed, HostNotReady
from .host import DOCKER_PLATFORM
from .recipes import Kind

if TYPE_CHECKING:   # the runner hands itself in; only its helpers are used
    from .recipes import Recipe
    from .runner import Runner, StageRecord

XTC_BASE = "debian-trixie-xtc"
XTC_RUST_BASE = "debian-trixie-xtc-rust"     # XTC_BASE plus the build platform's rustc-web
PREFIX = "/opt/xtc"
TRIPLE = "riscv64-linux-gnu"
RISCV64 = "linux/riscv64"
PREFIX_FORMAT = 2    # bump when the prefix layout changes

# Debian packages that mean a stage compiles Rust.
RUST_PACKAGES = frozenset({"rustc", "rustc-web", "cargo", "cargo-web"})

# What must match between the riscv64 stage (left: its package) and the cross toolchain (right: the build
# platform's package); {v} is the GCC major version.
MATCHED = (("gcc-{v}", "gcc-{v}-riscv64-linux-gnu"), ("g++-{v}", "g++-{v}-riscv64-linux-gnu"),
           ("libgcc-{v}-dev", "libgcc-{v}-dev-riscv64-cross"),
           ("libstdc++-{v}-dev", "libstdc++-{v}-dev-riscv64-cross"),
           ("binutils-riscv64-linux-gnu", "binutils-riscv64-linux-gnu"))
# The same for Rust: the stage's riscv64 standard library is used by the build platform's rustc.
RUST_MATCHED = (("rustc-web", "rustc-web"), ("libstd-rust-web-dev", "libstd-rust-web-dev"))

# What cargo and pyo3 are told in a Rust stage: cross mode's cargo environment (riscv64 target, the riscv64
# linker and C compilers for build scripts) with the prefix's rustc; the recipe's own env comes after and wins.
# The linker of the build platform's own target (build scripts, proc-macros) is the prefix's native gcc
# (rust_env); setup.sh adds PYO3_CROSS_LIB_DIR, the stage Python's standard library directory, in
# /opt/xtc/stage.env.
RUST_ENV = {"RUSTC": f"{PREFIX}/rust/bin/rustc", **cross.ENV[Kind.CARGO_STATICLIB]}
HOST_RUST_TARGET = {"linux/amd64": "x86_64-unknown-linux-gnu", "linux/arm64": "aarch64-unknown-linux-gnu"}

ASSEMBLE_SH = r'''# Gathers the cross toolchain into /opt/xtc (runs in the build-platform base). $1: the GCC major version;
# $2: "rust" to add the build platform's rustc, its standard library and a native linker for its own target.
set -eu
V=$1
RUST=${2:-}
T=riscv64-linux-gnu
P=/opt/xtc
test -x /usr/bin/$T-gcc-$V || { echo "rvport: no $T-gcc-$V in the build-platform base" >&2; exit 3; }
mkdir -p $P/bin $P/libexec/gcc-cross/$T $P/lib/gcc-cross/$T/$V $P/$T $P/host/lib
cp -a /usr/libexec/gcc-cross/$T/$V $P/libexec/gcc-cross/$T/
for t in gcc g++ cpp gcc-ar gcc-nm gcc-ranlib; do cp -a /usr/bin/$T-$t-$V $P/bin/; done
for t in as ld ld.bfd ar nm ranlib objcopy objdump strip readelf; do cp -a /usr/bin/$T-$t $P/bin/; done
# as/ld where the driver looks for them (relative links into $P/bin); never unprefixed on PATH
cp -a /usr/$T/bin $P/$T/
# the names build systems call: gcc/cc, g++/c++, cpp, and the triplet names Debian's python sysconfig uses.
# They are links in the drivers' own directory (GCC finds cc1 relative to the path it was started as).
cd $P/bin
for n in gcc cc $T-gcc; do ln -s $T-gcc-$V $n; done
for n in g++ c++ $T-g++; do ln -s $T-g++-$V $n; done
ln -s $T-cpp-$V $T-cpp
if [ "$RUST" = rust ]; then
  # rustc (its librustc_driver and LLVM come with the shared libraries below), the build platform's own
  # standard library (build scripts and proc-macros run here, natively)
  H=$(/usr/bin/rustc -vV | awk '$1 == "host:" {print $2}')
  mkdir -p $P/rust/bin $P/rust/lib/rustlib
  cp -a /usr/bin/rustc $P/rust/bin/
  cp -a /usr/lib/rustlib/$H $P/rust/lib/rustlib/
  echo $H > $P/rust/host-target
  /usr/bin/rustc -vV > $P/rust/version
  # a native gcc that only links build scripts and proc-macros: its driver, collect2 and libgcc files in
  # their own layout, ld and as where collect2 looks (the tooldir), and the C library's link files
  M=$(gcc -dumpmachine)
  NV=$(gcc -dumpversion | cut -d. -f1)
  N=$P/native
  mkdir -p $N/bin $N/libexec/gcc/$M $N/lib/gcc/$M $N/$M/bin
  cp -a /usr/bin/$M-gcc-$NV $N/bin/
  cp -a /usr/libexec/gcc/$M/$NV $N/libexec/gcc/$M/
  cp -a /usr/lib/gcc/$M/$NV $N/lib/gcc/$M/
  cp -L /usr/bin/$M-ld.bfd $N/$M/bin/ld
  cp -L /usr/bin/$M-as $N/$M/bin/as
  ln -s $M-gcc-$NV $N/bin/cc
  echo $M > $N/multiarch
  dpkg -L libc6 libc6-dev libgcc-s1 | grep -E "^(/usr)?/lib/$M/[^/]+$" > $N/libc-dev-files
fi
# the build platform's loader and every shared library the binaries need, from this base
loader=$(ldd $P/bin/$T-gcc-$V | awk '$1 ~ /^\/.*ld-linux/ {print $1}')
libc=$(ldd $P/bin/$T-gcc-$V | awk '$1 == "libc.so.6" {print $3}')
test -n "$loader" && test -n "$libc" || { echo "rvport: cannot find the loader and libc of $T-gcc-$V" >&2; exit 3; }
cp -L "$loader" $P/host/
echo "$loader" > $P/host/loader-path
basename "$(dirname "$libc")" > $P/host/multiarch
find $P -type f ! -name '*.rlib' ! -name '*.rmeta' | while read -r f; do ldd "$f" 2>/dev/null || true; done \
  | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do cp -L "$lib" $P/host/lib/; done
if [ "$RUST" = rust ]; then   # what the native linker links build scripts against (crt files, libc, libm...)
  while read -r f; do cp -af "$f" $P/host/lib/; done < $P/native/libc-dev-files
fi
# facts for the version check and result.json
echo $V > $P/gcc-major
$P/bin/$T-gcc-$V -dumpfullversion > $P/gcc-version
dpkg-query -W -f '${Package}=${Version}\n' > $P/packages.txt
ls $P/host/lib
'''

SETUP_SH = r'''# Links /opt/xtc into a riscv64 stage (runs there, emulated): the build platform's loader and libraries at
# paths a riscv64 system never uses, and the stage's own GCC files, headers and libraries where the cross
# driver looks for them. Refuses a stage whose GCC is not the cross compiler's version.
# `setup.sh after-build` (run after the build) refuses a build that added entries to /usr/local/include,
# which the cross compiler saw only as they were when setup.sh linked them.
set -eu
P=/opt/xtc
T=riscv64-linux-gnu
fail() { echo "rvport accelerated: $*" >&2; exit 3; }
local_include() { ls -A /usr/local/include 2>/dev/null | sort; }
if [ "${1:-}" = after-build ]; then
  added=$(local_include | comm -13 $P/local-include.list -)
  [ -z "$added" ] || fail "the build added $(echo $added) to /usr/local/include after the cross compiler's \
include directories were made; its compiles may not have seen them: build this recipe with --mode qemu"
  exit 0
fi
V=$(cat $P/gcc-major)
cross=$(cat $P/gcc-version)
# 1. the version check, against the stage's own compiler files (the runner checks package versions first)
test -d /usr/lib/gcc/$T/$V || fail "the stage has no GCC $V (/usr/lib/gcc/$T/$V); the cross compiler is GCC $cross"
test -d /usr/include/c++/$V || fail "the stage has no libstdc++ $V headers (/usr/include/c++/$V)"
# 2. the build platform's loader and shared libraries
loader=$(cat $P/host/loader-path)
multiarch=$(cat $P/host/multiarch)
test ! -e "$loader" || fail "$loader already exists in the stage"
test ! -e /usr/lib/$multiarch || fail "/usr/lib/$multiarch already exists in the stage"
mkdir -p "$(dirname "$loader")"
ln -s $P/host/"$(basename "$loader")" "$loader"
ln -s $P/host/lib /usr/lib/$multiarch
# 3. the stage's GCC $V files, linked per file (a real directory: the driver resolves paths inside it);
#    the LTO plugin stays the prefix's own (the native linker loads it). One cp per tree: every process
#    here is emulated.
G=$P/lib/gcc-cross/$T/$V
cp -rsL /usr/lib/gcc/$T/$V/. $G/
rm -rf $G/plugin $G/liblto_plugin.so
ln -s ../../../../libexec/gcc-cross/$T/$V/liblto_plugin.so $G/liblto_plugin.so
# 4. headers. The cross driver searches GCC's own, then its tooldir's include $P/$T/include, then
#    /usr/include/$T and /usr/include: the stage's GCC searches /usr/local/include where the tooldir's is,
#    so /usr/local/include's entries are linked there. C++ headers: $P/$T/include/c++/$V.
I=$P/$T/include
mkdir -p $I/c++
cp -rsL /usr/include/c++/$V $I/c++/
ln -s /usr/include/$T/c++/$V $I/c++/$V/$T
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
    mkdir -p $S/lib/rustlib && ln -s "$2" "$d"
  fi
}
link_target $H $P/rust/lib/rustlib/$H
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
'''


class ToolchainMismatch(BuildFailed):
    """The cross compiler is not the stage's compiler version: its objects would not be the stage's."""


@dataclass(frozen=True, kw_only=True)
class XtcImage:
    """The loaded prefix image and what is in it."""

    tag: str
    image_id: str
    platform: str                       # the platform its binaries run on (the build platform)
    gcc_major: str
    packages: Mapping[str, str] = field(default_factory=dict)   # cross packages -> Debian version
    rust: bool = False                  # the prefix holds the build platform's rustc (RUST_MATCHED)
    built: bool = False

    def to_json(self) -> dict:
        return {"tag": self.tag, "image_id": self.image_id, "platform": self.platform,
                "gcc_major": self.gcc_major, "rust": self.rust, "packages": dict(sorted(self.packages.items()))}


def host_platform(arch: str) -> str:
    platform = DOCKER_PLATFORM.get(arch)
    if platform is None or arch == "riscv64":
        raise HostNotReady(f"accelerated stages need an x86_64 or aarch64 host, not {arch}",
                           hint="use --mode qemu (or native on a riscv64 host)")
    return platform


_SUFFIX = re.compile(r"(cross\d+|\+b\d+)+$")


def source_version(version: str) -> str:
    """A Debian version without the cross rebuild and binNMU suffixes: 14.2.0-19cross1 -> 14.2.0-19."""
    return _SUFFIX.sub("", version)


def gcc_major(packages: Mapping[str, str]) -> str:
    """The GCC major version of the cross toolchain, from its package names."""
    majors = sorted({m.group(1) for p in packages if (m := re.fullmatch(r"gcc-(\d+)-riscv64-linux-gnu", p))})
    if len(majors) != 1:
        raise HostNotReady(f"the build-platform base has {len(majors) or 'no'} riscv64 cross GCC "
                           f"versions ({', '.join(majors) or 'none'}); exactly one is needed",
                           hint=f"toolchains/{XTC_BASE}.yaml must list one gcc-N-riscv64-linux-gnu")
    return majors[0]


def check_versions(stage: Mapping[str, str], cross: Mapping[str, str], major: str,
                   rust: bool = False) -> dict[str, str]:
    """The stage's compiler packages against the cross toolchain's: same source version or ToolchainMismatch.

    With `rust`, the stage's rustc and riscv64 standard library against the build platform's rustc too.
    Returns what was compared ("gcc-14": "14.2.0-19", ...) for the record.
    """
    compared: dict[str, str] = {}
    problems: list[str] = []
    for left, right in MATCHED + (RUST_MATCHED if rust else ()):
        s_name, c_name = left.format(v=major), right.format(v=major)
        s_ver, c_ver = stage.get(s_name), cross.get(c_name)
        if c_ver is None:
            problems.append(f"the cross toolchain has no {c_name}")
        elif s_ver is None:
            problems.append(f"the stage has no {s_name} (the cross compiler is {c_name} {c_ver})")
        elif source_version(s_ver) != source_version(c_ver):
            problems.append(f"stage {s_name} {s_ver} != cross {c_name} {c_ver}")
        else:
            compared[s_name] = s_ver
    if problems:
        raise ToolchainMismatch(
            "accelerated: the cross compiler is not the riscv64 stage's compiler version: " + "; ".join(problems),
            hint=f"its headers, libgcc, libstdc++ (and Rust standard library) come from the stage, so the versions "
                 f"must be equal: pin the same Debian suite in toolchains/{XTC_BASE}*.yaml and the stage's base "
                 "(and rebuild both), or build with --mode qemu")
    return compared


def parse_packages(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        name, _, version = line.partition("=")
        if name and version:
            out[name.split(":")[0]] = version
    return out


def needs_rust(recipe: Recipe) -> bool:
    """Does this recipe's stage compile Rust (and so need the Rust part of the prefix)?"""
    return bool(recipe.toolchain.rust) or any(p in RUST_PACKAGES for p in recipe.toolchain.debian)


def rust_env(platform: str) -> dict[str, str]:
    """RUST_ENV plus the native linker for the build platform's own target (build scripts, proc-macros)."""
    host = HOST_RUST_TARGET.get(platform)
    if host is None:
        raise HostNotReady(f"accelerated Rust stages need an x86_64 or aarch64 build platform, not {platform}",
                           hint="use --mode qemu")
    return {**RUST_ENV, f"CARGO_TARGET_{host.upper().replace('-', '_')}_LINKER": f"{PREFIX}/native/bin/cc"}


def render_prefix(xtc_base_tag: str, major: str, platform: str, rust: bool = False) -> dockerfiles.Rendered:
    return dockerfiles.render("accelerated-prefix", {"XTC_BASE": xtc_base_tag, "GCC_MAJOR": major,
                                                     "XTC_PLATFORM": platform, "RUST": "rust" if rust else ""})


def render_stage(*, toolchain: str, xtc: XtcImage, env: Mapping[str, str], profile: str) -> dockerfiles.Rendered:
    """The build stage; a Rust prefix adds rust_env() under the stage's env (the recipe's own env wins)."""
    full = {**rust_env(xtc.platform), **env} if xtc.rust else dict(env)
    return dockerfiles.render("accelerated", {
        "TOOLCHAIN": toolchain, "XTC_IMAGE": xtc.tag, "XTC_PLATFORM": xtc.platform,
        "ENV": dockerfiles.env_lines(full), "PROFILE": profile})


def prefix_key(base: BaseImage, rendered: dockerfiles.Rendered) -> str:
    doc = "\n".join([f"xtc-{PREFIX_FORMAT}", base.image_id, rendered.sha256,
                     hashlib.sha256(ASSEMBLE_SH.encode()).hexdigest(), hashlib.sha256(SETUP_SH.encode()).hexdigest()])
    return hashlib.sha256(doc.encode()).hexdigest()


def ensure_prefix(base: BaseImage, rust: bool = False, *, tmp_root: Path, log_path: Path,
                  builder: str | None = None, on_line: Callable[[str], None] | None = None) -> XtcImage:
    """The prefix image for this build-platform base: built and loaded once per inputs, then reused by tag."""
    major = gcc_major(base.packages)
    rendered = render_prefix(base.tag, major, base.platform, rust)
    key = prefix_key(base, rendered)
    tag = f"rvport/xtc:{base.spec}-{base.platform.split('/')[-1]}-{key[:12]}"
    info = buildx.image_info(tag)
    built = False
    if info is None:
        tmp_root.mkdir(parents=True, exist_ok=True)
        ctx = Path(tempfile.mkdtemp(prefix="xtc-", dir=tmp_root))
        try:
            (ctx / "Dockerfile").write_text(rendered.text)
            (ctx / "xtc-assemble.sh").write_text(ASSEMBLE_SH)
            (ctx / "xtc-setup.sh").write_text(SETUP_SH)
            # the image holds build-platform binaries for riscv64 stages; it is made for the riscv64 platform
            # (FROM scratch) so those stages can COPY --from it by name without a registry
            buildx.build(buildx.BuildSpec(context=ctx, dockerfile=ctx / "Dockerfile", platform=RISCV64,
                                          tag=tag, load=True, network="none", builder=builder,
                                          labels=(("org.rvport.key", key), ("org.rvport.xtc.base", base.tag))),
                         log_path=log_path, on_line=on_line)
        finally:
            shutil.rmtree(ctx, ignore_errors=True)
        info = buildx.image_info(tag)
        if info is None:
            raise HostNotReady(f"the accelerated prefix image {tag} was built but is not in the engine",
                               hint="with a non-docker builder, --load must be supported")
        built = True
    rust_names = {right for _, right in RUST_MATCHED} if rust else set()
    packages = {p: v for p, v in base.packages.items()
                if p.endswith(("riscv64-linux-gnu", "riscv64-cross")) or p in rust_names}
    return XtcImage(tag=tag, image_id=info["id"], platform=base.platform, gcc_major=major, packages=packages,
                    rust=rust, built=built)


def stage_dockerfile(runner: Runner, rec: StageRecord, stage_base: BaseImage,
                     toolchain_tag: str) -> dockerfiles.Rendered:
    """The runner's hook: prefix image ready, versions checked and recorded, the stage's Dockerfile rendered."""
    st = rec.stage
    platform = host_platform(runner.plan.host.arch)
    rust = needs_rust(st.recipe)
    runner.rep.step(st.name, f"accelerated: cross toolchain prefix ({platform}{', with rustc' if rust else ''})")
    xtc_base = runner._base(XTC_RUST_BASE if rust else XTC_BASE, platform, rec)
    with _timer(rec, "accelerated"):
        xtc = ensure_prefix(xtc_base, rust, tmp_root=runner.cache_root / "tmp", log_path=runner._log(rec),
                            builder=runner.opts.builder, on_line=lambda l: runner.rep.line(st.name, l))
    stage_packages = {**stage_base.packages, **rec.toolchain_packages}
    if not stage_packages:   # a base named by digest, no extra packages: ask the image itself
        cp = buildx.run_container(toolchain_tag, ["dpkg-query", "-W", "-f", "${Package}=${Version}\\n"],
                                  platform=RISCV64, check=False, timeout=300)
        stage_packages = parse_packages(cp.stdout)
    compared = check_versions(stage_packages, xtc.packages, xtc.gcc_major, rust)
    rec.images["xtc"] = xtc.image_id
    rec.images["xtc_tag"] = xtc.tag
    for name, version in sorted(xtc.packages.items()):
        rec.toolchain_packages[f"xtc:{name}"] = version
    runner.rep.line(st.name, "accelerated: the cross toolchain matches the stage: "
                    + ", ".join(f"{k} {v}" for k, v in compared.items()))
    return render_stage(toolchain=toolchain_tag, xtc=xtc, env=st.env, profile=runner.profile.name)


def _timer(rec: StageRecord, name: str):
    from .runner import _Timer
    return _Timer(rec, name)
