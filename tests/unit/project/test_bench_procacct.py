"""bench/procacct.py: kernel process accounting records parsed, and GCC driver work summed from them."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.hosttools import needs

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("procacct", ROOT / "bench" / "procacct.py")
procacct = importlib.util.module_from_spec(spec)
sys.modules["procacct"] = procacct
spec.loader.exec_module(procacct)


def record(pid, ppid, comm, etime_ticks, utime=0, stime=0, version=3):
    return procacct.RECORD.pack(
        0,
        version,
        0,
        0,
        0,
        0,
        pid,
        ppid,
        1_700_000_000,
        float(etime_ticks),
        utime,
        stime,
        0,
        0,
        0,
        0,
        0,
        0,
        comm.encode().ljust(16, b"\0"),
    )


def test_comp_t_decodes_mantissa_and_base_8_exponent():
    assert procacct.comp_t(5) == 5
    assert procacct.comp_t((1 << 13) | 3) == 24
    assert procacct.comp_t((2 << 13) | 0x1FFF) == 0x1FFF * 64


def test_parse_reads_every_field_it_uses():
    (p,) = procacct.parse(record(10, 9, "cc1plus", 250, utime=200, stime=30))
    assert (p.pid, p.ppid, p.comm, p.elapsed, p.cpu) == (10, 9, "cc1plus", 2.5, 2.3)


def test_parse_refuses_partial_records_and_other_versions():
    with pytest.raises(procacct.AccountingError, match="whole number"):
        procacct.parse(record(1, 0, "sh", 1)[:-1])
    with pytest.raises(procacct.AccountingError, match="version 2"):
        procacct.parse(record(1, 0, "sh", 1, version=2))


def test_compiler_work_counts_drivers_and_everything_under_them():
    data = b"".join(
        [
            # a compile: gcc -> cc1, as
            record(11, 10, "cc1", 300, utime=290),
            record(12, 10, "as", 10, utime=5),
            record(10, 2, "gcc", 320, utime=1),
            # a link: g++ -> collect2 -> ld
            record(22, 21, "ld", 50, utime=40),
            record(21, 20, "collect2", 55),
            record(20, 2, "g++", 60),
            # not a compiler: make, and a driver asked for its version (runs nothing)
            record(30, 2, "gcc", 1),
            record(2, 1, "make", 900, utime=100),
        ]
    )
    work = procacct.compiler_work(procacct.parse(data))
    assert (work.invocations, work.compiles, work.links) == (2, 1, 1)
    assert work.elapsed == pytest.approx(3.8)
    assert work.cpu == pytest.approx(3.36)
    only = procacct.compiler_work(procacct.parse(data), compiles_only=True)
    assert (only.invocations, only.compiles, only.links, only.elapsed) == (1, 1, 0, pytest.approx(3.2))


@pytest.mark.skipif(os.geteuid() != 0, reason="acct(2) needs root")
@needs("gcc")
def test_real_accounting_sees_a_real_compile(tmp_path):
    src = tmp_path / "t.c"
    src.write_text("int main(void) { return 0; }\n")
    with procacct.accounting(tmp_path / "acct"):
        subprocess.run(["gcc", "-O2", "-c", str(src), "-o", str(tmp_path / "t.o")], check=True)
    work = procacct.compiler_work(procacct.parse((tmp_path / "acct").read_bytes()))
    assert work.invocations >= 1 and work.compiles >= 1 and work.elapsed > 0
