"""bench/compiler_cache.py: each build's command (fresh output, the compiler cache's options per run), its
figures read from result.json, and the comparison of the builds' artifacts."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

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


def test_no_smoke_reaches_every_build_and_the_record(tmp_path):
    kw = {"work": tmp_path, "ccache": tmp_path / "cc", "mirror": tmp_path / "m", "mode": "accelerated"}
    for run in ("cold", "warm", "none"):
        assert "--no-smoke" not in bench.build_args("msgspec", run, profile="rvv256", **kw)[1]
        assert "--no-smoke" in bench.build_args("msgspec", run, profile="rvv256", smoke=False, **kw)[1]
    assert bench.parse_args([]).smoke is True and bench.parse_args(["--no-smoke"]).smoke is False
    figs = bench.figures(
        started="t", profile="rv64gc", mode="accelerated", runs=["cold"], results={}, smoke=False
    )
    assert figs["smoke"] is False


def _out(tmp_path, run, wheel: bytes, recipe: str = "msgspec"):
    out = tmp_path / f"out-{recipe}-{run}"
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


def test_runs_default_to_cold_warm_none_and_run_in_their_order():
    args = bench.parse_args([])
    assert (
        args.runs == ("cold", "warm", "none") and args.recipes == list(bench.RECIPES) and args.change is None
    )
    args = bench.parse_args(["vllm", "--runs", "change, cold", "--change", "csrc/cpu/./activation.cpp"])
    assert args.runs == ("cold", "change") and args.change == "csrc/cpu/activation.cpp"
    assert bench.parse_args(["msgspec", "--runs", "none"]).runs == ("none",)
    warm = bench.parse_args(["vllm", "--runs", "change", "--change", "a.cpp", "--compiler-cache", "cc"])
    assert warm.runs == ("change",) and warm.compiler_cache.is_absolute()  # a warm DIR kept from before


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--runs", "cold,hot"], "unknown run 'hot'"),
        (["--runs", "cold,"], "unknown run ''"),
        (["--runs", "cold,cold"], "run cold named twice"),
        (["--runs", "warm,none"], "warm needs cold"),
        (["vllm", "--runs", "change", "--change", "a.cpp"], "change needs cold"),
        (["vllm", "--runs", "cold,change", "--compiler-cache", "/c"], "cold starts from a new"),
        (["vllm", "--runs", "cold,change"], "needs --change FILE"),
        (["vllm", "msgspec", "--runs", "cold,change", "--change", "a.cpp"], "for one recipe"),
        (["vllm", "--change", "a.cpp"], "add change to --runs"),
        (["vllm", "--runs", "cold,change", "--change", "../a.cpp"], "not a path inside"),
        (["vllm", "--runs", "cold,change", "--change", "setup.py"], "not a C or C++ file"),
    ],
)
def test_a_bad_command_line_exits_2_with_one_line(argv, said, capsys):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(argv)
    assert e.value.code == 2 and said in capsys.readouterr().err


def test_the_change_run_builds_its_tree_with_the_cold_cache_and_without_no_cache(tmp_path):
    kw = {"work": tmp_path, "ccache": tmp_path / "cc", "mirror": tmp_path / "m", "mode": "accelerated"}
    out, args = bench.build_args("vllm", "change", profile="rvv256", tree=tmp_path / "tree", **kw)
    assert out == tmp_path / "out-vllm-change"
    assert args[args.index("--source-tree") + 1] == str(tmp_path / "tree")
    assert args[args.index("--compiler-cache") + 1] == str(tmp_path / "cc")
    assert "--no-cache" not in args  # the change bypasses the stage cache, as in a pull request's job
    with pytest.raises(ValueError):
        bench.build_args("vllm", "change", profile="rvv256", **kw)


def test_the_record_is_written_after_each_build_and_never_compares_the_change(tmp_path, monkeypatch):
    """main with the builds faked: the record holds each run as it ends, the change's file and line, and
    the comparisons of cold, warm and none only."""
    records = tmp_path / "records"
    monkeypatch.setattr(bench.common, "RECORDS", records)
    monkeypatch.setattr(bench.common, "rvport", lambda args, log: (0, 0.1))  # the fetch
    path = records / "compiler-cache" / "t.json"

    def tree(recipe, name, *, work, warm, mirror):
        return work / "tree", {"tree": str(work / "tree"), "file": name, "line": "extern int x;"}

    seen = []

    def one(recipe, run, **kw):
        if seen:  # what the earlier builds measured is already in the record
            done = json.loads(path.read_text())["figures"]["recipes"][recipe]["runs"]
            assert sorted(done) == sorted(seen)  # (the record sorts its keys)
        assert ("tree" in kw) == (run == "change")
        seen.append(run)
        _out(tmp_path, run, b"changed" if run == "change" else b"wheel", recipe)
        load = {"min": 1.0, "mean": 2.0, "max": 3.0, "samples": 4}
        return {"rc": 0, "load": load, **bench.stage_figures(tmp_path / f"out-{recipe}-{run}")}

    monkeypatch.setattr(bench, "make_change_tree", tree)
    monkeypatch.setattr(bench, "one", one)
    argv = ["vllm", "--runs", "cold,warm,change,none", "--change", "csrc/cpu/activation.cpp"]
    argv += ["--work", str(tmp_path), "--record", "t"]
    assert bench.main(argv) == 0  # the change's other wheel is no failure
    doc = json.loads(path.read_text())
    assert doc["command"].startswith("python bench/compiler_cache.py vllm --runs cold,warm,change,none")
    assert {"commit", "machine", "load", "date"} <= set(doc) and doc["load"]["samples"] == 16
    figures = doc["figures"]
    assert figures["runs"] == ["cold", "warm", "change", "none"] and seen == figures["runs"]
    vllm = figures["recipes"]["vllm"]
    assert vllm["change"]["file"] == "csrc/cpu/activation.cpp" and vllm["change"]["line"] == "extern int x;"
    assert sorted(vllm["identical"]) == ["cold-warm", "none-cold", "none-warm"]
    assert all(v["ok"] for v in vllm["identical"].values())
    assert vllm["runs"]["change"]["artifacts"][0]["size"] == len(b"changed")
