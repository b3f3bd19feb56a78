"""How a build shows progress: a Rich live view on a terminal, plain timestamped lines in CI or logs.

CI systems get folded groups: `::group::` on GitHub Actions, section markers on GitLab CI.

Every output mode shows that a long step is alive:
- the terminal's live view shows each running step's elapsed time, its phase (a base bootstrap's
  "configuring 45/213 (libc6)", a buildx step "build 3/5 (RUN ...)") and the last log lines;
- plain and CI output print each step when it starts and, while it runs, a heartbeat at least every
  `heartbeat` seconds (30 by default) from a timer thread, so it fires even when the step prints nothing:
  which step, how long so far, its phase, the last log line.

The phase is the engine's typed event (`rvport.engine.events.Phase`: phase, n of m, what), given by
`phase()`; this module renders it and reads no line: what debootstrap, dpkg and buildx print is read in the
engine, next to the code that runs them.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from rvport.engine.events import Phase

HEARTBEAT_S = 30.0


def describe(event: Phase | None) -> str:
    """A phase as the live view and the heartbeats show it: 'configuring 45/213 (libc6)', 'retrieving 2
    (zlib1g)', 'build 3/5 (RUN make)', 'first stage'."""
    if event is None or not event.phase:
        return ""
    if event.total is not None:
        count = f" {event.done or 0}/{event.total}"
    else:
        count = f" {event.done}" if event.done else ""
    return f"{event.phase}{count}" + (f" ({event.what})" if event.what else "")


