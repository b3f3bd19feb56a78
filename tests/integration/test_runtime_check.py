"""The runtime check run by `rvport build` (rvport/engine/check.py), on a tiny recipe of this test's own: its
runtime image serves one line on a TCP port (a Python server of ours, the riscv64 base has python3), and its
check connects to $SERVICE_HOST from a client made of the smoke image and checks the answer, before and after
a restart. Proven against the real engine: both rounds pass under the profile's QEMU CPU on an internal
network (no route out); an unchanged rebuild reuses the kept result; a new check runs again without a new
image; a seeded failing check is exit 7 with its output and the service's logs recorded; an interrupted check
is exit
8. Every time, no container and no network of the check is left behind."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import jsonschema
import pytest

from rvport import manifest

from .conftest import ONE_TARBALL, TRUE_EXECUTABLE, offline_mirror, rvport, tarball

pytestmark = pytest.mark.integration

PORT = 8765
RECIPE = (
    TRUE_EXECUTABLE
    + """\
smoke:
  script: |
    #!/bin/sh
    /artifacts/{name} && echo "smoke ok"
runtime:
  user: {{name: tiny, uid: 10043}}
  tmpfs: [/tmp]
  files:
    - {{artifact: {name}, dest: /app/{name}}}
    - {{file: {name}/server.py, sha256: {server_sha}, dest: /app/server.py}}
  entrypoint: [/usr/bin/python3, /app/server.py]
  ports: [{port}]
  check:
    timeout: 120
    env: {{EXPECT: "{expect}"}}
    script: |
{script}
"""
    + ONE_TARBALL
)

# the service: one line to every connection, saying who answers and under which QEMU CPU
SERVER = """\
import os, socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {port}))
s.listen(8)
print("listening on {port} as", os.getuid(), flush=True)
while True:
    c, _ = s.accept()
    c.sendall(f"hello {{os.environ.get('QEMU_CPU')}}\\n".encode())
    c.close()
"""

# the check: wait for the service (it starts under QEMU), compare its answer, and find no way out of the
# network
CHECK = """\
set -eu
test -x /artifacts/{name}
python3 - <<'EOF'
import errno, os, socket, sys, time
host, want = os.environ["SERVICE_HOST"], os.environ["EXPECT"] + " " + os.environ["QEMU_CPU"]
for _ in range(240):
    try:
        c = socket.create_connection((host, {port}), timeout=5)
        break
    except OSError:
        time.sleep(0.25)
got = c.makefile().readline().strip()
print(f"round {{os.environ['RVPORT_CHECK_ROUND']}}: {{host}} says {{got!r}}")
try:
    socket.create_connection(("192.0.2.1", 80), timeout=1)
    sys.exit("the check network has a way out")
except OSError as e:
    print("no way out:", errno.errorcode.get(e.errno, e))
