"""Cross stages: what a riscv64 cross toolchain on the build platform is made of, as data.

A cross stage compiles on the build platform (no emulation) in an image made from the build-platform base
(`toolchains/debian-trixie-xtc.yaml`: Debian trixie with GCC 14 for riscv64) plus, per build kind, the
Debian packages and environment below. Debian trixie has all of it:

- Rust: the host's `rustc` and `cargo` with `libstd-rust-dev:riscv64` beside them. That package is
  Multi-Arch: same, so dpkg installs it only at exactly the host rustc's version (checked again in the
  image, see SAME_VERSION); cargo targets riscv64gc-unknown-linux-gnu and links with riscv64-linux-gnu-gcc.
- Go: Debian's `golang-go` with GOOS=linux GOARCH=riscv64 and cgo through riscv64-linux-gnu-gcc.

The smoke test of a cross stage still runs in the riscv64 base under QEMU. Nothing here runs a process:
the runner builds the image (rvport/runner.py) and rvport/dockerfiles.py renders the stage.
"""

from __future__ import annotations

from typing import Mapping

from rvport.catalogue.recipes import Kind, Recipe

BASE = "debian-trixie-xtc"          # the build-platform base every cross toolchain image starts from
FOREIGN_ARCH = "riscv64"            # `dpkg --add-architecture` before apt, for :riscv64 libraries
TRIPLE = "riscv64-linux-gnu"
RUST_TARGET = "riscv64gc-unknown-linux-gnu"

# The unversioned triplet names (riscv64-linux-gnu-gcc, -g++) for build scripts and linkers.
_C = ("gcc-riscv64-linux-gnu", "g++-riscv64-linux-gnu")

# Debian packages (of the build platform, or `:riscv64` ones) each kind's cross toolchain adds to the base.
PACKAGES: Mapping[Kind, tuple[str, ...]] = {
    Kind.CARGO_STATICLIB: (*_C, "rustc", "cargo", "libstd-rust-dev:riscv64"),
    Kind.GO_BINARY: (*_C, "golang-go"),
}

# Packages that must have the same version: the riscv64 standard library must be the host rustc's own.
SAME_VERSION: Mapping[Kind, tuple[tuple[str, str], ...]] = {
    Kind.CARGO_STATICLIB: (("rustc", "libstd-rust-dev:riscv64"),),
}

# The environment of each kind's cross stage; a recipe's own env is applied after it and wins.
ENV: Mapping[Kind, Mapping[str, str]] = {
    Kind.CARGO_STATICLIB: {
        "CARGO_BUILD_TARGET": RUST_TARGET,          # even a bare `cargo build` makes riscv64 objects
        "CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_LINKER": f"{TRIPLE}-gcc",
        "CC_riscv64gc_unknown_linux_gnu": f"{TRIPLE}-gcc",
        "CXX_riscv64gc_unknown_linux_gnu": f"{TRIPLE}-g++",
        "AR_riscv64gc_unknown_linux_gnu": f"{TRIPLE}-ar",
    },
    Kind.GO_BINARY: {
        "GOOS": "linux",
        "GOARCH": "riscv64",
        "CGO_ENABLED": "1",                         # Go turns cgo off when cross-compiling unless told
        "CC": f"{TRIPLE}-gcc",
        "CXX": f"{TRIPLE}-g++",
    },
}

# What `<tool> --version` names the compiler recorded in result.json.
COMPILERS: Mapping[Kind, tuple[str, ...]] = {
    Kind.CARGO_STATICLIB: ("rustc", "cargo", f"{TRIPLE}-gcc"),
    Kind.GO_BINARY: ("go", f"{TRIPLE}-gcc"),
}


def supported(kind: Kind) -> bool:
    return kind in PACKAGES


def packages(recipe: Recipe) -> tuple[str, ...]:
    """The recipe's own Debian packages (build-platform tools such as protoc) plus the kind's cross toolchain."""
    return tuple(sorted(set(recipe.toolchain.debian) | set(PACKAGES[recipe.kind])))


def same_version_check(kind: Kind) -> str:
    """A shell snippet failing the toolchain image when paired packages differ in version."""
    checks = []
    for a, b in SAME_VERSION.get(kind, ()):
        checks.append(f'va=$(dpkg-query -W -f "\\${{Version}}" {a}); vb=$(dpkg-query -W -f "\\${{Version}}" {b}); '
                      f'[ "$va" = "$vb" ] || {{ echo "{a} $va but {b} $vb: versions must match" >&2; exit 1; }}')
    return "; ".join(checks) or "true"


def version_command(kind: Kind) -> str:
    """A shell snippet writing the compilers' versions to /rvport-cross-toolchain.txt."""
    parts = [f'echo "{t}=$({t} version 2>/dev/null || {t} --version | head -n1)"' if t == "go"
             else f'echo "{t}=$({t} --version | head -n1)"' for t in COMPILERS.get(kind, ())]
    return "{ " + "; ".join(parts) + "; } > /rvport-cross-toolchain.txt" if parts else "true"


def describe(recipe: Recipe, platform: str, installed: Mapping[str, str], compilers: Mapping[str, str]) -> dict:
    """The toolchain record of a cross stage for result.json."""
    def version(pkg: str) -> str:
        # dpkg names Multi-Arch packages with their architecture (golang-go:amd64); foreign ones always
        if pkg in installed:
            return installed[pkg]
        return next((v for k, v in sorted(installed.items()) if ":" not in pkg and k.partition(":")[0] == pkg), "")

    return {
        "mode": "cross", "base": BASE, "build_platform": platform,
        "target": RUST_TARGET if recipe.kind is Kind.CARGO_STATICLIB else f"linux/{FOREIGN_ARCH}",
        "packages": {p: version(p) for p in PACKAGES[recipe.kind]},
        "compilers": dict(compilers), "env": dict(ENV[recipe.kind]),
    }
