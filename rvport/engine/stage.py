"""A stage's environment: what the runner (`rvport build`) and the bake export both hand to a mode.

A mode (rvport/engine/modes/) says which toolchain image a stage needs and renders the stage's Dockerfile; it
does so through a StageEnv, never through the runner. The environment gives it:

- base images (`base`), made or found once per run, --base-image applied to the riscv64 base only;
- toolchain images (`image`, `with_packages`): built and inspected now by the runner, emitted as a bake
  target by the export (the one place where the two differ: `ToolchainImages`);
- the stage's record (images, packages, toolchain: what result.json says of it), its log, step timers, and
  progress lines.

The stage's build context (`stage_context`) is laid out here too, so bake builds what `rvport build` builds.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from rvport import resources
from rvport.catalogue.profiles import scalar_profile
from rvport.engine import compcache, render
from rvport.engine.compcache import CompilerCache
from rvport.engine.events import Phase
from rvport.engine.images import BaseImage, Bases, ensure_image, read_packages
from rvport.engine.progress import Progress
from rvport.sources.fetch import Fetcher, FetchOptions, stage_ca_bundle

if TYPE_CHECKING:
    from rvport.catalogue.profiles import Profile
    from rvport.host import HostFacts
    from rvport.plan.planner import Stage

# What a toolchain image lists of itself: its Debian packages, "name=version" a line (the toolchain
# templates).
TOOLCHAIN_PACKAGES = "/rvport-toolchain-packages.txt"


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """What every run over a plan's stages is given: `rvport build` and `rvport prepare` (BuildOptions, which
    adds to it) and the bake export (BakeOptions)."""

    output: Path
    fetch: FetchOptions
    builder: str | None = None
    base_image: str | None = None  # a digest-pinned image instead of the bootstrapped riscv64 base
    allow_expired_release: tuple[str, ...] = ()  # suites whose expired Release the user accepts
    bootstrap: str | None = None  # how a base is made (RVPORT_BOOTSTRAP, read by the CLI): None: per host

    def bases(self, images: dict[str, BaseImage] | None = None) -> Bases:
        """The run's base images, made or found once (logs in OUTPUT/logs; base_image replaces the riscv64
        base
        only); `images` may hold some already."""
        return Bases(
            cache_dir=self.fetch.cache.root,
            log_dir=self.output / "logs",
            override=self.base_image,
            bootstrap=self.bootstrap,
            images=images,
            allow_expired=self.allow_expired_release,
            ca_bundle=self.fetch.ca_bundle,
        )


@dataclass
class StageRecord:
    """What happened to one stage; becomes one entry of result.json."""

    stage: Stage
    status: str = "not run"  # ok | cached | failed | interrupted | not run
    timings: dict[str, float] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)
    artifacts: list[dict] = field(default_factory=list)
    verify: dict | None = None
    smoke: dict | None = None
    tests: dict | None = None  # the recipe's upstream tests (`tests:`), run after the smoke test (tests.py)
    manylinux: list[dict] = field(
        default_factory=list
    )  # wheel repair: tag, grafted libraries, auditwheel's words
    sources: list[dict] = field(default_factory=list)
    toolchain_packages: dict[str, str] = field(default_factory=dict)
    toolchain: dict | None = None  # cross stages: the cross toolchain used (rvport/engine/modes/cross.py)
    rust: dict | None = None  # stages that compile Rust: rustc and cargo --version, rustc's host
    debian_pins: dict | None = None  # `toolchain: pins:` as the signed index has them (engine/debpins.py)
    key: str | None = None
    build_command: str | None = None  # the buildx command that built the artifacts (kept with cached ones)
    compiler_cache: dict | None = None  # the build's compiler cache: use, key, hits, misses, sizes
    runtime: dict | None = None  # the runtime image made after the stage: {tag, image_id, key, made},
    # and its check when the recipe has one (rvport/engine/check.py)
    error: str | None = None
    log_tail: list[str] = field(default_factory=list)
    log: str | None = None

    def to_json(self) -> dict:
        s = self.stage
        python = {"id": s.name, "python": s.python.to_json()} if s.python else {}
        return {
            **python,  # --python: the stage's id (msgspec-cp314) and its Python
            "recipe": s.recipe.name,
            "version": s.recipe.version,
            "kind": s.recipe.kind.value,
            "mode": s.mode.value,
            "platform": s.platform,
            "status": self.status,
            "timings": {k: round(v, 2) for k, v in self.timings.items()},
            "commands": list(s.commands),
            "env": dict(sorted(s.env.items())),
            "images": self.images,
            "key": self.key,
            "plan_key": s.key,
            "artifacts": self.artifacts,
            "verify": self.verify,
            "smoke": self.smoke,
            **({"tests": self.tests} if self.tests is not None else {}),
            "manylinux": self.manylinux,
            # wheel kinds: whether the stage repairs its wheels, and who decided why (plan.json's)
            **({"wheel_repair": dict(s.wheel_repair)} if s.wheel_repair is not None else {}),
            "sources": self.sources,
            "toolchain_packages": self.toolchain_packages,
            "toolchain": self.toolchain,
            "rust": self.rust,
            "debian_pins": self.debian_pins,
            "build_command": self.build_command,
            "runtime": self.runtime,
            "compiler_cache": self.compiler_cache,
            "error": self.error,
            "log_tail": self.log_tail,
            "log": self.log,
        }


@dataclass(frozen=True, kw_only=True)
class Toolchain:
    """The image a stage builds FROM."""

    tag: str
    image_id: str | None = None  # None: not in the engine yet (bake emits it as a target)
    packages: Mapping[str, str] = field(default_factory=dict)  # its Debian packages, where known
    made: bool = False  # built by this run (False: found in the engine, or not made yet)


@dataclass(frozen=True, kw_only=True)
class UsedImage:
    """An image a stage used: what `rvport prepare` lists (and --tags writes) of it."""

    what: str  # base, build, cross, smoke, xtc
    tag: str
    image_id: str | None  # None: not in the engine yet (a bake target)
    made: bool  # made by this run (False: it was in the engine already)


def toolchain_tag(
    stage_name: str, what: str, base_image_id: str, rendered: render.Rendered
) -> tuple[str, str]:
    """(image tag, key) of a stage's toolchain image: made once per base image and Dockerfile."""
    key = hashlib.sha256("\n".join([base_image_id, rendered.sha256]).encode()).hexdigest()
    return f"rvport/toolchain:{stage_name}-{what}-{key[:12]}", key


