"""Pure planning: catalogue + request + host facts -> Plan. No I/O, no docker.

Everything a build will do is decided here and shown before anything runs: stage order, the mode of each
stage with its reason, the exact environment (profile flags and knobs expanded), the commands, and where
each source will come from.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from rvport import resources
from rvport.catalogue import modes
from rvport.catalogue.bases import BaseSpec, load_bases, python_bases
from rvport.catalogue.kinds import KINDS, WHEEL_KINDS, compiles_go, compiles_rust
from rvport.catalogue.model import LocalTree, Recipe, Runtime, Source, SourceKind, UpstreamTests
from rvport.catalogue.profiles import Profile, scalar_profile
from rvport.catalogue.recipes import Catalogue
from rvport.catalogue.tools import Tool, tool
from rvport.errors import UsageError
from rvport.host import HostFacts
from rvport.target import CARGO_HOME, RUST_TARGET
from rvport.target import PLATFORM as RISCV64
from rvport.target import TRIPLET as TRIPLE
from rvport.vocab import Kind, Mode

if TYPE_CHECKING:
    from rvport.catalogue.closure_lock import Lock  # a Lock's module reads wheels' tags: not imported to plan

PLAN_SCHEMA = 1
# Reproducible builds: the build directory (/src in every stage) never reaches an artifact. C and C++ get the
# prefix map through RVPORT_CFLAGS (which recipes put in CFLAGS/CXXFLAGS), Rust through RUSTFLAGS unless the
# recipe sets its own; SOURCE_DATE_EPOCH is set in the stage from the prepared tree (rvport.engine.render).
BUILD_DIR = "/src"
PREFIX_MAP_CFLAGS = (f"-ffile-prefix-map={BUILD_DIR}=.",)
PREFIX_MAP_RUSTFLAGS = f"--remap-path-prefix={BUILD_DIR}=."
# A stage that compiles Rust records the Rust it used, in every mode, after its build commands (the command of
# resources/scripts/rust-record.sh: rustc, cargo, rustc's host). The runner takes the file out of the
# artifacts into result.json (stages[].rust).
RUST_REPORT = ".rvport-rust"
RUST_RECORD = resources.script_command("rust-record.sh")


@dataclass(frozen=True, kw_only=True)
class Request:
    refs: tuple[str, ...]  # recipe refs (name or name==version); empty with all=True
    all: bool = False
    profile: Profile
    mode: Mode = Mode.AUTO
    tag: str = "local"
    jobs: int | None = None  # None: bounded by cores and memory
    builder: str | None = None
    manylinux: str = "auto"  # wheel repair: auto, off, or a policy such as manylinux_2_31_riscv64
    allow_expired_release: tuple[str, ...] = ()  # Debian suites whose expired Release the user accepts
    # --python: the CPythons (MAJOR.MINOR) to build wheels for, each on the riscv64 base that gives it;
    # empty: each recipe on its own base, as it names it (stage ids without a Python suffix)
    pythons: tuple[str, ...] = ()
    # --source-tree: local trees built instead of pinned sources (each read by rvport.sources.local)
    source_trees: tuple[SourceTree, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SourceTree:
    """A local tree that replaces one source of one recipe (`--source-tree [SOURCE=]DIR`)."""

    recipe: str  # the recipe's name
    source: str  # the name of the source it replaces
    tree: LocalTree


@dataclass(frozen=True, kw_only=True)
class PythonTarget:
    """One Python of the plan's matrix: its version and the riscv64 base that gives it (the base's
    `python:`)."""

    version: str  # MAJOR.MINOR, e.g. 3.14
    base: str  # the riscv64 base spec whose python3 it is

    @property
    def abi(self) -> str:
        """The wheel's ABI tag, also the stage id's suffix: cp314."""
        return "cp" + self.version.replace(".", "")

    @property
    def interpreter(self) -> str:
        return f"python{self.version}"

    def to_json(self) -> dict:
        return {"version": self.version, "base": self.base, "interpreter": self.interpreter, "abi": self.abi}


RUNTIME_REPO = "rvport"  # runtime images are <RUNTIME_REPO>/<recipe>:<--tag>
_DOCKER_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


@dataclass(frozen=True, kw_only=True)
class RuntimeImage:
    """A stage's runtime image as planned: the recipe's `runtime:` on the riscv64 base, tagged by --tag."""

    tag: str  # rvport/<recipe>:<--tag>
    base: str  # the riscv64 base spec (the recipe's toolchain base)
    key: str  # content address: the stage's key and everything the image adds
    spec: Runtime

    @property
    def run_args(self) -> tuple[str, ...]:
        """How the image must be run (`docker run` options): its user, a read-only root with tmpfs for the
        writable paths, and no capabilities it does not need."""
        args = [
            "--user",
            f"{self.spec.uid}:{self.spec.uid}",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
        ]
        if self.spec.read_only:
            args.append("--read-only")
        for path in self.spec.tmpfs:
            args += ["--tmpfs", f"{path}:rw,nosuid,nodev,noexec,mode=1777"]
        return tuple(args)

    @property
    def check_key(self) -> str | None:
        """The content address of the runtime check (`runtime: check:`): the image's key and the check itself.
        The check is not part of the image, so a new check script is a new check, never a new image."""
        c = self.spec.check
        if c is None:
            return None
        doc = {"runtime": self.key, "check": c.to_json()}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()

    def to_json(self) -> dict:
        c = self.spec.check
        return {
            "tag": self.tag,
            "base": self.base,
            "key": self.key,
            "run_args": list(self.run_args),
            **self.spec.to_json(),
            "check": dict(c.to_json(), rounds=c.rounds, key=self.check_key) if c else None,
        }


def runtime_image(
    recipe: Recipe, tag: str, stage_key_: str, python: PythonTarget | None = None
) -> RuntimeImage | None:
    """The runtime image of a stage, or None when the recipe declares none. Its key covers the stage's key
    (the artifacts), the base, the packages, every file's pin and how it is run, so a new configuration makes
    a new image without rebuilding the artifacts."""
    rt = recipe.runtime
    if rt is None:
        return None
    if not _DOCKER_TAG.fullmatch(tag):
        raise UsageError(
            f"--tag {tag!r} cannot tag {recipe.name}'s runtime image",
            hint="a tag is letters, digits, '_', '.' and '-', up to 128, not starting with '.' or '-'",
        )
    doc = {"stage": stage_key_, "base": recipe.toolchain.base, "runtime": rt.to_json()}
    key = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    # one image per Python in a --python plan: rvport/<recipe>:<tag>-cp314
    tag = f"{tag}-{python.abi}" if python else tag
    return RuntimeImage(
        tag=f"{RUNTIME_REPO}/{recipe.name}:{tag}", base=recipe.toolchain.base, key=key, spec=rt
    )


@dataclass(frozen=True, kw_only=True)
class Stage:
    recipe: Recipe
    mode: Mode
    mode_reason: str
    platform: str  # platform the stage's container runs as
    emulated: bool  # runs riscv64 code through QEMU user mode
    jobs: int
    env: Mapping[str, str]
    commands: tuple[str, ...]
    depends: tuple[str, ...]  # recipe names, already earlier in the plan
    source_locations: Mapping[str, str]
    profile: Profile  # the request's profile as this stage's compiler serves it (Profile.for_gcc)
    key: str  # content address of the stage's inputs (dependencies' keys included)
    tools: tuple[Tool, ...] = ()  # rvport's own pinned tools the stage runs (in /rvport/tools)
    runtime: RuntimeImage | None = None  # the image the artifacts run in, made after the stage (`runtime:`)
    python: PythonTarget | None = None  # --python: the Python this stage builds for (its base is its)
    wheel_repair: Mapping[str, object] | None = None  # wheel kinds: repaired or not, and why (wheel_repair)
    # `smoke: without_vector:`: the smoke test's second run, {"cpu", "expected"} (smoke_without_vector)
    smoke_without_vector: Mapping[str, str] | None = None
    # `tests:` as this profile runs them (upstream_tests): the files, selections and timeouts, the tree's
    # paths copied, the pinned test wheels; None: no upstream tests
    tests: Mapping[str, object] | None = None

    def _smoke_json(self) -> dict | None:
        r = self.recipe
        if not r.smoke:
            return None
        wv = {"without_vector": dict(self.smoke_without_vector)} if self.smoke_without_vector else {}
        return {"script": r.smoke, "debian": list(r.smoke_debian), **wv}

    @property
    def name(self) -> str:
        """The stage's id: the recipe's name, with the Python's ABI tag in a --python plan (msgspec-cp314)."""
        return stage_id(self.recipe.name, self.python)

    def to_json(self) -> dict:
        r = self.recipe
        python = {"id": self.name, "python": self.python.to_json()} if self.python else {}
        return {
            **python,
            "recipe": r.name,
            "version": r.version,
            "kind": r.kind.value,
            "file": str(r.file),
            "mode": self.mode.value,
            "mode_reason": self.mode_reason,
            # the -march this stage compiles with and what its artifacts must carry (for_gcc: rvv256-bf16's
            # zfbfmin where the base's GCC accepts it)
            "profile": {
                "name": self.profile.name,
                "march": self.profile.march,
                "requires": sorted(self.profile.requires),
            },
            "platform": self.platform,
            "emulated": self.emulated,
            "jobs": self.jobs,
            "env": dict(sorted(self.env.items())),
            "commands": list(self.commands),
            "depends": list(self.depends),
            "key": self.key,
            "sources": [
                dict(s.to_json(), location=self.source_locations.get(s.name, "unknown")) for s in r.sources
            ],
            "patches": [p.to_json() for p in r.patches],
            "lockfiles": [p.to_json() for p in r.lockfiles],
            "files": [p.file_json() for p in r.files],
            "vendor": r.vendor,
            "lock": r.lock.to_json() if r.lock else None,
            "toolchain": r.toolchain.to_json(),
            "outputs": [o.to_json() for o in r.outputs],
            "smoke": self._smoke_json(),
            "hermetic": r.hermetic,
            "tools": [t.to_json() for t in self.tools],
            "runtime": self.runtime.to_json() if self.runtime else None,
            # wheel kinds only: other plans stay as they were
            **({"wheel_repair": dict(self.wheel_repair)} if self.wheel_repair is not None else {}),
            **({"tests": dict(self.tests)} if self.tests is not None else {}),
        }


