"""The one door to Docker and buildx: image queries through the Docker SDK, builds through `docker buildx`."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rvport import proc
from rvport.engine import events
from rvport.engine.events import OnPhase, Rule
from rvport.errors import BuildFailed, HostNotReady

# What a build is doing, read from buildx's plain progress (events.PhaseReader): the apt and dpkg lines of a
# stage that installs packages ("#9 12.3 Setting up cmake (3.31.6-2) ..."), and the Dockerfile step a line
# names ("#7 [build 3/5] RUN sh -eux /rvport/build.sh": the stage, n of m, the step).
_AT = r"^#[0-9]{1,6} [0-9.]{1,12} "
PHASES: tuple[Rule, ...] = (
    Rule(re.compile(_AT + r"Unpacking (?P<what>\S+) \("), "unpacking"),
    Rule(re.compile(_AT + r"Setting up (?P<what>\S+) \("), "configuring"),
    Rule(re.compile(_AT + r"Processing triggers for (?P<what>\S+) \("), "triggers"),
    Rule(re.compile(_AT + r"Get:[0-9]{1,9} \S+ \S+ \S+ (?P<what>\S+)"), "retrieving"),
    Rule(
        re.compile(
            r"^#[0-9]{1,6} \[(?P<phase>[^\]]{1,80}?)(?: (?P<n>[0-9]{1,9})/(?P<m>[0-9]{1,9}))?\] "
            r"(?P<what>.{1,60})"
        ),
        counted=False,
    ),
)


@dataclass(frozen=True, kw_only=True)
class BuildSpec:
    """One `docker buildx build` invocation."""

    context: Path
    dockerfile: Path
    platform: str
    tag: str | None = None  # with load=True: the image name in the engine
    load: bool = False  # --load into the engine's image store
    output_dir: Path | None = None  # --output type=local,dest=...
    network: str | None = None  # "none" for hermetic stages
    builder: str | None = None
    secrets: tuple[tuple[str, Path], ...] = ()  # (id, file)
    build_args: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    no_cache: bool = False
    cache_to: Path | None = None  # --cache-to type=local,dest=DIR,mode=max (not on the docker driver)
    cache_from: Path | None = None  # --cache-from type=local,src=DIR

    def argv(self) -> list[str]:
        cmd = [
            "docker",
            "buildx",
            "build",
            "--progress",
            "plain",
            "--platform",
            self.platform,
            "-f",
            str(self.dockerfile),
        ]
        if self.builder:
            cmd += ["--builder", self.builder]
        if self.network:
            cmd += ["--network", self.network]
        for sid, path in self.secrets:
            cmd += ["--secret", f"id={sid},src={path}"]
        for k, v in self.build_args:
            cmd += ["--build-arg", f"{k}={v}"]
        for k, v in self.labels:
            cmd += ["--label", f"{k}={v}"]
        if self.no_cache:
            cmd.append("--no-cache")
        if self.cache_from is not None:
            cmd += ["--cache-from", f"type=local,src={self.cache_from}"]
        if self.cache_to is not None:
            cmd += ["--cache-to", f"type=local,dest={self.cache_to},mode=max"]
        if self.tag:
            cmd += ["-t", self.tag]
        if self.load:
            cmd.append("--load")
        if self.output_dir is not None:
            cmd += ["--output", f"type=local,dest={self.output_dir}"]
        cmd.append(str(self.context))
        return cmd


@dataclass
class BuildLog:
    """What a build printed: the last lines (for the live view and failures) and the current step."""

    tail: list[str] = field(default_factory=list)
    step: str = ""
    keep: int = 40

    def feed(self, line: str) -> None:
        self.tail.append(line)
        del self.tail[: -self.keep]
        # plain progress: "#7 [build 3/5] RUN ..." names the step
        if line.startswith("#") and "[" in line and "]" in line:
            self.step = line.split(" ", 1)[1][:120]


def build(
    spec: BuildSpec,
    *,
    log_path: Path,
    on_line: Callable[[str], None] | None = None,
    on_phase: OnPhase | None = None,
) -> BuildLog:
    """Run one buildx build; raise BuildFailed with the log tail when it fails. Its lines go to `on_line`,
    what they say it is doing (PHASES) to `on_phase`."""
    blog = BuildLog()
    forward = events.reading(PHASES, on_line, on_phase)

    def feed(line: str) -> None:
        blog.feed(line)
        forward(line)

    rc = proc.stream(spec.argv(), on_line=feed, log_path=log_path)
    if rc != 0:
        raise BuildFailed(
            f"docker buildx build failed ({proc.describe_status(rc)}); last lines:",
            detail=["    " + t for t in blog.tail[-15:]],
            hint=f"full log: {log_path}",
        )
    return blog


def _client():
    import docker  # the SDK is imported lazily: planning and verifying never need it

    try:
        c = docker.from_env(timeout=120)
        c.ping()
        return c
    except Exception as e:  # noqa: BLE001 - any failure here means the same thing to the user
        raise HostNotReady(
            f"the Docker engine is not reachable: {e}",
            hint="start it (dockerd, or systemctl start docker) and check DOCKER_HOST; "
            "`rvport doctor` shows what is missing",
        ) from e


def image_info(ref: str) -> dict | None:
    """The engine's inspect data for an image, or None when it is not present."""
    import docker

    try:
        img = _client().images.get(ref)
    except docker.errors.ImageNotFound:
        return None
    attrs = img.attrs
    return {
        "id": img.id,
        "architecture": attrs.get("Architecture"),
        "os": attrs.get("Os"),
        "created": attrs.get("Created"),
        "labels": (attrs.get("Config") or {}).get("Labels") or {},
        "repo_digests": attrs.get("RepoDigests") or [],
        "size": attrs.get("Size"),
    }


