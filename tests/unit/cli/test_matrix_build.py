"""`rvport build --profile P1,P2,...`, the VLEN matrix: --profile parsed (a comma list or repeated, none
twice, the default when none), each profile built into OUTPUT/PROFILE/ with its own plan.json (the one a
build of that profile alone writes), OUTPUT/matrix.json, the table, the JUnit XML and Markdown summary of
the whole matrix, and the worst profile's exit code. The engine is a stand-in that writes a result.json (no
Docker); a single profile still builds as before."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from rvport import manifest
from rvport.cli import build_verbs, ci, planning, settings
from rvport.cli.matrix import build_matrix
from rvport.engine.matrix import Ended, record
from rvport.errors import BuildFailed, ExitCode, HostNotReady, MatrixFailed, UsageError
from rvport.host import HostFacts

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)


def options(tmp_path, *profiles, **more):
    values = {
        "recipes": ["msgspec"],
        "output": tmp_path / "out",
        "cache_dir": tmp_path / "cache",
        "mode": "qemu",
        "tag": "ci",
        **more,
    }
    if profiles:
        values["profiles"] = list(profiles)
    return settings.make_options("build", values, environ={})


def test_profile_takes_a_comma_list_or_repeats_in_order_and_defaults_to_one(tmp_path):
    assert options(tmp_path, "rv64gc,rvv256", "rvv128").profiles == ("rv64gc", "rvv256", "rvv128")
    assert options(tmp_path).profiles == (settings.default_profile_name(),)
    with pytest.raises(UsageError, match="names rvv256 twice"):
        options(tmp_path, "rvv256,rv64gc", "rvv256")
    with pytest.raises(UsageError, match="empty item"):
        options(tmp_path, "rv64gc,,rvv256")
    with pytest.raises(UsageError, match="rvv512"):
        options(tmp_path, "rv64gc,rvv512")


def test_a_single_profile_build_plans_what_rvport_plan_plans(tmp_path, monkeypatch):
    """One profile: the plan of the build is byte for byte `rvport plan`'s (and each of a matrix's plans is
    the plan of its profile alone)."""
    monkeypatch.setattr("rvport.host.gather", lambda: X86)
    built, _ = planning.from_options(options(tmp_path, "rvv256"), profile="rvv256")
    plan_o = settings.make_options(
        "plan",
        {
            "recipes": ["msgspec"],
            "output": tmp_path / "p",
            "cache_dir": tmp_path / "cache",
            "mode": "qemu",
            "tag": "ci",
            "profile": "rvv256",
        },
        environ={},
    )
    planned, _ = planning.from_options(plan_o)
    assert manifest.dumps(built.to_json()) == manifest.dumps(planned.to_json())
    cells, _ = planning.matrix_from_options(options(tmp_path, "rv64gc,rvv256"))
    assert manifest.dumps(cells[1][1].to_json()) == manifest.dumps(planned.to_json())
    assert [c.output for c, _ in cells] == [tmp_path / "out" / "rv64gc", tmp_path / "out" / "rvv256"]


class StandIn:
    """The engine: a result.json per profile; rvv128 fails its smoke test's run without V (exit 7), and the
    profiles in `host_down` find no engine (exit 6)."""

    ran: list[str] = []
    host_down: tuple[str, ...] = ()
    other_vlen: dict[str, int | None] = {}

    def __init__(self, plan, opts, rep):
        self.plan, self.opts = plan, opts

    def run(self):
        name = self.plan.request.profile.name
        StandIn.ran.append(name)
        StandIn.other_vlen[name] = self.opts.other_vlen
        if name in StandIn.host_down:
            raise HostNotReady("no Docker engine")
        failed = name == "rvv128"
        smoke = {
            "status": "passed",
            "output": [],
            "without_vector": {
                "status": "failed" if failed else "passed",
                "expected": "sigill",
                "observed": "pass" if failed else "sigill",
            },
        }
        doc = {
            "schema": 1,
            "kind": "rvport-result",
            "status": "failed" if failed else "ok",
            "failing_stage": "msgspec" if failed else None,
            "tag": "ci",
            "profile": {"name": name},
            "duration_s": 1.5,
            "started": "2026-12-04T00:00:00Z",
            "artifacts": [],
            "stages": [
                {
                    "recipe": "msgspec",
                    "version": "0.23.0",
                    "mode": "qemu",
                    "status": "failed" if failed else "ok",
                    "timings": {"build": 1.0},
                    "smoke": smoke,
                    "verify": {"ok": True, "reports": []},
                    "error": "msgspec: must die with SIGILL, but it passed" if failed else None,
                    "log_tail": [],
                    "artifacts": [],
                }
            ],
        }
        manifest.write(self.opts.output / "result.json", doc)
        if failed:
            raise BuildFailed("msgspec: the smoke test again on a CPU without V must die with SIGILL")
        return doc


@pytest.fixture
def engine(monkeypatch):
    monkeypatch.setattr("rvport.host.gather", lambda: X86)
    monkeypatch.setattr("rvport.engine.runner.Runner", StandIn)
    StandIn.ran, StandIn.host_down, StandIn.other_vlen = [], (), {}
    return StandIn


def test_each_profile_into_its_own_directory_and_the_matrix_beside_them(tmp_path, engine):
    out = tmp_path / "out"
    o = options(tmp_path, "rv64gc,rvv128,rvv256", junit=out / "junit.xml", summary=tmp_path / "summary.md")
    with pytest.raises(MatrixFailed) as e:
        build_matrix(o)
    assert e.value.exit_code == ExitCode.BUILD_FAILED and "rvv128 (exit 7)" in e.value.message
    assert engine.ran == ["rv64gc", "rvv128", "rvv256"]  # a failed profile does not stop the next
    # each vector profile's smoke test also at the other VLEN (the catalogue's), none for rv64gc
    assert engine.other_vlen == {"rv64gc": None, "rvv128": 256, "rvv256": 128}
    for name in ("rv64gc", "rvv128", "rvv256"):
        plan = json.loads((out / name / "plan.json").read_text())
        assert plan["profile"]["name"] == name and plan["stages"][0]["profile"]["name"] == name
        assert json.loads((out / name / "result.json").read_text())["profile"]["name"] == name
        assert json.loads((out / name / "rvport-output.json").read_text())["output"] == "build"
    doc = json.loads((out / "matrix.json").read_text())
    jsonschema.validate(doc, manifest.schema("matrix"))
    assert [(r["profile"], r["status"], r["sigill"], r["exit_code"]) for r in doc["rows"]] == [
        ("rv64gc", "ok", "passed", 0),
        ("rvv128", "failed", "failed", 7),
        ("rvv256", "ok", "passed", 0),
    ]
    listed = json.loads((out / "rvport-output.json").read_text())
    assert listed["output"] == "matrix"
    assert set(listed["entries"]) == {"matrix.json", "junit.xml", "rv64gc", "rvv128", "rvv256"}
    suites = ET.fromstring((out / "junit.xml").read_text())
    matrix = suites.find("testsuite[@name='rvport build matrix']")
    assert [c.get("name") for c in matrix.iter("testcase")] == ["rv64gc", "rvv128", "rvv256"]
    assert matrix.find("testcase[@name='rvv128']/failure") is not None
    assert {s.get("name") for s in suites.iter("testsuite")} >= {
        "rvport build (rv64gc)",
        "rvport build (rvv128)",
    }
    assert suites.get("failures") == "2"  # the matrix's rvv128 and its stage
    md = (tmp_path / "summary.md").read_text()
    assert "## rvport build matrix: failed" in md
    assert r"| rvv128 | failed | passed | passed | failed \(pass\) | not run | not run | 7 |" in md
    assert md.count("## rvport build: ") == 3  # then each profile's own summary


def test_the_worst_profile_s_exit_code_and_a_rerun_replaces_the_matrix(tmp_path, engine):
    engine.host_down = ("rvv256",)
    with pytest.raises(MatrixFailed) as e:
        build_matrix(options(tmp_path, "rvv128,rvv256"))
    assert e.value.exit_code == ExitCode.HOST_NOT_READY  # 6 before 7
    doc = json.loads((tmp_path / "out" / "matrix.json").read_text())
    assert doc["exit_code"] == 6 and doc["rows"][1]["error"] == "no Docker engine"
    assert not (tmp_path / "out" / "rvv256" / "result.json").exists()
    engine.host_down = ()
    build_matrix(options(tmp_path, "rv64gc,rvv256"))  # rvport's matrix output: written again, no error
    doc = json.loads((tmp_path / "out" / "matrix.json").read_text())
    assert (doc["status"], doc["exit_code"], doc["profiles"]) == ("ok", 0, ["rv64gc", "rvv256"])


def test_a_matrix_is_not_written_over_a_single_build_nor_the_reverse(tmp_path, engine):
    build_verbs.build(
        recipes=["msgspec"],
        output=tmp_path / "out",
        cache_dir=tmp_path / "cache",
        mode="qemu",
        profiles=["rv64gc"],
    )
    assert not (tmp_path / "out" / "matrix.json").exists()
    assert json.loads((tmp_path / "out" / "rvport-output.json").read_text())["output"] == "build"
    with pytest.raises(UsageError, match="not a matrix output"):
        build_matrix(options(tmp_path, "rv64gc,rvv256"))
    build_matrix(options(tmp_path / "m", "rv64gc,rvv256"))
    with pytest.raises(UsageError, match="not a build output"):
        build_verbs.build(
            recipes=["msgspec"],
            output=tmp_path / "m" / "out",
            cache_dir=tmp_path / "cache",
            mode="qemu",
            profiles=["rv64gc"],
        )


def test_an_interrupt_stops_the_matrix_and_leaves_the_rest_not_run(tmp_path, engine, monkeypatch):
    original = StandIn.run

    def interrupted(self):
        if self.plan.request.profile.name == "rvv256":
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(StandIn, "run", interrupted, raising=True)
    with pytest.raises(KeyboardInterrupt):
        build_matrix(options(tmp_path, "rv64gc,rvv256,rvv256-bf16"))
    doc = json.loads((tmp_path / "out" / "matrix.json").read_text())
    jsonschema.validate(doc, manifest.schema("matrix"))
    assert [(r["status"], r["exit_code"]) for r in doc["rows"]] == [
        ("ok", 0),
        ("failed", 8),
        ("not run", None),
    ]
    assert (doc["status"], doc["exit_code"]) == ("interrupted", 8)


def test_the_summary_and_junit_of_a_matrix_are_made_from_its_record_alone():
    res = {
        "status": "ok",
        "stages": [
            {
                "recipe": "vllm",
                "version": "0.33.0",
                "status": "ok",
                "smoke": None,
                "tests": {"status": "passed", "counts": {"passed": 3, "skipped": 1}},
            }
        ],
    }
    doc = record(
        [
            Ended(profile="rv64gc", output="rv64gc", code=ExitCode.OK, result=res),
            Ended(profile="rvv256", output="rvv256", code=None),
        ],
        tag="pr-1",
        started="s",
        duration_s=2,
    )
    md = ci.matrix_markdown(doc, {"rv64gc": res, "rvv256": None})
    assert r"| rv64gc | ok | passed | none | none | none | passed \(3 passed, 1 skipped\) | 0 |" in md
    assert "| rvv256 | not run | not run | not run | not run | not run | not run | - |" in md
    suites = ET.fromstring(ci.matrix_junit_xml(doc, {"rv64gc": res, "rvv256": None}))
    assert suites.find(".//testcase[@name='rvv256']/skipped") is not None
    assert suites.get("skipped") == "1" and suites.get("failures") == "0"


def test_what_jobs_became_is_said_once_for_the_matrix(tmp_path, monkeypatch, capsys):
    """--jobs above what the host's memory allows: the warning once, not once per profile."""
    monkeypatch.setattr(
        "rvport.host.gather", lambda: HostFacts(arch="x86_64", cpus=64, mem_bytes=2**30, binfmt_riscv64=True)
    )
    planned, _ = planning.matrix_from_options(options(tmp_path, "rv64gc,rvv128,rvv256", jobs=64))
    assert all(p.stages[0].jobs < 64 for _, p in planned)
    assert capsys.readouterr().err.count("warning: --jobs 64") == 1


