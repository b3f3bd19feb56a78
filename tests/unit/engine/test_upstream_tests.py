"""A recipe's upstream tests (`tests:`): declared as data, planned per profile, the container's script, the
exported records read back into stages[].tests with bounds, the failure (exit 7), and one JUnit case per
test id."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rvport import manifest, resources
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.cli import ci
from rvport.engine import tests as upstream
from rvport.errors import ExitCode, RecipeError, RvportError
from rvport.host import HostFacts
from rvport.plan.planner import Request, make_plan, upstream_tests
from tests.fixtures.schemas import validate

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
PLANNED = {
    "files": [
        {"path": "tests/test_a.py", "select": None, "timeout": 60},
        {"path": "tests/test_b.py", "select": "fast and not slow", "timeout": 30},
    ],
    "copy": ["tests"],
    "wheels": [],
}


def _recipe_dir(tmp_path: Path, tests_yaml: str, kind: str = "python-wheel", smoke: bool = True) -> Path:
    d = tmp_path / "recipes"
    d.mkdir()
    smoke_text = "smoke:\n  script: print('ok')\n" if smoke else ""
    (d / "demo.yaml").write_text(
        f"schema: 1\nname: demo\nkind: {kind}\nbuild: [make]\noutputs: [{{glob: '*.whl', type: wheel}}]\n"
        + smoke_text
        + "versions:\n  - version: '1.0'\n    sources:\n"
        "      - {name: sdist, url: 'https://example.org/demo-1.0.tar.gz', sha256: "
        + "a" * 64
        + "}\n"
        + textwrap.indent(tests_yaml, "    ")
    )
    return d


def test_the_catalogue_recipe_declares_its_tests_as_data():
    r = load_catalogue().resolve("msgspec")
    assert r.tests is not None
    assert [f.path for f in r.tests.files] == ["tests/unit/test_raw.py", "tests/unit/test_msgpack.py"]
    assert {w.file.split("-")[0] for w in r.tests.wheels} >= {"pytest", "pluggy", "iniconfig"}
    src = r.tests.wheels[0].source()
    assert src.project == "pytest" and src.filename == r.tests.wheels[0].file and src.sha256


def test_files_serve_their_profiles(tmp_path):
    d = _recipe_dir(
        tmp_path,
        "tests:\n  files:\n    - {path: tests/a.py}\n"
        "    - {path: tests/v.py, profiles: [rvv256], select: rvv, timeout: 5}\n  timeout: 100\n",
    )
    r = load_catalogue([d]).resolve("demo")
    assert upstream_tests(r, get_profile("rv64gc"))["files"] == [
        {"path": "tests/a.py", "select": None, "timeout": 100}
    ]
    assert upstream_tests(r, get_profile("rvv256"))["files"][1] == {
        "path": "tests/v.py",
        "select": "rvv",
        "timeout": 5,
    }
    # planned, in plan.json and in the stage's key
    plan = make_plan(load_catalogue([d]), Request(refs=("demo",), profile=get_profile("rvv256")), X86)
    doc = plan.to_json()
    validate(doc, manifest.schema("plan"))
    assert doc["stages"][0]["tests"]["copy"] == ["tests"]


@pytest.mark.parametrize(
    ("yaml", "kind", "smoke", "words"),
    [
        (
            "tests:\n  files: [{path: tests/a.py}]\n",
            "cargo-staticlib",
            True,
            "kind whose artifacts are wheels",
        ),
        ("tests:\n  files: [{path: tests/a.py}]\n", "python-wheel", False, "a smoke: script"),
        (
            "tests:\n  files: [{path: tests/a.py, profiles: [rvv999]}]\n",
            "python-wheel",
            True,
            "unknown profile",
        ),
        (
            "tests:\n  files: [{path: tests/a.py}]\n  copy: [src]\n",
            "python-wheel",
            True,
            "not under any path",
        ),
        ("tests:\n  files: [{path: ../a.py}]\n", "python-wheel", True, "not a relative path"),
        (
            "tests:\n  files: [{path: a.py}]\n  wheels: [{file: nope.whl, sha256: " + "b" * 64 + "}]\n",
            "python-wheel",
            True,
            "not a wheel",
        ),
    ],
)
def test_bad_tests_are_recipe_errors(tmp_path, yaml, kind, smoke, words):
    d = _recipe_dir(tmp_path, yaml, kind=kind, smoke=smoke)
    with pytest.raises(RvportError) as e:
        load_catalogue([d])
    assert words in str(e.value) + "".join(str(p.message) for p in getattr(e.value, "problems", []))


def test_the_schema_refuses_a_select_with_control_characters(tmp_path):
    d = _recipe_dir(tmp_path, 'tests:\n  files: [{path: tests/a.py, select: "a\\nb"}]\n')
    with pytest.raises(RvportError):
        load_catalogue([d])


def test_missing_test_files_are_named(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    with pytest.raises(RecipeError, match="does not hold: tests/test_b.py") as e:
        upstream.check_files("demo==1.0", PLANNED, tmp_path, "the local tree X")
    assert e.value.exit_code == ExitCode.RECIPE_INVALID
    (tmp_path / "tests" / "test_b.py").symlink_to("test_a.py")
    with pytest.raises(RecipeError, match="tests/test_b.py"):  # a link is no test file
        upstream.check_files("demo==1.0", PLANNED, tmp_path, "the local tree X")


# the same file name in two directories: -k cannot scope them, so each file runs alone
PER_FILE = {
    **PLANNED,
    "files": [
        {"path": "tests/a/test_x.py", "select": None, "timeout": 60},
        {"path": "tests/b/test_x.py", "select": "fast and not slow", "timeout": 30},
    ],
}


def test_the_files_share_one_run_scoped_by_their_names():
    (run,) = upstream.runs(PLANNED)
    assert run == {
        "files": [0, 1],
        "paths": ["tests/test_a.py", "tests/test_b.py"],
        "select": "test_a.py or (test_b.py and (fast and not slow))",
        "timeout": 90,
    }
    assert upstream.pytest_args(run, "/t")[-4:] == [
        "tests/test_a.py",
        "tests/test_b.py",
        "-k",
        "test_a.py or (test_b.py and (fast and not slow))",
    ]


@pytest.mark.parametrize(
    "paths",
    [
        ["tests/a/test_x.py", "tests/b/test_x.py"],  # one name twice
        ["tests/test_x.py", "tests/test_x.py.d/test_y.py"],  # a name within a directory's
        ["tests/test_x.py", "tests/test_x.pyc.py"],  # a name within another's
        ["tests/test x.py", "tests/test_y.py"],  # not a -k word
        ["tests/[a].py", "tests/test_y.py"],
        ["tests/or", "tests/test_y.py"],  # a -k keyword
    ],
)
def test_files_whose_names_cannot_scope_a_selection_run_one_by_one(paths):
    planned = {**PLANNED, "files": [{"path": p, "select": "fast", "timeout": 10} for p in paths]}
    got = upstream.runs(planned)
    assert [r["paths"] for r in got] == [[p] for p in paths]
    assert [r["select"] for r in got] == ["fast", "fast"] and [r["files"] for r in got] == [[0], [1]]


def test_the_script_quotes_every_word():
    text = upstream.script(PLANNED)
    assert "timeout -k 10 90 python3 -m pytest -p rvport_pytest_record" in text
    assert (
        "tests/test_a.py tests/test_b.py -k 'test_a.py or (test_b.py and (fast and not slow))'; "
        "echo $? > /rvport-tests/0.status" in text
    )
    assert "1.status" not in text
    assert "tests/b/test_x.py -k 'fast and not slow'; echo $? > /rvport-tests/1.status" in upstream.script(
        PER_FILE
    )
    hostile = {**PLANNED, "files": [{"path": "tests/a.py", "select": "x'; rm -rf / #", "timeout": 1}]}
    assert "-k 'x'\"'\"'; rm -rf / #'" in upstream.script(hostile)


def _export(out: Path, statuses: dict[int, int], records: dict[int, list[dict]], log: str = "done\n") -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "log").write_text(log)
    (out / "status").write_text("0\n")
    for i, code in statuses.items():
        (out / f"{i}.status").write_text(f"{code}\n")
    for i, rows in records.items():
        (out / f"{i}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_a_passing_run(tmp_path):
    out = _export(
        tmp_path / "out",
        {0: 0},
        {
            0: [
                {"id": "tests/test_a.py::test_x", "outcome": "passed", "duration_s": 0.5},
                {"id": "tests/test_b.py::test_y[1]", "outcome": "passed", "duration_s": 1},
                {"id": "tests/test_b.py::test_z", "outcome": "skipped", "duration_s": 0.25},
            ],
        },
    )
    (out / "0.seconds").write_text("100.25 130.75\n")
    rec = upstream.record("demo==1.0", out, PLANNED, ["pytest-9.whl"])
    assert rec["status"] == "passed"
    assert rec["runs"] == [
        {
            "paths": ["tests/test_a.py", "tests/test_b.py"],
            "timeout": 90,
            "exit_status": 0,
            "status": "passed",
            "seconds": 30.5,
        }
    ]
    assert [f["seconds"] for f in rec["files"]] == [0.5, 1.25]  # each file's own tests
    assert [f["counts"]["passed"] for f in rec["files"]] == [1, 1]
    assert rec["counts"] == {"passed": 2, "failed": 0, "skipped": 1, "error": 0}
    assert [f["status"] for f in rec["files"]] == ["passed", "passed"]
    assert rec["cases"][1] == {
        "id": "tests/test_b.py::test_y[1]",
        "file": "tests/test_b.py",
        "outcome": "passed",
        "duration_s": 1.0,
    }


def test_one_file_per_run_keeps_each_runs_time(tmp_path):
    out = _export(
        tmp_path / "out",
        {0: 0, 1: 0},
        {
            0: [{"id": "tests/a/test_x.py::test_x", "outcome": "passed", "duration_s": 0.5}],
            1: [{"id": "tests/b/test_x.py::test_y", "outcome": "passed", "duration_s": 1}],
        },
    )
    (out / "0.seconds").write_text("100.25 130.75\n")
    (out / "1.seconds").write_text("not a time\n")
    rec = upstream.record("demo==1.0", out, PER_FILE, [])
    assert rec["status"] == "passed" and [f["run"] for f in rec["files"]] == [0, 1]
    assert [f["seconds"] for f in rec["files"]] == [30.5, None]


def test_an_id_written_again_keeps_its_last_line(tmp_path):
    row = {"id": "tests/test_a.py::test_x", "outcome": "passed", "duration_s": 0.5}
    out = _export(
        tmp_path / "out",
        {0: 1},
        {
            0: [
                row,
                {"id": "tests/test_b.py::t", "outcome": "passed", "duration_s": 1},
                {**row, "outcome": "error", "message": "teardown"},
            ]
        },
    )
    rec = upstream.record("demo==1.0", out, PLANNED, [])
    assert [c["outcome"] for c in rec["cases"]] == ["passed", "error"]
    assert rec["counts"]["error"] == 1 and rec["files"][0]["status"] == "failed"


def test_failures_name_their_ids_and_exit_7(tmp_path):
    out = _export(
        tmp_path / "out",
        {0: 1},
        {
            0: [
                {
                    "id": "tests/test_a.py::test_x",
                    "outcome": "failed",
                    "duration_s": 0.5,
                    "message": "assert 1 == 2",
                }
            ]
        },
    )
    rec = upstream.record("demo==1.0", out, PLANNED, [])
    assert rec["status"] == "failed"
    assert [f["status"] for f in rec["files"]] == ["failed", "no tests collected"]
    err = upstream.failure("demo==1.0", rec, tmp_path / "log")
    assert err.exit_code == ExitCode.BUILD_FAILED == 7
    text = str(err)
    assert "FAILED tests/test_a.py::test_x" in text
    assert "tests/test_b.py -k 'fast and not slow': collected no test" in text
    alone = _export(
        tmp_path / "alone", {0: 0, 1: 5}, {0: [{"id": "tests/a/test_x.py::t", "outcome": "passed"}]}
    )
    assert upstream.record("demo==1.0", alone, PER_FILE, [])["files"][1]["status"] == "no tests collected"


def test_a_run_that_timed_out_or_never_ran_is_a_failure(tmp_path):
    a = {"id": "tests/test_a.py::test_x", "outcome": "passed", "duration_s": 2}
    b = {"id": "tests/test_b.py::test_y", "outcome": "passed", "duration_s": 2}
    out = _export(tmp_path / "out", {0: 124}, {0: [a]})
    rec = upstream.record("demo==1.0", out, PLANNED, [])
    assert [f["status"] for f in rec["files"]] == ["timed out", "timed out"]
    assert rec["status"] == "failed"
    text = str(upstream.failure("demo==1.0", rec, tmp_path / "log"))
    assert "did not finish: the run of its 2 files stopped at its 90 s" in text
    later = _export(tmp_path / "later", {0: 124}, {0: [a, b]})  # the ids written before the timeout count
    assert [f["status"] for f in upstream.record("demo==1.0", later, PLANNED, [])["files"]] == [
        "passed",
        "timed out",
    ]
    crashed = _export(tmp_path / "crashed", {0: 139}, {})
    assert [f["status"] for f in upstream.record("demo==1.0", crashed, PLANNED, [])["files"]] == [
        "exit 139"
    ] * 2
    never = _export(tmp_path / "never", {}, {})
    assert [f["status"] for f in upstream.record("demo==1.0", never, PLANNED, [])["files"]] == ["not run"] * 2
    alone = _export(tmp_path / "alone", {0: 124}, {})
    rec = upstream.record("demo==1.0", alone, PER_FILE, [])
    assert [f["status"] for f in rec["files"]] == ["timed out", "not run"]
    assert "did not finish in its 60 s" in str(upstream.failure("demo==1.0", rec, tmp_path / "log"))
    out2 = _export(tmp_path / "out2", {0: 0}, {})  # exit 0 but no record: nothing is known
    assert upstream.record("demo==1.0", out2, PLANNED, [])["files"][0]["status"] == "recorded nothing"
    out3 = _export(tmp_path / "out3", {0: 0, 1: 0}, {})
    assert upstream.record("demo==1.0", out3, PER_FILE, [])["files"][0]["status"] == "recorded nothing"


def test_a_failed_install_is_a_failure(tmp_path):
    out = _export(tmp_path / "out", {}, {})
    (out / "install.status").write_text("1\n")
    rec = upstream.record("demo==1.0", out, PLANNED, [])
    assert rec["status"] == "failed" and rec["reason"] == "installing the wheels failed"
    assert rec["output"] == ["done"]  # the log's last lines
    (out / "install.status").write_text("2\n")
    assert upstream.record("demo==1.0", out, PLANNED, [])["reason"] == "installing the test wheels failed"


def test_records_are_read_with_bounds(tmp_path, monkeypatch):
    rows = [{"id": f"t::{i}" + "x" * 5000, "outcome": "passed", "duration_s": "bad"} for i in range(5)]
    rows.append({"id": 3, "outcome": "passed"})  # not a test id: dropped
    rows.append({"id": "t::y", "outcome": "exploded"})  # not an outcome: dropped
    out = _export(tmp_path / "out", {0: 0, 1: 0}, {0: rows, 1: rows})
    monkeypatch.setattr(upstream, "MAX_CASES", 3)
    rec = upstream.record("demo==1.0", out, PER_FILE, [])
    assert len(rec["cases"]) == 6  # 3 a run
    assert all(len(c["id"]) == upstream.ID_LIMIT and c["duration_s"] == 0.0 for c in rec["cases"])
    shared = upstream.record("demo==1.0", out, PLANNED, [])  # ids of no file count to the run's first
    assert len(shared["cases"]) == 3 and {c["file"] for c in shared["cases"]} == {"tests/test_a.py"}
    (out / "0.jsonl").unlink()
    (out / "0.jsonl").symlink_to("/etc/passwd")
    with pytest.raises(RvportError, match="test export"):
        upstream.record("demo==1.0", out, PLANNED, [])


def test_result_json_validates_with_tests(tmp_path):
    out = _export(tmp_path / "out", {0: 1}, {0: [{"id": "b::f", "outcome": "failed", "duration_s": 1}]})
    rec = upstream.record("demo==1.0", out, PLANNED, [])
    assert rec["runs"] and rec["files"][0]["run"] == 0
    schema = manifest.schema("result")
    stage_schema = schema["properties"]["stages"]["items"]["properties"]["tests"]
    validate(rec, {**stage_schema, "$defs": schema["$defs"]})


def test_junit_has_a_case_per_test_id(tmp_path):
    out = _export(
        tmp_path / "out",
        {0: 1},
        {
            0: [
                {"id": "tests/test_a.py::test_ok", "outcome": "passed", "duration_s": 0.1},
                {
                    "id": "tests/test_a.py::test_bad[\x1b]",
                    "outcome": "failed",
                    "duration_s": 0.2,
                    "message": "E  boom",
                },
                {"id": "tests/test_a.py::test_skip", "outcome": "skipped", "duration_s": 0},
            ]
        },
    )
    rec = upstream.record("demo==1.0", out, PLANNED, [])
    doc = {
        "profile": {"name": "rvv256"},
        "stages": [{"recipe": "demo", "version": "1.0", "status": "failed", "tests": rec}],
    }
    root = ET.fromstring(ci.junit_xml(doc).split("\n", 1)[1])
    suite = [s for s in root if s.get("name", "").startswith("upstream tests of demo")][0]
    names = [c.get("name") for c in suite]
    assert names[:3] == [
        "tests/test_a.py::test_ok",
        "tests/test_a.py::test_bad[\\x1b]",  # a control character shown, never written
        "tests/test_a.py::test_skip",
    ]
    assert suite[1].find("failure").get("message") == "E  boom"
    assert suite[2].find("skipped") is not None
    assert (
        names[3] == "tests/test_b.py (run)"
        and suite[3].find("failure").get("message") == "no tests collected"
    )
    assert root.get("tests") == str(1 + 4) and root.get("failures") == str(1 + 2)
    assert "| demo |" in ci.summary_markdown(
        doc
    ) and r"failed \(1 passed, 1 failed, 1 skipped\)" in ci.summary_markdown(doc)


def test_the_plugin_records_every_id(tmp_path):
    """rvport's pytest plugin, run for real by this Python's pytest on a small test file."""
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "rvport_pytest_record.py").write_text(resources.script("pytest-record.py"))
    (tmp_path / "test_demo.py").write_text(
        "import pytest\n"
        "def test_pass(): pass\n"
        "def test_fail(): assert 1 == 2\n"
        "@pytest.mark.skip(reason='no')\ndef test_skip(): pass\n"
        "@pytest.mark.xfail\ndef test_xfail(): assert 0\n"
        "@pytest.fixture\ndef broken(): raise RuntimeError('setup')\n"
        "def test_error(broken): pass\n"
        "@pytest.mark.parametrize('n', [1, 2])\ndef test_param(n): pass\n"
    )
    record = tmp_path / "out.jsonl"
    env = {
        "PYTHONPATH": str(tmp_path / "plugin"),
        "PYTEST_RECORD_TO": str(record),
        "PATH": "/usr/bin:/bin",
    }
    cp = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "rvport_pytest_record",
            "-p",
            "no:cacheprovider",
            "-q",
            "test_demo.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert cp.returncode == 1, cp.stdout + cp.stderr
    got = {r["id"].split("::")[1]: r["outcome"] for r in map(json.loads, record.read_text().splitlines())}
    assert got == {
        "test_pass": "passed",
        "test_fail": "failed",
        "test_skip": "skipped",
        "test_xfail": "skipped",
        "test_error": "error",
        "test_param[1]": "passed",
        "test_param[2]": "passed",
    }


def _pytest(tmp_path: Path, args: list[str], record: Path) -> subprocess.CompletedProcess:
    (tmp_path / "plugin").mkdir(exist_ok=True)
    (tmp_path / "plugin" / "rvport_pytest_record.py").write_text(resources.script("pytest-record.py"))
    env = {"PYTHONPATH": str(tmp_path / "plugin"), "PYTEST_RECORD_TO": str(record), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True)


def test_one_run_selects_in_each_file_what_its_own_run_would(tmp_path):
    """The shared run's -k, for real: each file's selection applies to that file alone."""
    (tmp_path / "tests" / "sub").mkdir(parents=True)
    (tmp_path / "tests" / "test_a.py").write_text("def test_fast(): pass\ndef test_slow(): pass\n")
    (tmp_path / "tests" / "sub" / "test_b.py").write_text(
        "import pytest\n@pytest.mark.parametrize('n', ['fast', 'x'])\ndef test_one(n): pass\n"
        "def test_slow(): pass\n"
    )
    planned = {
        **PLANNED,
        "files": [
            {"path": "tests/test_a.py", "select": "fast", "timeout": 60},
            {"path": "tests/sub/test_b.py", "select": "not slow", "timeout": 60},
        ],
    }
    (run,) = upstream.runs(planned)
    out = tmp_path / "out"
    out.mkdir()
    cp = _pytest(tmp_path, upstream.pytest_args(run, str(tmp_path)), out / "0.jsonl")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (out / "0.status").write_text("0\n")
    rec = upstream.record("demo==1.0", out, planned, [])
    assert [c["id"] for c in rec["cases"]] == [
        "tests/test_a.py::test_fast",
        "tests/sub/test_b.py::test_one[fast]",
        "tests/sub/test_b.py::test_one[x]",
    ]
    assert [f["counts"]["passed"] for f in rec["files"]] == [1, 2] and rec["status"] == "passed"


def test_the_plugin_writes_each_id_as_it_ends(tmp_path):
    """A run killed in a test (as timeout(1) kills a run past its time) keeps the ids that ended before."""
    (tmp_path / "test_k.py").write_text(
        "import os, signal\ndef test_first(): pass\ndef test_killed(): os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    record = tmp_path / "out.jsonl"
    record.write_text("left from an earlier run\n")
    cp = _pytest(
        tmp_path, ["-m", "pytest", "-p", "rvport_pytest_record", "-p", "no:cacheprovider", "-q"], record
    )
    assert cp.returncode == -9, cp.stdout + cp.stderr
    assert [json.loads(x)["id"] for x in record.read_text().splitlines()] == ["test_k.py::test_first"]


# ------------------------------------------------------------------------------------------ the runner

RUNNER_RECIPE = """\
schema: 1
name: demo
kind: python-wheel
build: [make]
outputs: [{glob: "*.whl", type: wheel}]
smoke: {script: print(1)}
versions:
  - version: "1.0"
    sources:
      - {name: sdist, url: "https://example.invalid/demo-1.0.tar.gz", sha256: "%s"}
    tests:
      files: [{path: tests/test_a.py, select: "fast"}]
