"""CLI commands for a recipe's runtime closure: `rvport lock` (resolve and write the lock). Parse, call
rvport.build.lockgen, render. Registered in rvport/cli/app.py (docs/closure.md)."""

from __future__ import annotations

import typer
from rich.table import Table

from rvport.cli import settings
from rvport.cli.console import ui


def counts_table(summary: dict) -> Table:
    t = Table(title=f"closure of {summary['recipe']} {summary['version']} ({summary['abi']})")
    for col in ("origin", "distributions"):
        t.add_column(col, justify="right" if col == "distributions" else "left")
    for origin, n in summary["counts"].items():
        t.add_row(origin, str(n))
    t.add_row("total", str(summary["total"]))
    return t


@settings.command(settings.LOCK)
def lock(o) -> None:
    """Resolve a recipe's runtime closure for riscv64 and its base's Python, and write its lock.

    Every requirement, evaluated for riscv64 Linux and the base's CPython, becomes a recipe rvport builds, a
    Debian package of the base's suite at an exact version (its .deb's sha256 from the signed index), or a
    wheel from the package index by file name and sha256, as RECIPE.policy.yaml in rvport/resources/locks/
    says (docs/closure.md). The wheels are downloaded into the cache, checked by sha256, to read their
    requirements."""
    from rvport.build.lockgen import default_output, generate
    from rvport.catalogue.recipes import load_catalogue
    from rvport.sources import fetch_options

    cat = load_catalogue(list(o.recipes_dir))
    recipe = cat.resolve(o.recipe)
    fopts = fetch_options(
        cache_dir=o.cache_dir, mirror=o.mirror, offline=o.offline, ca=o.ca_bundle, unpack_limit=o.unpack_limit
    )
    u = ui()
    out = o.lock_file or default_output(recipe)
    made = generate(
        cat,
        recipe,
        fopts,
        output=out,
        allow_expired=o.allow_expired_release,
        log=lambda m: u.err.print(m, markup=False, highlight=False),
    )
    u.console.print(counts_table(made.summary()), crop=False)
    u.console.print(f"wrote {out} ({made.digest})", markup=False)


def register(app: typer.Typer) -> None:
    app.command("lock", short_help="Resolve a recipe's runtime closure for riscv64 and write its lock.")(lock)
