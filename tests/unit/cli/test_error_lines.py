"""A newline in a name or path never prints a line of its own (issue 36, item 6), while rvport's own lines of
an error (a failed build's last lines, a smoke test's output, what git or patch said) are still shown line by
line. An error's message, hint and problems are one line each (a newline in a value they quote is shown as
`\\n`); its own lines are RvportError.detail, each escaped on its own. Checked in what the CLI prints, in the
Markdown summary, in the JUnit files and in a log line."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from rvport.cli import app as cli_app
from rvport.cli import ci
from rvport.engine import runner
from rvport.errors import BuildFailed, Problem, RecipeError
from rvport.resources import builtin

# a forged line: one that a value's newline would start, which a reader (or a CI system) takes for
# rvport's own error, hint or annotation
FORGED = re.compile(r"^\s*(?:error|hint|::error):?:?\s*FORGED")


def forged_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if FORGED.match(ln)]


def rvport(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # wide enough that the verify table never folds a name (a folded one is safe, but not what is checked)
    env = {
        **os.environ,
        "COLUMNS": "400",
        "DOCKER_HOST": "unix:///nonexistent.sock",
        "RVPORT_CACHE_DIR": str(cwd / "cache"),
    }
    return subprocess.run(
        [sys.executable, "-m", "rvport", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def test_an_error_shows_its_own_lines_line_by_line_and_every_quoted_name_on_one_line():
    err = BuildFailed(
        "recipe 'x\nerror: FORGED' failed; last lines:",
        detail=["    step 1 of 2", "    make: *** [all] Error 2", "    a line\nhint: FORGED with a newline"],
        problems=[Problem(message="member m\n::error::FORGED", file="d/r\nerror: FORGED.yaml", line=3)],
        hint="see p\nhint: FORGED",
    )
    lines = err.render().splitlines()
    assert lines[0] == "recipe 'x\\nerror: FORGED' failed; last lines:"
    assert lines[1:4] == [
        "    step 1 of 2",
        "    make: *** [all] Error 2",
        "    a line\\nhint: FORGED with a newline",
    ]
    assert lines[4] == "  d/r\\nerror: FORGED.yaml:3: member m\\n::error::FORGED"
    assert lines[5] == "hint: see p\\nhint: FORGED"
    assert len(lines) == 6 and not forged_lines(err.render())
    # for code and tests, str() is the message and its detail as they are
    assert str(err) == "\n".join([err.message, *err.detail])


def test_a_smoke_tests_last_lines_stay_lines_and_its_output_cannot_forge_one():
    record = {"exit_status": 3, "output": ["Traceback (most recent call last):", "x\nerror: FORGED", "Boom"]}
    lines = runner.smoke_failure("demo==1.0", record, Path("/o/logs/demo.log")).render().splitlines()
    assert lines[:4] == [
        "demo==1.0: the smoke test failed (exit status 3); its last lines:",
        "    Traceback (most recent call last):",
        "    x\\nerror: FORGED",
        "    Boom",
    ]
    assert lines[4].startswith("hint: the artifacts were built and verified but not kept")
    empty = runner.smoke_failure("demo==1.0", {"exit_status": 1, "output": []}, Path("l")).render()
    assert empty.splitlines()[1] == "    (it printed nothing)"


def test_the_cli_prints_an_errors_lines_one_by_one_and_a_forged_name_on_its_line(monkeypatch, capsys):
    def failing(**_kw: object) -> None:
        raise BuildFailed(
            "docker buildx build failed (exit 1) for out\nerror: FORGED; last lines:",
            detail=["    #5 RUN make", "    #5 ERROR: process did not complete"],
            hint="full log: out\nerror: FORGED/logs/demo.log",
        )

    monkeypatch.setattr(cli_app, "app", failing)
    monkeypatch.setattr(cli_app, "install_handlers", lambda: None)
    monkeypatch.setattr(sys, "argv", ["rvport", "build", "demo"])
    with pytest.raises(SystemExit) as e:
        cli_app.main()
    assert e.value.code == 7
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "error: docker buildx build failed (exit 1) for out\\nerror: FORGED; last lines:",
        "    #5 RUN make",
        "    #5 ERROR: process did not complete",
        "hint: full log: out\\nerror: FORGED/logs/demo.log",
    ]


def test_a_forged_output_path_recipe_name_and_recipe_file_name_print_no_line_of_their_own(tmp_path):
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    text = builtin("recipes", "msgspec.yaml").read_text()
    (recipes / "msgspec.yaml").write_text(
        re.sub(r"^name: .*$", 'name: "msgspec\\nerror: FORGED"', text, count=1, flags=re.M)
    )
    (recipes / "a\nerror: FORGED.yaml").write_text(text)
    out = "out\nerror: FORGED"
    for args, code in (
        (("recipes", "list", "--recipes", str(recipes)), 3),  # a recipe file's name and its name: field
        (("plan", "x\nerror: FORGED"), 2),  # a recipe name given on the command line
        (("recipes", "show", "x\nhint: FORGED"), 2),
        (("plan", "msgspec", "--output", out + "/sub", "--python", "3.1\nhint: FORGED"), 2),
        (("wheelhouse", "vllm", "--output", out), 2),
    ):
        if args[0] == "wheelhouse":  # a plan's output directory is no wheelhouse: refused, naming it
            assert rvport("plan", "msgspec", "--output", out, cwd=tmp_path).returncode == 0
        cp = rvport(*args, cwd=tmp_path)
        assert cp.returncode == code, cp.stdout + cp.stderr
        assert "FORGED" in cp.stdout + cp.stderr and "Traceback" not in cp.stderr
        assert not forged_lines(cp.stdout + cp.stderr), cp.stdout + cp.stderr


def test_a_wheel_members_forged_name_is_one_line_in_verifys_table_and_junit(tmp_path):
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("demo/__init__.py", "")
        z.writestr("demo/x\nerror: FORGED.so", "\x7fELF")
        z.writestr("demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
        z.writestr(
            "demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        z.writestr("demo-1.0.dist-info/RECORD", "")
    cp = rvport("verify", "artifacts", str(wheel), "--all", "--junit", str(tmp_path / "j.xml"), cwd=tmp_path)
    assert cp.returncode == 1, cp.stdout + cp.stderr
    assert "x\\nerror: FORGED.so" in cp.stdout + cp.stderr
    assert not forged_lines(cp.stdout + cp.stderr), cp.stdout + cp.stderr
    junit = (tmp_path / "j.xml").read_text()
    assert "x\\nerror: FORGED.so" in junit and not forged_lines(junit), junit
    assert not forged_lines("\n".join(_xml_texts(ET.fromstring(junit))))


def _xml_texts(root: ET.Element) -> list[str]:
    return [t for el in root.iter() for t in (el.text, el.tail, *el.attrib.values()) if t]


def _failed_doc() -> dict:
    err = BuildFailed(
        "demo==1.0: docker buildx build failed (exit 2) in out\nerror: FORGED; last lines:",
        detail=["    compiling a.c", "    a.c:1: error: expected ';'"],
        hint="full log: out\nhint: FORGED/logs/demo.log",
    )
    member = "demo/x\nerror: FORGED.so"
    return {
        "status": "failed",
        "profile": {"name": "rvv256"},
        "tag": "t",
        "duration_s": 1.0,
        "failing_stage": "demo",
        "artifacts": [{"path": "artifacts/demo\n::error::FORGED.whl", "size": 3, "sha256": "0" * 64}],
        "stages": [
            {
                "recipe": "demo",
                "version": "1.0",
                "mode": "qemu",
                "status": "failed",
                "error": err.render(),
                "log_tail": ["#7 compiling a.c", "#7 a.c:1: error: expected ';'"],
                "artifacts": [{"path": "artifacts/demo\nerror: FORGED.whl", "size": 3, "sha256": "0" * 64}],
                "verify": {
                    "ok": False,
                    "reports": [
                        {
                            "artifacts": [
                                {
                                    "path": "artifacts/demo\nhint: FORGED.whl",
                                    "verdict": "fail",
                                    "reasons": [f"{member}: needs v"],
                                }
                            ]
                        }
                    ],
                },
            }
        ],
    }


def test_the_markdown_summary_and_junit_show_no_forged_line_and_keep_the_log_lines():
    doc = _failed_doc()
    md = ci.summary_markdown(doc)
    assert not forged_lines(md), md
    lines = md.splitlines()
    # the error's own lines, and the log tail, one line each in the summary's fence
    assert "    a.c:1: error: expected ';'" in lines and "#7 a.c:1: error: expected ';'" in lines
    assert "hint: full log: out\\nhint: FORGED/logs/demo.log" in lines
    junit = ci.junit_xml(doc)
    assert not forged_lines(junit), junit
    root = ET.fromstring(junit)
    assert not forged_lines("\n".join(_xml_texts(root)))
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and failure.text is not None
    assert (
        failure.get("message")
        == "demo==1.0: docker buildx build failed (exit 2) in out\\nerror: FORGED; last lines:"
    )
    assert "    compiling a.c\n    a.c:1: error: expected ';'\n" in failure.text
    out = root.find("testsuite/testcase/system-out")
    assert out is not None and "artifact: artifacts/demo\\nerror: FORGED.whl 3 bytes" in (out.text or "")


def test_a_log_line_quotes_a_variables_forged_value_on_one_line(caplog):
    from rvport.sources.fetch import ca_bundle

    with caplog.at_level(logging.WARNING, logger="rvport.sources.fetch"):
        ca_bundle(None, {"REQUESTS_CA_BUNDLE": "/nonexistent\nerror: FORGED"})
    said = [r.getMessage() for r in caplog.records]
    assert any("/nonexistent\\nerror: FORGED" in m for m in said), said
    assert not any("\n" in m for m in said), said


def test_a_recipe_errors_lines_are_the_problems_each_on_one_line():
    err = RecipeError(
        "2 problems in the recipes (d\nerror: FORGED)",
        problems=[
            Problem(
                message="name: 'a\nerror: FORGED' does not match",
                file="d/a.yaml",
                line=2,
                hint="h\nhint: FORGED",
            ),
            Problem(message="unknown key", file="d/b.yaml", line=1),
        ],
    )
    assert err.render().splitlines() == [
        "2 problems in the recipes (d\\nerror: FORGED)",
        "  d/a.yaml:2: name: 'a\\nerror: FORGED' does not match",
        "      hint: h\\nhint: FORGED",
        "  d/b.yaml:1: unknown key",
    ]
