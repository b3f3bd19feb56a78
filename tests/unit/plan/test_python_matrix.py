"""--python: a stage per recipe and Python, each on the riscv64 base that gives it (the bases' `python:`), and
the refusals (a Python no base gives, one given twice, a recipe pinned to another Python). No Docker."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rvport import resources
from rvport.catalogue.bases import load_bases, python_bases, recipe_base_problems
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.errors import RecipeError, UsageError
from rvport.host import HostFacts
from rvport.plan.planner import Mode, Request, make_plan, python_matrix, recipe_pythons
from tests.fixtures.schemas import validate

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)


@pytest.fixture(scope="module")
def cat():
    return load_catalogue()


@pytest.fixture(scope="module")
def bases():
    return load_bases()


def plan(cat, bases, *refs, pythons=(), all_=False, mode=Mode.AUTO):
    req = Request(refs=refs, all=all_, profile=get_profile("rvv256"), mode=mode, pythons=tuple(pythons))
    return make_plan(cat, req, X86, bases=bases)


def test_the_shipped_riscv64_base_says_its_python():
    by = python_bases(load_bases())
    assert by["3.13"].name == "debian-trixie" and by["3.14"].name == "debian-sid"
    assert all(b.arch == "target" for b in by.values())


def test_a_stage_per_recipe_and_python(cat, bases):
    p = plan(cat, bases, "msgspec", pythons=("3.13", "3.14"))
    assert [s.name for s in p.stages] == ["msgspec-cp313", "msgspec-cp314"]
    a, b = p.stages
    assert (a.recipe.toolchain.base, b.recipe.toolchain.base) == ("debian-trixie", "debian-sid")
    assert a.key != b.key
    doc = p.to_json()
    assert doc["pythons"] == ["3.13", "3.14"]
    assert doc["order"] == ["msgspec-cp313", "msgspec-cp314"]
    s = doc["stages"][1]
    assert s["id"] == "msgspec-cp314" and s["recipe"] == "msgspec"
    assert s["python"] == {
        "version": "3.14",
        "base": "debian-sid",
        "interpreter": "python3.14",
        "abi": "cp314",
    }
    assert s["toolchain"]["base"] == "debian-sid"
    validate(json.loads(json.dumps(doc)), json.loads(resources.schema_text("plan")))


def test_one_python_given_names_the_stage_by_it(cat, bases):
    p = plan(cat, bases, "msgspec", pythons=("3.14",))
    assert [s.name for s in p.stages] == ["msgspec-cp314"]


def test_without_python_the_plan_is_as_before(cat, bases):
    p = plan(cat, bases, "msgspec")
    doc = p.to_json()
    assert "pythons" not in doc and "python" not in doc["stages"][0] and "id" not in doc["stages"][0]
    assert [s.name for s in p.stages] == ["msgspec"]
    # the key of the default plan's stage is not the key of either Python's stage
    keys = {s.key for s in plan(cat, bases, "msgspec", pythons=("3.13", "3.14")).stages}
    assert p.stages[0].key not in keys


def test_kinds_without_a_python_are_planned_once_on_their_own_base(cat, bases):
    p = plan(cat, bases, all_=True, pythons=("3.13", "3.14"))
    by_recipe: dict[str, list] = {}
    for s in p.stages:
        by_recipe.setdefault(s.recipe.name, []).append(s)
    for name, stages in by_recipe.items():
        own = cat.resolve(name).toolchain
        if own.pins and not own.python and any(o.pins is not None for o in own.on_base):
            # outlines-core: sid's maturin pinned, and trixie's in its on_base entry
            assert [s.python.abi for s in stages] == ["cp313", "cp314"], name
        elif own.pins:  # vllm: Debian sid's torch, so sid's Python alone
            assert [s.python.abi for s in stages] == ["cp314"], name
        elif stages[0].recipe.kind.value in ("python-wheel", "torch-wheel"):
            assert [s.python.abi for s in stages] == ["cp313", "cp314"], name
        else:
            assert len(stages) == 1 and stages[0].python is None and stages[0].name == name
    # every dependency is a stage planned earlier, of the same Python where it has one
    seen: set[str] = set()
    for s in p.stages:
        assert set(s.depends) <= seen, s.name
        for d in s.depends:
            dep = p.stage(d)
            assert dep.python is None or dep.python == s.python
        seen.add(s.name)


def test_an_unknown_python_is_refused_naming_what_exists(cat, bases):
    with pytest.raises(UsageError) as e:
        plan(cat, bases, "msgspec", pythons=("3.12",))
    assert "3.12" in e.value.message
    assert "3.13 (debian-trixie)" in e.value.hint and "3.14 (debian-sid)" in e.value.hint
    assert e.value.exit_code == 2


@pytest.mark.parametrize("bad", ["3", "cp314", "3.14.1", "python3.14", "", "2.7", "3.014"])
def test_a_python_that_is_not_a_version_is_refused(cat, bases, bad):
    with pytest.raises(UsageError, match="not a CPython version"):
        plan(cat, bases, "msgspec", pythons=(bad,))


def test_a_python_given_twice_is_refused(cat, bases):
    with pytest.raises(UsageError, match="3.13 given twice"):
        plan(cat, bases, "msgspec", pythons=("3.13", "3.14", "3.13"))


def test_a_recipe_pinned_to_another_python_is_refused(cat, bases):
    r = cat.default("msgspec")
    pinned = dataclasses.replace(r, toolchain=dataclasses.replace(r.toolchain, python="3.14"))
    m = python_matrix(("3.13", "3.14"), bases)
    # planned for its own Python alone
    assert [t.abi for t in recipe_pythons(pinned, m)] == ["cp314"]
    with pytest.raises(UsageError, match=r"msgspec.* builds for Python 3.14 alone") as e:
        recipe_pythons(pinned, python_matrix(("3.13",), bases))
    assert "add 3.14 to --python" in e.value.hint


def test_a_recipe_pin_must_be_its_bases_python():
    assert recipe_base_problems("debian-trixie", "r.yaml", 4, python="3.13") == []
    (p,) = recipe_base_problems("debian-trixie", "r.yaml", 4, python="3.14")
    assert p.line == 4 and "not the Python of base 'debian-trixie' (3.13)" in p.message


def test_two_riscv64_bases_of_one_python_are_refused(bases, tmp_path):
    twin = dataclasses.replace(bases["debian-sid"], name="twin")
    with pytest.raises(RecipeError, match="two riscv64 bases give Python 3.14"):
        python_bases({**bases, "twin": twin})


def test_a_runtime_image_per_python(cat, bases):
    p = plan(cat, bases, "msgspec", pythons=("3.13", "3.14"))
    assert all(s.runtime is None for s in p.stages)  # msgspec has none: the tag rule is in runtime_image
    from rvport.plan.planner import PythonTarget, runtime_image

    r = next(r for n in cat.selected_by_all if (r := cat.default(n)).runtime is not None)
    img = runtime_image(r, "local", "0" * 64, PythonTarget(version="3.14", base="debian-sid"))
    assert img is not None and img.tag == f"rvport/{r.name}:local-cp314"


def test_a_bases_python_line_is_not_part_of_its_image_key():
    from rvport.catalogue.bases import spec_digest

    text = b"schema: 1\nname: b\nsuite: sid\npackages: [python3]\n"
    said = text.replace(b"suite: sid\n", b'suite: sid\npython: "3.14"  # its python3\n')
    assert spec_digest(said) == spec_digest(text)
    assert spec_digest(text.replace(b"python3]", b"python3, gcc]")) != spec_digest(text)


def test_modes_whose_build_platform_bases_are_another_suite_are_not_used(cat, bases):
    """The accelerated prefix has a build-platform base per suite (trixie's GCC 14, sid's GCC 16): a sid
    stage runs accelerated too. Without sid's base, a sid stage (GCC 16) builds emulated; asked for,
    accelerated is refused for 3.14 alone."""
    p = plan(cat, bases, "msgspec", pythons=("3.13", "3.14"))
    assert [s.mode for s in p.stages] == [Mode.ACCELERATED, Mode.ACCELERATED]
    trixie_only = {k: v for k, v in bases.items() if not k.startswith("debian-sid-xtc")}
    p = plan(cat, trixie_only, "msgspec", pythons=("3.13", "3.14"))
    assert [s.mode for s in p.stages] == [Mode.ACCELERATED, Mode.QEMU]
    with pytest.raises(UsageError, match="--mode accelerated cannot build msgspec.* for Python 3.14") as e:
        plan(cat, trixie_only, "msgspec", pythons=("3.13", "3.14"), mode=Mode.ACCELERATED)
    assert "native, qemu" in e.value.hint
    assert (
        plan(cat, bases, "msgspec", pythons=("3.13",), mode=Mode.ACCELERATED).stages[0].mode
        == Mode.ACCELERATED
    )


def test_the_command_line_takes_a_comma_list_or_repeats(tmp_path):
    import os

    from rvport.cli.settings import _python_list
    from tests.fixtures.cli import rvport_process

    assert _python_list(("3.13,3.14",), {}) == _python_list(("3.13", " 3.14"), {}) == ("3.13", "3.14")
    assert _python_list(None, {}) == ()
    with pytest.raises(UsageError, match="empty item"):
        _python_list(("3.13,",), {})

    def run(*args):
        return rvport_process(("plan", "msgspec", "--offline", *args), timeout=120, env=dict(os.environ))

    r = run("--python", "3.13,3.14", "-o", str(tmp_path / "p"))
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "p" / "plan.json").read_text())
    assert doc["order"] == ["msgspec-cp313", "msgspec-cp314"]
    for bad, words in ((["3.12"], "no riscv64 base gives Python 3.12"), (["3.13", "3.13"], "given twice")):
        r = run(*[a for v in bad for a in ("--python", v)], "-o", str(tmp_path / "q"))
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert not (tmp_path / "q" / "plan.json").exists()


def test_result_record_summary_and_junit_show_the_matrix(cat, bases):
    import xml.etree.ElementTree as ET

    from rvport.cli import ci
    from rvport.engine.stage import StageRecord

    p = plan(cat, bases, "msgspec", pythons=("3.13", "3.14"))
    recs = [StageRecord(stage=s, status="ok").to_json() for s in p.stages]
    assert [(r["id"], r["recipe"], r["python"]["abi"]) for r in recs] == [
        ("msgspec-cp313", "msgspec", "cp313"),
        ("msgspec-cp314", "msgspec", "cp314"),
    ]
    schema = json.loads(resources.schema_text("result"))
    stage_schema = schema["properties"]["stages"]["items"]
    for r in recs:
        validate(json.loads(json.dumps(r)), stage_schema)
    # without --python the record is as it was: no id, no python
    (plain,) = [StageRecord(stage=s).to_json() for s in plan(cat, bases, "msgspec").stages]
    assert "id" not in plain and "python" not in plain and plain["recipe"] == "msgspec"

    doc = {"status": "ok", "profile": {"name": "rvv256"}, "pythons": ["3.13", "3.14"], "stages": recs}
    md = ci.summary_markdown(doc)
    assert "Python 3.13, 3.14" in md
    assert "| msgspec-cp313 |" in md and "| msgspec-cp314 |" in md
    cases = ET.fromstring(ci.junit_xml(doc)).iter("testcase")
    got = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")}["abi"] for c in cases}
    assert got == {"msgspec-cp313==0.23.0": "cp313", "msgspec-cp314==0.23.0": "cp314"}


def test_a_recipe_with_debian_pins_is_its_bases_python(cat, bases):
    """vllm pins Debian sid's torch (toolchain: pins:): it builds for sid's Python alone."""
    p = plan(cat, bases, "vllm", pythons=("3.13", "3.14"))
    (st,) = [s for s in p.stages if s.recipe.name == "vllm"]
    assert st.name == "vllm-cp314" and st.recipe.toolchain.base == "debian-sid"
    with pytest.raises(
        UsageError, match=r"vllm.* builds for Python 3.14 alone \(toolchain: pins: of debian-sid"
    ):
        plan(cat, bases, "vllm", pythons=("3.13",))


def test_base_image_with_two_pythons_is_refused(tmp_path):
    import os

    from tests.fixtures.cli import rvport_process

    image = "example/base@sha256:" + "1" * 64
    args = ("plan", "msgspec", "--offline", "--base-image", image, "-o", str(tmp_path / "p"))
    r = rvport_process((*args, "--python", "3.13,3.14"), timeout=120, env=dict(os.environ))
    assert r.returncode == 2 and "--base-image stands for one riscv64 base" in r.stderr, r.stderr
    r = rvport_process((*args, "--python", "3.14"), timeout=120, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
