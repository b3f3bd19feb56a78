"""Build modes: one small interface, one implementation module per mode.

    emulated      native and qemu: the stage runs as riscv64 in the riscv64 base plus the recipe's packages
    cross         the stage runs on the build platform with the kind's riscv64 cross toolchain
    accelerated   a riscv64 stage whose compilers are native build-platform cross compilers (a prefix image)

Which class builds which mode is one static mapping here, `IMPLEMENTATIONS` (mode -> class), that a test
holds to the mode registry (rvport/catalogue/modes.py): every mode of the registry has one, and nothing else.
A mode is given a StageEnv (rvport/engine/stage.py), provided alike by the runner and by the bake export, and
answers two questions: which toolchain image the stage builds FROM, and the stage's Dockerfile. Modes never
import the runner or bake; which mode a stage has is the planner's decision (Stage.mode), and which kinds
support which modes is the mode registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from rvport.catalogue import modes as registry
from rvport.engine.images import BaseImage
from rvport.engine.modes.accelerated import Accelerated
from rvport.engine.modes.cross import Cross
from rvport.engine.modes.emulated import Emulated
from rvport.engine.render import Rendered
from rvport.engine.stage import StageEnv, Toolchain
from rvport.errors import HostNotReady
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Stage
from rvport.target import PLATFORM as RISCV64


class StageMode(Protocol):
    def bases(self, stage: Stage, host: HostFacts) -> tuple[tuple[str, str], ...]:
        """The bases (spec, platform) the mode's images start from, besides the stage's riscv64 base."""

    def early(self, env: StageEnv) -> None:
        """Make the mode's images that start from its own bases alone, not from the riscv64 base (the
        accelerated prefix, the cross toolchain image): `rvport build` and `rvport prepare` make them while
        the riscv64 base is still being made. `toolchain` and `dockerfile` find them made."""

    def toolchain(self, env: StageEnv) -> Toolchain:
        """The image the stage builds FROM (made through env; recorded in env.record where it says more)."""

    def dockerfile(self, env: StageEnv, toolchain: Toolchain) -> Rendered:
        """The stage's build Dockerfile, FROM `toolchain`."""


# Each buildable mode's implementation (tests/unit/catalogue/test_mode_registry.py: exactly the registry's
# modes).
IMPLEMENTATIONS: Mapping[Mode, type[StageMode]] = {
    Mode.NATIVE: Emulated,
    Mode.QEMU: Emulated,
    Mode.CROSS: Cross,
    Mode.ACCELERATED: Accelerated,
}


def of(mode: Mode) -> StageMode:
    """The implementation of a planned stage's mode (never Mode.AUTO: the planner decides)."""
    return IMPLEMENTATIONS[mode]()


@dataclass(frozen=True, kw_only=True)
class StageSetup:
    """What a stage builds with."""

    base: BaseImage  # the riscv64 base: every stage's smoke test runs in it
    toolchain: Toolchain  # the image the stage builds FROM, in the engine
    dockerfile: Rendered  # the stage's build Dockerfile


def bases(stage: Stage, host: HostFacts) -> tuple[tuple[str, str], ...]:
    """The bases (spec, platform) `setup` makes or finds for the stage, in its order: the riscv64 base, then
    the mode's own (a build-platform base). Pure: `rvport prepare` and `rvport build` make them side by side
    first."""
    own = of(stage.mode).bases(stage, host)
    declared = registry.facts(stage.mode).bases
    if any(spec not in declared for spec, _ in own):  # a bug: the registry says which bases a mode uses
        raise AssertionError(f"mode {stage.mode.value}: bases {own} beyond the registry's {declared}")
    return ((stage.recipe.toolchain.base, RISCV64),) + own


def setup(env: StageEnv) -> StageSetup:
    """A stage's images and Dockerfile, made in the engine as `rvport build` and `rvport prepare` both make
    them: the riscv64 base, the mode's toolchain image, the Dockerfile (an accelerated stage's prefix image
    made and its compilers checked). What they are is recorded in env.record (result.json) and env.used."""
    mode = of(env.stage.mode)
    base = env.base(env.stage.recipe.toolchain.base, RISCV64)
    env.record.images["base"] = base.image_id
    with env.timer("toolchain"):
        toolchain = mode.toolchain(env)
    if toolchain.image_id is None:  # LoadedToolchains always inspects the image; a clear error all the same
        raise HostNotReady(
            f"the toolchain image {toolchain.tag} is not in the engine",
            hint="with a non-docker builder, --load must be supported; see docs/troubleshooting.md",
        )
    env.record.images["toolchain"] = toolchain.image_id
    env.record.toolchain_packages = dict(toolchain.packages)
    return StageSetup(base=base, toolchain=toolchain, dockerfile=mode.dockerfile(env, toolchain))


def smoke_image(env: StageEnv, base: BaseImage) -> Toolchain:
    """The image a stage's smoke test runs in: the riscv64 base plus the recipe's smoke packages (the base
    itself when there are none). One image per recipe and base, shared by every profile: its packages are
    installed on the scalar profile's QEMU CPU (Debian's riscv64 packages are rv64gc code, and what apt does
    reads no CPU feature), and every container made from it is given its profile's CPU when it runs
    (StageEnv.riscv64_env: the smoke stage, a runtime check's client)."""
    recipe = env.stage.recipe
    pinned = tuple(f"{p.name}={p.version}" for p in recipe.toolchain.pins)  # what was built against
    return env.with_packages(base, recipe.smoke_debian + pinned, "smoke")
