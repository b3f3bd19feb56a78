"""The serving check's `tests` step without Docker: `serve_tests:` as data (no smoke test needed, no part of a
build's plan), the step made ready on the host (the tree from --source-tree, every listed file in it or exit 3
before any container, the test wheels fetched and checked, the ones the environment has left alone, the
mounts read-only), the in-container logic of resources/scripts/serve-check.py run for real with this
interpreter's pytest (the copy, each file's run under its timeout, the exports), the records read back with
bounds, and the failure (exit 10) naming the failing ids."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import importlib.util
import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rvport import manifest, resources
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.cli import ci
from rvport.closure import servecheck, servetests
from rvport.closure import wheelhouse as wh
from rvport.engine import tests as upstream
from rvport.errors import ExitCode, RecipeError, UsageError
from rvport.host import HostFacts
from rvport.plan.planner import Request, make_plan, serve_tests, upstream_tests
from rvport.sources import fetch_options
from tests.fixtures.schemas import validate
from tests.unit.closure.test_servecheck import ALL_PASS, fake_inside, make_house

SCRIPT = resources.builtin("scripts", "serve-check.py")
_spec = importlib.util.spec_from_file_location("serve_check_inside_tests", SCRIPT)
inside = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(inside)

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
WHEEL = "tinytest-1.0-py3-none-any.whl"
WHEEL_BYTES = b"not really a wheel"

TESTS_YAML = f"""\
serve_tests:
  files:
    - {{path: tests/test_a.py}}
    - {{path: tests/test_v.py, select: rvv, profiles: [rvv256], timeout: 5}}
  timeout: 100
  wheels:
    - {{file: {WHEEL}, sha256: {hashlib.sha256(WHEEL_BYTES).hexdigest()}}}
    - {{file: pygments-2.21.0-py3-none-any.whl, sha256: {"c" * 64}}}
"""


def recipes(tmp_path: Path, tests_yaml: str = TESTS_YAML, name: str = "vllm") -> Path:
    """A user's recipe of `name` 0.33.0 (over the built-in vllm) with no smoke test and `tests_yaml`."""
    d = tmp_path / "recipes"
    d.mkdir(parents=True)
    (d / f"{name}.yaml").write_text(
        f"schema: 1\nname: {name}\nkind: python-wheel\nbuild: [make]\n"
        "outputs: [{glob: '*.whl', type: wheel}]\n"
        + tests_yaml
        + "versions:\n  - version: '0.33.0'\n    sources:\n"
        "      - {name: sdist, url: 'https://example.org/vllm-0.33.0.tar.gz', sha256: " + "a" * 64 + "}\n"
    )
    return d


