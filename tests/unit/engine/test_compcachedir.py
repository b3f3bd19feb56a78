"""A compiler cache directory on the host (rvport/engine/compcachedir.py): refused, ignored, imported and
exported atomically; no Docker."""

from __future__ import annotations

import errno
import os

import pytest

from rvport.engine import compcache, compcachedir
from rvport.errors import UsageError
from rvport.vocab import Mode

ENTRY = compcache.toolchain_id(Mode.ACCELERATED, {"gcc-14": "14.2.0-19"})
LIMIT = 64 * compcache.MiB


def _ccache_dir(root, files=None):
    """A directory shaped like a ccache directory (its subdirectories, result files, stats)."""
    for rel, text in (files or {"3/stats": "direct_cache_hit 1\n", "a/b/cdef0123R": "object"}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _exported(tmp_path, name="exp", files=None):
    return _ccache_dir(tmp_path / name, files)


def test_a_new_directory_is_made_with_its_marker_and_an_empty_one_is_taken(tmp_path):
    d = compcachedir.check_dir(tmp_path / "new" / "cache")
    assert (d / compcachedir.MARKER).is_file() and d.is_absolute()
    assert compcachedir.check_dir(d) == d  # its own marker: taken again
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (compcachedir.check_dir(empty) / compcachedir.MARKER).is_file()


@pytest.mark.parametrize(
    "case", ["file", "link", "not-ours", "foreign-marker", "marker-link", "others-write"]
)
def test_what_is_not_an_rvport_cache_directory_of_this_user_is_refused(tmp_path, case):
    path = tmp_path / "c"
    if case == "file":
        path.write_text("a file")
    elif case == "link":
        (tmp_path / "elsewhere").mkdir()
        path.symlink_to(tmp_path / "elsewhere")
    elif case == "not-ours":
        path.mkdir()
        (path / "somebody's.txt").write_text("data")
    elif case == "foreign-marker":
        path.mkdir()
        (path / compcachedir.MARKER).write_text('{"schema": 9, "kind": "rvport-compiler-cache"}')
    elif case == "marker-link":
        path.mkdir()
        (tmp_path / "m.json").write_text("{}")
        (path / compcachedir.MARKER).symlink_to(tmp_path / "m.json")
    else:
        path.mkdir()
        path.chmod(0o777)
    with pytest.raises(UsageError) as e:
        compcachedir.check_dir(path)
    assert str(path) in e.value.message
    assert {
        "file": "is not a directory",
        "link": "symbolic link",
        "not-ours": "not an rvport compiler cache",
        "foreign-marker": "not one this rvport writes",
        "marker-link": "symbolic link",
        "others-write": "writable by every user",
    }[case] in e.value.message
    if case == "not-ours":
        assert (path / "somebody's.txt").read_text() == "data"  # nothing of it touched


def test_another_users_directory_is_refused(tmp_path, monkeypatch):
    d = compcachedir.check_dir(tmp_path / "c")
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(d).st_uid + 1)
    with pytest.raises(UsageError, match="belongs to another user"):
        compcachedir.check_dir(d)


def test_export_then_import_round_trips_and_only_the_current_generation_is_kept(tmp_path):
    d = compcachedir.check_dir(tmp_path / "c")
    first = compcachedir.import_into(tmp_path / "ctx1", d, ENTRY, max_size=LIMIT)
    assert first == {"status": "empty", "files": 0, "bytes": 0} and (tmp_path / "ctx1").is_dir()
    done = compcachedir.export(_exported(tmp_path, "e1"), d, ENTRY, max_size=LIMIT)
    assert done["status"] == "exported" and done["files"] == 2
    done2 = compcachedir.export(
        _exported(tmp_path, "e2", {"3/stats": "x", "f/new": "obj2"}), d, ENTRY, max_size=LIMIT
    )
    gens = [p.name for p in (d / ENTRY).iterdir() if p.name != "current"]
    assert gens == [done2["generation"]]  # the previous generation removed once the new one is current
    got = compcachedir.import_into(tmp_path / "ctx2", d, ENTRY, max_size=LIMIT)
    assert got["status"] == "imported" and got["generation"] == done2["generation"]
    assert (tmp_path / "ctx2" / "f" / "new").read_text() == "obj2"


def test_two_builds_side_by_side_from_one_generation_keep_both_their_objects(tmp_path):
    """A matrix's profiles built side by side (--matrix-jobs) import one generation and export one after the
    other: the second export links in what the first added, so neither build's objects are lost."""
    d = compcachedir.check_dir(tmp_path / "c")
    base = compcachedir.export(_exported(tmp_path, "e0"), d, ENTRY, max_size=LIMIT)
    for n in (1, 2):
        got = compcachedir.import_into(tmp_path / f"ctx{n}", d, ENTRY, max_size=LIMIT)
        assert got["generation"] == base["generation"]
    first = compcachedir.export(
        _exported(tmp_path, "e1", {"3/stats": "one", "a/b/cdef0123R": "object", "1/rv64gcR": "first"}),
        d, ENTRY, max_size=LIMIT, imported=base["generation"],
    )  # fmt: skip
    assert "merged" not in first  # the live generation was the one it imported
    second = compcachedir.export(
        _exported(tmp_path, "e2", {"3/stats": "two", "a/b/cdef0123R": "object", "2/rvv256R": "second"}),
        d, ENTRY, max_size=LIMIT, imported=base["generation"],
    )  # fmt: skip
    assert second["merged"] == 1  # the first build's new object; the shared ones and stats are its own
    compcachedir.import_into(tmp_path / "after", d, ENTRY, max_size=LIMIT)
    after = tmp_path / "after"
    assert (after / "1" / "rv64gcR").read_text() == "first" and (
        after / "2" / "rvv256R"
    ).read_text() == "second"
    assert (after / "3" / "stats").read_text() == "two"
    # a live generation (20 bytes) that would take the merged one past what an import takes is left out
    third = compcachedir.export(
        _exported(tmp_path, "e3", {"9/bigR": "x" * 110}), d, ENTRY, max_size=60, imported=base["generation"]
    )
    assert third["status"] == "exported" and "merged" not in third


