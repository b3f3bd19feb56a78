"""`rvport verify ...`: parse, call verify_paths, render. Registered in rvport/cli/app.py."""

from __future__ import annotations

from pathlib import Path

import typer

from rvport.catalogue.profiles import get_profile
from rvport.cli import outputs
from rvport.cli.console import ui
from rvport.cli.options import DEFAULT_PROFILE, profile_option
from rvport.errors import UsageError, VerifyFailed
from rvport.verify import isa_level, verify_paths
from rvport.verify.policy import IsaLevel
from rvport.verify.provenance import load as load_provenance
from rvport.verify.report import render_table, write_json, write_junit

app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    help="Prove artifacts' architecture, ABI and RISC-V extensions from their ELF files.",
    short_help="Prove artifacts' architecture, ABI and extensions from their ELF files.",
)


@app.command("artifacts")
def artifacts(
    paths: list[Path] = typer.Argument(..., metavar="PATH", hidden=True),
    profile: str | None = profile_option(
        default=None, extra="[default: the provenance's profile with --provenance, else rvv256]"
    ),
    isa: str = typer.Option(
        IsaLevel.RUNS_ON.value,
        "--isa",
        metavar="runs-on|carries",
        help="runs-on: everything an artifact needs is within the profile (it runs on the "
        "profile's CPUs); carries: it also carries every extension the profile promises "
        "(catches a silent scalar fallback). Older names: baseline, profile.",
    ),
    export: list[str] = typer.Option(
        [],
        "--export",
        metavar="NAME",
        help="A function every artifact must export (defined, global or weak, "
        "STT_FUNC): in a shared object's dynamic symbols or some member of "
        "an archive. Repeat it, or separate names with commas.",
    ),
    provenance: Path | None = typer.Option(
        None,
        "--provenance",
        metavar="FILE",
        help="A build's provenance.json (in-toto SLSA v1): each artifact must "
        "be one of its subjects, with the same sha256.",
    ),
    json_out: Path | None = typer.Option(
        None, "--json", metavar="FILE", help="Write the report as JSON to FILE."
    ),
    junit_out: Path | None = typer.Option(
        None, "--junit", metavar="FILE", help="Write JUnit XML to FILE (one case per artifact)."
    ),
    every_member: bool = typer.Option(
        False, "--all", help="Show a row for every ELF file, not only failures."
    ),
) -> None:
    """Verify artifacts against a target profile. Exit 0 if all pass, 1 if any fails, 2 on usage errors.

    Each PATH is a wheel, an ar archive (.a), an ELF file (.so, executable, object) or a directory, searched
    for them recursively. Only regular files are read: a FIFO, socket or device fails at once."""
    prov = load_provenance(provenance) if provenance is not None else None
    prof = get_profile(profile or (prov.profile if prov is not None and prov.profile else DEFAULT_PROFILE))
    # Checked here, not by a click Choice, so a bad value is an rvport UsageError (exit 2).
    level = isa_level(isa)
    for out in (json_out, junit_out):
        outputs.check_file(out, make_parents=False)
    report = verify_paths(list(paths), prof, isa=level, exports=_names(export), provenance=prov)
    if json_out is not None:
        write_json(report, json_out)
    if junit_out is not None:
        write_junit(report, junit_out)
    render_table(report, ui().console, every_member=every_member)
    if not report.ok:
        raise VerifyFailed(
            f"{len(report.failed)} of {len(report.artifacts)} artifact(s) failed verification "
            f"for profile {prof.name} (isa {level})",
            hint="see the reasons above; --json FILE has every fact",
        )


def _names(values: list[str]) -> tuple[str, ...]:
    names = [n.strip() for v in values for n in v.split(",")]
    bad = [n for n in names if not n or any(c.isspace() for c in n)]
    if bad:
        raise UsageError(f"--export {bad[0]!r} is not a symbol name", hint="e.g. --export create_client")
    return tuple(dict.fromkeys(names))
