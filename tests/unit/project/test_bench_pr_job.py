"""bench/pr_job.py: the job's two steps in order with the options the CI files give them, the per-profile
lines of ci/closure-tests read back, the total against the target, and a bad --change refused first."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_pr_job", ROOT / "bench" / "pr_job.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_closure_tests_lines_give_each_profiles_exit_and_seconds(tmp_path):
    log = tmp_path / "tests.log"
    log.write_text(
        "[closure-tests] rv64gc: exit 0 in 912 s\nnoise: exit 1 in 3 s\n"
        "[closure-tests] rvv256: exit 10 in 1400 s\n"
    )
    assert bench.per_profile_seconds(log) == {
        "rv64gc": {"exit": 0, "seconds": 912},
        "rvv256": {"exit": 10, "seconds": 1400},
    }
    assert bench.per_profile_seconds(tmp_path / "none") == {}


def test_the_total_is_both_steps_against_twenty_minutes():
    got = bench.total({"build": {"wall_s": 400.0, "rc": 0}, "tests": {"wall_s": 900.5, "rc": 0}})
    assert got == {"wall_s": 1300.5, "target_s": 1200, "passed": True, "under_target": False}
    fast = bench.total({"build": {"wall_s": 400.0, "rc": 0}, "tests": {"wall_s": 700.0, "rc": 0}})
    assert fast["passed"] is True and fast["under_target"] is True
    failed = bench.total({"build": {"wall_s": 100.0, "rc": 7}})  # a failed build: one step, never on target
    assert failed == {"wall_s": 100.0, "target_s": 1200, "passed": False, "under_target": False}
    tests_failed = bench.total({"build": {"wall_s": 400.0, "rc": 0}, "tests": {"wall_s": 10.0, "rc": 7}})
    assert tests_failed["under_target"] is False


def test_a_change_that_is_no_kernel_source_is_refused_before_anything_runs(capsys):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(["--compiler-cache", "cc", "--change", "../etc/passwd"])
    assert e.value.code == 2 and "not a path inside" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.parse_args(["--compiler-cache", "cc", "--record", "../x"])


def test_the_shim_runs_this_checkouts_rvport(tmp_path):
    bin_ = bench.shim(tmp_path)
    p = subprocess.run([str(bin_ / "rvport"), "--version"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "rvport" in p.stdout.lower()


def test_the_job_runs_build_then_closure_tests_with_the_ci_files_options(tmp_path, monkeypatch):
    calls: list[tuple[list[str], dict]] = []
    tree_made: list[Path] = []

    def fake_rvport(args, *, log, env=None, command=None, cwd=None, **_kw):
        calls.append((list(command or ["rvport"]) + list(args), env or {}))
        if command is None:  # the build: one result.json per profile
            out = Path(args[args.index("--output") + 1])
            for p in ("rv64gc", "rvv256"):
                (out / p).mkdir(parents=True)
                stage = {"status": "ok", "timings": {"build": 10.0}, "artifacts": []}
                (out / p / "result.json").write_text(json.dumps({"duration_s": 20.0, "stages": [stage]}))
        else:
            log.write_text("[closure-tests] rv64gc: exit 0 in 5 s\n[closure-tests] rvv256: exit 0 in 6 s\n")
        return 0, 30.0

    def fake_unpack(recipe, dest, **_kw):
        (dest / "csrc" / "cpu").mkdir(parents=True)
        (dest / "csrc" / "cpu" / "activation.cpp").write_text("int x;\n")
        tree_made.append(dest)
        return dest

    monkeypatch.setattr(bench.common, "rvport", fake_rvport)
    monkeypatch.setattr(bench.common, "work_and_mirror", lambda work, **_kw: (work, work / "mirror"))
    monkeypatch.setattr(bench.common, "stop_on_signals", lambda: None)
    monkeypatch.setattr(bench.source_change, "unpack_main_source", fake_unpack)
    argv = ["--compiler-cache", str(tmp_path / "cc"), "--work", str(tmp_path), "--matrix-jobs", "2"]
    assert bench.main(argv) == 0
    (build, build_env), (tests, env) = calls
    # both steps see RVPORT_MATRIX_JOBS, as the CI files set it: the two profiles side by side
    assert build_env["RVPORT_MATRIX_JOBS"] == env["RVPORT_MATRIX_JOBS"] == "2"
    tree = str(tree_made[0])
    assert build[:6] == ["rvport", "--ci", "build", "vllm", "--source-tree", tree]
    assert "--compiler-cache" in build and build[build.index("--profile") + 1] == "rv64gc,rvv256"
    assert tests[:2] == ["bash", str(ROOT / "ci" / "closure-tests")]
    assert tests[2:9] == [
        "vllm",
        "rv64gc,rvv256",
        str(tmp_path / "out"),
        tree,
        str(tmp_path / "tests"),
        "tests",
        "--mode",
    ]
    assert env["PATH"].startswith(str(tmp_path / "bin"))
    assert "rvport_bench_change_" in (tree_made[0] / "csrc" / "cpu" / "activation.cpp").read_text()
    assert tests[-2:] == ["--compiler-cache", str(tmp_path / "cc")]
    # without --compiler-cache: the engine's own, and neither step names one
    calls.clear()
    (tmp_path / "w2").mkdir()
    assert bench.main(["--work", str(tmp_path / "w2"), "--profiles", "rv64gc,rvv256"]) == 0
    assert not any("--compiler-cache" in c for c, _ in calls)
