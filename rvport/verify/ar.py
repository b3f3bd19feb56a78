"""GNU (and BSD) ar archives, parsed here: the members of a static library, by name."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from rvport.verify.kept_stream import SizedReader
from rvport.verify.limits import DEFAULT_LIMITS, Limits, check

AR_MAGIC = b"!<arch>\n"
AR_THIN_MAGIC = b"!<thin>\n"
AR_HEADER = 60


class ArchiveError(Exception):
    """An ar archive that cannot be read."""


def is_ar(head: bytes) -> bool:
    return head[:8] in (AR_MAGIC, AR_THIN_MAGIC)


@dataclass(frozen=True, kw_only=True)
class ArEntry:
    """One member of an ar archive: its name, and where its bytes lie in the archive."""

    name: str
    offset: int
    size: int


class Window(SizedReader):
    """A read-only, seekable view of `size` bytes at `offset` of a seekable stream: an archive member read
    where it lies, never copied whole."""

    def __init__(self, stream: BinaryIO, offset: int, size: int) -> None:
        super().__init__()
        self._stream, self._offset, self._size, self._pos = stream, offset, size, 0

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]  # any writable buffer
        out = memoryview(buffer).cast("B")
        n = max(0, min(len(out), self._size - self._pos))
        if n == 0:
            return 0
        self._stream.seek(self._offset + self._pos)
        got = self._stream.readinto(out[:n])  # type: ignore[attr-defined]
        self._pos += got or 0
        return got or 0


def _read_exact(stream: BinaryIO, offset: int, size: int) -> bytes:
    stream.seek(offset)
    data = stream.read(size)
    if len(data) != size:
        raise ArchiveError(f"truncated at offset {offset}")
    return data


def iter_ar_entries(stream: BinaryIO, limits: Limits = DEFAULT_LIMITS) -> Iterator[ArEntry]:
    """Each member of a GNU (or BSD) ar archive in a seekable stream, read header by header: a member's bytes
    are never read here (Window reads them where they lie), so an archive of any size takes no memory. The
    symbol tables (/ and /SYM64/) are skipped and the GNU long-name table (//) read (at most table_bytes),
    not yielded. Raises ArchiveError on a corrupt archive, OverLimit past ar_members members."""
    total = stream.seek(0, io.SEEK_END)
    magic = _read_exact(stream, 0, 8) if total >= 8 else b""
    if magic == AR_THIN_MAGIC:
        raise ArchiveError("thin archive: its members live outside it and are not verified")
    if magic != AR_MAGIC:
        raise ArchiveError("not an ar archive")
    pos = 8
    longnames = b""
    count = 0
    while pos < total:
        hdr = _read_exact(stream, pos, min(AR_HEADER, total - pos))
        if hdr[:1] == b"\n":  # tolerate extra padding
            pos += 1
            continue
        if len(hdr) < AR_HEADER:
            raise ArchiveError(f"truncated member header at offset {pos}")
        if hdr[58:60] != b"`\n":
            raise ArchiveError(f"bad member header at offset {pos}")
        raw_name = hdr[0:16].decode("ascii", "replace").rstrip(" ")
        size_field = hdr[48:58].strip() or b"0"
        if not size_field.isdigit():  # a negative size would walk backwards, forever
            raise ArchiveError(f"bad member size at offset {pos}")
        size = int(size_field)
        start = pos + AR_HEADER
        end = start + size
        if end > total:
            raise ArchiveError(
                f"member {raw_name!r} at offset {pos} is truncated ({total - start} of {size} bytes)"
            )
        pos = end + (size & 1)
        if raw_name in ("/", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED"):
            continue
        if raw_name == "//":
            check("bytes of the long-name table", size, "table_bytes", limits.table_bytes)
            longnames = _read_exact(stream, start, size)
            continue
        count += 1
        check("archive members", count, "ar_members", limits.ar_members)
        if raw_name.startswith("#1/"):  # BSD: name stored at the start of the body
            if not raw_name[3:].isdigit() or int(raw_name[3:]) > min(size, 4096):
                raise ArchiveError(f"bad BSD member name {raw_name!r} at offset {start - AR_HEADER}")
            n = int(raw_name[3:])
            name = _read_exact(stream, start, n).rstrip(b"\0").decode("utf-8", "replace")
            yield ArEntry(name=name, offset=start + n, size=size - n)
            continue
        if raw_name.startswith("/") and raw_name[1:].isdigit():  # GNU: offset into the // table
            off = int(raw_name[1:])
            if off >= len(longnames):
                raise ArchiveError(f"long name offset {off} beyond the name table")
            stop = longnames.find(b"/\n", off, off + 4096)
            name = longnames[off : stop if stop >= 0 else off + 4096].decode("utf-8", "replace")
        else:
            name = raw_name.removesuffix("/")
        yield ArEntry(name=name, offset=start, size=size)


def iter_ar_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    """Yield (name, bytes) of each member of a GNU (or BSD) ar archive held in memory (iter_ar_entries)."""
    stream = io.BytesIO(data)
    for e in iter_ar_entries(stream, Limits(table_bytes=len(data), ar_members=len(data))):
        yield e.name, data[e.offset : e.offset + e.size]
