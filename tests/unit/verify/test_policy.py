"""Pure verifier logic, no docker: arch strings, attributes, rules, wheel tags, ar parsing, Go build info,
JSON and JUnit rendering, and reading wheels (members read once, on threads) built here from minimal ELF
files."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
from packaging.tags import parse_tag

from rvport.catalogue.profiles import get_profile
from rvport.resources import builtin
from rvport.verify import elf_ranges, pool, zip_member
from rvport.verify.artifacts import ArchiveError, iter_ar_members
from rvport.verify.elf import (
    ElfFacts,
    ElfReadError,
    GoBuildInfo,
    parse_arch_string,
    parse_go_buildinfo,
    parse_riscv_attributes,
    read_elf,
    read_elf_bytes,
)
from rvport.verify.elf_ranges import Keep
from rvport.verify.kept_stream import BufferFile, NotKept
from rvport.verify.model import ArtifactResult, MemberResult, VerifyReport
from rvport.verify.policy import (
    IsaLevel,
    Verdict,
    judge_elf,
    judge_wheel_tags,
    manylinux_for,
    maximal,
    parse_platform,
)
from rvport.verify.pool import map_ordered, read_ahead
from rvport.verify.report import to_junit
from rvport.verify.wheel import verify_wheel
from rvport.verify.zip_member import Member, MemberError, read_member
from rvport.vocab import ArtifactKind
from tests.fixtures.schemas import validate

GC_ARCH = "rv64i2p1_m2p0_a2p1_f2p2_d2p2_c2p0_zicsr2p0_zifencei2p0_zmmul1p0_zaamo1p0_zalrsc1p0"
V256_ARCH = (
    GC_ARCH.replace("c2p0_", "c2p0_v1p0_") + "_zfhmin1p0_zve32f1p0_zve32x1p0_zve64d1p0_zve64f1p0"
    "_zve64x1p0_zvfh1p0_zvfhmin1p0_zvl128b1p0_zvl256b1p0_zvl32b1p0_zvl64b1p0"
)
V128_ARCH = V256_ARCH.replace("_zvl256b1p0", "")


def facts(
    *,
    arch: str | None = GC_ARCH,
    e_flags: int = 0x5,
    machine: str = "EM_RISCV",
    elf_class: int = 64,
    little: bool = True,
    glibc: tuple = (),
    go: GoBuildInfo | None = None,
    versions: tuple[str, ...] = (),
    needed: tuple[str, ...] = ("libc.so.6",),
) -> ElfFacts:
    versions = versions or tuple(f"GLIBC_{a}.{b}" for a, b in glibc)
    return ElfFacts(
        elf_class=elf_class,
        little_endian=little,
        machine=machine,
        elf_type="ET_DYN",
        e_flags=e_flags,
        arch=arch,
        extensions=parse_arch_string(arch) if arch else {},
        glibc=glibc,
        needed=needed,
        go=go,
        versions=versions,
    )


# ---- arch strings and attributes ------------------------------------------------------------------------


def test_parse_arch_string_gcc14_form():
    exts = parse_arch_string(V256_ARCH)
    assert exts["i"] == "2p1" and exts["v"] == "1p0" and exts["zvl256b"] == "1p0" and exts["zvfh"] == "1p0"
    assert "zvl512b" not in exts


def test_parse_arch_string_compact_and_g_forms():
    assert parse_arch_string("rv64imafdc") == {e: "" for e in "imafdc"}
    exts = parse_arch_string("rv64i2p0m2p0a2p0f2p0d2p0c2p0_xtheadba1p0")
    assert exts["xtheadba"] == "1p0" and exts["c"] == "2p0"
    g = parse_arch_string("rv64gc")
    assert {"i", "m", "a", "f", "d", "zicsr", "zifencei", "c"} <= set(g)


@pytest.mark.parametrize("bad", ["x86_64", "", "rv64i2p1_!!", "rv64i2p1zba"])
def test_parse_arch_string_rejects_garbage(bad):
    with pytest.raises(ValueError):
        parse_arch_string(bad)


def _attr_section(arch: str) -> bytes:
    body = bytes([4, 16]) + bytes([5]) + arch.encode() + b"\0" + bytes([6, 0])
    sub = bytes([1]) + struct.pack("<I", 5 + len(body)) + body
    vendor = b"riscv\0"
    return b"A" + struct.pack("<I", 4 + len(vendor) + len(sub)) + vendor + sub


def test_parse_riscv_attributes():
    attrs = parse_riscv_attributes(_attr_section(V256_ARCH))
    assert attrs[5] == V256_ARCH and attrs[4] == 16 and attrs[6] == 0


@pytest.mark.parametrize("blob", [b"", b"B", b"A\x50\0\0\0riscv\0", _attr_section(GC_ARCH)[:-7]])
def test_parse_riscv_attributes_corrupt(blob):
    with pytest.raises(ValueError):
        parse_riscv_attributes(blob)


# ---- rules -------------------------------------------------------------------------------------------------


def test_rv64gc_object_passes_rv64gc():
    j = judge_elf(facts(), get_profile("rv64gc"))
    assert j.verdict is Verdict.PASS, j.reasons


def test_vector_object_exceeds_scalar_and_narrower_profiles():
    j = judge_elf(facts(arch=V256_ARCH), get_profile("rv64gc"))
    assert j.verdict is Verdict.FAIL
    assert any("beyond profile rv64gc" in r and "v, zvfh, zvl256b" in r for r in j.reasons)
    j = judge_elf(facts(arch=V256_ARCH), get_profile("rvv128"))
    assert next(r for r in j.reasons if "beyond" in r).startswith("needs zvl256b, beyond profile rvv128")
    assert judge_elf(facts(arch=V256_ARCH), get_profile("rvv256")).ok


def test_bf16_exceeds_rvv256_ceiling_at_both_levels():
    arch = V256_ARCH + "_zvfbfmin1p0"
    for level in IsaLevel:
        j = judge_elf(facts(arch=arch), get_profile("rvv256"), level)
        assert not j.ok and any("zvfbfmin" in r and "beyond" in r for r in j.reasons)
    assert judge_elf(facts(arch=arch), get_profile("rvv256-bf16"), IsaLevel.CARRIES).ok


def test_carries_requires_promised_extensions_runs_on_does_not():
    j = judge_elf(facts(arch=V128_ARCH), get_profile("rvv256"), IsaLevel.CARRIES)
    assert not j.ok and any("arch string lacks zvl256b that profile rvv256 promises" in r for r in j.reasons)
    assert judge_elf(facts(arch=V128_ARCH), get_profile("rvv256"), IsaLevel.RUNS_ON).ok
    j = judge_elf(facts(arch=GC_ARCH), get_profile("rvv256"), IsaLevel.RUNS_ON)
    assert j.ok, j.reasons


# What the brief of "runs on" asks, case by case: (arch, profile, runs on, carries, a reason that must
# appear).
V128_NO_ZVFH = V128_ARCH.replace("_zvfh1p0_zvfhmin1p0", "").replace("_zfhmin1p0", "")


@pytest.mark.parametrize(
    "arch,profile,runs_on,carries,why",
    [
        (GC_ARCH, "rv64gc", True, True, ""),
        (GC_ARCH, "rvv128", True, False, "lacks v, zvfh, zvl128b that profile rvv128 promises"),
        (V128_NO_ZVFH, "rvv128", True, False, "lacks zvfh that profile rvv128 promises"),
        (V128_NO_ZVFH, "rvv256", True, False, "lacks zvfh, zvl256b"),
        (V128_ARCH, "rvv128", True, True, ""),
        (V256_ARCH, "rvv128", False, False, "needs zvl256b, beyond profile rvv128"),
        (V128_ARCH, "rv64gc", False, False, "needs v, zvfh, beyond profile rv64gc"),
        (V128_NO_ZVFH, "rv64gc", False, False, "needs v, beyond profile rv64gc"),
    ],
)
def test_runs_on_is_a_subset_carries_is_the_promise(arch, profile, runs_on, carries, why):
    r = judge_elf(facts(arch=arch), get_profile(profile), IsaLevel.RUNS_ON)
    c = judge_elf(facts(arch=arch), get_profile(profile), IsaLevel.CARRIES)
    assert (r.ok, c.ok) == (runs_on, carries), (r.reasons, c.reasons)
    if why:
        assert any(why in x for x in (r.reasons + c.reasons)), (r.reasons, c.reasons)


def test_isa_level_names_and_older_names():
    assert IsaLevel("runs-on") is IsaLevel.RUNS_ON and IsaLevel("CARRIES") is IsaLevel.CARRIES
    assert IsaLevel("profile") is IsaLevel.CARRIES and IsaLevel("baseline") is IsaLevel.RUNS_ON
    with pytest.raises(ValueError):
        IsaLevel("everything")


def test_float_abi_and_rvc():
    j = judge_elf(facts(e_flags=0x1), get_profile("rv64gc"))
    assert any("float ABI is soft" in r and "lp64d" in r for r in j.reasons)
    j = judge_elf(facts(e_flags=0x3), get_profile("rv64gc"))
    assert any("float ABI is single" in r for r in j.reasons)
    j = judge_elf(facts(e_flags=0x4), get_profile("rv64gc"), IsaLevel.CARRIES)
    assert any("lacks RVC" in r for r in j.reasons)
    j = judge_elf(facts(e_flags=0x4), get_profile("rv64gc"), IsaLevel.RUNS_ON)
    assert j.ok and any("no RVC" in n for n in j.notes)


def test_tso_needs_a_ztso_profile():
    for level in IsaLevel:
        j = judge_elf(facts(e_flags=0x15), get_profile("rvv256"), level)
        assert not j.ok and any("Ztso" in r and "no ztso" in r for r in j.reasons)


def test_header_checks():
    j = judge_elf(facts(machine="EM_X86_64", arch=None, e_flags=0), get_profile("rv64gc"))
    assert j.reasons == ("machine is x86-64 (EM_X86_64), not RISC-V (EM_RISCV)",)
    j = judge_elf(facts(elf_class=32), get_profile("rv64gc"))
    assert any("ELFCLASS32" in r for r in j.reasons)
    j = judge_elf(facts(little=False), get_profile("rv64gc"))
    assert any("big-endian" in r for r in j.reasons)
    j = judge_elf(facts(arch="rv32i2p1_m2p0_a2p1_f2p2_d2p2_c2p0"), get_profile("rv64gc"))
    assert any("not rv64" in r for r in j.reasons)


def test_no_attributes_carries_fails_runs_on_passes_with_note():
    j = judge_elf(facts(arch=None), get_profile("rv64gc"), IsaLevel.CARRIES)
    assert not j.ok and any(
        "no .riscv.attributes arch string: cannot prove" in r and "--isa runs-on" in r for r in j.reasons
    )
    j = judge_elf(facts(arch=None), get_profile("rvv256"), IsaLevel.RUNS_ON)
    assert j.ok and any("header checks alone" in n for n in j.notes)


def go_facts(goarch: str = "riscv64", **settings: str) -> ElfFacts:
    go = GoBuildInfo(
        go_version="go1.25.1",
        main_module="example.com/x",
        path="example.com/x",
        goos="linux",
        goarch=goarch,
        settings={"GOARCH": goarch, "GOOS": "linux", **settings},
    )
    return facts(arch=None, e_flags=0x4, go=go)  # Go: double float ABI, no RVC, no arch attribute


@pytest.mark.parametrize("profile", ["rv64gc", "rvv128", "rvv256", "rvv256-bf16"])
def test_go_binary_runs_on_every_profile(profile):
    for f in (go_facts(), go_facts(GORISCV64="rva20u64")):
        j = judge_elf(f, get_profile(profile), IsaLevel.RUNS_ON)
        assert j.ok, j.reasons
        assert not any("unproven" in n for n in j.notes)
    assert any(
        "GORISCV64=rva20u64" in n
        for n in judge_elf(go_facts(GORISCV64="rva20u64"), get_profile(profile)).notes
    )


def test_go_binary_carries_only_what_its_level_has():
    assert judge_elf(go_facts(), get_profile("rv64gc"), IsaLevel.CARRIES).ok  # no RVC flag: Go's level says c
    j = judge_elf(go_facts(GORISCV64="rva20u64"), get_profile("rvv128"), IsaLevel.CARRIES)
    assert not j.ok and any(
        "Go build info (GORISCV64=rva20u64) lacks v, zvfh, zvl128b" in r for r in j.reasons
    )


@pytest.mark.parametrize("level,beyond", [("rva22u64", "zba, zbb, zbs"), ("rva23u64", "v")])
def test_go_binary_built_for_a_higher_level_does_not_run_on_rv64gc(level, beyond):
    j = judge_elf(go_facts(GORISCV64=level), get_profile("rv64gc"), IsaLevel.RUNS_ON)
    assert not j.ok
    r = next(r for r in j.reasons if "beyond profile rv64gc" in r)
    assert all(e in r for e in beyond.split(", ")) and f"GORISCV64={level}" in r


def test_go_binary_with_an_unknown_level_or_arch_fails():
    j = judge_elf(go_facts(GORISCV64="rva99u64"), get_profile("rv64gc"))
    assert not j.ok and any("GORISCV64=rva99u64, a level rvport does not know" in r for r in j.reasons)
    j = judge_elf(go_facts("arm64"), get_profile("rv64gc"))
    assert any("GOARCH=arm64" in r for r in j.reasons)


def test_go_levels_are_data():
    from rvport.catalogue.profiles import go_level, isa_rules

    levels = isa_rules()["go_riscv64"]["levels"]
    assert set(levels) >= {"rva20u64", "rva22u64", "rva23u64"}
    assert go_level(None).name == isa_rules()["go_riscv64"]["default"] and go_level(None).default
    assert go_level("rva22u64").extensions == frozenset(levels["rva22u64"])
    assert go_level("nonsense") is None


def test_v0p7_is_not_rvv1():
    j = judge_elf(facts(arch=GC_ARCH + "_v0p7"), get_profile("rvv128"), IsaLevel.RUNS_ON)
    assert any("older than 1p0" in r for r in j.reasons)


def test_maximal():
    from rvport.catalogue.profiles import expand

    assert maximal(expand(frozenset({"v", "zvl256b", "zvfh"})) - {"d", "f", "zicsr"}) == {
        "v",
        "zvl256b",
        "zvfh",
    }


# ---- glibc and wheel tags ----------------------------------------------------------------------------------


def test_manylinux_mapping():
    assert manylinux_for((2, 36)) == "manylinux_2_36_riscv64"
    assert manylinux_for((2, 17)) == "manylinux_2_31_riscv64"  # riscv64's lowest manylinux policy
    assert manylinux_for(None) == "manylinux_2_31_riscv64"
    assert manylinux_for((2, 32)) == "manylinux_2_34_riscv64"  # no riscv64 policy for 2.32 or 2.33
    assert parse_platform("manylinux2014_x86_64").version == (2, 17)
    assert parse_platform("manylinux_2_39_riscv64").arch == "riscv64"
    assert parse_platform("musllinux_1_2_riscv64").libc == "musl"
    assert parse_platform("linux_riscv64").version is None
    assert parse_platform("any").arch is None


def test_wheel_tag_glibc_floor():
    elfs = [("pkg/_a.so", facts(glibc=((2, 27), (2, 36))))]
    j = judge_wheel_tags(parse_tag("cp312-cp312-manylinux_2_31_riscv64"), elfs)
    assert not j.ok and "manylinux_2_36_riscv64" in j.reasons[0] and "GLIBC_2.36" in j.reasons[0]
    assert judge_wheel_tags(parse_tag("cp312-cp312-manylinux_2_39_riscv64"), elfs).ok
    assert judge_wheel_tags(parse_tag("cp312-cp312-linux_riscv64"), elfs).ok
    j = judge_wheel_tags(parse_tag("cp312-cp312-musllinux_1_2_riscv64"), elfs)
    assert any("musl" in r for r in j.reasons)


def test_manylinux_tag_follows_libstdcxx_and_libgcc_versions_and_system_libraries():
    from rvport.verify.manylinux import best_tag

    cxx = facts(
        glibc=((2, 34),),
        versions=("GLIBC_2.34", "GLIBCXX_3.4.32", "CXXABI_1.3.15", "CXXABI_TM_1"),
        needed=("libstdc++.so.6", "libc.so.6"),
    )
    answer = best_tag([("sp/_sentencepiece.so", cxx)])
    assert answer.tag == "manylinux_2_39_riscv64" and "CXXABI_1.3.15" in answer.why
    assert best_tag([("t/_t.so", facts(glibc=((2, 34),)))]).tag == "manylinux_2_34_riscv64"
    gcc = facts(versions=("GCC_3.0", "GCC_14.0.0"), needed=("libgcc_s.so.1",))
    assert best_tag([("x/_x.so", gcc)]).tag == "manylinux_2_39_riscv64"
    # a library the wheel needs from the system that no policy allows: no tag, unless the wheel ships it
    blas = facts(glibc=((2, 31),), needed=("libopenblas.so.0", "libc.so.6"))
    answer = best_tag([("t/_C.so", blas)])
    assert answer.tag is None and "libopenblas.so.0" in answer.why
    grafted = facts(glibc=((2, 31),))
    assert best_tag([("t/_C.so", blas), ("t.libs/libopenblas.so.0", grafted)]).tag == "manylinux_2_31_riscv64"
    too_new = facts(versions=("GLIBCXX_3.4.99",), needed=("libstdc++.so.6",))
    assert best_tag([("n/_n.so", too_new)]).tag is None
    j = judge_wheel_tags(parse_tag("cp313-cp313-manylinux_2_35_riscv64"), [("sp/_sentencepiece.so", cxx)])
    assert not j.ok and "manylinux_2_39_riscv64" in j.reasons[0] and "CXXABI_1.3.15" in j.reasons[0]


def test_wheel_tag_arch_and_purity():
    elfs = [("pkg/_a.so", facts())]
    j = judge_wheel_tags(parse_tag("cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64"), elfs)
    assert any("is for x86_64, not riscv64" in r for r in j.reasons)
    assert any("ELF" in r for r in judge_wheel_tags(parse_tag("py3-none-any"), elfs).reasons)
    assert not judge_wheel_tags(parse_tag("py3-none-linux_riscv64"), []).ok
    assert judge_wheel_tags(parse_tag("py3-none-any"), []).ok


# ---- ar archives
# ----------------------------------------------------------------------------------------------


def _ar_member(name: str, data: bytes) -> bytes:
    hdr = f"{name:<16}{0:<12}{0:<6}{0:<6}{644:<8}{len(data):<10}`\n".encode()
    return hdr + data + (b"\n" if len(data) % 2 else b"")


def test_gnu_ar_with_symbol_table_and_long_names():
    longname = "a_member_with_a_name_longer_than_sixteen.o"
    table = f"{longname}/\n".encode()
    blob = (
        b"!<arch>\n"
        + _ar_member("/", b"\0\0\0\0")
        + _ar_member("/SYM64/", b"\0" * 8)
        + _ar_member("//", table)
        + _ar_member("short.o/", b"\x7fELFabc")
        + _ar_member("/0", b"xyz")
    )
    assert list(iter_ar_members(blob)) == [("short.o", b"\x7fELFabc"), (longname, b"xyz")]


def test_bsd_ar_names():
    blob = b"!<arch>\n" + _ar_member("#1/20", b"bsd_long_name_x.o\0\0\0" + b"data")
    assert list(iter_ar_members(blob)) == [("bsd_long_name_x.o", b"data")]


@pytest.mark.parametrize(
    "blob,msg",
    [
        (b"!<thin>\n", "thin archive"),
        (b"garbage!", "not an ar archive"),
        (b"!<arch>\n" + _ar_member("x.o/", b"12345678")[:-3], "truncated"),
        (b"!<arch>\nshort", "truncated member header"),
        (b"!<arch>\n" + _ar_member("x.o/", b"")[:48] + b"-60       `\n", "bad member size"),  # looped forever
        (b"!<arch>\n" + _ar_member("#1/zz", b"data"), "bad BSD member name"),
        (b"!<arch>\n" + _ar_member("#1/9", b"data"), "bad BSD member name"),
    ],
)
def test_bad_archives(blob, msg):
    with pytest.raises(ArchiveError, match=msg):
        list(iter_ar_members(blob))


# ---- Go build info
# ---------------------------------------------------------------------------------------------


def _buildinfo(version: str, mod: str) -> bytes:
    def s(b: bytes) -> bytes:
        return bytes([len(b)]) + b if len(b) < 128 else bytes([len(b) & 0x7F | 0x80, len(b) >> 7]) + b

    sentinel = b"0" * 15 + b"\n"
    head = b"\xff Go buildinf:" + bytes([8, 2]) + b"\0" * 16
    return b"pad" + head + s(version.encode()) + s(sentinel + mod.encode() + sentinel[:-1] + b"\n")


def test_go_buildinfo_inline_format():
    mod = (
        "path\texample.com/router/cmd\nmod\texample.com/router\tv1.2.3\th1:abc=\n"
        "build\tCGO_ENABLED=1\nbuild\tGOARCH=riscv64\nbuild\tGOOS=linux\n"
    )
    info = parse_go_buildinfo(_buildinfo("go1.22.4", mod))
    assert info is not None
    assert (info.go_version, info.goos, info.goarch) == ("go1.22.4", "linux", "riscv64")
    assert info.main_module == "example.com/router@v1.2.3" and info.path == "example.com/router/cmd"
    assert info.settings["CGO_ENABLED"] == "1"
    assert parse_go_buildinfo(b"no magic here") is None


# ---- reports
# ----------------------------------------------------------------------------------------------------


def _report() -> VerifyReport:
    good = ArtifactResult(
        path="dist/ok.whl",
        kind=ArtifactKind.WHEEL,
        verdict=Verdict.PASS,
        members=(MemberResult(name="pkg/_a.so", verdict=Verdict.PASS, facts=facts()),),
    )
    bad = ArtifactResult(
        path="dist/libx.a",
        kind=ArtifactKind.ARCHIVE,
        verdict=Verdict.FAIL,
        members=(
            MemberResult(
                name="x86.o",
                verdict=Verdict.FAIL,
                reasons=("machine is x86-64 (EM_X86_64), not RISC-V",),
                facts=facts(machine="EM_X86_64", arch=None, e_flags=0),
            ),
        ),
    )
    return VerifyReport(
        profile="rv64gc", march="rv64gc", mabi="lp64d", isa=IsaLevel.CARRIES, artifacts=(good, bad)
    )


def schema() -> dict:
    return json.loads(builtin("schemas", "verify.schema.json").read_text())


def test_json_is_versioned_sorted_and_valid():
    r = _report()
    doc = json.loads(r.dumps())
    validate(doc, schema())
    assert doc["schema"] == 2 and "schema_version" not in doc and doc["ok"] is False
    assert doc["summary"] == {"artifacts": 2, "passed": 1, "failed": 1, "elf_files": 2}
    assert r.dumps() == json.dumps(doc, indent=2, sort_keys=True) + "\n"


def test_a_schema_1_report_from_an_old_cache_record_reads_as_schema_2():
    from rvport.verify.model import current_report

    doc = _report().to_json()
    old = {("schema_version" if k == "schema" else k): (1 if k == "schema" else v) for k, v in doc.items()}
    assert current_report(old) == doc and current_report(doc) is doc
    validate(current_report(old), schema())


def test_empty_report_is_not_ok():
    assert not VerifyReport(
        profile="rv64gc", march="rv64gc", mabi="lp64d", isa=IsaLevel.CARRIES, artifacts=()
    ).ok


def test_junit_one_case_per_artifact():
    root = ET.fromstring(to_junit(_report()))
    cases = root.findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == ["dist/ok.whl", "dist/libx.a"]
    assert cases[0].find("failure") is None
    fail = cases[1].find("failure")
    assert fail is not None and "x86.o: machine is x86-64" in fail.text
    assert root.get("tests") == "2" and root.get("failures") == "1"


# ---- reading wheels: each member once, on threads
# -------------------------------------------------------------


def _riscv_elf(
    arch: str = GC_ARCH, machine: int = 243, e_flags: int = 0x5, *, gap: int = 0, tail: int = 0
) -> bytes:
    """A minimal ELF64 shared object: a header, two sections (.riscv.attributes, .shstrtab) and the section
    headers; `gap` bytes of padding before the attribute section, `tail` bytes before the section headers."""
    attrs = _attr_section(arch)
    names = b"\0.riscv.attributes\0.shstrtab\0"
    attr_off = 64 + gap
    names_off = attr_off + len(attrs) + tail
    shoff = (names_off + len(names) + 7) & ~7
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    hdr = ident + struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 0, shoff, e_flags, 64, 56, 0, 64, 3, 2)

    def sh(name: int, typ: int, off: int, size: int) -> bytes:
        return struct.pack("<IIQQQQIIQQ", name, typ, 0, 0, off, size, 0, 0, 1, 0)

    pad = bytes(range(256)) * ((max(gap, tail) >> 8) + 1)
    body = hdr + pad[:gap] + attrs + pad[:tail] + names
    body += b"\0" * (shoff - len(body))
    return body + sh(0, 0, 0, 0) + sh(1, 0x70000003, attr_off, len(attrs)) + sh(19, 3, names_off, len(names))


def _wheel(
    tmp_path,
    files: dict[str, bytes],
    *,
    name: str = "demo-1.0-cp312-cp312-manylinux_2_31_riscv64.whl",
    method: int = zipfile.ZIP_DEFLATED,
    record_override: dict[str, str] | None = None,
) -> Path:
    dist = "demo-1.0.dist-info"
    files = {**files, f"{dist}/WHEEL": b"Wheel-Version: 1.0\nTag: cp312-cp312-manylinux_2_31_riscv64\n"}
    rows = [f"{n},{(record_override or {}).get(n, _sha256_field(d))},{len(d)}" for n, d in files.items()]
    files[f"{dist}/RECORD"] = ("\n".join(rows) + f"\n{dist}/RECORD,,\n").encode()
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", compression=method) as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return path


def _sha256_field(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _read(path: Path, name: str, algo: str | None = "sha256") -> Member:
    with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
        return read_member(
            path,
            f.fileno(),
            zf.getinfo(name),
            algo,
            keep=lambda head: Keep.WHOLE if head[:4] == b"\x7fELF" else Keep.NOTHING,
        )


def _patch_member_headers(path: Path, name: str, fn) -> None:
    """Apply fn(data, local_header_offset, central_header_offset) to the raw zip bytes."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    data = bytearray(path.read_bytes())
    central = data.find(b"PK\x01\x02" + data[info.header_offset + 4 : info.header_offset + 6])
    while data[central + 46 : central + 46 + len(name)] != name.encode():
        central = data.find(b"PK\x01\x02", central + 4)
    fn(data, info.header_offset, central)
    path.write_bytes(bytes(data))


