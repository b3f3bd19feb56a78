"""docs/architecture.md names every module of the package (read from the files, nothing imported).

A module is named when the page has, in backticks, its path under rvport/ (`rvport/engine/stage.py`), its path
from its package (`modes/cross.py`), or, when no other module shares it, its file name (`stage.py`). A
package's `__init__.py` that holds more than a docstring is named as `<package>/__init__.py`; an empty one is
named with its package (`rvport/plan/`).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import rvport

PACKAGE = Path(rvport.__file__).resolve().parent
DOC = Path(__file__).resolve().parents[3] / "docs" / "architecture.md"


def modules(root: Path = PACKAGE) -> list[Path]:
    """Every module of the package, relative to the package's parent (rvport/...); under resources/, only its
    __init__.py is one (the rest is data, and scripts run in stages or on the host: docs/architecture.md lists
    them under "Where resources live")."""
    return [
        p.relative_to(root.parent)
        for p in sorted(root.rglob("*.py"))
        if p.relative_to(root).parts[0] != "resources"
        or p.relative_to(root).parts == ("resources", "__init__.py")
    ]


def only_a_docstring(path: Path) -> bool:
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body)


def names_in(text: str) -> set[str]:
    """Every backticked span, and every whitespace- or comma-separated word inside one."""
    spans = re.findall(r"`([^`\n]+)`", text)
    return set(spans) | {w.strip("(),:;") for s in spans for w in re.split(r"[\s,]+", s)}


def unnamed(doc_text: str, root: Path = PACKAGE) -> list[str]:
    mods = modules(root)
    names = names_in(doc_text)
    counts = Counter(p.name for p in mods)
    missing = []
    for rel in mods:
        full = rel.as_posix()
        pkg = rel.parent.as_posix()
        if rel.name == "__init__.py":
            if only_a_docstring(root.parent / rel):
                forms = {f"{pkg}/", pkg, full}
            else:
                forms = {
                    full,
                    f"{rel.parent.name}/__init__.py",
                    f"{rel.parent.relative_to('rvport')}/__init__.py",
                }
        else:
            forms = {full, f"{rel.parent.name}/{rel.name}", rel.relative_to("rvport").as_posix()}
            if counts[rel.name] == 1:
                forms.add(rel.name)
        if not forms & names:
            missing.append(full)
    return missing


def test_every_module_is_named_in_the_architecture_page():
    missing = unnamed(DOC.read_text(encoding="utf-8"))
    assert not missing, f"docs/architecture.md does not name: {', '.join(missing)} (say what each one does)"


def test_a_new_module_fails_the_check(tmp_path):
    pkg = tmp_path / "rvport"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""docstring only."""\n')
    (pkg / "engine" / "__init__.py").write_text("")
    (pkg / "engine" / "stage.py").write_text("X = 1\n")
    (pkg / "engine" / "shiny.py").write_text("X = 1\n")
    doc = "`rvport/` and `rvport/engine/`: `stage.py` (the stage)\n"
    assert unnamed(doc, pkg) == ["rvport/engine/shiny.py"]
    assert unnamed(doc + "| `shiny.py` | new |\n", pkg) == []
