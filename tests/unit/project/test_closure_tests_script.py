"""ci/closure-tests, the CI step that runs a recipe's own tests on a job's wheels (docs/vllm-ci.md, "In a CI
job"), driven with a stand-in `rvport` on PATH that records each call and answers `plan` with a plan.json
of its own: which commands run, in which order, with which options, and what the exit status is."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "ci" / "closure-tests"

FAKE = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$CALLS"
case "$1" in
  plan)  out=$(echo "$@" | sed 's/.*--output \\([^ ]*\\).*/\\1/')
         mkdir -p "$out" && cp "$PLAN" "$out/plan.json" ;;
  serve-check) echo "checking: $*"
               if [ -n "${SIDE:-}" ]; then  # side by side: wait (10 s at most) until every check started
                 touch "$SIDE/$$"; n=0
                 while [ "$(ls "$SIDE" | wc -l)" -lt 2 ]; do
                   sleep 0.1; n=$((n+1)); [ $n -lt 100 ] || exit 9
                 done
               fi
               for p in $FAIL; do case "$*" in *"check-$p "*) exit 10 ;; esac; done ;;
esac
exit 0
"""


def run(
    tmp_path: Path, *args: str, fail: str = "", recipes=None, env_extra=None
) -> tuple[int, list[str], str]:
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    (bin_ / "rvport").write_text(FAKE)
    (bin_ / "rvport").chmod(0o755)
    plan = tmp_path / "plan-in.json"
    names = recipes if recipes is not None else ["msgspec==0.23.0", "vllm==0.33.0", "xgrammar==0.2.8"]
    plan.write_text(json.dumps({"closures": [{"recipe": "vllm", "python": "3.14", "recipes": names}]}))
    calls = tmp_path / "calls"
    calls.unlink(missing_ok=True)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "CALLS": str(calls), "PLAN": str(plan)}
    env["FAIL"] = fail
    env.update(env_extra or {})
    p = subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )
    return p.returncode, (calls.read_text().splitlines() if calls.exists() else []), p.stdout + p.stderr


def test_each_profile_gets_its_wheelhouse_and_its_tests_after_one_build_of_the_others(tmp_path):
    rc, calls, out = run(
        tmp_path, "vllm", "rv64gc,rvv256", "built", "src", "o", "tests", "--mode", "accelerated"
    )
    assert rc == 0, out
    assert calls[0].startswith("plan vllm --profile rv64gc --output o/plan")
    assert calls[1] == (
        "--ci build msgspec==0.23.0 xgrammar==0.2.8 --profile rv64gc,rvv256 --python 3.14 --output o/closure "
        "--mode accelerated"
    )
    for n, p in enumerate(("rv64gc", "rvv256")):
        wh, check = calls[2 + 2 * n], calls[3 + 2 * n]
        assert wh == (
            f"wheelhouse vllm --profile {p} --artifacts built/{p}/artifacts "
            f"--artifacts o/closure/{p}/artifacts --output o/wheelhouse-{p}"
        )
        assert check == (
            f"serve-check vllm --wheelhouse o/wheelhouse-{p} --output o/check-{p} --source-tree src "
            f"--skip-generate --skip-serve --junit o/check-{p}.junit.xml"
        )
    assert len(calls) == 6


def test_one_profile_reads_the_single_outputs_and_serve_mode_serves(tmp_path):
    rc, calls, out = run(tmp_path, "vllm==0.33.0", "rv64gc", "built", "src", "o", "serve")
    assert rc == 0, out
    assert calls[1].startswith("--ci build msgspec==0.23.0 xgrammar==0.2.8 --profile rv64gc ")
    assert "--artifacts built/artifacts --artifacts o/closure/artifacts" in calls[2]
    assert calls[3].startswith("serve-check vllm==0.33.0 ") and "--skip-" not in calls[3]


def test_generate_mode_generates_tokens_before_the_tests_and_does_not_serve(tmp_path):
    rc, calls, out = run(tmp_path, "vllm", "rv64gc", "built", "src", "o", "generate")
    assert rc == 0, out
    assert "--skip-serve" in calls[3] and "--skip-generate" not in calls[3]


def test_a_failed_profile_does_not_stop_the_next_and_its_exit_is_the_scripts(tmp_path):
    rc, calls, out = run(tmp_path, "vllm", "rv64gc,rvv256", "b", "t", "o", "tests", fail="rv64gc")
    assert rc == 10 and sum(c.startswith("serve-check") for c in calls) == 2
    assert "[closure-tests] rv64gc: exit 10" in out and "[closure-tests] rvv256: exit 0" in out


def test_a_closure_of_the_recipe_alone_builds_nothing_more(tmp_path):
    rc, calls, out = run(tmp_path, "vllm", "rv64gc", "b", "t", "o", "tests", recipes=["vllm==0.33.0"])
    assert rc == 0, out
    assert not any(" build " in f" {c} " for c in calls)
    assert "--artifacts b/artifacts --output" in calls[1]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("vllm", "rv64gc"), "RECIPE PROFILES"),
        (("vllm", "a", "b", "c", "d", "x"), "MODE must be"),
        (("vllm", "rv64gc,x/;e id;s/y", "b", "t", "o", "tests"), "PROFILES must be profile names"),
        (("vllm", "rv64gc,,rvv256", "b", "t", "o", "tests"), "PROFILES must be profile names"),
    ],
)
def test_bad_arguments_are_exit_2_with_what_to_give(tmp_path, args, said):
    rc, calls, out = run(tmp_path, *args)
    assert rc == 2 and said in out and calls == []


def test_off_does_nothing(tmp_path):
    rc, calls, out = run(tmp_path, "vllm", "rv64gc", "b", "t", "o", "off")
    assert rc == 0 and calls == [] and "off: nothing to do" in out


def test_matrix_jobs_checks_the_profiles_side_by_side_each_line_labelled(tmp_path):
    side = tmp_path / "side"
    side.mkdir()
    extra = {"RVPORT_MATRIX_JOBS": "2", "SIDE": str(side)}
    rc, calls, out = run(
        tmp_path, "vllm", "rv64gc,rvv256", "b", "t", "o", "tests", fail="rvv256", env_extra=extra
    )
    assert rc == 10, out  # both checks started before either ended (else the stand-in exits 9)
    assert sum(c.startswith("serve-check") for c in calls) == 2
    assert "[rv64gc] checking: serve-check vllm --wheelhouse o/wheelhouse-rv64gc" in out
    assert "[rvv256] checking: serve-check vllm --wheelhouse o/wheelhouse-rvv256" in out
    ends = [ln for ln in out.splitlines() if ln.startswith("[closure-tests] rv")]
    assert [e.split(" in ")[0] for e in ends] == [
        "[closure-tests] rv64gc: exit 0",
        "[closure-tests] rvv256: exit 10",
    ]  # said after both ended, in the profiles' order
    assert not list((tmp_path / "o").glob(".ended-*"))


def test_a_matrix_jobs_value_out_of_bounds_is_exit_2(tmp_path):
    rc, calls, out = run(
        tmp_path, "vllm", "rv64gc", "b", "t", "o", "tests", env_extra={"RVPORT_MATRIX_JOBS": "x;id"}
    )
    assert rc == 2 and "RVPORT_MATRIX_JOBS must be 1 to 8" in out and calls == []
