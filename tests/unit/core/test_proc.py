from __future__ import annotations

import logging
import sys

import pytest

from rvport import proc
from rvport.errors import ExitCode


def test_runs_and_returns_output():
    cp = proc.run([sys.executable, "-c", "print('hi')"], capture=True)
    assert cp.returncode == 0 and cp.stdout == "hi\n"


def test_logs_the_quoted_command(caplog):
    with caplog.at_level(logging.DEBUG, logger="rvport.proc"):
        proc.run([sys.executable, "-c", "pass", "two words"])
    assert "'two words'" in caplog.text


def test_missing_program_is_a_typed_error_with_a_hint():
    with pytest.raises(proc.ProgramNotFound) as e:
        proc.run(["rvport-no-such-program-xyz", "--help"])
    assert "not found: rvport-no-such-program-xyz" in e.value.message
    assert "install" in (e.value.hint or "") and e.value.exit_code == ExitCode.HOST_NOT_READY


def test_failure_carries_status_and_output():
    with pytest.raises(proc.CommandFailed) as e:
        proc.run(
            [sys.executable, "-c", "import sys; print('oops', file=sys.stderr); sys.exit(3)"], capture=True
        )
    assert e.value.returncode == 3 and "oops" in e.value.stderr and "exit 3" in e.value.message
    cp = proc.run([sys.executable, "-c", "import sys; sys.exit(3)"], check=False)
    assert cp.returncode == 3


def test_signals_are_named():
    with pytest.raises(proc.CommandFailed) as e:
        proc.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"])
    assert "killed by SIGTERM" in e.value.message
    assert proc.describe_status(-9) == "killed by SIGKILL"
    assert proc.describe_status(127) == "not found (exit 127)"
    assert proc.describe_status(137) == "exit 137 (SIGKILL)"


def test_exit_127_from_a_child_program():
    with pytest.raises(proc.CommandFailed) as e:
        proc.run(["sh", "-c", "rvport-no-such-program-xyz"], capture=True)
    assert "not found (exit 127)" in e.value.message and "not installed" in (e.value.hint or "")


def test_timeout():
    with pytest.raises(proc.CommandFailed, match="timed out"):
        proc.run([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.5)
