"""Every JSON document rvport writes carries its version under one key, `schema`, and has a JSON Schema in
rvport/resources/schemas/ (the provenance statement is in-toto's: its standard fields are left as they are).
The documents themselves are validated where they are made: plan.json (test_planner, test_cli), result.json
(test_prepare, test_smoke), verify reports (test_verify_logic), bases records (test_baseimage); reproduce.json
and the artifact cache's records here."""

from __future__ import annotations

import json
import zipfile

import jsonschema
import pytest

from rvport import manifest, resources
from rvport.cli.reproduce import report
from rvport.verify.compare import compare_dirs
from tests.fixtures.schemas import validate

# document -> (its schema's name, its version)
DOCUMENTS = {
    "plan.json": ("plan", 1),
    "result.json": ("result", 1),
    "reproduce.json": ("reproduce", 1),
    "verify --json": ("verify", 2),
    "cache_dir/bases/<key>.json": ("base-record", 1),
    "cache_dir/artifacts/<key>/manifest.json": ("artifact-record", 1),
    "wheelhouse.json": ("wheelhouse", 1),
    "serve-check OUTPUT/result.json": ("serve-check", 1),
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
    validate(doc, manifest.schema("reproduce"))
    assert (
        doc["schema"] == 1
        and doc["ok"] is False
        and [i["artifact"] for i in doc["identical"]] == ["lib/same.a"]
    )
    assert {d["artifact"] for d in doc["differences"]} == {"lib/w-1.0-py3-none-any.whl", "only-here.txt"}
    assert next(d for d in doc["differences"] if d["artifact"] == "only-here.txt")["second"] is None
    assert path.read_text() == json.dumps(doc, sort_keys=True, indent=2) + "\n"


def test_the_artifact_cache_record_as_written_is_valid_and_old_or_bad_ones_are_no_entry(tmp_path):
    from rvport.catalogue.profiles import get_profile
    from rvport.engine.runner import ARTIFACT_RECORD_SCHEMA, artifact_record, read_artifact_record
    from rvport.verify import verify_paths

    files = tmp_path / "files"
    (files / "lib").mkdir(parents=True)
    (files / "lib" / "notes.txt").write_text("not an ELF file")
    report = verify_paths([files / "lib" / "notes.txt"], get_profile("rv64gc")).to_json()
    record = artifact_record(
        recipe="tiny==1.0",
        key="a" * 64,
        verify={"ok": True, "reports": [report]},
        smoke={"status": "passed", "output": ["ok"]},
        build_command="docker buildx build --network none .",
        manylinux=[],
        rust=None,
        files=files,
    )
    validate(record, manifest.schema("artifact-record"))
    assert record["schema"] == ARTIFACT_RECORD_SCHEMA == 1 and record["files"][0]["path"] == "lib/notes.txt"
    path = manifest.write(tmp_path / "manifest.json", record)
    assert read_artifact_record(path) == record

    # as written before records and reports had `schema`: read, its reports as this rvport writes them
    old_report = {
        ("schema_version" if k == "schema" else k): (1 if k == "schema" else v) for k, v in report.items()
    }
    old = {k: v for k, v in record.items() if k not in ("schema", "kind")} | {
        "verify": {"ok": True, "reports": [old_report]}
    }
    path.write_text(json.dumps(old))
    read = read_artifact_record(path)
    assert read is not None and read["verify"]["reports"] == [report]
    validate(read["verify"]["reports"][0], manifest.schema("verify"))

    for bad in ("{not json", json.dumps(dict(record, schema=99)), "[]"):
        path.write_text(bad)
        assert read_artifact_record(path) is None  # no cache entry: the stage is built again
    assert read_artifact_record(tmp_path / "none.json") is None
