"""YAML loading that remembers where every value came from (file and line), for located errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

try:
    from yaml.cyaml import CParser
except ImportError:  # PyYAML built without libyaml: the Python parser alone
    CParser = None

from rvport import resources
from rvport.errors import Problem, RecipeError, RvportError
from rvport.fileio import read_regular

# Caps on what a document may be (recipes, toolchains, bases come from outside): bytes read, nesting depth.
# Anchors and aliases are refused: an alias repeats a whole subtree, and a few of them make a small file
# expand beyond any cap ("billion laughs").
MAX_BYTES = 4 << 20
MAX_DEPTH = 64


class LDict(dict):
    """A mapping that knows the line of each of its keys."""

    line: int = 0
    key_lines: dict[str, int]


class LList(list):
    line: int = 0
    item_lines: list[int]


class _Refused(yaml.MarkedYAMLError):
    """YAML that parses but that rvport does not read: too deep, anchors and aliases, a key not a value."""


class _Checks(Composer):
    """The composer, refusing what rvport does not read before it is built: an alias or anchor, a node nested
    deeper than MAX_DEPTH. Both loaders below compose their nodes through it."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(
                None,
                None,
                f"alias *{event.anchor} found: anchors and aliases are not accepted",
                event.start_mark,
            )
        if getattr(event, "anchor", None):
            raise _Refused(
                None,
                None,
                f"anchor &{event.anchor} found: anchors and aliases are not accepted",
                event.start_mark,
            )
        if self._depth >= MAX_DEPTH:
            raise _Refused(None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Loader(_Checks, yaml.SafeLoader):
    """PyYAML's own Python parser: the reference, and the one that words every error."""


_CLoader: type | None = None
if CParser is not None:

    class _CLoader(_Checks, CParser, SafeConstructor, Resolver):  # type: ignore[no-redef]
        """libyaml's parser (about 7 times faster), with the same composer, checks, constructors and
        resolvers as _Loader: only the events come from C, so the values and their lines are the same.
        CParser's own composition in C would skip the checks; _Checks (a Composer) comes first in the MRO,
        so get_single_node and compose_node are the Python composer's."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)


def _map(loader: _Loader, node: yaml.MappingNode) -> LDict:
    d = LDict()
    d.line = node.start_mark.line + 1
    d.key_lines = {}
    for knode, vnode in node.value:
        if not isinstance(knode, yaml.ScalarNode):
            raise _Refused(
                None, None, "a mapping key must be a plain value, not a list or mapping", knode.start_mark
            )
        key = loader.construct_object(knode, deep=True)
        try:
            hash(key)
        except TypeError:
            raise _Refused(
                None, None, f"a mapping key must be a plain value, not {type(key).__name__}", knode.start_mark
            ) from None
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


YAML_INT_DIGITS = 128  # more than any number a document holds; an unquoted all-digit digest still loads


def _int(loader: _Loader, node: yaml.ScalarNode) -> int:
    """A YAML integer below 10**YAML_INT_DIGITS, whatever its base: a longer one is refused, located, before
    Python's int() meets it (a 5,000-digit decimal, or `0x` and 5,000 hex digits, which its limit lets
    through). Up to that, a number where a string belongs (an unquoted all-digit sha256) loads, and the
    schema says to quote it."""
    text = str(node.value)
    refused = _Refused(None, None, f"an integer of more than {YAML_INT_DIGITS} digits", node.start_mark)
    if len(text.replace("_", "")) > YAML_INT_DIGITS + 3:  # a sign and a 0x prefix
        raise refused
    value = SafeConstructor.construct_yaml_int(loader, node)
    if abs(value) >= 10**YAML_INT_DIGITS:
        raise refused
    return value


for _cls in (_Loader, _CLoader):
    if _cls is None:
        continue
    _cls.add_constructor("tag:yaml.org,2002:int", _int)
    # Dates stay strings (`date: 2026-11-29`): documents compare and store them as text.
    _cls.yaml_implicit_resolvers = {
        k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
        for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    _cls.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _map)
    _cls.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _seq)


def _parse(text: str, *, fast: bool) -> Any:
    """The document in `text`. With `fast`, libyaml's parser reads it (when PyYAML has it), and a document
    it does not take is read again by the Python parser, which words and locates the refusal. The two
    parsers do not take quite the same documents (libyaml takes a tab, or a `?` inside a flow mapping's
    plain value, where the Python parser stops), so only rvport's own files are read fast:
    tests/unit/catalogue/test_yamlsrc.py proves both parsers read each of them to the same values and
    lines."""
    if fast and _CLoader is not None:
        try:
            return yaml.load(text, Loader=_CLoader)  # noqa: S506 - SafeConstructor
        except Exception:  # noqa: BLE001 - any refusal: the Python parser says what and where
            pass
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass


def _shipped(path: Path) -> bool:
    """Is `path` one of the files rvport ships (resources/), not one from outside?"""
    try:
        return path.resolve().is_relative_to(resources.builtin().resolve())
    except (OSError, RuntimeError):
        return False


def load_yaml(path: Path) -> tuple[Any, Problem | None]:
    """Parse a YAML file; a syntax error becomes a located Problem instead of an exception. Only a regular
    file of at most MAX_BYTES is read."""
    try:
        raw = read_regular(
            path,
            limit=MAX_BYTES,
            what="YAML file",
            error=RecipeError,
            hint="give a regular YAML file of at most 4 MiB",
        )
    except RvportError as e:
        return None, Problem(message=e.message, file=str(path), hint=e.hint)
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
        return _parse(text, fast=_shipped(path)), None
    except _Refused as e:
        return None, Problem(
            message=f"YAML not accepted: {e.problem}",
            file=str(path),
            line=e.problem_mark.line + 1 if e.problem_mark else None,
            hint="write every value out (no &anchors, *aliases or << merges), nest at most "
            f"{MAX_DEPTH} levels, and use plain values as keys",
        )
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
    except (ValueError, TypeError, OverflowError, RecursionError) as e:  # an explicit tag on a bad value
        return None, Problem(
            message=f"YAML value cannot be read: {type(e).__name__}: {str(e)[:200]!r}",
            file=str(path),
            hint="remove explicit tags (!!int, !!binary, ...) and write plain values",
        )


def line_of(container: Any, key: Any) -> int | None:
    if isinstance(container, LDict):
        return container.key_lines.get(key, container.line)
    if isinstance(container, LList) and isinstance(key, int) and key < len(container.item_lines):
        return container.item_lines[key]
    return getattr(container, "line", None)
