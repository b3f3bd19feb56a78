"""bench/vllm.py: each build starts from a fresh cache that still knows the warm base images, and the wheels
it made are reported by size and sha256."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_vllm", ROOT / "bench" / "vllm.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_a_fresh_cache_keeps_the_base_records_only(tmp_path):
    warm = tmp_path / "warm"
    (warm / "bases").mkdir(parents=True)
    (warm / "bases" / "debian-sid-riscv64.json").write_text("{}")
    (warm / "sha256").mkdir()
    (warm / "sha256" / "ab").write_text("a source")
    work = tmp_path / "work"
    old = bench.fresh_cache(work, "vllm-rvv256-accelerated", warm)
    (old / "trees").mkdir()  # what an earlier run left is gone the next time
    cache = bench.fresh_cache(work, "vllm-rvv256-accelerated", warm)
    assert sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*")) == [
        "bases",
        "bases/debian-sid-riscv64.json",
    ]


def test_wheels_are_reported_by_size_and_digest(tmp_path):
    whl = tmp_path / "artifacts" / "vllm" / "vllm-0.33.0+cpu-cp314-cp314-linux_riscv64.whl"
    whl.parent.mkdir(parents=True)
    whl.write_bytes(b"PK wheel")
    (tmp_path / "artifacts" / "vllm" / "result.txt").write_text("not a wheel")
    assert bench.wheels(tmp_path) == [
        {"name": whl.name, "bytes": 8, "sha256": hashlib.sha256(b"PK wheel").hexdigest()}
    ]
