"""Accelerated riscv64 stages: the stage stays riscv64 (Python, pip, CMake and build backends run under QEMU),
while its C and C++ compilers are native cross compilers of the build platform targeting riscv64.

The cross toolchain is a pinned, cached input: Debian's riscv64 cross GCC and binutils from the build-platform
base (bases/debian-trixie-xtc.yaml, made by rvport.engine.images.ensure_base), gathered by a small stage
into a self-contained prefix, /opt/xtc (drivers, cc1/cc1plus, the build platform's loader and shared
libraries), and loaded as an image. A riscv64 build stage takes it with `COPY --from=<that image>` and links
it to its own headers, libraries and GCC files (dockerfiles/accelerated.Dockerfile), so the cross compiler
must be the stage's GCC version: checked here from package versions before anything is built, and again inside
the stage.

Stages that compile Rust (kinds.compiles_rust: a cargo kind, or a recipe whose toolchain names `rust:` or
installs rustc/cargo) get more in the same prefix, from a second build-platform base
(bases/debian-trixie-xtc-rust.yaml, which adds rustc-web): the build platform's rustc, its own standard
library (for build scripts and proc-macros, which run on the build platform) and a native linker for them. The
target's standard library is the stage's own riscv64 one, so the native rustc must be the stage's rustc
version (RUST_MATCHED). Cargo, build backends and Python stay riscv64; cargo is told to target
riscv64gc-unknown-linux-gnu with that rustc (RUST_ENV).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rvport import resources
from rvport.catalogue import kinds, modes
from rvport.catalogue.bases import BaseSpec, load_base
from rvport.catalogue.kinds import KINDS
from rvport.engine import compcache, render
from rvport.engine.events import OnPhase
from rvport.engine.images import BaseImage, ensure_image, installed_packages
from rvport.engine.modes.emulated import riscv64_toolchain
from rvport.engine.stage import StageEnv, Toolchain
from rvport.errors import BuildFailed, HostNotReady, RecipeError
from rvport.target import BUILD_HOSTS, DOCKER_PLATFORM, HOST_RUST_TARGET, TRIPLET
from rvport.target import PLATFORM as RISCV64
from rvport.vocab import BuildTree, Kind

if TYPE_CHECKING:
    from rvport.catalogue.profiles import Profile
    from rvport.host import HostFacts
    from rvport.plan.planner import Stage

# the build-platform bases of the prefix (the mode registry's): per Debian suite, one with the cross GCC and
# one with the build platform's rustc too; a stage takes the one of its riscv64 base's suite (xtc_base), and
# the first of each (trixie's) when none is of that suite (a riscv64 base of RVPORT_BASES of another suite)
XTC_BASES = modes.facts(modes.Mode.ACCELERATED).bases
XTC_BASE = XTC_BASES[0]
PREFIX = "/opt/xtc"
PREFIX_FORMAT = 2  # bump when the prefix layout changes

# What must match between the riscv64 stage (left: its package) and the cross toolchain (right: the build
# platform's package); {v} is the GCC major version.
MATCHED = (
    ("gcc-{v}", f"gcc-{{v}}-{TRIPLET}"),
    ("g++-{v}", f"g++-{{v}}-{TRIPLET}"),
    ("libgcc-{v}-dev", "libgcc-{v}-dev-riscv64-cross"),
    ("libstdc++-{v}-dev", "libstdc++-{v}-dev-riscv64-cross"),
    (f"binutils-{TRIPLET}", f"binutils-{TRIPLET}"),
)
# The same for Rust: the stage's riscv64 standard library is used by the build platform's rustc, which is
# Debian's rustc-web (trixie: a newer Rust than its rustc) or its rustc (sid, which has no rustc-web): the
# pairs of the one the prefix's base has.
RUST_MATCHED = (
    (("rustc-web", "rustc-web"), ("libstd-rust-web-dev", "libstd-rust-web-dev")),
    (("rustc", "rustc"), ("libstd-rust-dev", "libstd-rust-dev")),
)


def rust_matched(cross: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The Rust pairs of the rustc the cross toolchain has (the first, rustc-web, when it has none)."""
    return next((pairs for pairs in RUST_MATCHED if pairs[0][1] in cross), RUST_MATCHED[0])


