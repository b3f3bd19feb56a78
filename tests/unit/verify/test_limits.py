"""verify's caps (rvport/verify/limits.py) against hostile artifacts the tests make themselves: a crafted file
ends in a failed verdict that names the cap, in seconds and in bounded memory, never in a hang, an
out-of-memory or an internal error.

The heavy cases run in a child process with its address space capped (RLIMIT_AS) and a timeout."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from rvport.catalogue.profiles import get_profile
from rvport.verify import Limits, verify_paths
from rvport.verify.ar import iter_ar_entries
from rvport.verify.elf import ElfReadError, read_elf_bytes
from rvport.verify.judge_binary import judge_stream
from rvport.verify.limits import MiB
from rvport.verify.policy import IsaLevel
from tests.fixtures import elfwriter
from tests.fixtures.elfs import make_wheel

EM_RISCV = 243
ET_DYN = 3
SHT_STRTAB = 3
SHT_DYNAMIC = 6
SHDR = struct.Struct("<IIQQQQIIQQ")


def _elf_header(*, shoff: int, shnum: int, shstrndx: int = 0) -> bytes:
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    return ident + struct.pack(
        "<HHIQQQIHHHHHH", ET_DYN, EM_RISCV, 1, 0, 0, shoff, 0x5, 64, 56, 0, 64, shnum, shstrndx
    )


def sections_bomb(
    path: Path, *, sections: int = 100_000, table: int = 60 * MiB, each: int | None = None
) -> Path:
    """An ELF file with `sections` section headers (extended numbering past 0xffff). Section 1 is a string
    table of `table` bytes; every other one a .dynamic linked to it, each `each` bytes long (default: the
    whole table, so that each points at a huge table). Sparse: a few MB on disk."""
    shoff = 4096 + table
    first = SHDR.pack(0, 0, 0, 0, 0, sections if sections > 0xFFFF else 0, 0, 0, 0, 0)
    strtab = SHDR.pack(0, SHT_STRTAB, 0, 0, 4096, table, 0, 0, 1, 0)
    dyn = SHDR.pack(0, SHT_DYNAMIC, 0, 0, 4096, table if each is None else each, 1, 0, 8, 16)
    with open(path, "wb") as f:
        f.write(_elf_header(shoff=shoff, shnum=0 if sections > 0xFFFF else sections))
        f.seek(shoff)
        f.write(first + strtab + dyn * (sections - 2))
    return path


def run_bounded(code: str, *, address_space: int, timeout: float = 120) -> dict:
    """Run code in a child whose address space is capped; it prints one JSON line (its result)."""
    prologue = textwrap.dedent(
        f"""
        import json, resource, sys, time
        resource.setrlimit(resource.RLIMIT_AS, ({address_space}, {address_space}))
        sys.path.append({str(Path(__file__).resolve().parents[3])!r})
        from rvport.verify import pool
        pool.configure(1)  # no threads (RVPORT_VERIFY_THREADS=1 on the command line)
        """
    )
    env = dict(os.environ)
    cp = subprocess.run(
        [sys.executable, "-c", prologue + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert cp.returncode == 0, cp.stderr[-3000:]
    return json.loads(cp.stdout.strip().splitlines()[-1])


VERIFY = """
from pathlib import Path
from rvport.catalogue.profiles import get_profile
from rvport.verify import Limits, verify_paths
t = time.monotonic()
report = verify_paths([Path(PATH)], get_profile("rv64gc"), limits=LIMITS)
a = report.artifacts[0]
print(json.dumps({"ok": report.ok, "reasons": list(a.all_reasons()), "seconds": time.monotonic() - t}))
"""


def _verify_child(path: Path, *, limits: str = "Limits()", address_space: int = 1024 * MiB) -> dict:
    code = f"PATH = {str(path)!r}\nLIMITS = None\n" + VERIFY.replace("LIMITS)", f"{limits})")
    return run_bounded(code, address_space=address_space)


def test_an_elf_with_100000_sections_each_on_a_60_mib_table_fails_in_seconds(tmp_path):
    bomb = sections_bomb(tmp_path / "libbomb.so")
    assert os.stat(bomb).st_blocks * 512 < 16 * MiB  # sparse: the tables are holes
    r = _verify_child(bomb)
    assert not r["ok"] and r["seconds"] < 60
    assert any("over a verify cap" in x and "small_table_bytes" in x for x in r["reasons"]), r


def test_100000_small_tables_on_one_huge_string_table_stop_at_the_tables_cap(tmp_path):
    bomb = sections_bomb(tmp_path / "libbomb.so", each=16)
    r = _verify_child(bomb)
    assert not r["ok"] and any("over a verify cap" in x and "(tables)" in x for x in r["reasons"]), r
    with pytest.raises(
        ElfReadError, match=r"over a verify cap: bytes of a string table: 62914560.*table_bytes"
    ):
        read_elf_bytes(bomb.read_bytes(), Limits(table_bytes=32 * MiB))
    with pytest.raises(ElfReadError, match=r"over a verify cap: section headers: 100000.*\(sections\)"):
        read_elf_bytes(bomb.read_bytes(), Limits(sections=50_000))


def test_the_section_bomb_in_a_small_wheel_fails_in_bounded_memory(tmp_path):
    bomb = sections_bomb(tmp_path / "libbomb.so", table=60 * MiB)
    wheel = tmp_path / "bomb-1.0-cp313-cp313-manylinux_2_39_riscv64.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.write(bomb, "bomb/libbomb.so")
    assert wheel.stat().st_size < 1 * MiB
    r = _verify_child(wheel, address_space=1536 * MiB)
    assert not r["ok"] and r["seconds"] < 60
    assert any("over a verify cap" in x for x in r["reasons"]), r


def _deflate_bomb(tmp_path: Path, inflated: int, *, name: str = "bomb/data.bin") -> Path:
    """A valid wheel (RECORD right) whose one member is `inflated` zero bytes, deflated."""
    return make_wheel(tmp_path, "bomb", "1.0", "py3-none-any", {name: bytes(inflated)})


def test_a_member_that_inflates_over_the_cap_fails_the_wheel_without_being_inflated(tmp_path):
    wheel = _deflate_bomb(tmp_path, 64 * MiB)
    assert wheel.stat().st_size < 256 * 1024
    tracemalloc.start()
    try:
        report = verify_paths([wheel], get_profile("rv64gc"), limits=Limits(member_bytes=16 * MiB))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    a = report.artifacts[0]
    assert not report.ok
    assert any(
        "bomb/data.bin: over a verify cap: bytes inflated: 67108864, over the cap of 16777216 (member_bytes)"
        in r
        for r in a.reasons
    ), a.reasons
    assert peak < 8 * MiB, peak
    report = verify_paths([wheel], get_profile("rv64gc"), limits=Limits(wheel_bytes=32 * MiB))
    assert any("over a verify cap" in r and "(wheel_bytes)" in r for r in report.artifacts[0].reasons)
    report = verify_paths([wheel], get_profile("rv64gc"), limits=Limits(wheel_members=2))
    assert any(
        "over a verify cap: files its zip directory has room for" in r for r in report.artifacts[0].reasons
    )
    assert verify_paths([wheel], get_profile("rv64gc")).artifacts[0].reasons == ()


def test_a_record_that_inflates_over_the_cap_is_read_no_further(tmp_path):
    wheel = tmp_path / "bomb-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bomb-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        zf.writestr("bomb-1.0.dist-info/RECORD", b"x" * (8 * MiB))
    report = verify_paths([wheel], get_profile("rv64gc"), limits=Limits(metadata_bytes=1 * MiB))
    assert any("over a verify cap" in r and "metadata_bytes" in r for r in report.artifacts[0].reasons)


def test_an_archive_member_too_big_to_hold_in_memory_fails_with_the_cap(tmp_path):
    obj = elfwriter.elf(arch="rv64i2p1_m2p0_a2p1_f2p2_d2p2_c2p0")
    a = elfwriter.ar([("x.o", obj), ("pad.o", bytes(4 * MiB))])
    wheel = make_wheel(tmp_path, "lib", "1.0", "py3-none-any", {"lib/libx.a": a})
    report = verify_paths([wheel], get_profile("rv64gc"), limits=Limits(kept_bytes=1 * MiB))
    assert any(
        "lib/libx.a: over a verify cap: bytes of a member to hold whole in memory" in r
        for r in report.artifacts[0].reasons
    ), report.artifacts[0].reasons


def _sparse_ar(path: Path, big: int) -> Path:
    """An ar archive with a member of `big` bytes (an ELF header, then a hole) and a small rv64gc object after
    it: a few KB on disk."""
    small = elfwriter.elf(arch="rv64i2p1_m2p0_a2p1_f2p2_d2p2_c2p0")

    def header(name: str, size: int) -> bytes:
        return f"{name:<16}{0:<12}{0:<6}{0:<6}{'644':<8}{size:<10}`\n".encode()

    with open(path, "wb") as f:
        f.write(b"!<arch>\n" + header("huge.o/", big) + _elf_header(shoff=0, shnum=0))
        f.seek(8 + 60 + big + big % 2)
        f.write(header("small.o/", len(small)) + small)
    return path


def test_a_sparse_4_gib_archive_is_walked_member_by_member_in_bounded_memory(tmp_path):
    archive = _sparse_ar(tmp_path / "libsparse.a", 4 << 30)
    assert archive.stat().st_size > 4 << 30 and os.stat(archive).st_blocks * 512 < 1 * MiB
    code = f"""
        from rvport.catalogue.profiles import get_profile
        from rvport.verify.judge_binary import judge_stream
        from rvport.verify.exports import check_exports
        from rvport.vocab import ArtifactKind
        from rvport.verify.policy import IsaLevel
        with open({str(archive)!r}, "rb") as f:
            members = judge_stream(None, f, get_profile("rv64gc"), IsaLevel.RUNS_ON)
        j = check_exports(__import__("pathlib").Path({str(archive)!r}), ArtifactKind.ARCHIVE, ["f"])
        print(json.dumps({{"members": [[m.name, m.ok] for m in members], "exports": list(j.reasons)}}))
        """
    r = run_bounded(code, address_space=512 * MiB)
    assert [name for name, _ in r["members"]] == ["huge.o", "small.o"], r
    assert r["members"][1][1] is True and r["exports"] == [
        "f is not exported: no member defines or references it"
    ]
    # verify itself: the file is over a (lowered) file cap, so it fails at once without being read
    report = verify_paths([archive], get_profile("rv64gc"), limits=Limits(file_bytes=1 << 30))
    (reason,) = report.artifacts[0].reasons
    assert reason.startswith(
        f"over a verify cap: bytes of the file: {archive.stat().st_size}, over the cap of"
    )
    assert reason.endswith("(file_bytes); not read")


def test_archive_member_count_is_capped(tmp_path):
    obj = elfwriter.elf(arch="rv64i2p1_m2p0_a2p1_f2p2_d2p2_c2p0")
    archive = tmp_path / "libmany.a"
    archive.write_bytes(elfwriter.ar([(f"m{i}.o", obj) for i in range(20)]))
    with open(archive, "rb") as f:
        assert len(list(iter_ar_entries(f))) == 20
        members = judge_stream(None, f, get_profile("rv64gc"), IsaLevel.RUNS_ON, Limits(ar_members=10))
    assert members[-1].reasons == ("over a verify cap: archive members: 11, over the cap of 10 (ar_members)",)


@pytest.mark.parametrize(
    "what,limits,cap",
    [
        ("segments", Limits(segments=1), "segments"),
        ("dynamic", Limits(entries=2), "entries"),
    ],
)
def test_caps_on_program_headers_and_dynamic_entries(what, limits, cap):
    if what == "segments":
        data = elfwriter.elf(type=ET_DYN, arch="rv64i2p1", section_headers=False)
    else:
        data = elfwriter.elf(type=ET_DYN, arch="rv64i2p1", needed=["libc.so.6", "libm.so.6", "libz.so.1"])
    read_elf_bytes(data)
    with pytest.raises(ElfReadError, match=rf"over a verify cap: .*\({cap}\)"):
        read_elf_bytes(data, limits)


def test_default_limits_are_far_above_real_artifacts():
    lim = Limits()
    assert lim.member_bytes >= 2 << 30 and lim.file_bytes >= 8 << 30 and lim.sections >= 65_536
    assert lim.table_bytes >= 64 * MiB and lim.elf_read_bytes >= 4 * lim.table_bytes
    assert set(lim.to_json()) >= {"file_bytes", "member_bytes", "kept_bytes", "sections", "tables"}


def test_a_zip_directory_with_room_for_too_many_files_is_refused_before_it_is_parsed(tmp_path):
    wheel = tmp_path / "many-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for i in range(3000):
            zf.writestr(f"m/{i}", b"")
    report = verify_paths([wheel], get_profile("rv64gc"), limits=Limits(wheel_members=1000))
    (reason,) = report.artifacts[0].reasons
    assert reason.startswith("over a verify cap: files its zip directory has room for: ")
    assert reason.endswith("over the cap of 1000 (wheel_members); its files not judged")


def test_the_table_shows_at_most_its_lines_per_artifact_and_says_how_many_more(tmp_path):
    import io

    from rvport.cli.console import SafeConsole
    from rvport.verify.report import TABLE_LINES, render_table

    wheel = tmp_path / "many-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for i in range(1000):
            zf.writestr(f"m/{i}", b"")
        zf.writestr("many-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        zf.writestr("many-1.0.dist-info/RECORD", "")
    report = verify_paths([wheel], get_profile("rv64gc"))
    n = len(report.artifacts[0].reasons)
    assert n > 1000  # every file "not listed in RECORD": all of them in the report
    out = io.StringIO()
    render_table(report, SafeConsole(file=out, width=200))
    text = out.getvalue()
    assert text.count("not listed in RECORD") == TABLE_LINES - 1
    assert f"{n - TABLE_LINES + 1} more lines" in text
