"""CLI commands for sources: `rvport fetch` and `rvport pin`. Parse, call rvport.sources, render."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from rvport.catalogue.recipes import Recipe, load_catalogue
from rvport.catalogue.tools import tools
from rvport.cli import outputs
from rvport.cli.console import ui
from rvport.errors import RvportError, UsageError
from rvport.plan.planner import WHEEL_KINDS
from rvport.sources import Fetched, Fetcher, fetch_options, pin_recipe, prepare_tree

CACHE_OPT = typer.Option(
    None,
    "--cache-dir",
    envvar="RVPORT_CACHE_DIR",
    show_envvar=True,
    metavar="DIR",
    help="Download cache (default: $XDG_CACHE_HOME/rvport or ~/.cache/rvport).",
)
MIRROR_OPT = typer.Option(
    None,
    "--mirror",
    envvar="RVPORT_MIRROR",
    show_envvar=True,
    metavar="DIR",
    help="Directory of source archives consulted before the network (see docs/sources.md).",
)
OFFLINE_OPT = typer.Option(False, "--offline", help="Never use the network; fail when a source is missing.")
CA_OPT = typer.Option(
    None,
    "--ca-bundle",
    envvar="RVPORT_CA_BUNDLE",
    show_envvar=True,
    metavar="FILE",
    help="CA certificates to verify TLS with (default: REQUESTS_CA_BUNDLE, SSL_CERT_FILE, "
    "PIP_CERT, CURL_CA_BUNDLE, the system bundle, certifi).",
)
RECIPES_OPT = typer.Option(
    None,
    "--recipes",
    metavar="DIR",
    help="A directory of your own recipes, layered over the built-in catalogue (repeatable; "
    "the first wins). Default: RVPORT_RECIPE_PATH, directories joined with ':'.",
)


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


def fetch(
    recipes: list[str] | None = typer.Argument(
        None, metavar="RECIPE[==VERSION]", show_default=False, hidden=True
    ),
    all_: bool = typer.Option(False, "--all", help="Every version of every recipe."),
    to: Path | None = typer.Option(
        None, "--to", metavar="DIR", help="Also copy every source into this mirror directory."
    ),
    tree: bool = typer.Option(
        False, "--tree", help="Also prepare the source trees (patches, vendored crates)."
    ),
    from_git: list[Path] | None = typer.Option(
        None,
        "--from-git",
        metavar="CLONE",
        help="Take git sources from this local clone (or git bundle) at their pinned commit instead of the "
        "mirror or the network; checked against their tree digest (repeatable). With --to, fills a mirror.",
    ),
    cache_dir: Path | None = CACHE_OPT,
    mirror: Path | None = MIRROR_OPT,
    offline: bool = OFFLINE_OPT,
    ca_bundle: Path | None = CA_OPT,
    recipes_dir: list[Path] | None = RECIPES_OPT,
) -> None:
    """Download and verify sources (SHA256, tree digests) into the cache; optionally fill a mirror for offline
    hosts.

    Name recipes as NAME (its default version) or NAME==VERSION, or pass --all."""
    outputs.check_dir(to)
    selected = _select(list(recipes or []), all_, recipes_dir)
    opts = fetch_options(
        cache_dir=cache_dir, mirror=mirror, offline=offline, ca=ca_bundle, to=to, from_git=from_git or ()
    )
    u = ui()
    rows: list[tuple[str, Fetched]] = []
    try:
        with Fetcher(options=opts) as fetcher:
            for r in selected:
                if tree:
                    # unpacking checks each archive while reading it; a reused tree reads none, so check those
                    # here
                    pt = prepare_tree(r, opts, fetcher=fetcher)
                    rows += [(r.ref, fetcher.check(f)) for f in pt.fetched]
                    u.err.print(
                        f"{r.ref}: tree {'reused' if pt.reused else 'prepared'} at {pt.path}", markup=False
                    )
                else:
                    rows += [(r.ref, fetcher.fetch(s)) for s in r.sources]
                for _, f in rows[-len(r.sources) :]:
                    if f.note:
                        u.err.print(f"warning: {f.note}", markup=False)
            # the tools wheel stages run (auditwheel), so a mirror serves an offline build whole
            if any(r.kind in WHEEL_KINDS for r in selected):
                for name, tl in sorted(tools().items()):
                    rows.append((f"rvport tool {name}", fetcher.fetch(tl.source)))
    except RvportError:
        if rows:
            u.console.print(_table(rows), crop=False)
        raise
    u.console.print(_table(rows), crop=False)
    if to:
        u.err.print(f"mirror filled: {to} (use it with --mirror {to})", markup=False)


def pin(
    recipe: str = typer.Argument(..., metavar="RECIPE[==VERSION]", hidden=True),
    cache_dir: Path | None = CACHE_OPT,
    mirror: Path | None = MIRROR_OPT,
    offline: bool = OFFLINE_OPT,
    ca_bundle: Path | None = CA_OPT,
    recipes_dir: list[Path] | None = RECIPES_OPT,
) -> None:
    """Record the digest of sources without a published one in your recipe YAML (later fetches must match):
    the
    SHA256 of an archive, the tree digest of a git source."""
    r = load_catalogue(recipes_dir).resolve(recipe)
    opts = fetch_options(cache_dir=cache_dir, mirror=mirror, offline=offline, ca=ca_bundle)
    pinned = pin_recipe(r, opts)
    u = ui()
    if not pinned:
        u.err.print(f"{r.ref}: every source is already pinned; nothing to pin", markup=False)
        return
    for p in pinned:
        u.console.print(f"{r.ref}: {p.source}: {p.key} {p.sha256} written to {p.file}:{p.line}", markup=False)


def register(app: typer.Typer) -> None:
    """Add `fetch` and `pin` to the main app."""
    app.command("fetch", short_help="Download and verify sources into the cache; fill a mirror.")(fetch)
    app.command("pin", short_help="Record the SHA256 of sources that publish none in the recipe.")(pin)
