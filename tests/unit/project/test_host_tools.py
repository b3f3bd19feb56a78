"""A test that needs a host tool says so through tests/fixtures/hosttools.py, so that under CI a missing
tool fails the run instead of skipping: no test may skip for a missing tool on its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.fixtures import hosttools

TESTS = Path(__file__).resolve().parents[2]
# a skip decided by looking a program up: `skipif(... which(...` or `if ... which(...): pytest.skip`
_TOOL_SKIP = re.compile(r"skipif\([^)]*which\(|which\([^\n]*\n\s*pytest\.skip\(", re.S)


def test_no_test_skips_for_a_missing_tool_by_itself():
    offenders = [
        str(p.relative_to(TESTS))
        for p in sorted(TESTS.rglob("*.py"))
        if p.name not in ("hosttools.py", "test_host_tools.py") and _TOOL_SKIP.search(p.read_text())
    ]
    assert offenders == [], f"use tests/fixtures/hosttools.py's needs()/need() in: {offenders}"


def test_a_missing_tool_fails_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="under CI a missing host tool is a failure"):
        hosttools.need("rvport-no-such-tool")


def test_a_missing_tool_skips_elsewhere(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs rvport-no-such-tool on the host"):
        hosttools.need("rvport-no-such-tool")


def test_a_present_tool_passes(monkeypatch):
    monkeypatch.setenv("CI", "true")
    hosttools.need("sh")
    assert hosttools.missing(("sh", "rvport-no-such-tool")) == ["rvport-no-such-tool"]
