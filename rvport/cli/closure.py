"""CLI commands for a recipe's runtime closure: `rvport lock` (resolve and write the lock) and `rvport
wheelhouse` (every wheel of the lock, with hashes and the apt list). Parse, call rvport.closure.resolve and
rvport.closure.wheelhouse, render. Registered in rvport/cli/app.py (docs/closure.md)."""

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
    from rvport.catalogue.recipes import load_catalogue
    from rvport.closure.resolve import default_output, generate
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


@settings.command(settings.WHEELHOUSE)
def wheelhouse(o) -> None:
    """Put every wheel of a recipe's closure lock into DIR, with DIR/requirements.txt (each wheel by sha256)
    and DIR/debian-packages.txt (what apt installs first), for an offline install on riscv64.

    The lock is checked first (its digest, its pins against each other and against Debian's signed index
    now); the index's wheels come through the download cache, checked by sha256; the wheels rvport builds
    come from --artifacts. Every wheel's requirements must be met by the lock, and every wheel must pass
    `rvport verify` for --profile. DIR is written whole at the end, or not at all (docs/closure.md)."""
    from rvport.catalogue.bases import load_base
    from rvport.catalogue.closure import find_lock, lock_path
    from rvport.catalogue.profiles import get_profile
    from rvport.catalogue.recipes import load_catalogue
    from rvport.closure import wheelhouse as wh
    from rvport.errors import RecipeError
    from rvport.sources import fetch_options

    cat = load_catalogue(list(o.recipes_dir))
    recipe = cat.resolve(o.recipe)
    python = load_base(recipe.toolchain.base).python or "?"
    lk = find_lock(recipe.name, recipe.version, python)
    if lk is None:
        raise RecipeError(
            f"{recipe.ref} has no closure lock for CPython {python} "
            f"({lock_path(recipe.name, recipe.version, python)})",
            hint=f"make one with `rvport lock {recipe.ref}` (docs/closure.md)",
        )
    fopts = fetch_options(
        cache_dir=o.cache_dir, mirror=o.mirror, offline=o.offline, ca=o.ca_bundle, unpack_limit=o.unpack_limit
    )
    u = ui()
    doc = wh.make(
        lk,
        wh.Options(
            output=o.wheelhouse_dir,
            artifacts=tuple(o.artifacts),
            profile=get_profile(o.profile),
            fetch=fopts,
            allow_expired=o.allow_expired_release,
            carries=carrying(cat, lk),
        ),
        log=lambda m: u.err.print(m, markup=False, highlight=False),
    )
    u.console.print(counts_table(lk.summary()), crop=False)
    u.console.print(
        f"wrote {o.wheelhouse_dir}: {len(doc['wheels'])} wheels, {wh.REQUIREMENTS}, {wh.DEBIAN_LIST} "
        f"({len(doc['debian'])} packages), {wh.MANIFEST}",
        markup=False,
    )


def carrying(cat, lock) -> frozenset[str]:  # type: ignore[no-untyped-def]
    """The lock's recipe distributions whose recipe (at the locked version) declares its wheel `isa:
    profile`: the wheelhouse verifies that they carry the profile's extensions."""
    from rvport.catalogue.closure import Origin

    out = set()
    for e in lock.by_origin(Origin.RECIPE):
        for r in cat.recipes.get(e.recipe or "", ()):
            if r.version == e.version and any(x.type == "wheel" and x.isa == "profile" for x in r.outputs):
                out.add(e.name)
    return frozenset(out)


def register(app: typer.Typer) -> None:
    app.command("lock", short_help="Resolve a recipe's runtime closure for riscv64 and write its lock.")(lock)
    app.command(
        "wheelhouse", short_help="Every wheel of a recipe's closure lock, with hashes, for offline use."
    )(wheelhouse)
