"""The programs a recipe runs on the host (rvport/catalogue/hosttools.py): which recipes need which, at what
least version, how a host program's version is read, and what doctor and plan say when it falls short."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from rvport.catalogue import hosttools
from rvport.catalogue.recipes import load_catalogue
from rvport.host import ToolFound, tool_version
from tests.unit.catalogue.test_recipes import GOOD, problems, write


@pytest.fixture(scope="module")
def cat():
    return load_catalogue()


def test_the_router_needs_the_go_its_go_mod_names_and_its_bindings_need_cargo(cat):
    (go,) = hosttools.needs(cat.resolve("semantic-router"))
    assert go.tool == "go" and go.minimum == "1.24.1" and go.recipe == "semantic-router==0.3.0"
    assert go.wanted == "go >= 1.24.1" and "`go mod vendor` (vendor: go)" in go.why
    (cargo,) = hosttools.needs(cat.resolve("glide-ffi"))
    assert cargo.tool == "cargo" and cargo.minimum is None
    assert hosttools.needs(cat.resolve("msgspec")) == []  # nothing runs on the host for it
    assert [n.tool for n in hosttools.needs(cat.resolve("vllm"))] == ["gpgv"]  # its Debian pins


def test_a_pinned_go_needs_a_host_go_that_can_switch_and_the_greater_least_version_wins(cat):
    r = cat.resolve("semantic-router")
    pinned = dataclasses.replace(r, toolchain=dataclasses.replace(r.toolchain, go="go-1.25.14", host=()))
    (go,) = hosttools.needs(pinned)
    assert go.minimum == "1.21" and any("GOTOOLCHAIN" in w for w in go.why)
    both = dataclasses.replace(
        pinned, toolchain=dataclasses.replace(pinned.toolchain, host=(("go", "1.22.3"),))
    )
    assert hosttools.needs(both)[0].minimum == "1.22.3"  # 1.22.3 > 1.21, compared as numbers
    assert hosttools.version_tuple("1.10") > hosttools.version_tuple("1.9.9")


def test_short_of_names_the_recipe_the_version_needed_and_the_version_found(cat):
    (go,) = hosttools.needs(cat.resolve("semantic-router"))
    old = hosttools.short_of(go, ToolFound(path="/usr/bin/go", version="1.19.8"))
    assert old is not None and old.startswith("semantic-router==0.3.0 needs go >= 1.24.1 on the host")
    assert old.endswith("the host has go 1.19.8 (/usr/bin/go)")
    assert "the host has no go" in hosttools.short_of(go, ToolFound(path=None))
    assert "cannot be told" in hosttools.short_of(go, ToolFound(path="/x/go"))
    assert hosttools.short_of(go, ToolFound(path="/usr/bin/go", version="1.24.1")) is None
    assert hosttools.short_of(go, ToolFound(path="/usr/bin/go", version="1.25")) is None


def test_the_install_hint_names_the_debian_package_only_where_it_is_recent_enough():
    hint = hosttools.install_hint("go", "1.24.1")
    assert "Go >= 1.24.1" in hint and "apt-get install -t trixie golang-1.24-go" in hint
    assert "PATH=/usr/lib/go-1.24/bin:$PATH" in hint
    later = hosttools.install_hint("go", "1.26.0")
    assert "Go >= 1.26.0" in later and "golang-1.24-go" not in later  # trixie's would not do
    assert "apt-get install cargo" in hosttools.install_hint("cargo", None)


def _program(bindir: Path, name: str, prints: str, rc: int = 0) -> None:
    p = bindir / name
    p.write_text(f"#!/bin/sh\necho '{prints}'\nexit {rc}\n")
    p.chmod(0o755)


def test_tool_version_reads_the_version_a_program_prints(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/usr/bin{os.pathsep}/bin")
    go = hosttools.TOOLS["go"]
    _program(tmp_path, "go", "go version go1.19.8 linux/amd64")
    assert tool_version("go", go.version_args, go.version) == ToolFound(
        path=str(tmp_path / "go"), version="1.19.8"
    )
    _program(tmp_path, "go", "go version go1.24.1 linux/riscv64")
    assert tool_version("go", go.version_args, go.version).version == "1.24.1"
    _program(tmp_path, "go", "go version go1.24.1", rc=1)  # a program that fails has no version
    assert tool_version("go", go.version_args, go.version) == ToolFound(path=str(tmp_path / "go"))
    cargo = hosttools.TOOLS["cargo"]
    home = tmp_path / "home"
    (home / ".cargo/bin").mkdir(parents=True)
    _program(home / ".cargo/bin", "cargo", "cargo 1.90.0 (840b83a10 2025-07-30)")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    found = tool_version("cargo", cargo.version_args, cargo.version, also=cargo.also)  # rustup's place
    assert found == ToolFound(path=str(home / ".cargo/bin/cargo"), version="1.90.0")
    assert tool_version("gpgv", ("--version",), hosttools.TOOLS["gpgv"].version) == ToolFound(path=None)


def test_a_recipe_may_name_only_programs_rvport_checks_in_toolchain_host(tmp_path):
    text = GOOD.format(name="a", digest="a" * 64, extra="").replace(
        "build: [echo build]\n", "toolchain:\n  host: {go: 1.24.1, make: '4.3'}\nbuild: [echo build]\n"
    )
    write(tmp_path, "a", text=text)
    (p,) = problems(tmp_path)
    assert p.file.endswith("a.yaml") and p.line == 5 and "'make'" in p.message, (p.line, p.message)
    assert "go, cargo, gpgv" in p.hint
    write(tmp_path, "a", text=text.replace(", make: '4.3'", ""))
    assert load_catalogue(tmp_path).resolve("a").toolchain.host == (("go", "1.24.1"),)
    write(tmp_path, "a", text=text.replace(", make: '4.3'", ", cargo: one"))
    (p,) = problems(tmp_path)  # not a version
    assert p.line == 5 and p.message.startswith("toolchain.host.cargo: 'one' does not match"), p.message
