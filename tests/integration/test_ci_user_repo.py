"""The GitHub action and the GitLab template, run for real in a repository that is not an rvport checkout and
holds only a recipe of its own: rvport is installed from its source into a fresh virtual environment, the
host is prepared by scripts/setup-host, and the user's recipe (layered over the built-in catalogue) is built
under QEMU from a mirror, offline."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, tarball
from .test_build_tiny import RUST, RUST_RECIPE

pytestmark = pytest.mark.integration


def _user_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository holding only rvport-recipes/tinyrust.yaml, and a mirror with its source."""
    repo, mirror = tmp_path / "repo", tmp_path / "mirror"
    (repo / "rvport-recipes").mkdir(parents=True)
    mirror.mkdir()
    fname, sha = tarball("tinyrust-1.0.0", RUST, mirror)
    (repo / "rvport-recipes" / "tinyrust.yaml").write_text(RUST_RECIPE.format(fname=fname, sha=sha))
    return repo, mirror


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment a CI runner gives a job: no virtual environment of ours on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    venv_bin = os.path.dirname(os.path.realpath(sys.executable))
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if os.path.realpath(p) != venv_bin
    )
    env.update(extra)
    return env


def _check_result(out: Path) -> None:
    doc = json.loads((out / "result.json").read_text())
    assert doc["status"] == "ok", doc
    assert [s["recipe"] for s in doc["stages"]] == ["tinyrust"]  # --all: the user's recipes, not the built-in
    assert [a["path"] for a in doc["artifacts"]] == ["tinyrust/libtinyffi.a"]


_IF = re.compile(r"^(always\(\) && )?inputs\.([\w-]+) (==|!=) '(\w+)'$")


def _step_runs(step: dict, inputs: dict[str, str]) -> bool:
    cond = step.get("if")
    if cond is None:
        return True
    m = _IF.match(cond)
    assert m, f"the test does not know the condition {cond!r}"
    return (inputs[m.group(2)] == m.group(4)) == (m.group(3) == "==")


def _expand(value: str, inputs: dict[str, str]) -> str:
    return re.sub(r"\$\{\{ inputs\.([\w-]+) \}\}", lambda m: inputs[m.group(1)], str(value))


def test_github_action_in_a_repository_with_only_its_own_recipe(engine, tmp_path):
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    repo, mirror = _user_repo(tmp_path)
    inputs = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    inputs.update(
        {
            "recipes": "--all",
            "recipe-dirs": "rvport-recipes",
            "mode": "qemu",
            "tag": "useraction",
            "args": f"--mirror {mirror} --offline",
        }
    )
    files = {n: tmp_path / n for n in ("GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")}
    for f in files.values():
        f.write_text("")
    base = _clean_env(
        GITHUB_ACTION_PATH=str(ROOT),
        GITHUB_ACTIONS="true",
        RUNNER_TEMP=str(tmp_path),
        **{k: str(v) for k, v in files.items()},
    )
    for step in action["runs"]["steps"]:
        if not _step_runs(step, inputs):
            continue
        env = dict(base, **{k: _expand(v, inputs) for k, v in (step.get("env") or {}).items()})
        added = [ln for ln in files["GITHUB_PATH"].read_text().splitlines() if ln]
        env["PATH"] = os.pathsep.join([*reversed(added), env["PATH"]])
        cp = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=3000,
        )
        assert cp.returncode == 0, f"step {step['name']!r}:\n{cp.stdout[-3000:]}\n{cp.stderr[-3000:]}"
    outputs = dict(ln.split("=", 1) for ln in files["GITHUB_OUTPUT"].read_text().splitlines())
    assert outputs["result"] == "rvport-out/result.json"
    _check_result(repo / "rvport-out")
    assert "## rvport build: ok" in files["GITHUB_STEP_SUMMARY"].read_text()


def test_gitlab_template_in_a_project_with_only_its_own_recipe(engine, tmp_path):
    job = yaml.safe_load((ROOT / "ci/gitlab/rvport.gitlab-ci.yml").read_text())[".rvport"]
    repo, mirror = _user_repo(tmp_path)
    variables = {k: str(v) for k, v in job["variables"].items()}
    # rvport is cloned from its own repository: here, this checkout's committed state
    variables.update(
        {
            "RVPORT_RECIPES": "--all",
            "RVPORT_RECIPE_PATH": "rvport-recipes",
            "RVPORT_MODE": "qemu",
            "RVPORT_TAG": "usergitlab",
            "RVPORT_ARGS": f"--mirror {mirror} --offline",
            "RVPORT_SOURCE": str(ROOT),
        }
    )
    env = _clean_env(CI_PROJECT_DIR=str(repo), GITLAB_CI="true", **variables)
    env.pop("GITHUB_ACTIONS", None)
    script = "\n".join(job["before_script"] + job["script"])
    cp = subprocess.run(
        ["bash", "-e", "-c", script], cwd=repo, env=env, capture_output=True, text=True, timeout=3000
    )
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert "section_start:" in cp.stderr  # GitLab's collapsed sections
    _check_result(repo / variables["RVPORT_OUTPUT"])
    assert (repo / variables["RVPORT_OUTPUT"] / "junit.xml").is_file()


def test_gitlab_template_outside_rvport_needs_its_source(tmp_path):
    job = yaml.safe_load((ROOT / "ci/gitlab/rvport.gitlab-ci.yml").read_text())[".rvport"]
    repo, _ = _user_repo(tmp_path)
    variables = {k: str(v) for k, v in job["variables"].items()}
    variables["RVPORT_RECIPES"] = "--all"
    cp = subprocess.run(
        ["bash", "-e", "-c", "\n".join(job["before_script"])],
        cwd=repo,
        env=_clean_env(CI_PROJECT_DIR=str(repo), **variables),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cp.returncode == 2 and "set RVPORT_SOURCE" in cp.stderr
