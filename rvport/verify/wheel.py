"""Verify a wheel: its file-name tags, .dist-info/WHEEL, every file's RECORD entry, and every ELF file and ar
archive in it, all read from the zip in memory (never unpacked to disk)."""

from __future__ import annotations

import hashlib
import zipfile
import zlib
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ..profiles import Profile
from .ar import is_ar
from .blob import judge_blob
from .elf import ELF_MAGIC, ElfFacts
from .filehash import size_sha
from .model import ArtifactKind, ArtifactResult, MemberResult, WheelInfo
from .policy import IsaLevel, Verdict, glibc_str, judge_wheel_tags, manylinux_for
from .record import (
    RECORD,
    RECORD_SIGNATURES,
    Record,
    check_entry,
    entry_algorithm,
    parse_record,
    record_digest,
)


def verify_wheel(path: Path, profile: Profile, isa: IsaLevel) -> ArtifactResult:
    reasons: list[str] = []
    notes: list[str] = []
    members: list[MemberResult] = []
    size, sha = size_sha(path)
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
            record_names = [i.filename for i in infos if RECORD.match(i.filename)]
            record: Record | None = None
            if len(record_names) != 1:
                reasons.append("no .dist-info/RECORD" if not record_names
                               else f"several RECORD files: {', '.join(record_names)}")
            else:
                record = parse_record(zf.read(record_names[0]).decode("utf-8", "replace"))
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
                if record is not None and fname not in record_names and not RECORD_SIGNATURES.match(fname):
                    algo = entry_algorithm(fname, record)
                    digest = record_digest(hashlib.new(algo, data).digest()) if algo else None
                    checked += check_entry(fname, digest, len(data), record, reasons)
                if data[:4] == ELF_MAGIC or is_ar(data):
                    for m in judge_blob(fname, data, profile, isa):
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
        return [(f"{distinfo}/WHEEL lists tags {', '.join(sorted(listed))} but the file name says "
                 f"{', '.join(sorted(named))}")]
    return []
