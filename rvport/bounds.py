"""Numbers from input, bounded before they are used.

Every number rvport reads from outside (a JSON or YAML integer, a version or a specifier of a recipe, a lock
or a wheel's METADATA, a wheel file name's tags, an environment value) is checked here before Python turns it
into an int, so that an absurd one is a clear refusal instead of a ValueError at Python's 4,300-digit limit
(exit 9), or a loop or list as long as the number (out of memory):

    INT_DIGITS   an integer in a document: at most 20 digits (2**64 has 20; sizes, counts and times fit)
    DIGIT_RUN    a number inside a version, specifier or tag: at most 20 digits (dates and timestamps fit)
    VERSION_LEN  a version: at most 128 characters;  REQUIREMENT_LEN  a requirement line: at most 2,048

The version helpers raise packaging's own exceptions (InvalidVersion, InvalidRequirement,
InvalidSpecifier, InvalidWheelFilename), so every caller's existing refusal covers the absurd value too.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:  # packaging.requirements and .utils import packaging.tags, and that subprocess: imported
    # where they are used, not by the planner's imports
    from packaging.requirements import Requirement
    from packaging.tags import Tag
    from packaging.utils import BuildTag, NormalizedName

INT_DIGITS = 20
DIGIT_RUN = 20
VERSION_LEN = 128
REQUIREMENT_LEN = 2048

_RUN = re.compile(r"[0-9]{%d,}" % (DIGIT_RUN + 1))  # noqa: UP031 - a regex's braces
# a JSON string (skipped) or an integer longer than INT_DIGITS, outside strings
_JSON_LONG_INT = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9]{%d,}' % (INT_DIGITS + 1))  # noqa: UP031


def too_long(text: str, *, limit: int) -> str | None:
    """Why `text` is refused before it is parsed as a version or specifier (None: it is not): over `limit`
    characters, or a number of more than DIGIT_RUN digits."""
    if len(text) > limit:
        return f"it is {len(text)} characters long, over the cap of {limit}"
    if _RUN.search(text):
        return f"it holds a number of more than {DIGIT_RUN} digits"
    return None


def shown(text: str, limit: int = 80) -> str:
    """A value from input as an error shows it: repr, cut to `limit` characters with its length said."""
    text = str(text)
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def version(text: str) -> Version:
    """packaging's Version of `text`, refused (InvalidVersion) when it is too long or holds a number of more
    than DIGIT_RUN digits."""
    why = too_long(str(text), limit=VERSION_LEN)
    if why:
        raise InvalidVersion(f"not a version rvport reads: {why}")
    return Version(text)


def requirement(text: str) -> Requirement:
    """packaging's Requirement of a requirement line (Requires-Dist), refused (InvalidRequirement) when it is
    over REQUIREMENT_LEN or holds a number of more than DIGIT_RUN digits."""
    from packaging.requirements import InvalidRequirement, Requirement

    why = too_long(str(text), limit=REQUIREMENT_LEN)
    if why:
        raise InvalidRequirement(f"not a requirement rvport reads: {why}")
    return Requirement(text)


def specifiers(text: str = "") -> SpecifierSet:
    """packaging's SpecifierSet (a Requires-Python, a requirement's versions), bounded as `requirement`."""
    why = too_long(str(text), limit=REQUIREMENT_LEN)
    if why:
        raise InvalidSpecifier(f"not a specifier rvport reads: {why}")
    return SpecifierSet(text)


def wheel_filename(filename: str) -> tuple[NormalizedName, Version, BuildTag, frozenset[Tag]]:
    """packaging's parse_wheel_filename, refused (InvalidWheelFilename) for a name over 255 characters or
    with a number of more than DIGIT_RUN digits (its version, build tag or a tag such as cp3NNN)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    why = too_long(str(filename), limit=255)
    if why:
        raise InvalidWheelFilename(f"not a wheel file name rvport reads: {why}")
    try:
        return parse_wheel_filename(filename)
    except ValueError as e:  # a build tag packaging could not turn into an int
        if isinstance(e, InvalidWheelFilename):
            raise
        raise InvalidWheelFilename(f"invalid wheel file name {filename!r}: {e}") from None


class NumberTooLong(ValueError):
    """A JSON integer over INT_DIGITS digits; `line` and `column` locate it (1-based)."""

    def __init__(self, line: int, column: int) -> None:
        super().__init__(f"an integer of more than {INT_DIGITS} digits (line {line}, column {column})")
        self.line = line
        self.column = column


def _refuse_long_int(text: str) -> NumberTooLong:
    for m in _JSON_LONG_INT.finditer(text):
        if not m.group(0).startswith('"'):
            line = text.count("\n", 0, m.start()) + 1
            return NumberTooLong(line, m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1)
    return NumberTooLong(1, 1)  # not reached: parse_int saw one


def _parse_int(token: str) -> int:
    if len(token.lstrip("-")) > INT_DIGITS:
        raise NumberTooLong(0, 0)
    return int(token)


def json_loads(text: str) -> object:
    """json.loads with every integer bounded: one of more than INT_DIGITS digits raises NumberTooLong with
    its line and column (json.JSONDecodeError and RecursionError as json.loads raises them)."""
    try:
        return json.loads(text, parse_int=_parse_int)
    except NumberTooLong:
        raise _refuse_long_int(text) from None


def count(value: str, *, name: str, low: int, high: int) -> int:
    """An environment value that must be a whole number from `low` to `high` (ASCII digits, at most as many
    as `high` has); raises ValueError saying what it must be."""
    v = value.strip()
    if not re.fullmatch(r"[0-9]{1,%d}" % len(str(high)), v) or not low <= int(v) <= high:  # noqa: UP031
        shown = v if len(v) <= 40 else v[:40] + f"... ({len(v)} characters)"
        raise ValueError(f"{name}={shown!r}: not a whole number from {low} to {high}")
    return int(v)


def sdist_filename(filename: str) -> tuple[NormalizedName, Version]:
    """packaging's parse_sdist_filename, refused (InvalidSdistFilename) as `wheel_filename` is."""
    from packaging.utils import InvalidSdistFilename, parse_sdist_filename

    why = too_long(str(filename), limit=255)
    if why:
        raise InvalidSdistFilename(f"not an sdist file name rvport reads: {why}")
    return parse_sdist_filename(filename)
