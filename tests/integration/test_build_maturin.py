"""A maturin project built by the python-wheel kind, as oss-harmony is.

What it shares with oss-harmony: Debian sid's maturin as the PEP 517 backend, the tree's own Cargo.lock
pinned by `lock:` and vendored, `MATURIN_PEP517_ARGS=--locked --offline`, and an accelerated sid stage (sid's
rustc running natively). Its toolchain packages and pin are oss-harmony's, so BuildKit reuses the layers
of oss-harmony's toolchain image.

The project is ours and tiny: a Rust program that maturin packages as a wheel (`bindings = "bin"`), with no
crates, so it needs no network and compiles in seconds. The wheel is repaired, verified and smoke-tested (the
installed program runs under QEMU). A lock pin that does not match the tree's file stops the run (exit 4).
Minutes when the images are warm; accelerated needs an x86-64 or aarch64 host."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import jsonschema
import pytest
import yaml

from rvport import manifest, resources

from .conftest import offline_mirror, rvport, tarball

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.uname().machine not in ("x86_64", "aarch64"),
        reason="accelerated mode needs an x86-64 or aarch64 host",
    ),
]

PROJECT = {
    "pyproject.toml": '[build-system]\nrequires = ["maturin>=1.8,<2.0"]\nbuild-backend = "maturin"\n\n'
    '[project]\nname = "tinymat"\nversion = "1.0.0"\n\n[tool.maturin]\nbindings = "bin"\n',
    "Cargo.toml": '[package]\nname = "tinymat"\nversion = "1.0.0"\nedition = "2021"\n',
    "Cargo.lock": 'version = 4\n\n[[package]]\nname = "tinymat"\nversion = "1.0.0"\n',
    "src/main.rs": "fn main() {\n"
    "    let p: i64 = std::env::args().skip(1).map(|a| a.parse::<i64>().unwrap()).product();\n"
    '    println!("tinymat says {p}");\n}\n',
}

SMOKE = """\
import shutil, subprocess
exe = shutil.which("tinymat")
assert exe, "pip installed no tinymat program"
out = subprocess.run([exe, "6", "7"], check=True, capture_output=True, text=True).stdout.strip()
assert out == "tinymat says 42", out
print(out)
"""


def _recipe(fname: str, sha: str, lock_sha: str) -> dict:
    real = yaml.safe_load(resources.text("recipes", "oss-harmony.yaml"))
    return {
        "schema": 1,
        "name": "tinymat",
        "kind": "python-wheel",
        "modes": ["native", "qemu", "accelerated"],
        # oss-harmony's base, packages and pin: one toolchain image for both
        "toolchain": real["toolchain"],
        "env": {"CARGO_NET_OFFLINE": "true", "MATURIN_PEP517_ARGS": real["env"]["MATURIN_PEP517_ARGS"]},
        "build": real["build"],
        "outputs": [{"glob": "*.whl", "type": "wheel", "isa": "baseline"}],
        "smoke": {"script": SMOKE},
        "versions": [
            {
                "version": "1.0.0",
                "hermetic": True,
                "sources": [{"name": "src", "url": f"https://example.invalid/{fname}", "sha256": sha}],
                "lock": {"path": "Cargo.lock", "sha256": lock_sha},
                "vendor": "cargo",
            }
        ],
    }


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("maturin")
    mirror, recipes = root / "mirror", root / "recipes"
    offline_mirror(mirror)
    recipes.mkdir()
    fname, sha = tarball("tinymat-1.0.0", PROJECT, mirror)
    lock_sha = hashlib.sha256(PROJECT["Cargo.lock"].encode()).hexdigest()
    (recipes / "tinymat.yaml").write_text(yaml.safe_dump(_recipe(fname, sha, lock_sha), sort_keys=False))
    bad = recipes.parent / "bad"
    bad.mkdir()
    (bad / "tinymat.yaml").write_text(yaml.safe_dump(_recipe(fname, sha, "0" * 64), sort_keys=False))
    return root


def _args(tiny: Path, out: Path, recipes: str = "recipes") -> list[str]:
    return [
        "--recipes",
        str(tiny / recipes),
        "--mirror",
        str(tiny / "mirror"),
        "--output",
        str(out),
        "--profile",
        "rvv256",
        "--tag",
        "test",
        "--mode",
        "accelerated",
        "--allow-expired-release",
        "sid",
    ]


def test_a_maturin_project_builds_offline_is_repaired_verified_and_runs(engine, tiny, tmp_path):
    out = tmp_path / "out"
    cp = rvport("build", "tinymat", *_args(tiny, out))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    doc = json.loads((out / "result.json").read_text())
    jsonschema.validate(doc, manifest.schema("result"))
    (st,) = doc["stages"]
    assert st["status"] in ("ok", "cached") and st["verify"]["ok"] and st["mode"] == "accelerated"
    assert st["smoke"]["status"] == "passed" and "tinymat says 42" in st["smoke"]["output"]
    assert st["rust"]["host"] != "riscv64gc-unknown-linux-gnu"  # the native rustc compiled it
    assert [p["name"] for p in st["debian_pins"]["packages"]] == ["python3-maturin"]
    (wheel,) = (out / "artifacts" / "tinymat").glob("*.whl")
    # maturin's PEP 517 call writes linux_riscv64; the stage's auditwheel makes it a manylinux wheel
    (repair,) = st["manylinux"]
    assert repair["repaired"] and repair["built"] == "tinymat-1.0.0-py3-none-linux_riscv64.whl", repair
    assert wheel.name == repair["wheel"] and repair["platform"].startswith("manylinux_"), repair
    with zipfile.ZipFile(wheel) as z:
        generator = z.read("tinymat-1.0.0.dist-info/WHEEL").decode()
        assert "Generator: maturin" in generator, generator
        assert "tinymat-1.0.0.data/scripts/tinymat" in z.namelist()
    cp = rvport("verify", "artifacts", str(out / "artifacts"), "--profile", "rv64gc")
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_a_lock_that_does_not_match_stops_the_build_with_exit_4(engine, tiny, tmp_path):
    cp = rvport("build", "tinymat", *_args(tiny, tmp_path / "out", recipes="bad"))
    assert cp.returncode == 4, cp.stdout + cp.stderr
    assert "Cargo.lock" in cp.stderr
