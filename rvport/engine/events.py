"""Progress as typed events: what a step is doing now, emitted by the engine beside its log lines and rendered
by the CLI (rvport/cli/progress_view.py), so that nobody reads rvport's own lines back into numbers.

A `Phase` says the phase ("unpacking", "configuring", a buildx stage "build"), how far (`done` of `total`, or
`done` counted so far when there is no total) and on what (a package, a Dockerfile step). rvport's own
steps make their events directly (bootstrap.py, rootfs_image.py, debprefetch.py); the output of the tools it
runs is read where they are run, each tool by a table of rules (bootstrap.py: debootstrap and dpkg;
buildx.py: buildx's plain progress and the apt lines of the builds), through `PhaseReader`.

An event travels the way the log lines do, by a callback (`OnPhase`, beside `on_line`), up to the Progress
protocol's `phase(name, event)` (rvport/engine/progress.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MAX_COUNT = 999_999_999  # a count read from a tool's line has at most nine digits (the rules' patterns)
MAX_WHAT = 160  # characters of `what` kept


@dataclass(frozen=True, slots=True, kw_only=True)
class Phase:
    """What a step is doing now."""

    phase: str  # "unpacking", "configuring", "build" (a buildx stage), ...
    done: int | None = None  # how many of `total`, or counted so far (None: not counted)
    total: int | None = None
    what: str = ""  # the package or step it is on now

    def __post_init__(self) -> None:
        for name in ("done", "total"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= MAX_COUNT:
                raise ValueError(f"Phase.{name} out of range: {value}")


OnPhase = Callable[[Phase], None]


def ignore(_event: Phase) -> None:
    """An OnPhase that drops the event (a caller that shows no phase)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """A line of a tool's output that names a phase. The pattern may name groups: `phase` (the phase, instead
    of `phase` here), `what`, and `n` and `m` (a count and its total). `counted`: the lines of the phase are
    counted when the line gives no count (False: a phase whose lines are not items of it, a buildx step)."""

    pattern: re.Pattern[str]
    phase: str = ""
    counted: bool = True


class PhaseReader:
    """The lines of one run of a tool, read by its rules (the first that matches): each line that names a
    phase becomes a Phase event for `on_phase`. A rule with `n` and `m` gives the count; otherwise the lines
    of one phase are counted (a phase's first line with a `what` is 1), and a new phase starts the count
    again."""

    def __init__(self, rules: Sequence[Rule], on_phase: OnPhase):
        self.rules, self.on_phase = rules, on_phase
        self.last: Phase | None = None

    def __call__(self, line: str) -> Phase | None:
        """Read one line; the event it made (already given to on_phase), or None."""
        for rule in self.rules:
            match = rule.pattern.match(line)
            if match is None:
                continue
            g = match.groupdict()
            phase = (g.get("phase") or rule.phase).lower()
            what = (g.get("what") or "").strip()[:MAX_WHAT]
            last = self.last if self.last is not None and self.last.phase == phase else None
            if g.get("n") is not None and g.get("m") is not None:
                done, total = int(g["n"]), int(g["m"])
            elif not rule.counted:
                done, total = None, None
            elif last is None:
                done, total = (1 if what else None), None
            elif what:
                done, total = min((last.done or 0) + 1, MAX_COUNT), None
            else:
                done, total = last.done, None
            self.last = Phase(phase=phase, done=done, total=total, what=what)
            self.on_phase(self.last)
            return self.last
        return None


def reading(rules: Sequence[Rule], on_line: Callable[[str], None] | None, on_phase: OnPhase | None):
    """The on_line of a tool's run: each line to `on_line`, and read by `rules` for `on_phase`."""
    reader = PhaseReader(rules, on_phase) if on_phase is not None else None

    def each(line: str) -> None:
        if on_line is not None:
            on_line(line)
        if reader is not None:
            reader(line)

    return each
