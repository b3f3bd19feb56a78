"""xgrammar and apache-tvm-ffi: the two C++ wheels `from vllm import LLM` needs that nobody ships for riscv64
(issue 25). What their plans must hold: sid's Python, the build backends from sid pinned, offline builds,
xgrammar built against and smoke-tested with our apache-tvm-ffi wheel, and the versions the closure lock
names. No Docker, no network."""

from __future__ import annotations

import pytest
import yaml

from rvport import resources
from rvport.catalogue import closure_lock
from rvport.catalogue.bases import load_bases
from rvport.catalogue.model import SourceKind
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.closure.resolve import load_policy, recipe_versions
from rvport.errors import UsageError
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan
from rvport.vocab import Kind
from tests.fixtures.pysource import imports

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
NAMES = ("apache-tvm-ffi", "xgrammar")


@pytest.fixture(scope="module")
def cat():
    return load_catalogue()


def _plan(*refs, pythons=(), mode=Mode.AUTO):
    req = Request(refs=refs, profile=get_profile("rv64gc"), mode=mode, pythons=tuple(pythons))
    return make_plan(load_catalogue(), req, X86, bases=load_bases())


@pytest.mark.parametrize("name", NAMES)
def test_the_version_the_closure_lock_names_is_the_default(cat, name):
    lock = yaml.safe_load(resources.text("locks", "vllm-0.33.0-cp314.yaml"))
    entry = next(e for e in lock["packages"] if e["name"] == name)
    r = cat.resolve(name)
    assert entry["origin"] == "recipe" and entry["recipe"] == r.name and entry["version"] == r.version


def test_every_recipe_of_the_vllm_lock_is_in_the_catalogue_and_the_policy_names_no_version_of_its_own(cat):
    lock = closure_lock.load_lock(closure_lock.lock_path("vllm", "0.33.0", "3.14"))
    for e in lock.by_origin(closure_lock.Origin.RECIPE):
        assert any(r.version == e.version for r in cat.recipes[e.recipe or ""]), e.name
    policy = load_policy("vllm")
    assert policy.recipe_versions == {}  # the catalogue's versions are the ones locked
    assert recipe_versions(cat, policy)["xgrammar"] == "0.2.8"
    assert recipe_versions(cat, policy)["apache-tvm-ffi"] == "0.1.15.post2"


@pytest.mark.parametrize("name", NAMES)
def test_a_hermetic_cp314_wheel_on_sid_with_its_build_backend_pinned(cat, name):
    r = cat.resolve(name)
    assert r.kind is Kind.PYTHON_WHEEL and r.hermetic
    assert r.toolchain.base == "debian-sid" and r.toolchain.python == "3.14"
    assert "accelerated" in {str(getattr(m, "value", m)) for m in r.modes}
    (sdist,) = r.sources
    assert sdist.kind is SourceKind.PYPI and sdist.sha256 and len(sdist.sha256) == 64
    pins = {p.name: p.version for p in r.toolchain.pins}
    assert pins["python3-scikit-build-core"] == "0.12.2-1"
    assert (
        "python3-scikit-build-core" in r.toolchain.debian and "python3-setuptools-scm" in r.toolchain.debian
    )
    assert any("--no-build-isolation --no-index" in c for c in r.build)


def test_tvm_ffi_s_cython_comes_from_sid_and_its_bound_is_lowered_by_a_checked_edit(cat):
    r = cat.resolve("apache-tvm-ffi")
    assert {p.name: p.version for p in r.toolchain.pins}["cython3"] == "3.1.6+dfsg-4"
    (edit,) = [c for c in r.build if "cython>=3" in c]
    # the sed, then a check that fails the build when the sdist's line was not the one edited
    assert edit.index("sed -i") < edit.index("grep -q") and '"cython>=3.1"' in edit
    assert r.no_repair is None  # repaired as every wheel: its libraries are its own, found by RUNPATH


def test_xgrammar_is_built_against_the_tvm_ffi_wheel_of_its_recipe_not_a_download():
    p = _plan("xgrammar")
    assert [s.name for s in p.stages] == ["apache-tvm-ffi", "xgrammar"]
    st = p.stage("xgrammar")
    assert st.depends == ("apache-tvm-ffi",)
    install = next(c for c in st.commands if "apache_tvm_ffi-" in c)
    assert "/deps" in install and "--no-index --no-deps" in install
    assert st.commands.index(install) < next(i for i, c in enumerate(st.commands) if "pip wheel" in c)


def test_xgrammar_is_repaired_leaving_out_the_tvm_ffi_runtime_its_requirement_ships():
    st = _plan("xgrammar").stage("xgrammar")
    assert st.commands[-1] == "sh /rvport/tools/wheel-repair.sh auto --exclude libtvm_ffi.so"
    assert st.recipe.no_repair is None and st.recipe.repair_exclude == ("libtvm_ffi.so",)
    assert "second FFI runtime" in (st.recipe.repair_exclude_reason or "")
    doc = next(s for s in _plan("xgrammar").to_json()["stages"] if s["recipe"].startswith("xgrammar"))
    assert doc["wheel_repair"]["by"] == "recipe" and doc["wheel_repair"]["exclude"] == ["libtvm_ffi.so"]
    assert doc["wheel_repair"]["repair"] is True and doc["wheel_repair"]["platform"] == "auto"
    # --manylinux off still means off
    off = make_plan(
        load_catalogue(),
        Request(refs=("xgrammar",), profile=get_profile("rv64gc"), manylinux="off"),
        X86,
        bases=load_bases(),
    ).stage("xgrammar")
    assert not any("wheel-repair.sh" in c for c in off.commands)
    tvm = _plan("apache-tvm-ffi").stage("apache-tvm-ffi")
    assert tvm.commands[-1] == "sh /rvport/tools/wheel-repair.sh auto"  # repaired as every wheel


@pytest.mark.parametrize("name", NAMES)
def test_each_is_built_for_sids_python_only(name):
    assert [s.name for s in _plan(name, pythons=("3.14",)).stages][-1] == f"{name}-cp314"
    with pytest.raises(UsageError):
        _plan(name, pythons=("3.13",))


def test_the_smoke_tests_use_the_native_code_and_need_no_network(cat):
    tvm, xg = cat.resolve("apache-tvm-ffi"), cat.resolve("xgrammar")
    assert imports(tvm.smoke) == {"numpy", "tvm_ffi"}
    for call in ("get_global_func", "register_global_func", "from_dlpack", "np.from_dlpack"):
        assert call in tvm.smoke
    assert imports(xg.smoke) == {"importlib.metadata", "json", "torch", "xgrammar"}
    for call in ("TokenizerInfo", "compile_json_schema", "GrammarMatcher", "fill_next_token_bitmask"):
        assert call in xg.smoke
    assert "from_pretrained" not in xg.smoke and "huggingface" not in xg.smoke  # a vocabulary of its own
    # what `import xgrammar` imports, from Debian as the vllm lock takes them
    assert {"python3-torch", "python3-transformers", "python3-pydantic"} <= set(xg.smoke_debian)
