"""Archive members checked before anything is written: paths, links and sizes, one rule for tar and zip.

rvport runs as root on build hosts and its sources come from outside, so an archive's members are checked by
rvport itself, never left to a library's extraction filter (tarfile's `filter="data"` resolves links with
os.path.realpath on the real file system, which a chain of links longer than PATH_MAX gets past on many
Python versions, and Python 3.11.0-3.11.3 has no filter at all).

`Layout` is the archive's tree as unpacked so far, kept in memory. A member is accepted when:

  * its path is relative, has no `..` and no NUL, and no directory on its way is a link or a file (so nothing
    is ever written through a link: a file that follows a link of the same name replaces the link, as
    `tar -x` does);
  * a link's target, resolved against the members already unpacked (links followed as the kernel would, at
    most 40 of them), stays inside the tree; a hard link names an earlier regular file;
  * it is a file, a directory or a link (no devices, FIFOs or sockets);
  * the members so far hold no more than the limits (`Limits`): a bound on the bytes and members unpacked.

At the end every link is resolved again against the whole tree (a later member may have changed what an
earlier link points through), from the directory that will be the tree's top.
"""

from __future__ import annotations

import tarfile
from collections import deque
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from rvport.errors import IntegrityError

Kind = Literal["d", "f", "l"]
MAX_HOPS = 40  # links followed in one lookup, as Linux's ELOOP bound
GIB = 1 << 30
DEFAULT_MAX_BYTES = 16 * GIB
DEFAULT_MAX_MEMBERS = 2_000_000
LIMIT_ENV = "RVPORT_UNPACK_LIMIT"  # bytes, or with a K/M/G/T suffix (binary)
MALICIOUS = "the archive is malformed or malicious; do not use it"


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Bounds on what one archive may unpack to (decompression bombs)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_members: int = DEFAULT_MAX_MEMBERS


