"""msgspec built for two Pythons in one run, for real: cp313 on the trixie base, cp314 on the sid base
(accelerated on an x86_64 or aarch64 host, each with its own suite's cross compilers), each repaired,
verified and smoke-tested in a container of its own base. sid's frozen Release is accepted. Minutes under
QEMU (the sid base is made once if the engine lacks it)."""

from __future__ import annotations

import json
import zipfile

import jsonschema
import pytest

from rvport import manifest

from .conftest import rvport

pytestmark = [pytest.mark.integration, pytest.mark.network]


@pytest.fixture(scope="module")
def built(engine, tmp_path_factory):
    root = tmp_path_factory.mktemp("pymatrix")
    out = root / "out"
    cp = rvport(
        "build",
        "msgspec",
        "--no-tests",
        "--python",
        "3.13,3.14",
        "--allow-expired-release",
        "sid",
        "--profile",
        "rvv256",
        "--output",
        str(out),
        "--cache-dir",
        str(root / "cache"),
        "--junit",
        str(root / "junit.xml"),
        "--summary",
        str(root / "summary.md"),
    )
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    return root, out, json.loads((out / "result.json").read_text())


def test_one_wheel_per_python_each_on_its_base(built):
    root, out, doc = built
    jsonschema.validate(doc, manifest.schema("result"))
    assert doc["pythons"] == ["3.13", "3.14"]
    by_id = {s["id"]: s for s in doc["stages"]}
    assert set(by_id) == {"msgspec-cp313", "msgspec-cp314"}
    for sid, abi, base in (
        ("msgspec-cp313", "cp313", "debian-trixie"),
        ("msgspec-cp314", "cp314", "debian-sid"),
    ):
        s = by_id[sid]
        assert s["status"] == "ok" and s["python"]["abi"] == abi and s["python"]["base"] == base
        assert s["smoke"]["status"] == "passed"
        (wheel,) = (out / "artifacts" / sid).glob("*.whl")
        assert f"-{abi}-{abi}-manylinux_" in wheel.name, wheel.name
        with zipfile.ZipFile(wheel) as z:
            assert any(n.endswith(f".cpython-{abi[2:]}-riscv64-linux-gnu.so") for n in z.namelist()), (
                z.namelist()
            )


def test_the_reports_show_the_matrix(built):
    root, out, doc = built
    junit = (root / "junit.xml").read_text()
    assert 'name="msgspec-cp313==' in junit and 'name="msgspec-cp314==' in junit
    assert "Python 3.13, 3.14" in (root / "summary.md").read_text()
