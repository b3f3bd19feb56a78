"""A smoke test's report: the checks it made, as data for result.json (stages[].smoke.checks).

The smoke stage (smoke.Dockerfile) gives the test the path RVPORT_SMOKE_REPORT, an empty file the test may
fill with one JSON object:

    {"checks": [{"name": "classifier parity with x86-64", "passed": true,
                 "figures": {"texts": 10, "max_confidence_difference": 2.4e-07, "tolerance": 0.001}}]}

A test that writes nothing has no checks. What it writes is output of the artifacts under test, so it is read
with bounds (REPORT_MAX bytes, CHECKS_MAX checks, FIGURES_MAX figures each, names of at most NAME_MAX and
strings of at most STRING_MAX printable characters; anything longer is refused, not cut) and checked for that
shape; a report that is not of it, or a check that did not pass, fails the smoke test as a non-zero exit
status does (runner.smoke_record).
"""

from __future__ import annotations

import json
import math

REPORT_FILE = "rvport-smoke-report.json"  # exported by smoke.Dockerfile from /
REPORT_MAX = 64 << 10
CHECKS_MAX = 16
FIGURES_MAX = 32
NAME_MAX = 100
STRING_MAX = 300

Scalar = bool | int | float | str | None


def _scalar(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return len(value) <= STRING_MAX and value.isprintable()
    return value is None or isinstance(value, bool | int)


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > NAME_MAX or not value.isprintable():
        raise ValueError(f"{what} is not a printable string of 1 to {NAME_MAX} characters")
    return value


def _check(doc: object, n: int) -> dict:
    what = f"check {n}"
    if not isinstance(doc, dict) or set(doc) - {"name", "passed", "figures"}:
        raise ValueError(f"{what} is not an object of name, passed and figures")
    name = _name(doc.get("name"), f"{what}'s name")
    passed = doc.get("passed")
    if not isinstance(passed, bool):
        raise ValueError(f"{what} ({name}) has no passed: true or false")
    figures = doc.get("figures", {})
    if not isinstance(figures, dict) or len(figures) > FIGURES_MAX:
        raise ValueError(f"{what} ({name})'s figures are not an object of at most {FIGURES_MAX} entries")
    for key, value in figures.items():
        _name(key, f"a figure name of {what}")
        if not _scalar(value):
            raise ValueError(
                f"{what} ({name})'s figure {key} is not a number, a short string, true, false or null"
            )
    return {"name": name, "passed": passed, "figures": dict(figures)}


def parse(data: bytes) -> list[dict]:
    """The checks of a report's bytes (none for an empty report). ValueError says what is wrong with it."""
    if not data.strip():
        return []
    if len(data) > REPORT_MAX:
        raise ValueError(f"it is over {REPORT_MAX} bytes")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ValueError(f"it is not JSON ({type(e).__name__})") from None
    if not isinstance(doc, dict) or set(doc) != {"checks"} or not isinstance(doc["checks"], list):
        raise ValueError('it is not an object {"checks": [...]}')
    if not 1 <= len(doc["checks"]) <= CHECKS_MAX:
        raise ValueError(f"it holds {len(doc['checks'])} checks, not 1 to {CHECKS_MAX}")
    checks = [_check(c, i + 1) for i, c in enumerate(doc["checks"])]
    names = [c["name"] for c in checks]
    if len(set(names)) != len(names):
        raise ValueError("two of its checks have the same name")
    return checks


def failed(checks: list[dict]) -> list[str]:
    """The names of the checks that did not pass."""
    return [c["name"] for c in checks if not c["passed"]]
