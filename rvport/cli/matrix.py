"""`rvport build` with several profiles: the VLEN matrix. Every profile's plan is made (and checked) first;
then each profile is built and tested into OUTPUT/PROFILE/ as a build of it alone is (its plan.json,
result.json, provenance, logs and artifacts), one after another (or --matrix-jobs N at a time, side by side on
threads of their own, each profile's lines labelled), a failed one not stopping the next; then
OUTPUT/matrix.json (rvport/engine/matrix.py), its table, and the JUnit XML and Markdown summary of the whole
matrix. The exit code is the worst profile's; an interrupt stops the matrix, the profiles not reached are
`not run`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rvport import manifest, outdir, proc
from rvport.cli import ci, handoff, outputs, planning, views
from rvport.cli.console import ui
from rvport.cli.options import BuildArgs
from rvport.cli.progress_view import reporter
from rvport.engine import matrix as record
from rvport.errors import ExitCode, MatrixFailed, RvportError
from rvport.fileio import read_json
from rvport.plan.matrix import MATRIX_FILE
from rvport.safetext import one_line

if TYPE_CHECKING:
    from rvport.engine.compcache import CompilerCache
    from rvport.plan.matrix import Cell
    from rvport.plan.planner import Plan
    from rvport.sources.fetch import FetchOptions


def build_matrix(o: BuildArgs) -> None:
    from rvport.engine.runner import Runner

    u = ui()
    summary = o.summary or ci.step_summary(u.ci)
    outputs.one_stdout(junit=o.junit, summary=summary)  # before any work: one report at most on stdout
    planned, fopts = planning.matrix_from_options(o)
    for _, p in planned:
        planning.say_accepted(p)
    if o.cache_to is not None or o.cache_from is not None:
        from rvport.engine.buildx import check_cache_export

        check_cache_export(o.builder)
    outputs.check_file(summary, append=True)
    compiler_cache = planning.compiler_cache(o)
    for cell, _ in planned:  # every profile's directory may be written before the first build starts
        outdir.check(cell.output, outdir.Kind.BUILD)
    mine = (o.output / MATRIX_FILE, *(cell.output for cell, _ in planned))
    files = tuple(f for f in (o.junit, summary) if not outputs.is_stdout(f))
    outdir.claim(o.output, outdir.Kind.MATRIX, also=(*mine, *files))
    started = time.time()
    done: dict[str, record.Ended] = {}  # each profile's end, as it comes
    jobs = min(o.matrix_jobs, len(planned))
    try:
        if jobs <= 1:
            for cell, p in planned:
                done[cell.profile.name] = _one(cell, p, o, fopts, compiler_cache, Runner)
        else:
            side_by_side(planned, jobs, done, lambda cell, p: _one(cell, p, o, fopts, compiler_cache, Runner))
    except KeyboardInterrupt:
        cut = next((cell for cell, _ in planned if cell.profile.name not in done), None)
        if cut is not None:
            done[cut.profile.name] = _ended(cut, ExitCode.INTERRUPTED, "interrupted")
        raise
    finally:
        ended = [done.get(cell.profile.name) or _ended(cell, None, None) for cell, _ in planned]
        with proc.uninterruptible():
            doc = record.record(
                ended,
                tag=o.tag,
                started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                duration_s=time.time() - started,
            )
            manifest.write(o.output / MATRIX_FILE, doc)
        show_matrix(o.output, doc, {e.profile: e.result for e in ended}, junit=o.junit, summary=summary)
    if doc["exit_code"] != ExitCode.OK:
        failed = [f"{r['profile']} (exit {r['exit_code']})" for r in doc["rows"] if r["exit_code"]]
        raise MatrixFailed(
            f"the build matrix failed: {', '.join(failed)}",
            exit_code=ExitCode(doc["exit_code"]),
            hint=f"{one_line(o.output / MATRIX_FILE)} has a row per profile; each profile's result.json and "
            f"logs are in {one_line(o.output)}/PROFILE/",
        )


def side_by_side(
    planned: Sequence[tuple[Cell, Plan]],
    jobs: int,
    done: dict[str, record.Ended],
    one: Callable[[Cell, Plan], record.Ended],
) -> None:
    """The profiles built `jobs` at a time (engine/parallel.py: an interrupt stops every running build's
    programs and waits for each to clean up); each profile's end goes into `done` as it comes."""
    from rvport.engine.parallel import SideBySide

    ui().err.print(f"--- {len(planned)} profiles, {jobs} side by side", markup=False, highlight=False)

    def task(cell: Cell, p: Plan) -> record.Ended:
        got = one(cell, p)
        done[cell.profile.name] = got
        return got

    with SideBySide[str, record.Ended](jobs) as pool:
        for cell, p in planned:
            pool.submit(cell.profile.name, lambda cell=cell, p=p: task(cell, p))
        for name, got in pool.results().items():
            if isinstance(got, RvportError):  # _one keeps its errors: one here is a bug's
                raise got
            done[name] = got