def duration(seconds: float) -> str:
    """'45s', '2m05s', '1h02m'."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


@dataclass
class StageView:
    name: str
    mode: str
    status: str = "waiting"
    step: str = ""
    started: float | None = None
    elapsed: float = 0.0
    tail: deque = field(default_factory=lambda: deque(maxlen=6))
    step_started: float | None = None
    last_beat: float | None = None  # when this step last printed something of its own (start or heartbeat)
    phase: Phase | None = None  # what the current step is doing now (the engine's events)


class Reporter:
    """Interface the runner talks to; the plain implementation prints lines, never wrapped (soft_wrap): CI
    logs and `::group::` markers must reach the log exactly as written.

    `clock` and `heartbeat` are there for tests (a fake clock, a short interval); `tick()` is what the timer
    thread calls. `label` (a build matrix's profile, when profiles are built side by side): every line starts
    with `[label]`, and no CI group is opened, since another profile's lines come between."""

    def __init__(
        self,
        console: Console,
        ci: str | None,
        *,
        heartbeat: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
        label: str | None = None,
    ):
        self.console = console
        self.ci = ci
        self.label = label
        self.stages: dict[str, StageView] = {}
        self._section = 0
        self.heartbeat = heartbeat
        self.clock = clock
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Reporter:
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name="rvport-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _beat(self) -> None:
        # wake often enough that a heartbeat is at most a second (or a tenth of the interval) late
        every = max(0.01, min(1.0, self.heartbeat / 10))
        while not self._stop.wait(every):
            self.tick()

    def _print(self, text: str, *, raw: str = "") -> None:
        """A line; its text is escaped by the console (SafeConsole). raw: our own control sequence before it
        (a GitLab section marker), written as it is: no Live view runs in CI mode, and the console writes
        each print at once."""
        with self._lock:
            if raw:
                self.console.file.write(raw)
            if self.label is not None:
                text = f"[{self.label}] {text}"
            # one line: a newline in a name or a log line cannot start a line of its own (a forged one)
            self.console.print(text.replace("\n", "\\n"), markup=False, highlight=False, soft_wrap=True)

    @property
    def _groups(self) -> str | None:
        """The CI whose collapsible groups the lines open and close (none for a labelled reporter)."""
        return self.ci if self.label is None else None

    def add(self, name: str, mode: str) -> None:
        self.stages[name] = StageView(name=name, mode=mode)

    def _ts(self) -> str:
        return time.strftime("%H:%M:%S")

    def _start_step(self, v: StageView, text: str) -> None:
        now = self.clock()
        v.step, v.step_started, v.last_beat, v.phase = text, now, now, None

    def begin(self, name: str, what: str) -> None:
        with self._lock:
            v = self.stages.setdefault(name, StageView(name=name, mode=""))
            v.status, v.started = "running", v.started or self.clock()
            self._start_step(v, what)
        title = f"{name}: {what}"
        if self._groups == "github":
            self._print(f"::group::{title}")
        elif self._groups == "gitlab":
            self._section += 1
            self._print(
                title,
                raw=f"\x1b[0Ksection_start:{int(time.time())}:rvport_{self._section}[collapsed=true]\r\x1b[0K",
            )
        else:
            self._print(f"[{self._ts()}] {title}")

    def _record(self, name: str, text: str) -> None:
        """A log line of a stage: kept for its tail."""
        with self._lock:
            v = self.stages.get(name)
            if v:
                v.tail.append(text)

    def phase(self, name: str, event: Phase) -> None:
        """What a stage's step is doing now: shown in the live view and the heartbeats, never printed as a
        line of its own (the engine's lines say it for people)."""
        with self._lock:
            v = self.stages.get(name)
            if v:
                v.phase = event

    def line(self, name: str, text: str) -> None:
        self._record(name, text)
        if self.ci == "github" and text.lstrip().startswith("::"):
            text = (
                "\u200b" + text
            )  # a build's output cannot give GitHub a workflow command (::endgroup::, ...)
        if self.ci:
            self._print(text)

    def step(self, name: str, text: str) -> None:
        with self._lock:
            v = self.stages.get(name)
            if v is None:
                return
            self._start_step(v, text)
        self._print(f"[{self._ts()}] {name}: {text}")

    def tick(self) -> None:
        """Print a heartbeat for each running step that has been quiet (no start line, no heartbeat) for
        `heartbeat` seconds; log lines do not count as quiet-breakers, they say nothing of the step."""
        now = self.clock()
        with self._lock:
            due = [
                v
                for v in self.stages.values()
                if v.status == "running" and v.last_beat is not None and now - v.last_beat >= self.heartbeat
            ]
            for v in due:
                v.last_beat = now
                self._print(self.heartbeat_line(v, now))

    def heartbeat_line(self, v: StageView, now: float) -> str:
        so_far = duration(now - (v.step_started if v.step_started is not None else now))
        phase = describe(v.phase)
        last = next((ln for ln in reversed(v.tail) if ln.strip()), "")
        parts = [f"[{self._ts()}] {v.name}: {v.step} ... {so_far} so far"]
        if phase:
            parts.append(phase)
        if last:
            parts.append(f"last: {last.strip()[:160]}")
        return "; ".join(parts)

    def end(self, name: str, status: str) -> None:
        with self._lock:
            v = self.stages.setdefault(name, StageView(name=name, mode=""))
            if v.started is not None:
                v.elapsed = self.clock() - v.started
            v.status = status
        if self._groups == "github":
            self._print("::endgroup::")
        elif self._groups == "gitlab":
            self._print("", raw=f"\x1b[0Ksection_end:{int(time.time())}:rvport_{self._section}\r\x1b[0K")
        self._print(f"[{self._ts()}] {name}: {status} ({v.elapsed:.1f}s)")

    def note(self, text: str) -> None:
        self._print(f"[{self._ts()}] {text}")


class LiveReporter(Reporter):
    """A Rich live view per stage: status, elapsed time, the current step with its own time and phase, and the
    last log lines of the running one. Rich refreshes it from its own thread, so it moves when the log is
    quiet.
    It keeps the plain reporter's state (begin, step, line, end) and prints none of its lines."""

    def __enter__(self) -> LiveReporter:
        self._live = Live(
            self._render(),
            console=self.console,
            refresh_per_second=4,
            transient=False,
            get_renderable=self._render,
        )
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(None, None, None)

    def _render(self):
        t = Table(box=None, pad_edge=False, expand=False)
        for col in ("stage", "mode", "status", "time", "step"):
            t.add_column(col)
        now = self.clock()
        running = None
        with self._lock:
            for v in self.stages.values():
                el = v.elapsed if v.status not in ("running",) or v.started is None else now - v.started
                style = {"ok": "green", "cached": "green", "failed": "red", "running": "yellow"}.get(
                    v.status, ""
                )
                t.add_row(
                    Text(v.name),
                    Text(v.mode),
                    Text(v.status, style=style),
                    f"{el:6.1f}s",
                    Text(self.step_text(v, now)),
                )
                if v.status == "running":
                    running = v
            tail = (
                Text("\n".join(("  " + ln)[:160] for ln in running.tail), style="dim")
                if running
                else Text("")
            )
        return Group(t, tail)

    def step_text(self, v: StageView, now: float) -> str:
        """The step column: the step, and while it runs its own time and phase."""
        if v.status != "running" or v.step_started is None:
            return v.step[:70]
        phase = describe(v.phase)
        return f"{v.step[:60]} [{duration(now - v.step_started)}]" + (f" {phase[:70]}" if phase else "")

    def _print(self, text: str) -> None:
        pass  # the live view shows the stages, steps and log lines the plain reporter prints

    def tick(self) -> None:
        pass  # the live view is its own heartbeat

    def note(self, text: str) -> None:
        self._live.console.print(text, markup=False, highlight=False)


def reporter(console: Console, ci: str | None, live: bool, label: str | None = None) -> Reporter:
    """The live view on a terminal, else plain lines; with `label` (profiles built side by side) always plain
    lines, each labelled: two live views cannot share one terminal."""
    if label is not None:
        return Reporter(console, ci, label=label)
    return LiveReporter(console, ci) if live and ci is None else Reporter(console, ci)
