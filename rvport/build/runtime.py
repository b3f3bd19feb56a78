"""A stage's runtime image (the recipe's `runtime:`, planned as plan.RuntimeImage): its Dockerfile and the
files of its build context. Rendering only: the image is built FROM the riscv64 base with the runtime's
Debian packages (StageEnv.with_packages, as a smoke test's image is) and run with RuntimeImage.run_args."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rvport.build.render import Rendered, env_lines, render
from rvport.plan.planner import RuntimeImage


@dataclass(frozen=True, kw_only=True)
class ContextFile:
    name: str                   # its path in the build context, under files/
    dest: str                   # its path in the image
    mode: str
    artifact: str | None        # a file of the stage's artifacts, or
    source: Path | None         # a pinned file shipped with the recipe (checked by its digest before use)


def context_files(rt: RuntimeImage) -> tuple[ContextFile, ...]:
    """Where each file of the image comes from, and its name in the build context (numbered: two files may
    share a base name)."""
    out = []
    for i, f in enumerate(rt.spec.files):
        base = PurePosixPath(f.dest).name
        out.append(ContextFile(name=f"files/{i:02d}-{base}", dest=f.dest, mode=f.mode, artifact=f.artifact,
                               source=f.pinned.path if f.pinned else None))
    return tuple(out)


def dockerfile(rt: RuntimeImage, image: str, recipe: str, root: Path | None = None) -> Rendered:
    """The runtime image's Dockerfile, FROM `image` (the riscv64 base with the runtime's packages)."""
    spec = rt.spec
    copies = "\n".join(f"COPY --chmod={f.mode} {f.name} {f.dest}" for f in context_files(rt))
    expose = f"EXPOSE {' '.join(str(p) for p in spec.ports)}" if spec.ports else ""
    return render("runtime", {
        "IMAGE": image, "USER": spec.user, "UID": str(spec.uid), "COPIES": copies,
        "ENV": env_lines(spec.env), "WORKDIR": spec.workdir, "EXPOSE": expose, "RECIPE": recipe,
        "KEY": rt.key, "ENTRYPOINT": json.dumps(list(spec.entrypoint)),
    }, root)
