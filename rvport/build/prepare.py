"""`rvport prepare`: make every image a build of a plan needs, ahead of time, so a CI job can cache them.

Per stage, as the runner and bake make them (same functions, same tags, so a later `rvport build` reuses
them): the riscv64 base, the toolchain image (base + the recipe's Debian packages; cross stages: the
build-platform base + the kind's cross toolchain), the smoke image, and for accelerated stages the
build-platform base and the cross toolchain prefix (rvport/xtc). No source is fetched, nothing is compiled.
The images to keep between CI runs are the ones listed (docs/ci.md).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rvport.build import buildx, render as dockerfiles
from rvport.build.images import BaseImage, ensure_base, load_base_spec
from rvport.build.modes import accelerated, cross
from rvport.build.render import toolchain_dockerfile
from rvport.build.stage import toolchain_tag
from rvport.plan.planner import Mode, Plan, Stage

RISCV64 = "linux/riscv64"


class Progress(Protocol):
    def step(self, name: str, text: str) -> None: ...
    def line(self, name: str, text: str) -> None: ...


@dataclass(frozen=True, kw_only=True)
class PrepareOptions:
    logs: Path                          # OUTPUT/logs
    tmp_root: Path                      # the cache's tmp/ (build contexts)
    cache_dir: Path                     # the cache's root (bases/*.json)
    builder: str | None = None
    base_image: str | None = None       # a digest-pinned riscv64 base instead of the bootstrapped one
    smoke: bool = True
    ca_bundle: Path | None = None       # mounted as a secret in the apt stages (TLS-intercepting proxies)


@dataclass(frozen=True, kw_only=True)
class Prepared:
    what: str                           # base, toolchain, smoke, cross, xtc
    stage: str | None                   # None for a base (shared by stages)
    tag: str
    image_id: str
    made: bool                          # False: it was already in the engine

    def to_json(self) -> dict:
        return {"what": self.what, "stage": self.stage, "tag": self.tag, "image_id": self.image_id,
                "made": self.made}


class Preparer:
    def __init__(self, plan: Plan, opts: PrepareOptions, rep: Progress):
        self.plan, self.opts, self.rep = plan, opts, rep
        self.bases: dict[str, BaseImage] = {}
        self.images: dict[str, Prepared] = {}

    def run(self) -> list[Prepared]:
        for st in self.plan.stages:
            self.stage(st)
        return list(self.images.values())

    def stage(self, st: Stage) -> None:
        name = st.name
        base = self._base(st.recipe.toolchain.base, RISCV64, name)
        if st.mode is Mode.CROSS:
            xbase = self._base(cross.BASE, st.platform, name)
            self._image(xbase, cross.render_toolchain(st.recipe, xbase.tag), "cross", name)
        elif st.recipe.toolchain.debian:
            self._image(base, toolchain_dockerfile(base.tag, self.plan.request.profile.qemu_cpu,
                                                   st.recipe.toolchain.debian), "build", name)
        if st.mode is Mode.ACCELERATED:
            rust = accelerated.needs_rust(st.recipe)
            platform = accelerated.host_platform(self.plan.host.arch)
            xbase = self._base(accelerated.XTC_RUST_BASE if rust else accelerated.XTC_BASE, platform, name)
            self.rep.step(name, f"accelerated: cross toolchain prefix ({platform}{', with rustc' if rust else ''})")
            xtc = accelerated.ensure_prefix(xbase, rust, tmp_root=self.opts.tmp_root,
                                            log_path=self._log(name), builder=self.opts.builder,
                                            on_line=lambda l: self.rep.line(name, l))
            self.images.setdefault(xtc.tag, Prepared(what="xtc", stage=name, tag=xtc.tag, image_id=xtc.image_id,
                                                     made=xtc.built))
        if self.opts.smoke and st.recipe.smoke and st.recipe.smoke_debian:
            self._image(base, toolchain_dockerfile(base.tag, self.plan.request.profile.qemu_cpu,
                                                   st.recipe.smoke_debian), "smoke", name)

    def _log(self, name: str) -> Path:
        self.opts.logs.mkdir(parents=True, exist_ok=True)
        return self.opts.logs / f"prepare-{name}.log"

    def _base(self, spec_name: str, platform: str, stage: str) -> BaseImage:
        key = f"{spec_name}@{platform}"
        if key not in self.bases:
            self.rep.step(stage, f"base image {spec_name} ({platform})")
            self.opts.logs.mkdir(parents=True, exist_ok=True)
            base = ensure_base(load_base_spec(spec_name), platform=platform, cache_dir=self.opts.cache_dir,
                               log_path=self.opts.logs / f"base-{spec_name}.log", builder=self.opts.builder,
                               on_line=lambda l: self.rep.line(stage, l),
                               image_override=self.opts.base_image if platform == RISCV64 else None)
            self.bases[key] = base
            self.images.setdefault(base.tag, Prepared(what="base", stage=None, tag=base.tag, image_id=base.image_id,
                                                      made=not base.reused))
        return self.bases[key]

    def _image(self, base: BaseImage, rendered: dockerfiles.Rendered, what: str, stage: str) -> None:
        """The runner's toolchain image (same tag and key): built when not in the engine."""
        tag, key = toolchain_tag(stage, what, base.image_id, rendered)
        self.rep.step(stage, f"{what} image {tag}")
        made = False
        if buildx.image_info(tag) is None:
            self.opts.tmp_root.mkdir(parents=True, exist_ok=True)
            ctx = Path(tempfile.mkdtemp(prefix=f"prep-{stage}-", dir=self.opts.tmp_root))
            try:
                (ctx / "Dockerfile").write_text(rendered.text)
                secrets = (("rvport-ca", self.opts.ca_bundle),) if self.opts.ca_bundle else ()
                buildx.build(buildx.BuildSpec(context=ctx, dockerfile=ctx / "Dockerfile", platform=base.platform,
                                              tag=tag, load=True, builder=self.opts.builder, secrets=secrets,
                                              labels=(("org.rvport.key", key),)),
                             log_path=self._log(stage), on_line=lambda l: self.rep.line(stage, l))
            finally:
                shutil.rmtree(ctx, ignore_errors=True)
            made = True
        info = buildx.image_info(tag)
        self.images.setdefault(tag, Prepared(what=what, stage=stage, tag=tag, image_id=info["id"] if info else "",
                                             made=made))