# What cargo and pyo3 are told in a Rust stage: cross mode's cargo environment (riscv64 target, the riscv64
# linker and C compilers for build scripts) with the prefix's rustc; the recipe's own env comes after and
# wins. The linker of the build platform's own target (build scripts, proc-macros) is the prefix's native gcc
# (rust_env); setup.sh adds PYO3_CROSS_LIB_DIR, the stage Python's standard library directory, in
# /opt/xtc/stage.env.
RUST_ENV = {"RUSTC": f"{PREFIX}/rust/bin/rustc", **KINDS[Kind.CARGO_STATICLIB].cross.env}


def assemble_sh() -> str:
    """Gathers the cross toolchain into /opt/xtc, in the build-platform base (resources/scripts)."""
    return resources.text("scripts", "xtc-assemble.sh")


def setup_sh() -> str:
    """Links /opt/xtc into a riscv64 stage, in the stage (resources/scripts)."""
    return resources.text("scripts", "xtc-setup.sh")


class ToolchainMismatch(BuildFailed):
    """The cross compiler is not the stage's compiler version: its objects would not be the stage's."""


@dataclass(frozen=True, kw_only=True)
class XtcImage:
    """The loaded prefix image and what is in it."""

    tag: str
    image_id: str
    platform: str  # the platform its binaries run on (the build platform)
    gcc_major: str
    packages: Mapping[str, str] = field(default_factory=dict)  # cross packages -> Debian version
    rust: bool = False  # the prefix holds the build platform's rustc (RUST_MATCHED)
    built: bool = False

    def to_json(self) -> dict:
        return {
            "tag": self.tag,
            "image_id": self.image_id,
            "platform": self.platform,
            "gcc_major": self.gcc_major,
            "rust": self.rust,
            "packages": dict(sorted(self.packages.items())),
        }


def host_platform(arch: str) -> str:
    platform = DOCKER_PLATFORM.get(arch)
    if platform is None or arch not in BUILD_HOSTS:
        raise HostNotReady(
            f"accelerated stages need an x86_64 or aarch64 host, not {arch}",
            hint="use --mode qemu (or native on a riscv64 host)",
        )
    return platform


_SUFFIX = re.compile(r"(cross[0-9]+|\+b[0-9]+)+\Z")


# Source versions of one upstream GCC release, one Debian revision apart, accepted as a pair (stage, cross):
# the compiler proper differs (another snapshot of the release branch), while the headers, libgcc and
# libstdc++ the cross compiler builds against are the stage's own. Identical machine code is then NOT
# promised; each pair names what its revision changes and how it was compared (docs/accelerated.md).
REVISIONS_ACCEPTED: Mapping[tuple[str, str], str] = {
    (
        "16.2.0-4",
        "16.2.0-3",
    ): "Debian sid's riscv64 gcc-16 against its amd64 cross gcc-16: the gcc-16 branch of "
    "2026-10-24 against that of 2026-09-18 (docs/accelerated.md, 'GCC 16 on sid')",
}


def source_version(version: str) -> str:
    """A Debian version without the cross rebuild and binNMU suffixes: 14.2.0-19cross1 -> 14.2.0-19."""
    return _SUFFIX.sub("", version)


def gcc_major(packages: Mapping[str, str]) -> str:
    """The GCC major version of the cross toolchain, from its package names."""
    majors = sorted({m.group(1) for p in packages if (m := re.fullmatch(rf"gcc-(\d+)-{TRIPLET}", p))})
    if len(majors) != 1:
        raise HostNotReady(
            f"the build-platform base has {len(majors) or 'no'} riscv64 cross GCC "
            f"versions ({', '.join(majors) or 'none'}); exactly one is needed",
            hint=f"the build-platform base (bases/{XTC_BASE}.yaml, or the one of the stage's suite) must "
            f"list one gcc-N-{TRIPLET}",
        )
    return majors[0]


