"""Verify a wheel: its file-name tags, .dist-info/WHEEL, every file's RECORD entry, and every ELF file and ar
archive in it, all read from the zip in memory (never unpacked to disk), each member once, on worker
threads."""

from __future__ import annotations

import email.parser
import os
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement
from packaging.utils import InvalidWheelFilename

from rvport import bounds
from rvport.catalogue.profiles import Profile
from rvport.verify.ar import is_ar
from rvport.verify.elf import ELF_MAGIC, ElfFacts
from rvport.verify.elf_ranges import Keep
from rvport.verify.filehash import size_sha
from rvport.verify.judge_binary import judge_content
from rvport.verify.kept_stream import NotKept
from rvport.verify.limits import DEFAULT_LIMITS, REASON, Limits, OverLimit, check
from rvport.verify.manylinux import best_tag
from rvport.verify.model import ArtifactResult, MemberResult, WheelInfo
from rvport.verify.policy import IsaLevel, Verdict, glibc_str, judge_wheel_tags
from rvport.verify.pool import map_ordered
from rvport.verify.record import (
    RECORD,
    RECORD_SIGNATURES,
    Record,
    check_entry,
    entry_algorithm,
    parse_record,
)
from rvport.verify.zip_member import UNREADABLE_FLAGS, ZIP_ERRORS, MemberError, read_member
from rvport.vocab import ArtifactKind


@dataclass(frozen=True, kw_only=True)
class _Read:
    """What reading one member once yielded: its size and RECORD digest, the judgement of its ELF files."""

    size: int = 0
    digest: str | None = None
    results: tuple[MemberResult, ...] = ()
    error: str | None = None
    over: str | None = None  # the cap it is over (limits.py)


def verify_wheel(
    path: Path, profile: Profile, isa: IsaLevel, limits: Limits = DEFAULT_LIMITS, *, vlen_exact: bool = False
) -> ArtifactResult:
    """Judge a wheel within the caps (limits.py): too many members, or members that inflate to more than
    wheel_bytes in all, fail it before any is read; a member over member_bytes (its size in the zip
    directory: never inflated past it) or kept_bytes fails with the cap named, the others are read.
    `vlen_exact`: its vector code assumes the VLEN it was built for (policy.rule_vlen)."""
    reasons: list[str] = []
    notes: list[str] = []
    members: list[MemberResult] = []
    try:
        name, version, _build, tags = bounds.wheel_filename(path.name)
    except InvalidWheelFilename as e:
        size, sha = size_sha(path)
        return ArtifactResult(
            path=str(path),
            kind=ArtifactKind.WHEEL,
            verdict=Verdict.FAIL,
            reasons=(f"invalid wheel file name: {e}",),
            size=size,
            sha256=sha,
        )
    elfs: list[tuple[str, ElfFacts]] = []
    requires: tuple[str, ...] = ()  # the distributions its METADATA's Requires-Dist names (not for extras)
    checked = 0
    readable = True
    whole: tuple[int | None, str | None] | None = None
    try:
        with open(path, "rb") as f:
            _check_directory_size(f, limits)
        with open(path, "rb") as f, zipfile.ZipFile(f) as zf:
            infos = [i for i in zf.infolist() if not i.is_dir()]
            check("files in the wheel", len(infos), "wheel_members", limits.wheel_members)
            check(
                "bytes inflated of all its files",
                sum(i.file_size for i in infos),
                "wheel_bytes",
                limits.wheel_bytes,
            )
            reasons += escaping("member", (i.filename for i in zf.infolist()))
            record_names = [i.filename for i in infos if RECORD.match(i.filename)]
            record: Record | None = None
            if len(record_names) != 1:
                reasons.append(
                    "no .dist-info/RECORD"
                    if not record_names
                    else f"several RECORD files: {', '.join(record_names)}"
                )
            else:
                text = _read_small(zf, zf.getinfo(record_names[0]), limits, reasons)
                record = parse_record(text.decode("utf-8", "replace")) if text is not None else None
                if record is not None:
                    reasons += escaping("RECORD entry", record)
                distinfo = record_names[0].rsplit("/", 1)[0]
                reasons += _check_wheel_tags_file(zf, distinfo, tags, limits)
                requires = _requires(zf, distinfo, limits, reasons)

            def listed(fname: str) -> bool:
                return record is not None and fname not in record_names and not RECORD_SIGNATURES.match(fname)

            # One pass over the bytes, on every core: the wheel file's own sha256, and each member read once.
            jobs: list[tuple[int, Callable[[], Any]]] = [
                (os.fstat(f.fileno()).st_size, partial(size_sha, path))
            ]
            jobs += [
                (
                    i.compress_size,
                    partial(
                        _read_member,
                        path,
                        f.fileno(),
                        i,
                        entry_algorithm(i.filename, record)
                        if record is not None and listed(i.filename)
                        else None,
                        profile,
                        isa,
                        limits,
                        vlen_exact,
                    ),
                )
                for i in infos
            ]
            done = map_ordered(lambda job: job[1](), jobs, cost=lambda job: job[0])
            whole = done[0]
            seen: set[str] = set()
            for info, read in zip(infos, done[1:], strict=True):
                fname = info.filename
                seen.add(fname)
                if read.over is not None:
                    reasons.append(f"{fname}: {REASON}: {read.over}; not judged")
                    continue
                if read.error is not None:
                    reasons.append(f"{fname}: cannot read member: {read.error}")
                    continue
                if record is not None and listed(fname):
                    checked += check_entry(fname, read.digest, read.size, record, reasons)
                for m in read.results:
                    members.append(m)
                    if m.facts is not None:
                        elfs.append((m.name or fname, m.facts))
            if record is not None:
                missing = sorted(p for p in record if p not in seen)
                if missing:
                    reasons.append(
                        f"RECORD lists {len(missing)} file(s) missing from the wheel: "
                        + ", ".join(missing[:5])
                        + (" ..." if len(missing) > 5 else "")
                    )
    except ZIP_ERRORS as e:
        reasons.append(f"not a readable zip file: {e or type(e).__name__}")
        readable = False
    except OverLimit as e:
        reasons.append(f"{REASON}: {e}; its files not judged")
        readable = False
    reasons = list(dict.fromkeys(reasons))  # a metadata file that cannot be read is said once
    size, sha = whole if whole is not None else size_sha(path)
    if readable:  # an unreadable zip has no ELF files to judge its tags by: that is not a second reason
        tj = judge_wheel_tags(tags, elfs, requires)
        reasons += tj.reasons
        notes += tj.notes
    glibcs = [f.max_glibc for _, f in elfs if f.max_glibc]
    worst = max(glibcs) if glibcs else None
    best = best_tag(elfs, requires=requires) if elfs else None
    info_ = WheelInfo(
        name=str(name),
        version=str(version),
        tags=tuple(sorted(str(t) for t in tags)),
        max_glibc=glibc_str(worst),
        manylinux=best.tag if best else None,
        record_checked=checked,
    )
    if not members and not reasons:
        notes.append("no ELF files")
    verdict = Verdict.FAIL if reasons or any(not m.ok for m in members) else Verdict.PASS
    return ArtifactResult(
        path=str(path),
        kind=ArtifactKind.WHEEL,
        verdict=verdict,
        reasons=tuple(reasons),
        notes=tuple(notes),
        members=tuple(members),
        size=size,
        sha256=sha,
        wheel=info_,
    )