def test_minimal_elf_reads_as_riscv():
    f = read_elf_bytes(_riscv_elf())
    assert f.machine == "EM_RISCV" and f.arch == GC_ARCH and f.float_abi == "double"


@pytest.mark.parametrize(
    "method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]
)
def test_member_read_once_hashes_and_keeps_elf(tmp_path, method, monkeypatch):
    elf = _riscv_elf() + bytes(range(256)) * 4000
    whl = _wheel(tmp_path, {"demo/_x.so": elf, "demo/a.py": b"x = 1\n" * 1000}, method=method)
    monkeypatch.setattr(pool, "THREADS", 2)  # threads even on a one-CPU machine (RVPORT_VERIFY_THREADS)
    for ahead in (1 << 40, 0):  # inline, and inflated on a helper thread
        monkeypatch.setattr(zip_member, "AHEAD_MIN", ahead)
        m = _read(whl, "demo/_x.so")
        assert m.size == len(elf) and "sha256=" + (m.digest or "") == _sha256_field(elf)
        assert m.content is not None and m.content.getvalue() == elf
        py = _read(whl, "demo/a.py", "sha512")
        assert py.content is None and py.size == 6000
        assert (
            py.digest
            == base64.urlsafe_b64encode(hashlib.sha512(b"x = 1\n" * 1000).digest()).rstrip(b"=").decode()
        )
        assert _read(whl, "demo/a.py", None).digest is None


