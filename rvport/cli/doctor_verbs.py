"""`rvport doctor`: what this host can do for a riscv64 build (rvport/engine/doctor.py), and what to fix: the
engine, emulation, disk, and the programs the host itself runs for the recipes
(rvport/catalogue/hosttools.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rvport.cli import settings, views
from rvport.cli.console import ui
from rvport.cli.options import DoctorArgs
from rvport.errors import HostNotReady
from rvport.host import gather

if TYPE_CHECKING:
    from rvport.catalogue.model import Recipe
    from rvport.catalogue.recipes import Catalogue


@settings.command(settings.DOCTOR, short_help="What this host can do for a riscv64 build, and what to fix.")
def doctor(o: DoctorArgs) -> None:
    """What this host can do for a riscv64 build, and what to fix. Exit 0 when a build can run, 6 if not.

    The host's own programs are checked for the recipes named (NAME or NAME==VERSION, and what they depend
    on), or for every recipe --all selects: Go for `vendor: go` at the version the recipe needs, cargo for
    `vendor: cargo`, gpgv for Debian pins. A named recipe the host falls short for means exit 6; with none
    named, doctor says which recipes cannot be prepared here."""
    from rvport.catalogue.recipes import load_catalogue
    from rvport.engine.doctor import can_build, host_tool_checks, run_checks, short_recipes

    cat = load_catalogue(list(o.recipes_dir))
    recipes = with_dependencies(cat, list(o.recipes) or cat.selected_by_all)
    checks = run_checks(gather(), builder=o.builder)
    checks += host_tool_checks(recipes, blocking=bool(o.recipes))
    ui().console.print(views.checks_table(checks), crop=False)
    short = short_recipes(checks)
    if not can_build(checks):
        if can_build([c for c in checks if not c.short_for]):  # only the named recipes' host tools
            raise HostNotReady(
                f"this host cannot prepare the sources of {', '.join(short)}: the host tools above fall "
                "short",
                hint="install what the host tools' rows above say, then run rvport doctor again",
            )
        raise HostNotReady(
            "this host cannot run a riscv64 build yet",
            hint="apply the fixes above, or run scripts/setup-host as root",
        )
    if short:
        ui().console.print(
            f"[green]ready:[/] a riscv64 build can run here, but not of {', '.join(short)}: the host tools "
            "above fall short for them"
        )
        return
    ui().console.print("[green]ready:[/] a riscv64 build can run here")


def with_dependencies(cat: Catalogue, refs: list[str]) -> list[Recipe]:
    """The recipes `refs` name and every recipe they depend on, each once, in the order met."""
    out: dict[str, Recipe] = {}
    todo = list(refs)
    while todo:
        r = cat.resolve(todo.pop(0))
        if r.ref not in out:
            out[r.ref] = r
            todo += list(r.depends)
    return list(out.values())
