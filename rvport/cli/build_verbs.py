"""`rvport build` (the plan run in buildx stages; its result.json shown, with the JUnit XML and Markdown
summary made from it) and `rvport prepare` (every image such a build needs, made ahead of time)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from rvport import manifest, outdir
from rvport.cli import ci, handoff, outputs, planning, settings, views
from rvport.cli.console import ui
from rvport.cli.options import BuildArgs, PrepareArgs
from rvport.cli.progress_view import reporter
from rvport.fileio import atomic_write_text, read_json
from rvport.plan.planner import REPAIR_NOTE
from rvport.safetext import one_line

if TYPE_CHECKING:
    from rvport.plan.planner import Plan


def _say_accepted(p: Plan) -> None:
    """An accepted expired Release, and a --manylinux that a recipe's own `manylinux:` overrides, are said at
    the terminal too (plan.json and result.json record them)."""
    for w in p.warnings:
        if "--allow-expired-release" in w or REPAIR_NOTE in w:
            ui().err.print(Text.assemble(("note:", "yellow"), f" {w}"))


@settings.command(
    settings.BUILD, short_help="Run the plan in buildx stages; export, verify and record the artifacts."
)
def build(o: BuildArgs) -> None:
    """Run the plan in Docker buildx stages; export artifacts; verify them; write DIR/result.json.

    Name recipes as NAME (its default version) or NAME==VERSION, or pass --all."""
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
            Runner(p, opts, rep).run()
    finally:
        show_result(output, junit=junit, summary=summary)


def show_result(output: Path, *, junit: Path | None, summary: Path | None) -> None:
    """A build's result.json, when the run wrote one (it does on failure too): its table, and the JUnit XML
    and the Markdown summary made from it."""
    rpath = output / "result.json"
    if not rpath.is_file():
        return
    u = ui()
    doc = read_json(rpath, what="result")
    u.console.print(views.result_table(doc), crop=False)
    u.console.print(f"wrote {one_line(rpath)}", markup=False)
    if junit is not None:
        u.console.print(f"wrote {one_line(ci.write_junit(junit, doc))}", markup=False)
    if summary is not None:
        u.console.print(f"appended the summary to {one_line(ci.append_summary(summary, doc))}", markup=False)


@settings.command(settings.PREPARE)
def prepare(o: PrepareArgs) -> None:
    """Make every base, toolchain, smoke and prefix image a build of these recipes needs, ahead of time.

    Nothing is fetched or compiled; a later `rvport build` with the same recipes, profile and mode reuses the
    images. Logs go to OUTPUT/logs. See docs/ci.md for keeping the images between CI runs.

    A recipe's runtime image holds its artifacts: it is listed (and put in --tags) only when the engine has it
    already, under --tag as the build names it; otherwise `rvport build` makes it."""
    from rvport.engine.prepare import Preparer

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
    value = os.environ.get("GITHUB_STEP_SUMMARY")
    return Path(value) if ci_name == "github" and value else None
