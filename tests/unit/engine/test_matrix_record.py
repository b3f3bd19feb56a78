"""OUTPUT/matrix.json (rvport/engine/matrix.py): a profile's four columns from its result.json alone, the
worst of its stages'; the matrix's exit code, the worst profile's in the documented order; the record held
to matrix.schema.json. No Docker."""

from __future__ import annotations

import jsonschema
import pytest

from rvport import manifest
from rvport.engine.matrix import WORST_FIRST, Ended, record, row, stage_cells, worst
from rvport.errors import ExitCode


def stage(status="ok", smoke=None, tests=None, recipe="rvvdot"):
    return {
        "recipe": recipe,
        "version": "1.0.0",
        "status": status,
        "smoke": smoke,
        **({"tests": tests} if tests else {}),
    }


PASSED_SMOKE = {
    "status": "passed",
    "output": [],
    "without_vector": {"status": "passed", "expected": "sigill"},
}
TESTS_OK = {"status": "passed", "counts": {"passed": 12, "failed": 0, "error": 0, "skipped": 3}}


def result(*stages, status="ok"):
    return {"status": status, "failing_stage": None, "duration_s": 12.5, "stages": list(stages)}


@pytest.mark.parametrize(
    ("st", "want"),
    [
        (stage(smoke=PASSED_SMOKE, tests=TESTS_OK), ("passed", "passed", "passed", "passed")),
        (stage("cached", smoke=PASSED_SMOKE), ("passed", "passed", "passed", "none")),
        (stage(smoke={"status": "passed", "output": []}), ("passed", "passed", "none", "none")),
        (stage(), ("passed", "none", "none", "none")),  # --no-smoke, or a kind without a smoke test
        (stage("failed"), ("failed", "not run", "not run", "not run")),  # the compile or verify failed
        (
            stage("failed", smoke={"status": "failed", "without_vector": {"status": "not run"}}),
            ("passed", "failed", "not run", "not run"),
        ),
        (  # the silent scalar fallback: the run without V passed
            stage("failed", smoke={"status": "passed", "without_vector": {"status": "failed"}}),
            ("passed", "passed", "failed", "not run"),
        ),
        (
            stage("failed", smoke=PASSED_SMOKE, tests={"status": "failed", "counts": {"failed": 2}}),
            ("passed", "passed", "passed", "failed"),
        ),
        (stage("not run"), ("not run", "not run", "not run", "not run")),
        (stage("interrupted"), ("interrupted", "interrupted", "interrupted", "interrupted")),
        (
            stage(smoke={"status": "passed", "without_vector": {"status": "skipped"}}),
            ("passed", "passed", "skipped", "none"),
        ),
    ],
)
def test_a_stage_s_four_columns(st, want):
    got = stage_cells(st)
    assert (got["build"], got["smoke"], got["sigill"], got["tests"]) == want


def test_a_profile_s_column_is_the_worst_of_its_stages():
    doc = result(
        stage(smoke=PASSED_SMOKE, tests=TESTS_OK, recipe="a"),
        stage("failed", smoke={"status": "passed", "without_vector": {"status": "failed"}}, recipe="b"),
        stage("not run", recipe="c"),
        status="failed",
    )
    r = row(
        Ended(
            profile="rvv256", output="rvv256", code=ExitCode.BUILD_FAILED, error="b: boom\nmore", result=doc
        )
    )
    assert (r["build"], r["smoke"], r["sigill"], r["tests"]) == ("not run", "not run", "failed", "not run")
    assert r["status"] == "failed" and r["exit_code"] == 7 and r["error"] == "b: boom"
    assert [s["id"] for s in r["stages"]] == ["a", "b", "c"] and r["stages"][0]["tests_counts"][
        "passed"
    ] == 12
    only_none = row(Ended(profile="p", output="p", code=ExitCode.OK, result=result(stage())))
    assert only_none["tests"] == "none" and only_none["status"] == "ok"


def test_a_profile_without_a_result_and_one_not_reached():
    r = row(Ended(profile="rvv128", output="rvv128", code=ExitCode.HOST_NOT_READY, error="no docker"))
    assert r["status"] == "failed" and r["build"] == "not run" and r["exit_code"] == 6 and r["stages"] == []
    r = row(Ended(profile="rvv128", output="rvv128", code=None))
    assert r["status"] == "not run" and r["exit_code"] is None and r["error"] is None


def test_an_error_in_a_row_is_one_bounded_line():
    r = row(Ended(profile="p", output="p", code=ExitCode.BUILD_FAILED, error="x\x1b[31m" + "y" * 900 + "\nz"))
    assert "\x1b" not in r["error"] and len(r["error"]) == 500 and "\n" not in r["error"]


