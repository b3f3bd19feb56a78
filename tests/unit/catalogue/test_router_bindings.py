"""candle-binding and router-nlp-binding: the Semantic Router's Candle classifiers (crate
candle-semantic-router) and its BM25/n-gram keyword classifiers (crate nlp-binding) as riscv64 static
libraries (issue 38, item 1). What the recipes and their plans must hold, for every profile: the router's own
pin, for candle-binding Candle pinned as a git source of its own where our patch points the candle crates,
the tree's lock vendored, an offline `--locked` build of baseline code (candle-binding without its default
cuda feature), and a smoke test of the archive's symbols. No Docker, no network."""

from __future__ import annotations

import re

import pytest

from rvport import proc
from rvport.catalogue.bases import load_bases
from rvport.catalogue.model import SourceKind
from rvport.catalogue.profiles import get_profile, load_profiles
from rvport.catalogue.recipes import load_catalogue
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan
from rvport.vocab import Kind

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
NAME = "candle-binding"
CANDLE_COMMIT = "d312da234440ca64fb64c38ba57588a692f58caf"
CANDLE_SOURCE = f'source = "git+https://github.com/huggingface/candle?tag=0.9.2-alpha.1#{CANDLE_COMMIT}"'
CANDLE_CRATES = {"candle-core", "candle-nn", "candle-transformers", "candle-flash-attn"}


@pytest.fixture(scope="module")
def cat():
    return load_catalogue()


def _plan(profile="rvv256", mode=Mode.AUTO, name=NAME):
    req = Request(refs=(name,), profile=get_profile(profile), mode=mode)
    return make_plan(load_catalogue(), req, X86, bases=load_bases())


def _patch(cat) -> tuple[list[str], list[str], list[str]]:
    """The patch's files, removed lines and added lines."""
    (patch,) = cat.resolve(NAME).patches
    text = patch.path.read_text()
    files = re.findall(r"^\+\+\+ b/(\S+)", text, re.M)
    body = [ln for ln in text.splitlines() if not ln.startswith(("---", "+++"))]
    return files, [ln[1:] for ln in body if ln.startswith("-")], [ln[1:] for ln in body if ln.startswith("+")]


def test_the_router_pin_of_ml_binding_and_candle_pinned_by_commit_and_tree(cat):
    r, ml = cat.resolve(NAME), cat.resolve("router-ml-binding")
    assert r.kind is Kind.CARGO_STATICLIB and r.hermetic and r.version == ml.version == "0.3.0"
    router, candle = r.sources
    # the same commit, tree digest and exclusions as the router and its ml-binding
    assert router.to_json() == ml.sources[0].to_json() and router.dest is None
    assert candle.kind is SourceKind.GIT and candle.repo == "https://github.com/huggingface/candle"
    assert (candle.commit, candle.tag, candle.dest) == (CANDLE_COMMIT, "0.9.2-alpha.1", "_deps/candle")
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", candle.tree or "") and not candle.exclude
    # the tree's own lock, after our patch, checked by its digest; no copy of it ships with rvport
    assert r.vendor == "cargo" and r.lock.path == "candle-binding/Cargo.lock" and len(r.lock.sha256) == 64
    # our only files: the classifier check's tiny model script and driver (test_candle_classifier_check)
    assert not r.lockfiles
    assert {f.dest for f in r.files} == {"_rvport/tiny-modernbert.py", "_rvport/classify.c"}
    # candle-core needs Rust >= 1.87 (`is_multiple_of`): trixie's rustc-web, not its rustc 1.85
    assert set(r.modes) == {"native", "qemu", "cross", "accelerated"}
    assert r.toolchain.rust == "debian-rustc-web" and {"rustc-web", "cargo-web"} <= set(r.toolchain.debian)
    assert not {"rustc", "cargo"} & set(r.toolchain.debian)


def test_the_patch_points_the_candle_crates_at_the_pinned_source_and_drops_only_their_git_lines(cat):
    files, removed, added = _patch(cat)
    assert files == ["candle-binding/Cargo.lock", "candle-binding/Cargo.toml"]
    dest = cat.resolve(NAME).sources[1].dest
    # the lock: the five candle entries' git source lines (kernels and flash-attn too), nothing added
    lock_removed = [ln for ln in removed if ln.startswith("source = ")]
    assert lock_removed == [CANDLE_SOURCE] * 5
    # the manifest: each candle dependency from git to a path into the candle source, at the same version
    deps = [ln for ln in removed if not ln.startswith("source = ")]
    assert {ln.split(" = ", 1)[0] for ln in deps} == CANDLE_CRATES and len(deps) == 4
    assert all('git = "https://github.com/huggingface/candle", tag = "0.9.2-alpha.1"' in ln for ln in deps)
    assert {ln.split(" = ", 1)[0] for ln in added} == CANDLE_CRATES and len(added) == 4
    for ln in added:
        crate = ln.split(" = ", 1)[0]
        assert f'path = "../{dest}/{crate}"' in ln and 'version = "0.9.2-alpha.1"' in ln and "git" not in ln


