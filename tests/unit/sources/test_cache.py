"""Issue #13: a cached file is what its name says, or it is not used.

One byte flipped in a cache entry, then each way the entry is used: reported by `fetch`, unpacked by
`fetch --tree`, copied by `fetch --to`, offline, and with a poisoned mirror. Against a real HTTP server on
127.0.0.1 and through the CLI where the exit code matters.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
import textwrap
from pathlib import Path

import pytest

from rvport.catalogue.model import Source, SourceKind
from rvport.catalogue.recipes import load_catalogue
from rvport.errors import ExitCode, IntegrityError
from rvport.sources import Cache, CorruptEntry, Fetcher, FetchOptions, fetch_source, fill_mirror, prepare_tree
from rvport.sources.cache import open_blob
from tests.fixtures.cli import rvport_process
from tests.fixtures.httpserver import Route, serve


def targz(files: dict[str, bytes], top: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


FILES = {
    "ryu.h": b"/* ryu */\n" + b"x" * 50_000 + b"\n",
    "setup.py": b"print('setup')\n",
    **{f"src/f{i}.c": os.urandom(2_000).hex().encode() for i in range(20)},
}
BODY = targz(FILES, "demo-1.0")
DIGEST = hashlib.sha256(BODY).hexdigest()


def flip(path: Path, at: int | None = None) -> None:
    """Flip one byte of a (read-only) cache entry in place."""
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    i = len(data) // 2 if at is None else at
    data[i] ^= 0x01
    path.write_bytes(bytes(data))
    os.chmod(path, 0o444)


def opts(tmp_path: Path, **kw) -> FetchOptions:
    kw.setdefault("backoff", 0.01)
    return FetchOptions(cache=Cache(root=tmp_path / "cache"), **kw)


def entry(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "sha256" / DIGEST


def write_recipe(root: Path, url: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "demo.yaml").write_text(
        textwrap.dedent(f"""\
        schema: 1
        name: demo
        kind: go-binary  # not a wheel kind: `rvport fetch` adds no tool (auditwheel) from the package index
        build: [make]
        versions:
          - version: "1.0"
            sources:
              - name: sdist
                url: {url}
                sha256: {DIGEST}
        """)
    )
    return root


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own (tests/fixtures/cli.py)."""
    return rvport_process(args, env={**os.environ, "COLUMNS": "300", **env}, main="app", timeout=120)


# ------------------------------------------------------------------------------------------ the API


def test_open_blob_checks_while_reading_and_also_reads_what_the_reader_left(tmp_path):
    o = opts(tmp_path)
    with serve({"/demo-1.0.tar.gz": Route(body=BODY)}) as srv:
        fetch_source(Source(name="s", kind=SourceKind.URL, url=srv.url("/demo-1.0.tar.gz"), sha256=DIGEST), o)
    with open_blob(entry(tmp_path)) as f:
        assert f.read(10) == BODY[:10]  # the block reads a little; the rest is read at the end
    flip(entry(tmp_path), at=len(BODY) - 3)  # in the gzip trailer: an archive reader may never look
    with pytest.raises(CorruptEntry) as e:
        with open_blob(entry(tmp_path)) as f:
            f.read(10)
    assert e.value.exit_code == ExitCode.INTEGRITY and e.value.path == entry(tmp_path)
    assert e.value.actual != DIGEST and str(entry(tmp_path)) in e.value.message


def test_a_corrupt_entry_reported_by_fetch_is_removed_and_fetched_again(tmp_path):
    with serve({"/demo-1.0.tar.gz": Route(body=BODY)}) as srv:
        src = Source(name="s", kind=SourceKind.URL, url=srv.url("/demo-1.0.tar.gz"), sha256=DIGEST)
        fetch_source(src, opts(tmp_path))
        flip(entry(tmp_path))
        got = fetch_source(src, opts(tmp_path))
        assert srv.hits("/demo-1.0.tar.gz") == 2
    assert got.origin == "network" and got.verified and got.path.read_bytes() == BODY
    assert got.note and "was corrupt" in got.note and str(entry(tmp_path)) in got.note


