"""Recipe kinds as one table: what rvport needs to know per kind.

Which build modes serve which kinds is the mode registry's (modes.py; `KindFacts.modes` reads it). The
planner reads the memory a compile job needs; the build reads the cross toolchain of the kinds that can be
cross-compiled (rvport/engine/modes/cross.py) and how a smoke test installs the artifacts.
A recipe still chooses among its kind's modes with its own `modes:` list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from rvport.catalogue import modes
from rvport.catalogue.model import RUST_WEB, Recipe
from rvport.target import GOARCH, PLATFORM, RUST_TARGET, TRIPLET
from rvport.vocab import Kind, Mode


@dataclass(frozen=True, kw_only=True)
class CrossToolchain:
    """A kind's riscv64 cross toolchain on the build platform (cross stages)."""

    packages: tuple[str, ...]  # Debian packages (build platform, or `:riscv64`) on the base
    env: Mapping[str, str]  # the stage's environment; the recipe's env comes after, wins
    compilers: tuple[str, ...]  # their `--version` is recorded in result.json
    target: str  # what the toolchain targets, for result.json
    same_version: tuple[tuple[str, str], ...] = ()  # package pairs that must have one version, or no image
    # riscv64 packages downloaded (apt-get download) and unpacked, the one directory of each named here,
    # instead of installed: (package, directory inside it). For a Multi-Arch: same library whose riscv64 build
    # cannot be installed beside the build platform's because their Debian versions differ by a binNMU suffix.
    unpack: tuple[tuple[str, str], ...] = ()
    # package pairs (installed or unpacked) that must come from one source version: binNMU suffixes (+bN)
    # dropped
    same_source: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class KindFacts:
    kind: Kind
    job_memory_gib: float  # memory one compile job may need: bounds --jobs on a small host
    # its artifacts are wheels built for one CPython (cpXY): planned once per --python, smoke-tested by
    # pip-installing them, repaired to a manylinux tag (WHEEL_KINDS); a kind without a Python (a static
    # library, a Go binary) is planned once, on its recipe's own base, whatever --python says
    per_python: bool = False
    cross: CrossToolchain | None = None

    @property
    def installs_wheels(self) -> bool:
        """Its artifacts are wheels: its smoke test pip-installs them (WHEEL_KINDS)."""
        return self.per_python

    @property
    def modes(self) -> frozenset[Mode]:
        """The build modes a recipe of this kind may list (the mode registry's `kinds`)."""
        return modes.modes_of(self.kind)


# The unversioned triplet names (riscv64-linux-gnu-gcc, -g++) for build scripts and linkers.
_C = (f"gcc-{TRIPLET}", f"g++-{TRIPLET}")

KINDS: Mapping[Kind, KindFacts] = {
    k.kind: k
    for k in (
        KindFacts(
            kind=Kind.PYTHON_WHEEL,
            per_python=True,
            job_memory_gib=1.5,
        ),
        KindFacts(
            kind=Kind.TORCH_WHEEL,
            per_python=True,
            job_memory_gib=4.0,
        ),
        KindFacts(
            kind=Kind.CARGO_STATICLIB,
            job_memory_gib=2.0,
            cross=CrossToolchain(
                # the riscv64 standard library beside the host's rustc: Multi-Arch: same, so only at the
                # host rustc's exact version (checked again in the image: same_version)
                packages=(*_C, "rustc", "cargo", "libstd-rust-dev:riscv64"),
                env={
                    "CARGO_BUILD_TARGET": RUST_TARGET,  # even a bare `cargo build` makes riscv64 objects
                    "CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_LINKER": f"{TRIPLET}-gcc",
                    "CC_riscv64gc_unknown_linux_gnu": f"{TRIPLET}-gcc",
                    "CXX_riscv64gc_unknown_linux_gnu": f"{TRIPLET}-g++",
                    "AR_riscv64gc_unknown_linux_gnu": f"{TRIPLET}-ar",
                },
                compilers=("rustc", "cargo", f"{TRIPLET}-gcc"),
                target=RUST_TARGET,
                same_version=(("rustc", "libstd-rust-dev:riscv64"),),
            ),
        ),
        KindFacts(
            kind=Kind.GO_BINARY,
            job_memory_gib=1.5,
            cross=CrossToolchain(
                packages=(*_C, "golang-go"),
                env={
                    "GOOS": "linux",
                    "GOARCH": GOARCH,
                    "CGO_ENABLED": "1",  # Go turns cgo off when cross-compiling unless told
                    "CC": f"{TRIPLET}-gcc",
                    "CXX": f"{TRIPLET}-g++",
                },
                compilers=("go", f"{TRIPLET}-gcc"),
                target=PLATFORM,
            ),
        ),
    )
}

