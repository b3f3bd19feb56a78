"""The serving check's `tests` step, on the host: a recipe's `serve_tests:` (vLLM's own CPU tests) as the
profile runs them, made ready before any container starts, and read back after (docs/vllm-ci.md, "vLLM's test
step"; docs/closure.md, "The serving check").

    prepare     the selection for the profile (plan.planner.serve_tests, pure), the recipe's source tree as
                `rvport build` prepares it (the pinned sdist through the source cache, --mirror and
                --offline; or --source-tree DIR, read and checked as build's is; its main source alone
                when no patch may touch another: tests_recipe), every listed file and
                copied path in it (exit 3, as build's check_files), the test wheels fetched into the
                download cache and checked by sha256; the ones the wheelhouse's environment already has
                (its wheels, Debian's packages) are left as it has them
    mounts      what the container is given: the copied paths and each test wheel read-only, rvport's pytest
                plugin, and the plan (each file's pytest arguments, engine/tests.py's pytest_args)
    read        the exports the script wrote (OUTPUT/logs/tests/: each run's exit status, seconds and JSON
                records per test id), read back with engine/tests.py's bounded reader

Nothing here runs a process: the container runs the step (resources/scripts/serve-check.py, `tests`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rvport import resources
from rvport.catalogue.model import Recipe, TestWheel
from rvport.catalogue.profiles import Profile
from rvport.engine import tests as upstream
from rvport.errors import RvportError, UsageError
from rvport.sources.fetch import FetchOptions

TREE = "/rvport/tree"  # the copied paths, read-only (the script copies them into /tmp before pytest runs)
WHEELS = "/rvport/test-wheels"
PLUGIN_DIR = "/rvport/plugin"
PLAN = "/rvport/tests.json"
EXPORT = "tests"  # OUTPUT/logs/tests/: what the script writes of each pytest run
LOG = "tests.log"


@dataclass(frozen=True, kw_only=True)
class Ready:
    """The tests step, ready to run: what was planned and the files it needs on the host."""

    ref: str  # the recipe, name==version
    planned: Mapping  # plan.planner.serve_tests: files (path, select, timeout), copy, wheels
    tree: Path  # the prepared source tree
    where: str  # how the tree is named in messages
    source: tuple[dict, ...]  # each source of the tree, as result.json names it (Fetched.to_json)
    wheels: Mapping[str, Path] = field(default_factory=dict)  # test wheels to install: file name -> cache
    present: tuple[str, ...] = ()  # test wheels whose distribution the environment already has: not installed
    notes: tuple[str, ...] = ()  # --source-tree's notes (the tree is not pinned)

    def seconds(self) -> int:
        """The most the step may take: each file's timeout."""
        return sum(int(f["timeout"]) for f in self.planned["files"])

    def to_json(self) -> dict:
        return {
            "recipe": self.ref,
            "tree": self.where,
            "sources": list(self.source),
            "wheels": sorted(self.wheels),
            "present": list(self.present),
            "notes": list(self.notes),
        }


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def environment_names(wheels: Iterable[Mapping], debian: Iterable[Mapping]) -> frozenset[str]:
    """The distributions the wheelhouse's environment has (canonical names): its wheels, and the Python
    distributions of its Debian packages (the venv sees them: --system-site-packages)."""
    return frozenset(canonical(str(x["name"])) for x in (*wheels, *debian) if x.get("name"))


def split_wheels(wheels: Iterable[Mapping], have: frozenset[str]) -> tuple[list[dict], list[str]]:
    """(to install, left as they are) of the planned test wheels: one whose distribution the environment
    already has is not installed over it (the tests run in the user's environment, plus what only tests
    need)."""
    from packaging.utils import parse_wheel_filename

    install, present = [], []
    for w in wheels:
        name = canonical(str(parse_wheel_filename(w["file"])[0]))
        if name in have:
            present.append(w["file"])
        else:
            install.append(dict(w))
    return install, present


def local_tree(recipe: Recipe, path: Path, fetch: FetchOptions) -> tuple[Recipe, list[str]]:
    """--source-tree DIR: read (rvport.sources.local.inspect: links out refused, the unpack limits),
    checked to be the recipe's project, put in place of its main source as `rvport build --source-tree`
    does."""
    from rvport.plan.planner import SourceTree, with_source_trees
    from rvport.sources import local

    main = next((s for s in recipe.sources if s.dest is None), None)
    if main is None:
        raise UsageError(
            f"--source-tree {path}: {recipe.ref} has no main source (every source has a dest:)",
            hint="leave --source-tree out: the tests come from the recipe's pinned sources",
        )
    tree = local.inspect(path, limits=fetch.limits)
    note = local.check_project(recipe, main, Path(tree.path))
    recipe, notes = with_source_trees(recipe, [SourceTree(recipe=recipe.name, source=main.name, tree=tree)])
    return recipe, ([note] if note else []) + notes


def tests_recipe(recipe: Recipe) -> Recipe:
    """The recipe as the tests' tree needs it: its main source (the one without dest:) alone, since only
    `copy:` paths of that tree reach the container (vllm's oneDNN at _deps/onednn is neither fetched nor
    unpacked); every source when the recipe has patches or files, which may touch the others."""
    from dataclasses import replace

    if recipe.patches or recipe.files or recipe.lockfiles or recipe.vendor:
        return recipe
    return replace(recipe, sources=tuple(s for s in recipe.sources if s.dest is None))


