"""Session fixtures for the unit tests. Nothing here needs a Docker engine, QEMU or a network: the ELF files
the verifier's tests read are written by tests/fixtures/elfwriter.py (the integration tests run the same
verifier tests on files that GCC and Go compile, tests/integration/test_verify_elfs_built.py). Some unit
tests do run host tools: gcc, binutils (readelf, nm, ar, objcopy), git, gpg and gpgv, go and gofmt, cargo
and shellcheck, each declared with `needs`/`need` (tests/fixtures/hosttools.py): skipped where the tool is
missing, failed under CI, and installed by scripts/setup-host."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:  # so `tests.fixtures` imports however pytest is started: appended, so that the
    sys.path.append(str(_ROOT))  # installed rvport, not the checkout's, is the one imported

from tests.fixtures.elfs import ElfFixtures, write_fixtures  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked `integration` or `network` (it needs the engine, QEMU or a registry) lives in
    tests/integration, never here: the unit suite runs without them (README, "Run the test suite")."""
    here = Path(__file__).resolve().parent
    for item in items:
        if item.path.is_relative_to(here):
            for name in ("integration", "network"):
                if item.get_closest_marker(name):
                    raise pytest.UsageError(f"{item.nodeid} is marked {name}: move it to tests/integration")


@pytest.fixture(scope="session")
def elf_fixtures(tmp_path_factory: pytest.TempPathFactory) -> ElfFixtures:
    """riscv64, x86-64 and Go ELF files, archives of them, written once per session (in milliseconds)."""
    return write_fixtures(tmp_path_factory.mktemp("elfs"))


@pytest.fixture
def sigint():
    """Ctrl-C arrives as KeyboardInterrupt in this test, as rvport's CLI makes it (rvport.cli.signals), also
    when the test run was started with SIGINT ignored (a background job of a shell without job control)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
