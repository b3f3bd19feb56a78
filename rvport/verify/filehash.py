"""The size and sha256 of a file on disk, as every artifact result reports them."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def size_sha(path: Path) -> tuple[int | None, str | None]:
    try:
        with open(path, "rb") as f:
            return os.fstat(f.fileno()).st_size, hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None, None
