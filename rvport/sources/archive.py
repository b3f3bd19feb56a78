"""Archives: unpack one into a directory, or read its tree digest, checking the bytes on the way.

An archive is read as the kind its name declares (.tar.gz, .tgz, .tar.xz, .tar.bz2, .tar: tar; .zip, .whl:
zip), never by sniffing its content, and one that parses as both a tar and a zip is refused. rvport writes
every member itself, after `members.Layout` accepted it (paths, links, kinds) and within `members.Limits`
(bytes and members): no library extraction filter is relied on, so the same checks hold on every Python 3.11+.

A cache entry is read through `open_blob`, which hashes the bytes as the archive reader consumes them, so a
corrupt entry is caught by the very pass that unpacks it (tar is read as a stream; a zip needs random access
and is checked in one pass before it is opened).
"""

from __future__ import annotations

import calendar
import contextlib
import errno
import os
import shutil
import stat
import struct
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal

from rvport.catalogue.model import Source
from rvport.errors import IntegrityError, RecipeError, RvportError
from rvport.sources.cache import disk_error, open_blob
from rvport.sources.member_checks import MALICIOUS, BoundedTarInfo, Budget, Kind, Layout, Limits, member_mode
from rvport.sources.treehash import check_excludes, digest, tar_entries, tree_digest

# each tar suffix and the one compression tarfile is told to read (never "*": the content is not sniffed)
TAR_COMPRESSION = {
    ".tar.gz": "gz",
    ".tgz": "gz",
    ".tar.xz": "xz",
    ".txz": "xz",
    ".tar.bz2": "bz2",
    ".tbz2": "bz2",
    ".tbz": "bz2",
    ".tar": "",
}
TAR_SUFFIXES = tuple(TAR_COMPRESSION)
ZIP_SUFFIXES = (".zip", ".whl")
CHUNK = 1 << 16
MAX_LINK = 4095  # bytes in a link target (PATH_MAX - 1)
_NAME_ERRORS = (errno.ENAMETOOLONG, errno.ELOOP, errno.EILSEQ)
_COMPRESSED = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
DAMAGED = (
    "the archive is damaged or not what its name says; check the recipe's source (its URL, file name or "
    "mirror file)"
)


def archive_kind(name: str) -> Literal["tar", "zip"]:
    """The kind of archive a source declares by its file name."""
    low = name.lower()
    if low.endswith(ZIP_SUFFIXES):
        return "zip"
    if low.endswith(TAR_SUFFIXES):
        return "tar"
    raise RecipeError(
        f"{name}: cannot tell from its name what kind of archive it is",
        hint="rvport unpacks a source by the name it declares: "
        + ", ".join((*TAR_SUFFIXES, *ZIP_SUFFIXES))
        + " (give a URL, or pypi filename, with one of these endings)",
    )


def tar_mode(name: str) -> str:
    """tarfile's stream mode for a tar the name declares: `r|gz` for a .tar.gz, `r|` for a .tar. A file
    that is not what its name says then fails to read (exit 4), as an xz tar named .tar.gz does."""
    low = name.lower()
    for suffix, compression in TAR_COMPRESSION.items():
        if low.endswith(suffix):
            return f"r|{compression}"
    archive_kind(name)  # raises: no tar suffix
    raise AssertionError(name)


def is_zip(name: str, path: Path | None = None) -> bool:
    """True when the source's name declares a zip (the content is never sniffed)."""
    return archive_kind(name) == "zip"


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
        f"source {source.name!r} ({source.origin}) failed its tree digest check",
        detail=[
            f"  expected tree {source.tree}",
            f"  actual   tree {actual}  (from {where})",
            *([f"  excluded: {', '.join(source.exclude)}"] if source.exclude else []),
        ],
        hint="the files are not the pinned commit's: suspect the mirror, the clone or the forge archive; if "
        'the pin itself is wrong, compute it again from a trusted clone (docs/sources.md, "Tree digests")',
    )


