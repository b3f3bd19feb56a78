"""A small JSON Schema interpreter for the subset our schema files use, with located errors.

The schema files under rvport/data/ are the single source of truth for document shapes; tests also validate
shipped files with the full `jsonschema` package. This interpreter exists so that the runtime reports every
problem with its file and line (and needs no extra dependency).
"""

from __future__ import annotations

import re
from typing import Any

from rvport.catalogue.yamlsrc import line_of
from rvport.errors import Problem

_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "boolean": bool,
    "number": (int, float),
}


def validate(doc: Any, schema: dict, *, file: str) -> list[Problem]:
    problems: list[Problem] = []
    _check(doc, schema, schema, "", None, None, file, problems)
    return problems


def _resolve(root: dict, node: dict) -> dict:
    while "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        node = target
    return node


def _check(
    value: Any, node: dict, root: dict, path: str, parent: Any, key: Any, file: str, out: list[Problem]
) -> None:
    node = _resolve(root, node)
    line = line_of(parent, key) if parent is not None else getattr(value, "line", None)
    where = path or "(top level)"

    def bad(msg: str, hint: str | None = None) -> None:
        out.append(Problem(message=f"{where}: {msg}", file=file, line=line, hint=hint))

    if "const" in node and value != node["const"]:
        return bad(f"must be {node['const']!r}, got {value!r}")
    if "enum" in node and value not in node["enum"]:
        return bad(f"{value!r} is not one of {', '.join(map(str, node['enum']))}")
    t = node.get("type")
    if t:
        py = _TYPES[t]
        if not isinstance(value, py) or (t == "integer" and isinstance(value, bool)):
            hint = None
            if t == "string" and isinstance(value, (int, float)) and not isinstance(value, bool):
                name = str(key) if isinstance(key, str) else "value"
                hint = f"YAML reads an unquoted all-digit value as a number: quote it ({name}: '...')"
            return bad(
                f"must be a {t}, got {type(value).__name__}" + (f" ({value!r})" if value is not None else ""),
                hint,
            )
    if isinstance(value, str) and "pattern" in node and not re.search(node["pattern"], value):
        hint = None
        if node.get("pattern") == "^[0-9a-f]{64}$":
            hint = "a SHA256 digest is 64 lowercase hex characters; run `rvport pin RECIPE` to record one"
        return bad(f"{value!r} does not match {node['pattern']}", hint)
    if isinstance(value, str) and len(value) < node.get("minLength", 0):
        return bad(f"must be at least {node['minLength']} character(s) long")
    if isinstance(value, int) and "minimum" in node and value < node["minimum"]:
        return bad(f"must be >= {node['minimum']}")
    if isinstance(value, int) and "maximum" in node and value > node["maximum"]:
        return bad(f"must be <= {node['maximum']}")
    if isinstance(value, list):
        if len(value) < node.get("minItems", 0):
            return bad(f"needs at least {node['minItems']} item(s)")
        if "items" in node:
            for i, item in enumerate(value):
                _check(item, node["items"], root, f"{path}[{i}]", value, i, file, out)
    if isinstance(value, dict):
        props = node.get("properties", {})
        for req in node.get("required", []):
            if req not in value:
                bad(f"missing required key {req!r}")
        addl = node.get("additionalProperties", True)
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            if k in props:
                _check(v, props[k], root, sub, value, k, file, out)
            elif addl is False:
                out.append(
                    Problem(
                        message=f"{sub}: unknown key {k!r}",
                        file=file,
                        line=line_of(value, k),
                        hint=f"allowed keys here: {', '.join(sorted(props))}",
                    )
                )
            elif isinstance(addl, dict):
                _check(v, addl, root, sub, value, k, file, out)
        if "oneOf" in node:
            matches = [alt for alt in node["oneOf"] if all(r in value for r in alt.get("required", []))]
            if len(matches) != 1:
                keys = " / ".join("+".join(alt.get("required", [])) for alt in node["oneOf"])
                bad(f"must have exactly one of: {keys}")
