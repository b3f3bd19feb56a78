"""Export a Plan as a `docker buildx bake` file: OUTPUT/docker-bake.json plus OUTPUT/bake/<stage>/ contexts.

Each stage goes through its mode (rvport/engine/modes/) in a StageEnv, as in `rvport build`, from the same
prepared source trees and with the same base images (rvport.engine.images.Bases), so bake builds what
`rvport build` builds. The one difference is the environment's toolchain images: here they become bake
targets (`BakeTargets`) instead of being built. What bake does not do: bootstrap the base image (debootstrap;
made here, as the runner makes it, and referenced by tag), verify, smoke-test, or cache artifacts by inputs.

Targets, per stage NAME:
    NAME-toolchain   the base plus the recipe's Debian packages (cross stages: the build-platform base plus
    the
                     kind's cross toolchain), loaded into the engine (type=docker) under the tag the runner
                     uses; the only target with network access (apt)
    NAME             the build: network none, output type=local into OUTPUT/bake/out/NAME. Accelerated stages
                     take the cross toolchain prefix image, which is made here like the base images.
Groups: `toolchains`, `stages` and `default` (= stages). Ordering: bake on buildx 0.13 links targets only
through `contexts` ("target:NAME"), which needs the named-contexts capability of the Dockerfile frontend
(BuildKit >= 0.10). The BuildKit built into Docker 20.10 refuses it, so the build targets name their
toolchain image by tag instead: run `bake toolchains` first on a fresh engine (docs/ci.md).

No `NAME-runtime` target: a recipe's runtime image (rvport/engine/runtime.py) is made by `rvport build` alone
(`runtime_notes` says so). The runner makes it from the stage's verified and smoke-tested artifacts, each
found by name in the stage's output once it exists, which bake neither checks nor knows when the file is
written; and feeding one target's output to another needs the named contexts this engine's BuildKit refuses.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from rvport import outdir
from rvport.engine import modes, render
from rvport.engine.images import BaseImage
from rvport.engine.progress import SILENT
from rvport.engine.stage import (
    RunOptions,
    StageEnv,
    StageRecord,
    Toolchain,
    stage_context,
    stage_tools,
    toolchain_tag,
)
from rvport.errors import UsageError
from rvport.fileio import atomic_write_text
from rvport.plan.planner import Plan, Stage
from rvport.sources.fetch import stage_ca_bundle
from rvport.sources.tree import prepare_tree

BAKE_FILE = "docker-bake.json"


@dataclass(frozen=True, kw_only=True)
class BakeOptions(RunOptions):
    """The export's options: where it writes (OUTPUT/docker-bake.json, OUTPUT/bake/), the sources, the builder
    the base images are loaded into, the riscv64 base."""


def _target_name(name: str) -> str:
    # bake target names: letters, digits, '-' and '_'
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


class BakeTargets:
    """The export's toolchain images: a `NAME-toolchain` target each, tagged as the runner tags the image."""

    def __init__(self, root: Path, ca: Path | None):
        self.root, self.ca = root, ca
        self.targets: dict[str, dict] = {}

    def make(self, env: StageEnv, base: BaseImage, rendered: render.Rendered, what: str) -> Toolchain:
        name = env.stage.name
        tag, key = toolchain_tag(env.stage.recipe.name, what, base.image_id, rendered)  # as the runner
        tc_dir = self.root / f"{name}-toolchain"
        tc_dir.mkdir(parents=True)
        (tc_dir / "Dockerfile").write_text(rendered.text)
        for file, text in rendered.files:  # what the Dockerfile runs from its context
            (tc_dir / file).write_text(text)
        t = {
            "context": str(tc_dir),
            "dockerfile": "Dockerfile",
            "platforms": [base.platform],
            "tags": [tag],
            "labels": {"org.rvport.key": key},
            "output": ["type=docker"],
        }
        if self.ca:
            t["secret"] = [f"id=rvport-ca,src={self.ca}"]
        self.targets[_target_name(f"{name}-toolchain")] = t
        return Toolchain(tag=tag)  # no image yet: `bake toolchains` makes it

    def read(self, toolchain: Toolchain, path: str) -> dict[str, str]:
        return {}


