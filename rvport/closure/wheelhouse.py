"""`rvport wheelhouse`: every wheel of a recipe's closure lock in one directory, with a requirements file
that pins each by sha256 and the list of Debian packages apt installs first (docs/closure.md).

    DIR/*.whl                 the lock's index wheels (from the download cache, checked by sha256) and the
                              recipes' wheels (from the build's artifacts)
    DIR/requirements.txt      NAME==VERSION --hash=sha256:... for every wheel (pip --require-hashes)
    DIR/debian-packages.txt   PACKAGE=VERSION for apt-get install, one a line (shadowed packages and the
                              lock's system packages too)
    DIR/inductor-env.sh       when the lock has system packages: the settings of torch.compile's C++ backend
                              for the profile, to source before running (rvport.closure.inductor)
    DIR/wheelhouse.json       what was put there: the lock's digest, the profile, each file and its verdict

Before anything is written, everything that can be checked is: the lock (rvport.catalogue.closure_lock), each
Debian entry against the suite's signed index (a version gone: exit 5; other bytes: exit 4), each recipe's
wheel found in the artifact directories and fitting the target (missing: exit 5). Then, in a temporary
directory beside DIR: the index wheels are fetched through the download cache (a changed file: exit 4); every
wheel is verified for the profile by rvport's verifier, first, so that whatever verify refuses is refused
with its verdict (an x86-64 wheel tagged riscv64, a METADATA it cannot read, a member name that leaves the
wheel: exit 1); then every wheel's METADATA is read (its name and version are the lock's; each requirement,
evaluated for the target, is satisfied by the lock: else exit 3, e.g. a vllm wheel built without the lock's
edits). Only then is the temporary directory renamed to DIR (a previous wheelhouse rvport wrote there is
replaced: rvport.outdir); on any error or an interrupt it is removed, so DIR is whole or untouched.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name
from packaging.version import InvalidVersion, Version

from rvport import bounds, outdir
from rvport.catalogue import closure_lock
from rvport.catalogue.closure_lock import DebianRef, Entry, Lock, Origin
from rvport.catalogue.model import Source, SourceKind
from rvport.catalogue.profiles import Profile
from rvport.closure import inductor
from rvport.errors import IntegrityError, Problem, SourceUnavailable, UsageError, VerifyFailed
from rvport.safetext import one_line
from rvport.sources.fetch import Fetcher, FetchOptions

MANIFEST = "wheelhouse.json"
REQUIREMENTS = "requirements.txt"
DEBIAN_LIST = "debian-packages.txt"
WHEELHOUSE_SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class Options:
    output: Path
    artifacts: tuple[Path, ...]
    profile: Profile
    fetch: FetchOptions
    allow_expired: tuple[str, ...] = ()
    # the recipes' distributions whose wheel must carry the profile's extensions (their recipe's output says
    # `isa: profile`: verify's "carries", as their build checks them); every other wheel must run on it
    carries: frozenset[str] = frozenset()
    gcc: int | None = None  # the major of the base's GCC (which -march extensions it takes: inductor-env.sh)
    debian_mirror: str | None = None  # None: the host's (tests give a local archive)
    keyring: Path | None = None


@dataclass(frozen=True, kw_only=True)
class Placed:
    entry: Entry
    source: Path  # where the wheel came from (the cache's blob, or the artifact)
    filename: str


# --------------------------------------------------------------------------------------------- preflight
def check_output(out: Path) -> None:
    """DIR may be missing, empty, or a wheelhouse rvport wrote (replaced whole): rvport.outdir's rule."""
    outdir.check(out, outdir.Kind.WHEELHOUSE)


def _wheel_version(filename: str) -> tuple[str, Version] | None:
    try:
        name, version, _, _ = bounds.wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    return str(name), version


def _same_version(have: Version, locked: str) -> bool:
    """The wheel's version is the lock's: equal, or the same release with a local label (vllm 0.33.0+cpu)."""
    want = bounds.version(locked)
    return have == want or (want.local is None and have.public == want.public)


