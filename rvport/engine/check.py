"""A runtime image's check (`runtime: check:`): the image runs as a service and a client proves that it
answers, before and after a restart. The runner calls `ensure` after the runtime image is made or found
(runtime.make).

`run`, in the engine (rvport/engine/containers.py):
  1. a network of the check's own, internal (nothing on it reaches out), named rvport-check-<recipe>-<random>;
  2. the service: the runtime image, detached, run with the plan's run_args and the stage's riscv64
     environment (StageEnv.riscv64_env: QEMU_CPU), reachable on the network as `service`;
  3. round 1: a client container made from the stage's smoke image, with the artifacts at /artifacts and the
     script at /rvport/check, SERVICE_HOST=service, RVPORT_CHECK_ROUND=1, the check's env and the riscv64
     environment, runs the script (its output streamed to the progress and the stage's log); exit 0 passes;
  4. with `restart` (the default): `docker restart` the service, then round 2 the same way;
  5. always (pass, fail, timeout, Ctrl-C): the clients, the service and the network are removed, inside
     proc.uninterruptible(), so an interrupted run leaves nothing behind.

A passing check is kept in the cache (checks/<key>.json), under a key made of the plan's check key (the
runtime key and the check itself), the runtime image's id and the client image's id. `ensure` runs the check
whenever the image was made or the stage was built by this run (`fresh`), as a smoke test runs whenever
its stage is built; a stage whose artifacts and image were both found again reuses the kept result of the
same key, as a cached stage reuses its smoke test's. A failing check is never kept.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from rvport import fileio, manifest, proc
from rvport.engine import containers
from rvport.engine.runtime import MadeImage
from rvport.engine.stage import StageEnv, Toolchain
from rvport.errors import RvportError, SmokeFailed
from rvport.fileio import read_json
from rvport.target import PLATFORM as RISCV64

SERVICE_HOST = "service"  # the service's name on the check's network
OUTPUT_LINES = 20  # the last lines of a round's output kept in result.json
SERVICE_LOG_LINES = 40  # ... and of the service's output, when the check failed
LINE_CHARS = 400  # a longer line is cut (result.json stays small)
FORMAT = 1  # bump when the way a check runs changes: kept results are then not reused


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " [...]"


def result_key(check_key: str, image_id: str, client_id: str) -> str:
    """What a kept result is filed under: the plan's check key and the two images the check ran."""
    doc = {"format": FORMAT, "check": check_key, "image": image_id, "client": client_id}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def ensure(
    env: StageEnv, made: MadeImage, client: Toolchain, artifacts: Path, kept: Path, *, fresh: bool
) -> dict:
    """The check's record for stages[].runtime.check: a kept passing result when nothing changed (`fresh`
    false and a result under the same key in `kept`), else `run`'s. A passing run is kept."""
    rt = env.stage.runtime
    assert rt is not None and rt.check_key is not None
    key = result_key(rt.check_key, made.image_id, client.image_id or client.tag)
    path = kept / f"{key}.json"
    if not fresh and path.is_file():
        try:  # rvport's own record, but read defensively (fileio's bounds)
            record = read_json(path, what="runtime check record")
        except RvportError:
            record = None
        if isinstance(record, dict) and record.get("status") == "passed" and record.get("key") == key:
            env.step("runtime check: passed before with these images (reused)")
            return dict(record, reused=True)
    record = run(env, made, client, artifacts, key)
    if record["status"] == "passed":
        fileio.atomic_write_text(path, manifest.dumps(record))
    return record


def _command(script: str) -> list[str]:
    """A script with its own #! line runs as it says; any other is a sh script."""
    return ["/rvport/check"] if script.startswith("#!") else ["sh", "/rvport/check"]


