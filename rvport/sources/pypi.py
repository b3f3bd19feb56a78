"""PyPI-style sources: find an sdist through the indexes the user's pip is configured for.

Index URLs come from PIP_INDEX_URL / PIP_EXTRA_INDEX_URL, else from `pip config list` (pip.conf files and
environment), else from pip's own default, read at run time. No registry host name is written here.
The index is read through the simple API: PEP 691 JSON when offered, PEP 503 HTML otherwise; file URLs may be
relative (mirrors) and are resolved against the page URL. `project_pages` is the one reader of project pages
(the sdist of a `pypi:` source here, the wheels of `rvport lock` in rvport.closure.resolve): each page read up
to MAX_PAGE bytes, a TLS failure an error with its remedy, any other failure that index's miss.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit

import requests
from packaging.utils import InvalidSdistFilename, canonicalize_name
from packaging.version import InvalidVersion

from rvport import bounds, proc, resources
from rvport.catalogue.model import Source
from rvport.errors import IntegrityError, SourceUnavailable

log = logging.getLogger("rvport.sources")

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
MAX_PAGE = 64 << 20  # bytes of one project page (decoded); the largest projects' pages are a few MiB


@dataclass(frozen=True, kw_only=True)
class IndexConfig:
    index_url: str
    extra_index_urls: tuple[str, ...] = ()
    cert: str | None = None
    origin: str = "pip default"  # where the index URL came from, for messages

    @property
    def urls(self) -> tuple[str, ...]:
        return (self.index_url, *self.extra_index_urls)


@dataclass(frozen=True, kw_only=True)
class IndexFile:
    """A file a project page lists."""

    filename: str
    url: str  # absolute, without its fragment
    sha256: str | None  # the index's published digest, where it gives one
    index: str  # the configured index URL whose page lists it
    requires_python: str | None = None  # PEP 691 `requires-python`, PEP 503 `data-requires-python`
    yanked: bool = False  # PEP 691 `yanked`, PEP 503 `data-yanked`


@dataclass(frozen=True, kw_only=True)
class ProjectPage:
    """One configured index's answer for a project: the files its page lists, or why it has none."""

    index: str
    files: tuple[IndexFile, ...] = ()
    miss: str | None = None  # HTTP 404, a network error, a page over MAX_PAGE or not the simple API


def parse_pip_config_list(text: str) -> dict[str, str]:
    """`pip config list` lines (`global.index-url='...'`, `:env:.cert='...'`) -> {key: value}.

    Keys are reduced to their option name; a more specific section wins: :env: > download/install > global.
    """
    rank = {":env:": 3, "download": 2, "install": 2, "global": 1}
    best: dict[str, tuple[int, str]] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if not sep or "." not in key:
            continue
        section, _, option = key.rpartition(".")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        r = rank.get(section, 0)
        if r and (option not in best or r >= best[option][0]):
            best[option] = (r, value)
    return {k: v for k, (_, v) in best.items()}


# Asked of the user's pip in a child process (rvport never imports pip): the index pip uses when nothing is
# configured. pip keeps it in its internals only, so the question is a Python script (resources/scripts) run
# by pip's interpreter.
_PIP_DEFAULT_INDEX = "pip-default-index.py"


def pip_default_index() -> str:
    """pip's built-in default index, asked of the installed pip at run time."""
    for python in (sys.executable, "python3"):
        try:
            cp = proc.run(
                [python, str(resources.builtin("scripts", _PIP_DEFAULT_INDEX))],
                capture=True,
                check=False,
                timeout=60,
            )
        except Exception:  # noqa: BLE001 - no such interpreter: try the next one
            continue
        url = (cp.stdout or "").strip()
        if cp.returncode == 0 and url.startswith(("http://", "https://")):
            return url
    raise SourceUnavailable(
        "no package index is configured and pip's default could not be read",
        hint="set PIP_INDEX_URL (or index-url in pip.conf), or use --mirror DIR",
    )


def index_config(env: Mapping[str, str] | None = None, *, pip_config_text: str | None = None) -> IndexConfig:
    """The indexes pip would use. `pip_config_text` (the output of `pip config list`) is read when not
    given."""
    env = os.environ if env is None else env
    if pip_config_text is None:
        pip_config_text = _pip_config_list()
    conf = parse_pip_config_list(pip_config_text)
    if env.get("PIP_INDEX_URL"):
        index, origin = env["PIP_INDEX_URL"], "PIP_INDEX_URL"
    elif conf.get("index-url"):
        index, origin = conf["index-url"], "pip config (index-url)"
    else:
        index, origin = pip_default_index(), "pip default"
    extra_text = env.get("PIP_EXTRA_INDEX_URL") or conf.get("extra-index-url", "")
    extras = tuple(u for u in extra_text.split() if u and u != index)
    cert = env.get("PIP_CERT") or conf.get("cert")
    return IndexConfig(index_url=index, extra_index_urls=extras, cert=cert, origin=origin)


def _pip_config_list() -> str:
    try:
        cp = proc.run([sys.executable, "-m", "pip", "config", "list"], capture=True, check=False, timeout=60)
    except Exception as e:  # noqa: BLE001 - pip config is a hint, not a requirement
        log.debug("pip config list failed: %s", e)
        return ""
    return (cp.stdout or "") if cp.returncode == 0 else ""


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[dict[str, str | None], str]] = []  # (attributes with an href, text)
        self._attrs: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            self._attrs = found if found.get("href") is not None else None
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._attrs is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._attrs is not None:
            self.links.append((self._attrs, "".join(self._text).strip()))
            self._attrs = None


