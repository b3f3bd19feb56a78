"""Issue #14: git sources pinned by commit and tree digest, from a forge archive, a `git archive` tarball, a
git
bundle or a local clone; one changed byte or mode is exit 4. A tiny git repository made here (no forge)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import textwrap
from pathlib import Path

import pytest

from rvport.catalogue.model import Source, SourceKind
from rvport.catalogue.recipes import load_catalogue
from rvport.errors import ExitCode, RecipeError
from rvport.resources import builtin
from rvport.sources import archive_tree, tree_digest
from tests.fixtures.cli import rvport_process
from tests.fixtures.hosttools import needs

pytestmark = needs("git")

REPO_URL = "https://forge.invalid/acme/tiny"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, str]:
    """A clone with an executable, a symlink, a nested file and a `big/` directory to exclude; two commits."""
    d = tmp_path_factory.mktemp("git") / "tiny"
    d.mkdir()
    git("init", "-q", "-b", "main", cwd=d)
    (d / "README.md").write_text("tiny\n")
    (d / "build.sh").write_text("#!/bin/sh\necho build\n")
    os.chmod(d / "build.sh", 0o755)
    (d / "src").mkdir()
    (d / "src" / "lib.c").write_text("int lib(void) { return 1; }\n")
    os.symlink("../README.md", d / "src" / "README.md")
    (d / "big").mkdir()
    (d / "big" / "blob.bin").write_bytes(os.urandom(4096))
    git("add", "-A", cwd=d)
    git("commit", "-q", "-m", "one", cwd=d)
    (d / "src" / "lib.c").write_text("int lib(void) { return 2; }\n")
    git("commit", "-q", "-am", "two", cwd=d)
    commit = git("rev-parse", "HEAD", cwd=d)
    return d, commit


def source(commit: str, tree: str | None, exclude: tuple[str, ...] = ()) -> Source:
    return Source(
        name="tiny",
        kind=SourceKind.GIT,
        repo=REPO_URL,
        commit=commit,
        sha256=None,
        tree=tree,
        exclude=exclude,
    )


def forge_targz(clone: Path, commit: str, *, change: str | None = None) -> bytes:
    """What a forge serves for /archive/<commit>.tar.gz, made another way than `git archive`: members in
    reverse
    order, other mtimes and owners, a <name>-<commit>/ top directory. `change` alters one byte or one mode."""
    top = f"tiny-{commit}"
    tmp = clone.parent / f"export-{change}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    subprocess.run(f"git -C {clone} archive {commit} | tar -x -C {tmp}", shell=True, check=True)
    if change == "byte":
        p = tmp / "src" / "lib.c"
        p.write_bytes(p.read_bytes().replace(b"2", b"3"))
    elif change == "mode":
        os.chmod(tmp / "build.sh", 0o644)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.GNU_FORMAT) as t:
        for p in sorted(tmp.rglob("*"), reverse=True):
            info = t.gettarinfo(str(p), f"{top}/{p.relative_to(tmp).as_posix()}")
            info.mtime, info.uname, info.gname, info.uid, info.gid = 1234567890, "forge", "forge", 99, 99
            if info.isreg():
                with open(p, "rb") as f:
                    t.addfile(info, f)
            else:
                t.addfile(info)
    shutil.rmtree(tmp)
    return buf.getvalue()


def checkout_digest(clone: Path, exclude: tuple[str, ...] = ()) -> str:
    return tree_digest(clone, (".git", *exclude))


def test_forge_archive_git_archive_and_bundle_have_one_tree_digest(repo, tmp_path):
    clone, commit = repo
    expected = checkout_digest(clone)
    forge = tmp_path / f"tiny-{commit}.tar.gz"
    forge.write_bytes(forge_targz(clone, commit))
    plain = tmp_path / f"tiny-{commit}.tar"
    git("archive", "--format=tar", "-o", str(plain), commit, cwd=clone)  # no top directory
    prefixed = tmp_path / "p.tar.gz"
    git("archive", "--format=tar.gz", f"--prefix=tiny-{commit}/", "-o", str(prefixed), commit, cwd=clone)
    for archive in (forge, plain, prefixed):
        assert archive_tree(archive, name=archive.name) == expected, archive.name
    # a bundle, through rvport's own path: git archive of the bundle's commit
    from rvport.sources import gitsrc

    bundle = tmp_path / "tiny.bundle"
    git("bundle", "create", "-q", str(bundle), "main", cwd=clone)
    assert gitsrc.is_bundle(bundle) and not gitsrc.is_bundle(plain)
    out = tmp_path / "from-bundle.tar.gz"
    assert gitsrc.archive_from_bundle(bundle, source(commit, expected), out, scratch=tmp_path)
    assert archive_tree(out, name=out.name) == expected
    assert not gitsrc.archive_from_bundle(
        bundle, source("0" * 40, expected), tmp_path / "x", scratch=tmp_path
    )


def test_an_earlier_commit_has_another_digest_and_excludes_apply(repo, tmp_path):
    clone, commit = repo
    first = git("rev-parse", "HEAD~1", cwd=clone)
    a = tmp_path / "a.tar"
    git("archive", "-o", str(a), first, cwd=clone)
    assert archive_tree(a, name="a.tar") != checkout_digest(clone)
    b = tmp_path / "b.tar"
    git("archive", "-o", str(b), commit, cwd=clone)
    assert (
        archive_tree(b, name="b.tar", exclude=("big/",))
        == checkout_digest(clone, ("big",))
        != checkout_digest(clone)
    )


# ------------------------------------------------------------------------------------------ the CLI


def write_recipe(root: Path, commit: str, tree: str | None, exclude: tuple[str, ...] = ()) -> Path:
    """A user recipe `tiny` with one git source; no tree digest when `tree` is None (for `rvport pin`)."""
    root.mkdir(parents=True, exist_ok=True)
    tr = f"\n        tree: {tree}" if tree else ""
    ex = f"\n        exclude: [{', '.join(exclude)}]" if exclude else ""
    (root / "tiny.yaml").write_text(
        textwrap.dedent(f"""\
        schema: 1
        name: tiny
        kind: cargo-staticlib
        build: [make]
        versions:
          - version: "1.0"
            sources:
              - name: tiny
                git: {{repo: {REPO_URL}, commit: {commit}}}""")
        + tr
        + ex
        + "\n"
    )
    return root


def run_cli(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own (tests/fixtures/cli.py)."""
    return rvport_process(args, env={**os.environ, "COLUMNS": "300", **env}, cwd=cwd, main="app", timeout=120)