def test_an_unchecked_hit_is_checked_by_its_reader(tmp_path):
    with serve({"/demo-1.0.tar.gz": Route(body=BODY)}) as srv:
        src = Source(name="s", kind=SourceKind.URL, url=srv.url("/demo-1.0.tar.gz"), sha256=DIGEST)
        with Fetcher(options=opts(tmp_path)) as f:
            f.fetch(src)
            flip(entry(tmp_path))
            lazy = f.fetch(src, check=False)
            assert lazy.origin == "cache" and not lazy.verified
            checked = f.check(lazy)  # one read: corrupt, so removed and fetched again
            assert checked.verified and checked.origin == "network" and srv.hits("/demo-1.0.tar.gz") == 2
            assert f.check(checked) is checked  # already verified: not read again


def test_discard_leaves_an_entry_that_was_replaced_meanwhile(tmp_path):
    cache = Cache(root=tmp_path / "cache")
    p = cache.blob(DIGEST)
    p.parent.mkdir(parents=True)
    p.write_bytes(b"corrupt")
    err = CorruptEntry(p, "0" * 64, inode=os.stat(p).st_ino)
    replacement = p.with_name("new")
    replacement.write_bytes(BODY)
    os.replace(replacement, p)  # another process fetched it again
    assert not cache.discard(err) and p.read_bytes() == BODY
    assert cache.discard(CorruptEntry(p, "0" * 64, inode=os.stat(p).st_ino)) and not p.exists()


def test_fill_mirror_from_a_corrupt_entry_writes_nothing(tmp_path):
    with serve({"/demo-1.0.tar.gz": Route(body=BODY)}) as srv:
        got = fetch_source(
            Source(name="s", kind=SourceKind.URL, url=srv.url("/demo-1.0.tar.gz"), sha256=DIGEST),
            opts(tmp_path),
        )
    flip(got.path)
    with pytest.raises(CorruptEntry):
        fill_mirror(got, tmp_path / "mirror")
    assert not [p for p in (tmp_path / "mirror").rglob("*") if p.is_file()]


def test_prepare_tree_refetches_a_corrupt_entry_instead_of_unpacking_it(tmp_path):
    with serve({"/demo-1.0.tar.gz": Route(body=BODY)}) as srv:
        root = write_recipe(tmp_path / "recipes", srv.url("/demo-1.0.tar.gz"))
        recipe = load_catalogue(root).resolve("demo")
        fetch_source(recipe.sources[0], opts(tmp_path))
        flip(entry(tmp_path))
        pt = prepare_tree(recipe, opts(tmp_path))
        assert srv.hits("/demo-1.0.tar.gz") == 2
    assert not pt.reused and pt.fetched[0].origin == "network" and pt.fetched[0].verified
    assert {
        p.relative_to(pt.path).as_posix(): p.read_bytes() for p in pt.path.rglob("*") if p.is_file()
    } == FILES
    assert entry(tmp_path).read_bytes() == BODY


# ------------------------------------------------------------------------------------------ the CLI


@pytest.fixture
def cached(tmp_path):
    """A recipe whose sdist is in the cache, then one byte of the entry flipped; the server still up."""
    with serve({"/demo-1.0.tar.gz": Route(body=BODY)}) as srv:
        root = write_recipe(tmp_path / "recipes", srv.url("/demo-1.0.tar.gz"))
        env = {"RVPORT_RECIPE_PATH": str(root), "RVPORT_CACHE_DIR": str(tmp_path / "cache")}
        cp = run_cli("fetch", "demo", env=env)
        assert cp.returncode == 0, cp.stderr
        flip(entry(tmp_path))
        yield srv, env


def test_cli_fetch_replaces_a_corrupt_entry(tmp_path, cached):
    srv, env = cached
    cp = run_cli("fetch", "demo", env=env)
    assert cp.returncode == 0, cp.stderr
    assert "network" in cp.stdout and DIGEST in cp.stdout and "was corrupt" in cp.stderr
    assert srv.hits("/demo-1.0.tar.gz") == 2 and entry(tmp_path).read_bytes() == BODY


def test_cli_fetch_tree_never_unpacks_a_corrupt_entry(tmp_path, cached):
    srv, env = cached
    cp = run_cli("fetch", "demo", "--tree", env=env)
    assert cp.returncode == 0, cp.stderr
    assert srv.hits("/demo-1.0.tar.gz") == 2 and "tree prepared" in cp.stderr
    trees = [p for p in (tmp_path / "cache" / "trees").iterdir() if p.is_dir()]
    assert len(trees) == 1
    got = {p.relative_to(trees[0]).as_posix(): p.read_bytes() for p in trees[0].rglob("*") if p.is_file()}
    assert got == FILES


