"""bench/build_phases.py: the build step of a stage log cut at ninja's first and last progress lines, and the
stage log found among a build's logs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_build_phases", ROOT / "bench" / "build_phases.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

LOG = """\
#15 [build 10/11] COPY tree /src
#15 DONE 0.4s
#16 [build 11/11] RUN ...
#16 7.3 + python3 - <<WHEEL
#16 120.5   -- Generating CPU attention dispatch header
#16 151.0   [1/3] Building CXX object a.o
#16 9.9 [1/9] a line of another step's ninja, later in the file
#16 180.2   [2/3] Building CXX object b.o
#16 220.0   [3/3] Linking CXX shared module _C.abi3.so
#16 258.4 built /out/vllm-0.33.0+cpu-cp314-cp314-linux_riscv64.whl
#16 DONE 259.0s
"""


def test_the_step_is_cut_at_ninjas_first_and_last_lines(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text(LOG)
    ph = bench.phases(log)
    assert ph == {"before_ninja_s": 151.0, "ninja_s": 69.0, "after_ninja_s": 38.4, "step_s": 258.4}


def test_a_log_without_ninja_or_no_log_has_no_phases(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("#16 1.0 + cargo build\n#16 9.0 done\n")
    assert bench.phases(log) == {} and bench.phases(tmp_path / "missing.log") == {}


def test_the_stage_log_is_the_recipes_not_its_images(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("base-debian-sid.log", "vllm-cp314.smoke-image.log", "vllm-cp314.log"):
        (logs / name).write_text("")
    assert bench.stage_log(tmp_path, "vllm").name == "vllm-cp314.log"