def find_recipe_wheels(lock: Lock, artifacts: Sequence[Path], profile: str = "PROFILE") -> list[Placed]:
    """Each recipe entry's wheel in the artifact directories (searched recursively): one that names the
    entry's distribution and version and fits the lock's target. Every missing one is named at once."""
    found: list[Placed] = []
    missing: list[Problem] = []
    clash: list[Problem] = []
    wheels = sorted(p for d in artifacts for p in d.rglob("*.whl") if p.is_file() and not p.is_symlink())
    for e in lock.by_origin(Origin.RECIPE):
        seen = []
        fit = []
        for p in wheels:
            nv = _wheel_version(p.name)
            if nv is None or canonicalize_name(nv[0]) != e.name:
                continue
            seen.append(p.name)
            if _same_version(nv[1], e.version) and lock.target.wheel_fits(p.name) is not None:
                fit.append(p)
        twins = _twins(fit)
        if twins:
            clash.append(
                Problem(
                    message=f"{e.name} {e.version}: two different wheels named {twins[0].name}: "
                    + " and ".join(map(str, twins)),
                    hint="keep the one you mean and remove the other, or name one build's artifacts with "
                    "--artifacts",
                )
            )
            continue
        if len(fit) > 1:
            fit = sorted(fit, key=lambda p: (lock.target.wheel_fits(p.name), p.name))[:1]
        if fit:
            found.append(Placed(entry=e, source=fit[0], filename=fit[0].name))
        else:
            why = f"only {', '.join(sorted(set(seen)))} there" if seen else "no wheel of it there"
            missing.append(
                Problem(
                    message=f"{e.name} {e.version} (recipe {e.recipe}) for {lock.target.abi} riscv64: {why}",
                    hint=f"rvport build {e.recipe}=={e.version} --profile {profile} --python "
                    f"{lock.target.python} --output out, then pass --artifacts out/artifacts",
                )
            )
    if clash:
        raise UsageError(
            f"the artifact directories hold {len(clash)} wheel name(s) twice with other bytes: which one to "
            "take is not rvport's guess",
            problems=clash,
            hint="nothing was written",
        )
    if missing:
        where = ", ".join(map(str, artifacts)) or "no --artifacts directory"
        raise SourceUnavailable(
            f"the wheelhouse needs {len(missing)} wheel(s) rvport builds, not found in {where}",
            problems=missing,
            hint="build them with the same --profile, and name the build's artifacts with --artifacts DIR "
            "(repeatable); nothing was written",
        )
    return found


def _twins(wheels: Sequence[Path]) -> list[Path]:
    """The paths of the first file name that two of `wheels` share with different bytes (by sha256); [] when
    none do (the same wheel found twice, say in out/artifacts and a copy of it, is one wheel)."""
    by_name: dict[str, list[Path]] = {}
    for p in wheels:
        by_name.setdefault(p.name, []).append(p)
    for paths in by_name.values():
        if len(paths) > 1 and len({_sha256(p) for p in paths}) > 1:
            return paths
    return []


def _sha256(path: Path) -> str:
    from rvport.sources.cache import sha256_file

    return sha256_file(path)


def apt_packages(lock: Lock) -> list[tuple[str, DebianRef]]:
    """(distribution, Debian package) of every distribution apt installs at the lock's versions: every Debian
    entry, and every Debian package an index wheel is installed over (apt installs it anyway, as a dependency
    of a Debian entry: pinned too, so that apt takes the version the lock saw, not whatever the mirror has).
    The lock's system packages, no distributions, are `all_apt_packages`'."""
    out = [(e.name, e.debian) for e in lock.by_origin(Origin.DEBIAN) if e.debian]
    out += [(e.name, e.shadows) for e in lock.entries if e.shadows]
    return sorted(out, key=lambda r: r[1].package)


def all_apt_packages(lock: Lock) -> list[DebianRef]:
    """Every Debian package apt installs for the lock: the distributions' and the system packages."""
    return sorted(
        [deb for _, deb in apt_packages(lock)] + [p.ref() for p in lock.system], key=lambda d: d.package
    )


