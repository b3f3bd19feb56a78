"""Writing files whole: a temporary file beside the target, then a rename, so that a failed or interrupted run
never leaves a half-written file. New files get the usual permissions, 0666 less the umask, as any program's
(a temporary file alone would be 0600)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


def umask() -> int:
    """The process's umask, read without changing it where the kernel says it (Linux >= 4.7)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # elsewhere: set and restore it (process-wide for an instant)
    os.umask(old)
    return old


def new_file_mode() -> int:
    return 0o666 & ~umask()


@contextlib.contextmanager
def atomic_file(path: Path, *, mode: int | None = None) -> Iterator[BinaryIO]:
    """A binary file to write that becomes `path` whole (flushed to disk, then renamed) when the block ends, and
    leaves nothing when it raises. mode: the file's permissions (default: 0666 less the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), new_file_mode() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write data to path whole. mode: the file's permissions (default: 0666 less the umask)."""
    with atomic_file(path, mode=mode) as f:
        f.write(data)


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)
