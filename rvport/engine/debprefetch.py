"""The packages of debootstrap's first stage, fetched side by side while it starts.

debootstrap fetches its packages one after another, with shell work around each: 13-21 s for the riscv64
base's 214 packages, when the same files come in about a second eight at a time. So while its first stage
resolves the package set, `debootstrap --print-debs` (the same resolution, in a scratch directory, on the
other core) names the packages, and they are fetched into the rootfs's var/cache/apt/archives under the names
debootstrap gives them. Where it finds a package there, debootstrap checks it against the signed index as it
checks its own downloads, and keeps it.

Each file is written under a temporary name and renamed into place only when its size and SHA256 are the
index's (the rootfs's own copy of the index, which debootstrap verified). Nothing here can change what ends
up in the rootfs: a package not fetched, for whatever reason, is fetched by debootstrap itself.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import requests

from rvport import proc, resources
from rvport.engine import events
from rvport.engine.events import OnPhase, Phase
from rvport.errors import RvportError
from rvport.sources.fetch import ca_bundle

WORKERS = 8
CHUNK = 1 << 16


@dataclass(frozen=True)
class Deb:
    package: str
    version: str
    arch: str
    filename: str  # the pool path under the mirror
    sha256: str
    size: int

    @property
    def name(self) -> str:
        """The file name debootstrap gives it in var/cache/apt/archives (the version's epoch colon
        escaped)."""
        return f"{self.package}_{self.version}_{self.arch}.deb".replace(":", "%3a", 1)


def parse_index(text: str, wanted: set[str]) -> dict[str, Deb]:
    """The wanted packages' entries in a Packages index (the last entry of a package listed twice)."""
    found: dict[str, Deb] = {}
    for stanza in text.split("\n\n"):
        fields = dict(m.groups() for m in re.finditer(r"^([A-Za-z0-9-]+): *(.*)$", stanza, re.M))
        name = fields.get("Package")
        if name in wanted and all(
            fields.get(k) for k in ("Version", "Architecture", "Filename", "SHA256", "Size")
        ):
            found[name] = Deb(
                package=name,
                version=fields["Version"],
                arch=fields["Architecture"],
                filename=fields["Filename"],
                sha256=fields["SHA256"],
                size=int(fields["Size"]),
            )
    return found


def fetch_one(session: requests.Session, url: str, deb: Deb, archives: Path, stop: threading.Event) -> bool:
    """`deb` into `archives`, checked; False when it is not there afterwards (debootstrap then fetches it)."""
    dest = archives / deb.name
    if dest.exists() or stop.is_set():
        return dest.exists()
    part = archives / f".rvport-part-{deb.name}"
    try:
        sha = hashlib.sha256()
        size = 0
        with session.get(url, stream=True, timeout=60) as r, open(part, "wb") as f:
            r.raise_for_status()
            for chunk in r.iter_content(CHUNK):
                if stop.is_set():
                    return False
                sha.update(chunk)
                size += len(chunk)
                f.write(chunk)
        if size != deb.size or sha.hexdigest() != deb.sha256:
            return False
        os.replace(part, dest)
        return True
    except (OSError, requests.RequestException):
        return False
    finally:
        part.unlink(missing_ok=True)


def _session() -> requests.Session:
    """A session that verifies TLS (an https mirror) against rvport's CA bundle, as the sources' downloads
    do."""
    session = requests.Session()
    session.verify = str(ca_bundle())
    return session


class Prefetch:
    """While the block runs (debootstrap's first stage into `rootfs`), the packages `print_debs` names are
    fetched into the rootfs, `workers` at a time; leaving the block stops the fetching and waits for it.
    `print_debs` is the argv of `debootstrap --print-debs` into a scratch directory; `mirror` the URL
    debootstrap fetches from."""

    def __init__(
        self,
        print_debs: list[str],
        rootfs: Path,
        mirror: str,
        *,
        on_line: Callable[[str], None],
        on_phase: OnPhase = events.ignore,
        session: requests.Session | None = None,
        workers: int = WORKERS,
        wait_for_index: float = 30,
    ):
        self.print_debs, self.rootfs, self.mirror = print_debs, rootfs, mirror.rstrip("/")
        self.on_line, self.on_phase = on_line, on_phase
        self.workers, self.wait_for_index = workers, wait_for_index
        self.session = session or _session()
        self.fetched = 0
        self.why_not: str | None = None  # why nothing was fetched, when so
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="deb-prefetch", daemon=True)

    def __enter__(self) -> Prefetch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.session.close()

    def _index(self, wanted: set[str]) -> dict[str, Deb]:
        """The entries of the rootfs's own index (debootstrap wrote and checked it before resolving)."""
        lists = self.rootfs / "var/lib/apt/lists"
        found: dict[str, Deb] = {}
        for _ in range(int(self.wait_for_index * 10)):
            files = sorted(lists.glob("*_Packages")) if lists.is_dir() else []
            if files or self._stop.wait(0.1):
                break
        for f in files:
            found |= parse_index(f.read_text(errors="replace"), wanted)
        return found

    def _names(self) -> set[str] | None:
        """The packages `debootstrap --print-debs` names (its output to a file; its messages dropped: the
        first
        stage prints the same). A streamed program, so stop_streams() stops it as the first stage."""
        out = self.rootfs.with_name(self.rootfs.name + ".debs")
        try:
            rc = proc.stream(
                ["sh", str(resources.builtin("scripts", "stdout-to.sh")), str(out), *self.print_debs],
                on_line=lambda _l: None,
            )
            if rc != 0:
                self.why_not = f"debootstrap --print-debs: {proc.describe_status(rc)}"
                return None
            return set(out.read_text().split())
        except (OSError, RvportError) as e:
            self.why_not = f"debootstrap --print-debs: {e}"
            return None
        finally:
            out.unlink(missing_ok=True)

    def _run(self) -> None:
        try:
            self._fetch()
        except Exception as e:  # noqa: BLE001 - fetching ahead must never fail the bootstrap: it just did less
            self.why_not = f"{type(e).__name__}: {e}"

    def _fetch(self) -> None:
        names = self._names()
        if names is None or self._stop.is_set():
            return
        debs = self._index(names)
        if not debs:
            self.why_not = "no package of the list found in the rootfs's index"
            return
        archives = self.rootfs / "var/cache/apt/archives"
        archives.mkdir(parents=True, exist_ok=True)
        self.on_line(f"bootstrap: fetching {len(debs)} packages, {self.workers} at a time, for debootstrap")
        self.on_phase(Phase(phase="fetching packages ahead"))
        with ThreadPoolExecutor(self.workers, thread_name_prefix="deb") as pool:
            done = list(
                pool.map(
                    lambda d: fetch_one(self.session, f"{self.mirror}/{d.filename}", d, archives, self._stop),
                    debs.values(),
                )
            )
        self.fetched = sum(done)
