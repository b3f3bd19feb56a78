"""Kernel process accounting for the benches: which processes ran, for how long, on how much CPU.

While accounting is on (acct(2), root only), the kernel appends one BSD v3 record for every process that exits
anywhere on the machine, inside containers too, with its command name, pid and parent pid (as the host sees
them), start time, elapsed time and CPU time. Nothing is added to the processes themselves: a build measured
this way is the same build, not an instrumented one.

`compiler_work` sums what GCC's drivers spent: a driver is the parent of a `cc1`, `cc1plus`, `lto1` or
`collect2` process, and its elapsed time covers everything it ran (preprocessing, compiling, assembling,
linking).
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime, etime (float, in
# AHZ ticks), then utime, stime, mem, io, rw, minflt, majflt, swaps as comp_t, then comm[16]
RECORD = struct.Struct("<BBHIIIIIIf8H16s")
AHZ = 100
# what a GCC driver starts: the compiler proper (C, C++, LTO) and the link wrapper
COMPILER_PROPER = frozenset({"cc1", "cc1plus", "lto1", "collect2"})


class AccountingError(RuntimeError):
    pass


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    comm: str
    start: int  # seconds since the epoch
    elapsed: float  # seconds
    cpu: float  # user + system seconds
    exitcode: int


def comp_t(v: int) -> int:
    """A comp_t: 13-bit mantissa, 3-bit base-8 exponent."""
    return (v & 0x1FFF) << (3 * (v >> 13))


def parse(data: bytes) -> list[Proc]:
    if len(data) % RECORD.size:
        raise AccountingError(f"accounting file is {len(data)} bytes, not a whole number of v3 records")
    procs = []
    for off in range(0, len(data), RECORD.size):
        (_flag, version, _tty, exitcode, _uid, _gid, pid, ppid, btime, etime, utime, stime, *_rest, comm) = (
            RECORD.unpack_from(data, off)
        )
        if version & 0x7F != 3:
            raise AccountingError(f"record at byte {off} has version {version & 0x7F}, expected 3")
        procs.append(
            Proc(
                pid=pid,
                ppid=ppid,
                comm=comm.split(b"\0", 1)[0].decode(errors="replace"),
                start=btime,
                elapsed=etime / AHZ,
                cpu=(comp_t(utime) + comp_t(stime)) / AHZ,
                exitcode=exitcode,
            )
        )
    return procs


@contextmanager
def accounting(path: Path) -> Iterator[Path]:
    """Turn process accounting on into `path` (made empty) for the block, and off again whatever happens."""
    libc = ctypes.CDLL(None, use_errno=True)
    path.write_bytes(b"")
    if libc.acct(os.fsencode(path)) != 0:
        err = ctypes.get_errno()
        raise AccountingError(
            f"acct({path}) failed: {os.strerror(err)} (process accounting needs root and a "
            "kernel with CONFIG_BSD_PROCESS_ACCT_V3)"
        )
    try:
        yield path
    finally:
        libc.acct(None)


@dataclass(frozen=True)
class CompilerWork:
    invocations: int  # drivers that compiled or linked
    compiles: int  # cc1/cc1plus/lto1 runs
    links: int  # collect2 runs
    elapsed: float  # sum of the drivers' elapsed seconds
    cpu: float  # CPU seconds of the drivers and everything under them (cc1*, as, collect2, ld)

    def describe(self) -> str:
        return (
            f"{self.invocations} compiler runs ({self.compiles} compiles, {self.links} links): "
            f"{self.elapsed:.1f} s elapsed, {self.cpu:.1f} s CPU"
        )


def compiler_work(procs: list[Proc], *, compiles_only: bool = False) -> CompilerWork:
    """What GCC's drivers spent; with compiles_only, only drivers that compiled and did not link (`-c`)."""
    by_pid = {p.pid: p for p in procs}
    children: dict[int, list[Proc]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p)
    drivers = {p.ppid for p in procs if p.comm in COMPILER_PROPER and p.ppid in by_pid}
    if compiles_only:
        drivers = {d for d in drivers if not any(c.comm == "collect2" for c in children[d])}

    def cpu_under(pid: int) -> float:
        total, todo, seen = 0.0, [pid], set()
        while todo:
            p = todo.pop()
            if p in seen:  # a reused pid must not make a cycle
                continue
            seen.add(p)
            total += by_pid[p].cpu
            todo.extend(c.pid for c in children.get(p, []) if c.pid in by_pid)
        return total

    return CompilerWork(
        invocations=len(drivers),
        compiles=sum(p.comm in {"cc1", "cc1plus", "lto1"} for p in procs if p.ppid in drivers),
        links=sum(p.comm == "collect2" for p in procs if p.ppid in drivers),
        elapsed=sum(by_pid[d].elapsed for d in drivers),
        cpu=sum(cpu_under(d) for d in drivers),
    )


def by_command(procs: list[Proc], top: int = 12) -> list[tuple[str, int, float, float]]:
    """(command, count, elapsed, CPU) for the commands that took the most CPU."""
    agg: dict[str, list[float]] = {}
    for p in procs:
        a = agg.setdefault(p.comm, [0, 0.0, 0.0])
        a[0] += 1
        a[1] += p.elapsed
        a[2] += p.cpu
    rows = sorted(((c, int(n), e, u) for c, (n, e, u) in agg.items()), key=lambda r: -r[3])
    return rows[:top]