@dataclass(frozen=True, kw_only=True)
class StageClosure:
    """A stage's closure lock (docs/closure.md): what its recipe's program needs at run time, for the stage's
    Python."""

    stage: str  # the stage's id
    lock: Lock

    def to_json(self) -> dict:
        return {"stage": self.stage, **self.lock.summary()}


@dataclass(frozen=True, kw_only=True)
class Plan:
    request: Request
    host: HostFacts
    stages: tuple[Stage, ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)
    # the closure locks of the planned stages that have one, loaded and checked (rvport/plan/checked.py)
    closures: tuple[StageClosure, ...] = ()

    def stage(self, name: str) -> Stage:
        """A stage by its id (the recipe's name, or msgspec-cp314 in a --python plan)."""
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def to_json(self) -> dict:
        return {
            "schema": PLAN_SCHEMA,
            "kind": "rvport-plan",
            "tag": self.request.tag,
            "profile": self.request.profile.to_json(),
            "mode": self.request.mode.value,
            "builder": self.request.builder,
            "host": self.host.to_json(),
            "order": [s.name for s in self.stages],
            "stages": [s.to_json() for s in self.stages],
            "warnings": list(self.warnings),
            # only when asked: plans without it stay as they were
            **(
                {"allow_expired_release": list(self.request.allow_expired_release)}
                if self.request.allow_expired_release
                else {}
            ),
            **({"pythons": list(self.request.pythons)} if self.request.pythons else {}),
            **({"closures": [c.to_json() for c in self.closures]} if self.closures else {}),
        }


