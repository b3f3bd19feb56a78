"""`rvport recipes list` and `rvport recipes show`: the catalogue (with the user's recipe directories)
shown."""

from __future__ import annotations

from rvport.catalogue.recipes import load_catalogue
from rvport.cli import settings, views
from rvport.cli.console import ui
from rvport.cli.options import RecipesListArgs, RecipesShowArgs


@settings.command(settings.RECIPES_LIST)
def recipes_list(o: RecipesListArgs) -> None:
    """Every recipe with its versions (default in bold), what it depends on and its description; with
    directories of your own (--recipes, RVPORT_RECIPE_PATH), a column says where each recipe comes from
    (built-in or which directory). Without them the title says that every recipe is built-in."""
    ui().console.print(views.recipes_table(load_catalogue(list(o.recipes_dir))), crop=False)


@settings.command(settings.RECIPES_SHOW)
def recipes_show(o: RecipesShowArgs) -> None:
    """Everything a recipe pins: sources, patches, lock files, files, toolchain, env, commands."""
    ui().console.print(views.recipe_detail(load_catalogue(list(o.recipes_dir)).resolve(o.recipe)), crop=False)
