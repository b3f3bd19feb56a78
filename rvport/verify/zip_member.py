"""Read one zip member once: inflate it in large chunks straight from the file (os.pread: no shared file
position, so threads read members side by side), check its CRC-32 as zipfile does, hash it as it comes (for
its RECORD entry), and keep its bytes only when it starts like an ELF file or ar archive (of a big ELF file,
the ranges elf_ranges.py picks)."""

from __future__ import annotations

import bz2  # noqa: F401  - zipfile needs it for ZIP_BZIP2 members
import hashlib
import lzma
import os
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rvport.verify import elf_ranges as keeping
from rvport.verify.elf_ranges import Keep
from rvport.verify.kept_stream import BufferFile
from rvport.verify.limits import DEFAULT_LIMITS, Limits, OverLimit
from rvport.verify.pool import read_ahead, thread_count
from rvport.verify.record import record_digest

READ_SIZE = 1 << 20  # compressed bytes read at a time
INFLATE_SIZE = 8 << 20  # most bytes inflated per call: bounds memory on very compressible data
MAGIC = 8  # first bytes that decide what is kept of a member (ELF or ar magic)
AHEAD_MIN = 8 << 20  # members this big (compressed) are inflated on a helper thread, hashed on this one

# What zipfile (and the decompressors under it) raise on a corrupt, truncated, encrypted or unsupported zip.
ZIP_ERRORS: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    zlib.error,
    lzma.LZMAError,
    EOFError,
    OSError,
    NotImplementedError,
    RuntimeError,
    ValueError,
)

_LOCAL_HEADER = struct.Struct(
    "<4sHHHHHIIIHH"
)  # PK\3\4, versions, flags, method, time, date, crc, sizes, lengths
_LOCAL_MAGIC = b"PK\x03\x04"
_UTF8_NAME = 0x800
UNREADABLE_FLAGS = {
    0x1: "encrypted, password required",
    0x20: "compressed patched data (flag bit 5)",
    0x40: "strong encryption (flag bit 6)",
}


class MemberError(Exception):
    """A member that cannot be read: corrupt, truncated, encrypted, or in an unsupported format."""


@dataclass(frozen=True, kw_only=True)
class Member:
    size: int  # bytes inflated
    digest: str | None  # RECORD-style digest with the algorithm asked for, None when none was
    content: BufferFile | None  # the bytes kept, as keep() said


def read_member(
    path: Path,
    fd: int,
    info: zipfile.ZipInfo,
    algo: str | None,
    keep: Callable[[bytes], Keep],
    limits: Limits = DEFAULT_LIMITS,
) -> Member:
    """Inflate info's member of the zip open as fd (path: for compression methods zipfile reads itself).
    algo: hashlib name of the digest to compute; keep(first MAGIC bytes): which of its bytes to keep.
    Never inflates more than the zip directory's size for it; raises OverLimit when that is over
    member_bytes, or when what keep() asks for would hold more than kept_bytes in memory."""
    if info.file_size > limits.member_bytes:
        raise OverLimit("bytes inflated", info.file_size, "member_bytes", limits.member_bytes)
    try:
        return _read(path, fd, info, algo, keep, limits)
    except MemberError:
        raise
    except ZIP_ERRORS as e:
        raise MemberError(str(e) or type(e).__name__) from e


def _read(
    path: Path,
    fd: int,
    info: zipfile.ZipInfo,
    algo: str | None,
    keep: Callable[[bytes], Keep],
    limits: Limits,
) -> Member:
    for bit, why in UNREADABLE_FLAGS.items():
        if info.flag_bits & bit:
            raise MemberError(why)
    hasher = hashlib.new(algo) if algo else None
    crc = size = 0
    kept = _Kept(keep, info.file_size, limits)
    chunks = _inflated(path, fd, info)
    if info.compress_size >= AHEAD_MIN and thread_count() > 1:  # inflate on a helper thread, hash on this one
        chunks = read_ahead(chunks)
    for out in chunks:
        if (
            size + len(out) > info.file_size
        ):  # as zipfile: never more than the directory's size (the CRC tells)
            out = out[: info.file_size - size]
        crc = zlib.crc32(out, crc)
        size += len(out)
        if hasher is not None:
            hasher.update(out)
        kept.add(out)
        if size >= info.file_size:
            break
    if crc != info.CRC:
        raise MemberError(f"Bad CRC-32 for file {info.filename!r}")
    return Member(size=size, digest=record_digest(hasher.digest()) if hasher else None, content=kept.file())


