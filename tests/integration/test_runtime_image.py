"""The runtime image made by `rvport build` (rvport/engine/runtime.py): a tiny recipe of this test's own with
a `runtime:` section (a non-root user, a read-only root, a pinned start script that prints a line). The image
runs as declared, a second build finds it again (same image id), a new start script makes a new one, and one
that fails to build leaves the tag where it was."""

from __future__ import annotations

import hashlib
import json
import subprocess
import uuid
from pathlib import Path

import jsonschema
import pytest

from rvport import manifest

from .conftest import ONE_TARBALL, TRUE_EXECUTABLE, offline_mirror, rvport, tarball

pytestmark = pytest.mark.integration

UID = 10042
# the stage compiles nothing: the riscv64 base's own /bin/true is its executable
RECIPE = (
    TRUE_EXECUTABLE
    + """\
smoke:
  script: |
    #!/bin/sh
    /artifacts/{name} && echo "smoke ok"
runtime:
  user: {{name: tiny, uid: {uid}}}
  read_only: true
  tmpfs: [/tmp]
  workdir: /app
  env: {{GREETING: hello}}
  files:
    - {{artifact: {name}, dest: /app/{name}}}
    - {{file: {name}/start.sh, sha256: {script_sha}, dest: /app/start.sh, mode: "0755"}}
  entrypoint: [/app/start.sh]
"""
    + ONE_TARBALL
)
START = """#!/bin/sh
set -eu
/app/{name}
touch /tmp/written
if touch /app/written 2>/dev/null; then echo "the image's files can be changed" >&2; exit 1; fi
echo "$GREETING from {name} as $(id -u) in $(pwd), {word}"
"""


def write_recipe(recipes: Path, name: str, fname: str, sha: str, word: str) -> None:
    (recipes / name).mkdir(parents=True, exist_ok=True)
    script = recipes / name / "start.sh"
    script.write_text(START.format(name=name, word=word))
    (recipes / f"{name}.yaml").write_text(
        RECIPE.format(
            name=name,
            uid=UID,
            fname=fname,
            sha=sha,
            script_sha=hashlib.sha256(script.read_bytes()).hexdigest(),
        )
    )


def docker_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker", "run", "--rm", "--platform", "linux/riscv64", "--network", "none", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_runtime_image_runs_as_declared_and_is_found_again(engine, tmp_path):
    name = f"tinyrt{uuid.uuid4().hex[:6]}"  # a repository of its own: rvport/<name>
    tag = f"rvport/{name}:test"
    mirror, recipes = offline_mirror(tmp_path / "mirror"), tmp_path / "recipes"
    recipes.mkdir()
    f, s = tarball(f"{name}-1.0.0", {"README": "nothing to compile\n"}, mirror)
    write_recipe(recipes, name, f, s, "first")
    out = tmp_path / "out"
    common = [
        "--recipes",
        str(recipes),
        "--mirror",
        str(mirror),
        "--offline",
        "--output",
        str(out),
        "--profile",
        "rvv256",
        "--tag",
        "test",
        "--mode",
        "qemu",
    ]
    made: list[str] = []
    try:
        cp = rvport("build", name, *common)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        doc = json.loads((out / "result.json").read_text())
        jsonschema.validate(doc, manifest.schema("result"))
        (st,) = doc["stages"]
        assert st["status"] == "ok" and st["smoke"]["status"] == "passed"
        rt = st["runtime"]
        assert rt["tag"] == tag and rt["made"] and rt["image_id"].startswith("sha256:")
        made.append(rt["image_id"])
        cp = rvport("plan", name, *common[:5], "--output", str(tmp_path / "plan"), *common[7:])
        assert cp.returncode == 0, cp.stdout + cp.stderr
        planned = json.loads((tmp_path / "plan" / "plan.json").read_text())["stages"][0]["runtime"]
        assert rt["key"] == planned["key"]

        # run as the plan says (read-only root, tmpfs /tmp, its user, no capabilities): the start script
        # speaks
        run = docker_run(*planned["run_args"], tag)
        assert run.returncode == 0, run.stdout + run.stderr
        assert run.stdout.strip() == f"hello from {name} as {UID} in /app, first"
        run = docker_run("--read-only", "--user", f"{UID}:{UID}", "--entrypoint", "id", tag, "-u")
        assert run.returncode == 0 and run.stdout.strip() == str(UID), run.stdout + run.stderr
        run = docker_run("--entrypoint", "id", tag, "-u")  # its own USER, with no --user
        assert run.stdout.strip() == str(UID), run.stdout + run.stderr
        inspect = json.loads(
            subprocess.run(
                ["docker", "image", "inspect", tag], capture_output=True, text=True, check=True
            ).stdout
        )[0]
        assert inspect["Config"]["Labels"]["org.rvport.runtime.key"] == rt["key"]
        assert inspect["Architecture"] == "riscv64"

        # unchanged: the cached stage finds the same image again, no scratch name is left behind
        cp = rvport("build", name, *common)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        (again,) = json.loads((out / "result.json").read_text())["stages"]
        assert again["status"] == "cached"
        assert again["runtime"] == dict(rt, made=False)
        names = subprocess.run(
            ["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", f"rvport/{name}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert names == [tag]

        # a new start script (its new pin) is a new image, not a new build of the artifacts
        write_recipe(recipes, name, f, s, "second")
        cp = rvport("build", name, *common)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        (third,) = json.loads((out / "result.json").read_text())["stages"]
        assert third["status"] == "cached" and third["runtime"]["made"]
        made.append(third["runtime"]["image_id"])
        assert third["runtime"]["image_id"] != rt["image_id"] and third["runtime"]["key"] != rt["key"]
        run = docker_run(*planned["run_args"], tag)
        assert run.stdout.strip().endswith(", second"), run.stdout + run.stderr

        # a runtime image that fails to build (its user's group exists in the base) fails the stage with exit
        # 7 and leaves the tag on the last complete image, and no scratch name
        text = (recipes / f"{name}.yaml").read_text()
        (recipes / f"{name}.yaml").write_text(text.replace("{name: tiny, uid:", "{name: daemon, uid:"))
        cp = rvport("build", name, *common)
        assert cp.returncode == 7, cp.stdout + cp.stderr
        assert "docker buildx build failed" in cp.stderr and "Traceback" not in cp.stderr
        doc = json.loads((out / "result.json").read_text())
        assert doc["status"] == "failed" and doc["stages"][0]["runtime"] is None
        names = subprocess.run(
            ["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", f"rvport/{name}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert names == [tag]
        inspect = json.loads(
            subprocess.run(
                ["docker", "image", "inspect", tag], capture_output=True, text=True, check=True
            ).stdout
        )[0]
        assert inspect["Id"] == third["runtime"]["image_id"]
    finally:
        # only what this test made: its own repository's images
        ids = subprocess.run(
            ["docker", "image", "ls", "-q", "--no-trunc", f"rvport/{name}"], capture_output=True, text=True
        ).stdout.split()
        for image in dict.fromkeys(ids + made):
            subprocess.run(["docker", "image", "rm", "-f", image], capture_output=True)
