"""rvport's scripts are real files in rvport/resources/scripts (shipped in the wheel, read through
rvport.resources), never shell or Python inside Python strings, and every shell script is clean under
shellcheck (Debian's package, which scripts/setup-host installs): zero findings, at every severity."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rvport import resources

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = resources.builtin("scripts")

# Scripts whose findings are known and kept for now, with why (each is checked to still have findings, so the
# entry goes when the script is made clean): their bytes are part of the accelerated prefix image's key
# (accelerated.prefix_key), so quoting them rebuilds every prefix image; their variables hold single words.
KNOWN: dict[str, str] = {
    "xtc-assemble.sh": "part of the accelerated prefix key (unquoted single-word variables)",
    "xtc-setup.sh": "part of the accelerated prefix key (unquoted single-word variables)",
}


def _is_shell(path: Path) -> bool:
    first = path.read_text(encoding="utf-8").partition("\n")[0]
    return first.startswith("#!") and first.split("/")[-1].split()[-1] in ("sh", "bash")


def shell_scripts() -> list[Path]:
    """Every shell script rvport ships (resources/scripts) and the repository's own host scripts."""
    shipped = sorted(p for p in SCRIPTS.iterdir() if p.is_file() and _is_shell(p))
    return [*shipped, ROOT / "scripts" / "setup-host", ROOT / ".ci" / "run"]


def _shellcheck() -> str:
    found = shutil.which("shellcheck")
    if found:
        return found
    why = "shellcheck is not installed (scripts/setup-host installs Debian's shellcheck package)"
    if os.environ.get("CI"):  # CI prepares the host with scripts/setup-host: a missing linter is a failure
        pytest.fail(why)
    pytest.skip(why)


def test_the_shipped_scripts_are_found_and_each_is_a_script():
    names = {p.name for p in SCRIPTS.iterdir() if p.is_file()}
    assert {
        "build-prologue.sh",
        "rust-record.sh",
        "cpuinfo-check.sh",
        "deferred-recorder.sh",
        "py-compile-recorder.py",
        "policy-rc.d.sh",
        "start-stop-daemon.sh",
    } <= names
    for p in SCRIPTS.iterdir():
        if p.suffix == ".sh":
            assert _is_shell(p), f"{p.name}: a shell script starts with its #! line"
        else:
            assert p.suffix == ".py", (
                f"{p.name}: resources/scripts holds shell (.sh) and Python (.py) scripts"
            )
            compile(p.read_text(encoding="utf-8"), str(p), "exec")  # valid Python


@pytest.mark.parametrize("script", shell_scripts(), ids=lambda p: p.name)
def test_shellcheck_finds_nothing(script: Path):
    shellcheck = _shellcheck()
    cp = subprocess.run(
        [shellcheck, "--format=gcc", "--severity=style", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if script.parent == SCRIPTS and script.name in KNOWN:
        assert cp.returncode != 0, f"{script.name} is clean now: remove it from KNOWN"
        return
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_the_build_script_starts_with_the_prologue_byte_for_byte():
    """The build script is part of the artifact cache key: its bytes must not move."""
    from rvport.build import render

    assert render.build_script(["make", "make install"]) == (
        "#!/bin/sh\n# rvport: the recipe's build commands, run with sh -eux in /src\n"
        'if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then\n'
        "  SOURCE_DATE_EPOCH=$(find /src -type f -printf '%T@\\n' | sort -n | tail -n 1 | cut -d. -f1)\n"
        "  export SOURCE_DATE_EPOCH\nfi\nmake\nmake install\n"
    )


def test_the_rust_record_command_is_the_scripts_one_line_and_writes_the_report_the_runner_reads():
    """plan.json shows the command; it is the script's one command line, byte for byte as before."""
    from rvport.plan.planner import RUST_RECORD, RUST_REPORT

    assert RUST_RECORD == (
        '{ echo "rustc=$(${RUSTC:-rustc} --version)"; echo "cargo=$(cargo --version)"; '
        """echo "host=$(${RUSTC:-rustc} -vV | sed -n 's/^host: //p')"; } > "$RVPORT_OUT/.rvport-rust\""""
    )
    assert RUST_RECORD.endswith(f'"$RVPORT_OUT/{RUST_REPORT}"')


def test_a_script_command_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "two.sh").write_text("#!/bin/sh\n# a comment\necho a\necho b\n")
    monkeypatch.setattr(resources, "builtin", lambda *parts: tmp_path.joinpath(*parts))
    with pytest.raises(ValueError, match="two.sh: one command line expected, found 2"):
        resources.script_command("two.sh")
