"""A recipe's runtime closure, locked: every Python distribution an installed artifact needs at run time, each
resolved to exactly one origin (docs/closure.md).

    recipe   a wheel rvport builds (the lock's own recipe, and recipes such as msgspec), by recipe and version
    debian   a Debian package of the target's suite at an exact version, with the .deb's sha256 from the
             signed index (apt installs it; Python sees it in the system's site-packages)
    pypi     a wheel from the package index by exact file name and sha256 (pure, or tagged for the target)

Beside them a lock may hold `system`: Debian packages the installed artifact needs at run time that are no
Python distribution (the C++ compiler and torch's headers that torch.compile's C++ backend uses), each at an
exact version with its .deb's sha256 and why; one may have to be the same version as a Debian entry's
package (`matches`: libtorch-dev's headers are those of the python3-torch in use).

A lock is a YAML file in the catalogue (resources/locks/RECIPE-VERSION-cpXY.yaml), written by `rvport lock`
and never by hand: its `digest` is the sha256 of its canonical JSON without that field, so an edited lock is
refused (IntegrityError, exit 4) until it is made again. Loading also proves that it holds together
(`conflicts`): each entry's requirements, already evaluated for the target (riscv64 Linux, the CPython of the
base), name an entry of the lock whose version satisfies them, with the extras they ask for; otherwise
RecipeError (exit 3). What needs the network (the Debian index, the index's wheels, the build's wheels) is
checked where they are used (rvport.closure.wheelhouse).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
)
from packaging.version import InvalidVersion

from rvport import bounds, resources
from rvport.catalogue.document import load_document, schema
from rvport.catalogue.yamlsrc import line_of
from rvport.errors import IntegrityError, Problem, RecipeError
from rvport.fileio import user_dir

LOCK_SCHEMA = 1
LOCK_KIND = "rvport-closure-lock"
SCHEMA_FILE = "rvport/resources/schemas/closure-lock.schema.json"
ARCH = "riscv64"


class Origin(StrEnum):
    RECIPE = "recipe"
    DEBIAN = "debian"
    PYPI = "pypi"


# --------------------------------------------------------------------------------------------- the target
@dataclass(frozen=True, kw_only=True)
class Target:
    """What a lock is resolved for: CPython MAJOR.MINOR (and its full version, for markers), the glibc of the
    base's suite, riscv64 Linux."""

    python: str  # 3.14
    python_full: str  # 3.14.2: python_full_version in markers
    glibc: str  # 2.42: the newest manylinux tag a wheel may carry
    base: str  # the riscv64 base spec (debian-sid)
    suite: str  # its Debian suite (sid)

    @property
    def abi(self) -> str:
        return "cp" + self.python.replace(".", "")

    def to_json(self) -> dict:
        return {
            "python": self.python,
            "python_full": self.python_full,
            "abi": self.abi,
            "glibc": self.glibc,
            "architecture": ARCH,
            "base": self.base,
            "suite": self.suite,
        }

    def environment(self, extra: str = "") -> dict[str, str]:
        """The PEP 508 marker environment of the target (not of the host that resolves)."""
        return {
            "implementation_name": "cpython",
            "implementation_version": self.python_full,
            "os_name": "posix",
            "platform_machine": ARCH,
            "platform_python_implementation": "CPython",
            "platform_release": "",
            "platform_system": "Linux",
            "platform_version": "",
            "python_full_version": self.python_full,
            "python_version": self.python,
            "sys_platform": "linux",
            "extra": extra,
        }

    def platforms(self) -> list[str]:
        """Every platform tag a wheel for this target may carry, newest glibc first. pip does not expand a
        manylinux_2_N tag to the older ones a wheel may name (manylinux_2_31 fits glibc 2.42): all are
        listed."""
        major, minor = (int(x) for x in self.glibc.split(".")[:2])
        return [f"manylinux_{major}_{m}_{ARCH}" for m in range(minor, 16, -1)] + [f"linux_{ARCH}"]

    def tags(self) -> list[Tag]:
        """The wheel tags the target's CPython accepts, most specific first (packaging.tags' order)."""
        return _tags(self.python, tuple(self.platforms()))

    def wheel_fits(self, filename: str) -> int | None:
        """The rank of the best tag of a wheel file name among the target's tags (0 best), None when the
        wheel does not fit the target (another platform or Python, or not a wheel name)."""
        try:
            _, _, _, wtags = bounds.wheel_filename(filename)
        except InvalidWheelFilename:
            return None
        ranks = _tag_ranks(self.python, tuple(self.platforms()))
        found = [ranks[t] for t in wtags if t in ranks]
        return min(found) if found else None


