"""bench/inductor_disk.py: dpkg-query's lines read into packages, and the packages the system set brings
beyond the rest (alternatives, Provides, version and architecture qualifiers, what every system has)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_inductor_disk", ROOT / "bench" / "inductor_disk.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def row(name, size, depends="", pre="", provides="", status="ii ", essential="no", priority="optional"):
    return "\t".join((name, str(size), pre, depends, provides, status, essential, priority))


DPKG = "\n".join(
    (
        row("libc6:riscv64", 12000, priority="required"),
        row("g++", 10, depends="g++-16 (>= 16.1.0-3), cpp"),
        row("g++-16", 50, depends="gcc-16 (= 16.2.0-4), libstdc++-16-dev (= 16.2.0-4)"),
        row("gcc-16", 600, depends="libc6 (>= 2.38), binutils | binutils-multiarch"),
        row("cpp", 18),
        row("binutils", 1000),
        row("libstdc++-16-dev:riscv64", 116000, depends="libc6-dev | libc-dev"),
        row("libc6-dev:riscv64", 33000, depends="libc6 (= 2.43-7)", provides="libc-dev (= 2.43-7)"),
        row("python3-numpy", 20000, depends="libc6, python3:any (>= 3.14~)"),
        row("python3", 100),
        row("removed-one", 999, status="rc "),
        "a line that is not dpkg's",
    )
)


def test_parse_keeps_installed_packages_without_their_qualifiers():
    pkgs = bench.parse(DPKG)
    assert "removed-one" not in pkgs
    assert pkgs["libstdc++-16-dev"]["size_kib"] == 116000
    assert pkgs["gcc-16"]["groups"] == [["libc6"], ["binutils", "binutils-multiarch"]]
    assert pkgs["python3-numpy"]["groups"] == [["libc6"], ["python3"]]
    assert pkgs["libc6-dev"]["provides"] == ["libc-dev"]
    assert pkgs["libc6"]["base"] and not pkgs["g++"]["base"]


def test_closure_follows_the_first_installed_alternative_and_provides():
    pkgs = bench.parse(DPKG)
    got = bench.closure(["g++"], pkgs)
    assert got == {"g++", "g++-16", "gcc-16", "cpp", "binutils", "libstdc++-16-dev", "libc6-dev", "libc6"}
    assert bench.closure(["not-installed"], pkgs) == set()


def test_what_the_system_set_adds_leaves_out_the_rest_and_every_systems_own():
    pkgs = bench.parse(DPKG)
    everywhere = [p for p, v in pkgs.items() if v["base"]]
    others = bench.closure(["python3-numpy", *everywhere], pkgs)
    added = bench.closure(["g++"], pkgs) - others
    assert added == {"g++", "g++-16", "gcc-16", "cpp", "binutils", "libstdc++-16-dev", "libc6-dev"}
