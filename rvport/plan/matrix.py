"""The VLEN matrix as planned: one command line's request for several profiles made one request per profile,
each into its own output directory (OUTPUT/<profile>/), as a build for that profile alone would be planned and
written. Pure: no file is read, nothing runs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rvport.catalogue.profiles import Profile
from rvport.errors import UsageError
from rvport.plan.planner import Request

MATRIX_FILE = "matrix.json"  # OUTPUT/matrix.json, beside the profiles' directories


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One profile of the matrix: its request (the command line's, for this profile) and where its build
    writes (plan.json, result.json, logs/, artifacts/ as a build of this profile alone would)."""

    profile: Profile
    request: Request
    output: Path
    other_vlen: int | None = None  # a vector profile's: its smoke test also runs on a CPU of this VLEN


def cells(
    req: Request, profiles: Sequence[Profile], output: Path, *, every: Sequence[Profile] = ()
) -> tuple[Cell, ...]:
    """The matrix of `req` over `profiles`, in the order given; a profile named twice, or none, is a usage
    error (exit 2). Each cell's request differs from `req` by its profile alone; a vector profile's cell
    names the other VLEN among `every` (the catalogue's profiles) its smoke test also runs at."""
    if not profiles:
        raise UsageError("a build matrix needs a profile", hint="e.g. --profile rv64gc,rvv256")
    names = [p.name for p in profiles]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(
            f"--profile names {', '.join(twice)} twice", hint="name each profile of the matrix once"
        )
    return tuple(
        Cell(
            profile=p,
            request=replace(req, profile=p),
            output=output / p.name,
            other_vlen=other_vlen(p, every),
        )
        for p in profiles
    )


def other_vlen(profile: Profile, profiles: Sequence[Profile]) -> int | None:
    """The VLEN at which a vector profile's wheels are smoke-tested once more in a matrix: the first other
    VLEN among the profiles (rvv128's 256, rvv256's 128); None for a profile without V, or when no profile
    has another VLEN."""
    if profile.vlen <= 0:
        return None
    return next((p.vlen for p in profiles if p.vlen > 0 and p.vlen != profile.vlen), None)


_VLEN = re.compile(r"(?<![^,])vlen=[0-9]+(?![^,])")


def other_vlen_check(profile: Profile, vlen: int, *, exact: bool) -> dict[str, object]:
    """The smoke test's run on a CPU of another VLEN, as data: the CPU (the profile's own, its `vlen=` the
    other), and the outcome expected: `refused` (it must not pass) when the stage's outputs assume the VLEN
    they were built for (`vlen: exact`); else `pass` at a larger VLEN (code that does not assume its VLEN runs
    at any VLEN from the profile's up), and `any` at a smaller one, below the profile's zvl: GCC may assume
    that minimum in any code it vectorizes, so nothing is promised there and the run is recorded only."""
    if not _VLEN.search(profile.qemu_cpu):
        raise ValueError(f"profile {profile.name}'s QEMU CPU names no vlen=")
    cpu = _VLEN.sub(f"vlen={int(vlen)}", profile.qemu_cpu)
    expected = "refused" if exact else "pass" if int(vlen) > profile.vlen else "any"
    return {"vlen": int(vlen), "cpu": cpu, "expected": expected}
