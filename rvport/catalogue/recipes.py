"""The catalogue: every recipe of the built-in recipes/ with the user's recipe directories layered over it,
each file loaded by recipe_file.py into the model's values (catalogue/model.py); dependencies checked (known
names, no cycle), every problem of every file reported together.

A recipe file holds one project and one or more versions of it. `Catalogue.resolve("name")` picks the default
version (the one marked `default`, else the newest hermetic one); `name==version` picks another.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rvport import bounds, resources
from rvport.catalogue.model import BUILTIN, Recipe
from rvport.catalogue.recipe_file import load_recipe_file
from rvport.catalogue.yamlsrc import MAX_BYTES
from rvport.errors import Problem, RecipeError, RvportError, UsageError
from rvport.fileio import read_regular, user_dir


def default_recipes_dir() -> Path:
    """The built-in catalogue, shipped inside the package."""
    return resources.builtin("recipes")


@dataclass(frozen=True, kw_only=True)
class Catalogue:
    recipes: Mapping[str, tuple[Recipe, ...]]  # name -> versions, newest first
    user_dirs: tuple[Path, ...] = ()  # layered over the built-in catalogue, first wins

    @property
    def names(self) -> list[str]:
        return sorted(self.recipes)

    @property
    def selected_by_all(self) -> list[str]:
        """What --all means: every recipe of the user's directories when there are any, else every built-in
        one."""
        if self.user_dirs:
            return sorted(n for n, vs in self.recipes.items() if vs[0].origin != BUILTIN)
        return self.names

    def origin(self, name: str) -> str:
        return self.recipes[name][0].origin

    def default(self, name: str) -> Recipe:
        versions = self.recipes[name]
        marked = [r for r in versions if r.is_default]
        if marked:
            return marked[0]
        hermetic = [r for r in versions if r.hermetic]
        return (hermetic or list(versions))[0]

    def resolve(self, ref: str) -> Recipe:
        name, sep, version = ref.partition("==")
        name = name.strip()
        if name not in self.recipes:
            raise UsageError(
                f"unknown recipe {bounds.shown(name)}", hint=f"known recipes: {', '.join(self.names)}"
            )
        if sep and not version.strip():
            known = ", ".join(r.version for r in self.recipes[name])
            raise UsageError(
                f"{ref!r} names no version after '=='",
                hint=f"write {name} for the default version, or {name}==VERSION (known: {known})",
            )
        if not version:
            return self.default(name)
        for r in self.recipes[name]:
            if r.version == version.strip():
                return r
        known = ", ".join(r.version for r in self.recipes[name])
        raise UsageError(
            f"recipe {bounds.shown(name)} has no version {bounds.shown(version)}",
            hint=f"known versions: {known}",
        )


_RECIPE_FILE = re.compile(r"[a-z0-9][a-z0-9-]*\.yaml")  # recipe.schema.json's name, as a file name


def _load_dir(root: Path, origin: str, problems: list[Problem]) -> dict[str, list[Recipe]]:
    by_name: dict[str, list[Recipe]] = {}
    for path in sorted(root.glob("*.yaml")):
        if not _RECIPE_FILE.fullmatch(path.name):
            problems.append(
                Problem(
                    message=f"recipe file name {path.name!r} is not NAME.yaml with a recipe name",
                    file=str(root),
                    hint="name recipe files after their recipe: lowercase letters, digits and -",
                )
            )
            continue
        recs, probs = load_recipe_file(path, root, origin)
        problems += probs
        for r in recs:
            by_name.setdefault(r.name, []).append(r)
    return by_name


def load_catalogue(user: Path | list[Path] | None = None, *, builtin: bool = True) -> Catalogue:
    """The built-in catalogue with the user's recipe directories layered over it (a user recipe of the same
    name replaces the built-in one, with all its versions). `user`: the command line's --recipes (or its
    RVPORT_RECIPE_PATH). Every problem of every file is collected and raised together."""
    problems: list[Problem] = []
    hint = "give --recipes (or RVPORT_RECIPE_PATH) an existing directory of NAME.yaml files"
    for d in resources.user_recipe_dirs(user):
        try:  # a missing one, a file, a link leading out of the directory that holds it
            user_dir(d, what="recipe directory", error=RecipeError, hint=hint)
        except RecipeError as e:
            problems.append(Problem(message=e.message, file=str(d), hint=hint))
    if problems:
        raise RecipeError("recipe directory not found", problems=problems)
    dirs = [d.resolve() for d in resources.user_recipe_dirs(user)]
    by_name: dict[str, list[Recipe]] = _load_dir(default_recipes_dir(), BUILTIN, problems) if builtin else {}
    for d in reversed(dirs):  # the first directory given wins
        by_name.update(_load_dir(d, str(d), problems))
    # dependencies: known names, no cycles
    for versions in by_name.values():
        for r in versions:
            for dep in r.depends:
                if dep.partition("==")[0] not in by_name:
                    problems.append(
                        Problem(
                            message=f"{r.ref} depends on unknown recipe {dep!r}",
                            file=str(r.file),
                            line=_depends_line(r),
                            hint=f"known recipes: {', '.join(sorted(by_name))}",
                        )
                    )
    if not problems:
        cycle = _find_cycle(
            {n: {d.partition("==")[0] for r in vs for d in r.depends} for n, vs in by_name.items()}
        )
        if cycle:
            first = by_name[cycle[0]][0]
            problems.append(
                Problem(
                    message=f"dependency cycle: {' -> '.join(cycle)}",
                    file=str(first.file),
                    line=_depends_line(first),
                    hint="remove one of these dependencies",
                )
            )
    if problems:
        n = len(problems)
        where = ", ".join(str(d) for d in dirs) if dirs else "the built-in catalogue"
        raise RecipeError(f"{n} problem{'s' if n > 1 else ''} in the recipes ({where})", problems=problems)
    ordered = {
        n: tuple(sorted(v, key=lambda r: bounds.version(r.version), reverse=True)) for n, v in by_name.items()
    }
    return Catalogue(recipes=ordered, user_dirs=tuple(dirs))


def _depends_line(r: Recipe) -> int | None:
    """The line of `depends:` in the recipe file, read again as the loader reads it (regular, bounded)."""
    try:
        text = read_regular(r.file, limit=MAX_BYTES, error=RecipeError).decode("utf-8", errors="replace")
    except RvportError:
        return None
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("depends:"):
            return i
    return None


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None
