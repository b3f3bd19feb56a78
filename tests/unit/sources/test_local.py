"""--source-tree: a local tree (a git checkout at any commit, dirty or not, or an unpacked sdist) read, never
written, named by its tree digest and git state, checked as archives are, copied into the prepared tree, and
planned in place of the recipe's pinned source."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from rvport import manifest
from rvport.catalogue.model import PinnedFile, SourceKind
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.cli import handoff, planning
from rvport.cli.options import PlanArgs
from rvport.errors import IntegrityError, UsageError
from rvport.host import HostFacts
from rvport.plan.planner import Request, SourceTree, make_plan
from rvport.sources import local, tree_digest
from rvport.sources.fetch import fetch_options
from rvport.sources.member_checks import Limits
from rvport.sources.tree import prepare_tree
from rvport.sources.treehash import digest, tar_entries
from rvport.verify import provenance
from tests.fixtures.hosttools import needs
from tests.fixtures.schemas import validate

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
needs_git = needs("git")


def _sdist(root: Path, name: str = "msgspec") -> Path:
    top = root / f"{name}-0.23.0"
    (top / "src" / name).mkdir(parents=True)
    (top / "PKG-INFO").write_text(f"Metadata-Version: 2.4\nName: {name}\nVersion: 0.23.0\n")
    (top / "src" / name / "__init__.py").write_text("x = 1\n")
    (top / "run.sh").write_text("#!/bin/sh\n")
    (top / "run.sh").chmod(0o755)
    (top / "tests").mkdir()
    (top / "tests" / "test_a.py").write_text("def test_a():\n    assert True\n")
    os.symlink("../src", top / "tests" / "src-link")
    return top


def _git(repo: Path, *args: str) -> str:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@e",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@e",
        GIT_AUTHOR_DATE="2026-01-02T03:04:05Z",
        GIT_COMMITTER_DATE="2026-01-02T03:04:05Z",
        GIT_CONFIG_NOSYSTEM="1",
        HOME=str(repo.parent),
    )
    return subprocess.run(
        ["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def _checkout(root: Path) -> Path:
    repo = _sdist(root)
    (repo / ".gitignore").write_text("build/\n")
    (repo / "build").mkdir()
    (repo / "build" / "junk.o").write_bytes(b"\0" * 100)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one")
    return repo


def _snapshot(root: Path) -> dict:
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            st = p.lstat()
            data = b"" if p.is_symlink() or p.is_dir() else p.read_bytes()
            out[str(p)] = (st.st_mode, st.st_mtime_ns, st.st_size, hashlib.sha256(data).hexdigest())
    return out


# ------------------------------------------------------------------------------------------ a plain tree


def test_plain_tree_digest_is_the_canonical_one(tmp_path):
    top = _sdist(tmp_path)
    t = local.inspect(top)
    assert t.digest == tree_digest(top)
    assert t.git is None
    assert t.files == 5
    assert t.path == str(top)
    assert t.bytes == sum(p.stat().st_size for p in top.rglob("*") if p.is_file() and not p.is_symlink())


def test_links_out_of_the_tree_are_refused(tmp_path):
    top = _sdist(tmp_path)
    os.symlink("../../etc/passwd", top / "tests" / "out")
    with pytest.raises(IntegrityError, match="outside the tree") as e:
        local.inspect(top)
    assert e.value.exit_code == 4
    (top / "tests" / "out").unlink()
    os.symlink("/etc/passwd", top / "abs")
    with pytest.raises(IntegrityError, match="outside the tree"):
        local.inspect(top)


def test_special_files_are_refused(tmp_path):
    top = _sdist(tmp_path)
    os.mkfifo(top / "fifo")
    with pytest.raises(IntegrityError, match="not a regular file"):
        local.inspect(top)


def test_the_unpack_limits_apply(tmp_path):
    top = _sdist(tmp_path)
    with pytest.raises(IntegrityError, match="more than 3 members, over the unpack limit"):
        local.inspect(top, limits=Limits(max_members=3))
    with pytest.raises(IntegrityError, match="the tree holds more than 10 bytes"):
        local.inspect(top, limits=Limits(max_bytes=10))


def test_not_a_directory(tmp_path):
    with pytest.raises(UsageError, match="not a directory"):
        local.inspect(tmp_path / "nope")


def test_copy_is_the_tree_and_the_tree_is_never_written(tmp_path):
    top = _sdist(tmp_path / "src")
    before = _snapshot(top)
    t = local.inspect(top)
    local.copy_into(t, tmp_path / "copy")
    assert _snapshot(top) == before
    assert tree_digest(tmp_path / "copy") == t.digest
    assert os.readlink(tmp_path / "copy" / "tests" / "src-link") == "../src"
    assert os.access(tmp_path / "copy" / "run.sh", os.X_OK)


def test_a_tree_changed_after_it_was_read_is_refused(tmp_path):
    top = _sdist(tmp_path / "src")
    t = local.inspect(top)
    (top / "tests" / "test_a.py").write_text("changed\n")
    with pytest.raises(IntegrityError, match="changed while rvport used it"):
        local.copy_into(t, tmp_path / "copy")


# ------------------------------------------------------------------------------------------ a git checkout


@needs_git
def test_clean_checkout_has_its_commits_tree_digest(tmp_path):
    repo = _checkout(tmp_path)
    before = _snapshot(repo)
    t = local.inspect(repo)
    assert _snapshot(repo) == before  # not even the index is refreshed
    head = _git(repo, "rev-parse", "HEAD")
    assert t.git is not None and t.git.commit == head and t.git.dirty is False
    # exactly the digest a git source pinned at that commit has: `git archive` of it, read as a stream
    tar = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", "--prefix=x/", head],
        check=True,
        capture_output=True,
    ).stdout
    assert t.digest == digest(tar_entries(io.BytesIO(tar), mode="r|*"))
    assert t.epoch == 1767323045  # the commit's time, for every copied file
    local.copy_into(t, tmp_path / "copy")
    assert not (tmp_path / "copy" / ".git").exists()
    assert not (tmp_path / "copy" / "build").exists()  # ignored files are no part of the tree
    assert {int(p.lstat().st_mtime) for p in (tmp_path / "copy").rglob("*") if not p.is_dir()} == {t.epoch}


@needs_git
@pytest.mark.parametrize("change", ["edit", "add", "remove", "chmod"])
def test_dirty_checkout(tmp_path, change):
    repo = _checkout(tmp_path)
    clean = local.inspect(repo)
    if change == "edit":
        (repo / "src" / "msgspec" / "__init__.py").write_text("x = 2\n")
    elif change == "add":
        (repo / "new.py").write_text("")
    elif change == "remove":
        (repo / "tests" / "test_a.py").unlink()
    else:
        (repo / "run.sh").chmod(0o644)
    t = local.inspect(repo)
    assert t.git is not None and t.git.dirty is True and t.git.commit == clean.git.commit
    assert t.digest != clean.digest
    assert t.digest == tree_digest(_copied(t, tmp_path / "copy"))


def _copied(t, dest: Path) -> Path:
    local.copy_into(t, dest)
    return dest


@needs_git
def test_checkout_without_a_commit(tmp_path):
    repo = _sdist(tmp_path)
    _git(repo, "init", "-q")
    t = local.inspect(repo)
    assert t.git is not None and t.git.commit is None and t.git.dirty is True


@needs_git
def test_a_subdirectory_of_a_checkout_is_a_plain_tree(tmp_path):
    """Git is asked only about the top of a checkout (DIR/.git): a directory inside one is read as it is."""
    repo = _checkout(tmp_path)
    t = local.inspect(repo / "src")
    assert t.git is None and t.digest == tree_digest(repo / "src")


# ------------------------------------------------------------------------------------------ whose project


def test_a_tree_of_another_project_is_refused(tmp_path):
    cat = load_catalogue()
    r = cat.resolve("msgspec")
    top = _sdist(tmp_path, name="orjson")
    with pytest.raises(UsageError, match="is project 'orjson' \\(its PKG-INFO\\), not 'msgspec'") as e:
        local.check_project(r, r.sources[0], top)
    assert e.value.exit_code == 2
    (top / "PKG-INFO").unlink()
    (top / "pyproject.toml").write_text('[project]\nname = "MsgSpec"\n')
    assert local.check_project(r, r.sources[0], top) is None  # names compare canonicalised
    (top / "pyproject.toml").unlink()
    assert "does not say which project it is" in local.check_project(r, r.sources[0], top)


# ------------------------------------------------------------------------------------------ planned


def _options(tmp_path, texts, refs=("msgspec",)):
    return PlanArgs(recipes=tuple(refs), source_tree=tuple(texts))


def test_plan_names_the_tree_and_validates(tmp_path):
    top = _sdist(tmp_path)
    cat = load_catalogue()
    fopts = fetch_options(cache_dir=tmp_path / "cache")
    req = handoff.request(_options(tmp_path, [str(top)]))
    req, notes = planning.with_source_trees(req, [str(top)], cat, fopts)
    assert notes == []
    plan = make_plan(cat, req, X86, locate=lambda s: "local" if s.local else "cache")
    src = plan.stages[0].recipe.sources[0]
    assert src.kind is SourceKind.LOCAL and src.local.path == str(top)
    doc = plan.to_json()
    validate(doc, manifest.schema("plan"))
    s = doc["stages"][0]["sources"][0]
    assert s["kind"] == "local" and s["location"] == "local" and s["sha256"] == "a local tree, not pinned"
    assert s["local"]["tree"] == tree_digest(top)
    assert any("local tree" in w and "no recipe pins" in w for w in doc["warnings"])
    # the stage's key is the tree's, wherever it lies; another tree, another key
    moved = tmp_path / "elsewhere"
    shutil.copytree(top, moved, symlinks=True)
    req2, _ = planning.with_source_trees(handoff.request(_options(tmp_path, [])), [str(moved)], cat, fopts)
    pinned = make_plan(cat, handoff.request(_options(tmp_path, [])), X86)
    assert make_plan(cat, req2, X86).stages[0].key == plan.stages[0].key != pinned.stages[0].key


def test_source_tree_needs_one_recipe_and_a_known_source(tmp_path):
    top = _sdist(tmp_path)
    cat = load_catalogue()
    fopts = fetch_options(cache_dir=tmp_path / "cache")
    two = handoff.request(_options(tmp_path, [], refs=("msgspec", "tiktoken")))
    with pytest.raises(UsageError, match="for one recipe"):
        planning.with_source_trees(two, [str(top)], cat, fopts)
    one = handoff.request(_options(tmp_path, []))
    req, _ = planning.with_source_trees(one, [f"sdist={top}"], cat, fopts)
    assert [t.source for t in req.source_trees] == ["sdist"]
    with pytest.raises(UsageError, match="given twice"):
        planning.with_source_trees(one, [f"sdist={top}", str(top)], cat, fopts)
    bad = dataclasses.replace(
        one, source_trees=(SourceTree(recipe="msgspec", source="nope", tree=local.inspect(top)),)
    )
    with pytest.raises(UsageError, match="does not have"):
        make_plan(cat, bad, X86)


# ------------------------------------------------------------------------------------------ prepared


def _recipe_with_tree(top: Path, patches=()):
    cat = load_catalogue()
    r = cat.resolve("msgspec")
    req = Request(
        refs=("msgspec",),
        profile=get_profile("rvv256"),
        source_trees=(SourceTree(recipe="msgspec", source="sdist", tree=local.inspect(top)),),
    )
    r = make_plan(cat, req, X86).stages[0].recipe
    return dataclasses.replace(r, patches=tuple(patches))


def test_prepared_tree_is_a_copy_with_the_recipes_patches(tmp_path):
    top = _sdist(tmp_path / "src")
    before = _snapshot(top)
    patch = tmp_path / "fix.patch"
    patch.write_text(
        "--- a/src/msgspec/__init__.py\n+++ b/src/msgspec/__init__.py\n@@ -1 +1 @@\n-x = 1\n+x = 3\n"
    )
    pf = PinnedFile(
        path=patch, rel="msgspec/fix.patch", sha256=hashlib.sha256(patch.read_bytes()).hexdigest()
    )
    r = _recipe_with_tree(top, [pf])
    fopts = fetch_options(cache_dir=tmp_path / "cache", offline=True)
    tree = prepare_tree(r, fopts)
    assert (tree.path / "src" / "msgspec" / "__init__.py").read_text() == "x = 3\n"
    assert _snapshot(top) == before
    j = tree.to_json()["sources"][0]
    assert j["from"] == "local" and j["tree"] == tree_digest(top) and j["local"]["path"] == str(top)
    assert prepare_tree(r, fopts).reused


def test_a_patch_that_no_longer_applies_names_the_patch_and_the_file(tmp_path):
    top = _sdist(tmp_path / "src")
    patch = tmp_path / "fix.patch"
    patch.write_text(
        "--- a/src/msgspec/__init__.py\n+++ b/src/msgspec/__init__.py\n@@ -1 +1 @@\n-x = 9\n+x = 3\n"
    )
    pf = PinnedFile(
        path=patch, rel="msgspec/fix.patch", sha256=hashlib.sha256(patch.read_bytes()).hexdigest()
    )
    r = _recipe_with_tree(top, [pf])
    with pytest.raises(IntegrityError, match=r"patch msgspec/fix.patch does not apply") as e:
        prepare_tree(r, fetch_options(cache_dir=tmp_path / "cache", offline=True))
    assert "src/msgspec/__init__.py: Hunk #1 FAILED" in str(e.value)
    assert not list((tmp_path / "cache" / "trees").glob("*/"))  # nothing half-made is kept


# ------------------------------------------------------------------------------------------ provenance


def test_provenance_says_the_source_was_local(tmp_path):
    src = {
        "name": "sdist",
        "from": "local",
        "tree": "sha256:" + "ab" * 32,
        "local": {
            "path": "/w/vllm",
            "tree": "sha256:" + "ab" * 32,
            "git": {"commit": "c" * 40, "dirty": True},
        },
    }
    d = provenance._local_descriptor("vllm/source/sdist", src)
    assert d == {
        "name": "vllm/source/sdist",
        "uri": "file:///w/vllm",
        "digest": {"rvportTreeSha256": "ab" * 32},
        "annotations": {
            "source": "local",
            "pinned": False,
            "path": "/w/vllm",
            "gitCommit": "c" * 40,
            "dirty": True,
        },
    }


def test_tar_of_tree_matches(tmp_path):
    """The copy of an unpacked sdist has the digest of the archive it came from."""
    top = _sdist(tmp_path / "src")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        t.add(top, arcname="msgspec-0.23.0")
    buf.seek(0)
    assert local.inspect(top).digest == digest(tar_entries(buf, mode="r|"))
