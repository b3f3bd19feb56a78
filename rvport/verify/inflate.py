"""The raw-deflate inflater and CRC-32 that wheel members are read with: ISA-L's (the optional `isal`
package) when it is installed, about twice as fast as zlib on the same bytes, else the standard library's
zlib. Both give the same bytes and CRCs; RVPORT_VERIFY_INFLATE=zlib uses zlib even when isal is there."""

from __future__ import annotations

import os
import zlib
from types import ModuleType

ENV = "RVPORT_VERIFY_INFLATE"

try:
    from isal import isal_zlib as _isal
except ImportError:   # optional: zlib does the same work, slower
    _isal = None


def _choose() -> ModuleType:
    if _isal is not None and os.environ.get(ENV, "").strip().lower() != "zlib":
        return _isal
    return zlib


BACKEND: ModuleType = _choose()   # has decompressobj(wbits) and crc32(data, value), as zlib does
ERRORS: tuple[type[Exception], ...] = (zlib.error,) + ((_isal.error,) if _isal is not None else ())
