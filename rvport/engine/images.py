"""Images in the engine: base images, and building an image then inspecting it, written once.

Base images: a Debian rootfs loaded as one layer (rootfs_image), or an image named by digest, from a base spec
(rvport.catalogue.bases). How the rootfs is made (debootstrap in one run, or split between the build platform
and emulation for a foreign architecture) is rvport/engine/bootstrap.py. Built once and reused while its
inputs (spec file, architecture, mirror, bootstrap method) are unchanged: the image tag carries the inputs'
digest. What was installed (the suite's Release file digest, every package version) is recorded beside the
cache entry (the bases record, docs/architecture.md) and in result.json. `Bases` holds the base images of one
run.

Build-then-inspect (`load_image`, `ensure_image`): `docker buildx build --load`, then the engine's own record
of the image; an image that was built but is not in the engine is a HostNotReady, never a crash. Base,
toolchain and accelerated prefix images are all made this way. `parse_packages` reads the "name=version"
lists dpkg-query writes (base images, toolchain images, accelerated stages).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rvport import proc
from rvport.catalogue.bases import BaseSpec, load_base
from rvport.engine import bootstrap, buildx, events, rootfs_image
from rvport.engine.events import OnPhase
from rvport.errors import HostNotReady, RvportError
from rvport.fileio import held_lock, read_json
from rvport.host import normalize_arch
from rvport.sources import debarchive
from rvport.sources.cache import atomic_write_text
from rvport.target import DEBIAN_ARCH, DOCKER_PLATFORM
from rvport.target import PLATFORM as RISCV64

BASE_RECORD_SCHEMA = 1  # cache_dir/bases/<key>.json

# dpkg-query's list of installed packages, one "name=version" a line
DPKG_QUERY = ["dpkg-query", "-W", "-f", "${Package}=${Version}\\n"]


@dataclass(frozen=True, kw_only=True)
class BaseImage:
    spec: str
    tag: str
    image_id: str
    platform: str
    key: str
    source: str  # "debootstrap" or the digest reference
    release_sha256: str | None = None
    packages: dict[str, str] = field(default_factory=dict)
    reused: bool = False
    duration_s: float | None = None  # how long making it took (rootfs and load); None when it was found
    release_valid_until: str | None = None  # the suite's signed Release's Valid-Until, when it has one
    expired_release_accepted: bool = False  # made with --allow-expired-release: apt ignores Valid-Until

    def to_json(self) -> dict:
        return {
            "spec": self.spec,
            "tag": self.tag,
            "image_id": self.image_id,
            "platform": self.platform,
            "key": self.key,
            "source": self.source,
            "release_sha256": self.release_sha256,
            "packages": dict(sorted(self.packages.items())),
            "reused": self.reused,
            "duration_s": None if self.duration_s is None else round(self.duration_s, 2),
            "release_valid_until": self.release_valid_until,
            "expired_release_accepted": self.expired_release_accepted,
        }


def host_debian_mirror(
    sources_dir: Path = Path("/etc/apt/sources.list.d"), sources_list: Path = Path("/etc/apt/sources.list")
) -> str | None:
    """The host's own Debian mirror (first URIs of a deb822 stanza, or a one-line `deb` entry), if any.

    debootstrap then uses what the host already uses; with none found, debootstrap's own default applies.
    """
    for f in sorted(sources_dir.glob("*.sources")):
        for stanza in f.read_text(errors="replace").split("\n\n"):
            fields = dict(
                ln.split(":", 1) for ln in stanza.splitlines() if ":" in ln and not ln.startswith("#")
            )
            suites = fields.get("Suites", "")
            if "security" in suites or "security" in fields.get("URIs", ""):
                continue
            if fields.get("URIs"):
                return fields["URIs"].split()[0].strip()
    if sources_list.is_file():
        for line in sources_list.read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and "security" not in line:
                url = [p for p in parts[1:] if "://" in p]
                if url:
                    return url[0]
    return None


def base_key(
    spec: BaseSpec,
    platform: str,
    mirror: str | None,
    method: str = bootstrap.CLASSIC,
    *,
    expired_accepted: bool = False,
) -> str:
    """The base image's key: its inputs. A base whose suite's expired Release was accepted carries an
    apt.conf.d file (debarchive.APT_CONF_TEXT), so it is another image; other keys stay as they were."""
    doc = {
        "spec": spec.text_sha256,
        "platform": platform,
        "mirror": mirror or "debootstrap-default",
        "v": 1,
        **bootstrap.key_part(method),
        **({"apt_conf": debarchive.APT_CONF_TEXT} if expired_accepted else {}),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _foreign(platform: str) -> bool:
    """Whether `platform` is not the host's own (its code runs under emulation)."""
    import platform as _platform

    return platform != DOCKER_PLATFORM.get(normalize_arch(_platform.machine()))


