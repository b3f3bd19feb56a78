"""The programs a recipe runs on the host itself, before any stage (vendoring, checking Debian pins), and the
least version each needs: rules as data, read by `rvport doctor` and `rvport plan`.

`TOOLS` says how to find each program and its version, and how to install it; `RULES` which recipes need
which program, from what the recipe says (`vendor:`, `toolchain: pins:`, `toolchain: go:`); a recipe adds its
own least versions in `toolchain: host:` (`{go: 1.24.1}`: the version its go.mod names, which a host's
`go mod vendor` with GOTOOLCHAIN=local must have). Nothing here runs a program: `rvport.host.tool_version`
finds one, `judge` compares. docs/troubleshooting.md, "A host tool is missing or too old".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rvport.catalogue.model import Recipe
from rvport.host import ToolFound

VERSION = re.compile(r"^[0-9]{1,6}(\.[0-9]{1,6}){0,3}$")  # a least version as a recipe writes it


@dataclass(frozen=True, kw_only=True)
class HostTool:
    name: str  # the program, as PATH finds it
    version_args: tuple[str, ...]  # what prints its version
    version: re.Pattern[str]  # group 1: the version in that output
    install: str  # how to get it, over {need} (">= 1.24.1 " or "")
    also: tuple[str, ...] = ()  # where else rvport looks for it (~ is the home directory), after PATH
    debian: Debian | None = None  # a Debian package of it beside the suite's default one, and its version


@dataclass(frozen=True, kw_only=True)
class Debian:
    """A Debian package that installs the program outside PATH: the hint names it when it is recent
    enough."""

    package: str
    version: str
    suite: str
    bin: str  # the directory it puts the program in


TOOLS: dict[str, HostTool] = {
    tool.name: tool
    for tool in (
        HostTool(
            name="go",
            version_args=("version",),
            version=re.compile(r"\bgo([0-9]{1,6}(?:\.[0-9]{1,6}){1,2})\b"),
            install="install Go {need}and put it first in PATH; or pin a Go release for the recipe "
            "(toolchain: go:, docs/recipes.md), which a host Go >= 1.21 switches to",
            debian=Debian(
                package="golang-1.24-go", version="1.24.4", suite="trixie", bin="/usr/lib/go-1.24/bin"
            ),
        ),
        HostTool(
            name="cargo",
            version_args=("--version",),
            version=re.compile(r"^cargo ([0-9]{1,6}\.[0-9]{1,6}(?:\.[0-9]{1,6})?)"),
            install="install cargo {need}on the host: apt-get install cargo, or rustup (~/.cargo/bin/cargo "
            "is found too)",
            also=("~/.cargo/bin/cargo",),
        ),
        HostTool(
            name="gpgv",
            version_args=("--version",),
            version=re.compile(r"^gpgv \(GnuPG\) ([0-9]{1,6}\.[0-9]{1,6}(?:\.[0-9]{1,6})?)"),
            install="install gpgv {need}on the host: apt-get install gpgv",
        ),
    )
}


@dataclass(frozen=True, kw_only=True)
class Rule:
    tool: str
    why: str  # what the host runs it for
    applies: Callable[[Recipe], bool]
    minimum: str | None = None  # the least version this use needs (a recipe's toolchain.host may ask more)


RULES: tuple[Rule, ...] = (
    Rule(tool="go", why="`go mod vendor` (vendor: go)", applies=lambda r: r.vendor == "go"),
    Rule(
        tool="go",
        why="switching to the recipe's pinned Go (toolchain: go:, GOTOOLCHAIN)",
        applies=lambda r: r.vendor == "go" and r.toolchain.go is not None,
        minimum="1.21",
    ),
    Rule(tool="cargo", why="`cargo vendor` (vendor: cargo)", applies=lambda r: r.vendor == "cargo"),
    Rule(
        tool="gpgv",
        why="its Debian pins checked against the suite's signed InRelease (toolchain: pins:)",
        applies=lambda r: bool(r.toolchain.pins),
    ),
)


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


@dataclass(frozen=True, kw_only=True)
class Need:
    """What one recipe needs of one host program."""

    recipe: str  # NAME==VERSION
    tool: str
    minimum: str | None
    why: tuple[str, ...]

    @property
    def wanted(self) -> str:
        return f"{self.tool} >= {self.minimum}" if self.minimum else self.tool


def needs(recipe: Recipe) -> list[Need]:
    """Every host program `recipe` needs, each with the greatest least version its rules and its own
    `toolchain: host:` ask for, in the order of TOOLS."""
    whys: dict[str, list[str]] = {}
    least: dict[str, str] = {}

    def ask(tool: str, why: str, minimum: str | None) -> None:
        if why:
            whys.setdefault(tool, []).append(why)
        if minimum and (tool not in least or version_tuple(minimum) > version_tuple(least[tool])):
            least[tool] = minimum

    for rule in RULES:
        if rule.applies(recipe):
            ask(rule.tool, rule.why, rule.minimum)
    for tool, minimum in recipe.toolchain.host:
        if tool not in whys:
            whys[tool] = ["the recipe's `toolchain: host:`"]
        ask(tool, "", minimum)
    return [
        Need(recipe=recipe.ref, tool=t, minimum=least.get(t), why=tuple(whys[t])) for t in TOOLS if t in whys
    ]


def short_of(need: Need, found: ToolFound) -> str | None:
    """Why `found` does not meet `need` (naming the recipe, what it needs and what the host has), or None
    when it does."""
    head = f"{need.recipe} needs {need.wanted} on the host, for {'; '.join(need.why)}"
    if found.path is None:
        return f"{head}; the host has no {need.tool}"
    if need.minimum is None:
        return None
    if found.version is None:
        return f"{head}; the version of {found.path} cannot be told"
    if version_tuple(found.version) < version_tuple(need.minimum):
        return f"{head}; the host has {need.tool} {found.version} ({found.path})"
    return None


def install_hint(tool: str, minimum: str | None) -> str:
    """How to get `tool` at `minimum` or later: TOOLS' install text, and its Debian package where that is
    recent enough."""
    t = TOOLS[tool]
    hint = t.install.format(need=f">= {minimum} " if minimum else "")
    d = t.debian
    if d is not None and (minimum is None or version_tuple(d.version) >= version_tuple(minimum)):
        hint += (
            f"; on Debian: apt-get install -t {d.suite} {d.package} ({d.suite}'s {d.version}; on an older "
            f"release add {d.suite} to the apt sources first), then export PATH={d.bin}:$PATH"
        )
    return hint


def greatest(needs_of_tool: Iterable[Need]) -> str | None:
    """The greatest least version among needs of one tool."""
    versions = [n.minimum for n in needs_of_tool if n.minimum]
    return max(versions, key=version_tuple) if versions else None
