"""The exported bake file builds the same msgspec wheel as `rvport build`, with `docker buildx bake` alone,
for a plain emulated stage and for an accelerated one (whose cross toolchain prefix image rvport makes at
export).

The wheel's bytes differ between two builds only by zip timestamps (pip stamps members with the build's file
times), so the comparison is honest at the level that matters: the same member names, and every member's
bytes identical (the compiled _core .so, RECORD with its hashes, METADATA, WHEEL). When the two wheels happen
to be byte-identical (a BuildKit layer cache hit), the sha256 check covers it too.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import zipfile

import pytest

from .conftest import rvport

pytestmark = [pytest.mark.integration, pytest.mark.network]

ARGS = ("msgspec", "--profile", "rvv256", "--tag", "local")


def _bake(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker", "buildx", "bake", "--progress", "plain", *args],
        capture_output=True,
        text=True,
        timeout=3000,
    )


@pytest.mark.parametrize("mode", ["qemu", "accelerated"])
def test_bake_file_builds_the_same_wheel(engine, tmp_path, mode):
    if mode == "accelerated" and platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("accelerated stages need an x86_64 or aarch64 host")
    args = (*ARGS, "--mode", mode)
    built = tmp_path / "build"
    cp = rvport("build", *args, "--output", str(built))
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    (art,) = [
        a for a in json.loads((built / "result.json").read_text())["artifacts"] if a["path"].endswith(".whl")
    ]

    out = tmp_path / "bake"
    cp = rvport("plan", *args, "--output", str(out), "--format", "bake")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    bakefile = out / "docker-bake.json"
    doc = json.loads(bakefile.read_text())
    assert (out / "plan.json").is_file()
    assert doc["group"]["default"]["targets"] == ["msgspec"]
    assert doc["target"]["msgspec"]["network"] == "none"
    assert doc["target"]["msgspec"]["output"][0].startswith("type=local,dest=")
    dockerfile = (out / "bake" / "msgspec" / "Dockerfile").read_text()
    assert ("COPY --from=rvport/xtc:" in dockerfile) == (mode == "accelerated")

    # a team runs the same stages with bake alone: toolchain images first, then the stages
    for group in ("toolchains", "default"):
        cp = _bake("-f", str(bakefile), group)
        assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    (wheel,) = (out / "bake" / "out" / "msgspec").glob("*.whl")
    ref = built / "artifacts" / art["path"]
    assert wheel.name == ref.name

    if hashlib.sha256(wheel.read_bytes()).hexdigest() == art["sha256"]:
        return
    a, b = zipfile.ZipFile(wheel), zipfile.ZipFile(ref)
    assert a.namelist() == b.namelist()
    assert any(n.endswith(".so") for n in a.namelist())
    for name in a.namelist():
        assert a.read(name) == b.read(name), f"{name} differs between bake and rvport build"
