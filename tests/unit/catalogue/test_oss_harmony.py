"""oss-harmony: a maturin project built by the python-wheel kind, as data (no kind of its own). What its plan
must hold for the build to be hermetic and to be the wheel vLLM's closure names. No Docker, no network."""

from __future__ import annotations

import ast

import pytest
import yaml

from rvport import resources
from rvport.catalogue.bases import load_bases
from rvport.catalogue.kinds import compiles_rust
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.errors import UsageError
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan
from rvport.vocab import Kind

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)


@pytest.fixture(scope="module")
def recipe():
    return load_catalogue().resolve("oss-harmony")


def _plan(*, pythons=(), mode=Mode.AUTO):
    req = Request(refs=("oss-harmony",), profile=get_profile("rvv256"), mode=mode, pythons=tuple(pythons))
    return make_plan(load_catalogue(), req, X86, bases=load_bases())


def test_the_version_the_closure_lock_names_is_the_default(recipe):
    closure = yaml.safe_load(resources.text("locks", "vllm-0.33.0-cp314.yaml"))
    entry = next(e for e in closure["packages"] if e["name"] == "oss-harmony")
    assert entry["recipe"] == recipe.name and entry["version"] == recipe.version == "0.0.11"


def test_a_python_wheel_compiling_rust_with_the_sdists_own_lock_vendored(recipe):
    assert recipe.kind is Kind.PYTHON_WHEEL and compiles_rust(recipe)
    assert recipe.hermetic and recipe.vendor == "cargo"
    # the tree's own Cargo.lock, pinned as shipped: no copy of it in the catalogue
    assert recipe.lock is not None and str(recipe.lock.path) == "Cargo.lock"
    assert not recipe.lockfiles
    # maturin is sid's, pinned by version and .deb digest
    assert "python3-maturin" in recipe.toolchain.debian
    assert [(p.name, p.version) for p in recipe.toolchain.pins] == [("python3-maturin", "1.15.0-1")]


def test_the_stage_builds_offline_against_the_lock_as_it_is():
    st = _plan().stage("oss-harmony")
    args = st.env["MATURIN_PEP517_ARGS"].split()
    assert "--locked" in args and "--offline" in args  # a lock that does not fit fails; nothing is fetched
    assert st.env["CARGO_NET_OFFLINE"] == "true" and st.env["CARGO_HOME"].startswith("/src/")
    assert st.recipe.toolchain.base == "debian-sid"
    assert st.mode is Mode.ACCELERATED
    assert st.commands[-1].startswith("sh /rvport/tools/wheel-repair.sh")  # manylinux repair as every wheel


def test_it_is_built_for_sids_python_only():
    assert [s.name for s in _plan(pythons=("3.14",)).stages] == ["oss-harmony-cp314"]
    with pytest.raises(UsageError):
        _plan(pythons=("3.13",))


def test_the_smoke_test_is_python_using_the_rust_extension(recipe):
    tree = ast.parse(recipe.smoke)
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert imported == {"openai_harmony"}
    for call in (
        "load_harmony_encoding",
        "render_conversation_for_completion",
        "parse_messages_from_completion_tokens",
    ):
        assert call in recipe.smoke
    assert recipe.smoke_debian == ("python3-pydantic",)
