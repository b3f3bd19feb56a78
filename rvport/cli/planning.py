"""The plan a verb works from (plan, build, prepare, reproduce): the command line's values made a Request
(rvport/cli/handoff.py) with its local source trees, the catalogue loaded, and the complete, checked plan made
in rvport/plan/ with every source located; what --jobs became said."""

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
    from rvport.engine.compcache import CompilerCache
    from rvport.plan.matrix import Cell
    from rvport.plan.planner import Plan, Request
    from rvport.sources.fetch import FetchOptions


def resolve(req: Request, cat: Catalogue, fopts: FetchOptions, *, say_jobs: bool = True) -> Plan:
    """The complete, checked plan of `req` over `cat` (rvport/plan/checked.py), its sources located in
    `fopts`' cache and mirror; what --jobs became said (unless `say_jobs` is false: a matrix's later
    profiles, whose stages get the same jobs)."""
    from rvport.host import gather
    from rvport.plan.checked import make_checked_plan
    from rvport.sources import locate

    plan = make_checked_plan(
        cat, req, gather(), locate=lambda s: str(locate(s, fopts.cache, fopts.mirror, offline=fopts.offline))
    )
    if say_jobs:
        _warn_jobs(plan, req.jobs)
    return plan


def from_options(
    o: PlanArgs | BuildArgs | PrepareArgs, *, profile: str | None = None
) -> tuple[Plan, FetchOptions]:
    """The request, the catalogue (with the user's recipe directories), the fetch options, resolve: the plan
    and the fetch options of one command line, for `profile` (default: the first it names)."""
    from rvport.catalogue.recipes import load_catalogue

    req = handoff.request(o, profile=profile)
    cat = load_catalogue(list(o.recipes_dir))
    fopts = handoff.fetch_options(o)
    req, notes = with_source_trees(req, o.source_tree, cat, fopts)
    return _finish(resolve(req, cat, fopts), notes, o.base_image), fopts


def matrix_from_options(o: BuildArgs) -> tuple[tuple[tuple[Cell, Plan], ...], FetchOptions]:
    """A build matrix's plans, one per profile the command line names (rvport/plan/matrix.py), in its
    order, each the plan `from_options` makes for that profile alone: the catalogue loaded and the local
    trees read once, every plan made (and checked) before anything runs."""
    from rvport.catalogue.profiles import get_profile, load_profiles
    from rvport.catalogue.recipes import load_catalogue
    from rvport.plan.matrix import cells

    names = handoff.profile_names(o)
    req = handoff.request(o, profile=names[0])
    cat = load_catalogue(list(o.recipes_dir))
    fopts = handoff.fetch_options(o)
    req, notes = with_source_trees(req, o.source_tree, cat, fopts)
    matrix = cells(req, [get_profile(n) for n in names], o.output, every=list(load_profiles().values()))
    planned = tuple(
        (cell, _finish(resolve(cell.request, cat, fopts, say_jobs=i == 0), notes, o.base_image))
        for i, cell in enumerate(matrix)
    )
    return planned, fopts


def _finish(plan: Plan, notes: list[str], base_image: str | None) -> Plan:
    """The plan with the local trees' notes among its warnings, checked against --base-image."""
    if notes:
        from dataclasses import replace

        plan = replace(plan, warnings=tuple(dict.fromkeys((*plan.warnings, *notes))))
    _one_base_for_base_image(plan, base_image)
    return plan


def say_accepted(p: Plan) -> None:
    """An accepted expired Release, and a --manylinux that a recipe's own `manylinux:` overrides, are said at
    the terminal too (plan.json and result.json record them)."""
    from rich.text import Text

    from rvport.plan.planner import REPAIR_NOTE
    from rvport.safetext import one_line

    for w in p.warnings:
        if "--allow-expired-release" in w or REPAIR_NOTE in w:
            ui().err.print(Text.assemble(("note:", "yellow"), f" {one_line(w)}"))


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


def compiler_cache(o: object, *, default: str = "engine") -> CompilerCache:
    """The compiler cache the options ask for (rvport/engine/compcache.py): off with --no-compiler-cache, the
    directory of --compiler-cache (checked, made when new: compcachedir.check_dir), else `default`'s use
    (engine: the engine's per toolchain; off); the size of --compiler-cache-size."""
    from rvport.engine.compcache import CacheUse, CompilerCache, parse_size
    from rvport.engine.compcachedir import check_dir

    size = parse_size(o.compiler_cache_size)  # type: ignore[attr-defined]
    given = o.compiler_cache  # type: ignore[attr-defined]
    if getattr(o, "no_compiler_cache", False):
        if given is not None:
            raise UsageError(
                "--compiler-cache and --no-compiler-cache ask for opposite things", hint="give one of them"
            )
        return CompilerCache(use=CacheUse.OFF, max_size=size)
    if given is not None:
        return CompilerCache(use=CacheUse.DIR, directory=check_dir(given), max_size=size)
    return CompilerCache(use=CacheUse(default), max_size=size)
