"""Render a VerifyReport: a Rich table for people, JSON (schema-versioned) and JUnit XML for machines."""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rvport.errors import UsageError
from rvport.fileio import atomic_write_text
from rvport.safetext import clean_xml, one_line, printable
from rvport.verify.model import ArtifactResult, MemberResult, VerifyReport
from rvport.verify.policy import Verdict

_STYLE = {Verdict.PASS: "green", Verdict.FAIL: "bold red"}
# lines per artifact in the table: a crafted wheel can fail every one of 100,000 members (--json has them all)
TABLE_LINES = 40
# member names a grouped line lists before it says how many more
NAMES_SHOWN = 3


def _verdict(v: Verdict) -> Text:
    return Text(str(v).upper(), style=_STYLE[v])


def _grouped(members: list[MemberResult], texts: Callable[[MemberResult], tuple[str, ...]]) -> list[str]:
    """One line per distinct text, naming the members it applies to, counted: 65 archive members that fail
    for the same reason are one line."""
    by_text: dict[str, list[str]] = {}
    for m in members:
        for t in texts(m):
            by_text.setdefault(t, []).append(m.name or "")
    lines = []
    for text, names in by_text.items():
        named = [n for n in names if n]
        if not named:
            lines.append(text)
        elif len(named) == 1:
            lines.append(f"{named[0]}: {text}")
        else:
            shown = ", ".join(named[:NAMES_SHOWN]) + (", …" if len(named) > NAMES_SHOWN else "")
            lines.append(f"{len(named)} members ({shown}): {text}")
    return lines


def summary_lines(a: ArtifactResult) -> list[str]:
    """What the table says of one artifact: its own reasons, its members' reasons and notes grouped by text,
    and how many ELF files passed; at most TABLE_LINES lines."""
    failed = [m for m in a.members if not m.ok]
    lines = list(a.reasons) + _grouped(failed, lambda m: m.reasons)
    passing = len(a.members) - len(failed)
    if a.members and any(m.name is not None for m in a.members):
        if passing:
            lines.append(f"{passing} of {len(a.members)} ELF file(s) pass")
    lines += _grouped(list(a.members), lambda m: m.notes)
    lines += list(a.notes)
    if not lines:
        lines = ["ok" if a.ok else "failed"]
    if len(lines) > TABLE_LINES:
        more = len(lines) - TABLE_LINES + 1
        lines = lines[: TABLE_LINES - 1] + [f"{more} more lines: --json FILE has them all"]
    return lines


def _member_rows(a: ArtifactResult) -> list[tuple[str, Verdict, str]]:
    """--every-member: a row per ELF file, as verify judged it."""
    rows = [("-", Verdict.FAIL, r) for r in a.reasons]
    for m in a.members:
        text = "; ".join(m.reasons) if m.reasons else "; ".join(m.notes) or "ok"
        rows.append((m.name or "-", m.verdict, text))
    return rows or [("-", a.verdict, "; ".join(a.notes) or ("ok" if a.ok else "failed"))]


def _shown_paths(report: VerifyReport) -> tuple[str | None, list[str]]:
    """The artifacts' paths as the table shows them: relative to the directory they all share (named in
    the title), so that a long absolute prefix does not fold every name."""
    paths = [a.path for a in report.artifacts]
    try:
        base = os.path.commonpath([os.path.dirname(p) or "." for p in paths]) if paths else ""
    except ValueError:  # absolute and relative paths mixed
        base = ""
    if not base or base == ".":
        return None, paths
    return base, [os.path.relpath(p, base) for p in paths]


def render_table(report: VerifyReport, console: Console, *, every_member: bool = False) -> None:
    base, shown = _shown_paths(report)
    title = f"rvport verify: profile {report.profile} ({report.march}, {report.mabi}), isa {report.isa}"
    if base is not None:
        title += f"\nfiles in {printable(base, lines=False)}"
    table = Table(title=Text(title), title_justify="left", show_lines=False, expand=False)
    # a name folds only where it cannot fit beside a reason of 30 columns; reasons wrap at spaces
    longest = max((len(p) for p in shown), default=4)
    table.add_column("file", overflow="fold", min_width=max(4, min(longest, console.width - 44)))
    if every_member:
        table.add_column("member", overflow="fold", min_width=len("member"))
    table.add_column("verdict", no_wrap=True)
    table.add_column("reason", overflow="fold", min_width=len("reason"))
    for a, path in zip(report.artifacts, shown, strict=True):
        # names on one line, every control shown escaped: a member name cannot draw over the table
        name = Text(printable(path, lines=False))
        if every_member:
            for member, verdict, reason in _member_rows(a):
                table.add_row(
                    name,
                    Text(printable(member, lines=False)),
                    _verdict(verdict),
                    Text(printable(reason, lines=False)),
                )
        else:
            reasons = Text("\n").join(Text(printable(line, lines=False)) for line in summary_lines(a))
            table.add_row(name, _verdict(a.verdict), reasons)
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
        case = ET.SubElement(
            suite, "testcase", classname=f"rvport.verify.{report.profile}", name=one_line(a.path)
        )
        # a reason or note per line, each on one line: a member's name in it cannot start a line of its own
        if not a.ok:
            reasons = [one_line(r) for r in a.all_reasons()] or ["failed"]
            fail = ET.SubElement(case, "failure", message=reasons[0], type="VerifyFailed")
            fail.text = "\n".join(reasons)
        out = [one_line(f"{m.name or a.path}: {'; '.join(m.notes)}") for m in a.members if m.notes]
        out += [one_line(n) for n in a.notes]
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
    2). `-` is standard output."""
    if str(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    if not path.parent.is_dir():
        raise UsageError(f"cannot write {path}: no directory {path.parent}")
    try:
        atomic_write_text(path, text)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from e