def check_versions(
    stage: Mapping[str, str],
    cross: Mapping[str, str],
    major: str,
    rust: bool = False,
    *,
    complete: bool = True,
) -> dict[str, str]:
    """The stage's compiler packages against the cross toolchain's: same source version or ToolchainMismatch.

    With `rust`, the stage's rustc and riscv64 standard library against the build platform's rustc too.
    `complete=False` says `stage` may lack packages its toolchain image will add (a bake export, where that
    image is not built yet): a package missing from it is then left to the stage's own check (setup.sh).
    Returns what was compared ("gcc-14": "14.2.0-19", ...) for the record.
    """
    compared: dict[str, str] = {}
    problems: list[str] = []
    for left, right in MATCHED + (rust_matched(cross) if rust else ()):
        s_name, c_name = left.format(v=major), right.format(v=major)
        s_ver, c_ver = stage.get(s_name), cross.get(c_name)
        if c_ver is None:
            problems.append(f"the cross toolchain has no {c_name}")
        elif s_ver is None:
            if complete:
                problems.append(f"the stage has no {s_name} (the cross compiler is {c_name} {c_ver})")
        elif (pair := (source_version(s_ver), source_version(c_ver))) in REVISIONS_ACCEPTED:
            compared[s_name] = f"{s_ver} (cross {c_ver}: accepted revision pair)"
        elif pair[0] != pair[1]:
            problems.append(f"stage {s_name} {s_ver} != cross {c_name} {c_ver}")
        else:
            compared[s_name] = s_ver
    if problems:
        raise ToolchainMismatch(
            "accelerated: the cross compiler is not the riscv64 stage's compiler version: "
            + "; ".join(problems),
            hint="its headers, libgcc, libstdc++ (and Rust standard library) come from the stage, so the "
            "versions must be equal: the build-platform base of the stage's suite (one of "
            + ", ".join(f"bases/{name}.yaml" for name in XTC_BASES)
            + ") and the stage's base must be made from one state of that suite's archive (rebuild both), "
            "or build with --mode qemu",
        )
    return compared


def rust_env(platform: str) -> dict[str, str]:
    """RUST_ENV plus the native linker for the build platform's own target (build scripts, proc-macros)."""
    host = HOST_RUST_TARGET.get(platform)
    if host is None:
        raise HostNotReady(
            f"accelerated Rust stages need an x86_64 or aarch64 build platform, not {platform}",
            hint="use --mode qemu",
        )
    return {**RUST_ENV, f"CARGO_TARGET_{host.upper().replace('-', '_')}_LINKER": f"{PREFIX}/native/bin/cc"}


def render_prefix(xtc_base_tag: str, major: str, platform: str, rust: bool = False) -> render.Rendered:
    return render.render(
        "accelerated-prefix",
        {
            "XTC_BASE": xtc_base_tag,
            "GCC_MAJOR": major,
            "XTC_PLATFORM": platform,
            "RUST": "rust" if rust else "",
        },
    )


def render_stage(
    *,
    toolchain: str,
    xtc: XtcImage,
    env: Mapping[str, str],
    profile: Profile,
    ccache: Mapping[str, str] | None = None,
    build_tree: BuildTree = BuildTree.DISK,
) -> render.Rendered:
    """The build stage; a Rust prefix adds rust_env() under the stage's env (the recipe's own env wins).
    `ccache`: the compiler cache's placeholders (StageEnv.ccache_values; none: off); `build_tree`: the
    recipe's, where /src lives."""
    full = {**rust_env(xtc.platform), **env} if xtc.rust else dict(env)
    return render.render(
        "accelerated",
        {
            "TOOLCHAIN": toolchain,
            "XTC_IMAGE": xtc.tag,
            "XTC_PLATFORM": xtc.platform,
            "ENV": render.env_lines(full),
            "PROFILE": profile.name,
            "CPUINFO_CHECK": render.cpuinfo_check(profile),
            **render.source_mount(build_tree),
            **(ccache or compcache.OFF_VALUES),
        },
    )


