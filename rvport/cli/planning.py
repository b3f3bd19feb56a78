"""The plan a verb works from (plan, build, prepare, reproduce): the command line's values checked into a
Request, then the catalogue loaded, the plan made with every source located, --jobs bounds said, pinned files
checked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rvport.cli.console import ui
from rvport.errors import UsageError

if TYPE_CHECKING:
    from rvport.catalogue.recipes import Catalogue
    from rvport.plan.planner import Plan, Request
    from rvport.sources.fetch import FetchOptions


def request(
    recipes: Sequence[str] | None,
    all_: bool,
    profile: str,
    mode: str,
    tag: str,
    jobs: int | None,
    builder: str | None,
    manylinux: str = "auto",
    allow_expired: tuple[str, ...] = (),
) -> Request:
    """What the command line asks for; a bad value is a UsageError before anything is loaded."""
    from rvport.catalogue import modes
    from rvport.catalogue.profiles import get_profile
    from rvport.plan.planner import Mode, Request

    try:
        mode_v = Mode(mode)
    except ValueError:
        raise UsageError(f"unknown mode {mode!r}", hint=f"choose {modes.choices_text()}") from None
    if all_ and recipes:
        raise UsageError(
            "give recipe names or --all, not both", hint="drop --all to use only the named recipes"
        )
    if jobs is not None and jobs < 1:
        raise UsageError(
            f"--jobs {jobs}: give 1 or more",
            hint="or leave --jobs out: rvport then runs as many as the cores and memory allow",
        )
    return Request(
        refs=tuple(recipes or ()),
        all=all_,
        profile=get_profile(profile),
        mode=mode_v,
        tag=tag,
        jobs=jobs,
        builder=builder,
        manylinux=manylinux,
        allow_expired_release=allow_expired,
    )


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
    return plan


def from_options(
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
    ca=None,
    manylinux="auto",
    allow_expired=(),
) -> tuple[Plan, FetchOptions]:
    """request, the catalogue (with the user's recipe directories), the fetch options, resolve: the plan and
    the
    fetch options of one command line."""
    from rvport.catalogue.recipes import load_catalogue
    from rvport.sources import fetch_options

    req = request(recipes, all_, profile, mode, tag, jobs, builder, manylinux, allow_expired)
    cat = load_catalogue(recipes_dir)
    fopts = fetch_options(cache_dir=cache_dir, mirror=mirror, offline=offline, ca=ca)
    return resolve(req, cat, fopts), fopts


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
