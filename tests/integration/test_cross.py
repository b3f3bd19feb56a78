"""Cross stages on the tiny projects of test_build_tiny (a Rust staticlib and a cgo Go program linked with
it): compiled on the build platform with Debian's riscv64 cross toolchains, verified as riscv64, and the Go
program run under QEMU (its smoke test) printing a value computed through the FFI."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from rvport import manifest

from .conftest import rvport, tarball
from .test_build_tiny import GO, GO_RECIPE, RUST, RUST_RECIPE

pytestmark = pytest.mark.integration

CROSS_MODES = "modes: [native, qemu, cross]\n"


def cross_capable(recipe: str) -> str:
    """The same recipe text, listing `cross` in modes (what lets --mode cross and auto pick it)."""
    assert recipe.count("\nkind: ") == 1
    return recipe.replace("\nkind: ", f"\n{CROSS_MODES}kind: ", 1)


def rust_for_any_mode(recipe: str) -> str:
    """The Rust recipe naming its target, so the archive's path is the same natively and in a cross stage."""
    out = recipe.replace(
        "cargo build --release --offline --locked",
        'cargo build --release --offline --locked --target "$RVPORT_RUST_TARGET"',
    )
    out = out.replace("cp target/release/", 'cp target/"$RVPORT_RUST_TARGET"/release/')
    assert out != recipe and "target/release" not in out
    return out