@cache
def _tags(python: str, platforms: tuple[str, ...]) -> list[Tag]:
    version = tuple(int(x) for x in python.split("."))
    interp = "cp" + python.replace(".", "")
    return [
        *cpython_tags(version, abis=[interp], platforms=list(platforms)),
        *compatible_tags(version, interpreter=interp, platforms=list(platforms)),
    ]


@cache
def _tag_ranks(python: str, platforms: tuple[str, ...]) -> dict[Tag, int]:
    out: dict[Tag, int] = {}
    for i, t in enumerate(_tags(python, platforms)):
        out.setdefault(t, i)
    return out


def is_pure(filename: str) -> bool:
    """A wheel whose every tag is platform-independent (`any`)."""
    try:
        _, _, _, wtags = bounds.wheel_filename(filename)
    except InvalidWheelFilename:
        return False
    return all(t.platform == "any" for t in wtags)


# ------------------------------------------------------------------------------------------- requirements
def applicable(text: str, target: Target, extras: Iterable[str] = ()) -> Requirement | None:
    """A requirement line (Requires-Dist, a requirements file's line) as it applies to the target: None when
    its marker is false for the target with none of `extras` asked; else the requirement without its
    marker. Raises ValueError on a line that is no requirement."""
    try:
        req = bounds.requirement(text)
    except InvalidRequirement as e:
        raise ValueError(f"{bounds.shown(text)} is not a requirement: {e}") from e
    if req.marker is not None:
        try:
            hit = any(req.marker.evaluate(target.environment(x)) for x in ("", *extras))
        except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName) as e:
            raise ValueError(f"{bounds.shown(text)}: its marker cannot be evaluated: {e}") from e
        if not hit:
            return None
        req.marker = None
    return req


def debian_python_version(deb_version: str) -> str:
    """The upstream (Python) version of a Debian version: no epoch, no Debian revision, no repack suffix
    (+dfsg, +ds, ~...): 1:2.14.1+dfsg-1 -> 2.14.1. Raises ValueError when what is left is no PEP 440
    version."""
    v = deb_version.split(":", 1)[-1]
    v = v.rsplit("-", 1)[0] if "-" in v else v
    v = re.split(r"[+~]", v, maxsplit=1)[0]
    try:
        return str(bounds.version(v))
    except InvalidVersion as e:
        raise ValueError(f"Debian version {deb_version!r} gives no Python version ({v!r})") from e


# ------------------------------------------------------------------------------------------------ entries
@dataclass(frozen=True, kw_only=True)
class DebianRef:
    package: str
    version: str  # Debian's version (epoch and revision included)
    sha256: str  # the .deb's, from the signed Packages index

    def to_json(self) -> dict:
        return {"package": self.package, "version": self.version, "sha256": self.sha256}


@dataclass(frozen=True, kw_only=True)
class Entry:
    name: str  # canonical distribution name
    version: str  # the Python version (for debian: Debian's upstream version)
    origin: Origin
    requires: tuple[str, ...] = ()  # evaluated for the target: no markers
    extras: tuple[str, ...] = ()  # the extras the closure asks of it
    wheel: str | None = None  # pypi: the file name
    sha256: str | None = None  # pypi: the file's digest
    recipe: str | None = None  # recipe: its name in the catalogue
    debian: DebianRef | None = None
    # a Debian package of the same distribution that apt installs anyway (a Depends of another Debian entry)
    # at a version the closure cannot use: this entry's wheel is installed over it
    shadows: DebianRef | None = None
    line: int | None = None

    def to_json(self) -> dict:
        d: dict[str, Any] = {"name": self.name, "version": self.version, "origin": self.origin.value}
        if self.extras:
            d["extras"] = list(self.extras)
        if self.wheel:
            d["wheel"] = self.wheel
            d["sha256"] = self.sha256
        if self.recipe:
            d["recipe"] = self.recipe
        if self.debian:
            d["debian"] = self.debian.to_json()
        if self.shadows:
            d["shadows"] = self.shadows.to_json()
        d["requires"] = list(self.requires)
        return d


