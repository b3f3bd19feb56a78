"""Hostile archives: each attack is a small archive made here; unpacking must never write outside its
destination, whatever the Python (no Docker, no network; each test takes well under a second and a few MiB).

The CVE-2025-4517 chain is checked twice: that it really escapes tarfile's own filter="data" on a Python
that has the flaw (so the test means something), and that rvport refuses it.
"""

from __future__ import annotations

import calendar
import errno
import io
import os
import re
import stat
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from rvport.errors import ExitCode, HostNotReady, IntegrityError, RecipeError, RvportError
from rvport.sources import archive as archive_mod
from rvport.sources.archive import archive_kind, archive_tree, unpack
from rvport.sources.member_checks import Limits, parse_size
from rvport.sources.treehash import tar_entries, tree_digest
from tests.fixtures.hosttools import need

# -------------------------------------------------------------------------------- building archives


def _tar(members: list[tuple[str, str, object]], *, compression: str = "gz") -> bytes:
    """(name, kind, value): kind 'f' (bytes), 'x' (executable bytes), 'd', 'l' (link target), 'h' (hard
    link target), 'fifo', 'chr'; ('f', (bytes, mode)) sets a mode."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=f"w:{compression}" if compression else "w") as t:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            info.mtime = 1_700_000_000
            if kind in ("f", "x"):
                data, mode = value if isinstance(value, tuple) else (value, 0o755 if kind == "x" else 0o644)
                info.size, info.mode = len(data), mode
                t.addfile(info, io.BytesIO(data))
                continue
            if kind == "d":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
            elif kind == "l":
                info.type, info.linkname = tarfile.SYMTYPE, value
            elif kind == "h":
                info.type, info.linkname = tarfile.LNKTYPE, value
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            elif kind == "chr":
                info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
            t.addfile(info)
    return buf.getvalue()


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _unpack(tmp_path: Path, data: bytes, name: str = "src-1.0.tar.gz", **kw) -> Path:
    archive = _write(tmp_path / name, data)
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    dest = tmp_path / "tree" / "out"
    unpack(archive, dest, name=name, scratch=scratch, **kw)
    return dest


def _refused(tmp_path: Path, data: bytes, name: str = "src-1.0.tar.gz", match: str = "", **kw) -> RvportError:
    with pytest.raises(RvportError, match=match) as e:
        _unpack(tmp_path, data, name, **kw)
    assert not (tmp_path / "tree" / "out").exists()
    assert list((tmp_path / "scratch").iterdir()) == [], "something half-written was left"
    return e.value


def _zip(entries: list[tuple[str, bytes, int]], *, extended_time: int | None = None) -> bytes:
    """(name, data, unix mode incl. file type) entries, written by a Unix system."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, date_time=(2020, 5, 17, 10, 30, 0))
            info.create_system = 3
            info.external_attr = mode << 16
            if extended_time is not None:
                info.extra = b"\x55\x54\x05\x00\x01" + extended_time.to_bytes(4, "little")
            z.writestr(info, data)
    return buf.getvalue()


# -------------------------------------------------------------------------------- CVE-2025-4517


def _cve_chain(outside: Path) -> bytes:
    """A chain of links whose resolved path passes PATH_MAX inside os.path.realpath: realpath stops following
    links there and goes on lexically, so it believes a link points inside while the kernel follows it out.

    Sixteen levels of 247-byte directory names, each reachable through a one-letter link; a 254-byte link at
    the deepest level points back up sixteen levels (to the top). realpath cannot lstat that link (the path
    is too long), takes it for a directory, and so counts one `..` too few for every following step: `escape`
    then looks like <top>/<outside path>, but the kernel climbs from the top to / and lands on `outside`."""
    comp = "d" * 247
    steps = "abcdefghijklmnop"
    members: list[tuple[str, str, object]] = []
    path = ""
    for step in steps:
        members.append((os.path.join(path, comp), "d", None))
        members.append((os.path.join(path, step), "l", comp))
        path = os.path.join(path, comp)
    deep = os.path.join("/".join(steps), "l" * 254)
    members.append((deep, "l", "../" * len(steps)))
    up = "../" * (len(steps) + 1)
    members.append(("escape", "l", deep + "/" + up + str(outside).lstrip("/")))
    members.append(("escape/pwned", "f", b"written outside the tree\n"))
    return _tar(members, compression="")