def archive_tree(
    path: Path,
    *,
    name: str,
    exclude: tuple[str, ...] = (),
    blob: bool = False,
    limits: Limits | None = None,
) -> str:
    """The tree digest of an archive's content, as unpacking it would give (its top directory stripped).

    A tar is read as a stream (nothing is written to disk); a zip is unpacked into a temporary directory.
    With blob=True the file is a cache entry and its bytes are checked against its name while read.
    """
    if archive_kind(name) == "zip":
        with tempfile.TemporaryDirectory(prefix="rvport-tree.") as tmp:
            unpack(path, Path(tmp) / "t", name=name, scratch=Path(tmp), blob=blob, limits=limits)
            return tree_digest(Path(tmp) / "t", exclude)
    ranges: list[tuple[int, int]] = []
    with _reading(path, blob) as f:
        entries = tar_entries(f, name=name, mode=tar_mode(name), limits=limits, ranges=ranges)
    _refuse_zip_polyglot(path, name, ranges)
    return digest(entries, exclude)


def unpack(
    archive: Path,
    dest: Path,
    *,
    name: str,
    scratch: Path,
    blob: bool = False,
    source: Source | None = None,
    where: str | None = None,
    limits: Limits | None = None,
    at: str | None = None,
) -> None:
    """Unpack a tar or zip archive (the kind its `name` declares) into `dest`, stripping its single top
    directory if it has one.

    blob=True: the archive is a cache entry, checked against its name while it is read (CorruptEntry).
    A `source` with a tree pin: the unpacked tree must have that digest (IntegrityError naming both digests
    and `where`), and its excluded paths are removed, so that nothing unpinned reaches a build.
    An existing `dest` must be a directory holding none of the archive's top-level names (RecipeError naming
    `at`, where in the recipe the source is): one source never replaces another's files.
    """
    kind = archive_kind(name)
    limits = limits or Limits()
    try:
        stage = Path(tempfile.mkdtemp(dir=scratch, prefix="unpack."))
    except OSError as e:
        raise disk_error(e, scratch, f"unpacking {name}") from e
    try:
        writer = _Writer(stage, name, Budget(limits, name), scratch)
        with _reading(archive, blob) as f:
            if kind == "zip":
                if blob:
                    f.drain()  # a zip is read at random: check it whole first
                _refuse_tar_polyglot(archive, name)
                layout = _unpack_zip(archive, writer)
            else:
                layout, ranges = _unpack_tar(f, writer)
                _refuse_zip_polyglot(archive, name, ranges)
            entries = list(stage.iterdir())
            root = (
                entries[0]
                if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink()
                else stage
            )
            layout.check_links("" if root == stage else root.name)
            if source is not None and source.tree:
                exclude = check_excludes(source.exclude)
                actual = tree_digest(root, exclude)
                if actual != source.tree:
                    raise tree_mismatch(source, actual, where or str(archive))
                _remove_excluded(root, exclude)
        _place(
            root,
            dest,
            name=source.name if source else name,
            label=(source.dest if source else None) or ".",
            at=at,
            scratch=scratch,
        )
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _place(root: Path, dest: Path, *, name: str, label: str, at: str | None, scratch: Path) -> None:
    """Move the unpacked tree to `dest`; into it when it exists, replacing nothing that is there."""
    where = f" (in {at})" if at else ""
    if os.path.lexists(dest) and (dest.is_symlink() or not dest.is_dir()):
        raise RecipeError(
            f"source {name!r}: its dest {label!r} is already a file or link of another source{where}",
            hint="choose a dest that no other source has (e.g. _deps/NAME)",
        )
    try:
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as e:
            raise RecipeError(
                f"source {name!r}: its dest {label!r} passes through a file of another source{where}",
                hint="choose a dest that no other source has (e.g. _deps/NAME)",
            ) from e
        if not dest.exists():
            os.replace(root, dest)
            return
        children = list(root.iterdir())
        clash = sorted(c.name for c in children if os.path.lexists(dest / c.name))
        if clash:
            raise RecipeError(
                f"source {name!r} would replace {', '.join(clash[:5])}{' ...' if len(clash) > 5 else ''} "
                f"in {label!r}, which another source already has{where}",
                hint="give the source a dest of its own (e.g. _deps/NAME); change another source's file "
                "with a patch",
            )
        for child in children:
            os.replace(child, dest / child.name)
    except OSError as e:
        raise disk_error(e, scratch, f"placing {name}") from e