def stage_id(recipe: str, python: PythonTarget | None) -> str:
    return f"{recipe}-{python.abi}" if python else recipe


_PYTHON = re.compile(r"3\.(0|[1-9][0-9]?)")


def python_matrix(pythons: Sequence[str], bases: Mapping[str, BaseSpec]) -> tuple[PythonTarget, ...]:
    """--python's versions, each with the riscv64 base that gives it (the bases' `python:`): a version that is
    not MAJOR.MINOR, one given twice, or one no base gives is refused, naming the Pythons the bases give."""
    by = python_bases(bases)
    have = ", ".join(f"{v} ({b.name})" for v, b in sorted(by.items())) or "none"
    out: list[PythonTarget] = []
    for v in pythons:
        if not _PYTHON.fullmatch(v):
            raise UsageError(
                f"--python {v!r} is not a CPython version such as 3.13", hint=f"the bases give: {have}"
            )
        if any(t.version == v for t in out):
            raise UsageError(f"--python {v} given twice", hint="name each Python once")
        if v not in by:
            raise UsageError(
                f"no riscv64 base gives Python {v}",
                hint=f"the bases give: {have}; a base says its Python in `python:` (bases/*.yaml)",
            )
        out.append(PythonTarget(version=v, base=by[v].name))
    return tuple(out)


def on_python_base(
    recipe: Recipe, py: PythonTarget, requested: Mode, bases: Mapping[str, BaseSpec]
) -> Recipe:
    """The recipe as its stage for `py` builds it: on the Python's base (with the packages and Rust its
    `toolchain: on_base:` says for that base), with only the modes whose own
    build-platform bases (the mode registry's `bases`: the cross compilers, the accelerated prefix) are of
    that base's Debian suite, since their compilers must be the base's. A mode asked for that is not is
    refused."""
    suite = bases[py.base].suite

    def fits(mode: Mode) -> bool:
        own = [b for b in modes.facts(mode).bases if b in bases]
        return not own or any(bases[b].suite == suite for b in own)  # a mode may have a base per suite

    kept = tuple(m for m in recipe.modes if fits(m))
    if requested != Mode.AUTO and requested in recipe.modes and requested not in kept:
        raise UsageError(
            f"--mode {requested.value} cannot build {recipe.ref} for Python {py.version}: its build-platform "
            f"bases are not of Debian {suite}, the suite of {py.base}",
            hint=f"use one of {', '.join(kept) or 'no mode'} for Python {py.version}, or --mode auto",
        )
    return replace(recipe, toolchain=recipe.toolchain.for_base(py.base), modes=kept)


def stage_profile(profile: Profile, recipe: Recipe, bases: Mapping[str, BaseSpec]) -> Profile:
    """The profile as the stage's compiler serves it: extensions of the profile's `gcc_adds` join its -march
    and requires where the GCC of the recipe's base (`gcc:` of its spec) accepts them; a base that does not
    say its GCC gets none."""
    spec = bases.get(recipe.toolchain.base)
    return profile.for_gcc(spec.gcc if spec else None)


