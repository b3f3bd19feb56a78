"""bench/cache_share.py: a compiler cache directory pushed to the loopback store and pulled into a new one
is one rvport imports; the store takes only plain names, and a pull unpacks nothing that leaves its
directory."""

from __future__ import annotations

import importlib.util
import io
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rvport.engine import compcachedir

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_cache_share", ROOT / "bench" / "cache_share.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

ENTRY = "rvport-ccache-accelerated-0123456789abcdef"


def _exported(tmp_path: Path) -> Path:
    """A DIR as an rvport export leaves it: the marker and one entry whose current names a generation."""
    directory = compcachedir.check_dir(tmp_path / "a")
    build = tmp_path / "build-cache"
    (build / "0" / "1").mkdir(parents=True)
    (build / "0" / "1" / "abc.result").write_bytes(b"object")
    (build / "ccache.conf").write_text("max_size = 2G\n")
    assert compcachedir.export(build, directory, ENTRY, max_size=1 << 30)["status"] == "exported"
    return directory


def test_a_pushed_cache_pulled_into_a_new_directory_is_imported_whole(tmp_path):
    directory = _exported(tmp_path)
    with bench.Store(tmp_path / "store") as store:
        assert bench.pull(store.url, tmp_path / "empty") == {"entries": [], "bytes": 0}
        assert not (tmp_path / "empty").exists()  # nothing yet: rvport makes DIR
        sent = bench.push(directory, store.url)
        got = bench.pull(store.url, tmp_path / "b")
    assert [e["entry"] for e in sent["entries"]] == [ENTRY] and got["entries"] == sent["entries"]
    pulled = compcachedir.check_dir(tmp_path / "b")  # the marker came along: not refused
    into = tmp_path / "ctx"
    res = compcachedir.import_into(into, pulled, ENTRY, max_size=1 << 30)
    assert res["status"] == "imported" and res["files"] == 2
    assert (into / "0" / "1" / "abc.result").read_bytes() == b"object"
    with pytest.raises(FileExistsError):  # a pull never writes into a directory that is there
        bench.pull("http://127.0.0.1:9", tmp_path / "b")


def test_the_store_takes_plain_names_only(tmp_path):
    with bench.Store(tmp_path / "store") as store:
        for name in ("..%2Fx", "a/../../x", ".hidden", "a//b"):
            req = urllib.request.Request(f"{store.url}/{name}", data=b"x", method="PUT")
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=10)
            assert e.value.code in (400, 404)
        assert bench._get(store.url, "missing", 10) is None
        bench._put(store.url, "big", b"x" * 11)
        with pytest.raises(ValueError, match="over 10 bytes"):
            bench._get(store.url, "big", 10)
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["big"]


def test_a_generation_with_a_link_out_is_not_unpacked(tmp_path):
    with bench.Store(tmp_path / "store") as store:
        gen = "g1-1"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("escape")
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
        bench._put(store.url, bench.MARKER, b"{}")
        bench._put(store.url, f"{ENTRY}/{gen}.tar", buf.getvalue())
        bench._put(store.url, f"{ENTRY}/current", gen.encode())
        bench._put(store.url, bench.ENTRIES, ENTRY.encode())
        with pytest.raises(tarfile.FilterError):
            bench.pull(store.url, tmp_path / "b")
    assert not (tmp_path / "b" / ENTRY / gen / "escape").is_symlink()
