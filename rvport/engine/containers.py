"""The engine's containers and networks, for a runtime check (rvport/engine/check.py): the docker CLI, through
proc.py, as buildx.py is the door to builds and images.

Everything made here carries the label org.rvport.check=<the check's name>, so what a killed run (SIGKILL, a
power cut) left behind can be found: `docker ps -a --filter label=org.rvport.check`, `docker network ls
--filter label=org.rvport.check`. Every command runs in a session of its own (proc.run new_session), so a
Ctrl-C at the terminal never stops one half way; the check makes and removes inside proc.uninterruptible().
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from rvport import proc
from rvport.errors import BuildFailed

LABEL = "org.rvport.check"


def _docker(*args: str, check: bool = True, timeout: float = 300):
    """One docker command; a failure is BuildFailed with what docker said."""
    cp = proc.run(["docker", *args], capture=True, check=False, new_session=True, timeout=timeout)
    if check and cp.returncode != 0:
        said = (cp.stderr or cp.stdout or "").strip().splitlines()[-5:]
        raise BuildFailed(
            f"docker {args[0]} {args[1] if len(args) > 1 else ''} failed "
            f"({proc.describe_status(cp.returncode)}): " + " / ".join(said),
            hint="check the Docker engine (`docker info`, `rvport doctor`), then build again",
        )
    return cp


def _env_args(env: Mapping[str, str]) -> list[str]:
    return [a for k, v in sorted(env.items()) for a in ("-e", f"{k}={v}")]


def create_network(name: str, *, label: str) -> None:
    """An internal network (no route out of it): its containers reach each other and nothing else."""
    _docker("network", "create", "--internal", "--label", f"{LABEL}={label}", name)


def remove_network(name: str) -> None:
    """Remove the network `name`; one that is not there is no error."""
    _docker("network", "rm", name, check=False)


def run_detached(
    image: str,
    name: str,
    *,
    network: str,
    alias: str,
    platform: str,
    label: str,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> None:
    """Start `image` in the background as it is meant to run (`args`: the plan's run_args), reachable on
    `network` as `alias`. Never pulls: the image is the engine's own."""
    _docker(
        "run",
        "--detach",
        "--pull",
        "never",
        "--name",
        name,
        "--label",
        f"{LABEL}={label}",
        "--platform",
        platform,
        "--network",
        network,
        "--network-alias",
        alias,
        *args,
        *_env_args(env or {}),
        image,
    )


def create(
    image: str,
    cmd: Sequence[str],
    name: str,
    *,
    network: str,
    platform: str,
    label: str,
    env: Mapping[str, str] | None = None,
    workdir: str | None = None,
    args: Sequence[str] = (),
) -> None:
    """A container made and not started (files are copied into it first, `copy_into`); `args`: more of
    `docker create`'s options (mounts, --shm-size, --user)."""
    _docker(
        "create",
        "--pull",
        "never",
        "--name",
        name,
        "--label",
        f"{LABEL}={label}",
        "--platform",
        platform,
        "--network",
        network,
        *_env_args(env or {}),
        *(["--workdir", workdir] if workdir else []),
        *args,
        image,
        *cmd,
    )


def copy_into(name: str, src: Path, dest: str) -> None:
    """The contents of the directory `src` into the container's `dest` (made when missing)."""
    _docker("cp", f"{src}/.", f"{name}:{dest}", timeout=1800)


def start_attached(
    name: str, *, on_line: Callable[[str], None], log_path: Path | None, timeout: float | None
) -> int:
    """Start a made container and stream its output until it exits; its exit status. proc.TimedOut after
    `timeout` seconds (the container may still run: `remove` it)."""
    return proc.stream(
        ["docker", "start", "--attach", name], on_line=on_line, log_path=log_path, timeout=timeout
    )


def restart(name: str, *, stop_timeout: int = 10) -> None:
    """Stop (SIGTERM, SIGKILL after `stop_timeout` seconds) and start the container again."""
    _docker("restart", "--time", str(stop_timeout), name)


def state(name: str) -> str:
    """What the container is doing: "running", "exited with status 1", ... ("unknown" if docker cannot
    say)."""
    cp = _docker("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name, check=False)
    if cp.returncode != 0:
        return "unknown"
    status, _, code = cp.stdout.strip().partition(" ")
    return f"{status} with status {code}" if status == "exited" else status


def logs(name: str, tail: int) -> list[str]:
    """The container's last `tail` lines of output, stdout and stderr as they came."""
    lines: list[str] = []
    proc.stream(["docker", "logs", "--tail", str(tail), name], on_line=lines.append, timeout=60)
    return lines[-tail:]


def remove(name: str) -> None:
    """Remove the container `name`, running or not, with its anonymous volumes; one that is not there is no
    error."""
    _docker("rm", "--force", "--volumes", name, check=False)
