"""`rvport lock`: resolve a recipe's runtime closure for its base's Python on riscv64 and write its lock
(rvport.catalogue.closure_lock; docs/closure.md).

The resolver is ours, small, and explainable:

- the root's requirements are the recipe's sdist's requirements files (the policy names them, with the edits
  the recipe's build makes), each evaluated for the target (riscv64 Linux, the base's CPython: not the host's
  markers, which pip would use);
- a name the policy maps to a recipe is that recipe at its catalogue version; a name the policy gives to
  Debian, or that a Debian entry depends on (apt installs it anyway), is the suite's riscv64 package at the
  version the signed index holds; everything else is the index's newest version that satisfies every
  requirement seen so far and has a wheel that fits the target (pure, or tagged for cp3XY/abi3 and a
  manylinux_2_N_riscv64 up to the suite's glibc: every older tag listed, as pip does not expand them);
- requirements of a chosen version come from the wheel's own METADATA (the wheel is downloaded, checked by
  sha256 into the download cache: the wheelhouse takes it from there);
- when a requirement met later rules out a version chosen earlier, the resolution starts again with every
  requirement known so far, until nothing changes (each round only adds requirements, so it ends);
- a Debian package that apt installs as a dependency but whose version the closure cannot use is shadowed:
  the entry comes from the index and says which Debian package it is installed over.

The lock is then loaded back (rvport.catalogue.closure_lock.load_lock): the file written is one that holds
together.
"""

from __future__ import annotations

import email.parser
import os
import re
import tarfile
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
)
from packaging.version import InvalidVersion, Version

from rvport import bounds
from rvport.catalogue import closure_lock
from rvport.catalogue.bases import load_base
from rvport.catalogue.closure_lock import DebianRef, Entry, Lock, Origin, Target
from rvport.catalogue.model import Recipe, Source, SourceKind
from rvport.catalogue.recipes import Catalogue
from rvport.catalogue.yamlsrc import load_yaml
from rvport.errors import IntegrityError, Problem, RecipeError, SourceUnavailable
from rvport.fileio import atomic_write_text
from rvport.sources.archive import TAR_SUFFIXES, tar_mode
from rvport.sources.debarchive import DebPackage
from rvport.sources.fetch import Fetcher, FetchOptions
from rvport.sources.pypi import IndexFile, project_pages
from rvport.verify.zip_member import ZIP_ERRORS

MAX_ROUNDS = 30
MAX_METADATA = 4 << 20  # bytes of one METADATA / PKG-INFO / requirements file


# ------------------------------------------------------------------------------------------------ policy
@dataclass(frozen=True, kw_only=True)
class Policy:
    """What a recipe's lock is made from (resources/locks/RECIPE.policy.yaml) and the Debian names."""

    recipe: str
    requirements: tuple[str, ...]  # files of the recipe's sdist, relative to its top directory
    # (line, replacement or None to drop it, why): the edits the recipe's build makes to those files; a line
    # of None adds its replacement (a requirement the files leave out for the target that the code needs)
    replace: tuple[tuple[str | None, str | None, str], ...]
    recipes: Mapping[str, str]  # distribution -> recipe
    recipe_versions: Mapping[str, str]  # recipe -> version, for recipes the catalogue does not hold yet
    debian: frozenset[str]  # distributions taken from Debian
    debian_names: Mapping[str, str]  # distribution -> Debian package (where not python3-NAME)
    not_distributions: frozenset[str]  # python3-* packages that are no distribution of their own
    # distribution -> requirements its Debian package's own metadata (dist-info) declares beyond its Depends:
    # pip walks them when it installs beside Debian's packages, so the closure must meet them too
    debian_requires: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Debian packages of the runtime that are no distribution: (package, file, why, matches or None), locked
    # at the version the signed index holds (closure_lock.SystemPackage)
    system: tuple[tuple[str, str, str, str | None], ...] = ()

    def package(self, name: str) -> str:
        return self.debian_names.get(name, f"python3-{name}")

    def distribution(self, package: str) -> str | None:
        """The distribution a python3-* Debian package holds (None: not one)."""
        if package in self.not_distributions or not package.startswith("python3-"):
            return None
        for dist, pkg in self.debian_names.items():
            if pkg == package:
                return dist
        return canonicalize_name(package.removeprefix("python3-"))


