"""Shared install layers (rvport/resources/layers.yaml): package sets that an image of the toolchain template
installs first, in a RUN of its own, when its list names them all, so that images of one base with the same
entries for them share that layer in the engine's build cache. Frozen values; the shipped file is read by the
one document loader against schemas/layers.schema.json."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from rvport.catalogue.document import shipped_table


@dataclass(frozen=True, kw_only=True)
class Layer:
    name: str
    packages: tuple[str, ...]  # Debian package names


@cache
def layers() -> tuple[Layer, ...]:
    doc = shipped_table("layers", "the shared install layers (layers.yaml)")
    return tuple(Layer(name=n, packages=tuple(d["packages"])) for n, d in doc["layers"].items())


def package_name(entry: str) -> str:
    """The package an apt entry names: NAME or NAME=VERSION."""
    return entry.partition("=")[0]


def split(
    entries: tuple[str, ...], table: tuple[Layer, ...] | None = None
) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
    """(the layers `entries` install first, each its own entries sorted, in the table's order; the rest,
    sorted). A layer applies when every one of its packages is named by an entry; an entry goes to the first
    layer that takes it. Duplicate entries are dropped, as apt's command line makes them one."""
    table = layers() if table is None else table
    left = sorted(set(entries))
    out: list[tuple[str, ...]] = []
    for layer in table:
        names = {package_name(e) for e in left}
        if not set(layer.packages) <= names:
            continue
        taken = tuple(e for e in left if package_name(e) in layer.packages)
        out.append(taken)
        left = [e for e in left if e not in taken]
    return tuple(out), tuple(left)
