"""Files written whole (rvport/fileio.py): the target appears complete or not at all, with 0666 less the
umask."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rvport.errors import BuildFailed, ExitCode, RecipeError, UsageError
from rvport.fileio import Ends, atomic_file, atomic_write_text, read_ends, read_json, read_regular
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


# -------------------------------------------------------------------- bounded reads of user-named files
def test_special_files_are_refused_at_once_not_waited_on_or_read(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: a blocking open would wait for ever
    for path, kind in ((fifo, "FIFO"), (Path("/dev/zero"), "character device"), (tmp_path, "directory")):
        with pytest.raises(UsageError, match=f"is a {kind}: only regular files are read") as e:
            read_regular(path, limit=1024, what="provenance")
        assert str(path) in e.value.message and e.value.exit_code == ExitCode.USAGE


def test_a_regular_file_is_read_up_to_its_cap_and_refused_over_it(tmp_path):
    f = tmp_path / "doc.json"
    f.write_bytes(b"x" * 100)
    assert read_regular(f, limit=100) == b"x" * 100
    with pytest.raises(RecipeError, match="100 bytes, over the cap of 99"):
        read_regular(f, limit=99, error=RecipeError)
    with pytest.raises(UsageError, match="cannot read file .*missing"):
        read_regular(tmp_path / "missing", limit=99)
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as out:
        out.truncate(8 << 30)  # 8 GiB of nothing: refused from its size, not read
    with pytest.raises(UsageError, match="over the cap"):
        read_json(sparse)


def test_a_log_is_read_whole_under_its_caps_else_by_its_ends_with_what_was_left_out(tmp_path):
    f = tmp_path / "x.log"
    f.write_bytes(b"0123456789")
    assert read_ends(f, head=4, tail=6) == Ends(head=b"0123456789", size=10)
    got = read_ends(f, head=2, tail=3)
    assert got == Ends(head=b"01", tail=b"789", skipped=5, size=10) and got.truncated
    assert read_ends(f, head=0, tail=3) == Ends(head=b"", tail=b"789", skipped=7, size=10)
    sparse = tmp_path / "sparse.log"
    with open(sparse, "wb") as out:
        out.truncate(8 << 30)  # 8 GiB: only its ends are read
        out.seek((8 << 30) - 3)
        out.write(b"end")
    big = read_ends(sparse, head=16, tail=5)
    assert big.tail == b"\0\0end" and big.skipped == (8 << 30) - 21 and len(big.head) == 16


def test_a_log_that_is_a_link_or_not_a_regular_file_is_refused_when_asked(tmp_path):
    target = tmp_path / "secret"
    target.write_text("not yours")
    link = tmp_path / "x.log"
    link.symlink_to(target)
    assert read_ends(link, head=0, tail=100).head == b"not yours"  # links are followed by default
    with pytest.raises(BuildFailed, match="cannot read smoke log .*x.log") as e:
        read_ends(link, head=0, tail=100, what="smoke log", error=BuildFailed, follow=False)
    assert e.value.exit_code == ExitCode.BUILD_FAILED
    with pytest.raises(BuildFailed, match="cannot read status .*x.log"):
        read_regular(link, limit=100, what="status", error=BuildFailed, follow=False)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="is a FIFO"):
        read_ends(fifo, head=0, tail=100)


def test_json_too_deep_bad_or_not_utf8_is_a_clear_error_not_a_recursion_error(tmp_path):
    f = tmp_path / "d.json"
    for text, want in (
        ("[" * 100_000 + "]" * 100_000, "nests deeper than 64 levels"),
        ('{"a":' * 65 + "1" + "}" * 65, "nests deeper than 64 levels"),
        ('{"a": [1,\n 2,]}', r"d.json:2: not JSON"),
    ):
        f.write_text(text)
        with pytest.raises(UsageError, match=want):
            read_json(f, what="plan")
    f.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(UsageError, match="not UTF-8"):
        read_json(f)
    f.write_text('{"a":' * 64 + "1" + "}" * 64)
    assert read_json(f) is not None
