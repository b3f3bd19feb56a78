"""The `rvport pin` hints that plan prints for built-in recipes with a source not pinned yet (torch, a
sentencepiece version) are commands that work when followed: run here in-process, each copies the built-in
recipe with the files beside it into ./recipes and pins it there, instead of refusing a built-in recipe or
leaving a copy that cannot load (exit 3). The network is replaced by a mirror of small archives."""

from __future__ import annotations

import io
import re
import shlex
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rvport.catalogue.model import BUILTIN
from rvport.catalogue.recipes import load_catalogue
from rvport.cli.app import app

HINT = re.compile(r"`(rvport pin [^`]+)`")
ENV = {"COLUMNS": "400", "RVPORT_RECIPE_PATH": ""}


def _targz(top: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        data = b"stand-in\n"
        info = tarfile.TarInfo(f"{top}/README")
        info.size, info.mtime = len(data), 0
        t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _plan_hints(args: list[str], out: Path) -> list[str]:
    res = CliRunner().invoke(app, ["plan", *args, "-o", str(out), "--offline"], env=ENV)
    assert res.exception is None, res.output
    return HINT.findall(res.output)


def _unpinned() -> list:
    cat = load_catalogue()
    return [r for vs in cat.recipes.values() for r in vs if any(not s.pinned for s in r.sources)]


def test_plan_names_a_pin_command_for_every_unpinned_built_in_recipe(tmp_path):
    left = _unpinned()
    assert left, "no built-in recipe has a source to pin: this test has nothing to follow"
    hints = set(_plan_hints(["--all"], tmp_path / "all"))
    for r in left:
        hints |= set(_plan_hints([r.ref], tmp_path / r.name))
    assert {f"rvport pin {r.ref}" for r in left} <= hints, hints


@pytest.mark.parametrize("ref", [r.ref for r in _unpinned()])
def test_the_pin_hint_works_when_followed(tmp_path, monkeypatch, ref):
    (hint,) = {h for h in _plan_hints([ref], tmp_path / "plan") if h.endswith(ref)}
    recipe = load_catalogue().resolve(ref)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for s in recipe.sources:
        if not s.pinned:
            (mirror / s.archive_name).write_bytes(_targz(s.name))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    argv = shlex.split(hint)[1:] + ["--offline", "--mirror", str(mirror), "--cache-dir", str(tmp_path / "c")]
    res = CliRunner().invoke(app, argv, env=ENV)
    assert res.exception is None, res.output  # neither "is a built-in recipe" nor a copy that cannot load
    assert "to use it: rvport plan " + ref + " --recipes recipes" in res.stdout
    mine = load_catalogue(work / "recipes").resolve(ref)
    assert mine.origin != BUILTIN and all(s.pinned for s in mine.sources)
    # the copy plans as the user's recipe, its sources pinned: no pin hint for it any more
    assert _plan_hints([ref, "--recipes", str(work / "recipes")], tmp_path / "again") == []
    # followed once more, it refuses the pinned copy in the way and says how to pin that one
    again = CliRunner().invoke(app, argv, env=ENV)
    assert again.exception is not None and "--recipes recipes" in again.exception.hint


def test_a_pin_that_fails_on_the_way_leaves_a_copy_the_next_run_reuses(tmp_path, monkeypatch):
    ref = _unpinned()[0].ref
    monkeypatch.chdir(tmp_path)
    argv = ["pin", ref, "--offline", "--cache-dir", str(tmp_path / "c")]
    first = CliRunner().invoke(app, argv, env=ENV)
    assert first.exception is not None and "--offline forbids the network" in first.exception.message
    second = CliRunner().invoke(app, argv, env=ENV)  # the same failure, not "is there already"
    assert "--offline forbids the network" in second.exception.message
    assert (tmp_path / "recipes" / f"{ref.partition('==')[0]}.yaml").is_file()


def test_into_names_where_the_copy_goes(tmp_path, monkeypatch):
    ref = _unpinned()[0].ref
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["pin", ref, "--into", "elsewhere", "--offline"], env=ENV)
    assert "--offline forbids the network" in res.exception.message  # copied first, then the fetch
    assert (tmp_path / "elsewhere" / f"{ref.partition('==')[0]}.yaml").is_file()
    assert not (tmp_path / "recipes").exists()


def test_every_built_in_recipe_copied_with_its_files_loads_from_the_copy(tmp_path):
    from rvport.sources import copy_builtin

    cat = load_catalogue()
    into = tmp_path / "mine"
    for name in cat.names:
        copy_builtin(cat.recipes[name], into)
    mine = load_catalogue(into)
    assert all(mine.origin(n) != BUILTIN for n in cat.names)
    assert {r.ref for vs in mine.recipes.values() for r in vs} == {
        r.ref for vs in cat.recipes.values() for r in vs
    }