def test_member_read_errors(tmp_path):
    elf = _riscv_elf()

    def crc(data, local, central):
        for at in (local + 14, central + 16):
            data[at] ^= 0xFF

    def encrypted(data, local, central):
        data[local + 6] |= 1
        data[central + 8] |= 1

    def local_name(data, local, central):
        data[local + 30] = ord("X")

    def magic(data, local, central):
        data[local + 2] = 0

    for fn, why in [
        (crc, "Bad CRC-32"),
        (encrypted, "encrypted"),
        (local_name, "differ"),
        (magic, "Bad magic"),
    ]:
        whl = _wheel(tmp_path, {"demo/_x.so": elf})
        _patch_member_headers(whl, "demo/_x.so", fn)
        with pytest.raises(MemberError, match=why):
            _read(whl, "demo/_x.so")
        r = verify_wheel(whl, get_profile("rv64gc"), IsaLevel.CARRIES)
        assert not r.ok and any("demo/_x.so: cannot read member" in x and why in x for x in r.reasons), (
            r.reasons
        )


def test_member_read_truncated_file(tmp_path):
    data = bytes(range(256)) * 20000
    whl = _wheel(tmp_path, {"demo/big.bin": data}, method=zipfile.ZIP_STORED)
    with zipfile.ZipFile(whl) as zf:
        info = zf.getinfo("demo/big.bin")
    cut = tmp_path / "cut.zip"
    cut.write_bytes(whl.read_bytes()[: info.header_offset + 1000])
    with open(cut, "rb") as f, pytest.raises(MemberError, match="truncated"):
        read_member(cut, f.fileno(), info, "sha256", keep=lambda head: Keep.NOTHING)


