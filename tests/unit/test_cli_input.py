"""Bad input (issue #13): every case gets one clear line and the exit code of docs/exit-codes.md, never a
traceback. The CLI runs in a subprocess, from the installed package, as a user meets it."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest


def run(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rvport", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def no_traceback(cp: subprocess.CompletedProcess) -> bool:
    return "Traceback" not in cp.stderr and "Traceback" not in cp.stdout


# ---- start-up -------------------------------------------------------------------------------------------

# Sends SIGINT to itself when the command line's first heavy module (typer) is about to be imported: a Ctrl-C
# during start-up, at a moment chosen by the import system rather than by a timer.
_INTERRUPT_DURING_IMPORTS = """
import os, signal, sys
class _Hook:
    def find_spec(self, name, path=None, target=None):
        if name == "typer":
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, _Hook())
sys.argv = ["rvport", "recipes", "list"]
"""


@pytest.mark.parametrize("start", [
    "from rvport.cli.entry import main\nmain()",                      # the console script's function
    "import runpy\nrunpy.run_module('rvport', run_name='__main__')",    # python -m rvport
])
def test_ctrl_c_while_importing_prints_interrupted_and_exits_8(start):
    cp = subprocess.run([sys.executable, "-c", _INTERRUPT_DURING_IMPORTS + start], capture_output=True,
                        text=True, timeout=60)
    assert cp.returncode == 8, cp.stderr
    assert cp.stderr.strip() == "interrupted" and no_traceback(cp)


def test_console_script_starts_at_the_entry_module():
    (script,) = [e for e in metadata.entry_points(group="console_scripts") if e.name == "rvport"]
    assert script.value == "rvport.cli.entry:main"
