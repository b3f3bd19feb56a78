"""`rvport reproduce`: build the same plan twice from nothing and show whether the artifacts are
bit-identical.

Each build gets a fresh cache directory (sources fetched again, trees prepared again, no artifact cache) and
BuildKit's --no-cache, so nothing of the first build can stand in for the second. Images (bases, toolchains)
are inputs, not outputs, and are reused. The comparison is rvport.verify.compare: per artifact sha256, and
where two differ, the wheel members, archive members and ELF sections that do.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from rvport import manifest
from rvport.catalogue import modes
from rvport.cli import outputs, planning
from rvport.cli.console import ui
from rvport.cli.options import profile_option
from rvport.cli.sources import CA_OPT, MIRROR_OPT, OFFLINE_OPT, RECIPES_OPT
from rvport.errors import UsageError, VerifyFailed

if TYPE_CHECKING:
    from rvport.verify.compare import Comparison

REPORT_SCHEMA = 1


def reproduce(
    recipes: list[str] | None = typer.Argument(
        None, metavar="RECIPE[==VERSION]", show_default=False, hidden=True
    ),
    profile: str = profile_option(),
    mode: str = typer.Option(
        "auto",
        "--mode",
        "-m",
        metavar="MODE",
        help=modes.help_text(" The same in both builds."),
    ),
    output: Path = typer.Option(
        Path("reproduce"),
        "--output",
        "-o",
        metavar="DIR",
        help="Directory for both builds (DIR/first, DIR/second) and DIR/reproduce.json.",
    ),
    jobs: int | None = typer.Option(None, "--jobs", "-j", metavar="N", min=1, help="Parallel compile jobs."),
    builder: str | None = typer.Option(None, "--builder", metavar="NAME", help="A buildx builder."),
    no_smoke: bool = typer.Option(False, "--no-smoke", help="Skip the smoke tests and runtime checks."),
    manylinux: str = typer.Option(
        "auto",
        "--manylinux",
        metavar="auto|off|2_X",
        help="Repair wheels to a manylinux tag (auditwheel), as in build.",
    ),
    recipes_dir: list[Path] | None = RECIPES_OPT,
    mirror: Path | None = MIRROR_OPT,
    offline: bool = OFFLINE_OPT,
    ca_bundle: Path | None = CA_OPT,
) -> None:
    """Build recipes twice from nothing and compare the artifacts bit for bit (exit 1 when any differs).

    Name recipes as NAME or NAME==VERSION. Each build has a fresh cache directory (sources fetched again,
    trees prepared again, no artifact cache) and BuildKit's --no-cache; base and toolchain images are reused.
    A difference names the wheel members (contents, times, modes, order), archive members and ELF sections
    that
    differ."""
    from rvport.build.runner import BuildOptions, Runner
    from rvport.catalogue.recipes import load_catalogue
    from rvport.cli.progress import reporter
    from rvport.sources import fetch_options
    from rvport.verify.compare import compare_dirs

    if not recipes:
        raise UsageError("name the recipes to rebuild", hint="e.g. rvport reproduce msgspec")
    outputs.check_dir(output)
    req = planning.request(recipes, False, profile, mode, "reproduce", jobs, builder, manylinux)
    cat = load_catalogue(recipes_dir)
    u = ui()
    dirs = {}
    for run in ("first", "second"):
        out = output / run
        shutil.rmtree(out, ignore_errors=True)  # from nothing: its own fresh cache directory too
        out.mkdir(parents=True)
        fopts = fetch_options(cache_dir=out / "cache", mirror=mirror, offline=offline, ca=ca_bundle)
        plan = planning.resolve(req, cat, fopts)
        manifest.write(out / "plan.json", plan.to_json())
        u.console.print(
            f"{run} build of {', '.join(s.recipe.ref for s in plan.stages)} "
            f"(fresh cache {out / 'cache'}, no BuildKit cache)",
            markup=False,
        )
        rep = reporter(u.err, u.ci, u.live)
        for s in plan.stages:
            rep.add(s.name, s.mode.value)
        opts = BuildOptions(output=out, fetch=fopts, builder=builder, smoke=not no_smoke, no_cache=True)
        with rep:
            Runner(plan, opts, rep).run()
        dirs[run] = out / "artifacts"
    result = compare_dirs(dirs["first"], dirs["second"])
    path = manifest.write(output / "reproduce.json", report(profile, mode, recipes, result))
    u.console.print(_table(result))
    u.console.print(f"wrote {path}", markup=False)
    if not result.ok:
        raise VerifyFailed(
            f"{len(result.differences)} artifact(s) differ between two builds from nothing",
            hint=f"the members and sections that differ are listed above and in {path}",
        )
    u.console.print(
        f"[green]reproducible:[/] {len(result.identical)} artifact(s) bit-identical in two builds"
    )


def report(profile: str, mode: str, recipes: list[str], result: Comparison) -> dict:
    """reproduce.json (resources/schemas/reproduce.schema.json): what was built twice, and the comparison."""
    return {
        "schema": REPORT_SCHEMA,
        "kind": "rvport-reproduce",
        "profile": profile,
        "mode": mode,
        "recipes": list(recipes),
        **result.to_json(),
    }


def _table(result) -> Table:
    t = Table(title="two builds from nothing", title_justify="left")
    for col in ("artifact", "sha256", "result"):
        t.add_column(col, overflow="fold")
    for name, sha in result.identical:
        t.add_row(escape(name), sha, "[green]identical[/]")
    for d in result.differences:
        t.add_row(
            escape(d.artifact),
            f"{d.first or '-'}\n{d.second or '-'}",
            "[red]differs[/]\n" + escape("\n".join(d.details)),
        )
    return t


def register(app: typer.Typer) -> None:
    app.command("reproduce")(reproduce)