def test_buffer_file_reads_like_bytesio():
    import io
    import random

    data = bytes(random.Random(1).randrange(256) for _ in range(5000))
    for buf in (data, bytearray(data)):
        a, b = BufferFile(buf), io.BytesIO(data)
        rng = random.Random(2)
        for _ in range(300):
            off, whence = rng.choice(
                [(rng.randrange(6000), 0), (rng.randrange(-50, 50), 1), (-rng.randrange(100), 2)]
            )
            if whence == 1 and a.tell() + off < 0:
                continue
            assert a.seek(off, whence) == b.seek(off, whence)
            n = rng.randrange(200)
            assert a.read(n) == b.read(n) and a.tell() == b.tell()
        assert a.getvalue() == data and a.size == len(data)


def test_map_ordered_keeps_order_on_threads_and_alone():
    items = list(range(500))
    cost = {i: (i * 7919) % 1000 for i in items}
    seen_threads: set[str] = set()

    def fn(i: int) -> int:
        seen_threads.add(threading.current_thread().name)
        return i * i

    assert map_ordered(fn, items, cost=lambda i: cost[i] << 20, threads=4) == [i * i for i in items]
    assert any(t.startswith("rvport-verify") for t in seen_threads)
    seen_threads.clear()
    assert map_ordered(fn, items[:10], cost=lambda i: 1, threads=4) == [i * i for i in range(10)]
    assert seen_threads == {threading.current_thread().name}  # small input: no threads
    assert map_ordered(fn, [], cost=lambda i: 1) == []


