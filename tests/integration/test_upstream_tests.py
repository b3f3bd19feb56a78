"""A recipe's upstream tests on the real engine: msgspec's own tests from its sdist run on the wheel it built
(rv64gc, QEMU), one JUnit case per id; the same recipe on a local tree (--source-tree, an unpacked copy of
the sdist) with a test that fails is exit 7 naming that id, and one without a listed test file is exit 3
before any image is made. The tree is never written."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rvport.catalogue.recipes import load_catalogue
from rvport.sources import fetch_options, fetch_source
from tests.integration.conftest import rvport

pytestmark = [pytest.mark.integration, pytest.mark.network]

PROFILE = "rv64gc"


def _snapshot(root: Path) -> dict:
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        data = p.read_bytes() if p.is_file() and not p.is_symlink() else b""
        out[str(p)] = (st.st_mode, st.st_mtime_ns, hashlib.sha256(data).hexdigest())
    return out


@pytest.fixture(scope="module")
def sdist_tree(engine, tmp_path_factory) -> Path:
    """msgspec's pinned sdist, fetched and unpacked as a user would have it."""
    root = tmp_path_factory.mktemp("msgspec-tree")
    r = load_catalogue().resolve("msgspec")
    got = fetch_source(r.sources[0], fetch_options(cache_dir=root / "fetch"))
    with tarfile.open(got.path) as t:
        t.extractall(root / "unpacked", filter="data")
    (top,) = (root / "unpacked").iterdir()
    return top


@pytest.fixture(scope="module")
def passed(engine, tmp_path_factory):
    root = tmp_path_factory.mktemp("tests-pass")
    out, junit = root / "out", root / "junit.xml"
    # an artifact cache of its own, so that the tests run in this run (a cached stage reports them again)
    cp = rvport(
        "build",
        "msgspec",
        "--profile",
        PROFILE,
        "--output",
        str(out),
        "--junit",
        str(junit),
        "--cache-dir",
        str(root / "cache"),
    )
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    return json.loads((out / "result.json").read_text()), junit


def test_msgspecs_own_tests_pass_on_its_wheel(passed):
    doc, junit = passed
    t = doc["stages"][0]["tests"]
    assert t["status"] == "passed"
    assert [f["status"] for f in t["files"]] == ["passed", "passed"]
    assert t["counts"]["passed"] > 0 and t["counts"]["failed"] == 0
    ids = {c["id"] for c in t["cases"]}
    assert any(i.startswith("tests/unit/test_raw.py::") for i in ids)
    assert any(i.startswith("tests/unit/test_msgpack.py::TestEncodeFunction") for i in ids)
    suite = next(s for s in ET.parse(junit).getroot() if s.get("name", "").startswith("upstream tests of"))
    assert {c.get("name") for c in suite} == ids
    assert doc["stages"][0]["timings"]["tests"] > 0


def test_a_kernel_bug_in_a_local_tree_is_caught_by_the_projects_own_test(sdist_tree, tmp_path):
    """A mutated tree, as a pull request could make it: an off-by-one in msgspec's C code (Raw's equality
    compares one byte too few). rvport's smoke test does not use Raw and passes; msgspec's own
    test_raw_comparison fails, and the run says so (exit 7, the id named)."""
    tree = tmp_path / "msgspec"
    shutil.copytree(sdist_tree, tree, symlinks=True)
    core = tree / "src" / "msgspec" / "_core.c"
    text = core.read_text()
    good = "(memcmp(self->buf, raw_other->buf, self->len) == 0)"
    assert text.count(good) == 1
    core.write_text(
        text.replace(good, "(memcmp(self->buf, raw_other->buf, self->len ? self->len - 1 : 0) == 0)")
    )
    before = _snapshot(tree)
    out = tmp_path / "out"
    cp = rvport(
        "build",
        "msgspec",
        "--profile",
        PROFILE,
        "--source-tree",
        str(tree),
        "--output",
        str(out),
        "--junit",
        str(tmp_path / "junit.xml"),
    )
    assert cp.returncode == 7, cp.stdout[-4000:] + cp.stderr[-4000:]
    assert "FAILED tests/unit/test_raw.py::test_raw_comparison" in cp.stdout + cp.stderr
    doc = json.loads((out / "result.json").read_text())
    s = doc["stages"][0]
    assert s["status"] == "failed" and s["smoke"]["status"] == "passed"
    failed = [c["id"] for c in s["tests"]["cases"] if c["outcome"] == "failed"]
    assert failed == ["tests/unit/test_raw.py::test_raw_comparison"]
    assert s["sources"][0]["from"] == "local" and s["sources"][0]["local"]["path"] == str(tree)
    assert _snapshot(tree) == before
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    case = next(c for suite in junit for c in suite if c.get("name") == failed[0])
    assert case.find("failure") is not None


def test_a_listed_test_file_missing_from_the_tree_is_named_before_any_image(sdist_tree, tmp_path):
    tree = tmp_path / "msgspec"
    shutil.copytree(sdist_tree, tree, symlinks=True)
    os.unlink(tree / "tests" / "unit" / "test_msgpack.py")
    cp = rvport(
        "build", "msgspec", "--profile", PROFILE, "--source-tree", str(tree), "--output", str(tmp_path / "o")
    )
    assert cp.returncode == 3, cp.stdout[-4000:] + cp.stderr[-4000:]
    assert "tests/unit/test_msgpack.py" in cp.stdout + cp.stderr
