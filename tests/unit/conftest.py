"""Session fixtures for the verifier's tests: real ELF files built once per session."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:  # so `tests.fixtures` imports however pytest is started: appended, so that the
    sys.path.append(str(_ROOT))  # installed rvport, not the checkout's, is the one imported

from tests.fixtures.elfs import ElfFixtures, build_fixtures, docker_ready


@pytest.fixture(scope="session")
def elf_fixtures(tmp_path_factory: pytest.TempPathFactory) -> ElfFixtures:
    """riscv64 (cross GCC 14 in docker), x86-64 (host gcc) and Go ELF files, built once per session."""
    why = docker_ready()
    if why:
        if os.environ.get("CI"):  # CI prepares the host (scripts/setup-host): a missing engine is a failure
            pytest.fail(why)
        pytest.skip(why)
    return build_fixtures(tmp_path_factory.mktemp("elfs"))


@pytest.fixture
def sigint():
    """Ctrl-C arrives as KeyboardInterrupt in this test, as rvport's CLI makes it (rvport.cli.signals), also when
    the test run was started with SIGINT ignored (a background job of a shell without job control)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
