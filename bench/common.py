"""What the benches share: Ctrl-C and kill handling, rvport run as a child process, the load average sampled
while something runs. Imported by the scripts in bench/ (their directory is first on sys.path)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def stop_on_signals() -> None:
    """Ctrl-C or a kill raises KeyboardInterrupt, so `finally` blocks clean up; also in the background, where
    SIGINT is ignored unless a handler is set."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


def rvport(
    args: Sequence[str],
    *,
    log: Path,
    env: Mapping[str, str] | None = None,
    grace: float = 60,
    command: Sequence[str] | None = None,
    cwd: Path | None = None,
) -> tuple[int, float]:
    """`python -m rvport ARGS` from this checkout, its output in `log`; (exit status, wall seconds).

    With `command`, another rvport instead (say an older revision's console script in a venv of its own):
    `COMMAND ARGS` in `cwd` with `env` as given, this checkout neither on PYTHONPATH nor the directory it runs
    in.

    Interrupted, rvport gets SIGTERM and `grace` seconds to stop its own children and clean up (its entry
    point handles it), then SIGKILL."""
    t0 = time.monotonic()
    child_env = dict(os.environ if env is None else env)
    if command is None:
        command, cwd = [sys.executable, "-m", "rvport"], ROOT
        child_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), child_env.get("PYTHONPATH", "")) if p
        )
    with open(log, "w") as f:
        p = subprocess.Popen([*command, *args], stdout=f, stderr=subprocess.STDOUT, cwd=cwd, env=child_env)
        try:
            rc = p.wait()
        except BaseException:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            raise
    return rc, time.monotonic() - t0


class LoadAverage:
    """The 1-minute load average sampled every `every` seconds while the block runs (a timer thread).

    with LoadAverage() as load:
        ...
    load.describe()   # "1.9-3.4 (mean 2.6) on 2 CPUs"
    """

    def __init__(self, every: float = 10.0):
        self.every = every
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> LoadAverage:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.samples.append(os.getloadavg()[0])

    def summary(self) -> dict:
        s = self.samples or [os.getloadavg()[0]]
        return {
            "min": round(min(s), 2),
            "mean": round(sum(s) / len(s), 2),
            "max": round(max(s), 2),
            "samples": len(s),
            "cpus": os.cpu_count(),
        }

    def describe(self) -> str:
        s = self.summary()
        return f"{s['min']:.1f}-{s['max']:.1f} (mean {s['mean']:.1f}) on {s['cpus']} CPUs"
