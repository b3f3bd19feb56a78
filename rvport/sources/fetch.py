"""Fetching sources: cache, then (git clones,) mirror, then network; SHA256 checked while the bytes stream.

Every download goes to <cache>/tmp/<lock>.part under an exclusive per-digest lock, is verified, and is renamed
to <cache>/sha256/<hex>. A mismatch deletes the file and raises IntegrityError; nothing partial is ever read
as a cache entry. A source pinned by its tree digest (`tree:`) is also checked for that digest before it
enters the cache.

A cache entry is checked again whenever it is used (its bytes must be what its name says): read whole when
`fetch` reports it, or hashed while it is unpacked or copied into a mirror (`check=False` hands the check to
that reader, which calls `Fetcher.refetch` on a mismatch). A corrupt entry is removed and fetched again; when
it cannot be (offline, no mirror copy) the run stops with exit code 4.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import hashlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import requests
from packaging.utils import canonicalize_name

from rvport import __version__
from rvport.catalogue.model import Source, SourceKind
from rvport.errors import IntegrityError, RecipeError, RvportError, SourceUnavailable, UsageError
from rvport.safetext import one_line
from rvport.sources import gitsrc
from rvport.sources.archive import archive_tree, tree_mismatch
from rvport.sources.cache import (
    CHUNK,
    HEX64,
    NO_SPACE,
    Cache,
    CorruptEntry,
    default_cache_dir,
    disk_error,
    hash_file,
    open_blob,
    origin_key,
    sha256_file,
)
from rvport.sources.member_checks import DEFAULT_MAX_BYTES, LIMIT_ENV, Limits, parse_size
from rvport.sources.pypi import IndexConfig, find_sdist, index_config

log = logging.getLogger("rvport.sources")

Where = Literal["cache", "mirror", "network", "missing", "local"]
Origin = Literal["cache", "mirror", "network", "clone", "local"]
SYSTEM_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
CA_ENV_VARS = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "PIP_CERT", "CURL_CA_BUNDLE")


# --------------------------------------------------------------------------------------------- CA bundle


def ca_bundle(
    explicit: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    pip_cert: Callable[[], str | None] | None = None,
) -> Path:
    """The CA bundle rvport verifies TLS with (and hands to build stages that download).

    Order: the explicit --ca-bundle; REQUESTS_CA_BUNDLE, SSL_CERT_FILE, PIP_CERT, CURL_CA_BUNDLE (the first
    that names an existing file); `cert` from pip's configuration (when `pip_cert` is given); the system
    bundle; certifi's. Verification itself is never turned off.
    """
    env = os.environ if env is None else env
    if explicit:
        p = Path(explicit).expanduser()
        if not p.is_file():
            raise UsageError(
                f"--ca-bundle {p}: no such file",
                hint="pass a PEM file holding the CA certificates to trust (e.g. your proxy's CA)",
            )
        return p
    for var in CA_ENV_VARS:
        value = env.get(var)
        if value:
            if Path(value).is_file():
                return Path(value)
            log.warning("%s=%s is not a file; ignoring it", var, one_line(value))
    conf = pip_cert() if pip_cert else None
    if conf and Path(conf).expanduser().is_file():
        return Path(conf).expanduser()
    if SYSTEM_BUNDLE.is_file():
        return SYSTEM_BUNDLE
    import certifi  # noqa: PLC0415 - only when nothing better exists

    return Path(certifi.where())


def ca_bundle_env(path_in_stage: str) -> dict[str, str]:
    """Environment variables that make common download tools in a build stage trust `path_in_stage`."""
    return {
        var: path_in_stage
        for var in (*CA_ENV_VARS, "CARGO_HTTP_CAINFO", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS")
    }


# --------------------------------------------------------------------------------------------- options


@dataclass(frozen=True, kw_only=True)
class FetchOptions:
    cache: Cache
    mirror: Path | None = None  # consulted before the network
    offline: bool = False  # never touch the network
    ca_bundle: Path | None = None  # None: chosen by ca_bundle() when first needed
    fill_mirror: Path | None = None  # `fetch --to DIR`: also copy every file into this mirror
    git_clones: tuple[Path, ...] = ()  # `fetch --from-git`: git sources come from these clones or bundles
    index: IndexConfig | None = None  # None: read from pip's configuration when first needed
    connect_timeout: float = 20.0
    read_timeout: float = 60.0
    retries: int = 4
    backoff: float = 1.0  # seconds before the first retry; doubles each time
    limits: Limits = field(default_factory=Limits)  # what one archive may unpack to (RVPORT_UNPACK_LIMIT)


def stage_ca_bundle(opts: FetchOptions) -> Path | None:
    """The CA bundle handed to the build stages that download (apt in toolchain images): --ca-bundle, else
    ca_bundle()'s choice; None where none is found (the stage then trusts its own certificates)."""
    try:
        return opts.ca_bundle or ca_bundle()
    except RvportError:
        return None


