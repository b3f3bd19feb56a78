"""A small JSON Schema interpreter for the subset our schema files use, with located errors.

The schema files under rvport/resources/schemas/ are the single source of truth for document shapes; tests
also validate shipped files with the full `jsonschema` package. This interpreter exists so that the runtime
reports every problem with its file and line (and needs no extra dependency).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from rvport import bounds
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


_ASCII_CLASSES = {"\\d": "0-9", "\\w": "A-Za-z0-9_"}


@cache
def pattern(source: str) -> re.Pattern[str]:
    """A schema `pattern` as JSON Schema means it: an ECMA 262 regex, searched for, in which `$` (outside a
    character class) matches only at the very end of the string. Python's `$` also matches before a final
    newline, so "abc\\n" would pass "^[a-z]+$": every such `$` becomes `\\Z`. `\\d` and `\\w` are ASCII, as
    in ECMA 262 (Python's `\\d` also matches other scripts' digits)."""
    out, i, in_class = [], 0, False
    while i < len(source):
        c = source[i]
        if c == "\\":
            esc = source[i : i + 2]
            if esc in _ASCII_CLASSES:  # ECMA's \d and \w are ASCII; Python's match any script's digits
                esc = _ASCII_CLASSES[esc] if in_class else f"[{_ASCII_CLASSES[esc]}]"
            out.append(esc)
            i += 2
            continue
        if in_class:
            in_class = c != "]" or (out[-1] == "[" or out[-1] == "[^")
        elif c == "[":
            in_class = True
            if source[i + 1 : i + 2] == "^":
                out.append("[^")
                i += 2
                continue
        elif c == "$":
            c = r"\Z"
        out.append(c)
        i += 1
    return re.compile("".join(out))


def _is_type(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    return isinstance(value, _TYPES[kind]) and not (kind in ("integer", "number") and isinstance(value, bool))


def validate(doc: Any, schema: dict, *, file: str) -> list[Problem]:
    problems: list[Problem] = []
    _check(doc, schema, schema, "", None, None, file, problems)
    return problems


def _seg(key: Any) -> str:
    """A key as a part of a path in a message: as written, unless it holds a control character."""
    text = str(key)
    return repr(text) if _CONTROL.search(text) else text


def _resolve(root: dict, node: dict) -> dict:
    while "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        node = target
    return node


# a JSON Schema type as a message says it (the article included)
_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
}


def _kind_of(value: Any) -> str:
    """What a YAML or JSON value is, in the words of _TYPE_WORDS (never a Python class name)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "a value of another kind"


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
        kinds = t if isinstance(t, list) else [t]  # a list of types: any of them ("null": None)
        if not any(_is_type(value, k) for k in kinds):
            hint = None
            if "string" in kinds and isinstance(value, (int, float)) and not isinstance(value, bool):
                name = str(key) if isinstance(key, str) else "value"
                hint = f"YAML reads an unquoted all-digit value as a number: quote it ({name}: '...')"
            return bad(
                f"must be {' or '.join(_TYPE_WORDS.get(k, k) for k in kinds)}, got {_kind_of(value)}"
                + (f" ({value!r})" if isinstance(value, (str, int, float)) else ""),
                hint,
            )
    if isinstance(value, str) and len(value) > node.get("maxLength", len(value)):
        return bad(f"is {len(value)} characters long, over the cap of {node['maxLength']}")
    if isinstance(value, str) and "pattern" in node and not pattern(node["pattern"]).search(value):
        hint = None
        if node.get("pattern") == "^[0-9a-f]{64}$":
            hint = "a SHA256 digest is 64 lowercase hex characters; run `rvport pin RECIPE` to record one"
        return bad(
            f"{bounds.shown(value, 200)} does not match {node['pattern']}", hint or node.get("description")
        )
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
        names = node.get("propertyNames", {}).get("pattern")
        for k, v in value.items():
            sub = f"{path}.{_seg(k)}" if path else _seg(k)
            if names is not None and not (isinstance(k, str) and pattern(names).search(k)):
                out.append(
                    Problem(
                        message=f"{sub}: key {k!r} does not match {names}",
                        file=file,
                        line=line_of(value, k),
                        hint=node["propertyNames"].get("description"),
                    )
                )
                continue
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


# C0 controls, DEL and C1 controls: none may stand in a recipe's text (a newline would end a Dockerfile
# instruction, an escape sequence would reach the terminal), except a newline or tab in multi-line text. Nor
# may the invisible characters that reorder or hide text on a terminal (bidi controls, zero-width
# characters, line and paragraph separators, the byte order mark).
_INVISIBLE = "\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f{_INVISIBLE}]")
_CONTROL_MULTILINE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")


def control_characters(doc: Any, *, file: str, multiline: re.Pattern[str] | None = None) -> list[Problem]:
    """Every string of `doc` (keys too) that holds a control character: one Problem each, located. Strings
    whose path (e.g. `versions[0].note`) `multiline` matches whole may hold newlines and tabs."""
    out: list[Problem] = []
    stack: list[tuple[Any, str, Any, Any]] = [(doc, "", None, None)]
    while stack:  # iterative: the depth of a document is not the interpreter's
        value, path, parent, key = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                sub = f"{path}.{_seg(k)}" if path else _seg(k)
                if isinstance(k, str) and _CONTROL.search(k):
                    out.append(_control(k, sub, file, line_of(value, k)))
                stack.append((v, sub, value, k))
        elif isinstance(value, list):
            stack += [(v, f"{path}[{i}]", value, i) for i, v in enumerate(value)]
        elif isinstance(value, str):
            rx = _CONTROL_MULTILINE if multiline and multiline.fullmatch(path) else _CONTROL
            if rx.search(value):
                line = line_of(parent, key) if parent is not None else None
                out.append(_control(value, path or "(top level)", file, line))
    return sorted(out, key=lambda p: (p.line or 0, p.message))


def _control(value: str, where: str, file: str, line: int | None) -> Problem:
    found = sorted({f"U+{ord(c):04X}" for c in _CONTROL.findall(value)})
    return Problem(
        message=f"{where}: holds control characters ({', '.join(found)}): {value!r}"[:300],
        file=file,
        line=line,
        hint="remove them: no control or invisible formatting characters (newline and tab only in "
        "descriptions, notes, scripts and build commands)",
    )