def check_debian(lock: Lock, opts: Options) -> dict | None:
    """Every Debian entry (and every package an index wheel is installed over) as the suite's signed index
    has it now: its version still there, with the lock's sha256."""
    from rvport.engine import debpins
    from rvport.sources import debarchive

    pins = all_apt_packages(lock)
    if not pins:
        return None
    extra = {"keyring": opts.keyring} if opts.keyring else {}
    idx = debpins.signed_index(
        lock.target.suite,
        opts.fetch,
        allow_expired=opts.allow_expired,
        mirror=opts.debian_mirror,
        what=f"the Debian entries of {lock.file}",
        **extra,
    )
    debarchive.check_pins(
        [debarchive.DebPin(name=d.package, version=d.version, sha256=d.sha256) for d in pins],
        idx.packages,
        where=f"the closure lock {lock.file}: Debian {lock.target.suite} (riscv64, {idx.mirror})",
    )
    return idx.record()


# ------------------------------------------------------------------------------------------------ checks
def check_metadata(lock: Lock, path: Path, entry: Entry) -> list[Problem]:
    """A wheel's METADATA against the lock: its name and version are the entry's, and every requirement it
    declares (evaluated for the target, with the extras the closure asks of it) is satisfied by the lock."""
    from rvport.closure.resolve import wheel_metadata

    meta = wheel_metadata(path, path.name)
    out: list[Problem] = []
    file = str(lock.file) if lock.file else None
    name, version = meta.get("Name", ""), meta.get("Version", "")
    try:
        same = canonicalize_name(name) == entry.name and _same_version(bounds.version(version), entry.version)
    except InvalidVersion:
        same = False
    if not same:
        out.append(
            Problem(
                message=f"{path.name}: its METADATA says {name} {version}, the lock {entry.name} "
                f"{entry.version}",
                file=file,
                line=entry.line,
            )
        )
    by = {e.name: e for e in lock.entries}
    for text in meta.get_all("Requires-Dist") or []:
        try:
            req = closure_lock.applicable(text, lock.target, entry.extras)
        except ValueError as e:
            out.append(Problem(message=f"{path.name}: {e}", file=file, line=entry.line))
            continue
        if req is None:
            continue
        dep = by.get(canonicalize_name(req.name))
        if dep is None:
            out.append(
                Problem(
                    message=f"{path.name} requires {req}, which the lock does not hold",
                    file=file,
                    line=entry.line,
                    hint=_edit_hint(lock, entry),
                )
            )
        elif {canonicalize_name(x) for x in req.extras} - set(dep.extras):
            missing = sorted({canonicalize_name(x) for x in req.extras} - set(dep.extras))
            out.append(
                Problem(
                    message=f"{path.name} requires {req}; the lock's {dep.name} is without extra(s) "
                    f"{', '.join(missing)} (what they pull is not in the lock)",
                    file=file,
                    line=entry.line,
                    hint=_edit_hint(lock, entry),
                )
            )
        elif not req.specifier.contains(bounds.version(dep.version), prereleases=True):
            out.append(
                Problem(
                    message=f"{path.name} requires {req}; the lock has {dep.name} {dep.version} from "
                    f"{dep.origin.value}",
                    file=file,
                    line=entry.line,
                    hint=_edit_hint(lock, entry),
                )
            )
    return out


def _edit_hint(lock: Lock, entry: Entry) -> str:
    if entry.origin is Origin.RECIPE and entry.name == canonicalize_name(lock.recipe) and lock.edits:
        return (
            f"the lock edits {lock.recipe}'s requirements ({len(lock.edits)} edit(s), `edits:` in the lock): "
            "build the recipe with the same edits, or make the lock again"
        )
    return "the wheel is not the one the lock was made from: make the lock again (rvport lock)"


