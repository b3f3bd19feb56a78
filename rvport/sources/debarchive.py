"""A Debian archive's signed index: the suite's InRelease checked with gpgv against the archive keyring, its
Valid-Until, and the Packages index of one component and architecture checked against the Release's SHA256.

Only text that gpgv verified is parsed (gpgv writes the signed part of a clear-signed InRelease: --output).
The Packages index is cached by its digest (the cache's content-addressed blobs); the InRelease is fetched
each time (it is what moves). Expiry: a Release whose Valid-Until has passed is refused (IntegrityError, exit
4) unless its suite is accepted by the user (`--allow-expired-release SUITE`); an accepted expiry is returned,
never silent. Pins (DebPin): a Debian package by exact version and the .deb's sha256 from the index; when the
archive no longer holds that version the error names the versions it holds now.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import lzma
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rvport import proc
from rvport.errors import HostNotReady, IntegrityError, SourceUnavailable

DEFAULT_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
ALLOW_EXPIRED_ENV = "RVPORT_ALLOW_EXPIRED_RELEASE"
# what apt is told in a base whose suite's expired Release was accepted (an apt.conf.d file of that base only)
APT_CONF_NAME = "99rvport-allow-expired-release"
APT_CONF_TEXT = (
    "// rvport: this base's suite was accepted with an expired Release (--allow-expired-release)\n"
    'Acquire::Check-Valid-Until "false";\n'
)


class ExpiredRelease(IntegrityError):
    """A suite's Release is past its Valid-Until and the user did not accept it."""


@dataclass(frozen=True, kw_only=True)
class Release:
    suite: str
    codename: str
    date: str | None
    valid_until: dt.datetime | None
    valid_until_text: str | None
    sha256: Mapping[str, tuple[str, int]]  # path under dists/SUITE -> (sha256, size)

    def expired(self, now: dt.datetime) -> bool:
        return self.valid_until is not None and now > self.valid_until

    def to_json(self) -> dict:
        return {
            "suite": self.suite,
            "codename": self.codename,
            "date": self.date,
            "valid_until": self.valid_until_text,
        }


