"""The Debian sid riscv64 base (bases/debian-sid.yaml) as `rvport prepare` makes it, here where sid is a
frozen copy whose Release is past its Valid-Until: refused by default (exit 4, before anything is made),
made when accepted (RVPORT_ALLOW_EXPIRED_RELEASE=sid), and then apt works in images built on it (the
toolchain stage runs apt-get update and install on it). Inside: Python 3.14, GCC 16, the apt.conf.d file of
the acceptance; the base's label names it. Minutes under QEMU."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pytest

from rvport.engine.images import host_debian_mirror
from rvport.sources import debarchive
from rvport.sources.fetch import https_session

from .conftest import ONE_TARBALL, rvport, tarball

pytestmark = pytest.mark.integration

RECIPE = (
    """\
schema: 1
name: tinysid
kind: python-wheel
toolchain: {{base: debian-sid, debian: [python3-packaging]}}
build:
  - python3 -m pip wheel --no-deps --no-build-isolation --wheel-dir "$RVPORT_OUT" .
outputs:
  - {{glob: "*.whl", type: wheel}}
"""
    + ONE_TARBALL
)

INSIDE = r"""
set -eu
python3 -c 'import sys; assert sys.version_info[:2] == (3, 14), sys.version'
gcc -dumpversion | grep -q '^16'
grep -q 'Check-Valid-Until "false"' /etc/apt/apt.conf.d/99rvport-allow-expired-release
echo inside-ok
"""


def _sid_expired() -> bool:
    mirror = host_debian_mirror()
    if not mirror:
        return False
    with https_session() as s:
        rel = debarchive.fetch_release(mirror, "sid", session=s).release
    return rel.expired(dt.datetime.now(dt.UTC))


@pytest.fixture
def tiny(tmp_path: Path) -> list[str]:
    mirror, recipes = tmp_path / "mirror", tmp_path / "recipes"
    mirror.mkdir()
    recipes.mkdir()
    fname, sha = tarball(
        "tinysid-1.0.0",
        {
            "setup.py": "from setuptools import setup\n"
            "setup(name='tinysid', version='1.0.0', py_modules=['tinysid'])\n",
            "tinysid.py": "X = 1\n",
        },
        mirror,
    )
    (recipes / "tinysid.yaml").write_text(RECIPE.format(fname=fname, sha=sha))
    return [
        "--recipes",
        str(recipes),
        "--mirror",
        str(mirror),
        "--offline",
        "--cache-dir",
        str(tmp_path / "c"),
    ]


def test_sid_base_refused_while_expired_then_made_when_accepted(engine, tiny, tmp_path):
    if not _sid_expired():
        pytest.skip("sid's Release is valid here: nothing to accept")
    args = ["prepare", "tinysid", "--mode", "qemu", "--no-smoke", "--output", str(tmp_path / "out"), *tiny]
    env = {"RVPORT_ALLOW_EXPIRED_RELEASE": ""}
    refused = rvport(*args, env=env)
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert "Valid-Until" in refused.stderr and "--allow-expired-release sid" in refused.stderr

    tags = tmp_path / "tags.txt"
    made = rvport(*args, "--tags", str(tags), env={"RVPORT_ALLOW_EXPIRED_RELEASE": "sid"})
    assert made.returncode == 0, made.stdout + made.stderr
    # the plan's note says so whether the base is made now or found in the engine
    assert "is accepted (--allow-expired-release sid)" in made.stderr
    base = next(t for t in tags.read_text().split() if t.startswith("rvport/base:debian-sid-riscv64-"))
    label = subprocess.run(
        [
            "docker",
            "image",
            "inspect",
            "-f",
            '{{index .Config.Labels "org.rvport.allow-expired-release"}}',
            base,
        ],
        capture_output=True,
        text=True,
    )
    assert label.stdout.strip() == "sid", label.stdout + label.stderr
    inside = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "--platform",
            "linux/riscv64",
            base,
            "sh",
            "-c",
            INSIDE,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert inside.returncode == 0 and "inside-ok" in inside.stdout, inside.stdout + inside.stderr
