"""Helpers for integration tests that drive the real Docker engine, buildx and QEMU."""

from __future__ import annotations

import functools
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from rvport.host import gather

ROOT = Path(__file__).resolve().parents[2]


def docker_ready() -> str | None:
    try:
        subprocess.run(["docker", "buildx", "version"], check=True, capture_output=True, timeout=60)
        subprocess.run(["docker", "info"], check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return f"docker/buildx not usable: {e}"
    h = gather()
    if not h.is_riscv64 and not h.binfmt_riscv64:
        return "no riscv64 binfmt handler (run scripts/setup-host)"
    return None


@pytest.fixture(scope="session")
def engine() -> None:
    why = docker_ready()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"integration tests need the engine in CI: {why}")
        pytest.skip(why)


def tarball(name: str, files: dict[str, str], dest: Path) -> tuple[str, str]:
    """A reproducible NAME.tar.gz holding NAME/<files>, written into dest; returns (file name, sha256)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel, text in sorted(files.items()):
            data = text.encode()
            ti = tarfile.TarInfo(f"{name}/{rel}")
            ti.size, ti.mtime, ti.mode = len(data), 0, 0o644
            tar.addfile(ti, io.BytesIO(data))
    blob = buf.getvalue()
    fname = f"{name}.tar.gz"
    (dest / fname).write_bytes(blob)
    return fname, hashlib.sha256(blob).hexdigest()


# a stage that compiles nothing: the riscv64 base's own /bin/true is its one executable (format with name=)
TRUE_EXECUTABLE = """\
schema: 1
name: {name}
kind: go-binary
build:
  - cp /bin/true "$RVPORT_OUT/{name}"
outputs:
  - {{glob: {name}, type: executable, isa: baseline}}
"""

# the versions block of a test recipe whose one source is a tarball() in the test's mirror: end a recipe
# template with it (the template is then filled with .format(fname=..., sha=..., ...))
ONE_TARBALL = """\
versions:
  - version: "1.0.0"
    sources:
      - name: src
        url: https://example.invalid/{fname}
        sha256: {sha}
"""


@functools.cache
def _tool_files() -> tuple[tuple[str, Path], ...]:
    """rvport's own pinned tools (auditwheel), fetched once per session from the package index by rvport's
    fetcher and checked against their pins."""
    from rvport.catalogue.tools import tools
    from rvport.sources import Fetcher, fetch_options

    opts = fetch_options(cache_dir=Path(tempfile.gettempdir()) / "rvport-test-tools")
    with Fetcher(options=opts) as fetcher:
        return tuple((got.filename, got.path) for got in (fetcher.fetch(t.source) for t in tools().values()))


def offline_mirror(mirror: Path) -> Path:
    """A mirror for an offline build of test recipes: with rvport's tools in it, as `rvport fetch --to` fills
    one (a wheel stage repairs its wheels with the pinned auditwheel)."""
    mirror.mkdir(parents=True, exist_ok=True)
    for name, path in _tool_files():
        shutil.copyfile(path, mirror / name)
    return mirror


def rvport(*args: str, env: dict | None = None, timeout: float = 3000, **kw) -> subprocess.CompletedProcess:
    """Run the real CLI as a user would; output is captured and echoed on failure by the caller."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "rvport", "--ci", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        **kw,
    )


def verify_reasons(*args: str, tmp: Path) -> tuple[subprocess.CompletedProcess, str]:
    """Run `rvport verify artifacts ARGS --json FILE` and return the process and every reason in that file,
    one per line: the table wraps a long reason over lines of its column, the JSON keeps each whole."""
    import json

    out = tmp / "verify-reasons.json"
    cp = rvport("verify", "artifacts", *args, "--json", str(out))
    doc = json.loads(out.read_text()) if out.exists() else {"artifacts": []}
    lines = []
    for a in doc["artifacts"]:
        lines += a["reasons"]
        for m in a["members"]:
            lines += m["reasons"]
    return cp, "\n".join(lines)