@pytest.mark.parametrize("form", ["forge", "git-archive", "bundle"])
def test_cli_fetches_each_mirror_form_offline(repo, tmp_path, form):
    clone, commit = repo
    tree = checkout_digest(clone, ("big",))
    root = write_recipe(tmp_path / "recipes", commit, tree, ("big/",))
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    if form == "forge":
        (mirror / f"tiny-{commit}.tar.gz").write_bytes(forge_targz(clone, commit))
    elif form == "git-archive":
        git("archive", "-o", str(mirror / f"tiny-{commit}.tar"), commit, cwd=clone)
    else:
        git("bundle", "create", "-q", str(mirror / "tiny.bundle"), "main", cwd=clone)
    env = {"RVPORT_RECIPE_PATH": str(root), "RVPORT_CACHE_DIR": str(tmp_path / "cache")}
    cp = run_cli("fetch", "tiny", "--offline", "--mirror", str(mirror), "--tree", env=env)
    assert cp.returncode == 0, cp.stderr
    assert "mirror" in cp.stdout and tree in cp.stdout
    prepared = next(p for p in (tmp_path / "cache" / "trees").iterdir() if p.is_dir())
    assert (prepared / "src" / "lib.c").read_text() == "int lib(void) { return 2; }\n"
    assert (
        os.access(prepared / "build.sh", os.X_OK)
        and os.readlink(prepared / "src" / "README.md") == "../README.md"
    )
    assert not (prepared / "big").exists()  # excluded: not pinned, so not handed to a build


@pytest.mark.parametrize("change", ["byte", "mode"])
def test_cli_one_changed_byte_or_mode_is_exit_4_naming_both_digests(repo, tmp_path, change):
    clone, commit = repo
    tree = checkout_digest(clone)
    root = write_recipe(tmp_path / "recipes", commit, tree)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    bad = mirror / f"tiny-{commit}.tar.gz"
    bad.write_bytes(forge_targz(clone, commit, change=change))
    actual = archive_tree(bad, name=bad.name)
    assert actual != tree
    env = {"RVPORT_RECIPE_PATH": str(root), "RVPORT_CACHE_DIR": str(tmp_path / "cache")}
    cp = run_cli("fetch", "tiny", "--offline", "--mirror", str(mirror), env=env)
    assert cp.returncode == ExitCode.INTEGRITY, cp.stderr
    assert f"expected tree {tree}" in cp.stderr and f"actual   tree {actual}" in cp.stderr
    assert f"mirror file {bad}" in cp.stderr
    kept = [p for d in ("sha256", "refs", "tmp") for p in (tmp_path / "cache" / d).glob("*")]
    assert kept == []  # nothing that failed its check is kept


def test_cli_fills_a_mirror_from_a_local_clone_then_builds_a_tree_air_gapped(repo, tmp_path):
    clone, commit = repo
    tree = checkout_digest(clone, ("big",))
    root = write_recipe(tmp_path / "recipes", commit, tree, ("big/",))
    mirror = tmp_path / "mirror"
    env = {"RVPORT_RECIPE_PATH": str(root), "RVPORT_CACHE_DIR": str(tmp_path / "c1")}
    cp = run_cli("fetch", "tiny", "--from-git", str(clone), "--to", str(mirror), "--offline", env=env)
    assert cp.returncode == 0, cp.stderr
    assert "clone" in cp.stdout and tree in cp.stdout
    filled = mirror / f"tiny-{commit}.tar.gz"
    assert archive_tree(filled, name=filled.name, exclude=("big",)) == tree
    with tarfile.open(filled) as t:  # excluded paths are not even in the mirror
        assert not [n for n in t.getnames() if "/big/" in n]
    env["RVPORT_CACHE_DIR"] = str(tmp_path / "c2")
    cp = run_cli("fetch", "tiny", "--offline", "--mirror", str(mirror), "--tree", env=env)
    assert cp.returncode == 0, cp.stderr
    assert "tree prepared" in cp.stderr and "mirror" in cp.stdout


