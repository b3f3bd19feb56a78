"""Renders stage Dockerfiles from the templates in dockerfiles/ (placeholders are @@NAME@@)."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from rvport import resources

if TYPE_CHECKING:
    from rvport.plan.planner import Stage
    from rvport.catalogue.recipes import Recipe

_PLACEHOLDER = re.compile(r"@@([A-Z_]+)@@")

# Which template builds which stage; cross stages (a build-platform container with a riscv64 cross
# toolchain) have their own templates per kind.
TEMPLATES: Mapping[str, str] = {
    "toolchain": "toolchain.Dockerfile",
    "build": "build.Dockerfile",
    "smoke": "smoke.Dockerfile",
    "cross": "cross.Dockerfile",
    "cross-toolchain": "cross-toolchain.Dockerfile",
    "accelerated": "accelerated.Dockerfile",                # riscv64 stage whose compilers are native cross ones
    "accelerated-prefix": "accelerated-prefix.Dockerfile",  # the cross toolchain prefix image (/opt/xtc)
}


def default_dockerfiles_dir() -> Path:
    """The built-in templates (rvport/resources/dockerfiles); RVPORT_DOCKERFILES overrides."""
    return resources.directory("dockerfiles")


@dataclass(frozen=True, kw_only=True)
class Rendered:
    template: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def render(stage: str, values: Mapping[str, str], root: Path | None = None) -> Rendered:
    name = TEMPLATES[stage]
    text = ((root or default_dockerfiles_dir()) / name).read_text()
    missing = sorted(set(_PLACEHOLDER.findall(text)) - set(values))
    if missing:
        raise KeyError(f"{name}: no value for {', '.join(missing)}")
    return Rendered(template=name, text=_PLACEHOLDER.sub(lambda m: values[m.group(1)], text))


def env_lines(env: Mapping[str, str]) -> str:
    """ENV instructions with JSON-quoted values (Dockerfile accepts "..." with JSON escapes)."""
    return "\n".join(f"ENV {k}={json.dumps(v)}" for k, v in sorted(env.items()))


# Reproducible builds: SOURCE_DATE_EPOCH is the newest time in the prepared sources (rvport clamps the times
# of the files it adds or patches to the sources' own, rvport.sources.tree.clamp_mtimes), unless the recipe
# sets it. Wheel builders, auditwheel and many compilers honour it.
SOURCE_DATE_EPOCH = """if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(find /src -type f -printf '%T@\\n' | sort -n | tail -n 1 | cut -d. -f1)
  export SOURCE_DATE_EPOCH
fi"""


def build_script(commands: list[str] | tuple[str, ...]) -> str:
    return ("#!/bin/sh\n# rvport: the recipe's build commands, run with sh -eux in /src\n" + SOURCE_DATE_EPOCH + "\n"
            + "\n".join(commands) + "\n")


def smoke_commands(kind: str, script: str) -> tuple[str, str]:
    """(install, run) shell snippets for a smoke test of this build kind."""
    if kind in ("python-wheel", "torch-wheel"):
        install = ("python3 -m pip install --no-index --no-deps --break-system-packages "
                   "--find-links /artifacts $(find /artifacts -name '*.whl')")
    else:
        install = "true"
    run = "sh /rvport/smoke" if script.lstrip().startswith("#!") else "python3 /rvport/smoke"
    return install, run


def packages_arg(packages: list[str] | tuple[str, ...]) -> str:
    return " ".join(shlex.quote(p) for p in sorted(set(packages)))


def stage_dockerfile(stage: "Stage", toolchain: str, profile: str, root: Path | None = None) -> Rendered:
    """The build stage's Dockerfile, as the runner builds it: cross stages get the kind's cross env."""
    from rvport.build.modes import cross
    from rvport.plan.planner import Mode

    values = {"TOOLCHAIN": toolchain, "ENV": env_lines(stage.env), "PROFILE": profile}
    if stage.mode is Mode.CROSS:
        return render("cross", {**values, "CROSS_ENV": env_lines(cross.ENV[stage.recipe.kind])}, root)
    return render("build", values, root)


def cross_toolchain_dockerfile(recipe: "Recipe", base: str, root: Path | None = None) -> Rendered:
    """The image a cross stage compiles in: build-platform base + the kind's cross packages (rvport/cross.py)."""
    from rvport.build.modes import cross

    return render("cross-toolchain", {
        "BASE": base, "FOREIGN_ARCH": cross.FOREIGN_ARCH, "PACKAGES": packages_arg(cross.packages(recipe)),
        "SAME_VERSION": cross.same_version_check(recipe.kind), "VERSIONS": cross.version_command(recipe.kind)},
        root)
