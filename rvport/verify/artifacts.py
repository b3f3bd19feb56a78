"""Walk artifacts: wheels (zip members read in memory, tags and RECORD checked), GNU/BSD ar archives
(parsed here), shared objects, executables, relocatable objects, and directories of them."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ..profiles import Profile
from .elf import ELF_MAGIC, ElfFacts, ElfReadError, read_elf, read_elf_bytes
from .model import ArtifactKind, ArtifactResult, MemberResult, WheelInfo
from .policy import IsaLevel, Verdict, glibc_str, judge_elf, judge_wheel_tags, manylinux_for

AR_MAGIC = b"!<arch>\n"
AR_THIN_MAGIC = b"!<thin>\n"
AR_HEADER = 60
ZIP_MAGIC = b"PK\x03\x04"
_RECORD = re.compile(r"^[^/]+\.dist-info/RECORD$")
_RECORD_SIGNATURES = re.compile(r"^[^/]+\.dist-info/RECORD\.(jws|p7s)$")
_STRONG_HASHES = {"sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s"}


class ArchiveError(Exception):
    """An ar archive that cannot be read."""


# ---- ar archives --------------------------------------------------------------------------------------

def iter_ar_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    """Yield (name, bytes) of each member of a GNU (or BSD) ar archive. The symbol tables (/ and /SYM64/)
    and the GNU long-name table (//) are read or skipped, not yielded."""
    if data[:8] == AR_THIN_MAGIC:
        raise ArchiveError("thin archive: its members live outside it and are not verified")
    if data[:8] != AR_MAGIC:
        raise ArchiveError("not an ar archive")
    pos = 8
    longnames = b""
    view = memoryview(data)
    while pos < len(data):
        if data[pos:pos + 1] == b"\n":   # tolerate extra padding
            pos += 1
            continue
        hdr = data[pos:pos + AR_HEADER]
        if len(hdr) < AR_HEADER:
            raise ArchiveError(f"truncated member header at offset {pos}")
        if hdr[58:60] != b"`\n":
            raise ArchiveError(f"bad member header at offset {pos}")
        raw_name = hdr[0:16].decode("ascii", "replace").rstrip(" ")
        try:
            size = int(hdr[48:58].decode("ascii").strip() or "0")
        except ValueError as e:
            raise ArchiveError(f"bad member size at offset {pos}") from e
        start = pos + AR_HEADER
        end = start + size
        if end > len(data):
            raise ArchiveError(f"member {raw_name!r} at offset {pos} is truncated "
                               f"({len(data) - start} of {size} bytes)")
        body = view[start:end]
        pos = end + (size & 1)
        if raw_name in ("/", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED"):
            continue
        if raw_name == "//":
            longnames = bytes(body)
            continue
        if raw_name.startswith("#1/"):          # BSD: name stored at the start of the body
            n = int(raw_name[3:])
            name = bytes(body[:n]).rstrip(b"\0").decode("utf-8", "replace")
            yield name, bytes(body[n:])
            continue
        if raw_name.startswith("/") and raw_name[1:].isdigit():   # GNU: offset into the // table
            off = int(raw_name[1:])
            if off >= len(longnames):
                raise ArchiveError(f"long name offset {off} beyond the name table")
            stop = longnames.find(b"/\n", off)
            name = longnames[off:stop if stop >= 0 else None].decode("utf-8", "replace")
        else:
            name = raw_name.removesuffix("/")
        yield name, bytes(body)


# ---- one ELF blob -------------------------------------------------------------------------------------

def _judge_blob(name: str | None, data: bytes, profile: Profile, isa: IsaLevel) -> list[MemberResult]:
    """Judge an ELF blob, or every member of an ar archive blob (named archive(member))."""
    if data[:8] in (AR_MAGIC, AR_THIN_MAGIC):
        out: list[MemberResult] = []
        try:
            for mname, mdata in iter_ar_members(data):
                full = f"{name}({mname})" if name else mname
                if mdata[:4] != ELF_MAGIC:
                    out.append(MemberResult(name=full, verdict=Verdict.FAIL,
                                            reasons=("archive member is not an ELF object",)))
                    continue
                out += _judge_blob(full, mdata, profile, isa)
        except ArchiveError as e:
            out.append(MemberResult(name=name, verdict=Verdict.FAIL, reasons=(f"bad ar archive: {e}",)))
        return out
    try:
        facts = read_elf_bytes(data)
    except ElfReadError as e:
        return [MemberResult(name=name, verdict=Verdict.FAIL, reasons=(str(e),))]
    return [_member(name, facts, profile, isa)]


def _member(name: str | None, facts: ElfFacts, profile: Profile, isa: IsaLevel) -> MemberResult:
    j = judge_elf(facts, profile, isa)
    notes = list(j.notes)
    if facts.needed:
        notes.append("needs " + ", ".join(facts.needed))
    return MemberResult(name=name, verdict=j.verdict, reasons=j.reasons, notes=tuple(notes), facts=facts)


# ---- wheels ---------------------------------------------------------------------------------------------

def _record_digest(algo: str, data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.new(algo, data).digest()).rstrip(b"=").decode("ascii")


def _parse_record(text: str) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        path = row[0]
        out[path] = (row[1] if len(row) > 1 else "", row[2] if len(row) > 2 else "")
    return out


def verify_wheel(path: Path, profile: Profile, isa: IsaLevel) -> ArtifactResult:
    reasons: list[str] = []
    notes: list[str] = []
    members: list[MemberResult] = []
    size, sha = _size_sha(path)
    try:
        name, version, _build, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as e:
        return ArtifactResult(path=str(path), kind=ArtifactKind.WHEEL, verdict=Verdict.FAIL,
                              reasons=(f"invalid wheel file name: {e}",), size=size, sha256=sha)
    elfs: list[tuple[str, ElfFacts]] = []
    checked = 0
    try:
        with zipfile.ZipFile(path) as zf:
            infos = [i for i in zf.infolist() if not i.is_dir()]
            record_names = [i.filename for i in infos if _RECORD.match(i.filename)]
            record: dict[str, tuple[str, str]] | None = None
            if len(record_names) != 1:
                reasons.append("no .dist-info/RECORD" if not record_names
                               else f"several RECORD files: {', '.join(record_names)}")
            else:
                record = _parse_record(zf.read(record_names[0]).decode("utf-8", "replace"))
                reasons += _check_wheel_tags_file(zf, record_names[0].rsplit("/", 1)[0], tags)
            seen: set[str] = set()
            for info in infos:
                fname = info.filename
                seen.add(fname)
                try:
                    data = zf.read(info)
                except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as e:
                    reasons.append(f"{fname}: cannot read member: {e}")
                    continue
                if record is not None and fname not in record_names and not _RECORD_SIGNATURES.match(fname):
                    checked += _check_record_entry(fname, data, record, reasons)
                if data[:4] == ELF_MAGIC or data[:8] in (AR_MAGIC, AR_THIN_MAGIC):
                    for m in _judge_blob(fname, data, profile, isa):
                        members.append(m)
                        if m.facts is not None:
                            elfs.append((m.name or fname, m.facts))
            if record is not None:
                missing = sorted(p for p in record if p not in seen)
                if missing:
                    reasons.append(f"RECORD lists {len(missing)} file(s) missing from the wheel: "
                                   + ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else ""))
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
        reasons.append(f"not a readable zip file: {e}")
    tj = judge_wheel_tags(tags, elfs)
    reasons += tj.reasons
    notes += tj.notes
    glibcs = [f.max_glibc for _, f in elfs if f.max_glibc]
    worst = max(glibcs) if glibcs else None
    info_ = WheelInfo(name=str(name), version=str(version), tags=tuple(sorted(str(t) for t in tags)),
                      max_glibc=glibc_str(worst), manylinux=manylinux_for(worst) if elfs else None,
                      record_checked=checked)
    if not members and not reasons:
        notes.append("no ELF files")
    verdict = Verdict.FAIL if reasons or any(not m.ok for m in members) else Verdict.PASS
    return ArtifactResult(path=str(path), kind=ArtifactKind.WHEEL, verdict=verdict, reasons=tuple(reasons),
                          notes=tuple(notes), members=tuple(members), size=size, sha256=sha, wheel=info_)


def _check_wheel_tags_file(zf: zipfile.ZipFile, distinfo: str, tags: frozenset) -> list[str]:
    """The Tag lines of .dist-info/WHEEL must be the tags of the file name."""
    try:
        text = zf.read(f"{distinfo}/WHEEL").decode("utf-8", "replace")
    except KeyError:
        return [f"no {distinfo}/WHEEL"]
    listed = {line.split(":", 1)[1].strip() for line in text.splitlines() if line.lower().startswith("tag:")}
    named = {str(t) for t in tags}
    if listed and listed != named:
        return [f"{distinfo}/WHEEL lists tags {', '.join(sorted(listed))} but the file name says "
                f"{', '.join(sorted(named))}"]
    return []


def _check_record_entry(fname: str, data: bytes, record: dict[str, tuple[str, str]],
                        reasons: list[str]) -> int:
    entry = record.get(fname)
    if entry is None:
        reasons.append(f"{fname}: not listed in RECORD")
        return 0
    hash_field, size_field = entry
    algo, _, digest = hash_field.partition("=")
    if not digest:
        reasons.append(f"{fname}: RECORD has no hash for it")
        return 0
    if algo not in _STRONG_HASHES or algo not in hashlib.algorithms_available:
        reasons.append(f"{fname}: RECORD hash algorithm {algo!r} is not accepted (sha256 or stronger)")
        return 0
    if _record_digest(algo, data) != digest:
        reasons.append(f"{fname}: RECORD {algo} mismatch (file changed after the wheel was built)")
    if size_field and size_field.isdigit() and int(size_field) != len(data):
        reasons.append(f"{fname}: RECORD size {size_field} but the file has {len(data)} bytes")
    return 1


# ---- files and directories ----------------------------------------------------------------------------

def _size_sha(path: Path) -> tuple[int | None, str | None]:
    try:
        with open(path, "rb") as f:
            return os.fstat(f.fileno()).st_size, hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None, None


def _head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(8)


def classify(path: Path) -> ArtifactKind:
    """What kind of artifact a file is, by content (and .whl by name)."""
    try:
        head = _head(path)
    except OSError:
        return ArtifactKind.OTHER
    if head[:4] == ELF_MAGIC:
        return ArtifactKind.ELF
    if head[:8] in (AR_MAGIC, AR_THIN_MAGIC):
        return ArtifactKind.ARCHIVE
    if path.name.endswith(".whl"):
        return ArtifactKind.WHEEL
    return ArtifactKind.OTHER


def verify_file(path: Path, profile: Profile, isa: IsaLevel) -> ArtifactResult:
    kind = classify(path)
    if kind is ArtifactKind.WHEEL:
        return verify_wheel(path, profile, isa)
    size, sha = _size_sha(path)
    if kind is ArtifactKind.ELF:
        try:
            with open(path, "rb") as f:
                members = [_member(None, read_elf(f), profile, isa)]
        except ElfReadError as e:
            members = [MemberResult(name=None, verdict=Verdict.FAIL, reasons=(str(e),))]
    elif kind is ArtifactKind.ARCHIVE:
        members = _judge_blob(None, path.read_bytes(), profile, isa)
        if not members:
            return ArtifactResult(path=str(path), kind=kind, verdict=Verdict.FAIL,
                                  reasons=("archive has no members",), size=size, sha256=sha)
    else:
        return ArtifactResult(path=str(path), kind=kind, verdict=Verdict.FAIL,
                              reasons=("not an ELF file, ar archive or wheel",), size=size, sha256=sha)
    verdict = Verdict.PASS if all(m.ok for m in members) else Verdict.FAIL
    return ArtifactResult(path=str(path), kind=kind, verdict=verdict, members=tuple(members),
                          size=size, sha256=sha)


def walk(directory: Path) -> list[Path]:
    """Every wheel, ELF file and ar archive under a directory (recursively, sorted; symlinks skipped)."""
    found: list[Path] = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for fn in sorted(files):
            p = Path(root, fn)
            if p.is_symlink():
                continue
            if classify(p) is not ArtifactKind.OTHER:
                found.append(p)
    return found


def verify_path(path: Path, profile: Profile, isa: IsaLevel) -> list[ArtifactResult]:
    if path.is_dir():
        files = walk(path)
        if not files:
            return [ArtifactResult(path=str(path), kind=ArtifactKind.DIRECTORY, verdict=Verdict.FAIL,
                                   reasons=("no wheel, ELF file or ar archive found under it",))]
        return [verify_file(p, profile, isa) for p in files]
    return [verify_file(path, profile, isa)]
