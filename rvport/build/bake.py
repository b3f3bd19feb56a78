"""Export a Plan as a `docker buildx bake` file: OUTPUT/docker-bake.json plus OUTPUT/bake/<stage>/ contexts.

The Dockerfiles and build contexts are made by the runner's own functions (rvport.build.runner: toolchain_dockerfile,
toolchain_tag, build_dockerfile, stage_context) from the same prepared source trees, so bake builds what
`rvport build` builds. What bake does not do: bootstrap the base image (debootstrap; made here, as the runner
makes it, and referenced by tag), verify, smoke-test, or cache artifacts by inputs.

Targets, per stage NAME:
    NAME-toolchain   the base plus the recipe's Debian packages (cross stages: the build-platform base plus the
                     kind's cross toolchain), loaded into the engine (type=docker) under the tag the runner
                     uses; the only target with network access (apt)
    NAME             the build: network none, output type=local into OUTPUT/bake/out/NAME. Accelerated stages
                     take the cross toolchain prefix image, which is made here like the base images.
Groups: `toolchains`, `stages` and `default` (= stages). Ordering: bake on buildx 0.13 links targets only
through `contexts` ("target:NAME"), which needs the named-contexts capability of the Dockerfile frontend
(BuildKit >= 0.10). The BuildKit built into Docker 20.10 refuses it, so the build targets name their
toolchain image by tag instead: run `bake toolchains` first on a fresh engine (docs/ci.md).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from rvport.build.modes import accelerated, cross

from rvport.build import render as dockerfiles
from rvport.build.images import BaseImage, ensure_base, load_base_spec
from rvport.errors import RvportError, UsageError
from rvport.plan.planner import Mode, Plan, Stage
from rvport.build.runner import build_dockerfile, stage_context, stage_tools, toolchain_dockerfile, toolchain_tag
from rvport.sources.fetch import FetchOptions, ca_bundle
from rvport.sources.tree import prepare_tree

BAKE_FILE = "docker-bake.json"


@dataclass(frozen=True, kw_only=True)
class BakeOptions:
    output: Path
    fetch: FetchOptions
    builder: str | None = None
    base_image: str | None = None


def _target_name(name: str) -> str:
    # bake target names: letters, digits, '-' and '_'
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def _ca(opts: BakeOptions) -> Path | None:
    try:
        return opts.fetch.ca_bundle or ca_bundle()
    except RvportError:
        return None


def bake_document(plan: Plan, opts: BakeOptions, *, bases: dict[str, BaseImage] | None = None) -> dict:
    """Materialise every stage under OUTPUT/bake/ and return the bake file's document (not yet written)."""
    root = opts.output / "bake"
    out_root = root / "out"
    profile = plan.request.profile
    bases = {} if bases is None else bases
    ca = _ca(opts)
    targets: dict[str, dict] = {}
    toolchains: list[str] = []
    stages: list[str] = []
    for st in plan.stages:
        tree = prepare_tree(st.recipe, opts.fetch)
        if st.mode is Mode.CROSS:      # the build-platform base plus the kind's cross toolchain
            base = _base(cross.BASE, st.platform, opts, bases)
            rendered_tc, what = dockerfiles.cross_toolchain_dockerfile(st.recipe, base.tag), "cross"
        else:
            base = _base(st.recipe.toolchain.base, "linux/riscv64", opts, bases)
            rendered_tc, what = None, "build"
            if st.recipe.toolchain.debian:
                rendered_tc = toolchain_dockerfile(base.tag, profile.qemu_cpu, st.recipe.toolchain.debian)
        tc = base.tag
        if rendered_tc is not None:
            tc, key = toolchain_tag(st.name, what, base.image_id, rendered_tc)
            tc_dir = root / f"{st.name}-toolchain"
            tc_dir.mkdir(parents=True)
            (tc_dir / "Dockerfile").write_text(rendered_tc.text)
            tc_target = _target_name(f"{st.name}-toolchain")
            t = {"context": str(tc_dir), "dockerfile": "Dockerfile", "platforms": [base.platform],
                 "tags": [tc], "labels": {"org.rvport.key": key}, "output": ["type=docker"]}
            if ca:
                t["secret"] = [f"id=rvport-ca,src={ca}"]
            targets[tc_target] = t
            toolchains.append(tc_target)
        rendered, script = build_dockerfile(st, tc, profile.name)
        if st.mode is Mode.ACCELERATED:
            rendered = _accelerated(st, plan, base, tc, opts, bases)
        ctx = root / st.name
        stage_context(ctx, tree.path, rendered, script, _deps(st, opts), stage_tools(st, opts.fetch))
        name = _target_name(st.name)
        targets[name] = {"context": str(ctx), "dockerfile": "Dockerfile", "platforms": [st.platform],
                         "network": "none", "output": [f"type=local,dest={out_root / st.name}"]}
        stages.append(name)
    return {"group": {"default": {"targets": list(stages)}, "stages": {"targets": stages},
                      "toolchains": {"targets": toolchains}},
            "target": targets}


def _base(spec: str, platform: str, opts: BakeOptions, bases: dict[str, BaseImage]) -> BaseImage:
    key = f"{spec}@{platform}"
    if key not in bases:
        bases[key] = ensure_base(load_base_spec(spec), platform=platform, cache_dir=opts.fetch.cache.root,
                                 log_path=opts.output / "logs" / f"base-{spec}.log", builder=opts.builder,
                                 image_override=opts.base_image if platform == "linux/riscv64" else None)
    return bases[key]


def _accelerated(st: Stage, plan: Plan, base: BaseImage, tc: str, opts: BakeOptions,
                 bases: dict[str, BaseImage]) -> dockerfiles.Rendered:
    """An accelerated stage's Dockerfile: the prefix image is made here (bake has no target that could make
    it), and the base's compilers are checked against it. Packages the toolchain target adds (rustc-web) are
    checked in the stage by setup.sh, whose probe compiles against the stage's own Rust standard library."""
    rust = accelerated.needs_rust(st.recipe)
    platform = accelerated.host_platform(plan.host.arch)
    xbase = _base(accelerated.XTC_RUST_BASE if rust else accelerated.XTC_BASE, platform, opts, bases)
    xtc = accelerated.ensure_prefix(xbase, rust, tmp_root=opts.fetch.cache.root / "tmp",
                                    log_path=opts.output / "logs" / f"xtc-{st.name}.log", builder=opts.builder)
    if base.packages:
        accelerated.check_versions(base.packages, xtc.packages, xtc.gcc_major)
    return accelerated.render_stage(toolchain=tc, xtc=xtc, env=st.env, profile=plan.request.profile.name)


def _deps(st: Stage, opts: BakeOptions) -> dict[str, Path]:
    """A dependency's artifacts, where the runner puts them (OUTPUT/artifacts/<dep>)."""
    deps = {}
    for d in st.depends:
        path = opts.output / "artifacts" / d
        if not path.is_dir():
            raise UsageError(f"{st.recipe.ref} needs the artifacts of {d} in its build context, and {path} "
                             "does not exist",
                             hint=f"build the dependency first (rvport build {d} --output {opts.output}); bake "
                                  "on this engine cannot pass one target's output to another")
        deps[d] = path
    return deps


def export(plan: Plan, opts: BakeOptions) -> Path:
    """Write OUTPUT/docker-bake.json and OUTPUT/bake/ (replaced as a whole); returns the bake file's path."""
    root = opts.output / "bake"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    doc = bake_document(plan, opts)
    path = opts.output / BAKE_FILE
    tmp = path.with_name(f".{BAKE_FILE}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path
