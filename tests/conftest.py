"""Every test runs against the rvport that is installed, as a user gets it: from the wheel in a virtual
environment, not from this checkout. The checkout is never the working directory of a test (so neither
`python -m rvport` in a subprocess nor a relative path can reach it), and a non-editable install that is
shadowed by the checkout stops the run before any test."""

from __future__ import annotations

import json
import os
import tempfile
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _editable() -> bool:
    """Is rvport installed in editable (development) mode, `pip install -e`?"""
    try:
        text = metadata.distribution("rvport").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return False
    return bool(text) and bool(json.loads(text).get("dir_info", {}).get("editable"))


def pytest_collection_finish(session: pytest.Session) -> None:
    # after collection, so that test paths given relative to the checkout are found (also by xdist's workers,
    # which collect them again)
    os.chdir(tempfile.mkdtemp(prefix="rvport-tests-cwd-"))


def pytest_configure(config: pytest.Config) -> None:
    import rvport

    where = Path(rvport.__file__).resolve()
    try:
        metadata.distribution("rvport")
    except metadata.PackageNotFoundError:
        pytest.exit(
            "rvport is not installed: install it first (python3 -m venv .venv && .venv/bin/pip install "
            "'.[test]'), then run .venv/bin/pytest",
            returncode=4,
        )
    # the checkout's own package directory, not a virtual environment that happens to live inside the checkout
    if not _editable() and where.is_relative_to(ROOT / "rvport"):
        pytest.exit(
            f"the tests import rvport from the checkout ({where}), not from the installed wheel: run the "
            "venv's pytest (.venv/bin/pytest), not python -m pytest from the checkout",
            returncode=4,
        )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """`@needs(tool, ...)` (tests/fixtures/hosttools.py): skipped for a missing host tool, failed under CI."""
    marker = item.get_closest_marker("needs_tool")
    if marker is not None:
        from tests.fixtures.hosttools import need

        need(*marker.args)
