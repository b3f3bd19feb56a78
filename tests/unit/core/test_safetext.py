"""Untrusted names never reach the terminal, a JUnit file or a Markdown summary raw (rvport/safetext.py): the
console escapes control characters, JUnit XML is well-formed for any input, Markdown cells stay cells."""

from __future__ import annotations

import io
import os
import re
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

from rich.table import Table
from rich.text import Text

from rvport.cli import ci
from rvport.cli.console import SafeConsole
from rvport.safetext import md_text, printable, xml_text
from tests.fixtures.cli import rvport_process

HOSTILE = [
    "\x1b[2J\x1b[1;1HFAKE: all artifacts PASS",
    "bell\x07 nul\x00 del\x7f c1\x9b31m",
    "rtl\u202egnp.exe",
    "line\nbreak\ttab",
    "[bold]markup[/bold] <tag> & ]]> `tick` | pipe",
    "undecodable \udcff\udcfe byte",
]


def test_printable_escapes_what_a_terminal_obeys_and_keeps_the_rest():
    assert printable("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"
    assert printable("a\u202eb\x9bc") == "a\\u202eb\\x9bc"
    assert printable("bytes \udcff") == "bytes \\xff"
    assert printable("two\nlines\tok") == "two\nlines\tok"
    assert printable("two\nlines", lines=False) == "two\\nlines"
    assert printable("plain ünïcode ✓ [x]") == "plain ünïcode ✓ [x]"
    for name in HOSTILE:
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e\ud800-\udfff]", printable(name))


def test_the_console_escapes_controls_in_everything_it_renders_but_keeps_its_own_styles():
    out = io.StringIO()
    c = SafeConsole(file=out, force_terminal=True, width=200, color_system="standard")
    t = Table()
    t.add_column("name")
    for name in HOSTILE:
        t.add_row(Text(name))
    c.print(t)
    c.print(Text("styled", style="bold red"), HOSTILE[0], markup=False)
    text = out.getvalue()
    assert "\x1b[2J" not in text and "\\x1b[2J" in text and "\x9b" not in text and "\u202e" not in text
    assert "\x1b[1;31mstyled" in text  # Rich's own SGR codes still reach the terminal


def _hostile_wheel(tmp_path: Path) -> Path:
    whl = tmp_path / "demo-1.0-cp312-cp312-linux_riscv64.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        for i, name in enumerate(HOSTILE[:5]):
            zf.writestr(f"demo/{i}{name}.so", b"\x7fELF\x02\x01\x01" + b"\0" * 9)
        zf.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: cp312-cp312-linux_riscv64\n")
        zf.writestr("demo-1.0.dist-info/RECORD", "")
    return whl


def test_verify_prints_hostile_member_and_file_names_escaped_and_writes_parseable_junit(tmp_path):
    whl = _hostile_wheel(tmp_path)
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/not-utf8-\xff\x1b[2J.so"))
    odd.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9)
    junit = tmp_path / "junit.xml"
    cp = rvport_process(
        ["verify", "artifacts", str(whl), os.fsencode(odd).decode("utf-8", "surrogateescape")]
        + ["--junit", str(junit)],
        env={**os.environ, "COLUMNS": "400", "TERM": "xterm"},
        main="app",
    )
    out = cp.stdout + cp.stderr  # read as UTF-8: a raw byte of the odd name would not decode
    assert cp.returncode == 1, out
    assert "Traceback" not in out and "\x1b[2J" not in out and "\x9b" not in out and "\u202e" not in out
    assert "\\x1b[2J" in out and "[bold]markup[/bold]" in out and "not-utf8-\\xff" in out
    root = ET.parse(junit).getroot()
    names = [c.get("name") for c in root.iter("testcase")]
    assert any(n and "not-utf8-\\xff\\x1b[2J.so" in n for n in names), names
    assert "\\x1b[2J\\x1b[1;1HFAKE" in ET.tostring(root, encoding="unicode")


def _result_doc(name: str) -> dict:
    stage = {
        "recipe": name,
        "version": name,
        "mode": "qemu",
        "status": "failed",
        "error": f"{name} failed\nsecond line ``` {name}",
        "log_tail": [name, "```", "</details><script>x</script>"],
        "artifacts": [{"path": f"artifacts/{name}/x.whl", "size": 3, "sha256": "ab"}],
        "smoke": {"status": "failed", "output": [name]},
        "verify": {
            "ok": False,
            "reports": [{"artifacts": [{"path": name, "verdict": "fail", "reasons": [name]}]}],
        },
        "timings": {"build": 1.0},
    }
    return {
        "status": "failed",
        "profile": {"name": name},
        "tag": name,
        "stages": [stage],
        "artifacts": stage["artifacts"],
        "failing_stage": name,
        "duration_s": 1,
        "started": name,
    }