def parse_size(text: str) -> int:
    """'8G', '512M', '1.5GiB', '1000000' -> bytes (binary multiples); ValueError when it is none of those."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = 1
    for i, unit in enumerate("KMGT", start=1):
        if t.endswith(unit):
            t, mult = t[:-1], 1 << (10 * i)
            break
    value = float(t)
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(text)
    return int(value * mult)


def human(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


class Budget:
    """Counts members and bytes unpacked from one archive; over a limit is an IntegrityError."""

    def __init__(self, limits: Limits, name: str, *, holder: str = "the archive"):
        self.limits = limits
        self.name = name
        self.holder = holder  # what holds the members, for messages
        self.bytes = 0
        self.members = 0

    def member(self) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise self._over(f"more than {self.limits.max_members} members")

    def take(self, n: int) -> None:
        self.bytes += n
        if self.bytes > self.limits.max_bytes:
            raise self._over(f"more than {human(self.limits.max_bytes)} ({self.limits.max_bytes} bytes)")

    def _over(self, what: str) -> IntegrityError:
        return IntegrityError(
            f"{self.name}: unpacking stopped: {self.holder} holds {what}, over the unpack limit; "
            "nothing was kept",
            hint="a decompression bomb, or a source really that big: if you trust it, raise the limit with "
            f"{LIMIT_ENV}=SIZE (e.g. 32G; docs/sources.md, 'What unpacking refuses')",
        )


class Layout:
    """The tree an archive has unpacked so far (paths relative to the unpacking directory, '/'-separated)."""

    def __init__(self, name: str, *, noun: str = "archive member", hint: str = MALICIOUS):
        self.name = name  # the archive (or local tree), for messages
        self.noun, self.hint = noun, hint
        self.kinds: dict[str, Kind] = {}
        self.links: dict[str, str] = {}

    def refuse(self, member: str, why: str) -> IntegrityError:
        return IntegrityError(f"{self.name}: {self.noun} {member!r} {why}", hint=self.hint)

    def path(self, raw: str) -> str:
        """A member's name as a relative path ('' for the top itself); absolute, '..' and NUL are refused."""
        if "\0" in raw:
            raise self.refuse(raw, "has a NUL byte in its name")
        p = PurePosixPath(raw)
        parts = [x for x in p.parts if x not in (".", "")]
        if p.is_absolute() or ".." in parts:
            raise self.refuse(raw, "escapes the tree")
        return "/".join(parts)

    def _parents(self, path: str, member: str) -> list[str]:
        """The directories on the way to `path` not there yet; a link or file on the way is refused."""
        missing = []
        parts = path.split("/")
        for i in range(1, len(parts)):
            prefix = "/".join(parts[:i])
            kind = self.kinds.get(prefix)
            if kind == "l":
                raise self.refuse(member, f"would be written through the link {prefix!r}")
            if kind == "f":
                raise self.refuse(member, f"is under {prefix!r}, which is a file")
            if kind is None:
                missing.append(prefix)
        return missing

    def add(self, member: str, path: str, kind: Kind | Literal["h"], target: str = "") -> str | None:
        """Record one member; returns the path of a hard link's file (kind 'h'), else None.

        A file or link replaces a file or link of the same path (as `tar -x`); a directory never replaces
        anything but a directory, nor is it replaced."""
        missing = self._parents(path, member)
        old = self.kinds.get(path)
        new: Kind = "f" if kind == "h" else kind
        if old is not None and (old == "d") != (new == "d"):
            raise self.refuse(member, f"would replace the {_KIND_WORD[old]} of the same name")
        source = None
        if kind == "h":
            source = self.path(target)
            if self.kinds.get(source) != "f":
                raise self.refuse(member, f"is a hard link to {target!r}, which is not an earlier file of it")
        elif kind == "l":
            if not target:
                raise self.refuse(member, "is a link with an empty target")
            if "\0" in target or target.startswith("/"):
                raise self.refuse(member, f"is a link to {target!r}, outside the tree")
        for p in missing:
            self.kinds[p] = "d"
        self.kinds[path] = new
        if kind == "l":
            self.links[path] = target
            try:
                self.resolve(path, "")
            except IntegrityError:
                del self.kinds[path], self.links[path]
                if old is not None:
                    self.kinds[path] = old
                raise
        else:
            self.links.pop(path, None)
        return source

    def resolve(self, link: str, top: str) -> None:
        """Follow `link` as the kernel would (against the members recorded); refused when it leaves `top`."""
        root = [p for p in top.split("/") if p]
        cur = link.split("/")[:-1]
        pending = deque(self.links[link].split("/"))
        hops = 1
        while pending:
            c = pending.popleft()
            if c in ("", "."):
                continue
            if c == "..":
                if len(cur) <= len(root):
                    raise self.refuse(link, f"is a link to {self.links[link]!r}, outside the tree")
                cur.pop()
                continue
            candidate = "/".join((*cur, c))
            if self.kinds.get(candidate) == "l":
                hops += 1
                if hops > MAX_HOPS:
                    raise self.refuse(link, f"starts a chain of more than {MAX_HOPS} links")
                target = self.links[candidate]
                if target.startswith("/"):
                    raise self.refuse(link, f"is a link through {candidate!r}, outside the tree")
                pending.extendleft(reversed(target.split("/")))
            else:
                cur.append(c)

    def check_links(self, top: str = "") -> None:
        """Every link under `top` (the tree's top directory, '' for the whole) must stay inside it."""
        prefix = top + "/" if top else ""
        for link in self.links:
            if link.startswith(prefix):
                self.resolve(link, top)


_KIND_WORD = {"d": "directory", "f": "file", "l": "link"}

MAX_HEADER = 1 << 20  # bytes of one pax or GNU long-name header, which tarfile reads whole into memory
_EXTENDED = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


class BoundedTarInfo(tarfile.TarInfo):
    """A tar header whose extended headers (pax, GNU long names) are read only up to MAX_HEADER bytes: a
    compressed archive could otherwise make tarfile hold gigabytes in memory for one header."""

    def _proc_member(self, tarfile_):  # type: ignore[no-untyped-def]
        if self.type in _EXTENDED and self.size > MAX_HEADER:
            raise IntegrityError(
                f"archive header of {self.size} bytes before member {self.name!r}: more than "
                f"{MAX_HEADER} bytes",
                hint=MALICIOUS,
            )
        return super()._proc_member(tarfile_)


def member_mode(mode: int, kind: Kind) -> int:
    """The mode a member gets: no setuid/setgid/sticky bits, no group or other write; owner read/write
    always; a file is executable for all or for none, as its owner bit says."""
    if kind == "d":
        return 0o755
    return 0o755 if mode & 0o100 else 0o644


__all__ = [
    "BoundedTarInfo",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_MEMBERS",
    "LIMIT_ENV",
    "Budget",
    "Layout",
    "Limits",
    "human",
    "member_mode",
    "parse_size",
]