def tag_image(ref: str, tag: str) -> None:
    """Give the image `ref` the name `tag` ("repo:tag"), in one step: the name moves, or stays where it
    was."""
    repo, _, name = tag.rpartition(":")
    if not _client().images.get(ref).tag(repo, name):
        raise HostNotReady(
            f"the engine did not tag {ref} as {tag}",
            hint="check the Docker engine (`docker info`, `rvport doctor`), then build again",
        )


def untag(ref: str) -> bool:
    """Remove the name `ref` (an image of rvport's own making); the image goes only when no other name holds
    it.
    False when the engine refused (the name already gone, or a container uses the image)."""
    import docker

    try:
        _client().images.remove(ref)
    except docker.errors.APIError:
        return False
    return True


def image_tags(repository: str) -> list[str]:
    """Every tag of one repository in the engine ("rvport/xtc:..."), sorted."""
    return sorted(
        t
        for img in _client().images.list(name=repository)
        for t in img.tags
        if t.startswith(f"{repository}:")
    )


def engine_info() -> dict:
    info = _client().info()
    return {
        "server_version": info.get("ServerVersion"),
        "architecture": info.get("Architecture"),
        "storage_driver": info.get("Driver"),
        "docker_root": info.get("DockerRootDir"),
    }


def buildx_version() -> str | None:
    try:
        cp = proc.run(["docker", "buildx", "version"], capture=True, check=False)
    except HostNotReady:
        return None
    return cp.stdout.strip() if cp.returncode == 0 else None


def builder_info(name: str | None) -> dict | None:
    """`docker buildx inspect` parsed to name, driver and platforms; None when the builder is unknown."""
    cmd = ["docker", "buildx", "inspect"] + ([name] if name else [])
    cp = proc.run(cmd, capture=True, check=False)
    if cp.returncode != 0:
        return None
    out: dict = {"platforms": []}
    for line in cp.stdout.splitlines():
        k, _, v = line.partition(":")
        k, v = k.strip(), v.strip()
        if k == "Name" and "name" not in out:
            out["name"] = v
        elif k == "Driver" and "driver" not in out:
            out["driver"] = v
        elif k == "Platforms":
            out["platforms"] += [p.strip().rstrip("*") for p in v.split(",") if p.strip()]
    return out


def check_cache_export(builder: str | None, info: dict | None = None) -> None:
    """--cache-to/--cache-from need a builder whose driver can export a cache: the `docker` driver cannot."""
    from rvport.errors import UsageError

    info = info if info is not None else builder_info(builder)
    if info is None:
        raise UsageError(
            f"buildx builder {builder or '(default)'} not found", hint="list them with `docker buildx ls`"
        )
    if info.get("driver") == "docker":
        raise UsageError(
            f"buildx builder {info.get('name', builder or 'default')} uses the docker driver, which cannot "
            "export or import a cache (--cache-to/--cache-from)",
            hint="create a docker-container builder and name it: `docker buildx create --name rvport "
            "--driver docker-container` then `rvport build --builder rvport ...`; it runs the moby/buildkit "
            "image, so its registry must be reachable or the image loaded (docs/ci.md); or drop the cache "
            "options: rvport's artifact cache (--cache-dir) works on any driver",
        )


def run_container(
    image: str,
    cmd: Sequence[str],
    *,
    platform: str | None = None,
    env: dict | None = None,
    volumes: dict[str, str] | None = None,
    network: str = "none",
    workdir: str | None = None,
    timeout: float | None = None,
    check: bool = True,
):
    """`docker run --rm` a command (doctor probes, tests); returns the completed process."""
    argv = ["docker", "run", "--rm", "--network", network]
    if platform:
        argv += ["--platform", platform]
    for k, v in (env or {}).items():
        argv += ["-e", f"{k}={v}"]
    for host, cont in (volumes or {}).items():
        argv += ["-v", f"{host}:{cont}"]
    if workdir:
        argv += ["-w", workdir]
    argv += [image, *cmd]
    return proc.run(argv, capture=True, check=check, timeout=timeout)


def quote(argv: Sequence[str]) -> str:
    return shlex.join(argv)