def load_policy(recipe: str, root: Path | None = None) -> Policy:
    root = closure_lock.lock_root(root)
    path = root / f"{recipe}.policy.yaml"
    names_path = root / "debian-names.yaml"
    if not os.path.lexists(path):
        raise RecipeError(
            f"no closure policy for {recipe}: {path} is missing",
            hint="a recipe's lock is made from resources/locks/RECIPE.policy.yaml (docs/closure.md)",
        )
    doc, problem = load_yaml(path)
    names, problem2 = load_yaml(names_path)
    for p in (problem, problem2):
        if p is not None:
            raise RecipeError(f"cannot read {p.file}", problems=[p])
    try:
        return Policy(
            recipe=doc["recipe"],
            requirements=tuple(doc["requirements"]),
            replace=tuple((r.get("line"), r.get("with"), r["why"]) for r in doc.get("replace", [])),
            recipes={canonicalize_name(k): v for k, v in doc.get("recipes", {}).items()},
            recipe_versions=dict(doc.get("recipe_versions", {})),
            debian=frozenset(canonicalize_name(n) for n in doc.get("debian", [])),
            debian_names={canonicalize_name(k): v for k, v in names["packages"].items()},
            not_distributions=frozenset(names.get("not_distributions", [])),
            debian_requires={
                canonicalize_name(k): tuple(str(bounds.requirement(r)) for r in v["requires"])
                for k, v in doc.get("debian_requires", {}).items()
            },
            system=tuple(
                (
                    str(x["package"]),
                    str(x["file"]),
                    str(x["why"]),
                    str(x["matches"]) if x.get("matches") else None,
                )
                for x in doc.get("system", [])
            ),
        )
    except (KeyError, TypeError, AttributeError, InvalidRequirement) as e:
        raise RecipeError(
            f"{path} or {names_path} is not a closure policy: {e}",
            hint="fix the file as docs/closure.md describes it (requirements, replace, recipes, debian, "
            "debian_requires: each `requires` a list of requirements such as 'mpmath>=1.1,<1.4'; system: "
            "each a `package`, the `file` it installs and `why`, `matches` optional)",
        ) from e


# ------------------------------------------------------------------------------------------------ reading
def _limited(data: bytes, what: str) -> str:
    if len(data) > MAX_METADATA:
        raise IntegrityError(f"{what}: more than {MAX_METADATA} bytes", hint="this is no metadata file")
    return data.decode("utf-8", errors="replace")


def wheel_metadata(path: Path, what: str) -> email.message.Message:
    """A wheel's *.dist-info/METADATA, parsed (RFC 822 headers)."""
    try:
        with zipfile.ZipFile(path) as z:
            names = [
                i
                for i in z.infolist()
                if re.fullmatch(r"[^/]+\.dist-info/METADATA", i.filename) and i.file_size <= MAX_METADATA
            ]
            if len(names) != 1:
                raise IntegrityError(f"{what}: {len(names)} *.dist-info/METADATA files", hint="not a wheel")
            text = _limited(z.read(names[0]), what)
    except ZIP_ERRORS as e:  # encrypted, an unknown compression method, corrupt data: never exit 9
        raise IntegrityError(
            f"{what}: not a readable wheel: {e or type(e).__name__}", hint="the file is damaged"
        ) from None
    return email.parser.Parser().parsestr(text, headersonly=True)


