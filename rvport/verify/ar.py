"""GNU (and BSD) ar archives, parsed here: the members of a static library, by name."""

from __future__ import annotations

from collections.abc import Iterator

AR_MAGIC = b"!<arch>\n"
AR_THIN_MAGIC = b"!<thin>\n"
AR_HEADER = 60


class ArchiveError(Exception):
    """An ar archive that cannot be read."""


def is_ar(head: bytes) -> bool:
    return head[:8] in (AR_MAGIC, AR_THIN_MAGIC)


def iter_ar_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    """Yield (name, bytes) of each member of a GNU (or BSD) ar archive. The symbol tables (/ and /SYM64/)
    and the GNU long-name table (//) are read or skipped, not yielded."""
    if data[:8] == AR_THIN_MAGIC:
        raise ArchiveError("thin archive: its members live outside it and are not verified")
    if data[:8] != AR_MAGIC:
        raise ArchiveError("not an ar archive")
    pos = 8
    longnames = b""
    view = memoryview(data)
    while pos < len(data):
        if data[pos : pos + 1] == b"\n":  # tolerate extra padding
            pos += 1
            continue
        hdr = data[pos : pos + AR_HEADER]
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
        if end > len(data):
            raise ArchiveError(
                f"member {raw_name!r} at offset {pos} is truncated ({len(data) - start} of {size} bytes)"
            )
        body = view[start:end]
        pos = end + (size & 1)
        if raw_name in ("/", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED"):
            continue
        if raw_name == "//":
            longnames = bytes(body)
            continue
        if raw_name.startswith("#1/"):  # BSD: name stored at the start of the body
            if not raw_name[3:].isdigit() or int(raw_name[3:]) > size:
                raise ArchiveError(f"bad BSD member name {raw_name!r} at offset {start - AR_HEADER}")
            n = int(raw_name[3:])
            name = bytes(body[:n]).rstrip(b"\0").decode("utf-8", "replace")
            yield name, bytes(body[n:])
            continue
        if raw_name.startswith("/") and raw_name[1:].isdigit():  # GNU: offset into the // table
            off = int(raw_name[1:])
            if off >= len(longnames):
                raise ArchiveError(f"long name offset {off} beyond the name table")
            stop = longnames.find(b"/\n", off)
            name = longnames[off : stop if stop >= 0 else None].decode("utf-8", "replace")
        else:
            name = raw_name.removesuffix("/")
        yield name, bytes(body)