def prefix_key(base: BaseImage, rendered: render.Rendered) -> str:
    doc = "\n".join(
        [
            f"xtc-{PREFIX_FORMAT}",
            base.image_id,
            rendered.sha256,
            hashlib.sha256(assemble_sh().encode()).hexdigest(),
            hashlib.sha256(setup_sh().encode()).hexdigest(),
        ]
    )
    return hashlib.sha256(doc.encode()).hexdigest()


def ensure_prefix(
    base: BaseImage,
    rust: bool = False,
    *,
    tmp_root: Path,
    log_path: Path,
    builder: str | None = None,
    on_line: Callable[[str], None] | None = None,
    on_phase: OnPhase | None = None,
) -> XtcImage:
    """The prefix image for this build-platform base: built and loaded once per inputs, then reused by tag."""
    major = gcc_major(base.packages)
    rendered = render_prefix(base.tag, major, base.platform, rust)
    key = prefix_key(base, rendered)
    tag = f"rvport/xtc:{base.spec}-{base.platform.split('/')[-1]}-{key[:12]}"
    # the image holds build-platform binaries for riscv64 stages; it is made for the riscv64 platform
    # (FROM scratch) so those stages can COPY --from it by name without a registry
    image = ensure_image(
        tag,
        {"Dockerfile": rendered.text, "xtc-assemble.sh": assemble_sh(), "xtc-setup.sh": setup_sh()},
        platform=RISCV64,
        tmp_root=tmp_root,
        log_path=log_path,
        what="the accelerated prefix image",
        builder=builder,
        on_line=on_line,
        on_phase=on_phase,
        network="none",
        labels=(("org.rvport.key", key), ("org.rvport.xtc.base", base.tag)),
    )
    rust_names = {right for pairs in RUST_MATCHED for _, right in pairs} if rust else set()
    packages = {
        p: v for p, v in base.packages.items() if p.endswith((TRIPLET, "riscv64-cross")) or p in rust_names
    }
    return XtcImage(
        tag=tag,
        image_id=image.image_id,
        platform=base.platform,
        gcc_major=major,
        packages=packages,
        rust=rust,
        built=image.built,
    )


def _spec(name: str, role: str) -> BaseSpec:
    """A base spec the mode reads to choose its build-platform base; one that cannot be loaded is an error
    naming its file (exit 3), never a silent default."""
    try:
        return load_base(name)
    except RecipeError as e:
        raise RecipeError(
            f"accelerated: {role} {name!r} cannot be loaded: {e.message}",
            hint=(f"{e.hint}; " if e.hint else "")
            + "the accelerated prefix's build-platform base is chosen by this spec's Debian suite: fix the "
            "file (each problem is listed with its line), or unset RVPORT_BASES for the built-in bases",
            problems=e.problems,
        ) from None


def has_rustc(base: str) -> bool:
    """Does this build-platform base install a rustc (rustc or rustc-web)?"""
    return any(p in kinds.RUST_PACKAGES for p in _spec(base, "the build-platform base").packages)


def xtc_choice(riscv64_base: str, rust: bool) -> tuple[str, str | None]:
    """The build-platform base of a stage on `riscv64_base` (xtc_base), and, when it is not of the stage's
    Debian suite, a note saying so (for the log and the version check's message)."""
    suite = _spec(riscv64_base, "the stage's base").suite
    fitting = [name for name in XTC_BASES if has_rustc(name) == rust]
    suites = {name: _spec(name, "the build-platform base").suite for name in fitting}
    same = [name for name in fitting if suites[name] == suite]
    if same:
        return same[0], None
    name = fitting[0]
    return name, (
        f"the stage's base {riscv64_base} is of Debian {suite}, which none of the accelerated mode's "
        f"build-platform bases is ({', '.join(fitting)}): the prefix is {name}'s, of {suites[name]}"
    )