# ------------------------------------------------------------------------------------------ writing members


class _Writer:
    """Writes accepted members under `stage`: never through a link (O_NOFOLLOW, O_EXCL), within the budget.
    An OSError while writing is the host's (no space: exit 6), never blamed on the archive."""

    def __init__(self, stage: Path, name: str, budget: Budget, scratch: Path):
        self.stage = stage
        self.name = name
        self.budget = budget
        self.scratch = scratch
        self.dirs: list[tuple[str, float]] = []

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        try:
            yield
        except OSError as e:
            if e.errno in _NAME_ERRORS:  # the archive's names, not the host: too long, too many links
                at = os.path.relpath(e.filename, self.stage) if isinstance(e.filename, str) else "a member"
                raise IntegrityError(
                    f"{self.name}: cannot unpack {at!r}: {e.strerror}", hint=MALICIOUS
                ) from e
            raise disk_error(e, self.scratch, f"unpacking {self.name}") from e

    def _full(self, path: str) -> str:
        return os.path.join(self.stage, path)

    def _prepare(self, path: str) -> str:
        """The member's parents exist (Layout proved none is a link); a file or link of the same name is
        removed (a later member replaces it, as `tar -x` does)."""
        full = self._full(path)
        parent = os.path.dirname(full)
        with self.writing():
            os.makedirs(parent, mode=0o755, exist_ok=True)
            if os.path.lexists(full) and not os.path.isdir(full):
                os.unlink(full)
        return full

    def directory(self, path: str, mtime: float) -> None:
        full = self._full(path)
        with self.writing():
            os.makedirs(full, mode=0o755, exist_ok=True)
            os.chmod(full, 0o755)
        self.dirs.append((full, mtime))

    def file(self, path: str, data: IO[bytes], mode: int, mtime: float) -> None:
        full = self._prepare(path)
        with self.writing():
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            while True:
                chunk = data.read(CHUNK)  # a read error is the archive's: the caller reports it
                if not chunk:
                    break
                self.budget.take(len(chunk))
                with self.writing():
                    view = memoryview(chunk)
                    while view:
                        view = view[write(fd, view) :]
            with self.writing():
                os.fchmod(fd, member_mode(mode, "f"))
        finally:
            os.close(fd)
        _set_time(full, mtime)

    def copy(self, path: str, source: str, mode: int, mtime: float) -> None:
        """A hard link: a copy of an earlier regular file of the archive (its own file, its own mode)."""
        with self.writing():
            src = open(os.open(self._full(source), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb")
        with src:
            self.file(path, src, mode, mtime)

    def symlink(self, path: str, target: str, mtime: float) -> None:
        full = self._prepare(path)
        with self.writing():
            os.symlink(target, full)
        _set_time(full, mtime)

    def finish(self) -> None:
        for full, mtime in reversed(self.dirs):  # deepest last created first: their times stay
            _set_time(full, mtime)


def write(fd: int, data: memoryview) -> int:
    """os.write; the one place member bytes reach the disk (tests simulate a full disk here)."""
    return os.write(fd, data)


def _set_time(full: str, mtime: float) -> None:
    with contextlib.suppress(OSError, OverflowError, ValueError):
        t = max(0, int(mtime))
        os.utime(full, (t, t), follow_symlinks=False)


# ------------------------------------------------------------------------------------------ tar


def _tar_kind(layout: Layout, m: tarfile.TarInfo) -> Kind | Literal["h"]:
    if m.isdir():
        return "d"
    if m.issym():
        return "l"
    if m.islnk():
        return "h"
    if m.isreg():
        return "f"
    raise layout.refuse(m.name, "is a device, FIFO or other special file: a source holds none")


def _unpack_tar(f: IO[bytes], w: _Writer) -> tuple[Layout, list[tuple[int, int]]]:
    """Unpack a tar stream member by member; returns the layout and the regular members' data ranges."""
    layout = Layout(w.name)
    ranges: list[tuple[int, int]] = []
    try:
        with tarfile.open(fileobj=f, mode=tar_mode(w.name), tarinfo=BoundedTarInfo) as t:
            for m in t:
                w.budget.member()
                path = layout.path(m.name)
                if not path:
                    continue
                kind = _tar_kind(layout, m)
                if kind == "l" and len(os.fsencode(m.linkname)) > MAX_LINK:
                    raise layout.refuse(m.name, "is a link with a target longer than PATH_MAX")
                source = layout.add(m.name, path, kind, m.linkname)
                if kind == "d":
                    w.directory(path, m.mtime)
                elif kind == "l":
                    w.symlink(path, m.linkname, m.mtime)
                elif kind == "h":
                    assert source is not None
                    w.copy(path, source, m.mode, m.mtime)
                else:
                    ranges.append((m.offset_data, m.size))
                    data = t.extractfile(m)
                    assert data is not None
                    w.file(path, data, m.mode, m.mtime)
    except (tarfile.TarError, EOFError, zlib.error, OSError, ValueError) as e:
        raise IntegrityError(f"{w.name}: cannot unpack it as a tar archive: {e}", hint=DAMAGED) from e
    w.finish()
    return layout, ranges


def _polyglot(name: str, also: str) -> IntegrityError:
    return IntegrityError(
        f"{name}: the file is a {'zip' if also == 'tar' else 'tar'} archive and also a {also} archive (a "
        "polyglot); it was not unpacked",
        hint="tools that look at its content rather than its name would unpack other files: " + MALICIOUS,
    )


def _refuse_zip_polyglot(archive: Path, name: str, ranges: list[tuple[int, int]]) -> None:
    """A tar that a zip reader would read too is refused: tools that sniff content would see other files.
    Fail closed: a file with a zip end record that the zip reader then cannot open is refused too.

    A plain tar whose last member is itself a zip (a test fixture, say) is not a polyglot: the zip's end
    record lies inside that member's data (`ranges`)."""
    try:
        with open(archive, "rb") as f:
            head = f.read(6)
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - (1 << 16) - 22))
            tail = f.read()
        if not zipfile.is_zipfile(archive):
            return
    except OSError as e:
        raise IntegrityError(f"{name}: cannot read it again: {e.strerror or e}", hint=DAMAGED) from None
    end = size - len(tail) + tail.rfind(b"PK\x05\x06")
    compressed = head.startswith(_COMPRESSED)
    if not compressed and any(o <= end < o + n for o, n in ranges):
        return
    try:
        with zipfile.ZipFile(archive) as z:
            if not z.infolist():
                return
    except (OSError, zipfile.BadZipFile, ValueError, EOFError, NotImplementedError, RuntimeError):
        pass  # a zip reader that sniffs may read it yet: refused
    raise _polyglot(name, "zip")


