"""The raw-deflate inflater and CRC-32 that wheel members are read with: ISA-L's (the optional `isal`
package) when it is installed, about twice as fast as zlib on the same bytes, else the standard library's
zlib. Both give the same bytes and CRCs; RVPORT_VERIFY_INFLATE=zlib uses zlib even when isal is there."""

from __future__ import annotations

import importlib
import os
import zlib
from types import ModuleType

ENV = "RVPORT_VERIFY_INFLATE"


def _isal() -> ModuleType | None:
    try:
        return importlib.import_module("isal.isal_zlib")
    except ImportError:   # optional: zlib does the same work, slower
        return None


_ISAL = _isal()
BACKEND: ModuleType = (_ISAL if _ISAL is not None and os.environ.get(ENV, "").strip().lower() != "zlib"
                       else zlib)   # has decompressobj(wbits) and crc32(data, value), as zlib does
ERRORS: tuple[type[Exception], ...] = (zlib.error, *((_ISAL.error,) if _ISAL is not None else ()))
