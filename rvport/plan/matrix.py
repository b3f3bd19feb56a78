"""The VLEN matrix as planned: one command line's request for several profiles made one request per profile,
each into its own output directory (OUTPUT/<profile>/), as a build for that profile alone would be planned and
written. Pure: no file is read, nothing runs."""

from __future__ import annotations

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


def cells(req: Request, profiles: Sequence[Profile], output: Path) -> tuple[Cell, ...]:
    """The matrix of `req` over `profiles`, in the order given; a profile named twice, or none, is a usage
    error (exit 2). Each cell's request differs from `req` by its profile alone."""
    if not profiles:
        raise UsageError("a build matrix needs a profile", hint="e.g. --profile rv64gc,rvv256")
    names = [p.name for p in profiles]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(
            f"--profile names {', '.join(twice)} twice", hint="name each profile of the matrix once"
        )
    return tuple(Cell(profile=p, request=replace(req, profile=p), output=output / p.name) for p in profiles)
