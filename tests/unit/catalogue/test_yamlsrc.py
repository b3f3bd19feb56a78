"""The YAML loader's two parsers: libyaml's (fast) for the files rvport ships, PyYAML's Python parser (the
reference) for every file from outside. Both compose through the same checks, so a shipped file reads to the
same values and lines either way, and hostile YAML is refused the same way by both."""

from __future__ import annotations

import shutil

import pytest
import yaml

from rvport import resources
from rvport.catalogue import yamlsrc

SHIPPED = sorted(p for p in resources.builtin().rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def _shape(x: object) -> object:
    """A value with the lines the loader recorded (LDict, LList), comparable with ==."""
    if isinstance(x, dict):
        lines = (getattr(x, "line", None), getattr(x, "key_lines", None))
        return ("map", *lines, [(_shape(k), _shape(v)) for k, v in x.items()])
    if isinstance(x, list):
        lines = (getattr(x, "line", None), getattr(x, "item_lines", None))
        return ("seq", *lines, [_shape(v) for v in x])
    return (type(x).__name__, x)


def test_pyyaml_here_has_libyaml():
    """The fast parser is there in the test environment (PyYAML's wheels carry libyaml), so the tests below
    compare two parsers, not one with itself."""
    assert yamlsrc._CLoader is not None


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(resources.builtin())))
def test_every_shipped_file_reads_the_same_with_either_parser(path):
    text = path.read_text(encoding="utf-8")
    fast = yaml.load(text, Loader=yamlsrc._CLoader)  # noqa: S506
    assert _shape(fast) == _shape(yaml.load(text, Loader=yamlsrc._Loader))  # noqa: S506
    assert yamlsrc._shipped(path)


def test_there_are_shipped_files_to_compare():
    names = {p.parent.name for p in SHIPPED}
    assert {"recipes", "bases", "toolchains"} <= names and len(SHIPPED) >= 15


@pytest.mark.parametrize(
    "text",
    [
        "schema: 1\n? [a, b]\n: 1\n",
        "schema: 1\n? {a: 1}\n: 1\n",
        "a: 1\nb: &x [1, 2]\nc: *x\n",
        "a: [&x 1]\nb: [*x, *x]\n",
        "a: 1\n\nb: *nowhere\n",
        "a: 1\na: 2\n",
        "x: " + "[" * 5_000 + "]" * 5_000 + "\n",
        "a: " + "{b: " * 5_000 + "1" + "}" * 5_000 + "\n",
        "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v\n",
    ],
    ids=lambda t: repr(t[:30]),
)
def test_hostile_yaml_is_refused_alike_by_both_parsers(text):
    """The checks (anchors, aliases, depth, keys, duplicates) sit in the composer both parsers share, and what
    libyaml refuses first (a flow nested past its own limit) is worded by the Python parser: the same
    refusal, with the same words and line, whichever parser reads first."""
    refusals = []
    for fast in (True, False):
        with pytest.raises(yaml.MarkedYAMLError) as e:
            yamlsrc._parse(text, fast=fast)
        refusals.append((type(e.value), e.value.problem, e.value.problem_mark.line))
    assert refusals[0] == refusals[1]


@pytest.mark.parametrize(
    "text,line",
    [
        ("schema: 1\n? [a, b]\n: 1\n", 1),
        ("a: 1\nb: &x [1, 2]\nc: *x\n", 1),
        ("a: [1]\nb: [*x, *x]\n", 1),
        ("".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v\n", 63),
    ],
    ids=lambda t: repr(t)[:30],
)
def test_the_fast_parser_composes_through_the_checks(text, line):
    with pytest.raises(yamlsrc._Refused) as e:
        yaml.load(text, Loader=yamlsrc._CLoader)  # noqa: S506
    assert e.value.problem_mark.line == line


@pytest.mark.parametrize(
    "text",
    [
        "name: debian\ttrixie\n",  # a tab inside a plain value
        "lock: {path: a/go.sum, sha256: b865b?beff}\n",  # `?` inside a flow mapping's plain value
    ],
    ids=repr,
)
def test_a_file_from_outside_is_read_by_the_python_parser(tmp_path, text):
    """libyaml takes documents the Python parser refuses; a file from outside is read by the Python parser,
    so it is refused as it always was (located), while the same text shipped would be read fast."""
    path = tmp_path / "app.yaml"
    path.write_text(text)
    assert not yamlsrc._shipped(path)
    doc, problem = yamlsrc.load_yaml(path)
    assert doc is None and problem is not None and problem.line == 1, problem
    assert "YAML syntax error" in problem.message and problem.file == str(path)


def test_a_link_to_a_shipped_file_from_outside_is_not_shipped(tmp_path):
    """Only the path decides: a copy outside resources/ is outside; a link into resources/ from outside leads
    out of its own directory, so it is not read at all (fileio's rule for links)."""
    shipped = next(p for p in SHIPPED if p.parent.name == "recipes")
    copy = tmp_path / "copy.yaml"
    shutil.copyfile(shipped, copy)
    link = tmp_path / "link.yaml"
    link.symlink_to(shipped)
    assert not yamlsrc._shipped(copy) and yamlsrc._shipped(link)
    assert _shape(yamlsrc.load_yaml(copy)[0]) == _shape(yamlsrc.load_yaml(shipped)[0])
    doc, problem = yamlsrc.load_yaml(link)
    assert doc is None and problem is not None and "symbolic link leading out" in problem.message


def test_a_shipped_file_the_fast_parser_refuses_is_reported_by_the_python_parser(monkeypatch):
    """Were a shipped file ever refused by libyaml, the refusal would be the Python parser's, located."""
    path = next(p for p in SHIPPED if p.parent.name == "recipes")
    calls = []

    class Refusing(yamlsrc._CLoader):  # type: ignore[misc, valid-type]
        def get_single_data(self):
            calls.append(1)
            raise yaml.scanner.ScannerError(None, None, "refused by the fast parser", None)

    monkeypatch.setattr(yamlsrc, "_CLoader", Refusing)
    doc, problem = yamlsrc.load_yaml(path)
    assert calls and problem is None
    assert _shape(doc) == _shape(yaml.load(path.read_text(encoding="utf-8"), yamlsrc._Loader))  # noqa: S506