def run(env: StageEnv, made: MadeImage, client: Toolchain, artifacts: Path, key: str) -> dict:
    """Run the check (the module's steps 1-5) and return its record: {status: passed|failed, key, reused,
    rounds: [{round, exit_status, seconds, output, timed_out?}], service, service_logs (when it failed)}."""
    rt = env.stage.runtime
    assert rt is not None and rt.spec.check is not None
    spec = rt.spec.check
    name = f"rvport-check-{env.stage.name}-{uuid.uuid4().hex[:8]}"
    service = f"{name}-service"
    made_here: list[str] = []  # containers, in the order they were made
    network = False
    rounds: list[dict] = []
    record: dict = {"status": "passed", "key": key, "reused": False, "rounds": rounds}
    env.tmp_root.mkdir(parents=True, exist_ok=True)
    payload = Path(tempfile.mkdtemp(prefix=f"check-{env.stage.name}-", dir=env.tmp_root))
    try:
        script = payload / "check"
        script.write_text(spec.script)
        script.chmod(0o755)
        env.step(f"runtime check: {made.tag} as a service on an internal network")
        with proc.uninterruptible():
            network = True
            containers.create_network(name, label=name)
            made_here.append(service)
            containers.run_detached(
                made.image_id,
                service,
                network=name,
                alias=SERVICE_HOST,
                platform=RISCV64,
                label=name,
                args=rt.run_args,
                env=env.riscv64_env,
            )
        for n in range(1, spec.rounds + 1):
            if n > 1:
                env.step("runtime check: restarting the service")
                with proc.uninterruptible():
                    containers.restart(service)
            one = f"{name}-client-{n}"
            with proc.uninterruptible():
                made_here.append(one)
                containers.create(
                    client.tag,
                    _command(spec.script),
                    one,
                    network=name,
                    platform=RISCV64,
                    label=name,
                    workdir="/tmp",
                    env={
                        **spec.env,
                        **env.riscv64_env,
                        "SERVICE_HOST": SERVICE_HOST,
                        "RVPORT_CHECK_ROUND": str(n),
                    },
                )
                containers.copy_into(one, payload, "/rvport")
                containers.copy_into(one, artifacts, "/artifacts")
            env.step(f"runtime check round {n} of {spec.rounds}")
            rounds.append(_round(env, one, n, spec.timeout))
            if rounds[-1]["exit_status"] != 0:
                record["status"] = "failed"
                break
        if record["status"] == "failed":
            record["service"] = containers.state(service)
            try:
                record["service_logs"] = [_cut(line) for line in containers.logs(service, SERVICE_LOG_LINES)]
            except proc.TimedOut:
                record["service_logs"] = ["(docker logs did not answer)"]
        env.step(
            f"runtime check: {record['status']} ({len(rounds)} of {spec.rounds} rounds); removing its "
            "containers and network"
        )
    finally:
        with proc.uninterruptible():
            for c in reversed(made_here):
                containers.remove(c)
            if network:
                containers.remove_network(name)
        shutil.rmtree(payload, ignore_errors=True)
    return record


def _round(env: StageEnv, client: str, n: int, timeout: int) -> dict:
    """One round: the client runs the script; its exit status, time and last lines."""
    lines: list[str] = []

    def feed(line: str) -> None:
        lines.append(_cut(line))
        del lines[:-OUTPUT_LINES]
        env.line(line)

    t0 = time.monotonic()
    out: dict = {"round": n}
    try:
        out["exit_status"] = containers.start_attached(
            client, on_line=feed, log_path=env.log_path, timeout=timeout
        )
    except proc.TimedOut:
        out["exit_status"] = None
        out["timed_out"] = True
    out["seconds"] = round(time.monotonic() - t0, 2)
    out["output"] = lines
    return out


def failure(ref: str, record: dict, log: Path) -> SmokeFailed:
    """The error of a failed runtime check (exit 7, as a failed smoke test): the round, why, the client's last
    lines and the service's."""
    last = record["rounds"][-1] if record["rounds"] else {"round": 1, "exit_status": None, "output": []}
    why = (
        f"timed out after {last['seconds']:.0f} s"
        if last.get("timed_out")
        else f"exit status {last['exit_status']}"
    )
    shown = ["    " + line for line in last["output"]] or ["    (it printed nothing)"]
    logs = ["    " + line for line in record.get("service_logs", [])] or ["    (it printed nothing)"]
    err = SmokeFailed(
        f"{ref}: the runtime check failed in round {last['round']} ({why}); its last lines:",
        detail=[*shown, f"the service ({record.get('service', 'unknown')}), its last lines:", *logs],
        hint=f"stages[].runtime.check in result.json has this output, the full log is {log}; the "
        "check's containers and network are removed, the image keeps its tag to be run by hand "
        "(with the plan's run_args)",
    )
    err.log_tail = [*last["output"], *record.get("service_logs", [])]
    return err