def xtc_base(riscv64_base: str, rust: bool) -> str:
    """The build-platform base of a stage on `riscv64_base`: the one of the same Debian suite (sid's for a sid
    stage, its cross GCC 16 matching sid's gcc-16), with a rustc when the stage compiles Rust. A riscv64 base
    of a suite that no build-platform base of the mode registry is (one added through RVPORT_BASES) has no
    twin: it gets trixie's, whose version check then names what differs and why. A spec that cannot be
    loaded (the stage's base or a build-platform base) is a RecipeError naming its file."""
    return xtc_choice(riscv64_base, rust)[0]


class Accelerated:
    """The mode: the riscv64 stage's own toolchain image, and a Dockerfile that takes the prefix image."""

    def bases(self, stage: Stage, host: HostFacts) -> tuple[tuple[str, str], ...]:
        """The build-platform base of the prefix: with the build platform's rustc when the stage compiles
        Rust."""
        return (
            (
                xtc_base(stage.recipe.toolchain.base, kinds.compiles_rust(stage.recipe)),
                host_platform(host.arch),
            ),
        )

    def toolchain(self, env: StageEnv) -> Toolchain:
        return riscv64_toolchain(env)

    def early(self, env: StageEnv) -> None:
        """The prefix image needs only the build-platform base: made while the riscv64 base is still being
        made."""
        self._prefix(env)

    def _prefix(self, env: StageEnv) -> XtcImage:
        st = env.stage
        rust = kinds.compiles_rust(
            st.recipe
        )  # the Rust part of the prefix (bases() picks the base with rustc)
        ((spec, platform),) = self.bases(st, env.host)
        env.step(f"accelerated: cross toolchain prefix ({platform}{', with rustc' if rust else ''})")
        _, note = xtc_choice(st.recipe.toolchain.base, rust)
        if note:
            env.line(f"accelerated: {note}")
        xtc_base = env.base(spec, platform)
        with env.timer("accelerated"):
            xtc = ensure_prefix(
                xtc_base,
                rust,
                tmp_root=env.tmp_root,
                log_path=env.log_path,
                builder=env.builder,
                on_line=env.line,
                on_phase=env.phase,
            )
        env.use("xtc", xtc.tag, xtc.image_id, made=xtc.built)
        return xtc

    def dockerfile(self, env: StageEnv, toolchain: Toolchain) -> render.Rendered:
        """The prefix image made, the stage's compilers checked against it and recorded, the Dockerfile
        rendered."""
        st = env.stage
        rust = kinds.compiles_rust(st.recipe)
        xtc = self._prefix(env)
        # in the engine: always for `rvport build`; for a bake export only when the stage has no packages of
        # its own (its toolchain is the base), else the toolchain image is a bake target, made later
        in_engine = toolchain.image_id is not None
        stage_packages = {**env.base(st.recipe.toolchain.base, RISCV64).packages, **toolchain.packages}
        if (
            not stage_packages and in_engine
        ):  # a base named by digest, no extra packages: ask the image itself
            stage_packages = installed_packages(toolchain.tag, RISCV64)
        if stage_packages or in_engine:
            try:
                compared = check_versions(
                    stage_packages, xtc.packages, xtc.gcc_major, rust, complete=in_engine
                )
            except ToolchainMismatch as e:
                _, note = xtc_choice(st.recipe.toolchain.base, rust)
                if note is None:
                    raise
                raise ToolchainMismatch(f"{e.message} ({note})", hint=e.hint, detail=e.detail) from None
            env.line(
                "accelerated: the cross toolchain matches the stage: "
                + ", ".join(f"{k} {v}" for k, v in compared.items())
            )
        env.record.images["xtc"] = xtc.image_id
        env.record.images["xtc_tag"] = xtc.tag
        for name, version in sorted(xtc.packages.items()):
            env.record.toolchain_packages[f"xtc:{name}"] = version
        # the compiler cache is keyed by the stage's packages and the cross toolchain's (their names differ)
        ccache = env.ccache_values({**stage_packages, **xtc.packages})
        return render_stage(
            toolchain=toolchain.tag,
            xtc=xtc,
            env=st.env,
            profile=env.profile,
            ccache=ccache,
            build_tree=st.recipe.build_tree,
        )
