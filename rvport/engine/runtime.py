"""A stage's runtime image (the recipe's `runtime:`, planned as plan.RuntimeImage): its Dockerfile, the files
of its build context, and making it (`make`). The image is built FROM the riscv64 base with the runtime's
Debian packages (StageEnv.with_packages, as a smoke test's image is), tagged rvport/<recipe>:<--tag> and run
with RuntimeImage.run_args.

`make` runs after a stage's smoke test (or its verification when there is none), and for a cached stage too.
An image already under the tag whose labels say the same runtime key, artifacts and FROM image is used as it
is. Otherwise it is built under a name of its own and only then given the tag, so a failed or interrupted
build leaves the tag where it was and no half-made image under it."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rvport.engine import buildx
from rvport.engine.images import BaseImage
from rvport.engine.render import Rendered, env_lines, render
from rvport.engine.stage import StageEnv, Toolchain
from rvport.errors import BuildFailed, HostNotReady, IntegrityError, Problem
from rvport.plan.planner import RuntimeImage
from rvport.sources.cache import sha256_file
from rvport.target import PLATFORM as RISCV64

# the labels `make` finds an image again by (the Dockerfile's own org.rvport.runtime.key is the first)
KEY_LABEL = "org.rvport.runtime.key"
ARTIFACTS_LABEL = "org.rvport.runtime.artifacts"  # the runner's key of the stage whose artifacts it holds
FROM_LABEL = "org.rvport.runtime.from"  # the image id it was built FROM


@dataclass(frozen=True, kw_only=True)
class ContextFile:
    name: str  # its path in the build context, under files/
    dest: str  # its path in the image
    mode: str
    artifact: str | None  # a file of the stage's artifacts, or
    source: Path | None  # a pinned file shipped with the recipe (checked by its digest before use)


def context_files(rt: RuntimeImage) -> tuple[ContextFile, ...]:
    """Where each file of the image comes from, and its name in the build context (numbered: two files may
    share a base name)."""
    out = []
    for i, f in enumerate(rt.spec.files):
        base = PurePosixPath(f.dest).name
        out.append(
            ContextFile(
                name=f"files/{i:02d}-{base}",
                dest=f.dest,
                mode=f.mode,
                artifact=f.artifact,
                source=f.pinned.path if f.pinned else None,
            )
        )
    return tuple(out)


def dockerfile(rt: RuntimeImage, image: str, recipe: str, root: Path | None = None) -> Rendered:
    """The runtime image's Dockerfile, FROM `image` (the riscv64 base with the runtime's packages)."""
    spec = rt.spec
    copies = "\n".join(f"COPY --chmod={f.mode} {f.name} {f.dest}" for f in context_files(rt))
    expose = f"EXPOSE {' '.join(str(p) for p in spec.ports)}" if spec.ports else ""
    return render(
        "runtime",
        {
            "IMAGE": image,
            "USER": spec.user,
            "UID": str(spec.uid),
            "COPIES": copies,
            "ENV": env_lines(spec.env),
            "WORKDIR": spec.workdir,
            "EXPOSE": expose,
            "RECIPE": recipe,
            "KEY": rt.key,
            "ENTRYPOINT": json.dumps(list(spec.entrypoint)),
        },
        root,
    )


@dataclass(frozen=True, kw_only=True)
class MadeImage:
    tag: str
    image_id: str
    key: str  # the plan's runtime key (RuntimeImage.key)
    made: bool  # built by this run (False: found in the engine under its tag)

    def to_json(self) -> dict:
        return {"tag": self.tag, "image_id": self.image_id, "key": self.key, "made": self.made}


def stage_files(rt: RuntimeImage, artifacts: Path, ctx: Path, recipe_file: str | None = None) -> None:
    """Put the image's files into the build context: artifacts from the stage's verified output (found by
    name),
    pinned files checked again by their digest."""
    for cf, f in zip(context_files(rt), rt.spec.files, strict=True):
        dest = ctx / cf.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        if cf.artifact is not None:
            hits = sorted(p for p in artifacts.rglob("*") if p.is_file() and p.name == cf.artifact)
            if len(hits) != 1:
                found = ", ".join(str(p.relative_to(artifacts)) for p in hits) or "none"
                raise BuildFailed(
                    f"runtime file {cf.dest}: the stage's artifacts hold {len(hits)} files named "
                    f"{cf.artifact!r} ({found}), not one",
                    hint="name one file the build leaves in $RVPORT_OUT in the recipe's runtime.files",
                )
            shutil.copyfile(hits[0], dest)
        else:
            assert cf.source is not None and f.pinned is not None
            shutil.copyfile(cf.source, dest)
            actual = sha256_file(dest)
            if actual != f.pinned.sha256:
                raise IntegrityError(
                    "1 pinned file changed since it was pinned",
                    problems=[
                        Problem(
                            message=f"runtime file {cf.source} does not match its pin: the recipe pins "
                            f"sha256 {f.pinned.sha256}, the file has {actual}",
                            file=recipe_file,
                            line=f.pinned.line,
                        )
                    ],
                    hint="restore the file; if the change is intended, put its new sha256 in the recipe",
                )


def from_image(env: StageEnv, base: BaseImage) -> Toolchain:
    """The image the runtime image is built FROM: `base` plus the runtime's Debian packages, made (or found)
    as
    the stage's other toolchain images are; `rvport prepare` makes it too."""
    rt = env.stage.runtime
    assert rt is not None
    image = env.with_packages(base, rt.spec.debian, "runtime")
    if image.image_id is None:
        raise HostNotReady(
            f"the runtime's FROM image {image.tag} is not in the engine",
            hint="with a non-docker builder, --load must be supported; see docs/troubleshooting.md",
        )
    return image


