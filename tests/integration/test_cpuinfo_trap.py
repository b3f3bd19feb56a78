"""The /proc/cpuinfo trap, end to end (issue #16).

tests/fixtures/cpusniff is a tiny Python extension whose CMake configure step reads the build machine's
/proc/cpuinfo and chooses its -march from it (v, zvfhmin -> zvfh, zvfbfmin -> zvfbfmin, zvl<N>b -> VLEN unless
RVV_VLEN is given), after the profile's CFLAGS on the command line, so the sniffed flags win: the shape of
vLLM's CPU build. Under QEMU user emulation /proc/cpuinfo is QEMU's answer for the CPU it emulates, so the
wheel is right only if the stage runs as the profile's CPU model (QEMU_CPU, rvport/resources/profiles.yaml).

- Each profile, in qemu and in accelerated mode (where CMake still runs under QEMU while the compilers run
  natively): the build saw exactly the profile's ISA, and the wheel passes `rvport verify artifacts --isa
  carries` for its profile and for no other one.
- The seeded fault: the same fixture whose build runs under QEMU's default CPU (`env -u QEMU_CPU`). For
  rvv256 it takes the bfloat16 path; `rvport build` refuses it in its own verify step, and the same stage
  exported by `docker buildx bake` (which does not verify) is refused by `rvport verify --isa carries`. The
  /proc/cpuinfo check every emulated stage runs before its build, run in the riscv64 base without QEMU_CPU,
  refuses too (a whole stage without it never reaches its build).

Measured figures: docs/profiles.md, "The /proc/cpuinfo trap".
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
import zipfile
from pathlib import Path

import jsonschema
import pytest

from rvport import manifest, resources
from rvport.catalogue.profiles import get_profile
from rvport.engine import render
from rvport.verify import verify_paths
from rvport.verify.elf import read_elf_bytes

from .conftest import ONE_TARBALL, offline_mirror, rvport, tarball, verify_reasons

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cpusniff"
PROFILES = ("rv64gc", "rvv128", "rvv256", "rvv256-bf16")
# the extensions a build system reads from /proc/cpuinfo to choose its vector flags
SNIFFED = ("zvfhmin", "zvfbfmin")

RECIPE = (
    """\
schema: 1
name: {name}
kind: python-wheel
modes: [native, qemu, accelerated]
env:
  CFLAGS: -O2 ${{RVPORT_CFLAGS}}
  # the VLEN is the profile's, as vLLM's recipe passes VLLM_RVV_VLEN: QEMU's /proc/cpuinfo names no zvl<N>b
  CMAKE_ARGS: -DRVV_VLEN=${{RVPORT_VLEN}}
build:
  - {prefix}python3 -m pip wheel -v --no-deps --no-build-isolation --no-index --wheel-dir "$RVPORT_OUT" .
outputs:
  - {{glob: "*.whl", type: wheel, isa: profile}}
smoke:
  script: |
    import cpusniff
    assert cpusniff.scale(1.5, 10) == 15.0, cpusniff.scale(1.5, 10)
    print("cpusniff march", cpusniff.MARCH, "vlmax_e32", cpusniff.vlmax_e32(),
          "scale", cpusniff.scale(1.001, 3))
