"""`rvport reproduce`: build the same plan twice from nothing and show whether the artifacts are
bit-identical.

Each build gets a fresh cache directory (sources fetched again, trees prepared again, no artifact cache) and
runs its build steps again past BuildKit's layer cache (`--no-cache`), so nothing of the first build can stand
in for the second. Images (bases, toolchains) are inputs, not outputs, and are reused. The comparison is
rvport.verify.compare: per artifact sha256, and where two differ, the wheel members, archive members and ELF
sections that do.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from rvport import manifest, outdir
from rvport.cli import handoff, planning, settings
from rvport.cli.console import ui
from rvport.cli.options import ReproduceArgs
from rvport.errors import UsageError, VerifyFailed
from rvport.safetext import one_line

if TYPE_CHECKING:
    from rvport.verify.compare import Comparison

REPORT_SCHEMA = 1


@settings.command(settings.REPRODUCE)
def reproduce(o: ReproduceArgs) -> None:
    """Build recipes twice from nothing and compare the artifacts bit for bit (exit 1 when any differs).

    Name recipes as NAME or NAME==VERSION. Each build has a fresh cache directory (sources fetched again,
    trees prepared again, no artifact cache) and runs its build steps again past BuildKit's layer cache; base
    and toolchain images are reused.
    A difference names the wheel members (contents, times, modes, order), archive members and ELF sections
    that differ."""
    from rvport.catalogue.recipes import load_catalogue
    from rvport.cli.progress_view import reporter
    from rvport.engine.runner import Runner
    from rvport.verify.compare import compare_dirs

    if not o.recipes:
        raise UsageError("name the recipes to rebuild", hint="e.g. rvport reproduce msgspec")
    output = outdir.claim(o.output, outdir.Kind.REPRODUCE)
    req = handoff.request(o)
    cat = load_catalogue(list(o.recipes_dir))
    u = ui()
    dirs = {}
    # the first build never has a compiler cache; the second has --compiler-cache DIR's when given, so the
    # comparison proves a warm cache changes no byte (by default both build from scratch)
    from rvport.engine.compcache import CacheUse

    warm = planning.compiler_cache(o, default="off")
    caches = {"first": dataclasses.replace(warm, use=CacheUse.OFF, directory=None), "second": warm}
    used: dict[str, dict] = {}
    for run in ("first", "second"):
        out = output / run
        outdir.remove(out, outdir.Kind.BUILD)  # from nothing: its own fresh cache directory too
        outdir.claim(out, outdir.Kind.BUILD)
        fopts = handoff.fetch_options(o, cache_dir=out / "cache")
        plan = planning.resolve(req, cat, fopts)
        manifest.write(out / "plan.json", plan.to_json())
        cache = caches[run]
        ccache = f"compiler cache {cache.directory}" if cache.directory else "no compiler cache"
        u.console.print(
            f"{run} build of {', '.join(s.recipe.ref for s in plan.stages)} "
            f"(fresh cache {one_line(out / 'cache')}, no BuildKit cache, {one_line(ccache)})",
            markup=False,
        )
        rep = reporter(u.err, u.ci, u.live)
        for s in plan.stages:
            rep.add(s.name, s.mode.value)
        with rep:
            doc = Runner(plan, handoff.build_options(o, fopts, output=out, compiler_cache=cache), rep).run()
        dirs[run] = out / "artifacts"
        used[run] = compiler_cache_used(cache, doc)
    result = compare_dirs(dirs["first"], dirs["second"])
    doc = report(o.profile, o.mode, list(o.recipes), result, compiler_cache=used)
    path = manifest.write(output / "reproduce.json", doc)
    u.console.print(_cache_line(used), markup=False)
    u.console.print(_table(result))
    u.console.print(f"wrote {one_line(path)}", markup=False)
    if not result.ok:
        raise VerifyFailed(
            f"{len(result.differences)} artifact(s) differ between two builds from nothing",
            hint=f"the members and sections that differ are listed above and in {path}",
        )
    u.console.print(
        f"[green]reproducible:[/] {len(result.identical)} artifact(s) bit-identical in two builds"
    )


def report(
    profile: str, mode: str, recipes: list[str], result: Comparison, *, compiler_cache: dict | None = None
) -> dict:
    """reproduce.json (resources/schemas/reproduce.schema.json): what was built twice, whether each build
    used a compiler cache, and the comparison."""
    return {
        "schema": REPORT_SCHEMA,
        "kind": "rvport-reproduce",
        "profile": profile,
        "mode": mode,
        "recipes": list(recipes),
        "compiler_cache": compiler_cache or {},
        **result.to_json(),
    }


def compiler_cache_used(cache, doc: dict) -> dict:
    """What one build's compiler cache was, for reproduce.json: its use, directory, and the hits and misses
    of its stages together (result.json's stages[].compiler_cache)."""
    stages = [s.get("compiler_cache") or {} for s in doc.get("stages", [])]
    total = {k: sum(int(s.get(k) or 0) for s in stages) for k in ("hits", "misses", "uncacheable")}
    return {
        "use": cache.use.value,
        "directory": str(cache.directory) if cache.directory else None,
        **total,
    }


def _cache_line(used: dict[str, dict]) -> str:
    """The line that says whether each build used a compiler cache."""
    parts = []
    for run, u in used.items():
        if u["use"] == "off":
            parts.append(f"{run}: no compiler cache")
        else:
            parts.append(f"{run}: compiler cache {u['directory']} ({u['hits']} hits, {u['misses']} misses)")
    return "; ".join(parts)


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
