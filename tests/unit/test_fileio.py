"""Files written whole (rvport/fileio.py): the target appears complete or not at all, with 0666 less the umask."""

from __future__ import annotations

import os

import pytest

from rvport.fileio import atomic_file, atomic_write_text
from rvport.sources.cache import atomic_copy


def test_a_file_written_whole_follows_the_umask_and_a_failed_write_leaves_nothing(tmp_path):
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "a" / "x.json", "{}\n")
        with pytest.raises(KeyboardInterrupt):
            with atomic_file(tmp_path / "a" / "y.json") as f:
                f.write(b"half")
                raise KeyboardInterrupt
    finally:
        os.umask(old)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["x.json"]
    assert (tmp_path / "a" / "x.json").read_text() == "{}\n"
    assert (tmp_path / "a" / "x.json").stat().st_mode & 0o777 == 0o640


def test_atomic_copy_is_a_file_written_whole(tmp_path):
    (tmp_path / "src").write_bytes(b"\0" * 300_000)
    atomic_copy(tmp_path / "src", tmp_path / "d" / "dest")
    assert (tmp_path / "d" / "dest").read_bytes() == b"\0" * 300_000 and len(
        list((tmp_path / "d").iterdir())
    ) == 1
    with pytest.raises(FileNotFoundError):
        atomic_copy(tmp_path / "missing", tmp_path / "d" / "other")
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["dest"]
