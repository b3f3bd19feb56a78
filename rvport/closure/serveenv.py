"""The serving check's environment image: its image (closure/serveimage.py) plus the venv the check's install
step makes, with every wheel of the wheelhouse installed in it but the recipe's own (docs/closure.md, "The
environment image").

A CI job checks a new wheel of the recipe (a pull request's vllm) against a closure whose other wheels do not
change between runs. Installing those ~150 wheels under emulation is minutes of every check; installed once
into an image, they are found again by every later check of a wheelhouse with the same other wheels. The
check's install step then runs the same pip command on the whole requirements.txt in that venv: pip finds
every other wheel installed and installs the recipe's own, so the environment is the one a user's single pip
call makes. `--fresh-install` installs everything in the check's container, as before.

    plan_env   the wheels it holds (every wheel but the recipe's, by file and sha256), its requirements file
               and Dockerfile (resources/dockerfiles/serve-env.Dockerfile); its tag is
               rvport/toolchain:RECIPE-serve-env-KEY, KEY a digest of the serving check's image id and the
               Dockerfile with its requirements (so of every wheel's sha256, and of the user it is made for)
    ensure     the image found under its tag, or made: the wheels copied from the wheelhouse into a build
               context (each checked against its sha256 as it is copied), then built with no network. A build
               that fails is recorded (status failed, the log named) and the check installs everything in
               its container, where pip's own error is the install step's.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from rvport.closure import wheelhouse as wheelhouses
from rvport.engine import buildx, images, render
from rvport.engine.stage import toolchain_tag
from rvport.errors import IntegrityError, RvportError
from rvport.safetext import printable
from rvport.sources.cache import hash_file
from rvport.target import PLATFORM as RISCV64

VENV = "/tmp/rvport-venv"  # the venv the check's script installs into (resources/scripts/serve-check.py)
TEMPLATE = "serve-env"
REQUIREMENTS = "requirements.txt"
WHEELS = "wheels"
_WHEEL_FILE = re.compile(r"^[A-Za-z0-9_.+!-]+\.whl$")


@dataclass(frozen=True, kw_only=True)
class EnvPlan:
    wheels: tuple[dict, ...]  # the wheelhouse's entries it installs (name, file, sha256, ...)
    left: tuple[str, ...]  # the wheel files it leaves to the check's install step (the recipe's own)
    rendered: render.Rendered  # its Dockerfile, with its requirements file
    tag: str


def plan_env(wh: wheelhouses.Wheelhouse, serve_image: str, serve_image_id: str, user: str) -> EnvPlan | None:
    """What the environment image of `wh` on the serving check's image holds; None when there is nothing to
    install beforehand (the wheelhouse has no wheel but the recipe's)."""
    own = canonicalize_name(wh.recipe)
    wheels = tuple(w for w in wh.doc["wheels"] if canonicalize_name(w["name"]) != own)
    left = tuple(w["file"] for w in wh.doc["wheels"] if canonicalize_name(w["name"]) == own)
    if not wheels:
        return None
    for w in wheels:  # read() checked them as the wheelhouse's files; here they become paths of a context
        if not _WHEEL_FILE.match(w["file"]):
            raise IntegrityError(
                f"the wheelhouse {wh.directory} lists a wheel file name rvport does not take: "
                f"{printable(w['file'], lines=False)[:120]}",
                hint="make the wheelhouse again with `rvport wheelhouse`",
            )
    requirements = wheelhouses.requirements_text((w["name"], w["file"], w["sha256"]) for w in wheels)
    base = dockerfile(serve_image, user)
    rendered = render.Rendered(template=base.template, text=base.text, files=((REQUIREMENTS, requirements),))
    tag, _ = toolchain_tag(wh.recipe, "serve-env", serve_image_id, rendered)
    return EnvPlan(wheels=wheels, left=left, rendered=rendered, tag=tag)


def dockerfile(serve_image: str, user: str) -> render.Rendered:
    """The image's Dockerfile on the serving check's image `serve_image`, for the numeric `user` (uid:gid)."""
    if not re.fullmatch(r"[0-9]+:[0-9]+", user):
        raise ValueError(f"a numeric uid:gid, not {user!r}")
    return render.render(TEMPLATE, {"BASE": serve_image, "USER": user, "VENV": VENV})


@dataclass(frozen=True, kw_only=True)
class ServeEnv:
    status: str  # found, made, failed (the check installs everything in its container), off
    tag: str | None = None
    image_id: str | None = None
    wheels: int = 0  # the wheels installed in it
    left: tuple[str, ...] = ()  # the wheel files the check's install step installs
    seconds: float = 0.0
    reason: str | None = None  # why it is off or failed

    @property
    def ready(self) -> bool:
        """The check's container starts from this image, its venv made."""
        return self.status in ("found", "made")

    def to_json(self) -> dict:
        out: dict = {"status": self.status, "seconds": round(self.seconds, 1)}
        if self.tag is not None:
            out.update(tag=self.tag, image_id=self.image_id, wheels=self.wheels, left=list(self.left))
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def user_spec() -> str:
    """The user the check's container runs as (servecheck.container_args), numeric."""
    return f"{os.getuid()}:{os.getgid()}"


def ensure(
    wh: wheelhouses.Wheelhouse,
    serve_image: str,
    serve_image_id: str,
    *,
    tmp_root: Path,
    log_path: Path,
    on_line: Callable[[str], None] | None = None,
) -> ServeEnv:
    """The environment image (the module's docstring): found, made, or failed with the reason."""
    t0 = time.monotonic()
    plan = plan_env(wh, serve_image, serve_image_id, user_spec())
    if plan is None:
        return ServeEnv(status="off", reason="the wheelhouse holds no wheel but the recipe's")
    found = buildx.image_info(plan.tag)
    if found is not None:
        return ServeEnv(
            status="found",
            tag=plan.tag,
            image_id=found["id"],
            wheels=len(plan.wheels),
            left=plan.left,
            seconds=time.monotonic() - t0,
        )
    tmp_root.mkdir(parents=True, exist_ok=True)
    ctx = Path(tempfile.mkdtemp(prefix="serve-env-", dir=tmp_root))
    try:
        context(ctx, wh.directory, plan)
        image_id = images.load_image(
            ctx,
            plan.tag,
            platform=RISCV64,
            log_path=log_path,
            what="serving check environment image",
            on_line=on_line,
            network="none",
        )
    except RvportError as e:
        return ServeEnv(
            status="failed",
            wheels=len(plan.wheels),
            left=plan.left,
            seconds=time.monotonic() - t0,
            reason=f"{e.render().splitlines()[0][:400]} (see {log_path})",
        )
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    return ServeEnv(
        status="made",
        tag=plan.tag,
        image_id=image_id,
        wheels=len(plan.wheels),
        left=plan.left,
        seconds=time.monotonic() - t0,
    )


def context(ctx: Path, wheelhouse: Path, plan: EnvPlan) -> None:
    """ctx/Dockerfile, ctx/requirements.txt and ctx/wheels/FILE for every wheel of the plan, each copied
    from the wheelhouse (never a link followed) and checked against its sha256 as it is copied."""
    (ctx / "Dockerfile").write_text(plan.rendered.text, encoding="utf-8")
    for name, text in plan.rendered.files:
        (ctx / name).write_text(text, encoding="utf-8")
    (ctx / WHEELS).mkdir()
    for w in plan.wheels:
        src = wheelhouse / w["file"]
        if src.is_symlink() or not src.is_file():
            raise IntegrityError(f"{src}: not a file of the wheelhouse", hint="make the wheelhouse again")
        got, _ = hash_file(src, copy_to=ctx / WHEELS / w["file"])
        if got != w["sha256"]:
            raise IntegrityError(
                f"{src}: sha256 {got}, the wheelhouse says {w['sha256']}",
                hint="the wheelhouse changed since it was read: make it again with `rvport wheelhouse`",
            )