def _flawed_python() -> bool:
    v = sys.version_info[:3]
    return (3, 11, 4) <= v <= (3, 11, 12) or (3, 12, 0) <= v <= (3, 12, 10) or (3, 13, 0) <= v <= (3, 13, 3)


@pytest.mark.skipif(not _flawed_python(), reason="this Python's tarfile filter resists the chain")
def test_the_cve_chain_really_escapes_tarfiles_own_data_filter(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "d"
    dest.mkdir()
    with tarfile.open(fileobj=io.BytesIO(_cve_chain(outside))) as t:
        t.extractall(dest, filter="data")
    assert (outside / "pwned").read_bytes() == b"written outside the tree\n"


@pytest.mark.parametrize("name", ["chain.tar", "chain.tar.gz"])
def test_rvport_refuses_the_cve_chain(tmp_path, name):
    outside = tmp_path / "outside"
    outside.mkdir()
    data = _cve_chain(outside)
    if name.endswith(".gz"):  # read as its name says
        import gzip

        data = gzip.compress(data)
    e = _refused(tmp_path, data, name, match="through the link")
    assert e.exit_code == ExitCode.INTEGRITY
    assert list(outside.iterdir()) == []
    with pytest.raises(IntegrityError, match="through the link"):  # the streamed tree digest refuses it too
        archive_tree(_write(tmp_path / name, data), name=name)


def test_unpacking_needs_no_tarfile_filter(tmp_path, monkeypatch):
    """Python 3.11.0-3.11.3 have no `filter=`: rvport never asks tarfile to extract anything."""

    def no(*a, **k):
        raise AssertionError("tarfile extraction used")

    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    monkeypatch.setattr(tarfile.TarFile, "extractall", no)
    monkeypatch.setattr(tarfile.TarFile, "extract", no)
    data = _tar(
        [
            ("p-1/", "d", None),
            ("p-1/run.sh", "x", b"#!/bin/sh\n"),
            ("p-1/suid", "f", (b"x", 0o4755)),
            ("p-1/link", "l", "run.sh"),
            ("p-1/hard", "h", "p-1/run.sh"),
        ]
    )
    dest = _unpack(tmp_path, data)
    assert sorted(os.listdir(dest)) == ["hard", "link", "run.sh", "suid"]
    assert stat.S_IMODE(os.stat(dest / "run.sh").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(dest / "suid").st_mode) == 0o755  # setuid dropped
    assert os.readlink(dest / "link") == "run.sh"
    assert (dest / "hard").read_bytes() == b"#!/bin/sh\n" and not (dest / "hard").is_symlink()
    assert os.stat(dest / "run.sh").st_mtime == 1_700_000_000
    entries = tar_entries(io.BytesIO(data), mode="r|*")
    from rvport.sources.treehash import digest

    assert tree_digest(dest) == digest(entries)


# -------------------------------------------------------------------------------- paths and links


@pytest.mark.parametrize(
    "members, why",
    [
        ([("/etc/evil", "f", b"x")], "escapes the tree"),
        ([("p/../../evil", "f", b"x")], "escapes the tree"),
        ([("p/", "d", None), ("p/l", "l", "/etc")], "outside the tree"),
        ([("p/", "d", None), ("p/l", "l", "../../etc")], "outside the tree"),
        ([("p/", "d", None), ("p/l", "l", "sub"), ("p/l/f", "f", b"x")], "through the link"),
        ([("p/", "d", None), ("p/h", "h", "../../etc/passwd")], "escapes the tree"),
        ([("p/", "d", None), ("p/a", "l", "b"), ("p/h", "h", "p/a")], "not an earlier file"),
        ([("p/", "d", None), ("p/fifo", "fifo", None)], "special file"),
        ([("p/", "d", None), ("p/null", "chr", None)], "special file"),
        ([("p/", "d", None), ("p/a", "l", "b"), ("p/b", "l", "a")], "chain of more than"),
        # a later link changes where an earlier one points: `a` -> b/.. is the top until b -> "."
        ([("a", "l", "b/.."), ("b", "l", "."), ("c", "f", b"x")], "outside the tree"),
        # inside the archive, but outside the tree once its top directory is stripped
        ([("p/", "d", None), ("p/b", "f", b"x"), ("p/a", "l", "../p/b")], "outside the tree"),
        ([("p/", "d", None), ("p/f", "f", b"x"), ("p/f/g", "f", b"y")], "is a file"),
        ([("p/", "d", None), ("p/f", "f", b"x"), ("p/f", "d", None)], "would replace"),
    ],
)
def test_hostile_members_are_refused_and_nothing_is_written(tmp_path, members, why):
    e = _refused(tmp_path, _tar(members), match=why)
    assert e.exit_code == ExitCode.INTEGRITY
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scratch", "src-1.0.tar.gz"]


def test_a_file_after_a_link_of_the_same_name_replaces_the_link_as_tar_does(tmp_path):
    data = _tar(
        [
            ("p/", "d", None),
            ("p/target", "f", b"keep me\n"),
            ("p/x", "l", "target"),
            ("p/x", "f", b"new\n"),
        ]
    )
    dest = _unpack(tmp_path, data)
    assert not (dest / "x").is_symlink() and (dest / "x").read_bytes() == b"new\n"
    assert (dest / "target").read_bytes() == b"keep me\n"
    from rvport.sources.treehash import digest

    assert tree_digest(dest) == digest(
        tar_entries(io.BytesIO(data), mode="r|*")
    )  # the tree is what the digest saw


def test_links_inside_the_tree_are_kept(tmp_path):
    data = _tar(
        [
            ("p/", "d", None),
            ("p/sub/", "d", None),
            ("p/sub/f", "f", b"x"),
            ("p/up", "l", "sub/../sub/f"),
            ("p/dangling", "l", "not/there"),
            ("p/sub/back", "l", "../up"),
        ]
    )
    dest = _unpack(tmp_path, data)
    assert (dest / "sub" / "back").read_bytes() == b"x"
    assert os.readlink(dest / "dangling") == "not/there"


# -------------------------------------------------------------------------------- declared kind, polyglots


def _inner_zip() -> bytes:
    return _zip([("evil.txt", b"zip content\n", stat.S_IFREG | 0o644)])


def test_the_kind_comes_from_the_name_not_the_content(tmp_path):
    assert archive_kind("x-1.0.tar.gz") == "tar" and archive_kind("x-1.0.TGZ") == "tar"
    assert archive_kind("x-1.0.zip") == "zip" and archive_kind("x-1.0-py3-none-any.whl") == "zip"
    with pytest.raises(RecipeError, match="cannot tell"):
        archive_kind("download?id=3")
    # a zip named .tar.gz is read as a tar (and is no tar)
    e = _refused(tmp_path, _inner_zip(), "x.tar.gz", match="as a tar archive")
    assert e.exit_code == ExitCode.INTEGRITY


@pytest.mark.parametrize("compression", ["gz", ""])
def test_a_tar_that_is_also_a_zip_is_refused(tmp_path, compression):
    tar = _tar([("p/", "d", None), ("p/good.txt", "f", b"tar content\n")], compression=compression)
    name = "x.tar.gz" if compression else "x.tar"
    _refused(tmp_path, tar + _inner_zip(), name, match="polyglot")
    with pytest.raises(IntegrityError, match="polyglot"):
        archive_tree(_write(tmp_path / "again", tar + _inner_zip()), name=name)


@pytest.mark.parametrize("compression", ["gz", "xz", "bz2", ""])
@pytest.mark.parametrize("name", ["x.tar.gz", "x.tgz", "x.tar.xz", "x.txz", "x.tar.bz2", "x.tbz", "x.tar"])
def test_a_tar_is_read_as_the_compression_its_name_says_never_sniffed(tmp_path, compression, name):
    """An xz tar named .tar.gz, or any other mismatch, is exit 4; the matching pair unpacks."""
    data = _tar([("p/", "d", None), ("p/a", "f", b"a")], compression=compression)
    if archive_mod.tar_mode(name) == f"r|{compression}":
        assert (_unpack(tmp_path, data, name) / "a").read_bytes() == b"a"
        assert archive_tree(tmp_path / name, name=name)
        return
    e = _refused(tmp_path, data, name, match="cannot unpack it as a tar archive")
    assert e.exit_code == ExitCode.INTEGRITY
    with pytest.raises(IntegrityError, match="as a tar archive|cannot read"):
        archive_tree(_write(tmp_path / "again", data), name=name)


def test_a_zip_whose_bytes_start_as_a_tar_header_or_a_compressed_stream_is_refused(tmp_path):
    """The tar check fails closed: not only a zip tarfile reads, but one that begins with a tar header (its
    checksum holds) or the magic of gzip, bzip2 or xz, is a polyglot."""
    header = bytearray(_tar([("p/", "d", None)], compression="")[:512])
    header[0:1] = b"\x00"  # a header with no name: its checksum still holds
    header[148:156] = b"%06o\x00 " % tarfile.calc_chksums(bytes(header))[0]
    assert archive_mod._tar_header(bytes(header))
    for head in (bytes(header), b"\x1f\x8b" + bytes(510), b"\xfd7zXZ\x00" + bytes(506)):
        _refused(tmp_path, head + _inner_zip(), "x.zip", match="polyglot")


def test_a_zip_that_is_also_a_tar_is_refused(tmp_path):
    tar = _tar([("p/", "d", None), ("p/good.txt", "f", b"tar content\n")], compression="")
    _refused(tmp_path, tar + _inner_zip(), "x.zip", match="polyglot")


def test_a_plain_tar_whose_last_member_is_a_zip_is_no_polyglot(tmp_path):
    data = _tar([("p/", "d", None), ("p/fixture.zip", "f", _inner_zip())], compression="")
    dest = _unpack(tmp_path, data, "x.tar")
    assert (dest / "fixture.zip").read_bytes() == _inner_zip()
    assert archive_tree(tmp_path / "x.tar", name="x.tar") == tree_digest(dest)  # the streamed digest agrees


# -------------------------------------------------------------------------------- zip sources


def test_zip_keeps_links_exec_bits_and_member_times(tmp_path):
    data = _zip(
        [
            ("p/", b"", stat.S_IFDIR | 0o755),
            ("p/run.sh", b"#!/bin/sh\n", stat.S_IFREG | 0o755),
            ("p/data.txt", b"data\n", stat.S_IFREG | 0o644),
            ("p/link", b"run.sh", stat.S_IFLNK | 0o777),
        ]
    )
    dest = _unpack(tmp_path, data, "x-1.0.zip")
    assert os.readlink(dest / "link") == "run.sh"
    assert stat.S_IMODE(os.stat(dest / "run.sh").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(dest / "data.txt").st_mode) == 0o644
    # the DOS time is read as UTC, whatever the host's time zone: the same SOURCE_DATE_EPOCH everywhere
    assert os.stat(dest / "data.txt").st_mtime == calendar.timegm((2020, 5, 17, 10, 30, 0, 0, 0, 0))


def test_zip_takes_the_extended_timestamp_when_there_is_one(tmp_path):
    data = _zip([("f.txt", b"x", stat.S_IFREG | 0o644)], extended_time=1_600_000_000)
    dest = _unpack(tmp_path, data, "x.zip")
    assert os.stat(dest / "f.txt").st_mtime == 1_600_000_000


def test_a_zip_link_out_of_the_tree_is_refused(tmp_path):
    data = _zip([("p/", b"", stat.S_IFDIR | 0o755), ("p/l", b"../../etc", stat.S_IFLNK | 0o777)])
    _refused(tmp_path, data, "x.zip", match="outside the tree")


def test_a_zip_with_a_bad_crc_is_a_located_integrity_error(tmp_path):
    data = bytearray(_zip([("p/f.txt", b"hello hello hello\n", stat.S_IFREG | 0o644)]))
    i = data.index(b"hello hello")
    data[i] ^= 0x01
    e = _refused(tmp_path, bytes(data), "x.zip", match="CRC")
    assert e.exit_code == ExitCode.INTEGRITY and "p/f.txt" in e.message and e.hint


def test_an_encrypted_zip_is_refused(tmp_path):
    data = bytearray(_zip([("f.txt", b"secret", stat.S_IFREG | 0o644)]))
    central = data.index(b"PK\x01\x02")
    data[central + 8] |= 0x01  # general purpose flag: encrypted
    e = _refused(tmp_path, bytes(data), "x.zip", match="encrypted")
    assert e.exit_code == ExitCode.INTEGRITY


def test_a_file_that_is_not_a_zip_is_an_integrity_error(tmp_path):
    e = _refused(tmp_path, b"this is no zip at all\n" * 10, "x.zip", match="not a zip file")
    assert e.exit_code == ExitCode.INTEGRITY and e.hint


# -------------------------------------------------------------------------------- bombs and full disks


def test_a_bomb_over_the_limit_is_stopped_and_nothing_is_kept(tmp_path):
    data = _tar([("p/", "d", None), ("p/zeros", "f", bytes(4 << 20))])
    assert len(data) < 64 << 10
    e = _refused(tmp_path, data, limits=Limits(max_bytes=1 << 20), match="unpack limit")
    assert "RVPORT_UNPACK_LIMIT" in (e.hint or "") and e.exit_code == ExitCode.INTEGRITY
    with pytest.raises(IntegrityError, match="unpack limit"):
        archive_tree(_write(tmp_path / "b.tar.gz", data), name="b.tar.gz", limits=Limits(max_bytes=1 << 20))
    zdata = _zip([("zeros", bytes(2 << 20), stat.S_IFREG | 0o644)])
    _refused(tmp_path, zdata, "z.zip", limits=Limits(max_bytes=1 << 20), match="unpack limit")


def test_hard_links_count_against_the_limit(tmp_path):
    members = [("p/", "d", None), ("p/big", "f", bytes(256 << 10))]
    members += [(f"p/h{i}", "h", "p/big") for i in range(8)]
    _refused(tmp_path, _tar(members), limits=Limits(max_bytes=1 << 20), match="unpack limit")


def test_too_many_members_are_stopped(tmp_path):
    members = [("p/", "d", None)] + [(f"p/f{i}", "f", b"") for i in range(50)]
    _refused(tmp_path, _tar(members), limits=Limits(max_members=20), match="more than 20 members")


def test_a_huge_pax_header_is_refused_before_it_is_read_into_memory(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as t:
        info = tarfile.TarInfo("p/f")
        info.pax_headers = {"comment": "x" * (2 << 20)}
        t.addfile(info, io.BytesIO(b""))
    data = buf.getvalue()
    assert len(data) < 64 << 10
    _refused(tmp_path, data, match="archive header of")
    with pytest.raises(IntegrityError, match="archive header of"):
        archive_tree(_write(tmp_path / "h.tar.gz", data), name="h.tar.gz")


def test_a_zip_announcing_too_many_entries_is_refused_before_reading_them(tmp_path):
    data = _zip([(f"f{i}", b"", stat.S_IFREG | 0o644) for i in range(30)])
    _refused(tmp_path, data, "z.zip", limits=Limits(max_members=10), match="more than 10 members")


def test_sizes_parse(tmp_path):
    assert parse_size("8G") == 8 << 30 and parse_size("512MiB") == 512 << 20 and parse_size("1000") == 1000
    for bad in ("", "lots", "-1G", "0"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_a_full_disk_while_unpacking_says_so_and_leaves_nothing(tmp_path, monkeypatch):
    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(archive_mod, "write", full)
    data = _tar([("p/", "d", None), ("p/f", "f", b"x" * 100)])
    e = _refused(tmp_path, data, match="no space left on")
    assert isinstance(e, HostNotReady) and e.exit_code == ExitCode.HOST_NOT_READY
    assert str(tmp_path / "scratch") in e.message


# -------------------------------------------------------------------------------- destinations


def test_a_dest_that_is_a_file_or_already_holds_the_files_is_refused(tmp_path):
    data = _tar([("p/", "d", None), ("p/README", "f", b"extra\n")])
    archive = _write(tmp_path / "x.tar.gz", data)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "README").write_bytes(b"main\n")
    (tree / "afile").write_bytes(b"main\n")
    with pytest.raises(RecipeError, match="would replace README") as e:
        unpack(archive, tree, name="x.tar.gz", scratch=scratch, at="r.yaml:7")
    assert "r.yaml:7" in e.value.message
    assert (tree / "README").read_bytes() == b"main\n"
    with pytest.raises(RecipeError, match="already a file"):
        unpack(archive, tree / "afile", name="x.tar.gz", scratch=scratch)
    (tree / "sub").mkdir()
    unpack(archive, tree / "sub", name="x.tar.gz", scratch=scratch)  # an empty directory is fine
    assert (tree / "sub" / "README").read_bytes() == b"extra\n"
    assert list(scratch.iterdir()) == []


# ------------------------------------------------------------------------- through prepare_tree and fetch


def _recipe(root: Path, base: str, main: bytes, extra_dest: str, main_name: str = "demo-1.0.tar.gz") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "demo.yaml").write_text(
        "schema: 1\nname: demo\nkind: python-wheel\nbuild:\n  - make\nversions:\n"
        '  - version: "1.0"\n    sources:\n'
        f"      - name: main\n        url: {base}/{main_name}\n        sha256: {_sha(main)}\n"
        f"      - name: extra\n        url: {base}/extra-1.0.tar.gz\n        sha256: {_sha(EXTRA)}\n"
        f"        dest: {extra_dest}\n"
    )
    return root


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


MAIN = _tar([("demo-1.0/", "d", None), ("demo-1.0/README", "f", b"main\n"), ("demo-1.0/afile", "f", b"a")])
EXTRA = _tar([("extra-1.0/", "d", None), ("extra-1.0/README", "f", b"extra\n")])


@pytest.mark.parametrize(
    "dest, why",
    [(".", "would replace README"), ("afile", "already a file"), ("afile/sub", "passes through a file")],
)
def test_an_extra_source_never_replaces_the_main_sources_files(tmp_path, dest, why):
    from rvport.catalogue.recipes import load_catalogue
    from rvport.sources import Cache, FetchOptions, prepare_tree
    from tests.fixtures.httpserver import Route, serve

    routes = {"/demo-1.0.tar.gz": Route(body=MAIN), "/extra-1.0.tar.gz": Route(body=EXTRA)}
    with serve(routes) as srv:
        root = _recipe(tmp_path / "recipes", srv.base, MAIN, dest)
        recipe = load_catalogue(root).resolve("demo")
        with pytest.raises(RecipeError, match=why) as e:
            prepare_tree(recipe, FetchOptions(cache=Cache(root=tmp_path / "cache"), backoff=0.01))
    assert e.value.exit_code == ExitCode.RECIPE_INVALID
    assert "demo.yaml:" in e.value.message  # located: the extra source's line
    trees = tmp_path / "cache" / "trees"
    assert [p for p in trees.iterdir() if not p.name.endswith(".json")] == []  # nothing half-made


def test_a_full_disk_while_downloading_is_exit_6_and_leaves_nothing(tmp_path, monkeypatch):
    import builtins

    from rvport.sources import Cache, FetchOptions, fetch
    from rvport.sources.fetch import Fetcher
    from tests.fixtures.httpserver import Route, serve

    class Full(io.RawIOBase):
        def __init__(self, f):
            self.f = f

        def write(self, b):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            return getattr(self.f, name)

    def full_open(path, mode="r", *a, **k):
        f = builtins.open(path, mode, *a, **k)
        return Full(f) if str(path).endswith(".part") and "w" in mode else f

    monkeypatch.setattr(fetch, "open", full_open, raising=False)
    from rvport.catalogue.recipes import load_catalogue

    with serve({"/demo-1.0.tar.gz": Route(body=MAIN), "/extra-1.0.tar.gz": Route(body=EXTRA)}) as srv:
        recipe = load_catalogue(_recipe(tmp_path / "recipes", srv.base, MAIN, "x")).resolve("demo")
        opts = FetchOptions(cache=Cache(root=tmp_path / "cache"), backoff=0.01)
        with Fetcher(options=opts) as f, pytest.raises(HostNotReady, match="no space left on") as e:
            f.fetch(recipe.sources[0])
    assert str(tmp_path / "cache" / "tmp") in e.value.message
    assert list((tmp_path / "cache" / "tmp").iterdir()) == []
    assert not (tmp_path / "cache" / "sha256").exists() or not list((tmp_path / "cache" / "sha256").iterdir())


def test_the_unpack_limit_is_read_from_the_environment(tmp_path):
    from rvport.cli.handoff import fetch_options
    from rvport.cli.settings import make_options
    from rvport.errors import UsageError

    def opts(env):  # RVPORT_UNPACK_LIMIT is read at the command line's edge, then passed down
        return fetch_options(make_options("fetch", {"cache_dir": tmp_path}, environ=env))

    assert opts({"RVPORT_UNPACK_LIMIT": "2G"}).limits.max_bytes == 2 << 30
    assert opts({}).limits == Limits()
    with pytest.raises(UsageError, match="not a size"):
        opts({"RVPORT_UNPACK_LIMIT": "lots"})


# ------------------------------------------------------------------------- file names and mirrors


def _pypi(filename: str | None, sha256: str | None = None):
    from rvport.catalogue.model import Source, SourceKind

    return Source(
        name="s", kind=SourceKind.PYPI, project="demo", version="1.0", filename=filename, sha256=sha256
    )


@pytest.mark.parametrize("bad", ["/etc/shadow", "../x.tar.gz", "a/b.tar.gz", "..", "x\n.tar.gz"])
def test_a_source_file_name_that_is_not_one_component_is_refused_at_use(tmp_path, bad):
    from rvport.sources import Cache, FetchOptions, fill_mirror, mirror_candidates
    from rvport.sources.fetch import Fetched, Fetcher

    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with pytest.raises(RecipeError, match="not a single file name") as e:
        mirror_candidates(_pypi(bad), mirror)
    assert e.value.exit_code == ExitCode.RECIPE_INVALID
    opts = FetchOptions(cache=Cache(root=tmp_path / "cache"), mirror=mirror, offline=True)
    with Fetcher(options=opts) as f, pytest.raises(RecipeError, match="not a single file name"):
        f.fetch(_pypi(bad))
    blob = _write(tmp_path / "blob", b"x")
    fetched = Fetched(source=_pypi(None), path=blob, sha256=_sha(b"x"), size=1, origin="cache", filename=bad)
    with pytest.raises(RecipeError, match="not a single file name"):
        fill_mirror(fetched, tmp_path / "to")
    assert not (tmp_path / "to").exists() or list((tmp_path / "to").rglob("*")) == []


def test_a_mirror_file_that_leads_out_of_the_mirror_is_named_and_never_read(tmp_path):
    from rvport.sources import Cache, FetchOptions
    from rvport.sources.fetch import Fetcher

    secret = _write(tmp_path / "secret", b"root only\n")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    os.symlink(secret, mirror / "demo-1.0.tar.gz")
    (mirror / "sha256").mkdir()
    opts = FetchOptions(cache=Cache(root=tmp_path / "cache"), mirror=mirror, offline=True)
    with Fetcher(options=opts) as f, pytest.raises(IntegrityError, match="leads out of the mirror") as e:
        f.fetch(_pypi(None))
    assert str(mirror / "demo-1.0.tar.gz") in e.value.message
    assert not (tmp_path / "cache" / "sha256").exists()
    # a link inside the mirror is fine
    (mirror / "demo-1.0.tar.gz").unlink()
    real = _write(mirror / "sha256" / _sha(MAIN), MAIN)
    os.symlink(real, mirror / "demo-1.0.tar.gz")
    with Fetcher(options=opts) as f:
        assert f.fetch(_pypi(None)).sha256 == _sha(MAIN)


def test_a_corrupt_git_bundle_is_a_readable_message(tmp_path):

    from rvport.catalogue.model import Source, SourceKind
    from rvport.errors import SourceUnavailable
    from rvport.sources import gitsrc

    need("git")
    bundle = _write(tmp_path / "x.bundle", b"# v2 git bundle\nnot a bundle at all\n")
    src = Source(
        name="g", kind=SourceKind.GIT, repo="https://example.invalid/x", commit="0" * 40, sha256=None
    )
    with pytest.raises(SourceUnavailable) as e:
        gitsrc.archive_from_bundle(bundle, src, tmp_path / "out.tar.gz", scratch=tmp_path)
    assert "['" not in e.value.message and "[]" not in e.value.message
    assert str(bundle) in e.value.message
    said = e.value.detail  # what git said, line by line, each a line of its own below the message
    assert any(ln.strip().startswith(("fatal:", "error:")) for ln in said), said


@pytest.mark.parametrize("bad", ["../x.tar.gz", "/etc/shadow", "a/b.tar.gz", ".."])
def test_a_pypi_filename_that_is_not_one_component_is_refused_on_load(tmp_path, bad):
    from rvport.catalogue.recipes import load_catalogue

    root = tmp_path / "recipes"
    root.mkdir()
    (root / "demo.yaml").write_text(
        "schema: 1\nname: demo\nkind: python-wheel\nbuild:\n  - make\nversions:\n"
        '  - version: "1.0"\n    sources:\n'
        f"      - name: main\n        pypi: {{project: demo, version: '1.0', filename: '{bad}'}}\n"
        f"        sha256: '{'a' * 64}'\n"
    )
    with pytest.raises(RecipeError) as e:
        load_catalogue(root).resolve("demo")
    assert e.value.exit_code == ExitCode.RECIPE_INVALID
    assert f"{root / 'demo.yaml'}:10" in e.value.render()


def _bad_crc_zip() -> bytes:
    data = bytearray(_zip([("p/f.txt", b"hello hello hello\n", stat.S_IFREG | 0o644)]))
    data[data.index(b"hello hello")] ^= 0x01
    return bytes(data)


@pytest.mark.parametrize(
    "kind, main_name, why, code",
    [
        # in the deeper cache, the chain's own directories outgrow PATH_MAX first: refused either way
        ("cve", "demo-1.0.tar", "through the link|File name too long", ExitCode.INTEGRITY),
        ("crc", "demo-1.0.zip", "CRC", ExitCode.INTEGRITY),
        ("bomb", "demo-1.0.tar.gz", "unpack limit", ExitCode.INTEGRITY),
        ("polyglot", "demo-1.0.tar.gz", "polyglot", ExitCode.INTEGRITY),
    ],
)
def test_cli_fetch_tree_refuses_hostile_sources_with_their_exit_code(tmp_path, kind, main_name, why, code):
    from tests.fixtures.cli import rvport_process
    from tests.fixtures.httpserver import Route, serve

    outside = tmp_path / "outside"
    outside.mkdir()
    body = {
        "cve": lambda: _cve_chain(outside),
        "crc": _bad_crc_zip,
        "bomb": lambda: _tar([("p/", "d", None), ("p/zeros", "f", bytes(3 << 20))]),
        "polyglot": lambda: _tar([("p/", "d", None), ("p/a", "f", b"a")]) + _inner_zip(),
    }[kind]()
    routes = {f"/{main_name}": Route(body=body), "/extra-1.0.tar.gz": Route(body=EXTRA)}
    with serve(routes) as srv:
        root = _recipe(tmp_path / "recipes", srv.base, body, "x", main_name)
        env = {
            **os.environ,
            "RVPORT_RECIPE_PATH": str(root),
            "RVPORT_CACHE_DIR": str(tmp_path / "cache"),
            "RVPORT_UNPACK_LIMIT": "1M",
            "COLUMNS": "300",
        }
        cp = rvport_process(["fetch", "demo", "--tree"], env=env, main="app")
    assert cp.returncode == code, cp.stderr
    assert re.search(why, cp.stderr) and "Traceback" not in cp.stderr
    assert list(outside.iterdir()) == []
    trees = tmp_path / "cache" / "trees"
    assert not trees.exists() or [p for p in trees.iterdir() if not p.name.endswith(".json")] == []


def test_the_tar_check_of_a_zip_fails_closed(tmp_path, monkeypatch):
    """Only tarfile's own "not a tar" (ReadError) clears a zip; any other failure of the tar reader refuses it
    (it used to count as "not a tar")."""
    path = _write(tmp_path / "x.zip", _inner_zip())
    archive_mod._refuse_tar_polyglot(path, "x.zip")  # a plain zip: tarfile says it is no tar

    def broken(*a, **k):
        raise EOFError("compressed file ended before the end-of-stream marker was reached")

    monkeypatch.setattr(archive_mod.tarfile, "open", broken)
    with pytest.raises(IntegrityError, match="polyglot"):
        archive_mod._refuse_tar_polyglot(path, "x.zip")
