"""rvport/cli/argv.py: bare `rvport` is help, and global switches count after the verb too."""

from __future__ import annotations

from rvport.cli.argv import arrange
from rvport.cli.settings import global_switches

G = ("--debug", "--ci", "--version")


def test_bare_rvport_asks_for_help():
    assert arrange([], G) == ["--help"]


def test_a_global_switch_after_the_verb_moves_before_it():
    assert arrange(["plan", "msgspec", "--debug"], G) == ["--debug", "plan", "msgspec"]
    assert arrange(["--ci", "verify", "artifacts", "x", "--debug"], G) == [
        "--ci",
        "--debug",
        "verify",
        "artifacts",
        "x",
    ]


def test_words_after_a_double_dash_stay_arguments():
    assert arrange(["fetch", "--", "--debug"], G) == ["fetch", "--", "--debug"]


def test_nothing_moves_without_a_global_switch():
    words = ["build", "msgspec", "--profile", "rvv256"]
    assert arrange(words, G) == words


def test_the_switches_are_the_settings_tables_global_booleans():
    assert set(global_switches()) == set(G)


def test_the_cli_takes_debug_after_the_verb_and_bare_rvport_prints_help(tmp_path):
    from tests.fixtures.cli import rvport_process

    cp = rvport_process(["plan", "msgspec", "-o", str(tmp_path / "p"), "--debug"])
    assert cp.returncode == 0, cp.stderr
    bare = rvport_process([])
    assert bare.returncode == 0 and "COMMAND [ARGS]" in bare.stdout and "plan" in bare.stdout, bare.stderr
