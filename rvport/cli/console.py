"""Output: one Rich console for people (stderr) and plain lines when not on a terminal or in CI.

Both consoles are SafeConsoles: whatever a view, the progress display or an error message puts in them, a
control character in the text (an escape sequence in a wheel member's name, a recipe field, a build's
output) is shown escaped (rvport.safetext), never obeyed by the terminal. Rich's own styles and cursor
movements are left alone. Markup is a separate matter: views put names in Text, never in markup strings.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from rich.console import Console
from rich.segment import Segment

from rvport.safetext import printable


def detect_ci() -> str | None:
    """Which CI system runs us, if any: 'github', 'gitlab' or 'generic'."""
    if os.environ.get("GITHUB_ACTIONS") == "true":
        return "github"
    if os.environ.get("GITLAB_CI"):
        return "gitlab"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        return "generic"
    return None


class SafeConsole(Console):
    """A Rich console that escapes control characters in the text it renders (rvport.safetext.printable),
    at the one place every print, table, live display and log passes through: Rich's own control segments
    (cursor movement, the live view's redraws) and styles are kept."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            s if s.control else Segment(printable(s.text), s.style, s.control) for s in buffer
        )


@dataclass
class UI:
    """How this run talks: console for humans, CI mode, debug."""

    console: Console
    err: Console
    ci: str | None = None
    debug: bool = False

    @property
    def live(self) -> bool:
        return self.err.is_terminal and self.ci is None


_ui: UI | None = None


def ui() -> UI:
    global _ui
    if _ui is None:
        configure()
    assert _ui is not None
    return _ui


def configure(*, ci: str | None = None, force_ci: bool = False, debug: bool = False) -> UI:
    global _ui
    ci = ci or detect_ci() or ("generic" if force_ci else None)
    no_color = bool(os.environ.get("NO_COLOR")) or ci is not None and not sys.stdout.isatty()
    # On a terminal, or with COLUMNS set, Rich takes the width from there; into a pipe or file, 140 columns.
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS", "").strip().isdigit() else 140
    _ui = UI(
        console=SafeConsole(no_color=no_color, highlight=False, soft_wrap=False, width=width),
        err=SafeConsole(stderr=True, no_color=no_color, highlight=False, soft_wrap=not sys.stderr.isatty()),
        ci=ci,
        debug=debug,
    )
    return _ui
