"""A python-wheel recipe shaped like vllm's, on a fixture of ours: on the Debian sid base, with a Debian
package pinned by exact version and .deb sha256 (`toolchain: pins:`, as vllm pins Debian's torch) and its
wheel left unrepaired by the recipe (`manylinux: {repair: false}`). Built for real under QEMU: the pin is
checked against sid's signed index before anything runs, apt installs exactly that version in the build
and smoke images, result.json records it. A pin of a version the archive does not hold stops the run
before anything is built (exit 5), naming what the archive has. Minutes under QEMU (the sid base is made
once if the engine lacks it); vllm's own build (Debian's torch: 20 minutes of emulated apt per image) is
too long for CI: docs/heavy-recipes.md has its figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvport.engine import debpins
from rvport.sources.cache import Cache
from rvport.sources.fetch import FetchOptions

from .conftest import ONE_TARBALL, rvport, tarball

pytestmark = [pytest.mark.integration, pytest.mark.network]

PACKAGE = "python3-packaging"  # small, Architecture: all, in every riscv64 index

RECIPE = (
    """\
schema: 1
name: tinypin
kind: python-wheel
toolchain:
  base: debian-sid
  debian: [python3-setuptools]
  pins:
    - {{name: python3-packaging, version: "{version}", sha256: {deb_sha}}}
manylinux: {{repair: false, reason: "a fixture standing in for vllm, whose wheel links the system's torch"}}
build:
  - python3 -c "import packaging; print('building against packaging', packaging.__version__)"
  - python3 -m pip wheel --no-deps --no-build-isolation --wheel-dir "$RVPORT_OUT" .
outputs:
  - {{glob: "*.whl", type: wheel}}
smoke:
  script: |
    import importlib.metadata as md
    import tinypin
    assert md.version("packaging") == tinypin.UPSTREAM, (md.version("packaging"), tinypin.UPSTREAM)
    print("tinypin ok with packaging", md.version("packaging"))
"""
    + ONE_TARBALL
)


def _sid_pin(tmp_path: Path) -> tuple[str, str]:
    """The package's version and .deb sha256 in sid's signed riscv64 index now (sid moves on, so the pin is
    read when the test runs; what is under test is the build's own check and install of it)."""
    fetch = FetchOptions(cache=Cache(root=tmp_path / "idx-cache"))
    idx = debpins.signed_index("sid", fetch, allow_expired=("sid",), what="the test's pin")
    (pkg,) = idx.packages[PACKAGE][-1:]
    return pkg.version, pkg.sha256


def _fixture(tmp_path: Path, version: str, deb_sha: str) -> list[str]:
    mirror, recipes = tmp_path / "mirror", tmp_path / "recipes"
    mirror.mkdir(exist_ok=True)
    recipes.mkdir(exist_ok=True)
    upstream = version.split("-")[0]  # Debian's 25.0-1 is upstream 25.0
    fname, sha = tarball(
        "tinypin-1.0.0",
        {
            "setup.py": "from setuptools import setup\n"
            "setup(name='tinypin', version='1.0.0', py_modules=['tinypin'])\n",
            "tinypin.py": f"UPSTREAM = {upstream!r}\n",
        },
        mirror,
    )
    (recipes / "tinypin.yaml").write_text(
        RECIPE.format(fname=fname, sha=sha, version=version, deb_sha=deb_sha)
    )
    return ["--recipes", str(recipes), "--mirror", str(mirror), "--cache-dir", str(tmp_path / "c")]


def test_a_pinned_debian_package_is_checked_installed_and_recorded(engine, tmp_path):
    version, deb_sha = _sid_pin(tmp_path)
    args = _fixture(tmp_path, version, deb_sha)
    out = tmp_path / "out"
    cp = rvport(
        "build", "tinypin", "--mode", "qemu", "--allow-expired-release", "sid", "--output", str(out), *args
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    result = json.loads((out / "result.json").read_text())
    (st,) = result["stages"]
    pins = st["debian_pins"]
    assert pins["suite"] == "sid" and pins["expired_release_accepted"] in (True, False)
    (pkg,) = pins["packages"]
    assert (pkg["name"], pkg["version"], pkg["sha256"]) == (PACKAGE, version, deb_sha)
    assert st["wheel_repair"]["repair"] is False and "torch" in st["wheel_repair"]["reason"]
    assert st["smoke"]["status"] == "passed", st["smoke"]
    assert any("tinypin ok with packaging" in ln for ln in st["smoke"]["output"]), st["smoke"]
    assert list((out / "artifacts").rglob("tinypin-1.0.0-*.whl"))


def test_a_version_the_archive_no_longer_holds_stops_the_run_before_anything_is_built(engine, tmp_path):
    args = _fixture(tmp_path, "0.0.1-rvport1", "ab" * 32)
    out = tmp_path / "out"
    cp = rvport(
        "build", "tinypin", "--mode", "qemu", "--allow-expired-release", "sid", "--output", str(out), *args
    )
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert "no longer holds the pinned version of python3-packaging 0.0.1-rvport1" in cp.stderr
    assert "the archive has" in cp.stderr and "nothing was built" in cp.stderr
    assert not list(out.rglob("*.whl"))
