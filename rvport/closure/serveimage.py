"""The image a serving check runs in (`rvport serve-check`, docs/closure.md): the riscv64 base of the
wheelhouse's Debian suite plus the wheelhouse's Debian packages, each at exactly its locked version. It is
made as a stage's toolchain image is (the toolchain template: apt on the scalar profile's QEMU CPU, the CA
bundle as a secret, the installed list written to /rvport-toolchain-packages.txt) and tagged
rvport/toolchain:RECIPE-serve-KEY, KEY a digest of the base image's id and the Dockerfile, which names every
PACKAGE=VERSION: made once, found again under its tag by any later check with the same base and list. Only
when it must be made is the suite's signed index read (InRelease verified with gpgv, an expired Release only
when accepted) and every package checked in it at its version with the lock's sha256; apt then fetches
exactly those files, checked against the same signed index. Making it is the one part of a serving check that
uses the network. Made or found, the image's installed list is compared with the pins: a package at another
version stops the check. A wheelhouse without Debian packages runs in the base itself."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rvport.catalogue.profiles import scalar_profile
from rvport.engine import buildx, debpins, images, render
from rvport.engine.stage import toolchain_tag
from rvport.errors import BuildFailed
from rvport.sources import debarchive
from rvport.sources.fetch import FetchOptions, stage_ca_bundle
from rvport.target import PLATFORM as RISCV64

PACKAGES_FILE = "/rvport-toolchain-packages.txt"  # written by the toolchain template


@dataclass(frozen=True, kw_only=True)
class ServeImage:
    tag: str
    image_id: str
    base_tag: str
    base_id: str
    made: bool  # made by this call (False: found under its tag)
    seconds: float  # making or finding it, the base included
    debian_release: dict | None  # the signed index's record when it was read (the image was made)

    def to_json(self) -> dict:
        return {
            "tag": self.tag,
            "image_id": self.image_id,
            "base": {"tag": self.base_tag, "image_id": self.base_id},
            "made": self.made,
            "seconds": round(self.seconds, 1),
            "debian_release": self.debian_release,
        }


def dockerfile(base_tag: str, pins: Sequence[debarchive.DebPin]) -> render.Rendered:
    """The image's Dockerfile: the toolchain template with every pin as PACKAGE=VERSION (apt installs that
    version or fails)."""
    cpu = scalar_profile().qemu_cpu
    return render.toolchain_dockerfile(base_tag, cpu, tuple(f"{p.name}={p.version}" for p in pins))


def differences(pins: Sequence[debarchive.DebPin], installed: dict[str, str]) -> list[str]:
    """Each pin the image does not hold at its version: 'PACKAGE=VERSION (the image has V)'."""
    out = []
    for p in pins:
        have = installed.get(p.name)
        if have != p.version:
            out.append(f"{p.name}={p.version} (the image has {have or 'none'})")
    return out


def ensure(
    recipe: str,
    pins: Sequence[debarchive.DebPin],
    *,
    base_spec: str,
    suite: str,
    bases: images.Bases,
    fetch: FetchOptions,
    log_path: Path,
    allow_expired: tuple[str, ...] = (),
    on_line: Callable[[str], None] | None = None,
    debian_mirror: str | None = None,
) -> ServeImage:
    """The serving check's image of `recipe` (see the module's docstring), made when the engine lacks it."""
    t0 = time.monotonic()
    base = bases.get(base_spec, RISCV64, on_line)
    if not pins:  # nothing for apt: the base itself
        return ServeImage(
            tag=base.tag,
            image_id=base.image_id,
            base_tag=base.tag,
            base_id=base.image_id,
            made=False,
            seconds=time.monotonic() - t0,
            debian_release=None,
        )
    rendered = dockerfile(base.tag, pins)
    tag, _ = toolchain_tag(recipe, "serve", base.image_id, rendered)
    record = None
    info = buildx.image_info(tag)
    if info is None:
        idx = debpins.signed_index(
            suite,
            fetch,
            allow_expired=allow_expired,
            mirror=debian_mirror,
            what=f"the Debian packages of {recipe}'s wheelhouse",
        )
        debarchive.check_pins(pins, idx.packages, where=f"Debian {suite} (riscv64, {idx.mirror})")
        record = idx.record()
        ca = stage_ca_bundle(fetch)
        made = images.ensure_image(
            tag,
            {"Dockerfile": rendered.text, **dict(rendered.files)},
            platform=RISCV64,
            tmp_root=fetch.cache.tmpdir(),
            log_path=log_path,
            what="serving check image",
            on_line=on_line,
            secrets=(("rvport-ca", ca),) if ca else (),
        )
        image_id, built = made.image_id, made.built
    else:
        image_id, built = info["id"], False
    wrong = differences(pins, images.read_packages(tag, PACKAGES_FILE))
    if wrong:
        raise BuildFailed(
            f"the serving check's image {tag} does not hold {len(wrong)} of the wheelhouse's Debian "
            f"package(s) at their versions: " + ", ".join(wrong[:8]) + (" ..." if len(wrong) > 8 else ""),
            hint=f"remove the image (docker image rm {tag}) and run the check again; see {log_path}",
        )
    return ServeImage(
        tag=tag,
        image_id=image_id,
        base_tag=base.tag,
        base_id=base.image_id,
        made=built,
        seconds=time.monotonic() - t0,
        debian_release=record,
    )
