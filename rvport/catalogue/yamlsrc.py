"""YAML loading that remembers where every value came from (file and line), for located errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rvport.errors import Problem


class LDict(dict):
    """A mapping that knows the line of each of its keys."""

    line: int = 0
    key_lines: dict[str, int]


class LList(list):
    line: int = 0
    item_lines: list[int]


class _Loader(yaml.SafeLoader):
    pass


def _map(loader: _Loader, node: yaml.MappingNode) -> LDict:
    d = LDict()
    d.line = node.start_mark.line + 1
    d.key_lines = {}
    for knode, vnode in node.value:
        key = loader.construct_object(knode, deep=True)
        if key in d:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", knode.start_mark)
        d[key] = loader.construct_object(vnode, deep=True)
        d.key_lines[key] = knode.start_mark.line + 1
    return d


def _seq(loader: _Loader, node: yaml.SequenceNode) -> LList:
    lst = LList(loader.construct_object(n, deep=True) for n in node.value)
    lst.line = node.start_mark.line + 1
    lst.item_lines = [n.start_mark.line + 1 for n in node.value]
    return lst


# Dates stay strings (`date: 2026-11-29`): documents compare and store them as text.
_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _map)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _seq)


def load_yaml(path: Path) -> tuple[Any, Problem | None]:
    """Parse a YAML file; a syntax error becomes a located Problem instead of an exception."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        return None, Problem(message=f"cannot read: {e.strerror}", file=str(path))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, Problem(
            message=f"not UTF-8 text: byte 0x{raw[e.start]:02x} cannot be decoded",
            file=str(path),
            line=raw.count(b"\n", 0, e.start) + 1,
            hint="save the file as UTF-8 (re-encode it, e.g. iconv -f latin1 -t utf-8)",
        )
    try:
        return yaml.load(text, Loader=_Loader), None  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else None
        return None, Problem(
            message=f"YAML syntax error: {e.problem or e}",
            file=str(path),
            line=line,
            hint="fix the YAML syntax at that line (indentation, quoting, a missing colon)",
        )
    except yaml.YAMLError as e:
        return None, Problem(message=f"YAML error: {e}", file=str(path), hint="fix the YAML syntax")


def line_of(container: Any, key: Any) -> int | None:
    if isinstance(container, LDict):
        return container.key_lines.get(key, container.line)
    if isinstance(container, LList) and isinstance(key, int) and key < len(container.item_lines):
        return container.item_lines[key]
    return getattr(container, "line", None)