def sdist_member(path: Path, rel: str, what: str, name: str | None = None) -> str:
    """A file of an sdist (tar.gz), by its path below the sdist's top directory. The sdist is read as the
    kind its file name (`name`, else `what`) declares, never sniffed."""
    declared = name or what
    if not declared.lower().endswith(TAR_SUFFIXES):
        raise IntegrityError(f"{what}: the sdist cannot be read: its name declares no tar archive")
    try:
        with tarfile.open(path, tar_mode(declared)) as t:
            for m in t:
                parts = PurePosixPath(m.name).parts
                if len(parts) >= 2 and "/".join(parts[1:]) == rel and m.isfile() and m.size <= MAX_METADATA:
                    f = t.extractfile(m)
                    assert f is not None
                    return _limited(f.read(), what)
    except (tarfile.TarError, OSError) as e:
        raise IntegrityError(f"{what}: the sdist cannot be read: {e}") from e
    raise SourceUnavailable(
        f"{what}: the sdist holds no {rel}", hint="the policy names a file the sdist lacks"
    )


def requirements_lines(
    read: Callable[[str], str], first: str, replace: Iterable[tuple[str, str | None, str]]
) -> list[str]:
    """The requirement lines of a requirements file and the files it includes (-r), comments and blank
    lines left out, each edit of `replace` applied (a whole line, without its comment and marker: replaced,
    or dropped when its replacement is None). An edit that matches no line is an error: the files are not
    the ones the policy was written for."""
    edits = {line: new for line, new, _why in replace if line is not None}
    added = [new for line, new, _why in replace if line is None and new]
    used: set[str] = set()
    out: list[str] = []
    seen: set[str] = set()

    def visit(rel: str) -> None:
        if rel in seen:
            return
        seen.add(rel)
        for raw in read(rel).splitlines():
            line = re.sub(r"(^|\s)#.*$", "", raw).strip()
            if not line:
                continue
            if line.startswith(("-r ", "--requirement ")):
                inc = line.split(None, 1)[1].strip()
                visit(str(PurePosixPath(rel).parent / inc))
                continue
            if line.startswith("-"):
                raise RecipeError(f"{rel}: option line {line!r} is not understood by the lock's resolver")
            key, semi, marker = line.partition(";")
            key = key.strip()
            if key in edits:
                used.add(key)
                if edits[key] is None:
                    continue
                line = f"{edits[key]}{semi}{marker}"
            out.append(line)

    visit(first)
    out += added  # requirements the files leave out for the target that the recipe's code needs
    unused = [k for k in edits if k not in used]
    if unused:
        raise RecipeError(
            f"the policy edits requirement line(s) {', '.join(map(repr, unused))}, which {first} (and what "
            "it "
            "includes) does not have",
            hint="the sdist is not the one the policy was written for: check the recipe's edits and the "
            "policy's",
        )
    return out


def evaluate(lines: Iterable[str], target: Target, extras: Iterable[str], what: str) -> list[Requirement]:
    out = []
    for text in lines:
        try:
            req = closure_lock.applicable(text, target, extras)
        except ValueError as e:
            raise RecipeError(f"{what}: {e}") from e
        if req is None:
            continue
        if req.url:
            raise RecipeError(
                f"{what}: {text!r} names a URL, which a lock cannot hold", hint="lock a version instead"
            )
        out.append(req)
    return out


# --------------------------------------------------------------------------------------------- the index
class Index:
    """The package index pip is configured for, read through its simple API by rvport.sources.pypi's one
    reader of project pages (pages bounded in size, a TLS failure named with its remedy)."""

    def __init__(self, fetcher: Fetcher):
        self.fetcher = fetcher
        self._pages: dict[str, list[IndexFile]] = {}

    def files(self, name: str) -> list[IndexFile]:
        key = canonicalize_name(name)
        if key not in self._pages:
            self._pages[key] = self._read(key)
        return self._pages[key]

    def _read(self, key: str) -> list[IndexFile]:
        out: list[IndexFile] = []
        misses = []
        for page in project_pages(self.fetcher.session, key, self.fetcher.index, timeout=(20, 60)):
            out += page.files
            if page.miss:
                misses.append(f"{page.index}: {page.miss}")
        if not out:
            raise SourceUnavailable(
                f"the package index has no files of {key} ({'; '.join(misses) or 'an empty page'})",
                hint=f"indexes from {self.fetcher.index.origin}; set PIP_INDEX_URL to one that has it",
            )
        return out

    def download(self, name: str, version: str, f: IndexFile) -> Path:
        """The file in the download cache, checked by its sha256 (the index's)."""
        if not f.sha256:
            raise IntegrityError(
                f"{f.filename}: the index gives no sha256 for it", hint="use an index that lists digests"
            )
        src = Source(
            name=canonicalize_name(name),
            kind=SourceKind.PYPI,
            sha256=f.sha256,
            project=name,
            version=version,
            filename=f.filename,
        )
        return self.fetcher.fetch(src).path


