"""`rvport verify ...`: parse, call verify_paths, render. Registered in rvport/cli/app.py (its group's help
is there)."""

from __future__ import annotations

from rvport.catalogue.profiles import default_profile, get_profile
from rvport.cli import settings
from rvport.cli.console import ui
from rvport.cli.options import VerifyArtifactsArgs
from rvport.cli.outputs import is_stdout
from rvport.errors import UsageError, VerifyFailed
from rvport.verify import isa_level, verify_paths
from rvport.verify.provenance import load as load_provenance
from rvport.verify.report import render_table, write_json, write_junit


@settings.command(settings.VERIFY_ARTIFACTS)
def artifacts(o: VerifyArtifactsArgs) -> None:
    """Verify artifacts against a target profile. Exit 0 if all pass, 1 if any fails, 2 on usage errors.

    Each PATH is a wheel, an ar archive (.a), an ELF file (.so, executable, object) or a directory, searched
    for them recursively. Only regular files are read: a FIFO, socket or device fails at once."""
    to_stdout = [flag for flag, path in (("--json", o.json_out), ("--junit", o.junit_out)) if is_stdout(path)]
    if len(to_stdout) > 1:
        raise UsageError("--json - and --junit - both ask for standard output", hint="write one to a file")
    prov = load_provenance(o.provenance) if o.provenance is not None else None
    named = o.profile or (prov.profile if prov is not None else None)
    prof = get_profile(named) if named else default_profile()
    # Checked here, not by a click Choice, so a bad value is an rvport UsageError (exit 2).
    level = isa_level(o.isa)
    report = verify_paths(
        list(o.paths), prof, isa=level, exports=_names(o.export), provenance=prov, vlen_exact=o.vlen_exact
    )
    if o.json_out is not None:
        write_json(report, o.json_out)
    if o.junit_out is not None:
        write_junit(report, o.junit_out)
    # with a report on standard output, the table goes to standard error
    render_table(report, ui().err if to_stdout else ui().console, every_member=o.every_member)
    if not report.ok:
        raise VerifyFailed(
            f"{len(report.failed)} of {len(report.artifacts)} artifact(s) failed verification "
            f"for profile {prof.name} (isa {level})",
            hint="see the reasons above; --json FILE has every fact",
        )


def _names(values: tuple[str, ...]) -> tuple[str, ...]:
    names = [n.strip() for v in values for n in v.split(",")]
    bad = [n for n in names if not n or any(c.isspace() for c in n)]
    if bad:
        raise UsageError(f"--export {bad[0]!r} is not a symbol name", hint="e.g. --export create_client")
    return tuple(dict.fromkeys(names))