def test_read_ahead_yields_all_raises_and_stops():
    assert list(read_ahead(iter(range(100)), depth=2)) == list(range(100))

    def failing():
        yield 1
        raise ValueError("corrupt")

    with pytest.raises(ValueError, match="corrupt"):
        list(read_ahead(failing()))
    produced: list[int] = []

    def endless():
        i = 0
        while True:
            produced.append(i)
            yield i
            i += 1

    it = read_ahead(endless(), depth=2)
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    it.close()  # stops the helper thread instead of hanging
    assert len(produced) < 20


def test_wheel_verdicts_same_alone_and_on_threads(tmp_path, monkeypatch):
    elf = _riscv_elf()
    files = {f"demo/lib{i}.so": elf + bytes(i) for i in range(30)}
    files |= {f"demo/m{i}.py": f"x = {i}\n".encode() * (i + 1) for i in range(200)}
    files["demo/x86.so"] = _riscv_elf(machine=62, e_flags=0)
    files["demo/v.so"] = _riscv_elf(V256_ARCH)
    files["demo/bad.so"] = elf[:100]
    files["demo/libk.a"] = b"!<arch>\n" + _ar_member("k.o/", elf) + _ar_member("t.txt/", b"text")
    whl = _wheel(
        tmp_path,
        files,
        record_override={"demo/m7.py": _sha256_field(b"other"), "demo/lib3.so": _sha256_field(b"other")},
    )
    profile = get_profile("rv64gc")
    alone = verify_wheel(whl, profile, IsaLevel.CARRIES)
    monkeypatch.setattr(pool, "THREADS", 3)
    monkeypatch.setattr(pool, "PARALLEL_MIN_COST", 0)
    monkeypatch.setattr(pool, "BATCH_COST", 1)
    monkeypatch.setattr(zip_member, "AHEAD_MIN", 0)
    threaded = verify_wheel(whl, profile, IsaLevel.CARRIES)
    assert alone.to_json() == threaded.to_json()
    doc = alone.to_json()
    assert doc["wheel"]["record_checked"] == len(files) + 1  # every file but RECORD itself
    assert [m["name"] for m in doc["members"]][:3] == ["demo/lib0.so", "demo/lib1.so", "demo/lib2.so"]
    reasons = alone.all_reasons()
    assert "demo/m7.py: RECORD sha256 mismatch (file changed after the wheel was built)" in reasons
    assert "demo/lib3.so: RECORD sha256 mismatch (file changed after the wheel was built)" in reasons
    assert "demo/x86.so: machine is x86-64 (EM_X86_64), not RISC-V (EM_RISCV)" in reasons
    assert any(r.startswith("demo/bad.so: corrupt or truncated ELF file") for r in reasons)
    assert any(r.startswith("demo/v.so: needs v, zvfh") for r in reasons)
    assert "demo/libk.a(t.txt): archive member is not an ELF object" in reasons
    assert alone.sha256 == hashlib.sha256(whl.read_bytes()).hexdigest() and alone.size == whl.stat().st_size