def _fields(stanza: str) -> dict[str, str]:
    """One deb822 stanza: field -> value (continuation lines joined with newlines)."""
    out: dict[str, str] = {}
    key = None
    for line in stanza.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line[0] in " \t" and key is not None:
            out[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip()
            out[key] = value.strip()
    return out


def parse_date(text: str) -> dt.datetime | None:
    """An RFC 2822 date as a Release writes it (`Fri, 06 Nov 2026 08:08:01 UTC`), timezone-aware."""
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def parse_release(text: str, *, where: str = "Release") -> Release:
    """A Release file's text (the verified part of an InRelease)."""
    f = _fields(text.split("\n\n")[0])
    if "Suite" not in f and "Codename" not in f:
        raise IntegrityError(f"{where} is not a Debian Release file (no Suite or Codename)")
    files: dict[str, tuple[str, int]] = {}
    for line in f.get("SHA256", "").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit():
            files[parts[2]] = (parts[0].lower(), int(parts[1]))
    vu = f.get("Valid-Until")
    valid_until = parse_date(vu) if vu else None
    if vu and valid_until is None:
        raise IntegrityError(f"{where}: Valid-Until {vu!r} is not a date")
    return Release(
        suite=f.get("Suite", ""),
        codename=f.get("Codename", ""),
        date=f.get("Date"),
        valid_until=valid_until,
        valid_until_text=vu,
        sha256=files,
    )


def accepted_suites(values: Iterable[str] = (), env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The suites whose expired Release the user accepts: --allow-expired-release values and
    RVPORT_ALLOW_EXPIRED_RELEASE (comma- or space-separated), sorted, each once. Read at the CLI edge."""
    names = set()
    for v in [*values, *([env.get(ALLOW_EXPIRED_ENV, "")] if env is not None else [])]:
        names |= {n for n in v.replace(",", " ").split() if n}
    return tuple(sorted(names))


def check_expiry(release: Release, *, suite: str, now: dt.datetime, accepted: Iterable[str]) -> bool:
    """False when the Release is valid now; True when it has expired and its suite is accepted; else raises
    ExpiredRelease naming the suite, its Valid-Until and how to accept it."""
    if not release.expired(now):
        return False
    names = {suite, release.suite, release.codename} - {""}
    if names & set(accepted):
        return True
    raise ExpiredRelease(
        f"the Release of Debian {suite} expired: Valid-Until {release.valid_until_text} "
        f"(now {now:%a, %d %b %Y %H:%M:%S} UTC); an expired Release is refused, since it may be a frozen or "
        "replayed archive",
        hint=f"if this archive is a frozen copy you trust, accept it with --allow-expired-release {suite} "
        f"(or {ALLOW_EXPIRED_ENV}={suite}); apt in that base then ignores Valid-Until",
    )


def verify_signed(inrelease: Path, keyring: Path = DEFAULT_KEYRING) -> str:
    """The signed text of a clear-signed InRelease, as gpgv verified it against `keyring`."""
    if not keyring.is_file():
        raise HostNotReady(
            f"the Debian archive keyring {keyring} is missing",
            hint="apt-get install debian-archive-keyring (scripts/setup-host does it)",
        )
    with tempfile.TemporaryDirectory(prefix="rvport-gpgv-") as tmp:
        out = Path(tmp) / "Release"
        cp = proc.run(
            ["gpgv", "--keyring", str(keyring), "--output", str(out), str(inrelease)],
            check=False,
            capture=True,
        )
        if cp.returncode != 0 or not out.is_file():
            tail = " ".join((cp.stderr or cp.stdout or "").strip().splitlines()[-2:])
            raise IntegrityError(
                f"the signature of {inrelease.name} does not verify against {keyring}: {tail}",
                hint="the archive or a proxy changed the file, or the keyring is older than the archive's "
                "key (update debian-archive-keyring)",
            )
        return out.read_text(errors="replace")


# ------------------------------------------------------------------------------------------- Packages index
@dataclass(frozen=True, kw_only=True)
class DebPackage:
    name: str
    version: str
    architecture: str
    filename: str  # the .deb's path in the archive (pool/...)
    size: int
    sha256: str
    depends: str = ""  # the Depends field as the index has it (not recorded: apt resolves it)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "architecture": self.architecture,
            "filename": self.filename,
            "size": self.size,
            "sha256": self.sha256,
        }


def parse_packages(text: str, names: frozenset[str] | None = None) -> dict[str, tuple[DebPackage, ...]]:
    """A Packages index: package name -> every version it lists (in the index's order). With `names`, those
    packages alone: a stanza that opens with another one's Package line is skipped unparsed (a suite's index
    has some 70,000 stanzas, and a recipe pins three)."""
    out: dict[str, list[DebPackage]] = {}
    for stanza in text.split("\n\n"):
        if names is not None:
            key, colon, value = stanza.lstrip("\n").partition("\n")[0].partition(":")
            if colon and key == "Package" and value.strip() not in names:
                continue
        f = _fields(stanza)
        if not f.get("Package") or not f.get("Version"):
            continue
        if names is not None and f["Package"] not in names:
            continue
        try:
            size = int(f.get("Size", "0"))
        except ValueError:
            size = 0
        out.setdefault(f["Package"], []).append(
            DebPackage(
                name=f["Package"],
                version=f["Version"],
                architecture=f.get("Architecture", ""),
                filename=f.get("Filename", ""),
                size=size,
                sha256=f.get("SHA256", "").lower(),
                depends=f.get("Depends", "").replace("\n", " "),
            )
        )
    return {k: tuple(v) for k, v in out.items()}


@dataclass(frozen=True, kw_only=True)
class DebPin:
    name: str
    version: str
    sha256: str

    def to_json(self) -> dict:
        return {"name": self.name, "version": self.version, "sha256": self.sha256}


def check_pins(
    pins: Iterable[DebPin], index: Mapping[str, tuple[DebPackage, ...]], *, where: str
) -> list[DebPackage]:
    """Every pin as the index has it; raises when the archive no longer holds a pinned version (naming what it
    holds now: SourceUnavailable, exit 5) or holds it with another digest (IntegrityError, exit 4). All pins
    are checked before anything is raised."""
    found: list[DebPackage] = []
    gone: list[str] = []
    differ: list[str] = []
    for pin in pins:
        have = index.get(pin.name, ())
        match = [p for p in have if p.version == pin.version]
        if not match:
            now = ", ".join(p.version for p in have) or "no version of it"
            gone.append(f"{pin.name} {pin.version} (the archive has {now})")
        elif all(p.sha256 != pin.sha256 for p in match):
            differ.append(
                f"{pin.name} {pin.version}: pinned sha256 {pin.sha256}, the index says {match[0].sha256}"
            )
        else:
            found.append(next(p for p in match if p.sha256 == pin.sha256))
    if gone:
        raise SourceUnavailable(
            f"{where} no longer holds the pinned version of " + "; ".join(gone),
            hint="the archive has moved on: pin a version it holds (version and the .deb's sha256 from its "
            "Packages index), or use a mirror that keeps the pinned one; nothing was built",
        )
    if differ:
        raise IntegrityError(
            f"{where}: the index's digest differs from the pin: " + "; ".join(differ),
            hint="the same version with other bytes: never change the pin without knowing why",
        )
    return found


# ------------------------------------------------------------------------------------------------- fetching
MAX_INRELEASE = 16 << 20  # bytes; Debian's are a few hundred KiB


def _get(session, url: str, *, what: str):  # type: ignore[no-untyped-def]
    import requests

    try:
        r = session.get(url, stream=True, timeout=(20, 60))
    except requests.RequestException as e:
        raise SourceUnavailable(
            f"{what}: cannot reach {url}: {e.__class__.__name__}",
            hint="check the network or the proxy (--ca-bundle for a TLS-intercepting one)",
        ) from e
    if r.status_code != 200:
        r.close()
        raise SourceUnavailable(
            f"{what}: HTTP {r.status_code} from {url}", hint="check the mirror and the suite"
        )
    return r


@dataclass(frozen=True, kw_only=True)
class SignedRelease:
    release: Release
    inrelease_sha256: str  # the digest of the InRelease file as fetched (signature included)
    url: str


def fetch_release(
    mirror: str, suite: str, *, session, keyring: Path = DEFAULT_KEYRING, tmp: Path | None = None
) -> SignedRelease:  # type: ignore[no-untyped-def]
    """dists/SUITE/InRelease of `mirror`, verified with gpgv against `keyring`, parsed from the verified
    text."""
    import hashlib

    url = f"{mirror.rstrip('/')}/dists/{suite}/InRelease"
    with tempfile.TemporaryDirectory(prefix="rvport-release-", dir=tmp) as d:
        path = Path(d) / "InRelease"
        with _get(session, url, what=f"Debian {suite}'s Release") as r, open(path, "wb") as f:
            got = 0
            for chunk in r.iter_content(1 << 16):
                got += len(chunk)
                if got > MAX_INRELEASE:  # read before its signature is checked: bounded
                    raise IntegrityError(
                        f"{url}: more than {MAX_INRELEASE} bytes, which no InRelease file is",
                        hint="check the mirror in the host's apt sources, or the proxy in front of it",
                    )
                f.write(chunk)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        text = verify_signed(path, keyring)
    return SignedRelease(release=parse_release(text, where=url), inrelease_sha256=digest, url=url)


def fetch_packages_index(
    mirror: str,
    suite: str,
    signed: SignedRelease,
    *,
    component: str,
    arch: str,
    session,
    cache,
    names: frozenset[str] | None = None,
) -> dict[str, tuple[DebPackage, ...]]:  # type: ignore[no-untyped-def]
    """The Packages index of component/arch (with `names`, of those packages alone: parse_packages), its
    Packages.xz checked against the signed Release's SHA256 and kept in the cache by that digest (fetched only
    when the cache lacks it)."""
    import hashlib

    rel = f"{component}/binary-{arch}/Packages.xz"
    if rel not in signed.release.sha256:
        raise SourceUnavailable(
            f"Debian {suite}'s Release lists no {rel}",
            hint=f"the archive may not carry {arch} for {suite}; check the suite and architecture",
        )
    sha, size = signed.release.sha256[rel]
    blob = cache.blob(sha)
    if not blob.is_file():
        url = f"{mirror.rstrip('/')}/dists/{suite}/{rel}"
        with cache.lock(f"deb-{sha}"):
            if not blob.is_file():
                part = cache.part_path(f"deb-{sha}")
                h = hashlib.sha256()
                got = 0
                with _get(session, url, what=f"Debian {suite}'s {rel}") as r, open(part, "wb") as f:
                    for chunk in r.iter_content(1 << 16):
                        got += len(chunk)
                        if got > size:  # the signed Release says how big it is: no byte more is taken
                            break
                        f.write(chunk)
                        h.update(chunk)
                if got != size or h.hexdigest() != sha:
                    part.unlink(missing_ok=True)
                    raise IntegrityError(
                        f"{url}: sha256 {h.hexdigest()} is not the signed Release's {sha} ({size} bytes)",
                        hint="the mirror is mid-update or a proxy changed the file; run again later",
                    )
                cache.commit_blob(part, sha)
    data = blob.read_bytes()
    if hashlib.sha256(data).hexdigest() != sha:
        raise IntegrityError(f"the cached {rel} of {suite} ({blob}) is corrupt", hint=f"remove {blob}")
    return parse_packages(lzma.decompress(data).decode("utf-8", errors="replace"), names)
