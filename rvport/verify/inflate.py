"""The raw-deflate inflater and CRC-32 that wheel members are read with: the standard library's zlib (one
place, so members.py names neither zlib's functions nor its errors directly)."""

from __future__ import annotations

import zlib
from types import ModuleType

BACKEND: ModuleType = zlib   # decompressobj(wbits) and crc32(data, value)
ERRORS: tuple[type[Exception], ...] = (zlib.error,)