@pytest.fixture(scope="module")
def tiny_cross(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-cross")
    mirror, recipes = root / "mirror", root / "recipes"
    mirror.mkdir()
    recipes.mkdir()
    f, s = tarball("tinyrust-1.0.0", RUST, mirror)
    (recipes / "tinyrust.yaml").write_text(
        cross_capable(rust_for_any_mode(RUST_RECIPE)).format(fname=f, sha=s)
    )
    f, s = tarball("tinygo-1.0.0", GO, mirror)
    (recipes / "tinygo.yaml").write_text(cross_capable(GO_RECIPE).format(fname=f, sha=s))
    f, s = tarball("tinyrustweb-1.0.0", RUST, mirror)
    (recipes / "tinyrustweb.yaml").write_text(
        with_rustc_web(cross_capable(rust_for_any_mode(RUST_RECIPE))).format(fname=f, sha=s)
    )
    return root


def with_rustc_web(recipe: str) -> str:
    """The Rust recipe as `tinyrustweb`, naming Debian's rustc-web as its Rust (as tiktoken does)."""
    out = recipe.replace("name: tinyrust\n", "name: tinyrustweb\n")
    out = out.replace(
        "toolchain: {{debian: [cargo, rustc]}}",
        "toolchain: {{debian: [cargo-web, rustc-web], rust: debian-rustc-web}}",
    )
    assert out.count("tinyrustweb") == 1 and "rust: debian-rustc-web" in out
    return out


def args(root: Path, out: Path, mode: str) -> list[str]:
    return [
        "--recipes",
        str(root / "recipes"),
        "--mirror",
        str(root / "mirror"),
        "--offline",
        "--output",
        str(out),
        "--profile",
        "rvv256",
        "--tag",
        "test",
        "--mode",
        mode,
    ]


def test_auto_plans_cross_for_rust_and_go(tiny_cross, tmp_path):
    cp = rvport("plan", "tinygo", *args(tiny_cross, tmp_path, "auto"))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    modes = {s["recipe"]: (s["mode"], s["platform"], s["emulated"]) for s in plan["stages"]}
    assert modes == {"tinyrust": ("cross", "linux/amd64", False), "tinygo": ("cross", "linux/amd64", False)}
    assert all("QEMU_CPU" not in s["env"] for s in plan["stages"])


def test_rust_staticlib_and_cgo_go_program_cross(engine, tiny_cross, tmp_path):
    out = tmp_path / "out"
    cp = rvport("build", "tinygo", *args(tiny_cross, out, "cross"))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    doc = json.loads((out / "result.json").read_text())
    jsonschema.validate(doc, manifest.schema("result"))
    rust, go = doc["stages"]
    assert (rust["recipe"], go["recipe"]) == ("tinyrust", "tinygo")
    for st in (rust, go):
        assert st["status"] in ("ok", "cached"), st["error"]  # cached: an earlier run's verified artifacts
        assert st["mode"] == "cross" and st["platform"] == "linux/amd64"
        assert st["verify"]["ok"], st["verify"]
        assert "QEMU_CPU" not in st["env"]
        assert st["images"]["build_base"] and st["toolchain"]["base"] == "debian-trixie-xtc"
    # the cross toolchain is recorded: Debian's rustc with the riscv64 std of exactly its version
    tc = rust["toolchain"]
    assert tc["target"] == "riscv64gc-unknown-linux-gnu"
    assert tc["packages"]["rustc"] and tc["packages"]["rustc"] == tc["packages"]["libstd-rust-dev:riscv64"]
    assert tc["compilers"]["rustc"].startswith("rustc ")
    assert tc["env"]["CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_LINKER"] == "riscv64-linux-gnu-gcc"
    assert go["toolchain"]["env"] == {
        "GOOS": "linux",
        "GOARCH": "riscv64",
        "CGO_ENABLED": "1",
        "CC": "riscv64-linux-gnu-gcc",
        "CXX": "riscv64-linux-gnu-g++",
    }
    assert go["toolchain"]["compilers"]["go"].startswith("go version go")
    assert go["toolchain"]["packages"]["golang-go"]
    # compiled on the build platform, run on riscv64 (QEMU) through the FFI: 6 * 7 + 0
    assert go["smoke"]["status"] == "passed" and "ffi says 42" in "\n".join(go["smoke"]["output"])
    cp = rvport("verify", "artifacts", str(out / "artifacts"), "--profile", "rvv256", "--isa", "baseline")
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_rust_staticlib_cross_with_debian_rustc_web(engine, tiny_cross, tmp_path):
    """`rust: debian-rustc-web` in cross mode: rustc-web and cargo-web on the build platform with the riscv64
    rlibs of libstd-rust-web-dev unpacked beside them (one source version, a binNMU apart at most); the
    archive verifies as riscv64, and result.json names the Rust that compiled it."""
    import re

    out = tmp_path / "out"
    cp = rvport("build", "tinyrustweb", *args(tiny_cross, out, "cross"))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    doc = json.loads((out / "result.json").read_text())
    jsonschema.validate(doc, manifest.schema("result"))
    (st,) = doc["stages"]
    assert st["status"] in ("ok", "cached") and st["mode"] == "cross" and st["verify"]["ok"]
    tc = st["toolchain"]
    assert tc["rust"] == "debian-rustc-web"
    assert set(tc["packages"]) >= {"rustc-web", "cargo-web", "libstd-rust-web-dev:riscv64"}
    assert (
        "rustc" not in st["toolchain_packages"] and "libstd-rust-dev:riscv64" not in st["toolchain_packages"]
    )
    binnmu = re.compile(r"(\+b\d+)+$")
    assert binnmu.sub("", tc["packages"]["rustc-web"]) == binnmu.sub(
        "", tc["packages"]["libstd-rust-web-dev:riscv64"]
    )
    assert tc["unpacked"] == {"libstd-rust-web-dev:riscv64": "/usr/lib/rustlib/riscv64gc-unknown-linux-gnu"}
    # the Rust that ran, recorded by the stage itself: rustc-web's version, on the build platform
    upstream = tc["packages"]["rustc-web"].split("+")[0]
    assert st["rust"]["rustc"].startswith(f"rustc {upstream}") and st["rust"]["cargo"].startswith(
        f"cargo {upstream}"
    )
    assert st["rust"]["host"] == "x86_64-unknown-linux-gnu"
    assert tc["compilers"]["rustc"] == st["rust"]["rustc"]
    assert [a["path"] for a in doc["artifacts"]] == ["tinyrustweb/libtinyffi.a"]
    cp = rvport("verify", "artifacts", str(out / "artifacts"), "--profile", "rvv256", "--isa", "baseline")
    assert cp.returncode == 0, cp.stdout + cp.stderr
