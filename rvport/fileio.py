"""Files written whole, and user-named files read with bounds: the one door to the files rvport reads.

Writing: a temporary file beside the target, then a rename, so that a failed or interrupted run never leaves a
half-written file. New files get the usual permissions, 0666 less the umask, as any program's (a temporary
file alone would be 0600).

Reading (`read_regular`, `read_json`, `read_ends`): a file read on a user's behalf (a recipe and its side
files, a lock, a policy, a base or toolchain spec, provenance, plan.json, result.json, a wheelhouse
manifest, a mirror file) is read only when it is a regular file (a FIFO, a device such as /dev/zero or a
socket is refused at once, never waited on), and only up to a size cap; a JSON document deeper than a cap,
or with an integer longer than `bounds.INT_DIGITS`, is refused too. A symbolic link is followed only where it
stays inside the directory the file belongs to (`within`: by default the directory that holds it), checked
before the file is opened and again on the descriptor opened; `follow=False` refuses every link. A refused
file is never read, so no error can show its content. Each failure is a typed error of the caller's choice,
with the file named: never a hang, an out-of-memory or a RecursionError. A log, whose end is what matters, is
read by `read_ends` instead: its first and last bytes up to a cap each, with how many were left out between
them. Directories named by a user (a recipe, lock, base or toolchain directory) go through `user_dir`: one
that is missing, not a directory, or a link leading out of the directory that holds it is an error.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from rvport import bounds
from rvport.errors import RvportError, UsageError

MiB = 1024 * 1024
JSON_MAX_BYTES = 64 * MiB  # a result.json of a whole catalogue is well under 1 MiB
JSON_MAX_DEPTH = 64  # rvport's own documents nest fewer than 10 levels


@contextlib.contextmanager
def held_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on the file `path` (made when missing, never followed as a link), held for the block:
    the processes and threads that take it run the block one at a time."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


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


LINK_HINT = (
    "a file rvport reads for you must lie in the directory it belongs to: copy it there, or name the file "
    "itself, not a link to it"
)


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _real(path: Path | str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):  # realpath(strict=False) raises on a NUL only
        return ""


def link_out(path: Path, within: Path | None = None) -> bool:
    """Whether `path`, its links followed as the kernel would, leads out of `within` (default: the directory
    that holds it). A path that is no link and lies in its directory is never out."""
    root = _real(Path(path).parent if within is None else within)
    real = _real(path)
    return not (root and real and _inside(real, root))


def _refuse_link(path: Path, *, what: str, error: type[RvportError], hint: str | None, within: Path) -> None:
    where = "the directory that holds it" if within == path.parent else str(within)
    raise error(
        f"{what} {path} is a symbolic link leading out of {where}: not followed, not read",
        hint=hint or LINK_HINT,
    )


def _opened_path(fd: int) -> str | None:
    """The path the kernel opened for a descriptor (Linux: /proc/self/fd), None where it cannot say."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


@contextlib.contextmanager
def _open_regular(
    path: Path,
    *,
    what: str,
    error: type[RvportError],
    hint: str | None,
    follow: bool = True,
    within: Path | None = None,
) -> Iterator[tuple[int, int]]:
    """(descriptor, size) of a regular file, opened without blocking (a FIFO with no writer is refused, not
    waited on); anything else, and any OSError while the block reads it, raises `error` naming the file.
    A symbolic link is followed only where it stays inside `within` (default: the directory that holds the
    path), checked before the file is opened and again on the descriptor opened (a link swapped in between
    is caught); follow=False refuses every link."""
    path = Path(path)
    root = path.parent if within is None else Path(within)
    if not follow and os.path.islink(path):
        raise error(f"{what} {path} is a symbolic link: not followed, not read", hint=hint or LINK_HINT)
    if follow and os.path.lexists(path) and link_out(path, root):
        _refuse_link(path, what=what, error=error, hint=hint, within=root)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror or e}", hint=hint) from None
    try:
        opened = _opened_path(fd) if follow else None
        if opened is not None and opened.startswith(os.sep) and not _inside(opened, _real(root)):
            _refuse_link(path, what=what, error=error, hint=hint, within=root)
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


