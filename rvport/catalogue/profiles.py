"""Target profiles as data: flags, recipe knobs, QEMU CPU model, verifier expectations."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache

from rvport import resources
from rvport.catalogue.document import shipped_table
from rvport.catalogue.yamlsrc import line_of
from rvport.errors import Problem, RecipeError, UsageError

_MULTI = re.compile(r"^(z[a-z0-9]+|s[a-z0-9]+|x[a-z0-9]+)\Z")


@dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    description: str
    march: str
    mabi: str
    vlen: int
    requires: frozenset[str]
    qemu_cpu: str
    knobs: Mapping[str, str]
    # extensions the profile's CPUs have that only newer compilers accept in -march: name -> the GCC major
    # from which a stage's compiler (its base's `gcc:`) gets them in its march and requires (for_gcc)
    gcc_adds: Mapping[str, int] = field(default_factory=dict)

    def for_gcc(self, major: int | None) -> Profile:
        """The profile as a stage whose GCC is `major` (None: not known) builds for it: the extensions of
        `gcc_adds` that this GCC accepts join -march (after the single-letter ones) and `requires`. The CPU
        contract (QEMU CPU, what verify allows) is the same whatever the compiler."""
        added = sorted(e for e, since in self.gcc_adds.items() if major is not None and major >= since)
        if not added:
            return self
        head, *rest = self.march.split("_")
        return replace(self, march="_".join([head, *added, *rest]), requires=self.requires | set(added))

    @property
    def cflags(self) -> tuple[str, ...]:
        return (f"-march={self.march}", f"-mabi={self.mabi}")

    @property
    def float_abi(self) -> str:
        return {"lp64d": "double", "lp64f": "single", "lp64": "soft"}[self.mabi]

    @property
    def allowed(self) -> frozenset[str]:
        """Every extension an object built for this profile may carry."""
        isa = isa_rules()
        return expand(parse_march(self.march) | set(self.gcc_adds)) | frozenset(isa["tolerated"])

    @property
    def cpuinfo(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(shown, not shown): the extensions build systems read from /proc/cpuinfo (isa.yaml's `cpuinfo`)
        that
        a CPU of this profile, as its QEMU CPU model, shows there and those it does not."""
        watched, allowed = isa_rules()["cpuinfo"], self.allowed
        return tuple(e for e in watched if e in allowed), tuple(e for e in watched if e not in allowed)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "march": self.march,
            "mabi": self.mabi,
            "vlen": self.vlen,
            "cflags": list(self.cflags),
            "qemu_cpu": self.qemu_cpu,
            "knobs": dict(self.knobs),
            "requires": sorted(self.requires),
            "float_abi": self.float_abi,
            **({"gcc_adds": dict(sorted(self.gcc_adds.items()))} if self.gcc_adds else {}),
        }


@cache
def isa_rules() -> dict:
    return shipped_table("isa", "the ISA rules (isa.yaml)")


def parse_march(march: str) -> frozenset[str]:
    """Split an -march string (rv64gcv_zvfh_zvl256b) into extension names, g expanded."""
    s = march.lower()
    if not s.startswith(("rv64", "rv32")):
        raise ValueError(f"not a RISC-V arch string: {march!r}")
    parts = s[4:].split("_")
    exts: set[str] = set()
    singles = parts[0]
    for ch in singles:
        if ch == "g":
            exts.update(isa_rules()["g"])
        elif ch.isalpha():
            exts.add(ch)
    for p in parts[1:]:
        if p and _MULTI.match(p):
            exts.add(p)
    return frozenset(exts)


def expand(exts: frozenset[str] | set[str]) -> frozenset[str]:
    """Close a set of extensions under the implication rules."""
    rules: dict[str, list[str]] = isa_rules()["implies"]
    out = set(exts)
    todo = list(exts)
    while todo:
        e = todo.pop()
        for dep in rules.get(e, []):
            if dep not in out:
                out.add(dep)
                todo.append(dep)
    return frozenset(out)


@dataclass(frozen=True, kw_only=True)
class GoLevel:
    """What a riscv64 Go binary may execute, from its build info's GORISCV64 setting (isa.yaml:
    go_riscv64)."""

    name: str  # rva20u64, rva22u64, ...
    extensions: frozenset[str]
    default: bool  # True: the build info had no GORISCV64 setting (a Go that knew only this level)


def go_level(setting: str | None) -> GoLevel | None:
    """The extensions of a GORISCV64 level; None for a level isa.yaml does not list."""
    rules = isa_rules()["go_riscv64"]
    name = (setting or rules["default"]).strip().lower()
    exts = rules["levels"].get(name)
    if exts is None:
        return None
    return GoLevel(name=name, extensions=frozenset(exts), default=setting is None)


@dataclass(frozen=True, kw_only=True)
class Profiles:
    """profiles.yaml: every profile by name, which one a verb targets when --profile names none (`default`),
    and which one has no vector unit (`scalar`)."""

    by_name: Mapping[str, Profile]
    default: Profile
    scalar: Profile


@cache
def profile_table() -> Profiles:
    data = shipped_table("profiles", "the profile table (profiles.yaml)")
    out: dict[str, Profile] = {}
    for name, p in data["profiles"].items():
        out[name] = Profile(
            name=name,
            description=p["description"],
            march=p["march"],
            mabi=p["mabi"],
            vlen=p["vlen"],
            requires=frozenset(p["requires"]),
            qemu_cpu=p["qemu_cpu"],
            knobs=dict(p.get("knobs") or {}),
            gcc_adds=dict(p.get("gcc_adds") or {}),
        )
    file = str(resources.builtin("profiles.yaml"))
    problems = [
        Problem(
            message=f"{key}: {data[key]!r} is not a profile of this table",
            file=file,
            line=line_of(data, key),
            hint=f"name one of {', '.join(out)}",
        )
        for key in ("default", "scalar")
        if data[key] not in out
    ]
    if not problems and out[data["scalar"]].vlen != 0:
        problems.append(
            Problem(
                message=f"scalar: {data['scalar']!r} has a vector unit (vlen {out[data['scalar']].vlen})",
                file=file,
                line=line_of(data, "scalar"),
                hint="name the profile without V (vlen: 0)",
            )
        )
    if problems:
        raise RecipeError(
            f"{len(problems)} problem(s) in profiles.yaml, which rvport ships", problems=problems
        )
    return Profiles(by_name=out, default=out[data["default"]], scalar=out[data["scalar"]])


def load_profiles() -> Mapping[str, Profile]:
    """Every profile by name, in the table's order."""
    return profile_table().by_name


def default_profile() -> Profile:
    """The profile a verb targets when --profile names none (profiles.yaml: `default`)."""
    return profile_table().default


def scalar_profile() -> Profile:
    """The profile without a vector unit (profiles.yaml: `scalar`)."""
    return profile_table().scalar


def get_profile(name: str) -> Profile:
    profiles = load_profiles()
    if name not in profiles:
        raise UsageError(f"unknown profile {name!r}", hint=f"choose one of: {', '.join(profiles)}")
    return profiles[name]
