"""Every enum in rvport/resources/schemas/*.json that mirrors a Python StrEnum (modes, recipe kinds and output
types, verify's verdicts, ISA levels and artifact kinds: rvport/vocab.py and verify/policy.py) is generated
from it: the test fails when a schema file differs from what the Python enums say, and running this file as a
script writes them:

    python tests/unit/project/test_schema_enums.py

Only the enum lists named in MIRRORS are rewritten, in place, with the rest of each file's text left as it is.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

import pytest

from rvport import resources
from rvport.catalogue import modes
from rvport.catalogue.model import SourceKind
from rvport.engine.compcache import CacheUse
from rvport.verify.policy import IsaLevel, Verdict
from rvport.vocab import ArtifactKind, BuildTree, Kind, Mode, OutputIsa, OutputType, OutputVlen


def _values(enum: type) -> Callable[[], list[str]]:
    return lambda: [m.value for m in enum]


# (schema file, JSON pointer of the enum list) -> the values, in order, read when asked (a test may change the
# mode registry)
MIRRORS: dict[tuple[str, str], Callable[[], list[str]]] = {
    ("plan", "/properties/mode/enum"): _values(Mode),
    ("plan", "/properties/stages/items/properties/mode/enum"): lambda: [m.value for m in modes.buildable()],
    ("reproduce", "/properties/mode/enum"): _values(Mode),
    ("result", "/properties/stages/items/properties/mode/enum"): lambda: [m.value for m in modes.buildable()],
    ("recipe", "/properties/kind/enum"): _values(Kind),
    ("plan", "/properties/stages/items/properties/sources/items/properties/kind/enum"): _values(SourceKind),
    ("recipe", "/properties/modes/items/enum"): lambda: [m.value for m in modes.buildable()],
    ("recipe", "/$defs/output/properties/type/enum"): _values(OutputType),
    ("recipe", "/$defs/output/properties/isa/enum"): _values(OutputIsa),
    ("recipe", "/$defs/output/properties/vlen/enum"): _values(OutputVlen),
    ("recipe", "/properties/build_tree/enum"): _values(BuildTree),
    ("result", "/properties/stages/items/properties/compiler_cache/properties/use/enum"): _values(CacheUse),
    ("reproduce", "/$defs/cache_used/properties/use/enum"): _values(CacheUse),
    ("verify", "/properties/isa/enum"): _values(IsaLevel),
    ("verify", "/$defs/verdict/enum"): _values(Verdict),
    ("verify", "/$defs/artifact/properties/kind/enum"): _values(ArtifactKind),
}


def _path(name: str) -> Path:
    return resources.builtin("schemas", f"{name}.schema.json")


def _at(doc: object, pointer: str) -> object:
    for part in pointer.lstrip("/").split("/"):
        doc = doc[part]  # type: ignore[index]
    return doc


def generated(name: str) -> str:
    """The schema file's text with every mirrored enum list written from its Python enum. A list is found by
    its JSON text, which must occur once in the file; each is checked again through its pointer afterwards."""
    text = _path(name).read_text()
    for (file, pointer), values in MIRRORS.items():
        if file != name:
            continue
        old, new = json.dumps(_at(json.loads(text), pointer)), json.dumps(values())
        if old == new:
            continue
        assert text.count(old) == 1, (
            f"{name}.schema.json: {old} occurs {text.count(old)} times; edit it by hand"
        )
        text = text.replace(old, new)
        assert _at(json.loads(text), pointer) == values(), (name, pointer)
    return text


@pytest.mark.parametrize("name", sorted({n for n, _ in MIRRORS}))
def test_schema_enums_are_the_python_enums(name):
    assert _path(name).read_text() == generated(name), (
        f"{name}.schema.json's enums differ from the Python enums: "
        "run `python tests/unit/project/test_schema_enums.py` to write them"
    )


def test_every_mirror_names_an_enum():
    for name, pointer in MIRRORS:
        assert isinstance(_at(json.loads(_path(name).read_text()), pointer), list), (name, pointer)


def test_a_new_mode_is_written_into_the_schemas(monkeypatch):
    extended = StrEnum("Mode", {**{m.name: m.value for m in Mode}, "THROWAWAY": "throwaway"})
    entry = dataclasses.replace(modes.MODES[Mode.QEMU], mode=extended.THROWAWAY)
    monkeypatch.setattr(modes, "MODES", {**modes.MODES, entry.mode: entry})
    plan = json.loads(generated("plan"))
    assert _at(plan, "/properties/stages/items/properties/mode/enum")[-1] == "throwaway"
    assert _at(json.loads(generated("recipe")), "/properties/modes/items/enum")[-1] == "throwaway"


if __name__ == "__main__":
    for n in sorted({n for n, _ in MIRRORS}):
        text = generated(n)
        if text != _path(n).read_text():
            _path(n).write_text(text)
            print(f"wrote {_path(n)}", file=sys.stderr)
