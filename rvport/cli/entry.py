"""The process entry point (the `rvport` script and `python -m rvport`).

It installs the Ctrl-C and SIGTERM handlers before the command line's modules (Typer, Rich, the catalogue)
are imported, so that an interrupt during start-up ends the run as one at any other time does:
`interrupted`, exit 8, no traceback. Only the standard library is imported here.
"""

from __future__ import annotations

import signal
import sys

INTERRUPTED = 8   # rvport.errors.ExitCode.INTERRUPTED (not imported: only the standard library comes first)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def install_handlers() -> None:
    """Ctrl-C and a CI system's cancel (SIGTERM) stop a run cleanly, even when started from a shell that made
    background jobs ignore SIGINT (Python then installs no handler of its own)."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


def main() -> None:
    install_handlers()
    try:
        from rvport.cli.app import main as run
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(INTERRUPTED) from None
    run()