@dataclass(frozen=True, kw_only=True)
class SystemPackage:
    """A Debian package the runtime needs that is no Python distribution (a compiler, headers)."""

    package: str
    version: str  # Debian's version
    sha256: str  # the .deb's, from the signed Packages index
    file: str  # an absolute path the package installs: what tells, on a board, whether it is there
    why: str
    # a Debian package of the lock (an entry's, or another system package) this one must equal in version:
    # libtorch-dev's headers are those of python3-torch only when both are the same source version
    matches: str | None = None
    line: int | None = None

    def ref(self) -> DebianRef:
        return DebianRef(package=self.package, version=self.version, sha256=self.sha256)

    def to_json(self) -> dict:
        d: dict[str, Any] = {
            "package": self.package,
            "version": self.version,
            "sha256": self.sha256,
            "file": self.file,
        }
        if self.matches:
            d["matches"] = self.matches
        d["why"] = self.why
        return d


@dataclass(frozen=True, kw_only=True)
class Lock:
    recipe: str
    version: str
    target: Target
    entries: tuple[Entry, ...]
    digest: str  # sha256:<hex> of the canonical JSON without `digest`
    debian_release: Mapping[str, Any]  # the Release the Debian entries were read from (date, Valid-Until)
    # the edits the recipe's build makes to its requirements ({line, with (absent: dropped), why}): its
    # wheel's Requires-Dist is what the lock holds only if the build made them (the wheelhouse checks)
    edits: tuple[Mapping[str, str], ...] = ()
    # Debian packages of the runtime that are no distribution (SystemPackage); absent from the file when none
    system: tuple[SystemPackage, ...] = ()
    file: Path | None = None

    def entry(self, name: str) -> Entry:
        key = canonicalize_name(name)
        for e in self.entries:
            if e.name == key:
                return e
        raise KeyError(name)

    def dropped(self) -> list[str]:
        """The root's requirement lines its build leaves out (an edit without `with`), in the lock's order:
        what the closure does not give (their reasons are the edits' `why`; docs/closure.md)."""
        return [e["line"] for e in self.edits if "line" in e and "with" not in e]

    def by_origin(self, origin: Origin) -> list[Entry]:
        return [e for e in self.entries if e.origin is origin]

    def counts(self) -> dict[str, int]:
        return {o.value: len(self.by_origin(o)) for o in Origin}

    def to_json(self) -> dict:
        """The lock's document (what its file holds, the digest included)."""
        return {**self.body(), "digest": self.digest}

    def body(self) -> dict:
        doc = {
            "schema": LOCK_SCHEMA,
            "kind": LOCK_KIND,
            "recipe": self.recipe,
            "version": self.version,
            "target": self.target.to_json(),
            "debian_release": dict(self.debian_release),
            "edits": [dict(e) for e in self.edits],
            "packages": [e.to_json() for e in self.entries],
        }
        if self.system:  # a lock without any keeps the document (and digest) it always had
            doc["system"] = [p.to_json() for p in self.system]
        return doc

    def summary(self) -> dict:
        """What plan.json shows of it."""
        return {
            "file": str(self.file) if self.file else None,
            "recipe": self.recipe,
            "version": self.version,
            "python": self.target.python,
            "abi": self.target.abi,
            "digest": self.digest,
            "counts": self.counts(),
            "edits": len(self.edits),
            "total": len(self.entries),
            "debian": [
                f"{e.debian.package}={e.debian.version}" for e in self.by_origin(Origin.DEBIAN) if e.debian
            ],
            "system": [f"{p.package}={p.version}" for p in self.system],
            # RECIPE==VERSION of each wheel rvport builds: what `rvport wheelhouse` wants in --artifacts
            "recipes": sorted(f"{e.recipe}=={e.version}" for e in self.by_origin(Origin.RECIPE) if e.recipe),
        }