def _refuse_tar_polyglot(archive: Path, name: str) -> None:
    """A zip that a tar reader would read too is refused. Fail closed: the zip is no tar only when its first
    bytes are no compressed stream and no tar header, and tarfile, reading with any compression, says it is
    not a tar (ReadError); any other failure of the tar reader is a refusal."""
    try:
        with open(archive, "rb") as f:
            head = f.read(tarfile.BLOCKSIZE)
    except OSError as e:
        raise IntegrityError(f"{name}: cannot read it again: {e.strerror or e}", hint=DAMAGED) from None
    if head.startswith(_COMPRESSED) or _tar_header(head):
        raise _polyglot(name, "tar")
    try:
        with tarfile.open(archive, mode="r:*") as t:
            first = t.next()
    except tarfile.ReadError:
        return  # "not a tar" in every compression
    except Exception:  # noqa: BLE001 - any other failure of the tar reader: it cannot say it is no tar
        raise _polyglot(name, "tar") from None
    if first is not None:
        raise _polyglot(name, "tar")


def _tar_header(block: bytes) -> bool:
    """Whether a 512-byte block is a tar header (its checksum holds)."""
    if len(block) < tarfile.BLOCKSIZE:
        return False
    try:
        tarfile.TarInfo.frombuf(block, tarfile.ENCODING, "surrogateescape")
    except tarfile.HeaderError:
        return False
    return True


