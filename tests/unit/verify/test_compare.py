"""rvport.verify.compare: two builds' artifacts, identical or not, and where they differ (no Docker)."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

from rvport.verify.compare import compare_dirs, explain
from tests.fixtures.hosttools import need


def _wheel(path: Path, members: dict[str, bytes], when=(2024, 1, 2, 3, 4, 6), order=None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name in order or members:
            info = zipfile.ZipInfo(name, date_time=when)
            info.external_attr = 0o644 << 16
            z.writestr(info, members[name])
    return path


def _obj(tmp: Path, name: str, body: str) -> bytes:
    need("gcc")
    src = tmp / f"{name}.c"
    src.write_text(f'int f(void) {{ {body} }}\nconst char *where = "{name}";\n')
    subprocess.run(["gcc", "-O2", "-c", str(src), "-o", str(tmp / f"{name}.o")], check=True)
    return (tmp / f"{name}.o").read_bytes()


def test_identical_dirs_are_ok(tmp_path):
    for d in ("a", "b"):
        _wheel(tmp_path / d / "m" / "m-1-py3-none-any.whl", {"m/__init__.py": b"x = 1\n"})
    result = compare_dirs(tmp_path / "a", tmp_path / "b")
    assert result.ok and [a for a, _ in result.identical] == ["m/m-1-py3-none-any.whl"]


def test_nothing_to_compare_is_not_ok(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert not compare_dirs(tmp_path / "a", tmp_path / "b").ok


def test_zip_time_order_and_member_contents_are_named(tmp_path):
    members = {"m/__init__.py": b"x = 1\n", "m/data.txt": b"abc\n"}
    a = _wheel(tmp_path / "a" / "w.whl", members)
    b = _wheel(
        tmp_path / "b" / "w.whl",
        {**members, "m/data.txt": b"abd\n"},
        when=(2025, 1, 2, 3, 4, 6),
        order=["m/data.txt", "m/__init__.py"],
    )
    (d,) = compare_dirs(tmp_path / "a", tmp_path / "b").differences
    assert d.artifact == "w.whl" and d.first != d.second
    text = "\n".join(d.details)
    assert "member order differs" in text
    assert "m/__init__.py: time 2024-01-02 03:04:06 vs 2025-01-02 03:04:06" in text
    assert "m/data.txt: contents differ" in text
    assert a.exists() and b.exists()


def test_elf_members_of_a_wheel_are_compared_by_section(tmp_path):
    one, two = _obj(tmp_path, "same", "return 1;"), _obj(tmp_path, "same2", "return 2;")
    lines = explain(
        "x.whl",
        _zip_bytes(tmp_path / "1.whl", {"m/_core.so": one}),
        _zip_bytes(tmp_path / "2.whl", {"m/_core.so": two}),
    )
    assert any(ln.startswith("m/_core.so: section .text") for ln in lines), lines
    assert any(".rodata" in ln for ln in lines), lines  # the embedded string differs too


def test_missing_artifacts_are_differences(tmp_path):
    _wheel(tmp_path / "a" / "w.whl", {"a": b"1"})
    (tmp_path / "b").mkdir()
    (d,) = compare_dirs(tmp_path / "a", tmp_path / "b").differences
    assert d.second is None and d.details == ("only in the first build",)


def _zip_bytes(path: Path, members: dict[str, bytes]) -> bytes:
    return _wheel(path, members).read_bytes()