def verify_wheels(paths: Sequence[Path], profile: Profile, carries: Sequence[Path] = ()) -> None:
    """rvport's verifier on every wheel, for the profile: runs-on (a wheel for another platform, one whose ELF
    files are not riscv64 or need more than the profile, one whose RECORD does not hold, is refused), and for
    the wheels in `carries` also carries (a vllm wheel built for rv64gc in an rvv256 wheelhouse lacks the
    vector kernels the profile promises: refused)."""
    from rvport.verify import IsaLevel, verify_paths

    strict = [p for p in paths if p in set(carries)]
    rest = [p for p in paths if p not in set(carries)]
    results = []
    for group, level in ((rest, IsaLevel.RUNS_ON), (strict, IsaLevel.CARRIES)):
        if group:
            results += [(a, level) for a in verify_paths(list(group), profile, level).artifacts]
    bad = [(a, level) for a, level in results if not a.ok]
    if bad:
        problems = []
        for a, level in bad:
            reasons = list(a.reasons) + [f"{m.name}: {'; '.join(m.reasons)}" for m in a.members if not m.ok]
            problems.append(
                Problem(  # on one line: a member's name in a reason cannot print a line of its own
                    message=one_line(
                        f"{Path(a.path).name} ({level.value}): {'; '.join(reasons[:4]) or 'failed'}"
                    )
                )
            )
        raise VerifyFailed(
            f"{len(bad)} of {len(results)} wheel(s) of the wheelhouse fail verification for profile "
            f"{profile.name}",
            problems=problems,
            hint="a wheel for another platform or profile was given: rebuild it for this profile; nothing "
            "was written",
        )


# ----------------------------------------------------------------------------------------------- writing
def _copy(src: Path, dest: Path) -> str:
    h = hashlib.sha256()
    with open(src, "rb") as i, open(dest, "xb") as o:
        while chunk := i.read(1 << 20):
            h.update(chunk)
            o.write(chunk)
    return h.hexdigest()


def requirements_text(rows: Iterable[tuple[str, str, str]]) -> str:
    """requirements.txt: every wheel (name, file name, sha256) by version and sha256, sorted by name."""
    lines = [
        "# rvport wheelhouse: every wheel here, pinned by sha256. Install the Debian packages of",
        f"# {DEBIAN_LIST} with apt first, then (in a venv made with --system-site-packages):",
        "#   pip install --no-index --find-links DIR --require-hashes -r DIR/requirements.txt",
        "#   pip check",
    ]
    for name, filename, sha in sorted(rows):
        nv = _wheel_version(filename)
        version = str(nv[1]) if nv else "?"
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{sha}")
    return "\n".join(lines) + "\n"


def debian_text(suite: str, packages: Iterable[tuple[str, str]]) -> str:
    """debian-packages.txt: PACKAGE=VERSION of every (package, version), sorted."""
    rows = sorted(f"{package}={version}" for package, version in packages)
    head = f"# apt-get install these (Debian {suite}, riscv64), exactly these versions\n"
    return head + "".join(r + "\n" for r in rows)


