"""bench/accelerated.py: the compile commands a build ran, read back from its stage log for the pure
replay."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_accelerated", ROOT / "bench" / "accelerated.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

LOG = """\
$ docker buildx build --progress plain --platform linux/riscv64 -f /tmp/ctx/Dockerfile --network none /tmp/ctx
#13 6.375   Building wheel for m (setup.py): started
#13 7.101   riscv64-linux-gnu-gcc -O2 -march=rv64gc -fPIC -I/usr/include/python3.13 -c src/m/_core.c \
-o build/temp.x/src/m/_core.o -g0
#13 9.2   riscv64-linux-gnu-gcc -shared -O2 build/temp.x/src/m/_core.o -o build/lib.x/m/_core.so
#13 9.3   /opt/xtc/bin/c++ -c a.cc
#13 9.5   x86_64-linux-gnu-g++ -std=c++17 -I./build/root/include -c "python/src/s w.cxx" -o build/t/s_w.o
"""


def test_only_compiles_with_an_output_are_replayed_in_the_source_directory(tmp_path):
    log = tmp_path / "stage.log"
    log.write_text(LOG)
    got = bench.setuptools_compiles(log)
    assert got == [
        "cd /src && mkdir -p build/temp.x/src/m && riscv64-linux-gnu-gcc -O2 -march=rv64gc -fPIC "
        "-I/usr/include/python3.13 -c src/m/_core.c -o build/temp.x/src/m/_core.o -g0",
        "cd /src && mkdir -p build/t && x86_64-linux-gnu-g++ -std=c++17 -I./build/root/include "
        '-c "python/src/s w.cxx" -o build/t/s_w.o',
    ]


def test_recipe_copies_build_verbosely_without_ccache_and_list_accelerated(tmp_path):
    recipes = bench.bench_recipes(tmp_path)
    text = (recipes / "msgspec.yaml").read_text()
    assert "python3 -m pip wheel -v " in text and 'CCACHE_DISABLE: "1"' in text and "accelerated" in text
