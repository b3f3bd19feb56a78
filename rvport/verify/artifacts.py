"""Walk artifacts: wheels (wheel.py), GNU/BSD ar archives (ar.py), shared objects, executables, relocatable
objects, and directories of them."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from rvport.catalogue.profiles import Profile
from rvport.verify.ar import AR_MAGIC, AR_THIN_MAGIC, ArchiveError, iter_ar_members
from rvport.verify.elf import ELF_MAGIC, ElfReadError, read_elf
from rvport.verify.exports import check_exports
from rvport.verify.filehash import size_sha
from rvport.verify.judge_binary import judge_stream, member_result
from rvport.verify.limits import DEFAULT_LIMITS, REASON, Limits, OverLimit
from rvport.verify.model import ArtifactResult, MemberResult
from rvport.verify.policy import IsaLevel, Verdict
from rvport.verify.wheel import verify_wheel
from rvport.vocab import ArtifactKind

__all__ = [
    "ArchiveError",
    "NotRegularFile",
    "classify",
    "iter_ar_members",
    "verify_file",
    "verify_path",
    "verify_wheel",
    "walk",
]


# ---- files and directories ----------------------------------------------------------------------------

_NOT_REGULAR = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


class NotRegularFile(OSError):
    """A path that is not a regular file: verify never opens a FIFO or device for reading (it could block, or
    never end)."""

    def __init__(self, path: Path, what: str):
        super().__init__(f"{path} is {what}")
        self.what = what


def not_regular(mode: int) -> str | None:
    """What a file of this st_mode is, when it is not a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _NOT_REGULAR if test(mode)), "not a regular file")


