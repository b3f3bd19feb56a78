#!/usr/bin/env python3
"""The unit suite's wall time, once, as a record (issue #35: under 60 s on 2 cores).

    .venv/bin/python bench/unit_suite.py --record NAME            # one process, as .venv/bin/pytest runs it
    .venv/bin/python bench/unit_suite.py --record NAME -n 2       # with xdist's workers

Runs `.venv/bin/pytest -q -p no:cacheprovider tests/unit` (the pytest beside this interpreter, in this
checkout, with its JUnit XML in a temporary directory) and writes records/unit-suite/NAME.json: the wall
seconds, the CPU seconds pytest and its children used, the outcome counts, pytest's exit status and the
slowest tests (each test's setup, call and teardown together, from the JUnit XML; --junit keeps it). The
load average is sampled beside the run and recorded: on a shared machine other work moves the wall time, so
a figure says the load it was measured at; so are the PYTHON* variables that change what a run compiles
(PYTHONDONTWRITEBYTECODE: no bytecode cache, so every run compiles the tests and rvport anew). Exit status:
pytest's.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, LoadAverage, stop_on_signals, write_record  # noqa: E402

SLOWEST = 15
# what the interpreter reads that moves the figures
PYTHON_ENV = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONOPTIMIZE", "PYTHONDEVMODE")


def outcomes(junit: Path) -> tuple[dict[str, int], list[dict]]:
    """(counts by outcome, the SLOWEST tests by their whole time) from pytest's JUnit XML."""
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    times = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        kind = (
            "failed" if "failure" in kinds else "error" if "error" in kinds else kinds.pop() if kinds else ""
        )
        counts[kind or "passed"] += 1
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        times.append({"test": name, "seconds": round(float(case.get("time") or 0), 2)})
    times.sort(key=lambda t: -t["seconds"])
    return counts, times[:SLOWEST]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", required=True, help="the record's name: records/unit-suite/NAME.json")
    ap.add_argument("-n", dest="workers", help="xdist's -n (a number or auto); without it, one process")
    ap.add_argument("--junit", type=Path, help="keep pytest's JUnit XML here (every test's time)")
    args = ap.parse_args()
    stop_on_signals()
    pytest = Path(sys.executable).parent / "pytest"
    command = [str(pytest.relative_to(ROOT)) if pytest.is_relative_to(ROOT) else str(pytest)]
    command += ["-q", "-p", "no:cacheprovider", "tests/unit"]
    if args.workers:
        command += ["-n", args.workers]
    with tempfile.TemporaryDirectory(prefix="rvport-unit-bench-") as tmp:
        junit = args.junit.resolve() if args.junit else Path(tmp) / "junit.xml"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        with LoadAverage(every=5) as load:
            t0 = time.monotonic()
            p = subprocess.Popen([str(pytest), *command[1:], f"--junitxml={junit}"], cwd=ROOT)
            try:
                rc = p.wait()
            except BaseException:
                p.terminate()
                p.wait()
                raise
            wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        counts, slowest = outcomes(junit) if junit.is_file() else ({}, [])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    figures = {
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "workers": args.workers or "1 (no xdist)",
        "exit_status": rc,
        "tests": counts,
        # set, Python writes no bytecode: every run compiles the tests (and pytest rewrites their asserts) and
        # every fresh interpreter compiles rvport again
        "python_env": {k: os.environ[k] for k in sorted(os.environ) if k in PYTHON_ENV},
        "slowest": slowest,
    }
    path = write_record(
        "unit-suite",
        args.record,
        command=["bench/unit_suite.py", *sys.argv[1:]],
        figures=figures,
        load=load.summary(),
    )
    print(f"{wall:.1f} s wall, {cpu:.1f} s CPU, {counts}, load {load.describe()}: {path.relative_to(ROOT)}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
