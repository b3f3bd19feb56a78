"""Every JSON document rvport writes carries its version under one key, `schema`, and has a JSON Schema in
rvport/resources/schemas/ (the provenance statement is in-toto's: its standard fields are left as they are).
The documents themselves are validated where they are made: plan.json (test_planner, test_cli), result.json
(test_prepare, test_smoke), verify reports (test_verify_logic), bases records (test_baseimage); reproduce.json
here."""

from __future__ import annotations

import json
import zipfile

import jsonschema
import pytest

from rvport import manifest, resources
from rvport.cli.reproduce import report
from rvport.verify.compare import compare_dirs

# document -> (its schema's name, its version)
DOCUMENTS = {
    "plan.json": ("plan", 1),
    "result.json": ("result", 1),
    "reproduce.json": ("reproduce", 1),
    "verify --json": ("verify", 2),
    "cache_dir/bases/<key>.json": ("base-record", 1),
}


@pytest.mark.parametrize("document", sorted(DOCUMENTS))
def test_every_document_has_a_schema_with_its_version_under_schema(document):
    name, version = DOCUMENTS[document]
    schema = manifest.schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "schema" in schema["required"] and schema["properties"]["schema"] == {"const": version}


def test_no_schema_file_says_schema_version():
    for path in sorted(resources.builtin("schemas").glob("*.json")):
        assert "schema_version" not in path.read_text(), path.name


def test_reproduce_json_as_written_is_valid(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    for d, byte in ((first, b"1"), (second, b"2")):
        (d / "lib").mkdir(parents=True)
        (d / "lib" / "same.a").write_bytes(b"!<arch>\n")
        with zipfile.ZipFile(d / "lib" / "w-1.0-py3-none-any.whl", "w") as z:
            z.writestr("w/__init__.py", b"x = " + byte)
    (first / "only-here.txt").write_text("x")
    path = manifest.write(
        tmp_path / "reproduce.json", report("rvv256", "auto", ["w"], compare_dirs(first, second))
    )
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, manifest.schema("reproduce"))
    assert (
        doc["schema"] == 1
        and doc["ok"] is False
        and [i["artifact"] for i in doc["identical"]] == ["lib/same.a"]
    )
    assert {d["artifact"] for d in doc["differences"]} == {"lib/w-1.0-py3-none-any.whl", "only-here.txt"}
    assert next(d for d in doc["differences"] if d["artifact"] == "only-here.txt")["second"] is None
    assert path.read_text() == json.dumps(doc, sort_keys=True, indent=2) + "\n"