def test_cli_fetch_tree_checks_the_entry_of_a_reused_tree(tmp_path, cached):
    srv, env = cached
    os.chmod(entry(tmp_path), 0o644)
    entry(tmp_path).write_bytes(BODY)  # a good entry, to prepare the tree from
    assert run_cli("fetch", "demo", "--tree", env=env).returncode == 0
    flip(entry(tmp_path))
    cp = run_cli("fetch", "demo", "--tree", env=env)  # the tree is reused; the entry is still checked
    assert cp.returncode == 0, cp.stderr
    assert "tree reused" in cp.stderr and "was corrupt" in cp.stderr and srv.hits("/demo-1.0.tar.gz") == 2
    assert entry(tmp_path).read_bytes() == BODY


def test_cli_fetch_to_never_copies_a_corrupt_entry(tmp_path, cached):
    srv, env = cached
    mirror = tmp_path / "mirror"
    cp = run_cli("fetch", "demo", "--to", str(mirror), env=env)
    assert cp.returncode == 0, cp.stderr
    assert srv.hits("/demo-1.0.tar.gz") == 2
    assert (mirror / "demo-1.0.tar.gz").read_bytes() == BODY and (
        mirror / "sha256" / DIGEST
    ).read_bytes() == BODY


@pytest.mark.parametrize("tree", [False, True], ids=["fetch", "fetch-tree"])
def test_cli_offline_reports_a_corrupt_entry_with_exit_4(tmp_path, cached, tree):
    srv, env = cached
    cp = run_cli("fetch", "demo", "--offline", *(["--tree"] if tree else []), env=env)
    assert cp.returncode == ExitCode.INTEGRITY, cp.stderr
    assert (
        f"cache entry {entry(tmp_path)} is corrupt" in cp.stderr and "--offline cannot fetch it" in cp.stderr
    )
    assert not entry(tmp_path).exists()  # removed: never used again
    trees = tmp_path / "cache" / "trees"
    assert not (
        trees.exists() and [p for p in trees.iterdir() if p.is_dir()]
    )  # no tree from it, not even half
    assert srv.hits("/demo-1.0.tar.gz") == 1


def test_cli_offline_takes_a_good_copy_from_the_mirror(tmp_path, cached):
    srv, env = cached
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "demo-1.0.tar.gz").write_bytes(BODY)
    cp = run_cli("fetch", "demo", "--offline", "--mirror", str(mirror), "--tree", env=env)
    assert cp.returncode == 0, cp.stderr
    assert (
        "mirror" in cp.stdout and entry(tmp_path).read_bytes() == BODY and srv.hits("/demo-1.0.tar.gz") == 1
    )


def test_cli_a_poisoned_mirror_file_is_named_with_exit_4(tmp_path, cached):
    srv, env = cached
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    poisoned = bytearray(BODY)
    poisoned[100] ^= 0xFF
    (mirror / "demo-1.0.tar.gz").write_bytes(bytes(poisoned))
    cp = run_cli("fetch", "demo", "--offline", "--mirror", str(mirror), env=env)
    assert cp.returncode == ExitCode.INTEGRITY, cp.stderr
    assert f"mirror file {mirror / 'demo-1.0.tar.gz'} is not the source" in cp.stderr
    assert "expected sha256 " + DIGEST in cp.stderr
    assert (mirror / "demo-1.0.tar.gz").read_bytes() == bytes(poisoned)  # the user's mirror is left alone
    assert not entry(tmp_path).exists()
    assert not [p for p in (tmp_path / "cache" / "tmp").iterdir()]


def test_integrity_error_from_a_corrupt_entry_is_not_retried_forever(tmp_path, monkeypatch):
    """A disk that corrupts every copy: prepare_tree gives up with exit 4 instead of looping."""
    with serve({"/demo-1.0.tar.gz": Route(body=BODY)}) as srv:
        root = write_recipe(tmp_path / "recipes", srv.url("/demo-1.0.tar.gz"))
        recipe = load_catalogue(root).resolve("demo")
        o = opts(tmp_path)
        fetch_source(recipe.sources[0], o)
        real_commit = Cache.commit_blob

        def corrupting_commit(self, part, sha256):
            dest = real_commit(self, part, sha256)
            flip(dest)
            return dest

        flip(entry(tmp_path))
        monkeypatch.setattr(Cache, "commit_blob", corrupting_commit)
        with pytest.raises(IntegrityError) as e:
            prepare_tree(recipe, o)
        assert e.value.exit_code == ExitCode.INTEGRITY
        assert 2 <= srv.hits("/demo-1.0.tar.gz") <= 5