def with_source_trees(recipe: Recipe, trees: Sequence[SourceTree]) -> tuple[Recipe, list[str]]:
    """The recipe with each of its sources that a local tree replaces turned into that tree (kind local:
    the same name, dest and CMake variable; no URL, digest or commit of its own), and the plan's notes that
    say so (never silent: the artifacts are then built from a tree no recipe pins)."""
    mine = {t.source: t.tree for t in trees if t.recipe == recipe.name}
    if not mine:
        return recipe, []
    names = {s.name for s in recipe.sources}
    unknown = sorted(set(mine) - names)
    if unknown:
        raise UsageError(
            f"--source-tree names source {', '.join(map(repr, unknown))}, which {recipe.ref} does not have "
            "for this profile",
            hint=f"its sources: {', '.join(sorted(names)) or 'none'}",
        )
    notes: list[str] = []
    sources = []
    for s in recipe.sources:
        t = mine.get(s.name)
        if t is None:
            sources.append(s)
            continue
        sources.append(
            Source(
                name=s.name,
                kind=SourceKind.LOCAL,
                sha256=None,
                dest=s.dest,
                cmake_var=s.cmake_var,
                profiles=s.profiles,
                line=s.line,
                local=t,
            )
        )
        git = (
            f", git commit {t.git.commit or '(none)'}{' with changes (dirty)' if t.git.dirty else ''}"
            if t.git
            else ""
        )
        notes.append(
            f"{recipe.ref}: source {s.name!r} is the local tree {t.path} ({t.digest}{git}), not its pinned "
            f"{s.origin}: the artifacts are built from a source no recipe pins"
        )
    return replace(recipe, sources=tuple(sources)), notes


def for_profile(recipe: Recipe, profile: str) -> Recipe:
    """The recipe as a build for `profile` needs it: without the sources it names other profiles for
    (`profiles:`), so they are neither fetched nor unpacked, and the stage's key does not depend on them."""
    kept = tuple(s for s in recipe.sources if s.serves(profile))
    return recipe if len(kept) == len(recipe.sources) else replace(recipe, sources=kept)


def recipe_pythons(
    recipe: Recipe, matrix: Sequence[PythonTarget], bases_python: Mapping[str, str] | None = None
) -> tuple[PythonTarget | None, ...]:
    """The Pythons a recipe is planned for: none asked (or a kind without a Python: a static library, a Go
    binary): once, on its own base (None); else each Python asked, on that Python's base. A recipe that pins
    its Python (`toolchain: python:`, or Debian `pins:` of its base, whose Python it then is, and of each
    base its `on_base:` gives pins of their own) is planned for those alone, and refused when none is
    asked."""
    if not matrix or not KINDS[recipe.kind].per_python:
        return (None,)
    bases_python = bases_python or {}
    tc = recipe.toolchain
    pinned: tuple[str, ...] = (tc.python,) if tc.python else ()
    why = "toolchain: python:"
    if not pinned and tc.pins:
        # Debian packages pinned by version and digest are their base's suite's: the recipe is its base's, and
        # so is its Python (vllm: Debian sid's torch), and so are the bases an `on_base:` entry pins for
        pinned_bases = (tc.base, *(o.base for o in tc.on_base if o.pins is not None))
        for base in pinned_bases:
            if bases_python.get(base) is None:
                raise UsageError(
                    f"{recipe.ref} pins Debian packages of base {base}, which says no Python",
                    hint=f"plan {recipe.name} without --python, or give the base a `python:`",
                )
        pinned = tuple(bases_python[b] for b in pinned_bases)
        why = f"toolchain: pins: of {' and on_base: pins: of '.join(pinned_bases)}"
    if not pinned:
        return tuple(matrix)
    own = tuple(t for t in matrix if t.version in pinned)
    if not own:
        asked = ", ".join(t.version for t in matrix)
        alone = pinned[0] if len(pinned) == 1 else " or ".join(pinned)
        raise UsageError(
            f"{recipe.ref} builds for Python {alone} alone ({why} in {recipe.file}), "
            f"not for --python {asked}",
            hint=f"add {alone} to --python, or plan {recipe.name} without it",
        )
    return own


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(value: str, ctx: Mapping[str, str]) -> str:
    """Expand ${NAME} for names the planner knows; leave the rest for the shell."""
    return _VAR.sub(lambda m: ctx.get(m.group(1), m.group(0)), value)


def bound_jobs(kind: Kind, host: HostFacts, requested: int | None) -> int:
    # memory one compile job of this kind may need: a small host is not driven into OOM
    by_mem = max(1, int(host.mem_bytes / (KINDS[kind].job_memory_gib * 2**30)))
    limit = max(1, min(host.cpus, by_mem))
    return limit if requested is None else max(1, min(requested, by_mem))


