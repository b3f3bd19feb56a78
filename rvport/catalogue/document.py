"""The one located YAML-document loader: every YAML file rvport reads into values (recipes, bases, toolchains,
closure locks, and the tables it ships: profiles, isa, manylinux) goes through `load_document`.

A document is read through yamlsrc.load_yaml (the one door: a regular file, bounded, every value with its
line), must be a mapping, and is checked against its JSON schema (rvport/resources/schemas/) and for control
characters, each problem with its file and line. What a document means is its own module's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

from rvport import resources
from rvport.catalogue.schema import control_characters, validate
from rvport.catalogue.yamlsrc import LDict, line_of, load_yaml
from rvport.errors import Problem, RecipeError


@cache
def schema(name: str) -> dict:
    """rvport/resources/schemas/NAME.schema.json."""
    return json.loads(resources.schema_text(name))


def load_document(
    path: Path,
    schema_name: str,
    *,
    what: str,
    hint: str,
    multiline: re.Pattern[str] | None = None,
    named: bool = False,
    before: Callable[[LDict], list[Problem]] | None = None,
) -> tuple[LDict | None, list[Problem]]:
    """The document at `path`: (its mapping, []) or (None, every problem found), each problem located.

    `what` names the document in a message ("a recipe file"), `hint` says where its format is described.
    `multiline`: the paths of the strings that may hold newlines and tabs (schema.control_characters).
    `before`: checks the mapping must pass before its schema is asked (a file of another kind).
    With `named`, its `name:` must be its file's name: that problem comes with the document, so that the
    caller may collect more."""
    file = str(path)
    doc, problem = load_yaml(path)
    if problem:
        return None, [problem]
    if not isinstance(doc, dict):
        return None, [Problem(message=f"{what} must be a YAML mapping", file=file, line=1, hint=hint)]
    if before is not None:
        problems = before(doc)
        if problems:
            return None, problems
    problems = validate(doc, schema(schema_name), file=file)
    said = {p.message.split(": ", 1)[0] for p in problems}  # a value the schema refused is not named twice
    problems += [
        p
        for p in control_characters(doc, file=file, multiline=multiline)
        if p.message.split(": ", 1)[0] not in said
    ]
    if problems:
        return None, problems
    if named and doc["name"] != path.stem:
        noun = what.split()[1] if what.startswith(("a ", "an ")) else what
        return doc, [
            Problem(
                message=f"{noun} name {doc['name']!r} differs from its file name {path.stem!r}",
                file=file,
                line=line_of(doc, "name"),
                hint=f"rename the file to {doc['name']}.yaml",
            )
        ]
    return doc, []


def shipped_table(name: str, what: str) -> LDict:
    """One of the tables rvport ships (resources/NAME.yaml), read by the one document loader against its
    schema (schemas/NAME.schema.json). A table that does not hold is a RecipeError with every problem
    located, never a traceback."""
    path = resources.builtin(f"{name}.yaml")
    doc, problems = load_document(
        path, name, what=what, hint=f"see rvport/resources/schemas/{name}.schema.json for its fields"
    )
    if doc is None:
        n = len(problems)
        raise RecipeError(
            f"{n} problem{'s' if n > 1 else ''} in {path.name}, which rvport ships",
            problems=problems,
            hint="restore the file as the release has it (reinstall rvport), or fix it where each problem "
            "says",
        )
    return doc
