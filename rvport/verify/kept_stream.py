"""A read-only, seekable binary stream over the bytes kept of a member, without copying them: all of it (one
buffer), or some ranges of it (elf_ranges.py chooses them for a big ELF file). A read outside what was kept
raises NotKept, so that the caller reads the member again, whole, instead of judging it on missing bytes."""

from __future__ import annotations

import io
from bisect import bisect_right


class NotKept(LookupError):
    """A read of bytes that were not kept."""


class SizedReader(io.RawIOBase):
    """A read-only, seekable binary stream of `_size` bytes, its position in `_pos`; subclasses give
    `readinto`."""

    _size: int
    _pos: int

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos


class BufferFile(SizedReader):
    def __init__(
        self,
        buffer: bytes | bytearray,
        *,
        pieces: list[tuple[int, bytes | bytearray]] | None = None,
        size: int | None = None,
    ) -> None:
        """buffer: the member's first bytes (all of them when size is None); pieces: (offset, bytes) further
        on, sorted and not overlapping; size: the member's size when only those were kept."""
        super().__init__()
        self._starts = [0] + [at for at, _ in pieces or []]
        self._views = [memoryview(buffer).cast("B")] + [memoryview(b).cast("B") for _, b in pieces or []]
        self._size = len(buffer) if size is None else size
        self.complete = size is None or (len(buffer) == size and not pieces)
        self._pos = 0

    @property
    def size(self) -> int:
        return self._size

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]  # any writable buffer
        out = memoryview(buffer).cast("B")
        n = max(0, min(len(out), self._size - self._pos))
        if n == 0:
            return 0
        i = bisect_right(self._starts, self._pos) - 1
        at = self._pos - self._starts[i]
        view = self._views[i]
        if at + n > len(view):
            raise NotKept(f"bytes {self._pos}..{self._pos + n} of {self._size} were not kept")
        out[:n] = view[at : at + n]
        self._pos += n
        return n

    def getvalue(self) -> bytes:
        """All the bytes, as one bytes object (for readers that want one, e.g. ar archives)."""
        if not self.complete:
            raise NotKept("only parts of the member were kept")
        return self._views[0].tobytes()
