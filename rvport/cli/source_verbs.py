"""CLI commands for sources: `rvport fetch` and `rvport pin`. Parse, call rvport.sources, render."""

from __future__ import annotations

import shlex
from pathlib import Path

from rich.table import Table
from rich.text import Text

from rvport.catalogue.kinds import WHEEL_KINDS
from rvport.catalogue.model import BUILTIN, Recipe
from rvport.catalogue.recipes import load_catalogue
from rvport.catalogue.tools import tools
from rvport.cli import handoff, settings
from rvport.cli.console import ui
from rvport.cli.options import FetchArgs, PinArgs
from rvport.errors import RvportError, UsageError
from rvport.safetext import one_line
from rvport.sources import Fetched, Fetcher, copy_builtin, pin_recipe, prepare_tree

DEFAULT_INTO = "recipes"  # where `rvport pin` copies a built-in recipe when no --into or --recipes names one


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _table(rows: list[tuple[str, Fetched]]) -> Table:
    t = Table(title="sources", show_lines=False)
    for col in ("recipe", "source", "from", "sha256", "size"):
        t.add_column(
            col, justify="right" if col == "size" else "left", no_wrap=col != "from", overflow="fold"
        )
    for ref, f in rows:
        digest = f.sha256 + (" (recorded)" if f.recorded else "")
        tree = f.tree or f.source.tree
        if tree:  # the pin of a git source: its archive's bytes vary, its tree does not
            digest += f"\ntree {tree}"
        t.add_row(*(Text(cell) for cell in (ref, f.source.name, f.origin, digest, _size(f.size))))
    return t


def _select(recipes: list[str], all_: bool, root: list[Path] | None) -> list[Recipe]:
    cat = load_catalogue(root)
    if all_:
        if recipes:
            raise UsageError(
                "give recipe names or --all, not both", hint="drop --all to use only the named recipes"
            )
        return [r for name in cat.selected_by_all for r in cat.recipes[name]]
    if not recipes:
        raise UsageError(
            "name the recipes to fetch, or pass --all", hint=f"known recipes: {', '.join(cat.names)}"
        )
    return [cat.resolve(ref) for ref in recipes]


@settings.command(settings.FETCH, short_help="Download and verify sources into the cache; fill a mirror.")
def fetch(o: FetchArgs) -> None:
    """Download and verify sources (SHA256, tree digests) into the cache; optionally fill a mirror for offline
    hosts.

    Name recipes as NAME (its default version) or NAME==VERSION, or pass --all."""
    selected = _select(list(o.recipes), o.all_versions, list(o.recipes_dir))
    opts = handoff.fetch_options(o)
    u = ui()
    rows: list[tuple[str, Fetched]] = []
    try:
        with Fetcher(options=opts) as fetcher:
            for r in selected:
                if o.tree:
                    # unpacking checks each archive while reading it; a reused tree reads none, so check those
                    # here
                    pt = prepare_tree(r, opts, fetcher=fetcher)
                    rows += [(r.ref, fetcher.check(f)) for f in pt.fetched]
                    u.err.print(
                        f"{r.ref}: tree {'reused' if pt.reused else 'prepared'} at {one_line(pt.path)}",
                        markup=False,
                    )
                else:
                    rows += [(r.ref, fetcher.fetch(s)) for s in r.sources]
                for _, f in rows[-len(r.sources) :]:
                    if f.note:
                        u.err.print(f"warning: {one_line(f.note)}", markup=False)
                # the test wheels of its upstream tests (`tests:`), so a mirror serves them too
                for w in r.tests.wheels if r.tests else ():
                    rows.append((f"{r.ref} tests", fetcher.fetch(w.source())))
            # the tools wheel stages run (auditwheel), so a mirror serves an offline build whole
            if any(r.kind in WHEEL_KINDS for r in selected):
                for name, tl in sorted(tools().items()):
                    rows.append((f"rvport tool {name}", fetcher.fetch(tl.source)))
    except RvportError:
        if rows:
            u.console.print(_table(rows), crop=False)
        raise
    u.console.print(_table(rows), crop=False)
    if o.to:
        u.err.print(f"mirror filled: {one_line(o.to)} (use it with --mirror {one_line(o.to)})", markup=False)


@settings.command(settings.PIN, short_help="Record the SHA256 of sources that publish none in the recipe.")
def pin(o: PinArgs) -> None:
    """Record the digest of sources without a published one in your recipe YAML (later fetches must match):
    the SHA256 of an archive, the tree digest of a git source.

    A built-in recipe is copied first, with the files beside it, into a recipe directory of your own (--into
    DIR; default: the first --recipes directory, else ./recipes), and pinned there: plan and build it with
    --recipes DIR."""
    dirs = list(o.recipes_dir)
    cat = load_catalogue(dirs)
    r = cat.resolve(o.recipe)
    u = ui()
    into = None
    if r.origin == BUILTIN and all(s.pinned for s in r.sources):
        u.err.print(f"{r.ref}: every source is already pinned (by rvport: a built-in recipe)", markup=False)
        return
    if r.origin == BUILTIN:
        into = o.into or (dirs[0] if dirs else Path(DEFAULT_INTO))
        copied = copy_builtin(cat.recipes[r.name], into)
        u.err.print(
            f"{r.ref} is a built-in recipe: {r.file.name} and {len(copied) - 1} file(s) beside it copied "
            f"into {one_line(into)}, to be pinned there",
            markup=False,
        )
        layered = [into, *(d for d in dirs if d.absolute() != into.absolute())]
        r = load_catalogue(layered).resolve(o.recipe)
    pinned = pin_recipe(r, handoff.fetch_options(o))
    if not pinned:
        u.err.print(f"{r.ref}: every source is already pinned; nothing to pin", markup=False)
    for p in pinned:
        u.console.print(
            f"{r.ref}: {p.source}: {p.key} {p.sha256} written to {one_line(p.file)}:{p.line}", markup=False
        )
    if into is not None:
        u.console.print(
            f"to use it: rvport plan {r.ref} --recipes {shlex.quote(str(into))} (or "
            f"RVPORT_RECIPE_PATH={shlex.quote(str(into))})",
            markup=False,
        )
