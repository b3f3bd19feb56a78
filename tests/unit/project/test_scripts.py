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
from rvport.catalogue.profiles import get_profile
from tests.fixtures.hosttools import need

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = resources.builtin("scripts")


def _is_shell(path: Path) -> bool:
    first = path.read_text(encoding="utf-8").partition("\n")[0]
    return first.startswith("#!") and first.split("/")[-1].split()[-1] in ("sh", "bash")


def shell_scripts() -> list[Path]:
    """Every shell script rvport ships (resources/scripts) and the repository's own host and CI scripts."""
    shipped = sorted(p for p in SCRIPTS.iterdir() if p.is_file() and _is_shell(p))
    return [*shipped, ROOT / "scripts" / "setup-host", ROOT / ".ci" / "run", ROOT / "ci" / "closure-tests"]


def _shellcheck() -> str:
    found = shutil.which("shellcheck")
    if found:
        return found
    need("shellcheck")
    raise AssertionError("unreachable: need() skips or fails")


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
        "cross-toolchain.sh",
        "pip-default-index.py",
        "smoke-install.sh",
        "stdout-to.sh",
        "serve-check.py",
    } <= names
    for p in SCRIPTS.iterdir():
        if not p.is_file():  # pip's install compiles the .py scripts: a __pycache__ beside them
            continue
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
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_the_build_script_starts_with_the_prologue_byte_for_byte():
    """The build script is part of the artifact cache key: its bytes must not move."""
    from rvport.engine import render

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


def _stand_ins(bin_: Path, programs: dict[str, str]) -> dict[str, str]:
    bin_.mkdir(exist_ok=True)
    for name, body in programs.items():
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"}