def _head(path: Path) -> bytes:
    """The first bytes of a regular file. Opened without blocking and checked again once open, so that a FIFO
    put in its place after the caller's stat is never waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        what = not_regular(os.fstat(fd).st_mode)
        if what:
            raise NotRegularFile(path, what)
        return os.read(fd, 8)
    finally:
        os.close(fd)


def _kind(path: Path, head: bytes) -> ArtifactKind:
    if head[:4] == ELF_MAGIC:
        return ArtifactKind.ELF
    if head[:8] in (AR_MAGIC, AR_THIN_MAGIC):
        return ArtifactKind.ARCHIVE
    if path.name.endswith(".whl"):
        return ArtifactKind.WHEEL
    return ArtifactKind.OTHER


def classify(path: Path) -> ArtifactKind:
    """What kind of artifact a file is, by content (and .whl by name). Raises OSError when it cannot be read,
    NotRegularFile for a FIFO, socket or device."""
    what = not_regular(os.stat(path).st_mode)
    if what:
        raise NotRegularFile(path, what)
    return _kind(path, _head(path))


def _unreadable(path: Path, kind: ArtifactKind, e: OSError) -> ArtifactResult:
    if isinstance(e, NotRegularFile):
        why = f"{e.what}, not a regular file: not read"
    else:
        why = f"cannot read{' directory' if kind is ArtifactKind.DIRECTORY else ''}: {e.strerror or e}"
    return ArtifactResult(path=str(path), kind=kind, verdict=Verdict.FAIL, reasons=(why,))


def verify_file(
    path: Path,
    profile: Profile,
    isa: IsaLevel,
    exports: Sequence[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    *,
    vlen_exact: bool = False,
) -> ArtifactResult:
    """Judge one file; with `exports`, also that it exports those functions (exports.py). Within the caps
    (limits.py): over one, the file fails with the reason, never an exception. `vlen_exact`: its vector code
    assumes the VLEN it was built for (policy.rule_vlen)."""
    result = _verify_file(path, profile, isa, limits, vlen_exact)
    if not exports or not result.ok and not result.members:
        return result
    j = check_exports(path, result.kind, exports, limits)
    return replace(
        result,
        verdict=Verdict.FAIL if j.reasons or not result.ok else Verdict.PASS,
        reasons=result.reasons + j.reasons,
        notes=result.notes + j.notes,
    )


def _verify_file(
    path: Path, profile: Profile, isa: IsaLevel, limits: Limits, vlen_exact: bool
) -> ArtifactResult:
    try:
        kind = classify(path)
        file_size = os.stat(path).st_size
    except OSError as e:
        return _unreadable(path, ArtifactKind.OTHER, e)
    if file_size > limits.file_bytes:
        why = OverLimit("bytes of the file", file_size, "file_bytes", limits.file_bytes)
        return ArtifactResult(
            path=str(path),
            kind=kind,
            verdict=Verdict.FAIL,
            reasons=(f"{REASON}: {why}; not read",),
            size=file_size,
        )
    if kind is ArtifactKind.WHEEL:
        return verify_wheel(path, profile, isa, limits, vlen_exact=vlen_exact)
    size, sha = size_sha(path)
    if kind is ArtifactKind.ELF:
        try:
            with open(path, "rb") as f:
                members = [member_result(None, read_elf(f, limits), profile, isa, vlen_exact=vlen_exact)]
        except ElfReadError as e:
            members = [MemberResult(name=None, verdict=Verdict.FAIL, reasons=(str(e),))]
        except OSError as e:
            return _unreadable(path, kind, e)
    elif kind is ArtifactKind.ARCHIVE:
        try:  # member by member, where each lies: an archive of any size takes no memory
            with open(path, "rb") as f:
                members = judge_stream(None, f, profile, isa, limits, vlen_exact=vlen_exact)
        except OSError as e:
            return _unreadable(path, kind, e)
        if not members:
            return ArtifactResult(
                path=str(path),
                kind=kind,
                verdict=Verdict.FAIL,
                reasons=("archive has no members",),
                size=size,
                sha256=sha,
            )
    else:
        return ArtifactResult(
            path=str(path),
            kind=kind,
            verdict=Verdict.FAIL,
            reasons=("not an ELF file, ar archive or wheel",),
            size=size,
            sha256=sha,
        )
    verdict = Verdict.PASS if all(m.ok for m in members) else Verdict.FAIL
    return ArtifactResult(
        path=str(path), kind=kind, verdict=verdict, members=tuple(members), size=size, sha256=sha
    )


def walk(directory: Path) -> tuple[list[Path], list[ArtifactResult]]:
    """Every wheel, ELF file and ar archive under a directory (recursively, sorted; symlinks skipped), plus
    every file that could not be read and every FIFO, socket or device (verify_file fails those at once,
    without opening them); and the failures of the directories that could not be listed."""
    found: list[Path] = []
    errors: list[OSError] = []
    for root, dirs, files in os.walk(directory, onerror=errors.append):
        dirs.sort()
        for fn in sorted(files):
            p = Path(root, fn)
            try:
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    continue
                if not_regular(st.st_mode) or _kind(p, _head(p)) is not ArtifactKind.OTHER:
                    found.append(p)
            except OSError:
                found.append(p)  # verify_file says why it cannot be read
    failed = [_unreadable(Path(e.filename or directory), ArtifactKind.DIRECTORY, e) for e in errors]
    return found, failed


def verify_path(
    path: Path,
    profile: Profile,
    isa: IsaLevel,
    exports: Sequence[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    *,
    vlen_exact: bool = False,
) -> list[ArtifactResult]:
    try:
        is_dir = stat.S_ISDIR(os.stat(path).st_mode)
    except OSError as e:
        return [_unreadable(path, ArtifactKind.OTHER, e)]
    if is_dir:
        files, failed = walk(path)
        if not files and not failed:
            return [
                ArtifactResult(
                    path=str(path),
                    kind=ArtifactKind.DIRECTORY,
                    verdict=Verdict.FAIL,
                    reasons=("no wheel, ELF file or ar archive found under it",),
                )
            ]
        return failed + [verify_file(p, profile, isa, exports, limits, vlen_exact=vlen_exact) for p in files]
    return [verify_file(path, profile, isa, exports, limits, vlen_exact=vlen_exact)]