def test_unreadable_zip_structures_are_verdicts(tmp_path):
    elf = _riscv_elf()

    def version(data, local, central):
        data[central + 6] = 0xFF  # "version needed to extract" 25.5: zipfile raises NotImplementedError

    def encrypted_record(data, local, central):
        data[local + 6] |= 1
        data[central + 8] |= 1

    for member, fn, why in [
        ("demo/_x.so", version, "not a readable zip file: zip file version"),
        (
            "demo-1.0.dist-info/RECORD",
            encrypted_record,
            "demo-1.0.dist-info/RECORD: cannot read member: encrypted",
        ),
    ]:
        whl = _wheel(tmp_path, {"demo/_x.so": elf})
        _patch_member_headers(whl, member, fn)
        r = verify_wheel(whl, get_profile("rv64gc"), IsaLevel.CARRIES)
        assert not r.ok and any(x.startswith(why) for x in r.reasons), r.reasons


def test_big_elf_kept_in_ranges_judged_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr(elf_ranges, "HEAD", 4096)
    monkeypatch.setattr(elf_ranges, "NEAR", 1024)
    usual = _riscv_elf(V256_ARCH, tail=200_000)  # attributes in the head, section headers far: kept in ranges
    unusual = _riscv_elf(V256_ARCH, gap=100_000, tail=100_000)  # attributes in the middle: read again, whole
    whl = _wheel(tmp_path, {"demo/usual.so": usual, "demo/unusual.so": unusual})
    m = _read_keep(whl, "demo/usual.so")
    assert m.content is not None and not m.content.complete
    assert read_elf(m.content).arch == V256_ARCH
    m = _read_keep(whl, "demo/unusual.so")
    with pytest.raises(NotKept):
        read_elf(m.content)  # type: ignore[arg-type]
    sparse = verify_wheel(whl, get_profile("rvv128"), IsaLevel.CARRIES)
    monkeypatch.setattr(elf_ranges, "HEAD", 1 << 30)
    whole = verify_wheel(whl, get_profile("rvv128"), IsaLevel.CARRIES)
    assert sparse.to_json() == whole.to_json()
    assert [m.name for m in sparse.failed_members] == ["demo/usual.so", "demo/unusual.so"]
    assert all("needs zvl256b, beyond profile rvv128" in m.reasons[0] for m in sparse.failed_members)


def _read_keep(path: Path, name: str) -> Member:
    with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
        return read_member(
            path,
            f.fileno(),
            zf.getinfo(name),
            None,
            keep=lambda head: Keep.ELF_RANGES if head[:4] == b"\x7fELF" else Keep.NOTHING,
        )


def test_ranges_beyond_head_from_program_headers(monkeypatch):
    monkeypatch.setattr(elf_ranges, "HEAD", 1000)
    monkeypatch.setattr(elf_ranges, "NEAR", 10)
    phdrs = [(1, 0x5, 0, 5000), (1, 0x6, 6000, 3000), (2, 0x6, 7000, 500), (0x70000003, 0x4, 9500, 60)]
    hdr = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    hdr += struct.pack("<HHIQQQIHHHHHH", 3, 243, 1, 0, 64, 20000, 5, 64, 56, len(phdrs), 64, 4, 3)
    for typ, flags, off, size in phdrs:
        hdr += struct.pack("<IIQQQQQQ", typ, flags, off, off, off, size, size, 8)
    assert elf_ranges.ranges_beyond_head(hdr, 30000) == [
        (6000, 6010),
        (7000, 7500),
        (9000, 9010),
        (9500, 9560),
        (19990, 20256),
    ]
    assert elf_ranges.ranges_beyond_head(b"not an ELF file", 30000) == []
    assert elf_ranges.ranges_beyond_head(hdr[:70], 30000) == [(19990, 20256)]  # cut short: what it could read


def test_elf_header_read_with_struct():
    be32 = (
        b"\x7fELF"
        + bytes([1, 2, 1, 0])
        + b"\0" * 8
        + struct.pack(">HHIIIIIHHHHHH", 2, 8, 1, 0, 0, 0, 0, 52, 32, 0, 40, 0, 0)
    )
    f = read_elf_bytes(be32)
    assert (f.elf_class, f.little_endian, f.machine, f.elf_type) == (32, False, "EM_MIPS", "ET_EXEC")
    odd = read_elf_bytes(_riscv_elf(machine=0x7777))
    assert odd.machine == str(0x7777) and not odd.is_riscv
    for bad, why in [
        (b"\x7fELF\x03" + b"\x01" * 60, "Invalid EI_CLASS"),
        (b"\x7fELF\x02\x07" + b"\0" * 60, "Invalid EI_DATA"),
        (_riscv_elf()[:40], "truncated ELF header"),
    ]:
        with pytest.raises(ElfReadError, match=why):
            read_elf_bytes(bad)