def test_cli_from_git_checks_the_tree_and_names_missing_commits(repo, tmp_path):
    clone, commit = repo
    wrong = "sha256:" + "0" * 64
    root = write_recipe(tmp_path / "recipes", commit, wrong)
    env = {"RVPORT_RECIPE_PATH": str(root), "RVPORT_CACHE_DIR": str(tmp_path / "c")}
    cp = run_cli("fetch", "tiny", "--from-git", str(clone), env=env)
    assert cp.returncode == ExitCode.INTEGRITY, cp.stderr
    assert f"expected tree {wrong}" in cp.stderr and f"actual   tree {checkout_digest(clone)}" in cp.stderr
    assert f"git clone {clone}" in cp.stderr
    root = write_recipe(tmp_path / "recipes2", "abcdef01" * 5, wrong)
    cp = run_cli("fetch", "tiny", "--from-git", str(clone), env={**env, "RVPORT_RECIPE_PATH": str(root)})
    assert cp.returncode == ExitCode.SOURCE_UNAVAILABLE, cp.stderr
    assert "is in none of the git repositories" in cp.stderr
    cp = run_cli("fetch", "tiny", "--from-git", str(tmp_path), env=env)
    assert cp.returncode == ExitCode.USAGE and "not a git repository" in cp.stderr


def test_cli_pin_records_a_git_sources_tree_digest(repo, tmp_path):
    clone, commit = repo
    root = write_recipe(tmp_path / "recipes", commit, None)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / f"tiny-{commit}.tar.gz").write_bytes(forge_targz(clone, commit))
    env = {"RVPORT_RECIPE_PATH": str(root), "RVPORT_CACHE_DIR": str(tmp_path / "c")}
    cp = run_cli("pin", "tiny", "--offline", "--mirror", str(mirror), env=env)
    assert cp.returncode == 0, cp.stderr
    assert f"tree {checkout_digest(clone)} written" in cp.stdout
    assert load_catalogue(root).resolve("tiny").sources[0].tree == checkout_digest(clone)


def test_cli_pin_leaves_the_built_in_catalogue_alone(tmp_path):
    """A built-in recipe whose every source is pinned has nothing to pin: nothing is copied or edited (one
    with a source to pin is copied into the user's recipe directory first: cli/test_pin_hint.py)."""
    before = builtin("recipes", "glide-ffi.yaml").read_bytes()
    cp = run_cli(
        "pin",
        "glide-ffi",
        env={"RVPORT_CACHE_DIR": str(tmp_path / "c"), "RVPORT_RECIPE_PATH": ""},
        cwd=tmp_path,
    )
    assert cp.returncode == 0, cp.stderr
    assert "every source is already pinned (by rvport: a built-in recipe)" in cp.stderr
    assert not (tmp_path / "recipes").exists()  # nothing copied
    assert builtin("recipes", "glide-ffi.yaml").read_bytes() == before


@pytest.mark.parametrize(
    "exclude, tree, message",
    [
        ("[../up]", "sha256:" + "a" * 64, "is not a path inside the tree"),
        ("[go/rustbin/]", None, "exclude needs a tree digest"),
    ],
)
def test_bad_excludes_are_recipe_errors_with_lines(tmp_path, exclude, tree, message):
    root = tmp_path / "recipes"
    root.mkdir()
    (root / "tiny.yaml").write_text(
        textwrap.dedent(f"""\
        schema: 1
        name: tiny
        kind: cargo-staticlib
        build: [make]
        versions:
          - version: "1.0"
            sources:
              - name: tiny
                git: {{repo: {REPO_URL}, commit: {"a" * 40}}}
                exclude: {exclude}
        """)
        + (f"        tree: {tree}\n" if tree else "")
    )
    with pytest.raises(RecipeError) as e:
        load_catalogue(root)
    assert any(message in p.message and p.line == 10 for p in e.value.problems), e.value.render()


def test_cli_from_git_with_a_relative_cache_dir(repo, tmp_path):
    """git archive runs in the clone (-C), so the cache's paths must not be relative to the caller's
    directory."""
    clone, commit = repo
    tree = checkout_digest(clone, ("big",))
    root = write_recipe(tmp_path / "recipes", commit, tree, ("big/",))
    cp = run_cli(
        "fetch",
        "tiny",
        "--from-git",
        str(clone),
        "--cache-dir",
        "rel-cache",
        "--offline",
        env={"RVPORT_RECIPE_PATH": str(root)},
        cwd=tmp_path,
    )
    assert cp.returncode == 0, cp.stderr
    assert tree in cp.stdout and (tmp_path / "rel-cache").is_dir()
