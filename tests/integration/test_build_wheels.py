"""The main job, for real: msgspec, sentencepiece 0.2.2 and tiktoken wheels built from their pinned sdists
in riscv64 stages under QEMU (`--mode auto`: accelerated on x86_64/aarch64 hosts, so C, C++ and Rust compile
with native cross compilers) with no network in their compile stages, verified, smoke-tested; then a no-op
rebuild."""

from __future__ import annotations

import json
import platform
import zipfile

import jsonschema
import pytest

from rvport import manifest

from .conftest import rvport

pytestmark = [pytest.mark.integration, pytest.mark.network]

WHEELS = ("msgspec", "sentencepiece", "tiktoken")
# what auditwheel makes of them: msgspec needs only old glibc symbols; sentencepiece needs GCC 14's libstdc++
# (CXXABI_1.3.15); tiktoken needs GLIBC_2.34 (Rust's standard library)
TAGS = {
    "msgspec": "manylinux_2_31_riscv64",
    "sentencepiece": "manylinux_2_39_riscv64",
    "tiktoken": "manylinux_2_34_riscv64",
}


def build(out, cache):
    """The README's main job with an artifact cache of its own, so every stage runs its buildx build, verify
    and smoke test in this run. Base and toolchain images are reused from the engine by content, and so is
    BuildKit's layer cache: on a machine that built these exact inputs before, the compile step is a cache
    hit."""
    return rvport(
        "build",
        *WHEELS,
        "--profile",
        "rvv256",
        "--tag",
        "local",
        "--output",
        str(out),
        "--cache-dir",
        str(cache),
    )


@pytest.fixture(scope="module")
def built(engine, tmp_path_factory):
    root = tmp_path_factory.mktemp("wheels")
    out, cache = root / "out", root / "cache"
    cp = build(out, cache)
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    return out, json.loads((out / "result.json").read_text())


def test_result_lists_verified_smoke_tested_wheels(built):
    out, doc = built
    jsonschema.validate(doc, manifest.schema("result"))
    assert doc["status"] == "ok"
    stages = {s["recipe"]: s for s in doc["stages"]}
    assert set(stages) == set(WHEELS)
    for name, st in stages.items():
        assert st["status"] == "ok", name  # not served from rvport's artifact cache
        assert st["verify"]["ok"], st["verify"]
        assert st["smoke"]["status"] == "passed", st["smoke"]
        (art,) = [a for a in st["artifacts"] if a["path"].endswith(".whl")]
        # repaired in the stage to the most compatible manylinux tag, the one verify computes too
        (repair,) = st["manylinux"]
        assert repair["repaired"] and repair["grafted"] == [] and art["path"].endswith(repair["wheel"])
        assert repair["platform"] == TAGS[name], repair
        (report,) = st["verify"]["reports"]
        assert report["artifacts"][0]["wheel"]["manylinux"] == TAGS[name]
        assert len(art["sha256"]) == 64 and art["size"] > 0
        assert (out / "artifacts" / art["path"]).is_file()
    assert "ok" in "\n".join(stages["msgspec"]["smoke"]["output"])
    assert stages["sentencepiece"]["version"] == "0.2.2"


def test_compile_stages_had_no_network(built):
    out, doc = built
    for st in doc["stages"]:
        # recorded when the artifacts were built, and kept with them in the artifact cache
        cmd = st["build_command"]
        assert cmd.startswith("docker buildx build") and "--network none" in cmd, (st["recipe"], cmd)
        assert "type=local" in cmd and st["env"]["QEMU_CPU"] in (out / "plan.json").read_text()


def test_auto_mode_accelerates_every_wheel_on_this_host_and_records_the_compilers(built):
    _, doc = built
    stages = {s["recipe"]: s for s in doc["stages"]}
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("accelerated stages need an x86_64 or aarch64 host")
    for name, st in stages.items():
        assert st["mode"] == "accelerated", (name, st["mode"])
        assert st["images"]["xtc"].startswith("sha256:")
        assert st["toolchain_packages"]["xtc:gcc-14-riscv64-linux-gnu"]
    # tiktoken's crates were compiled by the build platform's rustc, the stage's rustc-web version
    tk = stages["tiktoken"]["toolchain_packages"]
    assert tk["xtc:rustc-web"].split("+b")[0] == tk["rustc-web"].split("+b")[0]
    assert "xtc:rustc-web" not in stages["msgspec"]["toolchain_packages"]


def test_wheels_carry_the_profile_isa(built):
    out, _ = built
    cp = rvport(
        "verify",
        "artifacts",
        str(out / "artifacts" / "msgspec"),
        str(out / "artifacts" / "sentencepiece"),
        "--profile",
        "rvv256",
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    # and the same wheel is refused for a smaller vector profile: it needs zvl256b
    cp = rvport("verify", "artifacts", str(out / "artifacts" / "msgspec"), "--profile", "rvv128")
    assert cp.returncode == 1, cp.stdout + cp.stderr
    whl = next((out / "artifacts" / "tiktoken").glob("*.whl"))
    assert any(n.endswith(".so") for n in zipfile.ZipFile(whl).namelist())


def test_second_build_with_nothing_changed_is_a_no_op(built):
    out, first = built
    cp = build(out, out.parent / "cache")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    doc = json.loads((out / "result.json").read_text())
    assert [s["status"] for s in doc["stages"]] == ["cached"] * 3
    assert {a["sha256"] for a in doc["artifacts"]} == {a["sha256"] for a in first["artifacts"]}
