"""Figures come from records: every `records/...json` a page of the docs (or the README) names exists, and
every record holds the fields records/README.md promises."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
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


def test_every_docs_page_a_hint_or_script_names_exists():
    """A hint that says `see docs/X.md` sends a user to a page that is there."""
    named = set()
    for path in [*sorted((ROOT / "rvport").rglob("*.py")), *sorted((ROOT / "scripts").iterdir())]:
        if path.is_file():
            named |= {
                (path.name, n) for n in re.findall(r"docs/[a-z0-9-]+\.md", path.read_text(errors="replace"))
            }
    missing = sorted(f"{where}: {name}" for where, name in named if not (ROOT / name).is_file())
    assert missing == []


def test_troubleshooting_covers_what_the_hints_send_users_to_it_for():
    text = (ROOT / "docs" / "troubleshooting.md").read_text()
    for heading in (
        "## Adding bookworm-backports and trixie by hand",
        '## "the Release of Debian sid expired"',
        '## "with a non-docker builder, --load must be supported"',
    ):
        assert heading in text
