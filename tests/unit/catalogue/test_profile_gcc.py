"""rvv256-bf16 gets zfbfmin back where its compiler accepts it (profiles.yaml `gcc_adds`, bases' `gcc:`):
a sid stage (GCC 16) compiles and is verified with it, a trixie stage (GCC 14) without; `rvport verify
--profile rvv256-bf16` accepts the artifacts of both, and the build's own verify holds each to its march."""

from __future__ import annotations

import pytest

from rvport.catalogue.bases import load_bases, spec_digest
from rvport.catalogue.profiles import get_profile, load_profiles
from rvport.catalogue.recipes import load_catalogue
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan
from rvport.verify.elf import ElfFacts, parse_arch_string
from rvport.verify.policy import IsaLevel, judge_elf

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
SID_MARCH = "rv64gcv_zfbfmin_zvfh_zvfbfmin_zvl256b"
# what GCC writes for rvv256-bf16's objects: GCC 14.2 (trixie) without zfbfmin, GCC 16.2 (sid) with it
# (both read with readelf -A from the engine's cross compilers on 2026-12-01)
BF16 = (
    "rv64i2p1_m2p0_a2p1_f2p2_d2p2_c2p0_v1p0_zicsr2p0_zifencei2p0_zmmul1p0_zaamo1p0_zalrsc1p0{zfbfmin}"
    "_zfhmin1p0_zca1p0_zcd1p0_zve32f1p0_zve32x1p0_zve64d1p0_zve64f1p0_zve64x1p0_zvfbfmin1p0_zvfh1p0"
    "_zvfhmin1p0_zvl128b1p0_zvl256b1p0_zvl32b1p0_zvl64b1p0"
)
GCC14_ARCH = BF16.format(zfbfmin="")
GCC16_ARCH = BF16.format(zfbfmin="_zfbfmin1p0")


def facts(arch: str) -> ElfFacts:
    return ElfFacts(
        elf_class=64,
        little_endian=True,
        machine="EM_RISCV",
        elf_type="ET_DYN",
        e_flags=0x5,
        arch=arch,
        extensions=parse_arch_string(arch),
        glibc=(),
        needed=("libc.so.6",),
        go=None,
        versions=(),
    )


def test_the_bases_say_their_gcc():
    bases = load_bases()
    assert (bases["debian-sid"].gcc, bases["debian-trixie"].gcc) == (16, 14)


def test_a_gcc_line_does_not_change_the_base_image():
    spec = b'schema: 1\nname: x\npython: "3.14"\npackages: [a]\n'
    assert spec_digest(spec) == spec_digest(spec.replace(b"packages", b"gcc: 16\npackages"))


@pytest.mark.parametrize(
    "gcc, march", [(None, None), (14, None), (15, None), (16, SID_MARCH), (17, SID_MARCH)]
)
def test_for_gcc_adds_zfbfmin_from_gcc_16(gcc, march):
    p = get_profile("rvv256-bf16")
    q = p.for_gcc(gcc)
    if march is None:
        assert q is p and "zfbfmin" not in q.requires
    else:
        assert q.march == march and q.requires == p.requires | {"zfbfmin"}
        assert q.qemu_cpu == p.qemu_cpu and q.allowed == p.allowed  # the same CPU contract


def test_only_rvv256_bf16_has_extensions_for_newer_compilers():
    for p in load_profiles().values():
        assert p.for_gcc(16) is p or p.name == "rvv256-bf16"
    assert "zfbfmin=true" in get_profile("rvv256-bf16").qemu_cpu


def test_each_stage_records_the_march_its_base_compiler_gets(tmp_path):
    req = Request(refs=("msgspec", "vllm"), all=False, profile=get_profile("rvv256-bf16"), mode=Mode.AUTO)
    pl = make_plan(load_catalogue(), req, X86, locate=lambda s: "network")
    sid, trixie = pl.stage("vllm"), pl.stage("msgspec")
    assert sid.profile.march == SID_MARCH and sid.env["RVPORT_MARCH"] == SID_MARCH
    assert f"-march={SID_MARCH} " in sid.env["RVPORT_CFLAGS"]
    assert trixie.profile.march == "rv64gcv_zvfh_zvfbfmin_zvl256b" == trixie.env["RVPORT_MARCH"]
    doc = {s["recipe"]: s for s in pl.to_json()["stages"]}
    assert doc["vllm"]["profile"] == {
        "name": "rvv256-bf16",
        "march": SID_MARCH,
        "requires": sorted(sid.profile.requires),
    }
    assert "zfbfmin" not in doc["msgspec"]["profile"]["requires"]
    # the plan's profile stays the contract: both stages run under the same QEMU CPU
    assert sid.env["QEMU_CPU"] == trixie.env["QEMU_CPU"] == get_profile("rvv256-bf16").qemu_cpu


@pytest.mark.parametrize("level", list(IsaLevel))
def test_verify_under_the_profile_accepts_both_compilers_artifacts(level):
    p = get_profile("rvv256-bf16")
    for arch in (GCC14_ARCH, GCC16_ARCH):
        j = judge_elf(facts(arch), p, level)
        assert j.ok, (arch, j.reasons)


def test_a_sid_stage_must_carry_zfbfmin_a_trixie_one_need_not():
    sid = get_profile("rvv256-bf16").for_gcc(16)
    assert judge_elf(facts(GCC16_ARCH), sid, IsaLevel.CARRIES).ok
    j = judge_elf(facts(GCC14_ARCH), sid, IsaLevel.CARRIES)
    assert not j.ok and any("lacks zfbfmin" in r for r in j.reasons), j.reasons


@pytest.mark.parametrize("profile", ["rv64gc", "rvv128", "rvv256"])
def test_zfbfmin_is_beyond_every_lesser_profile(profile):
    j = judge_elf(facts(GCC16_ARCH), get_profile(profile), IsaLevel.RUNS_ON)
    assert not j.ok and any("zfbfmin" in r and "beyond" in r for r in j.reasons), j.reasons
