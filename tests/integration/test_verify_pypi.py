"""Real published wheels, fetched with pip (through pip's own configuration): riscv64 builds verify as
riscv64, x86-64 builds of the same projects fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rvport.catalogue.profiles import get_profile
from rvport.verify import verify_paths

pytestmark = pytest.mark.network

# Projects that publish riscv64 wheels (manylinux_2_31_riscv64 and up) beside their x86-64 ones.
PROJECTS = ["msgspec==0.23.0", "tokenizers", "safetensors"]


def pip_download(req: str, platforms: list[str], dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    before = set(dest.glob("*.whl"))
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "-d",
        str(dest),
        "--quiet",
        req,
    ]
    for p in platforms:
        cmd[5:5] = ["--platform", p]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    if r.returncode != 0:
        return []
    return sorted(set(dest.glob("*.whl")) - before) or sorted(dest.glob(req.split("=")[0] + "-*.whl"))


RV_PLATFORMS = [
    "manylinux_2_39_riscv64",
    "manylinux_2_35_riscv64",
    "manylinux_2_31_riscv64",
    "manylinux_2_28_riscv64",
    "manylinux_2_27_riscv64",
    "linux_riscv64",
]
X86_PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]


@pytest.mark.parametrize("req", PROJECTS)
def test_riscv64_wheel_verifies(req, tmp_path_factory):
    wheels = pip_download(req, RV_PLATFORMS, tmp_path_factory.mktemp("rv"))
    assert wheels, f"pip could not download the riscv64 wheel of {req}"
    assert all("riscv64" in w.name for w in wheels)
    report = verify_paths(wheels, get_profile("rv64gc"), isa="profile")
    a = report.artifacts[0]
    assert report.ok, a.all_reasons()
    assert a.members and all(m.facts.is_riscv and m.facts.float_abi == "double" for m in a.members)
    assert a.wheel.record_checked > 0 and a.wheel.manylinux.endswith("_riscv64")
    # Built for rv64gc: a vector profile refuses it at level "profile", accepts it at "baseline".
    assert not verify_paths(wheels, get_profile("rvv256"), isa="profile").ok
    assert verify_paths(wheels, get_profile("rvv256"), isa="baseline").ok


@pytest.mark.parametrize("req", PROJECTS)
def test_x86_64_wheel_fails(req, tmp_path_factory):
    wheels = pip_download(req, X86_PLATFORMS, tmp_path_factory.mktemp("x86"))
    assert wheels, f"pip could not download the x86-64 wheel of {req}"
    report = verify_paths(wheels, get_profile("rv64gc"), isa="baseline")
    assert not report.ok
    text = "\n".join(report.artifacts[0].all_reasons())
    assert "not RISC-V (EM_RISCV)" in text and "x86_64, not riscv64" in text
