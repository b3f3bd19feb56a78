"""A recipe decides its wheel repair: `manylinux: {repair: false, reason: ...}` keeps its wheels as built
whatever --manylinux says, says so in the plan's notes, and shows the choice with its reason in plan.json and
result.json (stages[].wheel_repair)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvport import manifest, resources
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.engine.stage import StageRecord
from rvport.errors import ExitCode, RecipeError
from rvport.host import HostFacts
from rvport.plan.planner import REPAIR_NOTE, Mode, Request, make_plan
from tests.fixtures.schemas import validate

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)

RECIPE = """\
schema: 1
name: {name}
kind: {kind}
build: [echo build]
outputs: [{{glob: "*.whl", type: wheel}}]
{extra}versions:
  - version: "1.0"
    sources:
      - name: sdist
        pypi: {{project: {name}, version: "1.0"}}
        sha256: {digest}
"""

NO_REPAIR = """\
manylinux:
  repair: false
  reason: it links the system's libfoo, which a repair would graft into it
"""


def write(root: Path, name: str, extra: str = "", kind: str = "python-wheel") -> Path:
    p = root / f"{name}.yaml"
    p.write_text(RECIPE.format(name=name, kind=kind, extra=extra, digest="a" * 64))
    return p


def plan(cat, *refs: str, manylinux: str = "auto", profile: str = "rvv256"):
    req = Request(refs=refs, profile=get_profile(profile), mode=Mode.QEMU, manylinux=manylinux)
    return make_plan(cat, req, X86)


def load_problems(root: Path) -> list:
    with pytest.raises(RecipeError) as ei:
        load_catalogue(root)
    assert ei.value.exit_code == ExitCode.RECIPE_INVALID
    return ei.value.problems


def test_a_recipe_that_opts_out_is_never_repaired_and_the_plan_says_why(tmp_path):
    write(tmp_path, "sys", NO_REPAIR)
    write(tmp_path, "plain")
    cat = load_catalogue(tmp_path)
    assert cat.default("sys").no_repair == "it links the system's libfoo, which a repair would graft into it"
    for asked in ("auto", "2_31", "off"):
        p = plan(cat, "sys", "plain", manylinux=asked)
        sys_, plain = p.stage("sys"), p.stage("plain")
        # no auditwheel: no tool, no repair command, no RVPORT_MANYLINUX
        assert sys_.tools == () and "RVPORT_MANYLINUX" not in sys_.env
        assert not any("/rvport/tools/" in c for c in sys_.commands)
        assert sys_.wheel_repair == {
            "repair": False,
            "platform": None,
            "by": "recipe",
            "reason": "it links the system's libfoo, which a repair would graft into it",
        }
        notes = [w for w in p.warnings if w.startswith("sys==1.0: --manylinux")]
        if asked == "off":  # the request and the recipe agree: nothing to say
            assert notes == []
        else:
            (note,) = notes
            assert f"--manylinux {asked} has no effect" in note and "repair: false in sys.yaml" in note
            assert "libfoo" in note
            assert REPAIR_NOTE in note  # what `rvport build` says at the terminal too (cli/app.py)
        # the other recipe still follows --manylinux
        assert plain.wheel_repair["by"] == "--manylinux"
        assert plain.wheel_repair["repair"] is (asked != "off")
        assert bool(plain.tools) is (asked != "off")
        doc = p.to_json()
        validate(doc, manifest.schema("plan"))
        stages = {s["recipe"]: s for s in doc["stages"]}
        assert stages["sys"]["wheel_repair"]["repair"] is False
        assert stages["plain"]["wheel_repair"]["platform"] == (
            {"auto": "auto", "2_31": "manylinux_2_31_riscv64"}.get(asked)
        )


def test_result_json_shows_the_choice_and_kinds_without_wheels_show_none(tmp_path):
    write(tmp_path, "sys", NO_REPAIR)
    cat = load_catalogue(tmp_path)
    rec = StageRecord(stage=plan(cat, "sys").stage("sys"), status="ok").to_json()
    assert rec["wheel_repair"]["by"] == "recipe" and rec["wheel_repair"]["repair"] is False
    stage_schema = json.loads(resources.schema_text("result"))["properties"]["stages"]["items"]
    validate(json.loads(json.dumps(rec)), stage_schema)
    # a kind that makes no wheels has no wheel_repair at all (plan.json and result.json as they were)
    glide = plan(load_catalogue(), "glide-ffi").stage("glide-ffi")
    assert glide.wheel_repair is None and "wheel_repair" not in glide.to_json()
    assert "wheel_repair" not in StageRecord(stage=glide).to_json()


def test_the_stage_key_follows_the_repair(tmp_path):
    """Repaired and unrepaired wheels are different artifacts: the stage keys differ."""
    write(tmp_path, "sys", NO_REPAIR)
    (tmp_path / "other").mkdir()
    write(tmp_path / "other", "sys")
    with_opt_out = plan(load_catalogue(tmp_path), "sys").stage("sys")
    without = plan(load_catalogue(tmp_path / "other"), "sys").stage("sys")
    assert with_opt_out.key != without.key
    # with --manylinux off both build the same thing the same way
    assert (
        plan(load_catalogue(tmp_path), "sys", manylinux="off").stage("sys").commands
        == plan(load_catalogue(tmp_path / "other"), "sys", manylinux="off").stage("sys").commands
    )


@pytest.mark.parametrize(
    "extra, says",
    [
        ("manylinux:\n  repair: false\n", "reason"),
        ("manylinux:\n  repair: false\n  reason: ''\n", "reason"),
        ("manylinux:\n  repair: false\n  reason: '   '\n", "reason"),
        ("manylinux:\n  repair: true\n  reason: why not\n", "repair"),
        ("manylinux:\n  repair: false\n  reason: x\n  policy: 2_31\n", "policy"),
    ],
)
def test_the_opt_out_needs_repair_false_and_a_reason(tmp_path, extra, says):
    write(tmp_path, "sys", extra)
    ps = load_problems(tmp_path)
    assert ps and all(p.file.endswith("sys.yaml") for p in ps)
    assert any(says in (p.message + " " + (p.hint or "")) for p in ps), [p.message for p in ps]


def test_a_kind_without_wheels_may_not_opt_out(tmp_path):
    p = tmp_path / "lib.yaml"
    p.write_text(
        RECIPE.format(name="lib", kind="cargo-staticlib", extra=NO_REPAIR, digest="a" * 64).replace(
            '{glob: "*.whl", type: wheel}', '{glob: "*.a", type: staticlib}'
        )
    )
    (prob,) = load_problems(tmp_path)
    assert "cargo-staticlib recipe makes no wheels to repair" in prob.message and prob.line == 6
    assert "remove `manylinux:`" in prob.hint


def test_vllm_keeps_its_wheel_linked_to_debians_torch():
    cat = load_catalogue()
    r = cat.resolve("vllm")
    assert r.no_repair and "torch" in r.no_repair
    st = plan(cat, "vllm", profile="rv64gc").stage("vllm")
    assert st.tools == () and st.wheel_repair["repair"] is False


EXCLUDE = """\
manylinux:
  exclude: [libtvm_ffi.so]
  reason: the apache-tvm-ffi wheel it requires ships libtvm_ffi.so