def fetch_options(
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    mirror: str | os.PathLike[str] | None = None,
    offline: bool = False,
    ca: str | os.PathLike[str] | None = None,
    to: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    from_git: Sequence[str | os.PathLike[str]] = (),
    unpack_limit: str | None = None,
) -> FetchOptions:
    """Options from the command line's values (RVPORT_CACHE_DIR, RVPORT_MIRROR, RVPORT_OFFLINE and
    RVPORT_UNPACK_LIMIT are read there, rvport/cli/settings.py); `env` gives XDG_CACHE_HOME and the CA
    bundle's variables."""
    env = dict(os.environ) if env is None else dict(env)
    root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir(env)
    mirror_path = Path(mirror).expanduser() if mirror else None
    if mirror_path is not None and not mirror_path.is_dir():
        raise UsageError(
            f"mirror {mirror_path} is not a directory",
            hint="create it with `rvport fetch --all --to DIR` on a connected host",
        )
    limit = unpack_limit or None
    limits = Limits()
    if limit:
        try:
            limits = Limits(max_bytes=parse_size(limit))
        except ValueError:
            raise UsageError(
                f"{LIMIT_ENV}={limit}: not a size",
                hint="give the most bytes one source archive may unpack to, e.g. 32G, 4096M or 1000000 "
                f"(default {DEFAULT_MAX_BYTES >> 30}G)",
            ) from None
    return FetchOptions(
        cache=Cache(root=root),
        mirror=mirror_path,
        offline=offline,
        ca_bundle=ca_bundle(ca, env) if ca else None,
        fill_mirror=Path(to).expanduser() if to else None,
        git_clones=tuple(gitsrc.check_clone(Path(g)) for g in from_git),
        limits=limits,
    )


# --------------------------------------------------------------------------------------------- results


@dataclass(frozen=True, kw_only=True)
class Fetched:
    source: Source
    path: Path  # the verified blob in the cache
    sha256: str
    size: int
    origin: Origin  # "clone": `fetch --from-git`
    filename: str  # the archive's name (upstream's, when known)
    url: str | None = None  # what was downloaded, when it came from the network
    recorded: bool = False  # True: the source had no pin; this digest was just recorded
    tree: str | None = None  # the tree digest checked on the way into the cache, if any
    verified: bool = True  # False: a cache hit whose bytes are still to be checked
    note: str | None = None  # something the user should hear (a corrupt entry replaced)

    def to_json(self) -> dict:
        local = self.source.local
        if local is not None:  # a local tree (--source-tree): named by its digest, no archive
            return {
                "name": self.source.name,
                "origin": self.source.origin,
                "from": "local",
                "tree": local.digest,
                "size": local.bytes,
                "local": local.to_json(),
            }
        d = {
            "name": self.source.name,
            "origin": self.source.origin,
            "from": self.origin,
            "sha256": self.sha256,
            "size": self.size,
            "filename": self.filename,
        }
        if self.url:
            d["url"] = self.url
        if self.recorded:
            d["recorded"] = True
        if self.tree or self.source.tree:
            d["tree"] = self.tree or self.source.tree
        return d


def local_fetched(source: Source) -> Fetched:
    """A local tree's entry among a tree's fetched sources: where it is and its digest (no archive)."""
    local = source.local
    assert local is not None
    return Fetched(
        source=source,
        path=Path(local.path),
        sha256="",
        size=local.bytes,
        origin="local",
        filename=source.archive_name,
        tree=local.digest,
    )


# --------------------------------------------------------------------------------------------- locate


