"""Facts + profile + ISA level -> verdict with reasons. Pure: no I/O; the ISA rules are data (isa.yaml).

Each rule is a small function listed in ELF_RULES; a rule returns the reasons it fails for and the notes it
wants shown. The order of ELF_RULES is the order of the reasons in the report."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from packaging.tags import Tag

from rvport.catalogue.profiles import Profile, expand, go_level
from rvport.verify.elf import EF_RISCV_RVE, EF_RISCV_TSO, ElfFacts
from rvport.verify.manylinux import best_tag, policies

# Legacy manylinux aliases (PEP 600): alias -> glibc (major, minor).
MANYLINUX_ALIASES = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
# The first glibc with a riscv64 port: no riscv64 object can need less, so no tag below it makes sense.
RISCV64_MIN_GLIBC = (2, 27)
# Only RVV 1.0 is the "v" the profiles mean (T-Head's 0.7.1 is a different, incompatible extension).
MIN_VERSIONS = {"v": (1, 0)}

_MANYLINUX = re.compile(r"^manylinux_([0-9]{1,9})_([0-9]{1,9})_(.+)\Z")
_MUSLLINUX = re.compile(r"^musllinux_([0-9]{1,9})_([0-9]{1,9})_(.+)\Z")
_VERSION = re.compile(r"^([0-9]{1,9})(?:p([0-9]{1,9}))?\Z")
_ZVL = re.compile(r"^zvl([0-9]{1,9})b\Z")


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"


class IsaLevel(StrEnum):
    """Which question a verdict answers about the RISC-V extensions of an ELF file."""

    RUNS_ON = "runs-on"  # does it run on every CPU of the profile: all it needs is within Profile.allowed
    CARRIES = "carries"  # runs on, and carries every extension the profile promises (Profile.requires): no
    # silent scalar fallback, no ISA sniffed from the build host

    @classmethod
    def _missing_(cls, value: object) -> IsaLevel | None:
        """Spellings in any case, and the older names: `profile` (carries) and `baseline` (runs on)."""
        if not isinstance(value, str):
            return None
        v = value.strip().lower()
        v = LEVEL_ALIASES.get(v, v)
        return next((m for m in cls if m.value == v), None)


# Older names of the levels, still accepted in recipes (`isa: profile|baseline`) and on the command line.
LEVEL_ALIASES = {"profile": "carries", "baseline": "runs-on"}


@dataclass(frozen=True, kw_only=True)
class Judgement:
    verdict: Verdict
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.PASS


@dataclass(frozen=True, kw_only=True)
class RuleContext:
    profile: Profile
    isa: IsaLevel
    # the artifact's vector code assumes the VLEN it was built for (the recipe's `vlen: exact`, e.g. vLLM's
    # kernels, compiled with -mrvv-vector-bits=zvl): it runs only where VLEN is exactly that
    vlen_exact: bool = False

    @property
    def carries(self) -> bool:
        return self.isa is IsaLevel.CARRIES


@dataclass(frozen=True, kw_only=True)
class Needs:
    """The extensions an ELF file may execute, and what says so."""

    extensions: frozenset[str] | None  # None: nothing in the file says (no arch attribute, no Go build info)
    source: str  # "arch string", "Go build info (GORISCV64=rva20u64)", ...
    reason: str | None = None  # why they are unknown, when that is itself a failure


def needs(f: ElfFacts) -> Needs:
    """What the file needs: its Tag_RISCV_arch string, else (Go binaries) the GORISCV64 level of its build
    info."""
    if f.arch is not None:
        return Needs(extensions=frozenset(f.extensions), source="arch string")
    g = f.go
    if g is not None and g.goarch == "riscv64":
        setting = g.settings.get("GORISCV64")
        level = go_level(setting)
        if level is None:
            return Needs(
                extensions=None,
                source=f"Go build info (GORISCV64={setting})",
                reason=f"Go build info says GORISCV64={setting}, a level rvport does not know "
                "(isa.yaml: go_riscv64)",
            )
        how = f"GORISCV64={level.name}" if not level.default else f"no GORISCV64: {level.name}, the default"
        return Needs(extensions=level.extensions, source=f"Go build info ({how})")
    what = "a Go binary without riscv64 build info" if g is not None else "no .riscv.attributes arch string"
    return Needs(extensions=None, source=what)


RuleResult = tuple[list[str], list[str]]  # (reasons it fails for, notes)
Rule = Callable[[ElfFacts, RuleContext], RuleResult]


def glibc_str(v: tuple[int, int] | None) -> str | None:
    return f"{v[0]}.{v[1]}" if v else None


def manylinux_for(glibc: tuple[int, int] | None, arch: str = "riscv64") -> str:
    """The most compatible manylinux tag an object needing `glibc` (and nothing else) can carry: the first
    policy of rvport/resources/manylinux.yaml that allows it, for the architectures listed there."""
    need = glibc or (0, 0)
    pol = policies(arch)
    if pol is not None:
        for name, limits in pol.policies:
            if "GLIBC" not in limits or need <= limits["GLIBC"][:2]:
                return f"{name}_{arch}"
    elif not glibc:
        need = MANYLINUX_ALIASES["manylinux2014"]
    return f"manylinux_{need[0]}_{need[1]}_{arch}"


def _ver(v: str) -> tuple[int, int]:
    m = _VERSION.match(v)
    return (int(m.group(1)), int(m.group(2) or 0)) if m else (0, 0)


def _fmt(exts: Iterable[str]) -> str:
    return ", ".join(sorted(exts))


def maximal(exts: frozenset[str]) -> frozenset[str]:
    """Drop every extension another one in the set already implies (v implies zve64d, zvl128b, ...)."""
    implied: set[str] = set()
    for e in exts:
        implied |= expand(frozenset({e})) - {e}
    return frozenset(exts - implied)


# ---- rules for one ELF file ---------------------------------------------------------------------------


def rule_class(f: ElfFacts, c: RuleContext) -> RuleResult:
    return ([] if f.elf_class == 64 else [f"ELFCLASS{f.elf_class}: not a 64-bit object"]), []


def rule_endian(f: ElfFacts, c: RuleContext) -> RuleResult:
    return ([] if f.little_endian else ["big-endian: riscv64 is little-endian"]), []


def rule_machine(f: ElfFacts, c: RuleContext) -> RuleResult:
    if f.is_riscv:
        return [], []
    name = f.machine.removeprefix("EM_").lower().replace("_", "-")
    return [f"machine is {name} ({f.machine}), not RISC-V (EM_RISCV)"], []


def rule_float_abi(f: ElfFacts, c: RuleContext) -> RuleResult:
    if not f.is_riscv:
        return [], []
    want = c.profile.float_abi
    reasons = []
    if f.float_abi != want:
        reasons.append(
            f"float ABI is {f.float_abi} (e_flags 0x{f.e_flags:x}) but profile {c.profile.name} "
            f"needs {want} ({c.profile.mabi})"
        )
    if f.e_flags & EF_RISCV_RVE:
        reasons.append("RVE (embedded, 16 registers) ABI flag set: not an RV64G object")
    return reasons, []


def rule_rvc(f: ElfFacts, c: RuleContext) -> RuleResult:
    if not f.is_riscv:
        return [], []
    if f.rvc and "c" not in c.profile.allowed:
        return [f"e_flags has RVC (compressed instructions) but profile {c.profile.name} has no c"], []
    if not f.rvc and "c" in c.profile.requires:
        if c.carries and f.go is None:  # Go is judged by its build info (rule_extensions): it emits no RVC
            return [f"e_flags lacks RVC (compressed instructions) that profile {c.profile.name} promises"], []
        return [], ["e_flags has no RVC: uses no compressed instructions"]
    return [], []


def rule_tso(f: ElfFacts, c: RuleContext) -> RuleResult:
    if f.is_riscv and f.e_flags & EF_RISCV_TSO and "ztso" not in c.profile.allowed:
        return [
            f"e_flags has TSO (built for the Ztso memory model) but profile {c.profile.name} has no ztso"
        ], []
    return [], []


def rule_extensions(f: ElfFacts, c: RuleContext) -> RuleResult:
    if not f.is_riscv:
        return [], []
    p = c.profile
    n = needs(f)
    if n.extensions is None:
        if n.reason:
            return [n.reason], []
        if c.carries:
            return [
                (
                    f"{n.source}: cannot prove the extensions profile {p.name} promises "
                    f"({_fmt(p.requires)}); `--isa runs-on` asks only whether it runs on the profile"
                )
            ], []
        return [], [f"{n.source}: extensions unproven, passed on header checks alone"]
    reasons: list[str] = []
    exts = n.extensions
    if f.arch is not None and not f.arch.lower().startswith("rv64"):
        reasons.append(f"arch {f.arch.split('_')[0][:6]} is not rv64")
    beyond = exts - p.allowed
    if beyond:
        reasons.append(
            f"needs {_fmt(maximal(beyond))}, beyond profile {p.name} ({p.march}): "
            f"it does not run on every CPU the profile describes ({n.source})"
        )
    if c.carries:
        missing = p.requires - expand(exts)
        if missing:
            reasons.append(
                f"{n.source} lacks {_fmt(missing)} that profile {p.name} promises "
                "(a scalar fallback, or built for another target?)"
            )
    for ext, (maj, mnr) in MIN_VERSIONS.items():
        if ext in f.extensions and _ver(f.extensions[ext]) < (maj, mnr):
            reasons.append(f"{ext} version {f.extensions[ext]} is older than {maj}p{mnr}")
    return reasons, []


def built_vlen(exts: frozenset[str]) -> int | None:
    """The VLEN vector code was compiled for: the largest zvl<N>b its extensions imply (v implies zvl128b).
    None when it may execute no vector instruction (no v, no zve*)."""
    closed = expand(exts)
    if not any(e == "v" or e.startswith("zve") for e in closed):
        return None
    sizes = [int(m.group(1)) for e in closed if (m := _ZVL.match(e))]
    return max(sizes) if sizes else None


def rule_vlen(f: ElfFacts, c: RuleContext) -> RuleResult:
    """Vector code on a profile of longer vectors. Code compiled VLEN-agnostic (GCC's default) runs on any
    VLEN at least the one it names; code compiled VLEN-exact (-mrvv-vector-bits=zvl) takes that VLEN as *the*
    VLEN and computes wrong, or corrupts memory, on longer vectors. The ELF file cannot show which, so the
    artifact's recipe (or provenance, or --vlen-exact) says it. Judged from the arch string only: a Go binary
    (its level from its build info) has no VLEN to be exact about."""
    if not f.is_riscv or f.arch is None:
        return [], []
    built = built_vlen(frozenset(f.extensions))
    p = c.profile
    if built is None or not p.vlen or built > p.vlen:  # no vector code; or beyond: rule_extensions says why
        return [], []
    if c.vlen_exact:
        if built != p.vlen:
            return [
                f"vector code built VLEN-exact for VLEN {built} (zvl{built}b), but profile {p.name}'s CPUs "
                f"have VLEN {p.vlen}: it assumes VLEN is exactly {built}, and computes wrong or corrupts "
                "memory on longer vectors; build it for this profile"
            ], []
        return [], [f"VLEN-exact vector code: runs only where VLEN is exactly {built}"]
    if built < p.vlen:
        return [], [
            f"vector code built for VLEN {built} (zvl{built}b) runs at VLEN {p.vlen} only if it is "
            "VLEN-agnostic; code compiled VLEN-exact (-mrvv-vector-bits=zvl) does not, and the ELF file "
            "cannot show which (--vlen-exact, or --provenance of a recipe that declares it, refuses it)"
        ]
    return [], []


def rule_go(f: ElfFacts, c: RuleContext) -> RuleResult:
    g = f.go
    if g is None:
        return [], []
    reasons = []
    if g.goarch is not None and g.goarch != "riscv64":
        reasons.append(f"Go build info says GOARCH={g.goarch}, not riscv64")
    if g.goos is not None and g.goos != "linux":
        reasons.append(f"Go build info says GOOS={g.goos}, not linux")
    where = f"{g.goos}/{g.goarch}" if g.goos or g.goarch else "GOOS/GOARCH unknown"
    if "GORISCV64" in g.settings:
        where += f", GORISCV64={g.settings['GORISCV64']}"
    note = f"Go {g.go_version}, {where}" + (f", main module {g.main_module}" if g.main_module else "")
    return reasons, [note]


def rule_glibc(f: ElfFacts, c: RuleContext) -> RuleResult:
    if not f.glibc:
        return [], []
    return [], [f"needs GLIBC_{glibc_str(f.max_glibc)}: can carry {manylinux_for(f.max_glibc)} or later"]


ELF_RULES: tuple[Rule, ...] = (
    rule_class,
    rule_endian,
    rule_machine,
    rule_float_abi,
    rule_rvc,
    rule_tso,
    rule_extensions,
    rule_vlen,
    rule_go,
    rule_glibc,
)


def judge_elf(
    facts: ElfFacts, profile: Profile, isa: IsaLevel | str = IsaLevel.RUNS_ON, *, vlen_exact: bool = False
) -> Judgement:
    ctx = RuleContext(profile=profile, isa=IsaLevel(isa), vlen_exact=vlen_exact)
    reasons: list[str] = []
    notes: list[str] = list(facts.notes)
    for rule in ELF_RULES:
        r, n = rule(facts, ctx)
        reasons += r
        notes += n
    return Judgement(
        verdict=Verdict.FAIL if reasons else Verdict.PASS, reasons=tuple(reasons), notes=tuple(notes)
    )


# ---- rules for a wheel's tags ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PlatformClaim:
    """What one platform tag promises: the architecture and the libc floor."""

    tag: str
    arch: str | None  # None for "any"
    libc: str | None  # "glibc", "musl" or None (linux_*: no promise)
    version: tuple[int, int] | None


def parse_platform(platform: str) -> PlatformClaim:
    if platform == "any":
        return PlatformClaim(tag=platform, arch=None, libc=None, version=None)
    m = _MANYLINUX.match(platform)
    if m:
        return PlatformClaim(
            tag=platform, arch=m.group(3), libc="glibc", version=(int(m.group(1)), int(m.group(2)))
        )
    for alias, ver in MANYLINUX_ALIASES.items():
        if platform.startswith(alias + "_"):
            return PlatformClaim(tag=platform, arch=platform[len(alias) + 1 :], libc="glibc", version=ver)
    m = _MUSLLINUX.match(platform)
    if m:
        return PlatformClaim(
            tag=platform, arch=m.group(3), libc="musl", version=(int(m.group(1)), int(m.group(2)))
        )
    if platform.startswith("linux_"):
        return PlatformClaim(tag=platform, arch=platform[len("linux_") :], libc=None, version=None)
    return PlatformClaim(tag=platform, arch=platform, libc=None, version=None)


def _claim_version(tag: str) -> tuple[int, int] | None:
    m = _MANYLINUX.match(tag)
    return (int(m.group(1)), int(m.group(2))) if m else None


def judge_wheel_tags(
    tags: Iterable[Tag], elfs: list[tuple[str, ElfFacts]], requires: Iterable[str] = ()
) -> Judgement:
    """Check a wheel's platform tags against the ELF files inside it: architecture and glibc floor.
    `requires`: the distributions its Requires-Dist names (manylinux.best_tag)."""
    claims = sorted({parse_platform(t.platform) for t in tags}, key=lambda c: c.tag)
    reasons: list[str] = []
    notes: list[str] = []
    if not elfs:
        if any(c.arch is not None for c in claims):
            reasons.append("wheel has a platform tag but no ELF file to prove it")
        return Judgement(verdict=Verdict.FAIL if reasons else Verdict.PASS, reasons=tuple(reasons))
    for c in claims:
        if c.arch is None:
            reasons.append(f"wheel is tagged {c.tag} (pure) but contains {len(elfs)} ELF file(s)")
        elif c.arch != "riscv64":
            reasons.append(f"wheel platform tag {c.tag} is for {c.arch}, not riscv64")
    needing = [(name, f.max_glibc) for name, f in elfs if f.max_glibc]
    best = best_tag(elfs, requires=requires)
    if needing or best.tag is None:
        notes.append(
            f"can carry {best.tag} ({best.why})" if best.tag else f"can carry no manylinux tag: {best.why}"
        )
    floor = _claim_version(best.tag) if best.tag else None
    for c in claims:
        if c.libc == "glibc" and c.version is not None and c.arch == "riscv64":
            if best.tag is None:
                reasons.append(f"tagged {c.tag} but it {best.why}")
            elif floor is not None and c.version < floor:
                reasons.append(
                    f"tagged {c.tag} but its ELF files allow no tag lower than {best.tag} ({best.why})"
                )
        elif c.libc == "musl" and needing:
            worst_name, worst = max(needing, key=lambda x: x[1])
            reasons.append(f"tagged {c.tag} (musl) but {worst_name} needs glibc (GLIBC_{glibc_str(worst)})")
    return Judgement(
        verdict=Verdict.FAIL if reasons else Verdict.PASS, reasons=tuple(reasons), notes=tuple(notes)
    )
