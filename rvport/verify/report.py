"""Render a VerifyReport: a Rich table for people, JSON (schema-versioned) and JUnit XML for machines."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rvport.errors import UsageError
from rvport.fileio import atomic_write_text
from rvport.safetext import clean_xml, printable
from rvport.verify.model import ArtifactResult, VerifyReport
from rvport.verify.policy import Verdict

_STYLE = {Verdict.PASS: "green", Verdict.FAIL: "bold red"}
TABLE_ROWS = 200  # rows per artifact in the table: a crafted wheel can fail every one of 100,000 members


def _verdict(v: Verdict) -> Text:
    return Text(str(v).upper(), style=_STYLE[v])


def _rows(a: ArtifactResult, every_member: bool) -> list[tuple[str, str, Verdict, str]]:
    rows: list[tuple[str, str, Verdict, str]] = []
    for r in a.reasons:
        rows.append((a.path, "-", Verdict.FAIL, r))
    shown = a.members if every_member else a.failed_members
    for m in shown:
        text = "; ".join(m.reasons) if m.reasons else "; ".join(m.notes) or "ok"
        rows.append((a.path, m.name or "-", m.verdict, text))
    passing = len(a.members) - len(a.failed_members)
    if not every_member and passing:
        if len(a.members) == 1 and a.members[0].name is None:
            m = a.members[0]
            rows.append((a.path, "-", m.verdict, "; ".join(m.notes) or "ok"))
        else:
            rows.append((a.path, f"{passing} ELF file(s)", Verdict.PASS, "ok"))
    if not rows:
        rows.append((a.path, "-", a.verdict, "; ".join(a.notes) or ("ok" if a.ok else "failed")))
    if len(rows) > TABLE_ROWS:
        more = len(rows) - TABLE_ROWS + 1
        rows = rows[: TABLE_ROWS - 1] + [
            (a.path, "...", a.verdict, f"{more} more rows: --json FILE has them all")
        ]
    return rows


def render_table(report: VerifyReport, console: Console, *, every_member: bool = False) -> None:
    title = f"rvport verify: profile {report.profile} ({report.march}, {report.mabi}), isa {report.isa}"
    table = Table(title=Text(title), show_lines=False, expand=False)
    # paths and member names fold only when longer than their column; reasons wrap at spaces
    table.add_column("file", overflow="fold", min_width=len("file"))
    table.add_column("member", overflow="fold", min_width=len("member"))
    table.add_column("verdict", no_wrap=True)
    table.add_column("reason", overflow="fold", min_width=len("reason"))
    for a in report.artifacts:
        for path, member, verdict, reason in _rows(a, every_member):
            # names on one line, every control shown escaped: a member name cannot draw over the table
            table.add_row(
                Text(printable(path, lines=False)),
                Text(printable(member, lines=False)),
                _verdict(verdict),
                Text(printable(reason)),
            )
    console.print(table, crop=False)
    n, bad = len(report.artifacts), len(report.failed)
    if report.ok:
        console.print(Text(f"{n} artifact(s) verified for {report.profile}", style="green"))
    else:
        console.print(
            Text(f"{bad} of {n} artifact(s) failed verification for {report.profile}", style="bold red")
        )


def to_junit(report: VerifyReport) -> str:
    """JUnit XML: one test suite, one test case per artifact; failures carry every reason."""
    failures = len(report.failed)
    suites = ET.Element(
        "testsuites",
        name="rvport verify",
        tests=str(len(report.artifacts)),
        failures=str(failures),
        errors="0",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"rvport.verify.{report.profile}",
        tests=str(len(report.artifacts)),
        failures=str(failures),
        errors="0",
        skipped="0",
    )
    props = ET.SubElement(suite, "properties")
    for k, v in (
        ("profile", report.profile),
        ("march", report.march),
        ("mabi", report.mabi),
        ("isa", str(report.isa)),
    ):
        ET.SubElement(props, "property", name=k, value=v)
    for a in report.artifacts:
        case = ET.SubElement(suite, "testcase", classname=f"rvport.verify.{report.profile}", name=a.path)
        if not a.ok:
            reasons = a.all_reasons() or ["failed"]
            fail = ET.SubElement(case, "failure", message=reasons[0], type="VerifyFailed")
            fail.text = "\n".join(reasons)
        out = [f"{m.name or a.path}: {'; '.join(m.notes)}" for m in a.members if m.notes] + list(a.notes)
        if out:
            ET.SubElement(case, "system-out").text = "\n".join(out)
    clean_xml(suites)  # any file or member name: well-formed XML, no terminal controls
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def write_json(report: VerifyReport, path: Path) -> None:
    _write(path, report.dumps())


def write_junit(report: VerifyReport, path: Path) -> None:
    _write(path, to_junit(report))


def _write(path: Path, text: str) -> None:
    """Whole or not at all, in an existing directory; a path that cannot be written is a usage error (exit
    2)."""
    if not path.parent.is_dir():
        raise UsageError(f"cannot write {path}: no directory {path.parent}")
    try:
        atomic_write_text(path, text)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from e