def _cross(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    script = SCRIPTS / "cross-toolchain.sh"
    return subprocess.run(
        ["sh", "-eu", str(script), *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_the_cross_toolchain_script_records_compilers_and_matches_versions(tmp_path):
    env = _stand_ins(
        tmp_path / "bin",
        {
            "rustc": 'echo "rustc 1.85.0 (4d91de4e4 2025-02-17)"; echo more',
            "go": 'echo "go version go1.24.4 linux/amd64"',
            # the version of the package named last, as `dpkg-query -W -f '${Version}' PKG` prints it
            "dpkg-query": "eval last=\\${$#}; case $last in rustc) printf 1.85.0+dfsg1-1+b1;; "
            "libstd-rust-dev:riscv64) printf 1.85.0+dfsg1-1;; *) exit 1;; esac",
        },
    )
    out = tmp_path / "compilers.txt"
    assert _cross("compilers", str(out), "rustc", "go", env=env).returncode == 0
    assert (
        out.read_text() == "rustc=rustc 1.85.0 (4d91de4e4 2025-02-17)\ngo=go version go1.24.4 linux/amd64\n"
    )
    assert _cross("compilers", str(tmp_path / "none.txt"), env=env).returncode == 0
    assert not (tmp_path / "none.txt").exists()  # no compiler, no file
    unpacked = tmp_path / "unpacked.txt"
    unpacked.write_text("")
    cp = _cross("match", str(unpacked), "version", "rustc", "libstd-rust-dev:riscv64", env=env)
    assert cp.returncode == 1 and "versions must match" in cp.stderr
    assert (
        _cross("match", str(unpacked), "source", "rustc", "libstd-rust-dev:riscv64", env=env).returncode == 0
    )
    assert _cross("match", str(unpacked), "source", "rustc", env=env).returncode == 2  # an incomplete rule
    assert _cross("nothing", env=env).returncode == 2


def test_the_cross_toolchain_script_unpacks_one_directory_and_records_the_version(tmp_path):
    calls = tmp_path / "calls"
    env = _stand_ins(
        tmp_path / "bin",
        {
            "apt-get": f'echo "apt-get $*" >> {calls}; : > libfoo_1.0-1+b2_riscv64.deb',
            "dpkg-deb": "case $1 in --fsys-tarfile) echo TAR;; -f) echo 1.0-1+b2;; esac",
            "tar": f'echo "tar $* $(cat)" >> {calls}',
        },
    )
    ca = tmp_path / "ca.pem"
    ca.write_text("a CA")
    out = tmp_path / "unpacked.txt"
    out.write_text("left over\n")
    env["RVPORT_UNPACK_DIR"] = str(tmp_path / "work")
    cp = _cross("unpack", str(out), "libfoo:riscv64", "/tmp/", env={**env, "RVPORT_APT_CA": str(ca)})
    assert cp.returncode == 0, cp.stderr
    assert out.read_text() == "libfoo:riscv64=1.0-1+b2\n"
    assert calls.read_text().splitlines() == [
        f"apt-get -o Acquire::https::CAInfo={ca} download libfoo:riscv64",
        "tar -x -C / ./tmp TAR",
    ]
    assert not (tmp_path / "work").exists()
    assert _cross("unpack", str(out), env=env).returncode == 0 and out.read_text() == ""  # emptied


def test_the_pip_default_index_script_prints_the_index_of_the_pip_it_runs_with():
    import sys

    from rvport.sources.pypi import pip_default_index

    cp = subprocess.run(
        [sys.executable, str(SCRIPTS / "pip-default-index.py")], capture_output=True, text=True, timeout=120
    )
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.strip().startswith("https://") and cp.stdout.strip() == pip_default_index()


def test_the_smoke_install_script_installs_every_wheel_offline(tmp_path):
    from rvport.engine import render
    from rvport.vocab import Kind

    calls = tmp_path / "calls"
    env = _stand_ins(tmp_path / "bin", {"python3": f'echo "python3 $*" >> {calls}'})
    artifacts = tmp_path / "artifacts"
    (artifacts / "sub").mkdir(parents=True)
    for name in ("a-1.0-cp313-cp313-linux_riscv64.whl", "sub/b-2.0-py3-none-any.whl", "libx.a"):
        (artifacts / name).write_text("")
    script = str(SCRIPTS / "smoke-install.sh")
    cp = subprocess.run(
        ["sh", "-eu", script, str(artifacts)], capture_output=True, text=True, env=env, timeout=60
    )
    assert cp.returncode == 0, cp.stderr
    (line,) = calls.read_text().splitlines()
    head = f"python3 -m pip install --no-index --no-deps --break-system-packages --find-links {artifacts} "
    assert line.startswith(head)
    assert sorted(line[len(head) :].split()) == sorted(
        [f"{artifacts}/a-1.0-cp313-cp313-linux_riscv64.whl", f"{artifacts}/sub/b-2.0-py3-none-any.whl"]
    )
    # with the dependencies' wheels: one pip command, each directory a --find-links; an absent one is skipped
    deps = tmp_path / "deps"
    (deps / "tvm").mkdir(parents=True)
    (deps / "tvm" / "t-0.1-cp314-cp314-manylinux_2_31_riscv64.whl").write_text("")
    calls.unlink()
    cp = subprocess.run(
        ["sh", "-eu", script, str(artifacts), str(deps), str(tmp_path / "absent")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert cp.returncode == 0, cp.stderr
    (line,) = calls.read_text().splitlines()
    head = (
        "python3 -m pip install --no-index --no-deps --break-system-packages "
        f"--find-links {artifacts} --find-links {deps} "
    )
    assert line.startswith(head)
    assert sorted(line[len(head) :].split()) == sorted(
        [
            f"{artifacts}/a-1.0-cp313-cp313-linux_riscv64.whl",
            f"{artifacts}/sub/b-2.0-py3-none-any.whl",
            f"{deps}/tvm/t-0.1-cp314-cp314-manylinux_2_31_riscv64.whl",
        ]
    )
    # the smoke stage runs it for wheel kinds only, from its build context
    assert render.smoke_commands(Kind.PYTHON_WHEEL, "print(1)") == (
        "sh -eu /rvport/smoke-install.sh /artifacts /rvport/deps",
        "python3 /rvport/smoke",
    )
    assert render.smoke_commands(Kind.GO_BINARY, "#!/bin/sh\n")[0] == "true"
    assert render.smoke_scripts() == {"rvport-smoke-install.sh": resources.script("smoke-install.sh")}
    text = render.smoke_dockerfile(
        image="i", qemu_cpu="max", profile=get_profile("rv64gc"), install="true", run="true"
    ).text
    assert "COPY rvport-smoke-install.sh /rvport/smoke-install.sh" in text