def test_go_build_info_of_a_binary_without_section_headers():
    mod = "path\texample.com/hi\nmod\texample.com/hi\t(devel)\t\nbuild\tGOARCH=riscv64\nbuild\tGOOS=linux\n"
    info = _buildinfo("go1.22.4", mod)
    phdrs = struct.pack("<IIQQQQQQ", 1, 0x5, 0, 0, 0, 176, 176, 8) + struct.pack(
        "<IIQQQQQQ", 1, 0x6, 176, 0, 0, len(info), len(info), 8
    )
    hdr = (
        b"\x7fELF"
        + bytes([2, 1, 1, 0])
        + b"\0" * 8
        + struct.pack("<HHIQQQIHHHHHH", 2, 243, 1, 0, 64, 0, 4, 64, 56, 2, 64, 0, 0)
    )
    f = read_elf_bytes(hdr + phdrs + info)
    assert f.go is not None and (f.go.go_version, f.go.goarch, f.go.goos) == ("go1.22.4", "riscv64", "linux")


# ---- exports: judged from symbol tables (symbols.py reads them; exports.py judges)
# -------------------------------


def _sym(name, bind="GLOBAL", type_="FUNC", visibility="DEFAULT", defined=True):
    from rvport.verify.symbols import Symbol

    return Symbol(name=name, bind=bind, type=type_, visibility=visibility, defined=defined)


def _table(table, *syms):
    from rvport.verify.symbols import SymbolTable

    return SymbolTable(table=table, elf_type="ET_REL" if table == ".symtab" else "ET_DYN", symbols=syms)


def test_judge_exports_in_archive_members():
    from rvport.verify.exports import Found, judge_exports

    found = [
        Found(
            where="a.o",
            table=_table(
                ".symtab",
                _sym("create_client", defined=False),
                _sym("helper", bind="LOCAL"),
                _sym("data", type_="OBJECT"),
            ),
        ),
        Found(
            where="b.o",
            table=_table(
                ".symtab",
                _sym("create_client"),
                _sym("close_client", bind="WEAK"),
                _sym("resolver", type_="IFUNC"),
                _sym("hid", visibility="HIDDEN"),
                _sym("only_ref", defined=False),
            ),
        ),
    ]
    j = judge_exports(["create_client", "close_client", "resolver", "hid"], found, archive=True)
    assert j.reasons == () and j.notes == ("exports create_client, close_client, resolver, hid (functions)",)
    j = judge_exports(["data", "helper", "only_ref", "nowhere"], found, archive=True)
    assert j.reasons == (
        "data is not exported: it is GLOBAL OBJECT (STT_OBJECT) in a.o, not a function (STT_FUNC)",
        "helper is not exported: it is defined only as a LOCAL symbol in a.o (static), "
        "not visible to a linker",
        "only_ref is not exported: it is referenced in b.o but defined in no member",
        "nowhere is not exported: no member defines or references it",
    )
    assert j.notes == ()


def test_judge_exports_in_a_shared_object():
    from rvport.verify.exports import Found, judge_exports

    found = [
        Found(
            where=None,
            table=_table(
                ".dynsym", _sym("f"), _sym("p", visibility="PROTECTED"), _sym("h", visibility="HIDDEN")
            ),
        )
    ]
    assert judge_exports(["f", "p"], found, archive=False).reasons == ()
    j = judge_exports(["h", "g"], found, archive=False)
    assert j.reasons == (
        "h is not exported: it is a HIDDEN function, not visible outside its object",
        "g is not exported: it is not in its .dynsym",
    )
    empty = [Found(where=None, table=_table(""))]
    assert judge_exports(["g"], empty, archive=False).reasons == (
        "g is not exported: the file has no symbol table",
    )


def test_symbol_table_of_a_corrupt_file_is_an_elf_read_error():
    import io

    from rvport.verify.symbols import read_symbols

    with pytest.raises(ElfReadError):
        read_symbols(io.BytesIO(b"\x7fELF" + b"\x02\x01\x01" + b"\0" * 9 + b"\xff" * 48))
    with pytest.raises(ElfReadError):
        read_symbols(io.BytesIO(b"not an elf file at all"))


def test_recipe_outputs_declare_exports(tmp_path):
    from rvport.catalogue.recipes import load_catalogue
    from rvport.errors import RecipeError

    glide = load_catalogue().resolve("glide-ffi")
    assert glide.outputs[0].exports == ("create_client", "close_client", "command", "batch")
    (tmp_path / "demo.yaml").write_text(
        "schema: 1\nname: demo\nkind: python-wheel\nbuild: [echo]\n"
        "outputs:\n  - {glob: '*.whl', type: wheel, exports: [f]}\n"
        "versions:\n  - version: '1.0'\n    sources: [{name: s, url: 'https://example.org/s.tar.gz'}]\n"
    )
    with pytest.raises(RecipeError) as ei:
        load_catalogue(tmp_path)
    p = ei.value.problems[0]
    assert "declares exports" in p.message and p.line == 6 and "staticlib" in p.hint
    (tmp_path / "demo.yaml").write_text(
        (tmp_path / "demo.yaml").read_text().replace("exports: [f]", "exports: ['a b']")
    )
    with pytest.raises(RecipeError):
        load_catalogue(tmp_path)


def test_gcc16_platform_properties_and_counters_are_tolerated():
    """Debian sid's GCC 16 links its crt files, built with its default arch, into every shared object: their
    ziccamoa, ziccif, ziccrse and zicntr reach the arch string (msgspec cp314, found building it)."""
    sid = "rv64i2p1_m2p0_a2p1_f2p2_d2p2_c2p0_ziccamoa1p0_ziccif1p0_ziccrse1p0_zicntr2p0_zicsr2p0_zifencei2p0"
    for profile in ("rv64gc", "rvv256"):
        assert judge_elf(facts(arch=sid), get_profile(profile), IsaLevel.RUNS_ON).ok
    # an extension with instructions of its own still is not
    assert not judge_elf(facts(arch=sid + "_zba1p0"), get_profile("rv64gc"), IsaLevel.RUNS_ON).ok


