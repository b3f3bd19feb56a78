"""The complete, checked plan every verb that plans works from: the planner's plan (rvport/plan/planner.py),
then every pin it promises checked and every closure lock it carries loaded. Pure apart from reading the
catalogue's own files through their loaders: the patches, lock files and files shipped beside the recipes
(checked against their sha256: rvport.sources.pin) and the closure locks (rvport.catalogue.closure_lock).

Where sources are (`locate`: cache, mirror, network) is the caller's to say, as for `make_plan`. Importing
this module loads no I/O module, as importing the planner does not (tests/unit/project/test_layers.py): the
pin check and the lock loader, which read files and wheels' tags, are imported when a plan is made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from rvport.catalogue.bases import load_base
from rvport.catalogue.model import Source
from rvport.catalogue.recipes import Catalogue
from rvport.host import HostFacts
from rvport.plan.planner import Plan, Request, StageClosure, make_plan


def make_checked_plan(
    cat: Catalogue, req: Request, host: HostFacts, *, locate: Callable[[Source], str]
) -> Plan:
    """The plan of `req` over `cat`, with its pinned files checked (an IntegrityError, exit 4, names every
    file that does not match) and its closure locks (`with_closures`)."""
    from rvport.sources.pin import check_pinned_files

    plan = make_plan(cat, req, host, locate=locate)
    check_pinned_files(s.recipe for s in plan.stages)
    return with_closures(plan, cat)


def with_closures(plan: Plan, cat: Catalogue) -> Plan:
    """The plan with the closure lock of each stage whose recipe has one for the stage's Python, each loaded
    and checked (its digest, that it holds together, that its Debian entries are the recipe's own pins):
    plan.json shows its digest and counts per origin. A recipe the lock names that the catalogue does not
    hold (at that version) is a note: the wheelhouse needs its wheel."""
    from rvport.catalogue.closure_lock import LockConflict, Origin, check_recipe_pins, find_lock

    closures: list[StageClosure] = []
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
                    "not hold: `rvport wheelhouse` refuses until it is built"
                )
        closures.append(StageClosure(stage=s.name, lock=lock))
    if not closures:
        return plan
    return replace(plan, closures=tuple(closures), warnings=tuple(dict.fromkeys((*plan.warnings, *notes))))
