"""What the benches share: Ctrl-C and kill handling, rvport run as a child process, the load average sampled
while something runs (rvport.host.LoadAverage, which rvport serve-check records too). Imported by the
scripts in bench/ (their directory is first on sys.path)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from rvport.host import LoadAverage  # noqa: F401  (the benches' own name for it)

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