def decide_mode(recipe: Recipe, requested: Mode, host: HostFacts) -> tuple[Mode, str]:
    """A stage's mode and why, from the mode registry (rvport/catalogue/modes.py) alone: --mode auto takes the
    best mode the recipe and host admit; a requested mode is taken, or becomes its `instead` on a host it does
    not run on, or is refused with its own message."""

    def say(text: str, mode: Mode) -> str:
        kinds = " and ".join(k.value for k in modes.kinds_of(mode))
        return text.format(
            ref=recipe.ref, kind=recipe.kind.value, arch=host.arch, platform=host.platform, kinds=kinds
        )

    if requested == Mode.AUTO:
        for f in modes.auto_order():
            if f.admits(recipe.kind, recipe.modes, host.arch):
                return f.mode, say(f.chosen, f.mode)
        raise UsageError(
            f"no mode builds {recipe.ref} on {host.arch}", hint="name a --mode, or use another host"
        )
    f = modes.facts(requested)
    if f.instead is not None and not f.hosts.admit(host.arch):
        mode, reason = f.instead
        return mode, say(reason, f.mode)
    if not f.admits(recipe.kind, recipe.modes, host.arch):
        raise UsageError(say(f.refused, f.mode), hint=say(f.refused_hint, f.mode))
    return f.mode, say(f.requested, f.mode)


def refusal_cause(recipe: Recipe, mode: Mode, host: HostFacts) -> str:
    """Why a requested mode cannot build the recipe here, in the registry's terms: its kind, the recipe's own
    `modes:` list, or the host."""
    f = modes.facts(mode)
    if not f.serves(recipe.kind):
        kinds = " and ".join(k.value for k in modes.kinds_of(mode))
        return f"{mode.value} builds {kinds} recipes, and this is a {recipe.kind.value}"
    if f.listed and mode not in recipe.modes:
        listed = ", ".join(m.value for m in recipe.modes)
        return f"its recipe lists modes {listed}, not {mode.value} ({recipe.file.name})"
    return f"{mode.value} does not run on a {host.arch} host"


def _refused_by_all(order: Sequence[Recipe], requested: Mode, host: HostFacts) -> None:
    """--all with a --mode that some recipes cannot have: one error naming every one of them and why."""
    if requested == Mode.AUTO:
        return
    f = modes.facts(requested)
    if f.instead is not None and not f.hosts.admit(host.arch):
        return
    refused = [r for r in order if not f.admits(r.kind, r.modes, host.arch)]
    if refused:
        raise UsageError(
            f"--mode {requested.value} cannot build {len(refused)} of the {len(order)} recipes --all names: "
            + "; ".join(f"{r.ref} ({refusal_cause(r, requested, host)})" for r in refused),
            hint="use --mode auto (it picks each recipe's best mode), or name the recipes to build",
        )


def _buildable_by_all(cat: Catalogue) -> tuple[list[Recipe], list[str]]:
    """What --all builds: each recipe's default version whose every source is pinned. A recipe with a source
    not yet pinned (torch: never built here) is left out, named in one note."""
    roots, left = [], []
    for name in cat.selected_by_all:
        r = cat.default(name)
        (left if any(not s.pinned for s in r.sources) else roots).append(r)
    notes = (
        [
            "--all leaves out "
            + ", ".join(r.ref for r in left)
            + ": a source not pinned yet (to plan it anyway, run "
            + ", ".join(f"`rvport pin {r.ref}`" for r in left)
            + " first, then name it with --recipes recipes)"
        ]
        if left
        else []
    )
    return roots, notes


def stage_env(recipe: Recipe, profile: Profile, mode: Mode, jobs: int) -> dict[str, str]:
    ctx = {
        "RVPORT_PROFILE": profile.name,
        "RVPORT_MARCH": profile.march,
        "RVPORT_MABI": profile.mabi,
        "RVPORT_CFLAGS": " ".join(profile.cflags + PREFIX_MAP_CFLAGS),
        "RVPORT_VLEN": str(profile.vlen),
        "RVPORT_JOBS": str(jobs),
        "RVPORT_VERSION": recipe.version,
        "RVPORT_OUT": "/out",
        "RVPORT_TRIPLE": TRIPLE,
        "RVPORT_RUST_TARGET": RUST_TARGET,
        "RVPORT_MODE": mode.value,
        **profile.knobs,
    }
    env = dict(ctx)
    if not modes.facts(mode).build_platform:
        # every emulated process sees exactly the profile's ISA in /proc/cpuinfo (ignored natively)
        env["QEMU_CPU"] = profile.qemu_cpu
    env["RUSTFLAGS"] = PREFIX_MAP_RUSTFLAGS
    if recipe.vendor == "cargo":
        # the cargo home rvport wrote into the prepared tree (rvport.sources.tree.vendor_crates): its
        # config.toml replaces crates-io with the vendored crates; cargo merges it after the source's own
        # .cargo/config.toml
        env["CARGO_HOME"] = f"{BUILD_DIR}/{CARGO_HOME}"
    for k, v in recipe.env.items():
        env[k] = expand(v, ctx)
    return env


