"""What rvport needs at run time, shipped inside the package: the one place that says where it is.

    recipes/       the built-in recipe catalogue (with its pinned patches and lock files)
    bases/         base image specs (Debian suite and packages, made with debootstrap, or an image by digest)
    toolchains/    pinned toolchain archives (Go, Rust)
    dockerfiles/   stage Dockerfile templates (placeholders @@NAME@@)
    scripts/       the shell and Python scripts rvport runs (inside stages, in a new root filesystem, on the
                   host), each a real file taking its parameters as arguments or environment
    schemas/       JSON Schemas of recipes, toolchains, bases and the documents rvport writes
    profiles.yaml, isa.yaml

Each directory can be replaced by an environment variable (RVPORT_BASES, RVPORT_TOOLCHAINS,
RVPORT_DOCKERFILES), and the command line passes its own flags through the same functions. Recipes are
different: user recipe directories (`--recipes DIR`, repeatable, or RVPORT_RECIPE_PATH, several joined with
':') are layered over the built-in ones.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

ENV = {"bases": "RVPORT_BASES", "toolchains": "RVPORT_TOOLCHAINS", "dockerfiles": "RVPORT_DOCKERFILES"}


def builtin(*parts: str) -> Path:
    """A file or directory shipped in rvport/resources (installed packages are unpacked on disk)."""
    root = resources.files(__name__)
    return Path(str(root.joinpath(*parts)))


def directory(name: str, override: Path | None = None) -> Path:
    """bases/, toolchains/ or dockerfiles/: the flag's directory, else its environment variable's, else the
    built-in one."""
    if override is not None:
        return override
    env = os.environ.get(ENV.get(name, ""), "")
    return Path(env) if env else builtin(name)


def text(*parts: str) -> str:
    return builtin(*parts).read_text(encoding="utf-8")


def script(name: str) -> str:
    """A script of resources/scripts, as it is shipped."""
    return text("scripts", name)


def script_command(name: str) -> str:
    """A one-command script of resources/scripts as a command line: its one line that is not the shebang, a
    comment or blank (a stage's build command that plan.json shows as it runs)."""
    lines = [ln for ln in script(name).splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if len(lines) != 1:
        raise ValueError(f"resources/scripts/{name}: one command line expected, found {len(lines)}")
    return lines[0]


def schema_text(name: str) -> str:
    return text("schemas", f"{name}.schema.json")


def user_recipe_dirs(flag: Path | list[Path] | None = None) -> list[Path]:
    """User recipe directories, highest priority first: the flag's, else RVPORT_RECIPE_PATH
    (':'-separated)."""
    if isinstance(flag, Path):
        return [flag]
    if flag:
        return list(flag)
    env = os.environ.get("RVPORT_RECIPE_PATH", "")
    return [Path(p) for p in env.split(os.pathsep) if p]
