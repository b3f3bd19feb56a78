"""The mode registry: every build mode's facts in one table, keyed by `Mode` (rvport/vocab.py).

What a mode is for and where it may run is data here; the planner (rvport/plan/planner.py) decides a stage's
mode from it alone, the kinds table (kinds.py) reads which kinds each mode serves, the command line takes its
`--mode` help from it, and a recipe that lists no `modes:` gets its defaults (`defaults()`). The engine holds
each mode's implementation in a static mapping (rvport/engine/modes/: `IMPLEMENTATIONS`), which a test holds
to this table. Adding a mode is a member of `Mode` (rvport/vocab.py), an entry in `MODES`, and its
implementation class in that mapping; nothing else names the modes one by one.

Every function here reads `MODES` when it is called, so a test may replace the table (one more entry) at
this edge and see the mode planned and dispatched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from rvport.target import BUILD_HOSTS
from rvport.vocab import Kind, Mode

RISCV64 = "riscv64"  # the host architecture whose stages need no emulation


class Hosts(StrEnum):
    """The hosts a mode runs on, by their architecture."""

    ANY = "any"
    RISCV64 = "riscv64"  # a riscv64 host: no emulation
    FOREIGN = "foreign"  # any host but riscv64 (riscv64 stages emulated)
    BUILD_HOSTS = "build-hosts"  # hosts Debian ships riscv64 cross compilers for (target.BUILD_HOSTS)

    def admit(self, arch: str) -> bool:
        if self is Hosts.ANY:
            return True
        if self is Hosts.RISCV64:
            return arch == RISCV64
        if self is Hosts.FOREIGN:
            return arch != RISCV64
        return arch in BUILD_HOSTS


@dataclass(frozen=True, kw_only=True)
class ModeFacts:
    """One build mode. The texts are format strings over {ref}, {kind} (the recipe's), {arch}, {platform} (the
    host's) and {kinds} (the kinds the mode serves)."""

    mode: Mode
    help: str  # what it is, for --mode's help and the docs
    kinds: frozenset[Kind] | None = None  # the recipe kinds it serves; None: every kind
    listed: bool = (
        False  # a recipe must list it in its `modes:` (else every recipe of a served kind may use it)
    )
    hosts: Hosts = Hosts.ANY
    auto: int | None = (
        None  # --mode auto picks the admitted mode with the lowest number; None: only on request
    )
    build_platform: bool = False  # the stage runs on the build platform, not as riscv64 (no QEMU_CPU)
    emulated: bool = False  # the stage's riscv64 processes run under QEMU
    bases: tuple[
        str, ...
    ] = ()  # the build-platform bases its images may start from, besides the riscv64 base
    requested: str  # the stage's reason when asked for
    chosen: str = ""  # the stage's reason when --mode auto picked it
    refused: str = ""  # the UsageError when asked for where the recipe or host does not admit it ...
    refused_hint: str = ""  # ... and its hint
    # (mode, reason) a request becomes on a host the mode does not run on, instead of being refused
    instead: tuple[Mode, str] | None = None

    def admits(self, kind: Kind, recipe_modes: tuple[Mode, ...], arch: str) -> bool:
        """May a recipe of `kind` listing `recipe_modes` be built in this mode on a host of `arch`?"""
        return self.hosts.admit(arch) and self.serves(kind) and (not self.listed or self.mode in recipe_modes)

    def serves(self, kind: Kind) -> bool:
        return self.kinds is None or kind in self.kinds


_XTC = ("debian-trixie-xtc", "debian-trixie-xtc-rust")  # a build-platform base, and that plus its rustc-web
# sid's: riscv64 cross GCC 16, and that plus sid's rustc (sid has no rustc-web)
_XTC_SID = ("debian-sid-xtc", "debian-sid-xtc-rust")

MODES: Mapping[Mode, ModeFacts] = {
    f.mode: f
    for f in (
        ModeFacts(
            mode=Mode.NATIVE,
            help="native (riscv64 host)",
            hosts=Hosts.RISCV64,
            auto=0,
            requested="host is riscv64: stages run natively",
            chosen="host is riscv64: stages run natively",
            refused="--mode native needs a riscv64 host; this host is {arch}",
            refused_hint="use --mode qemu (emulation) or --mode auto, or --builder with a riscv64 node",
        ),
        ModeFacts(
            mode=Mode.QEMU,
            help="qemu (emulated)",
            hosts=Hosts.FOREIGN,
            auto=3,
            emulated=True,
            requested="requested under QEMU user emulation on {arch}",
            chosen="auto: {kind} builds in a riscv64 stage under QEMU user emulation on {arch}",
            instead=(Mode.NATIVE, "host is riscv64: no emulation needed, running natively"),
        ),
        ModeFacts(
            mode=Mode.CROSS,
            help="cross (cross toolchain)",
            kinds=frozenset({Kind.CARGO_STATICLIB, Kind.GO_BINARY}),
            listed=True,
            auto=1,
            build_platform=True,
            bases=_XTC[:1],
            requested="requested: compiled on {platform} with a riscv64 cross toolchain",
            chosen="auto: {kind} cross-compiles on {platform}, many times faster than emulation",
            refused="{ref} ({kind}) cannot be cross-compiled",
            refused_hint="cross mode is for {kinds} recipes that list it in `modes`; "
            "use --mode auto to let rvport choose per recipe",
        ),
        ModeFacts(
            mode=Mode.ACCELERATED,
            help="accelerated (emulated, native compilers)",
            listed=True,
            hosts=Hosts.BUILD_HOSTS,
            auto=2,
            emulated=True,
            bases=_XTC + _XTC_SID,  # the stage's suite picks one (engine/modes/accelerated.py)
            requested="requested: riscv64 stage under QEMU with its compilers running as native "
            "{arch} cross compilers",
            chosen="auto: riscv64 stage under QEMU with its compilers running as native "
            "{arch} cross compilers (proven for this recipe)",
            refused="{ref} cannot run accelerated on {arch}",
            refused_hint="accelerated stages need an x86_64 or aarch64 host and a recipe that lists "
            "`accelerated` in `modes`; use --mode qemu or --mode auto",
        ),
    )
}


def facts(mode: Mode) -> ModeFacts:
    """A buildable mode's facts (never Mode.AUTO: the planner decides)."""
    return MODES[mode]


def buildable() -> tuple[Mode, ...]:
    """Every mode a stage can have, in the table's order."""
    return tuple(MODES)


def auto_order() -> tuple[ModeFacts, ...]:
    """The modes --mode auto tries, best first."""
    return tuple(sorted((f for f in MODES.values() if f.auto is not None), key=lambda f: f.auto))


def kinds_of(mode: Mode) -> tuple[Kind, ...]:
    """The kinds a mode serves, sorted by name."""
    return tuple(sorted((k for k in Kind if MODES[mode].serves(k)), key=lambda k: k.value))


def modes_of(kind: Kind) -> frozenset[Mode]:
    """The modes a recipe of this kind may list."""
    return frozenset(m for m, f in MODES.items() if f.serves(kind))


def defaults() -> tuple[Mode, ...]:
    """A recipe's modes when it lists none (`modes:`): every mode a recipe need not list (not `listed`), in
    the table's order."""
    return tuple(m for m, f in MODES.items() if not f.listed)


def choices() -> tuple[str, ...]:
    """What --mode accepts: auto, then every mode."""
    return (Mode.AUTO.value, *(m.value for m in MODES))


def help_text(then: str = "") -> str:
    """--mode's help, from the table (`then`: a sentence a verb adds)."""
    return ", ".join(("auto (picks per recipe)", *(f.help for f in MODES.values()))) + "." + then


def choices_text() -> str:
    """The modes as a sentence: 'auto, native, qemu, cross or accelerated'."""
    *first, last = choices()
    return f"{', '.join(first)} or {last}"