def _version_of(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return bounds.wheel_filename(filename)[1]
        return bounds.sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


# ---------------------------------------------------------------------------------------------- resolver
@dataclass(kw_only=True)
class _Node:
    name: str
    version: str
    origin: Origin
    requires: list[Requirement]
    wheel: str | None = None
    sha256: str | None = None
    recipe: str | None = None
    debian: DebianRef | None = None
    shadows: DebianRef | None = None
    debian_depends: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Resolver:
    policy: Policy
    target: Target
    index: Index
    debian: Mapping[str, tuple[DebPackage, ...]]
    recipe_versions: Mapping[str, str]  # recipe -> version
    root_requires: Callable[[Iterable[str]], list[Requirement]]  # extras -> the root's requirements
    log: Callable[[str], None] = lambda _m: None
    constraints: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    extras: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    forced_debian: set[str] = field(default_factory=set)  # names a Debian entry depends on
    _meta: dict[tuple[str, str], email.message.Message] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)  # names no origin can give, in the last round

    def spec(self, name: str) -> SpecifierSet:
        s = bounds.specifiers()
        for c in self.constraints[name]:
            s &= bounds.specifiers(c)
        return s

    def run(self) -> dict[str, _Node]:
        root = canonicalize_name(self.policy.recipe)
        for rnd in range(1, MAX_ROUNDS + 1):
            chosen: dict[str, _Node] = {}
            queue = [root]
            again = False
            self.missing = {}
            while queue:
                name = queue.pop(0)
                if name in chosen:
                    continue
                try:
                    node = self.decide(name)
                except SourceUnavailable as e:  # every such name is said at the end, not only the first
                    self.missing[name] = e.message
                    continue
                chosen[name] = node
                deps = [(canonicalize_name(r.name), str(r.specifier), set(r.extras)) for r in node.requires]
                if node.origin is Origin.DEBIAN:
                    for d in node.debian_depends:
                        if d not in self.forced_debian:
                            self.forced_debian.add(d)
                            again |= d in chosen and chosen[d].origin is Origin.PYPI and not chosen[d].shadows
                for dep, spec, extras in deps:
                    new_spec = bool(spec) and spec not in self.constraints[dep]
                    new_extras = bool(extras - self.extras[dep])
                    if new_spec:
                        self.constraints[dep].add(spec)
                    if new_extras:
                        self.extras[dep] |= extras
                    if dep in chosen and (new_extras or (new_spec and not self._holds(chosen[dep]))):
                        again = True
                    queue.append(dep)
            self.log(f"round {rnd}: {len(chosen)} distributions" + (", again" if again else ""))
            if not again:
                if self.missing:
                    self._unresolved(chosen)
                return chosen
        raise RecipeError(
            f"the closure of {self.policy.recipe} did not settle in {MAX_ROUNDS} rounds",
            hint="requirements keep ruling out each other's versions: pin one in the policy",
        )

    def _unresolved(self, chosen: Mapping[str, _Node]) -> None:
        problems = []
        for name, why in sorted(self.missing.items()):
            by = sorted(
                f"{n.name} {n.version}"
                for n in chosen.values()
                if any(canonicalize_name(r.name) == name for r in n.requires)
            )
            problems.append(Problem(message=f"{why} (required by {', '.join(by) or '?'})"))
        raise SourceUnavailable(
            f"the closure of {self.policy.recipe} has {len(problems)} distribution(s) that no origin gives",
            problems=problems,
            hint="build it (a recipe), take it from Debian (the policy's debian list), or, when the recipe "
            "does not need it, drop the requirement in the policy's replace list with the same edit in the "
            "recipe's build (docs/closure.md)",
        )

    def _holds(self, node: _Node) -> bool:
        return self.spec(node.name).contains(bounds.version(node.version), prereleases=True)

    # -------------------------------------------------------------- one name
    def decide(self, name: str) -> _Node:
        root = canonicalize_name(self.policy.recipe)
        if name in self.policy.recipes:
            return self._recipe(name, root=name == root)
        if name in self.policy.debian or name in self.forced_debian:
            node = self._debian(name)
            if node is not None:
                return node
        return self._pypi(name)

    def _recipe(self, name: str, *, root: bool) -> _Node:
        recipe = self.policy.recipes[name]
        version = self.recipe_versions.get(recipe)
        if version is None:
            raise RecipeError(
                f"{name} is built by recipe {recipe}, which the catalogue does not hold",
                hint=f"add the recipe, or name its version in the policy's recipe_versions ({recipe}: X.Y)",
            )
        if not self.spec(name).contains(bounds.version(version), prereleases=True):
            raise closure_lock.LockConflict(
                f"recipe {recipe} builds {name} {version}, and the closure requires {name}{self.spec(name)}",
                hint=f"build a version of {recipe} that satisfies it",
            )
        extras = sorted(self.extras[name])
        if root:
            reqs = self.root_requires(extras)
        else:
            reqs = evaluate(
                self._metadata_any(name, version).get_all("Requires-Dist") or [],
                self.target,
                extras,
                f"{name} {version}",
            )
        shadows = self._shadowed(name)
        return _Node(
            name=name, version=version, origin=Origin.RECIPE, requires=reqs, recipe=recipe, shadows=shadows
        )

    def _shadowed(self, name: str) -> DebianRef | None:
        if name not in self.forced_debian:
            return None
        pkg = self._deb(name)
        return DebianRef(package=pkg.name, version=pkg.version, sha256=pkg.sha256) if pkg else None

    def _deb(self, name: str) -> DebPackage | None:
        have = self.debian.get(self.policy.package(name), ())
        return have[-1] if have else None

    def _debian(self, name: str) -> _Node | None:
        pkg = self._deb(name)
        package = self.policy.package(name)
        if pkg is None:
            if name in self.policy.debian:
                raise SourceUnavailable(
                    f"the policy takes {name} from Debian, and {self.target.suite}'s riscv64 index has no "
                    f"{package}",
                    hint="name its Debian package in debian-names.yaml, or take it from the index",
                )
            return None
        version = closure_lock.debian_python_version(pkg.version)
        if not self.spec(name).contains(bounds.version(version), prereleases=True):
            if name in self.policy.debian:
                raise closure_lock.LockConflict(
                    f"the policy takes {name} from Debian ({package} {pkg.version}), and the closure "
                    "requires "
                    f"{name}{self.spec(name)}",
                    hint="take it from the index instead (drop it from the policy's debian list)",
                )
            return None  # apt installs it anyway (a dependency); the index's version is installed over it
        depends = self._depends(pkg)
        reqs = [bounds.requirement(d) for d in (*depends, *self.policy.debian_requires.get(name, ()))]
        return _Node(
            name=name,
            version=version,
            origin=Origin.DEBIAN,
            requires=reqs,
            debian=DebianRef(package=pkg.name, version=pkg.version, sha256=pkg.sha256),
            debian_depends=depends,
        )

    def _depends(self, pkg: DebPackage) -> list[str]:
        out = []
        for alt in pkg.depends.split(","):
            first = alt.split("|")[0].strip()
            dep = re.split(r"[\s(:]", first, maxsplit=1)[0]
            # a virtual package (python3-supported-min, python3-cffi-backend-api-max) is no distribution
            dist = self.policy.distribution(dep) if self.debian.get(dep) else None
            if dist:
                out.append(dist)
        return sorted(set(out))

    def _pypi(self, name: str) -> _Node:
        spec = self.spec(name)
        by_version: dict[Version, list[IndexFile]] = defaultdict(list)
        for f in self.index.files(name):
            v = _version_of(f.filename)
            if v is not None and not f.yanked and f.filename.endswith(".whl"):
                by_version[v].append(f)
        py = bounds.version(self.target.python_full)
        candidates = sorted(spec.filter(by_version), reverse=True)
        for v in candidates:
            fits = []
            for f in by_version[v]:
                rank = self.target.wheel_fits(f.filename)
                if rank is None:
                    continue
                if f.requires_python:
                    try:
                        if not bounds.specifiers(f.requires_python).contains(py, prereleases=True):
                            continue
                    except InvalidSpecifier:
                        continue
                fits.append((rank, f.filename, f))
            if not fits:
                continue
            _, _, best = min(fits)
            version = str(v)
            meta = self._metadata(name, version, best)
            reqs = evaluate(
                meta.get_all("Requires-Dist") or [],
                self.target,
                sorted(self.extras[name]),
                f"{best.filename}",
            )
            return _Node(
                name=name,
                version=version,
                origin=Origin.PYPI,
                requires=reqs,
                wheel=best.filename,
                sha256=best.sha256,
                shadows=self._shadowed(name),
            )
        have = sorted(by_version, reverse=True)[:5]
        raise SourceUnavailable(
            f"no version of {name} satisfies {name}{spec or ''} with a wheel for {self.target.abi} Linux "
            "riscv64 "
            f"(newest on the index: {', '.join(map(str, have)) or 'none'})",
            hint="build it (a recipe), take it from Debian (the policy's debian list), or relax the "
            "requirement",
        )

    def _metadata(self, name: str, version: str, f: IndexFile) -> email.message.Message:
        key = (name, f.filename)
        if key not in self._meta:
            path = self.index.download(name, version, f)
            self._meta[key] = wheel_metadata(path, f.filename)
        return self._meta[key]

    def _metadata_any(self, name: str, version: str) -> email.message.Message:
        """The metadata of a version the recipe builds: from any of its wheels on the index (every platform's
        says the same requirements), else from its sdist's PKG-INFO."""
        files = [f for f in self.index.files(name) if _version_of(f.filename) == bounds.version(version)]
        wheels = sorted((f for f in files if f.filename.endswith(".whl")), key=lambda f: f.filename)
        if wheels:
            pure = [f for f in wheels if closure_lock.is_pure(f.filename)]
            return self._metadata(name, version, (pure or wheels)[0])
        sdists = [f for f in files if f.filename.endswith((".tar.gz", ".zip"))]
        if not sdists:
            raise SourceUnavailable(
                f"the index has no file of {name} {version} to read its requirements from"
            )
        path = self.index.download(name, version, sdists[0])
        text = sdist_member(path, "PKG-INFO", sdists[0].filename)
        meta = email.parser.Parser().parsestr(text, headersonly=True)
        dynamic = {d.lower() for d in meta.get_all("Dynamic") or []}
        if "requires-dist" in dynamic or meta.get("Metadata-Version", "1.0") < "2.2":
            raise RecipeError(
                f"{sdists[0].filename}: its PKG-INFO does not fix its requirements (Metadata-Version "
                f"{meta.get('Metadata-Version')}, Dynamic: {', '.join(sorted(dynamic)) or '-'})",
                hint="build the recipe once and take its Requires-Dist from the wheel",
            )
        return meta