def make(lock: Lock, opts: Options, *, log: Callable[[str], None] = lambda _m: None) -> dict:
    """Make the wheelhouse of `lock` in opts.output (see the module's docstring); the manifest it writes."""
    check_output(opts.output)
    debian = check_debian(lock, opts)
    if debian is not None:
        log(f"Debian: {len(lock.by_origin(Origin.DEBIAN))} packages at their locked versions in the index")
    recipe_wheels = find_recipe_wheels(lock, opts.artifacts, opts.profile.name)
    out = opts.output.absolute()
    tmp = outdir.beside(out, outdir.Kind.WHEELHOUSE)
    try:
        rows: list[tuple[Entry, str, str]] = []
        placed: list[tuple[Entry, Path, str]] = []
        with Fetcher(options=opts.fetch) as fetcher:
            for e in lock.by_origin(Origin.PYPI):
                assert e.wheel and e.sha256
                src = Source(
                    name=e.name,
                    kind=SourceKind.PYPI,
                    sha256=e.sha256,
                    project=e.name,
                    version=e.version,
                    filename=e.wheel,
                )
                got = fetcher.fetch(src)  # checked by sha256 (exit 4 when the index's file changed)
                sha = _copy(got.path, tmp / e.wheel)
                if sha != e.sha256:  # the cache's entry changed under us
                    raise IntegrityError(f"{e.wheel}: sha256 {sha}, the lock says {e.sha256}")
                placed.append((e, tmp / e.wheel, sha))
        log(f"index: {len(placed)} wheels")
        for p in recipe_wheels:
            sha = _copy(p.source, tmp / p.filename)
            placed.append((p.entry, tmp / p.filename, sha))
        log(f"recipes: {len(recipe_wheels)} wheels from {', '.join(map(str, opts.artifacts))}")
        verify_wheels(  # first: what verify refuses (a METADATA it cannot read too) is refused as it says
            [path for _, path, _ in placed],
            opts.profile,
            carries=[path for e, path, _ in placed if e.origin is Origin.RECIPE and e.name in opts.carries],
        )
        problems = [x for e, path, _ in placed for x in check_metadata(lock, path, e)]
        if problems:
            raise closure_lock.LockConflict(
                f"{len(problems)} requirement(s) of the wheelhouse's wheels do not match the lock "
                f"{lock.file}",
                problems=problems,
                hint="nothing was written",
            )
        log(f"verify: {len(placed)} wheels pass for {opts.profile.name}")
        rows = [(e, path.name, sha) for e, path, sha in placed]
        (tmp / REQUIREMENTS).write_text(
            requirements_text((e.name, f, s) for e, f, s in rows), encoding="utf-8"
        )
        debs = [(deb.package, deb.version) for deb in all_apt_packages(lock)]
        (tmp / DEBIAN_LIST).write_text(debian_text(lock.target.suite, debs), encoding="utf-8")
        compiled = inductor.settings(lock, opts.profile, opts.gcc)
        if compiled is not None:
            (tmp / inductor.ENV_FILE).write_text(inductor.env_text(compiled), encoding="utf-8")
        doc = manifest_doc(lock, opts.profile, rows, debian, compiled)
        from rvport import manifest

        manifest.write(tmp / MANIFEST, doc)
        outdir.write_manifest(tmp, outdir.Kind.WHEELHOUSE, [p.name for p in tmp.iterdir()])
        os.chmod(tmp, 0o755 & ~_umask())
        outdir.replace(tmp, out, outdir.Kind.WHEELHOUSE)
        return doc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _umask() -> int:
    from rvport.fileio import umask

    return umask()


def manifest_doc(
    lock: Lock,
    profile: Profile,
    rows: Sequence[tuple[Entry, str, str]],
    debian: dict | None,
    compiled: inductor.Settings | None = None,
) -> dict:
    return {
        "schema": WHEELHOUSE_SCHEMA,
        "kind": "rvport-wheelhouse",
        "recipe": lock.recipe,
        "version": lock.version,
        "lock": {
            "file": str(lock.file) if lock.file else None,
            "digest": lock.digest,
            "counts": lock.counts(),
        },
        "profile": profile.name,
        "target": lock.target.to_json(),
        "wheels": [
            {"name": e.name, "version": e.version, "origin": e.origin.value, "file": f, "sha256": s}
            for e, f, s in sorted(rows, key=lambda r: r[0].name)
        ],
        "debian": [{**deb.to_json(), "name": name} for name, deb in apt_packages(lock)],
        "system": [p.to_json() for p in lock.system],
        "inductor": compiled.to_json() if compiled is not None else None,
        "debian_release": (debian or {}).get("release"),
    }


# ------------------------------------------------------------------------------------------------ reading
MANIFEST_LIMIT = 16 * 1024 * 1024  # a wheelhouse.json of 150 wheels is about 40 KiB
TEXT_LIMIT = 4 * 1024 * 1024  # requirements.txt, debian-packages.txt