def file_name(name: str, what: str, *, error: type[RvportError] = RecipeError) -> str:
    """`name` when it is one file name (it is joined to a mirror or a cache directory): not empty, '.' or
    '..', no '/', no NUL or other control character. Checked at use, whatever the loader already checked."""
    if (
        not name
        or name in (".", "..")
        or "/" in name
        or any(ord(c) < 32 or ord(c) == 127 for c in name)
        or len(os.fsencode(name)) > 255
    ):
        raise error(
            f"{what}: the file name {name!r} is not a single file name",
            hint="a source's file name (pypi: filename:, or the URL's last component) must be one path "
            "component: no '/', no '..', not absolute, no control characters",
        )
    return name


def mirror_file(path: Path, mirror: Path) -> Path:
    """A mirror file, when it stays inside the mirror (a link may point within it); a link that leads out
    of it is refused, named (a mirror must not read an arbitrary file of the host into the cache)."""
    try:
        real = Path(os.path.realpath(path, strict=True))
        top = Path(os.path.realpath(mirror, strict=True))
    except OSError as e:
        raise IntegrityError(
            f"mirror file {path} cannot be resolved: {e.strerror or e}; it was not used",
            hint=f"replace or remove {path}",
        ) from e
    if not real.is_relative_to(top):
        raise IntegrityError(
            f"mirror file {path} leads out of the mirror {mirror} (to {real}); it was not used",
            hint=f"a mirror holds its files itself: replace the link {path} by the file, or remove it",
        )
    return path


def mirror_candidates(source: Source, mirror: Path, sha256: str | None = None) -> list[Path]:
    """Files in a mirror that may hold the source: by digest first, then by archive name."""
    file_name(source.archive_name, f"source {source.name!r} ({source.origin})")
    out: list[Path] = []
    digest = sha256 or source.sha256
    if digest:
        out.append(mirror / "sha256" / digest)
    names = [source.archive_name]
    if source.kind is SourceKind.PYPI and source.project and not source.filename:
        # PEP 625 sdist names use the normalised project name with underscores
        names.append(f"{canonicalize_name(source.project).replace('-', '_')}-{source.version}.tar.gz")
    if source.kind is SourceKind.GIT:
        # a `git archive` tarball, a bundle of this commit, a bundle of the repository
        stem = source.archive_name.removesuffix(".tar.gz")
        names += [f"{stem}.tar", f"{stem}.bundle", f"{stem.removesuffix('-' + (source.commit or ''))}.bundle"]
    out += [mirror / n for n in dict.fromkeys(names)]
    return out


