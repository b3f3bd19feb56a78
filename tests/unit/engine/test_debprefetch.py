"""debprefetch: the first stage's packages fetched side by side (the mirror is faked at the HTTP session; the
package list comes from a real program)."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import requests

from rvport.engine import debprefetch
from rvport.engine.events import Phase


class FakeSession:
    """The mirror: url -> bytes (a missing url is a 404); records what was asked."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.asked, self.closed = files, [], False

    def get(self, url, *, stream, timeout):
        self.asked.append(url)
        body = self.files.get(url)

        class Response:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                pass

            def raise_for_status(self):
                if body is None:
                    raise requests.HTTPError(f"404 {url}")

            def iter_content(self, n):
                for i in range(0, len(body), 5):
                    yield body[i : i + 5]

        return Response()

    def close(self):
        self.closed = True


def _deb(package: str, body: bytes, version: str = "1.0-1") -> debprefetch.Deb:
    return debprefetch.Deb(
        package=package,
        version=version,
        arch="riscv64",
        filename=f"pool/main/{package[0]}/{package}/{package}_{version}_riscv64.deb",
        sha256=hashlib.sha256(body).hexdigest(),
        size=len(body),
    )


def _stanza(d: debprefetch.Deb) -> str:
    return (
        f"Package: {d.package}\nVersion: {d.version}\nArchitecture: {d.arch}\nFilename: {d.filename}\n"
        f"Size: {d.size}\nSHA256: {d.sha256}\nDescription: x\n"
    )


def test_the_file_name_is_debootstraps_with_the_epoch_colon_escaped():
    assert _deb("bsdutils", b"x", version="1:2.41-1").name == "bsdutils_1%3a2.41-1_riscv64.deb"


def test_the_index_gives_the_wanted_packages_last_entry_and_skips_incomplete_ones():
    a1, a2, b = _deb("a", b"one"), _deb("a", b"two", version="2.0"), _deb("b", b"b")
    text = "\n".join([_stanza(a1), _stanza(a2), _stanza(b), "Package: c\nVersion: 1\n"])
    assert debprefetch.parse_index(text, {"a", "c"}) == {"a": a2}


def test_a_package_is_placed_only_when_its_size_and_sha256_are_the_indexs(tmp_path):
    good, bad = _deb("good", b"0123456789abc"), _deb("bad", b"expected")
    session = FakeSession({"m/" + good.filename: b"0123456789abc", "m/" + bad.filename: b"tampered"})
    stop = threading.Event()
    assert debprefetch.fetch_one(session, "m/" + good.filename, good, tmp_path, stop)
    assert (tmp_path / good.name).read_bytes() == b"0123456789abc"
    assert not debprefetch.fetch_one(session, "m/" + bad.filename, bad, tmp_path, stop)
    missing = _deb("missing", b"m")
    assert not debprefetch.fetch_one(session, "m/" + missing.filename, missing, tmp_path, stop)
    assert sorted(p.name for p in tmp_path.iterdir()) == [good.name]  # no partial file is left
    asked = len(session.asked)
    assert debprefetch.fetch_one(session, "m/" + good.filename, good, tmp_path, stop)  # there already
    stop.set()
    assert not debprefetch.fetch_one(session, "m/" + bad.filename, bad, tmp_path, stop)  # stopped: not asked
    assert len(session.asked) == asked


def _rootfs_with_index(tmp_path: Path, debs: list[debprefetch.Deb]) -> Path:
    rootfs = tmp_path / "rootfs"
    lists = rootfs / "var/lib/apt/lists"
    lists.mkdir(parents=True)
    (lists / "mirror_debian_dists_trixie_main_binary-riscv64_Packages").write_text(
        "\n".join(map(_stanza, debs))
    )
    return rootfs


def test_the_packages_print_debs_names_are_fetched_into_the_rootfs_while_the_block_runs(tmp_path):
    a, b, other = _deb("a", b"aaaa"), _deb("b", b"bbbbbbbb"), _deb("other", b"o")
    rootfs = _rootfs_with_index(tmp_path, [a, b, other])
    session = FakeSession(
        {f"http://m/debian/{d.filename}": body for d, body in ((a, b"aaaa"), (b, b"bbbbbbbb"))}
    )
    lines = []
    with debprefetch.Prefetch(
        ["echo", "a", "b"],
        rootfs,
        "http://m/debian/",
        on_line=lines.append,
        on_phase=lines.append,
        session=session,
    ) as ahead:
        ahead._thread.join(10)  # the first stage would run meanwhile
    assert ahead.fetched == 2 and ahead.why_not is None and session.closed
    archives = rootfs / "var/cache/apt/archives"
    assert sorted(p.name for p in archives.iterdir()) == [a.name, b.name]  # only what print-debs named
    assert lines == [
        "bootstrap: fetching 2 packages, 8 at a time, for debootstrap",
        Phase(phase="fetching packages ahead"),
    ]
    assert not list(tmp_path.glob("rootfs.debs"))  # its list is not left behind


def test_when_print_debs_fails_nothing_is_fetched_and_the_reason_is_kept(tmp_path):
    rootfs = _rootfs_with_index(tmp_path, [_deb("a", b"a")])
    session = FakeSession({})
    with debprefetch.Prefetch(
        ["false"], rootfs, "http://m/debian", on_line=lambda line: None, session=session
    ) as ahead:
        ahead._thread.join(10)
    assert ahead.fetched == 0 and ahead.why_not == "debootstrap --print-debs: exit 1"
    assert session.asked == [] and not (rootfs / "var/cache/apt/archives").exists()