""" % ("a" * 64)


def _runner(tmp_path):
    from types import SimpleNamespace

    from rvport.engine.runner import BuildOptions, Runner
    from rvport.sources import Cache, FetchOptions

    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "demo.yaml").write_text(RUNNER_RECIPE)
    plan = make_plan(
        load_catalogue(tmp_path / "recipes"), Request(refs=("demo",), profile=get_profile("rvv256")), X86
    )
    run = Runner(
        plan,
        BuildOptions(output=tmp_path / "out", fetch=FetchOptions(cache=Cache(root=tmp_path / "c"))),
        rep=SimpleNamespace(),
    )
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_a.py").write_text("def test_fast(): pass\n")
    (tree / "demo").mkdir()
    (tree / "demo" / "__init__.py").write_text("")  # the tree's own package: never copied in
    run._trees["demo"] = SimpleNamespace(path=tree)
    rec = run.records[0]
    env = SimpleNamespace(
        stage=rec.stage,
        record=rec,
        log_path=tmp_path / "demo.log",
        line=lambda _: None,
        phase=lambda _: None,
        riscv64_env={"QEMU_CPU": "rv64,v=true,vlen=256"},
    )
    files = tmp_path / "files"
    files.mkdir()
    (files / "demo-1.0-py3-none-any.whl").write_bytes(b"PK")
    return run, rec, env, files


@pytest.mark.parametrize("outcome", ["passed", "failed"])
def test_the_runner_runs_the_tests_in_a_build_of_their_own(tmp_path, monkeypatch, outcome):
    from rvport.engine import runner as runner_mod

    run, rec, env, files = _runner(tmp_path)
    seen = {}

    def fake_build(spec, *, log_path, on_line=None, on_phase=None):
        seen["dockerfile"] = spec.dockerfile.read_text()
        seen["network"] = spec.network
        seen["tree"] = sorted(
            p.relative_to(spec.context / "tree").as_posix() for p in (spec.context / "tree").rglob("*")
        )
        seen["script"] = (spec.context / "rvport-tests.sh").read_text()
        _export(
            spec.output_dir,
            {0: 0 if outcome == "passed" else 1},
            {0: [{"id": "tests/test_a.py::test_fast", "outcome": outcome, "duration_s": 1}]},
        )

    monkeypatch.setattr(runner_mod.buildx, "build", fake_build)
    if outcome == "passed":
        run._upstream_tests(env, files, "rvport/smoke:under-test")
    else:
        with pytest.raises(upstream.UpstreamTestsFailed, match="FAILED tests/test_a.py::test_fast"):
            run._upstream_tests(env, files, "rvport/smoke:under-test")
    assert "FROM rvport/smoke:under-test AS tests" in seen["dockerfile"]
    assert "ENV QEMU_CPU=rv64,v=true,vlen=256 " in seen["dockerfile"] and seen["network"] == "none"
    assert seen["tree"] == ["tests", "tests/test_a.py"]  # the copied paths only, not the tree's package
    assert "tests/test_a.py -k fast" in seen["script"]
    assert rec.tests["status"] == outcome
    assert not list((tmp_path / "c" / "tmp").iterdir())  # its scratch directories are gone


def test_an_interrupt_during_the_tests_leaves_no_partial_record(tmp_path, monkeypatch, sigint):
    from rvport.engine import runner as runner_mod

    run, rec, env, files = _runner(tmp_path)

    def interrupted(spec, *, log_path, on_line=None, on_phase=None):
        _export(spec.output_dir, {0: 0}, {0: [{"id": "tests/test_a.py::test_fast", "outcome": "passed"}]})
        raise KeyboardInterrupt  # buildx stopped: BuildKit removes the build's container

    monkeypatch.setattr(runner_mod.buildx, "build", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run._upstream_tests(env, files, "rvport/smoke:under-test")
    assert rec.tests is None and "tests" not in rec.to_json()
    assert not list((tmp_path / "c" / "tmp").iterdir())