def prepare(
    recipe: Recipe,
    profile: Profile,
    fetch: FetchOptions,
    *,
    have: frozenset[str],
    source_tree: Path | None = None,
) -> Ready | None:
    """The tests step made ready (the module's docstring); None when the recipe has no `serve_tests:` for
    the profile. Raises before any container: a listed file missing from the tree (RecipeError, exit 3), a
    test wheel that cannot be had or is not its sha256 (exit 4 or 5), a --source-tree that is refused."""
    from rvport.plan.planner import for_profile, serve_tests
    from rvport.sources import fetch_sources
    from rvport.sources.tree import prepare_tree

    planned = serve_tests(recipe, profile)
    if planned is None:
        if source_tree is not None:
            raise UsageError(
                f"--source-tree gives the tests step its tests, and {recipe.ref} has no serve_tests: for "
                f"profile {profile.name}",
                hint="leave --source-tree out",
            )
        return None
    notes: list[str] = []
    if source_tree is not None:
        recipe, notes = local_tree(recipe, source_tree, fetch)
    tree = prepare_tree(tests_recipe(for_profile(recipe, profile.name)), fetch)
    local = next((s.local for s in recipe.sources if s.local is not None and s.dest is None), None)
    where = f"the local tree {local.path}" if local else f"the prepared tree {tree.path}"
    upstream.check_files(recipe.ref, planned, tree.path, where)
    install, present = split_wheels(planned["wheels"], have)
    wheels = [TestWheel(file=w["file"], sha256=w["sha256"]) for w in install]
    got = fetch_sources([w.source() for w in wheels], fetch)
    return Ready(
        ref=recipe.ref,
        planned=planned,
        tree=tree.path,
        where=where,
        source=tuple(f.to_json() for f in tree.fetched),
        wheels={w.file: f.path for w, f in zip(wheels, got, strict=True)},
        present=tuple(present),
        notes=tuple(notes),
    )


def plan_doc(ready: Ready) -> dict:
    """What the script is given (PLAN): each pytest run (engine/tests.py's runs: one for all the files, or
    one per file) with its files, timeout and arguments, the test wheels' paths."""
    return {
        "runs": [
            {
                "paths": r["paths"],
                "timeout": r["timeout"],
                "args": upstream.pytest_args(r, "/tmp/rvport-tree"),
            }
            for r in upstream.runs(ready.planned)
        ],
        "wheels": [f"{WHEELS}/{name}" for name in sorted(ready.wheels)],
    }


def write_plan(ready: Ready, scratch: Path) -> Path:
    """PLAN's file, in a scratch directory of the caller's (mounted read-only)."""
    path = scratch / "tests.json"
    path.write_text(json.dumps(plan_doc(ready), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (scratch / f"{upstream.PLUGIN}.py").write_text(resources.script("pytest-record.py"), encoding="utf-8")
    return path


def _bind(src: Path, dest: str) -> list[str]:
    text = str(src.absolute())
    if ":" in text or "," in text:
        raise UsageError(
            f"{text} cannot be mounted into the container: its path holds ':' or ','",
            hint="use a cache directory (--cache-dir) whose path has neither",
        )
    return ["-v", f"{text}:{dest}:ro"]


def mounts(ready: Ready, scratch: Path) -> list[str]:
    """`docker create` arguments: the plan and the plugin (write_plan, in `scratch`), every copied path of
    the tree and every test wheel, all read-only."""
    out = _bind(scratch / "tests.json", PLAN)
    out += _bind(scratch / f"{upstream.PLUGIN}.py", f"{PLUGIN_DIR}/{upstream.PLUGIN}.py")
    for rel in ready.planned["copy"]:
        out += _bind(ready.tree / rel, f"{TREE}/{rel}")
    for name, path in sorted(ready.wheels.items()):
        out += _bind(path, f"{WHEELS}/{name}")
    return out


def read(ready: Ready, logs: Path) -> dict:
    """The step's record from the script's exports (engine/tests.py's record: per run and per file its exit
    status, counts and seconds, every test id with its outcome, bounded); a hostile export (a link, too big)
    makes a failed record saying so."""
    try:
        rec = upstream.record(
            ready.ref, logs / EXPORT, ready.planned, sorted(ready.wheels), log_path=logs / LOG
        )
    except RvportError as e:
        rec = {
            "wheels": sorted(ready.wheels),
            "files": [],
            "cases": [],
            "counts": {o: 0 for o in upstream.OUTCOMES},
            "status": "failed",
            "reason": f"the test exports could not be read: {e.message}",
            "output": [],
        }
    rec["present"] = list(ready.present)
    return rec


def failure_lines(rec: Mapping) -> list[str]:
    """What a failed tests step says: engine/tests.py's lines (the failing ids, the first 20; each file that
    collected nothing, timed out or could not run), after the counts."""
    c = rec.get("counts") or {}
    head = (
        f"{c.get('passed', 0)} passed, {c.get('failed', 0)} failed, {c.get('error', 0)} errors, "
        f"{c.get('skipped', 0)} skipped"
    )
    return [head, *upstream.failure_lines(rec)]