def bootstrap_method(platform: str, forced: str | None = None) -> tuple[str, str]:
    """(method, why) for a base of `platform` on this host (bootstrap.choose_method); `forced`
    (RVPORT_BOOTSTRAP, read by the CLI: `debootstrap` or `split`) overrides the choice."""
    return bootstrap.choose_method(
        foreign=_foreign(platform),
        dpkg=proc.which("dpkg"),
        filters=bootstrap.host_dpkg_filters(),
        forced=forced,
    )


def keep_debootstrap_log(rootfs: Path, log_path: Path | None) -> None:
    """debootstrap's own log lives in the rootfs, which is removed: its tail goes into rvport's log."""
    own = rootfs / "debootstrap" / "debootstrap.log"
    if log_path is None or not own.is_file():
        return
    tail = own.read_text(errors="replace").splitlines()[-200:]
    with open(log_path, "a") as f:
        f.write(f"--- the last {len(tail)} lines of {own.relative_to(rootfs)} ---\n" + "\n".join(tail) + "\n")


def parse_dpkg_status(text: str) -> dict[str, str]:
    """Installed package -> version from a dpkg status file."""
    out: dict[str, str] = {}
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line and not line[0].isspace() and ":" in line:
                k, _, v = line.partition(":")
                fields[k] = v.strip()
        if fields.get("Package") and "installed" in fields.get("Status", "").split()[-1:]:
            out[fields["Package"]] = fields.get("Version", "")
    return out


