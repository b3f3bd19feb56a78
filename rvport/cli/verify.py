"""`rvport verify ...`: parse, call verify_paths, render. Registered in rvport/cli.py."""

from __future__ import annotations

from pathlib import Path

import typer

from rvport.cli import outputs
from rvport.cli.console import ui
from rvport.cli.options import profile_option
from rvport.errors import UsageError, VerifyFailed
from rvport.catalogue.profiles import get_profile
from rvport.verify import verify_paths
from rvport.verify.policy import IsaLevel
from rvport.verify.report import render_table, write_json, write_junit

app = typer.Typer(add_completion=False, rich_markup_mode=None,
                  help="Prove artifacts' architecture, ABI and RISC-V extensions from their ELF files.",
                  short_help="Prove artifacts' architecture, ABI and extensions from their ELF files.")


@app.command("artifacts")
def artifacts(
    paths: list[Path] = typer.Argument(..., metavar="PATH", hidden=True),
    profile: str = profile_option(),
    isa: str = typer.Option(IsaLevel.PROFILE.value, "--isa", metavar="profile|baseline",
                            help="profile: require every extension the profile promises; "
                                 "baseline: require rv64gc only (Rust/Go code); the ceiling applies to both."),
    json_out: Path | None = typer.Option(None, "--json", metavar="FILE", help="Write the report as JSON to FILE."),
    junit_out: Path | None = typer.Option(None, "--junit", metavar="FILE",
                                          help="Write JUnit XML to FILE (one case per artifact)."),
    every_member: bool = typer.Option(False, "--all", help="Show a row for every ELF file, not only failures."),
) -> None:
    """Verify artifacts against a target profile. Exit 0 if all pass, 1 if any fails, 2 on usage errors.

    Each PATH is a wheel, an ar archive (.a), an ELF file (.so, executable, object) or a directory, searched
    for them recursively. Only regular files are read: a FIFO, socket or device fails at once."""
    prof = get_profile(profile)
    # Checked here, not by a click Choice, so a bad value is an rvport UsageError (exit 2).
    level = _isa_level(isa)
    for out in (json_out, junit_out):
        outputs.check_file(out, make_parents=False)
    report = verify_paths(list(paths), prof, isa=level)
    if json_out is not None:
        write_json(report, json_out)
    if junit_out is not None:
        write_junit(report, junit_out)
    render_table(report, ui().console, every_member=every_member)
    if not report.ok:
        raise VerifyFailed(f"{len(report.failed)} of {len(report.artifacts)} artifact(s) are not what "
                           f"profile {prof.name} (isa {level}) promises",
                           hint="see the reasons above; --json FILE has every fact")


def _isa_level(value: str) -> IsaLevel:
    try:
        return IsaLevel(value.lower())
    except ValueError:
        raise UsageError(f"unknown --isa level {value!r}",
                         hint=f"choose one of: {', '.join(level.value for level in IsaLevel)}") from None
