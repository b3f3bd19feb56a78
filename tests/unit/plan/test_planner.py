"""Pure planning: order, modes with reasons, expanded flags, keys; for x86-64 and riscv64 hosts alike."""

from __future__ import annotations

import json

import pytest

from rvport import manifest
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.errors import UsageError
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, bound_jobs, expand, make_plan
from rvport.vocab import Kind
from tests.fixtures.schemas import validate

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
RV = HostFacts(arch="riscv64", cpus=64, mem_bytes=128 * 2**30)


@pytest.fixture(scope="module")
def cat():
    return load_catalogue()


def plan(cat, *refs, profile="rvv256", mode=Mode.AUTO, host=X86, all_=False, jobs=None):
    return make_plan(
        cat, Request(refs=refs, all=all_, profile=get_profile(profile), mode=mode, jobs=jobs), host
    )


def test_all_recipes_in_dependency_order(cat):
    p = plan(cat, all_=True)
    order = [s.name for s in p.stages]
    assert set(order) == {
        "msgspec",
        "sentencepiece",
        "tiktoken",
        "oss-harmony",
        "vllm",
        "glide-ffi",
        "router-ml-binding",
        "candle-binding",
        "router-nlp-binding",
        "semantic-router",
        "apache-tvm-ffi",
        "xgrammar",
        "outlines-core",
        "llguidance",
    }
    assert order.index("apache-tvm-ffi") < order.index("xgrammar")
    assert order.index("glide-ffi") < order.index("semantic-router")
    assert order.index("router-ml-binding") < order.index("semantic-router")


def test_all_leaves_out_a_recipe_whose_source_is_not_pinned_and_says_so_in_one_line(cat):
    p = plan(cat, all_=True)
    assert "torch" not in [s.name for s in p.stages]
    (note,) = [w for w in p.warnings if w.startswith("--all leaves out")]
    assert "torch==2.14.0" in note and "not pinned" in note
    assert plan(cat, "torch").stage("torch")  # named, it is planned


def test_all_with_a_python_a_recipe_cannot_have_leaves_it_out_and_names_it(cat):
    p = make_plan(cat, Request(refs=(), all=True, profile=get_profile("rvv256"), pythons=("3.13",)), X86)
    assert "vllm" not in {s.recipe.name for s in p.stages} and "msgspec" in {s.recipe.name for s in p.stages}
    (note,) = [w for w in p.warnings if w.startswith("--all leaves out") and "Python" in w]
    assert "vllm==0.33.0" in note and "xgrammar==0.2.8" in note and "not --python 3.13" in note
    both = make_plan(
        cat, Request(refs=(), all=True, profile=get_profile("rvv256"), pythons=("3.13", "3.14")), X86
    )
    (note,) = [w for w in both.warnings if w.startswith("--python 3.13, 3.14")]
    assert "vllm (3.14)" in note


def test_all_with_a_mode_some_recipes_refuse_names_every_one_and_why(cat):
    with pytest.raises(UsageError) as e:
        plan(cat, all_=True, mode=Mode.ACCELERATED)
    text = e.value.message
    assert "router-ml-binding==0.3.0 (its recipe lists modes" in text and "semantic-router==0.3.0" in text
    assert "not accelerated" in text and "--mode auto" in e.value.hint


def test_plan_json_validates_and_holds_every_pin(cat):
    doc = make_plan(
        cat,
        Request(refs=tuple(cat.names), profile=get_profile("rvv256"), mode=Mode.AUTO, jobs=None),
        X86,
    ).to_json()
    validate(doc, manifest.schema("plan"))
    text = manifest.dumps(doc)
    assert json.loads(text) == doc
    for digest in (
        "a0d57d3ca7734542eb6861e72d974ab051e6cf73ea6b01b263f77170593362be",
        "3d2b5e824b5622038dc7b490897efe05ebbbb9e7350fc142f3ecc8789ef9bdf6",
        "231dec90efcdccf1b565a1416107736f1e09b1a08fe736ef9d6363e626d03874",
        "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112",
        "180f3883f8c98bbf6647e3da4660edcbc091c5bc",
        "9afc5a421886f44085f9070a8fbd878b80724f64",
    ):
        assert digest in text
    assert "to be recorded on first verified fetch" in text
    assert list(json.loads(text)) == sorted(doc)  # written with sorted keys


def test_dependency_pulled_in_first(cat):
    p = plan(cat, "semantic-router")
    assert [s.name for s in p.stages] == ["glide-ffi", "router-ml-binding", "semantic-router"]
    assert p.stage("semantic-router").depends == ("glide-ffi", "router-ml-binding")


def test_modes_on_x86(cat):
    p = plan(cat, *cat.names)
    assert p.stage("torch").mode is Mode.QEMU and "QEMU" in p.stage("torch").mode_reason
    for (
        s
    ) in p.stages:  # recipes proven accelerated use it under auto, unless they cross-compile (faster still)
        if "accelerated" in s.recipe.modes and "cross" not in s.recipe.modes:
            assert s.mode is Mode.ACCELERATED and s.emulated
    assert p.stage("glide-ffi").mode is Mode.CROSS and "cross" in p.stage("glide-ffi").mode_reason
    assert p.stage("semantic-router").mode is Mode.CROSS
    assert p.stage("torch").platform == "linux/riscv64" and p.stage("torch").emulated
    assert p.stage("glide-ffi").platform == "linux/amd64"


def test_modes_on_a_riscv64_host(cat):
    p = plan(cat, all_=True, host=RV)
    assert all(s.mode is Mode.NATIVE and not s.emulated for s in p.stages)
    assert "riscv64" in p.stages[0].mode_reason


def test_native_on_x86_is_refused(cat):
    with pytest.raises(UsageError, match="riscv64 host"):
        plan(cat, "msgspec", mode=Mode.NATIVE)


