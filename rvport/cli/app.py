"""Typer app: parse, call, render. No logic here; errors become exit codes (see rvport.errors)."""

from __future__ import annotations

import traceback
from pathlib import Path

import typer
from rich.text import Text

from rvport import __version__
from rvport.catalogue import modes
from rvport.cli import outputs, planning
from rvport.cli.console import configure, ui
from rvport.cli.options import profile_option
from rvport.cli.reproduce import register as register_reproduce
from rvport.cli.signals import install_handlers
from rvport.cli.sources import CA_OPT, CACHE_OPT, MIRROR_OPT, OFFLINE_OPT, RECIPES_OPT
from rvport.cli.sources import register as register_sources
from rvport.cli.verify import app as verify_app
from rvport.errors import ExitCode, RvportError, UsageError

# Plain (click-style) help: paragraphs are re-flowed to the terminal, and no type labels such as <bool> are
# shown.
app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Pinned recipes in, proven riscv64 artifacts out.",
)
app.add_typer(verify_app, name="verify")
register_sources(app)  # fetch, pin (rvport/cli/sources.py)
register_reproduce(app)  # reproduce (rvport/cli/reproduce.py)


def _version(value: bool) -> None:
    if value:
        print(f"rvport {__version__}")
        raise typer.Exit(0)


