"""bench/source_change.py: --change's file named inside the tree, the one line it appends (a declaration
that compiles in C and C++ and changes the preprocessed source, so ccache misses that file and only it), the
file's times and permissions kept, and what is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rvport.errors import UsageError
from tests.fixtures.hosttools import needs

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
import source_change as change  # noqa: E402  (bench/ is first on sys.path, as the benches have it)

KERNEL = "csrc/cpu/activation.cpp"
SOURCE = "#include <cstddef>\nint twice(int x) { return 2 * x; }"  # no newline at its end


def _tree(tmp_path: Path, text: str = SOURCE) -> Path:
    tree = tmp_path / "tree"
    (tree / "csrc" / "cpu").mkdir(parents=True)
    (tree / KERNEL).write_text(text)
    os.chmod(tree / KERNEL, 0o640)
    os.utime(tree / KERNEL, (1_700_000_000, 1_700_000_000))
    return tree


def test_the_line_is_appended_and_the_files_time_and_mode_are_kept(tmp_path):
    tree = _tree(tmp_path)
    got = change.apply_change(tree, KERNEL, "abc123")
    text = (tree / KERNEL).read_text()
    assert text == SOURCE + "\nextern int rvport_bench_change_abc123;\n"
    assert got.line == "extern int rvport_bench_change_abc123;" and got.file == KERNEL
    assert got.sha256_before != got.sha256_after and len(got.sha256_after) == 64
    st = (tree / KERNEL).stat()
    assert st.st_mtime == 1_700_000_000 and st.st_mode & 0o777 == 0o640  # SOURCE_DATE_EPOCH stays the tree's
    assert sorted(got.to_json()) == ["file", "line", "sha256_after", "sha256_before"]
    assert [p.name for p in (tree / "csrc" / "cpu").iterdir()] == ["activation.cpp"]  # no temporary left


@pytest.mark.parametrize(
    "name", ["", ".", "/abs/x.cpp", "../x.cpp", "csrc/../../x.cpp", "csrc\\cpu\\a.cpp", "setup.py", "README"]
)
def test_a_name_outside_the_tree_or_not_c_is_refused(name):
    with pytest.raises(UsageError) as e:
        change.check_name(name)
    assert "--change" in e.value.message and e.value.hint


def test_a_file_the_tree_lacks_or_a_link_is_refused(tmp_path):
    tree = _tree(tmp_path)
    with pytest.raises(UsageError, match="not a file of the tree"):
        change.apply_change(tree, "csrc/cpu/nothing.cpp", "t")
    (tree / "csrc" / "cpu" / "link.cpp").symlink_to(tree / KERNEL)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "k.cpp").write_text("int k;\n")
    (tree / "out").symlink_to(tmp_path / "outside")
    for name in ("csrc/cpu/link.cpp", "out/k.cpp"):
        with pytest.raises(UsageError, match="link"):
            change.apply_change(tree, name, "t")
    assert (tmp_path / "outside" / "k.cpp").read_text() == "int k;\n"  # nothing through a link is written
    with pytest.raises(ValueError):
        change.change_line("Not a token!")


@needs("gcc", "g++", "ccache")
def test_the_changed_file_compiles_cleanly_and_ccache_misses_it_alone(tmp_path):
    tree = _tree(tmp_path, "int twice(int x) { return 2 * x; }\n")
    (tree / "other.c").write_text("int thrice(int x) { return 3 * x; }\n")
    env = {**os.environ, "CCACHE_DIR": str(tmp_path / "ccache"), "CCACHE_CONFIGPATH": str(tmp_path / "conf")}

    def build() -> dict[str, int]:
        subprocess.run(["ccache", "-z"], env=env, check=True, capture_output=True)
        for src, cc in ((KERNEL, "g++"), ("other.c", "gcc")):
            subprocess.run(
                ["ccache", cc, "-Wall", "-Wextra", "-Werror", "-O2", "-c", src, "-o", f"{Path(src).name}.o"],
                cwd=tree,
                env=env,
                check=True,
                capture_output=True,
            )
        out = subprocess.run(["ccache", "--print-stats"], env=env, check=True, capture_output=True, text=True)
        stats = dict(line.split("\t") for line in out.stdout.splitlines() if "\t" in line)
        hits = int(stats["direct_cache_hit"]) + int(stats["preprocessed_cache_hit"])
        return {"hits": hits, "misses": int(stats["cache_miss"])}

    assert build() == {"hits": 0, "misses": 2}
    assert build() == {"hits": 2, "misses": 0}
    change.apply_change(tree, KERNEL, "t1")
    assert build() == {"hits": 1, "misses": 1}  # the changed file alone is compiled again
    change.apply_change(tree, "other.c", "t1")  # the same line compiles as C too
    change.apply_change(tree, "other.c", "t2")  # and twice
    assert build() == {"hits": 1, "misses": 1}
