"""What the build side tells the user while it works: a protocol, so the build layer never imports the CLI.

Steps and log lines are text for people; what a step is doing now (its phase, n of m, on what) is a typed
event, `events.Phase`, never a line to be read back.

rvport/cli/progress_view.py implements it (a live view on a terminal, plain lines in CI); `SILENT` is for
callers that show nothing (the bake export, tests).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from rvport.engine.events import Phase


@runtime_checkable
class Progress(Protocol):
    def begin(self, name: str, what: str) -> None:
        """Stage `name` starts; `what` says what it builds."""

    def step(self, name: str, text: str) -> None:
        """Stage `name` is now doing `text`."""

    def line(self, name: str, text: str) -> None:
        """One line of output (a log line) of stage `name`."""

    def phase(self, name: str, event: Phase) -> None:
        """What stage `name`'s current step is doing now (rvport/engine/events.py); a new step has none."""

    def end(self, name: str, status: str) -> None:
        """Stage `name` ended: ok, cached, failed or interrupted."""


class Silent:
    """Progress that shows nothing."""

    def begin(self, name: str, what: str) -> None:
        pass

    def step(self, name: str, text: str) -> None:
        pass

    def line(self, name: str, text: str) -> None:
        pass

    def phase(self, name: str, event: Phase) -> None:
        pass

    def end(self, name: str, status: str) -> None:
        pass


SILENT = Silent()
