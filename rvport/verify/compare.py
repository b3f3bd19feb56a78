"""Are two builds' artifacts bit-identical, and where do they differ when they are not?

Two artifact directories (the exports of two builds of the same plan) are compared file by file by sha256.
A pair that differs is opened up: a wheel member by member (names, order, times, modes, contents), an ar
archive member by member, and an ELF file section by section, so the report names what to look at (a
`.comment` or `.note.gnu.build-id` difference, an embedded path, a zip time) rather than only two digests.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from rvport.verify.ar import ArchiveError, is_ar, iter_ar_members
from rvport.verify.elf import ELF_MAGIC

MAX_DETAILS = 20  # differences listed per artifact; the count says how many there were in all


@dataclass(frozen=True, kw_only=True)
class Difference:
    artifact: str  # path relative to the artifact directory
    first: str | None  # sha256 in the first build (None: missing there)
    second: str | None
    details: tuple[str, ...] = ()  # where inside: members, sections, zip metadata

    def to_json(self) -> dict:
        return {
            "artifact": self.artifact,
            "first": self.first,
            "second": self.second,
            "details": list(self.details),
        }


@dataclass(frozen=True, kw_only=True)
class Comparison:
    identical: tuple[tuple[str, str], ...] = ()  # (artifact, sha256)
    differences: tuple[Difference, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.differences and bool(self.identical)

    def to_json(self) -> dict:
        return {
            "identical": [{"artifact": a, "sha256": s} for a, s in self.identical],
            "differences": [d.to_json() for d in self.differences],
            "ok": self.ok,
        }


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _files(root: Path) -> dict[str, Path]:
    return {
        str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()
    }


def compare_dirs(first: Path, second: Path) -> Comparison:
    a, b = _files(first), _files(second)
    identical: list[tuple[str, str]] = []
    diffs: list[Difference] = []
    for rel in sorted(set(a) | set(b)):
        if rel not in a or rel not in b:
            diffs.append(
                Difference(
                    artifact=rel,
                    first=_sha(a[rel].read_bytes()) if rel in a else None,
                    second=_sha(b[rel].read_bytes()) if rel in b else None,
                    details=("only in the " + ("first" if rel in a else "second") + " build",),
                )
            )
            continue
        da, db = a[rel].read_bytes(), b[rel].read_bytes()
        sa, sb = _sha(da), _sha(db)
        if sa == sb:
            identical.append((rel, sa))
        else:
            diffs.append(Difference(artifact=rel, first=sa, second=sb, details=tuple(explain(rel, da, db))))
    return Comparison(identical=tuple(identical), differences=tuple(diffs))


def explain(name: str, a: bytes, b: bytes) -> list[str]:
    """Where two different blobs differ, as short lines (at most MAX_DETAILS, then a count)."""
    if a[:4] == b"PK\x03\x04" and b[:4] == b"PK\x03\x04":
        lines = _zip_diff(a, b)
    elif is_ar(a[:8]) and is_ar(b[:8]):
        lines = _ar_diff(a, b)
    elif a[:4] == ELF_MAGIC and b[:4] == ELF_MAGIC:
        lines = _elf_diff(a, b)
    else:
        lines = [f"contents differ ({len(a)} and {len(b)} bytes)"]
    if len(lines) > MAX_DETAILS:
        lines = lines[:MAX_DETAILS] + [f"... and {len(lines) - MAX_DETAILS} more"]
    return lines or ["the bytes differ, but no member, section or metadata difference was found"]


def _zip_diff(a: bytes, b: bytes) -> list[str]:
    try:
        za, zb = zipfile.ZipFile(io.BytesIO(a)), zipfile.ZipFile(io.BytesIO(b))
    except zipfile.BadZipFile as e:
        return [f"cannot read as a zip file: {e}"]
    out: list[str] = []
    ia = {i.filename: i for i in za.infolist()}
    ib = {i.filename: i for i in zb.infolist()}
    for n in sorted(set(ia) ^ set(ib)):
        out.append(f"{n}: only in the {'first' if n in ia else 'second'} build")
    common = [n for n in ia if n in ib]
    if [n for n in za.namelist() if n in ib] != [n for n in zb.namelist() if n in ia]:
        out.append("member order differs")
    for n in common:
        x, y = ia[n], ib[n]
        if x.date_time != y.date_time:
            out.append(f"{n}: time {_dt(x.date_time)} vs {_dt(y.date_time)}")
        if x.external_attr != y.external_attr:
            out.append(f"{n}: mode {x.external_attr >> 16:o} vs {y.external_attr >> 16:o}")
        if x.CRC != y.CRC or x.file_size != y.file_size:
            da, db = za.read(n), zb.read(n)
            out += [f"{n}: {line}" for line in explain(n, da, db)]
    return out


def _dt(t: tuple[int, ...]) -> str:
    return "{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}".format(*t)


def _ar_diff(a: bytes, b: bytes) -> list[str]:
    try:
        ma, mb = list(iter_ar_members(a)), list(iter_ar_members(b))
    except ArchiveError as e:
        return [f"cannot read as an ar archive: {e}"]
    out: list[str] = []
    if [n for n, _ in ma] != [n for n, _ in mb]:
        out.append("member names or order differ")
    for (n, x), (_, y) in zip(ma, mb, strict=False):
        if x != y:
            out += [f"{n}: {line}" for line in explain(n, x, y)]
    return out


def _sections(data: bytes) -> dict[str, str]:
    elf = ELFFile(io.BytesIO(data))
    out: dict[str, str] = {}
    for i, s in enumerate(elf.iter_sections()):
        if s["sh_type"] == "SHT_NOBITS":
            body = str(s["sh_size"]).encode()
        else:
            body = s.data()
        out[s.name or f"#{i}"] = _sha(body)
    return out


def _elf_diff(a: bytes, b: bytes) -> list[str]:
    try:
        sa, sb = _sections(a), _sections(b)
    except (ELFError, ValueError, OSError) as e:
        return [f"cannot read the ELF sections: {e}"]
    out = [
        f"section {n}: only in the {'first' if n in sa else 'second'} build"
        for n in sorted(set(sa) ^ set(sb))
    ]
    out += [f"section {n} differs" for n in sa if n in sb and sa[n] != sb[n]]
    if not out:
        out.append("ELF headers or section layout differ (every section's contents are equal)")
    return out
