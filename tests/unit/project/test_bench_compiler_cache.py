"""bench/compiler_cache.py: each build's command (fresh output, the compiler cache's options per run), its
figures read from result.json, and the comparison of the builds' artifacts."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_compiler_cache", ROOT / "bench" / "compiler_cache.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_each_run_asks_for_its_compiler_cache_and_really_builds(tmp_path):
    kw = {"work": tmp_path, "ccache": tmp_path / "cc", "mirror": tmp_path / "m", "mode": "accelerated"}
    for run, expected in (
        ("none", ["--no-compiler-cache"]),
        ("cold", ["--compiler-cache", str(tmp_path / "cc")]),
    ):
        (tmp_path / f"out-msgspec-{run}").mkdir()  # what an earlier run left is gone
        out, args = bench.build_args("msgspec", run, profile="rvv256", **kw)
        assert not out.exists() and args[-len(expected) :] == expected
        assert "--no-cache" in args and args[args.index("--output") + 1] == str(out)
    assert bench.RUNS[:2] == ("cold", "warm")  # a run cut short still compares cold and warm


def _out(tmp_path, run, wheel: bytes):
    out = tmp_path / f"out-msgspec-{run}"
    (out / "artifacts" / "msgspec").mkdir(parents=True)
    (out / "artifacts" / "msgspec" / "m.whl").write_bytes(wheel)
    stage = {
        "status": "ok",
        "timings": {"build": 12.5},
        "compiler_cache": {"use": "dir", "hits": 1, "misses": 0},
        "artifacts": [{"path": "msgspec/m.whl", "size": len(wheel), "sha256": "x", "extra": 1}],
    }
    (out / "result.json").write_text(json.dumps({"duration_s": 20.0, "stages": [stage]}))
    return out


def test_figures_come_from_result_json_and_the_artifacts_are_compared_byte_for_byte(tmp_path):
    figures = bench.stage_figures(_out(tmp_path, "cold", b"wheel"))
    assert figures["build_s"] == 12.5 and figures["wall_s"] == 20.0 and figures["compiler_cache"]["hits"] == 1
    assert figures["artifacts"] == [{"path": "msgspec/m.whl", "size": 5, "sha256": "x"}]
    _out(tmp_path, "warm", b"wheel")
    assert bench.identical(tmp_path, "msgspec", ["cold", "warm"])["cold-warm"]["ok"] is True
    _out(tmp_path, "none", b"other")
    got = bench.identical(tmp_path, "msgspec", ["cold", "warm", "none"])
    assert got["cold-warm"]["ok"] and not got["none-cold"]["ok"] and not got["none-warm"]["ok"]
    assert bench.stage_figures(tmp_path / "nothing") == {"status": "no result.json"}
