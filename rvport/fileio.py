"""Files written whole, and user-named files read with bounds.

Writing: a temporary file beside the target, then a rename, so that a failed or interrupted run never leaves a
half-written file. New files get the usual permissions, 0666 less the umask, as any program's (a temporary
file alone would be 0600).

Reading (`read_regular`, `read_json`, `read_ends`): a file a user names (provenance, plan.json, result.json, a
recipe) is read only when it is a regular file (a FIFO, a device such as /dev/zero or a socket is refused at
once, never waited on), and only up to a size cap; a JSON document deeper than a cap is refused too. Each
failure is a typed error of the caller's choice, with the file named: never a hang, an out-of-memory or a
RecursionError. A log, whose end is what matters, is read by `read_ends` instead: its first and last bytes up
to a cap each, with how many were left out between them.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from rvport.errors import RvportError, UsageError

MiB = 1024 * 1024
JSON_MAX_BYTES = 64 * MiB  # a result.json of a whole catalogue is well under 1 MiB
JSON_MAX_DEPTH = 64  # rvport's own documents nest fewer than 10 levels


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
    """A binary file to write that becomes `path` whole (flushed to disk, then renamed) when the block ends,
    and
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


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a regular file"


@contextlib.contextmanager
def _open_regular(
    path: Path, *, what: str, error: type[RvportError], hint: str | None, follow: bool = True
) -> Iterator[tuple[int, int]]:
    """(descriptor, size) of a regular file, opened without blocking (a FIFO with no writer is refused, not
    waited on); anything else, and any OSError while the block reads it, raises `error` naming the file.
    follow=False: a symbolic link is refused too."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror or e}", hint=hint) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(
                f"{what} {path} is {_kind(st.st_mode)}: only regular files are read",
                hint=hint or "name a regular file",
            )
        os.set_blocking(fd, True)
        yield fd, st.st_size
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror or e}", hint=hint) from None
    finally:
        os.close(fd)


def _pread(fd: int, n: int, offset: int) -> bytes:
    """At most n bytes from offset (fewer where the file ends), a MiB at a time."""
    chunks: list[bytes] = []
    got = 0
    while got < n:
        chunk = os.pread(fd, min(MiB, n - got), offset + got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_regular(
    path: Path,
    *,
    limit: int,
    what: str = "file",
    error: type[RvportError] = UsageError,
    hint: str | None = None,
    follow: bool = True,
) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. Anything else raises `error` naming the file
    (and `what` it should have been): a FIFO, device, socket or directory (opened without blocking, so a
    FIFO with no writer is refused, not waited on), a file over the cap, or one that cannot be read; with
    follow=False a symbolic link too."""
    with _open_regular(path, what=what, error=error, hint=hint, follow=follow) as (fd, size):
        if size > limit:
            raise error(f"{what} {path} is {size} bytes, over the cap of {limit}", hint=hint)
        data = _pread(fd, limit + 1, 0)  # a file that grows while read is still cut at the cap
        if len(data) > limit:
            raise error(f"{what} {path} is over the cap of {limit} bytes", hint=hint)
        return data


@dataclass(frozen=True, kw_only=True)
class Ends:
    """A file's first and last bytes (read_ends). When the file fits in both caps, `head` is all of it."""

    head: bytes
    tail: bytes = b""
    skipped: int = 0  # bytes between head and tail left unread: 0 when the file was read whole
    size: int = 0  # the file's size when it was opened

    @property
    def truncated(self) -> bool:
        return self.skipped > 0


def read_ends(
    path: Path,
    *,
    head: int,
    tail: int,
    what: str = "file",
    error: type[RvportError] = UsageError,
    hint: str | None = None,
    follow: bool = True,
) -> Ends:
    """A regular file whole when it holds at most head + tail bytes; else its first `head` and its last
    `tail` bytes, and how many were left out between them (read_regular's refusals, and with follow=False a
    symbolic link refused too). For logs: what ended a run is at their end."""
    with _open_regular(path, what=what, error=error, hint=hint, follow=follow) as (fd, size):
        if size <= head + tail:  # a file that grows while read is read as it was
            return Ends(head=_pread(fd, size, 0), size=size)
        start = size - tail
        return Ends(head=_pread(fd, head, 0), tail=_pread(fd, tail, start), skipped=start - head, size=size)


def json_depth_over(doc: object, limit: int) -> bool:
    """Whether a parsed JSON value nests deeper than `limit` (walked without recursion)."""
    stack: list[tuple[object, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in value)
    return False


def read_json(
    path: Path,
    *,
    what: str = "JSON document",
    limit: int = JSON_MAX_BYTES,
    max_depth: int = JSON_MAX_DEPTH,
    error: type[RvportError] = UsageError,
    hint: str | None = None,
    max_containers: int | None = None,
) -> object:
    """A JSON value from a regular file (read_regular's bounds), in UTF-8, nested at most `max_depth` deep.
    Bad JSON raises `error` with the file and line; so does nesting too deep for the parser or the cap.
    max_containers: at most this many arrays and objects, counted by their opening brackets before parsing
    (each costs the parser tens of bytes: 16 MiB of `[]` would take gigabytes)."""
    data = read_regular(path, limit=limit, what=what, error=error, hint=hint)
    if max_containers is not None and data.count(b"[") + data.count(b"{") > max_containers:
        raise error(
            f"{path}: {what} holds more than {max_containers} JSON arrays and objects, over the cap",
            hint=hint,
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{path}: {what} is not UTF-8 (byte {e.start})", hint=hint) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{path}:{e.lineno}: not JSON: {e.msg}", hint=hint) from None
    except RecursionError:
        doc = None
        deep = True
    else:
        deep = json_depth_over(doc, max_depth)
    if deep:
        raise error(f"{path}: {what} nests deeper than {max_depth} levels", hint=hint)
    return doc