# The kinds whose artifacts are wheels (cpXY, `per_python`): their smoke tests pip-install them, their stages
# repair them to a manylinux tag (auditwheel) unless the recipe says otherwise (`manylinux:`). The one
# definition: the loader, the planner and the CLI import it.
WHEEL_KINDS = frozenset(k for k, f in KINDS.items() if f.per_python)


# Rust toolchains a recipe may name (`toolchain: rust:`) that change a cargo kind's cross toolchain. The
# default (no `rust:`, or `debian`) is the kind's own: Debian's rustc and cargo with libstd-rust-dev:riscv64.
#
# debian-rustc-web: Debian's rustc-web and cargo-web (a newer Rust than trixie's rustc, kept current for the
# browsers). They install /usr/bin/rustc and /usr/bin/cargo (they conflict with rustc and cargo and provide
# them), and cargo runs the `rustc` on PATH, so the stage's commands are the same. The riscv64 standard
# library is libstd-rust-web-dev:riscv64 (its rlibs in /usr/lib/rustlib/riscv64gc-unknown-linux-gnu, where
# rustc-web's sysroot /usr finds them). It is Multi-Arch: same like libstd-rust-dev, but the build platform's
# rustc-web may be a binNMU (1.96.0+dfsg1-1~deb13u1+b1 on amd64, while riscv64 has 1.96.0+dfsg1-1~deb13u1),
# and dpkg then refuses the pair: so the riscv64 rlibs are unpacked, not installed, and must come from the
# same source version as rustc-web (the rule the accelerated mode applies to the same pair).
CROSS_RUST: Mapping[str, CrossToolchain] = {
    RUST_WEB: replace(
        KINDS[Kind.CARGO_STATICLIB].cross,
        packages=(*_C, "rustc-web", "cargo-web"),
        same_version=(),
        unpack=(("libstd-rust-web-dev:riscv64", f"usr/lib/rustlib/{RUST_TARGET}"),),
        same_source=(("rustc-web", "libstd-rust-web-dev:riscv64"),),
    ),
}


def cross_toolchain(kind: Kind, rust: str | None = None) -> CrossToolchain | None:
    """A kind's riscv64 cross toolchain, for a recipe naming `rust` (toolchain.rust) where that changes it."""
    cross = KINDS[kind].cross
    if cross is not None and kind is Kind.CARGO_STATICLIB and rust in CROSS_RUST:
        return CROSS_RUST[rust]
    return cross


# Debian packages that mean a stage compiles Rust.
RUST_PACKAGES = frozenset({"rustc", "rustc-web", "cargo", "cargo-web"})


def compiles_rust(recipe: Recipe) -> bool:
    """Does this recipe's stage compile Rust: a cargo kind, a recipe naming `rust:`, or one installing
    rustc/cargo?"""
    return (
        recipe.kind is Kind.CARGO_STATICLIB
        or bool(recipe.toolchain.rust)
        or any(p in RUST_PACKAGES for p in recipe.toolchain.debian)
    )


def compiles_go(recipe: Recipe) -> bool:
    """Does this recipe's stage run the Go compiler: a go-binary, or a recipe installing golang-go to
    build?"""
    return recipe.kind is Kind.GO_BINARY or any(p.startswith("golang") for p in recipe.toolchain.debian)


def facts(kind: Kind) -> KindFacts:
    return KINDS[kind]
