"""The canonical tree digest: the exact listing, what counts and what does not, and tar streams agreeing with
unpacked directories whatever the archive's format."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest

from rvport.errors import IntegrityError, RecipeError
from rvport.sources.treehash import check_excludes, dir_entries, listing, tar_entries, tree_digest


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_tree(root: Path) -> Path:
    (root / "src" / "deep").mkdir(parents=True)
    (root / "empty-dir").mkdir()
    (root / "README").write_bytes(b"hello\n")
    (root / "run.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    os.chmod(root / "run.sh", 0o755)
    (root / "src" / "deep" / "a.c").write_bytes(b"int a;\n")
    (root / "src" / "b.c").write_bytes(b"int b;\n")
    os.symlink("../README", root / "src" / "readme-link")
    return root


def test_the_listing_is_exactly_the_documented_form(tmp_path):
    root = make_tree(tmp_path / "t")
    expected = b"".join(
        [
            b"f 644 README\0" + sha(b"hello\n").encode() + b"\n",
            b"f 755 run.sh\0" + sha(b"#!/bin/sh\necho hi\n").encode() + b"\n",
            b"f 644 src/b.c\0" + sha(b"int b;\n").encode() + b"\n",
            b"f 644 src/deep/a.c\0" + sha(b"int a;\n").encode() + b"\n",
            b"l 777 src/readme-link\0" + sha(b"../README").encode() + b"\n",
        ]
    )
    assert listing(dir_entries(root)) == expected  # empty-dir is no entry; sorted by path bytes
    assert tree_digest(root) == "sha256:" + sha(expected)


def test_paths_sort_bytewise_not_by_locale(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    for name in ("b", "B", "a-b", "a.b", "a/b"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    paths = [ln.split(b"\0")[0].split(b" ", 2)[2] for ln in listing(dir_entries(root)).splitlines()]
    assert paths == sorted(paths) == [b"B", b"a-b", b"a.b", b"a/b", b"b"]


def test_what_does_not_count(tmp_path):
    a = make_tree(tmp_path / "a")
    before = tree_digest(a)
    os.utime(a / "README", (1, 1))
    os.chmod(a / "src" / "b.c", 0o600)  # no owner x bit either way
    os.chmod(a / "run.sh", 0o700)  # still executable by its owner
    (a / "another-empty-dir").mkdir()
    assert tree_digest(a) == before


@pytest.mark.parametrize(
    "change", ["content", "exec-bit", "link-target", "rename", "new-file", "link-to-file"]
)
def test_what_counts(tmp_path, change):
    a = make_tree(tmp_path / "a")
    before = tree_digest(a)
    if change == "content":
        (a / "src" / "b.c").write_bytes(b"int B;\n")
    elif change == "exec-bit":
        os.chmod(a / "run.sh", 0o644)
    elif change == "link-target":
        os.unlink(a / "src" / "readme-link")
        os.symlink("../run.sh", a / "src" / "readme-link")
    elif change == "rename":
        os.rename(a / "src" / "b.c", a / "src" / "c.c")
    elif change == "new-file":
        (a / "empty-dir" / ".keep").write_bytes(b"")
    else:
        os.unlink(a / "src" / "readme-link")
        (a / "src" / "readme-link").write_bytes(b"../README")
    assert tree_digest(a) != before


def test_excludes_leave_paths_and_everything_under_them_out(tmp_path):
    a = make_tree(tmp_path / "a")
    (a / "src" / "deepest").mkdir()
    (a / "src" / "deepest" / "x").write_bytes(b"x")
    ex = ("src/deep/",)
    before = tree_digest(a, ex)
    (a / "src" / "deep" / "a.c").write_bytes(b"changed")
    (a / "src" / "deep" / "new").write_bytes(b"new")
    assert tree_digest(a, ex) == before
    (a / "src" / "deepest" / "x").write_bytes(b"y")  # a sibling whose name starts the same still counts
    assert tree_digest(a, ex) != before
    assert tree_digest(a, ("run.sh",)) != tree_digest(a)
    assert tree_digest(a, ("run.sh", "run.sh/")) == tree_digest(a, ("run.sh",))


@pytest.mark.parametrize("bad", ["../x", "/etc", "", "a/../../b", "."])
def test_bad_excludes_are_refused(bad):
    with pytest.raises(RecipeError):
        check_excludes([bad])


def test_a_fifo_is_refused(tmp_path):
    a = make_tree(tmp_path / "a")
    os.mkfifo(a / "pipe")
    with pytest.raises(IntegrityError, match="pipe: not a regular file"):
        tree_digest(a)


# ------------------------------------------------------------------------------------ tar streams


def tar_of(
    root: Path,
    *,
    top: str | None,
    fmt: int = tarfile.PAX_FORMAT,
    mode: str = "w:gz",
    reverse: bool = False,
    mtime: int = 0,
    dirs: bool = True,
    hardlink: str | None = None,
) -> bytes:
    """A tar of `root` built member by member: the knobs are what may differ between archivers."""
    buf = io.BytesIO()
    paths = sorted(p for p in root.rglob("*"))
    if reverse:
        paths.reverse()
    with tarfile.open(fileobj=buf, mode=mode, format=fmt) as t:
        if top and dirs:
            info = tarfile.TarInfo(top)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o775, mtime
            t.addfile(info)
        for p in paths:
            rel = p.relative_to(root).as_posix()
            name = f"{top}/{rel}" if top else rel
            if p.is_symlink():
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(p)
            elif p.is_dir():
                if not dirs:
                    continue
                info = tarfile.TarInfo(name)
                info.type = tarfile.DIRTYPE
            else:
                info = tarfile.TarInfo(name)
                info.size = p.stat().st_size
            info.mode = p.lstat().st_mode & 0o7777
            info.mtime, info.uname, info.uid = mtime, "someone", 1234
            if info.isreg():
                with open(p, "rb") as f:
                    t.addfile(info, f)
            else:
                t.addfile(info)
        if hardlink:
            info = tarfile.TarInfo(f"{top}/{hardlink}" if top else hardlink)
            info.type, info.linkname, info.mode = tarfile.LNKTYPE, f"{top}/README" if top else "README", 0o644
            t.addfile(info)
    return buf.getvalue()


@pytest.mark.parametrize(
    "knobs",
    [
        dict(top="proj-1.0"),
        dict(top=None),
        dict(top="x", fmt=tarfile.GNU_FORMAT, mode="w:bz2", reverse=True, mtime=1700000000),
        dict(top="x", fmt=tarfile.USTAR_FORMAT, mode="w:xz", dirs=False),
        dict(top="x", mode="w"),
    ],
    ids=["gz-top", "no-top", "gnu-bz2-reversed", "ustar-xz-no-dirs", "plain-tar"],
)
def test_a_tar_stream_gives_the_unpacked_trees_digest(tmp_path, knobs):
    root = make_tree(tmp_path / "t")
    data = tar_of(root, **knobs)
    assert tree_digest_of_tar(data) == tree_digest(root)


def tree_digest_of_tar(data: bytes, exclude=()) -> str:
    from rvport.sources.treehash import digest

    return digest(tar_entries(io.BytesIO(data), mode="r|*"), exclude)


def test_a_hard_link_counts_as_a_copy_of_its_target(tmp_path):
    root = make_tree(tmp_path / "t")
    data = tar_of(root, top="x", hardlink="README-again")
    (root / "README-again").write_bytes((root / "README").read_bytes())
    assert tree_digest_of_tar(data) == tree_digest(root)


def test_a_member_that_escapes_is_refused(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("../evil")
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(IntegrityError, match="escapes"):
        tree_digest_of_tar(buf.getvalue())


def test_a_damaged_tar_is_an_integrity_error_and_a_cut_one_never_passes(tmp_path):
    root = make_tree(tmp_path / "t")
    (root / "big").write_bytes(os.urandom(300_000))
    data = tar_of(root, top="x", mode="w")
    with pytest.raises(IntegrityError, match="cannot read the archive"):
        tree_digest_of_tar(b"this is no tar archive at all" * 40)
    with pytest.raises(IntegrityError, match="cannot read the archive"):
        tree_digest_of_tar(data[:200_000])  # cut inside a member's data
    # cut between members: tar readers take that for the end of the archive; the digest still tells
    cut = data.index(b"x/run.sh")
    assert tree_digest_of_tar(data[:cut]) != tree_digest(root)
