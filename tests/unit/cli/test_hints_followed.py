"""Every hint a common mistake prints is advice that works when followed: each mistake below is made, its
`hint:` (or note) read from the output, the command that hint tells a user to run is built from the hint's own
words, run, and must not fail for the reason that produced the hint. In-process, offline, no Docker: a
followed command may fail later for another reason (a source not in an empty cache), never for the same one.

The `rvport pin` hints of `plan --all` are followed in test_pin_hint.py."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rvport.cli.app import app
from rvport.errors import ExitCode, RvportError


@dataclass(frozen=True)
class Mistake:
    argv: tuple[str, ...]  # what the user typed (after `rvport`); {out} is a fresh directory
    reason: str  # the error the mistake gives
    hint: str  # a regular expression: what the output says to do, its group(1) the advice
    followed: Callable[[str], list[tuple[str, ...]]]  # the advice -> the commands a user then runs


def _names(advice: str) -> list[str]:
    return [n.strip() for n in advice.split(",") if n.strip()]


MISTAKES = {
    "an unknown recipe": Mistake(
        ("plan", "nosuch", "--offline", "-o", "{out}"),
        "unknown recipe",
        r"hint: known recipes: (.+)",
        lambda advice: [("plan", *_names(advice), "--offline", "-o", "{out}")],
    ),
    "an unknown version": Mistake(
        ("plan", "msgspec==9.9", "--offline", "-o", "{out}"),
        "has no version",
        r"hint: known versions: (.+)",
        lambda advice: [("plan", f"msgspec=={v}", "--offline", "-o", "{out}") for v in _names(advice)],
    ),
    "a Python no base has": Mistake(
        ("plan", "msgspec", "--python", "3.12", "--offline", "-o", "{out}"),
        "3.12",
        r"hint: the bases give: (.+?); ",
        lambda advice: [
            ("plan", "msgspec", "--python", v.split()[0], "--offline", "-o", "{out}") for v in _names(advice)
        ],
    ),
    "--all in a mode not every recipe has": Mistake(
        ("plan", "--all", "--mode", "accelerated", "--offline", "-o", "{out}"),
        "--mode accelerated cannot build",
        r"hint: use (--mode \w+)",
        lambda advice: [("plan", "--all", *advice.split(), "--offline", "-o", "{out}")],
    ),
    "--jobs 0": Mistake(
        ("plan", "msgspec", "--jobs", "0", "--offline", "-o", "{out}"),
        "--jobs 0",
        r"hint: or (leave --jobs out)",
        lambda _advice: [("plan", "msgspec", "--offline", "-o", "{out}")],
    ),
    "--source-tree with two recipes": Mistake(
        ("plan", "msgspec", "tiktoken", "--source-tree", "{out}", "--offline", "-o", "{out}"),
        "--source-tree is for one recipe",
        r"hint: e\.g\. (rvport build \S+ --source-tree DIR)",
        lambda advice: [
            tuple(shlex.split(advice)[1:]) + ("--offline", "-o", "{out}"),
            ("plan", "msgspec", "--source-tree", "{out}", "--offline", "-o", "{out}"),
        ],
    ),
    "a recipe with no serving check": Mistake(
        ("serve-check", "msgspec", "--wheelhouse", "{out}", "--output", "{out}/check"),
        "has no serving check",
        r"hint: rvport serve-check knows (.+)",
        lambda advice: [
            ("serve-check", name, "--wheelhouse", "{out}", "--output", "{out}/check")
            for name in _names(advice)
        ],
    ),
    "reproduce with nothing named": Mistake(
        ("reproduce", "--offline", "--output", "{out}/r"),
        "name the recipes to rebuild",
        r"hint: e\.g\. (rvport reproduce \S+)",
        lambda advice: [(*shlex.split(advice)[1:], "--offline", "--output", "{out}/r")],
    ),
}


def _run(argv: tuple[str, ...], tmp: Path, env: dict[str, str]) -> tuple[int, str]:
    out = tmp / f"run{len(list(tmp.iterdir()))}"
    out.mkdir()
    args = [a.replace("{out}", str(out)) for a in argv]
    res = CliRunner().invoke(app, args, env=env)
    if isinstance(res.exception, RvportError):  # what main() prints of it, and its exit code
        return int(res.exception.exit_code), f"{res.output}error: {res.exception.render()}"
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res.exit_code, res.output


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_a_hint_followed_does_not_fail_for_its_reason(name, tmp_path):
    mistake = MISTAKES[name]
    env = {"COLUMNS": "400", "RVPORT_RECIPE_PATH": "", "RVPORT_CACHE_DIR": str(tmp_path / "cache")}
    runs = tmp_path / "runs"
    runs.mkdir()
    code, said = _run(mistake.argv, runs, env)
    assert code != ExitCode.OK and mistake.reason in said, said
    found = re.search(mistake.hint, said)
    assert found, f"no hint matching {mistake.hint!r} in:\n{said}"
    commands = mistake.followed(found.group(1))
    assert commands
    for argv in commands:
        code, again = _run(argv, runs, env)
        assert mistake.reason not in again, (argv, again)
        if argv[0] == "plan":  # planning needs nothing more than the hint gave
            assert code == ExitCode.OK, (argv, again)
