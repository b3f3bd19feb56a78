"""The plan a verb works from (plan, build, prepare, reproduce): the command line's values checked into a
Request, then the catalogue loaded, the plan made with every source located, --jobs bounds said, pinned files
checked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rvport.cli import handoff
from rvport.cli.console import ui
from rvport.errors import UsageError

if TYPE_CHECKING:
    from rvport.catalogue.recipes import Catalogue
    from rvport.cli.options import BuildArgs, PlanArgs, PrepareArgs
    from rvport.plan.planner import Plan, Request
    from rvport.sources.fetch import FetchOptions


def resolve(req: Request, cat: Catalogue, fopts: FetchOptions) -> Plan:
    """The plan of `req` over `cat`, its sources located in `fopts`' cache and mirror; the shipped patches and
    lock files of its recipes checked against their sha256."""
    from rvport.host import gather
    from rvport.plan.planner import make_plan
    from rvport.sources import locate
    from rvport.sources.pin import check_pinned_files

    plan = make_plan(
        cat, req, gather(), locate=lambda s: str(locate(s, fopts.cache, fopts.mirror, offline=fopts.offline))
    )
    _warn_jobs(plan, req.jobs)
    check_pinned_files(s.recipe for s in plan.stages)
    return with_closures(plan, cat)


def with_closures(plan: Plan, cat: Catalogue) -> Plan:
    """The plan with the closure lock of each stage whose recipe has one for the stage's Python, each loaded
    and checked (its digest, that it holds together, that its Debian entries are the recipe's own pins):
    plan.json shows its digest and counts per origin. A recipe the lock names that the catalogue does not
    hold (at that version) is a note: the wheelhouse needs its wheel."""
    from dataclasses import replace

    from rvport.catalogue.bases import load_base
    from rvport.catalogue.closure_lock import LockConflict, Origin, check_recipe_pins, find_lock

    closures: list[dict] = []
    notes: list[str] = []
    for s in plan.stages:
        r = s.recipe
        python = s.python.version if s.python else load_base(r.toolchain.base).python
        if not python:
            continue
        lock = find_lock(r.name, r.version, python)
        if lock is None:
            continue
        problems = check_recipe_pins(lock, r.toolchain.pins)
        if problems:
            raise LockConflict(
                f"{r.ref}: its closure lock {lock.file} does not install what the recipe is built against",
                problems=problems,
            )
        for e in lock.by_origin(Origin.RECIPE):
            have = cat.recipes.get(e.recipe or "", ())
            if not any(x.version == e.version for x in have):
                notes.append(
                    f"{r.ref}'s closure lock needs recipe {e.recipe} {e.version}, which the catalogue does "
                    "not "
                    "hold: `rvport wheelhouse` refuses until it is built"
                )
        closures.append({"stage": s.name, **lock.summary()})
    if not closures:
        return plan
    return replace(plan, closures=tuple(closures), warnings=tuple(dict.fromkeys((*plan.warnings, *notes))))


def from_options(o: PlanArgs | BuildArgs | PrepareArgs) -> tuple[Plan, FetchOptions]:
    """The request, the catalogue (with the user's recipe directories), the fetch options, resolve: the plan
    and the fetch options of one command line."""
    from rvport.catalogue.recipes import load_catalogue

    req = handoff.request(o)
    cat = load_catalogue(list(o.recipes_dir))
    fopts = handoff.fetch_options(o)
    req, notes = with_source_trees(req, o.source_tree, cat, fopts)
    plan = resolve(req, cat, fopts)
    if notes:
        from dataclasses import replace

        plan = replace(plan, warnings=tuple(dict.fromkeys((*plan.warnings, *notes))))
    _one_base_for_base_image(plan, o.base_image)
    return plan, fopts


def with_source_trees(
    req: Request, texts: Sequence[str], cat: Catalogue, fopts: FetchOptions
) -> tuple[Request, list[str]]:
    """--source-tree [SOURCE=]DIR, each read (rvport.sources.local.inspect: its digest, git state, the
    unpack limits) and checked to be the recipe's project, into the request. It is for the one recipe the
    command line names; DIR alone replaces the recipe's main source (the one without dest:), SOURCE=DIR the
    source of that name (the text before the first '=' is taken as a name only when the recipe has a
    source of that name)."""
    if not texts:
        return req, []
    from rvport.plan.planner import SourceTree
    from rvport.sources import local

    if req.all or len(req.refs) != 1:
        raise UsageError(
            "--source-tree is for one recipe: name exactly one",
            hint="e.g. rvport build vllm --source-tree DIR",
        )
    recipe = cat.resolve(req.refs[0])
    by_name = {s.name: s for s in recipe.sources}
    chosen: dict[str, Path] = {}
    for text in texts:
        name, eq, rest = text.partition("=")
        if eq and name in by_name:
            source, path = by_name[name], Path(rest)
        else:
            main = [s for s in recipe.sources if s.dest is None]
            if not main:
                raise UsageError(
                    f"--source-tree {text}: {recipe.ref} has no main source (every source has a dest:)",
                    hint=f"name the source: --source-tree SOURCE=DIR, SOURCE one of {', '.join(by_name)}",
                )
            source, path = main[0], Path(text)
        if source.name in chosen:
            raise UsageError(
                f"--source-tree given twice for {recipe.ref}'s source {source.name!r}",
                hint="give one tree per source",
            )
        chosen[source.name] = path
    trees, notes = [], []
    for name, path in chosen.items():
        tree = local.inspect(path, limits=fopts.limits)
        note = local.check_project(recipe, by_name[name], Path(tree.path))
        if note:
            notes.append(note)
        trees.append(SourceTree(recipe=recipe.name, source=name, tree=tree))
    from dataclasses import replace

    return replace(req, source_trees=tuple(trees)), notes


def _one_base_for_base_image(plan: Plan, base_image: str | None) -> None:
    """--base-image stands for every riscv64 base of the run: a --python plan whose stages are on several
    (trixie for 3.13, sid for 3.14) would build them all on the one image, so it is refused."""
    if not base_image or not plan.request.pythons:
        return
    used = sorted({s.recipe.toolchain.base for s in plan.stages if s.python is not None})
    if len(used) > 1:
        raise UsageError(
            f"--base-image stands for one riscv64 base, and --python {','.join(plan.request.pythons)} "
            f"builds on {', '.join(used)}",
            hint="leave --base-image out, or give --python one Python",
        )


def _warn_jobs(plan: Plan, jobs: int | None) -> None:
    """The planner bounds --jobs by the host's memory (a compile job of each kind needs some); say so."""
    if jobs is None:
        return
    for s in plan.stages:
        if s.jobs != jobs:
            ui().err.print(
                f"warning: --jobs {jobs}: {s.recipe.ref} runs {s.jobs} job(s) instead, as many as this "
                f"host's memory allows for a {s.recipe.kind.value} build",
                markup=False,
                highlight=False,
            )
