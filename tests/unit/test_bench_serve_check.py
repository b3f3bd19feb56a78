"""bench/serve_check.py: what it reads from a wheelhouse and from its steps' logs (the container run itself is
measured, not unit-tested: it needs Docker, QEMU and a wheelhouse)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_serve_check", ROOT / "bench" / "serve_check.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_the_debian_list_skips_comments_and_blanks(tmp_path):
    (tmp_path / "debian-packages.txt").write_text(
        "# apt-get install these\npython3-numpy=1:2.4.6+ds-5+b1\n\n"
    )
    assert bench.debian_list(tmp_path) == ["python3-numpy=1:2.4.6+ds-5+b1"]


def test_a_step_result_is_the_last_json_line_of_its_log(tmp_path):
    log = tmp_path / "serve-generate.log"
    log.write_text(
        'INFO {"not": "json"\n{"tokens": 1}\nnoise\n{"tokens": 8, "ttft_seconds": 1.5}\nWARNING bye\n'
    )
    assert bench._last_json(log) == {"tokens": 8, "ttft_seconds": 1.5}
    log.write_text("Traceback (most recent call last):\n")
    assert bench._last_json(log) == {}


def test_a_step_that_fails_or_times_out_is_not_ok(tmp_path):
    ok = bench._step(tmp_path, "a", [sys.executable, "-c", "print('{}')"], 60)
    bad = bench._step(tmp_path, "b", [sys.executable, "-c", "raise SystemExit(3)"], 60)
    slow = bench._step(tmp_path, "c", [sys.executable, "-c", "import time; time.sleep(30)"], 0.5)
    assert (ok["ok"], bad["ok"], bad["rc"], slow["ok"], slow["timed_out"]) == (True, False, 3, False, True)
    assert (tmp_path / "serve-a.log").read_text() == "{}\n"


def test_the_host_refuses_a_directory_that_is_not_a_wheelhouse(tmp_path):
    with pytest.raises(SystemExit, match="is not a wheelhouse"):
        bench.main(["--wheelhouse", str(tmp_path), "--work", str(tmp_path / "w"), "--image", "x"])


def test_the_tiny_model_is_the_issues(tmp_path):
    t = bench.TINY
    assert (t["hidden_size"], t["num_hidden_layers"], t["num_attention_heads"], t["vocab_size"]) == (
        64,
        2,
        4,
        32000,
    )
    assert json.loads(json.dumps(bench.RUN_ENV))["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
