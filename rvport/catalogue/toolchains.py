"""Pinned toolchains: frozen values loaded from toolchains/*.yaml, validated with file:line errors.

A toolchain of kind `archive` (Go, Rust) is a set of pinned archives, one per build platform
(`linux/riscv64` for native and emulated stages, `linux/amd64` for cross stages on an x86-64 host), plus
optional extra target libraries (`targets`, e.g. Rust's riscv64 standard library for cross stages).
Each archive is unpacked into `install` (dropping `strip` leading path components) unless `setup`
commands are given: then it is unpacked in a scratch directory and the commands run there, with
`RVPORT_TOOLCHAIN_PREFIX` set to `install` (Rust's dist tarballs carry an install.sh).

Files of another kind (the base image, `kind: debian`) live beside them and are not read here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Mapping

from rvport import resources
from rvport.errors import Problem, RecipeError
from rvport.catalogue.schema import validate
from rvport.catalogue.yamlsrc import line_of, load_yaml

_PLATFORM = re.compile(r"^linux/(riscv64|amd64|arm64)$")


@dataclass(frozen=True, kw_only=True)
class ToolchainArchive:
    key: str                      # the platform ("linux/riscv64") or the target triple it serves
    url: str
    sha256: str
    line: int | None = None

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]

    def to_json(self) -> dict:
        return {"key": self.key, "url": self.url, "sha256": self.sha256}


@dataclass(frozen=True, kw_only=True)
class ToolchainSpec:
    name: str
    version: str
    kind: str
    install: str
    path: tuple[str, ...]
    archives: Mapping[str, ToolchainArchive]       # build platform -> archive
    targets: Mapping[str, ToolchainArchive] = field(default_factory=dict)
    strip: int = 1
    setup: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    file: Path | None = None

    def archive_for(self, platform: str) -> ToolchainArchive | None:
        """The archive for a build platform such as `linux/amd64`, or None if the toolchain has none."""
        return self.archives.get(platform)

    def to_json(self) -> dict:
        return {
            "name": self.name, "version": self.version, "kind": self.kind, "install": self.install,
            "path": list(self.path), "strip": self.strip, "setup": list(self.setup), "env": dict(self.env),
            "archives": {k: a.to_json() for k, a in sorted(self.archives.items())},
            "targets": {k: a.to_json() for k, a in sorted(self.targets.items())},
        }


@cache
def toolchain_schema() -> dict:
    return json.loads(resources.schema_text("toolchain"))


def default_toolchains_dir() -> Path:
    """The built-in toolchains/ (shipped in the package); RVPORT_TOOLCHAINS overrides."""
    return resources.directory("toolchains")


def _archives(d: dict) -> dict[str, ToolchainArchive]:
    return {k: ToolchainArchive(key=k, url=v["url"], sha256=v["sha256"], line=line_of(d, k))
            for k, v in (d or {}).items()}


def load_toolchain_file(path: Path) -> tuple[ToolchainSpec | None, list[Problem]]:
    """Parse one toolchain file; (None, []) for a file of another kind (a base image)."""
    file = str(path)
    doc, problem = load_yaml(path)
    if problem:
        return None, [problem]
    if not isinstance(doc, dict):
        return None, [Problem(message="a toolchain file must be a YAML mapping", file=file, line=1,
                              hint="see rvport/data/toolchain.schema.json")]
    if doc.get("kind", "archive") != "archive":
        return None, []
    problems = validate(doc, toolchain_schema(), file=file)
    if problems:
        return None, problems
    if doc["name"] != path.stem:
        problems.append(Problem(message=f"toolchain name {doc['name']!r} differs from its file name {path.stem!r}",
                                file=file, line=line_of(doc, "name"), hint=f"rename the file to {doc['name']}.yaml"))
    if not doc["archives"]:
        problems.append(Problem(message="archives: needs at least one build platform", file=file,
                                line=line_of(doc, "archives"), hint="add e.g. linux/riscv64: {url: ..., sha256: ...}"))
    for key in doc["archives"]:
        if not _PLATFORM.match(key):
            problems.append(Problem(message=f"archives: {key!r} is not a build platform", file=file,
                                    line=line_of(doc["archives"], key),
                                    hint="use linux/riscv64, linux/amd64 or linux/arm64"))
    if not doc["install"].rstrip("/") or not any(p.startswith(doc["install"].rstrip("/")) for p in doc["path"]):
        problems.append(Problem(message="path: no entry lies under `install`", file=file, line=line_of(doc, "path"),
                                hint=f"add {doc['install'].rstrip('/')}/bin"))
    if problems:
        return None, problems
    spec = ToolchainSpec(
        name=doc["name"], version=str(doc["version"]), kind=doc["kind"], install=doc["install"],
        path=tuple(doc["path"]), archives=_archives(doc["archives"]), targets=_archives(doc.get("targets") or {}),
        strip=int(doc.get("strip", 1)), setup=tuple(doc.get("setup") or ()), env=dict(doc.get("env") or {}),
        description=doc.get("description", ""), file=path,
    )
    return spec, []


def load_toolchains(root: Path | None = None) -> dict[str, ToolchainSpec]:
    """Load every archive toolchain under root; collect all problems of all files and raise them together."""
    root = (root or default_toolchains_dir()).resolve()
    if not root.is_dir():
        raise RecipeError(f"toolchain directory {root} not found",
                          hint="set RVPORT_TOOLCHAINS to an existing directory, or unset it for the built-in toolchains")
    problems: list[Problem] = []
    specs: dict[str, ToolchainSpec] = {}
    for path in sorted(root.glob("*.yaml")):
        spec, probs = load_toolchain_file(path)
        problems += probs
        if spec is not None:
            specs[spec.name] = spec
    if problems:
        n = len(problems)
        raise RecipeError(f"{n} problem{'s' if n > 1 else ''} in the toolchains under {root}", problems=problems)
    return specs