@app.callback()
def main_options(
    debug: bool = typer.Option(False, "--debug", help="Show full commands and tracebacks."),
    ci: bool = typer.Option(
        False, "--ci", help="Behave as in CI: plain timestamped progress, folded groups."
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    configure(force_ci=ci, debug=debug)


# ------------------------------------------------------------------------------------------------- plan
def base_image_option(help: str) -> typer.models.OptionInfo:
    return typer.Option(None, "--base-image", metavar="REF@sha256:DIGEST", help=help)


def _check_pinned(base_image: str | None) -> None:
    """--base-image names its image by digest (no tag that could move)."""
    if base_image and "@sha256:" not in base_image:
        raise UsageError(
            f"--base-image {base_image!r} is not pinned by digest", hint="name it as REF@sha256:<64 hex>"
        )


PROFILE_OPT = profile_option()
MODE_OPT = typer.Option(
    "auto",
    "--mode",
    "-m",
    metavar="MODE",
    help=modes.help_text(),
)
TAG_OPT = typer.Option("local", "--tag", "-t", metavar="TAG", help="Tag for the images and the result.")
OUT_OPT = typer.Option(
    Path("out"),
    "--output",
    "-o",
    metavar="DIR",
    help="Output directory (plan.json, result.json, artifacts/, logs/).",
)
JOBS_OPT = typer.Option(
    None,
    "--jobs",
    "-j",
    metavar="N",
    help="Parallel compile jobs, 1 or more (default: bounded by cores and memory).",
)
BUILDER_OPT = typer.Option(
    None,
    "--builder",
    metavar="NAME",
    help="A buildx builder (remote BuildKit, kubernetes, native riscv64 node).",
)
RECIPES_ARG = typer.Argument(None, metavar="RECIPE[==VERSION]", show_default=False, hidden=True)
ALL_OPT = typer.Option(False, "--all", help="Every recipe (default versions).")
MANYLINUX_OPT = typer.Option(
    "auto",
    "--manylinux",
    metavar="auto|off|2_X",
    help="Repair wheels to a manylinux tag in the stage (auditwheel): auto (the most "
    "compatible tag the wheel allows), a policy such as 2_31, or off (keep linux_riscv64).",
)
BASE_IMAGE_OPT = base_image_option("Use this image as the riscv64 base instead of bootstrapping one.")
EXPIRED_OPT = typer.Option(
    None,
    "--allow-expired-release",
    metavar="SUITE",
    help="Accept this Debian suite's Release although its Valid-Until has passed (a frozen copy you trust); "
    "repeatable; also RVPORT_ALLOW_EXPIRED_RELEASE=SUITE[,SUITE]. Shown in plan.json and result.json.",
)


def _allowed_expired(values: list[str] | None) -> tuple[str, ...]:
    """--allow-expired-release and RVPORT_ALLOW_EXPIRED_RELEASE, read here at the edge only."""
    import os

    from rvport.sources.debarchive import accepted_suites

    return accepted_suites(values or (), os.environ)


@app.command(short_help="Resolve recipes into a plan, with every pin, before anything runs.")
def plan(
    recipes: list[str] | None = RECIPES_ARG,
    all_: bool = ALL_OPT,
    profile: str = PROFILE_OPT,
    mode: str = MODE_OPT,
    tag: str = TAG_OPT,
    output: Path = OUT_OPT,
    jobs: int | None = JOBS_OPT,
    builder: str | None = BUILDER_OPT,
    manylinux: str = MANYLINUX_OPT,
    fmt: str = typer.Option(
        "json", "--format", metavar="json|bake", help="json (plan.json) or bake (docker-bake.json too)."
    ),
    base_image: str | None = base_image_option(
        "With --format bake: the riscv64 base image instead of a bootstrapped one."
    ),
    allow_expired_release: list[str] | None = EXPIRED_OPT,
    recipes_dir: list[Path] | None = RECIPES_OPT,
    cache_dir: Path | None = CACHE_OPT,
    mirror: Path | None = MIRROR_OPT,
    offline: bool = OFFLINE_OPT,
) -> None:
    """Resolve recipes into a plan (printed, and written to DIR/plan.json) before anything runs.

    Name recipes as NAME (its default version) or NAME==VERSION, or pass --all. The plan promises every pin:
    the patches, lock files and files shipped with the planned recipes are checked against their sha256 here.

    With --format bake, also DIR/docker-bake.json and its stage contexts under DIR/bake/ (this fetches the
    sources and makes sure the base image exists, as a build would)."""
    from rvport import manifest
    from rvport.cli import views

    if fmt not in ("json", "bake"):
        raise UsageError(f"unknown format {fmt!r}", hint="choose json or bake")
    outputs.check_dir(output)
    _check_pinned(base_image)
    p, fopts = planning.from_options(
        recipes,
        all_,
        profile,
        mode,
        tag,
        jobs,
        builder,
        recipes_dir,
        cache_dir,
        mirror,
        offline,
        manylinux=manylinux,
        allow_expired=(expired := _allowed_expired(allow_expired_release)),
    )
    u = ui()
    u.console.print(views.plan_table(p), crop=False)
    for w in p.warnings:
        u.console.print(Text.assemble(("note:", "yellow"), f" {w}"))
    path = manifest.write(output / "plan.json", p.to_json())
    u.console.print(f"wrote {path}", markup=False)
    if fmt == "bake":
        from rvport.build.bake import BakeOptions, export, runtime_notes

        bpath = export(
            p,
            BakeOptions(
                output=output,
                fetch=fopts,
                builder=builder,
                base_image=base_image,
                allow_expired_release=expired,
            ),
        )
        u.console.print(
            f"wrote {bpath} (contexts in {output / 'bake'}); run: docker buildx bake -f {bpath} "
            "toolchains && docker buildx bake -f {bpath}".replace("{bpath}", str(bpath)),
            markup=False,
        )
        for note in runtime_notes(p):
            u.console.print(Text.assemble(("note:", "yellow"), f" {note}"))


# ------------------------------------------------------------------------------------------------ build
@app.command(short_help="Run the plan in buildx stages; export, verify and record the artifacts.")
def build(
    recipes: list[str] | None = RECIPES_ARG,
    all_: bool = ALL_OPT,
    profile: str = PROFILE_OPT,
    mode: str = MODE_OPT,
    tag: str = TAG_OPT,
    output: Path = OUT_OPT,
    jobs: int | None = JOBS_OPT,
    builder: str | None = BUILDER_OPT,
    manylinux: str = MANYLINUX_OPT,
    base_image: str | None = BASE_IMAGE_OPT,
    allow_expired_release: list[str] | None = EXPIRED_OPT,
    no_smoke: bool = typer.Option(False, "--no-smoke", help="Skip the smoke tests and runtime checks."),
    no_cache: bool = typer.Option(
        False,
        "--no-cache",
        help="Compile every stage afresh: neither rvport's artifact cache nor BuildKit's layer cache is "
        "used (images and sources still are).",
    ),
    junit: Path | None = typer.Option(
        None, "--junit", metavar="FILE", help="Write JUnit XML here: one test case per stage."
    ),
    summary: Path | None = typer.Option(
        None,
        "--summary",
        metavar="FILE",
        help="Append a Markdown summary here (default on GitHub Actions: $GITHUB_STEP_SUMMARY).",
    ),
    cache_to: Path | None = typer.Option(
        None,
        "--cache-to",
        metavar="DIR",
        help="Export the buildx layer cache to DIR (needs a docker-container builder).",
    ),
    cache_from: Path | None = typer.Option(
        None, "--cache-from", metavar="DIR", help="Import the buildx layer cache from DIR."
    ),
    recipes_dir: list[Path] | None = RECIPES_OPT,
    cache_dir: Path | None = CACHE_OPT,
    mirror: Path | None = MIRROR_OPT,
    offline: bool = OFFLINE_OPT,
    ca_bundle: Path | None = CA_OPT,
) -> None:
    """Run the plan in Docker buildx stages; export artifacts; verify them; write DIR/result.json.

    Name recipes as NAME (its default version) or NAME==VERSION, or pass --all."""
    from rvport import manifest
    from rvport.build.runner import BuildOptions, Runner
    from rvport.cli import views
    from rvport.cli.progress import reporter

    outputs.check_dir(output)
    outputs.check_file(junit)
    outputs.check_dir(cache_to)
    _check_pinned(base_image)
    p, fopts = planning.from_options(
        recipes,
        all_,
        profile,
        mode,
        tag,
        jobs,
        builder,
        recipes_dir,
        cache_dir,
        mirror,
        offline,
        ca=ca_bundle,
        manylinux=manylinux,
        allow_expired=(expired := _allowed_expired(allow_expired_release)),
    )
    u = ui()
    if cache_to is not None or cache_from is not None:
        from rvport.build.buildx import check_cache_export

        check_cache_export(builder)
    summary = summary or _step_summary(u.ci)
    outputs.check_file(summary, append=True)
    with outputs.cannot_write(output):
        output.mkdir(parents=True, exist_ok=True)
    manifest.write(output / "plan.json", p.to_json())
    opts = BuildOptions(
        output=output,
        fetch=fopts,
        builder=builder,
        base_image=base_image,
        allow_expired_release=expired,
        smoke=not no_smoke,
        no_cache=no_cache,
        cache_to=cache_to,
        cache_from=cache_from,
    )
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
            u.console.print(f"wrote {rpath}", markup=False)
            from rvport.cli import ci

            if junit is not None:
                u.console.print(f"wrote {ci.write_junit(junit, doc)}", markup=False)
            if summary is not None:
                u.console.print(f"appended the summary to {ci.append_summary(summary, doc)}", markup=False)


# ---------------------------------------------------------------------------------------------- prepare
@app.command()
def prepare(
    recipes: list[str] | None = typer.Argument(None, metavar="[RECIPE[==VERSION]...]"),
    all_: bool = ALL_OPT,
    profile: str = PROFILE_OPT,
    mode: str = MODE_OPT,
    output: Path = OUT_OPT,
    builder: str | None = BUILDER_OPT,
    base_image: str | None = BASE_IMAGE_OPT,
    allow_expired_release: list[str] | None = EXPIRED_OPT,
    tag: str = TAG_OPT,
    no_smoke: bool = typer.Option(False, "--no-smoke", help="Skip the smoke test images."),
    tags: Path | None = typer.Option(
        None, "--tags", metavar="FILE", help="Write the images' tags here, one a line (for docker save)."
    ),
    recipes_dir: list[Path] | None = RECIPES_OPT,
    cache_dir: Path | None = CACHE_OPT,
    mirror: Path | None = MIRROR_OPT,
    offline: bool = OFFLINE_OPT,
    ca_bundle: Path | None = CA_OPT,
) -> None:
    """Make every base, toolchain, smoke and prefix image a build of these recipes needs, ahead of time.

    Nothing is fetched or compiled; a later `rvport build` with the same recipes, profile and mode reuses the
    images. Logs go to OUTPUT/logs. See docs/ci.md for keeping the images between CI runs.

    A recipe's runtime image holds its artifacts: it is listed (and put in --tags) only when the engine has it
    already, under --tag as the build names it; otherwise `rvport build` makes it."""
    from rvport.build.prepare import Preparer
    from rvport.build.stage import RunOptions
    from rvport.cli import views
    from rvport.cli.progress import reporter
    from rvport.fileio import atomic_write_text

    outputs.check_dir(output)
    outputs.check_file(tags)
    _check_pinned(base_image)
    p, fopts = planning.from_options(
        recipes,
        all_,
        profile,
        mode,
        tag,
        None,
        builder,
        recipes_dir,
        cache_dir,
        mirror,
        offline,
        ca=ca_bundle,
        allow_expired=(expired := _allowed_expired(allow_expired_release)),
    )
    u = ui()
    # the options of the build this prepares for: the same cache, CA bundle, builder, riscv64 base and smoke
    opts = RunOptions(
        output=output, fetch=fopts, builder=builder, base_image=base_image, allow_expired_release=expired
    )
    rep = reporter(u.err, u.ci, u.live)
    for s in p.stages:
        rep.add(s.name, s.mode.value)
    with rep:
        prepared = Preparer(p, opts, rep, smoke=not no_smoke).run()
    u.console.print(views.prepared_table(prepared))
    if tags is not None:
        atomic_write_text(tags, "".join(f"{i.tag}\n" for i in prepared if not i.pending))  # in the engine
        u.console.print(f"wrote {tags}")


def _step_summary(ci_name: str | None) -> Path | None:
    import os

    value = os.environ.get("GITHUB_STEP_SUMMARY")
    return Path(value) if ci_name == "github" and value else None


# ---------------------------------------------------------------------------------------------- recipes
recipes_app = typer.Typer(rich_markup_mode=None, help="List and show recipes.")
app.add_typer(recipes_app, name="recipes")


@recipes_app.command("list")
def recipes_list(recipes_dir: list[Path] | None = RECIPES_OPT) -> None:
    """Every recipe with its versions (default in bold)."""
    from rvport.catalogue.recipes import load_catalogue
    from rvport.cli import views

    ui().console.print(views.recipes_table(load_catalogue(recipes_dir)), crop=False)


@recipes_app.command("show")
def recipes_show(
    name: str = typer.Argument(..., metavar="RECIPE[==VERSION]", hidden=True),
    recipes_dir: list[Path] | None = RECIPES_OPT,
) -> None:
    """Everything a recipe pins: sources, patches, lock files, files, toolchain, env, commands."""
    from rvport.catalogue.recipes import load_catalogue
    from rvport.cli import views

    ui().console.print(views.recipe_detail(load_catalogue(recipes_dir).resolve(name)), crop=False)


# ----------------------------------------------------------------------------------------------- doctor
@app.command(short_help="What this host can do for a riscv64 build, and what to fix.")
def doctor(builder: str | None = BUILDER_OPT) -> None:
    """What this host can do for a riscv64 build, and what to fix. Exit 0 when a build can run, 6 if not."""
    from rvport.build.doctor import can_build, run_checks
    from rvport.cli import views
    from rvport.errors import HostNotReady
    from rvport.host import gather

    checks = run_checks(gather(), builder=builder)
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
        rc = app(standalone_mode=False)
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

        u.err.print(f"[bold red]error:[/] {escape(e.render())}", markup=True, highlight=False)
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
            ui().err.print(shown.getvalue().rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
            raise SystemExit(int(ExitCode.USAGE)) from None
        u = ui()
        u.err.print(f"internal error: {type(e).__name__}: {e}", markup=False, highlight=False)
        if u.debug:
            u.err.print(traceback.format_exc(), markup=False, highlight=False)
        else:
            u.err.print("run again with --debug for the traceback, and report it", markup=False)
        raise SystemExit(int(ExitCode.INTERNAL)) from None


def _usage_errors() -> tuple[type[Exception], ...]:
    """The base class of typer's command-line errors (bad option, missing argument, bad value), found from
    typer's own public BadParameter: typer vendors its parser (>= 0.25) or re-exports click's (older)."""
    return tuple(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException") or (
        typer.BadParameter,
    )
