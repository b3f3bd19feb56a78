"""`rvport prepare`: make every image a build of a plan needs, ahead of time, so a CI job can cache them.

Per stage, by the runner's own code path: a StageEnv with the runner's toolchain images (LoadedToolchains) and
bases, `modes.setup` (the riscv64 base, the mode's toolchain image, and for accelerated stages the
build-platform base and the cross toolchain prefix, rvport/xtc, with its compiler check), then the smoke image
(`modes.smoke_image`). So the images are the ones `rvport build` with the same options makes and uses: same
Dockerfiles, same tags. No source is fetched, nothing is compiled. What the stages used (StageEnv.used) is
listed: the images to keep between CI runs (docs/ci.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from rvport.build import modes
from rvport.build.images import BaseImage
from rvport.build.progress import Progress
from rvport.build.runner import BuildOptions
from rvport.build.stage import LoadedToolchains, StageEnv, StageRecord
from rvport.plan.planner import Plan, Stage


@dataclass(frozen=True, kw_only=True)
class Prepared:
    what: str                           # base, build, cross, smoke, xtc
    stage: str | None                   # None for a base (shared by stages)
    tag: str
    image_id: str
    made: bool                          # False: it was already in the engine

    def to_json(self) -> dict:
        return {"what": self.what, "stage": self.stage, "tag": self.tag, "image_id": self.image_id,
                "made": self.made}


class Preparer:
    """The images of a plan's stages, made as a `rvport build` with the same options makes them (of the build
    options, output, fetch (the cache and the CA bundle), builder, base_image and smoke count here)."""

    def __init__(self, plan: Plan, opts: BuildOptions, rep: Progress, *, bases: dict[str, BaseImage] | None = None):
        self.plan, self.opts, self.rep = plan, opts, rep
        self.logs = opts.output / "logs"
        self._bases = opts.bases(bases)
        self._toolchains = LoadedToolchains(opts.fetch)
        self.images: dict[str, Prepared] = {}      # by tag, in the order first used

    def run(self) -> list[Prepared]:
        for st in self.plan.stages:
            self.rep.begin(st.name, f"images for {st.recipe.ref} [{st.mode.value}]")
            try:
                self.stage(st)
            except BaseException:
                self.rep.end(st.name, "failed")
                raise
            self.rep.end(st.name, "ok")
        return list(self.images.values())

    def stage(self, st: Stage) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        env = StageEnv(stage=st, profile=self.plan.request.profile, host=self.plan.host, record=StageRecord(stage=st),
                       bases=self._bases, images=self._toolchains, progress=self.rep,
                       log_path=self.logs / f"prepare-{st.name}.log", tmp_root=self.opts.fetch.cache.root / "tmp",
                       builder=self.opts.builder)
        setup = modes.setup(env)
        if self.opts.smoke and st.recipe.smoke:
            modes.smoke_image(env, setup.base)
        for used in env.used:
            self.images.setdefault(used.tag, Prepared(what=used.what, stage=None if used.what == "base" else st.name,
                                                      tag=used.tag, image_id=used.image_id or "", made=used.made))