def tree(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    """A local tree of project vllm with its tests."""
    t = tmp_path / "tree"
    (t / "tests").mkdir(parents=True)
    (t / "pyproject.toml").write_text('[project]\nname = "vllm"\nversion = "0.33.0"\n')
    for rel, text in (files or {"tests/test_a.py": "def test_ok():\n    pass\n"}).items():
        (t / rel).parent.mkdir(parents=True, exist_ok=True)
        (t / rel).write_text(text)
    return t


def mirror(tmp_path: Path) -> Path:
    m = tmp_path / "mirror"
    m.mkdir()
    (m / WHEEL).write_bytes(WHEEL_BYTES)
    return m


def fetch(tmp_path: Path):
    return fetch_options(cache_dir=tmp_path / "cache", mirror=mirror(tmp_path), offline=True)


# ---------------------------------------------------------------------------------------------- the data
def test_serve_tests_need_no_smoke_test_and_are_not_the_builds(tmp_path):
    r = load_catalogue([recipes(tmp_path)]).resolve("vllm==0.33.0")
    assert r.tests is None and upstream_tests(r, get_profile("rvv256")) is None
    assert serve_tests(r, get_profile("rv64gc")) == {
        "files": [{"path": "tests/test_a.py", "select": None, "timeout": 100}],
        "copy": ["tests"],
        "wheels": [w.to_json() for w in r.serve_tests.wheels],
    }
    assert serve_tests(r, get_profile("rvv256"))["files"][1] == {
        "path": "tests/test_v.py",
        "select": "rvv",
        "timeout": 5,
    }
    plan = make_plan(
        load_catalogue([recipes(tmp_path / "p")]), Request(refs=("vllm",), profile=get_profile("rvv256")), X86
    )
    assert "tests" not in plan.to_json()["stages"][0]  # a build neither runs them nor keys on them


def test_bad_serve_tests_are_named_as_such(tmp_path):
    bad = "serve_tests:\n  files: [{path: tests/a.py, profiles: [rvv999]}]\n"
    with pytest.raises(RecipeError) as e:
        load_catalogue([recipes(tmp_path, bad)])
    said = str(e.value) + "".join(p.message for p in e.value.problems)
    assert "serve_tests: file tests/a.py: unknown profile(s) rvv999" in said


# ------------------------------------------------------------------------------------- ready on the host
def test_the_step_is_made_ready_from_a_source_tree_with_the_test_wheels_checked(tmp_path):
    r = load_catalogue([recipes(tmp_path)]).resolve("vllm==0.33.0")
    have = servetests.environment_names(
        [{"name": "Pygments"}], [{"name": "torch", "package": "python3-torch"}]
    )
    ready = servetests.prepare(
        r, get_profile("rv64gc"), fetch(tmp_path), have=have, source_tree=tree(tmp_path)
    )
    assert ready.present == ("pygments-2.21.0-py3-none-any.whl",)  # the wheelhouse's: left as it has it
    assert list(ready.wheels) == [WHEEL] and ready.wheels[WHEEL].read_bytes() == WHEEL_BYTES
    assert (ready.tree / "tests" / "test_a.py").is_file() and "the local tree" in ready.where
    assert ready.notes and "not its pinned" in " ".join(ready.notes)
    assert ready.seconds() == 100
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    servetests.write_plan(ready, scratch)
    args = servetests.mounts(ready, scratch)
    binds = [args[i + 1] for i, a in enumerate(args) if a == "-v"]
    assert all(b.endswith(":ro") for b in binds)
    assert f"{ready.tree / 'tests'}:/rvport/tree/tests:ro" in binds
    assert f"{ready.wheels[WHEEL]}:/rvport/test-wheels/{WHEEL}:ro" in binds
    plan = json.loads((scratch / "tests.json").read_text())
    assert plan["wheels"] == [f"/rvport/test-wheels/{WHEEL}"]
    (run,) = upstream.runs(ready.planned)
    assert plan["runs"] == [
        {
            "paths": run["paths"],
            "timeout": run["timeout"],
            "args": upstream.pytest_args(run, "/tmp/rvport-tree"),
        }
    ]
    assert (scratch / "rvport_pytest_record.py").read_text() == resources.script("pytest-record.py")
    cmd = servecheck.container_command(opts(tmp_path), tests=True)
    assert cmd[cmd.index("--tests") + 1] == "/rvport/tests.json"


def opts(tmp_path: Path, **kw) -> servecheck.Options:
    return servecheck.Options(
        recipe="vllm",
        version=None,
        wheelhouse=tmp_path / "wh",
        output=tmp_path / "out",
        profile=None,
        fetch=kw.pop("fetch", None) or fetch_options(cache_dir=tmp_path / "cache", offline=True),
        **kw,
    )


def test_a_listed_file_missing_from_the_tree_is_exit_3_before_any_container(tmp_path, monkeypatch):
    make_house(tmp_path / "wh")
    o = opts(tmp_path, recipes_dir=(recipes(tmp_path),), source_tree=tree(tmp_path, {"tests/x.py": ""}))
    monkeypatch.setattr(servecheck, "check_engine", lambda: pytest.fail("the engine was asked"))
    with pytest.raises(RecipeError) as e:
        servecheck.run(o)
    assert e.value.exit_code == ExitCode.RECIPE_INVALID == 3
    assert "tests/test_a.py" in e.value.render() and "the local tree" in e.value.render()


def test_the_tree_and_skip_tests_are_checked_together(tmp_path):
    make_house(tmp_path / "wh")
    with pytest.raises(UsageError, match="--skip-tests leaves the step out"):
        servecheck.check_inputs(opts(tmp_path, skip_tests=True, source_tree=tmp_path))
    only_vector = TESTS_YAML.replace("- {path: tests/test_a.py}\n", "")
    o = opts(tmp_path, recipes_dir=(recipes(tmp_path, only_vector),), source_tree=tree(tmp_path))
    with pytest.raises(UsageError, match="has no serve_tests: for profile rv64gc"):
        servecheck.check_inputs(o)
    o = dataclasses.replace(o, source_tree=None)
    assert servecheck.check_inputs(o).tests is None  # nothing for rv64gc: the step is skipped


def test_the_test_wheels_the_environment_has_are_not_installed():
    have = servetests.environment_names([{"name": "Pygments"}], [{"name": "packaging"}])
    install, present = servetests.split_wheels(
        [{"file": "pygments-2.21.0-py3-none-any.whl", "sha256": "a"},
         {"file": "pytest-9.2.0-py3-none-any.whl", "sha256": "b"},
         {"file": "packaging-26.4-py3-none-any.whl", "sha256": "c"}], have)  # fmt: skip
    assert [w["file"] for w in install] == ["pytest-9.2.0-py3-none-any.whl"]
    assert present == ["pygments-2.21.0-py3-none-any.whl", "packaging-26.4-py3-none-any.whl"]


# ----------------------------------------------------------------------------------- in the container
A = """\
def test_ok():
    pass

def test_bad():
    assert 1 == 2
"""
SLOW = "import time\n\ndef test_slow():\n    time.sleep(30)\n"
C = "def test_one():\n    pass\n\ndef test_two():\n    pass\n"
PLANNED = {
    "files": [
        {"path": "tests/test_a.py", "select": None, "timeout": 60},
        {"path": "tests/test_a.py", "select": "nothing_matches", "timeout": 60},
        {"path": "tests/test_slow.py", "select": None, "timeout": 3},
    ],
    "copy": ["tests"],
    "wheels": [],
}


def run_inside(tmp_path: Path, monkeypatch, planned: dict = PLANNED) -> tuple[Path, servetests.Ready, dict]:
    """The tests step as the script runs it, with this interpreter for the venv's and the plugin from
    resources: the tree copied, each pytest run (PLANNED names test_a.py twice: one run per file), the exports
    written to OUT/tests."""
    src = tree(tmp_path, {"tests/test_a.py": A, "tests/test_slow.py": SLOW, "tests/test_c.py": C})
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "rvport_pytest_record.py").write_text(resources.script("pytest-record.py"))
    monkeypatch.setattr(inside, "TESTS_TREE_RO", str(src))
    monkeypatch.setattr(inside, "TESTS_TREE", str(tmp_path / "copy"))
    monkeypatch.setattr(inside, "TESTS_PLUGIN", str(plugin))
    ready = servetests.Ready(ref="vllm==0.33.0", planned=planned, tree=src, where="t", source=())
    plan = servetests.plan_doc(ready)
    for r, got in zip(upstream.runs(planned), plan["runs"], strict=True):
        got["args"] = upstream.pytest_args(r, str(tmp_path / "copy"))
    prepare, runs = inside.tests_programs(plan, sys.executable, None)
    assert prepare == [["cp", "-R", str(src), str(tmp_path / "copy")]]  # no test wheel: no install
    out = tmp_path / "out" / "logs"
    out.mkdir(parents=True)
    rec = inside.run_tests(out, prepare, runs, 60.0, dict(os.environ), poll=0.2)
    assert rec["log"] == "tests.log"
    if planned is PLANNED:
        assert rec["status"] == "failed" and rec["timed_out"] is True
    return out, ready, rec


