"""outlines-core and llguidance: the Rust grammar engines behind vLLM's outlines and guidance
structured-output backends (issue 37), maturin projects built hermetically as oss-harmony is. What their
plans must hold, for every profile: sid's Python and maturin pinned, the sdist's own Cargo.lock vendored, an
offline `--locked` build, and smoke tests that run a grammar through the native code with a vocabulary of
their own. No Docker, no network."""

from __future__ import annotations

import pytest

from rvport.catalogue.bases import load_bases
from rvport.catalogue.kinds import compiles_rust
from rvport.catalogue.model import SourceKind
from rvport.catalogue.profiles import get_profile, load_profiles
from rvport.catalogue.recipes import load_catalogue
from rvport.errors import UsageError
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan
from rvport.vocab import Kind
from tests.fixtures.pysource import imports

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
NAMES = ("outlines-core", "llguidance")
VERSIONS = {"outlines-core": "0.2.14", "llguidance": "1.7.6"}


@pytest.fixture(scope="module")
def cat():
    return load_catalogue()


def _plan(name, *, profile="rvv256", pythons=(), mode=Mode.AUTO):
    req = Request(refs=(name,), profile=get_profile(profile), mode=mode, pythons=tuple(pythons))
    return make_plan(load_catalogue(), req, X86, bases=load_bases())


@pytest.mark.parametrize("name", NAMES)
def test_a_hermetic_rust_wheel_with_the_sdists_own_lock_vendored(cat, name):
    r = cat.resolve(name)
    assert r.version == VERSIONS[name]
    assert r.kind is Kind.PYTHON_WHEEL and compiles_rust(r) and r.hermetic and r.vendor == "cargo"
    (sdist,) = r.sources
    assert sdist.kind is SourceKind.PYPI and len(sdist.sha256 or "") == 64
    # the tree's own Cargo.lock, pinned as shipped by its digest: no copy of it in the catalogue
    assert r.lock is not None and str(r.lock.path) == "Cargo.lock" and len(r.lock.sha256) == 64
    assert not r.lockfiles
    assert r.toolchain.base == "debian-sid"
    # llguidance's abi3 wheel is built once, for sid's Python; outlines-core's cp313 has trixie's maturin
    assert r.toolchain.python == ("3.14" if name == "llguidance" else None)
    assert {"rustc", "cargo", "python3-maturin"} <= set(r.toolchain.debian)
    assert [(p.name, p.version) for p in r.toolchain.pins] == [("python3-maturin", "1.15.0-1")]
    # the same maturin, by the same digest, as oss-harmony's
    (harmony,) = cat.resolve("oss-harmony").toolchain.pins
    assert r.toolchain.pins[0].sha256 == harmony.sha256


@pytest.mark.parametrize("profile", sorted(load_profiles()))
@pytest.mark.parametrize("name", NAMES)
def test_every_profile_plans_an_offline_locked_build_of_baseline_code(name, profile):
    st = _plan(name, profile=profile).stage(name)
    assert st.profile.name == profile
    args = st.env["MATURIN_PEP517_ARGS"].split()
    assert "--locked" in args and "--offline" in args  # a lock that does not fit fails; nothing is fetched
    assert st.env["CARGO_NET_OFFLINE"] == "true" and st.env["CARGO_HOME"].startswith("/src/")
    assert st.mode is Mode.ACCELERATED  # rustc runs as a native cross compiler; the stage stays riscv64
    assert st.commands[-1].startswith("sh /rvport/tools/wheel-repair.sh")  # manylinux repair as every wheel
    (out,) = st.recipe.outputs
    assert out.type == "wheel" and str(getattr(out.isa, "value", out.isa)) == "baseline"


def test_outlines_core_leaves_out_only_the_model_hub_downloader():
    args = _plan("outlines-core").stage("outlines-core").env["MATURIN_PEP517_ARGS"].split()
    assert args == ["--locked", "--offline", "--no-default-features"]
    assert "--no-default-features" not in _plan("llguidance").stage("llguidance").env["MATURIN_PEP517_ARGS"]


@pytest.mark.parametrize("name", NAMES)
def test_each_is_built_for_the_pythons_whose_maturin_it_pins(name):
    assert [s.name for s in _plan(name, pythons=("3.14",)).stages] == [f"{name}-cp314"]
    if name == "llguidance":  # one abi3 wheel, built on sid
        with pytest.raises(UsageError):
            _plan(name, pythons=("3.13",))
        return
    cp313, cp314 = _plan(name, pythons=("3.13", "3.14")).stages
    assert (cp313.name, cp313.recipe.toolchain.base) == (f"{name}-cp313", "debian-trixie")
    assert [(p.name, p.version) for p in cp313.recipe.toolchain.pins] == [("python3-maturin", "1.8.3-1")]
    assert cp313.mode is Mode.ACCELERATED and cp313.recipe.toolchain.rust == "debian-rustc-web"
    assert {"rustc-web", "cargo-web"} <= set(cp313.recipe.toolchain.debian)


def test_the_smoke_tests_run_a_grammar_through_the_native_code_without_a_download(cat):
    oc, llg = cat.resolve("outlines-core"), cat.resolve("llguidance")
    assert imports(oc.smoke) == {
        "array",
        "importlib.metadata",
        "json",
        "outlines_core",
        "outlines_core.json_schema",
    }
    for call in (
        "Vocabulary(",
        "Index(",
        "Guide(",
        "build_regex_from_schema",
        "write_mask_into",
        "accepts_tokens",
    ):
        assert call in oc.smoke
    assert imports(llg.smoke) == {"importlib.metadata", "json", "llguidance"}
    for call in (
        "LLTokenizer(",
        "LLMatcher(",
        "grammar_from_lark",
        "grammar_from_json_schema",
        "compute_bitmask",
    ):
        assert call in llg.smoke
    for script in (oc.smoke, llg.smoke):
        assert "from_pretrained" not in script and "huggingface" not in script  # a vocabulary of its own
        compile(script, "<smoke>", "exec")
    # both need nothing beyond the wheel and sid's Python
    assert oc.smoke_debian == () and llg.smoke_debian == ()