class _Kept:
    """The bytes kept of a member as they are inflated: none, all, or (elf_ranges.py) the ranges of a big ELF
    file."""

    def __init__(self, keep: Callable[[bytes], Keep], size: int, limits: Limits) -> None:
        self._keep = keep
        self._limits = limits
        self._size = size  # the zip directory's: no more is ever inflated
        self._mode: Keep | None = None  # until the first MAGIC bytes tell
        self._head = bytearray()  # everything, or the first keeping.HEAD bytes
        self._ranges: list[tuple[int, int]] | None = None
        self._pieces: list[tuple[int, bytearray]] = []
        self._pos = 0

    def add(self, out: bytes) -> None:
        start, self._pos = self._pos, self._pos + len(out)
        if self._mode is None:
            self._head += out
            if len(self._head) >= MAGIC:
                self._decide()
            return
        if self._mode is Keep.WHOLE:
            self._head += out
        elif self._mode is Keep.ELF_RANGES:
            if start < keeping.HEAD:
                self._head += out[: keeping.HEAD - start]
                if self._ranges is None and len(self._head) >= keeping.HEAD:
                    self._ranges = keeping.ranges_beyond_head(self._head, self._size, self._limits)
            for a, b in self._ranges or ():
                lo, hi = max(a, start), min(b, self._pos)
                if lo >= hi:
                    continue
                piece = out[lo - start : hi - start]
                if self._pieces and self._pieces[-1][0] + len(self._pieces[-1][1]) == lo:
                    self._pieces[-1][1].extend(piece)
                else:
                    self._pieces.append((lo, bytearray(piece)))

    def _decide(self) -> None:
        self._mode = self._keep(bytes(self._head[:MAGIC]))
        if self._mode is Keep.ELF_RANGES and self._size <= min(2 * keeping.HEAD, self._limits.kept_bytes):
            self._mode = Keep.WHOLE  # small enough to keep whole
        if self._mode is Keep.WHOLE and self._size > self._limits.kept_bytes:
            raise OverLimit(
                "bytes of a member to hold whole in memory", self._size, "kept_bytes", self._limits.kept_bytes
            )
        if self._mode is Keep.NOTHING:
            self._head = bytearray()
        elif (
            self._mode is Keep.ELF_RANGES and len(self._head) > keeping.HEAD
        ):  # a first chunk past keeping.HEAD
            head, self._head, self._pos = self._head, bytearray(), 0
            self.add(bytes(head))

    def file(self) -> BufferFile | None:
        if self._mode is None:
            self._decide()
        if self._mode is Keep.WHOLE:
            return BufferFile(self._head)
        if self._mode is Keep.ELF_RANGES:
            return BufferFile(self._head, pieces=list(self._pieces), size=self._pos)
        return None


def _inflated(path: Path, fd: int, info: zipfile.ZipInfo) -> Iterator[bytes]:
    start = _data_offset(fd, info)
    if info.compress_type == zipfile.ZIP_STORED:
        yield from _raw(fd, start, info.compress_size)
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        yield from _inflate(_raw(fd, start, info.compress_size))
    else:  # bzip2, lzma, ...: rare in wheels; zipfile knows them (and raises on the ones it does not)
        with zipfile.ZipFile(path) as zf, zf.open(info) as f:
            yield from iter(lambda: f.read(INFLATE_SIZE), b"")


def _data_offset(fd: int, info: zipfile.ZipInfo) -> int:
    """Where the member's data starts, after its local header, checked as zipfile checks it."""
    raw = os.pread(fd, _LOCAL_HEADER.size, info.header_offset)
    if len(raw) != _LOCAL_HEADER.size:
        raise MemberError("Truncated file header")
    magic, _v, flags, _m, _t, _d, _crc, _cs, _us, name_len, extra_len = _LOCAL_HEADER.unpack(raw)
    if magic != _LOCAL_MAGIC:
        raise MemberError("Bad magic number for file header")
    name = os.pread(fd, name_len, info.header_offset + _LOCAL_HEADER.size)
    try:
        local_name = name.decode("utf-8" if flags & _UTF8_NAME else "cp437")
    except UnicodeDecodeError as e:
        raise MemberError(f"undecodable file name in its local header: {e}") from e
    if local_name != info.orig_filename:
        raise MemberError(f"File name in directory {info.orig_filename!r} and header {name!r} differ.")
    return info.header_offset + _LOCAL_HEADER.size + name_len + extra_len


def _raw(fd: int, start: int, length: int) -> Iterator[bytes]:
    pos, end = start, start + length
    while pos < end:
        chunk = os.pread(fd, min(READ_SIZE, end - pos), pos)
        if not chunk:
            raise MemberError(
                f"truncated: the file ends inside the member's data ({pos - start} of {length} bytes)"
            )
        pos += len(chunk)
        yield chunk


def _inflate(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Raw deflate, as zipfile inflates it: up to the stream's end marker, or whatever a stream cut short by
    the member's compressed size still gives (its CRC then fails)."""
    d = zlib.decompressobj(-zlib.MAX_WBITS)
    for chunk in chunks:
        out = d.decompress(chunk, INFLATE_SIZE)
        while True:
            if out:
                yield out
            if not d.unconsumed_tail:
                break
            out = d.decompress(d.unconsumed_tail, INFLATE_SIZE)
        if d.eof:
            return
    yield d.flush()