def existing(rt: RuntimeImage, from_id: str, artifacts_key: str | None = None) -> dict | None:
    """The engine's image under the runtime's tag (buildx.image_info) if its labels say this runtime key and
    FROM image, and, when given, these artifacts; else None. `rvport prepare` cannot know the artifacts (it
    fetches no source), so it asks without them."""
    info = buildx.image_info(rt.tag)
    want = {KEY_LABEL: rt.key, FROM_LABEL: from_id}
    if artifacts_key is not None:
        want[ARTIFACTS_LABEL] = artifacts_key
    if info is None or any(info["labels"].get(k) != v for k, v in want.items()):
        return None
    return info


def make(env: StageEnv, base: BaseImage, artifacts: Path, artifacts_key: str) -> MadeImage:
    """The stage's runtime image in the engine, tagged rvport/<recipe>:<--tag>: found again by its labels, or
    built (buildx --load, no network) from `artifacts` (the stage's verified files) on `base` plus the
    runtime's Debian packages."""
    rt = env.stage.runtime
    assert rt is not None
    image = from_image(env, base)
    assert image.image_id is not None
    labels = ((ARTIFACTS_LABEL, artifacts_key), (FROM_LABEL, image.image_id))
    info = existing(rt, image.image_id, artifacts_key)
    if info is not None:
        env.step(f"runtime image {rt.tag}: unchanged")
        env.use("runtime", rt.tag, info["id"], made=False)
        return MadeImage(tag=rt.tag, image_id=info["id"], key=rt.key, made=False)
    env.step(f"runtime image {rt.tag}")
    rendered = dockerfile(rt, image.tag, env.stage.recipe.ref)
    scratch = f"{rt.tag.partition(':')[0]}:rvport-making-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    env.tmp_root.mkdir(parents=True, exist_ok=True)
    ctx = Path(tempfile.mkdtemp(prefix=f"runtime-{env.stage.name}-", dir=env.tmp_root))
    try:
        stage_files(rt, artifacts, ctx, str(env.stage.recipe.file))
        (ctx / "Dockerfile").write_text(rendered.text)
        (ctx / ".dockerignore").write_text("Dockerfile\n")
        spec = buildx.BuildSpec(
            context=ctx,
            dockerfile=ctx / "Dockerfile",
            platform=RISCV64,
            tag=scratch,
            load=True,
            network="none",
            builder=env.builder,
            labels=labels,
        )
        buildx.build(spec, log_path=env.log_path, on_line=env.line, on_phase=env.phase)
        made = buildx.image_info(scratch)
        if made is None:
            raise HostNotReady(
                f"the runtime image {rt.tag} was built but is not in the engine",
                hint="with a non-docker builder, --load must be supported; see docs/troubleshooting.md",
            )
        buildx.tag_image(made["id"], rt.tag)  # the tag moves to the complete image in one step
    finally:
        buildx.untag(scratch)  # the scratch name only: the image keeps its tag
        shutil.rmtree(ctx, ignore_errors=True)
    env.use("runtime", rt.tag, made["id"], made=True)
    return MadeImage(tag=rt.tag, image_id=made["id"], key=rt.key, made=True)
