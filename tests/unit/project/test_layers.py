"""The package's import structure, read from the source (ast, nothing imported): no import cycles, and no
module importing from a higher layer.

Layers, highest first (a module may import its own layer or lower ones):

    6  rvport.__main__
    5  rvport.cli
    4  rvport.engine
    3  rvport.plan
    2  rvport.sources, rvport.verify      (siblings: neither imports the other)
    1  rvport.catalogue
    0  rvport (its __init__), rvport.errors, rvport.proc, rvport.resources, rvport.host, rvport.manifest,
       rvport.target, rvport.fileio, rvport.safetext, rvport.outdir, rvport.vocab, rvport.bounds

Every import counts: at module level, inside functions, and under `if TYPE_CHECKING:`. A module that fits no
layer fails the test, so a new top-level module must be given one here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rvport

PACKAGE = Path(rvport.__file__).resolve().parent

LAYERS: dict[str, int] = {
    "rvport.__main__": 7,
    "rvport.cli": 6,
    "rvport.closure": 5,
    "rvport.engine": 4,
    "rvport.plan": 3,
    "rvport.sources": 2,
    "rvport.verify": 2,
    "rvport.catalogue": 1,
    "rvport": 0,
    "rvport.errors": 0,
    "rvport.proc": 0,
    "rvport.resources": 0,
    "rvport.host": 0,
    "rvport.manifest": 0,
    "rvport.target": 0,
    "rvport.fileio": 0,
    "rvport.safetext": 0,
    "rvport.outdir": 0,
    "rvport.vocab": 0,
    "rvport.bounds": 0,
}
SIBLINGS = {frozenset({"rvport.sources", "rvport.verify"})}


def module_name(path: Path, root: Path = PACKAGE) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def all_modules(root: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The rvport modules `name` imports (`from pkg import mod` names the submodule when there is one)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in known else target)
    return {m for m in out if m == "rvport" or m.startswith("rvport.")} - {name}


def graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    mods = all_modules(root)
    known = set(mods)
    return {name: imported(name, path, known) for name, path in mods.items()}


def layer_of(module: str) -> tuple[str, int]:
    """The longest layer prefix of a module name and its rank."""
    best = max((k for k in LAYERS if module == k or module.startswith(k + ".")), key=len, default=None)
    if best is None:
        raise AssertionError(f"{module} is in no layer")
    if best == "rvport" and module != "rvport":
        raise AssertionError(f"{module} is in no layer: give it one in tests/unit/project/test_layers.py")
    return best, LAYERS[best]


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def violations(g: dict[str, set[str]]) -> list[str]:
    out = []
    for mod, deps in sorted(g.items()):
        mine, rank = layer_of(mod)
        for d in sorted(deps):
            theirs, drank = layer_of(d)
            if drank > rank:
                out.append(f"{mod} (layer {mine}) imports {d} (higher layer {theirs})")
            elif drank == rank and frozenset({mine, theirs}) in SIBLINGS:
                out.append(f"{mod} (layer {mine}) imports its sibling layer's {d}")
    return out


def test_every_module_has_a_layer():
    for mod in all_modules():
        layer_of(mod)


def test_no_import_cycles():
    found = cycles(graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_lower_layer_imports_a_higher_one():
    found = violations(graph())
    assert not found, "\n".join(found)


# ------------------------------------------------------------------------------- the checker itself
def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_the_checker_sees_cycles_and_upward_imports(tmp_path):
    """The same functions on a made-up package: a cycle and an upward import (lazy and TYPE_CHECKING ones too)
    are found, so the two tests above can fail."""
    pkg = tmp_path / "rvport"
    _write(
        pkg,
        {
            "__init__.py": "",
            "errors.py": "from rvport import proc\n",
            "proc.py": "import rvport.errors\n",
            "catalogue/__init__.py": "",
            "catalogue/recipes.py": "def f():\n    from rvport.engine.runner import Runner\n",
            "engine/__init__.py": "",
            "engine/runner.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import rvport.cli\n"
            ),
            "cli/__init__.py": "",
            "cli/app.py": "from rvport.engine import runner\nfrom . import views\n",
            "cli/views.py": "from ..engine.runner import x\n",
            "sources/__init__.py": "from rvport.verify import report\n",
            "verify/__init__.py": "",
            "verify/report.py": "",
        },
    )
    g = graph(pkg)
    assert g["rvport.cli.app"] == {"rvport.engine.runner", "rvport.cli.views"}
    assert g["rvport.cli.views"] == {"rvport.engine.runner"}
    assert cycles(g) == [["rvport.errors", "rvport.proc"]]
    assert violations(g) == [
        "rvport.catalogue.recipes (layer rvport.catalogue) imports rvport.engine.runner (higher layer "
        "rvport.engine)",
        "rvport.engine.runner (layer rvport.engine) imports rvport.cli (higher layer rvport.cli)",
        "rvport.sources (layer rvport.sources) imports its sibling layer's rvport.verify.report",
    ]
    with pytest.raises(AssertionError, match="rvport.extra is in no layer"):
        layer_of("rvport.extra")


# ------------------------------------------------------------------------------- planning is pure
IMPURE = ("rvport.proc", "rvport.sources", "rvport.engine", "subprocess", "requests", "docker")


@pytest.mark.parametrize("module", ["rvport.plan.planner", "rvport.plan.checked"])
def test_importing_the_planner_brings_no_io_modules(module):
    """In a fresh interpreter: importing the planner loads no subprocess door, no fetcher, no HTTP client."""
    import subprocess
    import sys

    code = f"import {module}, sys; print('\\n'.join(sorted(sys.modules)))"
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert module in loaded
    bad = sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in IMPURE))
    assert not bad, f"importing {module} loads {bad}"