def _resolve_order(cat: Catalogue, roots: Sequence[Recipe]) -> list[Recipe]:
    """Dependencies first; a dependency named without a version uses its default."""
    chosen: dict[str, Recipe] = {}
    for r in roots:
        if r.name in chosen and chosen[r.name].version != r.version:
            raise UsageError(f"two versions of {r.name} requested: {chosen[r.name].version} and {r.version}")
        chosen[r.name] = r
    order: list[Recipe] = []
    done: set[str] = set()

    def visit(r: Recipe) -> None:
        if r.name in done:
            return
        for dep in r.depends:
            d = chosen.get(dep.partition("==")[0]) or cat.resolve(dep)
            chosen.setdefault(d.name, d)
            visit(d)
        done.add(r.name)
        order.append(r)

    for r in roots:
        visit(r)
    return order


def stage_key(
    recipe: Recipe,
    profile: Profile,
    mode: Mode,
    env: Mapping[str, str],
    commands: Sequence[str],
    dep_keys: Sequence[str],
    tools: Sequence[Tool] = (),
    python: PythonTarget | None = None,
    tests: Mapping[str, object] | None = None,
) -> str:
    doc = {
        "recipe": recipe.ref,
        "kind": recipe.kind.value,
        "mode": mode.value,
        "profile": profile.to_json(),
        "sources": [_key_source(s) for s in recipe.sources],
        "patches": [p.sha256 for p in recipe.patches],
        "lockfiles": [p.sha256 for p in recipe.lockfiles],
        "vendor": recipe.vendor,
        "toolchain": recipe.toolchain.to_json(),
        "env": dict(sorted(env.items())),
        "commands": list(commands),
        "outputs": [
            (o.glob, o.type, o.isa) + (("vlen=exact",) if o.vlen_exact else ()) for o in recipe.outputs
        ],
        "smoke": recipe.smoke,
        "smoke_debian": list(recipe.smoke_debian),
        "deps": list(dep_keys),
    }
    if recipe.smoke and recipe.smoke_without_vector:
        doc["smoke_without_vector"] = recipe.smoke_without_vector
    if recipe.files:
        doc["files"] = [[p.sha256, p.dest] for p in recipe.files]
    if recipe.lock:
        doc["lock"] = recipe.lock.to_json()
    if tools:
        doc["tools"] = [[t.name, t.source.sha256, t.script_sha256] for t in tools]
    if python:
        doc["python"] = python.to_json()
    if tests:  # only when there are any: every other stage's key stays what it was
        doc["tests"] = dict(tests)
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _key_source(s: Source) -> dict:
    """A source as the stage's key holds it; a local tree by its digest and epoch, not where it lies (the
    same tree in another directory builds the same artifacts)."""
    if s.local is None:
        return s.to_json()
    return {
        "name": s.name,
        "kind": s.kind.value,
        "tree": s.local.digest,
        "epoch": s.local.epoch,
        "dest": s.dest,
    }


