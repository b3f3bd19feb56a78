"""PyPI-style sources: find an sdist through the indexes the user's pip is configured for.

Index URLs come from PIP_INDEX_URL / PIP_EXTRA_INDEX_URL, else from `pip config list` (pip.conf files and
environment), else from pip's own default, read at run time. No registry host name is written here.
The index is read through the simple API: PEP 691 JSON when offered, PEP 503 HTML otherwise; file URLs may be
relative (mirrors) and are resolved against the page URL.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit

import requests
from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import InvalidVersion, Version

from rvport import proc, resources
from rvport.catalogue.recipes import Source
from rvport.errors import IntegrityError, SourceUnavailable

log = logging.getLogger("rvport.sources")

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


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
    filename: str
    url: str
    sha256: str | None
    index: str


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
        self.links: list[tuple[str, str]] = []  # (href, text)
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def parse_simple_page(body: bytes, content_type: str, page_url: str) -> list[tuple[str, str, str | None]]:
    """(filename, absolute url, sha256 or None) for each file on a simple-API project page."""
    out: list[tuple[str, str, str | None]] = []
    if content_type.split(";")[0].strip() == JSON_TYPE or content_type.startswith("application/json"):
        doc = json.loads(body)
        for f in doc.get("files", []):
            url, _frag = urldefrag(urljoin(page_url, f["url"]))
            out.append((f["filename"], url, (f.get("hashes") or {}).get("sha256")))
        return out
    p = _Links()
    p.feed(body.decode("utf-8", errors="replace"))
    for href, text in p.links:
        absolute = urljoin(page_url, href)
        url, frag = urldefrag(absolute)
        name = text or urlsplit(url).path.rsplit("/", 1)[-1]
        digest = frag.partition("=")[2] if frag.startswith("sha256=") else None
        out.append((name, url, digest))
    return out


def _matches(filename: str, project: str, version: str) -> bool:
    try:
        name, ver = parse_sdist_filename(filename)
        return name == canonicalize_name(project) and ver == Version(version)
    except (InvalidSdistFilename, InvalidVersion):
        return False


def find_sdist(
    session: requests.Session, source: Source, config: IndexConfig, *, timeout: float = 30
) -> IndexFile:
    """Ask each configured index for the source's project page and pick its sdist."""
    assert source.project and source.version
    misses: list[str] = []
    for index in config.urls:
        page = urljoin(index.rstrip("/") + "/", canonicalize_name(source.project) + "/")
        try:
            r = session.get(page, headers={"Accept": ACCEPT}, timeout=timeout)
        except requests.exceptions.SSLError as e:
            raise SourceUnavailable(
                f"TLS verification failed for the index {index}: {e}",
                hint="pass the proxy's CA with --ca-bundle FILE (or REQUESTS_CA_BUNDLE)",
            ) from e
        except requests.RequestException as e:
            misses.append(f"{index}: {type(e).__name__}")
            continue
        if r.status_code != 200:
            misses.append(f"{index}: HTTP {r.status_code}")
            continue
        try:
            files = parse_simple_page(r.content, r.headers.get("Content-Type", ""), r.url)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            # a page that is not the simple API's JSON (bad JSON, too deep, another shape): that index misses
            misses.append(f"{index}: its project page cannot be read ({type(e).__name__})")
            continue
        for filename, url, digest in files:
            wanted = (
                filename == source.filename
                if source.filename
                else (_matches(filename, source.project, source.version))
            )
            if wanted:
                if source.sha256 and digest and digest != source.sha256:
                    raise IntegrityError(
                        f"source {source.name!r} ({source.origin}): the index {index} lists sha256 {digest} "
                        f"for {filename}, the recipe pins {source.sha256}",
                        hint="the file on the index changed or the pin is wrong; check upstream before "
                        "re-pinning",
                    )
                return IndexFile(filename=filename, url=url, sha256=digest, index=index)
        misses.append(f"{index}: no sdist for {source.version} among {len(files)} files")
    raise SourceUnavailable(
        f"source {source.name!r}: no sdist {source.project}=={source.version} found ({'; '.join(misses)})",
        hint=f"indexes from {config.origin}; set PIP_INDEX_URL, or provide the file with --mirror DIR",
    )
