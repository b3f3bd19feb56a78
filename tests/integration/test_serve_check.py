"""`rvport serve-check` against the real engine, in a few minutes: a wheelhouse of one tiny pure wheel and no
Debian packages (so the check runs in the sid riscv64 base itself: no apt), checked for rv64gc. The install
(a venv, pip offline with hashes), pip check and the import step run for real under QEMU with no network;
the import fails (there is no vllm in it), which is exit 10 with result.json naming the step and its last
lines, the steps after it not run, and the container removed. The whole check with vLLM takes hours under
QEMU and runs where its time allows (docs/closure.md, "The serving check"). The one wheel is in the check's
environment image (closure/serveenv.py), which the install step starts from."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

import jsonschema
import pytest

from rvport import manifest
from rvport.closure import wheelhouse as wh
from tests.unit.closure.test_wheelhouse import make_wheel

from .conftest import rvport

pytestmark = pytest.mark.integration


def tiny_wheelhouse(d):
    wheel = make_wheel(d, "tinyserve", "1.0", "py3-none-any", {"tinyserve/__init__.py": b"OK = 1\n"})
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (d / wh.REQUIREMENTS).write_text(wh.requirements_text([("tinyserve", wheel.name, sha)]))
    (d / wh.DEBIAN_LIST).write_text(wh.debian_text("sid", []))
    manifest.write(
        d / wh.MANIFEST,
        {
            "schema": 1,
            "kind": "rvport-wheelhouse",
            "recipe": "vllm",
            "version": "0.33.0",
            "lock": {"file": None, "digest": "sha256:" + "0" * 64, "counts": {"pypi": 1}},
            "profile": "rv64gc",
            "target": {"python": "3.14", "abi": "cp314", "base": "debian-sid", "suite": "sid"},
            "wheels": [
                {"name": "tinyserve", "version": "1.0", "origin": "pypi", "file": wheel.name, "sha256": sha}
            ],
            "debian": [],
            "debian_release": None,
        },
    )
    return d


def test_a_check_runs_offline_in_a_riscv64_container_and_a_failed_step_is_exit_10(engine, tmp_path):
    house = tiny_wheelhouse(tmp_path / "wheelhouse")
    out = tmp_path / "check"
    env = {**os.environ, "RVPORT_ALLOW_EXPIRED_RELEASE": "sid"}
    cp = rvport(
        "serve-check", "vllm", "--wheelhouse", str(house), "--output", str(out), "--timeout", "900", env=env
    )
    assert cp.returncode == 10, cp.stdout + cp.stderr
    assert "import: failed" in cp.stderr, cp.stderr
    assert "not run: generate, generate-eager, serve, serve-eager" in cp.stderr, cp.stderr
    doc = json.loads((out / "result.json").read_text())
    jsonschema.validate(doc, manifest.schema("serve-check"))
    steps = {s["name"]: s for s in doc["steps"]}
    assert steps["install"]["status"] == "passed", steps["install"]
    assert steps["pip-check"]["status"] == "passed" and steps["pip-check"]["judged"] == []
    assert steps["import"]["status"] == "failed"
    assert any("No module named 'vllm'" in line for line in steps["import"]["excerpt"])
    after_import = ("generate", "generate-eager", "serve", "serve-eager", "guided")
    assert {steps[n]["status"] for n in after_import} == {"not-run"}
    assert (out / "logs" / "install.log").is_file() and doc["qemu_cpu"].startswith("rv64")
    # the wheelhouse's one wheel is no vllm wheel: it is in the environment image (made under QEMU with no
    # network, or found from an earlier run), and the install step found it there
    environment = doc["image"]["environment"]
    assert environment["status"] in ("made", "found") and environment["wheels"] == 1, environment
    assert environment["left"] == [] and environment["tag"].startswith("rvport/toolchain:vllm-serve-env-")
    assert "Requirement already satisfied: tinyserve" in (out / "logs" / "install.log").read_text()
    assert doc["container"]["network"] == "none" and doc["load_average"]["samples"] >= 1
    left = subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", f"name={doc['container']['name']}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert left.stdout.strip() == "", "the check's container is left behind"
