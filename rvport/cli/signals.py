"""Ctrl-C and SIGTERM as KeyboardInterrupt, for the whole run (rvport.cli.entry installs them first thing),
and the end of the run, after which an interrupt is noted, never obeyed raw. Only the standard library: this
is imported before anything heavy."""

from __future__ import annotations

import signal
import sys

_late: list[int] | None = None  # once the command is over (finish): the signals that arrived since


def _interrupt(signum: int, _frame: object) -> None:
    if _late is not None:
        _late.append(signum)
        return
    raise KeyboardInterrupt(signal.Signals(signum).name)


def install_handlers() -> None:
    """Ctrl-C and a CI system's cancel (SIGTERM) stop a run cleanly, even when started from a shell that made
    background jobs ignore SIGINT (Python then installs no handler of its own)."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


def finish() -> bool:
    """The command is over: note (not raise) an interrupt while its output is flushed, then ignore both
    signals to the process's end. Without this, a Ctrl-C while the interpreter shuts down (Python puts the
    default handlers back then) killed the process silently: exit 130, no message. True when an interrupt
    arrived between this call and the end of the flush: the caller says so."""
    global _late
    _late = []
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass  # closed or gone: the interpreter's own exit reports it, as before
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an ignored signal stays ignored through the shutdown
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return bool(_late)
