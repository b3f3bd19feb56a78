"""`toolchain: on_base:`: what a recipe changes on another riscv64 base when --python plans it there (sid has
no rustc-web), the problems it is held to when it loads, and the accelerated prefix a sid Rust stage gets.
No Docker."""

from __future__ import annotations

import pytest

from rvport.catalogue.bases import load_bases
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.engine.modes import accelerated as acc
from rvport.errors import RecipeError, UsageError
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)


def plan(*refs, pythons=()):
    req = Request(refs=refs, profile=get_profile("rvv256"), mode=Mode.AUTO, pythons=tuple(pythons))
    return make_plan(load_catalogue(), req, X86, bases=load_bases())


def test_tiktoken_builds_with_sids_rustc_on_sid_and_rustc_web_on_trixie():
    a, b = plan("tiktoken", pythons=("3.13", "3.14")).stages
    assert (a.name, b.name) == ("tiktoken-cp313", "tiktoken-cp314")
    assert a.recipe.toolchain.base == "debian-trixie" and a.recipe.toolchain.rust == "debian-rustc-web"
    assert set(a.recipe.toolchain.debian) >= {"rustc-web", "cargo-web"}
    assert b.recipe.toolchain.base == "debian-sid" and b.recipe.toolchain.rust == "debian"
    assert set(b.recipe.toolchain.debian) == {"rustc", "cargo", "python3-setuptools-rust"}
    assert b.recipe.toolchain.on_base == () and b.mode.value == "accelerated"
    assert "rustc" in b.to_json()["toolchain"]["debian"]
    (alone,) = plan("tiktoken").stages  # without --python: the recipe's own base, as before
    assert (alone.recipe.toolchain.base, alone.recipe.toolchain.rust) == ("debian-trixie", "debian-rustc-web")
    assert alone.to_json()["toolchain"] == a.to_json()["toolchain"]


def test_outlines_core_pins_each_bases_own_maturin():
    a, b = plan("outlines-core", pythons=("3.13", "3.14")).stages
    assert (a.name, b.name) == ("outlines-core-cp313", "outlines-core-cp314")
    assert a.recipe.toolchain.base == "debian-trixie" and a.recipe.toolchain.rust == "debian-rustc-web"
    assert [(p.name, p.version) for p in a.recipe.toolchain.pins] == [("python3-maturin", "1.8.3-1")]
    assert [(p.name, p.version) for p in b.recipe.toolchain.pins] == [("python3-maturin", "1.15.0-1")]
    assert "python3-maturin=1.8.3-1" in a.recipe.toolchain.apt_packages
    assert a.to_json()["toolchain"]["pins"][0]["sha256"].startswith("fb6cd315")
    (alone,) = plan("outlines-core").stages  # without --python: its own base, sid, and sid's pin
    assert alone.recipe.toolchain.pins == b.recipe.toolchain.pins


def test_pins_hold_a_recipe_to_the_bases_that_pin():
    """vllm pins sid's torch and no other base's: --python 3.13 is refused, naming the pins; outlines-core
    pins maturin on sid and on trixie, so it plans for either Python and for no third."""
    said = r"vllm.* builds for Python 3.14 alone \(toolchain: pins: of debian-sid"
    with pytest.raises(UsageError, match=said):
        plan("vllm", pythons=("3.13",))
    (only,) = plan("outlines-core", pythons=("3.13",)).stages
    assert only.name == "outlines-core-cp313"


def test_a_base_without_an_entry_only_changes_the_base():
    tc = load_catalogue().default("msgspec").toolchain
    assert tc.on_base == ()
    sid = tc.for_base("debian-sid")
    assert sid.base == "debian-sid" and sid.debian == tc.debian and sid.rust == tc.rust


RECIPE = """\
schema: 1
name: a
kind: python-wheel
build: [echo build]
outputs: [{glob: "*.whl", type: wheel}]
versions:
  - version: "1.0"
    sources:
      - name: sdist
        pypi: {project: a, version: "1.0"}
        sha256: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
toolchain:
  base: debian-trixie
  on_base:
"""


def _load(tmp_path, on_base: str):
    (tmp_path / "a.yaml").write_text(RECIPE + f"    {on_base}\n")
    with pytest.raises(RecipeError) as ei:
        load_catalogue(tmp_path)
    return ei.value.problems


@pytest.mark.parametrize(
    "on_base, said",
    [
        ("debian-trixie: {debian: [cmake]}", "names 'debian-trixie', the recipe's own base"),
        ("no-such-base: {debian: [cmake]}", "toolchain base 'no-such-base'"),
        ("debian-sid-xtc: {debian: [cmake]}", "is for the build platform"),
        (
            "debian-sid: {debian: [rustc-web, cargo-web], rust: debian}",
            "debian-sid: toolchain.debian installs",
        ),
        ("debian-sid: {rust: debian-rustc-web}", "debian-sid: toolchain rust: debian-rustc-web needs"),
        ("debian-sid: {pins: [{name: maturin, version: '1'}]}", "sha256"),
        ("debian-sid: {python: '3.14'}", "unknown key 'python'"),
    ],
)
def test_an_entry_that_cannot_hold_is_refused_with_its_line(tmp_path, on_base, said):
    (p, *_) = _load(tmp_path, on_base)
    assert said in p.message, p.message
    assert p.file.endswith("a.yaml") and p.line and p.line >= 14


_GCC = ("gcc-16", "g++-16", "libgcc-16-dev", "libstdc++-16-dev")
_BINUTILS = {"binutils-riscv64-linux-gnu": "2.47.50.20261021-1"}
SID_STAGE = dict.fromkeys(_GCC, "16.2.0-4") | _BINUTILS
SID_CROSS = {
    "gcc-16-riscv64-linux-gnu": "16.2.0-3cross1",
    "g++-16-riscv64-linux-gnu": "16.2.0-3cross1",
    "libgcc-16-dev-riscv64-cross": "16.2.0-3cross1",
    "libstdc++-16-dev-riscv64-cross": "16.2.0-3cross1",
} | _BINUTILS
SID_RUST_STAGE = {"rustc": "1.97.1+dfsg1-1", "libstd-rust-dev": "1.97.1+dfsg1-1"}


def test_a_sid_rust_stage_takes_sids_prefix_with_its_rustc():
    assert acc.xtc_base("debian-sid", rust=True) == "debian-sid-xtc-rust"
    assert acc.xtc_base("debian-sid", rust=False) == "debian-sid-xtc"
    with pytest.raises(RecipeError, match="no-such-base"):  # no silent default: test_accelerated.py
        acc.xtc_base("no-such-base", rust=True)
    assert acc.has_rustc("debian-sid-xtc-rust") and not acc.has_rustc("debian-sid-xtc")


def test_a_prefix_with_rustc_is_compared_by_rustc_and_libstd_rust_dev():
    cross = SID_CROSS | {"rustc": "1.97.1+dfsg1-1", "libstd-rust-dev": "1.97.1+dfsg1-1"}
    compared = acc.check_versions(SID_STAGE | SID_RUST_STAGE, cross, "16", rust=True)
    assert compared["rustc"] == compared["libstd-rust-dev"] == "1.97.1+dfsg1-1"
    older = SID_STAGE | SID_RUST_STAGE | {"libstd-rust-dev": "1.96.0+dfsg1-1"}
    with pytest.raises(acc.ToolchainMismatch, match="stage libstd-rust-dev 1.96.0"):
        acc.check_versions(older, cross, "16", rust=True)
    with pytest.raises(acc.ToolchainMismatch, match="the stage has no rustc "):
        acc.check_versions(SID_STAGE, cross, "16", rust=True)
