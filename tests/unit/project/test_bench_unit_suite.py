"""bench/unit_suite.py: the outcome counts and the slowest tests read from pytest's JUnit XML."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_unit_suite", ROOT / "bench" / "unit_suite.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="5">
<testcase classname="tests.unit.a.test_x" name="test_fast" time="0.002" />
<testcase classname="tests.unit.a.test_x" name="test_slow[1]" time="2.5" />
<testcase classname="tests.unit.a.test_x" name="test_broken" time="0.4">
<failure message="no">x</failure></testcase>
<testcase classname="tests.unit.b.test_y" name="test_setup" time="0.1">
<error message="boom">y</error></testcase>
<testcase classname="tests.unit.b.test_y" name="test_skip" time="0"><skipped message="no gcc" /></testcase>
</testsuite></testsuites>
"""


def test_outcomes_counts_each_kind_and_orders_the_slowest_first(tmp_path, monkeypatch):
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    monkeypatch.setattr(bench, "SLOWEST", 2)
    counts, slowest = bench.outcomes(junit)
    assert counts == {"passed": 2, "failed": 1, "error": 1, "skipped": 1}
    assert slowest == [
        {"test": "tests.unit.a.test_x::test_slow[1]", "seconds": 2.5},
        {"test": "tests.unit.a.test_x::test_broken", "seconds": 0.4},
    ]
