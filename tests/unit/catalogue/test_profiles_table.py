"""The tables rvport ships (profiles.yaml, isa.yaml, manylinux.yaml, tools.yaml) are read by the one document
loader against their schemas: a typo is a located error (file, line, what to do), never a traceback, and the
command line's help, which names the profiles, still works. Which profile is the default and which is
scalar is the table's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from rvport import resources
from rvport.catalogue import profiles, tools
from rvport.errors import ExitCode, RecipeError
from rvport.verify import manylinux
from tests.fixtures.schemas import validate

TABLES = ("profiles", "isa", "manylinux", "tools", "layers")


@pytest.mark.parametrize("name", TABLES)
def test_each_shipped_table_holds_to_its_schema(name):
    schema = json.loads(resources.schema_text(name))
    jsonschema.Draft202012Validator.check_schema(schema)
    validate(yaml.safe_load(resources.text(f"{name}.yaml")), schema)


def test_the_default_and_the_scalar_profile_are_the_tables():
    table = yaml.safe_load(resources.text("profiles.yaml"))
    assert profiles.default_profile().name == table["default"] == "rvv256"
    assert profiles.scalar_profile().name == table["scalar"] == "rv64gc"
    assert profiles.scalar_profile().vlen == 0


def _typo() -> str:
    text = resources.text("profiles.yaml")
    assert "    vlen: 256\n" in text
    return text.replace("    vlen: 256\n", "    vlne: 256\n", 1)


@pytest.fixture
def shipped(monkeypatch, tmp_path):
    """The shipped tables, with the ones a test writes under tmp_path instead; the loaders' caches emptied."""
    real = resources.builtin

    def builtin(*parts: str) -> Path:
        mine = tmp_path.joinpath(*parts)
        return mine if parts and mine.is_file() else real(*parts)

    monkeypatch.setattr(resources, "builtin", builtin)
    caches = (profiles.profile_table, profiles.isa_rules, manylinux.policies, tools.tools)
    for c in caches:
        c.cache_clear()
    yield tmp_path
    for c in caches:
        c.cache_clear()


def test_a_typo_in_profiles_yaml_is_a_located_error(shipped):
    (shipped / "profiles.yaml").write_text(_typo())
    line = _typo().splitlines().index("    vlne: 256") + 1
    with pytest.raises(RecipeError) as e:
        profiles.get_profile("rvv256")
    said = {(p.message, p.line) for p in e.value.problems}
    assert any("unknown key 'vlne'" in m and ln == line for m, ln in said), said
    assert any("missing required key 'vlen'" in m for m, _ in said), said
    assert all(p.file.endswith("profiles.yaml") for p in e.value.problems)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda t: t.replace("default: rvv256", "default: rvv512"), "default: 'rvv512' is not a profile"),
        (lambda t: t.replace("scalar: rv64gc", "scalar: rvv128"), "scalar: 'rvv128' has a vector unit"),
        (lambda t: t.replace('VLLM_RVV_VLEN: "0"', "VLLM_RVV_VLEN: 0"), "must be a string"),
    ],
)
def test_what_the_table_names_is_checked(shipped, edit, said):
    (shipped / "profiles.yaml").write_text(edit(resources.text("profiles.yaml")))
    with pytest.raises(RecipeError) as e:
        profiles.load_profiles()
    assert any(said in p.message and p.line for p in e.value.problems), e.value.problems


def test_a_typo_in_isa_manylinux_and_tools_is_located_too(shipped):
    (shipped / "isa.yaml").write_text(resources.text("isa.yaml").replace("tolerated:", "tolerate:", 1))
    with pytest.raises(RecipeError) as e:
        profiles.isa_rules()
    assert any("unknown key 'tolerate'" in p.message and p.line for p in e.value.problems)
    text = resources.text("manylinux.yaml").replace("system_libraries:", "system_librarys:", 1)
    (shipped / "manylinux.yaml").write_text(text)
    with pytest.raises(RecipeError) as e:
        manylinux.policies()
    assert any("unknown key 'system_librarys'" in p.message and p.line for p in e.value.problems)
    text = resources.text("tools.yaml").replace("sha256: 05fd", "sha256: 5fd", 1)
    (shipped / "tools.yaml").write_text(text)
    with pytest.raises(RecipeError) as e:
        tools.tool("auditwheel")
    line = text.splitlines().index("    sha256: 5fd" + text.split("sha256: 5fd", 1)[1].split("\n", 1)[0]) + 1
    assert any(p.file.endswith("tools.yaml") and p.line == line for p in e.value.problems), e.value.problems


# The command line with a broken profiles.yaml: its help (which names the profiles) is built at import, so it
# runs in a process of its own with the table replaced before anything of rvport's is imported.
_RUN = """
import sys
from pathlib import Path
from rvport import resources
real, table = resources.builtin, Path(sys.argv[1])
resources.builtin = lambda *p: table if p == ("profiles.yaml",) else real(*p)
sys.argv = ["rvport", *sys.argv[2:]]
from rvport.cli.entry import main
main()
"""


def _rvport(table: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _RUN, str(table), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "RVPORT_CACHE_DIR": str(cwd / "cache")},
    )


def test_help_survives_a_broken_table_and_a_command_says_where(tmp_path):
    table = tmp_path / "profiles.yaml"
    table.write_text(_typo())
    line = _typo().splitlines().index("    vlne: 256") + 1
    for args in (("--help",), ("plan", "--help")):
        r = _rvport(table, *args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr + r.stdout
    r = _rvport(table, "plan", "msgspec", "--offline", "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == ExitCode.RECIPE_INVALID, (r.returncode, r.stdout, r.stderr)
    out = r.stdout + r.stderr
    assert "Traceback" not in out and "KeyError" not in out
    assert f"profiles.yaml:{line}" in out and "vlne" in out, out