class ToolchainImages(Protocol):
    """How a stage's toolchain images come to be: the one service the runner and bake provide differently."""

    def make(self, env: StageEnv, base: BaseImage, rendered: render.Rendered, what: str) -> Toolchain:
        """The image `rendered` makes on `base`, tagged by toolchain_tag."""

    def read(self, toolchain: Toolchain, path: str) -> dict[str, str]:
        """A "name=value" file of the image ({} where the image is not made yet)."""


@dataclass(kw_only=True)
class StageEnv:
    stage: Stage
    profile: Profile
    host: HostFacts
    record: StageRecord
    bases: Bases
    images: ToolchainImages
    progress: Progress
    log_path: Path  # where this stage's image builds log
    tmp_root: Path  # scratch directories (the cache's tmp/)
    builder: str | None = None
    used: list[UsedImage] = field(default_factory=list)  # every image the stage used, in order
    # how the stage's compiles are cached (rvport/engine/compcache.py); the bake export's: the engine's
    compiler_cache: CompilerCache = field(default_factory=CompilerCache)
    ccache_id: str | None = None  # the stage's toolchain's cache (compcache.toolchain_id), once rendered

    def ccache_values(self, packages: Mapping[str, str]) -> dict[str, str]:
        """The compiler cache's placeholders of the stage's Dockerfile (compcache.template_values), keyed by
        `packages`: what the mode knows of the stage's compiler packages."""
        from rvport.engine import compcache

        self.ccache_id = compcache.toolchain_id(self.stage.mode, packages)
        return compcache.template_values(
            self.compiler_cache, mode=self.stage.mode, profile=self.stage.profile, packages=packages
        )

    def base(self, spec: str, platform: str) -> BaseImage:
        """The base image `spec` for `platform`, made once per run (timed as "base")."""
        if self.bases.has(spec, platform):
            base = self.bases.get(spec, platform)
        else:
            self.step(f"base image {spec} ({platform})")
            with self.timer("base"):
                base = self.bases.get(spec, platform, on_line=self.line, on_phase=self.phase)
        self.use("base", base.tag, base.image_id, made=not base.reused)
        return base

    def image(self, base: BaseImage, rendered: render.Rendered, what: str) -> Toolchain:
        toolchain = self.images.make(self, base, rendered, what)
        self.use(what, toolchain.tag, toolchain.image_id, made=toolchain.made)
        return toolchain

    def use(self, what: str, tag: str, image_id: str | None, *, made: bool) -> None:
        """Note an image the stage uses (`used`): bases and toolchain images note themselves, a mode notes
        the other images it makes (the accelerated prefix)."""
        self.used.append(UsedImage(what=what, tag=tag, image_id=image_id, made=made))

    def with_packages(self, base: BaseImage, packages: tuple[str, ...], what: str) -> Toolchain:
        """`base` plus Debian packages (the toolchain template), or the base itself when there are none. apt
        runs on the scalar profile's QEMU CPU whatever the stage's profile: Debian's riscv64 packages are
        rv64gc code and installing them reads no CPU feature, so one image per base and package set serves
        every profile (a vllm toolchain image holds Debian's torch: 20 minutes of emulated apt, once). The
        profile's CPU is what runs in it: the build stage's own QEMU_CPU (plan env) and every container the
        stage runs afterwards (riscv64_env)."""
        if not packages:
            return Toolchain(tag=base.tag, image_id=base.image_id)
        cpu = scalar_profile().qemu_cpu
        return self.image(base, render.toolchain_dockerfile(base.tag, cpu, packages), what)

    def read(self, toolchain: Toolchain, path: str) -> dict[str, str]:
        return self.images.read(toolchain, path)

    @property
    def riscv64_env(self) -> dict[str, str]:
        """The environment of every riscv64 container the stage runs once it is built (the smoke test, a
        runtime check's service and client): QEMU's CPU is the profile's, so emulated code sees exactly the
        profile's ISA; a native riscv64 engine ignores it. The one place for that rule."""
        return {"QEMU_CPU": self.profile.qemu_cpu}

    @contextlib.contextmanager
    def timer(self, name: str) -> Iterator[None]:
        """Adds the time spent in the block to the record's timings[name]."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.record.timings[name] = self.record.timings.get(name, 0.0) + time.monotonic() - t0

    def step(self, text: str) -> None:
        self.progress.step(self.stage.name, text)

    def line(self, text: str) -> None:
        self.progress.line(self.stage.name, text)

    def phase(self, event: Phase) -> None:
        self.progress.phase(self.stage.name, event)


class LoadedToolchains:
    """Toolchain images as `rvport build` and `rvport prepare` make them: built once (buildx --load),
    inspected,
    their package lists read. The apt stages get the CA bundle of `fetch` as a secret."""

    def __init__(self, fetch: FetchOptions):
        self.fetch = fetch

    def make(self, env: StageEnv, base: BaseImage, rendered: render.Rendered, what: str) -> Toolchain:
        # named by the recipe, not the stage id: a --python stage shares the image of a plan without --python
        tag, key = toolchain_tag(env.stage.recipe.name, what, base.image_id, rendered)
        env.step(f"{what} image {tag}")
        ca = stage_ca_bundle(self.fetch)
        image = ensure_image(
            tag,
            {"Dockerfile": rendered.text, **dict(rendered.files)},
            platform=base.platform,
            tmp_root=env.tmp_root,
            log_path=env.log_path,
            what="toolchain image",
            builder=env.builder,
            on_line=env.line,
            on_phase=env.phase,
            secrets=(("rvport-ca", ca),) if ca else (),
            labels=(("org.rvport.key", key),),
        )
        return Toolchain(
            tag=tag,
            image_id=image.image_id,
            packages=read_packages(tag, TOOLCHAIN_PACKAGES),
            made=image.built,
        )

    def read(self, toolchain: Toolchain, path: str) -> dict[str, str]:
        return read_packages(toolchain.tag, path)


def link_tree(src: Path, dest: Path) -> None:
    """Copy a tree with hard links where possible (same filesystem), plain copies elsewhere."""

    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    shutil.copytree(src, dest, symlinks=True, copy_function=link)


def stage_context(
    ctx: Path,
    tree: Path,
    rendered: render.Rendered,
    script: str,
    deps: dict[str, Path],
    tools: dict[str, Path] | None = None,
) -> None:
    """Lay out a build stage's context in ctx: src/, deps/<name>/, tools/ (rvport's own pinned tools and their
    stage scripts, /rvport/tools in the stage), the build script, the /proc/cpuinfo check and the
    Dockerfile."""
    link_tree(tree, ctx / "src")
    (ctx / "deps").mkdir()
    for dep, path in deps.items():
        link_tree(path, ctx / "deps" / dep)
    (ctx / "tools").mkdir()
    for name, path in (tools or {}).items():
        shutil.copyfile(path, ctx / "tools" / name)
    (ctx / "rvport-build.sh").write_text(script)
    (ctx / render.CPUINFO_SCRIPT).write_text(render.cpuinfo_script())  # emulated stages run it first
    (ctx / compcache.SCRIPT).write_text(compcache.script())  # the compiler cache, before and after the build
    (ctx / "Dockerfile").write_text(rendered.text)
    (ctx / ".dockerignore").write_text("Dockerfile\n")


def stage_tools(st: Stage, fopts: FetchOptions) -> dict[str, Path]:
    """The files of a stage's pinned tools (fetched and checked like sources) and their stage scripts."""
    if not st.tools:
        return {}
    out: dict[str, Path] = {}
    with Fetcher(options=fopts) as fetcher:
        for tool in st.tools:
            got = fetcher.fetch(tool.source)
            out[got.filename] = got.path
            out[tool.script] = resources.builtin("scripts", tool.script)
    return out
