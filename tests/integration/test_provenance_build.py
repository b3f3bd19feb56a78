"""A real build writes OUTPUT/provenance.json (in-toto Statement v1, SLSA provenance v1) beside result.json,
and `verify artifacts --provenance` checks the exported artifacts against it: the tiny Rust staticlib of
test_build_tiny, under QEMU."""

from __future__ import annotations

import json
import shutil

import jsonschema
import pytest

from rvport import manifest

from .conftest import rvport, tarball, verify_reasons
from .test_build_tiny import RUST, RUST_RECIPE

pytestmark = pytest.mark.integration


def test_build_writes_provenance_and_verify_checks_it(engine, tmp_path):
    mirror, recipes, out = tmp_path / "mirror", tmp_path / "recipes", tmp_path / "out"
    mirror.mkdir()
    recipes.mkdir()
    f, s = tarball("tinyrust-1.0.0", RUST, mirror)
    (recipes / "tinyrust.yaml").write_text(RUST_RECIPE.format(fname=f, sha=s))
    cp = rvport(
        "build",
        "tinyrust",
        "--recipes",
        str(recipes),
        "--mirror",
        str(mirror),
        "--offline",
        "--output",
        str(out),
        "--profile",
        "rvv256",
        "--tag",
        "prov",
        "--mode",
        "qemu",
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    result = json.loads((out / "result.json").read_text())
    st = json.loads((out / "provenance.json").read_text())
    jsonschema.validate(st, manifest.schema("provenance"))
    assert [(x["name"], x["digest"]["sha256"]) for x in st["subject"]] == [
        (a["path"], a["sha256"]) for a in result["artifacts"]
    ]
    deps = {d["name"]: d for d in st["predicate"]["buildDefinition"]["resolvedDependencies"]}
    assert deps["tinyrust/source/src"]["digest"]["sha256"] == s
    (stage,) = result["stages"]
    assert deps["tinyrust/image/toolchain"]["digest"]["sha256"] == stage["images"]["toolchain"].split(":")[1]
    assert any(n.startswith("base/") for n in deps)
    ext = st["predicate"]["buildDefinition"]["externalParameters"]
    assert ext == {"recipes": ["tinyrust==1.0.0"], "profile": "rvv256", "mode": "qemu", "tag": "prov"}
    run = st["predicate"]["runDetails"]
    assert run["builder"]["version"]["buildx.driver"] and run["builder"]["id"].endswith(
        run["builder"]["version"]["buildx.driver"]
    )
    assert run["metadata"]["startedOn"] == result["started"]

    arts = out / "artifacts"
    prov = str(out / "provenance.json")
    cp = rvport("verify", "artifacts", str(arts), "--provenance", prov, "--export", "tiny_mul_add")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    cp = rvport("verify", "artifacts", str(arts), "--provenance", prov, "--export", "tiny_mul_sub")
    assert cp.returncode == 1 and "tiny_mul_sub" in cp.stdout, cp.stdout + cp.stderr
    # one changed byte in a copy of the artifact, at the same relative path
    copy = tmp_path / "copy" / "tinyrust" / "libtinyffi.a"
    copy.parent.mkdir(parents=True)
    shutil.copy(arts / "tinyrust" / "libtinyffi.a", copy)
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0x01
    copy.write_bytes(bytes(data))
    cp, reasons = verify_reasons(str(copy), "--provenance", prov, tmp=tmp_path)
    assert cp.returncode == 1 and "changed after the build" in reasons, cp.stdout + cp.stderr
