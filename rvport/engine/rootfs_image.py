"""A root filesystem made into a one-layer image in the engine, without a build.

GNU tar writes the layer natively; rvport wraps it with the image's config in a docker-archive (the layer, the
config named by its digest, manifest.json naming the tag) and `docker load` takes it in. A buildx `FROM
scratch` + `ADD rootfs.tar` sends the gigabyte to the builder, unpacks it and exports it again; the engine's
own import (`docker import`) cannot name a foreign architecture on every engine (Docker 20.10 records its
own).

The image holds the rootfs's files as they are (numeric owners; /proc, /sys and /dev as empty directories) and
the config that build gave: PATH, the given environment, CMD, labels, the platform.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from rvport import proc
from rvport.engine import buildx, events
from rvport.engine.events import OnPhase, Phase
from rvport.errors import HostNotReady

EMPTY_DIRS = ("proc", "sys", "dev")  # in the image as directories, never with what is mounted there
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LAYER = "layer.tar"


def layer_argv(rootfs: Path, out: Path) -> list[str]:
    """GNU tar writing the rootfs's top-level entries (no entry for the root itself) to `out`."""
    names = sorted(p.name for p in rootfs.iterdir())
    return [
        "tar",
        "--create",
        f"--file={out}",
        f"--directory={rootfs}",
        "--numeric-owner",
        "--anchored",
        *(f"--exclude={d}/*" for d in EMPTY_DIRS),
        "--",
        *names,
    ]


def image_config(
    *,
    platform: str,
    diff_id: str,
    env: dict[str, str],
    cmd: list[str],
    labels: dict[str, str],
    created: str,
    made_by: str,
) -> dict:
    """The image config (OCI/Docker image spec) of a one-layer image for `platform` ("linux/riscv64")."""
    os_name, arch, *variant = platform.split("/")
    config: dict = {
        "architecture": arch,
        "os": os_name,
        "created": created,
        "config": {
            "Env": [f"PATH={DEFAULT_PATH}", *(f"{k}={v}" for k, v in env.items())],
            "Cmd": cmd,
            "WorkingDir": "/",
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": made_by}],
    }
    if variant:
        config["variant"] = variant[0]
    return config


class _Hashing:
    """A file read through, its bytes hashed on the way."""

    def __init__(self, f: BinaryIO):
        self.f, self.sha = f, hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.sha.update(data)
        return data


def write_archive(layer: Path, out: Path, *, tag: str, config_for: Callable[[str], dict]) -> str:
    """`out`: a docker-archive of the one layer `layer`, tagged `tag`, its config `config_for(diff_id)`.
    Returns the image's id (the config's digest), which the engine gives the loaded image."""
    with (
        open(out, "wb") as f,
        tarfile.open(fileobj=f, mode="w", format=tarfile.GNU_FORMAT, copybufsize=1 << 20) as tar,
        open(layer, "rb") as src,
    ):
        info = tarfile.TarInfo(LAYER)
        info.size, info.mode, info.mtime = layer.stat().st_size, 0o644, int(time.time())
        reader = _Hashing(src)
        tar.addfile(info, reader)  # the layer is read once: copied and hashed
        config = json.dumps(config_for(f"sha256:{reader.sha.hexdigest()}"), sort_keys=True).encode()
        digest = hashlib.sha256(config).hexdigest()
        manifest = json.dumps([{"Config": f"{digest}.json", "RepoTags": [tag], "Layers": [LAYER]}]).encode()
        for name, data in ((f"{digest}.json", config), ("manifest.json", manifest)):
            member = tarfile.TarInfo(name)
            member.size, member.mode, member.mtime = len(data), 0o644, info.mtime
            tar.addfile(member, io.BytesIO(data))
    return f"sha256:{digest}"


def load_rootfs(
    rootfs: Path,
    scratch: Path,
    *,
    tag: str,
    platform: str,
    env: dict[str, str],
    cmd: list[str],
    labels: dict[str, str],
    made_by: str,
    log_path: Path | None,
    on_line: Callable[[str], None],
    on_phase: OnPhase = events.ignore,
) -> str:
    """The image `tag` made from `rootfs`; its id. `scratch` (an existing, empty directory the caller removes)
    holds the layer and the archive meanwhile."""
    layer = scratch / LAYER
    on_line(f"image: writing the layer ({platform})...")
    on_phase(Phase(phase="writing the image's layer"))
    rc = proc.stream(layer_argv(rootfs, layer), on_line=on_line, log_path=log_path)
    if rc != 0:
        raise HostNotReady(
            f"tar could not write the image's layer ({proc.describe_status(rc)})",
            hint=f"see {log_path}; check the free space of {scratch}",
        )
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    archive = scratch / "image.tar"
    image_id = write_archive(
        layer,
        archive,
        tag=tag,
        config_for=lambda diff_id: image_config(
            platform=platform,
            diff_id=diff_id,
            env=env,
            cmd=cmd,
            labels=labels,
            created=created,
            made_by=made_by,
        ),
    )
    layer.unlink()
    on_line(f"image: loading {tag} into the engine...")
    on_phase(Phase(phase="loading the image"))
    rc = proc.stream(["docker", "load", f"--input={archive}"], on_line=on_line, log_path=log_path)
    if rc != 0:
        raise HostNotReady(
            f"the engine did not load the image {tag} ({proc.describe_status(rc)})",
            hint=f"see {log_path}; check the Docker engine (`docker info`, `rvport doctor`)",
        )
    info = buildx.image_info(tag)
    if info is None or info["id"] != image_id:
        raise HostNotReady(
            f"the engine loaded {tag}, but {'not under that name' if info is None else 'as ' + info['id']}"
            f" (expected {image_id})",
            hint="check the Docker engine (`docker info`), then run again",
        )
    return image_id
