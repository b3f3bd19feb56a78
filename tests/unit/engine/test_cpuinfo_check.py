"""The /proc/cpuinfo check every emulated build stage runs first (resources/scripts/cpuinfo-check.sh): what
each profile must show there (isa.yaml's `cpuinfo` list), the script judged on QEMU 10.0.2's own isa lines
with the host's sh, and which stages run it. No docker; the real stages are in
tests/integration/test_cpuinfo_trap.py."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.engine import render
from rvport.engine.modes import accelerated, cross, emulated
from rvport.engine.stage import stage_context
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan
from rvport.resources import builtin

PROFILES = ("rv64gc", "rvv128", "rvv256", "rvv256-bf16")

# What qemu-riscv64 10.0.2 answers in /proc/cpuinfo's isa line for each profile's QEMU_CPU (rvv128 and rvv256
# differ only in vlen=, which the line does not show) and for its default CPU (no QEMU_CPU).
_COMMON = (
    "zic64b_zicbom_zicbop_zicboz_ziccamoa_ziccif_zicclsm_ziccrse_zicntr_zicsr_zifencei_zihintntl_"
    "zihintpause_zihpm_zmmul_za64rs_zaamo_zalrsc_zawrs_zfa"
)
_TAIL = (
    "shcounterenw_shgatpa_shtvala_shvsatpa_shvstvala_shvstvecd_ssccptr_sscounterenw_sstc_sstvala_sstvecd_"
    "ssu64xl_svadu_svvptc"
)
_VECTOR = "zfhmin_zca_zcd_zba_zbb_zbc_zbs_zve32f_zve32x_zve64f_zve64d_zve64x"
QEMU_ISA = {
    "rv64gc": f"rv64imafdch_{_COMMON}_zca_zcd_zba_zbb_zbc_zbs_{_TAIL}",
    "rvv128": f"rv64imafdcvh_{_COMMON}_{_VECTOR}_zvfh_zvfhmin_{_TAIL}",
    "rvv256": f"rv64imafdcvh_{_COMMON}_{_VECTOR}_zvfh_zvfhmin_{_TAIL}",
    # zfbfmin=true puts zfbfmin after zfa (checked with the engine's qemu-riscv64 on 2026-12-01)
    "rvv256-bf16": f"rv64imafdcvh_{_COMMON}_zfbfmin_{_VECTOR}_zvfbfmin_zvfh_zvfhmin_{_TAIL}",
    "default": (
        "rv64imafdcbvh_zic64b_zicbom_zicbop_zicboz_ziccamoa_ziccif_zicclsm_ziccrse_zicfilp_zicfiss_zicond_"
        "zicntr_zicsr_zifencei_zihintntl_zihintpause_zihpm_zimop_zmmul_za64rs_zaamo_zabha_zacas_zama16b_"
        "zalrsc_zawrs_zfa_zfbfmin_zfh_zfhmin_zca_zcb_zcd_zcmop_zba_zbb_zbc_zbkb_zbkc_zbkx_zbs_zk_zkn_"
        "zknd_zkne_zknh_zkr_zks_zksed_zksh_zkt_ztso_zvbb_zvbc_zve32f_zve32x_zve64f_zve64d_zve64x_"
        "zvfbfmin_zvfbfwma_zvfh_zvfhmin_zvkb_zvkg_zvkn_zvknc_zvkned_zvkng_zvknha_zvknhb_zvks_zvksc_"
        "zvksed_zvksg_zvksh_zvkt_shcounterenw_sha_shgatpa_shtvala_shvsatpa_shvstvala_shvstvecd_smaia_"
        "smcdeleg_smcntrpmf_smcsrind_smepmp_smmpm_smnpm_smstateen_ssaia_ssccfg_ssccptr_sscofpmf_"
        "sscounterenw_sscsrind_ssdbltrp_ssnpm_sspm_ssstateen_sstc_sstvala_sstvecd_ssu64xl_supm_smctr_"
        "ssctr_svadu_svinval_svnapot_svpbmt_svvptc"
    ),
}


def check(
    tmp_path: Path, profile: str, isa: str | None, qemu_cpu: str = "rv64"
) -> subprocess.CompletedProcess:
    """The shipped script, reading a file of two harts with this isa line instead of /proc/cpuinfo."""
    cpuinfo = tmp_path / "cpuinfo"
    harts = [
        f"processor\t: {i}\nhart\t\t: {i}\n"
        + (f"isa\t\t: {isa}\n" if isa is not None else "")
        + "mmu\t\t: sv48\n"
        for i in range(2)
    ]
    cpuinfo.write_text("\n".join(harts))
    script = tmp_path / "cpuinfo.sh"
    script.write_text(render.cpuinfo_script().replace("\nfile=/proc/cpuinfo\n", f"\nfile={cpuinfo}\n"))
    command = (
        render.cpuinfo_check(get_profile(profile))
        .removesuffix(" && ")
        .replace("/rvport/cpuinfo.sh", str(script))
    )
    return subprocess.run(
        ["sh", "-c", command],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "QEMU_CPU": qemu_cpu},
    )


def test_each_profile_shows_exactly_its_own_extensions():
    assert get_profile("rv64gc").cpuinfo == (
        (),
        ("v", "zfh", "zfhmin", "zvfh", "zvfhmin", "zfbfmin", "zvfbfmin", "zvfbfwma"),
    )
    for p in ("rvv128", "rvv256"):
        assert get_profile(p).cpuinfo == (
            ("v", "zfhmin", "zvfh", "zvfhmin"),
            ("zfh", "zfbfmin", "zvfbfmin", "zvfbfwma"),
        )
    # zfbfmin: its CPUs have it, whichever GCC builds for it (profiles.yaml gcc_adds)
    assert get_profile("rvv256-bf16").cpuinfo == (
        ("v", "zfhmin", "zvfh", "zvfhmin", "zfbfmin", "zvfbfmin"),
        ("zfh", "zvfbfwma"),
    )


@pytest.mark.parametrize("profile", PROFILES)
def test_the_profiles_qemu_cpu_passes(tmp_path, profile):
    cp = check(tmp_path, profile, QEMU_ISA[profile])
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.startswith(f"rvport: /proc/cpuinfo shows the ISA of profile {profile} (")


@pytest.mark.parametrize("profile", PROFILES)
def test_qemus_default_cpu_is_refused_for_every_profile(tmp_path, profile):
    cp = check(tmp_path, profile, QEMU_ISA["default"], qemu_cpu="")
    assert cp.returncode == 3
    first, isa, hint = cp.stderr.splitlines()
    assert first.startswith(
        f"rvport: /proc/cpuinfo in this stage is not the CPU of profile {profile}: shows "
    )
    assert "shows zfh" in first and "shows zvfbfwma" in first
    assert isa == f"rvport: isa: {QEMU_ISA['default']}"
    assert "QEMU_CPU=(unset)" in hint and "use a builder that emulates riscv64" in hint


@pytest.mark.parametrize(
    "profile, isa, says",
    [
        ("rvv256", QEMU_ISA["rv64gc"], "lacks v, lacks zfhmin, lacks zvfh, lacks zvfhmin"),
        ("rv64gc", QEMU_ISA["rvv128"], "shows v, shows zfhmin, shows zvfh, shows zvfhmin"),
        ("rvv256", QEMU_ISA["rvv256-bf16"], "shows zfbfmin, shows zvfbfmin"),
        ("rvv256-bf16", QEMU_ISA["rvv256"], "lacks zfbfmin, lacks zvfbfmin"),
        (
            "rvv256",
            QEMU_ISA["rvv256"] + "_zvl32b_zvl64b_zvl128b",
            "shows VLEN 128 (zvl128b)",
        ),  # a native CPU says it
        ("rvv128", "rv64imafdc", "lacks v, lacks zfhmin, lacks zvfh, lacks zvfhmin"),  # no multi-letter part
        ("rv64gc", None, "it has no isa line"),
    ],
)
def test_another_isa_is_refused_with_what_differs(tmp_path, profile, isa, says):
    cp = check(tmp_path, profile, isa)
    assert cp.returncode == 3
    assert (
        cp.stderr.splitlines()[0]
        == f"rvport: /proc/cpuinfo in this stage is not the CPU of profile {profile}: {says}"
    )


def test_a_named_vlen_equal_to_the_profiles_passes(tmp_path):
    assert check(tmp_path, "rvv256", QEMU_ISA["rvv256"] + "_zvl32b_zvl64b_zvl128b_zvl256b").returncode == 0
    assert check(tmp_path, "rv64gc", "rv64imafdc").returncode == 0


X86 = HostFacts(arch="x86_64", cpus=8, mem_bytes=32 * 2**30, binfmt_riscv64=True)
RISCV = HostFacts(arch="riscv64", cpus=8, mem_bytes=32 * 2**30)


def stage(recipe: str, mode: Mode, host: HostFacts = X86, profile: str = "rvv256"):
    cat = load_catalogue(builtin("recipes"))
    p = make_plan(cat, Request(refs=(recipe,), all=False, profile=get_profile(profile), mode=mode), host)
    return p.stage(recipe)


def build_line(text: str) -> str:
    (line,) = [ln for ln in text.splitlines() if "sh -eux /rvport/build.sh" in ln]
    return line.strip()


def test_qemu_and_accelerated_stages_check_first_native_and_cross_stages_do_not():
    shown, hidden = get_profile("rvv256").cpuinfo
    first = (
        f"sh -eu /rvport/cpuinfo.sh rvv256 {shlex.quote(' '.join(shown))} {shlex.quote(' '.join(hidden))} 256"
        " && "
    )
    qemu = emulated.render_stage(stage("msgspec", Mode.QEMU), "tc", get_profile("rvv256")).text
    assert build_line(qemu).startswith(first + 'mkdir -p "$RVPORT_OUT" && sh -eu /rvport/ccache.sh start')
    assert "COPY rvport-cpuinfo.sh /rvport/cpuinfo.sh" in qemu
    xtc = accelerated.XtcImage(
        tag="rvport/xtc:t", image_id="sha256:" + "1" * 64, platform="linux/amd64", gcc_major="14"
    )
    acc = accelerated.render_stage(
        toolchain="tc", xtc=xtc, env=stage("msgspec", Mode.ACCELERATED).env, profile=get_profile("rvv256")
    ).text
    assert build_line(acc).startswith(first + ". /opt/xtc/stage.env && ")
    native = emulated.render_stage(
        stage("msgspec", Mode.NATIVE, RISCV), "tc", get_profile("rvv256")
    ).text  # the host's own CPU
    assert build_line(native).startswith('mkdir -p "$RVPORT_OUT" && sh -eu /rvport/ccache.sh start')
    crossed = cross.render_stage(
        stage("glide-ffi", Mode.CROSS), "tc", get_profile("rvv256")
    ).text  # nothing emulated
    assert "cpuinfo" not in crossed


def test_every_build_context_holds_the_check(tmp_path):
    (tmp_path / "tree").mkdir()
    r = render.Rendered(template="build.Dockerfile", text="FROM scratch\n")
    stage_context(tmp_path / "ctx", tmp_path / "tree", r, "#!/bin/sh\n", {})
    assert (tmp_path / "ctx" / "rvport-cpuinfo.sh").read_text() == render.cpuinfo_script()