def make_plan(
    cat: Catalogue,
    req: Request,
    host: HostFacts,
    locate: Callable[[Source], str] = lambda s: "unknown",
    bases: Mapping[str, BaseSpec] | None = None,
) -> Plan:
    """The plan of a request. With --python (req.pythons), every recipe of a kind with a Python is a stage per
    Python, on that Python's base (`bases`: the base specs, by default the catalogue's bases/)."""
    all_notes: list[str] = []
    if req.all:
        roots, all_notes = _buildable_by_all(cat)
    else:
        if not req.refs:
            raise UsageError("no recipe named", hint="name one or more recipes, or use --all")
        roots = [cat.resolve(ref) for ref in req.refs]
    stages: list[Stage] = []
    keys: dict[str, str] = {}
    warnings: list[str] = []
    repair = manylinux_platform(req.manylinux)
    specs = (load_bases() if bases is None else bases) if req.pythons or req.profile.gcc_adds else {}
    matrix = python_matrix(req.pythons, specs) if req.pythons else ()
    order = _resolve_order(cat, roots)
    bases_python = {name: b.python for name, b in specs.items() if b.python}
    if req.all:
        _refused_by_all(order, req.mode, host)
    planned: list[tuple[Recipe, PythonTarget | None]] = []
    not_asked: list[str] = []  # --all: recipes whose one Python --python does not name
    fewer: list[str] = []  # --all: recipes planned for their one Python of several asked
    for r in order:
        try:
            pys = recipe_pythons(r, matrix, bases_python)
        except UsageError:
            if not req.all:
                raise
            not_asked.append(r.ref)
            continue
        if req.all and matrix and pys != (None,) and len(pys) < len(matrix):
            fewer.append(f"{r.name} ({', '.join(t.version for t in pys)})")
        planned += [(r, py) for py in pys]
    asked = ", ".join(t.version for t in matrix)
    if not_asked:
        all_notes.append(
            f"--all leaves out {', '.join(not_asked)}: each builds for one Python only, not --python {asked}"
        )
    if fewer:
        all_notes.append(f"--python {asked}: planned for the one Python each pins: {', '.join(fewer)}")
    warnings += all_notes
    for r, py in planned:
        if py is not None:
            r = on_python_base(r, py, req.mode, specs)
        r = for_profile(r, req.profile.name)
        r, local_notes = with_source_trees(r, req.source_trees)
        warnings += local_notes
        mode, reason = decide_mode(r, req.mode, host)
        jobs = bound_jobs(r.kind, host, req.jobs)
        profile = stage_profile(req.profile, r, specs)
        env = stage_env(r, profile, mode, jobs)
        build = r.build + ((RUST_RECORD,) if compiles_rust(r) else ())
        r, commands, tools = with_repair(r, env, build, repair)
        note = repair_note(r, req.manylinux)
        if note:
            warnings.append(note)
        # a dependency built per Python is this stage's Python's; one built once is that one
        deps = tuple(
            stage_id(n, py) if stage_id(n, py) in keys else n
            for n in (d.partition("==")[0] for d in r.depends)
        )
        tests = upstream_tests(r, req.profile) if r.smoke else None
        key = stage_key(r, profile, mode, env, commands, [keys[d] for d in deps], tools, py, tests)
        keys[stage_id(r.name, py)] = key
        locations = {s.name: locate(s) for s in r.sources}
        unpinned = [s.name for s in r.sources if not s.pinned]
        if unpinned:
            warnings.append(
                f"{r.ref}: {', '.join(unpinned)} to be recorded on first verified fetch "
                f"(`rvport pin {r.ref}`)"
            )
        remote = [s for s in r.sources if locations[s.name] == "network" and s.kind is not SourceKind.PYPI]
        if remote:
            hosts = sorted(
                {(s.fetch_url or s.origin).split("/")[2] for s in remote if "://" in (s.fetch_url or "")}
            )
            warnings.append(
                f"{r.ref}: {', '.join(s.name for s in remote)} will be downloaded at build time"
                + (f" from {', '.join(hosts)}" if hosts else "")
                + "; where that cannot be reached, "
                "fill a mirror on a connected host (`rvport fetch --all --to DIR`) and use --mirror DIR"
            )
        missing = [n for n, loc in locations.items() if loc == "missing"]
        if missing:
            warnings.append(
                f"{r.ref}: {', '.join(missing)} not in the cache or mirror and the network is off; "
                "use --mirror DIR with a filled mirror"
            )
        facts = modes.facts(mode)
        if facts.emulated and compiles_go(r):
            warnings.append(
                f"{r.ref}: Go compiles under QEMU in {mode.value} mode, where Go >= 1.23 can hang at "
                "random (golang/go#70329); "
                + ("--mode cross avoids it" if Mode.CROSS in r.modes else "a riscv64 build host avoids it")
            )
        stages.append(
            Stage(
                recipe=r,
                mode=mode,
                mode_reason=reason,
                platform=host.platform if facts.build_platform else RISCV64,
                emulated=facts.emulated,
                jobs=jobs,
                env=env,
                commands=commands,
                depends=deps,
                source_locations=locations,
                profile=profile,
                key=key,
                tools=tools,
                runtime=runtime_image(r, req.tag, key, py),
                python=py,
                wheel_repair=wheel_repair(r, req.manylinux, repair),
                smoke_without_vector=smoke_without_vector(r, req.profile),
                tests=tests,
            )
        )
    planned_names = {s.recipe.name for s in stages}
    stray = sorted({t.recipe for t in req.source_trees} - planned_names)
    if stray:
        raise UsageError(
            f"--source-tree is for {', '.join(stray)}, which this plan does not build",
            hint="name the recipe whose tree it is",
        )
    warnings += expired_release_notes(req.allow_expired_release, stages)
    # a recipe planned per Python warns once
    return Plan(request=req, host=host, stages=tuple(stages), warnings=tuple(dict.fromkeys(warnings)))


def expired_release_notes(accepted: tuple[str, ...], stages: list[Stage]) -> list[str]:
    """The notes that say an expired Release is accepted (never silent): one per riscv64 base of the plan
    whose suite is accepted, and one per accepted suite that no base of the plan uses."""
    if not accepted:
        return []
    from rvport.catalogue.bases import load_base

    notes, used = [], set()
    for name in sorted({s.recipe.toolchain.base for s in stages}):
        suite = load_base(name).suite
        if suite in accepted:
            used.add(suite)
            notes.append(
                f"base {name}: an expired Release of Debian {suite} is accepted (--allow-expired-release "
                f"{suite}); apt in this base ignores Valid-Until"
            )
    notes += [
        f"--allow-expired-release {s}: no riscv64 base of this plan is of that suite (a build-platform base "
        "of it still accepts it)"
        for s in accepted
        if s not in used
    ]
    return notes


def upstream_tests(recipe: Recipe, profile: Profile) -> dict | None:
    """The recipe's `tests:` as a build for `profile` runs them (planned_tests)."""
    return planned_tests(recipe.tests, profile)


