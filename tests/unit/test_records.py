"""Figures come from records: every `records/...json` a page of the docs (or the README) names exists, and
every record holds the fields records/README.md promises."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIELDS = {"schema", "command", "commit", "dirty", "date", "machine", "load", "figures"}
_NAMED = re.compile(r"records/[A-Za-z0-9._/-]+\.json")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_record_a_page_names_exists():
    missing = [
        f"{page.relative_to(ROOT)}: {name}"
        for page in _pages()
        for name in sorted(set(_NAMED.findall(page.read_text())))
        if not (ROOT / name).is_file()
    ]
    assert missing == []


def test_every_record_has_the_fields():
    bad = []
    for path in sorted((ROOT / "records").rglob("*.json")):
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or not FIELDS <= doc.keys() or not isinstance(doc["figures"], dict):
            bad.append(str(path.relative_to(ROOT)))
    assert bad == []


def test_write_record_writes_what_the_test_reads(tmp_path, monkeypatch):
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import common
    finally:
        sys.path.remove(str(ROOT / "bench"))
    monkeypatch.setattr(common, "RECORDS", tmp_path)
    path = common.write_record("t", "one", command=["bench/x.py", "--a b"], figures={"ratio": 2.5})
    doc = json.loads(path.read_text())
    assert (
        FIELDS <= doc.keys() and doc["figures"] == {"ratio": 2.5} and doc["command"] == "bench/x.py '--a b'"
    )
    assert path == tmp_path / "t" / "one.json"
