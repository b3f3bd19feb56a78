"""Emulated stages (modes native and qemu): the stage runs as riscv64, natively on a riscv64 host and under
QEMU user emulation elsewhere, in the riscv64 base plus the recipe's Debian packages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rvport.engine import compcache, render
from rvport.engine.stage import StageEnv, Toolchain
from rvport.plan.planner import Mode
from rvport.target import PLATFORM

if TYPE_CHECKING:
    from rvport.catalogue.profiles import Profile
    from rvport.host import HostFacts
    from rvport.plan.planner import Stage


def riscv64_toolchain(env: StageEnv) -> Toolchain:
    """The riscv64 base plus the recipe's Debian packages (emulated and accelerated stages)."""
    recipe = env.stage.recipe
    return env.with_packages(
        env.base(recipe.toolchain.base, PLATFORM), recipe.toolchain.apt_packages, "build"
    )


def render_stage(
    stage: Stage, toolchain: str, profile: Profile, ccache: Mapping[str, str] | None = None
) -> render.Rendered:
    """The build stage; `ccache`: the compiler cache's placeholders (StageEnv.ccache_values; none: off)."""
    # under QEMU the stage first checks that /proc/cpuinfo is the profile's; natively it is the host's own
    check = render.cpuinfo_check(profile) if stage.mode is Mode.QEMU else ""
    return render.render(
        "build",
        {
            "TOOLCHAIN": toolchain,
            "ENV": render.env_lines(stage.env),
            "PROFILE": profile.name,
            "CPUINFO_CHECK": check,
            **render.source_mount(stage.recipe.build_tree),
            **(ccache or compcache.OFF_VALUES),
        },
    )


class Emulated:
    def bases(self, stage: Stage, host: HostFacts) -> tuple[tuple[str, str], ...]:
        return ()

    def early(self, env: StageEnv) -> None:
        pass  # every image of the stage starts from the riscv64 base

    def toolchain(self, env: StageEnv) -> Toolchain:
        return riscv64_toolchain(env)

    def dockerfile(self, env: StageEnv, toolchain: Toolchain) -> render.Rendered:
        # the toolchain image's packages (the base's among them); the stage script adds the compilers' content
        ccache = env.ccache_values(toolchain.packages)
        return render_stage(env.stage, toolchain.tag, env.profile, ccache)
