"""Cross stages: the stage compiles on the build platform (no emulation) with a riscv64 cross toolchain.

Its image is the build-platform base (`bases/debian-trixie-xtc.yaml`: Debian trixie with GCC 14 for
riscv64) plus the kind's cross toolchain and the recipe's own Debian packages; which packages and which
environment each kind needs is data, in the kinds table (rvport/catalogue/kinds.py). Debian trixie has all
of it:

- Rust: the host's `rustc` and `cargo` with `libstd-rust-dev:riscv64` beside them. That package is
  Multi-Arch: same, so dpkg installs it only at exactly the host rustc's version (checked again in the
  image: same_version); cargo targets riscv64gc-unknown-linux-gnu and links with riscv64-linux-gnu-gcc.
  A recipe naming `rust: debian-rustc-web` gets `rustc-web` and `cargo-web` instead, with the riscv64 rlibs of
  `libstd-rust-web-dev:riscv64` unpacked beside them (same source version; kinds.CROSS_RUST says why).
- Go: Debian's `golang-go` with GOOS=linux GOARCH=riscv64 and cgo through riscv64-linux-gnu-gcc.

The smoke test of a cross stage still runs in the riscv64 base under QEMU (the runner's part).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rvport import resources
from rvport.catalogue import modes
from rvport.catalogue.kinds import CrossToolchain, cross_toolchain
from rvport.engine import compcache, render
from rvport.engine.stage import StageEnv, Toolchain
from rvport.target import DEBIAN_TARGET_ARCH

if TYPE_CHECKING:
    from rvport.catalogue.model import Recipe
    from rvport.catalogue.profiles import Profile
    from rvport.host import HostFacts
    from rvport.plan.planner import Stage

# the build-platform base every cross toolchain image starts from (the mode registry's)
(BASE,) = modes.facts(modes.Mode.CROSS).bases
# What the toolchain image lists of its compilers, "tool=first line of its --version" a line.
COMPILERS_FILE = "/rvport-cross-toolchain.txt"
# The packages unpacked rather than installed (CrossToolchain.unpack), "package:arch=version" a line; the
# template adds them to the image's package list.
UNPACKED_FILE = "/rvport-unpacked-packages.txt"
# The image's steps after apt's (resources/scripts), in its build context: unpack, match, compilers.
SCRIPT = "cross-toolchain.sh"


def toolchain_of(recipe: Recipe) -> CrossToolchain:
    cross = cross_toolchain(recipe.kind, recipe.toolchain.rust)
    if cross is None:  # the planner never makes such a stage (kinds table); a clear error all the same
        raise ValueError(f"{recipe.kind.value} has no riscv64 cross toolchain")
    return cross


def packages(recipe: Recipe) -> tuple[str, ...]:
    """The recipe's own Debian packages (build-platform tools such as protoc) plus the kind's cross
    toolchain."""
    return tuple(sorted(set(recipe.toolchain.debian) | set(toolchain_of(recipe).packages)))


def _args(*words: str) -> str:
    return " ".join(shlex.quote(w) for w in words)


def unpack_args(recipe: Recipe) -> str:
    """`cross-toolchain.sh unpack`'s arguments: the file of the packages unpacked, then each package of
    CrossToolchain.unpack with the one directory of it unpacked into /."""
    return _args(UNPACKED_FILE, *(w for pkg, d in toolchain_of(recipe).unpack for w in (pkg, d.strip("/"))))


def match_args(recipe: Recipe) -> str:
    """`cross-toolchain.sh match`'s arguments: the file of the packages unpacked, then the pairs that must
    have one version (same_version: `version A B`), then those that must come from one source version
    (same_source, binNMU suffixes dropped; either package may be an unpacked one: `source A B`)."""
    cross = toolchain_of(recipe)
    rules = [
        *(("version", a, b) for a, b in cross.same_version),
        *(("source", a, b) for a, b in cross.same_source),
    ]
    return _args(UNPACKED_FILE, *(w for rule in rules for w in rule))


def compilers_args(recipe: Recipe) -> str:
    """`cross-toolchain.sh compilers`'s arguments: the file of the compilers' versions, then the compilers."""
    return _args(COMPILERS_FILE, *toolchain_of(recipe).compilers)


def describe(
    recipe: Recipe, platform: str, installed: Mapping[str, str], compilers: Mapping[str, str]
) -> dict:
    """The toolchain record of a cross stage for result.json."""
    cross = toolchain_of(recipe)

    def version(pkg: str) -> str:
        # dpkg names Multi-Arch packages with their architecture (golang-go:amd64); foreign ones always
        if pkg in installed:
            return installed[pkg]
        return next(
            (v for k, v in sorted(installed.items()) if ":" not in pkg and k.partition(":")[0] == pkg), ""
        )

    doc = {
        "mode": "cross",
        "base": BASE,
        "build_platform": platform,
        "target": cross.target,
        "packages": {p: version(p) for p in (*cross.packages, *(pkg for pkg, _ in cross.unpack))},
        "compilers": dict(compilers),
        "env": dict(cross.env),
    }
    if cross.unpack:
        doc["unpacked"] = {pkg: f"/{d.strip('/')}" for pkg, d in cross.unpack}
    if recipe.toolchain.rust:
        doc["rust"] = recipe.toolchain.rust
    return doc


def render_toolchain(recipe: Recipe, base: str) -> render.Rendered:
    """The image a cross stage compiles in: build-platform base + the kind's cross packages."""
    rendered = render.render(
        "cross-toolchain",
        {
            "BASE": base,
            "FOREIGN_ARCH": DEBIAN_TARGET_ARCH,
            "PACKAGES": render.packages_arg(packages(recipe)),
            "UNPACK": unpack_args(recipe),
            "MATCH": match_args(recipe),
            "COMPILERS": compilers_args(recipe),
        },
    )
    return dataclasses.replace(rendered, files=((SCRIPT, resources.script(SCRIPT)),))


def render_stage(
    stage: Stage, toolchain: str, profile: Profile, ccache: Mapping[str, str] | None = None
) -> render.Rendered:
    """The build stage: the kind's cross environment first, the recipe's own after it (it wins); `ccache`:
    the compiler cache's placeholders (StageEnv.ccache_values; none: off)."""
    return render.render(
        "cross",
        {
            "TOOLCHAIN": toolchain,
            "ENV": render.env_lines(stage.env),
            "PROFILE": profile.name,
            "CROSS_ENV": render.env_lines(toolchain_of(stage.recipe).env),
            **render.source_mount(stage.recipe.build_tree),
            **(ccache or compcache.OFF_VALUES),
        },
    )


class Cross:
    def bases(self, stage: Stage, host: HostFacts) -> tuple[tuple[str, str], ...]:
        return ((BASE, stage.platform),)

    def early(self, env: StageEnv) -> None:
        """The cross toolchain image needs only the build-platform base: made while the riscv64 base is."""
        self.toolchain(env)

    def toolchain(self, env: StageEnv) -> Toolchain:
        st = env.stage
        ((spec, platform),) = self.bases(st, env.host)
        xbase = env.base(spec, platform)
        env.record.images["build_base"] = xbase.image_id
        tc = env.image(xbase, render_toolchain(st.recipe, xbase.tag), "cross")
        env.record.toolchain = describe(st.recipe, st.platform, tc.packages, env.read(tc, COMPILERS_FILE))
        return tc

    def dockerfile(self, env: StageEnv, toolchain: Toolchain) -> render.Rendered:
        return render_stage(env.stage, toolchain.tag, env.profile, env.ccache_values(toolchain.packages))