def _gzip_into(src: Path, dest: Path) -> None:
    """src gzip-compressed into dest, with no name or time in the gzip header (the same bytes every time)."""
    with open(src, "rb") as i, open(dest, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as o:
        shutil.copyfileobj(i, o, 1 << 20)


def _in_mirror(source: Source, mirror: Path | None) -> Path | None:
    if mirror is None:
        return None
    found = next((p for p in mirror_candidates(source, mirror) if p.is_file()), None)
    return None if found is None else mirror_file(found, mirror)


def _can_download(source: Source) -> bool:
    return source.kind is SourceKind.PYPI or source.fetch_url is not None


def locate(source: Source, cache: Cache | Path, mirror: Path | None, *, offline: bool = False) -> Where:
    """Where a fetch of `source` would get it from. Looks only at the file system."""
    if source.kind is SourceKind.LOCAL:
        return "local"
    cache = cache if isinstance(cache, Cache) else Cache(root=Path(cache))
    if cache.lookup(source) is not None:
        return "cache"
    if _in_mirror(source, mirror) is not None:
        return "mirror"
    if offline or not _can_download(source):
        return "missing"
    return "network"


# --------------------------------------------------------------------------------------------- network


class _Session(requests.Session):
    """A requests session that always verifies against one CA bundle (environment cannot override it)."""

    def __init__(self, bundle: Path):
        super().__init__()
        self.bundle = str(bundle)
        self.headers["User-Agent"] = f"rvport/{__version__} {self.headers.get('User-Agent', '')}".strip()

    def request(self, method, url, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        kwargs["verify"] = self.bundle
        return super().request(method, url, *args, **kwargs)


def https_session(bundle: Path | None = None) -> requests.Session:
    """A session that verifies TLS against `bundle` (default: ca_bundle()'s choice), as every fetch does."""
    return _Session(bundle or ca_bundle())


class _Retry(Exception):
    pass


@dataclass(kw_only=True)
class Fetcher:
    """Fetches many sources with one HTTP session; reads pip's configuration at most once."""

    options: FetchOptions
    _session: _Session | None = field(default=None, init=False, repr=False)
    _index: IndexConfig | None = field(default=None, init=False, repr=False)

    @property
    def session(self) -> _Session:
        if self._session is None:
            self._session = _Session(self.options.ca_bundle or ca_bundle(pip_cert=self._pip_cert))
        return self._session

    def _pip_cert(self) -> str | None:
        try:
            return self.index.cert
        except RvportError as e:  # no pip configuration: not needed to pick a bundle
            log.debug("pip configuration unavailable: %s", e.message)
            return None

    @property
    def index(self) -> IndexConfig:
        if self._index is None:
            self._index = self.options.index or index_config()
        return self._index

    def close(self) -> None:
        if self._session is not None:
            self._session.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- one source
    def fetch(self, source: Source, *, check: bool = True) -> Fetched:
        """The source's verified archive in the cache (and in the mirror being filled, with --to).

        A cache hit is read whole to check it, unless check=False: then it comes back with verified=False and
        the caller must read it through `open_blob` (unpacking does) and call `refetch` on a CorruptEntry.
        Filling a mirror checks the bytes while it copies them.
        """
        to = self.options.fill_mirror
        result = self._fetch(source, check=check and to is None)
        if to is not None:
            try:
                fill_mirror(result, to)
            except CorruptEntry as e:
                result = self.refetch(result, e)
                fill_mirror(result, to)
            result = replace(result, verified=True)
        return result

    def check(self, fetched: Fetched) -> Fetched:
        """Check a cache hit returned unchecked (one read); a corrupt one is removed and fetched again."""
        if fetched.verified:
            return fetched
        try:
            with open_blob(fetched.path):
                pass
        except CorruptEntry as e:
            return self.refetch(fetched, e)
        return replace(fetched, verified=True)

    def refetch(self, fetched: Fetched, err: CorruptEntry) -> Fetched:
        """After a reader found `fetched` corrupt: remove the entry and fetch the source again."""
        source, cache = fetched.source, self.options.cache
        lockname = _lockname(source)
        with cache.lock(lockname):
            cache.discard(err)
            return self._fetch_locked(source, lockname, check=True, corrupt=err)

    def _fetch(self, source: Source, *, check: bool) -> Fetched:
        if source.local is not None:  # a local tree is copied by prepare_tree, never fetched
            return local_fetched(source)
        lockname = _lockname(source)
        with self.options.cache.lock(lockname):
            return self._fetch_locked(source, lockname, check=check)

    def _fetch_locked(
        self, source: Source, lockname: str, *, check: bool, corrupt: CorruptEntry | None = None
    ) -> Fetched:
        cache = self.options.cache
        hit = cache.lookup(source)
        if hit is not None:
            result = Fetched(
                source=source,
                path=hit,
                sha256=hit.name,
                size=hit.stat().st_size,
                origin="cache",
                filename=source.archive_name,
                verified=False,
            )
            if not check:
                return result
            try:
                with open_blob(hit):
                    pass
                return replace(result, verified=True)
            except CorruptEntry as e:
                cache.discard(e)
                corrupt = e
        if corrupt is not None:
            log.info("%s", corrupt.message)
        fetched = self._get_into_cache(source, lockname, corrupt=corrupt)
        if corrupt is not None:
            fetched = replace(
                fetched,
                note=f"source {source.name!r}: the cache entry {corrupt.path} was corrupt "
                f"(sha256 {corrupt.actual}); it was removed and fetched again from "
                f"{fetched.origin}",
            )
        return fetched

    def _get_into_cache(
        self, source: Source, lockname: str, *, corrupt: CorruptEntry | None = None
    ) -> Fetched:
        opts, cache = self.options, self.options.cache
        part = cache.part_path(lockname)
        part.unlink(missing_ok=True)  # left by a killed run; we hold the lock, so nobody is writing it
        try:
            try:
                got = self._obtain(source, part)
            except SourceUnavailable as e:
                if corrupt is not None and opts.offline:
                    raise IntegrityError(
                        f"source {source.name!r} ({source.origin}): the cache entry {corrupt.path} is "
                        f"corrupt (its sha256 is {corrupt.actual}); it was removed, and --offline cannot "
                        f"fetch it again: {e.message}",
                        detail=e.detail,
                        hint=f"fetch it again on a connected host, or pass --mirror DIR holding "
                        f"{source.archive_name}",
                    ) from e
                raise
            origin, where, url, filename, digest, size, found = got
            if source.sha256 and digest != source.sha256:
                part.unlink(missing_ok=True)
                raise IntegrityError(
                    (
                        f"mirror file {found} is not the source {source.name!r} ({source.origin}) pins; it "
                        "was not used"
                        if found is not None
                        else f"source {source.name!r} ({source.origin}) failed its digest check; the file "
                        "was deleted"
                    ),
                    detail=[
                        f"  expected sha256 {source.sha256}",
                        f"  actual   sha256 {digest}  ({size} bytes, from {where})",
                    ],
                    hint=(f"replace or remove {found}; " if found is not None else "")
                    + "if upstream really changed the file, verify it and update the pin in the recipe; "
                    "otherwise suspect the mirror, a proxy or the network",
                )
            tree = None
            if source.tree:
                tree = archive_tree(part, name=filename, exclude=source.exclude, limits=opts.limits)
                if tree != source.tree:
                    part.unlink(missing_ok=True)
                    raise tree_mismatch(source, tree, where)
            blob = cache.commit_blob(part, digest)
            if not source.sha256:
                cache.write_ref(source, digest, date=dt.date.today().isoformat(), tree=tree)
            return Fetched(
                source=source,
                path=blob,
                sha256=digest,
                size=size,
                origin=origin,
                filename=filename,
                url=url,
                recorded=not source.pinned,
                tree=tree,
            )
        except BaseException:
            part.unlink(missing_ok=True)
            raise

    def _obtain(
        self, source: Source, part: Path
    ) -> tuple[Origin, str, str | None, str, str, int, Path | None]:
        """Bring the source's bytes into `part`: from a git clone, the mirror, or the network.

        Returns (origin, where, url, filename, sha256, size, the mirror file used)."""
        opts = self.options
        filename = source.archive_name
        if source.kind is SourceKind.GIT and opts.git_clones:
            repo = self._from_clones(source, part)
            digest, size = hash_file(part)
            return (
                "clone",
                f"git {'bundle' if repo.is_file() else 'clone'} {repo}",
                None,
                filename,
                digest,
                size,
                None,
            )
        found = _in_mirror(source, opts.mirror)
        if found is not None and gitsrc.is_bundle(found):
            if gitsrc.archive_from_bundle(found, source, part, scratch=self.options.cache.tmpdir()):
                digest, size = hash_file(part)
                return "mirror", f"git bundle {found}", None, filename, digest, size, None
            found = (
                next(
                    (
                        p
                        for p in mirror_candidates(source, opts.mirror)
                        if p.is_file() and p != found and not gitsrc.is_bundle(mirror_file(p, opts.mirror))
                    ),
                    None,
                )
                if opts.mirror
                else None
            )
        if found is not None:
            try:
                if found.name.endswith(".tar") and filename.endswith(".tar.gz"):
                    _gzip_into(found, part)  # a `git archive` tarball: the entry is the .tar.gz its name says
                    digest, size = hash_file(part)
                else:
                    digest, size = hash_file(found, copy_to=part)
            except OSError as e:
                if e.errno in NO_SPACE:
                    raise disk_error(e, part.parent, f"copying {found}") from e
                raise
            return "mirror", f"mirror file {found}", None, filename, digest, size, found
        if opts.offline:
            raise SourceUnavailable(
                f"source {source.name!r} ({source.origin}) is not in the cache"
                + (f" nor in the mirror {opts.mirror}" if opts.mirror else "")
                + ", and --offline forbids the network",
                hint=f"put {source.archive_name} into a mirror directory and pass --mirror DIR (or "
                "RVPORT_MIRROR); fill one on a connected host with `rvport fetch --all --to DIR`"
                + (
                    " (or, for a git source, from a local clone with `rvport fetch --from-git CLONE --to "
                    "DIR`)"
                    if source.kind is SourceKind.GIT
                    else ""
                ),
            )
        if not _can_download(source):
            raise SourceUnavailable(
                f"source {source.name!r}: no archive URL is known for {source.origin}",
                hint="use a url: source with the forge's archive URL, or provide the file with --mirror DIR",
            )
        url, filename = self._resolve(source)
        file_name(filename, f"source {source.name!r}: the index's file {url}", error=IntegrityError)
        digest, size = self._download(url, part, label=f"source {source.name!r}")
        return "network", url, url, filename, digest, size, None

    def _from_clones(self, source: Source, part: Path) -> Path:
        scratch = self.options.cache.tmpdir()
        for repo in self.options.git_clones:
            if repo.is_file():
                if gitsrc.archive_from_bundle(repo, source, part, scratch=scratch):
                    return repo
            elif gitsrc.has_commit(repo, source.commit or ""):
                gitsrc.archive(repo, source, part, scratch=scratch)
                return repo
        raise SourceUnavailable(
            f"source {source.name!r}: commit {source.commit} ({source.repo}) is in none of the git "
            f"repositories given with --from-git ({', '.join(map(str, self.options.git_clones))})",
            hint=f"fetch the commit into the clone (git fetch origin {source.commit}), or pass the clone "
            "that has it",
        )

    def _resolve(self, source: Source) -> tuple[str, str]:
        if source.kind is SourceKind.PYPI:
            f = find_sdist(self.session, source, self.index, timeout=self.options.connect_timeout)
            return f.url, f.filename
        assert source.fetch_url
        return source.fetch_url, source.archive_name

    # ---------------------------------------------------------------- streaming download
    def _download(self, url: str, part: Path, *, label: str) -> tuple[str, int]:
        """Stream `url` into `part`, hashing as it goes; retry with backoff, resuming with Range when
        allowed."""
        opts = self.options
        h, have, attempt = hashlib.sha256(), 0, 0
        with open(part, "wb") as f:
            while True:
                headers = {"Range": f"bytes={have}-"} if have else {}
                try:
                    with self.session.get(
                        url, stream=True, headers=headers, timeout=(opts.connect_timeout, opts.read_timeout)
                    ) as r:
                        if r.status_code in (429, 500, 502, 503, 504):
                            raise _Retry(f"HTTP {r.status_code}")
                        if r.status_code == 416 and have:  # cannot resume: start over
                            f.seek(0), f.truncate()
                            h, have = hashlib.sha256(), 0
                            raise _Retry("HTTP 416 on resume")
                        if r.status_code == 206 and have and _range_start(r) == have:
                            log.debug("resuming %s at byte %d", url, have)
                        elif r.status_code == 200:
                            if have:
                                log.debug("server ignored Range; restarting %s", url)
                                f.seek(0), f.truncate()
                                h, have = hashlib.sha256(), 0
                        else:
                            raise SourceUnavailable(
                                f"{label}: HTTP {r.status_code} {r.reason} from {url}",
                                hint=_hint_for_status(r.status_code),
                            )
                        try:
                            for chunk in r.iter_content(CHUNK):
                                f.write(chunk)
                                h.update(chunk)
                                have += len(chunk)
                            f.flush()
                            os.fsync(f.fileno())
                        except requests.RequestException:  # the network's (an OSError too): retried below
                            raise
                        except OSError as e:  # the disk's
                            raise disk_error(e, part.parent, f"downloading {url}") from e
                        return h.hexdigest(), have
                except requests.exceptions.SSLError as e:
                    raise SourceUnavailable(
                        f"{label}: TLS verification failed for {url}: {e}",
                        hint="behind a TLS-intercepting proxy pass its CA with --ca-bundle FILE "
                        f"(now {self.session.bundle})",
                    ) from e
                except (
                    requests.ConnectionError,
                    requests.Timeout,
                    requests.exceptions.ChunkedEncodingError,
                    _Retry,
                ) as e:
                    if _unresolvable(e):  # no name service, or no such host: retrying will not help
                        raise SourceUnavailable(
                            f"{label}: cannot download {url}: its host name does not resolve "
                            f"({_short(e)}); nothing was kept",
                            hint="without a network, fill a mirror on a connected host (`rvport fetch --all "
                            "--to DIR`) and use --mirror DIR --offline",
                        ) from e
                    attempt += 1
                    if attempt > opts.retries:
                        raise SourceUnavailable(
                            f"{label}: download of {url} failed after {attempt} attempts; nothing was "
                            f"kept: {_short(e)}",
                            hint="check the network or proxy and run again, or use --mirror DIR",
                        ) from e
                    delay = opts.backoff * 2 ** (attempt - 1)
                    # said, not logged in silence: a user waiting on a slow network sees why
                    log.warning(
                        "%s: %s; retry %d/%d in %.1fs",
                        one_line(label),
                        one_line(_short(e)),
                        attempt,
                        opts.retries,
                        delay,
                    )
                    time.sleep(delay)
                except requests.RequestException as e:
                    raise SourceUnavailable(
                        f"{label}: download of {url} failed: {_short(e)}", hint="check the URL in the recipe"
                    ) from e


def _unresolvable(e: BaseException) -> bool:
    """A connection error whose cause is a host name that does not resolve: urllib3's NameResolutionError or
    the resolver's gaierror, found among its causes (requests wraps them in MaxRetryError, as `reason`)."""
    import socket

    todo: list[BaseException] = [e]
    for _ in range(16):  # a chain of causes is short; a cycle ends here too
        if not todo:
            return False
        cause = todo.pop()
        if isinstance(cause, socket.gaierror) or type(cause).__name__ == "NameResolutionError":
            return True
        nested = [getattr(cause, "reason", None), cause.__cause__, cause.__context__, *cause.args[:1]]
        todo += [n for n in nested if isinstance(n, BaseException)]
    return False


def _range_start(r: requests.Response) -> int | None:
    cr = r.headers.get("Content-Range", "")  # "bytes 100-999/1000"
    try:
        return int(cr.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


def _hint_for_status(status: int) -> str:
    if status in (401, 403):
        return "the server refused access: check credentials or the proxy, or use --mirror DIR"
    if status in (404, 410):
        return "the file is gone from this URL: fix the recipe's URL, or provide the file with --mirror DIR"
    return "check the URL in the recipe, or provide the file with --mirror DIR"


def _short(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return text if len(text) < 300 else text[:300] + "..."


def _lockname(source: Source) -> str:
    return source.sha256 or f"origin-{origin_key(source)}"


def write_to(out, chunk: bytes, where: Path) -> None:  # type: ignore[no-untyped-def]
    try:
        out.write(chunk)
    except OSError as e:
        raise disk_error(e, where, "filling the mirror") from e


def fill_mirror(result: Fetched, mirror: Path) -> list[Path]:
    """Copy a cached blob into a mirror: DIR/<archive name> and DIR/sha256/<hex> (atomic, idempotent).

    The blob is read once, into every target that needs it, and checked against its name on the way: a corrupt
    entry (CorruptEntry) leaves no target written.
    """
    what = f"source {result.source.name!r} ({result.source.origin})"
    targets = [mirror / "sha256" / result.sha256]
    targets += [
        mirror / file_name(n, what) for n in dict.fromkeys((result.source.archive_name, result.filename))
    ]
    todo: list[Path] = []
    for t in targets:
        with contextlib.suppress(OSError):
            if t.is_file() and t.stat().st_size == result.size and sha256_file(t) == result.sha256:
                continue
        todo.append(t)
    if not todo:
        return []
    temps: list[tuple[Path, Path]] = []
    outs = []
    try:
        for t in todo:
            t.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=t.parent, prefix=f".{t.name}.", suffix=".tmp")
            temps.append((Path(tmp), t))
            outs.append(os.fdopen(fd, "wb"))
        with open_blob(result.path) as f:
            for chunk in iter(lambda: f.read(CHUNK), b""):
                for out in outs:
                    write_to(out, chunk, mirror)
        for out in outs:
            out.close()
        for tmp, t in temps:
            os.chmod(tmp, 0o644)
            os.replace(tmp, t)
        return todo
    finally:
        for out in outs:
            out.close()
        for tmp, _ in temps:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


# --------------------------------------------------------------------------------------------- API


def fetch_source(source: Source, options: FetchOptions) -> Fetched:
    with Fetcher(options=options) as f:
        return f.fetch(source)


def fetch_sources(sources: Sequence[Source], options: FetchOptions) -> list[Fetched]:
    with Fetcher(options=options) as f:
        return [f.fetch(s) for s in sources]


def with_offline(options: FetchOptions, offline: bool = True) -> FetchOptions:
    return replace(options, offline=offline)


__all__ = [
    "CA_ENV_VARS",
    "Fetched",
    "FetchOptions",
    "Fetcher",
    "HEX64",
    "ca_bundle",
    "ca_bundle_env",
    "fetch_options",
    "fetch_source",
    "fetch_sources",
    "fill_mirror",
    "locate",
    "mirror_candidates",
]
