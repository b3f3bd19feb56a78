"""`rvport plan`: the complete, checked plan of the command line (rvport/cli/planning.py) shown and written
to DIR/plan.json; with --format bake, exported for `docker buildx bake` too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from rvport import manifest, outdir
from rvport.cli import handoff, planning, settings, views
from rvport.cli.console import ui
from rvport.cli.options import PlanArgs
from rvport.safetext import one_line

if TYPE_CHECKING:
    from rvport.plan.planner import Plan


@settings.command(
    settings.PLAN, short_help="Resolve recipes into a plan, with every pin, before anything runs."
)
def plan(o: PlanArgs) -> None:
    """Resolve recipes into a plan (printed, and written to DIR/plan.json) before anything runs.

    Name recipes as NAME (its default version) or NAME==VERSION, or pass --all. The plan promises every pin:
    the patches, lock files and files shipped with the planned recipes are checked against their sha256 first.

    With --format bake, also DIR/docker-bake.json and its stage contexts under DIR/bake/ (this fetches the
    sources and makes sure the base image exists, as a build would)."""
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
        dropped = lock.dropped()
        if dropped:  # what a user of the closure does not get, said with the lock (each reason: its `why`)
            u.console.print(
                f"  leaves out {len(dropped)} of {lock.recipe}'s requirements: "
                f"{one_line(', '.join(dropped))} (why: the lock's edits; docs/closure.md)",
                markup=False,
                highlight=False,
            )
    for w in p.warnings:
        u.console.print(Text.assemble(("note:", "yellow"), f" {one_line(w)}"))
    say_host_tools(p)
    output = outdir.claim(o.output, outdir.Kind.BUILD)
    path = manifest.write(output / "plan.json", p.to_json())
    u.console.print(f"wrote {one_line(path)}", markup=False, soft_wrap=True)
    if o.format == "bake":
        from rvport.engine.bake import export, runtime_notes

        bpath = export(p, handoff.bake_options(o, fopts))
        u.console.print(
            f"wrote {one_line(bpath)} (contexts in {one_line(output / 'bake')}); run: docker buildx bake -f "
            "{bpath} toolchains && docker buildx bake -f {bpath}".replace("{bpath}", one_line(bpath)),
            markup=False,
        )
        for note in runtime_notes(p):
            u.console.print(Text.assemble(("note:", "yellow"), f" {one_line(note)}"))


def say_host_tools(p: Plan) -> None:
    """The programs the host itself runs for the planned recipes (vendoring, Debian pins) that it lacks or has
    too old (rvport doctor's host-tool rows), each with its fix: a warning, since the plan itself holds."""
    from rvport.engine.doctor import host_tool_checks

    u = ui()
    recipes = list({s.recipe.ref: s.recipe for s in p.stages}.values())
    for c in host_tool_checks(recipes, blocking=False):
        if not c.ok:
            u.console.print(Text.assemble(("warning:", "yellow"), f" {one_line(c.detail)}"))
            u.console.print(Text.assemble("  ", ("fix:", "cyan"), f" {one_line(c.remedy)}"))


def _say_accepted(p) -> None:  # type: ignore[no-untyped-def]
    """An accepted expired Release, and a --manylinux that a recipe's own `manylinux:` overrides, are said at
    the terminal too (plan.json and result.json record them)."""
    from rvport.plan.planner import REPAIR_NOTE

    for w in p.warnings:
        if "--allow-expired-release" in w or REPAIR_NOTE in w:
            ui().err.print(Text.assemble(("note:", "yellow"), f" {one_line(w)}"))
