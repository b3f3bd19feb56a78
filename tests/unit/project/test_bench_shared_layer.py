"""bench/shared_layer.py: a BuildKit log's torch RUN is told found in the cache or run, other RUNs are not
counted, and the two arms are asked for by name."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_shared_layer", ROOT / "bench" / "shared_layer.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

TORCH_RUN = (
    "#5 [2/4] RUN --mount=type=secret,id=rvport-ca     set -eu;     apt-get $ca install -y "
    "--no-install-recommends libtorch-dev=2.14.1+dfsg-1 python3-torch=2.14.1+dfsg-1;     rm -rf x"
)
OTHER_RUN = "#6 [3/4] RUN --mount=type=secret,id=rvport-ca     apt-get install -y cmake python3-dev"


def _logs(tmp_path: Path, *texts: str) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    for i, text in enumerate(texts):
        (logs / f"image-{i}.log").write_text(text)
    return logs


def test_a_torch_run_found_in_the_cache_is_told_from_one_that_ran(tmp_path):
    cached = "\n".join([TORCH_RUN, "#5 CACHED", "", OTHER_RUN, "#6 0.5 Reading lists", "#6 DONE 9s"])
    ran = "\n".join([TORCH_RUN, "#5 12.0 Setting up python3-torch", "#5 DONE 300.1s", OTHER_RUN, "#6 CACHED"])
    assert sorted(bench.layer_runs(_logs(tmp_path, cached, ran))) == [False, True]


def test_a_log_without_the_torch_run_counts_nothing(tmp_path):
    assert bench.layer_runs(_logs(tmp_path, "\n".join([OTHER_RUN, "#6 CACHED"]))) == []


def test_both_arms_are_named_once_each_in_any_order():
    assert bench.parse_arms("unshared,shared") == ("unshared", "shared")
    for bad in ("shared", "shared,shared", "shared,unshared,shared", "shared,other"):
        with pytest.raises(argparse.ArgumentTypeError):
            bench.parse_arms(bad)


def test_the_bases_and_the_prefix_are_never_dropped(tmp_path, monkeypatch):
    tags = tmp_path / "tags"
    tags.write_text(
        "rvport/base:debian-sid-riscv64-1\nrvport/toolchain:vllm-build-2\nrvport/xtc:debian-sid-xtc-amd64-3\n"
        "rvport/toolchain:vllm-smoke-4\n"
    )
    calls: list[list[str]] = []
    monkeypatch.setattr(bench.subprocess, "run", lambda argv, **kw: calls.append(argv))
    assert bench.drop(tags) == ["rvport/toolchain:vllm-build-2", "rvport/toolchain:vllm-smoke-4"]
    assert ["docker", "builder", "prune", "--all", "--force"] in calls
    assert not any(a[:2] == ["docker", "rmi"] and a[-1].startswith(bench.KEPT) for a in calls)