"""


def test_a_recipe_may_leave_out_of_the_repair_a_library_that_a_wheel_it_requires_ships(tmp_path):
    write(tmp_path, "xg", EXCLUDE)
    cat = load_catalogue(tmp_path)
    r = cat.resolve("xg")
    assert r.repair_exclude == ("libtvm_ffi.so",) and r.no_repair is None
    st = plan(cat, "xg").stage("xg")
    assert st.commands[-1] == "sh /rvport/tools/wheel-repair.sh auto --exclude libtvm_ffi.so"
    assert st.wheel_repair == {
        "repair": True,
        "platform": "auto",
        "by": "recipe",
        "reason": "--manylinux auto, leaving out what the recipe excludes: the apache-tvm-ffi wheel it "
        "requires ships libtvm_ffi.so",
        "exclude": ["libtvm_ffi.so"],
    }
    doc = plan(cat, "xg").to_json()
    validate(doc, manifest.schema("plan"))
    assert not any("xg" in w and REPAIR_NOTE in w for w in doc.get("warnings", []))
    # a policy asked for is kept, and off is off
    assert (
        plan(cat, "xg", manylinux="2_39")
        .stage("xg")
        .commands[-1]
        .endswith("manylinux_2_39_riscv64 --exclude libtvm_ffi.so")
    )
    assert plan(cat, "xg", manylinux="off").stage("xg").wheel_repair["repair"] is False
    # what it leaves out is part of the stage key
    write(tmp_path, "xg", EXCLUDE.replace("[libtvm_ffi.so]", "[libtvm_ffi.so, libother.so.1]"))
    assert plan(load_catalogue(tmp_path), "xg").stage("xg").key != st.key


@pytest.mark.parametrize(
    "extra",
    [
        "manylinux:\n  reason: neither repair nor exclude\n",
        "manylinux:\n  repair: false\n  exclude: [libtvm_ffi.so]\n  reason: both\n",
        "manylinux:\n  exclude: [libtvm_ffi.so]\n",
        "manylinux:\n  exclude: []\n  reason: nothing\n",
        "manylinux:\n  exclude: ['../libx.so']\n  reason: a path\n",
        "manylinux:\n  exclude: ['libx.so; rm -rf /']\n  reason: a command\n",
        "manylinux:\n  exclude: [libtvm_ffi.a]\n  reason: not a shared library\n",
    ],
)
def test_an_exclusion_is_a_list_of_library_names_with_a_reason(tmp_path, extra):
    write(tmp_path, "xg", extra)
    ps = load_problems(tmp_path)
    assert ps and all(p.file.endswith("xg.yaml") and p.line for p in ps), [p.message for p in ps]
    assert any("manylinux" in p.message for p in ps), [p.message for p in ps]


def test_the_repair_script_hands_the_exclusions_to_auditwheel_and_refuses_anything_else(tmp_path):
    import subprocess

    script = resources.builtin("scripts") / "wheel-repair.sh"
    out = tmp_path / "out"
    out.mkdir()
    env = {"PATH": "/usr/bin:/bin", "RVPORT_OUT": str(out)}
    for bad in (["--exclude", "libx.so;"], ["--exclude", "x.so"], ["--plat", "x"], ["--exclude", "lib*.so"]):
        cp = subprocess.run(
            ["sh", "-eu", str(script), "auto", *bad], capture_output=True, text=True, env=env, timeout=60
        )
        assert cp.returncode == 3 and "takes --exclude LIB" in cp.stderr, (bad, cp.stderr)
    text = script.read_text()
    assert '--plat "$plat" $excludes -w' in text
