"""A read-only, seekable binary stream over a buffer (bytes or bytearray) without copying it, so that a big
member inflated into a bytearray is parsed where it lies (io.BytesIO would copy a bytearray first)."""

from __future__ import annotations

import io


class BufferFile(io.RawIOBase):
    def __init__(self, buffer: bytes | bytearray) -> None:
        super().__init__()
        self._view = memoryview(buffer).cast("B")
        self._pos = 0

    @property
    def size(self) -> int:
        return len(self._view)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]  # any writable buffer
        out = memoryview(buffer).cast("B")
        n = max(0, min(len(out), len(self._view) - self._pos))
        out[:n] = self._view[self._pos:self._pos + n]
        self._pos += n
        return n

    def getvalue(self) -> bytes:
        """All the bytes, as one bytes object (for readers that want one, e.g. ar archives)."""
        return self._view.tobytes()
