"""The tree is lint-clean: ruff's check and its formatter, pinned in the test extra, with the rules and the
line length that pyproject.toml declares. A finding fails the suite, so CI holds the tree at zero."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize("args", [["check", "--no-cache"], ["format", "--check", "--no-cache"]])
def test_ruff_finds_nothing(args):
    r = subprocess.run(
        [sys.executable, "-m", "ruff", *args, str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert r.returncode == 0, f"ruff {' '.join(args)}:\n{r.stdout}{r.stderr}"