@dataclass(frozen=True, kw_only=True)
class Wheelhouse:
    """A wheelhouse as `read` found it: its directory and its wheelhouse.json (checked)."""

    directory: Path
    doc: dict

    @property
    def recipe(self) -> str:
        return self.doc["recipe"]

    @property
    def version(self) -> str:
        return self.doc["version"]

    @property
    def profile(self) -> str:
        return self.doc["profile"]

    @property
    def suite(self) -> str:
        return self.doc["target"]["suite"]

    @property
    def base(self) -> str:
        return self.doc["target"]["base"]

    @property
    def lock_digest(self) -> str:
        return self.doc["lock"]["digest"]

    def wheel_names(self) -> frozenset[str]:
        return frozenset(canonicalize_name(w["name"]) for w in self.doc["wheels"])

    def debian(self) -> list[tuple[str, str, str]]:
        """(package, version, sha256) of every Debian package apt installs (the distributions' and the
        system packages), as the lock pins it, sorted by package."""
        rows = [(d["package"], d["version"], d["sha256"]) for d in self.doc["debian"]]
        rows += [(d["package"], d["version"], d["sha256"]) for d in self.doc.get("system") or []]
        return sorted(rows)

    def inductor(self) -> inductor.Settings | None:
        """The inductor settings it ships (inductor-env.sh), None when it ships none."""
        doc = self.doc.get("inductor")
        return inductor.from_json(doc, self.recipe, self.version) if doc else None


def read(directory: Path) -> Wheelhouse:
    """A wheelhouse `make` wrote, checked before it is used: wheelhouse.json is a regular file of bounded
    size, JSON of its schema (exit 2 otherwise: not a wheelhouse); requirements.txt and debian-packages.txt
    are the ones it describes, and every wheel it lists is in the directory with its sha256 (exit 4
    otherwise: the wheelhouse changed since it was made)."""
    from rvport import manifest
    from rvport.catalogue.schema import validate
    from rvport.fileio import read_json, read_regular
    from rvport.sources.cache import sha256_file

    make_hint = "make it with `rvport wheelhouse RECIPE --profile PROFILE --artifacts DIR --output DIR`"
    if not directory.is_dir():
        raise UsageError(f"--wheelhouse {directory}: no such directory", hint=make_hint)
    path = directory / MANIFEST
    if not path.exists():
        raise UsageError(f"{directory} is no wheelhouse: it has no {MANIFEST}", hint=make_hint)
    doc = read_json(path, what="wheelhouse manifest", limit=MANIFEST_LIMIT, hint=make_hint)
    problems = validate(doc, manifest.schema("wheelhouse"), file=str(path))
    if not problems:
        target = doc["target"]
        for key in ("suite", "base"):
            if not isinstance(target.get(key), str):
                problems.append(Problem(message=f"target.{key}: a string expected", file=str(path)))
    if problems:
        raise UsageError(
            f"{path} is not a wheelhouse manifest this rvport reads", problems=problems, hint=make_hint
        )
    assert isinstance(doc, dict)
    made = Wheelhouse(directory=directory, doc=doc)
    expected = {
        REQUIREMENTS: requirements_text((w["name"], w["file"], w["sha256"]) for w in doc["wheels"]),
        DEBIAN_LIST: debian_text(made.suite, ((p, v) for p, v, _ in made.debian())),
    }
    compiled = made.inductor()
    if compiled is not None:
        expected[inductor.ENV_FILE] = inductor.env_text(compiled)
    changed: list[Problem] = []
    for name, text in expected.items():
        got = read_regular(directory / name, limit=TEXT_LIMIT, what="wheelhouse file", hint=make_hint)
        if got.decode("utf-8", errors="replace") != text:
            changed.append(
                Problem(message=f"{name} is not the one {MANIFEST} describes", file=str(directory))
            )
    for w in doc["wheels"]:
        wheel = directory / w["file"]
        if Path(w["file"]).name != w["file"] or wheel.is_symlink() or not wheel.is_file():
            changed.append(Problem(message=f"{w['file']}: not a file of the wheelhouse", file=str(path)))
        elif (sha := sha256_file(wheel)) != w["sha256"]:
            changed.append(Problem(message=f"{w['file']}: sha256 {sha}, {MANIFEST} says {w['sha256']}"))
    if changed:
        raise IntegrityError(
            f"the wheelhouse {directory} changed since it was made ({len(changed)} problem(s))",
            problems=changed,
            hint="make it again with `rvport wheelhouse` (it replaces the directory whole)",
        )
    return made
