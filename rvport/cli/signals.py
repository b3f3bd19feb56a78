"""Ctrl-C and SIGTERM as KeyboardInterrupt, for the whole run (rvport.cli.entry installs them first thing).
Only the standard library: this is imported before anything heavy."""

from __future__ import annotations

import signal


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def install_handlers() -> None:
    """Ctrl-C and a CI system's cancel (SIGTERM) stop a run cleanly, even when started from a shell that made
    background jobs ignore SIGINT (Python then installs no handler of its own)."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