def test_a_library_another_wheel_ships_counts_only_for_a_wheel_that_requires_that_wheel():
    """xgrammar's bindings need libtvm_ffi.so, which the apache-tvm-ffi wheel ships (manylinux.yaml
    provided_by_wheels): with apache-tvm-ffi in its Requires-Dist the wheel may carry a manylinux tag without
    shipping it; without, the library is the system's, which no policy allows."""
    from rvport.verify.manylinux import best_tag, provided

    bindings = facts(
        glibc=((2, 38),),
        versions=("GLIBC_2.38", "GLIBCXX_3.4.32", "CXXABI_1.3.15"),
        needed=("libtvm_ffi.so", "libstdc++.so.6", "libc.so.6"),
    )
    elfs = [("xgrammar/libxgrammar_bindings.so", bindings)]
    alone = best_tag(elfs)
    assert alone.tag is None and "libtvm_ffi.so" in alone.why
    assert provided(["Apache_TVM_FFI"]) == {"libtvm_ffi.so"} and provided(["numpy"]) == frozenset()
    answer = best_tag(elfs, requires=("numpy", "apache_tvm_ffi"))  # spelled as in a METADATA, or not
    assert answer.tag == "manylinux_2_39_riscv64" and "libtvm_ffi.so from a wheel it requires" in answer.why
    assert best_tag(elfs, requires=("numpy",)).tag is None  # another requirement does not ship it
    claim = parse_tag("cp314-cp314-manylinux_2_39_riscv64")
    assert judge_wheel_tags(claim, elfs, ("apache-tvm-ffi",)).ok
    refused = judge_wheel_tags(claim, elfs)
    assert not refused.ok and "libtvm_ffi.so" in refused.reasons[0]
    # a library of the list that the wheel ships itself is its own, whatever it requires
    shipped = [*elfs, ("xgrammar.libs/libtvm_ffi.so", facts(glibc=((2, 31),)))]
    assert "from a wheel it requires" not in best_tag(shipped, requires=("apache-tvm-ffi",)).why


def test_the_requirements_verify_reads_are_metadata_s_requires_dist_without_extras(tmp_path):
    from rvport.verify.limits import DEFAULT_LIMITS
    from rvport.verify.wheel import _requires

    meta = (
        "Metadata-Version: 2.4\nName: xgrammar\nVersion: 0.2.8\n"
        "Requires-Dist: apache-tvm-ffi>=0.1.11\nRequires-Dist: torch>=1.10.0\n"
        "Requires-Dist: triton; platform_system == 'Linux' and platform_machine == 'x86_64'\n"
        'Requires-Dist: pytest; extra == "test"\nRequires-Dist: not a requirement !!\n'
        "Requires-Dist: tvm-ffi-riscv; platform_machine == 'riscv64'\n\nlong description\n"
    )
    path = tmp_path / "x.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("xgrammar-0.2.8.dist-info/METADATA", meta)
    with zipfile.ZipFile(path) as zf:
        reasons: list[str] = []
        got = _requires(zf, "xgrammar-0.2.8.dist-info", DEFAULT_LIMITS, reasons)
        # triton is for x86_64, pytest for an extra
        assert got == ("apache-tvm-ffi", "torch", "tvm-ffi-riscv") and reasons == []
        assert _requires(zf, "other-1.0.dist-info", DEFAULT_LIMITS, reasons) == ()  # no METADATA: none


# VLEN-exact vector code (policy.rule_vlen): vLLM compiles its kernels with -mrvv-vector-bits=zvl, which
# takes the profile's zvl<N>b as *the* VLEN. Its rvv128 wheel ran every kernel at VLEN 128 and aborted with
# heap corruption at VLEN 256 (docs/heavy-recipes.md); the arch string (zvl128b, a floor) cannot show it.
BF16_ARCH = V256_ARCH + "_zfbfmin1p0_zvfbfmin1p0"


@pytest.mark.parametrize(
    "arch,profile,ok,why",
    [
        (
            V128_ARCH,
            "rvv256",
            False,
            "VLEN-exact for VLEN 128 (zvl128b), but profile rvv256's CPUs have VLEN 256",
        ),
        (V128_ARCH, "rvv256-bf16", False, "VLEN-exact for VLEN 128"),
        (V128_ARCH, "rvv128", True, "runs only where VLEN is exactly 128"),
        (V256_ARCH, "rvv256", True, "runs only where VLEN is exactly 256"),
        (BF16_ARCH, "rvv256-bf16", True, "runs only where VLEN is exactly 256"),
        (
            V256_ARCH,
            "rvv128",
            False,
            "needs zvl256b, beyond profile rvv128",
        ),  # rule_extensions, not rule_vlen
        (GC_ARCH, "rvv256", True, ""),  # no vector code: nothing to be exact about
    ],
)
def test_vlen_exact_vector_code_runs_only_at_its_own_vlen(arch, profile, ok, why):
    for level in IsaLevel:
        j = judge_elf(facts(arch=arch), get_profile(profile), level, vlen_exact=True)
        if level is IsaLevel.RUNS_ON or not ok:
            assert j.ok is ok, (level, j.reasons)
        if why:
            assert any(why in x for x in j.reasons + j.notes), (level, j.reasons, j.notes)
        assert sum("VLEN-exact" in r for r in j.reasons) <= 1  # said once, not by two rules
    if arch == GC_ARCH:
        assert not any("VLEN" in n for n in judge_elf(facts(arch=arch), get_profile(profile)).notes)


def test_vector_code_for_a_shorter_vlen_runs_on_with_a_note_unless_said_exact():
    j = judge_elf(facts(arch=V128_ARCH), get_profile("rvv256"), IsaLevel.RUNS_ON)
    assert j.ok and any("only if it is VLEN-agnostic" in n and "--vlen-exact" in n for n in j.notes), j.notes
    same = judge_elf(facts(arch=V128_ARCH), get_profile("rvv128"), IsaLevel.RUNS_ON)
    assert same.ok and not any("VLEN" in n for n in same.notes)  # at its own VLEN there is nothing to say
    assert not judge_elf(facts(arch=V128_ARCH), get_profile("rvv256"), vlen_exact=True).ok


def test_vlen_exact_reaches_every_file_of_a_wheel_and_the_report(tmp_path):
    from rvport.verify import verify_paths

    whl = _wheel(tmp_path, {"demo/_C.so": _riscv_elf(V128_ARCH)})
    agnostic = verify_paths([whl], get_profile("rvv256"))
    assert agnostic.ok and "vlen_exact" not in agnostic.to_json()
    exact = verify_paths([whl], get_profile("rvv256"), vlen_exact=True)
    assert not exact.ok
    (a,) = exact.artifacts
    assert any("VLEN-exact for VLEN 128" in r for r in a.all_reasons()), a.all_reasons()
    doc = exact.to_json()
    assert doc["vlen_exact"] is True
    validate(doc, json.loads(builtin("schemas/verify.schema.json").read_text()))
    assert verify_paths([whl], get_profile("rvv128"), vlen_exact=True).ok
