"""`rvport prepare`: make every image a build of a plan needs, ahead of time, so a CI job can cache them.

Per stage, by the runner's own code path: a StageEnv with the runner's toolchain images (LoadedToolchains) and
bases, `modes.setup` (the riscv64 base, the mode's toolchain image, and for accelerated stages the
build-platform base and the cross toolchain prefix, rvport/xtc, with its compiler check), then the smoke image
(`modes.smoke_image`), and for a stage with a runtime image (rvport/build/runtime.py) the image it is built FROM.
The runtime image itself holds the stage's artifacts, which prepare does not build: it is listed when the engine
has it under its tag with the plan's runtime key and FROM image (labels; whether it holds the artifacts a build
would make is only known to the build, which makes it again if not), else listed as "made by rvport build"
(`pending`) and left out of --tags. So the images are the ones `rvport build` with the same options makes and uses: same
Dockerfiles, same tags. No source is fetched, nothing is compiled. What the stages used (StageEnv.used) is
listed: the images to keep between CI runs (docs/ci.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from rvport.build import modes, runtime
from rvport.build.images import BaseImage
from rvport.build.progress import Progress
from rvport.build.runner import BuildOptions
from rvport.build.stage import LoadedToolchains, StageEnv, StageRecord
from rvport.plan.planner import Plan, Stage


@dataclass(frozen=True, kw_only=True)
class Prepared:
    what: str                           # base, build, cross, smoke, xtc, runtime (its FROM image), app (the
                                        # runtime image itself)
    stage: str | None                   # None for a base (shared by stages)
    tag: str
    image_id: str                       # "" when pending
    made: bool                          # False: it was already in the engine
    pending: bool = False               # not in the engine: `rvport build` makes it (the runtime image)

    def to_json(self) -> dict:
        return {"what": self.what, "stage": self.stage, "tag": self.tag, "image_id": self.image_id,
                "made": self.made, "pending": self.pending}


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
        app = None
        if st.runtime is not None:
            from_id = runtime.from_image(env, setup.base).image_id
            assert from_id is not None
            info = runtime.existing(st.runtime, from_id)
            app = Prepared(what="app", stage=st.name, tag=st.runtime.tag, image_id=info["id"] if info else "",
                           made=False, pending=info is None)
            if info is None:
                self.rep.step(st.name, f"runtime image {st.runtime.tag}: not in the engine, made by rvport build")
        for used in env.used:
            self.images.setdefault(used.tag, Prepared(what=used.what, stage=None if used.what == "base" else st.name,
                                                      tag=used.tag, image_id=used.image_id or "", made=used.made))
        if app is not None:
            self.images[app.tag] = app
