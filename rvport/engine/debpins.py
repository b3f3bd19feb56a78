"""A recipe's pinned Debian packages (`toolchain: pins:`) checked against the archive before anything is
built.

The archive is the host's mirror (its apt sources, images.host_debian_mirror); the suite is the recipe's
base's; the architecture riscv64, component main. The suite's InRelease is verified with gpgv, its
Valid-Until checked
(an expired one needs --allow-expired-release, as for the base), the Packages index checked against the
Release's SHA256 and cached by that digest (rvport.sources.debarchive). Every pin must be in the index at its
version with its sha256: else the run stops, naming what the archive holds now. apt then installs exactly
those versions in the stage's images and checks each .deb against the same signed index.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rvport.catalogue.bases import load_base
from rvport.catalogue.model import Recipe
from rvport.errors import HostNotReady, SourceUnavailable
from rvport.sources import debarchive
from rvport.sources.fetch import FetchOptions, https_session

ARCH = "riscv64"
COMPONENT = "main"


def check_recipe_pins(
    recipe: Recipe,
    fetch: FetchOptions,
    *,
    allow_expired: tuple[str, ...] = (),
    mirror: str | None = None,
    keyring: Path = debarchive.DEFAULT_KEYRING,
) -> dict | None:
    """None for a recipe without pins; else what result.json records of them (suite, the Release's date and
    Valid-Until, whether an expired one was accepted, each package: name, version, sha256, filename, size)."""
    pins = recipe.toolchain.pins
    if not pins:
        return None
    suite = load_base(recipe.toolchain.base).suite
    idx = signed_index(
        suite,
        fetch,
        allow_expired=allow_expired,
        mirror=mirror,
        keyring=keyring,
        what=f"{recipe.ref}: its Debian pins",
        names=frozenset(p.name for p in pins),
    )
    found = debarchive.check_pins(
        [debarchive.DebPin(name=p.name, version=p.version, sha256=p.sha256) for p in pins],
        idx.packages,
        where=f"{recipe.ref}: Debian {suite} ({ARCH}, {idx.mirror})",
    )
    return {**idx.record(), "packages": [p.to_json() for p in found]}


@dataclass(frozen=True, kw_only=True)
class SignedIndex:
    """A suite's riscv64 Packages index as its signed Release vouches for it."""

    suite: str
    mirror: str
    signed: debarchive.SignedRelease
    accepted: bool  # an expired Release accepted by the user
    packages: Mapping[str, tuple[debarchive.DebPackage, ...]]

    def record(self) -> dict:
        return {
            "suite": self.suite,
            "architecture": ARCH,
            "release": {**self.signed.release.to_json(), "inrelease_sha256": self.signed.inrelease_sha256},
            "expired_release_accepted": self.accepted,
        }


def signed_index(
    suite: str,
    fetch: FetchOptions,
    *,
    allow_expired: tuple[str, ...] = (),
    mirror: str | None = None,
    keyring: Path = debarchive.DEFAULT_KEYRING,
    what: str,
    names: frozenset[str] | None = None,
) -> SignedIndex:
    """Debian `suite`'s riscv64 main Packages index from the host's mirror: InRelease verified with gpgv, its
    Valid-Until checked (an expired one only when accepted), Packages.xz checked against it and cached by its
    digest. `what` names who needs it, for the messages; with `names`, `packages` holds those packages
    alone."""
    from rvport.engine.images import host_debian_mirror

    mirror = mirror or host_debian_mirror()
    if not mirror:
        raise HostNotReady(
            f"{what} are checked against the Debian archive, and the host's apt sources name no Debian "
            "mirror",
            hint="add the Debian mirror to /etc/apt/sources.list.d (a deb822 .sources file)",
        )
    if fetch.offline:
        raise SourceUnavailable(
            f"{what} need Debian {suite}'s signed index, and --offline is set",
            hint="run without --offline (apt needs the archive to install them anyway)",
        )
    with https_session(fetch.ca_bundle) as session:
        signed = debarchive.fetch_release(
            mirror, suite, session=session, keyring=keyring, tmp=fetch.cache.tmpdir()
        )
        accepted = debarchive.check_expiry(
            signed.release, suite=suite, now=dt.datetime.now(dt.UTC), accepted=allow_expired
        )
        # the index is kept in the download cache by its digest: a second stage reads it from there
        index = debarchive.fetch_packages_index(
            mirror,
            suite,
            signed,
            component=COMPONENT,
            arch=ARCH,
            session=session,
            cache=fetch.cache,
            names=names,
        )
    return SignedIndex(suite=suite, mirror=mirror, signed=signed, accepted=accepted, packages=index)
