"""How a build shows progress: a Rich live view on a terminal, plain timestamped lines in CI or logs.

CI systems get folded groups: `::group::` on GitHub Actions, section markers on GitLab CI.

Every output mode shows that a long step is alive:
- the terminal's live view shows each running step's elapsed time, its phase (a base bootstrap's
  "configuring 45/213", a buildx step "[build 3/5] RUN ...") and the last log lines;
- plain and CI output print each step when it starts and, while it runs, a heartbeat at least every
  `heartbeat` seconds (30 by default) from a timer thread, so it fires even when the step prints nothing:
  which step, how long so far, its phase, the last log line.

The phase comes from the log lines themselves (PHASES below, rules as data): debootstrap's `I: Unpacking
X...`, dpkg's `Setting up X ...`, mmdebstrap's `I: extracting archives...`, rvport's own bootstrap lines
(`bootstrap: configuring 45/213 libc6`) and base image lines (`image: loading ...`), and buildx's plain `#7
[build 3/5] RUN ...`.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

HEARTBEAT_S = 30.0

# (pattern, phase). A pattern may name groups: `phase` (overrides the phase given), `what` (the package or
# step), `n` and `m` (a count and its total). Phases without a total are counted line by line.
PHASES: tuple[tuple[re.Pattern[str], str], ...] = (
    # rvport's own bootstrap (rvport/engine/bootstrap.py): "bootstrap: unpacking 12/213 libc6"
    (
        re.compile(
            r"^bootstrap: (?P<phase>[a-z][a-z -]*?) (?P<n>[0-9]{1,9})/(?P<m>[0-9]{1,9})"
            r"(?: (?P<what>[^\s(]\S*))?"
        ),
        "",
    ),
    (re.compile(r"^bootstrap: (?P<phase>[A-Za-z][A-Za-z0-9 -]*[A-Za-z0-9])(?:\.\.\.|:|$)"), ""),
    (re.compile(r"^bootstrap: fetching \d+ packages"), "fetching packages ahead"),
    # a base's image (rvport/engine/rootfs_image.py)
    (re.compile(r"^image: writing the layer"), "writing the image's layer"),
    (re.compile(r"^image: loading "), "loading the image"),
    # debootstrap
    (
        re.compile(
            r"^I: (?P<phase>(?:Installing|Unpacking|Configuring) (?:core|required|the base system)"
            r"(?: packages)?)\.\.\.$"
        ),
        "",
    ),
    (re.compile(r"^I: Retrieving (?P<what>\S+)"), "retrieving"),
    (re.compile(r"^I: Validating (?P<what>\S+)"), "validating"),
    (re.compile(r"^I: Extracting (?P<what>[^.\s]\S*?)\.*$"), "extracting"),
    (re.compile(r"^I: Unpacking (?P<what>[a-z0-9][^.\s]*(?:\.[^.\s]+)*?)\.\.\.$"), "unpacking"),
    (re.compile(r"^I: Configuring (?P<what>[a-z0-9][^.\s]*(?:\.[^.\s]+)*?)\.\.\.$"), "configuring"),
    # dpkg (inside debootstrap's log, mmdebstrap, rvport's bootstrap, apt in a toolchain stage)
    (re.compile(r"^(?:#\d+ [\d.]+ )?Unpacking (?P<what>\S+) \("), "unpacking"),
    (re.compile(r"^(?:#\d+ [\d.]+ )?Setting up (?P<what>\S+) \("), "configuring"),
    (re.compile(r"^(?:#\d+ [\d.]+ )?Processing triggers for (?P<what>\S+) \("), "triggers"),
    (re.compile(r"^(?:#\d+ [\d.]+ )?Get:(?P<n>[0-9]{1,9}) \S+ \S+ \S+ (?P<what>\S+)"), "retrieving"),
    # mmdebstrap
    (
        re.compile(
            r"^I: (?P<phase>downloading packages|extracting archives|installing essential packages|"
            r"installing remaining packages|running \S+ hooks)"
        ),
        "",
    ),
    # buildx --progress plain: "#7 [build 3/5] RUN ..."
    (re.compile(r"^#\d+ \[(?P<what>[^\]]+\] .{0,60})"), "buildx"),
)


@dataclass
class Activity:
    """What a step is doing now, as read from its log lines."""

    phase: str = ""
    what: str = ""
    n: int = 0
    m: int | None = None

    def feed(self, line: str) -> bool:
        """Update from one log line; True when the line named a phase."""
        for pattern, phase in PHASES:
            match = pattern.match(line)
            if match is None:
                continue
            g = match.groupdict()
            new_phase = (g.get("phase") or phase).lower()
            if g.get("n") is not None and g.get("m") is not None:
                self.n, self.m = int(g["n"]), int(g["m"])
            elif new_phase != self.phase:
                self.n, self.m = (1 if g.get("what") else 0), None
            elif g.get("what"):
                self.n += 1
            self.phase, self.what = new_phase, (g.get("what") or "").strip()
            return True
        return False

    def describe(self) -> str:
        if not self.phase:
            return ""
        if self.phase == "buildx":
            return self.what
        count = f" {self.n}/{self.m}" if self.m else (f" {self.n}" if self.n else "")
        return f"{self.phase}{count}" + (f" ({self.what})" if self.what else "")


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
    activity: Activity = field(default_factory=Activity)


class Reporter:
    """Interface the runner talks to; the plain implementation prints lines, never wrapped (soft_wrap): CI
    logs and `::group::` markers must reach the log exactly as written.

    `clock` and `heartbeat` are there for tests (a fake clock, a short interval); `tick()` is what the timer
    thread calls."""

    def __init__(
        self,
        console: Console,
        ci: str | None,
        *,
        heartbeat: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.console = console
        self.ci = ci
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
            # one line: a newline in a name or a log line cannot start a line of its own (a forged one)
            self.console.print(text.replace("\n", "\\n"), markup=False, highlight=False, soft_wrap=True)

    def add(self, name: str, mode: str) -> None:
        self.stages[name] = StageView(name=name, mode=mode)

    def _ts(self) -> str:
        return time.strftime("%H:%M:%S")

    def _start_step(self, v: StageView, text: str) -> None:
        now = self.clock()
        v.step, v.step_started, v.last_beat, v.activity = text, now, now, Activity()

    def begin(self, name: str, what: str) -> None:
        with self._lock:
            v = self.stages.setdefault(name, StageView(name=name, mode=""))
            v.status, v.started = "running", v.started or self.clock()
            self._start_step(v, what)
        title = f"{name}: {what}"
        if self.ci == "github":
            self._print(f"::group::{title}")
        elif self.ci == "gitlab":
            self._section += 1
            self._print(
                title,
                raw=f"\x1b[0Ksection_start:{int(time.time())}:rvport_{self._section}[collapsed=true]\r\x1b[0K",
            )
        else:
            self._print(f"[{self._ts()}] {title}")

    def _record(self, name: str, text: str) -> None:
        """A log line of a stage: kept for its tail, and read for its phase."""
        with self._lock:
            v = self.stages.get(name)
            if v:
                v.tail.append(text)
                v.activity.feed(text)

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
        phase = v.activity.describe()
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
        if self.ci == "github":
            self._print("::endgroup::")
        elif self.ci == "gitlab":
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
        phase = v.activity.describe()
        return f"{v.step[:60]} [{duration(now - v.step_started)}]" + (f" {phase[:70]}" if phase else "")

    def _print(self, text: str) -> None:
        pass  # the live view shows the stages, steps and log lines the plain reporter prints

    def tick(self) -> None:
        pass  # the live view is its own heartbeat

    def note(self, text: str) -> None:
        self._live.console.print(text, markup=False, highlight=False)


def reporter(console: Console, ci: str | None, live: bool) -> Reporter:
    return LiveReporter(console, ci) if live and ci is None else Reporter(console, ci)
