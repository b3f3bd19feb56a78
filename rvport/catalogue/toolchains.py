"""Pinned toolchains: frozen values loaded from toolchains/*.yaml, validated with file:line errors.

A toolchain file of kind `archive` (Go, Rust) pins a set of archives, one per build platform
(`linux/riscv64` for native and emulated stages, `linux/amd64` for cross stages on an x86-64 host), plus
optional extra target libraries (`targets`, e.g. Rust's riscv64 standard library for cross stages), and says
how they would be installed (`install`, `path`, `strip`, `setup`, `env`). The whole file is validated (its
schema, platform keys, a `path` under `install`), but rvport reads only the toolchain's name and version
today (the pinned Go's version for host-side `go mod vendor`, rvport.sources.tree): no stage installs the
archives yet (docs/heavy-recipes.md, "Open"), so they are not loaded into values nobody reads.

Base image specs are not toolchains: they live in bases/ (rvport.catalogue.bases), and a base spec found here
is reported with its file, so that an old toolchains directory (RVPORT_TOOLCHAINS) is moved, not half-read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rvport import resources
from rvport.catalogue.document import load_document, schema
from rvport.catalogue.yamlsrc import LDict, line_of
from rvport.errors import Problem, RecipeError
from rvport.fileio import user_dir

_PLATFORM = re.compile(r"^linux/(riscv64|amd64|arm64)\Z")


@dataclass(frozen=True, kw_only=True)
class ToolchainSpec:
    name: str
    version: str
    kind: str
    description: str = ""
    file: Path | None = None


def toolchain_schema() -> dict:
    return schema("toolchain")


def default_toolchains_dir() -> Path:
    """The built-in toolchains/ (shipped in the package); RVPORT_TOOLCHAINS overrides."""
    return resources.directory("toolchains")


def load_toolchain_file(path: Path) -> tuple[ToolchainSpec | None, list[Problem]]:
    """Parse one toolchain file: (the spec, []) or (None, every problem found, each with file and line)."""
    file = str(path)

    def not_a_base(doc: LDict) -> list[Problem]:
        if doc.get("kind") != "debootstrap":
            return []
        return [
            Problem(
                message="a base image spec (kind: debootstrap) is not a toolchain",
                file=file,
                line=line_of(doc, "kind"),
                hint="base specs live in a bases directory of their own: move it there (RVPORT_BASES)",
            )
        ]

    doc, problems = load_document(
        path,
        "toolchain",
        what="a toolchain file",
        hint="see rvport/resources/schemas/toolchain.schema.json",
        multiline=re.compile("description"),
        named=True,
        before=not_a_base,
    )
    if doc is None:
        return None, problems
    if not doc["archives"]:
        problems.append(
            Problem(
                message="archives: needs at least one build platform",
                file=file,
                line=line_of(doc, "archives"),
                hint="add e.g. linux/riscv64: {url: ..., sha256: ...}",
            )
        )
    for key in doc["archives"]:
        if not _PLATFORM.match(key):
            problems.append(
                Problem(
                    message=f"archives: {key!r} is not a build platform",
                    file=file,
                    line=line_of(doc["archives"], key),
                    hint="use linux/riscv64, linux/amd64 or linux/arm64",
                )
            )
    if not doc["install"].rstrip("/") or not any(
        p.startswith(doc["install"].rstrip("/")) for p in doc["path"]
    ):
        problems.append(
            Problem(
                message="path: no entry lies under `install`",
                file=file,
                line=line_of(doc, "path"),
                hint=f"add {doc['install'].rstrip('/')}/bin",
            )
        )
    if problems:
        return None, problems
    spec = ToolchainSpec(
        name=doc["name"],
        version=str(doc["version"]),
        kind=doc["kind"],
        description=doc.get("description", ""),
        file=path,
    )
    return spec, []


def load_toolchains(root: Path | None = None) -> dict[str, ToolchainSpec]:
    """Load every archive toolchain under root; collect all problems of all files and raise them together."""
    root = user_dir(
        root or default_toolchains_dir(),
        what="toolchain directory",
        error=RecipeError,
        hint="set RVPORT_TOOLCHAINS to an existing directory, or unset it for the built-in toolchains",
    ).resolve()
    problems: list[Problem] = []
    specs: dict[str, ToolchainSpec] = {}
    for path in sorted(root.glob("*.yaml")):
        spec, probs = load_toolchain_file(path)
        problems += probs
        if spec is not None:
            specs[spec.name] = spec
    if problems:
        n = len(problems)
        raise RecipeError(
            f"{n} problem{'s' if n > 1 else ''} in the toolchains under {root}", problems=problems
        )
    return specs