def test_a_full_disk_during_export_loses_nothing(tmp_path, monkeypatch):
    d = compcachedir.check_dir(tmp_path / "c")
    good = compcachedir.export(_exported(tmp_path, "e1"), d, ENTRY, max_size=LIMIT)

    def full(src, dest):  # a copy that fills the disk half way (another filesystem: no rename)
        os.makedirs(dest)
        (dest / "half").write_text("partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    src = _exported(tmp_path, "e2")
    real_rename = os.rename

    def cross_device(a, b):
        if str(a) == str(src):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real_rename(a, b)

    monkeypatch.setattr(compcachedir.os, "rename", cross_device)
    failed = compcachedir.export(src, d, ENTRY, max_size=LIMIT, copy=full)
    monkeypatch.undo()
    assert failed["status"] == "failed" and "no space left on" in failed["reason"]
    assert "previous cache is kept" in failed["reason"]
    assert sorted(p.name for p in (d / ENTRY).iterdir()) == sorted(["current", good["generation"]])
    got = compcachedir.import_into(tmp_path / "ctx", d, ENTRY, max_size=LIMIT)
    assert got["status"] == "imported" and got["generation"] == good["generation"]


def test_an_interrupted_export_leaves_the_previous_generation_current(tmp_path):
    d = compcachedir.check_dir(tmp_path / "c")
    good = compcachedir.export(_exported(tmp_path, "e1"), d, ENTRY, max_size=LIMIT)
    # what an export killed while copying leaves: a half-written .tmp- generation
    half = d / ENTRY / ".tmp-g1-1"
    _ccache_dir(half, {"3/stats": "half"})
    got = compcachedir.import_into(tmp_path / "ctx", d, ENTRY, max_size=LIMIT)
    assert got["status"] == "imported" and got["generation"] == good["generation"]
    assert not (tmp_path / "ctx" / "3" / "stats").read_text() == "half"
    compcachedir.export(_exported(tmp_path, "e2"), d, ENTRY, max_size=LIMIT)
    assert not half.exists()  # swept by the next export


@pytest.mark.parametrize("case", ["link-in-generation", "pointer-garbage", "pointer-link", "too-big", "fifo"])
def test_a_corrupt_entry_is_ignored_with_its_reason_and_replaced_by_the_next_export(tmp_path, case):
    d = compcachedir.check_dir(tmp_path / "c")
    compcachedir.export(_exported(tmp_path, "e1"), d, ENTRY, max_size=LIMIT)
    entry = d / ENTRY
    gen = entry / (entry / "current").read_text().strip()
    (tmp_path / "secret").write_text("the host's secret")
    if case == "link-in-generation":
        (gen / "3" / "leak").symlink_to(tmp_path / "secret")
    elif case == "pointer-garbage":
        (entry / "current").write_text("../../etc\n")
    elif case == "pointer-link":
        (entry / "current").unlink()
        (entry / "current").symlink_to(tmp_path / "secret")
    elif case == "too-big":
        with open(gen / "3" / "big", "wb") as f:
            f.truncate(2 * LIMIT + 1)
    else:
        os.mkfifo(gen / "3" / "fifo")
    got = compcachedir.import_into(tmp_path / "ctx", d, ENTRY, max_size=LIMIT)
    assert got["status"] == "ignored" and got["reason"].startswith(ENTRY)
    assert list((tmp_path / "ctx").iterdir()) == []  # nothing of it enters the build
    done = compcachedir.export(_exported(tmp_path, "e2"), d, ENTRY, max_size=LIMIT)
    assert done["status"] == "exported"
    assert compcachedir.import_into(tmp_path / "ctx2", d, ENTRY, max_size=LIMIT)["status"] == "imported"
    assert (tmp_path / "secret").read_text() == "the host's secret"


def test_a_build_that_exports_links_or_devices_is_refused_and_the_previous_cache_kept(tmp_path):
    d = compcachedir.check_dir(tmp_path / "c")
    good = compcachedir.export(_exported(tmp_path, "e1"), d, ENTRY, max_size=LIMIT)
    bad = _exported(tmp_path, "e2")
    (bad / "3" / "etc").symlink_to("/etc")
    done = compcachedir.export(bad, d, ENTRY, max_size=LIMIT)
    assert done["status"] == "refused" and "is not a regular file" in done["reason"]
    assert (d / ENTRY / "current").read_text().strip() == good["generation"]


def test_entry_names_are_rvports_own(tmp_path):
    d = compcachedir.check_dir(tmp_path / "c")
    with pytest.raises(ValueError):
        compcachedir.import_into(tmp_path / "ctx", d, "../escape", max_size=LIMIT)