def test_matrix_jobs_builds_profiles_side_by_side_and_keeps_the_rows_in_order(tmp_path, engine, monkeypatch):
    """--matrix-jobs 2: two profiles' builds run at once (each waits for the other at a barrier, which a
    sequential matrix would never pass), a failed one fails its row alone, and the rows keep --profile's
    order."""
    import threading

    both = threading.Barrier(2, timeout=20)
    original = StandIn.run

    def together(self):
        both.wait()
        return original(self)

    monkeypatch.setattr(StandIn, "run", together, raising=True)
    with pytest.raises(MatrixFailed) as e:
        build_matrix(options(tmp_path, "rvv256,rvv128", matrix_jobs=2))
    assert e.value.exit_code == ExitCode.BUILD_FAILED and "rvv128 (exit 7)" in e.value.message
    assert sorted(engine.ran) == ["rvv128", "rvv256"]
    doc = json.loads((tmp_path / "out" / "matrix.json").read_text())
    jsonschema.validate(doc, manifest.schema("matrix"))
    assert [(r["profile"], r["exit_code"]) for r in doc["rows"]] == [("rvv256", 0), ("rvv128", 7)]
    with pytest.raises(UsageError, match="--matrix-jobs 0"):
        options(tmp_path, "rv64gc,rvv256", matrix_jobs=0)
    assert options(tmp_path, "rv64gc").matrix_jobs == 1
