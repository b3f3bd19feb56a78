"""What the benches share: Ctrl-C and kill handling, rvport run as a child process, the load average sampled
while something runs (rvport.host.LoadAverage, which rvport serve-check records too). Imported by the
scripts in bench/ (their directory is first on sys.path)."""

from __future__ import annotations

import argparse
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


def work_and_mirror(work: Path | None, *, prefix: str, recipes: Sequence[str]) -> tuple[Path, Path] | None:
    """A bench's work directory (`work`, else a new temporary one; absolute, since rvport runs in this
    checkout and gets paths under it) and its mirror, WORK/mirror, filled with the recipes' sources by
    `rvport fetch` (what is in rvport's cache or the mirror already is not fetched again). None, with a line
    naming the log, when the fetch fails."""
    import tempfile

    work = (work or Path(tempfile.mkdtemp(prefix=prefix))).absolute()
    work.mkdir(parents=True, exist_ok=True)
    mirror = work / "mirror"
    mirror.mkdir(exist_ok=True)
    print(f"work directory: {work}", flush=True)
    rc, _ = rvport(["fetch", *recipes, "--to", str(mirror)], log=work / "fetch.log")
    if rc != 0:
        print(f"fetching sources failed; see {work / 'fetch.log'}", flush=True)
        return None
    return work, mirror


def merge_loads(loads: Sequence[Mapping]) -> dict:
    """The load beside several runs as one: the lowest and highest, the mean of the means, every sample."""
    return {
        "min": min(x["min"] for x in loads),
        "mean": round(sum(x["mean"] for x in loads) / len(loads), 2),
        "max": max(x["max"] for x in loads),
        "samples": sum(x["samples"] for x in loads),
    }


# ------------------------------------------------------------------------------------------------ records
RECORDS = ROOT / "records"
RECORD_SCHEMA = 1


def _git(*args: str) -> str:
    cp = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
    return cp.stdout.strip() if cp.returncode == 0 else ""


def machine() -> dict:
    """What the figures were measured on: architecture, CPUs, memory, the CPU's model name, the kernel."""
    import platform

    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":")[0].strip() in ("model name", "uarch", "isa"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return {
        "arch": platform.machine(),
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "cpu_model": model,
        "kernel": platform.release(),
    }


class BadRecordName(ValueError, argparse.ArgumentTypeError):
    """A --record or --topic that is not a plain file name (argparse shows this message, not its own)."""


def record_part(part: str) -> str:
    """A record's topic or name as given (an argparse `type=` too, so a bench refuses a bad --record before it
    runs, not after): a plain file name."""
    if not part or "/" in part or part.startswith("."):
        raise BadRecordName(
            f"a record's topic and name are plain file names (e.g. default-config-rvv256), not {part!r}"
        )
    return part


def write_record(
    topic: str, name: str, *, command: Sequence[str], figures: Mapping, load: Mapping | None = None
) -> Path:
    """A bench's figures as a record: records/TOPIC/NAME.json with the command that made them, the commit
    it ran at (and whether the tree was dirty), the machine, the load beside the run and each figure. The
    docs cite the record's path (tests/unit/project/test_records.py checks that every cited record exists and
    has these fields); commit the file with the docs that quote it."""
    import json
    import shlex

    for part in (topic, name):
        record_part(part)
    record = {
        "schema": RECORD_SCHEMA,
        "command": shlex.join(command),
        "commit": _git("rev-parse", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "load": dict(load) if load is not None else {"loadavg_1m": os.getloadavg()[0]},
        "figures": dict(figures),
    }
    path = RECORDS / topic / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path
