"""What rvport needs at run time, shipped inside the package: the one place that says where it is.

    recipes/       the built-in recipe catalogue (with its pinned patches and lock files)
    bases/         base image specs (Debian suite and packages, made with debootstrap, or an image by digest)
    toolchains/    pinned toolchain archives (Go, Rust)
    dockerfiles/   stage Dockerfile templates (placeholders @@NAME@@)
    scripts/       the shell and Python scripts rvport runs (inside stages, in a new root filesystem, on the
                   host), each a real file taking its parameters as arguments or environment
    schemas/       JSON Schemas of recipes, toolchains, bases and the documents rvport writes
    locks/         closure locks (RECIPE-VERSION-cpXY.yaml) and what `rvport lock` makes them from
    profiles.yaml, isa.yaml

Each directory can be replaced by another (RVPORT_BASES, RVPORT_TOOLCHAINS, RVPORT_DOCKERFILES,
RVPORT_LOCKS: read by the command line, rvport/cli/settings.py, which hands them to `configure`). Recipes are
different: user recipe directories (`--recipes DIR`, repeatable, or RVPORT_RECIPE_PATH, several joined with
':', read by the command line too) are layered over the built-in ones.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

# bases/, toolchains/ or dockerfiles/ replaced by another directory for this process (`configure`)
OVERRIDES: dict[str, Path] = {}


def builtin(*parts: str) -> Path:
    """A file or directory shipped in rvport/resources (installed packages are unpacked on disk)."""
    root = resources.files(__name__)
    return Path(str(root.joinpath(*parts)))


def configure(**dirs: Path | None) -> None:
    """Replace bases/, toolchains/ or dockerfiles/ by another directory (None: the built-in one again). The
    command line calls it with RVPORT_BASES, RVPORT_TOOLCHAINS and RVPORT_DOCKERFILES."""
    for name, d in dirs.items():
        if name not in ("bases", "toolchains", "dockerfiles", "locks"):
            raise KeyError(name)
        if d is None:
            OVERRIDES.pop(name, None)
        else:
            OVERRIDES[name] = d


def directory(name: str, override: Path | None = None) -> Path:
    """bases/, toolchains/, dockerfiles/ or locks/: the given directory, else the one `configure` was given,
    else
    the built-in one."""
    if override is not None:
        return override
    return OVERRIDES.get(name) or builtin(name)


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
    """User recipe directories, highest priority first (the command line's --recipes, or its
    RVPORT_RECIPE_PATH)."""
    if isinstance(flag, Path):
        return [flag]
    return list(flag or ())
