"""The riscv64 base as `rvport prepare` makes it (split bootstrap on a foreign host: native unpack, emulated
configure, py3compile and update-ca-certificates run once afterwards), checked inside the image: dpkg sees
every package configured, nothing of rvport's bootstrap is left behind, the deferred work was done; and the
images of a tiny recipe are listed for docker save, then found again without being made."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rvport.host import gather

from .conftest import ONE_TARBALL, rvport, tarball

pytestmark = pytest.mark.integration

RECIPE = (
    """\
schema: 1
name: tinyprep
kind: python-wheel
toolchain: {{debian: [python3-packaging]}}
build:
  - python3 -m pip wheel --no-deps --no-build-isolation --wheel-dir "$RVPORT_OUT" .
outputs:
  - {{glob: "*.whl", type: wheel}}
"""
    + ONE_TARBALL
)

# inside the base: every check prints its name when it fails
CHECKS = r"""
set -u
fail=0
check() { if ! sh -c "$2" >/dev/null 2>&1; then echo "FAILED: $1"; fail=1; fi; }
check "dpkg --audit is clean"               'test -z "$(dpkg --audit)"'
check "no half-installed package"           '! dpkg-query -W -f "\${db:Status-Abbrev}\n" | grep -v "^ii"'
check "py3compile is the real one"          'head -1 /usr/bin/py3compile | grep -q python3'
check "update-ca-certificates is real"      'grep -q ETCCERTSDIR /usr/sbin/update-ca-certificates'
check "no recorder left" \
  'test -z "$(find / -xdev \( -name "*.rvport-real" -o -name "rvport-*.calls" \) -print)"'
check "no policy-rc.d"                      'test ! -e /usr/sbin/policy-rc.d'
check "the real start-stop-daemon" \
  'test ! -e /sbin/start-stop-daemon.REAL && ! grep -qs "Fake start-stop-daemon" /sbin/start-stop-daemon'
check "no /debootstrap"                     'test ! -e /debootstrap'
check "pip byte-compiled" \
  'test -s /usr/lib/python3/dist-packages/pip/__pycache__/__init__.cpython-313.pyc'
check "stdlib byte-compiled"                'test -s /usr/lib/python3.13/__pycache__/os.cpython-313.pyc'
check "certificate bundle" \
  'test $(grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt) -gt 100'
check "certificate hash links"              'test $(find /etc/ssl/certs -name "*.0" | wc -l) -gt 100'
check "pip runs"                            'python3 -m pip --version'
exit $fail
"""


def _docker(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def tiny(tmp_path: Path) -> dict:
    mirror, recipes = tmp_path / "mirror", tmp_path / "recipes"
    mirror.mkdir()
    recipes.mkdir()
    fname, sha = tarball(
        "tinyprep-1.0.0",
        {
            "setup.py": "from setuptools import setup\nsetup(name='tinyprep', "
            "version='1.0.0', py_modules=['tinyprep'])\n",
            "tinyprep.py": "X = 1\n",
        },
        mirror,
    )
    (recipes / "tinyprep.yaml").write_text(RECIPE.format(fname=fname, sha=sha))
    return {
        "args": [
            "--recipes",
            str(recipes),
            "--mirror",
            str(mirror),
            "--offline",
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
    }


def test_prepare_makes_a_base_that_is_fully_configured_and_lists_the_images(engine, tiny, tmp_path):
    tags = tmp_path / "tags.txt"
    cp = rvport(
        "prepare",
        "tinyprep",
        "--mode",
        "qemu",
        "--no-smoke",
        "--output",
        str(tmp_path / "out"),
        "--tags",
        str(tags),
        *tiny["args"],
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    listed = tags.read_text().split()
    base = next(t for t in listed if t.startswith("rvport/base:debian-trixie-riscv64-"))
    assert any(t.startswith("rvport/toolchain:tinyprep-build-") for t in listed)
    assert "msgspec" not in " ".join(listed)  # only what this build needs
    # plain CI output: each step is printed when it starts
    assert "tinyprep: base image debian-trixie (linux/riscv64)" in cp.stderr
    assert "tinyprep: build image rvport/toolchain:tinyprep-build-" in cp.stderr

    label = _docker("image", "inspect", "-f", '{{index .Config.Labels "org.rvport.bootstrap"}}', base)
    if gather().arch != "riscv64":
        assert label.stdout.strip() == "split", label.stdout + label.stderr
    config = _docker(
        "image", "inspect", "-f", "{{.Os}}/{{.Architecture}} {{json .Config.Env}} {{json .Config.Cmd}}", base
    )
    assert config.stdout.split() == [
        "linux/riscv64",
        '["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","LANG=C.UTF-8"]',
        '["/bin/bash"]',
    ], config.stdout + config.stderr
    inside = _docker(
        "run", "--rm", "--network", "none", "--platform", "linux/riscv64", base, "sh", "-c", CHECKS
    )
    assert inside.returncode == 0, inside.stdout + inside.stderr

    again = rvport(
        "prepare",
        "tinyprep",
        "--mode",
        "qemu",
        "--no-smoke",
        "--output",
        str(tmp_path / "out"),
        *tiny["args"],
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "made" not in again.stdout.replace("already there", "")  # every image found, none made
