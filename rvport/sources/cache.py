"""The content-addressed cache: blobs by SHA256, refs for unpinned sources, prepared trees; locks and atomic
writes.

Layout (see docs/sources.md):

    <root>/sha256/<hex>            a verified download, named by its digest
    <root>/refs/<key>.json         unpinned sources: origin -> digest recorded on the first verified fetch
    <root>/trees/<key>/            a prepared source tree (unpacked, patched, vendored)
    <root>/trees/<key>.json        how that tree was made (sources, digests, where each came from)
    <root>/locks/<name>.lock       fcntl.flock guards, one per digest or key
    <root>/tmp/                    downloads in progress; never read as cache entries
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rvport.catalogue.model import Source
from rvport.errors import HostNotReady, IntegrityError, RvportError
from rvport.fileio import atomic_file, atomic_write_text, read_json

HEX64 = re.compile(r"^[0-9a-f]{64}\Z")
CHUNK = 1 << 16


def default_cache_dir(env: dict[str, str] | None = None) -> Path:
    """$XDG_CACHE_HOME/rvport, else ~/.cache/rvport (the command line's --cache-dir or RVPORT_CACHE_DIR, when
    given, is passed as the cache directory instead)."""
    env = dict(os.environ) if env is None else env
    xdg = env.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "rvport"
    return Path.home() / ".cache" / "rvport"


def hash_file(path: Path, copy_to: Path | None = None) -> tuple[str, int]:
    """The sha256 and size of a file, read once; copied to `copy_to` on the way when given."""
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f, open(copy_to, "wb") if copy_to else contextlib.nullcontext() as out:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            if out is not None:
                out.write(chunk)
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def sha256_file(path: Path) -> str:
    return hash_file(path)[0]


NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def disk_error(e: OSError, where: Path, doing: str) -> HostNotReady:
    """An OSError while writing into `where` (a full disk, a quota, a read-only file system): exit 6."""
    if e.errno in NO_SPACE:
        return HostNotReady(
            f"no space left on {where} while {doing}; nothing half-written was kept",
            hint="free space there, or put the cache on a bigger disk (--cache-dir DIR or RVPORT_CACHE_DIR)",
        )
    return HostNotReady(
        f"cannot write into {where} while {doing}: {e.strerror or e}",
        hint="check the directory's permissions and file system (--cache-dir DIR or RVPORT_CACHE_DIR)",
    )


class CorruptEntry(IntegrityError):
    """A cache entry whose bytes are not what its name (their sha256) says.

    Raised by whoever read it (a check, an unpacking, a copy into a mirror); the fetcher then removes the
    entry and fetches the source again (`Fetcher.refetch`), or, when it cannot, reports this error (exit code
    4).
    """

    def __init__(self, path: Path, actual: str, *, inode: int | None = None):
        super().__init__(
            f"cache entry {path} is corrupt: its sha256 is {actual}, not the {path.name} its name says",
            hint="it is removed and fetched again; if this repeats, check the disk",
        )
        self.path = path
        self.actual = actual
        self.inode = inode


class HashingReader(io.RawIOBase):
    """A read-only stream over a file that hashes every byte read; `verify()` reads what is left and
    checks."""

    def __init__(self, f: IO[bytes]):
        super().__init__()
        self._f = f
        self._h = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def, override]
        n = self._f.readinto(b) or 0
        if n:
            self._h.update(memoryview(b)[:n])
            self.size += n
        return n

    def drain(self) -> str:
        """Read to the end (archive readers may stop before it) and return the hex digest of every byte."""
        while self.read(CHUNK):
            pass
        return self._h.hexdigest()


@contextlib.contextmanager
def open_blob(path: Path) -> Iterator[HashingReader]:
    """Read a cache entry as a stream, checking on the way that its bytes are what its name says.

    The check happens when the block ends without an error: whatever the block did not read is read then, so
    it costs no second pass over the file. A mismatch raises CorruptEntry (also when the block itself failed,
    e.g. because the corrupt bytes did not unpack: the corruption is the cause worth reporting).
    """
    with open(path, "rb") as f:
        inode = os.fstat(f.fileno()).st_ino
        reader = HashingReader(f)
        try:
            yield reader
        except Exception:
            actual = reader.drain()
            if actual != path.name:
                raise CorruptEntry(path, actual, inode=inode) from None
            raise
        actual = reader.drain()
        if actual != path.name:
            raise CorruptEntry(path, actual, inode=inode)


def origin_key(source: Source) -> str:
    """A stable key for a source that has no digest yet: the digest of its origin."""
    return hashlib.sha256(source.origin.encode()).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Cache:
    root: Path

    def blob(self, sha256: str) -> Path:
        if not HEX64.match(sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256!r}")
        return self.root / "sha256" / sha256

    def ref_path(self, source: Source) -> Path:
        return self.root / "refs" / f"{origin_key(source)}.json"

    def read_ref(self, source: Source) -> str | None:
        """The archive digest recorded for a source without an archive pin, if its blob is still present.

        For a source pinned by its tree digest the ref must name that same tree (it was written only after the
        archive's tree matched it), so a changed tree pin never reuses an archive checked against the old one.
        """
        try:
            doc = read_json(self.ref_path(source), what="cache record")
        except RvportError:
            return None
        if not isinstance(doc, dict):
            return None
        digest = doc.get("sha256", "")
        if doc.get("origin") != source.origin or not HEX64.match(digest) or not self.blob(digest).is_file():
            return None
        if source.tree and doc.get("tree") != source.tree:
            return None
        return digest

    def write_ref(self, source: Source, sha256: str, *, date: str, tree: str | None = None) -> None:
        doc = {"origin": source.origin, "sha256": sha256, "recorded": date}
        if tree:
            doc["tree"] = tree
        atomic_write_text(self.ref_path(source), json.dumps(doc, sort_keys=True, indent=2) + "\n")

    def lookup(self, source: Source) -> Path | None:
        """The cached blob for a source (by its pin, else by its recorded ref), or None."""
        digest = source.sha256 or self.read_ref(source)
        if digest and self.blob(digest).is_file():
            return self.blob(digest)
        return None

    def discard(self, err: CorruptEntry) -> bool:
        """Remove a corrupt entry, unless it was replaced meanwhile (another process fetched it again).

        Call with the entry's lock held. Returns True when the file was removed.
        """
        try:
            st = os.stat(err.path)
        except FileNotFoundError:
            return False
        if err.inode is not None and st.st_ino != err.inode:
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(err.path)
        return True

    def tree(self, key: str) -> Path:
        return self.root / "trees" / key

    def tmpdir(self) -> Path:
        d = self.root / "tmp"
        d.mkdir(parents=True, exist_ok=True)
        return d

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """An exclusive lock shared by every rvport process using this cache (fcntl.flock)."""
        d = self.root / "locks"
        try:
            d.mkdir(parents=True, exist_ok=True)
            fd = os.open(d / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise HostNotReady(
                f"cannot use the cache at {self.root}: {e.strerror}",
                hint="choose a writable directory with --cache-dir or RVPORT_CACHE_DIR",
            ) from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def part_path(self, name: str) -> Path:
        """Where the download guarded by lock `name` is written; only its lock holder touches it."""
        return self.tmpdir() / f"{name}.part"

    def commit_blob(self, part: Path, sha256: str) -> Path:
        """Move a verified temporary file into place (atomic rename on one file system)."""
        dest = self.blob(sha256)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(part, 0o444)
        os.replace(part, dest)
        return dest


def atomic_copy(src: Path, dest: Path) -> None:
    """Copy src to dest through a temporary file beside dest, then rename."""
    with atomic_file(dest) as out, open(src, "rb") as f:
        shutil.copyfileobj(f, out, CHUNK)