def test_the_files_share_one_run_where_their_names_scope_it(tmp_path, monkeypatch):
    planned = {
        **PLANNED,
        "files": [
            {"path": "tests/test_a.py", "select": "test_ok", "timeout": 60},
            {"path": "tests/test_c.py", "select": None, "timeout": 60},
        ],
    }
    logs, ready, rec = run_inside(tmp_path, monkeypatch, planned)
    assert rec["status"] == "passed" and sorted(p.name for p in (logs / "tests").iterdir()) == [
        "0.jsonl",
        "0.seconds",
        "0.status",
    ]
    got = servetests.read(ready, logs)
    assert got["status"] == "passed" and [f["counts"]["passed"] for f in got["files"]] == [1, 2]
    assert [c["id"] for c in got["cases"]] == [
        "tests/test_a.py::test_ok",
        "tests/test_c.py::test_one",
        "tests/test_c.py::test_two",
    ]
    assert got["runs"][0]["paths"] == ["tests/test_a.py", "tests/test_c.py"] and got["runs"][0]["seconds"]


def test_each_file_runs_under_its_timeout_and_its_records_are_read_back(tmp_path, monkeypatch):
    logs, ready, _ = run_inside(tmp_path, monkeypatch)
    assert not (Path(inside.TESTS_TREE_RO) / ".pytest_cache").exists()  # pytest wrote in the copy only
    assert [(logs / "tests" / f"{i}.status").read_text().strip() for i in range(3)] == ["1", "5", "124"]
    rec = servetests.read(ready, logs)
    assert [f["status"] for f in rec["files"]] == ["failed", "no tests collected", "timed out"]
    assert rec["counts"] == {"passed": 1, "failed": 1, "skipped": 0, "error": 0} and rec["status"] == "failed"
    assert {c["id"]: c["outcome"] for c in rec["cases"]} == {
        "tests/test_a.py::test_ok": "passed",
        "tests/test_a.py::test_bad": "failed",
    }
    assert rec["files"][0]["seconds"] is not None and rec["output"]
    lines = servetests.failure_lines(rec)
    assert lines[0] == "1 passed, 1 failed, 0 errors, 0 skipped"
    assert "FAILED tests/test_a.py::test_bad" in lines
    assert any("nothing_matches" in ln and "collected no test" in ln for ln in lines)
    assert any("tests/test_slow.py" in ln and "did not finish in its 3 s" in ln for ln in lines)