"""
    + ONE_TARBALL
)
# the seeded fault: the build (pip, CMake and everything they start) runs under QEMU's default CPU
UNPINNED = "env -u QEMU_CPU "

# what scale(1.001, 3) gives through each narrow format: bfloat16 rounds 1.001 to 1, half precision to
# 1.0009765625, the scalar build keeps single precision
SCALE = {
    "rv64gc": "3.0030001401901245",
    "rvv128": "3.0029296875",
    "rvv256": "3.0029296875",
    "rvv256-bf16": "3.0",
}


class Project:
    def __init__(self, root: Path):
        self.root, self.mirror, self.recipes = root, root / "mirror", root / "recipes"
        offline_mirror(self.mirror)
        self.recipes.mkdir()
        files = {
            str(p.relative_to(FIXTURE)): p.read_text()
            for p in sorted(FIXTURE.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts
        }
        fname, sha = tarball("cpusniff-1.0.0", files, self.mirror)
        for name, prefix in (("cpusniff", ""), ("cpusniff-unpinned", UNPINNED)):
            (self.recipes / f"{name}.yaml").write_text(
                RECIPE.format(name=name, prefix=prefix, fname=fname, sha=sha)
            )

    def args(self, recipe: str, profile: str, mode: str) -> tuple[str, ...]:
        return (
            recipe,
            "--recipes",
            str(self.recipes),
            "--mirror",
            str(self.mirror),
            "--offline",
            "--profile",
            profile,
            "--tag",
            "test",
            "--mode",
            mode,
        )


@pytest.fixture(scope="module")
def project(engine, tmp_path_factory) -> Project:
    return Project(tmp_path_factory.mktemp("cpuinfo"))


def _needs_build_host(mode: str) -> None:
    if mode == "accelerated" and platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("accelerated stages need an x86_64 or aarch64 host")


def _library(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as z:
        (so,) = [n for n in z.namelist() if n.endswith(".so")]
        return z.read(so)


def _isa_seen(wheel: Path) -> set[str]:
    """The extensions of the isa line the fixture's CMake read: the library holds it (cpusniff.ISA_SEEN) as
    QEMU wrote it, rv64<letters>_zic..., which no toolchain string looks like."""
    (line,) = set(re.findall(rb"rv64[a-z]+_zi[a-z0-9_]+", _library(wheel)))
    return set(line.decode().split("_"))


def _ran(log: str) -> bool:
    """The build step ran in this build (BuildKit did not take it from its cache): its output is in the
    log."""
    return "cpusniff: isa seen: " in log


@pytest.mark.parametrize("mode", ["qemu", "accelerated"])
@pytest.mark.parametrize("profile", PROFILES)
def test_the_build_sees_the_profiles_cpu_and_carries_exactly_its_isa(project, profile, mode):
    _needs_build_host(mode)
    p = get_profile(profile)
    out = project.root / f"{profile}-{mode}"
    cp = rvport("build", *project.args("cpusniff", profile, mode), "--output", str(out))
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    doc = json.loads((out / "result.json").read_text())
    jsonschema.validate(doc, manifest.schema("result"))
    (st,) = doc["stages"]
    assert st["mode"] == mode and st["env"]["QEMU_CPU"] == p.qemu_cpu
    assert st["verify"]["ok"] and st["smoke"]["status"] == "passed", st
    # the library says what its build chose; the smoke test ran it on the profile's CPU (VLEN / 32 lanes)
    smoke = "\n".join(st["smoke"]["output"])
    assert f"cpusniff march {p.march} vlmax_e32 {p.vlen // 32} scale {SCALE[profile]}" in smoke, smoke
    log = (out / "logs" / "cpusniff.log").read_text()
    if _ran(log):  # the stage's own check, and the configure step's words
        assert f"rvport: /proc/cpuinfo shows the ISA of profile {profile} (" in log
        assert f"cpusniff: -march={p.march}" in log

    (wheel,) = (out / "artifacts" / "cpusniff").glob("*.whl")
    seen = _isa_seen(wheel)  # what the configure step read
    assert {e for e in SNIFFED if e in seen} == {e for e in SNIFFED if e in p.allowed}, seen
    assert not any(e.startswith("zvl") for e in seen), "QEMU named a VLEN: the RVV_VLEN knob is not needed"
    facts = read_elf_bytes(_library(wheel))
    assert facts.is_riscv and facts.float_abi == "double"
    vector = {e for e in facts.extensions if e == "v" or e.startswith(("zv", "zfbf"))}
    # what the profile's CPU allows, less what the stage's compiler cannot write (gcc_adds: rvv256-bf16's
    # zfbfmin joins -march only where the base's GCC accepts it; this fixture builds on trixie's GCC 14)
    (planned,) = json.loads((out / "plan.json").read_text())["stages"]
    marched = set(planned["profile"]["march"].split("_"))
    expected = {e for e in p.allowed if e == "v" or e.startswith(("zv", "zfbf"))}
    expected -= {e for e in p.gcc_adds if e not in marched}
    assert vector == expected, facts.arch

    ok = rvport("verify", "artifacts", str(wheel), "--isa", "carries", "--profile", profile)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for other in PROFILES:  # exactly this profile: every other one refuses it, at one level or the other
        if other != profile:
            assert not verify_paths([wheel], get_profile(other), isa="carries").ok, (profile, other)


def test_under_qemus_default_cpu_the_rvv256_build_takes_the_bf16_path_and_is_refused(project):
    """QEMU 10's default CPU claims zvfh, zvfhmin and zvfbfmin: a build that reads /proc/cpuinfo then makes
    bfloat16 kernels for a profile without them."""
    args = project.args("cpusniff-unpinned", "rvv256", "qemu")
    out = project.root / "unpinned"
    cp = rvport("build", *args, "--output", str(out))
    said = cp.stdout + cp.stderr
    assert cp.returncode == 1, said[-4000:]
    assert "cpusniff-unpinned==1.0.0: artifacts failed verification for profile rvv256" in said, said[-4000:]
    assert "needs zvfbfmin, beyond profile rvv256" in said, said[-4000:]
    doc = json.loads((out / "result.json").read_text())
    assert doc["status"] == "failed" and doc["failing_stage"] == "cpusniff-unpinned"
    # the hint's promise: the failed verdicts are in result.json
    verify = doc["stages"][0]["verify"]
    assert verify["ok"] is False and [a["verdict"] for r in verify["reports"] for a in r["artifacts"]] == [
        "fail"
    ]
    assert (
        doc["stages"][0]["env"]["QEMU_CPU"] == get_profile("rvv256").qemu_cpu
    )  # rvport pinned it; the build did not
    assert not (out / "artifacts" / "cpusniff-unpinned").exists() and not (out / "provenance.json").exists()
    log = (out / "logs" / "cpusniff-unpinned.log").read_text()
    if _ran(log):
        assert "rvport: /proc/cpuinfo shows the ISA of profile rvv256 (" in log  # the stage itself was pinned
        assert "cpusniff: -march=rv64gcv_zvfh_zvfbfmin_zvl256b" in log

    # A whole stage run so (a builder whose riscv64 ignores QEMU_CPU) is refused before it builds: the stage's
    # check, run in the riscv64 base under QEMU's default CPU and under the profile's.
    (base,) = [b["tag"] for b in doc["base_images"].values() if b["platform"] == "linux/riscv64"]

    def stage_check(*env: str) -> subprocess.CompletedProcess:
        script = resources.builtin("scripts", "cpuinfo-check.sh")
        return subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "--platform",
                "linux/riscv64",
                "--network",
                "none",
                *env,
                "-v",
                f"{script}:/rvport/cpuinfo.sh:ro",
                base,
                "sh",
                "-c",
                render.cpuinfo_check(get_profile("rvv256")).removesuffix(" && "),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )

    cp = stage_check()
    assert cp.returncode == 3, cp.stdout + cp.stderr
    assert (
        "rvport: /proc/cpuinfo in this stage is not the CPU of profile rvv256: shows zfh, shows zfbfmin, "
        "shows zvfbfmin, shows zvfbfwma"
    ) in cp.stderr
    cp = stage_check("-e", f"QEMU_CPU={get_profile('rvv256').qemu_cpu}")
    assert cp.returncode == 0, cp.stdout + cp.stderr

    # The same stage through the bake export, which builds and does not verify (BuildKit usually reuses the
    # step just built): the wheel for `rvport verify`.
    baked = project.root / "unpinned-bake"
    cp = rvport("plan", *args, "--format", "bake", "--output", str(baked))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    cp = subprocess.run(
        ["docker", "buildx", "bake", "--progress", "plain", "-f", str(baked / "docker-bake.json"), "default"],
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    (wheel,) = (baked / "bake" / "out" / "cpusniff-unpinned").glob("*.whl")
    assert {"zfh", "zvfhmin", "zvfbfmin"} <= _isa_seen(wheel)  # QEMU's default CPU
    assert "zvfbfmin" in read_elf_bytes(_library(wheel)).extensions

    refused, reasons = verify_reasons(str(wheel), "--isa", "carries", "--profile", "rvv256", tmp=baked)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "needs zvfbfmin, beyond profile rvv256" in reasons, reasons
    # what it is: the bfloat16 build
    bf16 = rvport("verify", "artifacts", str(wheel), "--isa", "carries", "--profile", "rvv256-bf16")
    assert bf16.returncode == 0, bf16.stdout + bf16.stderr
