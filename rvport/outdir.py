"""The one rule for output directories: rvport replaces, or writes into, only a directory it wrote itself.

Every verb with an output directory (plan, build and prepare; reproduce; wheelhouse; serve-check) writes
`rvport-output.json` into it before anything else: the manifest that says rvport wrote the directory, for
which kind of output, and which entries of it are rvport's.

    {"schema": 1, "kind": "rvport-output", "output": "build", "entries": ["artifacts", "logs", ...]}

`check(path, kind)` runs before any work, and again right before a directory is replaced. The path may be
missing (its nearest existing ancestor must then be a directory a file can be made in: a parent under /proc
is refused here, exit 2, not found out later) or an empty directory. An existing directory with anything in it
must hold a manifest that is a regular file (not a link) of at most MANIFEST_MAX_BYTES, well-formed, naming
rvport and this kind of output, whose entries are names this kind writes, and every entry of the directory
(but the manifest and rvport's own temporary files beside a listed entry) must be among them. Anything else is
a UsageError (exit 2) saying what to do; nothing is changed. A link is never followed to an output directory.

`claim` makes the directory (and the manifest) for a verb that writes into it file by file; `replace` puts
a directory made whole beside it (a wheelhouse) in its place; `remove` takes away one rvport wrote (a
reproduce's earlier build). All three check first.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path

from rvport.errors import UsageError
from rvport.fileio import atomic_write_text, read_regular
from rvport.safetext import one_line

MANIFEST = "rvport-output.json"
MANIFEST_KIND = "rvport-output"
MANIFEST_SCHEMA = 1
MANIFEST_MAX_BYTES = 4 * 1024 * 1024
MAX_ENTRIES = 100_000  # entries a manifest may list, and a directory may hold to be looked at


class Kind(StrEnum):
    """What an output directory holds."""

    BUILD = "build"  # plan, build, prepare: plan.json, result.json, artifacts/, logs/, ...
    REPRODUCE = "reproduce"  # two builds (first/, second/) and reproduce.json
    WHEELHOUSE = "wheelhouse"  # wheels, requirements.txt, debian-packages.txt, wheelhouse.json
    SERVE_CHECK = "serve-check"  # result.json, logs/
    MATRIX = "matrix"  # a build of several profiles: matrix.json and a build output per profile (PROFILE/)


# The names each kind writes at the top of its directory (None: the manifest lists them, e.g. the wheels); a
# verb lists more when it writes more there (claim's `also`: a --junit file inside the output directory).
ENTRIES: dict[Kind, frozenset[str] | None] = {
    Kind.BUILD: frozenset(
        {
            "plan.json",
            "result.json",
            "provenance.json",
            "artifacts",
            "logs",
            "docker-bake.json",
            "bake",
            "cache",
        }
    ),
    Kind.REPRODUCE: frozenset({"first", "second", "reproduce.json"}),
    Kind.WHEELHOUSE: None,
    Kind.SERVE_CHECK: frozenset({"result.json", "logs"}),
    Kind.MATRIX: None,  # matrix.json and the profiles' directories, listed
}

HINT = (
    "name a new or empty directory; rvport replaces only a directory it wrote itself (it holds {m}). "
    "If you mean to give this one up, remove it yourself"
)
_WRITABLE = "choose a path in a directory you can write to"
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.[A-Za-z0-9_]+\.tmp", re.DOTALL)  # fileio.atomic_file's


def _refuse(path: Path, flag: str, why: str, hint: str | None = None) -> UsageError:
    """An output directory rvport did not write: FLAG PATH: why, and what to do."""
    return UsageError(f"{flag} {one_line(path)}: {why}", hint=hint or HINT.format(m=MANIFEST))


def _cannot(path: Path, why: str) -> UsageError:
    """A path rvport cannot write at all: cannot write PATH: why (as rvport.cli.outputs says it)."""
    return UsageError(f"cannot write {one_line(path)}: {why}", hint=_WRITABLE)


def what_is(mode: int) -> str:
    """What a file of st_mode `mode` is, for a message: 'a file', 'a character device', ..."""
    for test, name in (
        (stat.S_ISREG, "a file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a file"


def _one_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and 0 < len(name) <= 255
        and name not in (".", "..", MANIFEST)
        and "/" not in name
        and "\0" not in name
    )


def _manifest_entries(path: Path, kind: Kind, flag: str) -> frozenset[str]:
    """The entries the manifest of directory `path` lists, after its checks (see the module's docstring)."""
    m = path / MANIFEST
    try:
        st = os.lstat(m)
    except FileNotFoundError:
        raise _refuse(path, flag, f"it holds files and no {MANIFEST}: rvport did not write it") from None
    except OSError as e:
        raise _refuse(path, flag, f"cannot read its {MANIFEST}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, flag, f"its {MANIFEST} is not a regular file")
    bad = _refuse(path, flag, f"its {MANIFEST} is not one rvport writes")
    try:
        data = read_regular(m, limit=MANIFEST_MAX_BYTES, what=MANIFEST, follow=False)
        doc = json.loads(data.decode("utf-8"))
    except (UsageError, UnicodeDecodeError, ValueError, RecursionError):
        raise bad from None
    if not isinstance(doc, dict) or set(doc) != {"schema", "kind", "output", "entries"}:
        raise bad
    if doc["kind"] != MANIFEST_KIND or doc["schema"] != MANIFEST_SCHEMA:
        raise bad
    if doc["output"] != kind.value:
        what = doc["output"] if isinstance(doc["output"], str) and doc["output"] in set(Kind) else "another"
        raise _refuse(path, flag, f"it holds rvport's {what} output, not a {kind.value} output")
    entries = doc["entries"]
    if not isinstance(entries, list) or len(entries) > MAX_ENTRIES or not all(map(_one_name, entries)):
        raise bad
    return frozenset(entries)


def _listing(path: Path, flag: str) -> list[str]:
    """The names in directory path (at most MAX_ENTRIES + 1 of them)."""
    out: list[str] = []
    try:
        with os.scandir(path) as it:
            for e in it:
                out.append(e.name)
                if len(out) > MAX_ENTRIES:
                    break
    except OSError as e:
        raise _refuse(path, flag, f"cannot list it: {e.strerror or e}") from None
    return out


def _writable_ancestor(path: Path, flag: str) -> None:
    """path does not exist: rvport would make it (and its missing parents) in its nearest existing
    ancestor, which must be a directory a file can be made in (an unnamed temporary file tells)."""
    p = path.absolute().parent
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    if not p.is_dir():
        raise _cannot(path, f"{one_line(p)} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=p):
            pass
    except OSError as e:
        raise _cannot(path, f"{one_line(p)}: {e.strerror or e}") from None


def check(path: Path, kind: Kind, *, flag: str = "--output") -> None:
    """Whether rvport may write `kind` output into, or replace, directory `path` (the module's docstring):
    returns when it may, raises UsageError (exit 2) saying why not and what to do."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return _writable_ancestor(path, flag)
    except NotADirectoryError:
        raise _cannot(path, "a part of it is a file, not a directory") from None
    except OSError as e:
        raise _cannot(path, e.strerror or str(e)) from None
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(path, flag, "it is a symbolic link: rvport writes no output through a link")
    if not stat.S_ISDIR(st.st_mode):
        raise _cannot(path, f"it is {what_is(st.st_mode)}, not a directory")
    names = _listing(path, flag)
    if not names:
        return None
    if len(names) > MAX_ENTRIES:
        raise _refuse(path, flag, f"it holds more than {MAX_ENTRIES} entries: rvport did not write it")
    listed = _manifest_entries(path, kind, flag)
    other = sorted(n for n in names if n != MANIFEST and n not in listed and not _temporary_of(n, listed))
    if other:
        shown = ", ".join(map(one_line, other[:5])) + (
            f" and {len(other) - 5} more" if len(other) > 5 else ""
        )
        raise _refuse(path, flag, f"it holds what rvport did not write there: {shown}")
    return None


def _temporary_of(name: str, listed: frozenset[str]) -> bool:
    m = _TEMPORARY.fullmatch(name)
    return m is not None and m.group("name") in listed


def manifest_text(kind: Kind, entries: Iterable[str]) -> str:
    names = sorted(set(entries))
    if not all(map(_one_name, names)):
        raise ValueError(f"not entries of a {kind.value} output: {names}")
    doc = {"schema": MANIFEST_SCHEMA, "kind": MANIFEST_KIND, "output": kind.value, "entries": names}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def write_manifest(directory: Path, kind: Kind, entries: Iterable[str] | None = None) -> None:
    """directory/rvport-output.json for `kind` (entries: default the kind's own names)."""
    names = ENTRIES[kind] if entries is None else entries
    if names is None:
        raise ValueError(f"a {kind.value} output lists its entries")
    atomic_write_text(directory / MANIFEST, manifest_text(kind, names))


def claim(path: Path, kind: Kind, *, flag: str = "--output", also: Iterable[Path | None] = ()) -> Path:
    """Check `path` (check), then make it if need be and write its manifest: a directory the verb may now
    write its entries into. `also`: other files the verb writes, listed when they lie directly in `path`
    (`--junit out/junit.xml`); what an earlier run listed stays listed. An OSError while making it is a
    UsageError too (exit 2)."""
    check(path, kind, flag=flag)
    names = set(ENTRIES[kind] or ())
    names |= {p.name for p in also if p is not None and p.absolute().parent == path.absolute()}
    if (path / MANIFEST).is_file():
        names |= _manifest_entries(path, kind, flag)
    try:
        path.mkdir(parents=True, exist_ok=True)
        write_manifest(path, kind, names)
    except OSError as e:
        raise _cannot(path, e.strerror or str(e)) from None
    return path


def beside(path: Path, kind: Kind, *, flag: str = "--output") -> Path:
    """Check `path` (check), make its missing parents, and return a new empty directory beside it
    (`.NAME.XXXX.part`) to make the whole output in, for `replace`. An OSError is a UsageError (exit 2)."""
    check(path, kind, flag=flag)
    parent = path.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".part", dir=parent))
    except OSError as e:
        raise _cannot(path, f"{one_line(parent)}: {e.strerror or e}") from None


def replace(made: Path, path: Path, kind: Kind, *, flag: str = "--output") -> None:
    """The complete directory `made` (beside `path`, holding its manifest) becomes `path`: one rename. What
    `path` held (checked again first: an output of this kind) is moved aside first and removed after; if the
    rename fails it is put back."""
    check(path, kind, flag=flag)
    old = None
    if os.path.lexists(path):
        old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.absolute().parent))
        os.rename(path, old / "previous")
    try:
        os.rename(made, path)
    except BaseException:
        if old is not None:
            os.rename(old / "previous", path)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def remove(path: Path, kind: Kind, *, flag: str = "--output") -> None:
    """Remove directory `path` when it is an output of `kind` (check); nothing when it is not there."""
    check(path, kind, flag=flag)
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)