sys.exit(0 if got == want else 3)
EOF
"""
GOOD = "hello"
PROFILE = "rvv256"


def write_recipe(
    recipes: Path, name: str, fname: str, sha: str, expect: str = GOOD, script: str = CHECK
) -> None:
    (recipes / name).mkdir(parents=True, exist_ok=True)
    server = recipes / name / "server.py"
    server.write_text(SERVER.format(port=PORT))
    body = "\n".join("      " + line for line in script.format(name=name, port=PORT).splitlines())
    (recipes / f"{name}.yaml").write_text(
        RECIPE.format(
            name=name,
            fname=fname,
            sha=sha,
            port=PORT,
            expect=expect,
            script=body,
            server_sha=hashlib.sha256(server.read_bytes()).hexdigest(),
        )
    )


def leftovers(name: str) -> list[str]:
    """Every container and network a check of recipe `name` made that is still in the engine (labelled, named
    rvport-check-<recipe>-...)."""
    ps = subprocess.run(
        ["docker", "ps", "-a", "--filter", "label=org.rvport.check", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    nets = subprocess.run(
        ["docker", "network", "ls", "--filter", "label=org.rvport.check", "--format", "{{.Name}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [n for n in ps + nets if n.startswith(f"rvport-check-{name}-")]


def running() -> list[str]:
    return subprocess.run(
        [
            "docker",
            "ps",
            "--filter",
            "label=org.rvport.check",
            "--filter",
            "status=running",
            "--format",
            "{{.Names}}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()


def result(out: Path) -> dict:
    doc = json.loads((out / "result.json").read_text())
    jsonschema.validate(doc, manifest.schema("result"))
    return doc


def test_the_runtime_check_routes_before_and_after_a_restart_and_leaves_nothing(engine, tmp_path):
    name = f"tinychk{uuid.uuid4().hex[:6]}"
    mirror, recipes = offline_mirror(tmp_path / "mirror"), tmp_path / "recipes"
    recipes.mkdir()
    f, s = tarball(f"{name}-1.0.0", {"README": "nothing to compile\n"}, mirror)
    write_recipe(recipes, name, f, s)
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
        PROFILE,
        "--tag",
        "test",
        "--mode",
        "qemu",
    ]
    from rvport.catalogue.profiles import get_profile

    qemu_cpu = get_profile(PROFILE).qemu_cpu
    t0 = time.monotonic()
    try:
        # 1. built now: the check runs, both rounds pass; the service's answer names the profile's QEMU CPU
        cp = rvport("build", name, *common)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        (st,) = result(out)["stages"]
        chk = st["runtime"]["check"]
        assert (
            st["status"] == "ok" and st["runtime"]["made"] and chk["status"] == "passed" and not chk["reused"]
        )
        assert [r["round"] for r in chk["rounds"]] == [1, 2] and all(
            r["exit_status"] == 0 for r in chk["rounds"]
        )
        for r in chk["rounds"]:
            assert f"round {r['round']}: service says 'hello {qemu_cpu}'" in r["output"], r["output"]
            assert any(line.startswith("no way out: ") for line in r["output"]), r["output"]
        assert "runtime check round 2 of 2" in cp.stderr and "restarting the service" in cp.stderr
        assert "check" in st["timings"]
        assert leftovers(name) == []
        planned = rvport("plan", name, *common[:5], "--output", str(tmp_path / "plan"), *common[7:])
        assert planned.returncode == 0, planned.stdout + planned.stderr
        plan_check = json.loads((tmp_path / "plan" / "plan.json").read_text())["stages"][0]["runtime"][
            "check"
        ]
        assert (
            plan_check["rounds"] == 2
            and plan_check["timeout"] == 120
            and plan_check["env"] == {"EXPECT": GOOD}
        )
        print(f"first build with its check: {time.monotonic() - t0:.1f} s")

        # 2. nothing changed: the kept result is reused, no container is made
        cp = rvport("build", name, *common)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        (again,) = result(out)["stages"]
        assert again["status"] == "cached" and not again["runtime"]["made"]
        assert again["runtime"]["check"] == dict(chk, reused=True)

        # 3. a seeded failing check (a new check: the same image, no new build): exit 7, the client's output
        # and the service's logs recorded and shown, nothing left behind
        write_recipe(recipes, name, f, s, expect="goodbye")
        cp = rvport("build", name, *common)
        assert cp.returncode == 7, cp.stdout + cp.stderr
        doc = result(out)
        (bad,) = doc["stages"]
        assert doc["status"] == "failed" and bad["status"] == "failed" and not bad["runtime"]["made"]
        assert bad["runtime"]["image_id"] == st["runtime"]["image_id"]
        chk = bad["runtime"]["check"]
        assert chk["status"] == "failed" and len(chk["rounds"]) == 1 and chk["rounds"][0]["exit_status"] == 3
        assert chk["service"] == "running" and any("listening on" in line for line in chk["service_logs"])
        assert "the runtime check failed in round 1 (exit status 3)" in cp.stderr
        assert f"says 'hello {qemu_cpu}'" in cp.stderr and "listening on" in cp.stderr
        assert "Traceback" not in cp.stderr
        assert leftovers(name) == []
        print(f"with the failing check: {time.monotonic() - t0:.1f} s")

        # 4. Ctrl-C at a terminal while a round runs (SIGINT to rvport's whole process group): exit 8, nothing
        # left behind
        write_recipe(recipes, name, f, s, script="echo waiting; sleep 100")
        proc = subprocess.Popen(
            [sys.executable, "-m", "rvport", "--ci", "build", name, *common],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 300
            while not any(n.endswith("-client-1") for n in running()):
                assert proc.poll() is None and time.monotonic() < deadline, (
                    proc.stdout.read() if proc.stdout else ""
                )
                time.sleep(0.5)
            time.sleep(1)
            os.killpg(proc.pid, signal.SIGINT)
            text, _ = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 8, text
        assert result(out)["status"] == "interrupted"
        assert leftovers(name) == [], text
        print(f"with the interrupted check: {time.monotonic() - t0:.1f} s")
    finally:
        for n in leftovers(name):  # none when the test passes
            subprocess.run(["docker", "rm", "-f", n], capture_output=True)
            subprocess.run(["docker", "network", "rm", n], capture_output=True)
        ids = subprocess.run(
            ["docker", "image", "ls", "-q", "--no-trunc", f"rvport/{name}"], capture_output=True, text=True
        ).stdout.split()
        for image in dict.fromkeys(ids):
            subprocess.run(["docker", "image", "rm", "-f", image], capture_output=True)
