"""The CLI as a user meets it: exit codes, located errors without tracebacks, plan.json on disk."""

from __future__ import annotations

import json
import os
import subprocess

from rvport import manifest
from tests.fixtures.cli import rvport_process
from tests.fixtures.schemas import validate


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """python -m rvport ARGS, in a process of its own (tests/fixtures/cli.py)."""
    return rvport_process(args, timeout=120, env={**os.environ, **(env or {})})


def test_plan_all_writes_every_buildable_recipe_in_dependency_order(tmp_path):
    cp = run("plan", "--all", "--profile", "rvv256", "--tag", "local", "--output", str(tmp_path / "out"))
    assert cp.returncode == 0, cp.stderr
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    validate(doc, manifest.schema("plan"))
    order = doc["order"]
    assert len(order) == 14 and "torch" not in order  # its source is not pinned: left out, said
    assert order.index("apache-tvm-ffi") < order.index("xgrammar")
    assert order.index("glide-ffi") < order.index("semantic-router")
    assert order.index("router-ml-binding") < order.index("semantic-router")
    assert "msgspec==0.23.0" in cp.stdout and "--all leaves out torch==2.14.0" in cp.stdout


def test_unknown_option_profile_and_mode_are_usage_errors(tmp_path):
    assert run("plan", "--bogus").returncode == 2
    cp = run("plan", "msgspec", "--profile", "rvv512", "-o", str(tmp_path))
    assert cp.returncode == 2 and "choose one of: rv64gc, rvv128, rvv256, rvv256-bf16" in cp.stderr
    cp = run("plan", "msgspec", "--mode", "native", "-o", str(tmp_path))  # this host is not riscv64
    if os.uname().machine != "riscv64":
        assert cp.returncode == 2 and "riscv64 host" in cp.stderr
    cp = run("plan", "nosuchrecipe", "-o", str(tmp_path))
    assert cp.returncode == 2 and "known recipes" in cp.stderr


def test_bad_recipes_exit_3_with_every_problem_located_and_no_traceback(tmp_path):
    (tmp_path / "a.yaml").write_text(
        "schema: 1\nname: a\nkind: python-wheel\nversions:\n  - version: '1'\n"
        "    sources:\n      - name: s\n        url: https://example.org/a.tgz\n"
        "        sha256: nothex\n    colour: red\n"
    )
    (tmp_path / "b.yaml").write_text("schema: 1\nname: b\nkind: [oops\n")
    cp = run("plan", "--all", "--recipes", str(tmp_path), "-o", str(tmp_path / "out"))
    assert cp.returncode == 3, cp.stderr
    assert "Traceback" not in cp.stderr
    assert f"{tmp_path / 'a.yaml'}:9" in cp.stderr and "64 lowercase hex" in cp.stderr
    assert f"{tmp_path / 'a.yaml'}:10" in cp.stderr and "unknown key 'colour'" in cp.stderr
    assert f"{tmp_path / 'b.yaml'}:" in cp.stderr and "YAML syntax error" in cp.stderr
    assert not (tmp_path / "out" / "plan.json").exists()


def test_recipes_list_and_show():
    cp = run("recipes", "list")
    assert cp.returncode == 0 and "sentencepiece" in cp.stdout and "0.2.3" in cp.stdout
    cp = run("recipes", "show", "sentencepiece==0.2.3")
    assert cp.returncode == 0 and "FETCHCONTENT_SOURCE_DIR_ABSEIL-CPP" not in cp.stderr
    assert "abseil-cpp" in cp.stdout


def test_version_and_help():
    assert run("--version").stdout.startswith("rvport ")
    assert run("--help").returncode == 0


def test_the_plan_table_shows_an_in_tree_lock():
    """A lock the recipe pins inside the source (`lock:`) is listed with the stage's sources, like a lock
    file."""
    from rich.console import Console

    from rvport.catalogue.profiles import get_profile
    from rvport.catalogue.recipes import load_catalogue
    from rvport.cli.views import plan_table
    from rvport.host import HostFacts
    from rvport.plan.planner import Request, make_plan

    host = HostFacts(arch="x86_64", cpus=2, mem_bytes=8 * 2**30, binfmt_riscv64=True)
    plan = make_plan(
        load_catalogue(), Request(refs=("router-ml-binding",), profile=get_profile("rv64gc")), host
    )
    lock = plan.stages[-1].recipe.lock
    console = Console(width=400, record=True)
    console.print(plan_table(plan))
    assert f"lock {lock.path}: {lock.sha256[:16]}… (in the source)" in console.export_text()