# ------------------------------------------------------------------------------------------ zip


def _zip_mtime(info: zipfile.ZipInfo) -> float:
    """The member's time: its extended timestamp (UTC) when it has one, else its DOS time read as UTC."""
    extra = info.extra
    while len(extra) >= 4:
        hid, size = struct.unpack("<HH", extra[:4])
        body = extra[4 : 4 + size]
        if hid == 0x5455 and len(body) >= 5 and body[0] & 1:
            return float(struct.unpack("<i", body[1:5])[0])
        extra = extra[4 + size :]
    try:
        return float(calendar.timegm((*info.date_time, 0, 0, 0)))
    except (ValueError, OverflowError, TypeError):
        return 315532800.0  # 1980-01-01, the first DOS time


def _zip_kind(layout: Layout, info: zipfile.ZipInfo) -> tuple[Kind, int]:
    mode = info.external_attr >> 16 if info.create_system == 3 else 0
    ftype = stat.S_IFMT(mode)
    if info.filename.endswith("/") or ftype == stat.S_IFDIR:
        return "d", mode
    if ftype == stat.S_IFLNK:
        return "l", mode
    if ftype in (0, stat.S_IFREG):
        return "f", mode
    raise layout.refuse(info.filename, "is a device, FIFO or other special file: a source holds none")


def _zip_entries(archive: Path) -> int | None:
    """How many entries a zip's end record announces (before its central directory is read), if known."""
    try:
        with open(archive, "rb") as f:
            end = zipfile._EndRecData(f)  # noqa: SLF001 - the count, before ZipFile reads every entry
        return None if end is None else int(end[zipfile._ECD_ENTRIES_TOTAL])  # noqa: SLF001
    except (AttributeError, IndexError, OSError, ValueError, TypeError, zipfile.BadZipFile):
        return None


def _unpack_zip(archive: Path, w: _Writer) -> Layout:
    layout = Layout(w.name)
    member = None
    announced = _zip_entries(archive)
    if announced is not None and announced > w.budget.limits.max_members:
        w.budget.members = announced - 1
        w.budget.member()  # over the limit: refused before the central directory is read
    try:
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                member = info.filename
                w.budget.member()
                if info.flag_bits & 0x1:
                    raise IntegrityError(
                        f"{w.name}: member {member!r} is encrypted; rvport unpacks no encrypted archive",
                        hint="use the project's unencrypted release archive",
                    )
                path = layout.path(member)
                if not path:
                    continue
                kind, mode = _zip_kind(layout, info)
                mtime = _zip_mtime(info)
                if kind == "d":
                    layout.add(member, path, "d")
                    w.directory(path, mtime)
                elif kind == "l":
                    if info.file_size > MAX_LINK:
                        raise layout.refuse(member, "is a link with a target longer than PATH_MAX")
                    target = os.fsdecode(z.read(info))
                    layout.add(member, path, "l", target)
                    w.symlink(path, target, mtime)
                else:
                    layout.add(member, path, "f")
                    with z.open(info) as data:
                        w.file(path, data, mode if mode else 0o644, mtime)
    except RvportError:
        raise
    except (
        zipfile.BadZipFile,
        zlib.error,
        EOFError,
        OSError,
        ValueError,
        NotImplementedError,
        RuntimeError,
    ) as e:
        at = f" (member {member!r})" if member is not None else ""
        raise IntegrityError(
            f"{w.name}: cannot unpack it as a zip archive{at}: {e}",
            hint="a bad CRC means damaged bytes, 'not a zip file' a file that is not what its name says: "
            + DAMAGED,
        ) from e
    w.finish()
    return layout


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


__all__ = ["archive_kind", "archive_tree", "is_zip", "tree_mismatch", "unpack"]
