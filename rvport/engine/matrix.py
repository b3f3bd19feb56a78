"""The VLEN matrix's record, OUTPUT/matrix.json (matrix.schema.json): a row per profile, made from that
profile's result.json alone (None when its build wrote none) and how its build ended (its exit code and
error), with a column each for build (the compile and verify), smoke, the SIGILL check (the smoke test's run
on a CPU without V) and tests (the recipe's upstream tests); and the matrix's exit code, the worst of its
profiles' (WORST_FIRST). Pure functions of those values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rvport.errors import ExitCode
from rvport.safetext import one_line

MATRIX_SCHEMA = 1
COLUMNS = ("build", "smoke", "sigill", "other_vlen", "tests")
ERROR_MAX = 500  # characters of a profile's error kept in its row (its first line)

# A cell's words, the worst first: a profile's column is the worst of its stages' (a stage without a smoke
# test, a SIGILL check or upstream tests says `none`, and counts only when no stage has one).
# `finding`: a VLEN-exact wheel that passed on a CPU of another VLEN (recorded, it fails nothing).
WORDS = ("failed", "interrupted", "not run", "finding", "skipped", "passed", "none")

# The matrix's exit code is the first of these that a profile ended with (docs/exit-codes.md, "A build
# matrix"): what keeps a profile from being judged at all (rvport, the host, the sources, the recipe) before
# a verdict on the tree (a stage failed, then a verification), then a profile that passed.
WORST_FIRST = (
    ExitCode.INTERRUPTED,
    ExitCode.INTERNAL,
    ExitCode.HOST_NOT_READY,
    ExitCode.INTEGRITY,
    ExitCode.SOURCE_UNAVAILABLE,
    ExitCode.RECIPE_INVALID,
    ExitCode.USAGE,
    ExitCode.BUILD_FAILED,
    ExitCode.VERIFY_FAILED,
    ExitCode.CHECK_FAILED,
    ExitCode.OK,
)


@dataclass(frozen=True, kw_only=True)
class Ended:
    """How one profile's build ended: its exit code, and the error's text when it failed (None: it did not
    run, an earlier profile was interrupted)."""

    profile: str
    output: str  # its directory, relative to the matrix's (the profile's name)
    code: ExitCode | None
    error: str | None = None
    result: Mapping | None = None  # its result.json, when it wrote one


def worst(codes: Sequence[ExitCode]) -> ExitCode:
    """The matrix's exit code: the first of WORST_FIRST among `codes` (OK when there are none)."""
    given = set(codes)
    return next((c for c in WORST_FIRST if c in given), ExitCode.OK)


def _worst_word(words: Sequence[str]) -> str:
    return min(words, key=WORDS.index) if words else "not run"


def stage_cells(stage: Mapping) -> dict[str, str]:
    """A result.json stage's five columns. build: passed when the stage built and verified its artifacts
    (ok, cached, or a later check of it ran); smoke, sigill, tests: the record's status, `not run` when the
    stage did not get that far, `none` when it has no such check."""
    status = stage.get("status")
    smoke = stage.get("smoke") or None
    tests = stage.get("tests") or None
    built = status in ("ok", "cached") or smoke is not None or tests is not None
    if built:
        build = "passed"
    elif status in ("interrupted", "not run"):
        build = status
    else:
        build = "failed"
    after = (
        "none" if status in ("ok", "cached") else ("interrupted" if status == "interrupted" else "not run")
    )
    wv = (smoke or {}).get("without_vector")
    return {
        "build": build,
        "smoke": _word((smoke or {}).get("status"), after),
        # a smoke record without a run without V: the recipe asks for none (when it does, the record has it)
        "sigill": _word((wv or {}).get("status"), after if smoke is None else "none"),
        # without a run at another VLEN: not a vector profile of a matrix (none), or the stage failed first
        "other_vlen": _word(((smoke or {}).get("other_vlen") or {}).get("status"), after),
        "tests": _word((tests or {}).get("status"), after),
    }


def _word(status: object, otherwise: str) -> str:
    return status if isinstance(status, str) and status in WORDS else otherwise


def _without_vector(stage: Mapping) -> dict:
    """The runs without V and at another VLEN of a stage's smoke test, when they were judged: what was
    expected and what ended each (sigill, pass, exit N), and the other VLEN."""
    out: dict = {}
    for key, name, fields in (
        ("without_vector", "without_vector", ("expected", "observed")),
        ("other_vlen", "other_vlen_run", ("vlen", "expected", "observed")),
    ):
        run = (stage.get("smoke") or {}).get(key) or {}
        if all(isinstance(run.get(f), (str, int)) for f in fields):
            out[name] = {f: run[f] for f in fields}
    return out


def row(ended: Ended) -> dict:
    """A profile's row: how it ended, its five columns (the worst of its stages'), and each stage's."""
    doc = ended.result or {}
    stages = [
        {
            "id": s.get("id") or s.get("recipe"),
            "version": s.get("version"),
            "status": s.get("status"),
            **stage_cells(s),
            **({"tests_counts": s["tests"].get("counts")} if s.get("tests") else {}),
            **_without_vector(s),
        }
        for s in doc.get("stages") or []
    ]
    if ended.code is None:
        status = "not run"
    elif ended.result is not None:
        status = str(doc.get("status"))
    else:
        status = "ok" if ended.code == ExitCode.OK else "failed"
    cols = {c: _worst_word([s[c] for s in stages]) if stages else "not run" for c in COLUMNS}
    error = one_line(ended.error.strip().splitlines()[0])[:ERROR_MAX] if ended.error else None
    return {
        "profile": ended.profile,
        "output": ended.output,
        "status": status,
        "exit_code": None if ended.code is None else int(ended.code),
        "error": error,
        "failing_stage": doc.get("failing_stage"),
        "duration_s": doc.get("duration_s"),
        **cols,
        "stages": stages,
    }


def record(ended: Sequence[Ended], *, tag: str, started: str, duration_s: float) -> dict:
    """OUTPUT/matrix.json: the rows in the order of --profile, the matrix's status and exit code."""
    rows = [row(e) for e in ended]
    code = worst([e.code for e in ended if e.code is not None])
    if any(r["status"] == "interrupted" for r in rows) or code == ExitCode.INTERRUPTED:
        status = "interrupted"
    else:
        status = "ok" if code == ExitCode.OK and all(r["status"] == "ok" for r in rows) else "failed"
    return {
        "schema": MATRIX_SCHEMA,
        "kind": "rvport-matrix",
        "status": status,
        "exit_code": int(code),
        "tag": tag,
        "profiles": [e.profile for e in ended],
        "started": started,
        "duration_s": round(duration_s, 2),
        "columns": list(COLUMNS),
        "rows": rows,
    }