@pytest.mark.parametrize("profile", sorted(load_profiles()))
def test_every_profile_plans_an_offline_locked_cpu_build_of_baseline_code(profile):
    st = _plan(profile).stage(NAME)
    assert st.profile.name == profile
    assert st.mode is Mode.CROSS  # rustc native, the C parts through the cross compiler
    cargo, reference = [c for c in st.commands if "cargo rustc" in c]
    assert reference.startswith('if [ "$RVPORT_MODE" = cross ]')  # the x86-64 build of the classifier check
    args = cargo.split()
    assert cargo.startswith("cd candle-binding && cargo rustc --release")
    assert {"--locked", "--offline", "--no-default-features", "--lib"} <= set(args)  # no cuda
    assert "--crate-type staticlib" in cargo and '"$RVPORT_RUST_TARGET"' in cargo
    assert st.env["RVPORT_RUST_TARGET"] == "riscv64gc-unknown-linux-gnu"
    assert st.env["CARGO_NET_OFFLINE"] == "true" and st.env["CARGO_HOME"].startswith("/src/")
    assert st.env["CFLAGS_riscv64gc_unknown_linux_gnu"] == "-O2 -march=rv64gc -mabi=lp64d"
    out, driver = st.recipe.outputs
    assert (out.glob, out.type) == ("libcandle_semantic_router.a", "staticlib")
    assert (driver.glob, driver.type) == ("candle-classify", "executable")
    assert str(getattr(out.isa, "value", out.isa)) == "baseline"


@pytest.mark.parametrize("mode", [Mode.QEMU, Mode.CROSS, Mode.ACCELERATED])
def test_qemu_cross_and_accelerated_plan_too(mode):
    assert _plan(mode=mode).stage(NAME).mode is mode


def test_the_exports_are_what_the_go_package_calls_and_the_smoke_test_checks_them(cat):
    r = cat.resolve(NAME)
    out, _driver = r.outputs
    exports = set(out.exports)
    assert {"init_similarity_model", "init_classifier", "classify_text", "init_pii_classifier"} <= exports
    assert {"init_jailbreak_classifier", "detect_hallucinations", "free_cstring"} <= exports
    assert "/artifacts/libcandle_semantic_router.a" in r.smoke and "RISC-V" in r.smoke
    loop = re.search(r"for sym in (.*?); do", r.smoke, re.S).group(1)
    checked = set(loop.replace("\\", " ").split())
    assert checked and checked <= exports
    assert r.smoke_debian == ("binutils",)
    assert proc.run(["sh", "-n", "-c", r.smoke], capture=True, check=False, timeout=30).returncode == 0


NLP = "router-nlp-binding"
NLP_EXPORTS = {
    f"{kind}_classifier_{op}" for kind in ("bm25", "ngram") for op in ("new", "add_rule", "classify", "free")
} | {"free_classify_result"}


def test_nlp_binding_is_the_routers_pin_and_the_trees_own_lock(cat):
    r, ml = cat.resolve(NLP), cat.resolve("router-ml-binding")
    assert r.kind is Kind.CARGO_STATICLIB and r.hermetic and r.version == "0.3.0"
    assert [s.to_json() for s in r.sources] == [s.to_json() for s in ml.sources]
    assert r.vendor == "cargo" and r.lock.path == "nlp-binding/Cargo.lock" and len(r.lock.sha256) == 64
    assert not r.patches and not r.lockfiles and not r.files
    assert set(r.modes) == {"native", "qemu", "cross"} and r.toolchain.rust is None
    (out,) = r.outputs
    assert (out.glob, out.type, str(getattr(out.isa, "value", out.isa))) == (
        "libnlp_binding.a",
        "staticlib",
        "baseline",
    )
    assert set(out.exports) == NLP_EXPORTS  # every function nlp_binding.go declares
    loop = re.search(r"for sym in (.*?); do", r.smoke, re.S).group(1)
    assert set(loop.replace("\\", " ").split()) == NLP_EXPORTS
    assert proc.run(["sh", "-n", "-c", r.smoke], capture=True, check=False, timeout=30).returncode == 0


@pytest.mark.parametrize("profile", sorted(load_profiles()))
def test_nlp_binding_plans_an_offline_locked_build_for_every_profile(profile):
    st = _plan(profile, name=NLP).stage(NLP)
    assert st.profile.name == profile and st.mode is Mode.CROSS
    (cargo,) = [c for c in st.commands if "cargo rustc" in c]
    assert cargo.startswith("cd nlp-binding && cargo rustc --release --locked --offline")
    assert "--crate-type staticlib" in cargo and st.env["CARGO_HOME"].startswith("/src/")
