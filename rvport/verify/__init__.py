"""rvport verify: prove every artifact's architecture, ABI and RISC-V extensions from its ELF files.

from rvport.verify import verify_paths
report = verify_paths([Path("dist")], get_profile("rvv256"), isa="carries")
report.ok, report.to_json()
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from rvport.catalogue.profiles import Profile
from rvport.errors import UsageError
from rvport.verify.artifacts import verify_file, verify_path
from rvport.verify.limits import DEFAULT_LIMITS, Limits
from rvport.verify.model import ArtifactResult, MemberResult, VerifyReport, WheelInfo
from rvport.verify.policy import IsaLevel, Verdict
from rvport.verify.provenance import Provenance, is_vlen_exact
from rvport.verify.provenance import check as check_provenance
from rvport.vocab import ArtifactKind

__all__ = [
    "ArtifactKind",
    "ArtifactResult",
    "IsaLevel",
    "Limits",
    "MemberResult",
    "Verdict",
    "VerifyReport",
    "WheelInfo",
    "isa_level",
    "verify_paths",
]


def verify_paths(
    paths: list[Path],
    profile: Profile,
    isa: str = IsaLevel.RUNS_ON,
    *,
    exports: Sequence[str] = (),
    provenance: Provenance | None = None,
    limits: Limits = DEFAULT_LIMITS,
    vlen_exact: bool = False,
) -> VerifyReport:
    """Verify wheels, ar archives, ELF files and directories of them against a profile.

    `isa` is "runs-on" (everything an object needs is within the profile: it runs on the profile's CPUs) or
    "carries" (runs on, and carries every extension the profile promises, Profile.requires); the older names
    "baseline" and "profile" mean the same two. `exports`: function names every artifact must export (an ELF
    file's dynamic symbol table, or some member of an ar archive). `provenance` (provenance.load): every
    artifact must be one of its subjects, with the same sha256; a subject it names VLEN-exact (a recipe's
    `vlen: exact` output) is judged so. `vlen_exact`: every artifact's vector code assumes the VLEN it was
    built for, and fails on a profile of another (policy.rule_vlen). `limits`: the caps on the work done per
    artifact (limits.py); an artifact over one fails, with the cap named. Raises UsageError for a bad isa
    level, no paths, or a missing path; a bad artifact is never an exception but a failed verdict in the
    report."""
    level = isa_level(isa)
    if not paths:
        raise UsageError(
            "no artifacts to verify", hint="pass at least one wheel, archive, ELF file or directory"
        )
    missing = [str(p) for p in paths if not _exists(Path(p))]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}")
    results: list[ArtifactResult] = []
    for p in paths:
        results += verify_path(Path(p), profile, level, exports, limits, vlen_exact=vlen_exact)
    if provenance is not None:
        results = [
            verify_file(Path(a.path), profile, level, exports, limits, vlen_exact=True)
            if not vlen_exact and is_vlen_exact(provenance, a.sha256) and a.kind is not ArtifactKind.DIRECTORY
            else a
            for a in results
        ]
        results = [_against(provenance, a) for a in results]
    return VerifyReport(
        profile=profile.name,
        march=profile.march,
        mabi=profile.mabi,
        isa=level,
        artifacts=tuple(results),
        vlen_exact=vlen_exact,
    )


def isa_level(value: str) -> IsaLevel:
    """An IsaLevel from its name (or an older name); UsageError for anything else."""
    try:
        return IsaLevel(value)
    except ValueError:
        names = ", ".join(level.value for level in IsaLevel)
        raise UsageError(
            f"unknown isa level {value!r}",
            hint=f"choose one of: {names} (older names: profile = carries, baseline = runs-on)",
        ) from None


def _against(prov: Provenance, a: ArtifactResult) -> ArtifactResult:
    if a.kind is ArtifactKind.DIRECTORY:
        return a
    reasons, notes = check_provenance(prov, a.path, a.sha256)
    return replace(
        a,
        verdict=Verdict.FAIL if reasons or not a.ok else Verdict.PASS,
        reasons=a.reasons + tuple(reasons),
        notes=a.notes + tuple(notes),
    )


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
