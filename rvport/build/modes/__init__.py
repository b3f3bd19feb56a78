"""Build modes: one small interface, three implementations.

    emulated      native and qemu: the stage runs as riscv64 in the riscv64 base plus the recipe's packages
    cross         the stage runs on the build platform with the kind's riscv64 cross toolchain
    accelerated   a riscv64 stage whose compilers are native build-platform cross compilers (a prefix image)

A mode is given a StageEnv (rvport/build/stage.py), provided alike by the runner and by the bake export, and
answers two questions: which toolchain image the stage builds FROM, and the stage's Dockerfile. Modes never
import the runner or bake; which mode a stage has is the planner's decision (Stage.mode), and which kinds
support which modes is the kinds table (rvport/catalogue/kinds.py).
"""

from __future__ import annotations

from typing import Mapping, Protocol

from rvport.build.modes.accelerated import Accelerated
from rvport.build.modes.cross import Cross
from rvport.build.modes.emulated import Emulated
from rvport.build.render import Rendered
from rvport.build.stage import StageEnv, Toolchain
from rvport.plan.planner import Mode


class StageMode(Protocol):
    def toolchain(self, env: StageEnv) -> Toolchain:
        """The image the stage builds FROM (made through env; recorded in env.record where it says more)."""

    def dockerfile(self, env: StageEnv, toolchain: Toolchain) -> Rendered:
        """The stage's build Dockerfile, FROM `toolchain`."""


MODES: Mapping[Mode, StageMode] = {
    Mode.NATIVE: Emulated(), Mode.QEMU: Emulated(), Mode.CROSS: Cross(), Mode.ACCELERATED: Accelerated(),
}


def of(mode: Mode) -> StageMode:
    """The implementation of a planned stage's mode (never Mode.AUTO: the planner decides)."""
    return MODES[mode]