def parse_packages(text: str, *, qualified: bool = True) -> dict[str, str]:
    """ "name=version" lines (dpkg-query output, or a tool=version list) -> {name: version}.

    Lines without a name or a version are skipped (dpkg-query lists known but not installed packages with
    an empty version). With qualified=False, an architecture qualifier is dropped: libc6:amd64 -> libc6.
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        name, _, version = line.partition("=")
        if name and version:
            out[name if qualified else name.split(":")[0]] = version
    return out


def installed_packages(image: str, platform: str) -> dict[str, str]:
    """Package -> version installed in an image (dpkg's own record), {} when it cannot be read."""
    try:
        cp = buildx.run_container(image, DPKG_QUERY, platform=platform, check=False, timeout=300)
    except RvportError:
        return {}
    return parse_packages(cp.stdout)


def read_packages(image: str, path: str) -> dict[str, str]:
    """A "name=version" file an image carries (e.g. /rvport-toolchain-packages.txt), {} when it cannot be
    read."""
    try:
        cp = buildx.run_container(image, ["cat", path], check=False, timeout=120)
    except RvportError:
        return {}
    return parse_packages(cp.stdout)


# ------------------------------------------------------------------------------------ build, then inspect
@dataclass(frozen=True, kw_only=True)
class LoadedImage:
    tag: str
    image_id: str
    built: bool  # made by this call (False: it was in the engine already)


def load_image(
    ctx: Path,
    tag: str,
    *,
    platform: str,
    log_path: Path,
    what: str = "image",
    builder: str | None = None,
    on_line: Callable[[str], None] | None = None,
    on_phase: OnPhase | None = None,
    labels: tuple[tuple[str, str], ...] = (),
    secrets: tuple[tuple[str, Path], ...] = (),
    network: str | None = None,
) -> str:
    """Build ctx/Dockerfile into the engine as `tag` (buildx --load) and return the image's id."""
    buildx.build(
        buildx.BuildSpec(
            context=ctx,
            dockerfile=ctx / "Dockerfile",
            platform=platform,
            tag=tag,
            load=True,
            network=network,
            builder=builder,
            secrets=secrets,
            labels=labels,
        ),
        log_path=log_path,
        on_line=on_line,
        on_phase=on_phase,
    )
    info = buildx.image_info(tag)
    if info is None:
        raise HostNotReady(
            f"{what} {tag} was built but is not in the engine",
            hint="with a non-docker builder, --load must be supported; see docs/troubleshooting.md",
        )
    return info["id"]


def ensure_image(
    tag: str,
    files: Mapping[str, str],
    *,
    platform: str,
    tmp_root: Path,
    log_path: Path,
    what: str = "image",
    builder: str | None = None,
    on_line: Callable[[str], None] | None = None,
    on_phase: OnPhase | None = None,
    labels: tuple[tuple[str, str], ...] = (),
    secrets: tuple[tuple[str, Path], ...] = (),
    network: str | None = None,
) -> LoadedImage:
    """The image `tag`, built once from `files` (Dockerfile and what it copies) when the engine lacks it.

    The tag carries the digest of the image's inputs, so an image found under it is reused as it is. Stages
    made side by side may want the same image: one makes it, the others wait and find it.
    """
    with _one_at_a_time(tag):
        return _ensure_image(
            tag,
            files,
            platform=platform,
            tmp_root=tmp_root,
            log_path=log_path,
            what=what,
            builder=builder,
            on_line=on_line,
            on_phase=on_phase,
            labels=labels,
            secrets=secrets,
            network=network,
        )


_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _one_at_a_time(name: str) -> threading.Lock:
    """The lock of one image (or base) name: made by one thread while others wait."""
    with _locks_guard:
        return _locks.setdefault(name, threading.Lock())


def _ensure_image(
    tag: str,
    files: Mapping[str, str],
    *,
    platform: str,
    tmp_root: Path,
    log_path: Path,
    what: str,
    builder: str | None,
    on_line: Callable[[str], None] | None,
    on_phase: OnPhase | None,
    labels: tuple[tuple[str, str], ...],
    secrets: tuple[tuple[str, Path], ...],
    network: str | None,
) -> LoadedImage:
    info = buildx.image_info(tag)
    if info is not None:
        return LoadedImage(tag=tag, image_id=info["id"], built=False)
    tmp_root.mkdir(parents=True, exist_ok=True)
    ctx = Path(tempfile.mkdtemp(prefix="image-", dir=tmp_root))
    try:
        for name, text in files.items():
            (ctx / name).write_text(text)
        image_id = load_image(
            ctx,
            tag,
            platform=platform,
            log_path=log_path,
            what=what,
            builder=builder,
            on_line=on_line,
            on_phase=on_phase,
            labels=labels,
            secrets=secrets,
            network=network,
        )
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    return LoadedImage(tag=tag, image_id=image_id, built=True)


def _release_digest(rootfs: Path) -> str | None:
    lists = rootfs / "var/lib/apt/lists"
    for f in sorted(lists.glob("*_InRelease")) + sorted(lists.glob("*_Release")):
        return hashlib.sha256(f.read_bytes()).hexdigest()
    return None


def _release_check(
    spec: BaseSpec, release: debarchive.Release, accepted: tuple[str, ...], say: Callable[[str], None]
) -> bool:
    """check_expiry now, said when an expired Release is accepted (never silent)."""
    now = dt.datetime.now(dt.UTC)
    if debarchive.check_expiry(release, suite=spec.suite, now=now, accepted=accepted):
        say(
            f"bootstrap: Debian {spec.suite}'s Release expired (Valid-Until {release.valid_until_text}); "
            "accepted by --allow-expired-release: apt in this base ignores Valid-Until"
        )
        return True
    return False


def _rootfs_release(rootfs: Path) -> debarchive.Release | None:
    """The Release debootstrap fetched and checked (its InRelease verified again here)."""
    lists = rootfs / "var/lib/apt/lists"
    for f in sorted(lists.glob("*_InRelease")):
        return debarchive.parse_release(debarchive.verify_signed(f), where=str(f))
    for f in sorted(lists.glob("*_Release")):
        return debarchive.parse_release(f.read_text(errors="replace"), where=str(f))
    return None


def _one_process_at_a_time(make: Callable[..., BaseImage]) -> Callable[..., BaseImage]:
    """`make` (ensure_base) run by one process at a time per base: processes sharing the cache directory take
    the base's lock (CACHE/bases/NAME-ARCH.lock), so the second finds the image the first made under its tag,
    instead of making another and taking the tag over (the images already made on the first would then no
    longer be found by their keys)."""

    @functools.wraps(make)
    def locked(spec: BaseSpec, *, platform: str, cache_dir: Path, **kw: Any) -> BaseImage:
        bases = cache_dir / "bases"
        bases.mkdir(parents=True, exist_ok=True)
        with held_lock(bases / f"{spec.name}-{DEBIAN_ARCH.get(platform, 'unknown')}.lock"):
            return make(spec, platform=platform, cache_dir=cache_dir, **kw)

    return locked


@_one_process_at_a_time
def ensure_base(
    spec: BaseSpec,
    *,
    platform: str,
    cache_dir: Path,
    log_path: Path,
    on_line: Callable[[str], None] | None = None,
    on_phase: OnPhase | None = None,
    image_override: str | None = None,
    allow_expired: tuple[str, ...] = (),
    ca_bundle: Path | None = None,
    bootstrap_forced: str | None = None,
) -> BaseImage:
    """The base image for `platform`, made (debootstrap, then loaded as one layer: rootfs_image) only when not
    already present.

    The suite's Release must be valid (Valid-Until not passed), or its suite in `allow_expired` (the user's
    --allow-expired-release): checked before debootstrap from the signed InRelease of the host's mirror
    (debarchive), or from the one debootstrap fetched when no mirror is known, and again when a base is reused
    (from its record). An accepted base carries debarchive.APT_CONF_TEXT and has a key of its own.
    `bootstrap_forced` (RVPORT_BOOTSTRAP, read by the CLI) overrides the method chosen for this host."""
    ref = image_override or spec.image
    if ref:
        info = buildx.image_info(ref)
        if info is None:
            raise HostNotReady(
                f"base image {ref} is not in the engine and no registry may be reachable",
                hint="load it first (docker load / pull on a connected host), or drop the "
                "override to bootstrap the base with debootstrap",
            )
        return BaseImage(
            spec=spec.name,
            tag=ref,
            image_id=info["id"],
            platform=platform,
            key=ref,
            source=ref,
            packages=installed_packages(ref, platform),
            reused=True,
        )
    mirror = host_debian_mirror()
    method, why = bootstrap_method(platform, bootstrap_forced)
    accepting = spec.suite in allow_expired
    key = base_key(spec, platform, mirror, method, expired_accepted=accepting)
    say = on_line or (lambda _l: None)
    said = on_phase or events.ignore
    arch = DEBIAN_ARCH.get(platform)
    if arch is None:
        raise HostNotReady(f"no Debian architecture for platform {platform}")
    tag = f"rvport/base:{spec.name}-{arch}-{key[:12]}"
    meta_path = cache_dir / "bases" / f"{key}.json"
    info = buildx.image_info(tag)
    if info is not None:
        meta = read_base_record(meta_path)
        if meta is None:  # made with another cache directory (or its record unreadable): ask the image itself
            meta = {
                "release_sha256": info["labels"].get("org.rvport.release"),
                "release_valid_until": info["labels"].get("org.rvport.release-valid-until") or None,
                "packages": installed_packages(tag, platform),
            }
            write_base_record(meta_path, dict(meta, tag=tag, spec=spec.name))
        valid_until = meta.get("release_valid_until")
        if valid_until:  # a base made while its Release was valid is refused once that has expired
            recorded = debarchive.parse_release(
                f"Suite: {spec.suite}\nValid-Until: {valid_until}\n", where=str(meta_path)
            )
            _release_check(spec, recorded, allow_expired, say)
        return BaseImage(
            spec=spec.name,
            tag=tag,
            image_id=info["id"],
            platform=platform,
            key=key,
            source="debootstrap",
            release_sha256=meta.get("release_sha256"),
            packages=meta.get("packages", {}),
            reused=True,
            release_valid_until=valid_until,
            expired_release_accepted=accepting,
        )
    if proc.which("debootstrap") is None:
        raise HostNotReady(
            "debootstrap is needed to make the base image (no registry is used)",
            hint="apt-get install debootstrap (scripts/setup-host does it), or name a base "
            "image by digest with --base-image",
        )
    started = time.monotonic()
    signed = None
    if mirror:  # the Release's expiry checked before anything is made
        from rvport.sources.fetch import https_session

        with https_session(ca_bundle) as session:
            signed = debarchive.fetch_release(mirror, spec.suite, session=session, tmp=_tmp_root(cache_dir))
        _release_check(spec, signed.release, allow_expired, say)
    work = Path(tempfile.mkdtemp(prefix="rvport-base-", dir=_tmp_root(cache_dir)))
    try:
        rootfs = work / "rootfs"
        say(f"bootstrap: {method} ({why})")
        req = bootstrap.Request(
            arch=arch,
            suite=spec.suite,
            variant=spec.variant,
            components=spec.components,
            packages=spec.packages,
            mirror=mirror,
        )
        try:
            # packages fetched ahead but for a foreign base made the classic way: the reference
            # (bench/bootstrap.py)
            bootstrap.make_rootfs(
                req,
                rootfs,
                method=method,
                log_path=log_path,
                on_line=say,
                on_phase=said,
                fetch_ahead=method == bootstrap.SPLIT or not _foreign(platform),
            )
        except HostNotReady as e:
            keep_debootstrap_log(rootfs, log_path)
            raise HostNotReady(
                f"{e.message} for {spec.name} ({arch})",
                detail=e.detail,
                hint=f"see {log_path} (debootstrap's own log is appended there); " + (e.hint or ""),
            ) from e
        packages = parse_dpkg_status((rootfs / "var/lib/dpkg/status").read_text(errors="replace"))
        release = _release_digest(rootfs)
        fetched = _rootfs_release(
            rootfs
        )  # what debootstrap used: checked too (the only check without a mirror)
        if fetched is not None:
            _release_check(spec, fetched, allow_expired, say if signed is None else (lambda _l: None))
        valid_until = (fetched.valid_until_text if fetched else None) or (
            signed.release.valid_until_text if signed else None
        )
        if accepting:
            conf = rootfs / "etc/apt/apt.conf.d" / debarchive.APT_CONF_NAME
            conf.write_text(debarchive.APT_CONF_TEXT)
            conf.chmod(0o644)
        # apt lists and caches are not part of the image
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for p in (rootfs / junk).glob("*"):
                if p.is_file():
                    p.unlink()
        image_id = rootfs_image.load_rootfs(
            rootfs,
            work,
            tag=tag,
            platform=platform,
            env={"LANG": "C.UTF-8"},
            cmd=["/bin/bash"],
            labels={
                "org.rvport.base": spec.name,
                "org.rvport.key": key,
                "org.rvport.release": release or "",
                **({"org.rvport.release-valid-until": valid_until} if valid_until else {}),
                "org.rvport.bootstrap": method,
                **({"org.rvport.allow-expired-release": spec.suite} if accepting else {}),
            },
            made_by=f"rvport: {spec.name} bootstrapped ({method})",
            log_path=log_path,
            on_line=say,
            on_phase=said,
        )
        write_base_record(
            meta_path,
            {
                "tag": tag,
                "release_sha256": release,
                "packages": packages,
                "mirror": mirror,
                "spec": spec.name,
                "bootstrap": method,
                "release_valid_until": valid_until,
                "expired_release_accepted": accepting,
            },
        )
        made = BaseImage(
            spec=spec.name,
            tag=tag,
            image_id=image_id,
            platform=platform,
            key=key,
            source="debootstrap",
            release_sha256=release,
            packages=packages,
            release_valid_until=valid_until,
            expired_release_accepted=accepting,
        )
    finally:
        bootstrap.remove_tree(work)
    return replace(made, duration_s=time.monotonic() - started)  # the rootfs's removal counted too


def write_base_record(path: Path, doc: dict) -> None:
    """The bases record (cache_dir/bases/<key>.json, resources/schemas/base-record.schema.json): what a base
    image holds, beside the cache."""
    doc = {"schema": BASE_RECORD_SCHEMA, "kind": "rvport-base-record", **doc}
    atomic_write_text(path, json.dumps(doc, sort_keys=True, indent=1))


def read_base_record(path: Path) -> dict | None:
    """A bases record, or None when there is none that this rvport reads (absent, unreadable, or of another
    schema): the image is then described again. A record written before records carried `schema` has the
    fields of schema 1."""
    try:
        doc = read_json(path, what="bases record")
    except RvportError:
        return None
    if not isinstance(doc, dict) or doc.get("schema", BASE_RECORD_SCHEMA) != BASE_RECORD_SCHEMA:
        return None
    return doc


def _tmp_root(cache_dir: Path) -> Path:
    p = cache_dir / "tmp"
    p.mkdir(parents=True, exist_ok=True)
    return p


class Bases:
    """The base images of one run (`rvport build` or a bake export), each made or found once.

    `images` maps "spec@platform" to the BaseImage (result.json's base_images). An override (--base-image)
    replaces the riscv64 base only: build-platform bases (cross stages, the accelerated prefix) are always the
    spec's own.
    """

    def __init__(
        self,
        *,
        cache_dir: Path,
        log_dir: Path,
        override: str | None = None,
        bootstrap: str | None = None,
        images: dict[str, BaseImage] | None = None,
        allow_expired: tuple[str, ...] = (),
        ca_bundle: Path | None = None,
    ):
        self.cache_dir, self.log_dir, self.override = cache_dir, log_dir, override
        self.allow_expired, self.ca_bundle = allow_expired, ca_bundle
        self.bootstrap = bootstrap  # RVPORT_BOOTSTRAP, read by the CLI: None chooses the method per host
        self.images: dict[str, BaseImage] = {} if images is None else images
        self.failed: dict[str, RvportError] = {}  # a base that could not be made is not tried again

    @staticmethod
    def key(spec: str, platform: str) -> str:
        return f"{spec}@{platform}"

    def has(self, spec: str, platform: str) -> bool:
        return self.key(spec, platform) in self.images

    def get(
        self,
        spec: str,
        platform: str,
        on_line: Callable[[str], None] | None = None,
        on_phase: OnPhase | None = None,
    ) -> BaseImage:
        """The base, made or found once (threads asking for the same base wait for the one making it); a base
        that could not be made raises the same error again, without a second try."""
        key = self.key(spec, platform)
        with _one_at_a_time(f"base:{key}"):
            if key in self.failed:
                raise self.failed[key]
            if key not in self.images:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                try:
                    self.images[key] = ensure_base(
                        load_base(spec),
                        platform=platform,
                        cache_dir=self.cache_dir,
                        log_path=self.log_dir / f"base-{spec}.log",
                        on_line=on_line,
                        on_phase=on_phase,
                        image_override=self.override if platform == RISCV64 else None,
                        allow_expired=self.allow_expired,
                        ca_bundle=self.ca_bundle,
                        bootstrap_forced=self.bootstrap,
                    )
                except RvportError as e:
                    self.failed[key] = e
                    raise
            return self.images[key]