def _keep(head: bytes) -> Keep:
    if head[:4] == ELF_MAGIC:
        return Keep.ELF_RANGES
    return Keep.WHOLE if is_ar(head) else Keep.NOTHING


def _read_member(
    path: Path,
    fd: int,
    info: zipfile.ZipInfo,
    algo: str | None,
    profile: Profile,
    isa: IsaLevel,
    limits: Limits,
    vlen_exact: bool,
) -> _Read:
    """Read a member once (inflate, CRC, RECORD digest) and judge it when it is an ELF file or ar archive; its
    bytes are dropped when this returns. Runs on a worker thread."""
    try:
        m = read_member(path, fd, info, algo, keep=_keep, limits=limits)
        if m.content is None:
            return _Read(size=m.size, digest=m.digest)
        try:
            results = judge_content(info.filename, m.content, profile, isa, limits, vlen_exact=vlen_exact)
        except NotKept:  # an unusual layout: judge it on all its bytes (within kept_bytes)
            whole = read_member(path, fd, info, None, keep=lambda head: Keep.WHOLE, limits=limits)
            assert whole.content is not None
            results = judge_content(info.filename, whole.content, profile, isa, limits, vlen_exact=vlen_exact)
    except MemberError as e:
        return _Read(error=str(e))
    except OverLimit as e:
        return _Read(over=str(e))
    return _Read(size=m.size, digest=m.digest, results=tuple(results))


CD_ENTRY_MIN = 46  # bytes of a zip central directory entry with an empty name


