"""bench/vllm_mutations.py: each mutation replaces exactly the text it names (or stops the bench before any
build), keeps the file's time, and the job's outcome is read from result.json."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_vllm_mutations", ROOT / "bench" / "vllm_mutations.py")
bench = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = bench  # its dataclasses look their module up
spec.loader.exec_module(bench)


def test_each_kind_of_regression_is_an_exact_edit():
    names = [m.name for m in bench.MUTATIONS]
    assert names == ["exp-constant", "zvl128b", "scalar-fallback", "rvv-attention-off"]
    for m in bench.MUTATIONS:
        assert m.old != m.new and m.count >= 1 and not m.file.startswith("/") and ".." not in m.file


def test_a_mutation_replaces_every_occurrence_and_keeps_the_time(tmp_path):
    m = bench.Mutation(name="t", kind="k", file="a/b.cmake", old="zvl${V}b", new="zvl128b", count=2)
    (tmp_path / "a").mkdir()
    f = tmp_path / "a" / "b.cmake"
    f.write_text("x zvl${V}b\ny zvl${V}b\n")
    os.utime(f, (1_000_000, 1_000_000))
    edit = bench.apply(tmp_path, m)
    assert f.read_text() == "x zvl128b\ny zvl128b\n" and f.stat().st_mtime == 1_000_000
    assert edit["sha256_before"] != edit["sha256_after"] and edit["file"] == "a/b.cmake"
    with pytest.raises(ValueError, match="0 times, not 2"):  # applied once: the text is gone
        bench.apply(tmp_path, m)


def test_unknown_mutations_are_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(["--compiler-cache", "/x", "--only", "nope"])
    assert e.value.code == 2 and "unknown mutation nope" in capsys.readouterr().err
    args = bench.parse_args(["--compiler-cache", "/x", "--only", "zvl128b"])
    assert [m.name for m in args.mutations] == ["zvl128b"] and args.clean


def test_the_outcome_names_the_failed_verdicts_and_the_smoke(tmp_path):
    member = {"name": "vllm/_C.abi3.so", "verdict": "fail", "reasons": ["carries zvl128b, not zvl256b"]}
    artifact = {"path": "vllm/x.whl", "verdict": "fail", "reasons": [], "members": [member]}
    stage = {
        "status": "failed",
        "error": "verify failed",
        "smoke": {"status": "passed", "output": ["ok"], "without_vector": {"status": "passed"}},
        "verify": {"reports": [{"artifacts": [artifact, {"path": "y", "verdict": "pass"}]}]},
        "compiler_cache": {"hits": 200, "misses": 3, "uncacheable": 9},
    }
    (tmp_path / "result.json").write_text(json.dumps({"stages": [stage]}))
    got = bench.outcome(tmp_path)
    assert got["status"] == "failed" and got["smoke"] == "passed" and got["sigill"] == "passed"
    assert got["verify_failed"] == [
        {
            "path": "vllm/x.whl",
            "verdict": "fail",
            "reasons": ["vllm/_C.abi3.so: carries zvl128b, not zvl256b"],
        }
    ]
    assert got["compiler_cache"] == {"hits": 200, "misses": 3, "uncacheable": 9}
    assert bench.outcome(tmp_path / "none") == {"status": "no result.json"}
