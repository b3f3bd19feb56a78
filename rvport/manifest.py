"""Versioned JSON documents (plan, result, reproduce): sorted keys, the version as `schema`, atomic writes,
JSON Schemas."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from rvport import resources
from rvport.errors import UsageError
from rvport.fileio import atomic_write_text

RESULT_SCHEMA = 1


def dumps(doc: dict) -> str:
    return json.dumps(doc, sort_keys=True, indent=2) + "\n"


def write(path: Path, doc: dict) -> Path:
    """Write a document whole; a path that cannot be written is the user's to fix (exit 2), not a bug."""
    try:
        atomic_write_text(path, dumps(doc))
    except OSError as e:
        raise UsageError(
            f"cannot write {path}: {e.strerror or e}",
            hint="choose a directory you can write to, e.g. --output ./out",
        ) from e
    return path


@cache
def schema(name: str) -> dict:
    """The JSON Schema of a document kind: 'plan', 'result', 'reproduce', 'verify', 'base-record', ..."""
    return json.loads(resources.schema_text(name))