def _one(
    cell: Cell, p: Plan, o: BuildArgs, fopts: FetchOptions, compiler_cache: CompilerCache, runner: type
) -> record.Ended:
    """One profile's build, as `rvport build --profile P --output OUTPUT/P` runs it; its error is said and
    kept, not raised (an interrupt is). A result.json of an earlier run there is removed first: the row is
    made from this run's alone. Built side by side with others (--matrix-jobs), its lines are labelled."""
    u = ui()
    u.err.print(f"--- profile {cell.profile.name}: {one_line(cell.output)}", markup=False, highlight=False)
    outdir.claim(cell.output, outdir.Kind.BUILD)
    with contextlib.suppress(FileNotFoundError):
        (cell.output / "result.json").unlink()
    manifest.write(cell.output / "plan.json", p.to_json())
    opts = handoff.build_options(
        o, fopts, output=cell.output, compiler_cache=compiler_cache, other_vlen=cell.other_vlen
    )
    rep = reporter(u.err, u.ci, u.live, label=cell.profile.name if o.matrix_jobs > 1 else None)
    for s in p.stages:
        rep.add(s.name, s.mode.value)
    code, error = ExitCode.OK, None
    try:
        with rep:
            runner(p, opts, rep).run()
    except RvportError as e:
        code, error = e.exit_code, e.render()
        from rich.markup import escape

        u.err.print(
            f"[bold red]error ({cell.profile.name}):[/] {escape(error)}", markup=True, highlight=False
        )
    return _ended(cell, code, error)


def _ended(cell: Cell, code: ExitCode | None, error: str | None) -> record.Ended:
    rpath = cell.output / "result.json"
    doc = read_json(rpath, what="result") if code is not None and rpath.is_file() else None
    return record.Ended(
        profile=cell.profile.name, output=cell.profile.name, code=code, error=error, result=doc
    )


def show_matrix(
    output: Path, doc: dict, results: dict[str, dict | None], *, junit: Path | None, summary: Path | None
) -> None:
    """Each profile's result table, the matrix's, and the JUnit XML and Markdown summary of the matrix."""
    u = ui()
    # with a report on standard output (`--junit -`, `--summary -`), what people read goes to stderr
    say = u.err if outputs.one_stdout(junit=junit, summary=summary) else u.console
    for r in doc["rows"]:
        result = results.get(r["profile"])
        if result is not None:
            say.print(views.result_table(result), crop=False)
    say.print(views.matrix_table(doc), crop=False)
    say.print(f"wrote {one_line(output / MATRIX_FILE)}", markup=False, soft_wrap=True)
    if junit is not None and (written := ci.write_matrix_junit(junit, doc, results)) is not None:
        say.print(f"wrote {one_line(written)}", markup=False, soft_wrap=True)
    if summary is not None and (appended := ci.append_matrix_summary(summary, doc, results)) is not None:
        say.print(f"appended the summary to {one_line(appended)}", markup=False)