def bake_document(plan: Plan, opts: BakeOptions, *, bases: dict[str, BaseImage] | None = None) -> dict:
    """Materialise every stage under OUTPUT/bake/ and return the bake file's document (not yet written)."""
    root = opts.output / "bake"
    out_root = root / "out"
    cache_root = opts.fetch.cache.root
    all_bases = opts.bases(bases)
    (opts.output / "logs").mkdir(parents=True, exist_ok=True)
    toolchains = BakeTargets(root, stage_ca_bundle(opts.fetch))
    targets: dict[str, dict] = {}
    stages: list[str] = []
    by_python: dict[str, list[str]] = {}  # --python: a group per Python (cp313: its stages' targets)
    for st in plan.stages:
        tree = prepare_tree(st.recipe, opts.fetch)
        env = StageEnv(
            stage=st,
            profile=plan.request.profile,
            host=plan.host,
            record=StageRecord(stage=st),
            bases=all_bases,
            images=toolchains,
            progress=SILENT,
            log_path=opts.output / "logs" / f"xtc-{st.name}.log",  # the accelerated prefix's build
            tmp_root=cache_root / "tmp",
            builder=opts.builder,
        )
        mode = modes.of(st.mode)
        tc = mode.toolchain(env)
        rendered = mode.dockerfile(env, tc)
        ctx = root / st.name
        stage_context(
            ctx,
            tree.path,
            rendered,
            render.build_script(st.commands),
            _deps(st, opts),
            stage_tools(st, opts.fetch),
        )
        name = _target_name(st.name)
        targets[name] = {
            "context": str(ctx),
            "dockerfile": "Dockerfile",
            "platforms": [st.platform],
            "network": "none",
            "output": [f"type=local,dest={out_root / st.name}"],
        }
        stages.append(name)
        if st.python is not None:
            by_python.setdefault(st.python.abi, []).append(name)
    return {
        "group": {
            "default": {"targets": list(stages)},
            "stages": {"targets": stages},
            "toolchains": {"targets": list(toolchains.targets)},
            **{abi: {"targets": names} for abi, names in by_python.items()},
        },
        "target": {**toolchains.targets, **targets},
    }


def runtime_notes(plan: Plan) -> list[str]:
    """What the export leaves to `rvport build`: each stage's runtime image (docs/ci.md)."""
    return [
        f"{st.name}'s runtime image {st.runtime.tag} is not a bake target: `rvport build {st.recipe.ref}` "
        "makes it from the verified artifacts (docs/ci.md)"
        for st in plan.stages
        if st.runtime is not None
    ]


def _deps(st: Stage, opts: BakeOptions) -> dict[str, Path]:
    """A dependency's artifacts, where the runner puts them (OUTPUT/artifacts/<dep>)."""
    deps = {}
    for d in st.depends:
        path = opts.output / "artifacts" / d
        if not path.is_dir():
            raise UsageError(
                f"{st.recipe.ref} needs the artifacts of {d} in its build context, and {path} does not exist",
                hint=f"build the dependency first (rvport build {d} --output {opts.output}); bake "
                "on this engine cannot pass one target's output to another",
            )
        deps[d] = path
    return deps


def export(plan: Plan, opts: BakeOptions) -> Path:
    """Write OUTPUT/docker-bake.json and OUTPUT/bake/ (replaced as a whole); returns the bake file's path."""
    outdir.claim(opts.output, outdir.Kind.BUILD)  # bake/ is replaced only in a directory rvport wrote
    root = opts.output / "bake"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    doc = bake_document(plan, opts)
    path = opts.output / BAKE_FILE
    atomic_write_text(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return path