def test_a_failed_copy_or_install_is_said_and_no_file_runs(tmp_path):
    out = tmp_path / "logs"
    out.mkdir()
    runs = [{"argv": [sys.executable, "-c", "raise SystemExit(0)"], "timeout": 5.0, "path": "tests/a.py"}]
    rec = inside.run_tests(out, [["false"]], runs, 5.0, None, poll=0.1)
    assert rec["status"] == "failed" and (out / "tests" / "install.status").read_text() == "3\n"
    assert not (out / "tests" / "0.status").exists()
    ready = servetests.Ready(ref="r", planned=PLANNED, tree=tmp_path, where="t", source=())
    assert servetests.read(ready, out)["reason"] == "copying the source tree's test paths failed"
    rec = inside.run_tests(out, [["true"], ["false"]], runs, 5.0, None, poll=0.1)
    assert servetests.read(ready, out)["reason"] == "installing the test wheels failed"


def test_the_records_are_read_with_bounds_and_a_hostile_export_fails_the_step(tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    (logs / "tests").mkdir(parents=True)
    planned = {
        "files": [{"path": "tests/a.py", "select": None, "timeout": 9}],
        "copy": ["tests"],
        "wheels": [],
    }
    ready = servetests.Ready(ref="r", planned=planned, tree=tmp_path, where="t", source=())
    (logs / "tests" / "0.status").write_text("1\n")
    lines = [
        json.dumps({"id": f"tests/a.py::t{i}", "outcome": "failed", "message": "x" * 5000}) for i in range(30)
    ]
    (logs / "tests" / "0.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(upstream, "MAX_CASES", 25)
    rec = servetests.read(ready, logs)
    assert len(rec["cases"]) == 25 and len(rec["cases"][0]["message"]) == upstream.MESSAGE_LIMIT
    told = servetests.failure_lines(rec)
    assert sum(ln.startswith("FAILED ") for ln in told) == 20 and told[-1] == "... and 5 more"
    (logs / "tests" / "0.jsonl").unlink()
    (logs / "tests" / "0.jsonl").symlink_to("/etc/passwd")
    rec = servetests.read(ready, logs)
    assert rec["status"] == "failed" and rec["reason"].startswith("the test exports could not be read")


# ------------------------------------------------------------------------------------------- the record
def test_result_json_has_the_tests_and_a_failure_names_the_failing_ids_exit_10(tmp_path, monkeypatch):
    logs, ready, rec = run_inside(tmp_path, monkeypatch)
    make_house(tmp_path / "wh")
    steps = fake_inside({k: v for k, v in ALL_PASS.items()}, logs)
    steps["steps"].append(
        {k: rec[k] for k in ("name", "status", "log", "timed_out", "exit_status", "seconds")}
    )
    o = opts(tmp_path)
    image = {"tag": "t", "image_id": "sha256:1", "base": {"tag": "b", "image_id": "sha256:2"}, "made": False,
             "seconds": 1.0, "debian_release": None}  # fmt: skip
    container = {"name": "c", "network": "none", "shm_size": "1g", "env": {}, "timeout_per_step": 5.0,
                 "log": "logs/container.log", "timed_out": False, "exit_status": 1, "seconds": 1.0,
                 "load_average": None}  # fmt: skip
    doc = servecheck.record(
        o, wh.read(tmp_path / "wh"), get_profile("rv64gc"), image=image, container=container, inside=steps,
        started=dt.datetime(2026, 12, 4, tzinfo=dt.UTC), seconds=3.0, tests=ready,
    )  # fmt: skip
    validate(doc, manifest.schema("serve-check"))
    step = doc["steps"][-1]
    assert step["name"] == "tests" and step["status"] == "failed" and step["log"] == "logs/tests.log"
    assert step["tests"]["counts"]["failed"] == 1 and step["source"]["recipe"] == "vllm==0.33.0"
    err = servecheck.failure(doc, tmp_path / "out")
    text = err.render()
    assert err.exit_code == ExitCode.CHECK_FAILED == 10
    assert "tests: failed (1 passed, 1 failed, 0 errors, 0 skipped)" in text
    assert "FAILED tests/test_a.py::test_bad" in text and "collected no test" in text
    # --junit: a case per step, then the upstream tests as a suite of their own, a case per id
    root = ET.fromstring(ci.serve_check_junit_xml(doc))
    steps, upstream_suite = root.findall("testsuite")
    cases = {c.get("name"): c for c in steps.findall("testcase")}
    assert list(cases) == list(servecheck.STEPS)
    assert cases["tests"].find("failure") is not None and cases["generate"].find("failure") is None
    ids = {c.get("name"): c for c in upstream_suite.findall("testcase")}
    assert ids["tests/test_a.py::test_bad"].find("failure") is not None
    assert ids["tests/test_a.py::test_ok"].find("failure") is None
    assert root.get("failures") == str(int(steps.get("failures")) + int(upstream_suite.get("failures")))


def test_a_run_that_recorded_nothing_fails_and_a_skipped_step_says_why(tmp_path):
    logs = tmp_path / "logs"
    (logs / "tests").mkdir(parents=True)
    (logs / "tests" / "0.status").write_text("0\n")
    planned = {
        "files": [{"path": "tests/a.py", "select": None, "timeout": 9}],
        "copy": ["tests"],
        "wheels": [],
    }
    ready = servetests.Ready(ref="r", planned=planned, tree=tmp_path, where="t", source=())
    got = {"steps": [{"name": "tests", "status": "passed", "exit_status": 0, "timed_out": False}]}
    (step,) = [s for s in servecheck.steps_record(got, logs, False, ready) if s["name"] == "tests"]
    assert step["status"] == "failed" and step["tests"]["files"][0]["status"] == "recorded nothing"
    (step,) = [s for s in servecheck.steps_record({}, logs, False, None, True) if s["name"] == "tests"]
    assert step == {"name": "tests", "status": "skipped", "reason": "--skip-tests"}
    (step,) = [s for s in servecheck.steps_record({}, logs, False, ready) if s["name"] == "tests"]
    assert step["status"] == "not-run"  # the container never reached it


def test_an_interrupt_leaves_no_result_json(tmp_path, monkeypatch):
    from rvport.closure import serveimage

    make_house(tmp_path / "wh")
    made = serveimage.ServeImage(
        tag="t",
        image_id="sha256:1",
        base_tag="b",
        base_id="sha256:2",
        made=False,
        seconds=1,
        debian_release=None,
    )
    monkeypatch.setattr(servecheck, "check_engine", lambda: None)
    monkeypatch.setattr(serveimage, "ensure", lambda *a, **k: made)
    removed = []
    monkeypatch.setattr(servecheck.containers, "create", lambda *a, **k: None)
    monkeypatch.setattr(servecheck.containers, "remove", lambda name: removed.append(name))

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(servecheck.containers, "start_attached", interrupted)
    own = "\n".join(ln for ln in TESTS_YAML.splitlines() if "pygments" not in ln) + "\n"
    o = opts(
        tmp_path, recipes_dir=(recipes(tmp_path, own),), source_tree=tree(tmp_path), fetch=fetch(tmp_path)
    )
    with pytest.raises(KeyboardInterrupt):
        servecheck.run(o)
    assert removed and not (tmp_path / "out" / "result.json").exists()


def test_the_tests_tree_is_the_main_source_alone_unless_a_patch_may_touch_another():
    vllm = load_catalogue().resolve("vllm==0.33.0")
    vector = [s.name for s in servetests.tests_recipe(vllm).sources]
    assert [s.name for s in vllm.sources] == ["sdist", "onednn"] and vector == ["sdist"]  # no oneDNN fetched
    patched = dataclasses.replace(vllm, patches=(object(),))
    assert servetests.tests_recipe(patched) is patched
