"""Tree digests: one canonical form for the content of a source tree, whatever archive it came in.

The form (docs/sources.md, "Tree digests", is the reference):

  * entries are the tree's regular files and symbolic links; directories are not entries (an empty directory
    does not count, as in git); any other kind of file is refused;
  * an entry's path is relative to the tree's root, '/'-separated, in bytes (os.fsencode), without './';
  * a file is `f 755` when its owner-executable bit is set, else `f 644`; its value is the sha256 of its
    contents; a symbolic link is `l 777`, its value the sha256 of its target as written (not followed);
  * each entry is the line  TYPE SP MODE SP PATH NUL VALUE LF  (VALUE: 64 lowercase hex digits);
  * the lines are sorted by PATH, byte-wise; excluded paths (and everything under them) are left out;
  * the tree digest is "sha256:" + the sha256 of the concatenated lines.

Nothing else counts: not mtimes, owners, other permission bits, the order of an archive's members, its
compression or its top directory. Two producers feed the one form: `dir_entries` (an unpacked tree) and
`tar_entries` (a tar stream, read once, nothing written to disk).
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Literal

from rvport.errors import IntegrityError, RecipeError
from rvport.sources.member_checks import BoundedTarInfo, Budget, Layout, Limits

PREFIX = "sha256:"
CHUNK = 1 << 16


@dataclass(frozen=True, kw_only=True)
class Entry:
    path: str  # relative, '/'-separated
    kind: Literal["f", "l"]
    executable: bool = False
    value: str  # sha256 hex of the contents (file) or of the target (link)

    def line(self) -> bytes:
        mode = "777" if self.kind == "l" else ("755" if self.executable else "644")
        return f"{self.kind} {mode} ".encode() + os.fsencode(self.path) + b"\0" + self.value.encode() + b"\n"


def check_excludes(exclude: Iterable[str]) -> tuple[str, ...]:
    """Normalised exclude paths ('a/b/' -> 'a/b'); a path that is absolute, empty or climbs out is refused."""
    out: list[str] = []
    for raw in exclude:
        p = PurePosixPath(raw)
        if not raw.strip() or p.is_absolute() or ".." in p.parts or str(p) in (".", ""):
            raise RecipeError(
                f"exclude: {raw!r} is not a relative path inside the tree",
                hint="write a path relative to the source's top directory, e.g. go/rustbin/",
            )
        out.append(str(p))
    return tuple(dict.fromkeys(out))


def is_excluded(path: str, exclude: tuple[str, ...]) -> bool:
    return any(path == e or path.startswith(e + "/") for e in exclude)


def listing(entries: Iterable[Entry], exclude: Iterable[str] = ()) -> bytes:
    """The canonical listing: one line per entry that is not excluded, sorted by path (bytes)."""
    ex = check_excludes(exclude)
    by_path: dict[bytes, Entry] = {}
    for e in entries:
        if not is_excluded(e.path, ex):
            by_path[os.fsencode(e.path)] = e
    return b"".join(by_path[p].line() for p in sorted(by_path))


def digest(entries: Iterable[Entry], exclude: Iterable[str] = ()) -> str:
    return PREFIX + hashlib.sha256(listing(entries, exclude)).hexdigest()


def _sha256_stream(f: IO[bytes]) -> str:
    h = hashlib.sha256()
    for chunk in iter(lambda: f.read(CHUNK), b""):
        h.update(chunk)
    return h.hexdigest()


def _text_digest(text: str) -> str:
    return hashlib.sha256(os.fsencode(text)).hexdigest()


# ------------------------------------------------------------------------------------------ a directory


def dir_entries(root: Path) -> Iterator[Entry]:
    """The entries of an unpacked tree (symbolic links are never followed)."""
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        for name in (*dirnames, *filenames):
            p = d / name
            st = p.lstat()
            rel = p.relative_to(root).as_posix()
            if stat.S_ISDIR(st.st_mode):
                continue
            if stat.S_ISLNK(st.st_mode):
                yield Entry(path=rel, kind="l", value=_text_digest(os.readlink(p)))
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    yield Entry(
                        path=rel,
                        kind="f",
                        executable=bool(st.st_mode & stat.S_IXUSR),
                        value=_sha256_stream(f),
                    )
            else:
                raise IntegrityError(
                    f"{rel}: not a regular file, directory or symbolic link",
                    hint="a source tree holds only files, directories and links",
                )


def tree_digest(root: Path, exclude: Iterable[str] = ()) -> str:
    """The tree digest of an unpacked directory."""
    return digest(dir_entries(root), exclude)


# ------------------------------------------------------------------------------------------ a tar stream


def tar_entries(
    fileobj: IO[bytes],
    *,
    name: str = "archive",
    mode: str,
    limits: Limits | None = None,
    ranges: list[tuple[int, int]] | None = None,
) -> list[Entry]:
    """The entries of a tar archive, read as a stream with tarfile's `mode` (`r|gz`: the compression its
    name declares, archive.tar_mode); its single top directory, if it has
    one, is stripped (as unpacking does). Members are checked as unpacking checks them (`members.Layout`:
    paths, links, kinds) and counted against `limits`. `ranges`, when given, receives each regular member's
    (offset, size) in the stream."""
    raw: dict[str, Entry] = {}
    dirs: set[str] = set()
    layout = Layout(name)
    budget = Budget(limits or Limits(), name)
    try:
        with tarfile.open(fileobj=fileobj, mode=mode, tarinfo=BoundedTarInfo) as t:
            for m in t:
                budget.member()
                path = layout.path(m.name)
                if not path:
                    continue
                if m.isdir():
                    layout.add(m.name, path, "d")
                    dirs.add(path)
                    raw.pop(path, None)
                elif m.issym():
                    layout.add(m.name, path, "l", m.linkname)
                    raw[path] = Entry(path=path, kind="l", value=_text_digest(m.linkname))
                elif m.islnk():
                    source = layout.add(m.name, path, "h", m.linkname)
                    target = raw[source]
                    budget.take(m.size if m.size else 0)
                    raw[path] = Entry(
                        path=path, kind="f", executable=bool(m.mode & stat.S_IXUSR), value=target.value
                    )
                elif m.isreg():
                    layout.add(m.name, path, "f")
                    if ranges is not None:
                        ranges.append((m.offset_data, m.size))
                    f = t.extractfile(m)
                    assert f is not None
                    budget.take(m.size)
                    raw[path] = Entry(
                        path=path, kind="f", executable=bool(m.mode & stat.S_IXUSR), value=_sha256_stream(f)
                    )
                else:
                    raise IntegrityError(
                        f"{name}: member {m.name!r} is not a file, directory or link",
                        hint="a source archive holds only files, directories and links",
                    )
    except (tarfile.TarError, EOFError, zlib.error, OSError, ValueError) as e:
        raise IntegrityError(
            f"{name}: cannot read the archive: {e}", hint="the archive is damaged or not a tar file"
        ) from e
    tops = {p.split("/", 1)[0] for p in (*raw, *dirs)}
    if len(tops) == 1:
        top = next(iter(tops))
        if top in dirs or any("/" in p for p in raw):  # a single top directory: strip it
            layout.check_links(top)
            return [
                Entry(path=e.path[len(top) + 1 :], kind=e.kind, executable=e.executable, value=e.value)
                for e in raw.values()
                if e.path != top
            ]
    layout.check_links("")
    return list(raw.values())


__all__ = [
    "Entry",
    "PREFIX",
    "check_excludes",
    "digest",
    "dir_entries",
    "is_excluded",
    "listing",
    "tar_entries",
    "tree_digest",
]
