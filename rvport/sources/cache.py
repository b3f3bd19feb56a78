"""The content-addressed cache: blobs by SHA256, refs for unpinned sources, prepared trees; locks and atomic writes.

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
import fcntl
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from rvport.errors import HostNotReady
from rvport.catalogue.recipes import Source
from rvport.files import atomic_write_text  # noqa: F401  (the sources' writes; lives in the bottom layer)

HEX64 = re.compile(r"^[0-9a-f]{64}$")
CHUNK = 1 << 16


def default_cache_dir(env: dict[str, str] | None = None) -> Path:
    """RVPORT_CACHE_DIR, else $XDG_CACHE_HOME/rvport, else ~/.cache/rvport."""
    env = dict(os.environ) if env is None else env
    if env.get("RVPORT_CACHE_DIR"):
        return Path(env["RVPORT_CACHE_DIR"]).expanduser()
    xdg = env.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "rvport"
    return Path.home() / ".cache" / "rvport"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


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
        """The digest recorded for an unpinned source, if its blob is still present."""
        try:
            doc = json.loads(self.ref_path(source).read_text())
        except (OSError, ValueError):
            return None
        digest = doc.get("sha256", "")
        if doc.get("origin") != source.origin or not HEX64.match(digest) or not self.blob(digest).is_file():
            return None
        return digest

    def write_ref(self, source: Source, sha256: str, *, date: str) -> None:
        doc = {"origin": source.origin, "sha256": sha256, "recorded": date}
        atomic_write_text(self.ref_path(source), json.dumps(doc, sort_keys=True, indent=2) + "\n")

    def lookup(self, source: Source) -> Path | None:
        """The cached blob for a source (by its pin, else by its recorded ref), or None."""
        digest = source.sha256 or self.read_ref(source)
        if digest and self.blob(digest).is_file():
            return self.blob(digest)
        return None

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
            raise HostNotReady(f"cannot use the cache at {self.root}: {e.strerror}",
                               hint="choose a writable directory with --cache-dir or RVPORT_CACHE_DIR") from e
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
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as f:
            for chunk in iter(lambda: f.read(CHUNK), b""):
                out.write(chunk)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