def digest_of(body: Mapping[str, Any]) -> str:
    """sha256:<hex> of a lock document's canonical JSON (sorted keys, no spaces), without its `digest`."""
    doc = {k: v for k, v in body.items() if k != "digest"}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------------------ loading
def locks_dir() -> Path:
    """The built-in locks/, or the directory RVPORT_LOCKS names (resources.configure)."""
    return resources.directory("locks")


def lock_path(recipe: str, version: str, python: str, root: Path | None = None) -> Path:
    return (root or locks_dir()) / f"{recipe}-{version}-cp{python.replace('.', '')}.yaml"


def lock_schema() -> dict:
    return schema("closure-lock")


class LockConflict(RecipeError):
    """A lock whose entries do not satisfy each other's requirements (or the recipe's own pins)."""


def _plain(value: Any) -> Any:
    """The YAML loader's located containers as plain JSON values (for the digest)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def load_lock(path: Path) -> Lock:
    """A lock file, its shape (schema), digest and coherence checked. Raises RecipeError (exit 3) for a file
    that is no lock, IntegrityError (exit 4) for one whose digest is not its content's, LockConflict (exit 3)
    for one whose entries do not satisfy each other."""
    regenerate = (
        "make it again with `rvport lock RECIPE --output FILE` (docs/closure.md); never edit it by hand"
    )
    doc, problems = load_document(path, "closure-lock", what="a closure lock", hint=regenerate)
    if doc is None:
        raise RecipeError(f"the closure lock {path} is not valid", problems=problems, hint=regenerate)
    want = digest_of(_plain(doc))
    if doc["digest"] != want:
        raise IntegrityError(
            f"the closure lock {path} was changed after it was made: its digest says {doc['digest']}, its "
            f"content is {want}",
            hint=regenerate,
        )
    t = doc["target"]
    target = Target(
        python=t["python"], python_full=t["python_full"], glibc=t["glibc"], base=t["base"], suite=t["suite"]
    )
    entries: list[Entry] = []
    for i, p in enumerate(doc["packages"]):
        entries.append(_entry(p, line_of(doc["packages"], i)))
    system = doc.get("system") or []
    systems = tuple(
        SystemPackage(
            package=p["package"],
            version=p["version"],
            sha256=p["sha256"],
            file=p["file"],
            why=p["why"],
            matches=p.get("matches"),
            line=line_of(system, i),
        )
        for i, p in enumerate(system)
    )
    lock = Lock(
        recipe=doc["recipe"],
        version=doc["version"],
        target=target,
        entries=tuple(entries),
        digest=doc["digest"],
        debian_release=_plain(doc.get("debian_release") or {}),
        edits=tuple(_plain(e) for e in doc.get("edits", [])),
        system=systems,
        file=path,
    )
    problems = conflicts(lock)
    if problems:
        raise LockConflict(
            f"the closure lock {path} does not hold together ({len(problems)} problem(s))",
            problems=problems,
            hint="a pin that conflicts: " + regenerate,
        )
    return lock


def _deb(d: Mapping[str, Any] | None) -> DebianRef | None:
    if not d:
        return None
    return DebianRef(package=d["package"], version=d["version"], sha256=d["sha256"])


def _entry(p: Mapping[str, Any], line: int | None) -> Entry:
    return Entry(
        name=p["name"],
        version=p["version"],
        origin=Origin(p["origin"]),
        requires=tuple(p.get("requires", ())),
        extras=tuple(p.get("extras", ())),
        wheel=p.get("wheel"),
        sha256=p.get("sha256"),
        recipe=p.get("recipe"),
        debian=_deb(p.get("debian")),
        shadows=_deb(p.get("shadows")),
        line=line,
    )


def conflicts(lock: Lock) -> list[Problem]:
    """Every way the lock fails to hold together, each located: an entry without what its origin needs, a
    name twice, a version that is no version, a requirement naming no entry, an entry whose version does not
    satisfy a requirement or lacks an extra asked of it, a pypi wheel that does not fit the target, the lock's
    own recipe missing, an entry nothing requires."""
    file = str(lock.file) if lock.file else "lock"
    out: list[Problem] = []

    def bad(e: Entry | None, msg: str, hint: str | None = None) -> None:
        out.append(Problem(message=msg, file=file, line=e.line if e else None, hint=hint))

    by: dict[str, Entry] = {}
    for e in lock.entries:
        if e.name != canonicalize_name(e.name):
            bad(e, f"{e.name}: not a canonical name (write {canonicalize_name(e.name)})")
        if e.name in by:
            bad(e, f"{e.name} is locked twice: one distribution has exactly one origin")
        by[e.name] = e
        try:
            version = bounds.version(e.version)
        except InvalidVersion as err:
            bad(e, f"{e.name}: version {bounds.shown(e.version)} is not a PEP 440 version ({err})")
            continue  # nothing below can be compared with it
        need = {Origin.PYPI: ("wheel", "sha256"), Origin.RECIPE: ("recipe",), Origin.DEBIAN: ("debian",)}
        for f in need[e.origin]:
            if not getattr(e, f):
                bad(e, f"{e.name}: an entry from {e.origin.value} needs `{f}`")
        if e.origin is Origin.PYPI and e.wheel:
            if lock.target.wheel_fits(e.wheel) is None:
                bad(e, f"{e.name}: the wheel {e.wheel} does not fit {lock.target.abi} Linux {ARCH}")
            else:
                wname, wver, _, _ = bounds.wheel_filename(e.wheel)
                if wname != e.name or str(wver) != str(version):
                    bad(e, f"{e.name} {e.version}: the wheel {e.wheel} is {wname} {wver}")
        if e.origin is Origin.DEBIAN and e.debian:
            try:
                if debian_python_version(e.debian.version) != str(version):
                    bad(e, f"{e.name} {e.version}: Debian's {e.debian.package} {e.debian.version} is another")
            except (ValueError, InvalidVersion) as err:
                bad(e, f"{e.name}: {err}")
    for i, ed in enumerate(lock.edits):
        if not (ed.get("line") or ed.get("with")):
            bad(None, f"edits[{i}]: an edit names the line it changes, the requirement it adds, or both")
    root = by.get(canonicalize_name(lock.recipe))
    if root is None or root.origin is not Origin.RECIPE or root.version != lock.version:
        bad(root, f"the lock's own recipe {lock.recipe} {lock.version} is not an entry from recipe")
    required: set[str] = set()
    for e in lock.entries:
        for text in e.requires:
            try:
                req = bounds.requirement(text)
            except InvalidRequirement as err:
                bad(e, f"{e.name}: requirement {bounds.shown(text)} cannot be read: {err}")
                continue
            if req.marker is not None:
                bad(e, f"{e.name}: requirement {bounds.shown(text)} still has a marker: it must be evaluated")
            name = canonicalize_name(req.name)
            required.add(name)
            dep = by.get(name)
            if dep is None:
                bad(e, f"{e.name} {e.version} requires {text}, which the lock does not hold")
                continue
            try:
                ok = req.specifier.contains(bounds.version(dep.version), prereleases=True)
            except InvalidVersion:
                continue  # said above
            if not ok:
                bad(
                    e,
                    f"{e.name} {e.version} requires {text}; the lock has {dep.name} {dep.version} "
                    f"from {dep.origin.value}",
                    hint="the versions conflict: lock a version that satisfies every requirement",
                )
            missing = {canonicalize_name(x) for x in req.extras} - {canonicalize_name(x) for x in dep.extras}
            if missing:
                bad(
                    e,
                    f"{e.name} requires {text}; {dep.name}'s entry lacks extra(s) "
                    f"{', '.join(sorted(missing))}",
                )
    for e in lock.entries:
        if e.name not in required and e is not root:
            bad(e, f"{e.name} is locked but nothing in the closure requires it")
    out += system_conflicts(lock)
    return out


def debian_versions(lock: Lock) -> dict[str, str]:
    """Debian package -> version of everything the lock has apt install (entries, shadowed, system)."""
    out = {e.debian.package: e.debian.version for e in lock.entries if e.debian}
    out |= {e.shadows.package: e.shadows.version for e in lock.entries if e.shadows}
    out |= {p.package: p.version for p in lock.system}
    return out


def system_conflicts(lock: Lock) -> list[Problem]:
    """The system packages: each once, none also a Debian entry's, and each `matches` naming a package of
    the lock at the same version (libtorch-dev's headers are the python3-torch's only then)."""
    file = str(lock.file) if lock.file else "lock"
    out: list[Problem] = []
    entries = {e.debian.package for e in lock.entries if e.debian} | {
        e.shadows.package for e in lock.entries if e.shadows
    }
    versions = debian_versions(lock)
    seen: set[str] = set()
    for p in lock.system:
        if p.package in seen:
            out.append(Problem(message=f"system package {p.package} is locked twice", file=file, line=p.line))
        seen.add(p.package)
        if p.package in entries:
            out.append(
                Problem(
                    message=f"system package {p.package} is a Debian entry's package too: it has one place",
                    file=file,
                    line=p.line,
                )
            )
        if p.matches:
            have = versions.get(p.matches)
            if have is None:
                out.append(
                    Problem(
                        message=f"system package {p.package} must match {p.matches}, which the lock does "
                        "not hold",
                        file=file,
                        line=p.line,
                    )
                )
            elif have != p.version:
                out.append(
                    Problem(
                        message=f"system package {p.package} {p.version} is not the version of "
                        f"{p.matches} ({have}): its files are not those of the {p.matches} installed",
                        file=file,
                        line=p.line,
                        hint="lock both at the same version (make the lock again when the archive holds "
                        "them)",
                    )
                )
    return out


def check_recipe_pins(lock: Lock, pins: Iterable[Any]) -> list[Problem]:
    """The lock's Debian entries against the recipe's own Debian pins (`toolchain: pins:`, name/version/
    sha256): the package the recipe was built against is the one the closure installs."""
    out: list[Problem] = []
    debs = {e.debian.package: (e.name, e.debian, e.line) for e in lock.by_origin(Origin.DEBIAN) if e.debian}
    debs |= {s.package: (f"system package {s.package}", s.ref(), s.line) for s in lock.system}
    for p in pins:
        if p.name not in debs:
            continue
        what, deb, line = debs[p.name]
        if (deb.version, deb.sha256) != (p.version, p.sha256):
            out.append(
                Problem(
                    message=f"{what}: the lock has Debian's {p.name} {deb.version} (sha256 "
                    f"{deb.sha256}); the recipe is built against {p.version} (sha256 {p.sha256})",
                    file=str(lock.file) if lock.file else None,
                    line=line,
                    hint="the recipe's pins and its lock must name the same package: make the lock again",
                )
            )
    return out


LOCKS_HINT = "set RVPORT_LOCKS to a directory of closure locks, or unset it for the built-in resources/locks/"


def lock_root(root: Path | None = None) -> Path:
    """The locks directory (root, else locks_dir()), which must be one: a missing RVPORT_LOCKS, a file or a
    link leading out of the directory that holds it is a RecipeError (exit 3), never taken for no locks."""
    return user_dir(root or locks_dir(), what="lock directory", error=RecipeError, hint=LOCKS_HINT)


def find_lock(recipe: str, version: str, python: str, root: Path | None = None) -> Lock | None:
    """The lock of a recipe's version for a Python, loaded and checked; None when the locks directory holds
    no file of that name. Anything of that name that is not a lock is an error, never skipped: a FIFO, a
    directory, a device, a link leading out of the directory (load_lock, exit 3)."""
    path = lock_path(recipe, version, python, lock_root(root))
    return load_lock(path) if os.path.lexists(path) else None