# ------------------------------------------------------------------------------------------------- write
HEADER = """\
# The runtime closure of {recipe} {version} for CPython {python} on riscv64 ({base}, Debian {suite}): every
# distribution it needs, each from exactly one origin (a recipe rvport builds, a Debian package at an exact
# version, or an index wheel by file name and sha256). Made by `rvport lock {recipe}` from
# {recipe}.policy.yaml; never edit it by hand: `digest` covers every value below (docs/closure.md).
"""


def system_packages(
    policy: Policy, debian: Mapping[str, tuple[DebPackage, ...]], suite: str
) -> tuple[closure_lock.SystemPackage, ...]:
    """The policy's system packages at the version the suite's signed index holds (the last it lists), with
    its .deb's sha256; every one the index lacks is named at once."""
    out, missing = [], []
    for package, file, why, matches in policy.system:
        have = debian.get(package, ())
        if not have:
            missing.append(Problem(message=f"{package}: {suite}'s riscv64 index has no such package"))
            continue
        pkg = have[-1]
        out.append(
            closure_lock.SystemPackage(
                package=pkg.name, version=pkg.version, sha256=pkg.sha256, file=file, why=why, matches=matches
            )
        )
    if missing:
        raise SourceUnavailable(
            f"the policy of {policy.recipe} names {len(missing)} system package(s) Debian {suite} does not "
            "have",
            problems=missing,
            hint="name packages of the suite's riscv64 index in the policy's system list",
        )
    return tuple(out)


