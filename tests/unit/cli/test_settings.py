"""The one table of settings (rvport/cli/settings.py) drives every verb: the Typer app's arguments and
options match it exactly, each verb's values are checked once into its options value (rvport/cli/options.py,
checked against the table by tests/unit/cli/test_options.py), RVPORT_* is read only at the CLI edge."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import typer

from rvport.cli import settings
from rvport.cli.app import app
from rvport.errors import UsageError

ROOT = Path(__file__).resolve().parents[3]


def _commands() -> dict[str, Any]:
    """Every command of the app by its path below `rvport` ("" for the app itself: the global options)."""
    out: dict[str, Any] = {}

    def walk(cmd: Any, path: str) -> None:
        out[path] = cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return out


def _with_params() -> dict[str, Any]:
    return {p: c for p, c in _commands().items() if c.params or not hasattr(c, "commands")}


def test_every_verb_with_parameters_is_a_verb_of_the_table():
    assert set(_with_params()) == set(settings.VERBS)


@pytest.mark.parametrize("verb", settings.VERBS)
def test_the_verb_s_parameters_are_the_table_s(verb):
    """A parameter missing from the table, or drifted from it (flags, default, help, metavar, env), fails."""
    cmd = _with_params()[verb]
    table = [s for s in settings.settings_of(verb) if s.on_command_line]
    assert [p.name for p in cmd.params] == [s.dest for s in table], f"{verb or 'rvport'}: not the table's"
    for p, s in zip(cmd.params, table, strict=True):
        where = f"{verb or 'rvport'} {p.name}"
        assert (p.param_type_name == "argument") == s.argument, where
        if s.argument:
            assert p.required == s.required and p.metavar == s.metavar, where
            assert (p.nargs == -1) == (s.type in (list[str] | None, list[Path], list[str])), where
            continue
        assert tuple(p.opts) + tuple(p.secondary_opts) == s.flags, where
        assert p.help == (s.help or None) and p.metavar == s.metavar and p.hidden == s.hidden, where
        default = p.default if p.default not in ((),) else []
        assert default == (s.default if s.default is not None else default if p.multiple else None), where
        assert p.envvar == (s.env if s.env_shown else None), where


def test_one_verb_never_has_one_flag_twice():
    for verb in settings.VERBS:
        flags = [f for s in settings.settings_of(verb) for f in s.flags]
        assert len(flags) == len(set(flags)), verb


def test_values_are_checked_once_by_their_setting(tmp_path):
    for verb in ("plan", "build", "reproduce"):
        with pytest.raises(UsageError, match=r"--jobs 0: give 1 or more"):
            settings.make_options(verb, {"jobs": 0, "output": tmp_path}, environ={})
        with pytest.raises(UsageError, match="unknown mode 'bogus'") as e:
            settings.make_options(verb, {"mode": "bogus", "output": tmp_path}, environ={})
        assert e.value.hint == "choose auto, native, qemu, cross or accelerated"  # the registry's sentence
    with pytest.raises(UsageError, match="unknown format 'yaml'"):
        settings.make_options("plan", {"format": "yaml", "output": tmp_path}, environ={})
    o = settings.make_options("build", {"jobs": 3, "output": tmp_path, "recipes": ["a", "b"]}, environ={})
    assert o.jobs == 3 and o.recipes == ("a", "b") and o.mode == "auto" and o.profiles == ("rvv256",)


def test_the_environment_defaults_come_from_the_table(tmp_path):
    env = {"RVPORT_BOOTSTRAP": "split", "RVPORT_OFFLINE": "yes", "RVPORT_RECIPE_PATH": f"{tmp_path}:/x"}
    o = settings.make_options("build", {"output": tmp_path}, environ=env)
    assert o.bootstrap == "split" and o.offline is True and o.recipes_dir == (tmp_path, Path("/x"))
    o = settings.make_options("build", {"output": tmp_path, "recipes_dir": [Path("/y")]}, environ=env)
    assert o.recipes_dir == (Path("/y"),)  # the flag wins
    o = settings.make_options("build", {"output": tmp_path}, environ={"RVPORT_OFFLINE": "maybe"})
    assert o.offline is False and o.bootstrap is None


def test_every_rvport_variable_is_in_the_table_and_read_nowhere_else():
    """RVPORT_* is read at the CLI edge: no os.environ / getenv of an RVPORT_ name (or of a constant holding
    one) outside cli/settings.py; the child processes' RVPORT_* (a stage's RVPORT_OUT...) are written, not
    read."""
    read = re.compile(r"""(environ\.get\(|getenv\(|environ\[)\s*(["']RVPORT_\w+|[A-Z_]*ENV\b|ENV\.)""")
    for path in sorted((ROOT / "rvport").rglob("*.py")):
        if path.name != "settings.py":
            assert not read.search(path.read_text()), f"{path}: reads {read.search(path.read_text())[0]}"
    table = {s.env for s in settings.SETTINGS if s.env}
    assert table >= {
        "RVPORT_BOOTSTRAP",
        "RVPORT_CACHE_DIR",
        "RVPORT_MIRROR",
        "RVPORT_OFFLINE",
        "RVPORT_CA_BUNDLE",
        "RVPORT_RECIPE_PATH",
        "RVPORT_UNPACK_LIMIT",
        "RVPORT_ALLOW_EXPIRED_RELEASE",
        "RVPORT_BASES",
        "RVPORT_TOOLCHAINS",
        "RVPORT_DOCKERFILES",
        "RVPORT_VERIFY_THREADS",
    }


def test_the_layers_below_ignore_the_environment_s_rvport_variables(tmp_path, monkeypatch):
    from rvport import resources
    from rvport.sources import fetch_options
    from rvport.sources.cache import default_cache_dir
    from rvport.verify import pool

    for name in ("BASES", "TOOLCHAINS", "DOCKERFILES", "RECIPE_PATH", "CACHE_DIR", "MIRROR"):
        monkeypatch.setenv(f"RVPORT_{name}", str(tmp_path / name))
    monkeypatch.setenv("RVPORT_OFFLINE", "1")
    monkeypatch.setenv("RVPORT_VERIFY_THREADS", "7")
    monkeypatch.setenv("RVPORT_UNPACK_LIMIT", "lots")
    monkeypatch.setattr(resources, "OVERRIDES", {})
    monkeypatch.setattr(pool, "THREADS", None)
    assert resources.directory("bases") == resources.builtin("bases")
    assert resources.user_recipe_dirs() == []
    assert tmp_path not in default_cache_dir().parents
    fo = fetch_options(cache_dir=tmp_path / "c")
    assert fo.mirror is None and not fo.offline
    assert pool.thread_count() == len(os.sched_getaffinity(0))
    # what the command line read is handed down
    resources.configure(bases=tmp_path)
    pool.configure(7)
    assert resources.directory("bases") == tmp_path and pool.thread_count() == 7


def test_mode_help_and_choices_come_from_the_mode_registry(tmp_path):
    from rvport.catalogue import modes

    mode = {s.dest: s for s in settings.SETTINGS}["mode"]
    assert mode.help == modes.help_text() and mode.for_verb("reproduce").help.startswith(modes.help_text())
    for path in (ROOT / "rvport/cli").glob("*.py"):
        assert "qemu, cross or accelerated" not in path.read_text(), path
    for name in modes.choices():
        assert settings.make_options("plan", {"mode": name, "output": tmp_path}, environ={}).mode == name


def test_docs_commands_md_is_generated_from_the_app_and_the_table():
    """docs/commands.md's command and environment sections are what scripts/commands-doc writes (run it)."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader("commands_doc", str(ROOT / "scripts/commands-doc"))
    spec = importlib.util.spec_from_loader("commands_doc", loader)
    assert spec is not None
    doc = importlib.util.module_from_spec(spec)
    loader.exec_module(doc)
    text = (ROOT / "docs/commands.md").read_text()
    assert doc.render(text) == text, "docs/commands.md is stale: run scripts/commands-doc"
    for s in settings.SETTINGS:
        if s.env:
            assert f"| `{s.env}` |" in text, s.env


def test_every_verb_is_registered_the_one_way():
    """Every verb is a function of its options value in COMMANDS (rvport/cli/app.py), registered by one loop:
    no verb module adds commands or groups to an app itself."""
    from rvport.cli import app as app_module

    verbs = [c.verb for c in app_module.COMMANDS]
    assert len(verbs) == len(set(verbs))
    assert {c.verb for c in app_module.COMMANDS} == set(settings.VERBS) - {settings.GLOBAL}
    for path in (ROOT / "rvport/cli").glob("*.py"):
        text = path.read_text()
        if path.name != "app.py":
            found = re.search(r"(?<!settings)\.command\(|add_typer\(|typer\.Typer\(", text)
            assert not found, f"{path.name}: {found[0] if found else ''}"
