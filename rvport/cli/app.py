"""Typer app: parse, call, render. No logic here; errors become exit codes (see rvport.errors)."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import typer
from rich.text import Text

from rvport import outdir
from rvport.cli import handoff, outputs, planning, settings
from rvport.cli.argv import arrange
from rvport.cli.closure_verbs import register as register_closure
from rvport.cli.console import configure, ui
from rvport.cli.options import (
    BuildArgs,
    DoctorArgs,
    GlobalArgs,
    PlanArgs,
    PrepareArgs,
    RecipesListArgs,
    RecipesShowArgs,
)
from rvport.cli.reproduce import register as register_reproduce
from rvport.cli.signals import install_handlers
from rvport.cli.source_verbs import register as register_sources
from rvport.cli.verify_verbs import app as verify_app
from rvport.errors import ExitCode, RvportError
from rvport.safetext import one_line

# Plain (click-style) help: paragraphs are re-flowed to the terminal, and no type labels such as <bool> are
# shown.
app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Pinned recipes in, proven riscv64 artifacts out.",
)
app.add_typer(verify_app, name="verify")
register_sources(app)  # fetch, pin (rvport/cli/source_verbs.py)
register_reproduce(app)  # reproduce (rvport/cli/reproduce.py)
register_closure(app)  # lock (rvport/cli/closure_verbs.py)


@app.callback()
@settings.command(settings.GLOBAL)
def main_options(o: GlobalArgs) -> None:
    from rvport import resources
    from rvport.verify import pool

    configure(force_ci=o.ci, debug=o.debug)
    # the environment's settings for the whole run (rvport/cli/settings.py), handed to the layers below
    resources.configure(
        bases=o.bases_dir, toolchains=o.toolchains_dir, dockerfiles=o.dockerfiles_dir, locks=o.locks_dir
    )
    pool.configure(o.verify_threads)


# ------------------------------------------------------------------------------------------------- plan
@app.command(short_help="Resolve recipes into a plan, with every pin, before anything runs.")
@settings.command(settings.PLAN)
def plan(o: PlanArgs) -> None:
    """Resolve recipes into a plan (printed, and written to DIR/plan.json) before anything runs.

    Name recipes as NAME (its default version) or NAME==VERSION, or pass --all. The plan promises every pin:
    the patches, lock files and files shipped with the planned recipes are checked against their sha256 here.

    With --format bake, also DIR/docker-bake.json and its stage contexts under DIR/bake/ (this fetches the
    sources and makes sure the base image exists, as a build would)."""
    from rvport import manifest
    from rvport.cli import views

    p, fopts = planning.from_options(o)
    u = ui()
    u.console.print(views.plan_table(p, u.console.width), crop=False)
    for c in p.closures:
        lock = c.lock
        counts = ", ".join(f"{k} {v}" for k, v in lock.counts().items())
        u.console.print(
            f"closure lock of {c.stage} ({lock.target.abi}): {len(lock.entries)} distributions ({counts}), "
            f"{lock.digest}",
            markup=False,
            highlight=False,
        )
    for w in p.warnings:
        u.console.print(Text.assemble(("note:", "yellow"), f" {w}"))
    output = outdir.claim(o.output, outdir.Kind.BUILD)
    path = manifest.write(output / "plan.json", p.to_json())
    u.console.print(f"wrote {one_line(path)}", markup=False)
    if o.format == "bake":
        from rvport.engine.bake import export, runtime_notes

        bpath = export(p, handoff.bake_options(o, fopts))
        u.console.print(
            f"wrote {one_line(bpath)} (contexts in {one_line(output / 'bake')}); run: docker buildx bake -f "
            "{bpath} toolchains && docker buildx bake -f {bpath}".replace("{bpath}", one_line(bpath)),
            markup=False,
        )
        for note in runtime_notes(p):
            u.console.print(Text.assemble(("note:", "yellow"), f" {note}"))


def _say_accepted(p) -> None:  # type: ignore[no-untyped-def]
    """An accepted expired Release, and a --manylinux that a recipe's own `manylinux:` overrides, are said at
    the terminal too (plan.json and result.json record them)."""
    from rvport.plan.planner import REPAIR_NOTE

    for w in p.warnings:
        if "--allow-expired-release" in w or REPAIR_NOTE in w:
            ui().err.print(Text.assemble(("note:", "yellow"), f" {w}"))


# ------------------------------------------------------------------------------------------------ build
@app.command(short_help="Run the plan in buildx stages; export, verify and record the artifacts.")
@settings.command(settings.BUILD)
def build(o: BuildArgs) -> None:
    """Run the plan in Docker buildx stages; export artifacts; verify them; write DIR/result.json.

    Name recipes as NAME (its default version) or NAME==VERSION, or pass --all."""
    from rvport import manifest
    from rvport.cli import views
    from rvport.cli.progress_view import reporter
    from rvport.engine.runner import Runner

    p, fopts = planning.from_options(o)
    output, builder, junit = o.output, o.builder, o.junit
    u = ui()
    _say_accepted(p)
    if o.cache_to is not None or o.cache_from is not None:
        from rvport.engine.buildx import check_cache_export

        check_cache_export(builder)
    summary = o.summary or _step_summary(u.ci)
    outputs.check_file(summary, append=True)
    compiler_cache = planning.compiler_cache(o)
    outdir.claim(output, outdir.Kind.BUILD, also=(junit, summary))  # --junit out/junit.xml is rvport's too
    manifest.write(output / "plan.json", p.to_json())
    opts = handoff.build_options(o, fopts, compiler_cache=compiler_cache)
    rep = reporter(u.err, u.ci, u.live)
    for s in p.stages:
        rep.add(s.name, s.mode.value)
    try:
        with rep:
            doc = Runner(p, opts, rep).run()
    finally:
        rpath = output / "result.json"
        if rpath.is_file():
            from rvport.fileio import read_json

            doc = read_json(rpath, what="result")
            u.console.print(views.result_table(doc), crop=False)
            u.console.print(f"wrote {one_line(rpath)}", markup=False)
            from rvport.cli import ci

            if junit is not None:
                u.console.print(f"wrote {one_line(ci.write_junit(junit, doc))}", markup=False)
            if summary is not None:
                u.console.print(
                    f"appended the summary to {one_line(ci.append_summary(summary, doc))}", markup=False
                )


# ---------------------------------------------------------------------------------------------- prepare
@app.command()
@settings.command(settings.PREPARE)
def prepare(o: PrepareArgs) -> None:
    """Make every base, toolchain, smoke and prefix image a build of these recipes needs, ahead of time.

    Nothing is fetched or compiled; a later `rvport build` with the same recipes, profile and mode reuses the
    images. Logs go to OUTPUT/logs. See docs/ci.md for keeping the images between CI runs.

    A recipe's runtime image holds its artifacts: it is listed (and put in --tags) only when the engine has it
    already, under --tag as the build names it; otherwise `rvport build` makes it."""
    from rvport.cli import views
    from rvport.cli.progress_view import reporter
    from rvport.engine.prepare import Preparer
    from rvport.fileio import atomic_write_text

    p, fopts = planning.from_options(o)
    tags = o.tags
    u = ui()
    _say_accepted(p)
    # the options of the build this prepares for: the same cache, CA bundle, builder, riscv64 base and smoke
    opts = handoff.run_options(o, fopts)
    rep = reporter(u.err, u.ci, u.live)
    for s in p.stages:
        rep.add(s.name, s.mode.value)
    with rep:
        outdir.claim(o.output, outdir.Kind.BUILD, also=(tags,))  # its logs/ (and --tags there)
        prepared = Preparer(p, opts, rep, smoke=not o.no_smoke).run()
    u.console.print(views.prepared_table(prepared))
    if tags is not None:
        atomic_write_text(tags, "".join(f"{i.tag}\n" for i in prepared if not i.pending))  # in the engine
        u.console.print(f"wrote {one_line(tags)}")


def _step_summary(ci_name: str | None) -> Path | None:
    import os

    value = os.environ.get("GITHUB_STEP_SUMMARY")
    return Path(value) if ci_name == "github" and value else None


# ---------------------------------------------------------------------------------------------- recipes
recipes_app = typer.Typer(rich_markup_mode=None, help="List and show recipes.")
app.add_typer(recipes_app, name="recipes")


@recipes_app.command("list")
@settings.command(settings.RECIPES_LIST)
def recipes_list(o: RecipesListArgs) -> None:
    """Every recipe with its versions (default in bold), what it depends on and its description; with
    directories of your own (--recipes, RVPORT_RECIPE_PATH), a column says where each recipe comes from
    (built-in or which directory). Without them the title says that every recipe is built-in."""
    from rvport.catalogue.recipes import load_catalogue
    from rvport.cli import views

    ui().console.print(views.recipes_table(load_catalogue(list(o.recipes_dir))), crop=False)


@recipes_app.command("show")
@settings.command(settings.RECIPES_SHOW)
def recipes_show(o: RecipesShowArgs) -> None:
    """Everything a recipe pins: sources, patches, lock files, files, toolchain, env, commands."""
    from rvport.catalogue.recipes import load_catalogue
    from rvport.cli import views

    ui().console.print(views.recipe_detail(load_catalogue(list(o.recipes_dir)).resolve(o.recipe)), crop=False)


# ----------------------------------------------------------------------------------------------- doctor
@app.command(short_help="What this host can do for a riscv64 build, and what to fix.")
@settings.command(settings.DOCTOR)
def doctor(o: DoctorArgs) -> None:
    """What this host can do for a riscv64 build, and what to fix. Exit 0 when a build can run, 6 if not."""
    from rvport.cli import views
    from rvport.engine.doctor import can_build, run_checks
    from rvport.errors import HostNotReady
    from rvport.host import gather

    checks = run_checks(gather(), builder=o.builder)
    ui().console.print(views.checks_table(checks), crop=False)
    if not can_build(checks):
        raise HostNotReady(
            "this host cannot run a riscv64 build yet",
            hint="apply the fixes above, or run scripts/setup-host as root",
        )
    ui().console.print("[green]ready:[/] a riscv64 build can run here")


def main() -> None:
    """Run the app and turn errors into exit codes, never tracebacks (the `rvport` script reaches it through
    rvport.cli.entry, which handles an interrupt while this module is imported)."""
    install_handlers()
    try:
        rc = app(args=arrange(sys.argv[1:], settings.global_switches()), standalone_mode=False)
        # click 8.2+ (vendored by typer >= 0.16) turns Ctrl-C into Abort and, without standalone mode,
        # *returns* its exit code (130) instead of raising: that must still be exit 8, not 0
        if rc == 130:
            raise KeyboardInterrupt
        if isinstance(rc, int) and rc != 0:
            raise SystemExit(rc)
    except RvportError as e:
        u = ui()
        from rich.markup import (
            escape,  # messages quote build output, e.g. "executor failed running [/bin/sh -c ...]"
        )

        u.err.print(
            f"[bold red]error:[/] {escape(_given_on_one_line(e.render()))}", markup=True, highlight=False
        )
        if u.debug:
            u.err.print(traceback.format_exc(), markup=False, highlight=False)
        raise SystemExit(int(e.exit_code)) from None
    except KeyboardInterrupt:
        ui().err.print("[yellow]interrupted[/]")
        raise SystemExit(int(ExitCode.INTERRUPTED)) from None
    except typer.Exit as e:
        raise SystemExit(e.exit_code) from None
    except typer.Abort:
        ui().err.print("[yellow]interrupted[/]")
        raise SystemExit(int(ExitCode.INTERRUPTED)) from None
    except Exception as e:  # command-line usage errors (typer's exceptions) and bugs
        if isinstance(e, _usage_errors()):
            import io

            shown = io.StringIO()  # typer's message quotes the command line: printed escaped, as all else
            e.show(file=shown)  # type: ignore[attr-defined]
            ui().err.print(
                _given_on_one_line(shown.getvalue().rstrip("\n")),
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
            raise SystemExit(int(ExitCode.USAGE)) from None
        u = ui()
        u.err.print(
            f"internal error: {type(e).__name__}: {_given_on_one_line(str(e))}", markup=False, highlight=False
        )
        if u.debug:
            u.err.print(traceback.format_exc(), markup=False, highlight=False)
        else:
            u.err.print("run again with --debug for the traceback, and report it", markup=False)
        raise SystemExit(int(ExitCode.INTERNAL)) from None


def _given_on_one_line(text: str) -> str:
    """text with every value given on the command line or in an RVPORT_* variable that holds a newline (a
    path such as `p\nerror: FORGED`) shown on one line, wherever a message quotes it: a value given cannot
    print a line of its own. The message's own lines are kept."""
    import os
    import sys

    given = [*sys.argv[1:], *(v for k, v in os.environ.items() if k.startswith("RVPORT_"))]
    for value in sorted({v for v in given if "\n" in v}, key=len, reverse=True):
        text = text.replace(value, one_line(value))
    return text


def _usage_errors() -> tuple[type[Exception], ...]:
    """The base class of typer's command-line errors (bad option, missing argument, bad value), found from
    typer's own public BadParameter: typer vendors its parser (>= 0.25) or re-exports click's (older)."""
    return tuple(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException") or (
        typer.BadParameter,
    )