def make_lock(
    nodes: Mapping[str, _Node],
    *,
    recipe: Recipe,
    target: Target,
    release: Mapping[str, Any],
    extras: Mapping[str, set[str]],
    replace: Iterable[tuple[str, str | None, str]] = (),
    system: tuple[closure_lock.SystemPackage, ...] = (),
) -> Lock:
    entries = []
    for name in sorted(nodes):
        n = nodes[name]
        entries.append(
            Entry(
                name=n.name,
                version=n.version,
                origin=n.origin,
                requires=tuple(sorted({str(r) for r in n.requires})),
                extras=tuple(sorted(canonicalize_name(x) for x in extras.get(name, ()))),
                wheel=n.wheel,
                sha256=n.sha256,
                recipe=n.recipe,
                debian=n.debian,
                shadows=n.shadows,
            )
        )
    edits = tuple(
        {**({"line": line} if line else {}), **({"with": new} if new else {}), "why": why}
        for line, new, why in replace
    )
    body = Lock(
        recipe=recipe.name,
        version=recipe.version,
        target=target,
        entries=tuple(entries),
        digest="",
        debian_release=dict(release),
        edits=edits,
        system=system,
    ).body()
    return Lock(
        recipe=recipe.name,
        version=recipe.version,
        target=target,
        entries=tuple(entries),
        digest=closure_lock.digest_of(body),
        debian_release=dict(release),
        edits=edits,
        system=system,
    )