def test_the_worst_exit_code_comes_first_in_the_documented_order():
    assert worst([]) == ExitCode.OK
    assert worst([ExitCode.OK, ExitCode.VERIFY_FAILED, ExitCode.BUILD_FAILED]) == ExitCode.BUILD_FAILED
    assert worst([ExitCode.BUILD_FAILED, ExitCode.HOST_NOT_READY]) == ExitCode.HOST_NOT_READY
    assert worst([ExitCode.BUILD_FAILED, ExitCode.INTERRUPTED, ExitCode.INTERNAL]) == ExitCode.INTERRUPTED
    assert worst([ExitCode.VERIFY_FAILED, ExitCode.OK]) == ExitCode.VERIFY_FAILED
    assert set(WORST_FIRST) == set(ExitCode)  # every code has its place


def test_the_record_fits_its_schema_and_its_status_follows_the_rows():
    ok = Ended(profile="rv64gc", output="rv64gc", code=ExitCode.OK, result=result(stage(smoke=PASSED_SMOKE)))
    bad = Ended(
        profile="rvv256",
        output="rvv256",
        code=ExitCode.VERIFY_FAILED,
        error="verify",
        result=result(stage("failed"), status="failed"),
    )
    doc = record([ok, bad], tag="ci", started="2026-12-04T00:00:00Z", duration_s=3.14159)
    jsonschema.validate(doc, manifest.schema("matrix"))
    assert (doc["status"], doc["exit_code"], doc["profiles"], doc["duration_s"]) == (
        "failed",
        1,
        ["rv64gc", "rvv256"],
        3.14,
    )
    doc = record(
        [ok, Ended(profile="rvv256", output="rvv256", code=ExitCode.OK, result=result())],
        tag="ci",
        started="s",
        duration_s=1,
    )
    assert (doc["status"], doc["exit_code"]) == ("ok", 0)
    stopped = Ended(
        profile="rvv256",
        output="rvv256",
        code=ExitCode.INTERRUPTED,
        error="interrupted",
        result=result(stage("interrupted"), status="interrupted"),
    )
    doc = record(
        [ok, stopped, Ended(profile="rvv128", output="rvv128", code=None)],
        tag="ci",
        started="s",
        duration_s=1,
    )
    jsonschema.validate(doc, manifest.schema("matrix"))
    assert (doc["status"], doc["exit_code"], doc["rows"][2]["status"]) == ("interrupted", 8, "not run")


def test_a_stage_s_run_without_v_is_kept_when_it_was_judged():
    doc = result(
        stage(
            smoke={
                "status": "passed",
                "without_vector": {"status": "passed", "expected": "sigill", "observed": "sigill"},
            }
        )
    )
    (st,) = row(Ended(profile="rvv256", output="rvv256", code=ExitCode.OK, result=doc))["stages"]
    assert st["without_vector"] == {"expected": "sigill", "observed": "sigill"}
    (st,) = row(
        Ended(profile="rvv256", output="rvv256", code=ExitCode.OK, result=result(stage(smoke=PASSED_SMOKE)))
    )["stages"]
    assert "without_vector" not in st  # not judged: nothing observed


def test_the_other_vlen_column_and_a_finding():
    from rvport.cli.ci import matrix_words

    def at_128(status, observed, expected="pass"):
        smoke = {
            **PASSED_SMOKE,
            "other_vlen": {"vlen": 128, "expected": expected, "observed": observed, "status": status},
        }
        return stage(smoke=smoke)

    assert stage_cells(at_128("passed", "pass"))["other_vlen"] == "passed"
    assert stage_cells(stage(smoke=PASSED_SMOKE))["other_vlen"] == "none"  # not a matrix's vector profile
    assert stage_cells(stage("failed"))["other_vlen"] == "not run"
    r = row(
        Ended(
            profile="rvv256",
            output="rvv256",
            code=ExitCode.OK,
            result=result(at_128("finding", "pass", "refused")),
        )
    )
    assert r["other_vlen"] == "finding" and r["stages"][0]["other_vlen_run"] == {
        "vlen": 128,
        "expected": "refused",
        "observed": "pass",
    }
    assert matrix_words(r)[3] == "finding (VLEN 128: pass)"
    # a finding is recorded, it fails nothing: the worst of finding and passed is finding, of failed failed
    two = result(at_128("finding", "pass", "refused"), at_128("failed", "exit 1"))
    assert (
        row(Ended(profile="p", output="p", code=ExitCode.BUILD_FAILED, result=two))["other_vlen"] == "failed"
    )
    doc = record(
        [
            Ended(
                profile="rvv256",
                output="rvv256",
                code=ExitCode.OK,
                result=result(at_128("finding", "pass", "refused")),
            ),
            Ended(
                profile="rv64gc", output="rv64gc", code=ExitCode.OK, result=result(stage(smoke=PASSED_SMOKE))
            ),
        ],
        tag="t",
        started="s",
        duration_s=1,
    )
    jsonschema.validate(doc, manifest.schema("matrix"))
    assert (doc["status"], doc["exit_code"]) == ("ok", 0)
