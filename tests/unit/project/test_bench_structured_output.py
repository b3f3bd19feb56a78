"""bench/structured_output.py: the two builds' commands (the rebuild really builds again, into an output of
its own), the figures read from result.json, and the comparison of the two builds' artifacts."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location(
    "bench_structured_output", ROOT / "bench" / "structured_output.py"
)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_the_rebuild_skips_every_cache_and_writes_an_output_of_its_own(tmp_path):
    kw = {"work": tmp_path, "profile": "rvv256", "mode": "auto", "expired": ["sid"]}
    (tmp_path / "out-llguidance-first").mkdir()  # what an earlier run left is gone
    first, a = bench.build_args("llguidance", "first", **kw)
    again, b = bench.build_args("llguidance", "rebuild", **kw)
    assert not first.exists() and first != again
    assert "--no-cache" not in a and b[-1] == "--no-cache"
    for out, args in ((first, a), (again, b)):
        assert args[:2] == ["build", "llguidance"] and args[args.index("--output") + 1] == str(out)
        assert args[args.index("--allow-expired-release") + 1] == "sid" and "auto" in args
    assert bench.RUNS == ("first", "rebuild")


def _out(tmp_path, run, wheel: bytes):
    out = tmp_path / f"out-llguidance-{run}"
    (out / "artifacts" / "llguidance").mkdir(parents=True, exist_ok=True)
    (out / "artifacts" / "llguidance" / "l.whl").write_bytes(wheel)
    stage = {
        "recipe": "llguidance",
        "id": "llguidance",
        "status": "ok",
        "mode": "accelerated",
        "timings": {"build": 12.5},
        "smoke": {"status": "passed", "output": ["...", "llguidance ok 1.7.6"]},
        "artifacts": [{"path": "llguidance/l.whl", "size": len(wheel), "sha256": "x", "extra": 1}],
    }
    other = {**stage, "recipe": "msgspec", "id": "msgspec", "timings": {"build": 1.0}}
    (out / "result.json").write_text(json.dumps({"duration_s": 20.0, "stages": [other, stage]}))
    return out


def test_figures_are_the_recipes_stage_and_the_artifacts_are_compared_byte_for_byte(tmp_path):
    figures = bench.stage_figures(_out(tmp_path, "first", b"wheel"), "llguidance")
    assert figures["build_s"] == 12.5 and figures["wall_s"] == 20.0 and figures["mode"] == "accelerated"
    assert figures["smoke"] == "passed" and figures["smoke_said"] == ["llguidance ok 1.7.6"]
    assert figures["artifacts"] == [{"path": "llguidance/l.whl", "size": 5, "sha256": "x"}]
    assert bench.identical(tmp_path, "llguidance") == {"ok": False, "why": "a build left no artifacts"}
    _out(tmp_path, "rebuild", b"wheel")
    assert bench.identical(tmp_path, "llguidance")["ok"] is True
    _out(tmp_path, "rebuild", b"other")
    assert bench.identical(tmp_path, "llguidance")["ok"] is False
    assert bench.stage_figures(tmp_path / "nothing", "llguidance") == {"status": "no result.json"}


def test_jobs_a_mirror_and_offline_reach_both_builds(tmp_path):
    kw = {"work": tmp_path, "profile": "rvv256", "mode": "cross", "expired": []}
    for run in bench.RUNS:
        _, args = bench.build_args("candle-binding", run, jobs=1, mirror=tmp_path / "m", offline=True, **kw)
        assert args[args.index("--jobs") + 1] == "1"
        assert args[args.index("--mirror") + 1] == str(tmp_path / "m")
        assert "--offline" in args and "--allow-expired-release" not in args
    _, plain = bench.build_args("candle-binding", "first", **kw)
    assert not {"--jobs", "--mirror", "--offline"} & set(plain)
    assert {"candle-binding", "router-nlp-binding"} <= set(bench.RECIPES)
