"""How a build shows progress: a Rich live view on a terminal, plain timestamped lines in CI or logs.

CI systems get folded groups: `::group::` on GitHub Actions, section markers on GitLab CI.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text


@dataclass
class StageView:
    name: str
    mode: str
    status: str = "waiting"
    step: str = ""
    started: float | None = None
    elapsed: float = 0.0
    tail: deque = field(default_factory=lambda: deque(maxlen=6))


class Reporter:
    """Interface the runner talks to; the plain implementation prints lines, never wrapped (soft_wrap): CI logs
    and `::group::` markers must reach the log exactly as written."""

    def __init__(self, console: Console, ci: str | None):
        self.console = console
        self.ci = ci
        self.stages: dict[str, StageView] = {}
        self._section = 0

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def add(self, name: str, mode: str) -> None:
        self.stages[name] = StageView(name=name, mode=mode)

    def _ts(self) -> str:
        return time.strftime("%H:%M:%S")

    def begin(self, name: str, what: str) -> None:
        v = self.stages.setdefault(name, StageView(name=name, mode=""))
        v.status, v.step, v.started = "running", what, v.started or time.monotonic()
        title = f"{name}: {what}"
        if self.ci == "github":
            self.console.print(f"::group::{title}", markup=False, highlight=False, soft_wrap=True)
        elif self.ci == "gitlab":
            self._section += 1
            self.console.print(f"\x1b[0Ksection_start:{int(time.time())}:rvport_{self._section}"
                               f"[collapsed=true]\r\x1b[0K{title}", markup=False, highlight=False, soft_wrap=True)
        else:
            self.console.print(f"[{self._ts()}] {title}", markup=False, highlight=False, soft_wrap=True)

    def line(self, name: str, text: str) -> None:
        v = self.stages.get(name)
        if v:
            v.tail.append(text)
        if self.ci:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def step(self, name: str, text: str) -> None:
        v = self.stages.get(name)
        if v:
            v.step = text

    def end(self, name: str, status: str) -> None:
        v = self.stages.setdefault(name, StageView(name=name, mode=""))
        if v.started is not None:
            v.elapsed = time.monotonic() - v.started
        v.status = status
        if self.ci == "github":
            self.console.print("::endgroup::", markup=False, highlight=False, soft_wrap=True)
        elif self.ci == "gitlab":
            self.console.print(f"\x1b[0Ksection_end:{int(time.time())}:rvport_{self._section}\r\x1b[0K",
                               markup=False, highlight=False, soft_wrap=True)
        self.console.print(f"[{self._ts()}] {name}: {status} ({v.elapsed:.1f}s)", markup=False, highlight=False, soft_wrap=True)

    def note(self, text: str) -> None:
        self.console.print(f"[{self._ts()}] {text}", markup=False, highlight=False, soft_wrap=True)


class LiveReporter(Reporter):
    """A Rich live view per stage: status, elapsed time, current step, the last log lines of the running one."""

    def __enter__(self) -> LiveReporter:
        self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False,
                          get_renderable=self._render)
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(None, None, None)

    def _render(self):
        t = Table(box=None, pad_edge=False, expand=False)
        for col in ("stage", "mode", "status", "time", "step"):
            t.add_column(col)
        now = time.monotonic()
        running = None
        for v in self.stages.values():
            el = v.elapsed if v.status not in ("running",) or v.started is None else now - v.started
            style = {"ok": "green", "cached": "green", "failed": "red", "running": "yellow"}.get(v.status, "")
            t.add_row(Text(v.name), Text(v.mode), Text(v.status, style=style), f"{el:6.1f}s", Text(v.step[:70]))
            if v.status == "running":
                running = v
        tail = Text("\n".join(("  " + l)[:160] for l in running.tail), style="dim") if running else Text("")
        return Group(t, tail)

    def begin(self, name: str, what: str) -> None:
        v = self.stages.setdefault(name, StageView(name=name, mode=""))
        v.status, v.step, v.started = "running", what, v.started or time.monotonic()

    def line(self, name: str, text: str) -> None:
        v = self.stages.get(name)
        if v:
            v.tail.append(text)

    def end(self, name: str, status: str) -> None:
        v = self.stages.setdefault(name, StageView(name=name, mode=""))
        if v.started is not None:
            v.elapsed = time.monotonic() - v.started
        v.status = status

    def note(self, text: str) -> None:
        self._live.console.print(text, markup=False, highlight=False)


def reporter(console: Console, ci: str | None, live: bool) -> Reporter:
    return LiveReporter(console, ci) if live and ci is None else Reporter(console, ci)