def _json_file(f: Mapping[str, object], page_url: str, index: str) -> IndexFile:
    """One entry of a PEP 691 page's `files`; a value of another type raises TypeError."""

    def text(value: object, field: str) -> str | None:
        if value is None or isinstance(value, str):
            return value
        raise TypeError(f"{field} is {type(value).__name__}, not a string")

    filename = text(f["filename"], "filename")
    if not filename:
        raise ValueError("a file without a name")
    url, _frag = urldefrag(urljoin(page_url, text(f["url"], "url") or ""))
    hashes = f.get("hashes") or {}
    if not isinstance(hashes, Mapping):
        raise TypeError(f"hashes is {type(hashes).__name__}, not a mapping")
    return IndexFile(
        filename=filename,
        url=url,
        sha256=text(hashes.get("sha256"), "sha256"),
        index=index,
        requires_python=text(f.get("requires-python"), "requires-python"),
        yanked=bool(f.get("yanked")),
    )


def parse_simple_page(body: bytes, content_type: str, page_url: str, *, index: str) -> list[IndexFile]:
    """Each file a simple-API project page lists (PEP 691 JSON or PEP 503 HTML), its URL made absolute.
    A JSON page of another shape raises ValueError, KeyError, TypeError or AttributeError (RecursionError
    when nested too deep for the parser)."""
    if content_type.split(";")[0].strip() == JSON_TYPE or content_type.startswith("application/json"):
        return [_json_file(f, page_url, index) for f in bounds.json_loads(body).get("files", [])]
    out: list[IndexFile] = []
    p = _Links()
    p.feed(body.decode("utf-8", errors="replace"))
    for attrs, text in p.links:
        url, frag = urldefrag(urljoin(page_url, attrs["href"] or ""))
        out.append(
            IndexFile(
                filename=text or urlsplit(url).path.rsplit("/", 1)[-1],
                url=url,
                sha256=frag.partition("=")[2] if frag.startswith("sha256=") else None,
                index=index,
                requires_python=attrs.get("data-requires-python"),
                yanked="data-yanked" in attrs,
            )
        )
    return out


def _page_body(
    session: requests.Session, url: str, timeout: float | tuple[float, float]
) -> tuple[bytes, str, str] | str:
    """(body, content type, final URL) of a project page, or why there is none; never more than MAX_PAGE
    bytes are taken."""
    with session.get(url, headers={"Accept": ACCEPT}, timeout=timeout, stream=True) as r:
        if r.status_code != 200:
            return f"HTTP {r.status_code}"
        chunks: list[bytes] = []
        size = 0
        for chunk in r.iter_content(1 << 16):
            size += len(chunk)
            if size > MAX_PAGE:
                return f"its project page is over {MAX_PAGE} bytes"
            chunks.append(chunk)
        return b"".join(chunks), r.headers.get("Content-Type", ""), r.url


def project_pages(
    session: requests.Session, project: str, config: IndexConfig, *, timeout: float | tuple[float, float]
) -> Iterator[ProjectPage]:
    """Each configured index's page for `project`, in the order pip asks them, read as the caller walks
    (a caller that stops asks no further index). A TLS failure raises SourceUnavailable with its remedy;
    any other failure is that index's miss."""
    for index in config.urls:
        page = urljoin(index.rstrip("/") + "/", canonicalize_name(project) + "/")
        try:
            got = _page_body(session, page, timeout)
        except requests.exceptions.SSLError as e:
            raise SourceUnavailable(
                f"TLS verification failed for the index {index}: {e}",
                hint="pass the proxy's CA with --ca-bundle FILE (or REQUESTS_CA_BUNDLE)",
            ) from e
        except requests.RequestException as e:
            yield ProjectPage(index=index, miss=type(e).__name__)
            continue
        if isinstance(got, str):
            yield ProjectPage(index=index, miss=got)
            continue
        body, ctype, url = got
        try:
            files = parse_simple_page(body, ctype, url, index=index)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            # a page that is not the simple API's JSON (bad JSON, too deep, another shape): that index misses
            yield ProjectPage(index=index, miss=f"its project page cannot be read ({type(e).__name__})")
            continue
        yield ProjectPage(index=index, files=tuple(files))


def _matches(filename: str, project: str, version: str) -> bool:
    try:
        name, ver = bounds.sdist_filename(filename)
        return name == canonicalize_name(project) and ver == bounds.version(version)
    except (InvalidSdistFilename, InvalidVersion):
        return False


def find_sdist(
    session: requests.Session, source: Source, config: IndexConfig, *, timeout: float = 30
) -> IndexFile:
    """Ask each configured index for the source's project page and pick its sdist."""
    assert source.project and source.version
    misses: list[str] = []
    for page in project_pages(session, source.project, config, timeout=timeout):
        if page.miss:
            misses.append(f"{page.index}: {page.miss}")
            continue
        for f in page.files:
            wanted = (
                f.filename == source.filename
                if source.filename
                else (_matches(f.filename, source.project, source.version))
            )
            if wanted:
                if source.sha256 and f.sha256 and f.sha256 != source.sha256:
                    raise IntegrityError(
                        f"source {source.name!r} ({source.origin}): the index {page.index} lists sha256 "
                        f"{f.sha256} for {f.filename}, the recipe pins {source.sha256}",
                        hint="the file on the index changed or the pin is wrong; check upstream before "
                        "re-pinning",
                    )
                return f
        misses.append(f"{page.index}: no sdist for {source.version} among {len(page.files)} files")
    raise SourceUnavailable(
        f"source {source.name!r}: no sdist {source.project}=={source.version} found ({'; '.join(misses)})",
        hint=f"indexes from {config.origin}; set PIP_INDEX_URL, or provide the file with --mirror DIR",
    )
