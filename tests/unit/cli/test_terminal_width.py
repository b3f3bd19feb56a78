"""rvport's tables fit the terminal they are shown on: run in a pseudo-terminal of 80 columns, as a user's
window is, no line is wider than the terminal and no column of the plan is dropped."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import sys
import termios
import time
from pathlib import Path


def run_in_pty(args: list[str], *, columns: int, cwd: Path, timeout: float = 60) -> tuple[int, str]:
    """`python -m rvport ARGS` with a pseudo-terminal of `columns` x 50 as its stdout and stderr."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal is its controlling tty; no COLUMNS, so Rich asks the tty
        os.chdir(cwd)
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "CI", "NO_COLOR")}
        env["TERM"] = "xterm"
        os.execve(sys.executable, [sys.executable, "-m", "rvport", *args], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    out = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")


def _plain(text: str) -> list[str]:
    import re

    return [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line) for line in text.replace("\r", "").splitlines()]


def test_the_whole_plan_fits_80_columns_with_every_column(tmp_path):
    rc, out = run_in_pty(
        ["plan", "--all", "--profile", "rvv256", "--tag", "t", "--output", str(tmp_path / "p")],
        columns=80,
        cwd=tmp_path,
    )
    lines = _plain(out)
    assert rc == 0, out
    # every line fits but the one naming the file written: a path is never broken by a newline (the terminal
    # wraps it, and a copied path stays whole)
    (wrote,) = [line for line in lines if line.startswith("wrote ")]
    assert wrote == f"wrote {tmp_path / 'p' / 'plan.json'}", wrote
    fitted = [line for line in lines if line != wrote]
    assert max(len(line) for line in fitted) <= 80, [line for line in fitted if len(line) > 80]
    header = next(line for line in lines if "recipe, kind" in line)
    for column in ("#", "recipe, kind, sources", "mode", "jobs", "depends"):
        assert column in header, header
    assert "┃┃" not in out  # a dropped column leaves two borders side by side
    assert any("router-ml-binding" in line for line in lines)  # never cut to "router-ml-bin…"
    assert "…" not in "".join(line for line in lines if "==" in line)  # recipe refs are whole


def test_a_wide_terminal_has_the_sources_column(tmp_path):
    rc, out = run_in_pty(
        ["plan", "msgspec", "--profile", "rvv256", "--tag", "t", "--output", str(tmp_path / "p")],
        columns=200,
        cwd=tmp_path,
    )
    assert rc == 0, out
    header = next(line for line in _plain(out) if "recipe, kind" in line)
    assert "sources" in header and "recipe, kind, sources" not in header


def test_verify_json_dash_is_standard_output_and_the_table_goes_to_stderr(tmp_path, elf_fixtures):
    import json

    from tests.fixtures.cli import rvport_process

    so = elf_fixtures.path("librvv256.so")
    cp = rvport_process(  # a process of its own, stdout and stderr apart
        ["verify", "artifacts", str(so), "--profile", "rvv256", "--json", "-"],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["artifacts"][0]["verdict"] == "pass"
    assert "librvv256.so" in cp.stderr and not (tmp_path / "-").exists()


def test_verify_groups_members_with_the_same_reason_in_one_row(elf_fixtures):
    import io

    from rvport.catalogue.profiles import get_profile
    from rvport.cli.console import SafeConsole
    from rvport.verify import isa_level, verify_paths
    from rvport.verify.report import render_table

    report = verify_paths(
        [elf_fixtures.path("libexports.a")], get_profile("rvv128"), isa=isa_level("carries")
    )
    out = io.StringIO()
    render_table(report, SafeConsole(file=out, width=200))
    text = out.getvalue()
    assert text.count("libexports.a") == 1  # one row for the archive
    assert "2 members (exports.o, exports2-bitcode.o): arch string lacks" in text
