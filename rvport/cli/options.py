"""Options shared by several commands whose help is made from the catalogue."""

from __future__ import annotations

import typer

from rvport.catalogue.profiles import load_profiles

DEFAULT_PROFILE = "rvv256"


def profile_option(default: str | None = DEFAULT_PROFILE, extra: str = "") -> typer.models.OptionInfo:
    """--profile/-p, with the profiles of the catalogue (resources/profiles.yaml) listed in its help."""
    names = ", ".join(load_profiles())
    return typer.Option(
        default,
        "--profile",
        "-p",
        metavar="PROFILE",
        help=f"Target profile: {names} (docs/profiles.md)." + (f" {extra}" if extra else ""),
    )
