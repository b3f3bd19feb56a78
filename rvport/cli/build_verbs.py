"""`rvport build` (the plan run in buildx stages; its result.json shown, with the JUnit XML and Markdown
summary made from it) and `rvport prepare` (every image such a build needs, made ahead of time)."""

from __future__ import annotations

from pathlib import Path

from rvport import manifest, outdir
from rvport.cli import ci, handoff, outputs, planning, settings, views
from rvport.cli.console import ui
from rvport.cli.options import BuildArgs, PrepareArgs
from rvport.cli.progress_view import reporter
from rvport.fileio import read_json
from rvport.safetext import one_line


@settings.command(
    settings.BUILD, short_help="Run the plan in buildx stages; export, verify and record the artifacts."
)
def build(o: BuildArgs) -> None:
    """Run the plan in Docker buildx stages; export artifacts; verify them; write DIR/result.json.

    Name recipes as NAME (its default version) or NAME==VERSION, or pass --all. Several profiles (a comma
    list, or --profile repeated) make a build matrix: each profile into DIR/PROFILE/, and DIR/matrix.json."""
    from rvport.engine.runner import Runner

    if len(o.profiles) > 1:
        from rvport.cli.matrix import build_matrix

        return build_matrix(o)
    u = ui()
    output, builder, junit = o.output, o.builder, o.junit
    summary = o.summary or ci.step_summary(u.ci)
    outputs.one_stdout(junit=junit, summary=summary)  # before any work: one report at most on stdout
    p, fopts = planning.from_options(o, profile=o.profiles[0])
    planning.say_accepted(p)
    if o.cache_to is not None or o.cache_from is not None:
        from rvport.engine.buildx import check_cache_export

        check_cache_export(builder)
    outputs.check_file(summary, append=True)
    compiler_cache = planning.compiler_cache(o)
    files = tuple(f for f in (junit, summary) if not outputs.is_stdout(f))
    outdir.claim(output, outdir.Kind.BUILD, also=files)  # --junit out/junit.xml is rvport's too
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
    # with a report on standard output (`--junit -`, `--summary -`), what people read goes to stderr
    say = u.err if outputs.one_stdout(junit=junit, summary=summary) else u.console
    doc = read_json(rpath, what="result")
    say.print(views.result_table(doc), crop=False)
    say.print(f"wrote {one_line(rpath)}", markup=False, soft_wrap=True)
    if junit is not None and (written := ci.write_junit(junit, doc)) is not None:
        say.print(f"wrote {one_line(written)}", markup=False, soft_wrap=True)
    if summary is not None and (appended := ci.append_summary(summary, doc)) is not None:
        say.print(f"appended the summary to {one_line(appended)}", markup=False)


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
    planning.say_accepted(p)
    # the options of the build this prepares for: the same cache, CA bundle, builder, riscv64 base and smoke
    opts = handoff.run_options(o, fopts)
    rep = reporter(u.err, u.ci, u.live)
    for s in p.stages:
        rep.add(s.name, s.mode.value)
    with rep:
        # its logs/ (and --tags there)
        outdir.claim(o.output, outdir.Kind.BUILD, also=() if outputs.is_stdout(tags) else (tags,))
        prepared = Preparer(p, opts, rep, smoke=not o.no_smoke).run()
    # with --tags -, the tags alone go to standard output and the table to stderr
    say = u.err if outputs.is_stdout(tags) else u.console
    say.print(views.prepared_table(prepared))
    if tags is not None:
        text = "".join(f"{i.tag}\n" for i in prepared if not i.pending)  # the images in the engine
        if outputs.write_text(tags, text) is not None:
            say.print(f"wrote {one_line(tags)}", markup=False, soft_wrap=True)
