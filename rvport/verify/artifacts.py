"""Walk artifacts: wheels (wheel.py), GNU/BSD ar archives (ar.py), shared objects, executables, relocatable
objects, and directories of them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from rvport.catalogue.profiles import Profile
from rvport.verify.ar import AR_MAGIC, AR_THIN_MAGIC, ArchiveError, iter_ar_members
from rvport.verify.blob import judge_blob, member_result
from rvport.verify.elf import ELF_MAGIC, ElfReadError, read_elf
from rvport.verify.exports import check_exports
from rvport.verify.filehash import size_sha
from rvport.verify.model import ArtifactKind, ArtifactResult, MemberResult
from rvport.verify.policy import IsaLevel, Verdict
from rvport.verify.wheel import verify_wheel

__all__ = ["ArchiveError", "classify", "iter_ar_members", "verify_file", "verify_path", "verify_wheel", "walk"]


# ---- files and directories ----------------------------------------------------------------------------

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


def verify_file(path: Path, profile: Profile, isa: IsaLevel, exports: Sequence[str] = ()) -> ArtifactResult:
    """Judge one file; with `exports`, also that it exports those functions (exports.py)."""
    result = _verify_file(path, profile, isa)
    if not exports:
        return result
    j = check_exports(path, result.kind, exports)
    return replace(result, verdict=Verdict.FAIL if j.reasons or not result.ok else Verdict.PASS,
                   reasons=result.reasons + j.reasons, notes=result.notes + j.notes)


def _verify_file(path: Path, profile: Profile, isa: IsaLevel) -> ArtifactResult:
    kind = classify(path)
    if kind is ArtifactKind.WHEEL:
        return verify_wheel(path, profile, isa)
    size, sha = size_sha(path)
    if kind is ArtifactKind.ELF:
        try:
            with open(path, "rb") as f:
                members = [member_result(None, read_elf(f), profile, isa)]
        except ElfReadError as e:
            members = [MemberResult(name=None, verdict=Verdict.FAIL, reasons=(str(e),))]
    elif kind is ArtifactKind.ARCHIVE:
        members = judge_blob(None, path.read_bytes(), profile, isa)
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


def verify_path(path: Path, profile: Profile, isa: IsaLevel, exports: Sequence[str] = ()) -> list[ArtifactResult]:
    if path.is_dir():
        files = walk(path)
        if not files:
            return [ArtifactResult(path=str(path), kind=ArtifactKind.DIRECTORY, verdict=Verdict.FAIL,
                                   reasons=("no wheel, ELF file or ar archive found under it",))]
        return [verify_file(p, profile, isa, exports) for p in files]
    return [verify_file(path, profile, isa, exports)]
