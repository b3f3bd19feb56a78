"""Base image specs: frozen values loaded from bases/*.yaml, validated with file:line errors.

A base is data: a Debian suite, variant, components and package set made with debootstrap (`kind:
debootstrap`), for the riscv64 target (`arch: target`, every stage's base) or for the build platform (`arch:
build`: cross toolchains, the accelerated prefix), or an image named by digest (`image:`) instead. A riscv64
base says which CPython its python3 is (`python: "3.13"`): `--python` selects the base by it. The
built-in specs ship in rvport/resources/bases/; RVPORT_BASES names another directory. The image a spec
becomes is rvport.engine.images: its tag carries a digest of the spec file's bytes (`text_sha256`), so moving
a file changes nothing and editing one makes a new image (except its `python:` and `gcc:` lines, which
describe the image).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rvport import resources
from rvport.catalogue.document import load_document, schema
from rvport.catalogue.yamlsrc import MAX_BYTES
from rvport.errors import Problem, RecipeError
from rvport.fileio import read_regular, user_dir

SCHEMA_FILE = "rvport/resources/schemas/base.schema.json"


@dataclass(frozen=True, kw_only=True)
class BaseSpec:
    name: str
    kind: str = "debootstrap"
    suite: str
    variant: str = "minbase"
    components: tuple[str, ...] = ("main",)
    packages: tuple[str, ...]
    arch: str = "target"  # "target" (riscv64) or "build" (the host's platform)
    image: str | None = None  # a digest-pinned image replaces debootstrap
    python: str | None = None  # the CPython its python3 is (MAJOR.MINOR): what --python selects it by
    gcc: int | None = None  # the major version of its gcc: which -march extensions it accepts (profiles)
    file: Path
    # the spec file's bytes (less its `python:` and `gcc:` lines): what the base image's tag is a digest of
    text_sha256: str


# A spec's `python:` and `gcc:` lines say what the image is, they do not change what is made: the image's key
# is over the file's bytes without them, so saying a base's Python or GCC never makes its image again.
_DESCRIBING_LINES = re.compile(rb"^(python|gcc):[^\n]*\n?", re.MULTILINE)


def spec_digest(data: bytes) -> str:
    """sha256 of a spec file's bytes, its top-level `python:` and `gcc:` lines left out."""
    return hashlib.sha256(_DESCRIBING_LINES.sub(b"", data)).hexdigest()


def base_schema() -> dict:
    return schema("base")


def default_bases_dir() -> Path:
    """The built-in bases/ (shipped in the package); RVPORT_BASES overrides."""
    return resources.directory("bases")


def load_base_file(path: Path) -> tuple[BaseSpec | None, list[Problem]]:
    """Parse one base spec: (the spec, []) or (None, every problem found, each with its file and line)."""
    doc, problems = load_document(
        path, "base", what="a base spec", hint=f"see {SCHEMA_FILE} and bases/debian-trixie.yaml", named=True
    )
    if problems:  # strings: no control characters, as a recipe's and a toolchain file's
        return None, problems
    # a key the file leaves out gets the model's default (BaseSpec above), written there alone
    given = {k: doc[k] for k in ("kind", "variant", "arch", "image", "python", "gcc") if k in doc}
    spec = BaseSpec(
        name=doc["name"],
        suite=doc["suite"],
        **given,
        **({"components": tuple(doc["components"])} if "components" in doc else {}),
        packages=tuple(doc["packages"]),
        file=path,
        text_sha256=spec_digest(read_regular(path, limit=MAX_BYTES, what="base spec", error=RecipeError)),
    )
    return spec, []


def _root(root: Path | None) -> Path:
    """The bases directory, which must be one (fileio.user_dir: not missing, no file, no link leading out)."""
    return user_dir(
        root or default_bases_dir(),
        what="base directory",
        error=RecipeError,
        hint="set RVPORT_BASES to an existing directory, or unset it for the built-in bases",
    )


def load_base(name: str, root: Path | None = None) -> BaseSpec:
    """One base spec by name, from root (default: the built-in bases, or RVPORT_BASES)."""
    path = _root(root) / f"{name}.yaml"
    if not os.path.lexists(path):  # anything else of that name is read, and refused for what it is
        raise RecipeError(
            f"base {name!r} not found at {path}",
            hint="a base is bases/<name>.yaml (see bases/debian-trixie.yaml); a recipe names it in "
            "toolchain: base:",
        )
    spec, problems = load_base_file(path)
    if spec is None:
        raise RecipeError(f"invalid base spec {path}", problems=problems)
    return spec


def load_bases(root: Path | None = None) -> dict[str, BaseSpec]:
    """Every base spec under root; all problems of all files are collected and raised together."""
    root = _root(root)
    problems: list[Problem] = []
    specs: dict[str, BaseSpec] = {}
    for path in sorted(root.glob("*.yaml")):
        spec, probs = load_base_file(path)
        problems += probs
        if spec is not None:
            specs[spec.name] = spec
    if problems:
        n = len(problems)
        raise RecipeError(
            f"{n} problem{'s' if n > 1 else ''} in the base specs under {root}", problems=problems
        )
    return specs


def python_bases(bases: Mapping[str, BaseSpec]) -> dict[str, BaseSpec]:
    """The riscv64 base of each Python (`python:` of the `arch: target` specs), by version. Two riscv64 bases
    of one Python are refused: --python could not say which one it means."""
    by: dict[str, BaseSpec] = {}
    for spec in sorted(bases.values(), key=lambda b: b.name):
        if spec.arch != "target" or spec.python is None:
            continue
        other = by.get(spec.python)
        if other is not None:
            raise RecipeError(
                f"two riscv64 bases give Python {spec.python}: {other.name} and {spec.name}",
                problems=[
                    Problem(
                        message=f"Python {spec.python} is also {other.name}'s",
                        file=str(spec.file),
                        line=None,
                        hint="one riscv64 base per Python: drop `python:` from one of them",
                    )
                ],
            )
        by[spec.python] = spec
    return by


def recipe_base_problems(name: str, file: str, line: int | None, python: str | None = None) -> list[Problem]:
    """What is wrong with the base a recipe names in `toolchain: base:` (it must be a riscv64 base, `arch:
    target`, and the base of the Python the recipe pins in `toolchain: python:`, if it pins one), located at
    the recipe's line; [] when nothing is."""
    try:
        spec = load_base(name)
    except RecipeError as e:
        return [
            Problem(message=f"toolchain base {name!r}: {e.message}", file=file, line=line, hint=e.hint)
        ] + list(e.problems)
    if spec.arch != "target":
        return [
            Problem(
                message=f"toolchain base {name!r} is for the build platform (arch: build), not for riscv64",
                file=file,
                line=line,
                hint="name a base with arch: target, e.g. debian-trixie (cross stages get the build-platform "
                "base themselves)",
            )
        ]
    if python is not None and spec.python != python:
        return [
            Problem(
                message=f"toolchain python {python!r} is not the Python of base {name!r} "
                f"({spec.python or 'none given'})",
                file=file,
                line=line,
                hint="pin the Python the base gives (its `python:`), or name the base of that Python",
            )
        ]
    return []
