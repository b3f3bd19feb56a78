"""`rvport lock --output -`: the lock on standard output, whole and loadable, the counts and the advice on
stderr; no file named - is written (the resolver itself is replaced: no network, no Debian index)."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from rvport.catalogue import closure_lock
from rvport.cli.app import app

BUILT_IN = closure_lock.locks_dir() / "vllm-0.33.0-cp314.yaml"


def _fake_generate(calls: list[Path]):
    def generate(cat, recipe, fetch, *, output, **_kw):
        calls.append(output)
        output.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(BUILT_IN, output)  # what the resolver writes: a lock, read back checked
        return closure_lock.load_lock(output)

    return generate


def test_lock_to_standard_output(tmp_path, monkeypatch):
    from rvport.closure import resolve

    calls: list[Path] = []
    monkeypatch.setattr(resolve, "generate", _fake_generate(calls))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["lock", "vllm", "--output", "-", "--offline"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert res.stdout == BUILT_IN.read_text()  # the lock alone, byte for byte
    assert "closure of vllm" in res.stderr and "RVPORT_LOCKS" in res.stderr
    assert calls and not calls[0].exists()  # made in a scratch directory, gone after
    assert list(tmp_path.iterdir()) == []  # no file named -


def test_lock_to_a_file_says_how_to_use_it(tmp_path, monkeypatch):
    from rvport.closure import resolve

    calls: list[Path] = []
    monkeypatch.setattr(resolve, "generate", _fake_generate(calls))
    out = tmp_path / "locks" / "vllm.yaml"
    res = CliRunner().invoke(app, ["lock", "vllm", "-o", str(out), "--offline"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    assert out.read_text() == BUILT_IN.read_text() and calls == [out]
    assert f"RVPORT_LOCKS={tmp_path / 'locks'} rvport plan vllm" in res.stdout
