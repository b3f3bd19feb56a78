"""rvport verify: prove every artifact's architecture, ABI and RISC-V extensions from its ELF files.

    from rvport.verify import verify_paths
    report = verify_paths([Path("dist")], get_profile("rvv256"), isa="profile")
    report.ok, report.to_json()
"""

from __future__ import annotations

import os
from pathlib import Path

from rvport.errors import UsageError
from rvport.catalogue.profiles import Profile
from rvport.verify.artifacts import verify_path
from rvport.verify.model import ArtifactKind, ArtifactResult, MemberResult, VerifyReport, WheelInfo
from rvport.verify.policy import IsaLevel, Verdict

__all__ = [
    "ArtifactKind",
    "ArtifactResult",
    "IsaLevel",
    "MemberResult",
    "Verdict",
    "VerifyReport",
    "WheelInfo",
    "verify_paths",
]


def verify_paths(paths: list[Path], profile: Profile, isa: str = "profile") -> VerifyReport:
    """Verify wheels, ar archives, ELF files and directories of them against a profile.

    `isa` is "profile" (objects must carry Profile.requires) or "baseline" (Profile.baseline only; the
    profile's ceiling still applies). Raises UsageError for a bad isa level, no paths, or a missing path;
    a bad artifact is never an exception but a failed verdict in the report."""
    try:
        level = IsaLevel(isa)
    except ValueError:
        raise UsageError(f"unknown isa level {isa!r}", hint="use 'profile' or 'baseline'") from None
    if not paths:
        raise UsageError("no artifacts to verify", hint="pass at least one wheel, archive, ELF file or directory")
    missing = [str(p) for p in paths if not _exists(Path(p))]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}")
    results: list[ArtifactResult] = []
    for p in paths:
        results += verify_path(Path(p), profile, level)
    return VerifyReport(profile=profile.name, march=profile.march, mabi=profile.mabi, isa=level,
                        artifacts=tuple(results))


def _exists(path: Path) -> bool:
    """False only when nothing is there: a path that cannot be reached (permissions) is verified, and fails
    with the reason."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return True