def serve_tests(recipe: Recipe, profile: Profile) -> dict | None:
    """The recipe's `serve_tests:` as `rvport serve-check` runs them for `profile` (planned_tests)."""
    return planned_tests(recipe.serve_tests, profile)


def planned_tests(t: UpstreamTests | None, profile: Profile) -> dict | None:
    """A recipe's `tests:` or `serve_tests:` for `profile`: the files that serve the profile, each with its
    -k selection and its timeout (its own, else the step's), the tree's paths copied into the container and
    the test wheels. None when there are none, or none of the files is for this profile."""
    if t is None:
        return None
    files = [
        {"path": f.path, "select": f.select, "timeout": f.timeout or t.timeout}
        for f in t.files
        if f.serves(profile.name)
    ]
    if not files:
        return None
    return {"files": files, "copy": list(t.copy), "wheels": [w.to_json() for w in t.wheels]}


def smoke_without_vector(recipe: Recipe, profile: Profile) -> dict[str, str] | None:
    """The smoke test's second run (`smoke: without_vector:`), as data: the QEMU CPU without V it runs on (the
    scalar profile's: profiles.yaml `scalar`) and the outcome expected. `sigill`: under a profile with V the
    test must die with SIGILL (its vector code runs, no silent scalar fallback), under one without it must
    pass; `pass`: it must pass under every profile."""
    if not recipe.smoke or recipe.smoke_without_vector is None:
        return None
    vector = profile.vlen > 0
    expected = "sigill" if recipe.smoke_without_vector == "sigill" and vector else "pass"
    return {"cpu": scalar_profile().qemu_cpu, "expected": expected}


def manylinux_platform(choice: str) -> str | None:
    """--manylinux: auto, off, 2_X or manylinux_2_X_riscv64 -> auditwheel's platform (None: no repair)."""
    c = choice.strip()
    if c == "off":
        return None
    if c == "auto":
        return "auto"
    m = re.fullmatch(r"(?:manylinux_)?(2_\d+)(?:_riscv64)?", c)
    if not m:
        raise UsageError(
            f"--manylinux {choice!r} is not auto, off or a policy such as 2_31",
            hint="riscv64 policies: 2_31, 2_34 ... 2_41 (manylinux_2_X_riscv64)",
        )
    return f"manylinux_{m.group(1)}_riscv64"


def with_repair(
    recipe: Recipe, env: dict[str, str], commands: tuple[str, ...], platform: str | None
) -> tuple[Recipe, tuple[str, ...], tuple[Tool, ...]]:
    """A wheel stage that repairs its wheels: its script runs after the build commands, and the pinned tool is
    handed to the stage (what auditwheel needs from Debian is in the riscv64 base, debian-trixie.yaml). A
    recipe that says its wheels are not repaired (`manylinux: repair: false`) is never repaired."""
    if recipe.kind not in WHEEL_KINDS or platform is None or recipe.no_repair is not None:
        return recipe, commands, ()
    t = tool("auditwheel")
    env["RVPORT_MANYLINUX"] = platform
    # the recipe's exclusions: names of the schema's pattern (lib*.so[.N]), safe as words of the command
    exclude = "".join(f" --exclude {lib}" for lib in recipe.repair_exclude)
    return recipe, commands + (f"sh /rvport/tools/{t.script} {platform}{exclude}",), (t,)


def wheel_repair(recipe: Recipe, asked: str, platform: str | None) -> dict | None:
    """A wheel stage's repair as plan.json and result.json show it (stages[].wheel_repair): whether its wheels
    are repaired, to which platform, and who decided (the recipe's `manylinux:` or --manylinux) and why. None
    for the kinds that make no wheels."""
    if recipe.kind not in WHEEL_KINDS:
        return None
    if recipe.no_repair is not None:
        return {"repair": False, "platform": None, "by": "recipe", "reason": recipe.no_repair}
    if platform is not None and recipe.repair_exclude:
        return {
            "repair": True,
            "platform": platform,
            "by": "recipe",
            "reason": f"--manylinux {asked.strip()}, leaving out what the recipe excludes: "
            f"{recipe.repair_exclude_reason}",
            "exclude": list(recipe.repair_exclude),
        }
    return {
        "repair": platform is not None,
        "platform": platform,
        "by": "--manylinux",
        "reason": f"--manylinux {asked.strip()}",
    }


REPAIR_NOTE = "has no effect: the recipe does not repair its wheels"  # build says these notes too


def repair_note(recipe: Recipe, asked: str) -> str | None:
    """The plan's note when --manylinux asks for a repair the recipe does not do (never silent)."""
    if recipe.kind not in WHEEL_KINDS or recipe.no_repair is None or asked.strip() == "off":
        return None
    return (
        f"{recipe.ref}: --manylinux {asked.strip()} {REPAIR_NOTE} "
        f"(manylinux: repair: false in {recipe.file.name}): {recipe.no_repair}"
    )
