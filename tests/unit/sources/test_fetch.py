"""Fetching against a real HTTP server on 127.0.0.1: cache, integrity, retries, resume, locks, kills,
offline."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from fixtures.httpserver import Route, serve, simple_index_html  # noqa: E402

from rvport.catalogue.model import Source, SourceKind  # noqa: E402
from rvport.errors import ExitCode, IntegrityError, SourceUnavailable  # noqa: E402
from rvport.sources import (  # noqa: E402
    Cache,
    Fetcher,
    FetchOptions,
    IndexConfig,
    ca_bundle,
    fetch_source,
    locate,
    parse_pip_config_list,
    parse_simple_page,
)

BODY = os.urandom(200_000)
DIGEST = hashlib.sha256(BODY).hexdigest()


def url_source(url: str, sha256: str | None = DIGEST, name: str = "src") -> Source:
    return Source(name=name, kind=SourceKind.URL, url=url, sha256=sha256)


def opts(tmp_path: Path, **kw) -> FetchOptions:
    kw.setdefault("backoff", 0.01)
    kw.setdefault("retries", 3)
    kw.setdefault("read_timeout", 10)
    kw.setdefault("connect_timeout", 5)
    return FetchOptions(cache=Cache(root=tmp_path / "cache"), **kw)


def cache_entries(tmp_path: Path) -> list[Path]:
    d = tmp_path / "cache" / "sha256"
    return sorted(d.iterdir()) if d.is_dir() else []


def leftovers(tmp_path: Path) -> list[Path]:
    d = tmp_path / "cache" / "tmp"
    return sorted(d.iterdir()) if d.is_dir() else []


def test_good_file_is_cached_and_reused_without_a_second_request(tmp_path):
    with serve({"/a.tar.gz": Route(body=BODY)}) as srv:
        o = opts(tmp_path)
        src = url_source(srv.url("/a.tar.gz"))
        assert locate(src, o.cache, None) == "network"
        first = fetch_source(src, o)
        assert first.origin == "network" and first.sha256 == DIGEST and first.size == len(BODY)
        assert first.path == tmp_path / "cache" / "sha256" / DIGEST and first.path.read_bytes() == BODY
        assert locate(src, o.cache, None) == "cache"
        second = fetch_source(src, o)
        assert second.origin == "cache" and second.path == first.path
        assert srv.hits("/a.tar.gz") == 1
        assert leftovers(tmp_path) == []


# corrupt: the first byte flipped (a fixed b"X" equals the random body's own first byte once in 256 runs)
@pytest.mark.parametrize(
    "body",
    [bytes([BODY[0] ^ 0xFF]) + BODY[1:], BODY[:150_000], b"something else entirely"],
    ids=["corrupt", "short-body", "other-file"],
)
def test_wrong_bytes_are_refused_and_leave_nothing(tmp_path, body):
    with serve({"/a.tar.gz": Route(body=body)}) as srv:
        src = url_source(srv.url("/a.tar.gz"))
        with pytest.raises(IntegrityError) as e:
            fetch_source(src, opts(tmp_path))
    msg = e.value.render()
    assert "'src'" in msg and DIGEST in msg and hashlib.sha256(body).hexdigest() in msg
    assert "deleted" in msg and e.value.hint and "pin" in e.value.hint
    assert e.value.exit_code == ExitCode.INTEGRITY
    assert cache_entries(tmp_path) == [] and leftovers(tmp_path) == []


def test_truncated_transfer_is_retried_then_fails_cleanly(tmp_path):
    # the server announces more bytes than it sends, every time, and cannot resume
    route = Route(body=BODY[:100_000], lie_length=len(BODY), ranges=False)
    with serve({"/a.tar.gz": route}) as srv:
        with pytest.raises(SourceUnavailable) as e:
            fetch_source(url_source(srv.url("/a.tar.gz")), opts(tmp_path, retries=2))
        assert srv.hits("/a.tar.gz") == 3
    assert "after 3 attempts" in e.value.message and e.value.exit_code == ExitCode.SOURCE_UNAVAILABLE
    assert cache_entries(tmp_path) == [] and leftovers(tmp_path) == []


def test_dropped_connection_resumes_with_range(tmp_path):
    with serve({"/a.tar.gz": Route(body=BODY, drop_after=70_000, drops=1)}) as srv:
        got = fetch_source(url_source(srv.url("/a.tar.gz")), opts(tmp_path))
        assert got.sha256 == DIGEST and got.path.read_bytes() == BODY
        first, resumed = srv.ranges("/a.tar.gz")
        assert first is None and resumed.startswith("bytes=")  # it resumed from what it had kept
        assert 0 < int(resumed[6:-1]) <= 70_000


def test_dropped_connection_restarts_when_the_server_ignores_range(tmp_path):
    with serve({"/a.tar.gz": Route(body=BODY, drop_after=70_000, drops=2, ranges=False)}) as srv:
        got = fetch_source(url_source(srv.url("/a.tar.gz")), opts(tmp_path))
        assert got.sha256 == DIGEST
        assert srv.hits("/a.tar.gz") == 3


def test_http_errors_are_source_unavailable(tmp_path):
    with serve({}) as srv:
        with pytest.raises(SourceUnavailable) as e:
            fetch_source(url_source(srv.url("/gone.tar.gz")), opts(tmp_path))
        assert "404" in e.value.message and srv.hits("/gone.tar.gz") == 1  # a 404 is not retried
    with serve({"/a": Route(body=b"", status=503)}) as srv:
        with pytest.raises(SourceUnavailable):
            fetch_source(url_source(srv.url("/a")), opts(tmp_path, retries=1))
        assert srv.hits("/a") == 2


def test_pep503_index_with_relative_urls_resolves(tmp_path):
    name = "demo_pkg-1.2.0.tar.gz"
    page = simple_index_html(
        {
            "demo_pkg-1.1.0.tar.gz": "../../packages/demo_pkg-1.1.0.tar.gz#sha256=" + "0" * 64,
            "demo_pkg-1.2.0-py3-none-any.whl": "../../packages/demo_pkg-1.2.0-py3-none-any.whl",
            name: f"../../packages/{name}#sha256={DIGEST}",
        }
    )
    routes = {
        "/simple/demo-pkg/": Route(body=page, content_type="text/html"),
        f"/packages/{name}": Route(body=BODY),
    }
    with serve(routes) as srv:
        index = IndexConfig(index_url=srv.url("/simple/"), origin="test")
        src = Source(name="sdist", kind=SourceKind.PYPI, project="Demo.Pkg", version="1.2", sha256=DIGEST)
        got = fetch_source(src, opts(tmp_path, index=index))
        assert got.filename == name and got.url == srv.url(f"/packages/{name}") and got.sha256 == DIGEST
        assert srv.hits(f"/packages/{name}") == 1


def test_pep691_json_index_and_index_digest_mismatch(tmp_path):
    import json

    doc = {
        "meta": {"api-version": "1.0"},
        "name": "demo",
        "files": [
            {"filename": "demo-1.0.tar.gz", "url": "files/demo-1.0.tar.gz", "hashes": {"sha256": "1" * 64}}
        ],
    }
    routes = {
        "/simple/demo/": Route(
            body=json.dumps(doc).encode(), content_type="application/vnd.pypi.simple.v1+json"
        )
    }
    with serve(routes) as srv:
        index = IndexConfig(index_url=srv.url("/simple"), origin="test")
        src = Source(name="sdist", kind=SourceKind.PYPI, project="demo", version="1.0", sha256=DIGEST)
        with pytest.raises(IntegrityError, match="lists sha256 1111"):
            fetch_source(src, opts(tmp_path, index=index))
    page = "http://127.0.0.1:1/simple/demo/"
    (f,) = parse_simple_page(json.dumps(doc).encode(), "application/vnd.pypi.simple.v1+json", page, index="i")
    assert (f.filename, f.url, f.sha256, f.index) == (
        "demo-1.0.tar.gz",
        page + "files/demo-1.0.tar.gz",
        "1" * 64,
        "i",
    )
    assert (f.requires_python, f.yanked) == (None, False)


def test_a_project_page_says_requires_python_and_yanked_in_json_and_html():
    import json

    doc = {
        "files": [
            {
                "filename": "a-1.0-py3-none-any.whl",
                "url": "a1.whl",
                "requires-python": ">=3.9",
                "yanked": "bad",
            },
            {"filename": "a-2.0-py3-none-any.whl", "url": "a2.whl", "hashes": {}, "yanked": False},
        ]
    }
    html = (
        b'<a href="a1.whl#sha256='
        + b"2" * 64
        + b'" data-requires-python="&gt;=3.9" data-yanked>a-1.0-py3-none-any.whl</a>'
        b'<a href="a2.whl" data-requires-python="">a-2.0-py3-none-any.whl</a><a name="no-href">x</a>'
    )
    page = "http://127.0.0.1:1/simple/a/"
    from_json = parse_simple_page(
        json.dumps(doc).encode(), "application/vnd.pypi.simple.v1+json", page, index="i"
    )
    from_html = parse_simple_page(html, "text/html", page, index="i")
    for files in (from_json, from_html):
        assert [(f.filename, f.url, f.requires_python or None, f.yanked) for f in files] == [
            ("a-1.0-py3-none-any.whl", page + "a1.whl", ">=3.9", True),
            ("a-2.0-py3-none-any.whl", page + "a2.whl", None, False),
        ]
    assert from_html[0].sha256 == "2" * 64 and from_json[0].sha256 is None


@pytest.mark.parametrize(
    "entry",
    [
        {"filename": 3, "url": "a"},
        {"filename": "a.whl", "url": "a", "hashes": ["x"]},
        {"filename": "a.whl", "url": "a", "requires-python": 3},
        {"url": "a"},
    ],
)
def test_a_json_file_entry_of_another_shape_is_refused(entry):
    import json

    from rvport.sources.pypi import JSON_TYPE

    with pytest.raises((TypeError, KeyError, ValueError)):
        parse_simple_page(
            json.dumps({"files": [entry]}).encode(), JSON_TYPE, "http://127.0.0.1:1/", index="i"
        )


def test_a_project_page_over_the_cap_is_that_index_s_miss(tmp_path, monkeypatch):
    from rvport.sources import pypi

    monkeypatch.setattr(pypi, "MAX_PAGE", 4096)
    page = simple_index_html({f"demo-1.{i}.tar.gz": f"demo-1.{i}.tar.gz" for i in range(200)})
    assert len(page) > 4096
    with serve({"/simple/demo/": Route(body=page, content_type="text/html")}) as srv:
        index = IndexConfig(index_url=srv.url("/simple/"), origin="test")
        src = Source(name="sdist", kind=SourceKind.PYPI, project="demo", version="1.0", sha256=DIGEST)
        with pytest.raises(SourceUnavailable, match="its project page is over 4096 bytes"):
            fetch_source(src, opts(tmp_path, index=index))


def test_the_sdist_is_taken_from_the_first_index_that_has_it_and_no_further_one_is_asked(tmp_path):
    name = "demo-1.0.tar.gz"
    routes = {
        "/one/demo/": Route(
            body=simple_index_html({name: f"/files/{name}#sha256={DIGEST}"}), content_type="text/html"
        ),
        "/two/demo/": Route(body=simple_index_html({}), content_type="text/html"),
        f"/files/{name}": Route(body=BODY),
    }
    with serve(routes) as srv:
        index = IndexConfig(index_url=srv.url("/one/"), extra_index_urls=(srv.url("/two/"),), origin="test")
        src = Source(name="sdist", kind=SourceKind.PYPI, project="demo", version="1.0", sha256=DIGEST)
        assert fetch_source(src, opts(tmp_path, index=index)).sha256 == DIGEST
        assert srv.hits("/one/demo/") == 1 and srv.hits("/two/demo/") == 0


def test_a_tls_failure_on_an_index_names_the_ca_bundle_remedy():
    import requests

    from rvport.sources.pypi import find_sdist

    class Refusing:
        def get(self, url, **kw):
            raise requests.exceptions.SSLError("certificate verify failed")

    src = Source(name="sdist", kind=SourceKind.PYPI, project="demo", version="1.0", sha256=DIGEST)
    with pytest.raises(SourceUnavailable, match="TLS verification failed for the index") as e:
        find_sdist(Refusing(), src, IndexConfig(index_url="https://127.0.0.1:9/simple/", origin="test"))
    assert "--ca-bundle" in (e.value.hint or "")


def test_missing_sdist_names_the_indexes(tmp_path):
    with serve({"/simple/demo/": Route(body=simple_index_html({}), content_type="text/html")}) as srv:
        index = IndexConfig(
            index_url=srv.url("/simple/"), extra_index_urls=(srv.url("/extra/"),), origin="test"
        )
        src = Source(name="sdist", kind=SourceKind.PYPI, project="demo", version="1.0", sha256=DIGEST)
        with pytest.raises(SourceUnavailable) as e:
            fetch_source(src, opts(tmp_path, index=index))
    assert "/simple/" in e.value.message and "/extra/: HTTP 404" in e.value.message


def _fetch_in_child(url: str, root: str, q) -> None:
    try:
        got = fetch_source(url_source(url), FetchOptions(cache=Cache(root=Path(root)), backoff=0.01))
        q.put((got.origin, got.sha256))
    except Exception as e:  # noqa: BLE001
        q.put(("error", repr(e)))


def test_two_processes_share_one_download(tmp_path):
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    with serve({"/a.tar.gz": Route(body=BODY, trickle=0.01, chunk=8192)}) as srv:
        procs = [
            ctx.Process(target=_fetch_in_child, args=(srv.url("/a.tar.gz"), str(tmp_path / "cache"), q))
            for _ in range(2)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=60)
        results = sorted(q.get(timeout=5) for _ in procs)
        assert srv.hits("/a.tar.gz") == 1
    assert results == [("cache", DIGEST), ("network", DIGEST)]
    assert cache_entries(tmp_path) == [tmp_path / "cache" / "sha256" / DIGEST]


def test_threads_share_one_download(tmp_path):
    with serve({"/a.tar.gz": Route(body=BODY, trickle=0.005, chunk=16384)}) as srv:
        out: list[str] = []
        threads = [
            threading.Thread(
                target=lambda: out.append(
                    fetch_source(url_source(srv.url("/a.tar.gz")), opts(tmp_path)).origin
                )
            )
            for _ in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(out) == ["cache", "cache", "network"] and srv.hits("/a.tar.gz") == 1


def test_killed_fetch_leaves_no_cache_entry(tmp_path):
    started = threading.Event()
    route = Route(body=BODY, trickle=0.05, chunk=2048, sent=started)
    with serve({"/a.tar.gz": route}, lifetime=60) as srv:
        code = textwrap.dedent(f"""
            from pathlib import Path
            from rvport.catalogue.model import Source, SourceKind
            from rvport.sources import Cache, FetchOptions, fetch_source
            src = Source(name="src", kind=SourceKind.URL, url={srv.url("/a.tar.gz")!r}, sha256={DIGEST!r})
            fetch_source(src,
                         FetchOptions(cache=Cache(root=Path({str(tmp_path / "cache")!r}))))
        """)
        child = subprocess.Popen([sys.executable, "-c", code])
        try:
            assert started.wait(30), "the child never started downloading"
            time.sleep(0.3)
            child.send_signal(signal.SIGKILL)
            assert child.wait(10) == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
        assert cache_entries(tmp_path) == []
        assert locate(url_source(srv.url("/a.tar.gz")), tmp_path / "cache", None) == "network"
        # the next run cleans the partial file up and succeeds
        route.trickle = 0
        got = fetch_source(url_source(srv.url("/a.tar.gz")), opts(tmp_path))
        assert got.origin == "network" and got.path.read_bytes() == BODY
        assert leftovers(tmp_path) == []


def test_offline_uses_the_mirror_and_fails_clearly_without_it(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    src = url_source("http://127.0.0.1:9/never/demo-1.0.tar.gz")
    with pytest.raises(SourceUnavailable) as e:
        fetch_source(src, opts(tmp_path, offline=True, mirror=mirror))
    assert "--offline" in e.value.message and "--mirror" in (e.value.hint or "")
    assert e.value.exit_code == ExitCode.SOURCE_UNAVAILABLE
    assert locate(src, tmp_path / "cache", mirror, offline=True) == "missing"
    (mirror / "demo-1.0.tar.gz").write_bytes(BODY)
    assert locate(src, tmp_path / "cache", mirror, offline=True) == "mirror"
    got = fetch_source(src, opts(tmp_path, offline=True, mirror=mirror))
    assert got.origin == "mirror" and got.sha256 == DIGEST
    assert locate(src, tmp_path / "cache", None) == "cache"


def test_mirror_by_sha256_layout_and_bad_mirror_file(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "sha256").mkdir(parents=True)
    (mirror / "sha256" / DIGEST).write_bytes(BODY)
    src = url_source("http://127.0.0.1:9/x/whatever.tgz")
    assert fetch_source(src, opts(tmp_path, offline=True, mirror=mirror)).origin == "mirror"
    bad = tmp_path / "bad-mirror"
    bad.mkdir()
    (bad / "whatever.tgz").write_bytes(b"tampered")
    other = tmp_path / "other"
    with pytest.raises(IntegrityError) as e:
        fetch_source(src, FetchOptions(cache=Cache(root=other), mirror=bad, offline=True))
    assert str(bad / "whatever.tgz") in e.value.render()
    assert not (other / "sha256").exists() or not any((other / "sha256").iterdir())
    assert (bad / "whatever.tgz").read_bytes() == b"tampered"  # the user's mirror is left alone


def test_fill_mirror_then_offline_fetch(tmp_path):
    to = tmp_path / "filled"
    with serve({"/d/demo-1.0.tar.gz": Route(body=BODY)}) as srv:
        src = url_source(srv.url("/d/demo-1.0.tar.gz"))
        fetch_source(src, opts(tmp_path, fill_mirror=to))
    assert (to / "demo-1.0.tar.gz").read_bytes() == BODY and (to / "sha256" / DIGEST).read_bytes() == BODY
    got = fetch_source(src, FetchOptions(cache=Cache(root=tmp_path / "fresh"), mirror=to, offline=True))
    assert got.origin == "mirror"


def test_unpinned_source_is_recorded_and_reused(tmp_path):
    with serve({"/u.tar.gz": Route(body=BODY)}) as srv:
        src = url_source(srv.url("/u.tar.gz"), sha256=None)
        first = fetch_source(src, opts(tmp_path))
        assert first.recorded and first.sha256 == DIGEST
        assert locate(src, tmp_path / "cache", None) == "cache"
        assert fetch_source(src, opts(tmp_path)).origin == "cache" and srv.hits("/u.tar.gz") == 1


def test_ca_bundle_choice(tmp_path):
    pem = tmp_path / "proxy.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    assert ca_bundle(pem) == pem
    assert ca_bundle(env={"SSL_CERT_FILE": str(pem)}) == pem
    assert ca_bundle(env={"REQUESTS_CA_BUNDLE": str(tmp_path / "nope"), "PIP_CERT": str(pem)}) == pem
    assert ca_bundle(env={}).is_file()
    from rvport.errors import UsageError

    with pytest.raises(UsageError):
        ca_bundle(tmp_path / "missing.pem")


def test_session_verifies_with_the_chosen_bundle_even_if_the_environment_disagrees(tmp_path, monkeypatch):
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/nonexistent/bundle.pem")
    pem = Path(ca_bundle(env={}))
    f = Fetcher(options=opts(tmp_path, ca_bundle=pem))
    seen = {}

    def fake_send(request, **kw):
        seen.update(kw)
        raise SourceUnavailable("stop")

    monkeypatch.setattr(f.session, "send", fake_send)
    with pytest.raises(SourceUnavailable):
        f.session.get("https://127.0.0.1:9/x")
    assert seen["verify"] == str(pem)


def test_pip_config_list_parsing():
    text = textwrap.dedent("""\
        global.index-url='https://mirror.example/simple'
        global.cert='/etc/ssl/certs/ca-certificates.crt'
        install.extra-index-url='https://a.example/simple https://b.example/simple'
        :env:.index-url='https://env.example/simple'
    """)
    conf = parse_pip_config_list(text)
    assert conf["index-url"] == "https://env.example/simple"
    assert conf["extra-index-url"].split() == ["https://a.example/simple", "https://b.example/simple"]
    assert conf["cert"] == "/etc/ssl/certs/ca-certificates.crt"


def test_index_config_from_environment():
    from rvport.sources import index_config

    cfg = index_config(
        {"PIP_INDEX_URL": "http://127.0.0.1:1/simple", "PIP_EXTRA_INDEX_URL": "http://127.0.0.1:2/s"},
        pip_config_text="global.index-url='http://127.0.0.1:3/simple'\n",
    )
    assert cfg.urls == ("http://127.0.0.1:1/simple", "http://127.0.0.1:2/s")
    cfg = index_config({}, pip_config_text="global.index-url='http://127.0.0.1:3/simple'\n")
    assert cfg.index_url == "http://127.0.0.1:3/simple"
    cfg = index_config({}, pip_config_text="")
    assert cfg.index_url.startswith("https://") and cfg.origin == "pip default"


def test_ca_bundle_falls_back_to_pip_cert(tmp_path):
    pem = tmp_path / "pip.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    assert ca_bundle(env={}, pip_cert=lambda: str(pem)) == pem
    assert ca_bundle(env={"SSL_CERT_FILE": str(pem)}, pip_cert=lambda: None) == pem


def test_a_host_name_that_does_not_resolve_fails_at_once_and_says_what_to_do():
    import socket

    import requests

    from rvport.sources.fetch import _unresolvable

    inner = socket.gaierror(-2, "Name or service not known")
    wrapped = requests.ConnectionError(type("MaxRetryError", (Exception,), {})("pool", inner))
    wrapped.args[0].reason = inner
    assert _unresolvable(wrapped)
    assert not _unresolvable(requests.ConnectionError(ConnectionRefusedError(111, "refused")))
