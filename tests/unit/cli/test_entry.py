"""The end of a run (rvport/cli/entry.py, signals.finish): a Ctrl-C or SIGTERM in its last moments is said
("interrupted ...", exit 8) or, once everything is flushed, ignored; it never kills the process silently with
130, as Python's default handlers did while the interpreter shut down."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

# The command's output is flushed by signals.finish(): send the signal to ourselves right then, when the
# command itself is over (signals._late is a list from that moment on).
_SIGNAL_WHILE_FLUSHING = """
import os, signal, sys
from rvport.cli import signals
class Out:
    def __init__(self, f): self.f = f
    def __getattr__(self, name): return getattr(self.f, name)
    def flush(self):
        if signals._late is not None and not getattr(self, "sent", False):
            self.sent = True
            os.kill(os.getpid(), signal.SIGNUM)
        return self.f.flush()
sys.stdout = Out(sys.stdout)
sys.argv = ["rvport", "--version"]
from rvport.cli.entry import main
main()
"""

# A signal while the interpreter shuts down (an atexit callback runs then).
_SIGNAL_AT_EXIT = """
import atexit, os, signal, sys
atexit.register(lambda: os.kill(os.getpid(), signal.SIGNUM))
sys.argv = ["rvport", "--version"]
from rvport.cli.entry import main
main()
"""


def _run(code: str, signum: signal.Signals) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code.replace("SIGNUM", signum.name)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_while_the_output_is_flushed_is_said_with_exit_8(signum):
    cp = _run(_SIGNAL_WHILE_FLUSHING, signum)
    assert cp.returncode == 8, (cp.returncode, cp.stderr)
    assert cp.stdout.strip() and "Traceback" not in cp.stderr
    assert cp.stderr.strip() == "interrupted after the command had finished: everything it wrote is complete"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_while_the_interpreter_shuts_down_never_kills_it_silently(signum):
    cp = _run(_SIGNAL_AT_EXIT, signum)
    assert cp.returncode == 0, (cp.returncode, cp.stderr)  # the command had finished and said all it had to
    assert cp.stdout.strip() and cp.stderr == ""
