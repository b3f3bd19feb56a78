"""Archives: unpack one into a directory, or read its tree digest, checking the bytes on the way.

A cache entry is read through `open_blob`, which hashes the bytes as the archive reader consumes them, so a
corrupt entry is caught by the very pass that unpacks it (tar is read as a stream; a zip needs random access
and is checked in one pass before it is opened).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

from rvport.catalogue.recipes import Source
from rvport.errors import IntegrityError
from rvport.sources.cache import open_blob
from rvport.sources.treehash import check_excludes, digest, tar_entries, tree_digest


def is_zip(name: str, path: Path) -> bool:
    return name.endswith(".zip") or zipfile.is_zipfile(path)


@contextlib.contextmanager
def _reading(path: Path, blob: bool) -> Iterator:
    if blob:
        with open_blob(path) as f:
            yield f
    else:
        with open(path, "rb") as f:
            yield f


def tree_mismatch(source: Source, actual: str, where: str) -> IntegrityError:
    """Exit code 4, naming both tree digests and where the tree came from."""
    return IntegrityError(
        f"source {source.name!r} ({source.origin}) failed its tree digest check\n"
        f"  expected tree {source.tree}\n  actual   tree {actual}  (from {where})"
        + (f"\n  excluded: {', '.join(source.exclude)}" if source.exclude else ""),
        hint="the files are not the pinned commit's: suspect the mirror, the clone or the forge archive; if the "
        'pin itself is wrong, compute it again from a trusted clone (docs/sources.md, "Tree digests")',
    )


def archive_tree(path: Path, *, name: str, exclude: tuple[str, ...] = (), blob: bool = False) -> str:
    """The tree digest of an archive's content, as unpacking it would give (its top directory stripped).

    A tar is read as a stream (nothing is written to disk); a zip is unpacked into a temporary directory.
    With blob=True the file is a cache entry and its bytes are checked against its name while read.
    """
    if is_zip(name, path):
        with tempfile.TemporaryDirectory(prefix="rvport-tree.") as tmp:
            unpack(path, Path(tmp) / "t", name=name, scratch=Path(tmp), blob=blob)
            return tree_digest(Path(tmp) / "t", exclude)
    with _reading(path, blob) as f:
        return digest(tar_entries(f, name=name), exclude)


def unpack(
    archive: Path,
    dest: Path,
    *,
    name: str,
    scratch: Path,
    blob: bool = False,
    source: Source | None = None,
    where: str | None = None,
) -> None:
    """Unpack a .tar.* or .zip archive into `dest`, stripping its single top directory if it has one.

    blob=True: the archive is a cache entry, checked against its name while it is read (CorruptEntry).
    A `source` with a tree pin: the unpacked tree must have that digest (IntegrityError naming both digests
    and `where`), and its excluded paths are removed, so that nothing unpinned reaches a build.
    """
    stage = Path(tempfile.mkdtemp(dir=scratch, prefix="unpack."))
    try:
        with _reading(archive, blob) as f:
            if is_zip(name, archive):
                if blob:
                    f.drain()  # a zip is read at random: check it whole first
                with zipfile.ZipFile(archive) as z:
                    for member in z.namelist():
                        if not (stage / member).resolve().is_relative_to(stage.resolve()):
                            raise IntegrityError(
                                f"{name}: archive member {member!r} escapes the tree",
                                hint="the archive is malformed or malicious; do not use it",
                            )
                    z.extractall(stage)
            else:
                try:
                    with tarfile.open(fileobj=f, mode="r|*") as t:
                        t.extractall(stage, filter="data")
                except (tarfile.TarError, EOFError, OSError) as e:
                    raise IntegrityError(
                        f"{name}: cannot unpack: {e}",
                        hint="the archive is damaged or not a tar/zip file; check the recipe's source",
                    ) from e
            entries = list(stage.iterdir())
            root = (
                entries[0]
                if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink()
                else stage
            )
            if source is not None and source.tree:
                exclude = check_excludes(source.exclude)
                actual = tree_digest(root, exclude)
                if actual != source.tree:
                    raise tree_mismatch(source, actual, where or str(archive))
                _remove_excluded(root, exclude)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists():
            for child in root.iterdir():
                os.replace(child, dest / child.name)
        else:
            os.replace(root, dest)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _remove_excluded(root: Path, exclude: tuple[str, ...]) -> None:
    """Remove each excluded path; never through a symbolic link (under a link there are no entries)."""
    for e in exclude:
        p = root
        parts = e.split("/")
        for part in parts[:-1]:
            p = p / part
            if p.is_symlink() or not p.is_dir():
                break
        else:
            p = p / parts[-1]
            if p.is_symlink() or p.is_file():
                p.unlink()
            elif p.is_dir():
                shutil.rmtree(p)


__all__ = ["archive_tree", "is_zip", "tree_mismatch", "unpack"]