def user_dir(
    path: Path,
    *,
    what: str = "directory",
    error: type[RvportError] = UsageError,
    hint: str | None = None,
    within: Path | None = None,
) -> Path:
    """`path` when it is a directory rvport may read: it exists, is a directory, and is not a symbolic link
    leading out of `within` (default: the directory that holds it). Anything else raises `error` naming it:
    a missing directory is never taken for an empty one."""
    path = Path(path)
    root = path.parent if within is None else Path(within)
    if os.path.lexists(path) and link_out(path, root):
        _refuse_link(path, what=what, error=error, hint=hint, within=root)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{what} {path} not found", hint=hint) from None
    except OSError as e:
        raise error(f"{what} {path} cannot be read: {e.strerror or e}", hint=hint) from None
    if not stat.S_ISDIR(st.st_mode):
        kind = "a regular file" if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)
        raise error(f"{what} {path} is {kind}, not a directory", hint=hint)
    return path


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
    within: Path | None = None,
) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. Anything else raises `error` naming the file
    (and `what` it should have been): a FIFO, device, socket or directory (opened without blocking, so a
    FIFO with no writer is refused, not waited on), a file over the cap, one that cannot be read, or a
    symbolic link leading out of `within` (default: the directory that holds it; follow=False: any link)."""
    with _open_regular(path, what=what, error=error, hint=hint, follow=follow, within=within) as (fd, size):
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
    within: Path | None = None,
) -> Ends:
    """A regular file whole when it holds at most head + tail bytes; else its first `head` and its last
    `tail` bytes, and how many were left out between them (read_regular's refusals, and with follow=False a
    symbolic link refused too). For logs: what ended a run is at their end."""
    with _open_regular(path, what=what, error=error, hint=hint, follow=follow, within=within) as (fd, size):
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
    within: Path | None = None,
) -> object:
    """A JSON value from a regular file (read_regular's bounds, `within` as there), in UTF-8, nested at most
    `max_depth` deep, every integer of at most bounds.INT_DIGITS digits. Bad JSON raises `error` with the
    file and line; so do an integer too long and nesting too deep for the parser or the cap.
    max_containers: at most this many arrays and objects, counted by their opening brackets before parsing
    (each costs the parser tens of bytes: 16 MiB of `[]` would take gigabytes)."""
    data = read_regular(path, limit=limit, what=what, error=error, hint=hint, within=within)
    if max_containers is not None and data.count(b"[") + data.count(b"{") > max_containers:
        raise error(
            f"{path}: {what} holds more than {max_containers} JSON arrays and objects, over the cap",
            hint=hint,
        )
    return parse_json(data, where=str(path), what=what, max_depth=max_depth, error=error, hint=hint)


def parse_json(
    data: bytes | str,
    *,
    where: str,
    what: str = "JSON document",
    max_depth: int = JSON_MAX_DEPTH,
    error: type[RvportError] = UsageError,
    hint: str | None = None,
) -> object:
    """A JSON value from bytes already read within a cap (`where` names them in errors): read_json's rules."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as e:
        raise error(f"{where}: {what} is not UTF-8 (byte {e.start})", hint=hint) from None
    try:
        doc = bounds.json_loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{where}:{e.lineno}: not JSON: {e.msg}", hint=hint) from None
    except bounds.NumberTooLong as e:
        raise error(
            f"{where}:{e.line}: {what} holds an integer of more than {bounds.INT_DIGITS} digits (column "
            f"{e.column}): not read",
            hint=hint or "no document rvport reads holds such a number: make the file again",
        ) from None
    except RecursionError:
        doc = None
        deep = True
    else:
        deep = json_depth_over(doc, max_depth)
    if deep:
        raise error(f"{where}: {what} nests deeper than {max_depth} levels", hint=hint)
    return doc
