"""bench/default_config.py: the record's figures from a serving check's result.json."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_default_config", ROOT / "bench" / "default_config.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_the_figures_compare_the_default_configuration_with_eager():
    result = {
        "profile": "rv64gc",
        "passed": True,
        "seconds": 100.0,
        "image": {"tag": "t", "made": False, "seconds": 1.0},
        "steps": [
            {"name": "generate", "status": "passed", "seconds": 9.0,
             "result": {"inductor_env": {"TORCHINDUCTOR_CPP_MARCH": "rv64gc -mabi=lp64d"}}},
            {"name": "serve", "status": "passed", "seconds": 8.0, "result": {"text": " a"}},
            {"name": "serve-eager", "status": "passed", "seconds": 5.0, "result": {"text": " b"}},
        ],
        "figures": {
            "load_seconds": 300.0, "ttft_seconds": 0.2, "tokens_per_second": 20.0,
            "eager": {"load_seconds": 200.0, "ttft_seconds": 0.4, "tokens_per_second": 10.0},
        },
        "inductor": {"objects": 3, "arch": ["rv64i2p1"], "passed": True, "failed": [], "truncated": False,
                     "settings": {}},
        "load_average": {"mean": 2.0},
    }  # fmt: skip
    f = bench.figures_of(result, 0, 120.0)
    assert (
        f["default_over_eager"]["load_seconds"] == 1.5 and f["default_over_eager"]["tokens_per_second"] == 2.0
    )
    assert f["default_over_eager"]["decode_tokens_per_second"] is None  # not measured: no ratio
    assert f["steps"]["generate"] == {"status": "passed", "seconds": 9.0} and f["inductor"]["objects"] == 3
    assert f["inductor_env"]["TORCHINDUCTOR_CPP_MARCH"] == "rv64gc -mabi=lp64d"
    assert f["serve_text"] == {"default": " a", "eager": " b"} and f["exit_status"] == 0


def test_the_figures_keep_each_guided_backends_verdicts():
    backends = {
        "xgrammar": {"passed": True, "startup_seconds": 50.0, "requests": {
            "json": {"passed": True, "tokens": 40, "seconds": 3.0, "text": "{}"},
            "regex": {"passed": True, "tokens": 5, "seconds": 1.0}}},
        "outlines": {"passed": False, "error": "refused", "requests": {}},
    }  # fmt: skip
    result = {"steps": [{"name": "guided", "status": "failed", "result": {"backends": backends}}]}
    g = bench.figures_of(result, 10, 1.0)["guided"]
    assert g["xgrammar"]["requests"]["json"] == {"passed": True, "tokens": 40, "seconds": 3.0, "why": None}
    assert g["outlines"] == {"passed": False, "startup_seconds": None, "error": "refused", "requests": {}}


def test_the_figures_keep_the_tests_steps_counts_per_file_and_the_failed_ids():
    rec = {
        "status": "failed",
        "counts": {"passed": 1, "failed": 1, "skipped": 0, "error": 0},
        "files": [{"path": "tests/a.py", "select": None, "timeout": 9, "status": "failed",
                   "counts": {"passed": 1, "failed": 1}, "seconds": 3.0}],
        "cases": [{"id": "tests/a.py::t[1]", "outcome": "passed"},
                  {"id": "tests/a.py::t[2]", "outcome": "failed"}],
    }  # fmt: skip
    t = bench.figures_of({"steps": [{"name": "tests", "status": "failed", "tests": rec}]}, 10, 1.0)["tests"]
    assert t["failed"] == ["tests/a.py::t[2]"] and t["files"][0]["seconds"] == 3.0
    assert "timeout" not in t["files"][0] and bench.figures_of({"steps": []}, 0, 1.0)["tests"] is None


def run_main(tmp_path, monkeypatch, *extra: str) -> tuple[list, list]:
    """main() with the check faked: the serve-check commands it ran and the records it wrote."""
    calls, written = [], []
    out = tmp_path / "check"

    def fake_rvport(args, log):
        calls.append(args)
        out.mkdir()
        (out / "result.json").write_text('{"profile": "rvv256", "passed": true, "steps": []}')
        return 0, 1.0

    def fake_write(topic, name, **_kw):
        written.append((topic, name))
        return tmp_path / name

    monkeypatch.setattr(bench, "rvport", fake_rvport)
    monkeypatch.setattr(bench, "stop_on_signals", lambda: None)
    monkeypatch.setattr(bench, "write_record", fake_write)
    assert bench.main(["--wheelhouse", "wh", "--output", str(out), *extra]) == 0
    return calls, written


def test_the_record_takes_the_name_given_and_the_check_its_skips(tmp_path, monkeypatch):
    name = "default-config-rvv256-tests"
    calls, written = run_main(tmp_path, monkeypatch, "--skip-serve", "--record", name)
    assert "--skip-serve" in calls[0] and "--skip-tests" not in calls[0] and "--skip-generate" not in calls[0]
    assert written == [("closure", name)]
    (tmp_path / "b").mkdir()
    calls, _ = run_main(tmp_path / "b", monkeypatch, "--skip-serve", "--skip-generate", "--record", name)
    assert "--skip-serve" in calls[0] and "--skip-generate" in calls[0]


def test_the_record_is_named_for_the_checks_profile_by_default(tmp_path, monkeypatch):
    _, written = run_main(tmp_path, monkeypatch)
    assert written == [("closure", "default-config-rvv256")]


def test_a_record_name_that_is_not_a_plain_file_name_is_refused_before_the_check_runs(tmp_path, monkeypatch):
    import pytest

    monkeypatch.setattr(bench, "rvport", lambda *a, **k: pytest.fail("the check ran"))
    with pytest.raises(SystemExit) as e:
        bench.main(["--wheelhouse", "wh", "--output", str(tmp_path / "o"), "--record", "../x"])
    assert e.value.code == 2