def test_cross_for_a_wheel_is_refused(cat):
    with pytest.raises(UsageError, match="cannot be cross-compiled"):
        plan(cat, "msgspec", mode=Mode.CROSS)


def test_profile_flags_and_knobs_are_expanded(cat):
    p = plan(cat, "msgspec", "vllm", profile="rvv128")
    env = p.stage("msgspec").env
    assert env["CFLAGS"] == "-O2 -march=rv64gcv_zvfh_zvl128b -mabi=lp64d -ffile-prefix-map=/src=."
    assert env["RUSTFLAGS"] == "--remap-path-prefix=/src=."
    assert env["QEMU_CPU"].startswith("rv64,v=true,vlen=128")
    assert "zvfbfmin=false" in env["QEMU_CPU"]
    venv = p.stage("vllm").env
    assert venv["VLLM_TARGET_DEVICE"] == "cpu"
    assert "-DVLLM_RVV_VLEN=128" in venv["CMAKE_ARGS"]
    assert "VLLM_CPU_RVV_BF16" not in venv or venv["VLLM_CPU_RVV_BF16"] != "1"


def test_bf16_profile_sets_the_bf16_knob(cat):
    venv = plan(cat, "vllm", profile="rvv256-bf16").stage("vllm").env
    assert venv["VLLM_CPU_RVV_BF16"] == "1"
    assert "zvfbfmin=true" in venv["QEMU_CPU"]
    assert "-DVLLM_RVV_VLEN=256" in venv["CMAKE_ARGS"]


def test_scalar_profile_sets_vlen_zero(cat):
    venv = plan(cat, "vllm", profile="rv64gc").stage("vllm").env
    assert "-DVLLM_RVV_VLEN=0" in venv["CMAKE_ARGS"] and "v=false" in venv["QEMU_CPU"]


def test_cross_stages_get_no_qemu_cpu(cat):
    assert "QEMU_CPU" not in plan(cat, "glide-ffi").stage("glide-ffi").env


def test_keys_change_with_inputs_and_propagate_to_dependents(cat):
    a = plan(cat, "vllm", profile="rvv256")
    b = plan(cat, "vllm", profile="rvv128")
    assert a.stage("vllm").key != b.stage("vllm").key
    assert plan(cat, "vllm").stage("vllm").key == a.stage("vllm").key  # deterministic


def test_jobs_bounded_by_memory():
    small = HostFacts(arch="x86_64", cpus=64, mem_bytes=8 * 2**30)
    assert bound_jobs(Kind.TORCH_WHEEL, small, None) == 2
    assert bound_jobs(Kind.PYTHON_WHEEL, X86, None) == 2
    assert bound_jobs(Kind.TORCH_WHEEL, small, 32) == 2
    assert bound_jobs(Kind.PYTHON_WHEEL, X86, 1) == 1


def test_expand_leaves_unknown_names_to_the_shell():
    assert expand("${A} ${B} $C", {"A": "1"}) == "1 ${B} $C"


def test_source_locations_come_from_the_locator(cat):
    p = make_plan(
        cat, Request(refs=("msgspec",), profile=get_profile("rvv256")), X86, locate=lambda s: "missing"
    )
    assert p.stage("msgspec").source_locations == {"sdist": "missing"}
    assert any("--mirror" in w for w in p.warnings)


def test_empty_request_is_a_usage_error(cat):
    with pytest.raises(UsageError, match="no recipe named"):
        plan(cat)


def test_accelerated_needs_a_recipe_that_lists_it(cat):
    with pytest.raises(UsageError, match="cannot run accelerated"):
        plan(cat, "torch", mode=Mode.ACCELERATED)
    with pytest.raises(UsageError):
        plan(cat, "msgspec", mode=Mode.ACCELERATED, host=HostFacts(arch="ppc64le", cpus=2, mem_bytes=2**34))


def test_qemu_can_be_forced_for_every_riscv64_recipe(cat):
    p = plan(cat, "msgspec", "sentencepiece", "tiktoken", mode=Mode.QEMU)
    assert all(s.mode is Mode.QEMU for s in p.stages)


def test_go_compiled_under_qemu_is_warned_about(cat):
    """Go >= 1.23 can hang under qemu-user (golang/go#70329): a plan that compiles Go emulated says so."""
    warned = [w for w in plan(cat, "glide-ffi", mode=Mode.ACCELERATED).warnings if "golang/go#70329" in w]
    assert warned and "--mode cross avoids it" in warned[0]
    assert not [w for w in plan(cat, "glide-ffi").warnings if "70329" in w]  # auto: cross
    assert not [w for w in plan(cat, "msgspec", mode=Mode.QEMU).warnings if "70329" in w]


def test_the_wheel_kinds_are_defined_once_from_the_kinds_table():
    """kinds.WHEEL_KINDS is the one definition, read from the kinds table (`per_python`); the loader, the
    planner and the CLI import it."""
    import ast
    from pathlib import Path

    import rvport
    from rvport.catalogue import kinds, recipe_file
    from rvport.catalogue.kinds import KINDS
    from rvport.plan import planner

    root = Path(rvport.__file__).parent
    defined = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id == "WHEEL_KINDS"
    )
    assert defined == ["catalogue/kinds.py"]
    assert planner.WHEEL_KINDS is kinds.WHEEL_KINDS is recipe_file.WHEEL_KINDS
    assert {k for k, f in KINDS.items() if f.installs_wheels} == kinds.WHEEL_KINDS
    assert (
        {k for k, f in KINDS.items() if f.per_python}
        == kinds.WHEEL_KINDS
        == {Kind.PYTHON_WHEEL, Kind.TORCH_WHEEL}
    )
