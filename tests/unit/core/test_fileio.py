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
    assert read_ends(link, head=0, tail=100).head == b"not yours"  # a link inside its directory is followed
    with pytest.raises(BuildFailed, match="smoke log .*x.log is a symbolic link: not followed") as e:
        read_ends(link, head=0, tail=100, what="smoke log", error=BuildFailed, follow=False)
    assert e.value.exit_code == ExitCode.BUILD_FAILED
    with pytest.raises(BuildFailed, match="status .*x.log is a symbolic link"):
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


def test_a_link_is_followed_only_inside_the_directory_the_file_belongs_to(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("SECRET-b3c1 root:x:0:0")
    d = tmp_path / "recipes"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "real.yaml").write_text("name: x\n")
    (d / "in.yaml").symlink_to("sub/real.yaml")
    (d / "out.yaml").symlink_to(secret)
    (d / "up.yaml").symlink_to("../secret")
    (d / "zero.json").symlink_to("/dev/zero")
    (d / "chain.yaml").symlink_to("in.yaml")
    assert read_regular(d / "in.yaml", limit=100, within=d) == b"name: x\n"
    assert read_regular(d / "chain.yaml", limit=100) == b"name: x\n"
    for name in ("out.yaml", "up.yaml", "zero.json"):
        with pytest.raises(RecipeError, match="symbolic link leading out of") as e:
            read_regular(d / name, limit=100, what="recipe", error=RecipeError)
        assert "SECRET" not in str(e.value) + str(e.value.hint)
    with pytest.raises(UsageError, match="symbolic link leading out of"):
        read_json(d / "zero.json")
    # a file of a subdirectory may link within the catalogue's directory (`within`), not beside itself
    (d / "top.yaml").write_text("name: top\n")
    (d / "sub" / "back.yaml").symlink_to("../top.yaml")
    assert read_regular(d / "sub" / "back.yaml", limit=100, within=d) == b"name: top\n"
    with pytest.raises(UsageError, match="leading out of the directory that holds it"):
        read_regular(d / "sub" / "back.yaml", limit=100)


def test_a_directory_named_must_exist_be_a_directory_and_not_link_out(tmp_path):
    from rvport.fileio import user_dir

    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "in").symlink_to("d")
    (tmp_path / "out").symlink_to("/etc")
    assert user_dir(tmp_path / "d") == tmp_path / "d"
    assert user_dir(tmp_path / "in") == tmp_path / "in"
    for name, why in (
        ("missing", "not found"),
        ("f", "is a regular file, not a directory"),
        ("fifo", "is a FIFO, not a directory"),
        ("out", "is a symbolic link leading out of"),
    ):
        with pytest.raises(RecipeError, match=f"lock directory .*{name} {why}"):
            user_dir(tmp_path / name, what="lock directory", error=RecipeError)


def test_a_json_integer_too_long_for_python_is_a_located_refusal(tmp_path):
    f = tmp_path / "result.json"
    f.write_text('{"sha": "' + "1" * 64 + '",\n "n": ' + "9" * 5000 + "}")
    with pytest.raises(UsageError, match=r"result.json:2: result holds an integer of more than 20 digits"):
        read_json(f, what="result")
    f.write_text('{"n": -18446744073709551616, "m": 1e999999}')  # 20 digits and a float: read
    assert read_json(f) == {"n": -18446744073709551616, "m": float("inf")}
