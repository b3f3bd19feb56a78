"""Host facts for the planner and `rvport doctor`: gathered here, passed to pure code as values."""

from __future__ import annotations

import os
import platform
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from rvport.errors import RvportError
from rvport.target import DOCKER_PLATFORM

_ARCH_ALIASES = {
    "amd64": "x86_64",
    "x86_64": "x86_64",
    "arm64": "aarch64",
    "aarch64": "aarch64",
    "riscv64": "riscv64",
}


@dataclass(frozen=True, kw_only=True)
class HostFacts:
    arch: str  # x86_64 | aarch64 | riscv64 | ...
    cpus: int
    mem_bytes: int
    binfmt_riscv64: bool = False  # a riscv64 binfmt_misc handler is registered

    @property
    def platform(self) -> str:
        return DOCKER_PLATFORM.get(self.arch, f"linux/{self.arch}")

    @property
    def is_riscv64(self) -> bool:
        return self.arch == "riscv64"

    def to_json(self) -> dict:
        return {
            "arch": self.arch,
            "cpus": self.cpus,
            "mem_bytes": self.mem_bytes,
            "binfmt_riscv64": self.binfmt_riscv64,
            "platform": self.platform,
        }


def normalize_arch(machine: str) -> str:
    return _ARCH_ALIASES.get(machine.lower(), machine.lower())


def _mem_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def binfmt_handler(name: str = "qemu-riscv64") -> dict[str, str] | None:
    """The registered binfmt_misc entry for `name` as key/value lines, or None."""
    path = Path("/proc/sys/fs/binfmt_misc") / name
    try:
        text = path.read_text()
    except OSError:
        return None
    out: dict[str, str] = {"state": text.splitlines()[0].strip() if text else ""}
    for line in text.splitlines()[1:]:
        k, _, v = line.partition(" ")
        out[k.rstrip(":")] = v.strip()
    return out


@dataclass(frozen=True, kw_only=True)
class ToolFound:
    """A program on the host: where it is and its version (None: not found; its version unreadable)."""

    path: str | None
    version: str | None = None


def tool_version(
    name: str, args: tuple[str, ...], pattern: re.Pattern[str], *, also: tuple[str, ...] = ()
) -> ToolFound:
    """`name` found in PATH (else at one of `also`, ~ expanded) and its version: `pattern`'s group 1 in the
    first lines of what `name ARGS` prints (bounded; a program that fails or hangs has no version). The
    process door is imported here: the planner imports this module and must stay pure."""
    from rvport import proc

    path = proc.which(name) or next(
        (str(p) for p in (Path(a).expanduser() for a in also) if p.is_file() and os.access(p, os.X_OK)), None
    )
    if path is None:
        return ToolFound(path=None)
    try:
        cp = proc.run([path, *args], capture=True, check=False, timeout=30)
    except RvportError:
        return ToolFound(path=path)
    text = ((cp.stdout or "") + "\n" + (cp.stderr or ""))[:4096] if cp.returncode == 0 else ""
    for line in text.splitlines()[:20]:
        m = pattern.search(line)
        if m:
            return ToolFound(path=path, version=m.group(1))
    return ToolFound(path=path)


def gather() -> HostFacts:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    h = binfmt_handler()
    return HostFacts(
        arch=normalize_arch(platform.machine()),
        cpus=cpus,
        mem_bytes=_mem_bytes(),
        binfmt_riscv64=bool(h and h.get("state") == "enabled"),
    )


class LoadAverage:
    """The host's 1-minute load average sampled every `every` seconds while the block runs (a thread of its
    own): what else ran beside a measurement (the benches, `rvport serve-check`).

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