def test_junit_and_summary_of_a_result_with_hostile_names(tmp_path):
    for name in HOSTILE:
        doc = _result_doc(name)
        xml = ci.junit_xml(doc)
        root = ET.fromstring(xml)  # well-formed, whatever the names
        case = next(root.iter("testcase"))
        assert case.get("name") == f"{xml_text(name)}=={xml_text(name)}"
        assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]", xml)
        ci.write_junit(tmp_path / "j.xml", doc)
        ET.parse(tmp_path / "j.xml")
        md = ci.summary_markdown(doc)
        assert "\x1b" not in md and "<script>" not in md.split("```")[0]
        row = next(line for line in md.splitlines() if line.startswith("| ") and "qemu" in line)
        assert len(re.findall(r"(?<!\\)\|", row)) == 8, row  # 7 cells: a name cannot add a column
        opening = next(line for line in md.splitlines() if re.fullmatch("`{3,}text", line))
        fence = opening.removesuffix("text")  # longer than the log's own ``` line: that cannot end the block
        assert len(fence) == 4 and md.splitlines().count(fence) == 1
    assert md_text("a|b<i>[x](y)") == "a\\|b\\<i\\>\\[x\\]\\(y\\)"


def test_a_command_line_mistake_is_shown_escaped():
    cp = rvport_process(["bogus\x1b[2J\u202e"], env={**os.environ, "COLUMNS": "200"}, main="app")
    assert cp.returncode == 2 and "Traceback" not in cp.stderr, cp.stderr
    assert "\x1b[2J" not in cp.stderr and "\u202e" not in cp.stderr and "bogus\\x1b[2J\\u202e" in cp.stderr
    assert "Usage:" in cp.stderr


def test_the_live_view_keeps_its_cursor_movements_and_escapes_the_build_output():
    import time

    from rvport.cli.progress_view import LiveReporter

    buf = io.StringIO()
    rep = LiveReporter(SafeConsole(file=buf, force_terminal=True, width=100), None)
    rep.add("demo", "qemu")
    with rep:
        rep.begin("demo", "build")
        rep.line("demo", "hello \x1b[31mred\x1b[2J")
        time.sleep(0.3)
        rep.end("demo", "ok")
    out = buf.getvalue()
    assert "\x1b[?25l" in out or "\x1b[2K" in out  # Rich's own control sequences (hide cursor, erase line)
    assert "\x1b[31mred" not in out and "\x1b[2J" not in out and "\\x1b[31mred" in out


def test_one_line_escapes_newlines_and_controls_but_keeps_a_tab():
    from rvport.safetext import one_line

    assert one_line("p\nerror: FORGED") == "p\\nerror: FORGED"
    assert one_line("a\tb\r\x1b[2J") == "a\tb\\x0d\\x1b[2J"
    assert one_line(Path("/tmp/x\ny")) == "/tmp/x\\ny"


def test_a_newline_in_an_output_path_never_prints_a_line_of_its_own(tmp_path):
    """`--output "$(printf 'p\\nerror: FORGED')"` printed a forged line: in the `wrote` line, and in an error
    message quoting the path."""
    forged = "p\nerror: FORGED"
    (tmp_path / "afile\nerror: FORGED").write_text("x")
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent.sock", "RVPORT_CACHE_DIR": str(tmp_path / "c")}
    for args in (
        ("plan", "msgspec", "--output", forged),  # the wrote line
        ("plan", "msgspec", "--output", "afile\nerror: FORGED/sub"),  # an error naming the path
        ("wheelhouse", "vllm", "--output", forged),  # a plan's directory is no wheelhouse: refused
    ):
        cp = rvport_process(list(args), cwd=tmp_path, env=env)
        lines = (cp.stdout + cp.stderr).splitlines()
        assert not [ln for ln in lines if ln.startswith("error: FORGED")], cp.stdout + cp.stderr
        assert "\\nerror: FORGED" in cp.stdout + cp.stderr


def test_a_ci_log_line_is_one_line():
    from rich.console import Console

    from rvport.cli.progress_view import Reporter

    out = io.StringIO()
    rep = Reporter(Console(file=out, width=200), ci="generic")
    rep.add("s", "qemu")
    rep.line("s", "a\n::error::FORGED")
    assert not [ln for ln in out.getvalue().splitlines() if ln.startswith("::error::")]