def write_lock(lock: Lock, path: Path) -> Lock:
    """Write the lock (atomically) and load it back: what is written holds together, or nothing stays."""
    t = lock.target
    text = HEADER.format(
        recipe=lock.recipe, version=lock.version, python=t.python, base=t.base, suite=t.suite
    )
    text += yaml.safe_dump(lock.to_json(), sort_keys=False, width=110, default_flow_style=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    try:
        return closure_lock.load_lock(path)
    except Exception:
        path.unlink(missing_ok=True)
        raise


def recipe_versions(cat: Catalogue, policy: Policy) -> dict[str, str]:
    out = dict(policy.recipe_versions)
    for recipe in policy.recipes.values():
        if recipe in cat.recipes:
            out[recipe] = cat.default(recipe).version
    return out


def target_of(debian: Mapping[str, tuple[DebPackage, ...]], *, python: str, base: str, suite: str) -> Target:
    """The target's full CPython and glibc versions, as the suite's riscv64 index has them."""

    def version(pkg: str) -> str:
        have = debian.get(pkg)
        if not have:
            raise SourceUnavailable(f"Debian {suite}'s riscv64 index has no {pkg}")
        return have[-1].version

    full = closure_lock.debian_python_version(version(f"python{python}"))
    glibc = ".".join(closure_lock.debian_python_version(version("libc6")).split(".")[:2])
    return Target(python=python, python_full=full, glibc=glibc, base=base, suite=suite)


def root_requirements(
    sdist: Path, policy: Policy, target: Target, name: str | None = None
) -> Callable[[Iterable[str]], list[Requirement]]:
    """name: the sdist's file name (what it is read as); default the path's own."""
    name = name or sdist.name
    lines: list[str] = []
    for f in policy.requirements:
        lines += requirements_lines(lambda rel: sdist_member(sdist, rel, name, name), f, policy.replace)

    def reqs(extras: Iterable[str]) -> list[Requirement]:
        merged: dict[str, Requirement] = {}
        for r in evaluate(lines, target, extras, f"{policy.recipe}'s requirements"):
            key = canonicalize_name(r.name)
            if key in merged:  # a name twice (common.txt and cpu.txt): both hold, as setup.py keeps both
                merged[key].specifier &= r.specifier
                merged[key].extras |= r.extras
            else:
                merged[key] = r
        return list(merged.values())

    return reqs


def default_output(recipe: Recipe) -> Path:
    """RECIPE-VERSION-cpXY.yaml in the current directory (the catalogue's file name for it)."""
    python = load_base(recipe.toolchain.base).python or "3"
    return Path(closure_lock.lock_path(recipe.name, recipe.version, python, Path(".")).name)


RELEASE_KEYS = ("suite", "codename", "date", "valid_until", "inrelease_sha256")


def generate(
    cat: Catalogue,
    recipe: Recipe,
    fetch: FetchOptions,
    *,
    output: Path,
    allow_expired: tuple[str, ...] = (),
    log: Callable[[str], None] = lambda _m: None,
    policy_root: Path | None = None,
    debian_mirror: str | None = None,
    keyring: Path | None = None,
) -> Lock:
    """Resolve `recipe`'s runtime closure for its base's Python and write the lock to `output`."""
    from rvport.engine import debpins

    policy = load_policy(recipe.name, policy_root)
    base = load_base(recipe.toolchain.base)
    if not base.python:
        raise RecipeError(f"{recipe.ref}: its base {base.name} says no Python, so it has no Python closure")
    sdists = [s for s in recipe.sources if s.kind is SourceKind.PYPI]
    if not sdists:
        raise RecipeError(f"{recipe.ref}: no pypi sdist among its sources to read its requirements from")
    extra = {"keyring": keyring} if keyring else {}
    idx = debpins.signed_index(
        base.suite,
        fetch,
        allow_expired=allow_expired,
        mirror=debian_mirror,
        what=f"{recipe.ref}'s closure",
        **extra,
    )
    log(f"Debian {base.suite} riscv64: {len(idx.packages)} packages (Release {idx.signed.release.date})")
    target = target_of(idx.packages, python=base.python, base=base.name, suite=base.suite)
    log(
        f"target: CPython {target.python_full}, glibc {target.glibc}, {len(target.platforms())} platform tags"
    )
    with Fetcher(options=fetch) as fetcher:
        sdist = fetcher.fetch(sdists[0]).path
        resolver = Resolver(
            policy=policy,
            target=target,
            index=Index(fetcher),
            debian=idx.packages,
            recipe_versions=recipe_versions(cat, policy) | {recipe.name: recipe.version},
            root_requires=root_requirements(sdist, policy, target, sdists[0].archive_name),
            log=log,
        )
        nodes = resolver.run()
    rec = idx.record()["release"]
    release = {k: rec[k] for k in RELEASE_KEYS if rec.get(k) is not None}
    lock = make_lock(
        nodes,
        recipe=recipe,
        target=target,
        release=release,
        extras=resolver.extras,
        replace=policy.replace,
        system=system_packages(policy, idx.packages, base.suite),
    )
    problems = closure_lock.conflicts(lock) + closure_lock.check_recipe_pins(lock, recipe.toolchain.pins)
    if problems:
        raise closure_lock.LockConflict(
            f"the closure of {recipe.ref} resolved to a lock that does not hold together", problems=problems
        )
    return write_lock(lock, output)
