"""bench/vllm.py: each build starts from a fresh cache that still knows the warm base images, and the wheels
it made are reported by size and sha256."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
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


def test_the_smoke_image_wait_is_shown_beside_the_other_steps():
    t = {"fetch": 0.5, "images": 12.0, "build": 900.5, "smoke_image": 3.4, "smoke": 40.0}
    assert bench.steps(t) == "images=12.0s smoke_image=3.4s build=900.5s"
    assert bench.steps({}) == "images=0.0s smoke_image=0.0s build=0.0s"  # a build that left no result.json
    run = {
        "profile": "rvv256",
        "mode": "accelerated",
        "rc": 0,
        "wall": 1000.0,
        "timings": t,
        "verify": True,
        "smoke": "passed",
        "load": {"min": 1.5, "max": 2.5, "mean": 2.0},
    }
    header, row = bench.table([run])
    assert header.split()[:6] == ["build", "rc", "wall", "images", "smoke_image", "build"]
    assert row.split()[4:10] == ["1000.0s", "12.0s", "3.4s", "900.5s", "ok", "passed"]
    # each figure ends under its column's name
    for name, figure in (("images", "12.0s"), ("smoke_image", "3.4s"), ("build", "900.5s")):
        assert header.rindex(name) + len(name) == row.index(figure) + len(figure)
