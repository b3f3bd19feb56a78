"""`rvport prepare`: make every image a build of a plan needs, ahead of time, so a CI job can cache them.

Per stage, by the runner's own code path: a StageEnv with the runner's toolchain images (LoadedToolchains) and
bases, `modes.setup` (the riscv64 base, the mode's toolchain image, and for accelerated stages the
build-platform base and the cross toolchain prefix, rvport/xtc, with its compiler check), and for a stage with
a runtime image (rvport/engine/runtime.py) the image it is built FROM; in a task of its own, the smoke image
(`modes.smoke_image`, also a runtime check's client), which only the smoke test after the build needs. The
runtime image itself holds the stage's artifacts, which prepare does not build: it is listed when the engine
has it under its tag with the plan's runtime key and FROM image (labels; whether it holds the artifacts a
build would make is only known to the build, which makes it again if not), else listed as "made by rvport
build" (`pending`) and left out of --tags. So the images are the ones `rvport build` with the same options
makes and uses: same Dockerfiles, same tags. No source is fetched, nothing is compiled. What the stages used
(StageEnv.used) is listed: the images to keep between CI runs (docs/ci.md).

The work goes side by side (rvport/engine/parallel.py): every base the stages need first (the riscv64 base
on one worker, the build-platform bases on the other), then the stages' images, in the order a build needs
them: each stage's build images, then its smoke image. `rvport build` makes its images this way too, while its
stages build (rvport/engine/runner.py): a stage's build starts once its build images are made, its smoke test
once its smoke image is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from rvport.engine import debpins, modes, parallel, runtime
from rvport.engine.events import Phase
from rvport.engine.images import BaseImage
from rvport.engine.progress import Progress
from rvport.engine.stage import LoadedToolchains, RunOptions, StageEnv, StageRecord, Toolchain
from rvport.errors import RvportError
from rvport.plan.planner import Plan, Stage
from rvport.target import PLATFORM as RISCV64


@dataclass(frozen=True, kw_only=True)
class Prepared:
    what: str  # base, build, cross, smoke, xtc, runtime (its FROM image), app (the
    # runtime image itself)
    stage: str | None  # None for a base (shared by stages)
    tag: str
    image_id: str  # "" when pending
    made: bool  # False: it was already in the engine
    pending: bool = False  # not in the engine: `rvport build` makes it (the runtime image)

    def to_json(self) -> dict:
        return {
            "what": self.what,
            "stage": self.stage,
            "tag": self.tag,
            "image_id": self.image_id,
            "made": self.made,
            "pending": self.pending,
        }


class Preparer:
    """The images of a plan's stages, made as a `rvport build` with the same options makes them (of the
    options, output, fetch (the cache and the CA bundle), builder and base_image count here, and whether smoke
    tests run).

    Side by side (rvport/engine/parallel.py): first every base the stages need (modes.bases), then each
    stage's build images and then its smoke image (a task of its own), `workers` at a time. A stage whose
    images could not be made is in `errors`; `run` raises the first of them in plan order, `make` leaves them
    to the caller. `rvport build` (for_build) uses `start`, `wait` and `smoke_image` on a pool of its own: it
    builds each stage as soon as the stage's build images are made, while the smoke image and the later
    stages' images are being made, takes the smoke image made here for the smoke test (waiting for it then),
    and fails a stage whose images failed when it comes to need them, as if it had made them then.
    `rvport prepare` logs to OUTPUT/logs/prepare-<stage>.log and shows a row per stage; `rvport build` logs
    to the stage's own log and shows "<stage> images" rows. The smoke image is made while other work writes
    to those logs, so it logs to <log's name>.smoke-image.log and shows a row of its own (", smoke")."""

    def __init__(
        self,
        plan: Plan,
        opts: RunOptions,
        rep: Progress,
        *,
        smoke: bool = True,
        bases: dict[str, BaseImage] | None = None,
        for_build: bool = False,
        workers: int = parallel.WORKERS,
    ):
        self.plan, self.opts, self.rep, self.smoke, self.workers = plan, opts, rep, smoke, workers
        self.logs = opts.output / "logs"
        self._bases = opts.bases(bases)
        self._toolchains = LoadedToolchains(opts.fetch)
        self._log_prefix, self._row_suffix = ("", " images") if for_build else ("prepare-", "")
        self._used: dict[str, list[Prepared]] = {}  # by stage, in the order the stage used them
        self._early_used: dict[str, list[Prepared]] = {}  # ... and what its early task (modes: early) used
        self.errors: dict[str, RvportError] = {}  # by stage
        self.timings: dict[str, float] = {}  # by stage: how long its task took (waiting for bases too)
        self.smoke_timings: dict[str, float] = {}  # by stage: how long its smoke task took
        self._smoke_used: dict[str, list[Prepared]] = {}  # what its smoke task used
        self._started: float | None = None
        self._ended: float | None = None  # when the last task ended

    def run(self) -> list[Prepared]:
        for (
            st
        ) in self.plan.stages:  # pinned Debian packages: in the archive's signed index, or nothing is made
            debpins.check_recipe_pins(
                st.recipe, self.opts.fetch, allow_expired=self.opts.allow_expired_release
            )
        self.make()
        for st in self.plan.stages:
            if st.name in self.errors:
                raise self.errors[st.name]
        return self.prepared()

    def prepared(self) -> list[Prepared]:
        """Every image, once, in the order the stages (in plan order) first used them."""
        images: dict[str, Prepared] = {}
        for st in self.plan.stages:
            for p in (
                self._used.get(st.name, [])
                + self._smoke_used.get(st.name, [])
                + self._early_used.get(st.name, [])
            ):
                if p.what == "app" or p.tag not in images:
                    images[p.tag] = p
                elif p.made and not images[p.tag].made:  # made by the early task, found by the stage's
                    images[p.tag] = replace(images[p.tag], made=True)
        return list(images.values())

    def make(self) -> dict[str, RvportError]:
        """Every image, side by side (the smoke images too); the stages that failed, by name (a stage whose
        build images and smoke image both failed: the build images' error)."""
        with parallel.SideBySide(self.workers) as pool:
            self.start(pool)
            for st in self.plan.stages:
                self.wait(pool, st.name)
                if self.smokes(st):
                    smoke = self.smoke_image(pool, st.name)
                    if isinstance(smoke, RvportError):
                        self.errors.setdefault(st.name, smoke)
        return self.errors

    def smokes(self, st: Stage) -> bool:
        """Whether the stage's smoke image is made (a task of its own): unless smoke tests are off
        (--no-smoke), for a recipe with a smoke test, and for one whose runtime image has a check (its client
        runs in the smoke image)."""
        checked = st.runtime is not None and st.runtime.spec.check is not None
        return self.smoke and (bool(st.recipe.smoke) or checked)

    def smoke_log(self, name: str) -> Path:
        """Where stage `name`'s smoke task logs (beside the stage's images' log, not in it: other work writes
        there meanwhile)."""
        return self.logs / f"{self._log_prefix}{name}.smoke-image.log"

    def start(self, pool: parallel.SideBySide) -> None:
        """Hand the work to `pool`: first every base the stages need (the riscv64 base on one worker, the
        build-platform bases on the other), then the images that start from a build-platform base alone
        (modes: `early`), then each stage's images (a stage's task waits for the bases it needs; a base that
        failed fails it, so does its early task's failure)."""
        self.logs.mkdir(parents=True, exist_ok=True)
        self._started = time.monotonic()
        needed = dict.fromkeys(b for st in self.plan.stages for b in modes.bases(st, self.plan.host))
        for spec, platform in needed:
            pool.submit(("base", spec, platform), partial(self._base, spec, platform))
        early = [st for st in self.plan.stages if len(modes.bases(st, self.plan.host)) > 1]
        for st in early:
            pool.submit(("early", st.name), partial(self._early, st))
        for st in self.plan.stages:  # in the order a build needs them: build images, later the smoke image
            pool.submit(("stage", st.name), partial(self._timed, st, pool if st in early else None))
            if self.smokes(st):
                pool.submit(("smoke", st.name), partial(self._smoke, st))

    def wait(self, pool: parallel.SideBySide, name: str) -> RvportError | None:
        """Wait for stage `name`'s build images (not its smoke image: `smoke_image`); the error that stopped
        them, if any (also kept in `errors`)."""
        result = pool.result(("stage", name))
        if isinstance(result, RvportError):
            self.errors[name] = result
            return result
        return None

    def smoke_image(self, pool: parallel.SideBySide, name: str) -> Toolchain | RvportError:
        """Wait for stage `name`'s smoke image (a stage `smokes`): the image, or the error that stopped it."""
        return pool.result(("smoke", name))

    def span(self) -> float | None:
        """Seconds from the start of the work to the end of its last task (None before it started)."""
        if self._started is None:
            return None
        return round((self._ended or time.monotonic()) - self._started, 2)

    def _done(self) -> None:
        self._ended = max(self._ended or 0.0, time.monotonic())

    def _base(self, spec: str, platform: str) -> BaseImage:
        if self._bases.has(spec, platform):
            return self._bases.get(spec, platform)
        row = f"base {spec} ({platform})"
        self.rep.begin(row, f"base image {spec} ({platform})")
        try:
            base = self._bases.get(
                spec,
                platform,
                on_line=lambda line: self.rep.line(row, line),
                on_phase=lambda event: self.rep.phase(row, event),
            )
        except BaseException:
            self.rep.end(row, "failed")
            raise
        finally:
            self._done()
        self.rep.end(row, "cached" if base.reused else "ok")
        return base

    def _early(self, st: Stage) -> None:
        """The mode's images that need only its own bases (modes: `early`), under a row of their own."""
        row = f"{st.name}{self._row_suffix}, early"
        self.rep.begin(row, f"images for {st.recipe.ref} [{st.mode.value}] from the build platform's base")
        try:
            env = self._env(st, row)
            modes.of(st.mode).early(env)
        except BaseException:
            self.rep.end(row, "failed")
            raise
        finally:
            self._done()
        self._early_used[st.name] = self._listed(st, env)
        self.rep.end(row, "ok")

    def _timed(self, st: Stage, pool: parallel.SideBySide | None) -> None:
        row = f"{st.name}{self._row_suffix}"
        self.rep.begin(row, f"images for {st.recipe.ref} [{st.mode.value}]")
        t0 = time.monotonic()
        try:
            early = (
                pool.result(("early", st.name)) if pool is not None else None
            )  # submitted first: never waits
            if isinstance(early, RvportError):  # on a task not started
                raise early
            self.stage(st, row)
        except BaseException:
            self.rep.end(row, "failed")
            raise
        finally:
            self.timings[st.name] = round(time.monotonic() - t0, 2)
            self._done()
        self.rep.end(row, "ok")

    def _smoke(self, st: Stage) -> Toolchain:
        """The stage's smoke image (modes.smoke_image) on its riscv64 base, under a row and a log of its
        own."""
        row = f"{st.name}{self._row_suffix}, smoke"
        self.rep.begin(row, f"smoke image for {st.recipe.ref}")
        t0 = time.monotonic()
        try:
            log = self.smoke_log(st.name)
            log.unlink(missing_ok=True)  # this run's alone: the build adds it to the stage's log
            env = self._env(st, row, log=log)
            image = modes.smoke_image(env, env.base(st.recipe.toolchain.base, RISCV64))
        except BaseException:
            self.rep.end(row, "failed")
            raise
        finally:
            self.smoke_timings[st.name] = round(time.monotonic() - t0, 2)
            self._done()
        self._smoke_used[st.name] = self._listed(st, env)
        self.rep.end(row, "ok")
        return image

    def _env(self, st: Stage, row: str, log: Path | None = None) -> StageEnv:
        return StageEnv(
            stage=st,
            profile=self.plan.request.profile,
            host=self.plan.host,
            record=StageRecord(stage=st),
            bases=self._bases,
            images=self._toolchains,
            progress=_Row(self.rep, row),
            log_path=log or self.logs / f"{self._log_prefix}{st.name}.log",
            tmp_root=self.opts.fetch.cache.root / "tmp",
            builder=self.opts.builder,
        )

    @staticmethod
    def _listed(st: Stage, env: StageEnv) -> list[Prepared]:
        return [
            Prepared(
                what=u.what,
                stage=None if u.what == "base" else st.name,
                tag=u.tag,
                image_id=u.image_id or "",
                made=u.made,
            )
            for u in env.used
        ]

    def stage(self, st: Stage, row: str | None = None) -> None:
        env = self._env(st, row or st.name)
        setup = modes.setup(env)  # the smoke image: a task of its own (_smoke)
        app = None
        if st.runtime is not None:
            from_id = runtime.from_image(env, setup.base).image_id
            assert from_id is not None
            info = runtime.existing(st.runtime, from_id)
            app = Prepared(
                what="app",
                stage=st.name,
                tag=st.runtime.tag,
                image_id=info["id"] if info else "",
                made=False,
                pending=info is None,
            )
            if info is None:
                env.step(f"runtime image {st.runtime.tag}: not in the engine, made by rvport build")
        self._used[st.name] = self._listed(st, env) + ([app] if app is not None else [])


class _Row:
    """A stage's progress under another row name (`rvport build` shows a stage's images as "<stage>
    images")."""

    def __init__(self, rep: Progress, row: str):
        self.rep, self.row = rep, row

    def begin(self, name: str, what: str) -> None:
        self.rep.begin(self.row, what)

    def step(self, name: str, text: str) -> None:
        self.rep.step(self.row, text)

    def line(self, name: str, text: str) -> None:
        self.rep.line(self.row, text)

    def phase(self, name: str, event: Phase) -> None:
        self.rep.phase(self.row, event)

    def end(self, name: str, status: str) -> None:
        self.rep.end(self.row, status)