def _check_directory_size(f: BinaryIO, limits: Limits) -> None:
    """Before zipfile builds an entry for every file: the central directory's size (from the end record)
    bounds how many files it can list; over wheel_members, OverLimit. Nothing is checked when the end record
    cannot be found (zipfile then says the file is not a zip)."""
    end_record = getattr(zipfile, "_EndRecData", None)  # zipfile's own reader of the end record
    rec = end_record(f) if end_record is not None else None
    if rec:
        room = rec[5] // CD_ENTRY_MIN  # _ECD_SIZE
        check("files its zip directory has room for", room, "wheel_members", limits.wheel_members)


def escaping(what: str, names: Iterable[str]) -> list[str]:
    """A reason for each name (of a zip member or a RECORD entry) that would leave the directory a wheel is
    installed into: absolute (`/tmp/x`, `C:x`, `\\x`), or through `..`; NUL in a name too. pip refuses
    them at install time; verify refuses them first."""
    out = []
    for name in names:
        parts = name.replace("\\", "/").split("/")
        if (
            "\0" in name
            or name.startswith(("/", "\\"))
            or ".." in parts
            or (len(name) >= 2 and name[1] == ":" and name[0].isalpha())
        ):
            out.append(f"{what} {name!r} leaves the wheel (an absolute path, or ..): refused")
    return out


def _read_small(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, limits: Limits, reasons: list[str]
) -> bytes | None:
    """A metadata file of the wheel (RECORD, WHEEL, METADATA), inflated in chunks up to metadata_bytes:
    OverLimit past it, whatever its zip directory entry says. One that cannot be read (encrypted, an
    unknown compression method, corrupt data, a bad CRC) adds its reason and gives None."""
    check(f"bytes of {info.filename}", info.file_size, "metadata_bytes", limits.metadata_bytes)
    for bit, why in UNREADABLE_FLAGS.items():
        if info.flag_bits & bit:
            reasons.append(f"{info.filename}: cannot read member: {why}")
            return None
    out = bytearray()
    try:
        with zf.open(info) as f:
            while chunk := f.read(1 << 20):
                out += chunk
                check(f"bytes of {info.filename}", len(out), "metadata_bytes", limits.metadata_bytes)
    except ZIP_ERRORS as e:
        reasons.append(f"{info.filename}: cannot read member: {e or type(e).__name__}")
        return None
    return bytes(out)


# the markers a riscv64 Linux system gives (an extra's requirement is not installed with the wheel)
_TARGET_MARKERS = {
    "extra": "",
    "platform_machine": "riscv64",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "os_name": "posix",
}


def _requires(zf: zipfile.ZipFile, distinfo: str, limits: Limits, reasons: list[str]) -> tuple[str, ...]:
    """The distributions .dist-info/METADATA's Requires-Dist names for riscv64 Linux: a marker is evaluated
    with the target's platform (an extra's requirement, or one for x86_64 only, is not named; the Python
    version markers are this interpreter's). Read within the small-file cap; no METADATA names none. A
    METADATA that cannot be read, or a marker that cannot be evaluated, adds its reason."""
    try:
        info = zf.getinfo(f"{distinfo}/METADATA")
    except KeyError:
        return ()
    raw = _read_small(zf, info, limits, reasons)
    if raw is None:
        return ()
    out = []
    for value in (
        email.parser.HeaderParser().parsestr(raw.decode("utf-8", "replace")).get_all("Requires-Dist") or []
    ):
        try:
            req = bounds.requirement(value)
        except InvalidRequirement:
            continue
        try:
            applies = req.marker is None or req.marker.evaluate(_TARGET_MARKERS)
        except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName, ValueError) as e:
            reasons.append(
                f"{info.filename}: Requires-Dist {str(value)[:200]!r}: its marker cannot be evaluated: {e}"
            )
            continue
        if applies:
            out.append(req.name)
    return tuple(sorted(set(out)))


def _check_wheel_tags_file(zf: zipfile.ZipFile, distinfo: str, tags: frozenset, limits: Limits) -> list[str]:
    """The Tag lines of .dist-info/WHEEL must be the tags of the file name."""
    try:
        info = zf.getinfo(f"{distinfo}/WHEEL")
    except KeyError:
        return [f"no {distinfo}/WHEEL"]
    unreadable: list[str] = []
    raw = _read_small(zf, info, limits, unreadable)
    if raw is None:
        return unreadable
    text = raw.decode("utf-8", "replace")
    listed = {line.split(":", 1)[1].strip() for line in text.splitlines() if line.lower().startswith("tag:")}
    named = {str(t) for t in tags}
    if listed and listed != named:
        return [
            (
                f"{distinfo}/WHEEL lists tags {', '.join(sorted(listed))} but the file name says "
                f"{', '.join(sorted(named))}"
            )
        ]
    return []
